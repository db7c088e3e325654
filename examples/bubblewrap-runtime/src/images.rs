//! Images, for a sandbox tool that has none.
//!
//! bwrap builds each sandbox's file system from bind mounts; there is no image store. An
//! image name therefore maps to a root file system on the host:
//!
//! - `host` (built in): the host's own system, read-only — `/usr` and the `/bin`, `/sbin`,
//!   `/lib*` links or directories beside it, and a *curated* `/etc` (the entries programs
//!   need to run: users and groups, name resolution, the dynamic linker's cache, TLS
//!   certificates, time zone, git's system config, Debian's alternatives). Secrets such as
//!   `/etc/shadow` and `/etc/ssh` host keys are not among them. Nothing else of the host
//!   is visible: not `/home`, not `/root`, not `/var`.
//! - any other name: a directory holding a root file system, configured as
//!   `[plugins.bubblewrap] images = { "stet-lane:1" = "/srv/rootfs/stet-lane" }` (from
//!   `docker export`, `debootstrap`, `mmdebstrap`, an unpacked OCI layer). Each of its
//!   top-level entries is bound read-only.
//!
//! In both cases the sandbox's own `/` is a fresh tmpfs, made read-only once every mount
//! is in place, so that mount targets need not exist in the image.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use stet_plugin_api::{ImageStatus, PluginError};

/// The built-in image: the host's own system, read-only.
pub const HOST: &str = "host";

/// What the host image shows of the host's `/etc`.
pub const HOST_ETC: &[&str] = &[
    "alternatives",
    "bash.bashrc",
    "ca-certificates",
    "ca-certificates.conf",
    "crypto-policies",
    "debian_version",
    "environment",
    "gai.conf",
    "gitconfig",
    "group",
    "host.conf",
    "hostname",
    "hosts",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "locale.conf",
    "localtime",
    "login.defs",
    "magic",
    "mime.types",
    "networks",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "pki",
    "profile",
    "profile.d",
    "protocols",
    "resolv.conf",
    "rpc",
    "services",
    "ssl",
    "terminfo",
    "timezone",
    "xattr.conf",
];

/// The host's top-level directories the host image shows (as links where the host has
/// links: merged-/usr systems).
const HOST_TOP: &[&str] = &["bin", "sbin", "lib", "lib32", "lib64", "libx32"];

/// Top-level entries of a root file system that every sandbox gets fresh instead.
const FRESH: &[&str] = &["proc", "sys", "dev", "tmp"];

/// An image resolved to what the sandbox's root is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Image {
    /// The host's own system.
    Host,
    /// A root file system in this directory.
    Rootfs(PathBuf),
}

fn absent_remedy(name: &str) -> String {
    format!(
        "bubblewrap has no image store: unpack {name} into a directory \
         (`mkdir -p /srv/rootfs/x && docker export $(docker create {name} true) | tar -x -C /srv/rootfs/x`) \
         and map it with [plugins.bubblewrap] images = {{ \"{name}\" = \"/srv/rootfs/x\" }}, \
         or run on the host's own system with --image {HOST}"
    )
}

/// Whether `name` can be used, and if not how to get it.
pub fn status(name: &str, images: &BTreeMap<String, PathBuf>) -> ImageStatus {
    match resolve(name, images) {
        Ok(_) => ImageStatus {
            present: true,
            remedy: "".into(),
        },
        Err(e) => ImageStatus {
            present: false,
            remedy: e.remedy,
        },
    }
}

/// The image called `name`; NOT_FOUND with a remedy when it maps to nothing usable.
pub fn resolve(name: &str, images: &BTreeMap<String, PathBuf>) -> Result<Image, PluginError> {
    if name == HOST {
        return Ok(Image::Host);
    }
    let Some(dir) = images.get(name) else {
        return Err(PluginError::not_found(format!(
            "image {name} is not mapped to a root file system"
        ))
        .with_remedy(absent_remedy(name)));
    };
    if !dir.is_absolute() || !(dir.join("usr").is_dir() || dir.join("bin").is_dir()) {
        return Err(PluginError::not_found(format!(
            "image {name} maps to {}, which does not hold a root file system (no usr or bin in it)",
            dir.display()
        ))
        .with_remedy(absent_remedy(name)));
    }
    Ok(Image::Rootfs(dir.clone()))
}

/// Checks the configured mapping (absolute paths; `host` is reserved).
pub fn check_config(images: &BTreeMap<String, PathBuf>) -> Result<(), PluginError> {
    for (name, dir) in images {
        if name == HOST {
            return Err(PluginError::invalid_input(format!(
                "[plugins.bubblewrap] images maps `{HOST}`, which is built in"
            ))
            .with_remedy("choose another name for that root file system"));
        }
        if !dir.is_absolute() {
            return Err(PluginError::invalid_input(format!(
                "[plugins.bubblewrap] images maps {name} to {}, which is not an absolute path",
                dir.display()
            )));
        }
    }
    Ok(())
}

fn push(args: &mut Vec<String>, items: &[&str]) {
    args.extend(items.iter().map(|s| s.to_string()));
}

