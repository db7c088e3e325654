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
//! git directory is its own, filled with a copy of the branch's history (objects are
//! copied, never hardlinked: a new lane gets one pack written straight into it by the
//! repository's `pack-objects`, a pooled copy fetches what it lacks), and it has no remote. Only the lane's one branch comes back out: the
//! repository fetches that ref from the lane's git directory (inertly), and the host, never
//! the sandbox, pushes it to the remote. (Sharing the repository's object store instead —
//! alternates, hardlinks — would show the agent every object of every branch: outside its
//! lane.)
//!
//! A lane costs what changed, not what exists: a landed lane's two directories go to a
//! pool (`<git dir>/stet/pool/`) and the next new lane is made from one — its branch
//! fetched (only the objects it lacks), the working tree reset to it and cleaned (only the
//! files that differ are written), every other ref dropped. Before a copy joins the pool,
//! off the drive's path, everything of its item is taken out of it (`Lane::forget_item`):
//! its refs, reflogs and every object its base does not reach, and the working tree reset
//! to the base — the next item's agent sees nothing of the last one's, committed or not. A
//! lane that did not land is never pooled.
//! Lanes are removed by a rename into `<git dir>/stet/trash/` and deleted by a background
//! thread; what a process did not finish deleting, the next sweep does.

use std::path::{Path, PathBuf};

use crate::git::git_dir;
use crate::git::Inert;

mod change;
pub mod disk;
mod reopen;
mod take;
pub use change::{base_of, change, uncommitted, Change};
pub use reopen::{branch_items, here, reopen, Reopened};
pub use take::{checkout, dirty, merge, TakeError, Taken};

pub use crate::gate::{CommitError, Committed, Removed};
pub use crate::settings::MAX_FILE;

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

/// The branch of `item`'s lane.
pub fn branch_of(item: &str) -> String {
    format!("stet/{item}")
}

/// Where lanes live in `repo`.
fn lanes_dir(repo: &Path) -> PathBuf {
    stet_dir(repo).join("lanes")
}

/// Makes `dir` (and its parents) reachable by its owner alone: stet's directory and every
/// lane under it hold what agents wrote, which no other local user may run or read.
pub(crate) fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
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

/// Holds `item`'s lane against other openings, in this process and in others on this clone,
/// while one is made or caught up.
fn opening(repo: &Path, item: &str) -> Result<nix::fcntl::Flock<std::fs::File>, GitError> {
    let path = stet_dir(repo)
        .join("locks")
        .join(format!("lane-{item}.lock"));
    crate::files::lock_exclusive(&path).map_err(|e| io_error("lock", &path, e))
}

/// Makes `item`'s lane ahead of its take, if nothing of it is on this clone yet: as
/// [`open`] makes a new one. `None` when something is there (a lane kept from before, or
/// one another drive of this clone opened meanwhile): that is the take's to open.
pub fn open_new(
    repo: &Path,
    remote: &str,
    item: &str,
    base: &str,
    bounds: Option<disk::Bounds>,
) -> Result<Option<Lane>, GitError> {
    let _opening = opening(repo, item)?;
    if lanes_dir(repo).join(item).exists() {
        return Ok(None);
    }
    open_held(repo, remote, item, base, bounds).map(Some)
}

/// Opens `item`'s lane: the existing working copy on this clone, else a new one starting
/// from the lane's branch on the remote (a peer's pushed work), else from `base`. A new
/// lane is a file system of its own holding `bounds` beyond its checkout, when given
/// (`disk.rs`).
pub fn open(
    repo: &Path,
    remote: &str,
    item: &str,
    base: &str,
    bounds: Option<disk::Bounds>,
) -> Result<Lane, GitError> {
    let _opening = opening(repo, item)?;
    open_held(repo, remote, item, base, bounds)
}

/// [`open`], with the lane held.
fn open_held(
    repo: &Path,
    remote: &str,
    item: &str,
    base: &str,
    bounds: Option<disk::Bounds>,
) -> Result<Lane, GitError> {
    let branch = branch_of(item);
    let root = lanes_dir(repo).join(item);
    let lane = Lane {
        item: item.to_string(),
        branch: branch.clone(),
        dir: root.join("work"),
        git_dir: root.join("git"),
    };
    if lane.git_dir.join("HEAD").is_file() && lane.dir.is_dir() {
        // A lane an older stet made holds the attributes it wrote, and may be open to
        // other users.
        lane.write_attributes()?;
        for dir in [stet_dir(repo), lanes_dir(repo), root.clone()] {
            private_dir(&dir).map_err(|e| io_error("chmod", &dir, e))?;
        }
        // After a restart its file system is mounted again.
        disk::ensure_mounted(&root, &lane.dir)
            .map_err(|e| io_error("mount the lane's file system", &root, e))?;
        catch_up(repo, remote, &lane)?;
        return Ok(lane);
    }
    // A half-made lane from a crash (or one in an older layout, whose git directory was
    // inside its working tree) is made again from what was pushed.
    if root.exists() {
        discard(&stet_dir(repo), &root).map_err(|e| io_error("remove", &root, e))?;
    }
    // The remote's copy of the lane, if a drive (here or on a peer) pushed one.
    let source = fetch_pushed(repo, remote, item).unwrap_or_else(|| base.to_string());
    make(repo, &lane, &source, bounds)?;
    Ok(lane)
}

/// Fetches the remote's branch of `item`, if it has one, into `refs/stet/pushed/<item>`
/// (a ref of stet's own: the branch is an agent's work) and names that ref.
pub(crate) fn fetch_pushed(repo: &Path, remote: &str, item: &str) -> Option<String> {
    let pushed = format!("refs/stet/pushed/{item}");
    git(
        repo,
        &[
            "fetch",
            "--quiet",
            "--no-tags",
            remote,
            &format!("+refs/heads/{}:{pushed}", branch_of(item)),
        ],
    )
    .ok()
    .map(|_| pushed)
}

