//! The landing: the branch pushed, the land command or pull request, the item marked.

use crate::checkpoints::{Checkpoint, Mark, Next};
use crate::error::Error;
use crate::lanes::Lane;
use crate::queue;
use crate::receipts;

use super::super::note;
use super::super::state::ItemEnd;
use super::super::worker::Worker;
impl Worker<'_, '_> {
    /// Lands the lane: the checkpoint says the landing began (with the branch, pushed),
    /// then the configured land step runs on the host (a pull request, or the land command —
    /// again, with `STET_LAND_RETRY=1`, when a landing was cut short), then the item is marked
    /// landed, its record saying what the land step did (its pull request, or why it failed),
    /// and the checkpoint goes in one atomic push, and the working copy is removed.
    pub(in crate::drive) fn land(
        &self,
        item: &queue::Item,
        lane: &Lane,
        at: &Checkpoint,
    ) -> Result<ItemEnd, Error> {
        if let Err(end) = self.enter(lane, "land") {
            return Ok(end);
        }
        let again = at.next == Next::LandAgain;
        if again {
            note!(
                self.drive.progress,
                "{}: a landing was cut short; landing again{}",
                item.id,
                if self.drive.options.land.is_some() {
                    " (the land command runs again with STET_LAND_RETRY=1)"
                } else {
                    ""
                }
            );
        } else if self.drive.options.land.is_some() {
            // The land command may be cut short: the checkpoint says the landing began, so
            // the next drive runs it again saying so. Without one there is nothing to run
            // twice, and the landing is one push.
            let landing = Checkpoint {
                next: Next::LandAgain,
                run: self.drive.run.clone(),
                ..at.clone()
            };
            if let Some(end) = self.save(lane, &landing)? {
                return Ok(end);
            }
        }
        let _lock = self.lock()?;
        let landed = format!("landed {} by run {}", lane.branch, self.drive.run);
        let Some(how) = &self.drive.options.land else {
            return Ok(self.finish(lane, Mark::Landed, &landed, true));
        };
        let (receipts, _) = receipts::read_all(&self.drive.repo);
        let outcome = crate::land::land(
            &crate::land::Landing {
                repo: &self.drive.repo,
                item,
                branch: &lane.branch,
                base: &self.drive.base.branch,
                remote: &self.drive.options.remote,
                again,
            },
            how,
            &receipts,
        );
        match &outcome {
            Ok(Some(pr)) if pr.reused => note!(
                self.drive.progress,
                "{}: pull request {} was open for {} already",
                item.id,
                pr.url,
                lane.branch
            ),
            Ok(Some(pr)) => note!(
                self.drive.progress,
                "{}: opened pull request {}",
                item.id,
                pr.url
            ),
            Ok(None) | Err(_) => {}
        }
        // The branch is pushed and stays: the item is marked landed with what its land
        // step did, a failure included (`stet land ID` makes it again), in the one push.
        let record = crate::land::record(&landed, &outcome, Some(how));
        match (self.finish(lane, Mark::Landed, &record, true), outcome) {
            (ItemEnd::Landed, Err(_)) => Ok(ItemEnd::LandFailed(
                crate::land::recorded(&record).failed.unwrap_or_default(),
            )),
            (end, _) => Ok(end),
        }
    }
}
