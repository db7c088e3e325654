//! The launch of the configured command for a role, and the proof launch that stands in
//! for it with the same environment, mounts and network.

use std::path::PathBuf;

use stet_plugin_api::{EnvVar, Launch, Mount, Network, ProcessSpec, ROption, Role};

use crate::config::{is_host_path, Config, Net};

/// The PATH every launch gets, unless the configuration sets its own.
pub const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Names a shell or the runtime sets by itself in any process (not stet's doing).
pub const INHERENT_ENV: [&str; 5] = ["HOSTNAME", "PWD", "SHLVL", "_", "OLDPWD"];

/// Names the host adds to every launch (the session record, the in-sandbox marker).
pub const HOST_ENV: [&str; 2] = ["STET_SESSION_LOG", "STET_IN_SANDBOX"];

/// The word a role is known by (`STET_ROLE`).
pub fn role_word(role: Role) -> &'static str {
    match role {
        Role::Implement => "implement",
        Role::Review => "review",
        Role::Proof => "proof",
    }
}

/// The environment of a launch, from scratch: PATH, HOME (the profile), LANG, TERM,
/// STET_ROLE, then the configured variables (which may replace PATH, LANG or TERM).
pub fn env(config: &Config, role: Role, profile_dir: &str) -> Vec<EnvVar> {
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), PATH.into()),
        ("HOME".into(), profile_dir.into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("TERM".into(), "dumb".into()),
        ("STET_ROLE".into(), role_word(role).into()),
    ];
    for (name, value) in &config.env {
        match env.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = value.clone(),
            None => env.push((name.clone(), value.clone())),
        }
    }
    env.into_iter().map(|(n, v)| EnvVar::new(n, v)).collect()
}

/// The names of a launch's environment.
pub fn env_names(config: &Config) -> Vec<String> {
    let mut names: Vec<String> = env(config, Role::Implement, "")
        .into_iter()
        .map(|v| v.name.into_string())
        .collect();
    // Set at launch: each credential's (stand-in) variable and its gateway URL's.
    for c in &config.credentials {
        names.push(c.variable.clone());
        names.extend(c.base_url.clone());
    }
    for f in &config.credential_files {
        if f.host.is_some() {
            names.extend(f.base_url.clone());
        }
    }
    names
}

/// What must be mounted for a command: nothing for a bare name (looked up in the image);
/// for a host path, the file itself and nothing beside it — never its directory, which may
/// be the repository with its `.git`, receipts and logs. A command that needs more names it
/// in `mounts`.
pub fn command_mount(argv0: &str) -> Option<PathBuf> {
    is_host_path(argv0).then(|| PathBuf::from(argv0))
}

/// The read-only mounts of a launch running `commands` (their argv[0]s): each command's
/// mount, then the configured mounts, without repeats.
pub fn read_only_mounts(config: &Config, commands: &[&str]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for path in commands
        .iter()
        .filter_map(|c| command_mount(c))
        .chain(config.mounts.iter().cloned())
    {
        if !out.contains(&path) {
            out.push(path);
        }
    }
    // A command inside a configured mount is seen through that mount.
    let all = out.clone();
    out.retain(|p| !all.iter().any(|other| other != p && p.starts_with(other)));
    out
}

fn mounts(config: &Config, profile_dir: &str, commands: &[&str]) -> Vec<Mount> {
    let mut mounts = vec![Mount {
        source: profile_dir.into(),
        target: profile_dir.into(),
        writable: true,
    }];
    for path in read_only_mounts(config, commands) {
        let text = path.display().to_string();
        if text == profile_dir {
            continue;
        }
        mounts.push(Mount {
            source: text.clone().into(),
            target: text.into(),
            writable: false,
        });
    }
    mounts
}

/// The runtime's network for the configured one.
pub fn network(net: &Net) -> Network {
    match net {
        Net::None => Network::None,
        Net::AllowHosts(hosts) => {
            Network::AllowHosts(hosts.iter().map(|h| h.as_str().into()).collect())
        }
    }
}

/// The launch of `argv` for `role`: the prompt on stdin.
pub fn agent(
    config: &Config,
    role: Role,
    argv: &[String],
    profile_dir: &str,
    workdir: &str,
    prompt: &str,
) -> Launch {
    Launch {
        process: ProcessSpec {
            argv: argv.iter().map(|a| a.as_str().into()).collect(),
            env: env(config, role, profile_dir).into(),
            workdir: ROption::RSome(workdir.into()),
            stdin: prompt.as_bytes().to_vec().into(),
        },
        mounts: mounts(config, profile_dir, &[argv[0].as_str()]).into(),
        network: network(&config.network),
    }
}

/// The first line the proof script prints, and its last.
pub const PROOF_BEGIN: &str = "stet-proof 1";
/// See [`PROOF_BEGIN`].
pub const PROOF_END: &str = "stet-proof-end";

