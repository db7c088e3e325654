//! Lanes: each item's own branch (`stet/<item>`) and working copy.
//!
//! A lane lives under `<git dir>/stet/lanes/<item>/` as two directories:
//!
//! - `work/`, the working tree, which the sandbox mounts read-write (read-only for review);
//! - `git/`, its git directory, which **no sandbox can write**: it is mounted read-only
//!   at `work/.git` (an empty directory kept as the mount point), so the agent can still
//!   run `git status`, `git diff` and `git log`, but cannot plant a hook, an fsmonitor, a
//!   filter driver, a signing program or an alternate where the host's git would find it.
//!   The host's git never looks at `work/.git` at all: every command names `GIT_DIR` and
//!   `GIT_WORK_TREE` explicitly, and runs [`Inert`] (environment from scratch, nothing of
//!   the repository's configuration that runs a program obeyed) as the second layer.
//!
//! Not a `git worktree`, whose `.git` file would point into the main repository: the lane's
//! git directory is its own, filled by fetching from the repository (objects are copied,
//! never hardlinked), and it has no remote. Only the lane's one branch comes back out: the
//! repository fetches that ref from the lane's git directory (inertly), and the host, never
//! the sandbox, pushes it to the remote.

use std::path::{Path, PathBuf};

use crate::git::Inert;
use crate::receipts::git_dir;

/// One lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lane {
    /// The item it works on.
    pub item: String,
    /// Its branch, in the lane and (once landed or pushed) on the remote.
    pub branch: String,
    /// Its working tree.
    pub dir: PathBuf,
    /// Its git directory, outside the working tree.
    pub git_dir: PathBuf,
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

/// Where lanes live in `repo`.
fn lanes_dir(repo: &Path) -> PathBuf {
    git_dir(repo).join("stet/lanes")
}

/// The items whose lanes are kept on this clone.
pub fn kept(repo: &Path) -> Vec<String> {
    let mut items: Vec<String> = std::fs::read_dir(lanes_dir(repo))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.path().join("git/HEAD").is_file())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    items.sort();
    items
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> GitError {
    GitError {
        args: what.into(),
        dir: path.display().to_string(),
        detail: e.to_string(),
    }
}

/// Opens `item`'s lane: the existing working copy on this clone, else a new one starting
/// from the lane's branch on the remote (a peer's pushed work), else from `base`.
pub fn open(repo: &Path, remote: &str, item: &str, base: &str) -> Result<Lane, GitError> {
    let branch = branch_of(item);
    let root = lanes_dir(repo).join(item);
    let lane = Lane {
        item: item.to_string(),
        branch: branch.clone(),
        dir: root.join("work"),
        git_dir: root.join("git"),
    };
    if lane.git_dir.join("HEAD").is_file() && lane.dir.is_dir() {
        catch_up(repo, remote, &lane)?;
        return Ok(lane);
    }
    // A half-made lane from a crash (or one in an older layout, whose git directory was
    // inside its working tree) is made again from what was pushed.
    if root.exists() {
        std::fs::remove_dir_all(&root).map_err(|e| io_error("remove", &root, e))?;
    }
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
    let source = if pushed {
        format!("refs/stet/pushed/{item}")
    } else {
        base.to_string()
    };
    let partial = root.with_extension("partial");
    if partial.exists() {
        std::fs::remove_dir_all(&partial).map_err(|e| io_error("remove", &partial, e))?;
    }
    let made = lay_out(&partial, item)?;
    let git = made.git();
    // The repository's commits are fetched (copied) into the lane's own git directory.
    git.run(&[
        "fetch",
        "--quiet",
        "--no-tags",
        git_dir(repo).to_str().unwrap_or_default(),
        &format!("+{source}:refs/heads/{branch}"),
    ])?;
    git.run(&["symbolic-ref", "HEAD", &format!("refs/heads/{branch}")])?;
    git.run(&["reset", "--quiet", "--hard"])?;
    std::fs::rename(&partial, &root).map_err(|e| io_error("rename", &root, e))?;
    Ok(lane)
}

