//! `stet clean`: removing what finished items left behind.
//!
//! On this machine: the temporary directories of a stet that is gone (`owner.rs`).
//!
//! On this clone: the lanes (working copies and their git directories) and local branches
//! of items that landed, failed or were cancelled — a branch only when the remote has it
//! too (a lane's work that exists here alone is kept) —, and the working copies pooled for
//! the next lanes (`lanes.rs`). With `remote`: their `stet/*` branches on the remote once
//! the base the lanes branch from (`base.rs`) holds their change — by ancestry (a merge),
//! or because applying the branch's change to the base changes nothing (a squash or a
//! rebase merge of a pull request); never unmerged work —, and a landed item's mark once
//! its file is gone from that base and from this working copy (a mark must outlive the
//! file it keeps drives off, or the next drive would work the item again). A failed or
//! cancelled item's mark is never removed, whatever became of its file: only `stet retry`
//! makes such an item eligible again.
//!
//! With `archive`: landed items' files leave `.stet/queue/` in one commit stet makes on the
//! current branch (the person pushes it). Their text stays in git history, not in another
//! directory: an archive directory would grow as the queue did, and git already keeps every
//! version; the commit names each item by id and title, so `git log --grep ID` finds it and
//! `git show COMMIT^:.stet/queue/ID.md` prints it.
//!
//! With `dry_run`: what would be removed is said, and nothing is (a branch's merge is still
//! found by fetching it into a ref of stet's own, removed again).

use std::path::Path;

use serde::Serialize;

use crate::reservations::{Marks, Remote, ReservationError};

/// What `stet clean` was asked to do.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Also on the remote: merged branches, spent marks.
    pub remote: bool,
    /// Commit the removal of landed items' files from the queue.
    pub archive: bool,
    /// Say what would be done; do nothing.
    pub dry_run: bool,
}

/// What became of one thing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Removed,
    /// `--dry-run`: it would be removed.
    WouldRemove,
    Kept,
}

impl Action {
    /// As a person reads it, in a column.
    pub fn word(self) -> &'static str {
        match self {
            Action::Removed => "removed",
            Action::WouldRemove => "would remove",
            Action::Kept => "kept",
        }
    }
}

/// What kind of thing an entry is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// An item's lane: its working copy and git directory (`path`).
    Lane,
    /// The working copies kept for the next lanes (`path`).
    Pool,
    /// Temporary directories a stopped stet left (`path`: their common directory).
    TempDirs,
    /// A local `stet/*` branch (`branch`).
    LocalBranch,
    /// A `stet/*` branch on the remote (`branch`).
    RemoteBranch,
    /// A landed mark on the remote (`ref`).
    LandedMark,
    /// A landed item's file in the queue (`path`), archived by a commit.
    ItemFile,
}

/// One thing removed, that would be removed, or kept, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub action: Action,
    pub kind: Kind,
    /// The item it belongs to, when one.
    pub id: Option<String>,
    /// The item's state (`landed`, `failed`, `cancelled`), when it belongs to one.
    pub state: Option<&'static str>,
    /// A file or directory.
    pub path: Option<String>,
    /// A branch (without `refs/heads/`).
    pub branch: Option<String>,
    /// A ref on the remote.
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    /// The remote, for what is on it.
    pub remote: Option<String>,
    /// Bytes freed (or that would be) on this machine.
    pub bytes: u64,
    /// Why it was (or would be) removed, or kept.
    pub why: Option<String>,
    /// When kept against the person's wish: what to do.
    pub remedy: Option<String>,
}

impl Entry {
    fn new(action: Action, kind: Kind) -> Entry {
        Entry {
            action,
            kind,
            id: None,
            state: None,
            path: None,
            branch: None,
            reference: None,
            remote: None,
            bytes: 0,
            why: None,
            remedy: None,
        }
    }

    fn item(mut self, id: &str, state: &'static str) -> Entry {
        self.id = Some(id.to_string());
        self.state = Some(state);
        self
    }

    fn path(mut self, path: &Path) -> Entry {
        self.path = Some(path.display().to_string());
        self
    }

