//! What a drive shows while it runs.
//!
//! On a terminal, one live line under the log: the move, the lane, the stage and how long
//! it has run, or a wait with its reason and end time. Elsewhere (a pipe, a log file, CI),
//! plain lines only, one per event, so that the output reads the same in a log as it did
//! live. Every other line the drive prints goes through here too, so that the live line is
//! never torn by one.

use std::io::Write;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::printer::Printer;

/// The drive's display.
pub struct Progress {
    printer: Printer,
    /// The live line, when standard error is a terminal.
    bar: Option<ProgressBar>,
    /// The end of the last followed chunk when it stopped inside a character.
    pending: std::sync::Mutex<Vec<u8>>,
    /// Every line shown, kept as well (the scenario tests read what the person saw).
    #[cfg(test)]
    pub(super) seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Progress {
    /// A display on standard error; live when `live` (standard error is a terminal) and
    /// the terminal can redraw a line (a `dumb` or unnamed terminal gets plain lines).
    pub fn new(printer: Printer, live: bool) -> Progress {
        let bar = (live && !ProgressDrawTarget::stderr().is_hidden()).then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                    .expect("a fixed template"),
            );
            bar.enable_steady_tick(Duration::from_millis(250));
            bar
        });
        Progress {
            printer,
            bar,
            pending: Default::default(),
            #[cfg(test)]
            seen: Default::default(),
        }
    }

    #[cfg(test)]
    fn keep(&self, text: &str) {
        self.seen.lock().unwrap().push(text.to_string());
    }

    #[cfg(not(test))]
    fn keep(&self, _: &str) {}

    /// A line in the log above the live line.
    pub fn note(&self, text: &str) {
        self.keep(text);
        match &self.bar {
            Some(bar) => bar.suspend(|| self.printer.note(text)),
            None => self.printer.note(text),
        }
    }

    /// A warning in the log.
    pub fn warn(&self, text: &str) {
        self.keep(&format!("warning: {text}"));
        match &self.bar {
            Some(bar) => bar.suspend(|| self.printer.warn(text)),
            None => self.printer.warn(text),
        }
    }

    /// A line shown only with `-v`.
    pub fn detail(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| self.printer.detail(text)),
            None => self.printer.detail(text),
        }
    }

    /// A new stage of a lane starts: `move` is the drive's move number.
    pub fn stage(&self, r#move: u64, lane: &str, stage: &str) {
        let text = format!("move {move} · {lane} · {stage}");
        self.keep(&text);
        match &self.bar {
            Some(bar) => {
                bar.reset_elapsed();
                bar.set_message(text);
            }
            None => self.printer.note(&text),
        }
    }

    /// A wait starts: why, and until when (seconds since the epoch).
    pub fn wait(&self, reason: &str, until_unix: i64) {
        let text = format!("waiting until {} · {reason}", clock(until_unix));
        self.keep(&text);
        match &self.bar {
            Some(bar) => {
                bar.reset_elapsed();
                bar.set_message(text);
            }
            None => self.printer.note(&text),
        }
    }

    /// The agent's own output, streamed (`--follow`).
    pub fn follow(&self, bytes: &[u8]) {
        // The agent's output is its own: made inert before it reaches the terminal.
        let text = {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            crate::text::inert_bytes(&mut pending, bytes)
        };
        let write = || {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(text.as_bytes());
            let _ = err.flush();
        };
        match &self.bar {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
    }

    /// Removes the live line (the drive is over).
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// A time as the display shows it: RFC 3339, UTC, to the second.
pub fn clock(unix: i64) -> String {
    humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + Duration::from_secs(unix.max(0) as u64),
    )
    .to_string()
}
