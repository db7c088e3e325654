//! The drive's loop: pick the next item, work its lane, and deal with how that ended —
//! landed, given up, stopped, a wait named by the move, or a failure that counts toward an
//! outage.
//!
//! What an item's lane did wrong — its agent failed the task, changed nothing, answered
//! out of shape (a review without LAND or REVISE, output its harness cannot read), its
//! check failed, its reviewer asked for changes — counts toward that item's rounds, with
//! the agent's words shown and handed to the next round, and never holds the queue: after
//! `--rounds` the item is given up and the drive goes on. The outage schedule is for what
//! is wrong outside any item: the sandbox or the harness cannot start a call, the model
//! API does not answer (three of those in a row). A usage limit holds every lane until its
//! reset, when that is within the outage limit; one further away stops the drive (exit
//! 3), naming the reset and the command to resume; so does a login the model API refuses,
//! saying to log in again.

use crate::error::{Concept, Error};
use crate::queue;
use crate::reservations::{Remote, ReservationError};

use super::ahead::{NextAhead, NextLane};
use super::state::{duration, ItemEnd, Outage, Tally};
use super::worker::{short, Worker};
use super::{clock, note, ours_to_take_over, Drive, Ended};

/// How the search for the next item ended.
pub(in crate::drive) enum Next {
    Take(queue::Item),
    /// An item whose file cannot be read as one: reported and skipped.
    Malformed(String, String),
    Nothing,
    Unreachable(String),
}

