//! Foundation's `JSONEncoder` output, byte for byte where it matters: `/` escaped as `\/`,
//! pretty printing with two-space indents and `"key" : value`, empty containers as
//! `[\n\n]`, integral doubles without `.0`, keys sorted by UTF-8 bytes with `.sortedKeys` and
//! in hash order (different in every process) without it, dates as ISO 8601 strings
//! (`.iso8601`) or seconds since 2001-01-01 (`.deferredToDate`).

use std::cell::Cell;

#[derive(Clone, Debug)]
pub enum J {
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

impl J {
    pub fn s(v: impl Into<String>) -> J {
        J::Str(v.into())
    }
    pub fn int(v: impl Into<i128>) -> J {
        J::Num(v.into().to_string())
    }
    pub fn double(v: f64) -> J {
        let mut s = format!("{v}");
        if let Some(stripped) = s.strip_suffix(".0") {
            s = stripped.to_string();
        }
        J::Num(s)
    }
    pub fn strs<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> J {
        J::Arr(items.into_iter().map(|s| J::Str(s.into())).collect())
    }
    pub fn obj() -> Obj {
        Obj(Vec::new())
    }
}

/// Builds an object; `opt` leaves the key out when the value is `None` (`encodeIfPresent`).
pub struct Obj(Vec<(String, J)>);

impl Obj {
    pub fn set(mut self, k: &str, v: J) -> Obj {
        self.0.push((k.to_string(), v));
        self
    }
    pub fn opt(self, k: &str, v: Option<J>) -> Obj {
        match v {
            Some(v) => self.set(k, v),
            None => self,
        }
    }
    pub fn done(self) -> J {
        J::Obj(self.0)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    Sorted,
    /// Swift `Dictionary` order: unpredictable, different in every process.
    Hashed,
}

thread_local! {
    static RNG: Cell<u64> = Cell::new({
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        (t ^ ((std::process::id() as u64) << 32)) | 1
    });
}

fn next_random() -> u64 {
    RNG.with(|r| {
        let mut x = r.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r.set(x);
        x
    })
}

/// Shuffles like iterating a Swift `Dictionary`: a different order in every process.
pub fn shuffle<T>(v: &mut [T]) {
    for i in (1..v.len()).rev() {
        let j = (next_random() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

fn escape(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' => out.push_str("\\/"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn indent(out: &mut String, n: usize) {
    for _ in 0..n {
        out.push_str("  ");
    }
}

fn write(out: &mut String, v: &J, pretty: bool, keys: Keys, depth: usize) {
    match v {
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Num(n) => out.push_str(n),
        J::Str(s) => escape(out, s),
        J::Arr(items) => {
            out.push('[');
            if pretty {
                out.push('\n');
            }
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(if pretty { ",\n" } else { "," });
                }
                if pretty {
                    indent(out, depth + 1);
                }
                write(out, item, pretty, keys, depth + 1);
            }
            if pretty {
                out.push('\n');
                indent(out, depth);
            }
            out.push(']');
        }
        J::Obj(fields) => {
            let mut fields: Vec<&(String, J)> = fields.iter().collect();
            match keys {
                Keys::Sorted => fields.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes())),
                Keys::Hashed => shuffle(&mut fields),
            }
            out.push('{');
            if pretty {
                out.push('\n');
                if !fields.is_empty() {
                    indent(out, depth + 1);
                }
            }
            for (i, (k, v)) in fields.iter().enumerate() {
                if i > 0 {
                    if pretty {
                        out.push_str(",\n");
                        indent(out, depth + 1);
                    } else {
                        out.push(',');
                    }
                }
                escape(out, k);
                out.push_str(if pretty { " : " } else { ":" });
                write(out, v, pretty, keys, depth + 1);
            }
            if pretty {
                out.push('\n');
                indent(out, depth);
            }
            out.push('}');
        }
    }
}

pub fn render(v: &J, pretty: bool, keys: Keys) -> String {
    let mut out = String::new();
    write(&mut out, v, pretty, keys, 0);
    out
}

/// Seconds between 1970-01-01 and 2001-01-01 (Foundation's reference date).
pub const REFERENCE_DATE: f64 = 978_307_200.0;

/// `Date.ISO8601Format()` / `.iso8601`: `2026-11-30T03:55:12Z` (UTC, whole seconds).
pub fn iso8601(unix: f64) -> String {
    let secs = unix.floor() as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// A date in the given encoding.
pub fn date(unix: f64, iso: bool) -> J {
    if iso {
        J::s(iso8601(unix))
    } else {
        J::double(unix - REFERENCE_DATE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pretty_matches_foundation() {
        let v = J::Arr(vec![J::obj()
            .set("b", J::Arr(vec![]))
            .set("a", J::s("/x"))
            .set("c", J::obj().done())
            .done()]);
        assert_eq!(
            render(&v, true, Keys::Sorted),
            "[\n  {\n    \"a\" : \"\\/x\",\n    \"b\" : [\n\n    ],\n    \"c\" : {\n\n    }\n  }\n]"
        );
        assert_eq!(
            render(&v, false, Keys::Sorted),
            "[{\"a\":\"\\/x\",\"b\":[],\"c\":{}}]"
        );
    }

    #[test]
    fn dates() {
        assert_eq!(iso8601(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(1_796_000_000.5), "2026-11-30T00:53:20Z");
        assert_eq!(
            render(&date(REFERENCE_DATE + 12.0, false), false, Keys::Sorted),
            "12"
        );
    }
}
