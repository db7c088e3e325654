//! Checkpoints on the remote: how far each item's lane has got, so that a drive that
//! stops, crashes or loses its reservation is continued — here or on a peer's clone — at
//! the move after the last one that finished, and no paid agent call is made twice.
//!
//! A checkpoint is a ref, `refs/stet/progress/<item>`, on the remote, pointing at a commit
//! (empty tree) whose message is the [`Checkpoint`] as one line of JSON. After every move
//! that finished (an agent call with its receipt recorded and its work committed, a check,
//! a landing about to run its command) the drive pushes the checkpoint and the lane's
//! branch in one atomic push: the remote holds both or neither, so the branch is never
//! ahead of or behind what the checkpoint says of it. A receipt lives on one clone; the
//! checkpoint is where a peer that takes a lapsed reservation over learns the same thing.
//! The checkpoint goes when the item is marked landed or failed, in the same atomic push.

// What this module reads comes from parties stet does not trust: nothing here may panic
// on it (issue 18).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects
    )
)]

use serde::{Deserialize, Serialize};

use crate::reservations::{Held, Remote, ReservationError, FAILED};

/// Where checkpoints live on the remote.
pub const PROGRESS: &str = "refs/stet/progress/";
/// Where this clone keeps the copies it fetched.
const SEEN: &str = "refs/stet/seen/progress/";

/// The move a lane goes on with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Next {
    /// The implementing agent's call (of [`Checkpoint::round`]).
    #[default]
    Implement,
    /// The repository's check.
    Check,
    /// The reviewing agent's call.
    Review,
    /// The landing: the reviewer said LAND.
    Land,
    /// The landing again: the land command was about to run (or ran) when the drive was
    /// cut short; it runs again with `STET_LAND_RETRY=1`, so that it can look first.
    LandAgain,
    /// A move this stet does not know (a newer stet's): the lane is left to a stet that
    /// knows it, never worked from the start again.
    #[serde(other)]
    Unknown,
}

impl Next {
    /// The stage's word, as reservations and the display name it.
    pub fn word(self) -> &'static str {
        match self {
            Next::Implement => "implement",
            Next::Check => "check",
            Next::Review => "review",
            Next::Land | Next::LandAgain => "land",
            Next::Unknown => "unknown",
        }
    }
}

/// How far an item's lane has got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The round the lane is in, from 1; every round ends in a landing or counts toward
    /// `--rounds`.
    pub round: u32,
    /// The move the lane goes on with.
    pub next: Next,
    /// What the next implementing call is told about the attempt before it.
    #[serde(default)]
    pub feedback: Option<String>,
    /// Why the round before did not land, in a line, for people (`stet queue`).
    #[serde(default)]
    pub reason: Option<String>,
    /// The receipt of the last call that finished (its record on the clone that made it).
    #[serde(default)]
    pub receipt: Option<String>,
    /// The lane's commit when the checkpoint was made (empty: the lane's base).
    #[serde(default)]
    pub head: String,
    /// The drive run that wrote it.
    #[serde(default)]
    pub run: String,
}

impl Default for Checkpoint {
    fn default() -> Self {
        Checkpoint {
            round: 1,
            next: Next::Implement,
            feedback: None,
            reason: None,
            receipt: None,
            head: String::new(),
            run: String::new(),
        }
    }
}

/// How an item ends on the remote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// Landed.
    Landed,
    /// Given up (`stet retry` takes it up again).
    Failed,
}

/// Why a checkpoint could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    /// The remote refused the lane's branch or its checkpoint because another writer was
    /// first: a peer took the lane over.
    #[error("{0}")]
    TakenByPeer(String),
    /// The remote did not answer.
    #[error(transparent)]
    Remote(ReservationError),
}