    fn branch(mut self, branch: &str) -> Entry {
        self.branch = Some(branch.to_string());
        self
    }

    fn on(mut self, remote: &str) -> Entry {
        self.remote = Some(remote.to_string());
        self
    }

    fn bytes(mut self, bytes: u64) -> Entry {
        self.bytes = bytes;
        self
    }

    fn why(mut self, why: impl Into<String>) -> Entry {
        self.why = Some(why.into());
        self
    }

    fn remedy(mut self, remedy: impl Into<String>) -> Entry {
        self.remedy = Some(remedy.into());
        self
    }

    /// The entry as one line: what, of what, why.
    pub fn line(&self) -> String {
        let id = self.id.as_deref().unwrap_or("");
        let branch = self.branch.as_deref().unwrap_or("");
        let remote = self.remote.as_deref().unwrap_or("");
        let state = self.state.map(|s| format!(" ({s})")).unwrap_or_default();
        let what = match self.kind {
            Kind::Lane => format!("the lane of {id}{state}"),
            Kind::Pool => "the working copies kept for the next lanes".to_string(),
            Kind::TempDirs => String::new(),
            Kind::LocalBranch => format!("the local branch {branch}{state}"),
            Kind::RemoteBranch => format!("{branch} on {remote}{state}"),
            Kind::LandedMark => format!("the landed mark of {id} on {remote}"),
            Kind::ItemFile => format!("the file of {id}{state}"),
        };
        let mut line = match (&self.why, what.is_empty()) {
            (Some(why), true) => why.clone(),
            (Some(why), false) => format!("{what}: {why}"),
            (None, _) => what,
        };
        if let Some(remedy) = &self.remedy {
            line = format!("{line} ({remedy})");
        }
        line
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

/// `Removed`, or `WouldRemove` on a dry run.
fn removing(options: &Options) -> Action {
    if options.dry_run {
        Action::WouldRemove
    } else {
        Action::Removed
    }
}

/// The commit `--archive` made (or would make).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Archive {
    /// The branch it is (or would be) on: the one checked out.
    pub branch: String,
    /// The commit, once made (`None` on a dry run, or when nothing was archived).
    pub commit: Option<String>,
    /// How many item files it removes from the queue.
    pub items: usize,
}

/// What `stet clean` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub entries: Vec<Entry>,
    /// With `--archive`: the commit.
    pub archive: Option<Archive>,
    /// Without it: how many landed items' files `--archive` would take out of the queue.
    pub archivable: usize,
}

/// Cleans `repo` (and, as `options` say, the remote and the queue) of finished items'
/// leftovers; or, on a dry run, says what it would remove.
pub fn clean(
    repo: &Path,
    remote: &Remote<'_>,
    options: Options,
) -> Result<Report, ReservationError> {
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
    let mut entries = clean_here(repo, &marks, &in_use, &options);
    let (archive, archivable) = if options.archive {
        let (archive, archived) = archive_landed(repo, &marks, &options);
        entries.extend(archived);
        (Some(archive), 0)
    } else {
        (None, archivable(repo, &marks).len())
    };
    if options.remote {
        entries.extend(clean_remote(repo, remote, &marks, &in_use, &options)?);
    }
    Ok(Report {
        entries,
        archive,
        archivable,
    })
}

/// Landed items' files that can leave the queue: tracked at HEAD, as committed.
fn archivable(repo: &Path, marks: &Marks) -> Vec<(crate::queue::Item, String)> {
    let (items, _) = crate::queue::read(repo);
    let mut landed: Vec<(crate::queue::Item, String)> = items
        .into_iter()
        .filter(|item| marks.landed.contains(&item.id))
        .map(|item| {
            let path = format!("{}/{}.md", crate::queue::QUEUE_DIR, item.id);
            (item, path)
        })
        .filter(|(_, path)| {
            crate::git::run(repo, &["cat-file", "-e", &format!("HEAD:{path}")]).is_ok()
        })
        .collect();
    landed.sort_by(|a, b| a.0.id.cmp(&b.0.id));
    landed
}

