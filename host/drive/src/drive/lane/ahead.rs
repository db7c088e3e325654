//! What a lane makes ahead: the sandboxes of its next stages, and the next item's lane.

use stet_plugin_api::Role;

use crate::checkpoints::{Checkpoint, Next};
use crate::error::Error;
use crate::lanes::{self, Lane};
use crate::queue;

use super::super::ahead::{Ahead, MakesNext, NextLane};
use super::super::worker::{cannot_open, Worker};
impl Worker<'_, '_> {
    /// Starts making, on threads of `ahead`'s scope, the sandboxes of the round's stages
    /// from `at` on that are not being made yet: the implementing call's, the check's,
    /// the review call's.
    pub(in crate::drive) fn make_ahead<'scope, 'env>(
        &'env self,
        ahead: &mut Ahead<'scope, 'env>,
        item: &'env queue::Item,
        lane: &'env Lane,
        at: &Checkpoint,
    ) {
        let scope = ahead.scope;
        // The stage's own sandbox and the next stage's: more at once would only slow the
        // engine's making of the one needed first.
        let checks = self.drive.options.check.is_some();
        let (implement, check, review) = match at.next {
            Next::Implement => (true, checks, !checks),
            Next::Check => (false, false, true),
            Next::Review => (false, false, true),
            Next::Land | Next::LandAgain | Next::Unknown => return,
        };
        if !implement {
            // Made with the lane ahead, for a lane that turned out to resume later.
            if let Some(call) = ahead.implement_ready.take() {
                call.discard(Some(self.reaper));
            }
        }
        if implement && !ahead.has_implement() {
            let at = at.clone();
            ahead.implement = Some(scope.spawn(move || {
                let prompt = self.prompt_for(Role::Implement, item, lane, Some(&at))?;
                self.prepare_call(lane, Role::Implement, &prompt)
            }));
        }
        if check && ahead.check.is_none() {
            ahead.check = Some(scope.spawn(move || self.check_sandbox(lane)));
        }
        if review && ahead.review.is_none() {
            let at = at.clone();
            ahead.review = Some(scope.spawn(move || {
                let prompt = self.prompt_for(Role::Review, item, lane, Some(&at))?;
                self.prepare_call(lane, Role::Review, &prompt)
            }));
        }
    }

    /// The next item this lane would take, opened ahead: the first open item of `items`
    /// in queue order that this lane can claim ahead, if nothing of its lane is on this
    /// clone yet (a lane kept from before is resumed where it is found, not ahead), with
    /// its first implementing call made ready.
    pub(in crate::drive) fn make_next<'w>(
        &'w self,
        items: &[queue::Entry],
    ) -> Result<Option<NextLane<'w>>, Error> {
        if self.ending() {
            return Ok(None);
        }
        // A remote that does not answer now is the next take's to report.
        let Ok(marks) = self.drive.remote().marks() else {
            return Ok(None);
        };
        let Some(entry) = items
            .iter()
            .filter(|i| marks.open(&i.id))
            .find(|i| self.claim_ahead(&i.id))
        else {
            return Ok(None);
        };
        let unclaim = || self.unclaim_ahead(&entry.id);
        // A malformed item is the take's to report; nothing is made for it.
        let Ok(item) = entry.load() else {
            unclaim();
            return Ok(None);
        };
        let lane = match lanes::open_new(
            &self.drive.repo,
            &self.drive.options.remote,
            &entry.id,
            &self.drive.base.commit,
            self.drive.lane_bounds(),
        ) {
            Ok(Some(lane)) => lane,
            Ok(None) => {
                unclaim();
                return Ok(None);
            }
            Err(e) => {
                unclaim();
                return Err(cannot_open(&entry.id, e));
            }
        };
        // A stop asked meanwhile makes no sandbox (the lane stays, for the item's take).
        let implement = if self.ending() || self.drive.give_seed(&lane).is_err() {
            None
        } else {
            self.prompt_for(Role::Implement, &item, &lane, None)
                .and_then(|prompt| self.prepare_call(&lane, Role::Implement, &prompt))
                .ok()
        };
        Ok(Some(NextLane {
            id: entry.id.clone(),
            implement,
        }))
    }

    /// Lets a lane made ahead go unused: its sandbox retired, its claim ahead dropped. The
    /// lane's directories stay: another drive of this clone that took the item may work in
    /// them, and a later take of the item here resumes them (`lanes::open`).
    pub(in crate::drive) fn let_next_go(&self, next: NextLane<'_>) {
        if let Some(call) = next.implement {
            call.discard(Some(self.reaper));
        }
        self.unclaim_ahead(&next.id);
    }
}

/// A lane's worker with the queue it takes from: how its next item is made ahead.
pub(in crate::drive) struct NextMaker<'w, 'd, 'a> {
    pub worker: &'w Worker<'d, 'a>,
    pub items: &'w [queue::Entry],
}

impl<'w> MakesNext<'w> for NextMaker<'w, '_, '_> {
    fn make_next(&self) -> Result<Option<NextLane<'w>>, Error> {
        self.worker.make_next(self.items)
    }

    fn let_go(&self, next: NextLane<'w>) {
        self.worker.let_next_go(next);
    }
}
