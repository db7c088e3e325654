//! Who owns what a stet process leaves outside itself while it runs — sandboxes (by a
//! label) and temporary directories (by their names) — made so that a stop at any instant
//! can take it all down, and so that what a killed stet left is recognisably its own and
//! removable once it is gone.
//!
//! - A process is named by its owner token, `<pid>:<start time>` ([`owner_token`]): a pid
//!   alone could be reused by the time a later `stet gc` asks whether the owner still runs.
//! - Every temporary directory stet makes carries its owner in its name
//!   (`stet-<what>-<pid>.<start time>-<random>`), the same owner token its sandboxes carry as
//!   a label: a later stet removes it when that process no longer runs ([`reap_temp_dirs`]),
//!   never one of a live stet, never one whose name it cannot read. The name was chosen over
//!   a lock file inside the directory: it costs no file and no open descriptor per directory,
//!   it cannot be lost by a directory half made, and the start time keeps a reused pid from
//!   passing for the owner.
//! - A [`close`]d process makes no new sandbox or temporary directory: a stop that closes
//!   first and then removes what carries its name removes everything, even what was being
//!   made at that instant (a making in flight finishes before the close returns).
//!
//! A sandbox's own teardown is the sandbox module's (`sandbox/leftovers.rs`); this module
//! needs nothing of a runtime's.

use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::{Duration, Instant};

/// This process, as `<pid>:<start time>`: a pid alone could be reused by the time a later
/// `stet gc` asks whether the owner still runs.
pub fn owner_token(pid: u32) -> Option<String> {
    // Linux: field 22 of /proc/<pid>/stat is the start time in clock ticks since boot.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
    let start = stat.as_deref().and_then(|s| {
        let after_name = &s[s.rfind(')')? + 2..];
        after_name.split_whitespace().nth(19).map(str::to_string)
    });
    match start {
        Some(start) => Some(format!("{pid}:{start}")),
        // Elsewhere the pid is all there is; a live pid is taken as the owner.
        None if cfg!(target_os = "linux") => None,
        None => Some(format!("{pid}:")),
    }
}

/// Whether the process named by an owner token still runs.
pub fn owner_alive(token: &str) -> bool {
    let Some((pid, start)) = token.split_once(':') else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    let exists = match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None) {
        Ok(()) => true,
        Err(errno) => errno == nix::errno::Errno::EPERM,
    };
    if !exists {
        return false;
    }
    // With a start time, the pid must still belong to the same process.
    start.is_empty() || owner_token(pid).as_deref() == Some(token)
}

/// `true` once this process is closing: nothing new is made.
static CLOSED: RwLock<bool> = RwLock::new(false);

/// Held while a sandbox or a temporary directory is being made; `None` once closed.
pub struct Making(#[allow(dead_code)] std::sync::RwLockReadGuard<'static, bool>);

/// Leave to make something that a stop must find; `None` when the process is closing.
pub fn making() -> Option<Making> {
    let guard = CLOSED.read().unwrap_or_else(|p| p.into_inner());
    (!*guard).then_some(Making(guard))
}

/// Closes this process to new sandboxes and temporary directories, waiting up to `within`
/// for one being made now; returns whether every making in flight ended.
pub fn close(within: Duration) -> bool {
    let until = Instant::now() + within;
    loop {
        match CLOSED.try_write() {
            Ok(mut closed) => {
                *closed = true;
                return true;
            }
            Err(std::sync::TryLockError::Poisoned(p)) => {
                *p.into_inner() = true;
                return true;
            }
            Err(std::sync::TryLockError::WouldBlock) if Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(std::sync::TryLockError::WouldBlock) => return false,
        }
    }
}

/// This process's owner token as a file name carries it (`:` is not portable there).
fn own_mark() -> String {
    owner_token(std::process::id())
        .unwrap_or_else(|| format!("{}:", std::process::id()))
        .replace(':', ".")
}

/// A temporary directory `<prefix><pid>.<start time>-<random>` under the temporary
/// directory, removed when dropped; refused once the process is closing.
pub fn temp_dir(prefix: &str) -> std::io::Result<tempfile::TempDir> {
    let _making = making()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::Interrupted, "stet is stopping"))?;
    tempfile::Builder::new()
        .prefix(&format!("{prefix}{}-", own_mark()))
        .tempdir()
}

/// The owner token a temporary directory's name carries, when it is one of stet's:
/// `stet-…-<pid>.<start>-<random>`.
fn owner_of(name: &str) -> Option<String> {
    let rest = name.strip_prefix("stet-")?;
    let segments: Vec<&str> = rest.split('-').collect();
    // The owner is the segment before the random tail, after at least one word.
    let (_, before_tail) = segments.split_last()?;
    let (owner, words) = before_tail.split_last()?;
    if words.is_empty() {
        return None;
    }
    let (pid, start) = owner.split_once('.')?;
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    (!pid.is_empty() && digits(pid) && digits(start)).then(|| format!("{pid}:{start}"))
}

/// A temporary directory of stet's that was removed.
#[derive(Debug, Clone)]
pub struct RemovedTemp {
    /// Where it was.
    pub path: PathBuf,
    /// Its size.
    pub bytes: u64,
}