/// `--archive`: removes landed items' files from the queue in one commit on the current
/// branch, which the person pushes. Only the files are committed, whatever else is staged.
fn archive_landed(repo: &Path, marks: &Marks, options: &Options) -> (Archive, Vec<Entry>) {
    let branch = crate::git::run(repo, &["symbolic-ref", "--quiet", "--short", "HEAD"])
        .map(|b| b.trim().to_string())
        .ok();
    let landed = archivable(repo, marks);
    let entry = |item: &crate::queue::Item, path: &str, action| {
        Entry::new(action, Kind::ItemFile)
            .item(&item.id, "landed")
            .path(Path::new(path))
    };
    let mut archive = Archive {
        branch: branch.clone().unwrap_or_else(|| "HEAD".to_string()),
        commit: None,
        items: landed.len(),
    };
    let Some(branch) = branch.filter(|_| !landed.is_empty()) else {
        let entries = landed
            .iter()
            .map(|(item, path)| {
                entry(item, path, Action::Kept)
                    .why("HEAD is detached: no branch to commit the archive on")
                    .remedy("git switch to the base branch, then stet clean --archive")
            })
            .collect();
        archive.items = 0;
        return (archive, entries);
    };
    // A file that differs from HEAD here is the person's edit: kept, never taken with it.
    let (landed, changed): (Vec<_>, Vec<_>) = landed.into_iter().partition(|(_, path)| {
        crate::git::run(
            repo,
            &["--literal-pathspecs", "diff", "--quiet", "HEAD", "--", path],
        )
        .is_ok()
    });
    let mut entries: Vec<Entry> = changed
        .iter()
        .map(|(item, path)| {
            entry(item, path, Action::Kept)
                .why("it differs here from what HEAD holds")
                .remedy("commit or stash your change to it, then stet clean --archive")
        })
        .collect();
    archive.items = landed.len();
    if landed.is_empty() {
        return (archive, entries);
    }
    let paths: Vec<&str> = landed.iter().map(|(_, p)| p.as_str()).collect();
    let why = format!("archived by a commit on {branch}; its text stays in git history");
    if options.dry_run {
        entries.extend(
            landed
                .iter()
                .map(|(item, path)| entry(item, path, Action::WouldRemove).why(why.clone())),
        );
        return (archive, entries);
    }
    let mut message = format!(
        "stet: archive {} from {}\n\n\
         Their text stays in git history: git show <this commit>^:{}/ID.md\n\n",
        crate::printer::count(landed.len(), "landed item", "landed items"),
        crate::queue::QUEUE_DIR,
        crate::queue::QUEUE_DIR,
    );
    for (item, _) in &landed {
        message.push_str(&format!("{}: {}\n", item.id, item.title));
    }
    // Each path is a file name, never a pattern: an id is whatever its file is called.
    let mut rm = vec!["--literal-pathspecs", "rm", "--quiet", "--"];
    rm.extend(&paths);
    let mut commit = vec![
        "--literal-pathspecs",
        "commit",
        "--quiet",
        "-m",
        &message,
        "--",
    ];
    commit.extend(&paths);
    let made = crate::git::run(repo, &rm)
        .map_err(|e| (e, false))
        .and_then(|_| {
            crate::git::run(repo, &commit)
                .and_then(|_| crate::git::run(repo, &["rev-parse", "HEAD"]))
                .map_err(|e| (e, true))
        });
    match made {
        Ok(head) => {
            archive.commit = Some(head.trim().to_string());
            entries.extend(
                landed
                    .iter()
                    .map(|(item, path)| entry(item, path, Action::Removed).why(why.clone())),
            );
        }
        Err((e, removed)) => {
            // Put back what `git rm` took (each file as HEAD holds it: it held nothing else),
            // so a refused commit (a hook's, say) loses nothing.
            if removed {
                let mut restore = vec!["--literal-pathspecs", "checkout", "HEAD", "--"];
                restore.extend(&paths);
                let _ = crate::git::run(repo, &restore);
            }
            archive.items = 0;
            entries.extend(landed.iter().map(|(item, path)| {
                entry(item, path, Action::Kept)
                    .why(format!("the archive commit was not made: {}", e.detail))
            }));
        }
    }
    (archive, entries)
}

