//! stet's Claude Code harness: runs `claude -p` on one walled profile.
//!
//! This issue's cut implements the probe: the binary is found and answers `--version`, and
//! `claude auth status` says whether a login is present. The login is read by state alone
//! (the JSON `loggedIn` boolean and the method's kind): no account identifier, e-mail or
//! organisation is ever copied out of its answer, and no credential file is ever read.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use stet_plugin_api::{
    export_plugin, ExitStatus, HarnessContext, HarnessPlugin, Launch, Outcome, PluginError,
    ProbeReport, Profile, Role, RoleRequest, WallCheck,
};
use stet_plugin_support::{find_on_path, run_bounded, CommandOutput};

const PRIORITY: i32 = 50;
const COMMAND_LIMIT: Duration = Duration::from_secs(10);

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// The `claude` executable; looked up on `PATH` when absent.
    binary: Option<PathBuf>,
}

/// The Claude Code harness.
pub struct ClaudeHarness {
    config: Config,
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
            PluginError::invalid_input(format!("bad [plugins.claude] settings: {e}"))
                .with_remedy("the only key is `binary`, the path of the `claude` executable")
        })?;
        Ok(ClaudeHarness { config })
    }

    fn binary(&self) -> Option<PathBuf> {
        self.config
            .binary
            .clone()
            .or_else(|| find_on_path("claude", &std::env::var_os("PATH").unwrap_or_default()))
    }

    /// Runs `claude` with an environment built from scratch: a plain PATH, HOME, and the
    /// switches that keep it from updating itself or phoning home. Nothing else of the
    /// host's environment (no key, no token, no provider switch) reaches it.
    fn claude(&self, binary: &Path, args: &[&str]) -> Result<CommandOutput, String> {
        let home = std::env::var_os("HOME").unwrap_or_default();
        let env: [(&str, &OsStr); 5] = [
            ("PATH", OsStr::new("/usr/local/bin:/usr/bin:/bin")),
            ("HOME", &home),
            ("TERM", OsStr::new("dumb")),
            ("DISABLE_AUTOUPDATER", OsStr::new("1")),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", OsStr::new("1")),
        ];
        run_bounded(binary, args, &env, COMMAND_LIMIT).map_err(|e| e.to_string())
    }
}

impl HarnessPlugin for ClaudeHarness {
    fn probe(&self) -> Result<ProbeReport, PluginError> {
        let Some(binary) = self.binary() else {
            return Ok(ProbeReport::unavailable(
                "the `claude` CLI is not on PATH",
                "install Claude Code (https://code.claude.com) or set `binary` under [plugins.claude] in stet.toml",
            ));
        };
        let version = match self.claude(&binary, &["--version"]) {
            Ok(out) if out.success() => out.stdout.trim().to_string(),
            Ok(out) => {
                return Ok(ProbeReport::unavailable(
                    format!(
                        "`{} --version` exited with {:?}: {}",
                        binary.display(),
                        out.code,
                        out.stderr.trim()
                    ),
                    "reinstall Claude Code",
                ))
            }
            Err(e) => {
                return Ok(ProbeReport::unavailable(
                    format!("`{} --version`: {e}", binary.display()),
                    "reinstall Claude Code",
                ))
            }
        };
        let login = match self.claude(&binary, &["auth", "status", "--json"]) {
            Ok(out) => read_login(&out.stdout),
            Err(e) => format!("unknown (`claude auth status`: {e})"),
        };
        Ok(ProbeReport::available(version, PRIORITY)
            .with_fact("binary", binary.display().to_string())
            .with_fact("login", login))
    }

    fn profile(&self, _context: &HarnessContext) -> Result<Profile, PluginError> {
        Err(not_yet("profile"))
    }

    fn write_settings(
        &self,
        _context: &HarnessContext,
        _profile: &Profile,
    ) -> Result<String, PluginError> {
        Err(not_yet("write_settings"))
    }

    fn check_walls(
        &self,
        _context: &HarnessContext,
        _profile: &Profile,
    ) -> Result<Vec<WallCheck>, PluginError> {
        Err(not_yet("check_walls"))
    }

    fn launch(&self, _request: &RoleRequest) -> Result<Launch, PluginError> {
        Err(not_yet("launch"))
    }

    fn read_proof(&self, _output: &[u8]) -> Result<Vec<WallCheck>, PluginError> {
        Err(not_yet("read_proof"))
    }

    fn read_outcome(
        &self,
        _role: Role,
        _output: &[u8],
        _exit: ExitStatus,
    ) -> Result<Outcome, PluginError> {
        Err(not_yet("read_outcome"))
    }
}

/// Reduces `claude auth status --json` to a state word. Odd output is "unknown", never a
/// guess: `loggedIn` is the only field trusted.
fn read_login(stdout: &str) -> String {
    match serde_json::from_str::<AuthStatus>(stdout.trim()) {
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
        Err(_) => "unknown (`claude auth status` did not answer in JSON)".to_string(),
    }
}

fn not_yet(operation: &str) -> PluginError {
    stet_plugin_support::not_yet("claude", env!("CARGO_PKG_VERSION"), operation)
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
        let login = read_login(answer);
        assert_eq!(login, "logged in (claude.ai)");
        assert!(!login.contains("someone"));
        assert!(
            read_login(r#"{"loggedIn":false,"authMethod":"none"}"#).starts_with("not logged in")
        );
        assert!(read_login("Not logged in.").starts_with("unknown"));
    }
}
