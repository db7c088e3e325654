//! What a drive shows while it runs.
//!
//! On a terminal, a live line per lane under the log (`--jobs` of them): the move, the
//! lane, the stage and how long it has run, or a wait with its reason and end time. Elsewhere (a pipe, a log file, CI),
//! plain lines only, one per event, so that the output reads the same in a log as it did
//! live. Every other line the drive prints goes through here too, so that the live line is
//! never torn by one.

use std::io::Write;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::printer::Printer;

/// The drive's display.
pub struct Progress {
    printer: Printer,
    /// The live lines, one per lane, when standard error is a terminal.
    live: Option<(MultiProgress, Vec<ProgressBar>)>,
    /// The end of the last followed chunk when it stopped inside a character.
    pending: std::sync::Mutex<Vec<u8>>,
    /// Every line shown, kept as well (the scenario tests read what the person saw).
    #[cfg(test)]
    pub(super) seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Progress {
    /// A display on standard error for `lanes` lanes; live when `live` (standard error is
    /// a terminal) and the terminal can redraw a line (a `dumb` or unnamed terminal gets
    /// plain lines).
    pub fn new(printer: Printer, live: bool, lanes: usize) -> Progress {
        let live = (live && !ProgressDrawTarget::stderr().is_hidden()).then(|| {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
            let bars = (0..lanes.max(1))
                .map(|_| {
                    let bar = multi.add(ProgressBar::new_spinner());
                    bar.set_style(
                        ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                            .expect("a fixed template"),
                    );
                    bar.enable_steady_tick(Duration::from_millis(250));
                    bar
                })
                .collect();
            (multi, bars)
        });
        Progress {
            printer,
            live,
            pending: Default::default(),
            #[cfg(test)]
            seen: Default::default(),
        }
    }

    /// Runs `f` with the live lines out of its way.
    fn above(&self, f: impl FnOnce()) {
        match &self.live {
            Some((multi, _)) => multi.suspend(f),
            None => f(),
        }
    }

    /// Shows `text` on lane `slot`'s live line, or as a plain line without one.
    fn show(&self, slot: usize, text: String) {
        self.keep(&text);
        match &self.live {
            Some((_, bars)) => {
                let bar = &bars[slot.min(bars.len() - 1)];
                bar.reset_elapsed();
                bar.set_message(text);
            }
            None => self.printer.note(&text),
        }
    }

    #[cfg(test)]
    fn keep(&self, text: &str) {
        self.seen.lock().unwrap().push(text.to_string());
    }

    #[cfg(not(test))]
    fn keep(&self, _: &str) {}

    /// A line in the log above the live lines.
    pub fn note(&self, text: &str) {
        self.keep(text);
        self.above(|| self.printer.note(text));
    }

    /// A warning in the log.
    pub fn warn(&self, text: &str) {
        self.keep(&format!("warning: {text}"));
        self.above(|| self.printer.warn(text));
    }

    /// A line shown only with `-v`.
    pub fn detail(&self, text: &str) {
        self.above(|| self.printer.detail(text));
    }

    /// A new stage of a lane starts, on lane `slot`: `move` is the drive's move number.
    pub fn stage(&self, slot: usize, r#move: u64, lane: &str, stage: &str) {
        self.show(slot, format!("move {move} · {lane} · {stage}"));
    }

    /// A wait of lane `slot` starts: why, and until when (seconds since the epoch).
    pub fn wait(&self, slot: usize, reason: &str, until_unix: i64) {
        self.show(
            slot,
            format!("waiting until {} · {reason}", clock(until_unix)),
        );
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
        self.above(write);
    }

    /// Removes the live lines (the drive is over).
    pub fn finish(&self) {
        if let Some((multi, bars)) = &self.live {
            for bar in bars {
                bar.finish_and_clear();
            }
            let _ = multi.clear();
        }
    }
}

/// The last second RFC 3339 can write: 9999-12-31T23:59:59Z.
const LAST_WRITABLE: i64 = 253_402_300_799;

/// A time as the display shows it: RFC 3339, UTC, to the second (a time from others — an
/// agent's reset — beyond the year 9999 is shown as that year's end).
pub fn clock(unix: i64) -> String {
    humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + Duration::from_secs(unix.clamp(0, LAST_WRITABLE) as u64),
    )
    .to_string()
}

/// A time as a person reads it: `2100-01-01 00:00:00 UTC`.
pub fn utc(unix: i64) -> String {
    clock(unix).replacen('T', " ", 1).replace('Z', " UTC")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_time_reads_in_utc_and_one_past_the_year_9999_does_not_panic() {
        assert_eq!(super::utc(4_102_444_800), "2100-01-01 00:00:00 UTC");
        assert_eq!(super::clock(-5), "1970-01-01T00:00:00Z");
        assert_eq!(super::utc(i64::MAX), "9999-12-31 23:59:59 UTC");
    }
}
