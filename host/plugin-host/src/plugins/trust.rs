//! Whether an installed plugin may be trusted: who can write it, and whether it is still
//! the library that was installed.
//!
//! - **Permissions.** A plugin directory, manifest or library that someone other than its
//!   owner can write (group or other write bits), or that is owned by neither the person
//!   running stet nor root, is refused — as ssh refuses a key others can write: whoever can
//!   write the library runs code as you.
//! - **The lock.** `stet plugins install` records each library's sha256, per plugin and
//!   platform, in `plugins.lock` beside the user plugins directory
//!   (`$XDG_DATA_HOME/stet/plugins.lock`). A plugin in the user plugins directory whose
//!   library no longer has that checksum, or that was never installed through stet, is
//!   refused, naming the command that trusts it again. Plugins found elsewhere (a
//!   `--plugins-dir`, `STET_PLUGINS_DIR`, beside the executable) are trusted as part of that
//!   installation; the lock does not speak for them.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The lock file's name, beside the user plugins directory.
pub const LOCK_FILE: &str = "plugins.lock";

/// One installed library.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Locked {
    /// The plugin's name.
    pub name: String,
    /// The platform it was installed for (`linux-x86_64`).
    pub platform: String,
    /// Its version when installed.
    pub version: String,
    /// The library's file name.
    pub library: String,
    /// The library's sha256, lowercase hex.
    pub sha256: String,
}

/// The lock file: what was installed, with checksums.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    /// One entry per plugin and platform.
    #[serde(default, rename = "plugin")]
    pub plugins: Vec<Locked>,
}

/// This machine's platform as the lock names it.
pub fn platform() -> String {
    format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH)
}

/// Where the lock of a user plugins directory lives.
pub fn lock_path(user_plugins: &Path) -> PathBuf {
    user_plugins
        .parent()
        .unwrap_or(user_plugins)
        .join(LOCK_FILE)
}

impl Lock {
    /// Reads the lock; a missing file is an empty lock.
    pub fn read(path: &Path) -> Result<Lock, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Lock::default()),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// Writes the lock durably.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let mut text = String::from(
            "# Written by `stet plugins install`: the sha256 of each installed plugin library.\n\
             # A library that no longer matches is refused; `stet plugins trust NAME` records it again.\n\n",
        );
        text.push_str(&toml::to_string_pretty(self).map_err(std::io::Error::other)?);
        crate::files::write_durably(path, text.as_bytes())
    }

    /// The entry of `name` on this platform.
    pub fn entry(&self, name: &str) -> Option<&Locked> {
        let here = platform();
        self.plugins
            .iter()
            .find(|l| l.name == name && l.platform == here)
    }

    /// Forgets `name` on this platform; whether there was an entry.
    pub fn remove(&mut self, name: &str) -> bool {
        let here = platform();
        let before = self.plugins.len();
        self.plugins
            .retain(|l| !(l.name == name && l.platform == here));
        self.plugins.len() != before
    }

    /// Records `entry`, replacing the one of the same plugin and platform.
    pub fn record(&mut self, entry: Locked) {
        self.plugins
            .retain(|l| !(l.name == entry.name && l.platform == entry.platform));
        self.plugins.push(entry);
        self.plugins
            .sort_by(|a, b| (&a.name, &a.platform).cmp(&(&b.name, &b.platform)));
    }
}

/// The sha256 of some bytes, lowercase hex.
pub fn sha256_bytes(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The sha256 of a file, lowercase hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// A file's identity on disk: its path, device, inode, size, modification and change
/// times. Any write changes the change time, which no one but root can set back.
pub fn file_identity(path: &Path) -> std::io::Result<String> {
    let meta = std::fs::metadata(path)?;
    Ok(format!(
        "{}:{}:{}:{}:{}.{}:{}.{}",
        path.display(),
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
    ))
}

/// The sha256 of a file, remembered by its identity on disk (device, inode, size,
/// modification and change times — what git's index trusts too), so that listing and
/// probing do not hash every library every time. Any write to the file changes its change
/// time, which no one but root can set back, so a changed library is hashed again.
pub fn sha256_cached(path: &Path) -> std::io::Result<String> {
    let key = file_identity(path)?;
    let cache = cache_file();
    let mut known: std::collections::BTreeMap<String, String> = cache
        .as_ref()
        .and_then(|c| std::fs::read(c).ok())
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    if let Some(sum) = known.get(&key) {
        return Ok(sum.clone());
    }
    let sum = sha256_file(path)?;
    if let Some(cache) = cache {
        // Entries of the same path under an older identity are dropped.
        let prefix = format!("{}:", path.display());
        known.retain(|k, _| !k.starts_with(&prefix));
        known.insert(key, sum.clone());
        if let Ok(json) = serde_json::to_vec(&known) {
            let _ = std::fs::create_dir_all(cache.parent().expect("in a directory"));
            let partial = cache.with_extension(format!("partial-{}", std::process::id()));
            if std::fs::write(&partial, json).is_ok() {
                let _ = std::fs::rename(&partial, &cache);
            }
        }
    }
    Ok(sum)
}

fn cache_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("stet/library-sha256.json"))
}

