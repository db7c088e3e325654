//! The profile directory: the agent's HOME in the sandbox, where it keeps its own login
//! and configuration. stet makes it (mode 0700) and never reads what is in it.

use std::path::{Path, PathBuf};

use stet_plugin_api::PluginError;

/// What is wrong with a profile directory, with the remedy; `None` when it is fit.
pub fn unfit(dir: &Path) -> Option<(String, String)> {
    stet_plugin_support::private_dir::unfit(dir)
}

/// The profile directory `root/name`, made (mode 0700) when missing; refused when it is a
/// symbolic link, not a directory, writable by others, or someone else's.
pub fn ensure(root: &Path, name: &str) -> Result<PathBuf, PluginError> {
    let dir = root.join(name);
    stet_plugin_support::private_dir::ensure(&dir).map_err(|(why, remedy)| {
        PluginError::invalid_input(format!("the profile directory is unfit: {why}"))
            .with_remedy(remedy)
    })?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

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
