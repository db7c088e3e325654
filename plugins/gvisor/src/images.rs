//! Images, for a sandbox tool with no image store: root file systems on the host.
//!
//! runsc runs a sandbox from a directory holding its root file system. The images are the
//! ones every other runtime of stet's uses — the lane image, a person's own toolchain
//! image — built into Docker's local store (`docker build`, `scripts/build-image.sh`). The
//! first sandbox of an image unpacks it: `docker export` of a container created (never
//! started) from the image streams its flattened file system, which is unpacked into the
//! cache under the image's id — `<cache>/<id>/rootfs` — and shared, read-only, by every
//! sandbox of that image from then on. A new build of the image is a new id, unpacked on
//! first use; the image name alone never reuses an old file system.
//!
//! The unpack goes into a private directory beside the cache and is renamed into place
//! whole, so two stet processes unpacking at once each finish theirs and one wins, and a
//! crash mid-unpack leaves only a `.partial-*` directory that the next unpack of any image
//! removes.
//!
//! Where there is no Docker, `[plugins.gvisor] images` maps names to directories holding a
//! root file system (`debootstrap`, `mmdebstrap`, an unpacked OCI layer).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use stet_plugin_api::{ImageStatus, PluginError};
use stet_plugin_support::command::{find, run_bounded};

/// How long a look-up in Docker's store may take.
const LOOKUP_LIMIT: Duration = Duration::from_secs(30);

/// Where images come from and where they are unpacked.
#[derive(Debug, Clone)]
pub struct Images {
    /// The docker CLI, when configured (else `docker` on PATH, looked up when needed).
    pub docker: Option<PathBuf>,
    /// The cache of unpacked images.
    pub cache: PathBuf,
    /// Names mapped to root file systems by the person.
    pub mapped: BTreeMap<String, PathBuf>,
}

/// What it takes to make an image usable here.
fn remedy(name: &str) -> String {
    format!(
        "build or load {name} into Docker's local store (`docker build -t {name} …` or \
         `docker load -i …`; stet never pulls images): the gvisor runtime unpacks it from \
         there on first use. Without Docker, map it to a root file system with \
         [plugins.gvisor] images = {{ \"{name}\" = \"/srv/rootfs/x\" }}"
    )
}

fn holds_rootfs(dir: &Path) -> bool {
    dir.join("usr").is_dir() || dir.join("bin").is_dir()
}

impl Images {
    /// Checks the configured mapping: absolute paths.
    pub fn check_config(mapped: &BTreeMap<String, PathBuf>) -> Result<(), PluginError> {
        for (name, dir) in mapped {
            if !dir.is_absolute() {
                return Err(PluginError::invalid_input(format!(
                    "[plugins.gvisor] images maps {name} to {}, which is not an absolute path",
                    dir.display()
                )));
            }
        }
        Ok(())
    }

    fn docker(&self) -> Result<PathBuf, String> {
        find("docker", self.docker.as_deref(), "[plugins.gvisor] docker")
    }

