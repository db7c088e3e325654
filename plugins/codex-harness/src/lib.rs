//! stet's Codex harness: `codex exec` (the Codex CLI, 0.163.0 measured) on one walled
//! `CODEX_HOME`.
//!
//! - `profile.rs`: the walled profile, `<profiles root>/.codex` (hidden, so the Claude
//!   harness's "exactly one visible profile" still holds beside it), and what in it Codex
//!   would read besides stet's files.
//! - `config.rs`: the walled `config.toml` and `rules/stet.rules`, exact text; what Codex
//!   reads from a lane and calls besides the model API, and how each is off (or why not).
//! - `login.rs`: the stored login (`auth.json`) read by shape: its kind (ChatGPT, or an API
//!   key, refused), its expiry (the access token's JWT `exp`), the refresh's copy and
//!   settling.
//! - `launch.rs`: a role's `codex exec`, the proof, `codex login --device-auth`, the
//!   refresh; what a role can and cannot be denied.
//! - `events.rs`, `outcome.rs`: `--json` events (and the proof's session record) read into
//!   facts, a typed outcome and the receipt's figures (a cost estimate from a price table).
//! - `transcript.rs`: the events rendered for `stet log` and the board.
//!
//! The login is read by state and shape alone: no account, e-mail or token is copied out or
//! printed. Its three tokens are declared (`credentials`) and sealed by the host: each
//! call's copy of the profile holds stand-ins, swapped for the real access token by the
//! host's gateway on the model API's host and path only. Nothing of a copy is carried back
//! (the default `settle_profile`): the copy holds stand-ins, and Codex cannot renew a login
//! in there (the OAuth host is unreachable; `login_expiry` keeps the access token's `exp`
//! well beyond any call).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;
use stet_plugin_api::{
    export_plugin, wall as walls, CallOutcome, CredentialDecl, CredentialSource,
    CredentialSource_NE, ExitStatus, HarnessContext, HarnessPlugin, Launch, Outcome, OutcomeCode,
    OutcomeKind, PluginError, ProbeReport, Profile, Rendered, Role, RoleRequest, WallCheck,
    WallReport, WallState, WALL_CANARY,
};
use stet_plugin_support::{find_on_path, run_clean, Ran};

mod config;
mod events;
mod launch;
mod login;
mod outcome;
mod profile;
mod transcript;

/// The readers of what the agent writes, for the fuzz targets (`fuzz/`) alone: built only
/// under cargo-fuzz's `--cfg fuzzing`.
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing {
    use stet_plugin_api::ExitStatus;

    /// A call's `--json` output (and a proof's session record), read every way.
    pub fn read_call(output: &[u8], exit: ExitStatus) {
        let run = crate::events::read(output, crate::config::CANARY_JUSTIFICATION);
        let _ = crate::outcome::call(&run, exit, Some("gpt-5"), 1_796_390_940);
        let _ = crate::proof_walls(&run);
        let _ = crate::transcript::render(output, false);
        let _ = crate::transcript::render(output, true);
        if let Ok(text) = std::str::from_utf8(output) {
            let _ = crate::outcome::reset_time(text, 1_796_390_940);
            let _ = crate::login::jwt_exp(text);
        }
    }
}

/// What this harness writes into a call's `CODEX_HOME` and how it runs `codex exec`, for
/// the tests that run the real Codex CLI on exactly that with no host in between
/// (`tests/e2e/codex_cli.rs`): they test the plugin's own files, never a copy of them.
/// Not part of the plugin's interface.
#[doc(hidden)]
pub mod walled {
    /// The walled `config.toml`, its provider's base URL `base_url`.
    pub fn config(base_url: &str, model: Option<&str>) -> String {
        crate::config::text(&crate::config::Walled { base_url, model })
    }

    /// `config.toml`'s place in `CODEX_HOME`.
    pub const CONFIG_FILE: &str = crate::config::FILE;

    /// The exec-policy rules, and their place in `CODEX_HOME`.
    pub fn rules() -> (String, String) {
        (
            format!("{}/{}", crate::config::RULES_DIR, crate::config::RULES_FILE),
            crate::config::rules(),
        )
    }

    /// The arguments of an agent's `codex exec` in the lane `workdir` (the prompt on
    /// standard input), after the binary.
    pub fn exec_args(workdir: &str) -> Vec<String> {
        crate::launch::exec_argv("codex", workdir, true)
            .into_iter()
            .skip(1)
            .collect()
    }
}

