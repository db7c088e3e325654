//! Where plugins are looked for, and what is found there — from manifests alone.
//!
//! Nothing here loads a library: listing plugins must never run plugin code.

use crate::error::Concept;
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::manifest::{self, Manifest, ManifestError, MANIFEST_FILE};
use super::trust;
use super::version::api_compatible;

/// Why a directory is on the search path. Earlier sources win.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DirSource {
    /// `--plugins-dir`.
    Flag,
    /// `STET_PLUGINS_DIR`.
    Env,
    /// The user data directory (`~/.local/share/stet/plugins`).
    UserData,
    /// Beside the running executable (`<exe dir>/plugins`, `<exe dir>/../lib/stet/plugins`).
    BesideExecutable,
}

impl DirSource {
    /// How listings name it.
    pub fn word(self) -> &'static str {
        match self {
            DirSource::Flag => "--plugins-dir",
            DirSource::Env => "STET_PLUGINS_DIR",
            DirSource::UserData => "user data directory",
            DirSource::BesideExecutable => "beside the executable",
        }
    }
}

/// No plugin directory at all on the whole search path: what a stet binary copied away
/// from its plugins sees. Names every directory looked in and how to fix it.
pub fn none_found(search_path: &[SearchDir]) -> crate::error::Error {
    let mut error =
        Concept::Plugins.unusable("no plugins found: stet has no runtime and no harness to run");
    for dir in search_path {
        error = error.caused_by(format!(
            "looked in {} ({})",
            dir.path.display(),
            dir.source.word()
        ));
    }
    error.hint(
        "install stet with its plugins (cargo xtask install puts PREFIX/bin/stet and PREFIX/lib/stet/plugins side by side), \
         or name a plugins directory: --plugins-dir DIR or STET_PLUGINS_DIR=DIR",
    )
}

/// One directory on the search path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchDir {
    /// The directory; each plugin is a subdirectory holding a `plugin.toml`.
    pub path: PathBuf,
    /// Why it is searched.
    pub source: DirSource,
}

/// Builds the search path in the order of SPEC §3: flags, then `STET_PLUGINS_DIR` (a path
/// list), then the user data directory, then beside the executable.
pub fn search_path(
    flags: &[PathBuf],
    env: Option<&OsString>,
    user_data: Option<&Path>,
    executable: Option<&Path>,
) -> Vec<SearchDir> {
    let mut dirs: Vec<SearchDir> = Vec::new();
    let mut push = |path: PathBuf, source| {
        if !dirs.iter().any(|d| d.path == path) {
            dirs.push(SearchDir { path, source });
        }
    };
    for dir in flags {
        push(dir.clone(), DirSource::Flag);
    }
    if let Some(list) = env {
        for dir in std::env::split_paths(list).filter(|d| !d.as_os_str().is_empty()) {
            push(dir, DirSource::Env);
        }
    }
    if let Some(dir) = user_data {
        push(dir.to_path_buf(), DirSource::UserData);
    }
    if let Some(exe_dir) = executable.and_then(Path::parent) {
        push(exe_dir.join("plugins"), DirSource::BesideExecutable);
        // `<exe dir>/../lib/stet/plugins`, spelt without `..` so listings read plainly.
        if let Some(prefix) = exe_dir.parent() {
            push(prefix.join("lib/stet/plugins"), DirSource::BesideExecutable);
        }
    }
    dirs
}

/// What `stet plugins list` says about one plugin directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Usable as far as the manifest can tell.
    Ok,
    /// The manifest could not be read or checked.
    ManifestError(ManifestError),
    /// Built for another operating system.
    WrongPlatform,
    /// Built for a plugin API this host cannot load.
    IncompatibleApi,
    /// The manifest names a library that is not there.
    LibraryMissing,
    /// An earlier directory holds a plugin of the same name.
    ShadowedBy(PathBuf),
    /// Its directory, manifest or library can be written by someone else.
    UnsafePermissions(String),
    /// Its library is not the one `stet plugins install` recorded in the lock.
    Untrusted(String),
    /// The directory (or the search directory it is in) cannot be read: permissions, a
    /// symbolic link that loops or points nowhere readable.
    Unreadable(String),
}

impl Status {
    /// The status word shown in listings and JSON.
    pub fn word(&self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::ManifestError(_) => "manifest-error",
            Status::WrongPlatform => "wrong-platform",
            Status::IncompatibleApi => "incompatible-api",
            Status::LibraryMissing => "library-missing",
            Status::ShadowedBy(_) => "shadowed",
            Status::UnsafePermissions(_) => "unsafe-permissions",
            Status::Untrusted(_) => "untrusted",
            Status::Unreadable(_) => "unreadable",
        }
    }
}

