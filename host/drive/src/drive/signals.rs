//! What a stop signal (SIGINT, SIGTERM, SIGHUP) does to a drive, watched from its first
//! instant.
//!
//! - While it starts (the proof, the consent) nothing is worth finishing: the first signal
//!   ends it at once, cleanly.
//! - Once the drain runs, the first signal asks the lanes to stop after the agent calls in
//!   flight; the second kills those calls and ends it at once, cleanly, naming when each
//!   reservation lapses.
//!
//! Cleanly means nothing of this process is left behind: host git's process groups killed,
//! the process closed to new sandboxes and temporary directories, then every sandbox
//! carrying its owner label torn down and every temporary directory carrying its name
//! removed (`sandbox::leftovers`), and each call cut short given a receipt that says the
//! person stopped it, when, and keeps its log. This is done from what carries the
//! process's name, not from what the stopped threads hold, so it holds at every instant.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::keeper;
use super::progress::{clock, Progress};
use super::time::Stop;
use crate::error::{Concept, Error};
use crate::harness;
use crate::printer::Printer;
use crate::sandbox::{leftovers, OpenRuntime};

/// A lane's call in flight and its reservation, as a second signal finds them.
type Lane = (Arc<harness::InFlight>, keeper::Keeper);

/// The drive's answer to stop signals; see the module's doc.
pub(super) struct Signals {
    repo: PathBuf,
    printer: Printer,
    stop: Arc<Stop>,
    /// The runtime whose sandboxes a stop tears down, once opened.
    runtime: Mutex<Option<Arc<OpenRuntime>>>,
    /// The lanes, once the drain runs; `None` while the drive starts.
    lanes: Mutex<Option<Vec<Lane>>>,
    /// The drive's display once the drain runs: a stop speaks through it, so that its
    /// lines are not drawn over by the live lines, and clears them before the end.
    display: Mutex<Option<Arc<Progress>>>,
    /// The drive's clock: a stopped call's receipt ends at the drive's now.
    clock: Arc<dyn super::time::Clock>,
}

/// How long a stop waits for a sandbox or directory being made to be made (it is then
/// removed with the rest).
const MAKING: Duration = Duration::from_secs(10);

impl Signals {
    /// Watches for stop signals from now on, for the drive on `repo`.
    pub(super) fn watch(
        repo: PathBuf,
        printer: Printer,
        clock: Arc<dyn super::time::Clock>,
    ) -> Result<Arc<Signals>, Error> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
            .map_err(|e| Concept::Drive.failure(format!("cannot watch for signals: {e}")))?;
        let this = Arc::new(Signals {
            repo,
            printer,
            stop: Arc::new(Stop::default()),
            runtime: Mutex::new(None),
            lanes: Mutex::new(None),
            display: Mutex::new(None),
            clock,
        });
        let watcher = this.clone();
        std::thread::spawn(move || {
            for signal in signals.forever() {
                watcher.answer(signal);
            }
        });
        Ok(this)
    }

    /// The stop every wait of the drive wakes for.
    pub(super) fn stop(&self) -> Arc<Stop> {
        self.stop.clone()
    }

    /// The runtime is open: a stop tears its sandboxes of this process down.
    pub(super) fn runtime_opened(&self, runtime: Arc<OpenRuntime>) {
        *self.runtime.lock().unwrap_or_else(|p| p.into_inner()) = Some(runtime);
    }

    /// The drain begins: from now on a first signal lets the calls in flight finish.
    pub(super) fn draining(&self, lanes: Vec<Lane>, display: Arc<Progress>) {
        *self.display.lock().unwrap_or_else(|p| p.into_inner()) = Some(display);
        *self.lanes.lock().unwrap_or_else(|p| p.into_inner()) = Some(lanes);
    }

    fn display(&self) -> Option<Arc<Progress>> {
        self.display
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn answer(&self, signal: i32) {
        let first = !self.stop.request(signal);
        let lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(lanes) = lanes else {
            self.end_now(
                signal,
                "stopped while the drive was starting; nothing was reserved",
            );
        };
        if first {
            // Host-side git in progress (on a lane a sandbox wrote) ends within seconds;
            // the agent calls in flight finish.
            crate::git::hurry_all();
            let calls = if lanes.len() > 1 { "calls" } else { "call" };
            let said = format!(
                "stopping after the agent {calls} in flight (press again to kill {})",
                if lanes.len() > 1 { "them" } else { "it" }
            );
            match self.display() {
                Some(display) => display.stopping(
                    &said,
                    &format!("stopping after the {calls} in flight (again: kill)"),
                ),
                _ => super::note!(self.printer, "{said}"),
            }
            return;
        }
        // Before the kill: a killed call's end is the stop's to record, not the call's.
        crate::receipts::stopping();
        let mut lapses = Vec::new();
        for (in_flight, keeper) in &lanes {
            if let Some(process) = in_flight.lock().unwrap_or_else(|p| p.into_inner()).take() {
                let _ = process.kill();
            }
            // Renewals stop with this process, so the reservation lapses at its expiry.
            if let Some((item, lapse)) = keeper.lapse() {
                lapses.push(format!(
                    "the reservation of {item} lapses at {}",
                    clock(lapse)
                ));
            }
        }
        let what = if lapses.is_empty() {
            "nothing was reserved".to_string()
        } else {
            lapses.join(", ")
        };
        self.end_now(
            signal,
            &format!("killed the agent's processes; {what}; the next stet drive takes the lane up"),
        );
    }

    /// Ends the process now, leaving nothing of it behind (see the module's doc).
    fn end_now(&self, signal: i32, said: &str) -> ! {
        // The other threads' lines would only say what the stop broke: they wait, and the
        // process exits before they are written.
        // The live lines first: cleared, not left frozen as they were (and before the lock:
        // clearing them writes to standard error).
        if let Some(display) = self.display() {
            display.finish();
        }
        let stderr = std::io::stderr();
        let _quiet = stderr.lock();
        crate::receipts::stopping();
        crate::git::kill_all();
        let closed = leftovers::close(MAKING);
        let runtime = self
            .runtime
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(runtime) = runtime {
            leftovers::teardown_own(&runtime);
        }
        leftovers::remove_own_temp_dirs();
        let at = self.clock.now_ms();
        let when = clock((at / 1000) as i64);
        let owner = crate::sandbox::owner_token(std::process::id()).unwrap_or_default();
        let stopped = crate::receipts::settle_stopped(&self.repo, &owner, signal, at, &when)
            .unwrap_or_default();
        for r in &stopped {
            super::note!(
                self.printer,
                "receipt {}: the {} call of {} was stopped; its log is kept",
                r.id,
                r.role,
                r.item
            );
        }
        if !closed {
            self.printer.warn(
                "a sandbox was still being made when stet stopped: `stet gc` removes it if the runtime finishes it",
            );
        }
        super::note!(
            self.printer,
            "{said} (stopped by {})",
            crate::receipts::signal_name(signal)
        );
        // Once more: a thread may have made a path again while the receipts settled.
        leftovers::remove_own_temp_dirs();
        std::process::exit(128 + signal);
    }
}
