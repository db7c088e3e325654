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
    /// then the configured land command runs on the host — again, with `STET_LAND_RETRY=1`,
    /// when a landing was cut short —, then the item is marked landed and the checkpoint
    /// goes in one atomic push, and the working copy is removed.
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
        if self.drive.options.land.as_deref() == Some(crate::land::GITHUB) {
            let (receipts, _) = receipts::read_all(&self.drive.repo);
            match crate::land::pull_request(
                &self.drive.repo,
                item,
                &lane.branch,
                &self.drive.base.branch,
                &receipts,
            ) {
                Ok(pr) if pr.reused => note!(
                    self.drive.progress,
                    "{}: pull request {} was open for {} already",
                    item.id,
                    pr.url,
                    lane.branch
                ),
                Ok(pr) => note!(
                    self.drive.progress,
                    "{}: opened pull request {}",
                    item.id,
                    pr.url
                ),
                Err(why) => self.drive.progress.warn(&format!(
                    "{}: no pull request: {why}; the branch {} is pushed",
                    item.id, lane.branch
                )),
            }
        } else if let Some(command) = &self.drive.options.land {
            // The land command runs on the host, as the person: it is the one step that may
            // need the person's own credentials (to open a pull request, say).
            let mut land = std::process::Command::new("sh");
            land.args(["-c", command])
                .current_dir(&self.drive.repo)
                .env("STET_ITEM", &item.id)
                .env("STET_BRANCH", &lane.branch)
                .env("STET_REMOTE", &self.drive.options.remote);
            if again {
                land.env("STET_LAND_RETRY", "1");
            }
            match land.status() {
                Ok(s) if s.success() => {}
                Ok(s) => self.drive.progress.warn(&format!(
                    "{}: the land command `{command}` failed ({s}); the branch is pushed",
                    item.id
                )),
                Err(e) => self.drive.progress.warn(&format!(
                    "{}: cannot run the land command `{command}`: {e}; the branch is pushed",
                    item.id
                )),
            }
        }
        let landed = format!("landed {} by run {}", lane.branch, self.drive.run);
        Ok(self.finish(lane, Mark::Landed, &landed, true))
    }
}
