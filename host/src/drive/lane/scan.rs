//! Before a lane's branch is pushed: the change must hold no secret (`crate::scan`).

use crate::checkpoints::{Checkpoint, Mark, SaveError};
use crate::error::{Concept, Error};
use crate::lanes::Lane;

use super::super::state::ItemEnd;
use super::super::worker::{short, Worker};
impl Worker<'_, '_> {
    /// Before the lane's branch is pushed: its change must hold no secret (`scan.rs`). A
    /// finding keeps the branch here, saves the checkpoint without it and marks the item
    /// failed, naming each file, line and kind (never the value).
    pub(in crate::drive) fn refuse_secrets(
        &self,
        lane: &Lane,
        checkpoint: &Checkpoint,
    ) -> Result<Option<ItemEnd>, Error> {
        let base = self.base_of(lane)?;
        let known = crate::credentials::known();
        let mut scanner = crate::scan::Scanner::new(&known, &self.drive.settings.secrets_allowed);
        // Streamed: the change is never held whole (a long line comes in pieces).
        lane.history()
            .stream(
                &[
                    "diff",
                    "--no-color",
                    "--no-ext-diff",
                    "--no-textconv",
                    "--no-renames",
                    "--unified=0",
                    // Inert git marks every file binary (no diff driver runs): read them
                    // all as text, so a secret in any file is seen.
                    "--text",
                    &base,
                    "HEAD",
                ],
                64 * 1024,
                &mut |piece| scanner.feed(piece),
            )
            .map_err(|e| {
                Concept::Drive
                    .failure(format!("cannot read the lane {}'s change", lane.branch))
                    .caused_by(e.to_string())
            })?;
        let findings = scanner.finish();
        if findings.is_empty() {
            return Ok(None);
        }
        let listed: Vec<String> = findings.iter().map(ToString::to_string).collect();
        let how = if findings.iter().all(|f| f.allowable) {
            "if none is a secret, list those paths under [drive] secrets_allowed and stet retry the item"
        } else {
            "remove it from the lane's history; stet's own credentials are never allowed"
        };
        let note = format!(
            "the change holds a secret, so its branch was not pushed: {} ({how})",
            listed.join(", ")
        );
        let saved = self.keeper.renewing(|renewal| {
            self.drive
                .remote()
                .save_checkpoint_renewing(&lane.item, checkpoint, None, renewal)
        });
        match saved {
            Ok(()) => {}
            Err(SaveError::TakenByPeer(why)) => {
                return Ok(Some(ItemEnd::Lost(format!("taken by a peer: {why}"))))
            }
            Err(SaveError::Remote(e)) => return Ok(Some(ItemEnd::RemoteUnreachable(short(&e)))),
        }
        Ok(Some(self.finish(lane, Mark::Failed, &note, true)))
    }
}
