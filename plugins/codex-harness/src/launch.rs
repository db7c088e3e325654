//! The walled launches of the Codex CLI: a role's `codex exec`, the proof, the login and
//! the login's refresh.
//!
//! A role's launch: `codex exec --json --strict-config --skip-git-repo-check --ephemeral
//! -C <lane> -c projects={"<lane>"={trust_level="untrusted"}} -`, the prompt on standard
//! input, the environment from scratch (`CODEX_HOME` the call's profile copy, `HOME`,
//! `PATH`, `TZ`; no key), the binary's package and the copy mounted, the model API the only
//! host.
//!
//! **What a role can be denied.** Codex cannot narrow its tools per role: there is no tool
//! list on `codex exec`, and its own sandbox modes (`read-only`, `workspace-write`) make
//! every command fail under Docker's default seccomp profile (bubblewrap cannot make its
//! namespaces). So every role holds Codex's shell and `apply_patch`. A review cannot change
//! the lane all the same: the host mounts the lane read-only for a review (the `lane-only`
//! wall, the mount, not Codex); what a review writes elsewhere (its profile copy, `/tmp`)
//! dies with its sandbox. stet's per-role command rules (its guard hook) do not run under
//! Codex: Codex's hooks need a trust step `codex exec` cannot take; the exec-policy rule
//! refuses the canary alone. Policy, as for every agent: the walls are what hold.

use stet_plugin_api::{EnvVar, Launch, Mount, Network, ProcessSpec, ROption, Role, WALL_CANARY};
use stet_plugin_support::url::{self, endpoint};

/// Where the package of a pip-installed Codex keeps its binary: `<package>/bin/codex`,
/// beside `codex-package.json` (and its bundled `rg`, which the agent's search uses).
const PACKAGE_MARKER: &str = "codex-package.json";

/// The default model API: ChatGPT's Codex backend (where a ChatGPT login is used).
pub const DEFAULT_API_BASE_URL: &str = "https://chatgpt.com/backend-api/codex";

/// Everything a launch needs that is not in the request.
pub struct Setup<'a> {
    /// The codex binary, by absolute path (the same inside the sandbox).
    pub codex: &'a str,
    /// The configured model API base URL, when not ChatGPT's.
    pub api_base_url: Option<&'a str>,
}

/// What of the host the binary needs mounted (read-only): its pip package directory when it
/// is one (`<package>/bin/codex`), else the binary alone.
pub fn binary_mount(codex: &str) -> String {
    let path = std::path::Path::new(codex);
    match path.parent().and_then(std::path::Path::parent) {
        Some(package)
            if path.parent().and_then(|p| p.file_name()) == Some(std::ffi::OsStr::new("bin"))
                && package.join(PACKAGE_MARKER).is_file() =>
        {
            package.display().to_string()
        }
        _ => codex.to_string(),
    }
}

/// The `-c` override that makes the lane untrusted: Codex then loads no
/// `.codex/config.toml`, rules or hooks from it, and writes no auto-trust entry into
/// `config.toml` (measured with 0.163.0: the value is an inline TOML table, so a lane path
/// with dots in it stays one key). It still finds the lane's skills (`.codex/skills`,
/// `.agents/skills`): the walled config keeps them out of the developer message, and says
/// what it cannot keep out (`crate::config`).
pub fn untrusted_lane(lane: &str) -> String {
    format!(
        "projects={{{}={{trust_level=\"untrusted\"}}}}",
        crate::config::quote(lane)
    )
}

/// The proof's prompt: run the canary, which stet's exec-policy rule forbids.
pub fn proof_prompt() -> String {
    format!(
        "This is a wall check. Run exactly this shell command with your shell tool, once: {WALL_CANARY}\n\
         Then report in one line what happened."
    )
}

/// The environment every launch starts from: nothing of the host's.
fn base_env(codex_home: &str) -> Vec<EnvVar> {
    vec![
        EnvVar::new("PATH", "/usr/local/bin:/usr/bin:/bin"),
        EnvVar::new("HOME", "/tmp"),
        EnvVar::new("TERM", "dumb"),
        EnvVar::new("TMPDIR", "/tmp"),
        // Codex says a usage limit's reset as a local time of day: UTC, which the reader
        // knows.
        EnvVar::new("TZ", "UTC0"),
        EnvVar::new("CODEX_HOME", codex_home),
    ]
}

