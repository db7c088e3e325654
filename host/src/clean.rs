//! `stet clean`: removing what finished items left behind.
//!
//! On this machine: the temporary directories of a stet that is gone (`sandbox::leftovers`).
//!
//! On this clone: the lanes (working copies and their git directories) and local branches
//! of items that landed, failed or were cancelled — a branch only when the remote has it
//! too (a lane's work that exists here alone is kept) —, and the working copies pooled for
//! the next lanes (`lanes.rs`). With `remote`: their `stet/*`
//! branches on the remote once merged into the base the lanes branch from (`base.rs`; never
//! unmerged work), and a landed item's mark once its file is gone from that base and from
//! this working copy (a mark must outlive the file it keeps drives off, or the next drive
//! would work the item again). A failed or cancelled item's mark is never removed, whatever
//! became of its file: only `stet retry` makes such an item eligible again.

use std::path::Path;

use crate::reservations::{Marks, Remote, ReservationError};

/// One thing removed or kept, in a line.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Done {
    /// `removed` or `kept`.
    pub what: &'static str,
    /// Of what, in words.
    pub detail: String,
    /// Bytes freed on this clone.
    pub bytes: u64,
}

fn removed(detail: String, bytes: u64) -> Done {
    Done {
        what: "removed",
        detail,
        bytes,
    }
}

fn kept(detail: String) -> Done {
    Done {
        what: "kept",
        detail,
        bytes: 0,
    }
}

/// Whether an item is finished, and how.
fn finished(marks: &Marks, item: &str) -> Option<&'static str> {
    if marks.landed.contains(item) {
        Some("landed")
    } else if marks.failed.contains(item) {
        Some("failed")
    } else if marks.cancelled.contains(item) {
        Some("cancelled")
    } else {
        None
    }
}

/// Cleans `repo` (and, with `on_remote`, the remote) of finished items' leftovers.
pub fn clean(
    repo: &Path,
    remote: &Remote<'_>,
    on_remote: bool,
) -> Result<Vec<Done>, ReservationError> {
    let marks = remote.marks()?;
    let held = remote.list()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let in_use = |item: &str| {
        held.iter()
            .any(|h| h.reservation.item == item && h.reservation.expires_at_unix > now)
    };
    let mut done = Vec::new();
    // Lanes kept on this clone.
    for item in crate::lanes::kept(repo) {
        let Some(how) = finished(&marks, &item) else {
            continue;
        };
        if in_use(&item) {
            done.push(kept(format!(
                "the lane of {item} ({how}): a drive still holds it"
            )));
            continue;
        }
        // What a person's shell left there is theirs: never removed unseen.
        if let Some(lane) = crate::lanes::here(repo, &item) {
            if crate::lanes::uncommitted(&lane).is_ok_and(|edits| !edits.is_empty()) {
                done.push(kept(format!(
                    "the lane of {item} ({how}): it holds edits never committed (stet diff {item} shows them); take what you want, then delete {}",
                    lane.dir.parent().unwrap_or(&lane.dir).display()
                )));
                continue;
            }
        }
        let root = crate::git::git_dir(repo).join("stet/lanes").join(&item);
        let bytes = crate::files::tree_size(&root, u64::MAX);
        match std::fs::remove_dir_all(&root) {
            Ok(()) => done.push(removed(format!("the lane of {item} ({how})"), bytes)),
            Err(e) => done.push(kept(format!(
                "the lane of {item} ({how}): cannot remove it: {e}"
            ))),
        }
    }
    // Working copies kept for reuse by the next lanes, and removed lanes not yet deleted.
    match crate::lanes::clear_pool(repo) {
        Ok(0) => {}
        Ok(bytes) => done.push(removed(
            "the working copies kept for the next lanes".to_string(),
            bytes,
        )),
        Err(e) => done.push(kept(format!(
            "the working copies kept for the next lanes: cannot remove them: {e}"
        ))),
    }
    // Temporary directories (profile copies, scratch lanes) of a stet that was killed.
    let temps = crate::sandbox::leftovers::reap_dead_temp_dirs(false);
    if !temps.is_empty() {
        done.push(removed(
            format!(
                "{} a stopped stet left",
                crate::printer::count(temps.len(), "temporary directory", "temporary directories")
            ),
            temps.iter().map(|t| t.bytes).sum(),
        ));
    }
    // Local branches of finished items.
    let local = crate::git::run(
        repo,
        &[
            "for-each-ref",
            "--format=%(refname:strip=2)",
            "refs/heads/stet/",
        ],
    )
    .unwrap_or_default();
    for branch in local.lines().filter(|l| !l.is_empty()) {
        let Some(item) = branch.strip_prefix("stet/") else {
            continue;
        };
        let Some(how) = finished(&marks, item) else {
            continue;
        };
        if in_use(item) {
            continue;
        }
        if !marks.lanes.contains(item) && how != "landed" {
            done.push(kept(format!(
                "the branch {branch} ({how}): its work is on this clone only (push it, or git branch -D it)"
            )));
            continue;
        }
        match crate::git::run(repo, &["update-ref", "-d", &format!("refs/heads/{branch}")]) {
            Ok(_) => done.push(removed(format!("the local branch {branch} ({how})"), 0)),
            Err(e) => done.push(kept(format!("the local branch {branch}: {}", e.detail))),
        }
    }
    if on_remote {
        done.extend(clean_remote(repo, remote, &marks, &in_use)?);
    }
    Ok(done)
}

