//! The gate's walk: a tree looked at through directory handles (`openat`, `fstatat`,
//! `unlinkat`, `renameat` relative to an open directory), so no path length limits it, no
//! link is followed, and nothing is opened but directories and regular files.
//!
//! Which entries a sandbox touched is read from their status-change time (`ctime`), which
//! the kernel sets on every write, `chmod`, extended attribute, link, rename and
//! `utimensat`, and which no process without `CAP_SYS_TIME` can set back: an entry whose
//! `ctime` is older than the crossing's start was not touched while the sandbox could write.

use std::ffi::{CStr, CString};

use rustix::fd::OwnedFd;
use rustix::fs::{self, AtFlags, FileType, Mode, OFlags, Stat, Timestamps};
use rustix::io::Errno;

use super::shape::{self, Shape};

/// What the walk does with what it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Only list the repositories present, changing nothing (what `stet ask` mounts
    /// read-only before its call).
    Survey,
    /// Before host git commits the tree: clean what was touched; name what cannot be
    /// committed (a repository, a path git cannot hold, a file over the size limit).
    Commit,
    /// Before host git puts the tree back to its commit: every entry that is not a
    /// directory and was touched is removed (git writes back what it tracks), and every
    /// `.git` entry, special file and path too long for git.
    Restore,
    /// Before anyone looks: what was touched is cleaned, special files it made are
    /// removed, and repositories it made or changed are renamed out of git's sight —
    /// nothing else is removed (the person's own directory after `stet ask`, a kept lane).
    Look,
}

/// When a crossing started: entries whose status changed before were not touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Since {
    /// Seconds since the epoch.
    pub secs: i64,
    /// Nanoseconds within the second.
    pub nanos: i64,
}

impl Since {
    /// A second before `at`: a file system's timestamps may run a clock tick behind the
    /// clock a process reads.
    pub fn before(at: std::time::SystemTime) -> Since {
        let at = at
            .checked_sub(std::time::Duration::from_secs(1))
            .unwrap_or(std::time::UNIX_EPOCH);
        let since = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Since {
            secs: i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
            nanos: i64::from(since.subsec_nanos()),
        }
    }
}

/// How the walk is told what to do.
#[derive(Debug, Clone)]
pub struct Rules {
    pub purpose: Purpose,
    /// `None`: everything counts as touched.
    pub since: Option<Since>,
    /// Repositories nothing touched are not entered (`stet ask`: those present before the
    /// call were mounted read-only; their objects can be many).
    pub skip_untouched_repositories: bool,
    /// Paths (relative to the top) never entered nor judged: a lane's seed outputs, which
    /// host git is never given (`tree.rs` excludes them from every command) and which the
    /// next restore replaces whole.
    pub skip: Vec<String>,
}

/// A repository found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Repository {
    /// Its path, relative to the top.
    pub path: String,
    /// Why it is one.
    pub shape: Shape,
    /// Whether it is a symbolic link (a `.git` link: never mounted, a mount would follow).
    pub link: bool,
    /// Where it was renamed to (relative to the top), when it was moved out of git's sight.
    pub moved_to: Option<String>,
}

/// Something taken out of the tree, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    /// The path, relative to the top.
    pub path: String,
    /// Why, in words.
    pub why: &'static str,
}

impl std::fmt::Display for Removed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.path, self.why)
    }
}

/// What one walk found and did.
#[derive(Debug, Default)]
pub struct Walked {
    /// Repositories: every one (`Survey`), else those made or changed.
    pub repositories: Vec<Repository>,
    /// Taken out of the tree.
    pub removed: Vec<Removed>,
    /// Regular files touched, over the size limit: (path, length).
    pub large: Vec<(String, u64)>,
    /// Paths too long for git to hold (`Commit`).
    pub too_long: Vec<String>,
    /// The length of every touched regular file, each hard link counted: what git reads
    /// to commit them.
    pub bytes_to_read: u64,
    /// Entries whose modes, extended attributes and times were put right.
    pub cleaned: u64,
}

/// Why the walk could not look at something: the crossing fails closed.
#[derive(Debug, thiserror::Error)]
#[error("cannot examine {path}: {why}")]
pub struct GateError {
    /// The path, relative to the top (empty: the top).
    pub path: String,
    /// What went wrong.
    pub why: String,
}

/// The longest relative path git can hold: its `lstat` of a longer one fails.
pub const GIT_PATH_LIMIT: usize = 4095;

/// How many directories deep the walk holds open at once; deeper, `Restore` moves the
/// rest up to the top to go on, and the others refuse to finish.
const MOST_OPEN: usize = 256;

/// The prefix of names the walk gives what it moves up to the top.
const FLATTENED: &str = ".stet-flattened-";

/// What a repository's marker (or a `.git` entry) renamed out of git's sight has after its
/// name.
pub const QUARANTINED: &str = ".stet-quarantined-";