fn text(path: &Path) -> String {
    path.display().to_string()
}

/// One entry of a root file system, shown at `/<name>`: links as links, everything else
/// bound read-only.
fn entry_args(args: &mut Vec<String>, source: &Path, name: &str) {
    let target = format!("/{name}");
    match std::fs::symlink_metadata(source) {
        Ok(meta) if meta.file_type().is_symlink() => {
            if let Ok(link) = std::fs::read_link(source) {
                push(args, &["--symlink", &text(&link), &target]);
            }
        }
        Ok(_) => push(args, &["--ro-bind", &text(source), &target]),
        Err(_) => {}
    }
}

/// The bwrap arguments that build the sandbox's root from `image` (before `/proc`, `/dev`,
/// `/sys`, `/tmp` and the sandbox's own mounts). `open_network`: the host's resolver files
/// replace the image's, as the sandbox shares the host's network.
pub fn root_args(image: &Image, open_network: bool) -> Vec<String> {
    let mut args = Vec::new();
    match image {
        Image::Host => {
            push(&mut args, &["--ro-bind", "/usr", "/usr"]);
            for name in HOST_TOP {
                entry_args(&mut args, &Path::new("/").join(name), name);
            }
            push(&mut args, &["--dir", "/etc"]);
            for name in HOST_ETC {
                let source = Path::new("/etc").join(name);
                // Followed: a link to elsewhere in /etc, or to /run, is bound as its target.
                if source.exists() {
                    let target = text(&source);
                    push(&mut args, &["--ro-bind", &target, &target]);
                }
            }
        }
        Image::Rootfs(dir) => {
            let mut names: Vec<String> = std::fs::read_dir(dir)
                .map(|entries| {
                    entries
                        .filter_map(Result::ok)
                        .filter_map(|e| e.file_name().into_string().ok())
                        .filter(|n| !FRESH.contains(&n.as_str()))
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            for name in &names {
                entry_args(&mut args, &dir.join(name), name);
            }
            if open_network {
                for file in ["resolv.conf", "hosts"] {
                    let host = Path::new("/etc").join(file);
                    // Only over a file the image has: its /etc is read-only.
                    if host.exists() && dir.join("etc").join(file).is_file() {
                        push(&mut args, &["--ro-bind", &text(&host), &text(&host)]);
                    }
                }
            }
        }
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_is_built_in_and_other_names_need_a_mapping() {
        let mut images = BTreeMap::new();
        assert_eq!(resolve("host", &images).unwrap(), Image::Host);
        let err = resolve("stet-lane:1", &images).unwrap_err();
        assert_eq!(err.code, stet_plugin_api::ErrorCode::NOT_FOUND);
        assert!(
            err.remedy.contains("images = { \"stet-lane:1\""),
            "{}",
            err.remedy
        );
        assert!(err.remedy.contains("--image host"), "{}", err.remedy);
        assert!(!status("stet-lane:1", &images).present);

        let rootfs = tempfile::tempdir().unwrap();
        images.insert("lane".to_string(), rootfs.path().to_path_buf());
        assert!(
            resolve("lane", &images).is_err(),
            "an empty directory is no rootfs"
        );
        std::fs::create_dir(rootfs.path().join("usr")).unwrap();
        assert_eq!(
            resolve("lane", &images).unwrap(),
            Image::Rootfs(rootfs.path().to_path_buf())
        );
        assert!(status("lane", &images).present);

        images.insert("host".to_string(), rootfs.path().to_path_buf());
        assert!(check_config(&images).is_err());
    }

    #[test]
    fn the_host_image_shows_usr_and_a_curated_etc() {
        let args = root_args(&Image::Host, false).join(" ");
        assert!(args.starts_with("--ro-bind /usr /usr"), "{args}");
        assert!(args.contains("/etc/passwd /etc/passwd"), "{args}");
        assert!(!args.contains("shadow"), "{args}");
        assert!(!args.contains("/etc/ssh"), "{args}");
        assert!(!args.contains("/home") && !args.contains("/root"), "{args}");
    }

    #[test]
    fn a_rootfs_is_bound_entry_by_entry_without_its_fresh_directories() {
        let rootfs = tempfile::tempdir().unwrap();
        for dir in ["usr", "etc", "proc", "tmp"] {
            std::fs::create_dir(rootfs.path().join(dir)).unwrap();
        }
        std::fs::write(rootfs.path().join("etc/resolv.conf"), "").unwrap();
        std::os::unix::fs::symlink("usr/bin", rootfs.path().join("bin")).unwrap();
        let root = rootfs.path().display();
        let args = root_args(&Image::Rootfs(rootfs.path().to_path_buf()), false).join(" ");
        assert_eq!(
            args,
            format!("--symlink usr/bin /bin --ro-bind {root}/etc /etc --ro-bind {root}/usr /usr")
        );
        let open = root_args(&Image::Rootfs(rootfs.path().to_path_buf()), true).join(" ");
        assert!(
            open.ends_with("--ro-bind /etc/resolv.conf /etc/resolv.conf"),
            "{open}"
        );
    }
}