const PRIORITY: i32 = 40;
const COMMAND_LIMIT: Duration = Duration::from_secs(10);

/// Variables that would make Codex bill an API key or log in from the environment. Any of
/// them in stet's environment fails the `no-billing-key` wall.
const BILLING_VARIABLES: [&str; 3] = ["OPENAI_API_KEY", "CODEX_API_KEY", "CODEX_ACCESS_TOKEN"];

/// The wall ids of the live proof.
const PROOF_MODE: &str = "proof-mode-as-launched";
const PROOF_CANARY: &str = "proof-guard-refused-canary";

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// The `codex` executable; looked up on `PATH` when absent.
    binary: Option<PathBuf>,
    /// Where the model API is, when not ChatGPT's Codex backend (a gateway, a test fake).
    api_base_url: Option<String>,
    /// The model `config.toml` names; Codex's own default when absent.
    model: Option<String>,
    /// Where the login is renewed, when not `https://auth.openai.com/oauth/token`.
    oauth_token_url: Option<String>,
    /// A PEM file the CLI trusts when it logs in or renews the login
    /// (`CODEX_CA_CERTIFICATE`): a TLS-inspecting relay's, the tests' OAuth double's.
    ca_certificate: Option<PathBuf>,
}

/// The Codex harness.
pub struct CodexHarness {
    config: Config,
    /// The context of the last `profile` call.
    context: Mutex<Option<HarnessContext>>,
}

const INSTALL_HINT: &str =
    "install the Codex CLI (pip install openai-codex-cli-bin, or npm i -g @openai/codex) \
     or set `binary` under [plugins.codex] in stet.toml";

impl CodexHarness {
    /// Builds the harness from its JSON settings.
    pub fn from_config(config: &str) -> Result<Self, PluginError> {
        let config: Config = serde_json::from_str(config).map_err(|e| {
            PluginError::invalid_input(format!("bad [plugins.codex] settings: {e}")).with_remedy(
                "the keys are `binary`, `api_base_url`, `model`, `oauth_token_url` and `ca_certificate`",
            )
        })?;
        Ok(CodexHarness {
            config,
            context: Mutex::new(None),
        })
    }

    fn binary(&self) -> Option<PathBuf> {
        self.config
            .binary
            .clone()
            .or_else(|| find_on_path("codex", &std::env::var_os("PATH").unwrap_or_default()))
    }

    fn require_binary(&self) -> Result<PathBuf, PluginError> {
        self.binary().ok_or_else(|| {
            PluginError::unavailable("the `codex` CLI is not on PATH").with_remedy(INSTALL_HINT)
        })
    }

    fn oauth_url(&self) -> &str {
        self.config
            .oauth_token_url
            .as_deref()
            .unwrap_or(login::OAUTH_TOKEN_URL)
    }

    fn ca(&self) -> Option<String> {
        self.config
            .ca_certificate
            .as_ref()
            .map(|p| p.display().to_string())
    }

    fn walled_config(&self) -> String {
        let base_url = launch::gateway_url(self.config.api_base_url.as_deref());
        config::text(&config::Walled {
            base_url: &base_url,
            model: self.config.model.as_deref(),
        })
    }

    /// Runs `codex` on the host with an environment built from scratch: a plain PATH, HOME,
    /// and `CODEX_HOME` when given. Nothing else of the host's environment (no key, no
    /// token) reaches it.
    fn codex(
        &self,
        binary: &Path,
        args: &[&str],
        codex_home: Option<&Path>,
    ) -> Result<Ran, String> {
        let home = std::env::var_os("HOME").unwrap_or_default();
        let mut env: Vec<(&str, &OsStr)> = vec![
            ("PATH", OsStr::new("/usr/local/bin:/usr/bin:/bin")),
            ("HOME", &home),
            ("TERM", OsStr::new("dumb")),
        ];
        if let Some(dir) = codex_home {
            env.push(("CODEX_HOME", dir.as_os_str()));
        }
        run_clean(binary, args, &env, COMMAND_LIMIT).map_err(|e| e.to_string())
    }