/// What is on this machine and clone: lanes, the pool, temporary directories, local
/// branches.
fn clean_here(
    repo: &Path,
    marks: &Marks,
    in_use: &dyn Fn(&str) -> bool,
    options: &Options,
) -> Vec<Entry> {
    let mut done = Vec::new();
    clean_lanes(repo, marks, in_use, options, &mut done);
    clean_pool_and_temp_dirs(repo, options, &mut done);
    clean_local_branches(repo, marks, in_use, options, &mut done);
    done
}

/// The lanes kept on this clone of finished items: removed, but one a drive holds or one
/// holding edits never committed.
fn clean_lanes(
    repo: &Path,
    marks: &Marks,
    in_use: &dyn Fn(&str) -> bool,
    options: &Options,
    done: &mut Vec<Entry>,
) {
    let act = removing(options);
    for item in crate::lanes::kept(repo) {
        let Some(how) = finished(marks, &item) else {
            continue;
        };
        let root = crate::git::git_dir(repo).join("stet/lanes").join(&item);
        let entry = |action| Entry::new(action, Kind::Lane).item(&item, how).path(&root);
        if in_use(&item) {
            done.push(entry(Action::Kept).why("a drive still holds it"));
            continue;
        }
        // What a person's shell left there is theirs: never removed unseen.
        if let Some(lane) = crate::lanes::here(repo, &item) {
            // A look that fails keeps the lane: what cannot be seen is not removed.
            let edits = crate::lanes::uncommitted(&lane);
            if !matches!(&edits, Ok(edits) if edits.is_empty()) {
                done.push(
                    entry(Action::Kept)
                        .why(match edits {
                            Ok(_) => format!(
                                "it holds edits never committed (stet diff {item} shows them)"
                            ),
                            Err(e) => format!(
                                "stet could not tell whether it holds edits never committed: {}",
                                e.detail
                            ),
                        })
                        .remedy(format!(
                            "take what you want, then delete {}",
                            lane.dir.parent().unwrap_or(&lane.dir).display()
                        )),
                );
                continue;
            }
        }
        let bytes = crate::files::disk_usage(&root);
        if options.dry_run {
            done.push(entry(act).bytes(bytes));
            continue;
        }
        match crate::lanes::delete(&root) {
            Ok(()) => done.push(entry(act).bytes(bytes)),
            Err(e) => done.push(entry(Action::Kept).why(format!("cannot remove it: {e}"))),
        }
    }
}

/// The pool of working copies kept for the next lanes, and the temporary directories a
/// killed stet left.
fn clean_pool_and_temp_dirs(repo: &Path, options: &Options, done: &mut Vec<Entry>) {
    let act = removing(options);
    // Working copies kept for reuse by the next lanes, and removed lanes not yet deleted.
    let pool = crate::git::git_dir(repo).join("stet/pool");
    let pooled = if options.dry_run {
        Ok(crate::lanes::pool_size(repo))
    } else {
        crate::lanes::clear_pool(repo)
    };
    match pooled {
        Ok(0) => {}
        Ok(bytes) => done.push(Entry::new(act, Kind::Pool).path(&pool).bytes(bytes)),
        Err(e) => done.push(
            Entry::new(Action::Kept, Kind::Pool)
                .path(&pool)
                .why(format!("cannot remove them: {e}")),
        ),
    }
    // Temporary directories (profile copies, scratch lanes) of a stet that was killed.
    let temps = crate::owner::reap_dead_temp_dirs(options.dry_run);
    if !temps.is_empty() {
        done.push(
            Entry::new(act, Kind::TempDirs)
                .path(&std::env::temp_dir())
                .bytes(temps.iter().map(|t| t.bytes).sum())
                .why(format!(
                    "{} a stopped stet left",
                    crate::printer::count(
                        temps.len(),
                        "temporary directory",
                        "temporary directories"
                    )
                )),
        );
    }
}

