//! Charts drawn on the server as inline SVG: pure functions from typed series to an SVG
//! string, for the costs page.
//!
//! The SVG is text the board writes into its pages unescaped (as [`Svg`], which askama
//! knows is markup), so everything in it that came from elsewhere — an item's handle as a
//! bar's label, a role's word from a receipt — goes through [`text`]: the five XML
//! specials escaped (so `<script>` and `]]>` stay text), control characters and bidi
//! overrides replaced by a visible stand-in (so a label cannot reorder what follows it).
//! There is no script, no `style` attribute (the CSP refuses them; colours come from
//! classes the style sheet gives), no link and no reference to another document.
//!
//! Every mark carries its numbers in a `<title>` (what a screen reader and a hover say),
//! and the page puts each chart's numbers in a table beside it too.
//!
//! Why not a library: the charts wanted here are three simple shapes, and each library
//! looked at (charts-rs, plotters' SVG backend, poloto) either writes an inline `<style>`
//! element or `style` attributes the board's CSP refuses, measures text with bundled fonts,
//! or leaves per-mark `<title>`s to the caller; this module is smaller than adapting one.

use std::fmt::Write;

/// An SVG document, as markup: askama writes it as it is (its text was escaped when it
/// was drawn).
#[derive(Debug, Clone, PartialEq)]
pub struct Svg(pub String);

impl std::fmt::Display for Svg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl askama::filters::HtmlSafe for Svg {}

/// One series: a name and a value per category (missing values are 0).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub values: Vec<f64>,
}

/// A chart's data: categories along the horizontal axis, one or more series.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// What the chart shows, its accessible name.
    pub title: String,
    /// The values' unit, as a label says it (`USD`, `tokens`, `s`).
    pub unit: String,
    /// The categories' labels, in order.
    pub categories: Vec<String>,
    pub series: Vec<Series>,
}

/// The drawing's size, in SVG user units (the style sheet scales it to the page).
const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 260.0;
/// Room for the value axis on the left, the category labels below, the legend above.
const LEFT: f64 = 64.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 56.0;
/// Labels longer than this are cut (the full label is in the mark's title and the table).
const LABEL_CHARS: usize = 22;
/// Colours cycle through this many classes (`s0`…), given by the style sheet.
const COLOURS: usize = 6;

/// Escapes `s` as SVG (XML) text or an attribute value, and replaces what could change how
/// the text around it reads: control characters and the bidi embeddings, overrides and
/// isolates (each becomes `[U+XXXX]`, visible).
pub fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\u{200E}'
            | '\u{200F}'
            | '\u{061C}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2066}'..='\u{2069}' => {
                let _ = write!(out, "[U+{:04X}]", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "[U+{:04X}]", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// A number as a label says it: whole numbers without decimals, others with at most four
/// significant decimals (costs are small).
pub fn number(v: f64) -> String {
    if !v.is_finite() {
        return "0".to_string();
    }
    if v.fract() == 0.0 && v.abs() < 1e15 {
        return format!("{}", v as i64);
    }
    let s = if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    };
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn value(series: &Series, i: usize) -> f64 {
    series
        .values
        .get(i)
        .copied()
        .filter(|v| v.is_finite() && *v > 0.0)
        .unwrap_or(0.0)
}

/// A label cut to [`LABEL_CHARS`] characters.
fn short(label: &str) -> String {
    if label.chars().count() <= LABEL_CHARS {
        label.to_string()
    } else {
        let mut cut: String = label.chars().take(LABEL_CHARS - 1).collect();
        cut.push('…');
        cut
    }
}

/// A round top for the value axis at or above `max`.
fn nice_top(max: f64) -> f64 {
    if max <= 0.0 {
        return 1.0;
    }
    let magnitude = 10f64.powf(max.log10().floor());
    for step in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if step * magnitude >= max {
            return step * magnitude;
        }
    }
    10.0 * magnitude
}

/// The frame common to every chart: the root, its title, the legend and the value axis.
fn open(chart: &Chart, kind: &str, top: f64, out: &mut String) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart chart-{kind}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img"><title>{}</title>"#,
        text(&format!("{} ({})", chart.title, chart.unit))
    );
    // The legend, when there is more than one series.
    if chart.series.len() > 1 {
        let mut x = LEFT;
        for (k, s) in chart.series.iter().enumerate() {
            let _ = write!(
                out,
                r#"<g class="legend"><rect class="s{}" x="{x}" y="8" width="10" height="10"/><text x="{}" y="17">{}</text></g>"#,
                k % COLOURS,
                x + 14.0,
                text(&short(&s.name))
            );
            x += 24.0 + 7.0 * short(&s.name).chars().count() as f64;
        }
    }
    // The value axis: four lines with their values.
    let plot = HEIGHT - TOP - BOTTOM;
    for step in 0..=4 {
        let v = top * f64::from(step) / 4.0;
        let y = TOP + plot - plot * f64::from(step) / 4.0;
        let _ = write!(
            out,
            r#"<line class="grid" x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}"/><text class="axis" x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            WIDTH - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            text(&number(v))
        );
    }
}

