//! Which repository configuration files the person trusts.
//!
//! `stet.toml` is written by whoever can commit to the repository — an agent's landed
//! branch included. The settings in it that act on the host or widen what a sandbox gets
//! (the land command, the profile, every plugin's table: an agent binary, a model API, an
//! engine address, mounts, the open network) take effect only after the person has trusted
//! that file's exact content with `stet trust`, as direnv and mise do. A changed file is
//! untrusted again until trusted anew. The record is the file's canonical path and the
//! sha256 of the content trusted, kept in the person's configuration directory
//! (`$XDG_CONFIG_HOME/stet/trusted.toml`), where no repository writes, and a copy of that
//! content beside it (`trusted/<sha256>`), so `stet trust --diff` can show what changed
//! since. A file `stet init` wrote is recorded as it wrote it: the person's own command
//! chose its content.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the trusted files are recorded.
pub fn store_path(config_dir: &Path) -> PathBuf {
    config_dir.join("stet").join("trusted.toml")
}

/// The person's record: [`store_path`] in their configuration directory.
pub fn persons_store() -> Result<PathBuf, String> {
    etcetera::choose_base_strategy()
        .map(|x| store_path(&etcetera::BaseStrategy::config_dir(&x)))
        .map_err(|e| format!("cannot find your configuration directory: {e}"))
}

/// The trusted files: canonical path → sha256 of the trusted content.
fn read_store(path: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| toml::from_str(&text).ok())
        .unwrap_or_default()
}

/// The key a file is recorded under.
fn key(file: &Path) -> String {
    file.canonicalize()
        .unwrap_or_else(|_| file.to_path_buf())
        .display()
        .to_string()
}

/// Whether `file`, holding `content` now, is trusted.
pub fn is_trusted(store: &Path, file: &Path, content: &[u8]) -> bool {
    read_store(store).get(&key(file)).map(String::as_str)
        == Some(crate::plugins::trust::sha256_bytes(content).as_str())
}

/// Where the copy of the content trusted under `digest` is kept.
fn copy_path(store: &Path, digest: &str) -> PathBuf {
    store.with_file_name("trusted").join(digest)
}

/// The content of `file` as it was when trusted: `None` when it never was (or its copy is
/// gone: trusted by a stet that kept none).
pub fn trusted_content(store: &Path, file: &Path) -> Option<Vec<u8>> {
    let digest = read_store(store).remove(&key(file))?;
    // The store is the person's, but its copies are checked against their names anyway: a
    // copy that is not the content trusted is no record of it.
    let bytes = std::fs::read(copy_path(store, &digest)).ok()?;
    (crate::plugins::trust::sha256_bytes(&bytes) == digest).then_some(bytes)
}

/// Records `file`'s current `content` as trusted (`revoke`: forgets it). Returns whether
/// the record changed.
pub fn record(store: &Path, file: &Path, content: &[u8], revoke: bool) -> std::io::Result<bool> {
    let mut files = read_store(store);
    let k = key(file);
    let before = files.get(&k).cloned();
    let changed = if revoke {
        files.remove(&k).is_some()
    } else {
        let digest = crate::plugins::trust::sha256_bytes(content);
        let copy = copy_path(store, &digest);
        if !copy.is_file() {
            if let Some(dir) = copy.parent() {
                std::fs::create_dir_all(dir)?;
            }
            crate::files::write_durably(&copy, content)?;
        }
        files.insert(k, digest.clone()) != Some(digest)
    };
    if changed {
        let mut text = String::from(
            "# Repository configuration files trusted with `stet trust`: the file's path and the\n\
             # sha256 of the content trusted. A file whose content changed is untrusted again.\n",
        );
        text.push_str(&toml::to_string(&files).map_err(std::io::Error::other)?);
        crate::files::write_durably(store, text.as_bytes())?;
    }
    // The copy of content no file is trusted with any more goes — once the store no longer
    // names it (a store written first would name a copy that is gone).
    if let Some(old) = before.filter(|old| changed && !files.values().any(|d| d == old)) {
        let _ = std::fs::remove_file(copy_path(store, &old));
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_is_for_the_content_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_path(dir.path());
        let file = dir.path().join("stet.toml");
        std::fs::write(&file, "a").unwrap();
        assert!(!is_trusted(&store, &file, b"a"));
        assert!(record(&store, &file, b"a", false).unwrap());
        assert!(!record(&store, &file, b"a", false).unwrap());
        assert!(is_trusted(&store, &file, b"a"));
        assert!(!is_trusted(&store, &file, b"a changed"));
        assert_eq!(trusted_content(&store, &file).as_deref(), Some(&b"a"[..]));
        assert!(record(&store, &file, b"a new", false).unwrap());
        assert_eq!(
            trusted_content(&store, &file).as_deref(),
            Some(&b"a new"[..])
        );
        let old = copy_path(&store, &crate::plugins::trust::sha256_bytes(b"a"));
        assert!(
            !old.exists(),
            "the copy of content no longer trusted is removed"
        );
        assert!(record(&store, &file, b"a", true).unwrap());
        assert!(!is_trusted(&store, &file, b"a"));
        assert_eq!(trusted_content(&store, &file), None);
    }
}
