//! One lane's stages: implement → check → review → land, each a move under the drain lock,
//! each agent call recorded before it starts and again before the next move. This file is
//! the state machine that goes from checkpoint to checkpoint; each stage is a file of its
//! own beside it.

mod ahead;
mod call;
mod check;
mod implement;
mod land;
mod prompt;
mod review;
mod scan;

pub(in crate::drive) use ahead::NextMaker;

use crate::checkpoints::{Checkpoint, Mark, Next};
use crate::error::Error;
use crate::lanes::{self, Lane};
use crate::queue;
use crate::receipts;

use super::ahead::{Ahead, NextAhead, NextLane};
use super::note;
use super::state::ItemEnd;
use super::worker::{cannot_open, short, Worker};
use call::Call;

/// What a move did: the lane goes on from a new checkpoint, or its work ends here (for
/// now).
pub(in crate::drive) enum Moved {
    On(Checkpoint),
    End(ItemEnd),
    /// The item fails here, for this reason (marked on the remote).
    Fail(String),
}

/// A lane whose checkpoint names a move this stet does not know is a newer stet's: left
/// to it, never worked from the start again (which would pay for its calls twice).
fn unknown_move() -> ItemEnd {
    ItemEnd::Left(
        "its checkpoint names a move this stet does not know: a newer stet's lane, left to it"
            .to_string(),
    )
}

