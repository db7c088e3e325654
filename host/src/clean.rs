//! `stet clean`: removing what finished items left behind.
//!
//! On this machine: the temporary directories of a stet that is gone (`sandbox::leftovers`).
//!
//! On this clone: the lanes (working copies and their git directories) and local branches
//! of items that landed, failed or were cancelled — a branch only when the remote has it
//! too (a lane's work that exists here alone is kept) —, and the working copies pooled for
//! the next lanes (`lanes.rs`). With `remote`: their `stet/*`
//! branches on the remote once merged into the base branch (never unmerged work), and
//! their marks once the item's file is gone from the repository (a mark must outlive the
//! file it keeps drives off, or the next drive would work the item again).

use std::path::Path;

use crate::reservations::{Marks, Remote, ReservationError, CANCELLED, FAILED, LANDED};

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
    // The base the lanes branch off: the person's current branch, as the remote has it.
    let base = crate::git::run(repo, &["symbolic-ref", "--quiet", "--short", "HEAD"]).ok();
    let base_oid = match &base {
        Some(base) => remote
            .git(&["ls-remote", remote.name, &format!("refs/heads/{base}")])?
            .split_whitespace()
            .next()
            .map(str::to_string),
        None => None,
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
        let branch = crate::lanes::branch_of(item);
        let mut branch_gone = !marks.lanes.contains(item);
        if !branch_gone {
            let merged = match (&base, &base_oid) {
                (Some(base), Some(base_oid)) => {
                    // Both commits here, inertly fetched (the branch is the agent's).
                    let fetched = remote.git(&[
                        "fetch",
                        "--quiet",
                        "--no-tags",
                        remote.name,
                        &format!("+refs/heads/{branch}:refs/stet/seen/clean/{item}"),
                        &format!("+refs/heads/{base}:refs/stet/seen/clean-base"),
                    ]);
                    let merged = fetched.is_ok()
                        && crate::git::run(
                            repo,
                            &[
                                "merge-base",
                                "--is-ancestor",
                                &format!("refs/stet/seen/clean/{item}"),
                                base_oid,
                            ],
                        )
                        .is_ok();
                    let _ = crate::git::run(
                        repo,
                        &["update-ref", "-d", &format!("refs/stet/seen/clean/{item}")],
                    );
                    merged.then(|| base.clone())
                }
                _ => None,
            };
            match merged {
                Some(base) => match remote.git(&[
                    "push",
                    "--quiet",
                    remote.name,
                    &format!(":refs/heads/{branch}"),
                ]) {
                    Ok(_) => {
                        branch_gone = true;
                        done.push(removed(
                            format!("{branch} on {} (merged into {base})", remote.name),
                            0,
                        ));
                    }
                    Err(e) => done.push(kept(format!("{branch} on {}: {e}", remote.name))),
                },
                None => done.push(kept(format!(
                    "{branch} on {} ({how}): not merged into {}",
                    remote.name,
                    base.as_deref()
                        .unwrap_or("the base (the repository is on no branch)")
                ))),
            }
        }
        // The mark goes only once both its branch and its item file are gone.
        let file_there = crate::git::run(
            repo,
            &[
                "cat-file",
                "-e",
                &format!("HEAD:{}/{item}.md", crate::queue::QUEUE_DIR),
            ],
        )
        .is_ok();
        if branch_gone && !file_there {
            let prefix = match how {
                "landed" => LANDED,
                "failed" => FAILED,
                _ => CANCELLED,
            };
            match remote.unmark(prefix, item) {
                Ok(()) => done.push(removed(
                    format!(
                        "the {how} mark of {item} on {} (its item file is gone)",
                        remote.name
                    ),
                    0,
                )),
                Err(e) => done.push(kept(format!("the {how} mark of {item}: {e}"))),
            }
        }
    }
    let _ = crate::git::run(repo, &["update-ref", "-d", "refs/stet/seen/clean-base"]);
    Ok(done)
}
