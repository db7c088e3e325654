//! The base lanes branch from: the remote's branch, as fetched — never the local HEAD.
//!
//! A drive lands its lanes on the remote, so it works from what the remote holds: a commit
//! only this clone has (not pushed yet) must not ride into a lane's branch, and a queue
//! file only this working copy has is not the queue every clone drains. The base is the
//! remote's default branch (what its `HEAD` names); else the remote branch the local branch
//! tracks; else the remote branch of the local branch's name (a fresh clone of an empty
//! remote has no default branch until its first push names one, and may track nothing).
//! It is fetched into the remote-tracking ref (`refs/remotes/<remote>/<branch>`), and that
//! commit is the base: the lanes' starting point, what reviews and `stet show` diff
//! against, what `stet clean --remote` calls merged, and the tree the queue is read from.

use std::path::Path;

/// How a base was found: the first of these the remote has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// The remote's default branch (its `HEAD`).
    Default,
    /// The remote branch the local branch tracks.
    Tracked,
    /// The remote branch of the local branch's name.
    SameName,
}

/// The base of a drive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Base {
    /// The remote's branch (`main`).
    pub branch: String,
    /// Its remote-tracking name here (`origin/main`), as a person names it.
    pub name: String,
    /// The commit it was at when fetched.
    pub commit: String,
    /// How it was found.
    pub found: Found,
}

/// Why there is no base.
#[derive(Debug, thiserror::Error)]
pub enum BaseError {
    /// The remote did not answer.
    #[error("the remote {remote} did not answer: {detail}")]
    Unreachable {
        /// The remote's name.
        remote: String,
        /// What git said.
        detail: String,
    },
    /// The remote has none of the branches a base could be.
    #[error("the remote {remote} has no branch to branch lanes from ({tried})")]
    None {
        /// The remote's name.
        remote: String,
        /// What was looked for, in words.
        tried: String,
    },
}

/// The local branch `HEAD` is on, if any.
fn local_branch(repo: &Path) -> Option<String> {
    crate::git::run(repo, &["symbolic-ref", "--quiet", "--short", "HEAD"])
        .ok()
        .filter(|b| !b.is_empty())
}

/// The branch of `remote` the local branch `local` tracks (`branch.<local>.merge`, when
/// `branch.<local>.remote` is `remote`).
fn tracked(repo: &Path, remote: &str, local: &str) -> Option<String> {
    let get = |key: &str| {
        crate::git::run(repo, &["config", "--get", &format!("branch.{local}.{key}")]).ok()
    };
    if get("remote")? != remote {
        return None;
    }
    get("merge")?
        .strip_prefix("refs/heads/")
        .map(str::to_string)
        .filter(|b| !b.is_empty())
}

/// The candidates after the default branch, in order: the tracked branch, the local
/// branch's name.
fn fallbacks(repo: &Path, remote: &str) -> Vec<(String, Found)> {
    let mut found = Vec::new();
    if let Some(local) = local_branch(repo) {
        if let Some(branch) = tracked(repo, remote, &local) {
            found.push((branch, Found::Tracked));
        }
        if !found.iter().any(|(b, _)| *b == local) {
            found.push((local, Found::SameName));
        }
    }
    found
}