impl Worker<'_, '_> {
    /// Works `item`'s lane from its checkpoint until it lands, is given up, or its work
    /// ends for now (a stop, a wait, an outage, a peer taking it over). Each move that
    /// finishes is checkpointed on the remote with the lane's branch before the next one
    /// starts, so a resumed lane never makes a finished call again. `opened` is the lane
    /// and first call made ahead for it, if they were; `next` makes the item after it
    /// ahead once this one is past its implementing call.
    pub(in crate::drive) fn work<'env>(
        &'env self,
        item: &queue::Item,
        opened: Option<NextLane<'env>>,
        next: &NextAhead<'_, '_>,
    ) -> Result<ItemEnd, Error> {
        // The working copy is made outside the drain lock (it writes only the lane's own
        // directory), so other lanes move meanwhile; the repository's copy of the branch
        // is a move of its own.
        // A lane made ahead is opened again all the same: it catches up with what a peer
        // pushed since (its sandbox mounts the same directories).
        let ready = opened.and_then(|opened| opened.implement);
        let lane = match lanes::open(
            &self.drive.repo,
            &self.drive.options.remote,
            &item.id,
            &self.drive.base.commit,
            self.drive.lane_bounds(),
        ) {
            Ok(lane) => lane,
            Err(e) => {
                if let Some(call) = ready {
                    call.discard(Some(self.reaper));
                }
                return Err(cannot_open(&item.id, e));
            }
        };
        if let Err(e) = self.drive.give_seed(&lane) {
            if let Some(call) = ready {
                call.discard(Some(self.reaper));
            }
            return Err(e);
        }
        // The later stages' sandboxes are made on threads of this scope while the earlier
        // ones run; whatever no stage took is retired before the lane is let go.
        std::thread::scope(|scope| {
            let mut ahead = Ahead::new(scope);
            ahead.implement_ready = ready;
            let end = self.work_lane(item, &lane, &mut ahead, next);
            ahead.discard(Some(self.reaper));
            end
        })
    }

    pub(in crate::drive) fn work_lane<'scope, 'env>(
        &'env self,
        item: &'env queue::Item,
        lane: &'env Lane,
        ahead: &mut Ahead<'scope, 'env>,
        next: &NextAhead<'_, '_>,
    ) -> Result<ItemEnd, Error> {
        {
            let _lock = self.lock()?;
            // The repository holds the lane's branch from the start (a lane a peer pushed
            // is opened from the remote): its base is found there.
            lane.bring_back(&self.drive.repo)
                .map_err(|e| cannot_open(&item.id, e))?;
        }
        let on_remote = match self.drive.remote().checkpoint(&item.id) {
            Ok(checkpoint) => checkpoint,
            Err(e) => return Ok(ItemEnd::RemoteUnreachable(short(&e))),
        };
        let mut had_checkpoint = on_remote.is_some();
        let mut at = on_remote.unwrap_or_default();
        if at.next == Next::Unknown {
            return Ok(unknown_move());
        }
        if at.round > 1 || at.next != Next::Implement {
            note!(
                self.drive.progress,
                "{}: resuming at round {}, {}{}",
                item.id,
                at.round,
                at.next.word(),
                at.reason
                    .as_deref()
                    .map(|r| format!(" (last: {r})"))
                    .unwrap_or_default()
            );
        }
        // A passed check pushes no checkpoint of its own (it is no paid stage): resumed at
        // the check, its receipt says it passed on the lane's commit, and the lane goes on
        // to the review — whose call may have finished too, found next.
        if at.next == Next::Check {
            if let Some(receipt) = self.passed_check_since(item, lane, &at) {
                at = Checkpoint {
                    next: Next::Review,
                    receipt: Some(receipt),
                    ..at
                };
            }
        }
        // A call that finished after the checkpoint (the drive died, or the remote did not
        // answer, before the checkpoint reached it) is not made again: its receipt and the
        // work committed in the lane are its record.
        let mut finished = self.finished_since(item, lane, &at)?;
        loop {
            let landing = matches!(at.next, Next::Land | Next::LandAgain);
            if at.round > self.drive.options.max_rounds && !landing {
                let why = format!(
                    "not landed after {}: {}",
                    crate::printer::count(
                        self.drive.options.max_rounds as usize,
                        "round",
                        "rounds"
                    ),
                    at.reason.as_deref().unwrap_or("no reason recorded")
                );
                return Ok(self.finish(lane, Mark::Failed, &why, had_checkpoint));
            }
            if self.ending() && !landing && finished.is_none() {
                return Ok(ItemEnd::Stopped(lane.branch.clone()));
            }
            // Past its implementing call, the item may land: the next one is made ready
            // meanwhile. Going round again, it holds nothing of the next one.
            match at.next {
                Next::Implement => next.cancel(),
                _ => next.start(),
            }
            if finished.is_none() {
                self.make_ahead(ahead, item, lane, &at);
            }
            let moved = match (at.next, finished.take()) {
                (Next::Implement, Some(call)) => self.after_implement(item, lane, &at, call)?,
                (Next::Implement, None) => self.implement(item, lane, &at, ahead)?,
                (Next::Check, _) => self.checked(item, lane, &at, ahead)?,
                (Next::Review, Some(call)) => self.after_review(item, &at, call),
                (Next::Review, None) => self.review(item, lane, &at, ahead)?,
                (Next::Land | Next::LandAgain, _) => return self.land(item, lane, &at),
                (Next::Unknown, _) => return Ok(unknown_move()),
            };
            match moved {
                // A passed check is not saved on its own: it is no paid stage, and the lane
                // holds nothing new (the check's writes are restored away). Nor is a
                // review that says LAND: the landing's first push follows at once, and
                // says it (the landed mark, or with a land command the landing begun).
                // Resumed before either reached the remote, this clone's receipts say
                // what passed and what the reviewer answered (`passed_check_since`,
                // `finished_since`); nothing paid is made again.
                Moved::On(next)
                    if (at.next == Next::Check && next.next == Next::Review)
                        || (at.next == Next::Review && next.next == Next::Land) =>
                {
                    at = next;
                }
                Moved::On(next) => {
                    if let Some(end) = self.save(lane, &next)? {
                        return Ok(end);
                    }
                    had_checkpoint = true;
                    at = next;
                }
                Moved::End(end) => return Ok(end),
                Moved::Fail(why) => {
                    return Ok(self.finish(lane, Mark::Failed, &why, had_checkpoint))
                }
            }
        }
    }

    /// The call of `at`'s move this clone finished after `at` was made, if it did: a
    /// receipt of this item, round and role, with a final outcome, that started at the
    /// checkpoint's commit and ended at the lane's commit now.
    pub(in crate::drive) fn finished_since(
        &self,
        item: &queue::Item,
        lane: &Lane,
        at: &Checkpoint,
    ) -> Result<Option<Call>, Error> {
        let role = match at.next {
            Next::Implement => receipts::CallRole::Implement,
            Next::Review => receipts::CallRole::Review,
            _ => return Ok(None),
        };
        let (receipts, _) = receipts::read_all(&self.drive.repo);
        let started_at = if at.head.is_empty() {
            match self.base_of(lane) {
                Ok(base) => base,
                Err(_) => return Ok(None),
            }
        } else {
            at.head.clone()
        };
        let head = lane.head().unwrap_or_default();
        let found = receipts.into_iter().rev().find(|r| {
            r.item == item.id
                && r.role == role
                && r.round == Some(at.round)
                && Some(&r.id) != at.receipt.as_ref()
                && r.commit_before == started_at
                && r.commit_after == head
        });
        let Some(receipt) = found else {
            return Ok(None);
        };
        // Running, interrupted, not run, a wait or an outage: no finished call.
        let Some(kind) = receipt.outcome.finished_call() else {
            return Ok(None);
        };
        note!(
            self.drive.progress,
            "{}: the {role} call {} finished before the drive was cut short; going on from its receipt",
            item.id,
            receipt.id
        );
        Ok(Some(Call {
            kind,
            detail: receipt.detail,
            retry_at: None,
            receipt: receipt.id,
            not_run: None,
            refused: None,
        }))
    }

    /// The receipt of a check of `at`'s round that passed on the lane's commit as it is
    /// now, made after `at`, if this clone made one.
    pub(in crate::drive) fn passed_check_since(
        &self,
        item: &queue::Item,
        lane: &Lane,
        at: &Checkpoint,
    ) -> Option<String> {
        let head = lane.head().ok()?;
        let (receipts, _) = receipts::read_all(&self.drive.repo);
        receipts
            .into_iter()
            .rev()
            .find(|r| {
                r.item == item.id
                    && r.role == receipts::CallRole::Check
                    && r.round == Some(at.round)
                    && r.outcome == receipts::Outcome::Passed
                    && Some(&r.id) != at.receipt.as_ref()
                    && r.commit_before == head
            })
            .map(|r| r.id)
    }
}
