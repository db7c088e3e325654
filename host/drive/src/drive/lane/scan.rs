//! Before a lane's branch is pushed: the change must hold no secret (`crate::scan`) and
//! carry no repository (`crate::gate::check_branch`).

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
        self.keep_unpushed(lane, checkpoint, &note).map(Some)
    }

    /// Before the lane's branch is pushed: it must carry no repository its base does not
    /// hold as it is (the gate's shapes, on the trees). A lane's commit refuses one, so
    /// this holds a branch another clone or an older stet made to the same rule.
    pub(in crate::drive) fn refuse_repositories(
        &self,
        lane: &Lane,
        checkpoint: &Checkpoint,
    ) -> Result<Option<ItemEnd>, Error> {
        let base = self.base_of(lane)?;
        let carried = crate::gate::check_branch(
            &self.drive.repo,
            &base,
            &format!("refs/heads/{}", lane.branch),
        )
        .map_err(|e| {
            Concept::Drive
                .failure(format!("cannot read the lane {}'s tree", lane.branch))
                .caused_by(e.to_string())
        })?;
        if carried.is_empty() {
            return Ok(None);
        }
        let note = format!(
            "{}, so it was not pushed (remove the repository from the lane's history)",
            crate::gate::carried_words(&lane.branch, &carried)
        );
        self.keep_unpushed(lane, checkpoint, &note).map(Some)
    }

    /// Saves `checkpoint` without the lane's branch and marks the item failed with `note`.
    fn keep_unpushed(
        &self,
        lane: &Lane,
        checkpoint: &Checkpoint,
        note: &str,
    ) -> Result<ItemEnd, Error> {
        let saved = self.keeper.renewing(|renewal| {
            self.drive
                .remote()
                .save_checkpoint_renewing(&lane.item, checkpoint, None, renewal)
        });
        match saved {
            Ok(()) => {}
            Err(SaveError::TakenByPeer(why)) => {
                return Ok(ItemEnd::Lost(format!("taken by a peer: {why}")))
            }
            Err(SaveError::Remote(e)) => return Ok(ItemEnd::RemoteUnreachable(short(&e))),
        }
        Ok(self.finish(lane, Mark::Failed, note, true))
    }
}