/// Asks `remote` for its base branch (one `ls-remote`), fetches it and returns it.
pub fn fetch(repo: &Path, remote: &str) -> Result<Base, BaseError> {
    let fallbacks = fallbacks(repo, remote);
    let mut args = vec![
        "ls-remote".to_string(),
        "--symref".to_string(),
        remote.to_string(),
        "HEAD".to_string(),
    ];
    args.extend(fallbacks.iter().map(|(b, _)| format!("refs/heads/{b}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let listed = crate::git::run(repo, &args).map_err(|e| BaseError::Unreachable {
        remote: remote.to_string(),
        detail: crate::reservations::first_cause(&e.detail).to_string(),
    })?;
    // `ref: refs/heads/main<TAB>HEAD` names the default branch; `<oid><TAB>HEAD` says it
    // exists (an empty remote's HEAD names a branch not yet born, and lists neither).
    let mut default = None;
    let mut head_born = false;
    let mut heads = std::collections::HashSet::new();
    for line in listed.lines() {
        let Some((left, name)) = line.split_once('\t') else {
            continue;
        };
        if name == "HEAD" {
            match left.strip_prefix("ref: refs/heads/") {
                Some(branch) => default = Some(branch.to_string()),
                None => head_born = true,
            }
        } else if let Some(branch) = name.strip_prefix("refs/heads/") {
            heads.insert(branch.to_string());
        }
    }
    let chosen = default
        .filter(|_| head_born)
        .map(|b| (b, Found::Default))
        .or_else(|| fallbacks.iter().find(|(b, _)| heads.contains(b)).cloned());
    let Some((branch, found)) = chosen else {
        let mut tried = vec!["its HEAD names no branch it has".to_string()];
        for (b, how) in &fallbacks {
            tried.push(match how {
                Found::Tracked => format!("no {b}, which your branch tracks"),
                _ => format!("no {b}, the name of your branch"),
            });
        }
        return Err(BaseError::None {
            remote: remote.to_string(),
            tried: tried.join("; "),
        });
    };
    let tracking = format!("refs/remotes/{remote}/{branch}");
    let unreachable = |e: crate::git::GitError| BaseError::Unreachable {
        remote: remote.to_string(),
        detail: crate::reservations::first_cause(&e.detail).to_string(),
    };
    crate::git::run(
        repo,
        &[
            "fetch",
            "--quiet",
            "--no-tags",
            remote,
            &format!("+refs/heads/{branch}:{tracking}"),
        ],
    )
    .map_err(unreachable)?;
    let commit = crate::git::run(
        repo,
        &["rev-parse", "--verify", &format!("{tracking}^{{commit}}")],
    )
    .map_err(unreachable)?;
    if found == Found::Default {
        // What `known` reads first: the remote's default branch as this fetch found it
        // (a clone sets it once; a remote whose default changed since would else be read
        // by its old one). Best effort: `known` falls back without it.
        let _ = crate::git::run(
            repo,
            &[
                "symbolic-ref",
                &format!("refs/remotes/{remote}/HEAD"),
                &tracking,
            ],
        );
    }
    Ok(Base {
        name: format!("{remote}/{branch}"),
        branch,
        commit,
        found,
    })
}

/// The base as this clone last fetched it, without asking the remote: the
/// remote-tracking ref of the remote's default branch (`refs/remotes/<remote>/HEAD`), else
/// of the tracked branch, else of the local branch's name. For what only reads (`stet
/// show`): a drive fetches.
pub fn known(repo: &Path, remote: &str) -> Option<Base> {
    let default = crate::git::run(
        repo,
        &[
            "symbolic-ref",
            "--quiet",
            &format!("refs/remotes/{remote}/HEAD"),
        ],
    )
    .ok()
    .and_then(|r| {
        r.strip_prefix(&format!("refs/remotes/{remote}/"))
            .map(str::to_string)
    })
    .map(|b| (b, Found::Default));
    default
        .into_iter()
        .chain(fallbacks(repo, remote))
        .find_map(|(branch, found)| {
            let commit = crate::git::run(
                repo,
                &[
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    &format!("refs/remotes/{remote}/{branch}^{{commit}}"),
                ],
            )
            .ok()?;
            Some(Base {
                name: format!("{remote}/{branch}"),
                branch,
                commit,
                found,
            })
        })
}

/// How many commits the local `HEAD` has that `base` does not: what a drive leaves out of
/// its lanes. `None` when there is no local commit yet (or git cannot say).
pub fn local_ahead(repo: &Path, base: &Base) -> Option<u64> {
    crate::git::run(
        repo,
        &["rev-list", "--count", &format!("{}..HEAD", base.commit)],
    )
    .ok()?
    .parse()
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::run;

    #[test]
    fn the_base_is_the_remotes_default_branch_as_fetched_not_the_local_head() {
        let (_root, bare, work) = crate::git::testing::clone_of_fresh_remote();
        let pushed = run(&work, &["rev-parse", "HEAD"]).unwrap();
        std::fs::write(work.join("local"), "not pushed\n").unwrap();
        run(&work, &["add", "local"]).unwrap();
        run(&work, &["commit", "--quiet", "-m", "local"]).unwrap();
        let base = fetch(&work, "origin").unwrap();
        assert_eq!(base.commit, pushed);
        assert_eq!(base.found, Found::Default);
        assert_eq!(base.name, format!("origin/{}", base.branch));
        assert_eq!(local_ahead(&work, &base), Some(1));
        // A push elsewhere is fetched: the base moves with the remote.
        let other = _root.path().join("other");
        run(
            _root.path(),
            &[
                "clone",
                "--quiet",
                bare.to_str().unwrap(),
                other.to_str().unwrap(),
            ],
        )
        .unwrap();
        std::fs::write(other.join("theirs"), "pushed by a peer\n").unwrap();
        run(&other, &["add", "theirs"]).unwrap();
        run(&other, &["commit", "--quiet", "-m", "theirs"]).unwrap();
        run(&other, &["push", "--quiet", "origin", "HEAD"]).unwrap();
        let moved = fetch(&work, "origin").unwrap();
        assert_eq!(moved.commit, run(&other, &["rev-parse", "HEAD"]).unwrap());
        assert_eq!(known(&work, "origin").map(|b| b.commit), Some(moved.commit));
    }

    #[test]
    fn an_empty_remote_pushed_to_under_another_name_is_found_by_the_branchs_name() {
        let root = tempfile::tempdir().unwrap();
        let bare = root.path().join("remote.git");
        let work = root.path().join("work");
        run(
            root.path(),
            &["init", "--quiet", "--bare", bare.to_str().unwrap()],
        )
        .unwrap();
        run(
            root.path(),
            &[
                "clone",
                "--quiet",
                bare.to_str().unwrap(),
                work.to_str().unwrap(),
            ],
        )
        .unwrap();
        // Nothing pushed yet: no base, and the error says what was looked for.
        let none = fetch(&work, "origin").unwrap_err();
        assert!(matches!(none, BaseError::None { .. }), "{none}");
        assert!(none.to_string().contains("HEAD names no branch"), "{none}");
        run(&work, &["checkout", "--quiet", "-b", "trunk"]).unwrap();
        std::fs::write(work.join("f"), "first\n").unwrap();
        run(&work, &["add", "f"]).unwrap();
        run(&work, &["commit", "--quiet", "-m", "first"]).unwrap();
        run(&work, &["push", "--quiet", "origin", "HEAD"]).unwrap();
        // The remote's HEAD still names a branch never born; the local branch's name is
        // found.
        let base = fetch(&work, "origin").unwrap();
        assert_eq!(
            (base.branch.as_str(), base.found),
            ("trunk", Found::SameName)
        );
        assert_eq!(base.commit, run(&work, &["rev-parse", "HEAD"]).unwrap());
        assert_eq!(local_ahead(&work, &base), Some(0));
    }

    #[test]
    fn what_a_drive_fetched_is_what_show_knows_after_the_remotes_default_branch_changed() {
        let (_root, bare, work) = crate::git::testing::clone_of_fresh_remote();
        let first = fetch(&work, "origin").unwrap();
        // The remote's default becomes another branch, ahead of the first.
        run(&work, &["checkout", "--quiet", "-b", "trunk"]).unwrap();
        std::fs::write(work.join("t"), "on trunk\n").unwrap();
        run(&work, &["add", "t"]).unwrap();
        run(&work, &["commit", "--quiet", "-m", "trunk"]).unwrap();
        run(&work, &["push", "--quiet", "origin", "trunk"]).unwrap();
        run(&bare, &["symbolic-ref", "HEAD", "refs/heads/trunk"]).unwrap();
        let moved = fetch(&work, "origin").unwrap();
        assert_eq!(
            (moved.branch.as_str(), moved.found),
            ("trunk", Found::Default)
        );
        assert_ne!(moved.branch, first.branch);
        let known = known(&work, "origin").unwrap();
        assert_eq!((known.branch, known.commit), (moved.branch, moved.commit));
    }

    #[test]
    fn an_unreachable_remote_is_named_as_such() {
        let (_root, _bare, work) = crate::git::testing::clone_of_fresh_remote();
        run(
            &work,
            &["remote", "set-url", "origin", "/nonexistent/r.git"],
        )
        .unwrap();
        let err = fetch(&work, "origin").unwrap_err();
        assert!(matches!(err, BaseError::Unreachable { .. }), "{err}");
    }
}