/// Walks `top` by `rules`, never following a link; `max_file` is the size over which a
/// touched regular file is listed in [`Walked::large`].
pub fn walk(top: &std::path::Path, rules: Rules, max_file: u64) -> Result<Walked, GateError> {
    let top_fd = fs::open(
        top,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| fail("", e))?;
    let mut walker = Walker {
        rules,
        max_file,
        found: Walked::default(),
        stamp: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default(),
        renamed: 0,
        changed: std::collections::HashMap::new(),
        to_rename: std::collections::HashSet::new(),
    };
    let top_stat = fs::fstat(&top_fd).map_err(|e| fail("", e))?;
    if walker.touched(&top_stat) && walker.rules.purpose != Purpose::Survey {
        walker.clean(&top_fd, "", &top_stat)?;
    }
    let mut stack = vec![Frame::new(
        top_fd,
        String::new(),
        None,
        walker.touched(&top_stat),
    )];
    let mut moved_up: Vec<CString> = Vec::new();
    walker.visit(&mut stack, &mut moved_up)?;
    // What `Restore` moved up to the top from deeper than the walk holds open is removed.
    if !moved_up.is_empty() {
        let top_fd = fs::open(
            top,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| fail("", e))?;
        for name in moved_up {
            walker.remove_tree(&top_fd, &name, &name.to_string_lossy())?;
        }
    }
    walker
        .found
        .repositories
        .sort_by(|a, b| a.path.cmp(&b.path));
    walker.found.removed.sort_by(|a, b| a.path.cmp(&b.path));
    walker.found.large.sort();
    walker.found.too_long.sort();
    Ok(walker.found)
}

/// One directory being walked: its handle, its path, the repository it is in, and the
/// subdirectories still to walk.
struct Frame {
    fd: OwnedFd,
    path: String,
    /// The repository (its index in `found.repositories`, or a shape found untouched so
    /// far) this directory is inside.
    repository: Option<Inside>,
    touched: bool,
    subdirectories: Vec<(CString, bool)>,
}

/// A repository a directory is inside: where, and what shape.
#[derive(Debug, Clone)]
struct Inside {
    path: String,
    shape: Shape,
}

impl Frame {
    fn new(fd: OwnedFd, path: String, repository: Option<Inside>, touched: bool) -> Frame {
        Frame {
            fd,
            path,
            repository,
            touched,
            subdirectories: Vec::new(),
        }
    }
}

struct Walker {
    rules: Rules,
    max_file: u64,
    found: Walked,
    stamp: u128,
    renamed: u64,
    /// The repositories found made or changed, by path: their index in `found`.
    changed: std::collections::HashMap<String, usize>,
    /// Those `Look` renames out of git's sight when the walk leaves their directory (a
    /// change found below its top).
    to_rename: std::collections::HashSet<String>,
}

fn fail(path: &str, e: Errno) -> GateError {
    GateError {
        path: if path.is_empty() {
            ".".to_string()
        } else {
            path.to_string()
        },
        why: std::io::Error::from(e).to_string(),
    }
}

fn joined(dir: &str, name: &CStr) -> String {
    let name = String::from_utf8_lossy(name.to_bytes());
    if dir.is_empty() {
        name.into_owned()
    } else {
        format!("{dir}/{name}")
    }
}

#[allow(clippy::unnecessary_cast)]
fn changed_at(st: &Stat) -> Since {
    Since {
        secs: st.st_ctime as i64,
        nanos: st.st_ctime_nsec as i64,
    }
}

#[allow(clippy::unnecessary_cast)]
fn mode_of(st: &Stat) -> u32 {
    st.st_mode as u32
}

fn length_of(st: &Stat) -> u64 {
    u64::try_from(st.st_size).unwrap_or(0)
}

/// The entry names of the open directory `fd`, `.` and `..` aside.
fn names(fd: &OwnedFd, path: &str) -> Result<Vec<CString>, GateError> {
    let mut dir = fs::Dir::read_from(fd).map_err(|e| fail(path, e))?;
    let mut names = Vec::new();
    while let Some(entry) = dir.read() {
        let entry = entry.map_err(|e| fail(path, e))?;
        let name = entry.file_name();
        if name.to_bytes() != b"." && name.to_bytes() != b".." {
            names.push(name.to_owned());
        }
    }
    Ok(names)
}

impl Walker {
    fn touched(&self, st: &Stat) -> bool {
        self.rules.since.is_none_or(|since| changed_at(st) >= since)
    }

