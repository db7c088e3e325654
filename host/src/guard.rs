//! The guard: what an agent may do inside its sandbox, decided the same way for the
//! agent's hooks (`stet hook guard`) and its permission prompts (`stet approver`).
//!
//! The policy names what a stage may hold, not what it may not: each role has a shell
//! allow-list, and on top of it pushing, reading credentials and the wall-proof canary are
//! refused whatever the list says. Every refusal starts with "refused by stet guard" so the
//! live wall proof can recognise it.

use serde_json::Value;
use stet_plugin_api::WALL_CANARY;

/// What the guard says about one tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Let it run.
    Allow,
    /// Refuse it, with the reason the agent is told.
    Deny(String),
}

fn deny(why: impl std::fmt::Display) -> Decision {
    Decision::Deny(format!("refused by stet guard: {why}"))
}

/// Programs each role may start from its shell. Shells and interpreters that would run a
/// nested command line unseen (`sh -c`, `eval`) are absent on purpose.
pub fn shell_allow_list(role: &str) -> &'static [&'static str] {
    const READ: &[&str] = &[
        "git", "ls", "cat", "head", "tail", "grep", "rg", "find", "wc", "diff", "sort", "uniq",
        "cut", "tr", "echo", "printf", "pwd", "cd", "test", "[", "true", "false", "which",
    ];
    const BUILD: &[&str] = &[
        "git", "ls", "cat", "head", "tail", "grep", "rg", "find", "wc", "diff", "sort", "uniq",
        "cut", "tr", "echo", "printf", "pwd", "cd", "test", "[", "true", "false", "which", "sed",
        "awk", "mkdir", "touch", "cp", "mv", "rm", "make", "cargo", "rustc", "npm", "npx", "node",
        "python3", "python", "pytest", "go",
    ];
    match role {
        "implement" => BUILD,
        "review" => READ,
        _ => &[],
    }
}

/// Paths and names that lead to credentials.
const CREDENTIAL_MARKERS: [&str; 10] = [
    ".credentials.json",
    ".ssh",
    ".netrc",
    ".git-credentials",
    ".aws",
    ".gnupg",
    "id_rsa",
    "id_ed25519",
    ".config/gh",
    "/proc/self/environ",
];

/// Decides a tool call by the tool's name and its input, for `role`.
pub fn decide(role: &str, tool: &str, input: &Value) -> Decision {
    let text = input.to_string();
    if text.contains(WALL_CANARY) {
        return deny(format!("`{WALL_CANARY}` is the wall-proof canary"));
    }
    if let Some(marker) = CREDENTIAL_MARKERS.iter().find(|m| text.contains(*m)) {
        return deny(format!("it touches credentials ({marker})"));
    }
    match tool {
        "Bash" => shell(role, input["command"].as_str().unwrap_or_default()),
        _ => Decision::Allow,
    }
}

/// Decides a shell command line for `role`.
pub fn shell(role: &str, command: &str) -> Decision {
    if command.contains(WALL_CANARY) {
        return deny(format!("`{WALL_CANARY}` is the wall-proof canary"));
    }
    if command.contains("$(") || command.contains('`') {
        return deny("command substitution hides what runs; write the commands out");
    }
    let allowed = shell_allow_list(role);
    for segment in command.split(['\n', ';', '|', '&']) {
        let words: Vec<&str> = segment.split_whitespace().collect();
        // Leading variable assignments (`FOO=1 cmd`) are not the program.
        let Some(program) = words
            .iter()
            .find(|w| !w.contains('=') || w.starts_with('='))
        else {
            continue;
        };
        let name = program.rsplit('/').next().unwrap_or(program);
        if name == "git" && words.contains(&"push") {
            return deny("pushing is stet's job: a lane lands through stet");
        }
        if !allowed.contains(&name) {
            return deny(format!(
                "`{name}` is not in the {role} stage's shell allow-list ({})",
                allowed.join(" ")
            ));
        }
    }
    Decision::Allow
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_canary_is_refused_everywhere() {
        for role in ["implement", "review", "proof"] {
            assert!(
                matches!(shell(role, WALL_CANARY), Decision::Deny(r) if r.starts_with("refused by stet guard"))
            );
        }
    }

    #[test]
    fn the_allow_list_names_what_a_stage_may_run() {
        assert_eq!(
            shell("implement", "cargo test && git status | head -5"),
            Decision::Allow
        );
        assert_eq!(
            shell("implement", "RUST_LOG=1 cargo build"),
            Decision::Allow
        );
        assert!(
            matches!(shell("review", "rm -rf src"), Decision::Deny(r) if r.contains("`rm` is not in the review stage"))
        );
        assert!(matches!(
            shell("implement", "curl http://example.com"),
            Decision::Deny(_)
        ));
        assert!(matches!(
            shell("implement", "sh -c 'rm -rf /'"),
            Decision::Deny(_)
        ));
        assert!(matches!(
            shell("implement", "echo $(cat ~/.ssh/id_rsa)"),
            Decision::Deny(_)
        ));
    }

    #[test]
    fn pushing_and_credentials_are_refused() {
        assert!(
            matches!(shell("implement", "git push origin HEAD"), Decision::Deny(r) if r.contains("pushing"))
        );
        let read = json!({"file_path": "/home/me/.ssh/id_ed25519"});
        assert!(
            matches!(decide("implement", "Read", &read), Decision::Deny(r) if r.contains("credentials"))
        );
        assert_eq!(
            decide("implement", "Read", &json!({"file_path": "src/main.rs"})),
            Decision::Allow
        );
    }
}
