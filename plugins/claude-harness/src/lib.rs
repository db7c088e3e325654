//! stet's Claude Code harness: `claude -p` on one walled profile.
//!
//! - `profile.rs`: the one profile directory under the profiles root.
//! - `settings.rs`: the walled `settings.json` (stet's hooks and nothing else).
//! - `launch.rs`: the walled launch for a role: environment from scratch, exact tools,
//!   stet's approver as the only MCP server, prompt on stdin.
//! - `stream.rs`, `outcome.rs`: reading stream-json output into wall checks and outcomes.
//! - `transcript.rs`: stream-json rendered as a transcript a person reads (`stet log`).
//!
//! The login is read by state alone (`claude auth status`'s `loggedIn` and the method's
//! kind): no account identifier, e-mail or organisation is copied out. The login's tokens
//! are declared (`credentials`) and sealed by the host: each call's copy of the profile
//! holds stand-ins; nothing of a copy is carried back (`login.rs`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;
use stet_plugin_api::{
    export_plugin, wall as walls, CallOutcome, CredentialDecl, CredentialSource,
    CredentialSource_NE, ExitStatus, HarnessContext, HarnessPlugin, Launch, Outcome, PluginError,
    ProbeReport, Profile, Rendered, Role, RoleRequest, WallCheck, WallReport, WallState,
    SESSION_HOOK_MARKER, WALL_CANARY,
};
use stet_plugin_support::{find_on_path, run_clean, Ran};

mod launch;
mod login;
mod outcome;
mod profile;
mod settings;
mod stream;
mod transcript;

/// The readers of what the agent writes, for the fuzz targets (`fuzz/`) alone: built only
/// under cargo-fuzz's `--cfg fuzzing`.
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing {
    use stet_plugin_api::{ExitStatus, Role};

    /// The stream-json transcript of a call, read into its outcome.
    pub fn read_call(role: Role, output: &[u8], exit: ExitStatus) {
        let transcript = crate::stream::read(output);
        let _ = crate::outcome::model_api_down(&transcript);
        let _ = crate::outcome::call(&transcript, exit.clone());
        let _ = crate::outcome::outcome(&transcript, exit);
        let _ = role;
        let _ = crate::transcript::render(output, false);
        let _ = crate::transcript::render(output, true);
    }
}

const PRIORITY: i32 = 50;
const COMMAND_LIMIT: Duration = Duration::from_secs(10);

/// Variables that would make Claude Code bill or route somewhere other than the walled
/// login. Any of them in stet's environment fails the `no-billing-key` wall.
const BILLING_VARIABLES: [&str; 9] = [
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_REFRESH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_USE_FOUNDRY",
    "AWS_BEARER_TOKEN_BEDROCK",
    "ANTHROPIC_FOUNDRY_API_KEY",
];

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// The `claude` executable; looked up on `PATH` when absent.
    binary: Option<PathBuf>,
    /// Where the model API is, when not Anthropic's (a gateway, or a test fake).
    api_base_url: Option<String>,
    /// The model to ask for (`--model`).
    model: Option<String>,
    /// `--max-turns` for each role.
    max_turns: Option<u32>,
    /// A PEM file of certificates the CLI trusts besides the system's when it renews the
    /// login over its own TLS (a TLS-inspecting relay's; the tests' OAuth double's).
    extra_ca_certs: Option<PathBuf>,
}

/// The Claude Code harness.
pub struct ClaudeHarness {
    config: Config,
    /// The context of the last `profile` call; launches use its stet binary.
    context: Mutex<Option<HarnessContext>>,
}

/// What `claude auth status` says, reduced to state. Only these fields are read.
#[derive(Debug, Deserialize)]
struct AuthStatus {
    #[serde(rename = "loggedIn")]
    logged_in: bool,
    #[serde(rename = "authMethod", default)]
    auth_method: Option<String>,
}

impl ClaudeHarness {
    /// Builds the harness from its JSON settings.
    pub fn from_config(config: &str) -> Result<Self, PluginError> {
        let config: Config = serde_json::from_str(config).map_err(|e| {
            PluginError::invalid_input(format!("bad [plugins.claude] settings: {e}")).with_remedy(
                "the keys are `binary`, `api_base_url`, `model`, `max_turns` and `extra_ca_certs`",
            )
        })?;
        Ok(ClaudeHarness {
            config,
            context: Mutex::new(None),
        })
    }

