//! All of a command's output goes through here.
//!
//! Standard output carries the command's result (a table, or JSON with `--json`);
//! standard error carries errors, warnings and notes (`-q` keeps only errors and
//! warnings). States are coloured on a terminal only, through anstream (as clap's own
//! help is): a pipe, a log, `NO_COLOR` or `TERM=dumb` get plain text. A closed pipe (`stet
//! plugins list | head`) ends output quietly instead of panicking.
//!
//! Every line is made inert first ([`crate::text::inert`]): text from items, agents,
//! checks and plugins reaches the terminal with its control characters escaped. JSON is
//! written as it is (JSON escapes them itself).

use std::io::Write;

pub mod diff;

use crate::text::inert;

/// Where a command writes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Printer {
    /// Whether `-v` was given (once or more).
    pub verbose: bool,
    /// Whether `-q` was given: no notes, no details.
    pub quiet: bool,
    /// Whether the command's lines go to standard error, as notes: with `--json`, where
    /// standard output carries the JSON alone.
    pub lines_to_stderr: bool,
}

impl Printer {
    /// Writes `text` (and a newline) to standard output.
    pub fn out(&self, text: &str) {
        if self.lines_to_stderr {
            return self.note(text);
        }
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{}", inert(text));
    }

    /// This printer, its lines (`out`) sent to standard error: for a command whose
    /// standard output is JSON made elsewhere.
    pub fn lines_as_notes(self) -> Printer {
        Printer {
            lines_to_stderr: true,
            ..self
        }
    }

    /// Writes `value` (an object) as pretty JSON to standard output, with `"schema"`
    /// ([`SCHEMA`]) first.
    pub fn json<T: serde::Serialize>(&self, value: &T) {
        #[derive(serde::Serialize)]
        struct Versioned<'a, T> {
            schema: u32,
            #[serde(flatten)]
            body: &'a T,
        }
        self.raw_json(&Versioned {
            schema: SCHEMA,
            body: value,
        });
    }

    /// Writes `value` as pretty JSON exactly as it serialises (for a shape that carries
    /// its own `schema`).
    pub fn raw_json<T: serde::Serialize>(&self, value: &T) {
        let text = serde_json::to_string_pretty(value).expect("output types serialise");
        let _ = writeln!(std::io::stdout().lock(), "{text}");
    }

    /// Writes `state` coloured by what it means (on a terminal), then `rest`, as one line
    /// of standard output. Both are made inert first; the colour is stet's own.
    pub fn out_state(&self, state: &str, width: usize, rest: &str) {
        if self.lines_to_stderr {
            return self.note(&format!("{state:<width$}{rest}"));
        }
        let style = style_of(state);
        let mut stdout = anstream::stdout().lock();
        let _ = writeln!(
            stdout,
            "{style}{:<width$}{style:#}{}",
            inert(state),
            inert(rest)
        );
    }

    /// Writes a progress line to standard error (what a long command is doing now).
    pub fn note(&self, text: &str) {
        if !self.quiet {
            let _ = writeln!(std::io::stderr().lock(), "{}", inert(text));
        }
    }

    /// Writes a warning to standard error.
    pub fn warn(&self, text: &str) {
        let _ = writeln!(std::io::stderr().lock(), "warning: {}", inert(text));
    }

    /// Writes a line to standard error only with `-v`.
    pub fn detail(&self, text: &str) {
        if self.verbose && !self.quiet {
            let _ = writeln!(std::io::stderr().lock(), "{}", inert(text));
        }
    }
}