impl Drive<'_> {
    pub(in crate::drive) fn remote(&self) -> Remote<'_> {
        Remote {
            repo: &self.repo,
            name: &self.options.remote,
        }
    }

    pub(in crate::drive) fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every lane stops at its next move.
    pub(in crate::drive) fn halt(&self) {
        self.tally().halt();
    }

    /// Drains the queue with `--jobs` lanes at once, each a thread taking items until none
    /// is left, then says what became of them.
    pub(in crate::drive) fn drain(&self, items: &[queue::Entry]) -> Result<Ended, Error> {
        self.release_leftovers();
        let began = self.clock.now();
        self.began
            .store(began, std::sync::atomic::Ordering::Relaxed);
        self.show_overall();
        // Every sandbox the lanes retire is removed before the drive says how it ended.
        let ends: Vec<Result<Ended, Error>> =
            crate::sandbox::with_reaper(&self.runtime, |reaper| {
                std::thread::scope(|scope| {
                    let lanes: Vec<_> =
                        self.slots
                            .iter()
                            .enumerate()
                            .map(|(slot, held)| {
                                let worker = Worker {
                                    drive: self,
                                    slot,
                                    keeper: &held.keeper,
                                    in_flight: &held.in_flight,
                                    reaper,
                                };
                                scope.spawn(move || {
                                    // A lane that panics (a bug) ends the drive as an error, never the
                                    // other lanes' calls in flight: they finish, and stop there.
                                    let end = std::panic::catch_unwind(
                                        std::panic::AssertUnwindSafe(|| worker.run(items)),
                                    )
                                    .unwrap_or_else(|panic| {
                                        Err(Concept::Drive.failure(format!(
                                            "lane {} of the drive failed: {}",
                                            slot + 1,
                                            crate::text::panic_message(panic.as_ref())
                                        )))
                                    });
                                    if !matches!(end, Ok(Ended::Done)) {
                                        let _ = worker.keeper.release();
                                    }
                                    if matches!(end, Err(_) | Ok(Ended::Unusable)) {
                                        worker.drive.halt();
                                    }
                                    end
                                })
                            })
                            .collect();
                    lanes
                        .into_iter()
                        .map(|lane| {
                            lane.join().unwrap_or_else(|_| {
                                Err(Concept::Drive.failure("a lane of the drive failed"))
                            })
                        })
                        .collect()
                })
            });
        crate::lanes::pool_ready();
        let mut unusable = false;
        for end in ends {
            unusable |= matches!(end?, Ended::Unusable);
        }
        let tally = std::mem::take(&mut *self.tally());
        if self.stop.requested() && !tally.said_stop {
            note!(
                self.progress,
                "stopped: run {}; nothing is reserved; resume with: stet drive",
                self.run
            );
        }
        self.summarize(&tally, began);
        Ok(if unusable {
            Ended::Unusable
        } else if self.stop.requested() {
            self.stopped_exit()
        } else if tally.gave_up.is_empty() && tally.land_failed.is_empty() {
            Ended::Done
        } else {
            Ended::GaveUp
        })
    }

    /// The overall line as the tally stands now (`progress::Overall`).
    pub(in crate::drive) fn show_overall(&self) {
        let overall = {
            let tally = self.tally();
            let landed = tally.landed.len();
            let gave_up = tally.gave_up.len();
            super::progress::Overall {
                planned: self.planned,
                landed,
                gave_up,
                other: tally
                    .done
                    .len()
                    .saturating_sub(landed + gave_up)
                    .min(self.planned.saturating_sub(landed + gave_up)),
                cost_usd: tally.cost_usd,
                elapsed_secs: self.clock.now()
                    - self.began.load(std::sync::atomic::Ordering::Relaxed),
                stopping: None,
            }
        };
        self.progress.overall(&overall);
    }

    /// The closing summary: what became of each item taken, how long, what it cost, and
    /// the command that tells more.
    fn summarize(&self, tally: &Tally, began: i64) {
        let (receipts, _) = crate::receipts::read_all(&self.repo);
        let cost: f64 = receipts
            .iter()
            .filter(|r| r.run == self.run)
            .filter_map(|r| r.cost_usd)
            .fold(0.0, |a, b| a + b);
        let mut counts = vec![format!("landed {}", tally.landed.len())];
        if !tally.land_failed.is_empty() {
            counts.push(format!(
                "{} without its land step",
                crate::printer::count(tally.land_failed.len(), "item", "items")
            ));
        }
        if !tally.gave_up.is_empty() {
            counts.push(format!("gave up on {}", tally.gave_up.len()));
        }
        if !tally.cancelled.is_empty() {
            counts.push(format!("cancelled {}", tally.cancelled.len()));
        }
        note!(
            self.progress,
            "drive {}: {} — {}, ${cost:.4} reported",
            self.run,
            counts.join(", "),
            crate::printer::duration((self.clock.now() - began).max(0) as f64)
        );
        for (what, ids, then) in [
            (
                "landed:   ",
                &tally.landed,
                "stet show ID tells each one's story",
            ),
            (
                "land step failed:",
                &tally.land_failed,
                "stet land ID makes it again; stet show ID says why",
            ),
            (
                "given up: ",
                &tally.gave_up,
                "stet retry ID takes one up again",
            ),
            (
                "cancelled:",
                &tally.cancelled,
                "stet clean removes what they left here",
            ),
        ] {
            if !ids.is_empty() {
                note!(self.progress, "  {what} {} ({then})", ids.join(", "));
            }
        }
    }

    /// Releases reservations a drive of this clone left on items that are landed or failed
    /// (it died between marking the item and releasing): nobody would release them else.
    pub(in crate::drive) fn release_leftovers(&self) {
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

    /// The exit of a drive that stopped: 128 + the signal that asked for it.
    pub(in crate::drive) fn stopped_exit(&self) -> Ended {
        Ended::Stopped(self.stop.signal().unwrap_or(2))
    }
}

impl Worker<'_, '_> {
    /// This lane's loop: take the next item, work its lane, deal with how that ended;
    /// until nothing is left to take, the cap is reached, a stop, or the drive halts.
    pub(in crate::drive) fn run(&self, items: &[queue::Entry]) -> Result<Ended, Error> {
        let maker = super::lane::NextMaker {
            worker: self,
            items,
        };
        // The next item's lane is made on a thread of this scope while an item's last
        // stages run; what is made and not taken is let go before the lane's loop ends.
        std::thread::scope(|scope| {
            let next = NextAhead::new(scope, &maker);
            let mut pending = None;
            let end = self.take_and_work(items, &next, &mut pending);
            if let Some(made) = pending {
                next.let_go(made);
            }
            next.cancel();
            end
        })
    }