    fn binary(&self) -> Option<PathBuf> {
        self.config
            .binary
            .clone()
            .or_else(|| find_on_path("claude", &std::env::var_os("PATH").unwrap_or_default()))
    }

    fn require_binary(&self) -> Result<PathBuf, PluginError> {
        self.binary().ok_or_else(|| {
            PluginError::unavailable("the `claude` CLI is not on PATH").with_remedy(INSTALL_HINT)
        })
    }

    /// Runs `claude` with an environment built from scratch: a plain PATH, HOME, the
    /// profile when given, and the switches that keep it from updating itself or phoning
    /// home. Nothing else of the host's environment (no key, no token) reaches it.
    fn claude(&self, binary: &Path, args: &[&str], profile: Option<&Path>) -> Result<Ran, String> {
        let home = std::env::var_os("HOME").unwrap_or_default();
        let mut env: Vec<(&str, &OsStr)> = vec![
            ("PATH", OsStr::new("/usr/local/bin:/usr/bin:/bin")),
            ("HOME", &home),
            ("TERM", OsStr::new("dumb")),
            ("DISABLE_AUTOUPDATER", OsStr::new("1")),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", OsStr::new("1")),
        ];
        if let Some(dir) = profile {
            env.push(("CLAUDE_CONFIG_DIR", dir.as_os_str()));
        }
        run_clean(binary, args, &env, COMMAND_LIMIT).map_err(|e| e.to_string())
    }

    fn login(&self, binary: &Path, profile: Option<&Path>) -> Result<AuthStatus, String> {
        let out = self.claude(binary, &["auth", "status", "--json"], profile)?;
        serde_json::from_str::<AuthStatus>(out.stdout.trim())
            .map_err(|_| "`claude auth status` did not answer in JSON".to_string())
    }

    fn stet_binary(&self) -> Result<String, PluginError> {
        self.context
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|c| c.stet_binary.to_string())
            .ok_or_else(|| PluginError::invalid_input("launch was asked for before profile"))
    }

    /// `login-present`: the profile holds a login the agent can use and nothing else the
    /// sandbox would get as it is.
    fn login_wall(&self, binary: &Path, profile: &Profile) -> WallReport {
        let token = login::token(Path::new(profile.dir.as_str()));
        let others = login::other_credentials(Path::new(profile.dir.as_str()));
        match token {
            // Tokens the login file holds beside the login are not declared: they would
            // enter the sandbox as they are.
            _ if !others.is_empty() => WallReport::checked(
                walls::LOGIN_PRESENT,
                false,
                format!(
                    "the profile's {} also holds {}, whose tokens would enter the sandbox",
                    login::FILE,
                    others.join(", ")
                ),
                "keep the walled profile for stet alone: log out of those there (or make a fresh profile and log in once)",
            ),
            Ok(Some(_)) => WallReport::checked(
                walls::LOGIN_PRESENT,
                true,
                format!(
                    "a long-lived token (claude setup-token) in {}",
                    login::token_file(Path::new(profile.dir.as_str())).display()
                ),
                "",
            ),
            Err(e) => WallReport::checked(
                walls::LOGIN_PRESENT,
                false,
                e.message.to_string(),
                e.remedy.as_str(),
            ),
            // An expired stored login that cannot be renewed (the host renews one with a
            // refresh token before a call). Said before any call.
            Ok(None)
                if login::expires_at_ms(Path::new(profile.dir.as_str())).is_some_and(|at| {
                    at < std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as u64)
                }) && !login::renewable(Path::new(profile.dir.as_str())) =>
            {
                WallReport::checked(
                    walls::LOGIN_PRESENT,
                    false,
                    "the stored login has expired and holds no refresh token to renew it with",
                    &format!(
                        "log in again (stet profile login), or store a long-lived token \
                         (claude setup-token) in {}, mode 600",
                        login::token_file(Path::new(profile.dir.as_str())).display()
                    ),
                )
            }
            Ok(None) => match self.login(binary, Some(Path::new(profile.dir.as_str()))) {
                Ok(s) if s.logged_in => {
                    WallReport::checked(walls::LOGIN_PRESENT, true, describe_login(Ok(s)), "")
                }
                other => WallReport::checked(
                    walls::LOGIN_PRESENT,
                    false,
                    describe_login(other),
                    &format!(
                        "log in once in your own shell: CLAUDE_CONFIG_DIR={} claude, then /login \
                         (or store a `claude setup-token` token in {}, mode 600)",
                        profile.dir,
                        login::token_file(Path::new(profile.dir.as_str())).display()
                    ),
                ),
            },
        }
    }
}

