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
