//! The walled launch of `claude -p` for a role.

use stet_plugin_api::{EnvVar, Launch, Mount, Network, ProcessSpec, ROption, Role, WALL_CANARY};
use stet_plugin_support::url;

/// The MCP server name of stet's approver, and the tool the CLI asks.
pub const APPROVER_SERVER: &str = "stet";
pub const APPROVER_TOOL: &str = "mcp__stet__approve";

/// The exact built-in tools each role holds (Claude Code's names).
pub fn tools(role: Role) -> &'static [&'static str] {
    match role {
        Role::Implement => &["Bash", "Edit", "Glob", "Grep", "Read", "Write"],
        Role::Review => &["Bash", "Glob", "Grep", "Read"],
        Role::Proof => &["Bash"],
    }
}

/// The word a role is known by in hooks and the approver (`STET_ROLE`).
pub fn role_word(role: Role) -> &'static str {
    match role {
        Role::Implement => "implement",
        Role::Review => "review",
        Role::Proof => "proof",
    }
}

/// The proof launch's prompt: run the canary, which every guard refuses.
pub fn proof_prompt() -> String {
    format!(
        "This is a wall check. Run exactly this shell command with the Bash tool, once: {WALL_CANARY}\n\
         Then report in one line what happened."
    )
}

/// Everything a launch needs that is not in the request.
pub struct Setup<'a> {
    pub claude: &'a str,
    pub stet: &'a str,
    pub api_base_url: Option<&'a str>,
    pub model: Option<&'a str>,
    pub max_turns: Option<u32>,
}

pub fn launch(
    setup: &Setup<'_>,
    role: Role,
    profile_dir: &str,
    workdir: &str,
    prompt: &str,
) -> Launch {
    let tools = tools(role);
    // Bash is answered by stet's approver (and the guard hook); the other tools are the
    // stage's own and auto-approved.
    let allowed: Vec<&str> = tools.iter().copied().filter(|t| *t != "Bash").collect();
    let mcp = serde_json::json!({
        "mcpServers": {
            APPROVER_SERVER: {
                "type": "stdio",
                "command": setup.stet,
                "args": ["approver"],
                "env": {"STET_ROLE": role_word(role)}
            }
        }
    });
    let mut argv: Vec<String> = vec![
        setup.claude.to_string(),
        "-p".into(),
        "--output-format=stream-json".into(),
        "--verbose".into(),
        "--no-session-persistence".into(),
        // Only the profile's settings (stet's hooks): settings in the working tree have no
        // effect. CLAUDE.md loading is off through the environment.
        "--setting-sources=user".into(),
        format!("--tools={}", tools.join(",")),
        "--strict-mcp-config".into(),
        format!("--mcp-config={mcp}"),
        format!("--permission-prompt-tool={APPROVER_TOOL}"),
        "--permission-mode=default".into(),
    ];
    if !allowed.is_empty() {
        argv.push(format!("--allowedTools={}", allowed.join(",")));
    }
    if let Some(model) = setup.model {
        argv.push(format!("--model={model}"));
    }
    if let Some(turns) = setup.max_turns {
        argv.push(format!("--max-turns={turns}"));
    }
    let mut env = headless_env(profile_dir);
    env.push(EnvVar::new("STET_ROLE", role_word(role)));
    // The model API through the host's credential gateway on the sandbox's loopback, where
    // the real login is swapped in for the profile copy's stand-in (plain HTTP in here; the
    // host speaks TLS to the API).
    env.push(EnvVar::new(
        "ANTHROPIC_BASE_URL",
        gateway_url(setup.api_base_url),
    ));
    if setup.api_base_url.is_some() {
        // A gateway or test fake answers at once; retries would only hide its errors.
        env.push(EnvVar::new("CLAUDE_CODE_MAX_RETRIES", "0"));
    }
    let endpoint = api_endpoint(setup.api_base_url);
    Launch {
        process: ProcessSpec {
            argv: argv.into_iter().map(Into::into).collect(),
            env: env.into(),
            workdir: ROption::RSome(workdir.into()),
            stdin: prompt.as_bytes().to_vec().into(),
        },
        mounts: vec![
            Mount {
                source: setup.claude.into(),
                target: setup.claude.into(),
                writable: false,
            },
            Mount {
                source: setup.stet.into(),
                target: setup.stet.into(),
                writable: false,
            },
            Mount {
                source: profile_dir.into(),
                target: profile_dir.into(),
                writable: true,
            },
        ]
        .into(),
        // The model API and nothing else: with nonessential traffic off, the CLI needs no
        // other host for a call (the tests' proxy records every other attempt).
        network: Network::AllowHosts(vec![endpoint.into()].into()),
    }
}

