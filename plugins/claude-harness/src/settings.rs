//! The walled settings: `<profile>/settings.json` holding stet's hooks and nothing else.
//!
//! Claude Code drops a settings file that fails its schema silently, hooks included, so
//! what is written is checked against the exact shape stet means, and the live proof then
//! shows the hooks firing.

use serde_json::{json, Value};

/// The file inside the profile.
pub const FILE: &str = "settings.json";

/// The hooks, as commands naming the stet binary by absolute path as seen where the agent
/// runs.
pub fn walled(stet: &str) -> String {
    let command = |event: &str| json!({"type": "command", "command": format!("{} hook {event}", shell_quote(stet)), "timeout": 30});
    let settings = json!({
        "hooks": {
            "PreToolUse": [{"matcher": "*", "hooks": [command("guard")]}],
            "SessionStart": [{"hooks": [command("rules CLAUDE.md"), command("session-start")]}],
            "SessionEnd": [{"hooks": [command("session-end")]}]
        }
    });
    serde_json::to_string_pretty(&settings).expect("settings serialise") + "\n"
}

/// Checks that `text` is exactly stet's walled settings for `stet`: valid JSON, the hooks
/// object only, every hook a command naming stet.
pub fn check(text: &str, stet: &str) -> Result<(), String> {
    let found: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let expected: Value = serde_json::from_str(&walled(stet)).expect("walled settings parse");
    if found == expected {
        return Ok(());
    }
    let keys: Vec<&str> = found
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    if keys != ["hooks"] {
        return Err(format!(
            "holds keys other than stet's hooks: {}",
            keys.join(", ")
        ));
    }
    Err("its hooks differ from stet's".to_string())
}

fn shell_quote(path: &str) -> String {
    if path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c))
    {
        path.to_string()
    } else {
        format!("'{}'", path.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_settings_pass_and_edits_are_caught() {
        let text = walled("/opt/stet/bin/stet");
        assert!(
            text.contains("\"command\": \"/opt/stet/bin/stet hook guard\""),
            "{text}"
        );
        check(&text, "/opt/stet/bin/stet").unwrap();
        let mut edited: Value = serde_json::from_str(&text).unwrap();
        edited["permissions"] = json!({"allow": ["Bash"]});
        assert!(check(&edited.to_string(), "/opt/stet/bin/stet")
            .unwrap_err()
            .contains("permissions"));
        assert!(check(&text, "/other/stet").is_err());
        assert!(check("{", "/opt/stet/bin/stet").is_err());
    }

    #[test]
    fn odd_paths_are_quoted() {
        assert_eq!(shell_quote("/a b/stet"), "'/a b/stet'");
    }
}
