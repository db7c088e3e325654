//! A short memory of probes that said "available", so that `stet run` (and every command
//! that selects a plugin) need not start a probe child each time.
//!
//! An answer is reused only for the very same library file (its identity on disk: device,
//! inode, size, modification and change times — any write changes the change time), the
//! very same stet binary (by the same identity), the same manifest, the same settings and
//! the same environment (a plugin may read its engine's address from it, `DOCKER_HOST`;
//! the working directory and the shell's bookkeeping aside), and for [`FRESH`] at most. Only answers that said available are kept: a backend that
//! was down is asked again at once. `stet plugins probe` never reads it: it is the command
//! that asks. A backend that went away within the window fails at its first use with the
//! plugin's own error, as it would have a moment after any probe.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Probe;
use crate::plugins::loader::Identity;

/// How long an answer is reused.
pub const FRESH: Duration = Duration::from_secs(30);

/// The most entries kept (one per plugin and settings, in practice a handful).
const MAX_ENTRIES: usize = 64;

/// A remembered answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    /// What the entry is for (see [`key`]).
    key: String,
    /// When the probe answered, in milliseconds since the epoch.
    at_unix_ms: u64,
    /// The answer.
    pub identity: Identity,
    /// The interface version used.
    pub interface: String,
    /// The probe's report.
    pub probe: Probe,
}

impl Entry {
    /// How long ago the probe answered.
    pub fn age(&self) -> Duration {
        Duration::from_millis(now_ms().saturating_sub(self.at_unix_ms))
    }
}

/// The file's identity on disk (`trust::file_identity`), or `None` when it cannot be read.
fn identity_of(path: &Path) -> Option<String> {
    crate::plugins::trust::file_identity(path).ok()
}

/// What an answer is for: the library, the manifest, the settings and the probing stet.
pub fn key(manifest: &Path, library: &Path, config_json: &str, stet: &Path) -> Option<String> {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    let mut environment: Vec<String> = std::env::vars_os()
        .filter(|(k, _)| {
            !matches!(
                k.to_str(),
                Some("PWD" | "OLDPWD" | "SHLVL" | "_" | "COLUMNS" | "LINES")
            )
        })
        .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
        .collect();
    environment.sort();
    for part in [
        identity_of(manifest)?,
        identity_of(library)?,
        config_json.to_string(),
        identity_of(stet)?,
        environment.join("\0"),
    ] {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    Some(
        hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    )
}

fn file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("stet/probes.json"))
}

use crate::timestamp::now_ms;

fn read_all(path: &Path) -> Vec<Entry> {
    crate::files::read_untrusted(path, 1 << 20)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// The fresh answer for `key`, if there is one.
pub fn get(key: &str) -> Option<Entry> {
    let path = file()?;
    read_all(&path)
        .into_iter()
        .find(|e| e.key == key && e.age() < FRESH && e.probe.available)
}

/// Remembers an answer that said available (others are not kept). Best effort: a cache
/// that cannot be written only means the next command probes again.
pub fn put(key: String, identity: Identity, interface: String, probe: Probe) {
    if !probe.available {
        return;
    }
    let Some(path) = file() else {
        return;
    };
    let mut entries: Vec<Entry> = read_all(&path)
        .into_iter()
        .filter(|e| e.key != key && e.age() < FRESH)
        .collect();
    entries.push(Entry {
        key,
        at_unix_ms: now_ms(),
        identity,
        interface,
        probe,
    });
    let skip = entries.len().saturating_sub(MAX_ENTRIES);
    let entries = &entries[skip..];
    let Ok(text) = serde_json::to_vec(entries) else {
        return;
    };
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // A new file renamed over the old: a reader sees one whole file or the other.
    let staged = path.with_extension(format!("json.{}", std::process::id()));
    if std::fs::write(&staged, text).is_ok() && std::fs::rename(&staged, &path).is_err() {
        let _ = std::fs::remove_file(&staged);
    }
}
