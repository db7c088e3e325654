//! Which repository configuration files the person trusts.
//!
//! `stet.toml` is written by whoever can commit to the repository — an agent's landed
//! branch included. The settings in it that act on the host or widen what a sandbox gets
//! (the land command, the profile, every plugin's table: an agent binary, a model API, an
//! engine address, mounts, the open network) take effect only after the person has trusted
//! that file's exact content with `stet trust`, as direnv and mise do. A changed file is
//! untrusted again until trusted anew. The record is the file's canonical path and the
//! sha256 of the content trusted, kept in the person's configuration directory
//! (`$XDG_CONFIG_HOME/stet/trusted.toml`), where no repository writes. A file `stet init`
//! wrote is recorded as it wrote it: the person's own command chose its content.

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

/// Records `file`'s current `content` as trusted (`revoke`: forgets it). Returns whether
/// the record changed.
pub fn record(store: &Path, file: &Path, content: &[u8], revoke: bool) -> std::io::Result<bool> {
    let mut files = read_store(store);
    let k = key(file);
    let changed = if revoke {
        files.remove(&k).is_some()
    } else {
        let digest = crate::plugins::trust::sha256_bytes(content);
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
        assert!(record(&store, &file, b"a", true).unwrap());
        assert!(!is_trusted(&store, &file, b"a"));
    }
}