const INSTALL_HINT: &str =
    "install Claude Code (https://code.claude.com) or set `binary` under [plugins.claude] in stet.toml";

/// `profile-alone`: the walled profile is the one profile under the profiles root.
fn profile_alone_wall(root: &Path, profile: &Profile) -> WallReport {
    match profile::find(root) {
        Ok(dir) if dir == Path::new(profile.dir.as_str()) => WallReport::checked(
            walls::PROFILE_ALONE,
            true,
            format!("{} is the only profile", dir.display()),
            "",
        ),
        Ok(dir) => WallReport::checked(
            walls::PROFILE_ALONE,
            false,
            format!("the profile is now {}, not {}", dir.display(), profile.dir),
            "start the drive again",
        ),
        Err(e) => WallReport::checked(
            walls::PROFILE_ALONE,
            false,
            e.message.to_string(),
            e.remedy.as_str(),
        ),
    }
}

/// `settings-exact`: the profile's settings are exactly what stet wrote.
fn settings_wall(context: &HarnessContext, profile: &Profile) -> WallReport {
    let path = Path::new(profile.dir.as_str()).join(settings::FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => match settings::check(&text, &context.stet_binary) {
            Ok(()) => WallReport::checked(
                walls::SETTINGS_EXACT,
                true,
                "stet's hooks and nothing else",
                "",
            ),
            Err(why) => WallReport::checked(
                walls::SETTINGS_EXACT,
                false,
                format!("{}: {why}", path.display()),
                "stet rewrites it at the start of each drive; do not edit it",
            ),
        },
        Err(_) => WallReport {
            state: WallState::ABSENT,
            ..WallReport::checked(
                walls::SETTINGS_EXACT,
                false,
                format!("{} is absent", path.display()),
                "stet writes it at the start of each drive",
            )
        },
    }
}

/// `no-billing-key`: no API key or provider switch in the host's environment.
fn billing_wall(context: &HarnessContext) -> WallReport {
    let keys: Vec<&str> = BILLING_VARIABLES
        .iter()
        .copied()
        .filter(|name| {
            context
                .host_env
                .iter()
                .any(|v| v.name.as_str() == *name && !v.value.is_empty())
        })
        .collect();
    WallReport::checked(
        walls::NO_BILLING_KEY,
        keys.is_empty(),
        if keys.is_empty() {
            "no key or provider switch in the environment".to_string()
        } else {
            format!("set in the environment: {}", keys.join(", "))
        },
        "unset them: a drive runs on the walled subscription login only",
    )
}

impl HarnessPlugin for ClaudeHarness {
    fn probe(&self) -> Result<ProbeReport, PluginError> {
        let Some(binary) = self.binary() else {
            return Ok(ProbeReport::unavailable(
                "the `claude` CLI is not on PATH",
                INSTALL_HINT,
            ));
        };
        let version = match stet_plugin_support::version_of(
            &binary,
            self.claude(&binary, &["--version"], None),
        ) {
            Ok(version) => version,
            Err(why) => return Ok(ProbeReport::unavailable(why, "reinstall Claude Code")),
        };
        // No login is read here: the probe knows no walled profile, and the person's own
        // login (the default configuration directory) is not what a drive runs on. The
        // host asks the walled profile (`profile`) and shows that.
        Ok(ProbeReport::available(version, PRIORITY)
            .with_fact("binary", binary.display().to_string()))
    }

