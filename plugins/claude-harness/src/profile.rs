//! The walled profile: exactly one directory under the profiles root, holding the agent's
//! login (written there by Claude Code itself; stet never reads it).

use std::path::{Path, PathBuf};

use stet_plugin_api::PluginError;

/// The one profile directory under `root`; none or several is an error naming them.
pub fn find(root: &Path) -> Result<PathBuf, PluginError> {
    let create = root.join("claude");
    let login_hint = format!(
        "create it and log in once in your own shell: mkdir -p {dir} && CLAUDE_CONFIG_DIR={dir} claude  (then /login)",
        dir = create.display()
    );
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(PluginError::not_found(format!(
                "there is no walled profile: {} does not exist",
                root.display()
            ))
            .with_remedy(login_hint))
        }
        Err(e) => {
            return Err(PluginError::backend(format!(
                "cannot read {}: {e}",
                root.display()
            )))
        }
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        // Hidden directories are not profiles (another harness keeps its home there).
        .filter(|p| {
            p.is_dir()
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    dirs.sort();
    match dirs.len() {
        1 => Ok(dirs.remove(0)),
        0 => Err(PluginError::not_found(format!(
            "there is no walled profile in {}",
            root.display()
        ))
        .with_remedy(login_hint)),
        _ => Err(PluginError::invalid_input(format!(
            "there are {} profiles in {} ({}); a drive runs on exactly one",
            dirs.len(),
            root.display(),
            dirs.iter()
                .map(|d| d
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .with_remedy("move the profiles you do not mean to use out of that directory")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_profile() {
        let root = std::env::temp_dir().join(format!("stet-profiles-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let err = find(&root).unwrap_err();
        assert!(err.remedy.contains("CLAUDE_CONFIG_DIR="), "{}", err.remedy);
        std::fs::create_dir_all(root.join("a")).unwrap();
        std::fs::create_dir_all(root.join(".command")).unwrap();
        assert_eq!(find(&root).unwrap(), root.join("a"));
        std::fs::create_dir_all(root.join("b")).unwrap();
        let err = find(&root).unwrap_err();
        assert!(err.message.contains("(a, b)"), "{}", err.message);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