/// The environment of a headless `claude -p` on `config_dir`, built from scratch: no
/// CLAUDE.md, no auto-memory, no nonessential traffic, no self-update.
fn headless_env(config_dir: &str) -> Vec<EnvVar> {
    vec![
        EnvVar::new("PATH", "/usr/local/bin:/usr/bin:/bin"),
        EnvVar::new("HOME", "/tmp"),
        EnvVar::new("TERM", "dumb"),
        EnvVar::new("TMPDIR", "/tmp"),
        EnvVar::new("CLAUDE_CODE_TMPDIR", "/tmp"),
        EnvVar::new("CLAUDE_CONFIG_DIR", config_dir),
        EnvVar::new("CLAUDE_CODE_DISABLE_CLAUDE_MDS", "1"),
        EnvVar::new("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "1"),
        EnvVar::new("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        EnvVar::new("DISABLE_AUTOUPDATER", "1"),
    ]
}

/// Where the sandbox reaches the model API: the host's gateway
/// (`stet_plugin_api::GATEWAY_PORT`), with the configured base URL's path.
pub fn gateway_url(api_base_url: Option<&str>) -> String {
    let path = api_base_url.map(url::path).unwrap_or("");
    format!("http://127.0.0.1:{}{path}", stet_plugin_api::GATEWAY_PORT)
}

/// Where the login is good for, as the credential declares it: the model API's
/// `host:port` and its Messages API path (`/v1/` under the configured base URL's path), so
/// that the gateway sends the real login nowhere else on that host (not to an OAuth
/// endpoint that mints keys, say).
pub fn api_credential_host(api_base_url: Option<&str>) -> String {
    let path = api_base_url.map(url::path).unwrap_or("");
    format!("{}{path}/v1/", api_endpoint(api_base_url))
}

/// The model API as `host:port`, for the network wall: the configured base URL's (its
/// port, else its scheme's), else Anthropic's API on 443.
pub fn api_endpoint(api_base_url: Option<&str>) -> String {
    api_base_url.map_or_else(|| "api.anthropic.com:443".to_string(), url::endpoint)
}

/// Claude Code's own login (`claude auth login`), writing into the profile. It runs on a
/// terminal in a sandbox with only the binary and the profile mounted, so a login kept in
/// a host keychain elsewhere never enters, and the login lands in the profile directory,
/// written by Claude Code itself.
pub fn login(claude: &str, profile_dir: &str) -> Launch {
    let env = vec![
        EnvVar::new("PATH", "/usr/local/bin:/usr/bin:/bin"),
        EnvVar::new("HOME", "/tmp"),
        EnvVar::new("TERM", "xterm-256color"),
        EnvVar::new("CLAUDE_CONFIG_DIR", profile_dir),
        EnvVar::new("DISABLE_AUTOUPDATER", "1"),
    ];
    Launch {
        process: ProcessSpec {
            argv: vec![claude.into(), "auth".into(), "login".into()].into(),
            env: env.into(),
            workdir: ROption::RSome("/tmp".into()),
            stdin: Default::default(),
        },
        mounts: vec![
            Mount {
                source: claude.into(),
                target: claude.into(),
                writable: false,
            },
            Mount {
                source: profile_dir.into(),
                target: profile_dir.into(),
                writable: true,
            },
        ]
        .into(),
        network: Network::AllowHosts(
            vec![
                "claude.ai".into(),
                "console.anthropic.com".into(),
                "api.anthropic.com".into(),
            ]
            .into(),
        ),
    }
}

/// The prompt the refresh launch sends; the stub answers it without reading it.
pub const REFRESH_PROMPT: &str = "Reply with ok.";

/// The launch that renews the stored login copied into `work_dir`: Claude Code with no
/// tools, no MCP server, no settings but its defaults, one turn, its model API the host's
/// stub at the gateway port. With the copy's expiry past, the CLI renews the login at the
/// OAuth host before its first request (its own TLS, through the proxy: the only host
/// declared) and writes the renewed login into the copy. `extra_ca` (a PEM file) is
/// trusted besides the system's (`NODE_EXTRA_CA_CERTS`): a TLS-inspecting relay's, or the
/// tests' double's.
pub fn refresh(claude: &str, work_dir: &str, extra_ca: Option<&str>) -> Launch {
    let argv = [
        claude,
        "-p",
        "--output-format=stream-json",
        "--verbose",
        "--no-session-persistence",
        "--setting-sources=user",
        "--tools=",
        "--strict-mcp-config",
        "--max-turns=1",
    ];
    let mut env = headless_env(work_dir);
    env.extend([
        EnvVar::new("CLAUDE_CODE_MAX_RETRIES", "0"),
        EnvVar::new(
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{}", stet_plugin_api::GATEWAY_PORT),
        ),
    ]);
    let mut mounts = vec![
        Mount {
            source: claude.into(),
            target: claude.into(),
            writable: false,
        },
        Mount {
            source: work_dir.into(),
            target: work_dir.into(),
            writable: true,
        },
    ];
    if let Some(ca) = extra_ca {
        env.push(EnvVar::new("NODE_EXTRA_CA_CERTS", ca));
        mounts.push(Mount {
            source: ca.into(),
            target: ca.into(),
            writable: false,
        });
    }
    Launch {
        process: ProcessSpec {
            argv: argv.iter().map(|a| (*a).into()).collect(),
            env: env.into(),
            workdir: ROption::RSome("/tmp".into()),
            stdin: REFRESH_PROMPT.as_bytes().to_vec().into(),
        },
        mounts: mounts.into(),
        network: Network::AllowHosts(
            vec![format!("{}:443", crate::login::OAUTH_HOST).into()].into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_api_is_declared_by_host_and_port() {
        assert_eq!(api_endpoint(None), "api.anthropic.com:443");
        assert_eq!(
            api_endpoint(Some("http://127.0.0.1:38743")),
            "127.0.0.1:38743"
        );
        assert_eq!(
            api_endpoint(Some("https://gateway.example/v1")),
            "gateway.example:443"
        );
        assert_eq!(
            api_endpoint(Some("http://gateway.example")),
            "gateway.example:80"
        );
        assert_eq!(api_endpoint(Some("http://[::1]:8080/x")), "[::1]:8080");
    }

    #[test]
    fn the_login_is_declared_for_the_messages_api_paths_only() {
        assert_eq!(api_credential_host(None), "api.anthropic.com:443/v1/");
        assert_eq!(
            api_credential_host(Some("https://gateway.example/anthropic/")),
            "gateway.example:443/anthropic/v1/"
        );
    }

    #[test]
    fn the_sandbox_reaches_the_model_api_at_the_gateway_with_the_configured_path() {
        assert_eq!(gateway_url(None), "http://127.0.0.1:3180");
        assert_eq!(
            gateway_url(Some("http://127.0.0.1:38743/")),
            "http://127.0.0.1:3180"
        );
        assert_eq!(
            gateway_url(Some("https://gateway.example/anthropic/")),
            "http://127.0.0.1:3180/anthropic"
        );
    }

    #[test]
    fn the_refresh_holds_no_tool_and_reaches_the_oauth_host_alone() {
        let launch = refresh(
            "/opt/claude",
            "/tmp/stet-refresh/login",
            Some("/etc/ca.pem"),
        );
        let argv: Vec<&str> = launch.process.argv.iter().map(|a| a.as_str()).collect();
        assert!(argv.contains(&"--tools="), "{argv:?}");
        assert!(argv.contains(&"--strict-mcp-config"), "{argv:?}");
        assert!(!argv.iter().any(|a| a.starts_with("--mcp-config")));
        assert_eq!(
            launch.network,
            Network::AllowHosts(vec!["platform.claude.com:443".into()].into())
        );
        let env = |name: &str| {
            launch
                .process
                .env
                .iter()
                .find(|v| v.name.as_str() == name)
                .map(|v| v.value.to_string())
        };
        assert_eq!(
            env("ANTHROPIC_BASE_URL").as_deref(),
            Some("http://127.0.0.1:3180")
        );
        assert_eq!(env("NODE_EXTRA_CA_CERTS").as_deref(), Some("/etc/ca.pem"));
        assert_eq!(
            env("CLAUDE_CONFIG_DIR").as_deref(),
            Some("/tmp/stet-refresh/login")
        );
        let mounts: Vec<(&str, bool)> = launch
            .mounts
            .iter()
            .map(|m| (m.target.as_str(), m.writable))
            .collect();
        assert_eq!(
            mounts,
            [
                ("/opt/claude", false),
                ("/tmp/stet-refresh/login", true),
                ("/etc/ca.pem", false)
            ]
        );
    }
}