    fn profile(&self, context: &HarnessContext) -> Result<Profile, PluginError> {
        *self.context.lock().unwrap_or_else(|p| p.into_inner()) = Some(context.clone());
        let dir = profile::find(Path::new(context.profiles_root.as_str()))?;
        let binary = self.require_binary()?;
        // A long-lived token beside the profile is a login by its presence; the CLI is
        // never handed it on the host.
        if login::token(&dir)?.is_some() {
            return Ok(Profile {
                dir: dir.display().to_string().into(),
                logged_in: true,
                route: format!(
                    "subscription token {} for the walled profile {}",
                    login::token_file(&dir).display(),
                    dir.display()
                )
                .into(),
            });
        }
        let logged_in = self
            .login(&binary, Some(&dir))
            .map(|s| s.logged_in)
            .unwrap_or(false);
        Ok(Profile {
            dir: dir.display().to_string().into(),
            logged_in,
            route: format!("subscription login in the walled profile {}", dir.display()).into(),
        })
    }

    fn write_settings(
        &self,
        context: &HarnessContext,
        profile: &Profile,
    ) -> Result<String, PluginError> {
        let text = settings::walled(&context.stet_binary);
        settings::check(&text, &context.stet_binary).map_err(PluginError::internal)?;
        let path = Path::new(profile.dir.as_str()).join(settings::FILE);
        // Written beside, then renamed over: a reader never sees half a file, and nothing
        // else in the profile (the login) is touched.
        let partial = path.with_extension("json.stet-partial");
        std::fs::write(&partial, &text)
            .and_then(|_| std::fs::rename(&partial, &path))
            .map_err(|e| PluginError::backend(format!("cannot write {}: {e}", path.display())))?;
        let written = std::fs::read_to_string(&path).map_err(|e| {
            PluginError::backend(format!("cannot read back {}: {e}", path.display()))
        })?;
        settings::check(&written, &context.stet_binary).map_err(|why| {
            PluginError::backend(format!(
                "{} did not keep what was written: {why}",
                path.display()
            ))
        })?;
        Ok(text)
    }

    fn check_walls(
        &self,
        context: &HarnessContext,
        profile: &Profile,
    ) -> Result<Vec<WallCheck>, PluginError> {
        Ok(self
            .check_walls_typed(context, profile)?
            .into_iter()
            .map(Into::into)
            .collect())
    }

    fn check_walls_typed(
        &self,
        context: &HarnessContext,
        profile: &Profile,
    ) -> Result<Vec<WallReport>, PluginError> {
        let root = Path::new(context.profiles_root.as_str());
        let binary = self.require_binary()?;
        Ok(vec![
            profile_alone_wall(root, profile),
            self.login_wall(&binary, profile),
            settings_wall(context, profile),
            billing_wall(context),
        ])
    }