/// Why `path` may not be trusted as part of a plugin, if it may not: writable by group or
/// others, or owned by someone who is neither this user nor root.
pub fn unsafe_permissions(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    let me = nix::unistd::getuid().as_raw();
    if meta.uid() != me && meta.uid() != 0 {
        return Some(format!(
            "{} is owned by uid {}, not by you (uid {me}) or root",
            path.display(),
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Some(format!(
            "{} is writable by {} (mode {:o})",
            path.display(),
            if meta.mode() & 0o002 != 0 {
                "everyone"
            } else {
                "its group"
            },
            meta.mode() & 0o7777
        ));
    }
    None
}

/// The first reason a plugin's files may not be trusted: its directory, its manifest or
/// its library.
pub fn plugin_permissions(dir: &Path, manifest: &Path, library: &Path) -> Option<String> {
    [dir, manifest, library]
        .into_iter()
        .find_map(unsafe_permissions)
}

/// Whether the library of plugin `name` at `library` is the one the lock recorded. `None`
/// when it is; otherwise why not (the caller adds the remedy).
pub fn check_locked(lock: &Lock, name: &str, library: &Path, required: bool) -> Option<String> {
    let Some(entry) = lock.entry(name) else {
        return required.then(|| {
            format!(
                "{} was not installed through `stet plugins install` (no entry in the lock)",
                library.display()
            )
        });
    };
    match sha256_cached(library) {
        Ok(sum) if sum == entry.sha256 => None,
        Ok(sum) => Some(format!(
            "{} changed since it was installed: its sha256 is {}, the lock says {}",
            library.display(),
            short(&sum),
            short(&entry.sha256)
        )),
        Err(e) => Some(format!("{} cannot be read: {e}", library.display())),
    }
}

fn short(sum: &str) -> &str {
    &sum[..sum.len().min(16)]
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn the_lock_round_trips_and_replaces_an_entry() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        let mut lock = Lock::read(&path).unwrap();
        assert!(lock.plugins.is_empty());
        let entry = |sum: &str| Locked {
            name: "bubblewrap".into(),
            platform: platform(),
            version: "0.1.0".into(),
            library: "libx.so".into(),
            sha256: sum.into(),
        };
        lock.record(entry("aa"));
        lock.record(entry("bb"));
        lock.write(&path).unwrap();
        let read = Lock::read(&path).unwrap();
        assert_eq!(read.plugins.len(), 1);
        assert_eq!(read.entry("bubblewrap").unwrap().sha256, "bb");
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .contains("stet plugins trust"));
    }

    #[test]
    fn a_changed_library_and_an_unlocked_one_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let library = dir.path().join("lib.so");
        std::fs::write(&library, b"one").unwrap();
        let mut lock = Lock::default();
        assert!(check_locked(&lock, "p", &library, false).is_none());
        assert!(check_locked(&lock, "p", &library, true)
            .unwrap()
            .contains("not installed through"));
        lock.record(Locked {
            name: "p".into(),
            platform: platform(),
            version: "1".into(),
            library: "lib.so".into(),
            sha256: sha256_file(&library).unwrap(),
        });
        assert!(check_locked(&lock, "p", &library, true).is_none());
        std::fs::write(&library, b"two").unwrap();
        assert!(check_locked(&lock, "p", &library, true)
            .unwrap()
            .contains("changed since it was installed"));
    }

    #[test]
    fn files_others_can_write_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("lib.so");
        std::fs::write(&file, b"x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(unsafe_permissions(&file), None);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o664)).unwrap();
        assert!(unsafe_permissions(&file).unwrap().contains("its group"));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o646)).unwrap();
        assert!(unsafe_permissions(&file).unwrap().contains("everyone"));
    }
}
