//! What a drive shows while it runs.
//!
//! On a terminal, an overall line (items landed, given up and left, cost so far, time left
//! at the pace so far; a stop asked, when one is) above a live line per lane (`--jobs` of
//! them): the move, the lane, the stage and how long it has run, or a wait with its reason
//! and end time. Elsewhere (a pipe, a log file, CI), plain lines only, one per event (the
//! overall line each time an item ends), so that the output reads the same in a log as it
//! did live. Every other line the drive prints goes through here too, the stop signals'
//! included, so that the live lines are never torn by one; they are cleared before the
//! process ends, however it ends, so no frozen copy of them is left on the terminal.

use std::io::Write;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::printer::Printer;

/// The drive's display.
pub struct Progress {
    printer: Printer,
    /// The live lines when standard error is a terminal: the overall line, and one per lane.
    live: Option<(MultiProgress, ProgressBar, Vec<ProgressBar>)>,
    /// The overall line as last shown, and a stop asked since, which every later one says.
    last: std::sync::Mutex<Overall>,
    /// The end of the last followed chunk when it stopped inside a character.
    pending: std::sync::Mutex<Vec<u8>>,
    /// What the drive is doing, published for the board's live page (`live.rs`), when it
    /// is.
    publisher: Option<super::live::Publisher>,
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
            let overall = multi.add(ProgressBar::new_spinner());
            overall.set_style(ProgressStyle::with_template("{msg}").expect("a fixed template"));
            let bars = (0..lanes.max(1))
                .map(|n| {
                    let bar = multi.add(ProgressBar::new_spinner());
                    bar.set_style(
                        ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                            .expect("a fixed template"),
                    );
                    bar.set_message(format!("lane {}: looking for an item", n + 1));
                    bar.enable_steady_tick(Duration::from_millis(250));
                    bar
                })
                .collect();
            (multi, overall, bars)
        });
        Progress {
            printer,
            live,
            last: Default::default(),
            pending: Default::default(),
            publisher: None,
            #[cfg(test)]
            seen: Default::default(),
        }
    }

    /// Publishes what the drive does through `publisher` too (`live.rs`).
    pub fn publishing(mut self, publisher: super::live::Publisher) -> Progress {
        self.publisher = Some(publisher);
        self
    }

    /// Runs `f` on the publisher, when there is one.
    fn publish(&self, f: impl FnOnce(&super::live::Publisher)) {
        if let Some(publisher) = &self.publisher {
            f(publisher)
        }
    }

    /// Runs `f` with the live lines out of its way.
    fn above(&self, f: impl FnOnce()) {
        match &self.live {
            Some((multi, ..)) => multi.suspend(f),
            None => f(),
        }
    }

    /// Shows `text` on lane `slot`'s live line, or as a plain line without one.
    fn show(&self, slot: usize, text: String) {
        self.keep(&text);
        match &self.live {
            Some((_, _, bars)) => {
                let bar = &bars[slot.min(bars.len() - 1)];
                bar.reset_elapsed();
                // As every line stet prints: a wait's reason may be an agent's words.
                bar.set_message(crate::text::inert(&text).into_owned());
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

    /// A new stage of `item`'s lane starts, on lane `slot`: `move` is the drive's move
    /// number.
    pub fn stage(&self, slot: usize, r#move: u64, item: &str, lane: &str, stage: &str) {
        self.publish(|p| p.stage(slot, item, lane, stage));
        self.show(slot, format!("move {move} · {lane} · {stage}"));
    }

    /// The agent call `receipt` of round `round` starts on lane `slot` (published only).
    pub fn call(&self, slot: usize, receipt: &str, round: u32) {
        self.publish(|p| p.call(slot, receipt, round));
    }

    /// Lane `slot` is done with its item (published only).
    pub fn idle(&self, slot: usize) {
        self.publish(|p| p.idle(slot));
    }

    /// A wait of lane `slot` starts: why, and until when (seconds since the epoch).
    pub fn wait(&self, slot: usize, reason: &str, until_unix: i64) {
        self.publish(|p| p.wait(slot, reason, until_unix));
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

    /// The drive as a whole, at a glance: the overall line on a terminal, a plain line
    /// elsewhere (said when an item ends, so a log gets one per item).
    pub fn overall(&self, overall: &Overall) {
        let text = {
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            let stopping = last.stopping.take();
            *last = Overall {
                stopping,
                ..overall.clone()
            };
            last.to_string()
        };
        self.publish(|p| p.overall(&text));
        self.keep(&text);
        match &self.live {
            Some((_, line, _)) => line.set_message(crate::text::inert(&text).into_owned()),
            None => self.printer.note(&text),
        }
    }

    /// A stop was asked: said in the log above the live lines (which would otherwise draw
    /// over it), and on the overall line from now on.
    pub fn stopping(&self, said: &str, waits_for: &str) {
        self.publish(|p| p.stopping(waits_for));
        self.note(said);
        let text = {
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            last.stopping = Some(waits_for.to_string());
            last.to_string()
        };
        if let Some((_, line, _)) = &self.live {
            line.set_message(text);
        }
    }

    /// Removes the live lines (the drive is over, or the process ends now). Idempotent.
    pub fn finish(&self) {
        self.publish(|p| p.end());
        if let Some((multi, overall, bars)) = &self.live {
            overall.finish_and_clear();
            for bar in bars {
                bar.finish_and_clear();
            }
            let _ = multi.clear();
        }
    }
}

/// What the overall line says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overall {
    /// Items the drive means to take (the cap, or fewer when fewer are eligible).
    pub planned: usize,
    pub landed: usize,
    pub gave_up: usize,
    /// Items cancelled, taken over by another drive or left as they were.
    pub other: usize,
    /// What the agent calls so far reported they cost.
    pub cost_usd: f64,
    /// Seconds since the drain began.
    pub elapsed_secs: i64,
    /// A stop was asked: what it waits for.
    pub stopping: Option<String>,
}

impl Overall {
    /// Items the drive is done with.
    fn ended(&self) -> usize {
        self.landed + self.gave_up + self.other
    }

    /// Seconds left at the pace so far (the time per item ended, times the items left);
    /// none before the first item ends.
    pub fn secs_left(&self) -> Option<i64> {
        let ended = self.ended() as i64;
        let left = self.planned.saturating_sub(self.ended()) as i64;
        (ended > 0 && left > 0).then(|| self.elapsed_secs.max(0) * left / ended)
    }
}

impl std::fmt::Display for Overall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let left = self.planned.saturating_sub(self.ended());
        write!(f, "drive: {} of {} done", self.ended(), self.planned)?;
        write!(f, " · landed {}", self.landed)?;
        if self.gave_up > 0 {
            write!(f, " · gave up on {}", self.gave_up)?;
        }
        if self.other > 0 {
            write!(f, " · {} otherwise", self.other)?;
        }
        write!(f, " · {left} left · ${:.4} so far", self.cost_usd)?;
        match self.secs_left() {
            Some(secs) if self.stopping.is_none() => write!(
                f,
                " · about {} left at this pace",
                crate::printer::duration(secs as f64)
            )?,
            _ => {}
        }
        if let Some(stopping) = &self.stopping {
            write!(f, " · {stopping}")?;
        }
        Ok(())
    }
}

pub use crate::timestamp::{clock, utc};

#[cfg(test)]
mod tests {
    use super::Overall;

    #[test]
    fn the_overall_line_counts_items_and_the_time_left_at_the_pace_so_far() {
        let mut o = Overall {
            planned: 10,
            cost_usd: 0.25,
            ..Default::default()
        };
        // Nothing ended yet: no pace to tell the time left by.
        assert_eq!(o.secs_left(), None);
        assert_eq!(
            o.to_string(),
            "drive: 0 of 10 done · landed 0 · 10 left · $0.2500 so far"
        );
        o.landed = 3;
        o.gave_up = 1;
        o.elapsed_secs = 400;
        assert_eq!(o.secs_left(), Some(600));
        assert_eq!(
            o.to_string(),
            "drive: 4 of 10 done · landed 3 · gave up on 1 · 6 left · $0.2500 so far · about 10 min 00 s left at this pace"
        );
        o.stopping = Some("stopping after the calls in flight".into());
        assert!(o
            .to_string()
            .ends_with("so far · stopping after the calls in flight"));
        o.landed = 9;
        assert_eq!(o.secs_left(), None, "nothing left");
    }
}