/// The local branches of finished items: removed when the remote's branch holds all of
/// them, never the one checked out.
fn clean_local_branches(
    repo: &Path,
    marks: &Marks,
    in_use: &dyn Fn(&str) -> bool,
    options: &Options,
    done: &mut Vec<Entry>,
) {
    let act = removing(options);
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
        let Some(how) = finished(marks, item) else {
            continue;
        };
        if in_use(item) {
            continue;
        }
        let entry = |action| {
            Entry::new(action, Kind::LocalBranch)
                .item(item, how)
                .branch(branch)
        };
        if !marks.lanes.contains(item) && how != "landed" {
            done.push(
                entry(Action::Kept)
                    .why("its work is on this clone only")
                    .remedy(format!("push it, or git branch -D {branch}")),
            );
            continue;
        }
        // The person's own work on it (after `stet checkout`) is theirs: a branch is
        // removed only when the remote's branch holds all of it, and never the one checked
        // out.
        let full = format!("refs/heads/{branch}");
        if crate::git::run(repo, &["symbolic-ref", "--quiet", "HEAD"]).is_ok_and(|h| h == full) {
            done.push(
                entry(Action::Kept)
                    .why("it is checked out here")
                    .remedy(format!(
                    "switch to another branch, then stet clean again (or git branch -D {branch})"
                )),
            );
            continue;
        }
        let held_there = marks.lane_tips.get(item).is_some_and(|tip| {
            crate::git::run(repo, &["merge-base", "--is-ancestor", &full, tip]).is_ok()
        }) || crate::git::run(
            repo,
            &[
                "for-each-ref",
                "--count=1",
                "--contains",
                &full,
                "refs/remotes/",
            ],
        )
        .is_ok_and(|r| !r.trim().is_empty());
        if !held_there {
            done.push(
                entry(Action::Kept)
                    .why("it holds commits the remote's branch does not")
                    .remedy(format!("push or merge them, or git branch -D {branch}")),
            );
            continue;
        }
        if options.dry_run {
            done.push(entry(act));
            continue;
        }
        match crate::git::run(repo, &["update-ref", "-d", &full]) {
            Ok(_) => done.push(entry(act)),
            Err(e) => done.push(entry(Action::Kept).why(e.detail)),
        }
    }
}

fn clean_remote(
    repo: &Path,
    remote: &Remote<'_>,
    marks: &Marks,
    in_use: &dyn Fn(&str) -> bool,
    options: &Options,
) -> Result<Vec<Entry>, ReservationError> {
    let mut done = Vec::new();
    // The base the lanes branch from, as the remote has it now.
    let base = match crate::base::fetch(repo, remote.name) {
        Ok(base) => Some(base),
        Err(crate::base::BaseError::Unreachable { detail, .. }) => {
            return Err(remote.unreachable(detail))
        }
        Err(none @ crate::base::BaseError::None { .. }) => {
            done.push(
                Entry::new(Action::Kept, Kind::RemoteBranch)
                    .branch("every stet/* branch")
                    .on(remote.name)
                    .why(none.to_string()),
            );
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
            let entry = remove_if_merged(repo, remote, item, how, base, options);
            // On a dry run, a branch that would go counts as gone for what follows.
            branch_gone = entry.action != Action::Kept;
            done.push(entry);
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
        let entry = |action| {
            let mut e = Entry::new(action, Kind::LandedMark)
                .item(item, how)
                .on(remote.name)
                .why("its item file is gone");
            e.reference = Some(format!("refs/stet/ledger ({item})"));
            e
        };
        if options.dry_run {
            done.push(entry(Action::WouldRemove));
            continue;
        }
        match remote.unmark_landed(item) {
            Ok(()) => done.push(entry(Action::Removed)),
            Err(e) => done.push(entry(Action::Kept).why(e.to_string())),
        }
    }
    Ok(done)
}

/// How `base` holds the change of the branch fetched at `branch` (a ref here), if it does:
/// as an ancestor (merged), every commit's patch already in it (rebased), or a tree the
/// branch's change, applied to it, leaves as it is (squashed). `None`: not merged — or
/// merged and changed since so that neither shows it, which keeps the branch (never
/// removing unmerged work matters more than removing every merged one). An error: git
/// could not tell (said as such, never as "not merged").
fn merged_how(repo: &Path, branch: &str, base: &str) -> Result<Option<&'static str>, String> {
    if crate::git::run(repo, &["merge-base", "--is-ancestor", branch, base]).is_ok() {
        return Ok(Some("merged"));
    }
    // The branch's content is the agent's: what compares it obeys none of its attributes
    // (read from the base's tree instead) nor any configuration but the repository's.
    let attr_source = format!("--attr-source={base}");
    let inert = crate::git::Inert::at(repo);
    let git = |args: &[&str]| {
        let mut all = vec![attr_source.as_str()];
        all.extend(args);
        inert.output(&all).map_err(|e| e.detail)
    };
    // `git cherry`: a `-` for each commit whose patch the base has, a `+` for one it lacks.
    let cherry = git(&["cherry", base, branch])?;
    if !cherry.status.success() {
        return Err(String::from_utf8_lossy(&cherry.stderr).trim().to_string());
    }
    let out = String::from_utf8_lossy(&cherry.stdout);
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    if !lines.is_empty() && lines.iter().all(|l| l.starts_with('-')) {
        return Ok(Some("rebased"));
    }
    // A squash: merging the branch into the base gives the base's own tree. Exit 1 is a
    // conflict (not merged: the branch is kept); anything else, git failing.
    let merged = git(&["merge-tree", "--write-tree", "--no-messages", base, branch])?;
    match merged.status.code() {
        Some(0) => {}
        Some(1) => return Ok(None),
        _ => return Err(String::from_utf8_lossy(&merged.stderr).trim().to_string()),
    }
    let base_tree =
        crate::git::run(repo, &["rev-parse", &format!("{base}^{{tree}}")]).map_err(|e| e.detail)?;
    let merged_tree = String::from_utf8_lossy(&merged.stdout);
    Ok((merged_tree.lines().next().map(str::trim) == Some(base_tree.trim())).then_some("squashed"))
}