/// One plugin directory found on the search path.
#[derive(Debug, Clone)]
pub struct Found {
    /// The plugin's directory.
    pub dir: PathBuf,
    /// Which search directory it was found in.
    pub source: DirSource,
    /// The checked manifest, when it could be read.
    pub manifest: Option<Manifest>,
    /// What the manifest says about its usability.
    pub status: Status,
}

impl Found {
    /// The plugin's name, or its directory's name when the manifest is broken.
    pub fn display_name(&self) -> String {
        match &self.manifest {
            Some(m) => m.name.clone(),
            None => self
                .dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        }
    }

    /// The manifest, if this plugin can be loaded (status ok).
    pub fn usable(&self) -> Option<&Manifest> {
        match self.status {
            Status::Ok => self.manifest.as_ref(),
            _ => None,
        }
    }
}

/// Reads every plugin directory on the search path, in order, and decides each one's
/// status. The first plugin of a name wins; later ones are kept, marked shadowed, so a
/// person can see why their copy is not used.
pub fn discover(search: &[SearchDir], host_api: &semver::Version) -> Vec<Found> {
    let mut found = Vec::new();
    let mut winners: HashMap<String, PathBuf> = HashMap::new();
    // The lock of the user plugins directory (see `trust.rs`); an unreadable lock trusts
    // nothing in that directory.
    let lock = search
        .iter()
        .find(|d| d.source == DirSource::UserData)
        .map(|d| trust::Lock::read(&trust::lock_path(&d.path)));
    for search_dir in search {
        let (dirs, unreadable) = plugin_dirs(&search_dir.path);
        found.extend(unreadable.into_iter().map(|(dir, why)| Found {
            dir,
            source: search_dir.source,
            manifest: None,
            status: Status::Unreadable(why),
        }));
        for dir in dirs {
            let manifest = manifest::read(&dir.join(MANIFEST_FILE));
            let (manifest, status) = match manifest {
                Err(e) => (None, Status::ManifestError(e)),
                Ok(m) => {
                    let status = if let Some(winner) = winners.get(&m.name) {
                        Status::ShadowedBy(winner.clone())
                    } else {
                        winners.insert(m.name.clone(), dir.clone());
                        match status_of(&m, host_api) {
                            Status::Ok => trust_status(
                                &dir,
                                &m,
                                lock.as_ref(),
                                search_dir.source == DirSource::UserData,
                            ),
                            other => other,
                        }
                    };
                    (Some(m), status)
                }
            };
            found.push(Found {
                dir,
                source: search_dir.source,
                manifest,
                status,
            });
        }
    }
    found
}

fn status_of(manifest: &Manifest, host_api: &semver::Version) -> Status {
    if !manifest.runs_here() {
        Status::WrongPlatform
    } else if !api_compatible(&manifest.api, host_api) {
        Status::IncompatibleApi
    } else if !manifest.library.is_file() {
        Status::LibraryMissing
    } else {
        Status::Ok
    }
}

/// Whether a plugin's files may be trusted: permissions first (cheap), then, for a plugin
/// in the user plugins directory or one the lock names, its library's checksum.
fn trust_status(
    dir: &Path,
    manifest: &Manifest,
    lock: Option<&Result<trust::Lock, String>>,
    in_user_dir: bool,
) -> Status {
    if let Some(why) = trust::plugin_permissions(dir, &manifest.path, &manifest.library) {
        return Status::UnsafePermissions(why);
    }
    // The lock speaks for the user plugins directory only: a plugin elsewhere (a
    // --plugins-dir, beside the executable) is trusted as part of that installation, and a
    // development build of an installed plugin is not refused for differing from it.
    if !in_user_dir {
        return Status::Ok;
    }
    match lock {
        Some(Ok(lock)) => {
            match trust::check_locked(lock, &manifest.name, &manifest.library, true) {
                Some(why) => Status::Untrusted(why),
                None => Status::Ok,
            }
        }
        Some(Err(why)) => Status::Untrusted(format!("the lock cannot be read: {why}")),
        None => Status::Ok,
    }
}

