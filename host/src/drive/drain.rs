//! The drive's loop: pick the next item, work its lane, and deal with how that ended —
//! landed, given up, stopped, a wait named by the move, or a failure that counts toward an
//! outage.
//!
//! What an item's lane did wrong — its agent failed the task, changed nothing, its check
//! failed, its reviewer asked for changes — counts toward that item's rounds and never
//! holds the queue: after `--rounds` the item is given up and the drive goes on. The
//! outage schedule is for what is wrong outside any item: the sandbox or the harness
//! cannot start a call, the model API does not answer (three of those in a row), or the
//! judge fails (at once; it counts toward its item's rounds too).

use crate::error::{CliError, Exit};
use crate::queue;
use crate::reservations::{Marks, Remote, ReservationError};

use super::{clock, note, ours_to_take_over, Drive};

/// What became of one item's lane.
pub(super) enum ItemEnd {
    Landed,
    GaveUp(String),
    Stopped(String),
    RateLimited(Option<i64>),
    /// A call could not be made: the sandbox or the harness could not start it, or the
    /// model API did not answer. The lane stays at its checkpoint; the item is taken
    /// again. Three in a row enter the outage schedule.
    RunnerFailed(String),
    /// The judge failed (its review failed or was out of shape): counted toward the
    /// item's rounds in its checkpoint, and the drive enters its outage schedule at once.
    JudgeFailed(String),
    /// The remote did not answer while the lane needed it; the lane stays here.
    RemoteUnreachable(String),
    /// Another drive took the reservation over (it lapsed); this drive leaves the lane.
    Lost(String),
    /// The item was cancelled on the remote (`stet rm`): the lane stops at this move.
    Cancelled(String),
}

/// An outage in progress: when it began and how far along the schedule it is.
struct Outage {
    started_unix: i64,
    step: u32,
}

/// How the search for the next item ended.
enum Next {
    Take(queue::Item),
    /// An item whose file cannot be read as one: reported and skipped.
    Malformed(String, String),
    Nothing,
    Unreachable(String),
}

fn duration(secs: i64) -> humantime::FormattedDuration {
    humantime::format_duration(std::time::Duration::from_secs(secs.max(0) as u64))
}

