//! stet's command harness: any command-line agent as the implement and review roles.
//!
//! A user's script, `codex exec`, `aider --message`, ... : whatever reads a prompt on
//! standard input, changes the working copy it is started in, and says how it went by its
//! exit code. stet runs every launch in a fresh sandbox of the selected runtime with the
//! lane mounted read-write at the same path and as the working directory.
//!
//! # Configuration (`[plugins.command]` in stet.toml)
//!
//! ```toml
//! [plugins.command]
//! implement = ["/abs/path/agent.sh"]    # required: argv; the prompt arrives on stdin
//! review = ["/abs/path/agent.sh"]       # default: implement (STET_ROLE tells them apart)
//! mounts = ["/opt/agent-runtime"]       # host paths, read-only at the same path
//! network = "none"                      # the default: loopback only
//! # allow_hosts = ["api.example.com"]   # instead: only these hosts, through stet's proxy
//! env = { MODEL = "small" }             # literal variables for the agent
//! profile = ".command"                  # the agent's HOME: <profiles root>/<profile>
//! credential_files = [                  # secrets in a JSON file of the profile
//!   { path = ".codex/auth.json", pointers = ["/tokens/access_token"],
//!     host = "chatgpt.com/backend-api/codex" },           # swapped in on this host and path
//!   { path = ".codex/auth.json", pointers = ["/tokens/refresh_token", "/tokens/id_token"] },
//! ]                                     # (no host: kept out, sent nowhere)
//! ```
//!
//! - An `argv[0]` holding a `/` is a host path: it must exist and be executable, and its
//!   directory is mounted read-only (the file alone when that directory is a system or
//!   home directory such as `/usr/bin` or `/home/me`). A bare name is looked up on the
//!   sandbox's PATH (`/usr/local/bin:/usr/bin:/bin` of the image).
//! - Relative paths (an `argv[0]` such as `./tools/agent.sh`, and `mounts`) are resolved
//!   against the repository root: the first directory containing `.git`, walking up from
//!   where stet runs. Outside a repository they are refused.
//! - `env` names that look like credentials (containing KEY, TOKEN, SECRET, PASSWORD,
//!   CREDENTIAL or AUTH in any case; `AUTHOR` as a word is fine) break the
//!   `no-credential-in-env` wall and no launch is made: the agent keeps its login in its
//!   profile directory instead. `HOME` and `STET_*` cannot be set; `PATH`, `LANG` and
//!   `TERM` replace stet's defaults.
//! - The profile directory is made (mode 0700) when missing, and refused when it is a
//!   symbolic link, not a directory, writable by group or others, or someone else's. It is
//!   mounted read-write (each call gets a fresh copy of it) and is the agent's HOME: log
//!   the agent in there once from your own shell (`HOME=~/.stet/profiles/.command codex
//!   login`), and declare the secrets its login file holds in `credential_files`. The host
//!   puts a stand-in at each declared JSON pointer of the call's copy, swaps the real value
//!   in at its gateway for the declared host, and refuses a call whose copy holds a
//!   credential shape nobody declared, naming the file and the pointer.
//! - There is no `timeout` key: stet bounds every call itself.
//!
//! # The launch
//!
//! The configured argv, with an environment built from scratch and nothing of stet's own
//! environment: `PATH=/usr/local/bin:/usr/bin:/bin`, `HOME=<profile dir>`, `LANG=C.UTF-8`,
//! `TERM=dumb`, `STET_ROLE=implement|review`, the configured `env`; stet adds
//! `STET_SESSION_LOG` and `STET_IN_SANDBOX`. The prompt is standard input.
//!
//! # The outcome protocol (standard output and exit code)
//!
//! - Exit 0: done. The outcome's detail is standard output with the report lines taken
//!   out, trimmed, at most 16 KiB (the tail is kept; a review's first line too).
//! - For review, the first non-empty line must start with `LAND` or `REVISE` (any case),
//!   followed for REVISE by what must change; anything else is out of shape.
//! - Exit 75 (`EX_TEMPFAIL`): a usage limit. A line `stet-retry-at: <unix seconds>` says
//!   when to try again.
//! - Any other exit code, a signal, or running out of memory: failed, naming the code or
//!   signal and the last line printed.
//! - Report lines, anywhere on standard output: `stet-cost-usd: <float>` (the call's cost
//!   in US dollars; the last one counts) and `stet-usage: <key>=<value>` (repeatable; e.g.
//!   `input_tokens=1200`). A malformed report line is dropped.
//!
//! Standard error is not read (the host keeps it with the call).
//!
//! # The walls
//!
//! Static, before any launch: `command-found` (a host-path command exists and is
//! executable), `profile-alone` (the profile is a private real directory),
//! `no-credential-in-env`. Live, from the proof launch, which runs `/bin/sh -c` with a
//! script in place of the agent, with the environment, mounts and network an implement
//! launch gets: `env-from-scratch` (no variable beyond the launch's own, stet's two and
//! what a shell sets by itself), `runs-as-lane-owner` (the agent runs as the user who owns
//! the lane, that is, the person running stet), `network-as-configured` (none: loopback
//! only), `mounts-read-only` (what was asked read-only is), `no-remote-in-lane` and
//! `command-in-sandbox` (each role's command is there and executable).