/// Removes the temporary directories under `root` (the system's temporary directory when
/// `None`) whose stet process `alive` says is gone — or, with `only_mine`, this process's
/// own. Only directories this user owns, named as [`temp_dir`] names them. A dry run
/// lists them only.
pub fn reap_temp_dirs(
    root: Option<&Path>,
    only_mine: bool,
    alive: impl Fn(&str) -> bool,
    dry_run: bool,
) -> Vec<RemovedTemp> {
    use std::os::unix::fs::MetadataExt;
    let root = root
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir);
    let Ok(entries) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    let me = nix::unistd::geteuid().as_raw();
    let mine = own_mark().replace('.', ":");
    let mut removed = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(owner) = owner_of(&name) else {
            continue;
        };
        let wanted = if only_mine {
            owner == mine
        } else {
            owner != mine && !alive(&owner)
        };
        // Not followed: a link is never a directory of ours.
        let ours = entry
            .path()
            .symlink_metadata()
            .is_ok_and(|m| m.is_dir() && m.uid() == me);
        if !wanted || !ours {
            continue;
        }
        let path = entry.path();
        let bytes = crate::files::tree_size(&path, u64::MAX);
        if dry_run || std::fs::remove_dir_all(&path).is_ok() || !path.exists() {
            removed.push(RemovedTemp { path, bytes });
        }
    }
    removed
}

/// Removes (or, in a dry run, lists) the temporary directories of stet processes that are
/// gone: the next drive, `stet gc` and `stet clean` do.
pub fn reap_dead_temp_dirs(dry_run: bool) -> Vec<RemovedTemp> {
    reap_temp_dirs(None, false, owner_alive, dry_run)
}

/// Removes this process's own temporary directories, for a stop: other threads may still
/// be writing into one (a scratch lane being laid out, a call's end being written) and
/// make a path again, so passes repeat until two in a row, 50 ms apart, find nothing, for
/// at most about a second. A stop calls it once more just before the process exits, for
/// what a thread made in between; what still outlives that, the next stet removes (its
/// owner is gone: [`reap_dead_temp_dirs`]).
pub fn remove_own_temp_dirs() {
    let mut quiet = 0;
    for _ in 0..20 {
        if reap_temp_dirs(None, true, |_| true, false).is_empty() {
            quiet += 1;
            if quiet == 2 {
                return;
            }
        } else {
            quiet = 0;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temp_dir_names_its_owner_and_only_a_gone_owners_is_reaped() {
        let dir = temp_dir("stet-call-profile-").unwrap();
        let name = dir
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let mine = owner_token(std::process::id()).unwrap();
        assert_eq!(owner_of(&name).as_deref(), Some(mine.as_str()), "{name}");
        assert_eq!(
            owner_of("stet-proof-4194999.12-AbC123").as_deref(),
            Some("4194999:12")
        );
        // Not ours, or not named by an owner: never touched.
        for name in [
            "stet-proof-XyZ",
            "other-1.2-abc",
            "stet-1.2-abc",
            "stet-proof-.1-x",
        ] {
            assert_eq!(owner_of(name), None, "{name}");
        }
        let root = tempfile::tempdir().unwrap();
        let gone = root.path().join("stet-proof-4194999.12-AbC123");
        let live = root.path().join("stet-proof-4194998.12-AbC123");
        let foreign = root.path().join("stet-proof-AbC123");
        for d in [&gone, &live, &foreign] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("f"), "x").unwrap();
        }
        let removed = reap_temp_dirs(Some(root.path()), false, |o| o == "4194998:12", false);
        assert_eq!(removed.len(), 1);
        assert_eq!(removed[0].path, gone);
        assert!(!gone.exists() && live.exists() && foreign.exists());
        // This process's own is left to it, unless it asks.
        let own = root
            .path()
            .join(format!("stet-proof-{}-AbC123", own_mark()));
        std::fs::create_dir(&own).unwrap();
        assert!(reap_temp_dirs(Some(root.path()), false, |_| false, false)
            .iter()
            .all(|r| r.path != own));
        let removed = reap_temp_dirs(Some(root.path()), true, |_| true, false);
        assert_eq!(removed.len(), 1);
        assert!(!own.exists());
    }

    /// A profile copy is mounted in the agent's sandbox: what the agent planted there —
    /// links to the host's files and directories, at the top as the directory itself — is
    /// removed as links; nothing they point to is read into the size or removed.
    #[test]
    fn reaping_a_dead_stets_directory_follows_no_link_an_agent_planted_in_it() {
        let root = tempfile::tempdir().unwrap();
        let host = tempfile::tempdir().unwrap();
        let secret = host.path().join("secret");
        std::fs::write(&secret, "x".repeat(1 << 20)).unwrap();
        let kept_dir = host.path().join("dir");
        std::fs::create_dir(&kept_dir).unwrap();
        std::fs::write(kept_dir.join("f"), "kept").unwrap();
        let copy = root.path().join("stet-call-profile-4194999.12-AbC123");
        std::fs::create_dir(&copy).unwrap();
        std::os::unix::fs::symlink(&secret, copy.join("to-a-file")).unwrap();
        std::os::unix::fs::symlink(&kept_dir, copy.join("to-a-dir")).unwrap();
        // A link named as one of stet's directories, at the top: not a directory of ours.
        let named_link = root.path().join("stet-proof-4194999.12-XyZ987");
        std::os::unix::fs::symlink(&kept_dir, &named_link).unwrap();
        let removed = reap_temp_dirs(Some(root.path()), false, |_| false, false);
        assert_eq!(removed.len(), 1, "{removed:?}");
        assert_eq!(removed[0].path, copy);
        assert!(
            removed[0].bytes < 1 << 20,
            "a link's target was counted: {removed:?}"
        );
        assert!(!copy.exists());
        assert_eq!(std::fs::read(&secret).unwrap().len(), 1 << 20);
        assert_eq!(std::fs::read_to_string(kept_dir.join("f")).unwrap(), "kept");
        assert!(
            named_link.symlink_metadata().is_ok(),
            "the top-level link is left alone"
        );
    }
}
