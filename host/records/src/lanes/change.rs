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

/// What `lane`'s working tree holds that its last commit does not (`git status --short`
/// lines), through the gate: a person's edits from `stet shell` (a drive leaves none: it
/// commits or restores around every call).
pub fn uncommitted(lane: &Lane) -> Result<Vec<String>, GitError> {
    lane.tree().uncommitted()
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
                let result = lane.tree().diff(base, &index, PIECE, on_line);
                let _ = std::fs::remove_file(&index);
                result
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::run as git;

    fn diff_of(repo: &Path, item: &str) -> String {
        let change = change(repo, "origin", item).unwrap().expect("a change");
        let mut text = Vec::new();
        change
            .stream(repo, &mut |piece| text.extend_from_slice(piece))
            .unwrap();
        String::from_utf8(text).unwrap()
    }

    #[test]
    fn a_lanes_change_holds_its_commits_its_uncommitted_edits_and_new_files_and_a_link_as_a_link() {
        let (root, _bare, work) = crate::git::testing::clone_of_fresh_remote();
        let lane = super::super::open(&work, "origin", "item", "HEAD", None).unwrap();
        std::fs::write(lane.dir.join("committed.txt"), "by the agent\n").unwrap();
        lane.commit_all("the agent's work").unwrap();
        std::fs::write(
            lane.dir.join("committed.txt"),
            "by the agent\nby a person\n",
        )
        .unwrap();
        std::fs::write(lane.dir.join("new.txt"), "a new file\n").unwrap();
        let secret = root.path().join("secret");
        std::fs::write(&secret, "a host secret\n").unwrap();
        std::os::unix::fs::symlink(&secret, lane.dir.join("link")).unwrap();
        let index_before = std::fs::read(lane.git_dir.join("index")).unwrap();

        let text = diff_of(&work, "item");
        assert!(
            text.contains("+by the agent\n+by a person\n"),
            "the commits and the edit on them: {text}"
        );
        assert!(
            text.contains("+++ b/new.txt\n@@ -0,0 +1 @@\n+a new file\n"),
            "{text}"
        );
        assert!(
            text.contains("new file mode 120000")
                && text.contains(&format!("+{}", secret.display())),
            "a link shows where it points: {text}"
        );
        assert!(
            !text.contains("a host secret"),
            "never what it points at: {text}"
        );
        assert!(!text.contains("README"), "only the lane's change: {text}");
        assert_eq!(
            std::fs::read(lane.git_dir.join("index")).unwrap(),
            index_before,
            "the lane's index is not written"
        );
        assert!(
            std::fs::read_dir(stet_dir(&work)).unwrap().all(|e| !e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".index")),
            "no index of the host's is left"
        );
    }

    #[test]
    fn with_no_lane_here_the_branch_is_diffed_local_else_the_remotes_and_neither_is_none() {
        let (_root, _bare, work) = crate::git::testing::clone_of_fresh_remote();
        let lane = super::super::open(&work, "origin", "item", "HEAD", None).unwrap();
        std::fs::write(lane.dir.join("landed.txt"), "landed\n").unwrap();
        lane.commit_all("the agent's work").unwrap();
        lane.push(&work, "origin").unwrap();
        lane.remove();
        assert!(diff_of(&work, "item").contains("+++ b/landed.txt\n@@ -0,0 +1 @@\n+landed\n"));
        git(&work, &["branch", "-D", "stet/item"]).unwrap();
        assert!(
            diff_of(&work, "item").contains("+landed\n"),
            "from the remote's branch"
        );
        assert!(change(&work, "origin", "nothing").unwrap().is_none());
    }
}