use std::path::{Path, PathBuf};

use stet_plugin_api::{
    export_plugin, CredentialDecl, CredentialSource, CredentialSource_NE, EntryKind, EnvVar,
    ExitStatus, HarnessContext, HarnessPlugin, Launch, Outcome, PluginError, ProbeReport, Profile,
    Rendered, Role, RoleRequest, TranscriptEntry, WallCheck,
};

mod config;
mod launch;
mod outcome;

/// The reader of the agent's outcome protocol, for the fuzz targets (`fuzz/`) alone: built
/// only under cargo-fuzz's `--cfg fuzzing`.
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing {
    /// The agent's output and exit, read as the outcome protocol says.
    pub fn read(
        role: stet_plugin_api::Role,
        output: &[u8],
        exit: stet_plugin_api::ExitStatus,
    ) -> stet_plugin_api::Outcome {
        crate::outcome::read(role, output, exit)
    }
}
mod profile;
mod proof;
mod secrets;

pub use config::{looks_like_credential, Config, Net};

/// Below the claude harness (50): the command harness is chosen by configuration.
const PRIORITY: i32 = 10;

const CONFIGURE_HINT: &str =
    "set implement = [\"/path/to/agent\"] under [plugins.command] in stet.toml (see examples/agent/README.md)";

/// The command harness.
pub struct CommandHarness {
    config: Config,
}

fn wall(name: &str, held: bool, detail: impl Into<String>, remedy: &str) -> WallCheck {
    WallCheck {
        wall: name.into(),
        held,
        detail: detail.into().into(),
        remedy: if held { "".into() } else { remedy.into() },
    }
}

/// An argv as it is written in stet.toml.
fn show_argv(argv: &[String]) -> String {
    serde_json::to_string(argv).unwrap_or_default()
}

/// Whether a host-path command is there and executable; `Ok(None)` for a bare name.
fn check_command(argv0: &str) -> Result<Option<PathBuf>, String> {
    use std::os::unix::fs::PermissionsExt;
    if !config::is_host_path(argv0) {
        return Ok(None);
    }
    match std::fs::metadata(argv0) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => {
            Ok(Some(PathBuf::from(argv0)))
        }
        Ok(m) if m.is_file() => Err(format!("{argv0} is not executable")),
        Ok(_) => Err(format!("{argv0} is not a file")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(format!("{argv0} does not exist"))
        }
        Err(e) => Err(format!("{argv0} cannot be read: {e}")),
    }
}