/// Makes an empty lane's two directories under `root`: the git directory (not bare, so
/// the agent's git finds its working tree when it is mounted at `work/.git`; with the inert
/// attributes) and the working tree with its empty `.git` mount point.
fn lay_out(root: &Path, item: &str) -> Result<Lane, GitError> {
    let lane = Lane {
        item: item.to_string(),
        branch: branch_of(item),
        dir: root.join("work"),
        git_dir: root.join("git"),
    };
    std::fs::create_dir_all(&lane.dir).map_err(|e| io_error("mkdir", &lane.dir, e))?;
    Inert::at(root).run(&[
        "init",
        "--quiet",
        "--bare",
        "--template=",
        lane.git_dir.to_str().unwrap_or_default(),
    ])?;
    lane.git().run(&["config", "core.bare", "false"])?;
    std::fs::create_dir_all(lane.git_dir.join("info"))
        .and_then(|_| {
            std::fs::write(
                lane.git_dir.join("info/attributes"),
                crate::git::INERT_ATTRIBUTES,
            )
        })
        .map_err(|e| io_error("write info/attributes", &lane.git_dir, e))?;
    // The mount point of the read-only git directory inside the sandbox; the host's git
    // never reads it (it is told where the git directory is).
    std::fs::create_dir_all(lane.dir.join(".git"))
        .map_err(|e| io_error("mkdir .git", &lane.dir, e))?;
    Ok(lane)
}

/// A lane of its own with one empty commit, under `root`: laid out and walled as a drive's
/// lanes are (the wall proof's scratch lane).
pub fn scratch(root: &Path) -> Result<Lane, GitError> {
    let lane = lay_out(root, "wall-proof")?;
    let git = lane.git();
    git.run(&[
        "symbolic-ref",
        "HEAD",
        &format!("refs/heads/{}", lane.branch),
    ])?;
    git.run(&["commit", "--quiet", "--allow-empty", "-m", "a scratch lane"])?;
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
    let git = lane.git();
    git.run(&[
        "fetch",
        "--quiet",
        "--no-tags",
        git_dir(repo).to_str().unwrap_or_default(),
        &pushed_ref,
    ])?;
    // Only when the pushed branch contains everything here: a lane never moves back.
    if git
        .run(&["merge-base", "--is-ancestor", &here, &pushed])
        .is_ok()
    {
        git.run(&["reset", "--quiet", "--hard", &pushed])?;
    }
    Ok(())
}

impl Lane {
    /// Inert git on this lane.
    pub fn git(&self) -> Inert {
        Inert::lane(&self.git_dir, &self.dir)
    }

    /// The lane's current commit.
    pub fn head(&self) -> Result<String, GitError> {
        self.git().run(&["rev-parse", "HEAD"])
    }

    /// Commits whatever the agent left uncommitted; returns whether there was anything.
    /// Repositories the agent made inside the lane are not its content: they are left out
    /// (git would otherwise record them as submodules, or refuse an empty one).
    pub fn commit_all(&self, message: &str) -> Result<bool, GitError> {
        self.commit_all_as(message, None)
    }

    /// [`Lane::commit_all`], authored by `author` (stet stays the committer).
    pub fn commit_all_as(
        &self,
        message: &str,
        author: Option<&crate::git::Person>,
    ) -> Result<bool, GitError> {
        let git = self.git();
        let others = git.run(&["ls-files", "--others", "--exclude-standard", "-z"])?;
        let nested: Vec<String> = others
            .split('\0')
            .filter(|p| p.ends_with('/'))
            .map(|p| format!(":(exclude,literal){p}"))
            .collect();
        if nested.len() > 1000 {
            return Err(GitError {
                args: "add --all".into(),
                dir: self.dir.display().to_string(),
                detail: format!(
                    "the lane holds {} repositories of its own; stet commits files, not repositories",
                    nested.len()
                ),
            });
        }
        let mut add = vec!["add", "--all", "--", "."];
        add.extend(nested.iter().map(String::as_str));
        git.run(&add)?;
        if git.run(&["diff", "--cached", "--quiet"]).is_ok() {
            return Ok(false);
        }
        match author {
            Some(person) => {
                let author = format!("{} <{}>", person.name, person.email);
                git.run(&[
                    "commit",
                    "--quiet",
                    "--no-verify",
                    "--author",
                    &author,
                    "-m",
                    message,
                ])?
            }
            None => git.run(&["commit", "--quiet", "--no-verify", "-m", message])?,
        };
        Ok(true)
    }