impl Remote<'_> {
    /// Every item's checkpoint, in one round trip. Refs someone wrote by hand are skipped.
    pub fn checkpoints(
        &self,
    ) -> Result<std::collections::HashMap<String, Checkpoint>, ReservationError> {
        let _turn = crate::reservations::seen_refs();
        self.git(&[
            "fetch",
            "--quiet",
            "--no-tags",
            "--prune",
            self.name,
            &format!("+{PROGRESS}*:{SEEN}*"),
        ])?;
        let refs = self.git(&[
            "for-each-ref",
            "--format=%(refname)%09%(contents:subject)",
            SEEN,
        ])?;
        Ok(refs
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .filter_map(|(r, json)| {
                let item = r.strip_prefix(SEEN)?;
                let checkpoint = serde_json::from_str(json.trim()).ok()?;
                Some((item.to_string(), checkpoint))
            })
            .collect())
    }

    /// `item`'s checkpoint, if it has one.
    pub fn checkpoint(&self, item: &str) -> Result<Option<Checkpoint>, ReservationError> {
        Ok(self.checkpoints()?.remove(item))
    }

    /// Writes `item`'s checkpoint and, with `branch`, pushes the lane's branch (already in
    /// the repository) in the same atomic push. The branch moves only forward: a branch
    /// someone else moved is refused, as a peer's.
    pub fn save_checkpoint(
        &self,
        item: &str,
        checkpoint: &Checkpoint,
        branch: Option<&str>,
    ) -> Result<(), SaveError> {
        self.save_checkpoint_renewing(item, checkpoint, branch, None)
    }

    /// [`Remote::save_checkpoint`], renewing the reservation `held` to `next` in the same
    /// atomic push: the checkpoint is written only while the reservation is still exactly
    /// `held` (a peer that took it over refuses the whole push), and a drive that saves
    /// needs no push of its own to renew.
    pub fn save_checkpoint_renewing(
        &self,
        item: &str,
        checkpoint: &Checkpoint,
        branch: Option<&str>,
        renewal: Option<(&Held, &Held)>,
    ) -> Result<(), SaveError> {
        let message = serde_json::to_string(checkpoint).map_err(|e| {
            SaveError::Remote(self.unreachable(format!("cannot write the checkpoint: {e}")))
        })?;
        let oid = self.note_commit(&message).map_err(SaveError::Remote)?;
        let progress = format!("+{oid}:{PROGRESS}{item}");
        let lane = branch.map(|b| format!("refs/heads/{b}:refs/heads/{b}"));
        let lease = renewal.map(|(held, next)| Remote::lease_args(held, Some(next)));
        let mut args = vec!["--atomic"];
        args.extend(lease.iter().map(|[lease, _]| lease.as_str()));
        args.extend([self.name, &progress]);
        args.extend(lane.as_deref());
        args.extend(lease.iter().map(|[_, spec]| spec.as_str()));
        self.push_refs(&args)
    }

    /// Marks `item` landed or failed (the mark's message says `note`) and, when it has
    /// one, removes its checkpoint, in one atomic push.
    pub fn finish_item(
        &self,
        item: &str,
        mark: Mark,
        note: &str,
        had_checkpoint: bool,
    ) -> Result<(), SaveError> {
        self.finish_item_releasing(item, mark, note, had_checkpoint, None)
    }

    /// [`Remote::finish_item`], releasing the reservation `held` in the same atomic push
    /// (only while the remote still holds exactly `held`): an item's landing is one push of
    /// its mark, its checkpoint's removal and its release.
    pub fn finish_item_releasing(
        &self,
        item: &str,
        mark: Mark,
        note: &str,
        had_checkpoint: bool,
        held: Option<&Held>,
    ) -> Result<(), SaveError> {
        let dropped = format!(":{PROGRESS}{item}");
        let release = held.map(|held| Remote::lease_args(held, None));
        if mark == Mark::Landed {
            // Into the ledger, the one record of what landed.
            let leases: Vec<String> = release.iter().map(|[lease, _]| lease.clone()).collect();
            let mut specs: Vec<String> = Vec::new();
            if had_checkpoint {
                specs.push(dropped.clone());
            }
            specs.extend(release.iter().map(|[_, spec]| spec.clone()));
            let still_ours = || match held {
                Some(held) => self
                    .get(item)
                    .ok()
                    .flatten()
                    .is_some_and(|now| now.oid == held.oid),
                None => true,
            };
            return self
                .push_ledger(&[(item, note)], &[], (&leases, &specs), still_ours)
                .map_err(|e| self.save_error(e));
        }
        let oid = self.note_commit(note).map_err(SaveError::Remote)?;
        let marked = format!("+{oid}:{FAILED}{item}");
        let mut args = vec!["--atomic"];
        args.extend(release.iter().map(|[lease, _]| lease.as_str()));
        args.extend([self.name, &marked]);
        if had_checkpoint {
            args.push(&dropped);
        }
        args.extend(release.iter().map(|[_, spec]| spec.as_str()));
        self.push_refs(&args)
    }

    /// Starts `item` afresh (`stet retry`): round 1, at the commit its lane's branch is at
    /// on the remote, so that no call made before counts for the new rounds.
    pub fn restart(&self, item: &str) -> Result<(), ReservationError> {
        let branch = format!("{}{item}", crate::reservations::LANES);
        let head = self.git(&["ls-remote", self.name, &branch])?;
        let checkpoint = Checkpoint {
            head: head
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string(),
            reason: Some("retried: stet retry".to_string()),
            run: "stet retry".to_string(),
            ..Checkpoint::default()
        };
        match self.save_checkpoint(item, &checkpoint, None) {
            Ok(()) => Ok(()),
            Err(SaveError::Remote(e)) => Err(e),
            Err(SaveError::TakenByPeer(why)) => Err(self.unreachable(why)),
        }
    }

    fn push_refs(&self, args: &[&str]) -> Result<(), SaveError> {
        crate::git::push(self.repo, args).map_err(|e| self.save_error(e))
    }

    fn save_error(&self, e: crate::git::PushError) -> SaveError {
        match e {
            e @ crate::git::PushError::Raced { .. } => SaveError::TakenByPeer(e.to_string()),
            crate::git::PushError::Failed(e) => SaveError::Remote(self.unreachable(e.detail)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::run as git;

    fn clone_of_a_bare_remote() -> (tempfile::TempDir, std::path::PathBuf) {
        let (root, _, work) = crate::git::testing::clone_of_fresh_remote();
        (root, work)
    }

    #[test]
    fn a_checkpoint_travels_with_the_branch_and_goes_with_the_mark() {
        let (_root, work) = clone_of_a_bare_remote();
        let remote = Remote {
            repo: &work,
            name: "origin",
        };
        assert_eq!(remote.checkpoint("item").unwrap(), None);
        git(&work, &["branch", "stet/item"]).unwrap();
        let saved = Checkpoint {
            round: 2,
            next: Next::Review,
            feedback: Some("the check failed:\nline one\nline two".into()),
            reason: Some("the check `make` failed".into()),
            receipt: Some("r-1".into()),
            head: "0123".into(),
            run: "drive-1".into(),
        };
        remote
            .save_checkpoint("item", &saved, Some("stet/item"))
            .unwrap();
        assert_eq!(remote.checkpoint("item").unwrap(), Some(saved));
        assert!(remote.marks().unwrap().lanes.contains("item"));

        // A branch someone else moved is refused as a peer's, and the checkpoint with it.
        let other = git(&work, &["commit-tree", "HEAD^{tree}", "-m", "elsewhere"]).unwrap();
        git(
            &work,
            &[
                "push",
                "--quiet",
                "--force",
                "origin",
                &format!("{other}:refs/heads/stet/item"),
            ],
        )
        .unwrap();
        git(&work, &["commit", "--quiet", "--allow-empty", "-m", "mine"]).unwrap();
        git(&work, &["branch", "--force", "stet/item", "HEAD"]).unwrap();
        let later = Checkpoint::default();
        match remote.save_checkpoint("item", &later, Some("stet/item")) {
            Err(SaveError::TakenByPeer(_)) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(remote.checkpoint("item").unwrap().unwrap().round, 2);

        remote
            .finish_item("item", Mark::Landed, "landed stet/item", true)
            .unwrap();
        assert_eq!(remote.checkpoint("item").unwrap(), None);
        assert!(remote.marks().unwrap().landed.contains("item"));
        remote
            .finish_item("other", Mark::Failed, "given up", false)
            .unwrap();
        assert!(remote.marks().unwrap().failed.contains("other"));
    }

    #[test]
    fn a_checkpoint_renewing_a_reservation_a_peer_took_is_refused_whole_and_a_landing_releases() {
        let (_root, work) = clone_of_a_bare_remote();
        let remote = Remote {
            repo: &work,
            name: "origin",
        };
        let reservation = |holder: &str, stage: &str| crate::reservations::Reservation {
            item: "item".into(),
            holder: holder.into(),
            lane: "stet/item".into(),
            stage: stage.into(),
            expires_at_unix: 4_000_000_000,
        };
        let held = remote
            .take(reservation("me", "implement"), 0, |_| false)
            .unwrap();
        let next = remote.record(&reservation("me", "review")).unwrap();
        let saved = Checkpoint {
            round: 1,
            next: Next::Review,
            ..Default::default()
        };
        remote
            .save_checkpoint_renewing("item", &saved, None, Some((&held, &next)))
            .unwrap();
        let now = remote.get("item").unwrap().unwrap();
        assert_eq!(now.oid, next.oid, "renewed in the same push");
        assert_eq!(now.reservation.stage, "review");

        // A peer takes it over (it lapsed, say): the stale renewal refuses the checkpoint.
        let theirs = remote
            .renew(&now, reservation("peer", "implement"))
            .unwrap();
        let later = Checkpoint {
            round: 2,
            ..Default::default()
        };
        let stale = remote.record(&reservation("me", "land")).unwrap();
        match remote.save_checkpoint_renewing("item", &later, None, Some((&next, &stale))) {
            Err(SaveError::TakenByPeer(_)) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(remote.checkpoint("item").unwrap(), Some(saved));
        match remote.finish_item_releasing("item", Mark::Landed, "landed", true, Some(&next)) {
            Err(SaveError::TakenByPeer(_)) => {}
            other => panic!("{other:?}"),
        }
        assert!(!remote.marks().unwrap().landed.contains("item"));

        // The holder's landing: the mark, the checkpoint gone, the release, in one push.
        remote
            .finish_item_releasing("item", Mark::Landed, "landed", true, Some(&theirs))
            .unwrap();
        assert!(remote.marks().unwrap().landed.contains("item"));
        assert_eq!(remote.checkpoint("item").unwrap(), None);
        assert_eq!(remote.get("item").unwrap(), None);
    }

    #[test]
    fn a_checkpoint_reads_back_as_written_old_ones_still_read_and_an_unknown_move_is_kept_unknown()
    {
        for next in [
            Next::Implement,
            Next::Check,
            Next::Review,
            Next::Land,
            Next::LandAgain,
        ] {
            let written = Checkpoint {
                round: 3,
                next,
                feedback: Some("the check failed".into()),
                reason: Some("why".into()),
                receipt: Some("r1".into()),
                head: "abc".into(),
                run: "drive-1".into(),
            };
            let json = serde_json::to_string(&written).unwrap();
            assert_eq!(serde_json::from_str::<Checkpoint>(&json).unwrap(), written);
        }
        assert_eq!(
            serde_json::to_string(&Next::LandAgain).unwrap(),
            "\"land-again\""
        );
        // As the first stet with checkpoints wrote them: round and move only.
        let old: Checkpoint = serde_json::from_str(r#"{"round":2,"next":"review"}"#).unwrap();
        assert_eq!(
            old,
            Checkpoint {
                round: 2,
                next: Next::Review,
                ..Default::default()
            }
        );
        // A newer stet's move: read, and known to be unknown (the drive leaves the lane).
        let newer: Checkpoint =
            serde_json::from_str(r#"{"round":1,"next":"judge","head":"h"}"#).unwrap();
        assert_eq!(newer.next, Next::Unknown);
        assert_eq!(newer.head, "h");
    }
}