impl CommandHarness {
    /// Builds the harness from its JSON settings, resolving relative paths against the
    /// repository that holds the current directory.
    pub fn from_config(json: &str) -> Result<Self, PluginError> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        Self::from_config_in(json, &cwd)
    }

    /// Like [`CommandHarness::from_config`], resolving against the repository holding `cwd`.
    pub fn from_config_in(json: &str, cwd: &Path) -> Result<Self, PluginError> {
        Ok(CommandHarness {
            config: config::parse(json, cwd)?,
        })
    }

    /// Each distinct role's argv: implement, then review when it is another.
    fn roles(&self) -> Vec<(&'static str, &[String])> {
        let mut out = Vec::new();
        if let Some(a) = self.config.argv(false) {
            out.push(("implement", a));
        }
        if let Some(r) = &self.config.review {
            out.push(("review", r.as_slice()));
        }
        out
    }

    fn commands(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for (_, argv) in self.roles() {
            if !out.contains(&argv[0].as_str()) {
                out.push(argv[0].as_str());
            }
        }
        out
    }

    fn credential_names(&self) -> Vec<&str> {
        self.config
            .env
            .keys()
            .map(String::as_str)
            .filter(|n| looks_like_credential(n))
            .collect()
    }

    fn require_implement(&self) -> Result<&[String], PluginError> {
        self.config.argv(false).ok_or_else(|| {
            PluginError::unavailable("no agent command is configured").with_remedy(CONFIGURE_HINT)
        })
    }
}

const CREDENTIAL_REMEDY: &str = "remove them from [plugins.command] env: keep the agent's login in its profile directory (its HOME), \
     where it writes it itself, and declare it in `credential_files` (see examples/agent/README.md), \
     or read a key on the host at each call with `credentials`";

impl HarnessPlugin for CommandHarness {
    fn probe(&self) -> Result<ProbeReport, PluginError> {
        let Some(implement) = self.config.argv(false) else {
            return Ok(ProbeReport::unavailable(
                "no agent command is configured",
                CONFIGURE_HINT,
            ));
        };
        for (role, argv) in self.roles() {
            if let Err(why) = check_command(&argv[0]) {
                return Ok(ProbeReport::unavailable(
                    format!("the {role} command {why}"),
                    format!(
                        "install it there, chmod +x it, or set {role} = [\"/path/to/agent\"] under [plugins.command] in stet.toml"
                    ),
                ));
            }
        }
        for m in &self.config.mounts {
            if std::fs::symlink_metadata(m).is_err() {
                return Ok(ProbeReport::unavailable(
                    format!("the mount {} does not exist", m.display()),
                    "create it, or remove it from `mounts` under [plugins.command] in stet.toml",
                ));
            }
        }
        let mut report = ProbeReport::available(implement[0].clone(), PRIORITY)
            .with_fact("implement", show_argv(implement));
        if let Some(review) = &self.config.review {
            report = report.with_fact("review", show_argv(review));
        }
        Ok(report
            .with_fact("network", self.config.network.describe())
            .with_fact("profile", self.config.profile.clone()))
    }

    fn profile(&self, context: &HarnessContext) -> Result<Profile, PluginError> {
        let dir = profile::ensure(
            Path::new(context.profiles_root.as_str()),
            &self.config.profile,
        )?;
        let command = self
            .config
            .argv(false)
            .map(|a| a[0].as_str())
            .unwrap_or("(none configured)");
        Ok(Profile {
            dir: dir.display().to_string().into(),
            logged_in: true,
            route: format!(
                "the command `{command}` with its own login (if any) from {}",
                dir.display()
            )
            .into(),
        })
    }

    /// The command harness has no settings file: this writes nothing and returns the
    /// effective launch configuration as canonical text (variable names only, never
    /// values).
    fn write_settings(
        &self,
        _context: &HarnessContext,
        profile: &Profile,
    ) -> Result<String, PluginError> {
        let c = &self.config;
        let mut text = String::from(
            "# the command harness writes no settings file; this is its launch configuration\n",
        );
        let argv = |review| {
            c.argv(review)
                .map(show_argv)
                .unwrap_or_else(|| "none".into())
        };
        text.push_str(&format!("implement: {}\n", argv(false)));
        text.push_str(&format!("review: {}\n", argv(true)));
        text.push_str(&format!("home (read-write): {}\n", profile.dir));
        let read_only = launch::read_only_mounts(c, &self.commands());
        text.push_str(&format!(
            "read-only: {}\n",
            read_only
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        ));
        text.push_str(&format!("network: {}\n", c.network.describe()));
        text.push_str(&format!("env: {}\n", launch::env_names(c).join(" ")));
        if !c.credential_files.is_empty() {
            let declared: Vec<String> = c
                .credential_files
                .iter()
                .flat_map(|f| {
                    f.pointers.iter().map(move |p| {
                        format!(
                            "{} ({})",
                            f.id(p),
                            f.host.as_deref().unwrap_or("sent nowhere")
                        )
                    })
                })
                .collect();
            text.push_str(&format!(
                "credentials in the profile: {}\n",
                declared.join(" ")
            ));
        }
        Ok(text)
    }