    /// Puts the working tree back to the lane's last commit: what a stage that may not
    /// change the lane (the check) wrote is gone, ignored files included.
    pub fn restore(&self) -> Result<(), GitError> {
        let git = self.git();
        git.run(&["reset", "--quiet", "--hard"])?;
        // `-ff`: nested repositories go too; `.git` (the mount point) is never touched.
        git.run(&["clean", "--quiet", "-ffdx", "--exclude=/.git"])?;
        Ok(())
    }

    /// Brings the lane's one branch back into the repository (`refs/heads/stet/<item>`).
    pub fn bring_back(&self, repo: &Path) -> Result<String, GitError> {
        Inert::at(repo).run(&[
            "fetch",
            "--quiet",
            "--no-tags",
            self.git_dir.to_str().unwrap_or_default(),
            &format!("+refs/heads/{b}:refs/heads/{b}", b = self.branch),
        ])?;
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

    /// Removes the lane (the branch stays in the repository and on the remote).
    pub fn remove(&self) {
        if let Some(root) = self.dir.parent() {
            let _ = std::fs::remove_dir_all(root);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_with_remote() -> (tempfile::TempDir, PathBuf) {
        let (root, bare, work) = crate::git::testing::clone_of_fresh_remote();
        // The remote's URL could carry a credential; a lane must never see it.
        git(
            &work,
            &["config", "remote.origin.pushurl", bare.to_str().unwrap()],
        )
        .unwrap();
        (root, work)
    }

    #[test]
    fn a_lane_has_its_own_git_dir_with_no_remote_and_only_its_branch_comes_back() {
        let (root, work) = repo_with_remote();
        let lane = open(&work, "origin", "fix-typo", "HEAD").unwrap();
        assert_eq!(lane.branch, "stet/fix-typo");
        assert!(
            !lane.git_dir.starts_with(&lane.dir),
            "the git directory is outside the working tree"
        );
        assert!(lane.dir.join(".git").is_dir(), "the mount point is there");
        assert_eq!(
            std::fs::read_dir(lane.dir.join(".git")).unwrap().count(),
            0,
            "and empty"
        );
        assert!(
            lane.git().run(&["remote"]).unwrap().is_empty(),
            "a lane has no remote"
        );
        let config = std::fs::read_to_string(lane.git_dir.join("config")).unwrap();
        assert!(!config.contains("remote.git"), "{config}");
        std::fs::write(lane.dir.join("README"), "hello, fixed\n").unwrap();
        lane.git()
            .run(&["checkout", "--quiet", "-b", "stray"])
            .unwrap();
        lane.git()
            .run(&["checkout", "--quiet", "stet/fix-typo"])
            .unwrap();
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
        assert_eq!(kept(&work), ["fix-typo"]);
    }

    #[test]
    fn repositories_the_agent_made_in_the_lane_are_left_out() {
        let (_root, work) = repo_with_remote();
        let lane = open(&work, "origin", "item", "HEAD").unwrap();
        for nested in ["empty", "deep/er"] {
            let dot_git = lane.dir.join(nested).join(".git");
            std::fs::create_dir_all(dot_git.join("objects")).unwrap();
            std::fs::create_dir_all(dot_git.join("refs")).unwrap();
            std::fs::write(dot_git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        }
        std::fs::write(lane.dir.join("deep/file"), "content\n").unwrap();
        assert!(lane.commit_all("work").unwrap());
        let files = lane.git().run(&["ls-files"]).unwrap();
        assert_eq!(files, "README\ndeep/file");
    }

    #[test]
    fn what_a_stage_wrote_is_restored_away() {
        let (_root, work) = repo_with_remote();
        let lane = open(&work, "origin", "item", "HEAD").unwrap();
        std::fs::write(lane.dir.join("README"), "changed by the check\n").unwrap();
        std::fs::create_dir_all(lane.dir.join("target/debug")).unwrap();
        std::fs::write(lane.dir.join("target/debug/out"), "built\n").unwrap();
        lane.restore().unwrap();
        assert_eq!(
            std::fs::read_to_string(lane.dir.join("README")).unwrap(),
            "hello\n"
        );
        assert!(!lane.dir.join("target").exists());
        assert!(lane.dir.join(".git").is_dir(), "the mount point stays");
        assert!(!lane.commit_all("nothing").unwrap());
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
