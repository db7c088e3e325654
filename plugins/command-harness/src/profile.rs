//! The profile directory: the agent's HOME in the sandbox, where it keeps its own login
//! and configuration. stet makes it (mode 0700) and never reads what is in it.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use stet_plugin_api::PluginError;

/// What is wrong with a profile directory, with the remedy; `None` when it is fit.
pub fn unfit(dir: &Path) -> Option<(String, String)> {
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) => {
            return Some((
                format!("{} cannot be read: {e}", dir.display()),
                format!("create it: mkdir -m 700 {}", dir.display()),
            ))
        }
    };
    if meta.file_type().is_symlink() {
        return Some((
            format!("{} is a symbolic link", dir.display()),
            format!(
                "make it a real directory of its own: rm {d} && mkdir -m 700 {d}",
                d = dir.display()
            ),
        ));
    }
    if !meta.is_dir() {
        return Some((
            format!("{} is not a directory", dir.display()),
            format!(
                "move it away; stet makes the directory: mv {d} {d}.old",
                d = dir.display()
            ),
        ));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o022 != 0 {
        return Some((
            format!(
                "{} is writable by {} (mode {mode:o})",
                dir.display(),
                match (mode & 0o020 != 0, mode & 0o002 != 0) {
                    (true, true) => "its group and others",
                    (true, false) => "its group",
                    _ => "others",
                }
            ),
            format!("chmod go-w {}", dir.display()),
        ));
    }
    let me = current_uid();
    if me.is_some_and(|uid| uid != meta.uid()) {
        return Some((
            format!(
                "{} belongs to uid {}, not to you",
                dir.display(),
                meta.uid()
            ),
            format!(
                "use a profile of your own, or chown it: chown \"$(id -u)\" {}",
                dir.display()
            ),
        ));
    }
    None
}

/// This process's uid, read from `/proc/self` (Linux); `None` elsewhere (no check then).
fn current_uid() -> Option<u32> {
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// The profile directory `root/name`, made (mode 0700) when missing; refused when it is a
/// symbolic link, not a directory, writable by others, or someone else's.
pub fn ensure(root: &Path, name: &str) -> Result<PathBuf, PluginError> {
    let dir = root.join(name);
    if std::fs::symlink_metadata(&dir).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| {
                PluginError::backend(format!(
                    "cannot make the profile directory {}: {e}",
                    dir.display()
                ))
                .with_remedy(format!(
                    "make it yourself: mkdir -m 700 -p {}",
                    dir.display()
                ))
            })?;
    }
    if let Some((why, remedy)) = unfit(&dir) {
        return Err(
            PluginError::invalid_input(format!("the profile directory is unfit: {why}"))
                .with_remedy(remedy),
        );
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "stet-command-profile-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_missing_profile_is_made_private() {
        let root = scratch("made");
        let dir = ensure(&root, "command").unwrap();
        assert_eq!(dir, root.join("command"));
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o077, 0, "{mode:o}");
        // A second call finds it as it is.
        assert_eq!(ensure(&root, "command").unwrap(), dir);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_shared_or_linked_profile_is_refused_with_the_fix() {
        let root = scratch("refused");
        let dir = ensure(&root, "command").unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).unwrap();
        let e = ensure(&root, "command").unwrap_err();
        assert!(e.message.contains("writable by its group"), "{}", e.message);
        assert_eq!(e.remedy.as_str(), format!("chmod go-w {}", dir.display()));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink(&dir, root.join("linked")).unwrap();
        let e = ensure(&root, "linked").unwrap_err();
        assert!(e.message.contains("symbolic link"), "{}", e.message);
        std::fs::write(root.join("file"), "x").unwrap();
        let e = ensure(&root, "file").unwrap_err();
        assert!(e.message.contains("not a directory"), "{}", e.message);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