/// Makes `lane` (nothing of it on this clone) at `source`, a ref of the repository: from a
/// pooled copy when one fits, else afresh.
fn make(
    repo: &Path,
    lane: &Lane,
    source: &str,
    bounds: Option<disk::Bounds>,
) -> Result<(), GitError> {
    let (item, branch) = (lane.item.as_str(), lane.branch.as_str());
    let root = lanes_dir(repo).join(item);
    // Stet's directory and the lanes' are the owner's alone.
    for dir in [stet_dir(repo), lanes_dir(repo)] {
        private_dir(&dir).map_err(|e| io_error("mkdir", &dir, e))?;
    }
    let partial = root.with_extension("partial");
    if partial.exists() {
        discard(&stet_dir(repo), &partial).map_err(|e| io_error("remove", &partial, e))?;
    }
    sweep(repo);
    if let Some(pooled) = take_pooled(repo, &partial, bounds.is_some()) {
        // The item before was given its seed; this one is given the drive's (and the
        // reset below lays none: the last seed may be gone).
        let _ = std::fs::remove_file(partial.join("seed"));
        match reuse(repo, &pooled, item, source) {
            Ok(()) => {
                std::fs::rename(&partial, &root).map_err(|e| io_error("rename", &root, e))?;
                return Ok(());
            }
            // A pooled copy that cannot be reset (the last agent left what git cannot
            // remove) is thrown away; the lane is made afresh.
            Err(_) => {
                discard(&stet_dir(repo), &partial).map_err(|e| io_error("remove", &partial, e))?
            }
        }
    }
    let made = lay_out(&partial, item)?;
    if let Some(bounds) = bounds {
        let (bytes, entries) = disk::checkout_size(repo, source)?;
        disk::make(
            &partial,
            &made.dir,
            bytes.saturating_add(bounds.bytes),
            entries.saturating_add(bounds.files),
        )
        .map_err(|e| io_error("make the lane's file system", &partial, e))?;
        // The mount point of the git directory, in the file system now over `work/`.
        std::fs::create_dir_all(made.dir.join(".git"))
            .map_err(|e| io_error("mkdir .git", &made.dir, e))?;
    }
    fill(repo, &made, source, branch)?;
    // A new lane holds nothing a sandbox wrote yet: its first checkout, as long as a large
    // repository's takes, is not held to the deadline of git on a sandbox's files.
    made.tree().reset("HEAD", crate::git::HOST_ONLY_DEADLINE)?;
    made.forget_host_traces();
    std::fs::rename(&partial, &root).map_err(|e| io_error("rename", &root, e))?;
    Ok(())
}

/// Fills a new lane's git directory with what `source` (a ref of the repository) reaches,
/// and points it at `branch` there: one pack, written by the repository's own
/// `pack-objects` straight into the lane — about twice as quick as a fetch for a long
/// history, which sends the same objects through a pipe for the lane to index again —,
/// else (a shallow or partial repository, whose history a pack alone would not carry
/// right, or any failure) the fetch of [`point_at`]. Either way the lane holds the
/// branch's history and nothing else of the repository.
fn fill(repo: &Path, lane: &Lane, source: &str, branch: &str) -> Result<(), GitError> {
    let git = lane.history();
    match packed_into(repo, lane, source) {
        Ok(commit) => {
            git.run(&["update-ref", &format!("refs/heads/{branch}"), &commit])?;
            git.run(&["symbolic-ref", "HEAD", &format!("refs/heads/{branch}")])?;
            Ok(())
        }
        Err(_) => point_at(repo, &git, source, branch),
    }
}

/// Packs everything `source` reaches into `lane`'s object store; the commit it names.
fn packed_into(repo: &Path, lane: &Lane, source: &str) -> Result<String, GitError> {
    let refuse = |why: &str| GitError {
        args: "pack-objects".into(),
        dir: repo.display().to_string(),
        detail: why.to_string(),
    };
    if git(repo, &["rev-parse", "--is-shallow-repository"])?.trim() != "false" {
        return Err(refuse(
            "a shallow repository: its history's end is a fetch's to carry",
        ));
    }
    if git(repo, &["config", "--get", "extensions.partialClone"])
        .is_ok_and(|v| !v.trim().is_empty())
    {
        return Err(refuse("a partial clone: objects it lacks are not packed"));
    }
    let commit = git(
        repo,
        &[
            "rev-parse",
            "--verify",
            "--end-of-options",
            &format!("{source}^{{commit}}"),
        ],
    )?
    .trim()
    .to_string();
    let base = lane.git_dir.join("objects/pack/pack");
    crate::git::run_input(
        repo,
        &[
            "pack-objects",
            "--revs",
            "--quiet",
            base.to_str()
                .ok_or_else(|| refuse("a lane path that is not UTF-8"))?,
        ],
        format!("{commit}\n").as_bytes(),
    )?;
    Ok(commit)
}

/// Points the lane whose git is `git` at `branch`, made at `source` (a ref of the
/// repository): the repository's commits it lacks are fetched (copied) into the lane's own
/// git directory. The working tree is the caller's to reset.
fn point_at(repo: &Path, git: &Inert, source: &str, branch: &str) -> Result<(), GitError> {
    // The repository's objects into the lane's git directory, which no sandbox writes.
    git.clone()
        .with_deadline(crate::git::HOST_ONLY_DEADLINE)
        .run(&[
            "fetch",
            "--quiet",
            "--no-tags",
            // From a shallow clone, the lane takes its shallow roots too (else git refuses
            // the branch with a warning alone, and the lane would have none).
            "--update-shallow",
            git_dir(repo).to_str().unwrap_or_default(),
            &format!("+{source}:refs/heads/{branch}"),
        ])?;
    git.run(&["symbolic-ref", "HEAD", &format!("refs/heads/{branch}")])?;
    Ok(())
}