fn clean_remote(
    repo: &Path,
    remote: &Remote<'_>,
    marks: &Marks,
    in_use: &dyn Fn(&str) -> bool,
) -> Result<Vec<Done>, ReservationError> {
    let mut done = Vec::new();
    // The base the lanes branch from, as the remote has it now.
    let base = match crate::base::fetch(repo, remote.name) {
        Ok(base) => Some(base),
        Err(crate::base::BaseError::Unreachable { detail, .. }) => {
            return Err(remote.unreachable(detail))
        }
        Err(none @ crate::base::BaseError::None { .. }) => {
            done.push(kept(format!(
                "every stet/* branch on {}: {none}",
                remote.name
            )));
            None
        }
    };
    let finished_items: Vec<(&str, &'static str)> = marks
        .landed
        .iter()
        .chain(&marks.failed)
        .chain(&marks.cancelled)
        .filter_map(|i| finished(marks, i).map(|how| (i.as_str(), how)))
        .collect();
    let mut seen = std::collections::HashSet::new();
    for (item, how) in finished_items {
        if !seen.insert(item) || in_use(item) {
            continue;
        }
        let mut branch_gone = !marks.lanes.contains(item);
        if let (false, Some(base)) = (branch_gone, &base) {
            match remove_if_merged(repo, remote, item, how, base) {
                Ok(d) => {
                    branch_gone = d.what == "removed";
                    done.push(d);
                }
                Err(d) => done.push(d),
            }
        }
        // Only a landed mark is ever spent: a failed or cancelled one keeps the item off
        // every drive until the person says otherwise (stet retry), wherever its file is.
        if how != "landed" || !branch_gone {
            continue;
        }
        // The mark goes only once its item file is gone from the base every drive reads the
        // queue from, and from this working copy (from which it could be pushed back).
        let path = format!("{}/{item}.md", crate::queue::QUEUE_DIR);
        let in_base = base.as_ref().is_none_or(|base| {
            crate::git::run(
                repo,
                &["cat-file", "-e", &format!("{}:{path}", base.commit)],
            )
            .is_ok()
        });
        let here = repo.join(&path).symlink_metadata().is_ok();
        if in_base || here {
            continue;
        }
        match remote.unmark_landed(item) {
            Ok(()) => done.push(removed(
                format!(
                    "the landed mark of {item} on {} (its item file is gone)",
                    remote.name
                ),
                0,
            )),
            Err(e) => done.push(kept(format!("the landed mark of {item}: {e}"))),
        }
    }
    Ok(done)
}

/// Removes `item`'s lane branch from the remote when `base` holds it (merged); says what
/// became of it (`Err`: kept, and why).
fn remove_if_merged(
    repo: &Path,
    remote: &Remote<'_>,
    item: &str,
    how: &str,
    base: &crate::base::Base,
) -> Result<Done, Done> {
    let branch = crate::lanes::branch_of(item);
    let seen = format!("refs/stet/seen/clean/{item}");
    // The branch here, inertly fetched (it is the agent's), to ask whether the base has it.
    let fetched = remote.git(&[
        "fetch",
        "--quiet",
        "--no-tags",
        remote.name,
        &format!("+refs/heads/{branch}:{seen}"),
    ]);
    let merged = fetched.is_ok()
        && crate::git::run(repo, &["merge-base", "--is-ancestor", &seen, &base.commit]).is_ok();
    let _ = crate::git::run(repo, &["update-ref", "-d", &seen]);
    if !merged {
        return Err(kept(format!(
            "{branch} on {} ({how}): not merged into {}",
            remote.name, base.branch
        )));
    }
    match remote.git(&[
        "push",
        "--quiet",
        remote.name,
        &format!(":refs/heads/{branch}"),
    ]) {
        Ok(_) => Ok(removed(
            format!("{branch} on {} (merged into {})", remote.name, base.branch),
            0,
        )),
        Err(e) => Err(kept(format!("{branch} on {}: {e}", remote.name))),
    }
}
