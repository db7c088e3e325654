//! `stet plugins install` and `stet plugins trust`: putting a plugin into the user plugins
//! directory after checking it, and recording its library's checksum in the lock.
//!
//! Install checks the manifest (as `plugins list` would), the platform and plugin-API
//! version, the permissions of the source, and then loads and probes the library in an
//! isolated child exactly as `plugins probe` does: a library that is not a stet plugin,
//! crashes or hangs is refused before anything is copied. The copy is made beside the
//! destination and renamed into place, so an interrupted install leaves the old plugin or
//! the new one — or, for the instant between its two renames, neither, with the old one kept
//! beside it as `.NAME.old` — never half of one; the lock is written durably after it, one
//! installer at a time.

use std::path::{Path, PathBuf};

use super::discovery::DirSource;
use super::manifest::{self, Manifest, MANIFEST_FILE};
use super::probe::{self, ProbeRequest};
use super::trust::{self, Lock, Locked};
use super::version::{api_compatible, host_api};
use super::PluginSettings;
use crate::error::{Concept, Error};

/// What was installed.
pub struct Installed {
    /// The manifest, as installed.
    pub manifest: Manifest,
    /// Where.
    pub dir: PathBuf,
    /// The library's sha256.
    pub sha256: String,
    /// What its probe said: available, or why not.
    pub probe: String,
}

/// The user plugins directory, where installs go.
pub fn user_dir(settings: &PluginSettings) -> Result<PathBuf, Error> {
    settings
        .search_path
        .iter()
        .find(|d| d.source == DirSource::UserData)
        .map(|d| d.path.clone())
        .ok_or_else(|| {
            Concept::Plugins
                .failure("there is no user data directory to install plugins into")
                .hint("set HOME (or XDG_DATA_HOME) for stet")
        })
}

/// Installs the plugin directory (or manifest) at `source`.
pub fn install(settings: &PluginSettings, source: &Path) -> Result<Installed, Error> {
    let manifest_path = if source.is_dir() {
        source.join(MANIFEST_FILE)
    } else {
        source.to_path_buf()
    };
    if !manifest_path.is_file() {
        return Err(Concept::Plugins
            .usage(format!(
                "{} is not a plugin: there is no {}",
                source.display(),
                manifest_path.display()
            ))
            .hint("give the directory that holds the plugin's plugin.toml and its library"));
    }
    let manifest = manifest::read(&manifest_path).map_err(|e| {
        Concept::Plugins
            .usage(format!("the plugin's manifest is not usable: {e}"))
            .hint("fix the manifest (see docs/plugins.md for its keys)")
    })?;
    if !manifest.runs_here() {
        return Err(Concept::Plugins
            .unusable(format!(
                "{} is built for {}, not {}",
                manifest.name,
                manifest.platforms.join(", "),
                std::env::consts::OS
            ))
            .hint("install the build for this platform"));
    }
    let host = host_api();
    if !api_compatible(&manifest.api, &host) {
        return Err(Concept::Plugins
            .unusable(format!(
                "{} was built for plugin API {}; this stet speaks plugin API {host}",
                manifest.name, manifest.api
            ))
            .hint("install a build of the plugin for this stet's plugin API"));
    }
    if !manifest.library.is_file() {
        return Err(Concept::Plugins
            .usage(format!(
                "the library {} named by {} does not exist",
                manifest.library.display(),
                manifest_path.display()
            ))
            .hint("build the plugin first, or fix `library` in its manifest"));
    }
    let source_dir = manifest_path.parent().unwrap_or(Path::new("."));
    if let Some(why) = trust::plugin_permissions(source_dir, &manifest.path, &manifest.library) {
        return Err(Concept::Plugins
            .usage(format!("refusing to install {}: {why}", manifest.name))
            .hint(
                "whoever can write the library could change what you install: chmod go-w it first",
            ));
    }

    // Load and probe it in an isolated child before copying anything.
    let probed = probe::probe_all(
        vec![ProbeRequest {
            manifest: manifest.clone(),
            config_json: settings.config_json(&manifest.name),
        }],
        &probe::current_stet(),
        settings.probe_timeout,
    )
    .pop()
    .expect("one request, one answer");
    let probe = match &probed.result {
        Ok(report) if report.available => format!("available ({})", report.backend_version),
        Ok(report) => format!("loaded, but its backend is unavailable: {}", report.reason),
        Err(failure) => {
            return Err(Concept::Plugins
                .unusable(format!(
                    "refusing to install {}: it failed its probe",
                    manifest.name
                ))
                .caused_by(failure.summary())
                .hint("run `stet plugins probe` with it on --plugins-dir to see more"))
        }
    };

    let user_dir = user_dir(settings)?;
    let dir = user_dir.join(&manifest.name);
    let library_name = manifest
        .library
        .file_name()
        .expect("a library is a file")
        .to_owned();
    copy_into_place(&manifest_path, &manifest.library, &dir).map_err(|e| {
        Concept::Plugins
            .failure(format!("cannot install into {}", dir.display()))
            .caused_by(e.to_string())
    })?;
    let installed_library = dir.join(&library_name);
    let sha256 = trust::sha256_file(&installed_library).map_err(|e| {
        Concept::Plugins
            .failure(format!("cannot read {}", installed_library.display()))
            .caused_by(e.to_string())
    })?;
    record(
        &user_dir,
        &manifest,
        &library_name.to_string_lossy(),
        &sha256,
    )?;
    let manifest = manifest::read(&dir.join(MANIFEST_FILE)).map_err(|e| {
        Concept::Plugins
            .failure("the installed manifest cannot be read back")
            .caused_by(e.to_string())
    })?;
    Ok(Installed {
        manifest,
        dir,
        sha256,
        probe,
    })
}