    fn launch(&self, request: &RoleRequest) -> Result<Launch, PluginError> {
        let binary = self.require_binary()?;
        let stet = self.stet_binary()?;
        let claude = binary.display().to_string();
        let setup = launch::Setup {
            claude: &claude,
            stet: &stet,
            api_base_url: self.config.api_base_url.as_deref(),
            model: self.config.model.as_deref(),
            max_turns: self.config.max_turns,
        };
        let prompt = match request.role {
            Role::Proof => launch::proof_prompt(),
            _ => request.prompt.to_string(),
        };
        let mut launch = launch::launch(
            &setup,
            request.role,
            &request.profile_dir,
            &request.workdir,
            &prompt,
        );
        // A long-lived token beside the walled profile (the launch runs on a copy of it):
        // in its variable for the host to seal, which puts a stand-in there.
        let root = self
            .context
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|c| c.profiles_root.to_string());
        if let Some(root) = root {
            let dir = profile::find(Path::new(&root))?;
            if let Some(token) = login::token(&dir)? {
                launch
                    .process
                    .env
                    .push(stet_plugin_api::EnvVar::new(login::TOKEN_VARIABLE, token));
            }
        }
        Ok(launch)
    }

    fn read_proof(&self, output: &[u8]) -> Result<Vec<WallCheck>, PluginError> {
        Ok(self
            .read_proof_typed(output)?
            .into_iter()
            .map(Into::into)
            .collect())
    }

    fn read_proof_typed(&self, output: &[u8]) -> Result<Vec<WallReport>, PluginError> {
        let t = stream::read(output);
        // The proof never reached the model: its walls are not proven either way, and
        // that is what is said, not that a hook did not run.
        if outcome::model_api_down(&t) {
            let said = t
                .result
                .as_ref()
                .and_then(|r| r["result"].as_str())
                .unwrap_or("no answer")
                .to_string();
            return Ok(vec![WallReport {
                wall: stet_plugin_api::wall::PROOF_MODEL_API_UNREACHABLE.into(),
                state: WallState::UNREACHABLE,
                detail: format!("the proof launch did not reach the model API: {said}").into(),
                remedy: "check that the model API answers from the sandbox's network (ANTHROPIC_BASE_URL, the network route), then run stet walls again".into(),
            }]);
        }
        let Some(init) = &t.init else {
            return Ok(vec![WallReport::checked(
                walls::PROOF_LAUNCHED,
                false,
                "the proof launch printed no init line",
                "run `stet plugins probe`; the claude binary may be broken",
            )]);
        };
        let mut expected: Vec<String> = launch::tools(Role::Proof)
            .iter()
            .map(|s| s.to_string())
            .collect();
        expected.sort();
        let mut held = init.tools.clone();
        held.sort();
        let approver = init
            .mcp_servers
            .iter()
            .find(|(name, _)| name == launch::APPROVER_SERVER)
            .map(|(_, status)| status.clone());
        let canary_ids: Vec<&str> = t
            .tool_uses
            .iter()
            .filter(|(_, _, input)| input.to_string().contains(WALL_CANARY))
            .map(|(id, _, _)| id.as_str())
            .collect();
        // The guard hook's refusal, not the approver's: the proof is about the hook firing
        // (the approver refuses the canary too, and must not stand in for the guard).
        let refused = t.tool_results.iter().any(|(id, is_error, text)| {
            canary_ids.contains(&id.as_str())
                && *is_error
                && text.contains("PreToolUse")
                && text.contains("stet guard")
        });
        // Claude Code has built-in session hooks of its own; stet's announce themselves.
        let stet_hooks_ran = t
            .hook_outputs
            .iter()
            .any(|o| o.contains(SESSION_HOOK_MARKER));
        Ok(vec![
            WallReport::checked(
                "proof-tool-list",
                held == expected,
                format!("the agent holds {held:?}; the launch named {expected:?}"),
                "the tool wall is down: do not drive; report this with the claude version",
            ),
            WallReport::checked(
                "proof-approver-connected",
                approver.as_deref() == Some("connected"),
                format!(
                    "stet approver: {}",
                    approver.unwrap_or_else(|| "not listed".into())
                ),
                "check that the stet binary runs inside the sandbox (`stet approver`)",
            ),
            WallReport::checked(
                "proof-hooks-fired",
                stet_hooks_ran,
                if stet_hooks_ran {
                    "stet's session hook ran".to_string()
                } else {
                    format!(
                        "stet's session hook did not run (hooks started: {:?})",
                        t.hooks_started
                    )
                },
                "the walled settings were not loaded: check the profile's settings.json",
            ),
            WallReport::checked(
                "proof-no-memory",
                !init.memory_paths,
                if init.memory_paths {
                    "auto-memory is on"
                } else {
                    "auto-memory is off"
                },
                "auto-memory must be off (CLAUDE_CODE_DISABLE_AUTO_MEMORY)",
            ),
            WallReport::checked(
                "proof-guard-refused-canary",
                refused,
                if canary_ids.is_empty() {
                    "the agent never asked to run the canary".to_string()
                } else if refused {
                    format!("the guard refused `{WALL_CANARY}`")
                } else {
                    format!("`{WALL_CANARY}` was not refused by the guard")
                },
                "the guard hook did not run: check the walled settings and the stet binary path",
            ),
        ])
    }

    fn login_launch(
        &self,
        _context: &HarnessContext,
        profile_dir: &str,
    ) -> Result<Launch, PluginError> {
        let binary = self.require_binary()?;
        Ok(launch::login(&binary.display().to_string(), profile_dir))
    }

    fn read_outcome(
        &self,
        _role: Role,
        output: &[u8],
        exit: ExitStatus,
    ) -> Result<Outcome, PluginError> {
        Ok(outcome::outcome(&stream::read(output), exit))
    }

    fn read_call(
        &self,
        _role: Role,
        output: &[u8],
        exit: ExitStatus,
    ) -> Result<CallOutcome, PluginError> {
        Ok(outcome::call(&stream::read(output), exit))
    }

    fn render_transcript(
        &self,
        _role: Role,
        output: &[u8],
        end: bool,
    ) -> Result<Rendered, PluginError> {
        Ok(transcript::render(output, end))
    }

    fn login_expiry(
        &self,
        _context: &HarnessContext,
        profile: &Profile,
    ) -> Result<u64, PluginError> {
        let dir = Path::new(profile.dir.as_str());
        // A long-lived token is what a call uses when there is one; it needs no renewing.
        if login::token(dir)?.is_some() {
            return Ok(0);
        }
        Ok(login::expires_at_ms(dir).unwrap_or(0))
    }

    fn refresh_launch(
        &self,
        _context: &HarnessContext,
        profile: &Profile,
        work_dir: &str,
    ) -> Result<Launch, PluginError> {
        let binary = self.require_binary()?;
        login::copy_for_refresh(Path::new(profile.dir.as_str()), Path::new(work_dir))?;
        let ca = self
            .config
            .extra_ca_certs
            .as_ref()
            .map(|p| p.display().to_string());
        Ok(launch::refresh(
            &binary.display().to_string(),
            work_dir,
            ca.as_deref(),
        ))
    }

    fn settle_refresh(
        &self,
        _context: &HarnessContext,
        profile: &Profile,
        work_dir: &str,
    ) -> Result<u64, PluginError> {
        login::settle_refresh(Path::new(profile.dir.as_str()), Path::new(work_dir))
    }

    fn credentials(
        &self,
        _context: &HarnessContext,
        _profile: &Profile,
    ) -> Result<Vec<CredentialDecl>, PluginError> {
        let file = || login::FILE.into();
        Ok(vec![
            // The stored login's access token, sent as a bearer to the model API.
            CredentialDecl {
                id: "claude-login".into(),
                source: CredentialSource_NE::new(CredentialSource::ProfileFile {
                    path: file(),
                    pointer: login::ACCESS_TOKEN.into(),
                }),
                host: launch::api_credential_host(self.config.api_base_url.as_deref()).into(),
                header: "Authorization".into(),
                value: "Bearer {secret}".into(),
            },
            // A long-lived token (`claude setup-token`), put in the launch's variable from
            // beside the profile: sent as a bearer to the model API.
            CredentialDecl {
                id: "claude-token".into(),
                source: CredentialSource_NE::new(CredentialSource::Environment {
                    name: login::TOKEN_VARIABLE.into(),
                }),
                host: launch::api_credential_host(self.config.api_base_url.as_deref()).into(),
                header: "Authorization".into(),
                value: "Bearer {secret}".into(),
            },
            // Its refresh token: sent only to the OAuth host, never from a sandbox (no
            // header: the host keeps it out and carries it nowhere).
            CredentialDecl {
                id: "claude-login-refresh".into(),
                source: CredentialSource_NE::new(CredentialSource::ProfileFile {
                    path: file(),
                    pointer: login::REFRESH_TOKEN.into(),
                }),
                host: login::OAUTH_HOST.into(),
                header: "".into(),
                value: "{secret}".into(),
            },
        ])
    }
}

fn describe_login(status: Result<AuthStatus, String>) -> String {
    match status {
        Ok(AuthStatus {
            logged_in: true,
            auth_method,
        }) => match auth_method {
            Some(method) if !method.is_empty() => format!("logged in ({method})"),
            _ => "logged in".to_string(),
        },
        Ok(AuthStatus {
            logged_in: false, ..
        }) => "not logged in (run `claude`, then /login, in your own shell)".to_string(),
        Err(why) => format!("unknown ({why})"),
    }
}

export_plugin!(
    harness,
    name = "claude",
    version = env!("CARGO_PKG_VERSION"),
    new = ClaudeHarness::from_config
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_is_read_by_state_alone() {
        let answer = r#"{"loggedIn":true,"authMethod":"claude.ai","email":"someone@example.com","orgName":"Org"}"#;
        let status: AuthStatus = serde_json::from_str(answer).unwrap();
        let login = describe_login(Ok(status));
        assert_eq!(login, "logged in (claude.ai)");
        assert!(!login.contains("someone"));
    }
}