/// The subdirectories of `dir` that hold a manifest, sorted by name so that listings and
/// shadowing are the same on every run, and the entries that could not be looked into
/// (with why): reported, never silently skipped. A missing directory holds nothing; an
/// entry without a manifest is not a plugin.
fn plugin_dirs(dir: &Path) -> (Vec<PathBuf>, Vec<(PathBuf, String)>) {
    let mut unreadable = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (Vec::new(), unreadable),
        Err(e) => {
            unreadable.push((
                dir.to_path_buf(),
                format!("the plugins directory cannot be read: {e}"),
            ));
            return (Vec::new(), unreadable);
        }
    };
    let mut dirs = Vec::new();
    for entry in entries {
        let path = match entry {
            Ok(entry) => entry.path(),
            Err(e) => {
                unreadable.push((dir.to_path_buf(), format!("an entry cannot be read: {e}")));
                continue;
            }
        };
        // Hidden directories are an install's staging and previous copies, not plugins.
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        {
            continue;
        }
        // A link that leads nowhere (or in a circle) may be a plugin someone meant to
        // install: said so.
        let is_link = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
        if is_link {
            if let Err(e) = std::fs::metadata(&path) {
                let target = std::fs::read_link(&path).unwrap_or_default();
                unreadable.push((
                    path,
                    format!(
                        "a symbolic link to {} that cannot be followed: {e}",
                        target.display()
                    ),
                ));
                continue;
            }
        }
        match std::fs::metadata(path.join(MANIFEST_FILE)) {
            Ok(meta) if meta.is_file() => dirs.push(path),
            Ok(_) => {}
            // Not a plugin: nothing there, or a file rather than a directory.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) => {}
            Err(e) => unreadable.push((path, format!("cannot be looked into: {e}"))),
        }
    }
    dirs.sort();
    unreadable.sort();
    (dirs, unreadable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symbolic_link_loop_and_an_unreadable_directory_are_reported_not_skipped() {
        let root = tempfile::tempdir().unwrap();
        let plugins = root.path().join("plugins");
        std::fs::create_dir_all(&plugins).unwrap();
        std::os::unix::fs::symlink(plugins.join("loop"), plugins.join("loop")).unwrap();
        std::os::unix::fs::symlink("/nonexistent/elsewhere", plugins.join("dangling")).unwrap();
        std::fs::write(plugins.join("README"), "not a plugin").unwrap();
        let (dirs, unreadable) = plugin_dirs(&plugins);
        assert!(dirs.is_empty());
        assert_eq!(unreadable.len(), 2, "{unreadable:?}");
        assert!(unreadable[0].0.ends_with("dangling"), "{unreadable:?}");
        assert!(
            unreadable[0].1.contains("/nonexistent/elsewhere"),
            "{unreadable:?}"
        );
        assert!(unreadable[1].0.ends_with("loop"), "{unreadable:?}");
        assert!(
            unreadable[1].1.contains("cannot be followed"),
            "{unreadable:?}"
        );
        // A search directory that is a file is unreadable as a directory, and said so.
        let (_, unreadable) = plugin_dirs(&plugins.join("README"));
        assert_eq!(unreadable.len(), 1, "{unreadable:?}");
    }

    fn write_plugin(root: &Path, dir: &str, name: &str, api: &str, with_library: bool) {
        let d = root.join(dir);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join(MANIFEST_FILE),
            format!(
                "name = \"{name}\"\nkind = \"runtime\"\nversion = \"1.0.0\"\napi = \"{api}\"\nlibrary = \"lib.so\"\n"
            ),
        )
        .unwrap();
        if with_library {
            std::fs::write(d.join("lib.so"), b"").unwrap();
        }
    }

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("stet-discovery-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn search_path_follows_the_documented_order() {
        let env = OsString::from("/e1:/e2");
        let dirs = search_path(
            &[PathBuf::from("/f")],
            Some(&env),
            Some(Path::new("/u")),
            Some(Path::new("/x/bin/stet")),
        );
        let paths: Vec<_> = dirs
            .iter()
            .map(|d| d.path.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            paths,
            [
                "/f",
                "/e1",
                "/e2",
                "/u",
                "/x/bin/plugins",
                "/x/lib/stet/plugins"
            ]
        );
    }

    #[test]
    fn statuses_and_shadowing() {
        let a = temp("a");
        let b = temp("b");
        write_plugin(&a, "good", "good", "1.0.0", true);
        write_plugin(&a, "nolib", "nolib", "1.1.0", false);
        write_plugin(&a, "future", "future", "2.0.0", true);
        write_plugin(&b, "good", "good", "1.1.0", true);
        std::fs::create_dir_all(b.join("broken")).unwrap();
        std::fs::write(b.join("broken").join(MANIFEST_FILE), "name = ").unwrap();
        let search = [
            SearchDir {
                path: a.clone(),
                source: DirSource::Flag,
            },
            SearchDir {
                path: b.clone(),
                source: DirSource::Env,
            },
        ];
        let found = discover(&search, &semver::Version::new(1, 1, 0));
        let summary: Vec<(String, &str)> = found
            .iter()
            .map(|f| (f.display_name(), f.status.word()))
            .collect();
        assert_eq!(
            summary,
            [
                ("future".to_string(), "incompatible-api"),
                ("good".to_string(), "ok"),
                ("nolib".to_string(), "library-missing"),
                ("broken".to_string(), "manifest-error"),
                ("good".to_string(), "shadowed"),
            ]
        );
        assert_eq!(found[4].status, Status::ShadowedBy(a.join("good")));
    }
}