/// Records the current checksum of installed plugin `name` in the lock: the command that
/// trusts a library again after it changed.
pub fn trust(settings: &PluginSettings, name: &str) -> Result<Locked, Error> {
    let user_dir = user_dir(settings)?;
    let dir = user_dir.join(name);
    let manifest = manifest::read(&dir.join(MANIFEST_FILE)).map_err(|e| {
        Concept::Plugins
            .usage(format!(
                "no plugin {name} is installed in {}",
                user_dir.display()
            ))
            .caused_by(e.to_string())
            .hint("stet plugins install DIR installs one; stet plugins list shows what is where")
    })?;
    if let Some(why) = trust::plugin_permissions(&dir, &manifest.path, &manifest.library) {
        return Err(Concept::Plugins
            .usage(format!("refusing to trust {name}: {why}"))
            .hint("chmod go-w it first"));
    }
    let sha256 = trust::sha256_file(&manifest.library).map_err(|e| {
        Concept::Plugins
            .failure(format!("cannot read {}", manifest.library.display()))
            .caused_by(e.to_string())
    })?;
    let library = manifest
        .library
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    record(&user_dir, &manifest, &library, &sha256)
}

/// What `uninstall` removed.
pub struct Removed {
    /// The plugin's name.
    pub name: String,
    /// Its version, as its manifest said.
    pub version: String,
    /// The directory it was in.
    pub dir: PathBuf,
}

/// Removes installed plugin `name` from the user plugins directory and its lock entry.
/// The directory is renamed aside first, so an interrupted removal leaves the plugin or a
/// hidden leftover, never half a plugin on the search path.
pub fn uninstall(settings: &PluginSettings, name: &str) -> Result<Removed, Error> {
    let user_dir = user_dir(settings)?;
    let dir = user_dir.join(name);
    let manifest = match manifest::read(&dir.join(MANIFEST_FILE)) {
        Ok(manifest) => manifest,
        Err(e) => {
            let elsewhere = settings
                .search_path
                .iter()
                .map(|d| d.path.join(name))
                .find(|d| d.join(MANIFEST_FILE).is_file());
            let error = Concept::Plugins.usage(format!(
                "no plugin {name} is installed in {}",
                user_dir.display()
            ));
            return Err(match elsewhere {
                Some(other) => error
                    .caused_by(format!(
                        "{name} is in {}, which stet plugins install did not make",
                        other.display()
                    ))
                    .hint(
                        "remove that directory yourself, or take its directory off the search path",
                    ),
                None => error
                    .caused_by(e.to_string())
                    .hint("stet plugins list shows what is installed where"),
            });
        }
    };
    let lock = trust::lock_path(&user_dir);
    let _guard = guard(&lock)?;
    let aside = user_dir.join(format!(".{name}.removing"));
    let _ = std::fs::remove_dir_all(&aside);
    std::fs::rename(&dir, &aside).map_err(|e| {
        Concept::Plugins
            .failure(format!("cannot remove {}", dir.display()))
            .caused_by(e.to_string())
    })?;
    let mut entries = Lock::read(&lock).map_err(|why| {
        Concept::Plugins
            .failure("the plugin lock cannot be read")
            .caused_by(why)
            .hint(format!("fix or remove {}", lock.display()))
    })?;
    if entries.remove(name) {
        entries.write(&lock).map_err(|e| {
            Concept::Plugins
                .failure(format!("cannot write {}", lock.display()))
                .caused_by(e.to_string())
        })?;
    }
    std::fs::remove_dir_all(&aside).map_err(|e| {
        Concept::Plugins
            .failure(format!("cannot remove {}", aside.display()))
            .caused_by(e.to_string())
    })?;
    Ok(Removed {
        name: manifest.name,
        version: manifest.version.to_string(),
        dir,
    })
}