    /// The image's id in Docker's store (`sha256:…`); `None` when Docker does not have it.
    fn docker_id(&self, name: &str) -> Result<Option<String>, PluginError> {
        let docker = self.docker().map_err(|why| {
            PluginError::not_found(format!(
                "image {name} is not mapped to a root file system, and Docker's store cannot be read: {why}"
            ))
            .with_remedy(remedy(name))
        })?;
        let mut command = Command::new(docker);
        command
            .args(["image", "inspect", "--format", "{{.Id}}", "--", name])
            .env_clear()
            .envs(docker_env());
        let ran = run_bounded(command, LOOKUP_LIMIT).map_err(|why| {
            PluginError::backend(format!("could not look up image {name} in Docker: {why}"))
        })?;
        if !ran.success() {
            if ran.stderr.to_lowercase().contains("no such image") {
                return Ok(None);
            }
            return Err(PluginError::backend(format!(
                "could not look up image {name} in Docker: {}",
                ran.why()
            )));
        }
        let id = ran.stdout.trim().to_string();
        let hex = id.strip_prefix("sha256:").unwrap_or(&id);
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(PluginError::backend(format!(
                "Docker answered {id:?} as the id of {name}, which is not an image id"
            )));
        }
        Ok(Some(id))
    }

    /// Whether `name` can be used, and if not how to get it.
    pub fn status(&self, name: &str) -> Result<ImageStatus, PluginError> {
        if let Some(dir) = self.mapped.get(name) {
            return Ok(ImageStatus {
                present: holds_rootfs(dir),
                remedy: if holds_rootfs(dir) {
                    "".into()
                } else {
                    format!(
                        "[plugins.gvisor] images maps {name} to {}, which holds no root file system (no usr or bin in it)",
                        dir.display()
                    )
                    .into()
                },
            });
        }
        let present = matches!(self.docker_id(name), Ok(Some(_)));
        Ok(ImageStatus {
            present,
            remedy: if present {
                "".into()
            } else {
                remedy(name).into()
            },
        })
    }

    /// The root file system of image `name`, unpacked now when this id never was.
    pub fn rootfs(&self, name: &str) -> Result<PathBuf, PluginError> {
        if let Some(dir) = self.mapped.get(name) {
            if !holds_rootfs(dir) {
                return Err(PluginError::not_found(format!(
                    "image {name} maps to {}, which does not hold a root file system (no usr or bin in it)",
                    dir.display()
                ))
                .with_remedy(remedy(name)));
            }
            return Ok(dir.clone());
        }
        let Some(id) = self.docker_id(name)? else {
            return Err(PluginError::not_found(format!(
                "image {name} is not in Docker's local store"
            ))
            .with_remedy(remedy(name)));
        };
        let hex = id.trim_start_matches("sha256:");
        let unpacked = self.cache.join(hex);
        if unpacked.join("rootfs").is_dir() {
            return Ok(unpacked.join("rootfs"));
        }
        self.unpack(name, &id, &unpacked)?;
        Ok(unpacked.join("rootfs"))
    }

    /// Unpacks image `id` (called `name`) into `target`, whole or not at all.
    fn unpack(&self, name: &str, id: &str, target: &Path) -> Result<(), PluginError> {
        let fail = |what: String| {
            PluginError::backend(format!("could not unpack image {name} ({id}): {what}"))
        };
        stet_plugin_support::records::create_private_dir(&self.cache)
            .map_err(|e| fail(format!("cannot make {}: {e}", self.cache.display())))?;
        self.remove_stale_partials();
        let partial = self.cache.join(format!(
            ".partial-{}-{}",
            std::process::id(),
            stet_plugin_support::records::new_id("u")
        ));
        std::fs::create_dir(&partial).map_err(|e| fail(e.to_string()))?;
        let unpacked = self.export_into(id, &partial.join("rootfs"));
        let result = unpacked.and_then(|bytes| {
            let about = serde_json::json!({"image": name, "id": id, "bytes": bytes,
                                           "unpacked": stet_plugin_support::records::now_secs()});
            std::fs::write(partial.join("image.json"), about.to_string())
                .map_err(|e| e.to_string())?;
            // World-readable: the sandbox's own processes read it through runsc's gofer.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| e.to_string())?;
            match std::fs::rename(&partial, target) {
                Ok(()) => Ok(()),
                // Another process unpacked the same id first: theirs stands.
                Err(_) if target.join("rootfs").is_dir() => {
                    let _ = stet_plugin_support::records::remove_tree(&partial);
                    Ok(())
                }
                Err(e) => Err(format!("cannot move it into place: {e}")),
            }
        });
        if result.is_err() {
            let _ = stet_plugin_support::records::remove_tree(&partial);
        }
        result.map_err(fail)
    }

    /// `docker export` of a container created (never started) from image `id`, unpacked
    /// into `rootfs`; the container is removed whatever happens. Returns the bytes read.
    fn export_into(&self, id: &str, rootfs: &Path) -> Result<u64, String> {
        let docker = self.docker()?;
        let docker_command = |args: &[&str]| {
            let mut command = Command::new(&docker);
            command.args(args).env_clear().envs(docker_env());
            command
        };
        // The command is never run; an image without a default one needs some to be created.
        let created = run_bounded(
            docker_command(&[
                "create",
                "--network",
                "none",
                "--label",
                "stet.gvisor.unpack=1",
                id,
                "/stet-never-run",
            ]),
            LOOKUP_LIMIT,
        )?;
        if !created.success() {
            return Err(format!("docker create: {}", created.why()));
        }
        let container = created.stdout.trim().to_string();
        let exported = (|| {
            let mut child = docker_command(&["export", &container])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("docker export: {e}"))?;
            let stdout = child.stdout.take().ok_or("docker export: no output")?;
            let mut counted = Counted {
                inner: stdout,
                bytes: 0,
            };
            let unpacked = {
                let mut archive = tar::Archive::new(&mut counted);
                archive.set_preserve_permissions(true);
                archive.set_preserve_mtime(true);
                archive.set_preserve_ownerships(stet_plugin_support::current_ids().0 == 0);
                archive.set_overwrite(true);
                archive.unpack(rootfs)
            };
            // Whatever the unpack did, read the stream to its end so docker can exit.
            let _ = std::io::copy(&mut counted, &mut std::io::sink());
            let out = child.wait_with_output().map_err(|e| e.to_string())?;
            if !out.status.success() {
                return Err(format!(
                    "docker export: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            unpacked.map_err(|e| format!("unpacking docker export's stream: {e}"))?;
            Ok(counted.bytes)
        })();
        let _ = run_bounded(docker_command(&["rm", "--force", &container]), LOOKUP_LIMIT);
        exported
    }

    /// Removes what a crash left of an unpack (older than an hour: never one in progress).
    fn remove_stale_partials(&self) {
        let Ok(entries) = std::fs::read_dir(&self.cache) else {
            return;
        };
        for entry in entries.filter_map(Result::ok) {
            let stale = entry.file_name().to_string_lossy().starts_with(".partial-")
                && entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > Duration::from_secs(3600));
            if stale {
                let _ = stet_plugin_support::records::remove_tree(&entry.path());
            }
        }
    }
}

