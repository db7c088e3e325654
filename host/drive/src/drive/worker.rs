//! One lane of the drive at work: what it holds alone, and what every stage of its lane
//! does the same way — enter a stage, pace a launch, wait, save a checkpoint, finish the
//! item. The stages themselves are in `lane/`; the loop that takes items is in `drain.rs`.
//!
//! A `Worker` reaches what the lanes share through `drive` (the drive's settings, its
//! plugins, its tally) and holds its own reservation keeper and agent call in flight.

use crate::checkpoints::{Checkpoint, Mark, SaveError};
use crate::error::{Concept, Error};
use crate::lanes::{self, Lane};
use crate::receipts;
use crate::reservations::{Reservation, ReservationError};

use super::state::{Hold, ItemEnd};
use super::{note, Drive, Ended};

/// One of the drive's lanes at work: the drive's shared parts, and what this lane holds
/// alone — its reservation's keeper and its agent call in flight.
pub(in crate::drive) struct Worker<'d, 'a> {
    pub(in crate::drive) drive: &'d Drive<'a>,
    /// Which lane of the drive this is (from 0), for its line of the display.
    pub(in crate::drive) slot: usize,
    pub(in crate::drive) keeper: &'d super::keeper::Keeper,
    pub(in crate::drive) in_flight: &'d crate::harness::InFlight,
    /// Removes the lane's sandboxes once they are stopped, off its critical path.
    pub(in crate::drive) reaper: &'d crate::sandbox::Reaper,
}

impl Worker<'_, '_> {
    /// Whether this lane should take no new move: a stop was asked, or the drive halted.
    pub(in crate::drive) fn ending(&self) -> bool {
        self.drive.stop.requested() || self.drive.tally().halted()
    }

    /// A wait named by a move: sleeps until `until` (seconds since the epoch), never less
    /// than the wait floor from now. Returns whether the whole wait passed (not stopped).
    pub(in crate::drive) fn wait(&self, reason: &str, until: i64) -> bool {
        let wake = until.max(self.drive.clock.now() + self.drive.options.wait_floor_secs);
        self.sleep_until(reason, wake)
    }

    /// Sleeps until `wake`, showing why on this lane's line; wakes early for a stop.
    pub(in crate::drive) fn sleep_until(&self, reason: &str, wake: i64) -> bool {
        self.drive.progress.wait(self.slot, reason, wake);
        self.drive.clock.sleep_until(wake, &self.drive.stop)
    }

    /// Before a launch: a wait every lane keeps (a usage limit's reset, an outage's), if
    /// one is on. Returns false when a stop cut it short.
    pub(in crate::drive) fn paused(&self) -> bool {
        loop {
            let hold = self.drive.tally().hold.clone();
            match hold {
                Hold::Paused { until, why } if until > self.drive.clock.now() => {
                    if !self.sleep_until(&why, until) {
                        return false;
                    }
                }
                _ => return true,
            }
        }
    }

    pub(in crate::drive) fn stopped_while_waiting(&self) -> Ended {
        let mut tally = self.drive.tally();
        if !tally.said_stop {
            tally.said_stop = true;
            drop(tally);
            note!(
                self.drive.progress,
                "stopped during a wait: run {}; nothing is reserved; resume with: stet drive",
                self.drive.run
            );
        }
        self.drive.stopped_exit()
    }
}

impl Worker<'_, '_> {
    pub(in crate::drive) fn reservation(&self, item: &str, stage: &str) -> Reservation {
        Reservation {
            item: item.to_string(),
            holder: self.drive.holder.clone(),
            lane: lanes::branch_of(item),
            stage: stage.to_string(),
            expires_at_unix: self.drive.clock.now() + self.drive.options.lease_secs,
        }
    }

    /// The drain lock, held for one move.
    pub(in crate::drive) fn lock(&self) -> Result<nix::fcntl::Flock<std::fs::File>, Error> {
        let path = receipts::git_dir(&self.drive.repo).join("stet/drain.lock");
        crate::files::lock_exclusive(&path).map_err(|e| {
            Concept::Drive.failure(format!(
                "cannot take the drain lock {}: {e}",
                path.display()
            ))
        })
    }