    /// Walks the frames on `stack` (the top one first) to the end.
    fn visit(
        &mut self,
        stack: &mut Vec<Frame>,
        moved_up: &mut Vec<CString>,
    ) -> Result<(), GateError> {
        if let Some(frame) = stack.last_mut() {
            let subdirectories = self.directory(frame)?;
            frame.subdirectories = subdirectories;
        }
        while let Some(frame) = stack.last_mut() {
            let Some((name, touched)) = frame.subdirectories.pop() else {
                let done = stack.pop().expect("a frame");
                self.leave(&done)?;
                continue;
            };
            let path = joined(&frame.path, &name);
            if stack.len() >= MOST_OPEN {
                let parent = &stack.last().expect("a frame").fd;
                if self.rules.purpose == Purpose::Restore {
                    let top = &stack.first().expect("the top").fd;
                    let aside = self.rename_fresh(parent, top, &name, FLATTENED, &path)?;
                    moved_up.push(aside);
                    continue;
                }
                if self.rules.purpose == Purpose::Commit {
                    // Deeper than git could hold anyway: named, and the commit refused.
                    self.found.too_long.push(path);
                    continue;
                }
                return Err(GateError {
                    path,
                    why: format!(
                        "it is more than {MOST_OPEN} directories deep; stet left it as it is"
                    ),
                });
            }
            let frame = stack.last().expect("a frame");
            let Some(fd) = self.open_directory(&frame.fd, &name, &path)? else {
                continue;
            };
            let repository = frame.repository.clone();
            let mut child = Frame::new(fd, path, repository, touched);
            if touched && self.rules.purpose != Purpose::Survey {
                let st = fs::fstat(&child.fd).map_err(|e| fail(&child.path, e))?;
                self.clean(&child.fd, &child.path, &st)?;
            }
            child.subdirectories = self.directory(&mut child)?;
            stack.push(child);
        }
        Ok(())
    }

