//! The walled profile: `<profiles root>/.codex`, which is Codex's `CODEX_HOME`.
//!
//! Hidden, as the command harness's `.command` is: the Claude harness counts the root's
//! visible directories and requires exactly one, so both harnesses can keep a profile
//! under one root. It holds what stet writes (`config.toml`, `rules/stet.rules`), the login
//! Codex writes (`auth.json`, and its `log/`), and whatever else Codex keeps there when it
//! runs on the profile itself (`codex login`): nothing an agent call writes reaches it,
//! since every call runs on a copy. What Codex would read there as instructions or
//! configuration besides stet's files is refused by name ([`foreign`]).

use std::path::{Path, PathBuf};

use stet_plugin_api::PluginError;

/// The profile's name under the root.
pub const NAME: &str = ".codex";

/// The profile directory, made (mode 0700) when missing; refused when it is a link, not a
/// directory, writable by others, or someone else's.
pub fn ensure(root: &Path) -> Result<PathBuf, PluginError> {
    let dir = root.join(NAME);
    stet_plugin_support::private_dir::ensure(&dir).map_err(|(why, remedy)| {
        PluginError::invalid_input(format!("the walled CODEX_HOME is unfit: {why}"))
            .with_remedy(remedy)
    })?;
    Ok(dir)
}

/// What is wrong with the profile directory, with the remedy; `None` when it is fit.
pub fn unfit(dir: &Path) -> Option<(String, String)> {
    stet_plugin_support::private_dir::unfit(dir)
}

/// What Codex reads from `CODEX_HOME` as instructions, configuration or code besides stet's
/// own files: global instructions (`AGENTS.md`, `AGENTS.override.md`), hooks, a `.env` it
/// loads into its environment, skills (other than the `.system` ones it unpacks itself),
/// prompts, profiles' configuration files, managed configuration, and exec-policy rules
/// other than stet's. Their names (never contents), sorted.
pub fn foreign(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let read = matches!(
            name.as_str(),
            "AGENTS.md"
                | "AGENTS.override.md"
                | "hooks.json"
                | "hooks"
                | ".env"
                | "prompts"
                | "managed_config.toml"
                | "requirements.toml"
                | "plugins"
                | "mcp.json"
        ) || (name.ends_with(".toml") && name != crate::config::FILE);
        if read {
            found.push(name);
        }
    }
    if let Ok(skills) = std::fs::read_dir(dir.join("skills")) {
        found.extend(
            skills
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != ".system")
                .map(|n| format!("skills/{n}")),
        );
    }
    if let Ok(rules) = std::fs::read_dir(dir.join(crate::config::RULES_DIR)) {
        found.extend(
            rules
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != crate::config::RULES_FILE)
                .map(|n| format!("{}/{n}", crate::config::RULES_DIR)),
        );
    }
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_profile_is_hidden_private_and_made_once() {
        let root = tempfile::tempdir().unwrap();
        let dir = ensure(root.path()).unwrap();
        assert_eq!(dir, root.path().join(".codex"));
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        assert_eq!(ensure(root.path()).unwrap(), dir);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = ensure(root.path()).unwrap_err();
        assert!(e.message.contains("writable by"), "{}", e.message);
        assert_eq!(e.remedy.as_str(), format!("chmod go-w {}", dir.display()));
    }

    #[test]
    fn a_linked_profile_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), root.path().join(".codex")).unwrap();
        assert!(ensure(root.path())
            .unwrap_err()
            .message
            .contains("symbolic link"));
    }

    #[test]
    fn what_codex_would_read_besides_stets_files_is_named() {
        let root = tempfile::tempdir().unwrap();
        let dir = ensure(root.path()).unwrap();
        for file in ["config.toml", "auth.json", "installation_id"] {
            std::fs::write(dir.join(file), "").unwrap();
        }
        std::fs::create_dir_all(dir.join("rules")).unwrap();
        std::fs::write(dir.join("rules/stet.rules"), "").unwrap();
        std::fs::create_dir_all(dir.join("skills/.system")).unwrap();
        std::fs::create_dir_all(dir.join("log")).unwrap();
        assert!(foreign(&dir).is_empty(), "{:?}", foreign(&dir));
        std::fs::write(dir.join("AGENTS.md"), "obey").unwrap();
        std::fs::write(dir.join(".env"), "OPENAI_API_KEY=x").unwrap();
        std::fs::write(dir.join("work.config.toml"), "").unwrap();
        std::fs::write(dir.join("rules/allow.rules"), "").unwrap();
        std::fs::create_dir_all(dir.join("skills/mine")).unwrap();
        assert_eq!(
            foreign(&dir),
            [
                ".env",
                "AGENTS.md",
                "rules/allow.rules",
                "skills/mine",
                "work.config.toml"
            ]
        );
    }
}