/// The category labels below the plot, every `every`th.
fn category_labels(chart: &Chart, slot: f64, out: &mut String) {
    let n = chart.categories.len();
    let every = (n / 12).max(1);
    for (i, label) in chart.categories.iter().enumerate() {
        if i % every != 0 {
            continue;
        }
        let x = LEFT + slot * (i as f64 + 0.5);
        let y = HEIGHT - BOTTOM + 14.0;
        // Few categories have room for their labels level; many are slanted.
        if n <= 6 {
            let _ = write!(
                out,
                r#"<text class="axis" x="{x:.1}" y="{y}" text-anchor="middle">{}</text>"#,
                text(&short(label))
            );
        } else {
            let _ = write!(
                out,
                r#"<text class="axis" x="{x:.1}" y="{y}" text-anchor="end" transform="rotate(-30 {x:.1} {y})">{}</text>"#,
                text(&short(label))
            );
        }
    }
}

/// A bar per category; with more than one series, the bars are stacked (series in order,
/// the first at the bottom). Each segment's title says its category, series and value.
pub fn bars(chart: &Chart) -> Svg {
    let n = chart.categories.len();
    let totals: Vec<f64> = (0..n)
        .map(|i| chart.series.iter().map(|s| value(s, i)).sum())
        .collect();
    let top = nice_top(totals.iter().copied().fold(0.0, f64::max));
    let mut out = String::new();
    open(chart, "bars", top, &mut out);
    let plot = HEIGHT - TOP - BOTTOM;
    let slot = (WIDTH - LEFT - RIGHT) / n.max(1) as f64;
    let width = (slot * 0.7).max(1.0);
    for (i, category) in chart.categories.iter().enumerate() {
        let x = LEFT + slot * i as f64 + (slot - width) / 2.0;
        let mut base = 0.0;
        for (k, s) in chart.series.iter().enumerate() {
            let v = value(s, i);
            if v <= 0.0 {
                continue;
            }
            let y = TOP + plot - plot * (base + v) / top;
            let h = plot * v / top;
            let name = if chart.series.len() > 1 {
                format!("{category} · {}: ", s.name)
            } else {
                format!("{category}: ")
            };
            let _ = write!(
                out,
                r#"<rect class="s{}" x="{x:.1}" y="{y:.1}" width="{width:.1}" height="{h:.1}"><title>{}</title></rect>"#,
                k % COLOURS,
                text(&format!("{name}{} {}", number(v), chart.unit))
            );
            base += v;
        }
    }
    category_labels(chart, slot, &mut out);
    out.push_str("</svg>");
    Svg(out)
}