impl Drive<'_> {
    pub(super) fn remote(&self) -> Remote<'_> {
        Remote {
            repo: &self.repo,
            name: &self.options.remote,
        }
    }

    pub(super) fn drain(&self, items: &[queue::Entry]) -> Result<Exit, CliError> {
        self.release_leftovers();
        let began = self.clock.now();
        let mut landed = 0;
        let mut landed_ids: Vec<String> = Vec::new();
        let mut cancelled: Vec<String> = Vec::new();
        let mut gave_up: Vec<String> = Vec::new();
        // Items this run is done with (landed, given up, lost): not taken again.
        let mut done_here: std::collections::HashSet<String> = Default::default();
        let mut runner_failures = 0u32;
        let mut outage: Option<Outage> = None;
        let mut unreachable: Option<Outage> = None;
        while landed < self.options.cap && !self.stop.requested() {
            let item = match self.next_item(items, &done_here)? {
                Next::Take(item) => item,
                Next::Malformed(id, why) => {
                    self.progress.warn(&format!("skipped {id}: {why}"));
                    done_here.insert(id);
                    continue;
                }
                Next::Nothing => break,
                Next::Unreachable(detail) => {
                    // A wait named by the move: back off from the floor, doubling to ten
                    // minutes; give up when the remote has been gone for the outage limit.
                    let state = unreachable.get_or_insert_with(|| Outage {
                        started_unix: self.clock.now(),
                        step: 0,
                    });
                    if self.clock.now() - state.started_unix >= self.options.outage_limit_secs {
                        note!(
                            self.progress,
                            "the remote {} has not answered for {}: the drive stops; lanes stay on their branches",
                            self.options.remote,
                            duration(self.clock.now() - state.started_unix)
                        );
                        return Ok(Exit::Unusable);
                    }
                    let backoff = (self.options.wait_floor_secs << state.step.min(16)).min(600);
                    state.step += 1;
                    if !self.wait(
                        &format!(
                            "the remote {} did not answer ({detail})",
                            self.options.remote
                        ),
                        self.clock.now() + backoff,
                    ) {
                        return Ok(self.stopped_while_waiting());
                    }
                    continue;
                }
            };
            unreachable = None;
            note!(
                self.progress,
                "{}: reserved; lane {}",
                item.id,
                crate::lanes::branch_of(&item.id)
            );
            let end = self.work(&item);
            // Whatever became of the item, its reservation is released: landed and given-up
            // items are done, a stopped or waiting one goes back to the queue.
            if let Err(e) = self.keeper.release() {
                self.progress.warn(&format!(
                    "{}: could not release the reservation ({e}); it lapses by itself",
                    item.id
                ));
            }
            let end = end?;
            let failed = match &end {
                ItemEnd::RunnerFailed(why) => {
                    runner_failures += 1;
                    note!(
                        self.progress,
                        "{}: a call could not be made ({why}); the lane stays at its checkpoint",
                        item.id
                    );
                    runner_failures >= 3
                }
                ItemEnd::JudgeFailed(why) => {
                    note!(self.progress, "{}: the judge failed ({why})", item.id);
                    true
                }
                ItemEnd::RemoteUnreachable(_) => false,
                _ => {
                    runner_failures = 0;
                    outage = None;
                    false
                }
            };
            if failed {
                runner_failures = 0;
                let state = outage.get_or_insert_with(|| Outage {
                    started_unix: self.clock.now(),
                    step: 0,
                });
                if self.clock.now() - state.started_unix >= self.options.outage_limit_secs {
                    note!(
                        self.progress,
                        "outage for {}: the drive stops; nothing was handed back, the lanes stay on their branches",
                        duration(self.clock.now() - state.started_unix)
                    );
                    return Ok(Exit::Unusable);
                }
                let schedule = &self.options.outage_schedule_secs;
                let wait = schedule[(state.step as usize).min(schedule.len() - 1)];
                state.step += 1;
                // The outage schedule is its own: the floor is for waits a move names.
                let reason = format!("outage: trying again after {}", duration(wait));
                if !self.sleep_until(&reason, self.clock.now() + wait) {
                    return Ok(self.stopped_while_waiting());
                }
                continue;
            }
            match end {
                ItemEnd::RunnerFailed(_) | ItemEnd::JudgeFailed(_) => {}
                ItemEnd::Landed => {
                    landed += 1;
                    landed_ids.push(item.id.clone());
                    done_here.insert(item.id.clone());
                    note!(
                        self.progress,
                        "{}: landed on {} as {}",
                        item.id,
                        self.options.remote,
                        crate::lanes::branch_of(&item.id)
                    );
                }
                ItemEnd::GaveUp(why) => {
                    // Marked failed on the remote, with why, by the lane.
                    note!(
                        self.progress,
                        "{}: given up: {why} (stet retry {} takes it up again)",
                        item.id,
                        item.id
                    );
                    done_here.insert(item.id.clone());
                    gave_up.push(item.id.clone());
                }
                ItemEnd::Lost(why) => {
                    note!(
                        self.progress,
                        "{}: another drive took the lane over ({why}); leaving it",
                        item.id
                    );
                    done_here.insert(item.id.clone());
                }
                ItemEnd::Cancelled(note) => {
                    note!(
                        self.progress,
                        "{}: cancelled ({note}); its lane stopped, its branch and checkpoint kept on the remote",
                        item.id
                    );
                    done_here.insert(item.id.clone());
                    cancelled.push(item.id.clone());
                }
                ItemEnd::Stopped(branch) => {
                    note!(
                        self.progress,
                        "stopped: run {}, lane {branch} (its checkpoint and any change pushed, reservation released); resume with: stet drive",
                        self.run
                    );
                    return Ok(self.stopped_exit());
                }
                ItemEnd::RemoteUnreachable(detail) => {
                    let backoff = self.options.wait_floor_secs;
                    if !self.wait(
                        &format!(
                            "{}: the remote {} did not answer ({detail}); the lane stays here",
                            item.id, self.options.remote
                        ),
                        self.clock.now() + backoff,
                    ) {
                        return Ok(self.stopped_while_waiting());
                    }
                }
                ItemEnd::RateLimited(until) => {
                    if !self.wait(
                        &format!("{}: the agent hit its usage limit", item.id),
                        until.unwrap_or(0),
                    ) {
                        return Ok(self.stopped_while_waiting());
                    }
                }
            }
        }
        if self.stop.requested() {
            note!(
                self.progress,
                "stopped: run {}; nothing is reserved; resume with: stet drive",
                self.run
            );
        }
        // The closing summary: what became of each item taken, how long, what it cost, and
        // the command that tells more.
        let (receipts, _) = crate::receipts::read_all(&self.repo);
        let cost: f64 = receipts
            .iter()
            .filter(|r| r.run == self.run)
            .filter_map(|r| r.cost_usd)
            .fold(0.0, |a, b| a + b);
        let mut tally = vec![format!("landed {landed}")];
        if !gave_up.is_empty() {
            tally.push(format!("gave up on {}", gave_up.len()));
        }
        if !cancelled.is_empty() {
            tally.push(format!("cancelled {}", cancelled.len()));
        }
        note!(
            self.progress,
            "drive {}: {} — {}, ${cost:.4} reported",
            self.run,
            tally.join(", "),
            crate::printer::duration((self.clock.now() - began).max(0) as f64)
        );
        for (what, ids, then) in [
            (
                "landed:   ",
                &landed_ids,
                "stet show ID tells each one's story",
            ),
            ("given up: ", &gave_up, "stet retry ID takes one up again"),
            (
                "cancelled:",
                &cancelled,
                "stet clean removes what they left here",
            ),
        ] {
            if !ids.is_empty() {
                note!(self.progress, "  {what} {} ({then})", ids.join(", "));
            }
        }
        Ok(if self.stop.requested() {
            self.stopped_exit()
        } else if gave_up.is_empty() {
            Exit::Success
        } else {
            Exit::GaveUp
        })
    }

    /// The next item to work: the first in queue order that is not landed, failed, done in
    /// this run, or held by another drive, and that this drive could reserve. A take that
    /// wins re-reads the item's marks: a peer may have landed it between the listing and
    /// the take.
    fn next_item(
        &self,
        items: &[queue::Entry],
        done_here: &std::collections::HashSet<String>,
    ) -> Result<Next, CliError> {
        let remote = self.remote();
        let marks = match remote.marks() {
            Ok(marks) => marks,
            Err(e) => return Ok(Next::Unreachable(short(&e))),
        };
        let open = |m: &Marks, id: &str| m.open(id);
        for item in items
            .iter()
            .filter(|i| !done_here.contains(&i.id) && open(&marks, &i.id))
        {
            let _lock = self.lock()?;
            let wanted = self.reservation(&item.id, "implement");
            match remote.take(wanted, self.clock.now(), |r| {
                ours_to_take_over(&self.holder, &r.holder)
            }) {
                Ok(held) => {
                    let still_open = remote.marks_for(&item.id).map(|m| open(&m, &item.id));
                    match still_open {
                        Ok(true) => match item.load() {
                            Ok(loaded) => {
                                self.keeper.hold(held);
                                return Ok(Next::Take(loaded));
                            }
                            Err(why) => {
                                let _ = remote.release(&held);
                                return Ok(Next::Malformed(item.id.clone(), why));
                            }
                        },
                        Ok(false) => {
                            let _ = remote.release(&held);
                        }
                        Err(e) => {
                            let _ = remote.release(&held);
                            return Ok(Next::Unreachable(short(&e)));
                        }
                    }
                }
                Err(ReservationError::HeldByOther {
                    holder, until_unix, ..
                }) => {
                    self.progress.detail(&format!(
                        "{}: reserved by {holder} until {}; skipped",
                        item.id,
                        clock(until_unix)
                    ));
                }
                Err(ReservationError::Raced { .. }) => {}
                Err(e @ ReservationError::Remote { .. }) => {
                    return Ok(Next::Unreachable(short(&e)))
                }
            }
        }
        Ok(Next::Nothing)
    }

    /// Releases reservations a drive of this clone left on items that are landed or failed
    /// (it died between marking the item and releasing): nobody would release them else.
    fn release_leftovers(&self) {
        let remote = self.remote();
        let (Ok(marks), Ok(held)) = (remote.marks(), remote.list()) else {
            return;
        };
        for h in held {
            let item = &h.reservation.item;
            let done = !marks.open(item);
            let lapsed = h.reservation.expires_at_unix <= self.clock.now();
            if done && (lapsed || ours_to_take_over(&self.holder, &h.reservation.holder)) {
                let _ = remote.release(&h);
            }
        }
    }

    /// A wait named by a move: sleeps until `until` (seconds since the epoch), never less
    /// than the wait floor from now. Returns whether the whole wait passed (not stopped).
    pub(super) fn wait(&self, reason: &str, until: i64) -> bool {
        let wake = until.max(self.clock.now() + self.options.wait_floor_secs);
        self.sleep_until(reason, wake)
    }

    /// Sleeps until `wake`, showing why; wakes early for a stop.
    pub(super) fn sleep_until(&self, reason: &str, wake: i64) -> bool {
        self.progress.wait(reason, wake);
        self.clock.sleep_until(wake, &self.stop)
    }

    fn stopped_while_waiting(&self) -> Exit {
        note!(
            self.progress,
            "stopped during a wait: run {}; nothing is reserved; resume with: stet drive",
            self.run
        );
        self.stopped_exit()
    }

    /// The exit of a drive that stopped: 128 + the signal that asked for it.
    fn stopped_exit(&self) -> Exit {
        Exit::Signal(self.stop.signal().unwrap_or(2))
    }
}

/// A reservation error in a line.
pub(super) fn short(e: &ReservationError) -> String {
    match e {
        ReservationError::Remote { detail, .. } => {
            crate::reservations::first_cause(detail).to_string()
        }
        other => other.to_string(),
    }
}