/// Stet's directory in `repo`'s git directory, where lanes, the pool and the trash live.
fn stet_dir(repo: &Path) -> PathBuf {
    git_dir(repo).join("stet")
}

/// Where landed lanes' directories wait to be made into new lanes.
fn pool_dir(stet: &Path) -> PathBuf {
    stet.join("pool")
}

/// Where removed lanes wait to be deleted.
fn trash_dir(stet: &Path) -> PathBuf {
    stet.join("trash")
}

/// The landed lanes being made ready for the pool by this process.
static MAKING_READY: std::sync::Mutex<Vec<std::thread::JoinHandle<()>>> =
    std::sync::Mutex::new(Vec::new());

/// Waits until every landed lane this process retired is in the pool (a drive, before it
/// ends: a copy left half made is thrown away by the next).
pub fn pool_ready() {
    let making = std::mem::take(&mut *MAKING_READY.lock().unwrap_or_else(|p| p.into_inner()));
    for handle in making {
        let _ = handle.join();
    }
}

/// A pooled copy being made ready: `<item>.cleaning-<pid>` (see [`Lane::retire`]).
const CLEANING: &str = ".cleaning-";

/// The one ref of a pooled copy: the base its last item started from.
const POOL_BASE: &str = "refs/heads/stet-pool-base";

/// The pooled copies of the clone whose stet directory is `stet`.
fn pooled(stet: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(pool_dir(stet))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| !e.file_name().to_string_lossy().contains(CLEANING))
                .map(|e| e.path())
                .filter(|p| p.join("git/HEAD").is_file())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// Moves a pooled copy to `to` (one rename: two lanes never get the same copy): one with a
/// file system of its own when `own_file_system`, else one without.
fn take_pooled(repo: &Path, to: &Path, own_file_system: bool) -> Option<Lane> {
    for copy in pooled(&stet_dir(repo)) {
        if copy.join(disk::IMAGE).is_file() != own_file_system {
            continue;
        }
        if std::fs::rename(&copy, to).is_ok() {
            if disk::ensure_mounted(to, &to.join("work")).is_err() {
                let _ = discard(&stet_dir(repo), to);
                continue;
            }
            return Some(Lane {
                item: String::new(),
                branch: String::new(),
                dir: to.join("work"),
                git_dir: to.join("git"),
            });
        }
    }
    None
}

/// Makes the pooled copy `copy` into `item`'s lane, starting from `source` (a ref of the
/// repository): only what differs from the last lane is fetched and written.
fn reuse(repo: &Path, copy: &Lane, item: &str, source: &str) -> Result<(), GitError> {
    let branch = branch_of(item);
    let lane = Lane {
        item: item.to_string(),
        branch: branch.clone(),
        ..copy.clone()
    };
    // The mount point must still be the empty directory it was made as.
    let mount_point = lane.dir.join(".git");
    let empty_dir = mount_point
        .symlink_metadata()
        .map(|m| m.is_dir())
        .unwrap_or(false)
        && std::fs::read_dir(&mount_point).is_ok_and(|mut d| d.next().is_none());
    if !empty_dir {
        return Err(io_error(
            "reuse",
            &mount_point,
            std::io::Error::other("the mount point is not an empty directory"),
        ));
    }
    lane.write_attributes()?;
    let git = lane.history();
    // The last item's refs and reflogs are not this lane's to see.
    let _ = std::fs::remove_dir_all(lane.git_dir.join("logs"));
    point_at(repo, &git, source, &branch)?;
    // The copy holds only what its pool base reaches (`Lane::forget_item`): when that is
    // history the new branch holds too, the lane holds only what its branch reaches. Else
    // (the base was rewritten since) the copy is not used.
    if git
        .run(&[
            "merge-base",
            "--is-ancestor",
            POOL_BASE,
            &format!("refs/heads/{branch}"),
        ])
        .is_err()
    {
        return Err(io_error(
            "reuse",
            &lane.git_dir,
            std::io::Error::other("its base is not in the new branch's history"),
        ));
    }
    let others = git.run(&["for-each-ref", "--format=%(refname)"])?;
    for other in others
        .lines()
        .filter(|r| *r != format!("refs/heads/{branch}"))
    {
        git.run(&["update-ref", "-d", other])?;
    }
    // The tree is the base's, as `forget_item` left it (nothing has written it since):
    // only the files the new branch changes are written. FETCH_HEAD names the
    // repository's path.
    lane.tree().restore()?;
    lane.forget_host_traces();
    Ok(())
}

/// Deletes the lane whose root is `root` now: its own file system let go first.
pub fn delete(root: &Path) -> std::io::Result<()> {
    disk::release(root);
    std::fs::remove_dir_all(root)
}

/// Moves `path` into the trash at once and deletes it in the background.
fn discard(stet: &Path, path: &Path) -> std::io::Result<()> {
    // A lane's own file system is let go first: the rest is plain directories.
    disk::release(path);
    let trash = trash_dir(stet);
    std::fs::create_dir_all(&trash)?;
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let aside = trash.join(format!("{}-{n}", std::process::id()));
    std::fs::rename(path, &aside)?;
    std::thread::spawn(move || {
        let _ = std::fs::remove_dir_all(&aside);
    });
    Ok(())
}