/// Removes `item`'s lane branch from the remote when `base` holds it (merged, squashed or
/// rebased); says what became of it.
fn remove_if_merged(
    repo: &Path,
    remote: &Remote<'_>,
    item: &str,
    how: &'static str,
    base: &crate::base::Base,
    options: &Options,
) -> Entry {
    let branch = crate::lanes::branch_of(item);
    let seen = format!("refs/stet/seen/clean/{item}");
    let entry = |action| {
        Entry::new(action, Kind::RemoteBranch)
            .item(item, how)
            .branch(&branch)
            .on(remote.name)
    };
    // The branch here, fetched into a ref of stet's own (it is the agent's), to ask whether
    // the base has it.
    let fetched = remote.git(&[
        "fetch",
        "--quiet",
        "--no-tags",
        remote.name,
        &format!("+refs/heads/{branch}:{seen}"),
    ]);
    // What was judged: the removal below is a compare-and-swap on it, so a push to the
    // branch after this fetch (another clone, a retried item) keeps the branch.
    let judged = fetched.map_err(|e| e.to_string()).and_then(|_| {
        crate::git::run(repo, &["rev-parse", "--verify", &seen]).map_err(|e| e.detail)
    });
    let merged = judged.and_then(|judged| Ok((merged_how(repo, &seen, &base.commit)?, judged)));
    let _ = crate::git::run(repo, &["update-ref", "-d", &seen]);
    let (merged, judged) = match merged {
        Ok((Some(merged), judged)) => (merged, judged),
        Ok((None, _)) => {
            return entry(Action::Kept).why(format!("not merged into {}", base.branch))
        }
        Err(why) => {
            return entry(Action::Kept)
                .why(format!(
                    "stet could not tell whether it is merged into {}: {why}",
                    base.branch
                ))
                .remedy("run stet clean --remote again; it never removes what it cannot judge")
        }
    };
    let why = format!("{merged} into {}", base.branch);
    if options.dry_run {
        return entry(Action::WouldRemove).why(why);
    }
    match remote.git(&[
        "push",
        "--quiet",
        &format!("--force-with-lease=refs/heads/{branch}:{judged}"),
        remote.name,
        &format!(":refs/heads/{branch}"),
    ]) {
        Ok(_) => entry(Action::Removed).why(why),
        Err(e) => entry(Action::Kept).why(e.to_string()),
    }
}
