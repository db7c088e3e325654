//! The guard: what an agent should not do inside its sandbox, decided the same way for the
//! agent's hooks (`stet hook guard`) and its permission prompts (`stet approver`).
//!
//! **The guard is policy, not a wall.** It reads the agent's tool calls as text and
//! refuses what a role should not do, which keeps a cooperative agent from mistakes and
//! makes a refusal visible in the receipt. It cannot hold a hostile agent: a shell is a
//! programming language, and `git`, `find -exec` or any build tool can run anything. What
//! holds a hostile agent is the sandbox (only the lane mounted, read-only for review; the
//! lane's git directory read-only; no credential in the environment; the network as
//! launched; limits), and no promise of stet's rests on this module.
//!
//! The policy: every role is refused the wall-proof canary, pushing, and paths that lead
//! to credentials. The implement role may run what it needs (its sandbox is the wall)
//! except the programs that reach the network on their own. The review role has a list of
//! reading programs — no interpreter, no build tool — and no command substitution. Every
//! refusal starts with "refused by stet guard" so the live wall proof can recognise it.

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

/// What the review role may start from its shell: programs that read. Policy: `git` and
/// `find` can still be made to run other programs; the read-only mount is what keeps a
/// reviewer from changing the lane.
pub const REVIEW_PROGRAMS: &[&str] = &[
    "git", "ls", "cat", "head", "tail", "grep", "rg", "find", "wc", "diff", "sort", "uniq", "cut",
    "tr", "echo", "printf", "pwd", "cd", "test", "[", "true", "false", "which", "stat", "file",
];

/// Programs the implement role is refused because they reach the network on their own
/// (policy: the network wall, not this list, decides what is reachable).
pub const NETWORK_PROGRAMS: &[&str] = &[
    "curl", "wget", "nc", "ncat", "netcat", "socat", "ssh", "scp", "sftp", "rsync", "telnet", "ftp",
];

/// Git subcommands that talk to a remote: stet alone moves a lane's branch to the remote.
const GIT_REMOTE_COMMANDS: &[&str] = &["push", "fetch", "pull", "clone", "ls-remote", "send-email"];

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
    let reviewing = role != "implement";
    if reviewing && (command.contains("$(") || command.contains('`')) {
        return deny("command substitution hides what runs; write the commands out");
    }
    for segment in command.split(['\n', ';', '|', '&', '(', ')']) {
        let words: Vec<&str> = segment.split_whitespace().collect();
        // Leading variable assignments (`FOO=1 cmd`) are not the program.
        let Some(at) = words
            .iter()
            .position(|w| !w.contains('=') || w.starts_with('='))
        else {
            continue;
        };
        let program = words[at];
        let args = &words[at + 1..];
        let name = program.rsplit('/').next().unwrap_or(program);
        if name == "git" {
            if let Some(sub) = args.iter().find(|a| GIT_REMOTE_COMMANDS.contains(a)) {
                return deny(format!(
                    "`git {sub}` talks to a remote; a lane reaches the remote only through stet"
                ));
            }
        }
        if reviewing {
            if !REVIEW_PROGRAMS.contains(&name) {
                return deny(format!(
                    "`{name}` is not in the {role} stage's programs ({})",
                    REVIEW_PROGRAMS.join(" ")
                ));
            }
            if name == "find"
                && args.iter().any(|a| {
                    a.starts_with("-exec")
                        || a.starts_with("-ok")
                        || *a == "-delete"
                        || a.starts_with("-fprint")
                })
            {
                return deny(
                    "the review stage reads: `find` without -exec, -ok, -delete or -fprint",
                );
            }
            if name == "git"
                && args.iter().any(|a| {
                    *a == "-c" || a.starts_with("--config-env") || a.starts_with("--exec-path")
                })
            {
                return deny(
                    "the review stage runs git as configured: no -c, --config-env or --exec-path",
                );
            }
        } else if NETWORK_PROGRAMS.contains(&name) {
            return deny(format!(
                "`{name}` reaches the network on its own; the implement stage works in its lane"
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
    fn implement_runs_what_it_needs_but_not_the_network_tools() {
        for allowed in [
            "cargo test && git status | head -5",
            "RUST_LOG=1 cargo build",
            "python3 -m pytest",
            "make -j2",
            "echo $(date)",
        ] {
            assert_eq!(shell("implement", allowed), Decision::Allow, "{allowed}");
        }
        for refused in ["curl http://example.com", "cd x && wget y", "(ssh host)"] {
            assert!(
                matches!(shell("implement", refused), Decision::Deny(_)),
                "{refused}"
            );
        }
    }

    #[test]
    fn review_reads_with_a_list_that_holds_no_interpreter() {
        assert_eq!(
            shell("review", "git diff HEAD~1 | head -50"),
            Decision::Allow
        );
        assert!(
            matches!(shell("review", "rm -rf src"), Decision::Deny(r) if r.contains("`rm` is not in the review stage"))
        );
        for interpreter in [
            "python3", "node", "awk", "sed", "make", "sh", "bash", "perl", "cargo",
        ] {
            assert!(!REVIEW_PROGRAMS.contains(&interpreter), "{interpreter}");
            assert!(matches!(
                shell("review", &format!("{interpreter} x")),
                Decision::Deny(_)
            ));
        }
        assert!(matches!(
            shell("review", "find . -exec rm {} +"),
            Decision::Deny(_)
        ));
        assert!(matches!(
            shell("review", "git -c core.pager=sh log"),
            Decision::Deny(_)
        ));
        assert!(matches!(
            shell("review", "echo $(cat x)"),
            Decision::Deny(_)
        ));
    }

    #[test]
    fn pushing_and_credentials_are_refused() {
        for role in ["implement", "review"] {
            assert!(
                matches!(shell(role, "git push origin HEAD"), Decision::Deny(r) if r.contains("git push"))
            );
            assert!(matches!(shell(role, "git -C x fetch"), Decision::Deny(_)));
        }
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