    fn check_walls(
        &self,
        _context: &HarnessContext,
        profile: &Profile,
    ) -> Result<Vec<WallCheck>, PluginError> {
        let mut walls = Vec::new();
        let roles = self.roles();
        walls.push(if roles.is_empty() {
            wall(
                "command-found",
                false,
                "no agent command is configured",
                CONFIGURE_HINT,
            )
        } else {
            let mut seen = Vec::new();
            let mut broken = Vec::new();
            for (role, argv) in &roles {
                match check_command(&argv[0]) {
                    Ok(Some(path)) => seen.push(format!("{role}: {}", path.display())),
                    Ok(None) => seen.push(format!(
                        "{role}: `{}` looked up on the sandbox's PATH",
                        argv[0]
                    )),
                    Err(why) => broken.push(format!("{role}: {why}")),
                }
            }
            if broken.is_empty() {
                wall("command-found", true, seen.join("; "), "")
            } else {
                wall(
                    "command-found",
                    false,
                    broken.join("; "),
                    "install the agent there and chmod +x it, or fix the path under [plugins.command] in stet.toml",
                )
            }
        });
        let dir = Path::new(profile.dir.as_str());
        walls.push(match profile::unfit(dir) {
            None => wall(
                "profile-alone",
                true,
                format!("{} is a private directory of its own", dir.display()),
                "",
            ),
            Some((why, remedy)) => wall("profile-alone", false, why, &remedy),
        });
        let names = self.credential_names();
        walls.push(if names.is_empty() {
            wall(
                "no-credential-in-env",
                true,
                if self.config.env.is_empty() {
                    "no variables configured".to_string()
                } else {
                    format!(
                        "configured: {}",
                        self.config
                            .env
                            .keys()
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(" ")
                    )
                },
                "",
            )
        } else {
            wall(
                "no-credential-in-env",
                false,
                format!("env names that look like credentials: {}", names.join(" ")),
                CREDENTIAL_REMEDY,
            )
        });
        Ok(walls)
    }

    fn launch(&self, request: &RoleRequest) -> Result<Launch, PluginError> {
        let names = self.credential_names();
        if !names.is_empty() {
            return Err(PluginError::invalid_input(format!(
                "refusing to launch: env names that look like credentials: {}",
                names.join(" ")
            ))
            .with_remedy(CREDENTIAL_REMEDY));
        }
        let implement = self.require_implement()?;
        let c = &self.config;
        let mut launch = match request.role {
            Role::Proof => launch::proof(
                c,
                implement,
                c.argv(true).unwrap_or(implement),
                &request.profile_dir,
                &request.workdir,
            ),
            role => launch::agent(
                c,
                role,
                c.argv(role == Role::Review).unwrap_or(implement),
                &request.profile_dir,
                &request.workdir,
                &request.prompt,
            ),
        };
        // Each credential's secret, read now, in its variable for the host to seal: the
        // host replaces it with a stand-in before the sandbox is made (`credentials`).
        let gateway = |name: &str, authority: &str| {
            EnvVar::new(
                name,
                format!("http://127.0.0.1:{}", c.gateway_port(authority)),
            )
        };
        for credential in &c.credentials {
            let secret = secrets::read(&credential.variable, &credential.from)?;
            launch
                .process
                .env
                .push(EnvVar::new(credential.variable.as_str(), secret));
            if let Some(name) = &credential.base_url {
                launch
                    .process
                    .env
                    .push(gateway(name, credential.authority()));
            }
        }
        // The profile's own secrets stay where they are: the host seals the call's copy.
        for file in &c.credential_files {
            if let (Some(name), Some(authority)) = (&file.base_url, file.authority()) {
                launch.process.env.push(gateway(name, authority));
            }
        }
        Ok(launch)
    }