/// Deletes, in the background, what earlier processes left in the trash, and pooled copies
/// an earlier process did not finish making ready.
fn sweep(repo: &Path) {
    let stet = stet_dir(repo);
    let mine = format!("{CLEANING}{}", std::process::id());
    for entry in std::fs::read_dir(pool_dir(&stet))
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.contains(CLEANING) && !name.ends_with(&mine) {
            let _ = discard(&stet, &entry.path());
        }
    }
    let trash = trash_dir(&stet);
    let mine = format!("{}-", std::process::id());
    let Ok(entries) = std::fs::read_dir(&trash) else {
        return;
    };
    let left: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with(&mine))
        .map(|e| e.path())
        .collect();
    if !left.is_empty() {
        std::thread::spawn(move || {
            for path in left {
                disk::release(&path);
                let _ = std::fs::remove_dir_all(path);
            }
        });
    }
}

/// What [`clear_pool`] would free, removing nothing (`stet clean --dry-run`).
pub fn pool_size(repo: &Path) -> u64 {
    let stet = stet_dir(repo);
    [pool_dir(&stet), trash_dir(&stet)]
        .iter()
        .filter(|dir| dir.exists())
        .map(|dir| crate::files::disk_usage(dir))
        .sum()
}

/// Removes the pooled copies and the trash of `repo` now; returns what they held, in
/// bytes (`stet clean`).
pub fn clear_pool(repo: &Path) -> std::io::Result<u64> {
    let mut freed = 0;
    let stet = stet_dir(repo);
    for dir in [pool_dir(&stet), trash_dir(&stet)] {
        if dir.exists() {
            freed += crate::files::disk_usage(&dir);
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                disk::release(&entry.path());
            }
            // A background deletion may be taking entries away meanwhile: what it removed
            // first is not an error, and a second pass takes what the first raced.
            let mut passes = 0;
            while let Err(e) = std::fs::remove_dir_all(&dir) {
                passes += 1;
                if e.kind() == std::io::ErrorKind::NotFound && !dir.exists() {
                    break;
                }
                if passes >= 3 {
                    return Err(e);
                }
            }
        }
    }
    Ok(freed)
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
    // The lane's own directory; never its parents, which are the caller's (stet's and the
    // lanes' directories for a drive's lane, `make`; a temporary directory for a scratch).
    private_dir(root).map_err(|e| io_error("mkdir", root, e))?;
    std::fs::create_dir_all(&lane.dir).map_err(|e| io_error("mkdir", &lane.dir, e))?;
    Inert::at(root).run(&[
        "init",
        "--quiet",
        "--bare",
        "--template=",
        lane.git_dir.to_str().unwrap_or_default(),
    ])?;
    lane.history().run(&["config", "core.bare", "false"])?;
    lane.write_attributes()?;
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
    let git = lane.history();
    git.run(&[
        "symbolic-ref",
        "HEAD",
        &format!("refs/heads/{}", lane.branch),
    ])?;
    git.run(&["commit", "--quiet", "--allow-empty", "-m", "a scratch lane"])?;
    Ok(lane)
}

/// A lane of its own under `root` (which must not exist) holding `source` (a ref or commit
/// of `repo`) checked out, laid out and walled as a drive's lanes are: where a lane's setup
/// runs (`[lane] setup`).
pub fn checkout_at(repo: &Path, root: &Path, source: &str) -> Result<Lane, GitError> {
    let lane = lay_out(root, "setup")?;
    fill(repo, &lane, source, &lane.branch)?;
    lane.tree().reset("HEAD", crate::git::HOST_ONLY_DEADLINE)?;
    lane.forget_host_traces();
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
    let git = lane.history();
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
        lane.tree().reset(&pushed, crate::git::LANE_GIT_DEADLINE)?;
    }
    lane.forget_host_traces();
    Ok(())
}

impl Lane {
    /// Inert git on this lane.
    /// Writes the lane's `info/attributes` ([`crate::git::INERT_ATTRIBUTES`]), which beat
    /// every `.gitattributes` the working tree holds. (The git directory is the host's; the
    /// sandbox mounts it read-only.)
    fn write_attributes(&self) -> Result<(), GitError> {
        std::fs::create_dir_all(self.git_dir.join("info"))
            .and_then(|_| {
                std::fs::write(
                    self.git_dir.join("info/attributes"),
                    crate::git::INERT_ATTRIBUTES,
                )
            })
            .map_err(|e| io_error("write info/attributes", &self.git_dir, e))
    }

    /// Inert git on the lane's history alone: its working tree, which sandboxes write, is
    /// read only through [`Lane::tree`].
    pub fn history(&self) -> Inert {
        Inert::history(&self.git_dir)
    }

