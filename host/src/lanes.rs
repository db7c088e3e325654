//! Lanes: each item's own branch (`stet/<item>`) and working copy.
//!
//! A lane's working copy is a separate clone under `<git dir>/stet/lanes/<item>`, not a
//! `git worktree`: a worktree's `.git` file points into the main repository, which the
//! sandbox would then have to see (with its config, other lanes and any credential in a
//! remote URL). The clone is made with `--no-hardlinks`, so nothing the sandbox does to
//! its objects can reach the main repository's, and it has no remote at all. Only the
//! lane's one branch comes back out: the host fetches that ref from the lane afterwards,
//! and the host, never the sandbox, pushes it to the remote.

use std::path::{Path, PathBuf};

use crate::receipts::git_dir;

/// One lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lane {
    /// The item it works on.
    pub item: String,
    /// Its branch, in the lane and (once landed or pushed) on the remote.
    pub branch: String,
    /// Its working copy.
    pub dir: PathBuf,
}

pub use crate::git::{run as git, GitError};

/// Whether a failed push was refused by the remote (the branch moved: not a fast-forward)
/// rather than the remote not answering.
pub fn push_refused(e: &GitError) -> bool {
    let d = e.detail.to_ascii_lowercase();
    d.contains("[rejected]") || d.contains("non-fast-forward") || d.contains("fetch first")
}

/// The branch of `item`'s lane.
pub fn branch_of(item: &str) -> String {
    format!("stet/{item}")
}

/// Opens `item`'s lane: the existing working copy on this clone, else a new one starting
/// from the lane's branch on the remote (a peer's pushed work), else from `base`.
pub fn open(repo: &Path, remote: &str, item: &str, base: &str) -> Result<Lane, GitError> {
    let branch = branch_of(item);
    let dir = git_dir(repo).join("stet/lanes").join(item);
    let lane = Lane {
        item: item.to_string(),
        branch: branch.clone(),
        dir: dir.clone(),
    };
    if dir.join(".git").is_dir() {
        catch_up(repo, remote, &lane)?;
        return Ok(lane);
    }
    // A half-made lane from a crash is made again.
    if dir.exists() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    std::fs::create_dir_all(dir.parent().expect("lanes have a parent")).map_err(|e| GitError {
        args: "mkdir".into(),
        dir: dir.display().to_string(),
        detail: e.to_string(),
    })?;
    // The remote's copy of the lane, if a drive (here or on a peer) pushed one.
    let pushed = git(
        repo,
        &[
            "fetch",
            "--quiet",
            remote,
            &format!("+refs/heads/{branch}:refs/stet/pushed/{item}"),
        ],
    )
    .is_ok();
    let start = if pushed {
        git(repo, &["rev-parse", &format!("refs/stet/pushed/{item}")])?
    } else {
        git(repo, &["rev-parse", base])?
    };
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    git(
        repo,
        &[
            "clone",
            "--quiet",
            "--no-hardlinks",
            "--no-checkout",
            ".",
            partial.to_str().unwrap_or_default(),
        ],
    )?;
    if pushed {
        // The clone copied branches, not stet's refs: fetch the pushed lane's commits.
        git(
            &partial,
            &[
                "fetch",
                "--quiet",
                repo.to_str().unwrap_or("."),
                &format!("refs/stet/pushed/{item}"),
            ],
        )?;
    }
    git(&partial, &["checkout", "--quiet", "-B", &branch, &start])?;
    git(&partial, &["remote", "remove", "origin"])?;
    git(&partial, &["config", "user.name", "stet agent"])?;
    git(&partial, &["config", "user.email", "agent@stet.localhost"])?;
    std::fs::rename(&partial, &dir).map_err(|e| GitError {
        args: "rename".into(),
        dir: dir.display().to_string(),
        detail: e.to_string(),
    })?;
    Ok(lane)
}

/// A working copy kept on this clone may be behind the branch on the remote (a peer took
/// the lane over while this clone's drive was gone, and pushed): it moves to the pushed
/// branch, fast-forward only. A remote that does not answer leaves the lane as it is.
fn catch_up(repo: &Path, remote: &str, lane: &Lane) -> Result<(), GitError> {
    let pushed_ref = format!("refs/stet/pushed/{}", lane.item);
    let fetched = git(
        repo,
        &[
            "fetch",
            "--quiet",
            remote,
            &format!("+refs/heads/{}:{pushed_ref}", lane.branch),
        ],
    );
    if fetched.is_err() {
        return Ok(());
    }
    let pushed = git(repo, &["rev-parse", &pushed_ref])?;
    let here = lane.head()?;
    if pushed == here {
        return Ok(());
    }
    git(
        &lane.dir,
        &[
            "fetch",
            "--quiet",
            repo.to_str().unwrap_or("."),
            &pushed_ref,
        ],
    )?;
    // Only when the pushed branch contains everything here: a lane never moves back.
    if git(&lane.dir, &["merge-base", "--is-ancestor", &here, &pushed]).is_ok() {
        git(&lane.dir, &["reset", "--quiet", "--hard", &pushed])?;
    }
    Ok(())
}