fn record(
    user_dir: &Path,
    manifest: &Manifest,
    library: &str,
    sha256: &str,
) -> Result<Locked, Error> {
    let path = trust::lock_path(user_dir);
    // One installer at a time reads, changes and writes the lock (held until return).
    let _guard = guard(&path)?;
    let mut lock = Lock::read(&path).map_err(|why| {
        Concept::Plugins
            .failure("the plugin lock cannot be read")
            .caused_by(why)
            .hint(format!("fix or remove {}", path.display()))
    })?;
    let entry = Locked {
        name: manifest.name.clone(),
        platform: trust::platform(),
        version: manifest.version.to_string(),
        library: library.to_string(),
        sha256: sha256.to_string(),
    };
    lock.record(entry.clone());
    lock.write(&path).map_err(|e| {
        Concept::Plugins
            .failure(format!("cannot write {}", path.display()))
            .caused_by(e.to_string())
    })?;
    Ok(entry)
}

/// An exclusive lock on `<lock>.guard`, so that two installs never interleave their
/// read-modify-write of the lock file.
fn guard(lock: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, Error> {
    let path = lock.with_extension("lock.guard");
    crate::files::lock_exclusive(&path)
        .map_err(|e| Concept::Plugins.failure(format!("cannot lock {}: {e}", path.display())))
}

/// Copies the manifest and library into `dir` (made beside it, then renamed over it).
fn copy_into_place(manifest: &Path, library: &Path, dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let parent = dir.parent().expect("a plugin directory has a parent");
    std::fs::create_dir_all(parent)?;
    std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o755))?;
    let name = dir.file_name().expect("named").to_string_lossy();
    let staging = parent.join(format!(".{name}.partial"));
    let old = parent.join(format!(".{name}.old"));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir(&staging)?;
    std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o755))?;
    let copy = |from: &Path, mode: u32| -> std::io::Result<()> {
        let to = staging.join(from.file_name().expect("a file"));
        std::fs::copy(from, &to)?;
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode))?;
        std::fs::File::open(&to)?.sync_all()
    };
    copy(manifest, 0o644)?;
    copy(library, 0o755)?;
    let _ = std::fs::remove_dir_all(&old);
    if dir.exists() {
        std::fs::rename(dir, &old)?;
    }
    std::fs::rename(&staging, dir)?;
    let _ = std::fs::remove_dir_all(&old);
    std::fs::File::open(parent)?.sync_all()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::error::Kind;
    use crate::plugins::discovery::SearchDir;

    /// Settings whose user plugins directory is `<root>/user`, after a `--plugins-dir` at
    /// `<root>/flag`.
    fn settings(root: &Path) -> PluginSettings {
        PluginSettings {
            search_path: vec![
                SearchDir {
                    path: root.join("flag"),
                    source: DirSource::Flag,
                },
                SearchDir {
                    path: root.join("user"),
                    source: DirSource::UserData,
                },
            ],
            probe_timeout: std::time::Duration::from_secs(5),
            plugin_config: Default::default(),
            plugin_origin: Default::default(),
            untrusted_tables: Default::default(),
        }
    }

    /// A plugin directory `<parent>/<name>` holding `manifest` and a library that is not one
    /// (nothing here reaches the probe), both private to their owner.
    fn plugin(parent: &Path, name: &str, manifest: &str) -> PathBuf {
        let dir = parent.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.join(MANIFEST_FILE), manifest).unwrap();
        std::fs::write(dir.join("libstet_plugin_x.so"), b"not a library").unwrap();
        for file in [MANIFEST_FILE, "libstet_plugin_x.so"] {
            std::fs::set_permissions(dir.join(file), std::fs::Permissions::from_mode(0o644))
                .unwrap();
        }
        dir
    }

    fn manifest(name: &str, api: &str, platforms: &str) -> String {
        format!(
            "name = \"{name}\"\nkind = \"runtime\"\nversion = \"0.3.0\"\napi = \"{api}\"\n\
             library = \"libstet_plugin_x.so\"\nplatforms = {platforms}\n"
        )
    }

    fn here() -> String {
        format!("[\"{}\"]", std::env::consts::OS)
    }

    fn refusal(settings: &PluginSettings, source: &Path) -> Error {
        match install(settings, source) {
            Ok(installed) => panic!("{} was installed", installed.dir.display()),
            Err(e) => e,
        }
    }

    #[test]
    fn what_is_not_a_plugin_is_refused_before_anything_is_loaded_or_copied() {
        let root = tempfile::tempdir().unwrap();
        let settings = settings(root.path());
        let empty = root.path().join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        let e = refusal(&settings, &empty);
        assert_eq!(e.kind, Kind::Usage);
        assert!(e.message.contains("is not a plugin: there is no"), "{e:?}");

        let bad = plugin(root.path(), "bad", "name = \"Bad Name\"\n");
        let e = refusal(&settings, &bad);
        assert_eq!(e.kind, Kind::Usage);
        assert!(
            e.message.starts_with("the plugin's manifest is not usable"),
            "{e:?}"
        );

        let elsewhere = plugin(
            root.path(),
            "elsewhere",
            &manifest("elsewhere", &host_api().to_string(), "[\"plan9\"]"),
        );
        let e = refusal(&settings, &elsewhere.join(MANIFEST_FILE));
        assert_eq!(e.kind, Kind::Unusable);
        assert_eq!(
            e.message,
            format!("elsewhere is built for plan9, not {}", std::env::consts::OS)
        );

        let future = plugin(
            root.path(),
            "future",
            &manifest("future", "99.0.0", &here()),
        );
        let e = refusal(&settings, &future);
        assert_eq!(e.kind, Kind::Unusable);
        assert_eq!(
            e.message,
            format!(
                "future was built for plugin API 99.0.0; this stet speaks plugin API {}",
                host_api()
            )
        );

        let missing = plugin(
            root.path(),
            "missing",
            &manifest("missing", &host_api().to_string(), &here()),
        );
        std::fs::remove_file(missing.join("libstet_plugin_x.so")).unwrap();
        let e = refusal(&settings, &missing);
        assert_eq!(e.kind, Kind::Usage);
        assert!(e.message.contains("libstet_plugin_x.so named by"), "{e:?}");
        assert!(e.message.ends_with("does not exist"), "{e:?}");

        assert!(
            !root.path().join("user").exists(),
            "nothing was copied for a refused plugin"
        );
    }

    #[test]
    fn a_library_others_can_write_is_refused_naming_it() {
        let root = tempfile::tempdir().unwrap();
        let settings = settings(root.path());
        let source = plugin(
            root.path(),
            "open",
            &manifest("open", &host_api().to_string(), &here()),
        );
        let library = source.join("libstet_plugin_x.so");
        std::fs::set_permissions(&library, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = refusal(&settings, &source);
        assert_eq!(e.kind, Kind::Usage);
        assert_eq!(
            e.message,
            format!(
                "refusing to install open: {} is writable by everyone (mode 666)",
                library.display()
            )
        );
        assert!(!root.path().join("user").exists());
    }

    #[test]
    fn the_copy_replaces_an_old_install_whole_and_leaves_nothing_beside_it() {
        let root = tempfile::tempdir().unwrap();
        let first = plugin(&root.path().join("v1"), "x", "first");
        let second = plugin(&root.path().join("v2"), "x", "second");
        std::fs::write(second.join("libstet_plugin_x.so"), b"second library").unwrap();
        let dest = root.path().join("user/x");
        for source in [&first, &second] {
            copy_into_place(
                &source.join(MANIFEST_FILE),
                &source.join("libstet_plugin_x.so"),
                &dest,
            )
            .unwrap();
        }
        assert_eq!(
            std::fs::read_to_string(dest.join(MANIFEST_FILE)).unwrap(),
            "second"
        );
        assert_eq!(
            std::fs::read(dest.join("libstet_plugin_x.so")).unwrap(),
            b"second library"
        );
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&dest.join(MANIFEST_FILE)), 0o644);
        assert_eq!(mode(&dest.join("libstet_plugin_x.so")), 0o755);
        assert_eq!(mode(&dest), 0o755);
        let mut left: Vec<String> = std::fs::read_dir(root.path().join("user"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["x"], "no .x.partial or .x.old is left");
    }

    #[test]
    fn trust_records_the_current_checksum_and_uninstall_takes_plugin_and_entry_away() {
        let root = tempfile::tempdir().unwrap();
        let settings = settings(root.path());
        let user = root.path().join("user");
        let dir = plugin(&user, "x", &manifest("x", &host_api().to_string(), &here()));
        let locked = trust(&settings, "x").unwrap();
        assert_eq!(locked.name, "x");
        assert_eq!(locked.version, "0.3.0");
        assert_eq!(locked.library, "libstet_plugin_x.so");
        assert_eq!(
            locked.sha256,
            trust::sha256_bytes(b"not a library"),
            "the library's sha256 as it is now"
        );
        let lock = Lock::read(&trust::lock_path(&user)).unwrap();
        assert_eq!(lock.entry("x"), Some(&locked));

        // Rebuilt in place: trusting it again records the new checksum.
        std::fs::write(dir.join("libstet_plugin_x.so"), b"rebuilt").unwrap();
        let again = trust(&settings, "x").unwrap();
        assert_eq!(again.sha256, trust::sha256_bytes(b"rebuilt"));

        let removed = uninstall(&settings, "x").unwrap();
        assert_eq!(
            (removed.name.as_str(), removed.version.as_str()),
            ("x", "0.3.0")
        );
        assert_eq!(removed.dir, dir);
        assert!(!dir.exists());
        assert!(!user.join(".x.removing").exists());
        let lock = Lock::read(&trust::lock_path(&user)).unwrap();
        assert_eq!(lock.entry("x"), None);
    }

    #[test]
    fn uninstall_of_a_plugin_it_did_not_install_says_where_that_one_is() {
        let root = tempfile::tempdir().unwrap();
        let settings = settings(root.path());
        plugin(
            &root.path().join("flag"),
            "x",
            &manifest("x", &host_api().to_string(), &here()),
        );
        let e = match uninstall(&settings, "x") {
            Ok(_) => panic!("a plugin on --plugins-dir was uninstalled"),
            Err(e) => e,
        };
        assert_eq!(e.kind, Kind::Usage);
        assert_eq!(
            e.message,
            format!(
                "no plugin x is installed in {}",
                root.path().join("user").display()
            )
        );
        let text = format!("{e:?}");
        assert!(
            text.contains("which stet plugins install did not make"),
            "{text}"
        );
        assert!(root.path().join("flag/x").exists(), "left alone");

        let e = match trust(&settings, "nothing") {
            Ok(_) => panic!("a plugin that is not there was trusted"),
            Err(e) => e,
        };
        assert_eq!(e.kind, Kind::Usage);
        assert!(
            e.message.starts_with("no plugin nothing is installed in"),
            "{e:?}"
        );
    }

    #[test]
    fn without_a_user_data_directory_there_is_nowhere_to_install() {
        let mut settings = settings(Path::new("/nonexistent"));
        settings
            .search_path
            .retain(|d| d.source != DirSource::UserData);
        let e = user_dir(&settings).unwrap_err();
        assert_eq!(
            e.message,
            "there is no user data directory to install plugins into"
        );
    }
}