/// What the docker CLI needs from stet's own environment: where the engine is and the
/// CLI's own configuration, nothing else.
fn docker_env() -> Vec<(String, String)> {
    [
        "DOCKER_HOST",
        "DOCKER_CONTEXT",
        "DOCKER_CONFIG",
        "HOME",
        "PATH",
    ]
    .iter()
    .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
    .collect()
}

/// A reader that counts what passed through it.
struct Counted<R> {
    inner: R,
    bytes: u64,
}

impl<R: std::io::Read> std::io::Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn images(mapped: BTreeMap<String, PathBuf>) -> Images {
        Images {
            docker: Some(PathBuf::from("/nonexistent/docker")),
            cache: PathBuf::from("/nonexistent/cache"),
            mapped,
        }
    }

    #[test]
    fn a_mapped_directory_is_used_as_it_is_and_must_hold_a_root_file_system() {
        let rootfs = tempfile::tempdir().unwrap();
        let mut mapped = BTreeMap::new();
        mapped.insert("lane".to_string(), rootfs.path().to_path_buf());
        let err = images(mapped.clone()).rootfs("lane").unwrap_err();
        assert_eq!(err.code, stet_plugin_api::ErrorCode::NOT_FOUND);
        assert!(!images(mapped.clone()).status("lane").unwrap().present);
        std::fs::create_dir(rootfs.path().join("usr")).unwrap();
        assert_eq!(
            images(mapped.clone()).rootfs("lane").unwrap(),
            rootfs.path()
        );
        assert!(images(mapped).status("lane").unwrap().present);
    }

    #[test]
    fn without_docker_an_unmapped_image_says_how_to_get_it() {
        let err = images(BTreeMap::new()).rootfs("stet-lane:1").unwrap_err();
        assert_eq!(err.code, stet_plugin_api::ErrorCode::NOT_FOUND);
        assert!(
            err.remedy.contains("docker build -t stet-lane:1"),
            "{}",
            err.remedy
        );
        assert!(
            err.remedy.contains("[plugins.gvisor] images"),
            "{}",
            err.remedy
        );
        let status = images(BTreeMap::new()).status("stet-lane:1").unwrap();
        assert!(!status.present);
    }

    #[test]
    fn relative_mappings_are_refused() {
        let mut mapped = BTreeMap::new();
        mapped.insert("x".to_string(), PathBuf::from("rootfs"));
        let err = Images::check_config(&mapped).unwrap_err();
        assert!(
            err.message.contains("not an absolute path"),
            "{}",
            err.message
        );
    }
}
