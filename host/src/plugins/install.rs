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