    /// Opens the directory `name` in `dir`, not following a link; `None` when it is gone
    /// or is no longer a directory (nothing of it to walk).
    fn open_directory(
        &self,
        dir: &OwnedFd,
        name: &CStr,
        path: &str,
    ) -> Result<Option<OwnedFd>, GateError> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match fs::openat(dir, name, flags, Mode::empty()) {
            Ok(fd) => Ok(Some(fd)),
            Err(Errno::NOENT) | Err(Errno::NOTDIR) | Err(Errno::LOOP) => Ok(None),
            // A directory its owner cannot enter: made enterable (the owner may), then
            // opened; never a reason to look away.
            Err(Errno::ACCESS) if self.rules.purpose != Purpose::Survey => {
                fs::chmodat(dir, name, Mode::from_raw_mode(0o700), AtFlags::empty())
                    .map_err(|e| fail(path, e))?;
                fs::openat(dir, name, flags, Mode::empty())
                    .map(Some)
                    .map_err(|e| fail(path, e))
            }
            Err(e) => Err(fail(path, e)),
        }
    }

    /// Looks at every entry of the directory of `frame`; returns its subdirectories to
    /// walk, each with whether it was touched.
    fn directory(&mut self, frame: &mut Frame) -> Result<Vec<(CString, bool)>, GateError> {
        let names = names(&frame.fd, &frame.path)?;
        let is_top = frame.path.is_empty();
        if frame.repository.is_none() {
            if let Some(shape) = shape::of_names(names.iter().map(|n| n.to_bytes())) {
                frame.repository = Some(Inside {
                    path: frame.path.clone(),
                    shape,
                });
                if self.rules.purpose == Purpose::Survey {
                    if !is_top {
                        self.record(frame, false);
                    }
                    return Ok(Vec::new());
                }
                if frame.touched {
                    self.changed(frame)?;
                } else if self.rules.skip_untouched_repositories {
                    return Ok(Vec::new());
                }
            }
        } else if frame.touched {
            self.changed(frame)?;
        }
        let mut subdirectories = Vec::new();
        for name in names {
            let path = joined(&frame.path, &name);
            if self.rules.skip.contains(&path) {
                continue;
            }
            let st = match fs::statat(&frame.fd, &name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(fail(&path, e)),
            };
            let touched = self.touched(&st);
            let kind = FileType::from_raw_mode(st.st_mode as _);
            if shape::is_dot_git(name.to_bytes()) {
                // The top's own: a lane's read-only mount point, or the person's repository
                // (mounted read-only for `stet ask`).
                if !(is_top && name.to_bytes() == b".git") || self.rules.purpose == Purpose::Survey
                {
                    self.dot_git(frame, &name, &path, kind, touched)?;
                }
                continue;
            }
            if touched && frame.repository.is_some() {
                self.changed(frame)?;
            }
            if path.len() > GIT_PATH_LIMIT && self.rules.purpose != Purpose::Survey {
                if self.too_long(frame, &name, path, kind)? {
                    continue;
                }
            } else if kind == FileType::Directory {
                subdirectories.push((name, touched));
            } else {
                self.entry(frame, &name, path, &st, kind, touched)?;
            }
        }
        Ok(subdirectories)
    }

    /// A path longer than git can hold: `Commit` names it, `Restore` removes it, `Look`
    /// walks on (git cannot reach it; what is under it is still looked at). Whether the
    /// entry is dealt with.
    fn too_long(
        &mut self,
        frame: &Frame,
        name: &CStr,
        path: String,
        kind: FileType,
    ) -> Result<bool, GateError> {
        match self.rules.purpose {
            Purpose::Commit => {
                self.found.too_long.push(path);
                Ok(true)
            }
            Purpose::Restore => {
                if kind == FileType::Directory {
                    self.remove_tree(&frame.fd, name, &path)?;
                } else {
                    fs::unlinkat(&frame.fd, name, AtFlags::empty()).map_err(|e| fail(&path, e))?;
                }
                self.found.removed.push(Removed {
                    path,
                    why: "a path longer than git can hold",
                });
                Ok(true)
            }
            Purpose::Look | Purpose::Survey => Ok(false),
        }
    }

    /// A non-directory entry, by purpose.
    fn entry(
        &mut self,
        frame: &Frame,
        name: &CStr,
        path: String,
        st: &Stat,
        kind: FileType,
        touched: bool,
    ) -> Result<(), GateError> {
        let purpose = self.rules.purpose;
        if purpose == Purpose::Survey {
            return Ok(());
        }
        let special = !matches!(kind, FileType::RegularFile | FileType::Symlink);
        if special {
            // Git cannot commit it, and whoever opens it may wait forever. A special file
            // the person had before `stet ask` is theirs.
            if touched || purpose != Purpose::Look {
                fs::unlinkat(&frame.fd, name, AtFlags::empty()).map_err(|e| fail(&path, e))?;
                self.found.removed.push(Removed {
                    path,
                    why: special_kind(kind),
                });
            }
            return Ok(());
        }
        if !touched {
            return Ok(());
        }
        match (purpose, kind) {
            (Purpose::Restore, _) => {
                fs::unlinkat(&frame.fd, name, AtFlags::empty()).map_err(|e| fail(&path, e))?;
            }
            (_, FileType::RegularFile) => {
                let length = length_of(st);
                if purpose == Purpose::Commit {
                    self.found.bytes_to_read = self.found.bytes_to_read.saturating_add(length);
                    if length > self.max_file {
                        self.found.large.push((path.clone(), length));
                    }
                }
                if let Some(fd) = self.open_file(&frame.fd, name, &path, st)? {
                    self.clean(&fd, &path, st)?;
                }
            }
            // A link is data: its target is text, never followed.
            _ => {}
        }
        Ok(())
    }

    /// Opens the regular file `name` for its metadata (no link followed, no blocking, no
    /// controlling terminal), checked to be the very file looked at; `None` when it is
    /// gone or was swapped.
    fn open_file(
        &self,
        dir: &OwnedFd,
        name: &CStr,
        path: &str,
        st: &Stat,
    ) -> Result<Option<OwnedFd>, GateError> {
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let opened = match fs::openat(dir, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) | Err(Errno::LOOP) => return Ok(None),
            // A file its owner cannot read: made readable (the owner may), then opened.
            Err(Errno::ACCESS) => {
                let mode = (mode_of(st) & 0o755) | 0o400;
                fs::chmodat(dir, name, Mode::from_raw_mode(mode as _), AtFlags::empty())
                    .map_err(|e| fail(path, e))?;
                fs::openat(dir, name, flags, Mode::empty()).map_err(|e| fail(path, e))?
            }
            Err(e) => return Err(fail(path, e)),
        };
        let now = fs::fstat(&opened).map_err(|e| fail(path, e))?;
        let same = now.st_ino == st.st_ino && now.st_dev == st.st_dev;
        Ok(
            (same && FileType::from_raw_mode(now.st_mode as _) == FileType::RegularFile)
                .then_some(opened),
        )
    }

    /// Puts right the metadata of an entry a sandbox touched: modes only the owner's and
    /// reading and running for others (no set-id, no sticky, no group or other write),
    /// no extended attribute (notes, ACLs), and its times the crossing's.
    fn clean(&mut self, fd: &OwnedFd, path: &str, st: &Stat) -> Result<(), GateError> {
        let mode = mode_of(st);
        let directory = FileType::from_raw_mode(st.st_mode as _) == FileType::Directory;
        let wanted = (mode & 0o755) | if directory { 0o700 } else { 0o400 };
        if mode & 0o7777 != wanted {
            fs::fchmod(fd, Mode::from_raw_mode(wanted as _)).map_err(|e| fail(path, e))?;
        }
        drop_attributes(fd, path)?;
        if !directory {
            fs::futimens(fd, &now_stamps()).map_err(|e| fail(path, e))?;
        }
        self.found.cleaned += 1;
        Ok(())
    }

    /// When a directory's walk ends: a repository whose change was found below its top is
    /// renamed out of git's sight (`Look`), and a touched directory gets the crossing's
    /// times (after its entries were removed or renamed, which set them).
    fn leave(&mut self, frame: &Frame) -> Result<(), GateError> {
        if let Some(inside) = &frame.repository {
            if inside.path == frame.path && self.to_rename.remove(&inside.path) {
                let moved_to = self.rename_markers(&frame.fd, &inside.path, inside.shape)?;
                if let Some(&at) = self.changed.get(&inside.path) {
                    self.found.repositories[at].moved_to = moved_to;
                }
            }
        }
        if frame.touched && self.rules.purpose != Purpose::Survey {
            fs::futimens(&frame.fd, &now_stamps()).map_err(|e| fail(&frame.path, e))?;
        }
        Ok(())
    }

    /// Records the repository `frame` is in as made or changed, once; `Look` renames it
    /// out of git's sight (now, at its top, or when the walk leaves its top).
    fn changed(&mut self, frame: &mut Frame) -> Result<(), GateError> {
        let Some(inside) = frame.repository.clone() else {
            return Ok(());
        };
        // Git puts back what it tracks; what it does not track goes with `clean`.
        if self.rules.purpose == Purpose::Restore || self.changed.contains_key(&inside.path) {
            return Ok(());
        }
        let moved_to = match self.rules.purpose {
            Purpose::Look if inside.path == frame.path && !frame.path.is_empty() => {
                self.rename_markers(&frame.fd, &inside.path, inside.shape)?
            }
            Purpose::Look if !inside.path.is_empty() => {
                self.to_rename.insert(inside.path.clone());
                None
            }
            _ => None,
        };
        self.changed
            .insert(inside.path.clone(), self.found.repositories.len());
        self.found.repositories.push(Repository {
            path: inside.path,
            shape: inside.shape,
            link: false,
            moved_to,
        });
        Ok(())
    }

    /// Records a repository found by `Survey` (one present, whatever touched it).
    fn record(&mut self, frame: &mut Frame, link: bool) {
        if let Some(inside) = frame.repository.as_ref() {
            self.found.repositories.push(Repository {
                path: inside.path.clone(),
                shape: inside.shape,
                link,
                moved_to: None,
            });
        }
    }

    /// Renames `HEAD` and `refs` in the directory `fd` (at `path`): git then takes it for
    /// no repository. Returns what the first was renamed to.
    fn rename_markers(
        &mut self,
        fd: &OwnedFd,
        path: &str,
        shape: Shape,
    ) -> Result<Option<String>, GateError> {
        let mut first = None;
        for marker in shape::markers(shape) {
            let marker = CString::new(*marker).expect("no NUL");
            match fs::statat(fd, &marker, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(_) => {}
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(fail(path, e)),
            }
            let aside = self.rename_fresh(fd, fd, &marker, "", &joined(path, &marker))?;
            first.get_or_insert(joined(path, &aside));
        }
        Ok(first)
    }

    /// Renames `name` in `from` to a name no entry of `to` has: `<name><suffix><stamp>-<n>`
    /// (`prefix` empty), else `<prefix><stamp>-<n>`.
    fn rename_fresh(
        &mut self,
        from: &OwnedFd,
        to: &OwnedFd,
        name: &CStr,
        prefix: &str,
        path: &str,
    ) -> Result<CString, GateError> {
        loop {
            self.renamed += 1;
            let fresh = if prefix.is_empty() {
                format!(
                    "{}{QUARANTINED}{}-{}",
                    String::from_utf8_lossy(name.to_bytes()),
                    self.stamp,
                    self.renamed
                )
            } else {
                format!("{prefix}{}-{}", self.stamp, self.renamed)
            };
            let fresh = CString::new(fresh).expect("no NUL");
            match fs::statat(to, &fresh, AtFlags::SYMLINK_NOFOLLOW) {
                Err(Errno::NOENT) => {}
                Ok(_) => continue,
                Err(e) => return Err(fail(path, e)),
            }
            fs::renameat(from, name, to, &fresh).map_err(|e| fail(path, e))?;
            return Ok(fresh);
        }
    }

    /// A `.git` entry below the top (any kind, any letter case), by purpose.
    fn dot_git(
        &mut self,
        frame: &Frame,
        name: &CStr,
        path: &str,
        kind: FileType,
        touched: bool,
    ) -> Result<(), GateError> {
        let link = kind == FileType::Symlink;
        let mut found = Repository {
            path: path.to_string(),
            shape: Shape::DotGit,
            link,
            moved_to: None,
        };
        match self.rules.purpose {
            Purpose::Survey => {}
            // None is ever committed, whoever made it.
            Purpose::Commit => {}
            Purpose::Restore => {
                if kind == FileType::Directory {
                    self.remove_tree(&frame.fd, name, path)?;
                } else {
                    fs::unlinkat(&frame.fd, name, AtFlags::empty()).map_err(|e| fail(path, e))?;
                }
                self.found.removed.push(Removed {
                    path: path.to_string(),
                    why: "a repository of the agent's own: host git would follow it",
                });
                return Ok(());
            }
            Purpose::Look => {
                if !touched {
                    return Ok(());
                }
                let aside = self.rename_fresh(&frame.fd, &frame.fd, name, "", path)?;
                found.moved_to = Some(joined(&frame.path, &aside));
            }
        }
        self.found.repositories.push(found);
        Ok(())
    }

    /// Removes the directory `name` in `parent` and everything under it, by handles: what
    /// lies deeper than the walk holds open is moved up into `parent` first, then removed
    /// from there.
    fn remove_tree(&mut self, parent: &OwnedFd, name: &CStr, path: &str) -> Result<(), GateError> {
        let mut pending = vec![name.to_owned()];
        while let Some(root) = pending.pop() {
            let Some(first) = open_to_remove(parent, &root, path)? else {
                continue;
            };
            // Each level: its handle and its name in the level above.
            let mut levels: Vec<(OwnedFd, CString)> = vec![(first, root)];
            loop {
                let depth = levels.len();
                let Some((fd, _)) = levels.last() else {
                    break;
                };
                let mut deeper = None;
                for entry in names(fd, path)? {
                    let st = match fs::statat(fd, &entry, AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(st) => st,
                        Err(Errno::NOENT) => continue,
                        Err(e) => return Err(fail(path, e)),
                    };
                    if FileType::from_raw_mode(st.st_mode as _) == FileType::Directory {
                        deeper = Some(entry);
                        break;
                    }
                    fs::unlinkat(fd, &entry, AtFlags::empty()).map_err(|e| fail(path, e))?;
                }
                match deeper {
                    Some(entry) if depth >= MOST_OPEN => {
                        let aside = self.rename_fresh(fd, parent, &entry, FLATTENED, path)?;
                        pending.push(aside);
                    }
                    Some(entry) => {
                        if let Some(child) = open_to_remove(fd, &entry, path)? {
                            levels.push((child, entry));
                        }
                    }
                    None => {
                        let (_, done) = levels.pop().expect("a level");
                        let above = levels.last().map_or(parent, |(fd, _)| fd);
                        fs::unlinkat(above, &done, AtFlags::REMOVEDIR)
                            .map_err(|e| fail(path, e))?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Opens the directory `name` in `dir` to empty it: `None` when it is gone, or was not a
/// directory (then it is unlinked as what it is); one its owner cannot enter is made
/// enterable first.
fn open_to_remove(dir: &OwnedFd, name: &CStr, path: &str) -> Result<Option<OwnedFd>, GateError> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::NOENT) => Ok(None),
        Err(Errno::NOTDIR) | Err(Errno::LOOP) => {
            fs::unlinkat(dir, name, AtFlags::empty()).map_err(|e| fail(path, e))?;
            Ok(None)
        }
        Err(Errno::ACCESS) => {
            fs::chmodat(dir, name, Mode::from_raw_mode(0o700), AtFlags::empty())
                .map_err(|e| fail(path, e))?;
            fs::openat(dir, name, flags, Mode::empty())
                .map(Some)
                .map_err(|e| fail(path, e))
        }
        Err(e) => Err(fail(path, e)),
    }
}

/// The crossing's time, for both times of an entry.
fn now_stamps() -> Timestamps {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let at = fs::Timespec {
        tv_sec: i64::try_from(now.as_secs()).unwrap_or(i64::MAX) as _,
        tv_nsec: now.subsec_nanos() as _,
    };
    Timestamps {
        last_access: at,
        last_modification: at,
    }
}

/// Removes every extended attribute of the open entry `fd` (a user's notes, an ACL); a
/// file system without them has none to remove.
fn drop_attributes(fd: &OwnedFd, path: &str) -> Result<(), GateError> {
    let mut buffer = vec![0u8; 4096];
    let listed = loop {
        match fs::flistxattr(fd, &mut buffer[..]) {
            Ok(n) => break n,
            Err(Errno::NOTSUP) => return Ok(()),
            Err(Errno::RANGE) if buffer.len() < (1 << 20) => {
                let want = buffer.len() * 4;
                buffer.resize(want, 0);
            }
            Err(e) => return Err(fail(path, e)),
        }
    };
    for name in buffer[..listed]
        .split(|b| *b == 0)
        .filter(|n| !n.is_empty())
    {
        let name = CString::new(name).expect("split at NUL");
        match fs::fremovexattr(fd, &name) {
            // One the kernel keeps (a security label) is not the sandbox's to have set.
            Ok(()) | Err(Errno::NODATA) | Err(Errno::PERM) | Err(Errno::NOTSUP) => {}
            Err(e) => return Err(fail(path, e)),
        }
    }
    Ok(())
}

fn special_kind(kind: FileType) -> &'static str {
    match kind {
        FileType::Fifo => "a FIFO: whoever opens it may wait forever",
        FileType::Socket => "a socket",
        _ => "a device",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    fn rules(purpose: Purpose, since: Option<Since>) -> Rules {
        Rules {
            purpose,
            since,
            skip_untouched_repositories: false,
            skip: Vec::new(),
        }
    }

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    }

    /// A crossing's start after `file` last changed: the status-change time of a probe in
    /// `dir`, written until the file system's clock has moved past `file`'s (it ticks in
    /// jiffies), so that `file` is untouched and whatever changes next is touched.
    fn later_than(file: &Path, dir: &Path) -> Since {
        let stat = |p: &Path| fs::stat(p).unwrap();
        let before = changed_at(&stat(file));
        let probe = dir.join(".probe");
        loop {
            std::fs::write(&probe, "").unwrap();
            let now = changed_at(&stat(&probe));
            if now > before {
                std::fs::remove_file(&probe).unwrap();
                return now;
            }
        }
    }

    fn fifo(path: &Path) {
        nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).unwrap();
    }

    /// A chain of directories `depth` deep under `top`, each named `name`, built by
    /// handles (no path could name its end); returns nothing, the FIFO at its end proves
    /// the walk reached it.
    fn chain(top: &Path, name: &str, depth: usize) {
        let mut fd = fs::open(top, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        for _ in 0..depth {
            fs::mkdirat(&fd, name, Mode::from_raw_mode(0o755)).unwrap();
            fd = fs::openat(&fd, name, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        }
        fs::mknodat(&fd, "fifo", FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
    }

    fn exists_at_depth(top: &Path, name: &str, depth: usize) -> bool {
        let mut fd = fs::open(top, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        for _ in 0..depth {
            match fs::openat(&fd, name, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()) {
                Ok(next) => fd = next,
                Err(_) => return false,
            }
        }
        true
    }

    #[test]
    fn a_commit_walk_clears_set_id_bits_group_write_and_notes_and_names_repositories_by_shape() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        std::fs::create_dir(top.join(".git")).unwrap();
        std::fs::write(top.join("tool"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(top.join("tool"), std::fs::Permissions::from_mode(0o6777))
            .unwrap();
        std::fs::create_dir(top.join("shared")).unwrap();
        std::fs::set_permissions(top.join("shared"), std::fs::Permissions::from_mode(0o3777))
            .unwrap();
        std::fs::write(top.join("noted"), "text").unwrap();
        let noted = fs::open(top.join("noted"), OFlags::RDONLY, Mode::empty()).unwrap();
        let noted_xattr = fs::fsetxattr(&noted, "user.note", b"LAND", fs::XattrFlags::empty());
        // A worktree layout under another name, and one whose objects is a link.
        std::fs::create_dir(top.join("docs")).unwrap();
        std::fs::write(top.join("docs/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(top.join("docs/commondir"), "../elsewhere\n").unwrap();
        std::fs::create_dir_all(top.join("src/refs")).unwrap();
        std::fs::write(top.join("src/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::os::unix::fs::symlink("/tmp", top.join("src/objects")).unwrap();
        std::fs::create_dir_all(top.join("vendor/lib")).unwrap();
        std::fs::write(top.join("vendor/lib/.GIT"), "gitdir: /etc\n").unwrap();
        fifo(&top.join("pipe"));
        let walked = walk(top, rules(Purpose::Commit, None), 1 << 20).unwrap();
        let found: Vec<(&str, Shape)> = walked
            .repositories
            .iter()
            .map(|r| (r.path.as_str(), r.shape))
            .collect();
        assert_eq!(
            found,
            [
                ("docs", Shape::GitDirectory),
                ("src", Shape::GitDirectory),
                ("vendor/lib/.GIT", Shape::DotGit)
            ]
        );
        assert_eq!(mode(&top.join("tool")), 0o755);
        assert_eq!(mode(&top.join("shared")), 0o755);
        if noted_xattr.is_ok() {
            let mut names = [0u8; 64];
            assert_eq!(
                fs::flistxattr(&noted, &mut names[..]).unwrap(),
                0,
                "the note is gone"
            );
        }
        let removed: Vec<&str> = walked.removed.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(removed, ["pipe"]);
        assert!(top.join(".git").is_dir(), "the mount point is left alone");
    }

    #[test]
    fn only_what_changed_since_the_crossing_began_counts_as_touched() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        std::fs::create_dir_all(top.join("fixture.git/objects")).unwrap();
        std::fs::create_dir_all(top.join("fixture.git/refs")).unwrap();
        std::fs::write(top.join("fixture.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(top.join("old"), "the person's").unwrap();
        std::fs::set_permissions(top.join("old"), std::fs::Permissions::from_mode(0o600)).unwrap();
        fifo(&top.join("persons-pipe"));
        let since = Since::before(std::time::SystemTime::now() + std::time::Duration::from_secs(2));
        let walked = walk(top, rules(Purpose::Look, Some(since)), u64::MAX).unwrap();
        assert!(walked.repositories.is_empty(), "{:?}", walked.repositories);
        assert!(walked.removed.is_empty());
        assert_eq!(
            mode(&top.join("old")),
            0o600,
            "nothing untouched is changed"
        );
        assert!(top.join("persons-pipe").symlink_metadata().is_ok());
        // Touched now: the fixture gets a config. Its repository is changed.
        let since = Since::before(std::time::SystemTime::now());
        std::fs::write(top.join("fixture.git/config"), "[core]\n\tfsmonitor = x\n").unwrap();
        let walked = walk(top, rules(Purpose::Commit, Some(since)), u64::MAX).unwrap();
        assert_eq!(walked.repositories.len(), 1);
        assert_eq!(walked.repositories[0].path, "fixture.git");
    }

    #[test]
    fn a_look_renames_what_makes_a_repository_and_removes_only_special_files_it_made() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        let since = Since::before(std::time::SystemTime::now());
        std::fs::create_dir_all(top.join("docs/refs")).unwrap();
        std::fs::write(top.join("docs/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(top.join("docs/commondir"), "..\n").unwrap();
        std::fs::create_dir_all(top.join("made/.git")).unwrap();
        fifo(&top.join("made/pipe"));
        let walked = walk(top, rules(Purpose::Look, Some(since)), u64::MAX).unwrap();
        let moved: Vec<(&str, &str)> = walked
            .repositories
            .iter()
            .map(|r| (r.path.as_str(), r.moved_to.as_deref().unwrap()))
            .collect();
        assert_eq!(moved.len(), 2, "{moved:?}");
        assert_eq!(moved[0].0, "docs");
        assert!(moved[0].1.starts_with("docs/HEAD.stet-quarantined-"));
        assert!(!top.join("docs/HEAD").exists() && !top.join("docs/refs").exists());
        assert_eq!(moved[1].0, "made/.git");
        assert!(!top.join("made/.git").exists());
        assert_eq!(walked.removed.len(), 1);
        // Git no longer takes either for a repository.
        for at in ["docs", "made"] {
            let out = std::process::Command::new("git")
                .args(["rev-parse", "--absolute-git-dir"])
                .current_dir(top.join(at))
                .env("GIT_CEILING_DIRECTORIES", top)
                .output()
                .unwrap();
            assert!(
                !out.status.success(),
                "{at}: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }

    #[test]
    fn a_change_deep_inside_a_repository_renames_it_once_the_walk_leaves_its_top() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        std::fs::create_dir_all(top.join("fixture.git/objects/ab")).unwrap();
        std::fs::create_dir_all(top.join("fixture.git/refs/heads")).unwrap();
        std::fs::write(top.join("fixture.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(top.join("fixture.git/objects/ab/cd"), "x").unwrap();
        let since = later_than(&top.join("fixture.git/objects/ab/cd"), top);
        // Touched below the top alone, twice: one record, renamed when the walk leaves it.
        std::fs::write(top.join("fixture.git/objects/ab/cd"), "y").unwrap();
        std::fs::write(top.join("fixture.git/refs/heads/main"), "0").unwrap();
        let walked = walk(top, rules(Purpose::Look, Some(since)), u64::MAX).unwrap();
        assert_eq!(walked.repositories.len(), 1, "{:?}", walked.repositories);
        let moved = walked.repositories[0].moved_to.as_deref().unwrap();
        assert!(
            moved.starts_with("fixture.git/HEAD.stet-quarantined-"),
            "{moved}"
        );
        assert!(!top.join("fixture.git/HEAD").exists());
    }

    #[test]
    fn a_restore_walk_reaches_a_fifo_under_any_path_length_or_depth_and_removes_it() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        let since = Since::before(std::time::SystemTime::now());
        // Past PATH_MAX: 40 levels of 200 characters.
        chain(top, &"d".repeat(200), 40);
        // Past what the walk holds open: 300 levels.
        chain(top, "e", 300);
        std::fs::write(top.join("touched"), "x").unwrap();
        let walked = walk(top, rules(Purpose::Restore, Some(since)), u64::MAX).unwrap();
        assert!(
            !exists_at_depth(top, &"d".repeat(200), 25),
            "the long path is gone"
        );
        assert!(
            !exists_at_depth(top, "e", 300),
            "the deep chain's FIFO is gone"
        );
        assert!(!top.join("touched").exists());
        assert!(walked
            .removed
            .iter()
            .any(|r| r.why.contains("longer than git")));
        let left: Vec<String> = std::fs::read_dir(top)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        // The deep chain's directories stay for git's clean (untracked); nothing special is
        // left in them.
        assert!(left.iter().all(|n| !n.starts_with(FLATTENED)), "{left:?}");
    }

    #[test]
    fn a_commit_walk_names_paths_git_cannot_hold_and_counts_every_hard_link() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        chain(top, &"d".repeat(200), 25);
        std::fs::File::create(top.join("sparse"))
            .unwrap()
            .set_len(15 << 20)
            .unwrap();
        for n in 0..40 {
            std::fs::hard_link(top.join("sparse"), top.join(format!("link-{n}"))).unwrap();
        }
        let walked = walk(top, rules(Purpose::Commit, None), 1 << 30).unwrap();
        assert_eq!(walked.too_long.len(), 1);
        assert_eq!(walked.bytes_to_read, 41 * (15 << 20));
    }

    #[test]
    fn a_survey_finds_every_repository_however_many_without_entering_them() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        std::fs::create_dir_all(top.join(".git/objects")).unwrap();
        for n in 0..1100 {
            std::fs::create_dir_all(top.join(format!("decoys/{n}/.git"))).unwrap();
        }
        std::fs::create_dir_all(top.join("zz/real.git/objects")).unwrap();
        std::fs::create_dir_all(top.join("zz/real.git/refs")).unwrap();
        std::fs::write(top.join("zz/real.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        let found = walk(top, rules(Purpose::Survey, None), u64::MAX)
            .unwrap()
            .repositories;
        assert_eq!(found.len(), 1102);
        assert_eq!(found[0].path, ".git");
        assert!(found.iter().any(|r| r.path == "zz/real.git"));
    }
}