    fn credentials(
        &self,
        _context: &HarnessContext,
        _profile: &Profile,
    ) -> Result<Vec<CredentialDecl>, PluginError> {
        Ok(self
            .config
            .credentials
            .iter()
            .map(|c| CredentialDecl {
                id: c.variable.as_str().into(),
                source: CredentialSource_NE::new(CredentialSource::Environment {
                    name: c.variable.as_str().into(),
                }),
                host: c.host.as_str().into(),
                header: c.header.as_str().into(),
                value: c.value.as_str().into(),
            })
            .chain(self.config.credential_files.iter().flat_map(|file| {
                file.pointers.iter().map(move |pointer| CredentialDecl {
                    id: file.id(pointer).into(),
                    source: CredentialSource_NE::new(CredentialSource::ProfileFile {
                        path: file.path.as_str().into(),
                        pointer: pointer.as_str().into(),
                    }),
                    // Sent nowhere: no header, so no gateway carries it.
                    host: file.host.as_deref().unwrap_or_default().into(),
                    header: file.header.as_str().into(),
                    value: file.value.as_str().into(),
                })
            }))
            .collect())
    }

    fn read_proof(&self, output: &[u8]) -> Result<Vec<WallCheck>, PluginError> {
        let expected = proof::Expected {
            env: launch::env_names(&self.config),
            network: self.config.network.clone(),
            read_only: launch::read_only_mounts(&self.config, &self.commands()),
        };
        Ok(proof::read(output, &expected))
    }

    fn read_outcome(
        &self,
        role: Role,
        output: &[u8],
        exit: ExitStatus,
    ) -> Result<Outcome, PluginError> {
        Ok(outcome::read(role, output, exit))
    }

    /// The agent is any command: its output has no format this harness knows, so its
    /// lines are shown as they are, as the agent's text (one entry per piece's whole lines).
    fn render_transcript(
        &self,
        _role: Role,
        output: &[u8],
        end: bool,
    ) -> Result<Rendered, PluginError> {
        let mut lines = Vec::new();
        let mut rendered = stet_plugin_api::render_lines(output, end, |line, _| {
            lines.push(String::from_utf8_lossy(line).into_owned());
        });
        if !lines.is_empty() {
            rendered
                .entries
                .push(TranscriptEntry::new(EntryKind::TEXT, lines.join("\n")));
        }
        Ok(rendered)
    }

    fn login_launch(
        &self,
        _context: &HarnessContext,
        profile_dir: &str,
    ) -> Result<Launch, PluginError> {
        let command = self
            .config
            .argv(false)
            .map(|a| a[0].as_str())
            .unwrap_or("your-agent");
        Err(
            PluginError::unsupported("the command harness has no login of its own to run")
                .with_remedy(format!(
                    "log the agent in once from your own shell with the profile as its HOME, \
                     e.g. HOME={profile_dir} {command} login, and declare the file it writes its \
                     login to under [plugins.command] credential_files (see examples/agent/README.md): \
                     a login stet does not know of refuses every call"
                )),
        )
    }
}

export_plugin!(
    harness,
    name = "command",
    version = env!("CARGO_PKG_VERSION"),
    new = CommandHarness::from_config
);

#[cfg(test)]
mod tests {
    use super::*;
    use stet_plugin_api::{EnvVar, Network, RString};

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("stet-command-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn agent(dir: &Path) -> String {
        let path = dir.join("bin/agent.sh");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        stet_exec_support::write_executable(&path, b"#!/bin/sh\necho hi\n").unwrap();
        path.display().to_string()
    }

    fn context(root: &Path) -> HarnessContext {
        HarnessContext {
            profiles_root: root.join("profiles").display().to_string().into(),
            stet_binary: "/usr/bin/stet".into(),
            host_env: vec![EnvVar::new("OPENAI_API_KEY", "host-secret")].into(),
        }
    }

    fn harness(json: &str) -> CommandHarness {
        CommandHarness::from_config_in(json, Path::new("/")).unwrap()
    }