/// The argv of `codex exec` on `workdir`, the prompt on standard input.
pub(crate) fn exec_argv(codex: &str, workdir: &str, ephemeral: bool) -> Vec<String> {
    let mut argv = vec![
        codex.to_string(),
        "exec".into(),
        "--json".into(),
        "--strict-config".into(),
        "--skip-git-repo-check".into(),
    ];
    if ephemeral {
        argv.push("--ephemeral".into());
    }
    argv.extend([
        "-C".into(),
        workdir.to_string(),
        "-c".into(),
        untrusted_lane(workdir),
        "-".into(),
    ]);
    argv
}

/// The launch of `role` on the call's profile copy `profile_dir` and the lane `workdir`.
pub fn launch(
    setup: &Setup<'_>,
    role: Role,
    profile_dir: &str,
    workdir: &str,
    prompt: &str,
) -> Launch {
    let argv = match role {
        Role::Proof => proof_argv(setup.codex, workdir),
        _ => exec_argv(setup.codex, workdir, true),
    };
    let stdin = match role {
        Role::Proof => proof_prompt(),
        _ => prompt.to_string(),
    };
    let package = binary_mount(setup.codex);
    Launch {
        process: ProcessSpec {
            argv: argv.into_iter().map(Into::into).collect(),
            env: base_env(profile_dir).into(),
            workdir: ROption::RSome(workdir.into()),
            stdin: stdin.into_bytes().into(),
        },
        mounts: vec![
            Mount {
                source: package.clone().into(),
                target: package.into(),
                writable: false,
            },
            Mount {
                source: profile_dir.into(),
                target: profile_dir.into(),
                writable: true,
            },
        ]
        .into(),
        network: Network::AllowHosts(vec![api_endpoint(setup.api_base_url).into()].into()),
    }
}

/// The proof: `codex exec` kept on record (not `--ephemeral`), then Codex's session record
/// printed after its events, so that the proof can read the approval and sandbox policy
/// the turn ran with and the refusal the model was given — which `--json` does not show.
/// Runs under `/bin/sh` (every lane image has one); the exit status is Codex's.
fn proof_argv(codex: &str, workdir: &str) -> Vec<String> {
    let script = "\"$@\"; status=$?; \
                  for f in \"$CODEX_HOME\"/sessions/*/*/*/rollout-*.jsonl; do [ -f \"$f\" ] && cat \"$f\"; done; \
                  exit $status";
    let mut argv = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        script.into(),
        "stet-proof".into(),
    ];
    argv.extend(exec_argv(codex, workdir, false));
    argv
}

/// Where the sandbox reaches the model API: the host's gateway
/// (`stet_plugin_api::GATEWAY_PORT`), with the configured base URL's path.
pub fn gateway_url(api_base_url: Option<&str>) -> String {
    let path = url::path(api_base_url.unwrap_or(DEFAULT_API_BASE_URL));
    format!("http://127.0.0.1:{}{path}", stet_plugin_api::GATEWAY_PORT)
}

/// Where the login is good for, as the credential declares it: the model API's
/// `host:port` and its base path (`/backend-api/codex/`), so that the gateway sends the
/// access token nowhere else on that host.
pub fn api_credential_host(api_base_url: Option<&str>) -> String {
    let path = url::path(api_base_url.unwrap_or(DEFAULT_API_BASE_URL));
    format!("{}{path}/", api_endpoint(api_base_url))
}

/// The model API as `host:port`, for the network wall.
pub fn api_endpoint(api_base_url: Option<&str>) -> String {
    url::endpoint(api_base_url.unwrap_or(DEFAULT_API_BASE_URL))
}

/// Codex's own login, on a terminal, writing into the profile: `codex login --device-auth`
/// (a login in a sandbox cannot take the browser's redirect to the CLI's localhost port;
/// the device code is typed into a browser on any machine). Only the binary and the
/// profile are mounted; only the OAuth host is reachable.
pub fn login(codex: &str, profile_dir: &str, oauth_url: &str, ca: Option<&str>) -> Launch {
    let mut env = base_env(profile_dir);
    // On the person's terminal.
    for var in env.iter_mut().filter(|v| v.name.as_str() == "TERM") {
        var.value = "xterm-256color".into();
    }
    let mut mounts = vec![Mount {
        source: binary_mount(codex).into(),
        target: binary_mount(codex).into(),
        writable: false,
    }];
    mounts.push(Mount {
        source: profile_dir.into(),
        target: profile_dir.into(),
        writable: true,
    });
    add_ca(&mut env, &mut mounts, ca);
    Launch {
        process: ProcessSpec {
            argv: vec![
                codex.into(),
                "login".into(),
                "--device-auth".into(),
                "-c".into(),
                "cli_auth_credentials_store=\"file\"".into(),
            ]
            .into(),
            env: env.into(),
            workdir: ROption::RSome("/tmp".into()),
            stdin: Default::default(),
        },
        mounts: mounts.into(),
        network: Network::AllowHosts(vec![endpoint(oauth_url).into()].into()),
    }
}