    pub(in crate::drive) fn take_and_work<'env>(
        &'env self,
        items: &[queue::Entry],
        next: &NextAhead<'_, 'env>,
        pending: &mut Option<NextLane<'env>>,
    ) -> Result<Ended, Error> {
        let mut unreachable: Option<Outage> = None;
        loop {
            if self.ending() {
                return Ok(Ended::Done);
            }
            // The item made ahead is taken first (it was the first this lane could take
            // when it was made ready); a take it loses, or another lane's taking it over,
            // lets it go.
            let (item, opened) = match pending
                .take()
                .and_then(|made| self.take_made(items, made, next))
            {
                Some((item, made)) => (item, Some(made)),
                None => match self.next_item(items)? {
                    Next::Take(item) => (item, None),
                    Next::Malformed(id, why) => {
                        self.drive.progress.warn(&format!("skipped {id}: {why}"));
                        self.drive.tally().done.insert(id);
                        continue;
                    }
                    Next::Nothing => return Ok(Ended::Done),
                    Next::Unreachable(detail) => {
                        match self.wait_for_remote(&mut unreachable, &detail) {
                            Some(exit) => return Ok(exit),
                            None => continue,
                        }
                    }
                },
            };
            unreachable = None;
            note!(
                self.drive.progress,
                "{}: reserved; lane {}",
                item.id,
                crate::lanes::branch_of(&item.id)
            );
            let end = self.work(&item, opened, next);
            self.drive.progress.idle(self.slot);
            *pending = next.take();
            // Whatever became of the item, its reservation is released: landed and given-up
            // items are done, a stopped or waiting one goes back to the queue.
            if let Err(e) = self.keeper.release() {
                self.drive.progress.warn(&format!(
                    "{}: could not release the reservation ({e}); it lapses by itself",
                    item.id
                ));
            }
            let end = match end {
                Ok(end) => end,
                Err(e) => {
                    self.drive.tally().working.remove(&item.id);
                    return Err(e);
                }
            };
            // Only a landed item is followed by the one made ahead: any other end keeps
            // the queue's order (the item may be taken again), and a wait would hold the
            // next one's sandbox idle.
            if !matches!(end, ItemEnd::Landed | ItemEnd::LandFailed(_)) {
                if let Some(made) = pending.take() {
                    next.let_go(made);
                }
            }
            if let Some(exit) = self.account(&item, end)? {
                return Ok(exit);
            }
        }
    }

    /// The remote did not answer the search for the next item: a wait named by the move,
    /// backing off from the floor, doubling to ten minutes. `Some` ends the lane's loop:
    /// the remote has been gone for the outage limit, or a stop came during the wait.
    pub(in crate::drive) fn wait_for_remote(
        &self,
        unreachable: &mut Option<Outage>,
        detail: &str,
    ) -> Option<Ended> {
        let state = unreachable.get_or_insert_with(|| Outage {
            started_unix: self.drive.clock.now(),
            step: 0,
        });
        if self.drive.clock.now() - state.started_unix >= self.drive.options.outage_limit_secs {
            note!(
                self.drive.progress,
                "the remote {} has not answered for {}: the drive stops; lanes stay on their branches",
                self.drive.options.remote,
                duration(self.drive.clock.now() - state.started_unix)
            );
            return Some(Ended::Unusable);
        }
        let backoff = (self.drive.options.wait_floor_secs << state.step.min(16)).min(600);
        state.step += 1;
        let waited = self.wait(
            &format!(
                "the remote {} did not answer ({detail})",
                self.drive.options.remote
            ),
            self.drive.clock.now() + backoff,
        );
        (!waited).then(|| self.stopped_while_waiting())
    }

    /// Takes the item made ahead on the remote, as [`Worker::take`] does any item;
    /// `None` (and the item let go) if another lane took it over, or the take does not win
    /// it.
    pub(in crate::drive) fn take_made<'env>(
        &self,
        items: &[queue::Entry],
        made: NextLane<'env>,
        next: &NextAhead<'_, 'env>,
    ) -> Option<(queue::Item, NextLane<'env>)> {
        let entry = items.iter().find(|i| i.id == made.id);
        if entry.is_none() || !self.claim_made(&made.id) {
            next.let_go(made);
            return None;
        }
        match entry.map(|entry| self.take(entry)) {
            Some(Ok(Some(Next::Take(item)))) => Some((item, made)),
            // Held by another drive, landed meanwhile, unreadable, or the remote did not
            // answer: the ordinary search says so and goes on.
            _ => {
                self.drive.tally().working.remove(&made.id);
                next.let_go(made);
                None
            }
        }
    }

    /// Deals with how `item`'s lane ended: counts it, says it, and waits where the end
    /// names a wait. `Some` ends this lane's loop with that exit.
    pub(in crate::drive) fn account(
        &self,
        item: &queue::Item,
        end: ItemEnd,
    ) -> Result<Option<Ended>, Error> {
        if self.counts_toward_outage(item, &end) {
            return Ok(self.outage_wait());
        }
        match end {
            ItemEnd::RunnerFailed(_) => {}
            ItemEnd::LoginRefused(why) => {
                self.drive.halt();
                note!(
                    self.drive.progress,
                    "{}: the model API refused the profile's login ({why}): the drive stops, nothing reserved, no item failed; log in again (stet profile login), then resume with: stet drive",
                    item.id
                );
                return Ok(Some(Ended::Unusable));
            }
            ItemEnd::Landed => {
                {
                    let mut tally = self.drive.tally();
                    tally.landed.push(item.id.clone());
                    tally.done.insert(item.id.clone());
                }
                note!(
                    self.drive.progress,
                    "{}: landed on {} as {}",
                    item.id,
                    self.drive.options.remote,
                    crate::lanes::branch_of(&item.id)
                );
                self.drive.show_overall();
            }
            ItemEnd::LandFailed(why) => {
                {
                    let mut tally = self.drive.tally();
                    tally.landed.push(item.id.clone());
                    tally.land_failed.push(item.id.clone());
                    tally.done.insert(item.id.clone());
                }
                self.drive.progress.warn(&format!(
                    "{}: landed on {} as {}, {why}; the branch is kept (stet land {} makes the land step again)",
                    item.id,
                    self.drive.options.remote,
                    crate::lanes::branch_of(&item.id),
                    crate::queue::handle_of(&item.id)
                ));
            }
            ItemEnd::GaveUp(why) => {
                // Marked failed on the remote, with why, by the lane.
                note!(
                    self.drive.progress,
                    "{}: given up: {why} (stet retry {} takes it up again)",
                    item.id,
                    crate::queue::handle_of(&item.id)
                );
                let mut tally = self.drive.tally();
                tally.done.insert(item.id.clone());
                tally.gave_up.push(item.id.clone());
                drop(tally);
                self.drive.show_overall();
            }
            ItemEnd::Lost(why) => {
                note!(
                    self.drive.progress,
                    "{}: another drive took the lane over ({why}); leaving it",
                    item.id
                );
                self.drive.tally().done.insert(item.id.clone());
                self.drive.show_overall();
            }
            ItemEnd::Left(why) => {
                note!(self.drive.progress, "{}: left as it is: {why}", item.id);
                self.drive.tally().done.insert(item.id.clone());
                self.drive.show_overall();
            }
            ItemEnd::Cancelled(note) => {
                note!(
                    self.drive.progress,
                    "{}: cancelled ({note}); its lane stopped, its branch and checkpoint kept on the remote",
                    item.id
                );
                let mut tally = self.drive.tally();
                tally.done.insert(item.id.clone());
                tally.cancelled.push(item.id.clone());
                drop(tally);
                self.drive.show_overall();
            }
            ItemEnd::Stopped(branch) => {
                note!(
                    self.drive.progress,
                    "stopped: run {}, lane {branch} (its checkpoint and any change pushed, reservation released); resume with: stet drive",
                    self.drive.run
                );
                self.drive.tally().said_stop = true;
                return Ok(Some(self.drive.stopped_exit()));
            }
            ItemEnd::RemoteUnreachable(detail) => {
                let backoff = self.drive.options.wait_floor_secs;
                if !self.wait(
                    &format!(
                        "{}: the remote {} did not answer ({detail}); the lane stays here",
                        item.id, self.drive.options.remote
                    ),
                    self.drive.clock.now() + backoff,
                ) {
                    return Ok(Some(self.stopped_while_waiting()));
                }
            }
            ItemEnd::RateLimited(until) => return Ok(self.usage_limited(item, until)),
        }
        Ok(None)
    }

    /// Counts `end` toward an outage: a call that could not be made (three in a row over
    /// all lanes) enters the outage schedule; any other end but an unreachable remote ends
    /// an outage in progress. What an agent answered, in whatever shape, is its item's
    /// round, never an outage.
    fn counts_toward_outage(&self, item: &queue::Item, end: &ItemEnd) -> bool {
        let mut tally = self.drive.tally();
        tally.working.remove(&item.id);
        match end {
            ItemEnd::RunnerFailed(why) => {
                tally.runner_failures += 1;
                note!(
                    self.drive.progress,
                    "{}: a call could not be made ({why}); the lane stays at its checkpoint",
                    item.id
                );
                tally.runner_failures >= 3
            }
            ItemEnd::RemoteUnreachable(_) => false,
            _ => {
                tally.runner_failures = 0;
                tally.outage = None;
                false
            }
        }
    }

    /// An outage holds every lane, on the drive's schedule; past the outage limit the drive
    /// stops. `Some` ends this lane's loop with that exit.
    fn outage_wait(&self) -> Option<Ended> {
        // An outage holds every lane: the wait is the drive's, not this lane's alone.
        let (wait, reason) = {
            let mut tally = self.drive.tally();
            tally.runner_failures = 0;
            let now = self.drive.clock.now();
            let state = tally.outage.get_or_insert(Outage {
                started_unix: now,
                step: 0,
            });
            if now - state.started_unix >= self.drive.options.outage_limit_secs {
                let lasted = now - state.started_unix;
                tally.halt();
                drop(tally);
                note!(
                    self.drive.progress,
                    "outage for {}: the drive stops; nothing was handed back, the lanes stay on their branches",
                    duration(lasted)
                );
                return Some(Ended::Unusable);
            }
            let schedule = &self.drive.options.outage_schedule_secs;
            let wait = schedule[(state.step as usize).min(schedule.len() - 1)];
            state.step += 1;
            let reason = format!("outage: trying again after {}", duration(wait));
            tally.pause(now + wait, reason.clone());
            (wait, reason)
        };
        // The outage schedule is its own: the floor is for waits a move names.
        if !self.sleep_until(&reason, self.drive.clock.now() + wait) {
            return Some(self.stopped_while_waiting());
        }
        None
    }

    /// The agent hit its usage limit, which resets at `until` if it said: every lane's next
    /// launch waits for the reset (they share the login), or the drive stops when the reset
    /// is further away than an outage may last. `Some` ends this lane's loop.
    fn usage_limited(&self, item: &queue::Item, until: Option<i64>) -> Option<Ended> {
        // A reset further away than an outage may last (a weekly limit, or an agent
        // naming the year 2100) is not slept through: the drive stops, and says
        // when to run it again.
        let now = self.drive.clock.now();
        if let Some(at) =
            until.filter(|at| at.saturating_sub(now) > self.drive.options.outage_limit_secs)
        {
            self.drive.halt();
            let away = at.saturating_sub(now);
            note!(
                    self.drive.progress,
                    "{}: the agent hit its usage limit, which resets at {} (in {}), later than the outage limit ({}): the drive stops, nothing reserved, no item failed; resume with: stet drive, after {}",
                    item.id,
                    super::progress::utc(at),
                    if away >= 2 * 86_400 {
                        format!("{} days", away / 86_400)
                    } else {
                        crate::printer::duration(away as f64)
                    },
                    duration(self.drive.options.outage_limit_secs),
                    super::progress::utc(at)
                );
            return Some(Ended::Unusable);
        }
        // Every lane's next launch waits for the reset too: they share the login.
        let reason = format!("{}: the agent hit its usage limit", item.id);
        let wake = until
            .unwrap_or(0)
            .max(self.drive.clock.now() + self.drive.options.wait_floor_secs);
        self.drive.tally().pause(wake, reason.clone());
        if !self.wait(&reason, wake) {
            return Some(self.stopped_while_waiting());
        }
        None
    }

    /// Claims `id` for this lane, unless the drive is done with it, another lane works it,
    /// or the lanes at work would reach the cap. An item another lane only made ready
    /// ahead is taken over.
    pub(in crate::drive) fn claim(&self, id: &str) -> bool {
        let mut tally = self.drive.tally();
        if tally.halted() || tally.done.contains(id) || tally.working.contains(id) {
            return false;
        }
        if !tally.ahead.remove(id) && tally.at_cap(self.drive.options.cap) {
            return false;
        }
        tally.working.insert(id.to_string())
    }

    /// Claims `id` to be made ready ahead by this lane: as [`Worker::claim`], but an item
    /// made ready by another lane is left to it, and the claim is one another lane may
    /// take over until [`Worker::claim_made`].
    pub(in crate::drive) fn claim_ahead(&self, id: &str) -> bool {
        let mut tally = self.drive.tally();
        if tally.halted()
            || tally.done.contains(id)
            || tally.working.contains(id)
            || tally.ahead.contains(id)
            || tally.at_cap(self.drive.options.cap)
        {
            return false;
        }
        tally.ahead.insert(id.to_string())
    }

    /// Turns this lane's claim ahead on `id` into a claim to work it; `false` when another
    /// lane took it over meanwhile.
    pub(in crate::drive) fn claim_made(&self, id: &str) -> bool {
        let mut tally = self.drive.tally();
        tally.ahead.remove(id) && tally.working.insert(id.to_string())
    }

    /// Drops this lane's claim ahead on `id`, if it still holds it.
    pub(in crate::drive) fn unclaim_ahead(&self, id: &str) {
        self.drive.tally().ahead.remove(id);
    }

    /// The next item to work: the first in queue order that is not landed, failed, done in
    /// this run, worked by another lane, or held by another drive, and that this drive
    /// could reserve. A take that wins re-reads the item's marks: a peer may have landed
    /// it between the listing and the take.
    pub(in crate::drive) fn next_item(&self, items: &[queue::Entry]) -> Result<Next, Error> {
        let remote = self.drive.remote();
        let marks = match remote.marks() {
            Ok(marks) => marks,
            Err(e) => return Ok(Next::Unreachable(short(&e))),
        };
        for item in items.iter().filter(|i| marks.open(&i.id)) {
            if !self.claim(&item.id) {
                continue;
            }
            match self.take(item) {
                Ok(Some(Next::Take(loaded))) => return Ok(Next::Take(loaded)),
                taken => {
                    self.drive.tally().working.remove(&item.id);
                    match taken? {
                        Some(end) => return Ok(end),
                        None => continue,
                    }
                }
            }
        }
        Ok(Next::Nothing)
    }

    /// Reserves `item` on the remote, under the drain lock. `None`: another drive holds
    /// it, or it was landed meanwhile; look further.
    pub(in crate::drive) fn take(&self, item: &queue::Entry) -> Result<Option<Next>, Error> {
        let remote = self.drive.remote();
        let _lock = self.lock()?;
        let wanted = self.reservation(&item.id, "implement");
        match remote.take(wanted, self.drive.clock.now(), |r| {
            ours_to_take_over(&self.drive.holder, &r.holder)
        }) {
            Ok(held) => match remote.marks_for(&item.id).map(|m| m.open(&item.id)) {
                Ok(true) => match item.load() {
                    Ok(loaded) => {
                        self.keeper.hold(held);
                        Ok(Some(Next::Take(loaded)))
                    }
                    Err(why) => {
                        let _ = remote.release(&held);
                        Ok(Some(Next::Malformed(item.id.clone(), why)))
                    }
                },
                Ok(false) => {
                    let _ = remote.release(&held);
                    Ok(None)
                }
                Err(e) => {
                    let _ = remote.release(&held);
                    Ok(Some(Next::Unreachable(short(&e))))
                }
            },
            Err(ReservationError::HeldByOther {
                holder, until_unix, ..
            }) => {
                self.drive.progress.detail(&format!(
                    "{}: reserved by {holder} until {}; skipped",
                    item.id,
                    clock(until_unix)
                ));
                Ok(None)
            }
            Err(ReservationError::Raced { .. }) => Ok(None),
            Err(e @ ReservationError::Remote { .. }) => Ok(Some(Next::Unreachable(short(&e)))),
        }
    }
}