/// A table for standard output: a header and rows of cells, each column as wide as its
/// widest cell (counted in characters, after the cell is made inert), two spaces between
/// columns, the last column unpadded. The one way a command prints a table, so every table
/// aligns alike; a column of states is coloured after it is padded, so colour never moves a
/// column.
pub struct Table {
    header: Vec<String>,
    right: Vec<bool>,
    coloured: Option<usize>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            right: vec![false; header.len()],
            coloured: None,
            rows: Vec::new(),
        }
    }

    /// Aligns `column` to the right (numbers, durations, costs).
    pub fn right(mut self, column: usize) -> Table {
        if let Some(r) = self.right.get_mut(column) {
            *r = true;
        }
        self
    }

    /// Colours `column` by the state each cell names (on a terminal).
    pub fn coloured(mut self, column: usize) -> Table {
        self.coloured = Some(column);
        self
    }

    /// Adds a row (missing cells are empty).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows
            .push(cells.into_iter().map(|c| inert(&c).into_owned()).collect());
    }

    /// The table's lines, the header first; its state column coloured when `colour`.
    fn render(&self, colour: bool) -> Vec<String> {
        let columns = self.header.len();
        let cell = |row: &[String], i: usize| row.get(i).cloned().unwrap_or_default();
        let widths: Vec<usize> = (0..columns)
            .map(|i| {
                std::iter::once(&self.header)
                    .chain(&self.rows)
                    .map(|r| cell(r, i).chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |row: &[String], colour: bool| {
            let mut out = String::new();
            for (i, width) in widths.iter().enumerate() {
                let text = cell(row, i);
                let last = i + 1 == columns;
                let pad = " ".repeat(width.saturating_sub(text.chars().count()));
                let padded = match (self.right.get(i).copied().unwrap_or(false), last) {
                    (true, _) => format!("{pad}{text}"),
                    (false, true) => text.clone(),
                    (false, false) => format!("{text}{pad}"),
                };
                if colour && self.coloured == Some(i) {
                    let style = style_of(&text);
                    out.push_str(&format!("{style}{padded}{style:#}"));
                } else {
                    out.push_str(&padded);
                }
                if !last {
                    out.push_str("  ");
                }
            }
            out.trim_end().to_string()
        };
        std::iter::once(line(&self.header, false))
            .chain(self.rows.iter().map(|r| line(r, colour)))
            .collect()
    }

    /// Prints the table to standard output (colour through anstream: on a terminal only);
    /// after each row `after(i)` runs (to print a detail of row `i` on standard error).
    pub fn print_with(&self, mut after: impl FnMut(usize)) {
        for (i, line) in self.render(true).iter().enumerate() {
            let _ = writeln!(anstream::stdout().lock(), "{line}");
            if let Some(row) = i.checked_sub(1) {
                after(row);
            }
        }
    }

    /// Prints the table to standard output.
    pub fn print(&self) {
        self.print_with(|_| {});
    }
}

/// Reports a command's error on standard error, made inert like every other line.
pub fn error(error: &dyn std::fmt::Display) {
    let _ = writeln!(std::io::stderr().lock(), "{}", inert(&error.to_string()));
}

/// The colour of a state word: done is green, given up red, in progress yellow, gone dim.
fn style_of(state: &str) -> anstyle::Style {
    use anstyle::{AnsiColor, Style};
    let colour = |c: AnsiColor| Style::new().fg_color(Some(c.into()));
    match state.trim() {
        "landed" | "ok" | "done" | "passed" => colour(AnsiColor::Green),
        "failed" | "FAIL" | "out-of-shape" | "not-run" | "interrupted" => {
            colour(AnsiColor::Red).bold()
        }
        "reserved" | "lapsed" | "running" | "rate-limited" => colour(AnsiColor::Yellow),
        "cancelled" | "unknown" | "kept" => Style::new().dimmed(),
        _ => Style::new(),
    }
}

/// `n` things, the word in its number: `1 round`, `2 rounds`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A time as RFC 3339 (UTC, to the second), for `--json` beside the Unix milliseconds.
pub fn rfc3339_ms(unix_ms: u64) -> String {
    humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(unix_ms),
    )
    .to_string()
}

/// A size as people write it: `4 GiB`, `512 MiB`, or `1.5 GiB` when not a whole number.
pub fn size(bytes: u64) -> String {
    for (unit, name) in [
        (1u64 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ] {
        if bytes >= unit && bytes % unit == 0 {
            return format!("{} {name}", bytes / unit);
        }
    }
    bytesize::ByteSize::b(bytes).display().iec().to_string()
}

/// Serialises an empty text as `null`: every `--json` shape says "nothing to say" one way
/// (docs/json.md).
pub fn empty_as_null<S: serde::Serializer>(text: &str, serializer: S) -> Result<S::Ok, S::Error> {
    if text.is_empty() {
        serializer.serialize_none()
    } else {
        serializer.serialize_some(text)
    }
}

/// Reads what [`empty_as_null`] wrote (and an empty text, as older records hold) back.
pub fn null_as_empty<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<String, D::Error> {
    use serde::Deserialize;
    Ok(Option::<String>::deserialize(deserializer)?.unwrap_or_default())
}

/// The version of every `--json` shape: a consumer checks it before reading the rest.
pub const SCHEMA: u32 = 1;

/// A duration people read: sub-second ones to the hundredth (`0.42 s`), then tenths
/// (`12.3 s`), then minutes (`2 min 05 s`) and hours (`1 h 02 min`).
pub fn duration(secs: f64) -> String {
    let secs = if secs.is_finite() { secs.max(0.0) } else { 0.0 };
    if secs < 1.0 {
        format!("{secs:.2} s")
    } else if secs < 60.0 {
        format!("{secs:.1} s")
    } else if secs < 3600.0 {
        let whole = secs.round() as u64;
        format!("{} min {:02} s", whole / 60, whole % 60)
    } else {
        let whole = secs.round() as u64;
        format!("{} h {:02} min", whole / 3600, (whole % 3600) / 60)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_read_at_every_scale() {
        use super::duration;
        assert_eq!(duration(0.0421), "0.04 s");
        assert_eq!(duration(0.5), "0.50 s");
        assert_eq!(duration(12.34), "12.3 s");
        assert_eq!(duration(125.0), "2 min 05 s");
        assert_eq!(duration(3720.0), "1 h 02 min");
        assert_eq!(duration(f64::NAN), "0.00 s");
    }

    #[test]
    fn a_table_aligns_every_column_by_its_widest_cell_and_colour_moves_none() {
        let mut table = super::Table::new(&["STATE", "N", "LAST"])
            .right(1)
            .coloured(0);
        table.row(vec!["landed".into(), "7".into(), "x".into()]);
        table.row(vec!["é".into(), "1234567".into(), "a longer tail".into()]);
        table.row(vec!["cancelled".into(), "".into(), "".into()]);
        assert_eq!(
            table.render(false),
            [
                "STATE            N  LAST",
                "landed           7  x",
                "é          1234567  a longer tail",
                "cancelled",
            ]
        );
        // Coloured, the same text between the escapes: padding is inside the colour.
        let plain = |line: &str| {
            let mut out = String::new();
            let mut escape = false;
            for c in line.chars() {
                match (escape, c) {
                    (_, '\x1b') => escape = true,
                    (true, 'm') => escape = false,
                    (true, _) => {}
                    (false, c) => out.push(c),
                }
            }
            out
        };
        let coloured = table.render(true);
        assert_ne!(coloured, table.render(false));
        assert_eq!(
            coloured.iter().map(|l| plain(l)).collect::<Vec<_>>(),
            table.render(false)
        );
    }

    #[test]
    fn counts_say_the_word_in_its_number() {
        assert_eq!(super::count(1, "round", "rounds"), "1 round");
        assert_eq!(super::count(0, "round", "rounds"), "0 rounds");
        assert_eq!(super::count(2, "sandbox", "sandboxes"), "2 sandboxes");
        assert_eq!(super::rfc3339_ms(1_000), "1970-01-01T00:00:01Z");
    }
}