fn add_ca(env: &mut Vec<EnvVar>, mounts: &mut Vec<Mount>, ca: Option<&str>) {
    if let Some(ca) = ca {
        env.push(EnvVar::new("CODEX_CA_CERTIFICATE", ca));
        mounts.push(Mount {
            source: ca.into(),
            target: ca.into(),
            writable: false,
        });
    }
}

/// The prompt the refresh launch sends; the host's stub answers without reading it.
pub const REFRESH_PROMPT: &str = "Reply with ok.";

/// The launch that renews the login copied into `work_dir` ([`crate::login::copy_for_refresh`],
/// whose access token is an expired placeholder): `codex exec` with the walled
/// configuration pointed at the host's stub (`GATEWAY_PORT`), no retries, `/tmp` as its
/// directory, `--ignore-rules`. Codex renews the login at the OAuth host before its first
/// request (its own TLS, through the proxy: the only host declared) and writes it into the
/// copy; what the stub then answers does not matter (the call may fail: only the login is
/// read). `oauth_url` other than Codex's own goes in `CODEX_REFRESH_TOKEN_URL_OVERRIDE`.
pub fn refresh(codex: &str, work_dir: &str, oauth_url: &str, ca: Option<&str>) -> Launch {
    let mut env = base_env(work_dir);
    if oauth_url != crate::login::OAUTH_TOKEN_URL {
        env.push(EnvVar::new("CODEX_REFRESH_TOKEN_URL_OVERRIDE", oauth_url));
    }
    let mut mounts = vec![
        Mount {
            source: binary_mount(codex).into(),
            target: binary_mount(codex).into(),
            writable: false,
        },
        Mount {
            source: work_dir.into(),
            target: work_dir.into(),
            writable: true,
        },
    ];
    add_ca(&mut env, &mut mounts, ca);
    let argv = [
        codex,
        "exec",
        "--json",
        "--strict-config",
        "--skip-git-repo-check",
        "--ephemeral",
        "--ignore-rules",
        "-C",
        "/tmp",
        "-c",
        "model_providers.stet.request_max_retries=0",
        "-c",
        "model_providers.stet.stream_max_retries=0",
        "-",
    ];
    Launch {
        process: ProcessSpec {
            argv: argv.iter().map(|a| (*a).into()).collect(),
            env: env.into(),
            workdir: ROption::RSome("/tmp".into()),
            stdin: REFRESH_PROMPT.as_bytes().to_vec().into(),
        },
        mounts: mounts.into(),
        network: Network::AllowHosts(vec![endpoint(oauth_url).into()].into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(launch: &Launch, name: &str) -> Option<String> {
        launch
            .process
            .env
            .iter()
            .find(|v| v.name.as_str() == name)
            .map(|v| v.value.to_string())
    }

    #[test]
    fn the_model_api_is_chatgpts_codex_backend_unless_configured() {
        assert_eq!(api_endpoint(None), "chatgpt.com:443");
        assert_eq!(gateway_url(None), "http://127.0.0.1:3180/backend-api/codex");
        assert_eq!(
            api_credential_host(None),
            "chatgpt.com:443/backend-api/codex/"
        );
        let fake = Some("http://127.0.0.1:38743/v1");
        assert_eq!(api_endpoint(fake), "127.0.0.1:38743");
        assert_eq!(gateway_url(fake), "http://127.0.0.1:3180/v1");
        assert_eq!(api_credential_host(fake), "127.0.0.1:38743/v1/");
        assert_eq!(endpoint("http://[::1]:8080/x"), "[::1]:8080");
        assert_eq!(
            endpoint("https://auth.openai.com/oauth/token"),
            "auth.openai.com:443"
        );
    }

    #[test]
    fn a_role_runs_codex_exec_strictly_on_the_untrusted_lane_with_nothing_of_the_host() {
        let setup = Setup {
            codex: "/opt/codex/bin/codex",
            api_base_url: None,
        };
        let l = launch(
            &setup,
            Role::Implement,
            "/tmp/stet-call-profile-x/profile",
            "/r/.git/stet/lanes/a/work",
            "do it",
        );
        let argv: Vec<&str> = l.process.argv.iter().map(|a| a.as_str()).collect();
        assert_eq!(
            argv,
            [
                "/opt/codex/bin/codex",
                "exec",
                "--json",
                "--strict-config",
                "--skip-git-repo-check",
                "--ephemeral",
                "-C",
                "/r/.git/stet/lanes/a/work",
                "-c",
                "projects={\"/r/.git/stet/lanes/a/work\"={trust_level=\"untrusted\"}}",
                "-"
            ]
        );
        assert_eq!(l.process.stdin.as_slice(), b"do it");
        let names: Vec<&str> = l.process.env.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            ["PATH", "HOME", "TERM", "TMPDIR", "TZ", "CODEX_HOME"]
        );
        assert_eq!(
            env(&l, "CODEX_HOME").as_deref(),
            Some("/tmp/stet-call-profile-x/profile")
        );
        assert_eq!(
            l.network,
            Network::AllowHosts(vec!["chatgpt.com:443".into()].into())
        );
        let mounts: Vec<(&str, bool)> = l
            .mounts
            .iter()
            .map(|m| (m.target.as_str(), m.writable))
            .collect();
        assert_eq!(
            mounts,
            [
                ("/opt/codex/bin/codex", false),
                ("/tmp/stet-call-profile-x/profile", true)
            ]
        );
    }

    #[test]
    fn the_proof_keeps_its_session_record_and_prints_it() {
        let setup = Setup {
            codex: "/opt/codex/bin/codex",
            api_base_url: None,
        };
        let l = launch(&setup, Role::Proof, "/p", "/lane", "ignored");
        let argv: Vec<&str> = l.process.argv.iter().map(|a| a.as_str()).collect();
        assert_eq!(&argv[..2], ["/bin/sh", "-c"]);
        assert!(argv[2].contains("rollout-*.jsonl"));
        assert_eq!(argv[4], "/opt/codex/bin/codex");
        assert!(!argv.contains(&"--ephemeral"));
        assert!(String::from_utf8_lossy(&l.process.stdin).contains(WALL_CANARY));
    }

    #[test]
    fn a_pip_package_is_mounted_whole_and_a_lone_binary_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        std::fs::write(dir.path().join("bin/codex"), "").unwrap();
        let codex = dir.path().join("bin/codex").display().to_string();
        assert_eq!(binary_mount(&codex), codex);
        std::fs::write(dir.path().join(PACKAGE_MARKER), "{}").unwrap();
        assert_eq!(binary_mount(&codex), dir.path().display().to_string());
    }

    #[test]
    fn the_refresh_holds_no_lane_and_reaches_the_oauth_host_alone() {
        let l = refresh(
            "/opt/codex/bin/codex",
            "/tmp/stet-refresh/login",
            crate::login::OAUTH_TOKEN_URL,
            None,
        );
        assert_eq!(
            l.network,
            Network::AllowHosts(vec!["auth.openai.com:443".into()].into())
        );
        assert_eq!(env(&l, "CODEX_REFRESH_TOKEN_URL_OVERRIDE"), None);
        assert!(l
            .process
            .argv
            .iter()
            .any(|a| a.as_str() == "--ignore-rules"));
        let l = refresh(
            "/c",
            "/w",
            "https://oauth.test:8443/oauth/token",
            Some("/etc/ca.pem"),
        );
        assert_eq!(
            env(&l, "CODEX_REFRESH_TOKEN_URL_OVERRIDE").as_deref(),
            Some("https://oauth.test:8443/oauth/token")
        );
        assert_eq!(
            env(&l, "CODEX_CA_CERTIFICATE").as_deref(),
            Some("/etc/ca.pem")
        );
        assert_eq!(
            l.network,
            Network::AllowHosts(vec!["oauth.test:8443".into()].into())
        );
    }

    #[test]
    fn the_login_is_codexs_device_login_into_the_profile() {
        let l = login(
            "/c",
            "/profiles/.codex",
            crate::login::OAUTH_TOKEN_URL,
            None,
        );
        let argv: Vec<&str> = l.process.argv.iter().map(|a| a.as_str()).collect();
        assert_eq!(argv[..3], ["/c", "login", "--device-auth"]);
        assert_eq!(env(&l, "CODEX_HOME").as_deref(), Some("/profiles/.codex"));
    }
}
