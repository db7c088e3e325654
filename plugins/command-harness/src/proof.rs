//! The proof script's output read into live walls.
//!
//! What the walls are compared with (the launch's environment names, its network, its
//! read-only mounts, its commands) follows from the configuration alone, so `read_proof`
//! needs nothing but the output and the plugin's own configuration.

use std::collections::BTreeSet;
use std::path::PathBuf;

use stet_plugin_api::WallCheck;

use crate::config::Net;
use crate::launch::{HOST_ENV, INHERENT_ENV, PROOF_BEGIN, PROOF_END};
use crate::wall;

/// What the proof launch is expected to show.
pub struct Expected {
    /// The names the launch itself sets.
    pub env: Vec<String>,
    /// The configured network.
    pub network: Net,
    /// The mounts that must be read-only inside.
    pub read_only: Vec<PathBuf>,
}

/// The facts the script printed.
#[derive(Debug, Default)]
struct Facts {
    env: Vec<String>,
    uid: Option<u32>,
    lane_owner: Option<u32>,
    net: Vec<String>,
    rw: Vec<String>,
    remote_exit: Option<i32>,
    remotes: Vec<String>,
    remote_error: Option<String>,
    commands: Vec<(String, bool)>,
}

fn read_facts(output: &str) -> Option<Facts> {
    let mut lines = output.lines().skip_while(|l| l.trim() != PROOF_BEGIN);
    lines.next()?;
    let mut facts = Facts::default();
    let mut ended = false;
    for line in lines {
        if line.trim() == PROOF_END {
            ended = true;
            break;
        }
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "env" => facts.env.push(rest.to_string()),
            "uid" => facts.uid = rest.trim().parse().ok(),
            "lane-owner" => facts.lane_owner = rest.trim().parse().ok(),
            "net" => facts.net.push(rest.trim().to_string()),
            "rw" => facts.rw.push(unescape_mountinfo(rest)),
            "remote-exit" => facts.remote_exit = rest.trim().parse().ok(),
            "remote" => facts.remotes.push(rest.trim().to_string()),
            "remote-error" => facts.remote_error = Some(rest.trim().to_string()),
            "command" => {
                if let Some((path, found)) = rest.rsplit_once(' ') {
                    facts.commands.push((path.to_string(), found == "yes"));
                }
            }
            _ => {}
        }
    }
    ended.then_some(facts)
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape_mountinfo(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let value = (bytes[i + 1] - b'0') as u32 * 64
                + (bytes[i + 2] - b'0') as u32 * 8
                + (bytes[i + 3] - b'0') as u32;
            out.push(value as u8);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The live walls from the proof launch's standard output.
pub fn read(output: &[u8], expected: &Expected) -> Vec<WallCheck> {
    let text = String::from_utf8_lossy(output);
    let Some(facts) = read_facts(&text) else {
        return vec![wall(
            "proof-launched",
            false,
            "the proof launch printed no complete report (`stet-proof 1` … `stet-proof-end`)",
            "run `stet walls --log FILE` and read what the sandbox printed; the image needs sh, \
             coreutils, sed and git",
        )];
    };
    vec![
        env_wall(&facts, expected),
        owner_wall(&facts),
        network_wall(&facts, expected),
        mounts_wall(&facts, expected),
        remote_wall(&facts),
        command_wall(&facts),
    ]
}

/// `env-from-scratch`: the agent's environment holds only the launch's own names (and the
/// proxy's, for a launch that names hosts).
fn env_wall(facts: &Facts, expected: &Expected) -> WallCheck {
    // A launch that names hosts reaches them through the host's proxy, whose variables the
    // host adds.
    let proxied: &[&str] = match expected.network {
        Net::AllowHosts(_) => &stet_plugin_api::PROXY_VARIABLES,
        Net::None => &[],
    };
    let allowed: BTreeSet<&str> = expected
        .env
        .iter()
        .map(String::as_str)
        .chain(HOST_ENV)
        .chain(INHERENT_ENV)
        .chain(proxied.iter().copied())
        .collect();
    let mut extra: Vec<&str> = facts
        .env
        .iter()
        .map(String::as_str)
        .filter(|n| !allowed.contains(n))
        .collect();
    extra.sort();
    extra.dedup();
    if facts.env.is_empty() {
        wall(
            "env-from-scratch",
            false,
            "the proof saw no environment at all",
            "the proof script could not list the environment: check the image has coreutils",
        )
    } else if extra.is_empty() {
        let mut seen = facts.env.clone();
        seen.sort();
        seen.dedup();
        wall(
            "env-from-scratch",
            true,
            format!("only the launch's own names: {}", seen.join(" ")),
            "",
        )
    } else {
        wall(
            "env-from-scratch",
            false,
            format!(
                "names the launch did not set reached the agent: {}",
                extra.join(" ")
            ),
            "the runtime adds variables of its own; use another runtime or report this with its version",
        )
    }
}

/// `runs-as-lane-owner`: the host made the lane as the person running stet, so the agent
/// running as the lane's owner is the agent running as that person (files it writes are
/// theirs, and it holds nothing they do not). As root, that is root, and the wall says so.
fn owner_wall(facts: &Facts) -> WallCheck {
    match (facts.uid, facts.lane_owner) {
        (Some(uid), Some(owner)) if uid == owner => wall(
            "runs-as-lane-owner",
            true,
            if uid == 0 {
                "the agent runs as the lane's owner, uid 0: stet itself runs as root".to_string()
            } else {
                format!("the agent runs as the lane's owner, uid {uid}")
            },
            "",
        ),
        (Some(uid), Some(owner)) => wall(
            "runs-as-lane-owner",
            false,
            format!("the agent runs as uid {uid}, the lane belongs to uid {owner}"),
            "the runtime did not run the agent as the requested user; use another runtime or report this with its version",
        ),
        _ => wall(
            "runs-as-lane-owner",
            false,
            "the proof did not report the agent's uid and the lane's owner",
            "check the image has coreutils (`id`, `stat`)",
        ),
    }
}

/// `network-as-configured`: loopback and nothing else; hosts are reached through stet's
/// proxy, never through an interface.
fn network_wall(facts: &Facts, expected: &Expected) -> WallCheck {
    let interfaces = if facts.net.is_empty() {
        "no interfaces".to_string()
    } else {
        format!("interfaces {}", facts.net.join(" "))
    };
    // Loopback and nothing else; no interfaces at all means the sandbox could not show
    // them (no /sys, no /proc/net), which proves nothing.
    let only_loopback = facts.net == ["lo"];
    match &expected.network {
        Net::None => wall(
            "network-as-configured",
            only_loopback,
            if only_loopback {
                format!("network none: {interfaces}")
            } else {
                format!("network none was configured, but the sandbox has {interfaces}")
            },
            "the runtime did not cut the network: do not drive; report this with the runtime's version",
        ),
        // Hosts are reached through stet's proxy, never through an interface.
        Net::AllowHosts(hosts) => wall(
            "network-as-configured",
            only_loopback,
            if only_loopback {
                format!(
                    "allow_hosts {} through stet's proxy; {interfaces}",
                    hosts.join(", ")
                )
            } else {
                format!(
                    "allow_hosts {} was configured, so only loopback was made, but the sandbox has {interfaces}",
                    hosts.join(", ")
                )
            },
            "the runtime did not cut the network: do not drive; report this with the runtime's version",
        ),
    }
}

/// `mounts-read-only`: every mount asked read-only is read-only inside.
fn mounts_wall(facts: &Facts, expected: &Expected) -> WallCheck {
    let writable: Vec<String> = expected
        .read_only
        .iter()
        .map(|p| p.display().to_string())
        .filter(|p| facts.rw.iter().any(|rw| rw == p))
        .collect();
    let shown: Vec<&str> = facts
        .rw
        .iter()
        .map(String::as_str)
        .filter(|p| {
            !(*p == "/" || p.starts_with("/proc") || p.starts_with("/sys") || p.starts_with("/dev"))
        })
        .collect();
    wall(
        "mounts-read-only",
        writable.is_empty(),
        if writable.is_empty() {
            format!(
                "{} read-only mount(s) as asked; writable: {}",
                expected.read_only.len(),
                shown.join(" ")
            )
        } else {
            format!("mounted writable, asked read-only: {}", writable.join(" "))
        },
        "the runtime ignored a read-only mount: do not drive; report this with the runtime's version",
    )
}

/// `no-remote-in-lane`: the lane reaches no remote (stet pushes, the agent does not).
fn remote_wall(facts: &Facts) -> WallCheck {
    match (facts.remote_exit, facts.remotes.is_empty()) {
        (Some(0), true) => wall("no-remote-in-lane", true, "the lane has no remote", ""),
        (Some(0), false) => wall(
            "no-remote-in-lane",
            false,
            format!("the lane has remote(s): {}", facts.remotes.join(" ")),
            "a lane must not reach a remote: stet pushes, the agent does not; remove the remote \
             from the lane (git remote remove NAME)",
        ),
        (_, _) => {
            let why = facts.remote_error.clone().unwrap_or_default();
            if why.contains("not a git repository") {
                wall(
                    "no-remote-in-lane",
                    true,
                    "the lane is not a git repository, so it has no remote",
                    "",
                )
            } else {
                wall(
                    "no-remote-in-lane",
                    false,
                    format!(
                        "`git remote` in the lane failed (exit {}): {why}",
                        facts
                            .remote_exit
                            .map(|c| c.to_string())
                            .unwrap_or_else(|| "unknown".into())
                    ),
                    "the image needs git; run scripts/build-image.sh",
                )
            }
        }
    }
}

/// `command-in-sandbox`: the agent's command is found and executable inside.
fn command_wall(facts: &Facts) -> WallCheck {
    let missing: Vec<&str> = facts
        .commands
        .iter()
        .filter(|(_, found)| !found)
        .map(|(c, _)| c.as_str())
        .collect();
    if facts.commands.is_empty() {
        wall(
            "command-in-sandbox",
            false,
            "the proof did not look for the agent's command",
            "configure implement under [plugins.command]",
        )
    } else if missing.is_empty() {
        let all: Vec<&str> = facts.commands.iter().map(|(c, _)| c.as_str()).collect();
        wall(
            "command-in-sandbox",
            true,
            format!("the agent's command runs in the sandbox: {}", all.join(" ")),
            "",
        )
    } else {
        wall(
            "command-in-sandbox",
            false,
            format!(
                "not found or not executable in the sandbox: {}",
                missing.join(" ")
            ),
            "a bare name must be on the image's PATH; give the command by absolute host path (its \
             directory is mounted), or mount what it needs with `mounts`",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expected(network: Net) -> Expected {
        Expected {
            env: ["PATH", "HOME", "LANG", "TERM", "STET_ROLE"]
                .map(String::from)
                .to_vec(),
            network,
            read_only: vec![PathBuf::from("/opt/my agent")],
        }
    }

    const HELD: &str = "noise before\nstet-proof 1\nenv PATH\nenv HOME\nenv LANG\nenv TERM\nenv STET_ROLE\nenv STET_SESSION_LOG\nenv STET_IN_SANDBOX\nenv HOSTNAME\nenv PWD\nuid 1000\nlane-owner 1000\nnet lo\nrw /\nrw /proc\nrw /work/lane\nrw /p/command\nremote-exit 0\ncommand /opt/my agent/run yes\nstet-proof-end\n";

    fn held(walls: &[WallCheck], name: &str) -> bool {
        walls
            .iter()
            .find(|w| w.wall.as_str() == name)
            .unwrap_or_else(|| panic!("no wall {name}"))
            .held
    }

    fn detail<'a>(walls: &'a [WallCheck], name: &str) -> &'a str {
        walls
            .iter()
            .find(|w| w.wall.as_str() == name)
            .unwrap()
            .detail
            .as_str()
    }

    #[test]
    fn every_live_wall_holds_on_a_clean_report() {
        let walls = read(HELD.as_bytes(), &expected(Net::None));
        for w in &walls {
            assert!(w.held, "{w:?}");
            assert!(w.remedy.is_empty());
        }
        let names: Vec<&str> = walls.iter().map(|w| w.wall.as_str()).collect();
        assert_eq!(
            names,
            [
                "env-from-scratch",
                "runs-as-lane-owner",
                "network-as-configured",
                "mounts-read-only",
                "no-remote-in-lane",
                "command-in-sandbox"
            ]
        );
        assert!(detail(&walls, "mounts-read-only").contains("/work/lane /p/command"));
    }

    #[test]
    fn an_extra_variable_breaks_env_from_scratch_naming_it() {
        let out = HELD.replace(
            "env PWD\n",
            "env PWD\nenv OPENAI_API_KEY\nenv SSH_AUTH_SOCK\n",
        );
        let walls = read(out.as_bytes(), &expected(Net::None));
        assert!(!held(&walls, "env-from-scratch"));
        assert_eq!(
            detail(&walls, "env-from-scratch"),
            "names the launch did not set reached the agent: OPENAI_API_KEY SSH_AUTH_SOCK"
        );
    }

    #[test]
    fn an_agent_not_running_as_the_lanes_owner_breaks_a_wall() {
        let walls = read(
            HELD.replace("uid 1000", "uid 0").as_bytes(),
            &expected(Net::None),
        );
        assert!(!held(&walls, "runs-as-lane-owner"));
        // Root running stet: the lane is root's, and so is the agent; the wall says so.
        let walls = read(
            HELD.replace("uid 1000", "uid 0")
                .replace("lane-owner 1000", "lane-owner 0")
                .as_bytes(),
            &expected(Net::None),
        );
        assert!(held(&walls, "runs-as-lane-owner"));
        let walls = read(
            HELD.replace("uid 1000\n", "").as_bytes(),
            &expected(Net::None),
        );
        assert!(!held(&walls, "runs-as-lane-owner"));
    }

    #[test]
    fn a_network_interface_breaks_the_network_wall_whatever_was_configured() {
        let out = HELD.replace("net lo\n", "net eth0\nnet lo\n");
        let walls = read(out.as_bytes(), &expected(Net::None));
        assert!(!held(&walls, "network-as-configured"));
        assert!(detail(&walls, "network-as-configured").contains("eth0"));
        let hosts = expected(Net::AllowHosts(vec!["api.example.com".into()]));
        let walls = read(out.as_bytes(), &hosts);
        assert!(!held(&walls, "network-as-configured"));
        assert!(detail(&walls, "network-as-configured").contains("eth0 lo"));
        let walls = read(HELD.as_bytes(), &hosts);
        assert!(held(&walls, "network-as-configured"));
        assert!(detail(&walls, "network-as-configured").contains("api.example.com"));
    }

    #[test]
    fn a_writable_read_only_mount_breaks_mounts_read_only() {
        let out = HELD.replace("rw /proc\n", "rw /proc\nrw /opt/my\\040agent\n");
        let walls = read(out.as_bytes(), &expected(Net::None));
        assert!(!held(&walls, "mounts-read-only"));
        assert!(detail(&walls, "mounts-read-only").contains("/opt/my agent"));
    }

    #[test]
    fn a_remote_in_the_lane_breaks_no_remote_in_lane() {
        let out = HELD.replace("remote-exit 0\n", "remote-exit 0\nremote origin\n");
        let walls = read(out.as_bytes(), &expected(Net::None));
        assert!(!held(&walls, "no-remote-in-lane"));
        assert!(detail(&walls, "no-remote-in-lane").contains("origin"));
        // Not a repository at all: no remote either.
        let out = HELD.replace(
            "remote-exit 0\n",
            "remote-exit 128\nremote-error fatal: not a git repository (or any of the parent directories): .git\n",
        );
        assert!(held(
            &read(out.as_bytes(), &expected(Net::None)),
            "no-remote-in-lane"
        ));
        // git missing is no proof.
        let out = HELD.replace(
            "remote-exit 0\n",
            "remote-exit 127\nremote-error sh: 1: git: not found\n",
        );
        let walls = read(out.as_bytes(), &expected(Net::None));
        assert!(!held(&walls, "no-remote-in-lane"));
        assert!(detail(&walls, "no-remote-in-lane").contains("git: not found"));
    }

    #[test]
    fn a_missing_command_breaks_command_in_sandbox() {
        let out = HELD.replace("command /opt/my agent/run yes", "command codex no");
        let walls = read(out.as_bytes(), &expected(Net::None));
        assert!(!held(&walls, "command-in-sandbox"));
        assert!(detail(&walls, "command-in-sandbox").contains("codex"));
    }

    #[test]
    fn an_incomplete_report_is_one_broken_wall() {
        for out in ["", "garbage", "stet-proof 1\nenv PATH\n"] {
            let walls = read(out.as_bytes(), &expected(Net::None));
            assert_eq!(walls.len(), 1, "{out}");
            assert_eq!(walls[0].wall.as_str(), "proof-launched");
            assert!(!walls[0].held);
        }
    }
}
