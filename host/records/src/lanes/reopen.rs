//! A lane for a person to enter (`stet shell`, `stet diff`): the one kept on this clone, or,
//! when it is gone (landed and pooled, cleaned), one opened again from its branch — the
//! local `stet/<item>`, else the remote's.

use std::path::Path;

use super::{branch_of, discard, git, lanes_dir, make, opening, stet_dir, GitError, Lane};

/// Where an entered lane came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reopened {
    /// The lane kept on this clone, as it is.
    Kept,
    /// Opened again from the local branch.
    Local,
    /// Opened again from the remote's branch.
    Remote,
}

/// `item`'s lane as kept on this clone, untouched (its file system mounted again after a
/// restart); `None` when there is none, or its file system cannot be mounted here.
pub fn here(repo: &Path, item: &str) -> Option<Lane> {
    let root = lanes_dir(repo).join(item);
    let lane = Lane {
        item: item.to_string(),
        branch: branch_of(item),
        dir: root.join("work"),
        git_dir: root.join("git"),
    };
    let usable = lane.git_dir.join("HEAD").is_file()
        && lane.dir.is_dir()
        && super::disk::ensure_mounted(&root, &lane.dir).is_ok();
    usable.then_some(lane)
}

/// The items whose lane branch this clone or `remote` has (local `stet/*` branches, stet's
/// fetched copies, remote-tracking branches, then the remote's own, listed once): what the
/// lane commands can still name once an item's queue file is gone (archived, removed).
pub fn branch_items(repo: &Path, remote: &str) -> Vec<String> {
    let mut ids = std::collections::BTreeSet::new();
    let here = git(
        repo,
        &[
            "for-each-ref",
            "--format=%(refname)",
            "refs/heads/stet/",
            "refs/stet/pushed/",
            &format!("refs/remotes/{remote}/stet/"),
        ],
    )
    .unwrap_or_default();
    let there = git(repo, &["ls-remote", remote, "refs/heads/stet/*"]).unwrap_or_default();
    for name in here.lines().chain(
        there
            .lines()
            .filter_map(|l| l.split_once('\t').map(|(_, r)| r)),
    ) {
        let id = ["refs/heads/stet/", "refs/stet/pushed/"]
            .iter()
            .chain(std::iter::once(
                &format!("refs/remotes/{remote}/stet/").as_str(),
            ))
            .find_map(|prefix| name.strip_prefix(prefix));
        if let Some(id) = id.filter(|id| crate::queue::valid_id(id)) {
            ids.insert(id.to_string());
        }
    }
    ids.into_iter().collect()
}

/// The ref of the repository holding `item`'s branch: the local one, else the remote's
/// (fetched now into `refs/stet/pushed/<item>`; when the remote does not answer, the
/// remote-tracking branch a `git fetch` left). `None` when there is none.
pub(super) fn branch_ref(repo: &Path, remote: &str, item: &str) -> Option<(String, Reopened)> {
    let branch = branch_of(item);
    let has = |name: &str| {
        git(
            repo,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                &format!("{name}^{{commit}}"),
            ],
        )
        .is_ok()
    };
    let local = format!("refs/heads/{branch}");
    if has(&local) {
        return Some((local, Reopened::Local));
    }
    if let Some(pushed) = super::fetch_pushed(repo, remote, item).filter(|p| has(p)) {
        return Some((pushed, Reopened::Remote));
    }
    let tracking = format!("refs/remotes/{remote}/{branch}");
    has(&tracking).then_some((tracking, Reopened::Remote))
}

/// `item`'s lane for a person to enter: the one kept here, else one opened again from its
/// branch (local, else the remote's), within `bounds` as a drive's. `None` when there is
/// neither a lane nor a branch.
pub fn reopen(
    repo: &Path,
    remote: &str,
    item: &str,
    bounds: Option<super::disk::Bounds>,
) -> Result<Option<(Lane, Reopened)>, GitError> {
    let _opening = opening(repo, item)?;
    if let Some(lane) = here(repo, item) {
        return Ok(Some((lane, Reopened::Kept)));
    }
    let Some((source, from)) = branch_ref(repo, remote, item) else {
        return Ok(None);
    };
    let root = lanes_dir(repo).join(item);
    // A half-made lane from a crash is made again.
    if root.exists() {
        discard(&stet_dir(repo), &root).map_err(|e| super::io_error("remove", &root, e))?;
    }
    let lane = Lane {
        item: item.to_string(),
        branch: branch_of(item),
        dir: root.join("work"),
        git_dir: root.join("git"),
    };
    make(repo, &lane, &source, bounds)?;
    Ok(Some((lane, from)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_gone_is_opened_again_from_the_local_branch_else_the_remotes() {
        let (_root, _bare, work) = crate::git::testing::clone_of_fresh_remote();
        let lane = super::super::open(&work, "origin", "item", "HEAD", None).unwrap();
        std::fs::write(lane.dir.join("work.txt"), "the agent's\n").unwrap();
        lane.commit_all("the agent's work").unwrap();
        lane.push(&work, "origin").unwrap();
        let pushed = lane.head().unwrap();
        std::fs::write(lane.dir.join("edit.txt"), "uncommitted\n").unwrap();

        let (kept, from) = reopen(&work, "origin", "item", None).unwrap().unwrap();
        assert_eq!(from, Reopened::Kept);
        assert!(kept.dir.join("edit.txt").is_file(), "kept as it is");

        lane.remove();
        let (again, from) = reopen(&work, "origin", "item", None).unwrap().unwrap();
        assert_eq!(from, Reopened::Local);
        assert_eq!(again.head().unwrap(), pushed);
        assert!(again.dir.join("work.txt").is_file());

        again.remove();
        git(&work, &["branch", "-D", "stet/item"]).unwrap();
        let (remote, from) = reopen(&work, "origin", "item", None).unwrap().unwrap();
        assert_eq!(from, Reopened::Remote);
        assert_eq!(remote.head().unwrap(), pushed);

        remote.remove();
        git(
            &work,
            &["push", "--quiet", "origin", "--delete", "stet/item"],
        )
        .unwrap();
        git(&work, &["update-ref", "-d", "refs/stet/pushed/item"]).unwrap();
        assert!(reopen(&work, "origin", "item", None).unwrap().is_none());
    }
}