    /// A new stage of `lane`: a move. The keeper keeps the stage for the reservation's next
    /// write; a reservation another drive took over ends the lane's work here.
    pub(in crate::drive) fn enter(&self, lane: &Lane, stage: &str) -> Result<(), ItemEnd> {
        let r#move = self
            .drive
            .moves
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1;
        self.drive
            .progress
            .stage(self.slot, r#move, &lane.item, &lane.branch, stage);
        self.keeper.set_stage(stage).map_err(ItemEnd::Lost)?;
        // Cancelled on the remote (`stet rm`) since the last move: stop here. A remote that
        // does not answer now is the keeper's to report; the move goes on.
        if let Ok(marks) = self.drive.remote().marks_for(&lane.item) {
            if marks.cancelled.contains(&lane.item) {
                let note = self
                    .drive
                    .remote()
                    .mark_note(crate::reservations::CANCELLED, &lane.item)
                    .unwrap_or_else(|| "cancelled on the remote".to_string());
                return Err(ItemEnd::Cancelled(note));
            }
        }
        if let Some(why) = self.keeper.unreachable() {
            let until = self
                .keeper
                .lapse()
                .map(|(_, at)| super::clock(at))
                .unwrap_or_default();
            self.drive.progress.warn(&format!(
                "cannot renew the reservation of {} ({why}); it lapses at {until} unless the remote answers",
                lane.item
            ));
        }
        Ok(())
    }

    /// Before a launch: a wait every lane keeps, if one is on, then the pace since the last
    /// launch of any lane. Returns false when a stop cut a wait short, or the drive is
    /// ending (no agent is launched then).
    pub(in crate::drive) fn pace(&self) -> bool {
        // A lane that ended the drive meanwhile (a usage limit reset far away, an outage
        // past its limit) holds every further launch too.
        if !self.paused() || self.ending() {
            return false;
        }
        let pace = self.drive.options.pace_secs;
        // The launch's time is claimed under the lock, so two lanes never take one slot.
        let wake = {
            let mut last = self
                .drive
                .last_launch
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let now = self.drive.clock.now();
            let wake = match *last {
                Some(last) if pace > 0 && now <= last + pace => {
                    Some((last + pace).max(now + self.drive.options.wait_floor_secs))
                }
                _ => None,
            };
            *last = Some(wake.unwrap_or(now));
            wake
        };
        match wake {
            Some(wake) => self.sleep_until("pace between agent launches", wake),
            None => true,
        }
    }

    /// Marks the item landed or failed on the remote (its checkpoint goes in the same
    /// push) and, once landed, removes the working copy. A remote that does not answer
    /// leaves the checkpoint as it was: the next attempt does only what is left.
    pub(in crate::drive) fn finish(
        &self,
        lane: &Lane,
        mark: Mark,
        note: &str,
        had_checkpoint: bool,
    ) -> ItemEnd {
        // One atomic push: the mark, the checkpoint's removal and the release.
        let finished = self.keeper.releasing(|held| {
            self.drive
                .remote()
                .finish_item_releasing(&lane.item, mark, note, had_checkpoint, held)
        });
        match finished {
            Ok(()) => {}
            Err(SaveError::TakenByPeer(why)) => return ItemEnd::Lost(why),
            Err(SaveError::Remote(e)) => return ItemEnd::RemoteUnreachable(short(&e)),
        }
        match mark {
            Mark::Landed => {
                // Its directories make the next new lane: as many as there are lanes.
                // (Made ready for the pool off the lane's path; the drive waits for it at
                // its end.)
                lane.retire(self.drive.options.jobs, self.base_of(lane).ok().as_deref());
                ItemEnd::Landed
            }
            Mark::Failed => ItemEnd::GaveUp(note.to_string()),
        }
    }

    /// Saves `checkpoint` under the drain lock on the remote, with the lane's branch when
    /// the lane holds a change (nothing is pushed for a lane that holds none), if the
    /// reservation is still this drive's. `Some` ends the lane's work: the reservation or
    /// the branch was taken by a peer, or the remote did not answer (then the receipts of
    /// this clone are the record until the next save).
    pub(in crate::drive) fn save(
        &self,
        lane: &Lane,
        checkpoint: &Checkpoint,
    ) -> Result<Option<ItemEnd>, Error> {
        let _lock = self.lock()?;
        if let Some(why) = self.keeper.lost() {
            return Ok(Some(ItemEnd::Lost(why)));
        }
        let checkpoint = Checkpoint {
            head: lane.head().unwrap_or_default(),
            ..checkpoint.clone()
        };
        let changed = self.changed(lane)?;
        if changed {
            if let Some(end) = self.refuse_secrets(lane, &checkpoint)? {
                return Ok(Some(end));
            }
            if let Some(end) = self.refuse_repositories(lane, &checkpoint)? {
                return Ok(Some(end));
            }
        }
        // The push renews the reservation too: no push of its own is needed for that.
        let saved = self.keeper.renewing(|renewal| {
            self.drive.remote().save_checkpoint_renewing(
                &lane.item,
                &checkpoint,
                changed.then_some(lane.branch.as_str()),
                renewal,
            )
        });
        match saved {
            Ok(()) => Ok(None),
            Err(SaveError::TakenByPeer(why)) => {
                Ok(Some(ItemEnd::Lost(format!("taken by a peer: {why}"))))
            }
            Err(SaveError::Remote(e)) => Ok(Some(ItemEnd::RemoteUnreachable(short(&e)))),
        }
    }

    /// Whether the lane holds a change against its base (its tree differs from the tree
    /// it started from). Brings the lane's branch back into the repository first.
    pub(in crate::drive) fn changed(&self, lane: &Lane) -> Result<bool, Error> {
        lane.bring_back(&self.drive.repo).map_err(|e| {
            Concept::Drive
                .failure(format!("cannot bring the lane {} back", lane.branch))
                .caused_by(e.to_string())
        })?;
        let base = self.base_of(lane)?;
        let tree =
            |rev: &str| lanes::git(&self.drive.repo, &["rev-parse", &format!("{rev}^{{tree}}")]);
        Ok(tree(&base).ok() != tree(&format!("refs/heads/{}", lane.branch)).ok())
    }

    /// Where the lane branched off the drive's base (the remote's, `base.rs`): the lane
    /// started there, or (a lane from an earlier drive) at an older commit of the same
    /// branch, which the base's history holds.
    pub(in crate::drive) fn base_of(&self, lane: &Lane) -> Result<String, Error> {
        lanes::git(
            &self.drive.repo,
            &[
                "merge-base",
                &self.drive.base.commit,
                &format!("refs/heads/{}", lane.branch),
            ],
        )
        .map_err(|e| {
            Concept::Drive
                .failure(format!(
                    "cannot find where the lane {} branched off {}",
                    lane.branch, self.drive.base.name
                ))
                .caused_by(e.to_string())
        })
    }
}

/// A reservation error in a line.
pub(in crate::drive) fn short(e: &ReservationError) -> String {
    match e {
        ReservationError::Remote { detail, .. } => {
            crate::reservations::first_cause(detail).to_string()
        }
        other => other.to_string(),
    }
}

/// At most `lines` last lines and `bytes` last bytes of `text`.
pub(in crate::drive) fn tail(text: &str, lines: usize, bytes: usize) -> String {
    let text = text.trim_end();
    let mut start = text.len().saturating_sub(bytes);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let cut = &text[start..];
    let kept: Vec<&str> = cut.lines().collect();
    kept[kept.len().saturating_sub(lines)..].join("\n")
}

/// The first line of `text`, for a one-line reason.
pub(in crate::drive) fn first_line(text: &str) -> &str {
    text.trim().lines().next().unwrap_or_default()
}

/// `text` indented under the line it belongs to.
pub(in crate::drive) fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What an agent said, as the drive shows it: its last lines, indented, or that it said
/// nothing.
pub(in crate::drive) fn shown_words(said: &str) -> String {
    let said = tail(said.trim(), 12, 4096);
    indent(if said.is_empty() { "(nothing)" } else { &said })
}

/// Why a lane could not be opened, for `item`.
pub(in crate::drive) fn cannot_open(item: &str, e: lanes::GitError) -> Error {
    Concept::Drive
        .failure(format!("cannot open the lane of {item}"))
        .caused_by(e.to_string())
}