    /// The lane's working tree, through the gate: every host git command on it.
    pub fn tree(&self) -> crate::gate::Tree<'_> {
        crate::gate::Tree {
            git_dir: &self.git_dir,
            work: &self.dir,
        }
    }

    /// The lane's current commit.
    pub fn head(&self) -> Result<String, GitError> {
        self.history().run(&["rev-parse", "HEAD"])
    }

    /// Commits whatever the agent left uncommitted; returns whether there was anything.
    pub fn commit_all(&self, message: &str) -> Result<bool, CommitError> {
        self.commit_all_as(message, None, MAX_FILE, u64::MAX)
            .map(|c| c.changed)
    }

    /// Commits whatever the agent left uncommitted, authored by `author` (stet stays the
    /// committer), through the gate (`crate::gate::Tree::commit`): special files are taken
    /// out, what was touched is put right, and a repository, a path git cannot hold, a
    /// file over `max_file` bytes or more than `max_read` bytes for git to read refuses
    /// the commit before git reads anything.
    pub fn commit_all_as(
        &self,
        message: &str,
        author: Option<&crate::git::Person>,
        max_file: u64,
        max_read: u64,
    ) -> Result<Committed, CommitError> {
        let committed =
            self.tree()
                .commit(message, author, crate::gate::Bounds { max_file, max_read })?;
        if committed.changed {
            self.forget_host_traces();
        }
        Ok(committed)
    }

    /// Removes what git leaves in the lane's git directory — which the sandbox can read —
    /// that names the host or an earlier item: the last fetch's source (the repository's
    /// path), the last commit's message file, the head before a reset.
    fn forget_host_traces(&self) {
        for file in ["FETCH_HEAD", "ORIG_HEAD", "COMMIT_EDITMSG"] {
            let _ = std::fs::remove_file(self.git_dir.join(file));
        }
    }

    /// Puts the working tree back to the lane's last commit through the gate
    /// (`crate::gate::Tree::restore`): what a stage wrote that it did not commit —
    /// untracked and ignored files too — is gone, so the next call sees only committed work.
    pub fn restore(&self) -> Result<(), GitError> {
        self.tree().restore()?;
        self.forget_host_traces();
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
        if let (Some(root), Some(stet)) = (self.dir.parent(), self.stet_dir()) {
            if discard(&stet, root).is_err() {
                let _ = delete(root);
            }
        }
    }

    /// The lane has landed: its directories go to the pool for the next new lane when the
    /// pool holds fewer than `keep` copies, else away (in the background).
    pub fn retire(&self, keep: usize, base: Option<&str>) {
        let (Some(root), Some(stet)) = (self.dir.parent(), self.stet_dir()) else {
            return;
        };
        let pool_size = std::fs::read_dir(pool_dir(&stet)).map_or(0, |e| e.count());
        if let (true, Some(base)) = (pool_size < keep, base) {
            let pool = pool_dir(&stet);
            // Made ready for the next item under a name no taker looks at, then renamed.
            let cleaning = pool.join(format!("{}{CLEANING}{}", self.item, std::process::id()));
            if std::fs::create_dir_all(&pool).is_ok() && std::fs::rename(root, &cleaning).is_ok() {
                let (item, base) = (self.item.clone(), base.to_string());
                let making = std::thread::spawn(move || {
                    let ready = Lane {
                        item: item.clone(),
                        branch: branch_of(&item),
                        dir: cleaning.join("work"),
                        git_dir: cleaning.join("git"),
                    };
                    let done = ready.forget_item(&base).is_ok()
                        && std::fs::rename(&cleaning, pool.join(&item)).is_ok();
                    if !done {
                        let _ = discard(&stet, &cleaning);
                    }
                });
                MAKING_READY
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(making);
                return;
            }
        }
        self.remove();
    }

    /// Leaves in a landed lane only what its next item may see: the base it started from
    /// (the repository's history, held by one ref so that the next item's fetch is
    /// incremental) and its working tree at that base; the item's commits, objects, refs,
    /// reflogs and git's notes of the host's paths are gone. Every object no ref reaches
    /// is dropped, packed or loose (`repack -a -d`, `prune`) — this walks the history, so
    /// it runs off the drive's path, before the copy joins the pool.
    fn forget_item(&self, base: &str) -> Result<(), GitError> {
        let git = self.history();
        git.run(&["update-ref", POOL_BASE, base])?;
        git.run(&["symbolic-ref", "HEAD", POOL_BASE])?;
        let refs = git.run(&["for-each-ref", "--format=%(refname)"])?;
        for other in refs.lines().filter(|r| *r != POOL_BASE) {
            git.run(&["update-ref", "-d", other])?;
        }
        let _ = std::fs::remove_dir_all(self.git_dir.join("logs"));
        // The index names the item's blobs until the tree is the base's: reset first, or
        // `repack` and `prune` keep them.
        self.restore()?;
        // The lane's git directory, which no sandbox writes: as long as its history takes.
        let objects = git.clone().with_deadline(crate::git::HOST_ONLY_DEADLINE);
        objects.run(&["repack", "-a", "-d", "-q"])?;
        objects.run(&["prune", "--expire=now"])?;
        self.holds_only(base)
    }

    /// Checks that every object the lane's git directory holds, packed or loose, is one
    /// `base` reaches: a copy holding anything of the last item is not pooled.
    fn holds_only(&self, base: &str) -> Result<(), GitError> {
        let objects = self.history().with_deadline(crate::git::HOST_ONLY_DEADLINE);
        let held = objects.run(&[
            "cat-file",
            "--batch-all-objects",
            "--batch-check=%(objectname)",
        ])?;
        let reached = objects.run(&["rev-list", "--objects", "--no-object-names", base])?;
        let reached: std::collections::HashSet<&str> = reached.lines().collect();
        match held.lines().find(|oid| !reached.contains(oid)) {
            None => Ok(()),
            Some(oid) => Err(io_error(
                "pool",
                &self.git_dir,
                std::io::Error::other(format!(
                    "it still holds {oid}, which its base does not reach"
                )),
            )),
        }
    }

    /// The stet directory this lane lives in (`<stet>/lanes/<item>/work`).
    fn stet_dir(&self) -> Option<PathBuf> {
        Some(self.dir.parent()?.parent()?.parent()?.to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Git on a lane's working tree, as a test looks at it (stet's own code goes through
    /// the gate).
    fn tree_git(lane: &Lane) -> Inert {
        Inert::lane(&lane.git_dir, &lane.dir)
    }

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

    /// Three commits of `README` on top of `work`'s branch, the last saying `version 2`.
    fn three_versions(work: &Path) {
        for n in 0..3 {
            std::fs::write(work.join("README"), format!("version {n}\n")).unwrap();
            git(work, &["commit", "--quiet", "-am", &format!("v{n}")]).unwrap();
        }
    }

    #[test]
    fn a_seeded_lane_gets_its_own_copy_at_every_restore_and_never_commits_or_changes_the_seed() {
        let (_root, work) = repo_with_remote();
        three_versions(&work);
        let setup = crate::config::Setup {
            commands: vec!["make deps".into()],
            inputs: vec!["README".into()],
            outputs: vec!["deps".into()],
            network: Vec::new(),
        };
        // What a setup left, kept as a seed (its key from the base's README).
        let made = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(made.path().join("deps/lib")).unwrap();
        std::fs::write(made.path().join("deps/lib/code.py"), "GOOD = 1\n").unwrap();
        let key = crate::seeds::key(&work, &setup, "image:1", "HEAD").unwrap();
        let seed = crate::seeds::Seed {
            key: key.clone(),
            base: "HEAD".into(),
            commands: setup.commands.clone(),
            image: "image:1".into(),
            outputs: setup.outputs.clone(),
            bytes: 0,
            entries: 0,
            built_unix_ms: 1,
            took_ms: 1,
        };
        let seed = crate::seeds::keep(&work, made.path(), seed, crate::seeds::Limit::NONE).unwrap();
        assert_eq!((seed.bytes, seed.entries), (9, 3));
        assert_eq!(crate::seeds::ready(&work, &key), Some(seed.clone()));
        assert!(crate::seeds::tracked_outputs(&work, &setup, "HEAD")
            .unwrap()
            .is_empty());
        let lane = open(&work, "origin", "seeded", "HEAD", None).unwrap();
        crate::seeds::give(lane.dir.parent().unwrap(), &seed).unwrap();
        lane.restore().unwrap();
        let code = lane.dir.join("deps/lib/code.py");
        assert_eq!(std::fs::read_to_string(&code).unwrap(), "GOOD = 1\n");
        // An agent rewrites the dependency (not ignored by any .gitignore) and adds a file.
        std::fs::write(&code, "POISONED = 1\n").unwrap();
        std::fs::write(lane.dir.join("deps/planted"), "x").unwrap();
        std::fs::write(lane.dir.join("change.txt"), "work\n").unwrap();
        assert!(lane
            .tree()
            .uncommitted()
            .unwrap()
            .iter()
            .all(|l| !l.contains("deps")));
        assert!(lane.commit_all("the agent's work").unwrap());
        let files = lane
            .history()
            .run(&["ls-tree", "-r", "--name-only", "HEAD"])
            .unwrap();
        assert!(
            files.contains("change.txt") && !files.contains("deps"),
            "{files}"
        );
        lane.restore().unwrap();
        assert_eq!(std::fs::read_to_string(&code).unwrap(), "GOOD = 1\n");
        assert!(!lane.dir.join("deps/planted").exists());
        let kept = crate::seeds::seed_dir(&work, &key).join("outputs/deps/lib/code.py");
        assert_eq!(std::fs::read_to_string(kept).unwrap(), "GOOD = 1\n");
        // A changed input is another seed; the one a lane was given is never stale.
        std::fs::write(work.join("README"), "version 3\n").unwrap();
        git(&work, &["commit", "--quiet", "-am", "v3"]).unwrap();
        assert_ne!(
            crate::seeds::key(&work, &setup, "image:1", "HEAD").unwrap(),
            key
        );
        assert!(crate::seeds::remove_stale(&work, None, false)
            .unwrap()
            .is_empty());
        lane.remove();
        let removed = crate::seeds::remove_stale(&work, None, false).unwrap();
        assert_eq!(removed.len(), 1);
        assert!(crate::seeds::all(&work).is_empty());
    }

    #[test]
    fn a_new_lane_holds_its_branchs_whole_history_and_nothing_of_other_branches() {
        let (_root, work) = repo_with_remote();
        three_versions(&work);
        // Another branch's content: outside the lane.
        git(&work, &["checkout", "--quiet", "-b", "private"]).unwrap();
        std::fs::write(work.join("secret.txt"), "only on private\n").unwrap();
        git(&work, &["add", "secret.txt"]).unwrap();
        git(&work, &["commit", "--quiet", "-m", "private"]).unwrap();
        let secret = git(&work, &["rev-parse", "HEAD:secret.txt"]).unwrap();
        git(&work, &["checkout", "--quiet", "-"]).unwrap();
        let lane = open(&work, "origin", "packed", "HEAD", None).unwrap();
        let lane_git = lane.history();
        assert_eq!(
            lane_git.run(&["rev-list", "--count", "HEAD"]).unwrap(),
            git(&work, &["rev-list", "--count", "HEAD"]).unwrap()
        );
        lane_git
            .run(&["fsck", "--connectivity-only", "--no-dangling"])
            .unwrap();
        assert!(lane_git.run(&["cat-file", "-e", secret.trim()]).is_err());
        // Packed straight in: one pack, no fetch's leftovers.
        assert!(!lane.git_dir.join("FETCH_HEAD").exists());
        assert_eq!(
            std::fs::read_to_string(lane.dir.join("README")).unwrap(),
            "version 2\n"
        );
    }

    #[test]
    fn a_new_lane_of_a_shallow_clone_is_fetched_and_its_history_ends_where_the_clones_does() {
        let (root, work) = repo_with_remote();
        three_versions(&work);
        let shallow = root.path().join("shallow");
        git(
            root.path(),
            &[
                "clone",
                "--quiet",
                "--depth",
                "1",
                &format!("file://{}", work.display()),
                shallow.to_str().unwrap(),
            ],
        )
        .unwrap();
        let lane = open(&shallow, "origin", "shallow", "HEAD", None).unwrap();
        assert_eq!(
            lane.history()
                .run(&["rev-list", "--count", "HEAD"])
                .unwrap()
                .trim(),
            "1"
        );
        lane.history().run(&["log", "--oneline"]).unwrap();
        assert_eq!(
            std::fs::read_to_string(lane.dir.join("README")).unwrap(),
            "version 2\n"
        );
    }

    #[test]
    fn a_lane_has_its_own_git_dir_with_no_remote_and_only_its_branch_comes_back() {
        let (root, work) = repo_with_remote();
        let lane = open(&work, "origin", "fix-typo", "HEAD", None).unwrap();
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
            lane.history().run(&["remote"]).unwrap().is_empty(),
            "a lane has no remote"
        );
        let config = std::fs::read_to_string(lane.git_dir.join("config")).unwrap();
        assert!(!config.contains("remote.git"), "{config}");
        std::fs::write(lane.dir.join("README"), "hello, fixed\n").unwrap();
        tree_git(&lane)
            .run(&["checkout", "--quiet", "-b", "stray"])
            .unwrap();
        tree_git(&lane)
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
        assert_eq!(
            open(&work, "origin", "fix-typo", "HEAD", None).unwrap(),
            lane
        );
        assert_eq!(kept(&work), ["fix-typo"]);
    }

    fn inode(path: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).unwrap().ino()
    }

    #[test]
    fn a_landed_lane_is_reused_for_the_next_item_with_nothing_of_the_last_one_left() {
        let (_root, work) = repo_with_remote();
        let first = open(&work, "origin", "first", "HEAD", None).unwrap();
        std::fs::write(first.dir.join("README"), "first's work\n").unwrap();
        assert!(first.commit_all("first").unwrap());
        // What the agent left uncommitted or ignored, and a repository of its own.
        std::fs::write(first.dir.join(".gitignore"), "built/\n").unwrap();
        std::fs::create_dir_all(first.dir.join("built")).unwrap();
        std::fs::write(first.dir.join("built/out"), "x").unwrap();
        std::fs::write(first.dir.join("untracked"), "x").unwrap();
        std::fs::create_dir_all(first.dir.join("nested/.git")).unwrap();
        let git_dir_was = inode(&first.git_dir);
        let firsts = first.head().unwrap();
        let firsts_blob = first.history().run(&["rev-parse", "HEAD:README"]).unwrap();
        // A reset leaves the last item's commit in ORIG_HEAD.
        tree_git(&first)
            .run(&["reset", "--quiet", "--hard", "HEAD"])
            .unwrap();
        let base = git(&work, &["rev-parse", "HEAD"]).unwrap();
        first.retire(1, Some(&base));
        pool_ready();
        assert!(!first.dir.exists(), "the landed lane left its place");
        assert_eq!(pooled(&stet_dir(&work)).len(), 1);

        let second = open(&work, "origin", "second", "HEAD", None).unwrap();
        assert_eq!(
            inode(&second.git_dir),
            git_dir_was,
            "the pooled copy was reused"
        );
        assert!(pooled(&stet_dir(&work)).is_empty());
        assert_eq!(
            std::fs::read_to_string(second.dir.join("README")).unwrap(),
            "hello\n",
            "the working tree is the new base's"
        );
        for gone in [".gitignore", "built", "untracked", "nested"] {
            assert!(!second.dir.join(gone).exists(), "{gone} was left behind");
        }
        assert!(second.dir.join(".git").is_dir(), "the mount point stays");
        let refs = second
            .history()
            .run(&["for-each-ref", "--format=%(refname)"])
            .unwrap();
        assert_eq!(refs, "refs/heads/stet/second", "only its own branch");
        for pseudo in ["ORIG_HEAD", "FETCH_HEAD"] {
            let named = second
                .history()
                .run(&["rev-parse", "--verify", "--quiet", pseudo]);
            assert_ne!(named.ok().as_deref(), Some(firsts.as_str()), "{pseudo}");
        }
        assert_eq!(
            tree_git(&second).run(&["status", "--porcelain"]).unwrap(),
            ""
        );
        // Nothing of the last item's objects, and no file naming the host's paths.
        assert!(
            second.history().run(&["cat-file", "-e", &firsts]).is_err(),
            "the last item's commit is still in the lane"
        );
        // Nor its blobs, which the index named until the tree was reset.
        let all = second
            .history()
            .run(&[
                "cat-file",
                "--batch-all-objects",
                "--batch-check=%(objectname)",
            ])
            .unwrap();
        assert!(
            !all.contains(firsts_blob.trim()),
            "the last item's blob is still in the lane"
        );
        let mut pending = vec![second.git_dir.clone()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().map(Result::unwrap) {
                if entry.file_type().unwrap().is_dir() {
                    pending.push(entry.path());
                } else {
                    let text =
                        String::from_utf8_lossy(&std::fs::read(entry.path()).unwrap()).into_owned();
                    assert!(
                        !text.contains(work.to_str().unwrap()),
                        "{} names the repository's path",
                        entry.path().display()
                    );
                }
            }
        }
        assert_eq!(
            second.head().unwrap(),
            git(&work, &["rev-parse", "HEAD"]).unwrap()
        );
        // It works as a fresh lane does.
        std::fs::write(second.dir.join("NEW"), "second's work\n").unwrap();
        assert!(second.commit_all("second").unwrap());
        second.bring_back(&work).unwrap();
        let files = git(&work, &["ls-tree", "--name-only", "stet/second"]).unwrap();
        assert_eq!(files, "NEW\nREADME");
    }

    #[test]
    fn a_pooled_copy_whose_mount_point_holds_anything_is_not_reused() {
        let (_root, work) = repo_with_remote();
        let first = open(&work, "origin", "first", "HEAD", None).unwrap();
        std::fs::write(first.dir.join(".git/planted"), "x").unwrap();
        // Which copy a lane is: a mark in its git directory (an inode number is reused
        // once the thrown-away copy is deleted).
        std::fs::write(first.git_dir.join("first-copy"), "").unwrap();
        let base = git(&work, &["rev-parse", "HEAD"]).unwrap();
        first.retire(1, Some(&base));
        pool_ready();
        let second = open(&work, "origin", "second", "HEAD", None).unwrap();
        assert!(!second.git_dir.join("first-copy").exists(), "made afresh");
        assert!(!second.dir.join(".git/planted").exists());
        assert!(pooled(&stet_dir(&work)).is_empty());
    }

    #[test]
    fn the_pool_keeps_at_most_what_it_is_asked_and_clear_pool_empties_it() {
        let (_root, work) = repo_with_remote();
        let lanes: Vec<Lane> = ["a", "b", "c"]
            .iter()
            .map(|item| open(&work, "origin", item, "HEAD", None).unwrap())
            .collect();
        let base = git(&work, &["rev-parse", "HEAD"]).unwrap();
        for lane in &lanes {
            lane.retire(2, Some(&base));
            pool_ready();
            assert!(!lane.dir.exists());
        }
        assert_eq!(pooled(&stet_dir(&work)).len(), 2);
        assert!(clear_pool(&work).unwrap() > 0);
        assert!(pooled(&stet_dir(&work)).is_empty());
        assert!(!stet_dir(&work).join("trash").exists());
    }

    #[test]
    fn a_repository_the_agent_made_in_the_lane_refuses_the_commit_by_name_and_a_restore_removes_it()
    {
        let (_root, work) = repo_with_remote();
        let lane = open(&work, "origin", "item", "HEAD", None).unwrap();
        for nested in ["empty", "deep/er"] {
            let dot_git = lane.dir.join(nested).join(".git");
            std::fs::create_dir_all(dot_git.join("objects")).unwrap();
            std::fs::create_dir_all(dot_git.join("refs")).unwrap();
            std::fs::write(dot_git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        }
        // And one under another name: a worktree's layout among the docs.
        std::fs::create_dir_all(lane.dir.join("docs")).unwrap();
        std::fs::write(lane.dir.join("docs/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(lane.dir.join("docs/commondir"), "../deep/er/.git\n").unwrap();
        std::fs::write(lane.dir.join("deep/file"), "content\n").unwrap();
        let head = lane.head().unwrap();
        let refused = lane.commit_all("work").unwrap_err().to_string();
        for named in ["deep/er/.git", "docs", "empty/.git"] {
            assert!(refused.contains(named), "{named}: {refused}");
        }
        assert_eq!(lane.head().unwrap(), head, "nothing was committed");
        lane.restore().unwrap();
        for gone in ["empty", "deep", "docs"] {
            assert!(!lane.dir.join(gone).exists(), "{gone} is left");
        }
        assert!(!lane.commit_all("nothing").unwrap());
    }

    #[test]
    fn a_sparse_file_is_too_large_by_its_length_and_a_tracked_one_unchanged_is_not() {
        let (_root, work) = repo_with_remote();
        let lane = open(&work, "origin", "item", "HEAD", None).unwrap();
        std::fs::write(lane.dir.join("asset.bin"), vec![7u8; 4096]).unwrap();
        assert!(lane.commit_all("an asset").unwrap());
        lane.restore().unwrap();
        std::fs::File::create(lane.dir.join("sparse.bin"))
            .unwrap()
            .set_len(20 << 30)
            .unwrap();
        let refused = lane
            .commit_all_as("big", None, 1024, u64::MAX)
            .unwrap_err()
            .to_string();
        assert!(refused.contains("sparse.bin (20 GiB)"), "{refused}");
        assert!(!refused.contains("asset.bin"), "{refused}");
        // The tracked asset, changed in place at the same length, is refused too.
        std::fs::write(lane.dir.join("asset.bin"), vec![8u8; 4096]).unwrap();
        let refused = lane
            .commit_all_as("big", None, 1024, u64::MAX)
            .unwrap_err()
            .to_string();
        assert!(refused.contains("asset.bin (4 KiB)"), "{refused}");
        // A touched tracked file unchanged is the repository's own.
        lane.restore().unwrap();
        std::fs::set_permissions(
            lane.dir.join("asset.bin"),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
        assert!(
            !lane
                .commit_all_as("same", None, 1024, u64::MAX)
                .unwrap()
                .changed
        );
    }

    #[test]
    fn a_scratch_lane_makes_its_own_directory_private_and_leaves_its_parents_as_they_were() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        let lane = scratch(&dir.path().join("lane")).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(
            mode(dir.path()),
            0o1777,
            "a parent (a /tmp) is left as it was"
        );
        assert_eq!(mode(lane.dir.parent().unwrap()), 0o700);
    }

    #[test]
    fn what_a_lane_holds_is_its_owners_alone_and_no_set_id_bit_survives_a_restore() {
        use std::os::unix::fs::PermissionsExt;
        let (_root, work) = repo_with_remote();
        let lane = open(&work, "origin", "item", "HEAD", None).unwrap();
        for dir in [
            stet_dir(&work),
            lanes_dir(&work),
            lane.dir.parent().unwrap().to_path_buf(),
        ] {
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", dir.display());
        }
        std::fs::write(lane.dir.join("tool"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            lane.dir.join("tool"),
            std::fs::Permissions::from_mode(0o4755),
        )
        .unwrap();
        std::fs::set_permissions(
            lane.dir.join("README"),
            std::fs::Permissions::from_mode(0o2777),
        )
        .unwrap();
        assert!(lane.commit_all("a tool").unwrap());
        let mode = |p: &str| {
            std::fs::metadata(lane.dir.join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777
        };
        assert_eq!(mode("tool") & 0o7000, 0);
        assert_eq!(mode("README") & 0o7022, 0);
    }

    #[test]
    fn what_a_stage_wrote_is_restored_away() {
        let (_root, work) = repo_with_remote();
        let lane = open(&work, "origin", "item", "HEAD", None).unwrap();
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
        let lane = open(&work, "origin", "item", "HEAD", None).unwrap();
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
        let theirs = open(&peer, "origin", "item", "HEAD", None).unwrap();
        assert_eq!(
            std::fs::read_to_string(theirs.dir.join("NEW")).unwrap(),
            "from the first clone\n"
        );
        assert_eq!(theirs.head().unwrap(), lane.head().unwrap());
    }
}