    /// Whether `codex login status` says the profile's login is there: asked on a private
    /// scratch `CODEX_HOME` holding a copy of `auth.json` alone, so that Codex writes
    /// nothing into the profile and reads nothing else of it. The exit code is the answer
    /// (its words, which for a key name part of it, are not read or kept).
    fn login_status(&self, binary: &Path, dir: &Path) -> Result<bool, String> {
        let scratch =
            Scratch::new().map_err(|e| format!("cannot make a scratch CODEX_HOME: {e}"))?;
        let bytes = stet_plugin_support::read_untrusted(&dir.join(login::FILE), 1 << 20)
            .map_err(|e| format!("cannot read {}: {e}", dir.join(login::FILE).display()))?;
        scratch
            .write_private(login::FILE, &bytes)
            .map_err(|e| format!("cannot copy the login to ask about it: {e}"))?;
        let out = self.codex(binary, &["login", "status"], Some(&scratch.0))?;
        Ok(out.success())
    }

    /// `settings-exact`: `config.toml` and the rules are exactly what stet wrote.
    fn settings_wall(&self, dir: &Path) -> WallReport {
        let mut settings = Vec::new();
        let mut absent = false;
        for (path, expected) in [
            (dir.join(config::FILE), self.walled_config()),
            (
                dir.join(config::RULES_DIR).join(config::RULES_FILE),
                config::rules(),
            ),
        ] {
            match stet_plugin_support::read_untrusted(&path, 1 << 20) {
                Ok(bytes) => {
                    if let Err(why) = config::compare(&String::from_utf8_lossy(&bytes), &expected) {
                        settings.push(format!("{}: {why}", path.display()));
                    }
                }
                Err(_) => {
                    absent = true;
                    settings.push(format!("{} is absent", path.display()));
                }
            }
        }
        if settings.is_empty() {
            WallReport::checked(
                walls::SETTINGS_EXACT,
                true,
                "config.toml and rules/stet.rules are exactly what stet wrote",
                "",
            )
        } else {
            WallReport {
                state: if absent {
                    WallState::ABSENT
                } else {
                    WallState::BROKEN
                },
                ..WallReport::checked(
                    walls::SETTINGS_EXACT,
                    false,
                    settings.join("; "),
                    "stet rewrites them at the start of each drive; do not edit them",
                )
            }
        }
    }

    fn remember(&self, context: &HarnessContext) {
        *self.context.lock().unwrap_or_else(|p| p.into_inner()) = Some(context.clone());
    }
}

/// `profile-alone`: the profile is the walled CODEX_HOME, holding stet's files and the
/// login alone, and fit to run.
fn profile_alone_wall(root: &Path, dir: &Path) -> WallReport {
    let expected = root.join(profile::NAME);
    let foreign = profile::foreign(dir);
    let unfit = profile::unfit(dir);
    if dir != expected {
        WallReport::checked(
            walls::PROFILE_ALONE,
            false,
            format!(
                "the profile is {}, not {}",
                dir.display(),
                expected.display()
            ),
            "start the drive again",
        )
    } else if let Some((why, remedy)) = unfit {
        WallReport::checked(walls::PROFILE_ALONE, false, why, &remedy)
    } else if !foreign.is_empty() {
        WallReport::checked(
            walls::PROFILE_ALONE,
            false,
            format!(
                "the walled CODEX_HOME {} holds what Codex would read besides stet's files: {}",
                dir.display(),
                foreign.join(", ")
            ),
            "move them out: the walled CODEX_HOME holds stet's config.toml and rules/stet.rules and Codex's login alone",
        )
    } else {
        WallReport::checked(
            walls::PROFILE_ALONE,
            true,
            format!(
                "{} is the walled CODEX_HOME, holding stet's files and the login alone",
                dir.display()
            ),
            "",
        )
    }
}