    fn find<'a>(walls: &'a [WallCheck], name: &str) -> &'a WallCheck {
        walls.iter().find(|w| w.wall.as_str() == name).unwrap()
    }

    #[test]
    fn unconfigured_is_unavailable_with_the_remedy() {
        let r = harness("{}").probe().unwrap();
        assert!(!r.available);
        assert!(r
            .remedy
            .contains("set implement = [\"/path/to/agent\"] under [plugins.command]"));
    }

    #[test]
    fn a_configured_command_is_available_and_a_missing_one_is_not() {
        let dir = scratch("probe");
        let path = agent(&dir);
        let r = harness(&format!(r#"{{"implement":["{path}","--go"]}}"#))
            .probe()
            .unwrap();
        assert!(r.available, "{r:?}");
        assert_eq!(r.priority, 10);
        assert_eq!(r.backend_version.as_str(), path);
        assert!(r
            .facts
            .iter()
            .any(|f| f.key.as_str() == "implement" && f.value.contains("--go")));
        let r = harness(r#"{"implement":["/nonexistent/agent"]}"#)
            .probe()
            .unwrap();
        assert!(!r.available);
        assert!(r.reason.contains("does not exist"), "{}", r.reason);
        std::fs::write(dir.join("plain"), "x").unwrap();
        let plain = dir.join("plain").display().to_string();
        let r = harness(&format!(
            r#"{{"implement":["{path}"],"review":["{plain}"]}}"#
        ))
        .probe()
        .unwrap();
        assert!(!r.available);
        assert!(r.reason.contains("review command"), "{}", r.reason);
        assert!(r.reason.contains("not executable"), "{}", r.reason);
        // A bare name is left to the sandbox.
        assert!(
            harness(r#"{"implement":["codex","exec"]}"#)
                .probe()
                .unwrap()
                .available
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn static_walls_hold_and_each_can_break() {
        let dir = scratch("walls");
        let path = agent(&dir);
        let ctx = context(&dir);
        let h = harness(&format!(
            r#"{{"implement":["{path}"],"env":{{"MODEL":"m"}}}}"#
        ));
        let profile = h.profile(&ctx).unwrap();
        assert!(profile.logged_in);
        assert!(profile.route.contains(&format!("the command `{path}`")));
        let walls = h.check_walls(&ctx, &profile).unwrap();
        for w in &walls {
            assert!(w.held, "{w:?}");
        }
        // The host's key is nobody's business here: it is never forwarded.
        let launch = h
            .launch(&RoleRequest {
                role: Role::Implement,
                prompt: "p".into(),
                profile_dir: profile.dir.clone(),
                workdir: "/lane".into(),
            })
            .unwrap();
        assert!(!format!("{launch:?}").contains("host-secret"));

        // command-found
        std::fs::remove_file(&path).unwrap();
        let w = h.check_walls(&ctx, &profile).unwrap();
        assert!(!find(&w, "command-found").held);
        assert!(find(&w, "command-found").detail.contains("does not exist"));
        let bare = harness(r#"{"implement":["codex"]}"#);
        let w = bare.check_walls(&ctx, &profile).unwrap();
        assert!(find(&w, "command-found").held);
        assert!(find(&w, "command-found")
            .detail
            .contains("looked up on the sandbox's PATH"));

        // profile-alone
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(profile.dir.as_str(), std::fs::Permissions::from_mode(0o777))
            .unwrap();
        let w = bare.check_walls(&ctx, &profile).unwrap();
        assert!(!find(&w, "profile-alone").held);
        assert!(find(&w, "profile-alone").remedy.contains("chmod go-w"));
        assert!(bare.profile(&ctx).is_err());

        // no-credential-in-env
        let keyed =
            harness(r#"{"implement":["codex"],"env":{"API_TOKEN":"value-of-token","MODEL":"m"}}"#);
        let w = keyed.check_walls(&ctx, &profile).unwrap();
        let cred = find(&w, "no-credential-in-env");
        assert!(!cred.held);
        assert_eq!(
            cred.detail.as_str(),
            "env names that look like credentials: API_TOKEN"
        );
        assert!(!cred.detail.contains("value-of-token"));
        assert!(cred.remedy.contains("profile directory (its HOME)"));
        let refused = keyed
            .launch(&RoleRequest {
                role: Role::Implement,
                prompt: "p".into(),
                profile_dir: profile.dir.clone(),
                workdir: "/lane".into(),
            })
            .unwrap_err();
        assert!(refused.message.contains("API_TOKEN"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn settings_are_a_canonical_text_and_nothing_is_written() {
        let dir = scratch("settings");
        let ctx = context(&dir);
        let h = harness(
            r#"{"implement":["/opt/a/run"],"review":["judge","--strict"],"mounts":["/data"],"env":{"MODEL":"secret-model-name"}}"#,
        );
        let profile = h.profile(&ctx).unwrap();
        let text = h.write_settings(&ctx, &profile).unwrap();
        assert_eq!(
            text,
            format!(
                "# the command harness writes no settings file; this is its launch configuration\n\
                 implement: [\"/opt/a/run\"]\nreview: [\"judge\",\"--strict\"]\n\
                 home (read-write): {}\nread-only: /opt/a/run /data\nnetwork: none\n\
                 env: PATH HOME LANG TERM STET_ROLE MODEL\n",
                profile.dir
            )
        );
        assert_eq!(text, h.write_settings(&ctx, &profile).unwrap());
        assert_eq!(
            std::fs::read_dir(profile.dir.as_str()).unwrap().count(),
            0,
            "the profile stays empty"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn each_role_gets_its_own_command_and_role_word() {
        let h = harness(r#"{"implement":["/opt/a/run"],"review":["/opt/b/judge"]}"#);
        let request = |role| RoleRequest {
            role,
            prompt: "the prompt".into(),
            profile_dir: "/p/command".into(),
            workdir: "/lane".into(),
        };
        let l = h.launch(&request(Role::Review)).unwrap();
        assert_eq!(l.process.argv[0].as_str(), "/opt/b/judge");
        assert!(l
            .process
            .env
            .iter()
            .any(|v| v.name.as_str() == "STET_ROLE" && v.value.as_str() == "review"));
        assert_eq!(l.network, Network::None);
        let sources: Vec<&RString> = l.mounts.iter().map(|m| &m.source).collect();
        assert_eq!(sources, ["/p/command", "/opt/b/judge"]);
        let l = h.launch(&request(Role::Implement)).unwrap();
        assert_eq!(l.process.argv[0].as_str(), "/opt/a/run");
        let l = h.launch(&request(Role::Proof)).unwrap();
        assert_eq!(l.process.argv[0].as_str(), "/bin/sh");
        let sources: Vec<&RString> = l.mounts.iter().map(|m| &m.source).collect();
        assert_eq!(sources, ["/p/command", "/opt/a/run", "/opt/b/judge"]);
        assert!(l.process.stdin.is_empty());
    }

    #[test]
    fn credential_files_are_declared_pointer_by_pointer_and_their_gateway_is_named() {
        let dir = scratch("files");
        let ctx = context(&dir);
        let h = harness(
            r#"{"implement":["codex"],
                "credentials":[{"host":"api.example.com","from":{"env":"HOME"},"variable":"EXAMPLE_KEY"}],
                "credential_files":[
                  {"path":".codex/auth.json","pointers":["/tokens/access_token"],"host":"chatgpt.com/backend-api/codex","base_url":"CODEX_URL"},
                  {"path":".codex/auth.json","pointers":["/tokens/refresh_token","/tokens/id_token"]}]}"#,
        );
        let profile = h.profile(&ctx).unwrap();
        let decls = h.credentials(&ctx, &profile).unwrap();
        let shown: Vec<(String, String, String, String)> = decls
            .iter()
            .map(|d| {
                let source = match d.source.as_enum().unwrap() {
                    CredentialSource::ProfileFile { path, pointer } => format!("{path} {pointer}"),
                    CredentialSource::Environment { name } => format!("${name}"),
                    _ => unreachable!(),
                };
                (
                    d.id.to_string(),
                    source,
                    d.host.to_string(),
                    d.header.to_string(),
                )
            })
            .collect();
        let row = |a: &str, b: &str, c: &str, d: &str| {
            (a.to_string(), b.to_string(), c.to_string(), d.to_string())
        };
        assert_eq!(
            shown,
            [
                row(
                    "EXAMPLE_KEY",
                    "$EXAMPLE_KEY",
                    "api.example.com",
                    "Authorization"
                ),
                row(
                    ".codex/auth.json#/tokens/access_token",
                    ".codex/auth.json /tokens/access_token",
                    "chatgpt.com/backend-api/codex",
                    "Authorization"
                ),
                row(
                    ".codex/auth.json#/tokens/refresh_token",
                    ".codex/auth.json /tokens/refresh_token",
                    "",
                    ""
                ),
                row(
                    ".codex/auth.json#/tokens/id_token",
                    ".codex/auth.json /tokens/id_token",
                    "",
                    ""
                ),
            ]
        );
        // The second host's gateway, for the agent's base URL; the file is left to the host.
        let launch = h
            .launch(&RoleRequest {
                role: Role::Implement,
                prompt: "p".into(),
                profile_dir: profile.dir.clone(),
                workdir: "/lane".into(),
            })
            .unwrap();
        assert!(
            launch
                .process
                .env
                .iter()
                .any(|v| v.name.as_str() == "CODEX_URL"
                    && v.value.as_str() == "http://127.0.0.1:3181")
        );
        assert_eq!(
            launch.network,
            Network::AllowHosts(vec!["api.example.com".into(), "chatgpt.com".into()].into())
        );
        let text = h.write_settings(&ctx, &profile).unwrap();
        assert!(
            text.ends_with(
                "credentials in the profile: .codex/auth.json#/tokens/access_token (chatgpt.com/backend-api/codex) \
                 .codex/auth.json#/tokens/refresh_token (sent nowhere) .codex/auth.json#/tokens/id_token (sent nowhere)\n"
            ),
            "{text}"
        );
        assert!(text.contains(" CODEX_URL\n"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn read_proof_expects_the_configured_launch() {
        let h = harness(r#"{"implement":["/opt/a/run"],"env":{"MODEL":"m"}}"#);
        let out = "stet-proof 1\nenv PATH\nenv HOME\nenv LANG\nenv TERM\nenv STET_ROLE\nenv MODEL\nenv STET_SESSION_LOG\nenv STET_IN_SANDBOX\nenv PWD\nuid 1000\nlane-owner 1000\nnet lo\nrw /lane\nremote-exit 0\ncommand /opt/a/run yes\nstet-proof-end\n";
        let walls = h.read_proof(out.as_bytes()).unwrap();
        assert!(walls.iter().all(|w| w.held), "{walls:?}");
        // The same report against a launch without MODEL has one name too many.
        let h = harness(r#"{"implement":["/opt/a/run"]}"#);
        let walls = h.read_proof(out.as_bytes()).unwrap();
        let w = find(&walls, "env-from-scratch");
        assert!(!w.held);
        assert!(w.detail.ends_with(": MODEL"), "{}", w.detail);
        // The read-only mount shown writable.
        let out = out.replace("rw /lane\n", "rw /lane\nrw /opt/a/run\n");
        let walls = h.read_proof(out.as_bytes()).unwrap();
        assert!(!find(&walls, "mounts-read-only").held);
    }

    #[test]
    fn a_transcript_is_the_output_s_lines_as_they_are_piece_by_piece() {
        let h = harness(r#"{"implement":["/opt/a/run"]}"#);
        let out = b"stet-usage: instructions=1\nwrote hello.txt\r\n\xff half";
        // A piece that ends inside a line leaves that line for later.
        let first = h.render_transcript(Role::Implement, out, false).unwrap();
        assert_eq!(first.consumed, 44);
        assert_eq!(first.entries.len(), 1);
        assert_eq!(first.entries[0].kind, EntryKind::TEXT);
        assert_eq!(
            first.entries[0].text.as_str(),
            "stet-usage: instructions=1\nwrote hello.txt"
        );
        let rest = h
            .render_transcript(Role::Implement, &out[44..], true)
            .unwrap();
        assert_eq!(rest.consumed, 6);
        assert_eq!(rest.entries[0].text.as_str(), "\u{fffd} half");
        // Nothing whole yet: nothing consumed, no entry.
        let none = h.render_transcript(Role::Review, b"LAN", false).unwrap();
        assert_eq!((none.consumed, none.entries.len()), (0, 0));
    }
}
