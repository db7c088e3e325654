//! All of a command's output goes through here.
//!
//! Standard output carries the command's result (a table, or JSON with `--json`);
//! standard error carries errors, warnings and notes. Output has no colour, so it reads
//! the same in a terminal, a pipe and a log. A closed pipe (`stet plugins list | head`)
//! ends output quietly instead of panicking.
//!
//! Every line is made inert first ([`crate::text::inert`]): text from items, agents,
//! checks and plugins reaches the terminal with its control characters escaped. JSON is
//! written as it is (JSON escapes them itself).

use std::io::Write;

use crate::text::inert;

/// Where a command writes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Printer {
    /// Whether `-v` was given (once or more).
    pub verbose: bool,
}

impl Printer {
    /// Writes `text` (and a newline) to standard output.
    pub fn out(&self, text: &str) {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{}", inert(text));
    }

    /// Writes `value` as pretty JSON to standard output.
    pub fn json<T: serde::Serialize>(&self, value: &T) {
        let text = serde_json::to_string_pretty(value).expect("output types serialise");
        let _ = writeln!(std::io::stdout().lock(), "{text}");
    }

    /// Writes a progress line to standard error (what a long command is doing now).
    pub fn note(&self, text: &str) {
        let _ = writeln!(std::io::stderr().lock(), "{}", inert(text));
    }

    /// Writes a warning to standard error.
    pub fn warn(&self, text: &str) {
        let _ = writeln!(std::io::stderr().lock(), "warning: {}", inert(text));
    }

    /// Writes a line to standard error only with `-v`.
    pub fn detail(&self, text: &str) {
        if self.verbose {
            let _ = writeln!(std::io::stderr().lock(), "{}", inert(text));
        }
    }
}

/// Reports a command's error on standard error, made inert like every other line.
pub fn error(error: &crate::error::CliError) {
    let _ = writeln!(std::io::stderr().lock(), "{}", inert(&error.to_string()));
}

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
}
