//! An item's branch taken into the person's own working copy: `stet checkout` (a local
//! branch named as the lane's, switched to) and `stet merge` (into the current branch).
//! The person's own git runs here, as their `git switch` and `git merge` would: they asked
//! for the work in their tree.

use std::path::Path;

use super::reopen::{branch_ref, Reopened};
use super::{branch_of, git, GitError};

/// Why an item's branch was not taken.
#[derive(Debug, thiserror::Error)]
pub enum TakeError {
    /// The working copy has changes of its own (each `git status --short` line).
    #[error("the working copy has uncommitted changes")]
    Dirty(Vec<String>),
    /// No branch of the item here or on the remote.
    #[error("no branch {0} here or on the remote")]
    NoBranch(String),
    /// The local branch is at another commit than the remote's.
    #[error("a local branch {branch} exists at {here}, and the remote's is at {there}")]
    Elsewhere {
        /// The branch.
        branch: String,
        /// Where the local one is.
        here: String,
        /// Where the remote's is.
        there: String,
    },
    /// The branch carries a repository its base does not (words for a person): git would
    /// take it for one in the person's working copy.
    #[error("{0}")]
    CarriesRepository(String),
    /// The merge stopped on conflicts, in these files.
    #[error("the merge stopped on conflicts")]
    Conflict(Vec<String>),
    /// Git failed.
    #[error(transparent)]
    Git(#[from] GitError),
}

/// What was taken.
#[derive(Debug)]
pub struct Taken {
    /// The lane's branch (`stet/<item>`).
    pub branch: String,
    /// The commit taken.
    pub commit: String,
    /// Nothing was to be done (already on it, already merged).
    pub already: bool,
}

/// The working copy's changes to tracked files (`git status --short` lines); untracked
/// files are git's own to guard.
pub fn dirty(repo: &Path) -> Result<Vec<String>, GitError> {
    Ok(
        git(repo, &["status", "--porcelain", "--untracked-files=no"])?
            .lines()
            .map(str::to_string)
            .collect(),
    )
}

fn clean(repo: &Path) -> Result<(), TakeError> {
    let changed = dirty(repo)?;
    if changed.is_empty() {
        Ok(())
    } else {
        Err(TakeError::Dirty(changed))
    }
}

/// Refuses a branch that carries a repository its base (where it branched from the
/// remote's base) does not hold as it is: once in the person's tree, their git would obey
/// it (the gate's rule for what lands, `crate::gate::check_branch`).
fn carries_nothing(repo: &Path, remote: &str, branch: &str, commit: &str) -> Result<(), TakeError> {
    let base = super::base_of(repo, remote, commit)?;
    let carried = crate::gate::check_branch(repo, &base, commit)?;
    if carried.is_empty() {
        Ok(())
    } else {
        Err(TakeError::CarriesRepository(crate::gate::carried_words(
            branch, &carried,
        )))
    }
}

fn commit_of(repo: &Path, name: &str) -> Result<String, GitError> {
    git(
        repo,
        &[
            "rev-parse",
            "--verify",
            "--end-of-options",
            &format!("{name}^{{commit}}"),
        ],
    )
}

/// `stet checkout`: a local branch `stet/<item>` of the item's work (from the remote's
/// when there is no local one), switched to.
pub fn checkout(repo: &Path, remote: &str, item: &str) -> Result<Taken, TakeError> {
    let branch = branch_of(item);
    let local = format!("refs/heads/{branch}");
    clean(repo)?;
    let (source, from) =
        branch_ref(repo, remote, item).ok_or_else(|| TakeError::NoBranch(branch.clone()))?;
    let commit = commit_of(repo, &source)?;
    carries_nothing(repo, remote, &branch, &commit)?;
    if from == Reopened::Local {
        // The local branch: refused when the remote's holds other work.
        if let Some(pushed) = super::fetch_pushed(repo, remote, item) {
            let there = commit_of(repo, &pushed)?;
            if there != commit {
                return Err(TakeError::Elsewhere {
                    branch,
                    here: commit,
                    there,
                });
            }
        }
    } else {
        git(repo, &["branch", "--no-track", &branch, &commit])?;
    }
    let on = git(repo, &["symbolic-ref", "--quiet", "HEAD"]).unwrap_or_default();
    let already = on == local;
    if !already {
        git(repo, &["switch", "--quiet", &branch])?;
    }
    Ok(Taken {
        branch,
        commit,
        already,
    })
}

/// `stet merge`: the item's branch (local, else the remote's) merged into the current
/// branch.
pub fn merge(repo: &Path, remote: &str, item: &str) -> Result<Taken, TakeError> {
    let branch = branch_of(item);
    clean(repo)?;
    let (source, _) =
        branch_ref(repo, remote, item).ok_or_else(|| TakeError::NoBranch(branch.clone()))?;
    let commit = commit_of(repo, &source)?;
    if git(repo, &["merge-base", "--is-ancestor", &commit, "HEAD"]).is_ok() {
        return Ok(Taken {
            branch,
            commit,
            already: true,
        });
    }
    carries_nothing(repo, remote, &branch, &commit)?;
    // The person's own identity makes the merge commit (not stet's, which its other git
    // commands carry).
    let args = [
        "merge",
        "--no-edit",
        "-m",
        &format!("Merge branch '{branch}'"),
        &commit,
    ];
    let merged = std::process::Command::new("git")
        .args(args)
        .current_dir(repo)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| GitError {
            args: args.join(" "),
            dir: repo.display().to_string(),
            detail: format!("cannot run git: {e}"),
        })?;
    if !merged.status.success() {
        let conflicted: Vec<String> = git(repo, &["diff", "--name-only", "--diff-filter=U"])
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        if !conflicted.is_empty() {
            return Err(TakeError::Conflict(conflicted));
        }
        return Err(TakeError::Git(GitError {
            args: "merge".into(),
            dir: repo.display().to_string(),
            detail: String::from_utf8_lossy(&merged.stderr).trim().to_string(),
        }));
    }
    Ok(Taken {
        branch,
        commit,
        already: false,
    })
}