/// A step line per series over the categories (a count that holds until the next
/// category: landings so far, say). Each point's title says its category, series and value.
pub fn steps(chart: &Chart) -> Svg {
    let n = chart.categories.len();
    let max = chart
        .series
        .iter()
        .flat_map(|s| (0..n).map(move |i| value(s, i)))
        .fold(0.0, f64::max);
    let top = nice_top(max);
    let mut out = String::new();
    open(chart, "steps", top, &mut out);
    let plot = HEIGHT - TOP - BOTTOM;
    let slot = (WIDTH - LEFT - RIGHT) / n.max(1) as f64;
    let y_of = |v: f64| TOP + plot - plot * v / top;
    for (k, s) in chart.series.iter().enumerate() {
        let mut path = String::new();
        for i in 0..n {
            let (x0, x1) = (LEFT + slot * i as f64, LEFT + slot * (i as f64 + 1.0));
            let y = y_of(value(s, i));
            let _ = write!(
                path,
                "{}{x0:.1} {y:.1} L{x1:.1} {y:.1} ",
                if i == 0 { "M" } else { "L" }
            );
        }
        let _ = write!(
            out,
            r#"<path class="line s{}" d="{}" fill="none"/>"#,
            k % COLOURS,
            path.trim_end()
        );
        for (i, category) in chart.categories.iter().enumerate() {
            let x = LEFT + slot * (i as f64 + 0.5);
            let v = value(s, i);
            let _ = write!(
                out,
                r#"<circle class="s{}" cx="{x:.1}" cy="{:.1}" r="3"><title>{}</title></circle>"#,
                k % COLOURS,
                y_of(v),
                text(&format!(
                    "{category} · {}: {} {}",
                    s.name,
                    number(v),
                    chart.unit
                ))
            );
        }
    }
    category_labels(chart, slot, &mut out);
    out.push_str("</svg>");
    Svg(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(categories: &[&str], series: &[(&str, &[f64])]) -> Chart {
        Chart {
            title: "Cost per day".into(),
            unit: "USD".into(),
            categories: categories.iter().map(|c| c.to_string()).collect(),
            series: series
                .iter()
                .map(|(name, values)| Series {
                    name: name.to_string(),
                    values: values.to_vec(),
                })
                .collect(),
        }
    }

    /// The text nodes and attribute values of `svg` hold no markup of their own: every `<`
    /// opens one of the elements the module writes.
    fn only_own_elements(svg: &str) {
        for tag in svg.split('<').skip(1) {
            let name: String = tag
                .trim_start_matches('/')
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            assert!(
                ["svg", "title", "g", "rect", "text", "line", "path", "circle"]
                    .contains(&name.as_str()),
                "an element the module does not write: <{tag} in {svg}"
            );
        }
        assert!(!svg.contains("]]>"), "{svg}");
        assert!(!svg.contains("style"), "{svg}");
        assert!(!svg.contains("href"), "{svg}");
        assert!(!svg.to_lowercase().contains("script>"), "{svg}");
    }

    #[test]
    fn a_hostile_label_stays_text_in_every_chart() {
        let hostile = "<script>alert(1)</script>]]><img src=x onerror=alert(2)>\"' &amp; \u{202E}evil\u{2066}\u{0007}";
        let c = chart(
            &[hostile, "plain"],
            &[(hostile, &[1.0, 2.0]), ("second", &[0.5, 0.0])],
        );
        for svg in [bars(&c), steps(&c)] {
            only_own_elements(&svg.0);
            assert!(
                svg.0
                    .contains("&lt;script&gt;alert(1)&lt;/script&gt;]]&gt;"),
                "{}",
                svg.0
            );
            assert!(svg.0.contains("&amp;amp;"), "{}", svg.0);
            assert!(svg.0.contains("&quot;&#39;"), "{}", svg.0);
            assert!(
                !svg.0.contains('\u{202E}') && !svg.0.contains('\u{2066}'),
                "no bidi override survives: {}",
                svg.0
            );
            assert!(svg.0.contains("[U+202E]evil[U+2066][U+0007]"), "{}", svg.0);
        }
    }

    #[test]
    fn text_escapes_the_specials_and_replaces_bidi_controls() {
        assert_eq!(text("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&#39;");
        assert_eq!(text("x]]>y"), "x]]&gt;y");
        assert_eq!(text("\u{202D}r\u{200F}"), "[U+202D]r[U+200F]");
        assert_eq!(text("héllo · 1"), "héllo · 1");
    }

    #[test]
    fn each_bar_segment_says_its_numbers_in_its_title() {
        let c = chart(
            &["2026-12-01", "2026-12-02"],
            &[("implement", &[0.25, 1.5]), ("review", &[0.125, 0.0])],
        );
        let svg = bars(&c).0;
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>"), "{svg}");
        assert!(svg.contains("<title>Cost per day (USD)</title>"), "{svg}");
        assert!(
            svg.contains("<title>2026-12-01 · implement: 0.25 USD</title>"),
            "{svg}"
        );
        assert!(
            svg.contains("<title>2026-12-01 · review: 0.125 USD</title>"),
            "{svg}"
        );
        assert!(
            svg.contains("<title>2026-12-02 · implement: 1.5 USD</title>"),
            "{svg}"
        );
        // A zero is no segment.
        assert!(!svg.contains("2026-12-02 · review"), "{svg}");
        assert_eq!(
            svg.matches("<rect class=\"s").count(),
            3 + 2,
            "3 bars, 2 legend keys"
        );
    }

    #[test]
    fn stacked_segments_sit_on_one_another_and_the_tallest_fits() {
        let c = chart(&["a"], &[("x", &[3.0]), ("y", &[1.0])]);
        let svg = bars(&c).0;
        // Top 5 (the round value at or above 4): the plot is 176 high from y=28.
        let heights: Vec<f64> = svg
            .split("height=\"")
            .skip(1)
            .filter_map(|s| s.split('"').next()?.parse().ok())
            .filter(|h| *h != 10.0)
            .collect();
        assert_eq!(heights, vec![105.6, 35.2], "{svg}");
        assert!(
            svg.contains(r#"y="98.4""#) && svg.contains(r#"y="63.2""#),
            "{svg}"
        );
    }

    #[test]
    fn a_step_line_has_a_point_per_category_with_its_value() {
        let c = chart(
            &["12-01", "12-02", "12-03"],
            &[("landed", &[1.0, 1.0, 3.0]), ("failed", &[0.0, 2.0, 2.0])],
        );
        let svg = steps(&c).0;
        assert_eq!(svg.matches("<circle").count(), 6, "{svg}");
        assert!(
            svg.contains("<title>12-03 · landed: 3 USD</title>"),
            "{svg}"
        );
        assert_eq!(svg.matches("<path").count(), 2, "{svg}");
        only_own_elements(&svg);
    }

    #[test]
    fn an_empty_chart_is_still_a_drawing() {
        let c = chart(&[], &[]);
        for svg in [bars(&c), steps(&c)] {
            assert!(svg.0.starts_with("<svg ") && svg.0.ends_with("</svg>"));
            only_own_elements(&svg.0);
        }
        // Values that are not numbers draw nothing rather than NaN coordinates.
        let c = chart(&["a"], &[("x", &[f64::NAN]), ("y", &[f64::INFINITY])]);
        assert!(!bars(&c).0.contains("NaN") && !steps(&c).0.contains("inf"));
    }

    #[test]
    fn numbers_read_as_a_person_writes_them() {
        assert_eq!(number(3.0), "3");
        assert_eq!(number(0.0125), "0.0125");
        assert_eq!(number(1.5), "1.5");
        assert_eq!(number(12.345), "12.35");
        assert_eq!(number(f64::NAN), "0");
    }
}
