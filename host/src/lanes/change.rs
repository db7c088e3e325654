//! A lane's change alone, against the base it branched from (`stet diff`): the kept lane's
//! working tree — what a person's shell left uncommitted, new files included — or, with no
//! lane here, its branch (local, else the remote's).
//!
//! Everything diffed was written in a sandbox: git runs inertly ([`crate::git::Inert`]: no
//! external diff, no textconv, no filter), and new files are named to git with an index of
//! the host's own, so the lane's index is never written and nothing is hashed from a link.

use std::path::Path;

use super::reopen::{branch_ref, here};
use super::{stet_dir, GitError, Lane};
use crate::git::Inert;

/// What `stet diff` shows of an item.
#[derive(Debug)]
pub enum Change {
    /// The lane kept here: its working tree against `base`.
    Lane {
        /// The lane.
        lane: Lane,
        /// The commit it branched from.
        base: String,
    },
    /// No lane here: the branch `branch` (a ref of the repository) against `base`.
    Branch {
        /// The branch's ref.
        branch: String,
        /// The commit it branched from.
        base: String,
    },
}

/// Where the commit `commit` of the repository branched from the remote's base as last
/// fetched (else the local `HEAD`).
pub fn base_of(repo: &Path, remote: &str, commit: &str) -> Result<String, GitError> {
    let from = crate::base::known(repo, remote).map_or_else(|| "HEAD".to_string(), |b| b.commit);
    Inert::at(repo).run(&["merge-base", &from, commit])
}

/// `item`'s change on this clone; `None` when there is neither a lane nor a branch of it.
pub fn change(repo: &Path, remote: &str, item: &str) -> Result<Option<Change>, GitError> {
    if let Some(lane) = here(repo, item) {
        // The lane's commits may be only in the lane: they are fetched (no ref moved) so
        // that the repository can say where the lane branched from its base.
        let head = lane.head()?;
        let repo_git = Inert::at(repo);
        if repo_git
            .run(&["cat-file", "-e", &format!("{head}^{{commit}}")])
            .is_err()
        {
            repo_git.run(&[
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                lane.git_dir.to_str().unwrap_or_default(),
                "HEAD",
            ])?;
        }
        let base = base_of(repo, remote, &head)?;
        return Ok(Some(Change::Lane { lane, base }));
    }
    let Some((branch, _)) = branch_ref(repo, remote, item) else {
        return Ok(None);
    };
    let base = base_of(repo, remote, &branch)?;
    Ok(Some(Change::Branch { branch, base }))
}

impl Change {
    /// Streams the diff to `on_line`, a line (or a piece of at most 64 KiB) at a time.
    pub fn stream(&self, repo: &Path, on_line: &mut dyn FnMut(&[u8])) -> Result<(), GitError> {
        const PIECE: usize = 64 * 1024;
        match self {
            Change::Branch { branch, base } => {
                Inert::at(repo).stream(&["diff", base, branch], PIECE, on_line)
            }
            Change::Lane { lane, base } => {
                // An index of the host's own, outside everything a sandbox mounts: the
                // lane's, plus every new file as one to be added (no content read).
                static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let index = stet_dir(repo).join(format!("diff-{}-{n}.index", std::process::id()));
                let result = (|| {
                    match std::fs::copy(lane.git_dir.join("index"), &index) {
                        Ok(_) => {}
                        Err(_) => {
                            lane.git().with_index(&index).run(&["read-tree", "HEAD"])?;
                        }
                    }
                    let git = lane.git().with_index(&index);
                    git.run(&["add", "--intent-to-add", "--", "."])?;
                    git.stream(&["diff", base], PIECE, on_line)
                })();
                let _ = std::fs::remove_file(&index);
                result
            }
        }
    }
}