/// A private scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> std::io::Result<Scratch> {
        use std::os::unix::fs::DirBuilderExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("stet-codex-status-{}-{nanos}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        Ok(Scratch(dir))
    }

    fn write_private(&self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(self.0.join(name))?
            .write_all(bytes)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes `text` to `path` through a file beside it renamed over it.
fn write_atomic(path: &Path, text: &str) -> Result<(), PluginError> {
    let partial = path.with_extension("stet-partial");
    std::fs::write(&partial, text)
        .and_then(|_| std::fs::rename(&partial, path))
        .map_err(|e| PluginError::backend(format!("cannot write {}: {e}", path.display())))
}

/// The walls the proof's output shows (see [`HarnessPlugin::read_proof_typed`]).
fn proof_walls(run: &events::Run) -> Vec<WallReport> {
    if let Some(failed) = &run.failed {
        if outcome::is_usage_limit(failed)
            || run.reconnects > 0
            || failed.starts_with("Connection failed")
        {
            return vec![WallReport {
                wall: walls::PROOF_MODEL_API_UNREACHABLE.into(),
                state: WallState::UNREACHABLE,
                detail: format!("the proof launch was not served by the model API: {failed}").into(),
                remedy: "check that the model API answers from the sandbox's network (the [plugins.codex] api_base_url, the network route) and the login's usage, then run stet walls again".into(),
            }];
        }
    }
    if !run.started {
        return vec![WallReport::checked(
            walls::PROOF_LAUNCHED,
            false,
            "the proof launch printed no thread.started line: Codex did not start (with --strict-config, a configuration it refused exits before it)",
            "run `stet plugins probe` and `stet walls`; the codex binary, or the walled config.toml, may not suit this Codex version",
        )];
    }
    let mode = (
        run.approval_policy.as_deref(),
        run.sandbox_policy.as_deref(),
        run.provider.as_deref(),
    );
    let mode_held = mode
        == (
            Some("never"),
            Some("danger-full-access"),
            Some(config::PROVIDER),
        );
    let refused = run.canary_rejected && !run.canary_ran;
    vec![
        WallReport::checked(
            walls::PROOF_LAUNCHED,
            true,
            "codex exec started on the walled configuration (--strict-config: no key it does not know)",
            "",
        ),
        WallReport::checked(
            PROOF_MODE,
            mode_held,
            format!(
                "Codex's session record: approval policy {}, sandbox policy {}, model provider {}. \
                 Codex's own sandbox is off by design (it cannot run under Docker's seccomp profile): \
                 stet's sandbox is the wall, and Codex cannot narrow its tools per role, so a review's \
                 lane is read-only by its mount alone",
                mode.0.unwrap_or("not recorded"),
                mode.1.unwrap_or("not recorded"),
                mode.2.unwrap_or("not recorded"),
            ),
            "the walled config.toml was not what Codex ran with: check the profile's config.toml and the Codex version",
        ),
        WallReport::checked(
            PROOF_CANARY,
            refused,
            if run.canary_ran {
                format!("`{WALL_CANARY}` ran: stet's exec-policy rule did not stop it")
            } else if refused {
                format!("Codex's exec policy refused `{WALL_CANARY}` with stet's rule")
            } else if run.canary_calls.is_empty() {
                "the agent never asked to run the canary".to_string()
            } else {
                format!("`{WALL_CANARY}` was asked for, and no refusal by stet's rule was recorded")
            },
            "stet's rules/stet.rules was not loaded: check the profile's rules directory and that the launch does not pass --ignore-rules",
        ),
    ]
}

impl HarnessPlugin for CodexHarness {
    fn probe(&self) -> Result<ProbeReport, PluginError> {
        let Some(binary) = self.binary() else {
            return Ok(ProbeReport::unavailable(
                "the `codex` CLI is not on PATH",
                INSTALL_HINT,
            ));
        };
        let version = match stet_plugin_support::version_of(
            &binary,
            self.codex(&binary, &["--version"], None),
        ) {
            Ok(version) => version,
            Err(why) => return Ok(ProbeReport::unavailable(why, "reinstall the Codex CLI")),
        };
        // No login is read here: the probe knows no walled profile (the host asks the
        // walled profile, `profile`, and shows that).
        Ok(ProbeReport::available(version, PRIORITY)
            .with_fact("binary", binary.display().to_string()))
    }

    fn profile(&self, context: &HarnessContext) -> Result<Profile, PluginError> {
        self.remember(context);
        let dir = profile::ensure(Path::new(context.profiles_root.as_str()))?;
        let binary = self.require_binary()?;
        let (logged_in, route) = match login::kind(&dir) {
            login::Kind::None => (false, "no login yet: run stet profile login".to_string()),
            login::Kind::ApiKey => (
                true,
                "an API key login (billed per token: refused, log in with ChatGPT)".to_string(),
            ),
            login::Kind::ChatGpt => (
                self.login_status(&binary, &dir).unwrap_or(false),
                "ChatGPT login".to_string(),
            ),
        };
        Ok(Profile {
            dir: dir.display().to_string().into(),
            logged_in,
            route: format!("{route} in the walled CODEX_HOME {}", dir.display()).into(),
        })
    }

    fn write_settings(
        &self,
        _context: &HarnessContext,
        profile: &Profile,
    ) -> Result<String, PluginError> {
        let dir = Path::new(profile.dir.as_str());
        let text = self.walled_config();
        let rules = config::rules();
        let rules_dir = dir.join(config::RULES_DIR);
        std::fs::create_dir_all(&rules_dir).map_err(|e| {
            PluginError::backend(format!("cannot make {}: {e}", rules_dir.display()))
        })?;
        write_atomic(&dir.join(config::FILE), &text)?;
        write_atomic(&rules_dir.join(config::RULES_FILE), &rules)?;
        for (path, expected) in [
            (dir.join(config::FILE), &text),
            (rules_dir.join(config::RULES_FILE), &rules),
        ] {
            let written = std::fs::read_to_string(&path).map_err(|e| {
                PluginError::backend(format!("cannot read back {}: {e}", path.display()))
            })?;
            config::compare(&written, expected).map_err(|why| {
                PluginError::backend(format!(
                    "{} did not keep what was written: {why}",
                    path.display()
                ))
            })?;
        }
        Ok(format!(
            "{text}\n# {}/{}\n{rules}",
            config::RULES_DIR,
            config::RULES_FILE
        ))
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
        let dir = Path::new(profile.dir.as_str());
        let mut reports = vec![profile_alone_wall(root, dir)];
        let binary = self.require_binary()?;
        let login_hint = "log in with ChatGPT: stet profile login (Codex's device login; your ChatGPT workspace must allow device codes)";
        let kind = login::kind(dir);
        let unknown = login::unknown_keys(dir);
        reports.push(match kind {
            login::Kind::None => WallReport {
                state: WallState::ABSENT,
                ..WallReport::checked(
                    walls::LOGIN_PRESENT,
                    false,
                    format!("{} holds no login", dir.join(login::FILE).display()),
                    login_hint,
                )
            },
            login::Kind::ApiKey => WallReport::checked(
                walls::LOGIN_PRESENT,
                false,
                "the walled profile holds an API key login, which bills per token",
                login_hint,
            ),
            login::Kind::ChatGpt if !unknown.is_empty() => WallReport::checked(
                walls::LOGIN_PRESENT,
                false,
                format!(
                    "the login file also holds {}, which stet does not know and would not keep out of the sandbox",
                    unknown.join(", ")
                ),
                "log in afresh into an empty profile: move the walled CODEX_HOME away, then stet profile login",
            ),
            login::Kind::ChatGpt => match self.login_status(&binary, dir) {
                Ok(true) => WallReport::checked(walls::LOGIN_PRESENT, true, "logged in with ChatGPT", ""),
                Ok(false) => WallReport::checked(
                    walls::LOGIN_PRESENT,
                    false,
                    "`codex login status` says it is not logged in",
                    login_hint,
                ),
                Err(why) => WallReport::checked(
                    walls::LOGIN_PRESENT,
                    false,
                    format!("`codex login status` did not answer: {why}"),
                    "run `stet plugins probe`; the codex binary may be broken",
                ),
            },
        });
        reports.push(self.settings_wall(dir));
        let mut keys: Vec<String> = BILLING_VARIABLES
            .iter()
            .filter(|name| {
                context
                    .host_env
                    .iter()
                    .any(|v| v.name.as_str() == **name && !v.value.is_empty())
            })
            .map(|name| format!("{name} in the environment"))
            .collect();
        if kind == login::Kind::ApiKey {
            keys.push(format!(
                "an API key login (auth_mode apikey, or OPENAI_API_KEY) in {}",
                dir.join(login::FILE).display()
            ));
        }
        reports.push(WallReport::checked(
            walls::NO_BILLING_KEY,
            keys.is_empty(),
            if keys.is_empty() {
                "no API key in the environment or the login".to_string()
            } else {
                keys.join("; ")
            },
            "unset them, and log in with ChatGPT (stet profile login): a drive runs on the walled ChatGPT login only",
        ));
        Ok(reports)
    }

    fn launch(&self, request: &RoleRequest) -> Result<Launch, PluginError> {
        let binary = self.require_binary()?;
        let codex = binary.display().to_string();
        let setup = launch::Setup {
            codex: &codex,
            api_base_url: self.config.api_base_url.as_deref(),
        };
        Ok(launch::launch(
            &setup,
            request.role,
            &request.profile_dir,
            &request.workdir,
            &request.prompt,
        ))
    }

    fn read_proof(&self, output: &[u8]) -> Result<Vec<WallCheck>, PluginError> {
        Ok(self
            .read_proof_typed(output)?
            .into_iter()
            .map(Into::into)
            .collect())
    }

    /// The proof's output is Codex's events followed by its session record (the launch
    /// prints it): the approval and sandbox policy the turn ran with, and the refusal the
    /// model was given for the canary — which the events alone do not show (Codex leaves
    /// no `command_execution` item for a command its policy refused).
    fn read_proof_typed(&self, output: &[u8]) -> Result<Vec<WallReport>, PluginError> {
        Ok(proof_walls(&events::read(
            output,
            config::CANARY_JUSTIFICATION,
        )))
    }

    fn login_launch(
        &self,
        _context: &HarnessContext,
        profile_dir: &str,
    ) -> Result<Launch, PluginError> {
        let binary = self.require_binary()?;
        Ok(launch::login(
            &binary.display().to_string(),
            profile_dir,
            self.oauth_url(),
            self.ca().as_deref(),
        ))
    }

    fn read_outcome(
        &self,
        role: Role,
        output: &[u8],
        exit: ExitStatus,
    ) -> Result<Outcome, PluginError> {
        let call = self.read_call(role, output, exit)?;
        let kind = match call.kind {
            OutcomeCode::DONE => OutcomeKind::Done,
            OutcomeCode::OUT_OF_SHAPE => OutcomeKind::OutOfShape,
            OutcomeCode::RATE_LIMITED => OutcomeKind::RateLimited,
            OutcomeCode::NOT_LOGGED_IN => OutcomeKind::NotLoggedIn,
            _ => OutcomeKind::Failed,
        };
        Ok(Outcome {
            kind,
            detail: call.detail,
            retry_at_unix: call.retry_at_unix,
            cost_usd: call.cost_usd,
            usage: call.usage,
        })
    }

    fn read_call(
        &self,
        _role: Role,
        output: &[u8],
        exit: ExitStatus,
    ) -> Result<CallOutcome, PluginError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        Ok(outcome::call(
            &events::read(output, config::CANARY_JUSTIFICATION),
            exit,
            self.config.model.as_deref(),
            now,
        ))
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
        Ok(login::expiry_ms(Path::new(profile.dir.as_str())))
    }

    fn refresh_launch(
        &self,
        _context: &HarnessContext,
        profile: &Profile,
        work_dir: &str,
    ) -> Result<Launch, PluginError> {
        let binary = self.require_binary()?;
        let work = Path::new(work_dir);
        login::copy_for_refresh(Path::new(profile.dir.as_str()), work)?;
        // The walled configuration, its provider at the gateway port, where the host's stub
        // answers at once.
        write_atomic(&work.join(config::FILE), &self.walled_config())?;
        Ok(launch::refresh(
            &binary.display().to_string(),
            work_dir,
            self.oauth_url(),
            self.ca().as_deref(),
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
        let in_file = |pointer: &str| {
            CredentialSource_NE::new(CredentialSource::ProfileFile {
                path: login::FILE.into(),
                pointer: pointer.into(),
            })
        };
        Ok(vec![
            // The access token, sent as a bearer to the model API (first: the gateway port
            // serves it).
            CredentialDecl {
                id: "codex-login".into(),
                source: in_file(login::ACCESS_TOKEN),
                host: launch::api_credential_host(self.config.api_base_url.as_deref()).into(),
                header: "Authorization".into(),
                value: "Bearer {secret}".into(),
            },
            // The ID token: Codex reads its claims (a stand-in keeps them); sent nowhere.
            CredentialDecl {
                id: "codex-login-id".into(),
                source: in_file(login::ID_TOKEN),
                host: "".into(),
                header: "".into(),
                value: "{secret}".into(),
            },
            // The refresh token: sent only to the OAuth host, never from an agent's sandbox
            // (no header: the host keeps it out and carries it nowhere).
            CredentialDecl {
                id: "codex-login-refresh".into(),
                source: in_file(login::REFRESH_TOKEN),
                host: stet_plugin_support::url::endpoint(self.oauth_url()).into(),
                header: "".into(),
                value: "{secret}".into(),
            },
        ])
    }
}

export_plugin!(
    harness,
    name = "codex",
    version = env!("CARGO_PKG_VERSION"),
    new = CodexHarness::from_config
);

#[cfg(test)]
mod tests;