/// The proof script. Arguments: `$1` the lane, then each command to look for. One fact a
/// line, each starting with a word: `env NAME`, `uid N`, `net IFACE`, `rw MOUNTPOINT`
/// (mountinfo's escapes kept), `remote NAME`, `remote-exit N`, `remote-error TEXT`,
/// `command PATH-OR-NAME FOUND`.
pub const PROOF_SCRIPT: &str = r#"lane=$1; shift
echo 'stet-proof 1'
env -0 | tr '\n\000' ' \n' | sed -e 's/=.*//' -e 's/^/env /'
echo "uid $(id -u)"
echo "lane-owner $(stat -c %u . 2>/dev/null)"
{ ls -1 /sys/class/net 2>/dev/null | grep . || sed -n 's/^ *\([^: ]*\):.*/\1/p' /proc/net/dev 2>/dev/null; } | sed 's/^/net /'
while read -r _ _ _ _ point opts _; do
  case "$opts" in rw|rw,*) echo "rw $point";; esac
done < /proc/self/mountinfo
out=$(git -C "$lane" remote 2>&1); code=$?
echo "remote-exit $code"
if [ "$code" = 0 ]; then
  [ -n "$out" ] && printf '%s\n' "$out" | sed 's/^/remote /'
else
  printf '%s\n' "$out" | head -n 1 | sed 's/^/remote-error /'
fi
for c in "$@"; do
  case "$c" in
    */*) if [ -f "$c" ] && [ -x "$c" ]; then echo "command $c yes"; else echo "command $c no"; fi;;
    *) if command -v "$c" >/dev/null 2>&1; then echo "command $c yes"; else echo "command $c no"; fi;;
  esac
done
echo 'stet-proof-end'
"#;

/// The proof launch: `/bin/sh -c PROOF_SCRIPT` with the environment, mounts and network an
/// implement launch gets (STET_ROLE=proof), plus the review command's mount when it is
/// another, so that both commands can be looked for.
pub fn proof(
    config: &Config,
    implement: &[String],
    review: &[String],
    profile_dir: &str,
    workdir: &str,
) -> Launch {
    let mut commands = vec![implement[0].as_str()];
    if review[0] != implement[0] {
        commands.push(review[0].as_str());
    }
    let mut argv: Vec<String> = vec![
        "/bin/sh".into(),
        "-c".into(),
        PROOF_SCRIPT.into(),
        "stet-proof".into(),
        workdir.into(),
    ];
    argv.extend(commands.iter().map(|c| c.to_string()));
    Launch {
        process: ProcessSpec {
            argv: argv.into_iter().map(Into::into).collect(),
            env: env(config, Role::Proof, profile_dir).into(),
            workdir: ROption::RSome(workdir.into()),
            stdin: Default::default(),
        },
        mounts: mounts(config, profile_dir, &commands).into(),
        network: network(&config.network),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use std::path::Path;

    #[test]
    fn the_environment_is_built_from_scratch() {
        let c = parse(
            r#"{"implement":["/opt/a/run"],"env":{"MODEL":"m","LANG":"de_DE.UTF-8"}}"#,
            Path::new("/"),
        )
        .unwrap();
        let env = env(&c, Role::Review, "/p/command");
        let pairs: Vec<(String, String)> = env
            .iter()
            .map(|v| (v.name.to_string(), v.value.to_string()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("PATH", PATH),
                ("HOME", "/p/command"),
                ("LANG", "de_DE.UTF-8"),
                ("TERM", "dumb"),
                ("STET_ROLE", "review"),
                ("MODEL", "m"),
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
    }

    #[test]
    fn the_launch_mounts_the_profile_the_command_and_the_mounts() {
        let c = parse(
            r#"{"implement":["/opt/a/run","--x"],"mounts":["/opt/a","/data"],"allow_hosts":["api.example.com"]}"#,
            Path::new("/"),
        )
        .unwrap();
        let l = agent(
            &c,
            Role::Implement,
            c.argv(false).unwrap(),
            "/p/c",
            "/lane",
            "do it",
        );
        assert_eq!(l.process.stdin.as_slice(), b"do it");
        assert_eq!(
            l.network,
            Network::AllowHosts(vec!["api.example.com".into()].into())
        );
        let m: Vec<(String, bool)> = l
            .mounts
            .iter()
            .map(|m| (m.source.to_string(), m.writable))
            .collect();
        assert_eq!(
            m,
            [("/p/c", true), ("/opt/a", false), ("/data", false)].map(|(a, b)| (a.to_string(), b))
        );
        assert!(l.mounts.iter().all(|m| m.source == m.target));
    }

    #[test]
    fn a_command_is_mounted_as_itself_never_its_directory() {
        assert_eq!(command_mount("codex"), None);
        for path in [
            "/usr/local/bin/codex",
            "/home/me/agent.sh",
            "/home/me/bin/agent.sh",
            "/work/repo/agent.sh",
        ] {
            assert_eq!(command_mount(path), Some(PathBuf::from(path)));
        }
    }

    #[test]
    fn the_proof_gets_the_implement_launchs_environment_and_both_commands() {
        let c = parse(
            r#"{"implement":["/opt/a/run"],"review":["judge"],"allow_hosts":["h.example"]}"#,
            Path::new("/"),
        )
        .unwrap();
        let l = proof(
            &c,
            c.argv(false).unwrap(),
            c.argv(true).unwrap(),
            "/p/c",
            "/lane",
        );
        let argv: Vec<&str> = l.process.argv.iter().map(|a| a.as_str()).collect();
        assert_eq!(argv[0], "/bin/sh");
        assert_eq!(argv[3..], ["stet-proof", "/lane", "/opt/a/run", "judge"]);
        let names: Vec<&str> = l.process.env.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, env_names(&c));
        assert_eq!(l.network, network(&c.network));
    }
}