impl Lane {
    /// The lane's current commit.
    pub fn head(&self) -> Result<String, GitError> {
        git(&self.dir, &["rev-parse", "HEAD"])
    }

    /// Commits whatever the agent left uncommitted; returns whether there was anything.
    pub fn commit_all(&self, message: &str) -> Result<bool, GitError> {
        git(&self.dir, &["add", "--all"])?;
        if git(&self.dir, &["diff", "--cached", "--quiet"]).is_ok() {
            return Ok(false);
        }
        git(
            &self.dir,
            &["commit", "--quiet", "--no-verify", "-m", message],
        )?;
        Ok(true)
    }

    /// Brings the lane's one branch back into the repository (`refs/heads/stet/<item>`).
    pub fn bring_back(&self, repo: &Path) -> Result<String, GitError> {
        git(
            repo,
            &[
                "fetch",
                "--quiet",
                self.dir.to_str().unwrap_or_default(),
                &format!("+refs/heads/{b}:refs/heads/{b}", b = self.branch),
            ],
        )?;
        git(repo, &["rev-parse", &format!("refs/heads/{}", self.branch)])
    }

    /// Pushes the lane's branch (brought back first) to the remote, from the repository.
    /// A lane only moves forward from what was pushed before, so the push is a plain
    /// fast-forward: if someone else moved the branch, it is refused, not overwritten.
    pub fn push(&self, repo: &Path, remote: &str) -> Result<(), GitError> {
        self.bring_back(repo)?;
        git(
            repo,
            &[
                "push",
                "--quiet",
                remote,
                &format!("refs/heads/{b}:refs/heads/{b}", b = self.branch),
            ],
        )
        .map(|_| ())
    }

    /// Removes the working copy (the branch stays in the repository and on the remote).
    pub fn remove(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_with_remote() -> (tempfile::TempDir, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let bare = root.path().join("remote.git");
        git(
            root.path(),
            &["init", "--quiet", "--bare", bare.to_str().unwrap()],
        )
        .unwrap();
        let work = root.path().join("work");
        git(
            root.path(),
            &[
                "clone",
                "--quiet",
                bare.to_str().unwrap(),
                work.to_str().unwrap(),
            ],
        )
        .unwrap();
        std::fs::write(work.join("README"), "hello\n").unwrap();
        git(&work, &["add", "README"]).unwrap();
        git(&work, &["commit", "--quiet", "-m", "start"]).unwrap();
        git(&work, &["push", "--quiet", "origin", "HEAD"]).unwrap();
        // The remote's URL could carry a credential; a lane must never see it.
        git(
            &work,
            &["config", "remote.origin.pushurl", bare.to_str().unwrap()],
        )
        .unwrap();
        (root, work)
    }

    #[test]
    fn a_lane_is_its_own_clone_with_no_remote_and_only_its_branch_comes_back() {
        let (root, work) = repo_with_remote();
        let lane = open(&work, "origin", "fix-typo", "HEAD").unwrap();
        assert_eq!(lane.branch, "stet/fix-typo");
        assert!(
            git(&lane.dir, &["remote"]).unwrap().is_empty(),
            "a lane has no remote"
        );
        let config = std::fs::read_to_string(lane.dir.join(".git/config")).unwrap();
        assert!(!config.contains("remote.git"), "{config}");
        std::fs::write(lane.dir.join("README"), "hello, fixed\n").unwrap();
        git(&lane.dir, &["checkout", "--quiet", "-b", "stray"]).unwrap();
        git(&lane.dir, &["checkout", "--quiet", "stet/fix-typo"]).unwrap();
        assert!(lane.commit_all("stet: fix-typo").unwrap());
        assert!(!lane.commit_all("nothing").unwrap());
        lane.push(&work, "origin").unwrap();
        let remote_branches = git(&root.path().join("remote.git"), &["branch", "--list"]).unwrap();
        assert!(
            remote_branches.contains("stet/fix-typo"),
            "{remote_branches}"
        );
        assert!(
            !remote_branches.contains("stray"),
            "only the lane's branch leaves: {remote_branches}"
        );
        // Opening again on this clone reuses the working copy.
        assert_eq!(open(&work, "origin", "fix-typo", "HEAD").unwrap(), lane);
    }

    #[test]
    fn a_peer_continues_from_the_pushed_branch() {
        let (root, work) = repo_with_remote();
        let lane = open(&work, "origin", "item", "HEAD").unwrap();
        std::fs::write(lane.dir.join("NEW"), "from the first clone\n").unwrap();
        lane.commit_all("first clone's work").unwrap();
        lane.push(&work, "origin").unwrap();
        let peer = root.path().join("peer");
        git(
            root.path(),
            &[
                "clone",
                "--quiet",
                root.path().join("remote.git").to_str().unwrap(),
                peer.to_str().unwrap(),
            ],
        )
        .unwrap();
        let theirs = open(&peer, "origin", "item", "HEAD").unwrap();
        assert_eq!(
            std::fs::read_to_string(theirs.dir.join("NEW")).unwrap(),
            "from the first clone\n"
        );
        assert_eq!(theirs.head().unwrap(), lane.head().unwrap());
    }
}
