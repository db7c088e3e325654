//! stet's Apple `container` runtime: drives Apple's `container` CLI, which runs each
//! sandbox as its own lightweight VM on macOS 26 and Apple silicon.
//!
//! - `cli.rs`: running the CLI (environment from scratch, a time limit on every call) and
//!   reading its errors in both of their forms.
//! - `sandbox.rs`: `container run` / `delete` / `list` / `image inspect`.
//! - `process.rs`: processes as `container exec` children; kill.
//! - `json.rs`: the JSON of `container list`, in its 0.x and 1.x shapes.
//!
//! The platform is checked first, before any command runs: on anything but macOS on
//! Apple silicon the probe says so and stops, and every other method refuses. The library
//! is built for Linux too so that a mixed fleet can ship one plugin set and `stet plugins
//! probe` explains the requirement instead of the plugin silently missing.
//!
//! # The commands it runs
//!
//! | step | command |
//! |---|---|
//! | probe | `container --version`, then `container system status` (exit code only) |
//! | image check | `container image inspect <image>` (exit 0: present) |
//! | create | `container run -d --name stet-<unique> --progress none -l k=v… [--cpus N] [--memory NM] -v /src:/dst[:ro]… [-w dir] -e K=V… -u 0:0 [--network none] <image> sleep infinity` |
//! | spawn | `container exec [-i] [-e K=V…] [-w dir] <id> argv…`, a child process |
//! | kill | `container kill -s KILL <id>`, then the `exec` child's process group is killed |
//! | teardown | `container delete --force <id>`; on a hang `container stop -t 1 <id>` and the delete again |
//! | list | `container list --all --format json`, filtered by label here |
//!
//! Every call has a wall-clock limit and runs with an environment built from scratch
//! (`PATH`, and `HOME` for the CLI's own data); nothing else of the host's environment is
//! passed on. A `container exec` runs as long as its process does: the host bounds it
//! through kill, and kill is bounded.
//!
//! # How it differs from the Docker runtime
//!
//! - **Processes run as root inside.** A bind mount is virtiofs with no uid mapping
//!   (apple/container#165): inside, every mounted file belongs to root, so any other
//!   user could not write the lane. `SandboxSpec::user` is therefore not used; sandboxes
//!   run as `0:0` (`-u 0:0`, whatever the image's `USER`). Files they write appear on the
//!   host as the user who runs the VM, that is the person running stet, so the lane stays
//!   theirs and usable. A file created with a mode lacking owner-read fails with EACCES
//!   on a mount (#1344).
//! - **Git worktrees.** A worktree's `.git` is a file pointing by absolute path into the
//!   main repository (`gitdir: /abs/main/.git/worktrees/<name>`). For each writable mount
//!   that holds such a file, the main repository's `.git` (the worktree's common dir) is
//!   mounted too, writable, at the identical path, so git works inside.
//! - **Start-up.** Each sandbox boots a VM: about 0.8 s per `container run`, against about
//!   0.2 s for Docker. `container run` gets its own, longer limit (`start_timeout`).
//! - **Kill kills the sandbox's processes**, as in the Docker runtime: the CLI forwards
//!   SIGTERM/SIGINT to the process but a SIGKILL of the CLI leaves the process running in
//!   the VM, and an exec'd process cannot be signalled by itself. So kill is
//!   `container kill -s KILL <sandbox>`, which ends every process of the sandbox (the
//!   sandbox then waits for its teardown), followed by a SIGKILL of the `exec` CLI so that
//!   `wait` returns at once. A killed process is reported as ended by signal 9. When the
//!   service cannot kill (the call hangs or fails), the CLI is sent SIGTERM, which it
//!   forwards to the process; if the CLI has not ended 3 s later it is killed and kill
//!   answers an error saying the process may still run.
//! - **Exit statuses** are the CLI's exit code, which is the process's. A process ended by
//!   signal N is reported by the CLI as 128 + N, so codes 129–159 are read as signals: a
//!   process that calls `exit(137)` itself reads as killed by signal 9. A missing
//!   executable is 255 (#2210), like `exit 255`. The CLI's own failures (sandbox gone or
//!   stopped, service down, arguments refused) are told from the process's exit by the
//!   CLI's `Error:` line naming the sandbox, and answered as errors.
//! - **Out-of-memory kills cannot be read**: the CLI reports no such thing, so
//!   `out_of_memory` is always false; such a process reads as killed by signal 9.
//! - **Limits.** `--cpus` takes whole CPUs (a fraction is rounded up); `--memory` is in
//!   MiB (rounded up) and the service refuses less than 200 MiB, so a smaller limit is
//!   refused here. There is no process-count limit: `Limits::pids` is not enforced (the
//!   VM's memory bounds it).
//! - **Labels** are stored exactly as given; the CLI refuses a value holding `=`, so such
//!   a label is refused with an error rather than encoded.
//! - **Mount sources must be absolute paths**: a `-v` source that is not a path is taken
//!   as a volume name and created silently. Relative sources, and paths with `:` (which
//!   `-v` cannot quote), are refused.
//! - **Environment values are command-line arguments** of the CLI (`-e K=V`), visible in
//!   the host's process list while the call runs.
//! - **Network**: none (`--network none`, no interface but loopback) or the default
//!   network; an allow-list of hosts is unsupported.
//! - **No terminals yet** (`spawn_terminal` answers unsupported): the CLI needs a
//!   pseudo-terminal on the host side for `exec -t -i`.
//! - **JSON**: `container list` is read in its 0.x and 1.x shapes (`json.rs`).
//!
//! # Settings (`[plugins.apple-container]`)
//!
//! - `binary`: the `container` executable; else looked up on a fixed `PATH`
//!   (`/usr/local/bin`, `/opt/homebrew/bin`, the system's).
//! - `skip_platform_check` (default false): skip the macOS/Apple silicon check. **For
//!   testing against the stand-in on other platforms; never for real use.**
//! - `command_timeout` (default `30s`): every short call.
//! - `start_timeout` (default `90s`): `container run`, which boots the VM.
//! - `status_timeout` (default `4s`): `container --version` and `container system status`
//!   in the probe, which has hung for ever (apple/container#2275). Below the host's own
//!   probe limit (5 s by default) so that the plugin's answer, with its remedy, arrives
//!   first.
//!
//! Durations are written like `30s`, `1500ms` or `2m`, or as a number of seconds.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use stet_plugin_api::{
    export_plugin, ImageStatus, Label, PluginError, ProbeReport, ProcessPlugin, ProcessSpec,
    RuntimePlugin, SandboxInfo, SandboxSpec, TerminalPlugin, TerminalSize,
};
use stet_plugin_support::{find_on_path, platform};

mod cli;
mod json;
mod process;
mod sandbox;

use cli::{Cli, Limits};

/// The native backend on its platform: preferred over engines that run anywhere.
pub const PRIORITY: i32 = 100;

/// What the probe reports this runtime can do.
pub const CAPABILITIES: &[&str] = &[
    "bind-mounts",
    "network-none",
    "network-open",
    "limits",
    "labels",
    "kill",
    stet_plugin_api::capability::FORWARD_SOCKET,
    stet_plugin_api::capability::FIRST_PROCESS,
];

/// The isolation class the probe states: what Apple's `container` makes of every sandbox.
pub const ISOLATION: &str = "a virtual machine per sandbox, with its own Linux kernel";
/// What it states instead where the platform check is skipped (testing only): there the
/// CLI cannot be Apple's, and nothing is known of what it makes.
pub const ISOLATION_UNCLAIMED: &str =
    "not claimed: the platform check is skipped, so the `container` CLI may be a stand-in";

const KEYS: &str = "the keys are `binary` (the path of the `container` executable), \
     `skip_platform_check` (true only for testing against a stand-in; never for real use), \
     and the time limits `command_timeout`, `start_timeout` and `status_timeout` \
     (durations such as \"30s\")";

/// The plugin's settings, from `[plugins.apple-container]` in stet's configuration.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// The `container` executable; looked up on `PATH` when absent.
    binary: Option<PathBuf>,
    /// Skips the platform check: for testing against the stand-in on other platforms;
    /// never for real use.
    #[serde(default)]
    skip_platform_check: bool,
    command_timeout: Option<Setting>,
    start_timeout: Option<Setting>,
    status_timeout: Option<Setting>,
}

/// A duration as written in the settings.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Setting {
    Seconds(f64),
    Text(String),
}

/// The Apple container runtime.
pub struct AppleContainerRuntime {
    binary: Option<PathBuf>,
    skip_platform_check: bool,
    limits: Limits,
}

impl AppleContainerRuntime {
    /// Builds the runtime from its JSON settings.
    pub fn from_config(config: &str) -> Result<Self, PluginError> {
        let config: Config = serde_json::from_str(config).map_err(|e| {
            PluginError::invalid_input(format!("bad [plugins.apple-container] settings: {e}"))
                .with_remedy(KEYS)
        })?;
        let defaults = Limits::default();
        let limit = |key: &str, setting: &Option<Setting>, default: Duration| match setting {
            None => Ok(default),
            Some(setting) => read_duration(setting).map_err(|why| {
                PluginError::invalid_input(format!(
                    "bad [plugins.apple-container] settings: `{key}`: {why}"
                ))
                .with_remedy(KEYS)
            }),
        };
        Ok(AppleContainerRuntime {
            limits: Limits {
                command: limit("command_timeout", &config.command_timeout, defaults.command)?,
                start: limit("start_timeout", &config.start_timeout, defaults.start)?,
                status: limit("status_timeout", &config.status_timeout, defaults.status)?,
            },
            binary: config.binary,
            skip_platform_check: config.skip_platform_check,
        })
    }

    fn binary(&self) -> Option<PathBuf> {
        match &self.binary {
            Some(path) if path.components().count() > 1 => Some(path.clone()),
            Some(name) => find_on_path(&name.to_string_lossy(), OsStr::new(cli::PATH)),
            None => find_on_path("container", OsStr::new(cli::PATH)),
        }
    }

    /// Whether the platform check passes (or is skipped for testing).
    fn platform_ok(&self) -> bool {
        self.skip_platform_check || supported_platform()
    }

    /// The CLI, for every method but the probe: refused off the platform, and when absent.
    fn cli(&self) -> Result<Arc<Cli>, PluginError> {
        if !self.platform_ok() {
            return Err(PluginError::unavailable(platform_refusal())
                .with_remedy("run stet on a Mac with Apple silicon and macOS 26"));
        }
        let binary = self.binary().ok_or_else(|| {
            PluginError::unavailable("the `container` CLI was not found")
                .with_remedy(cli::INSTALL_REMEDY)
        })?;
        Ok(Arc::new(Cli {
            binary,
            limits: self.limits,
        }))
    }
}

/// The longest time limit taken: a deadline (now + the limit) stays far inside what the
/// clock's arithmetic holds.
const LONGEST: Duration = Duration::from_secs(100 * 31_557_600);

/// `30`, `2.5`, `"30s"`, `"1500ms"`, `"2m"`, `"1h"`, `"2.5m"`: a positive duration of at
/// most 100 years. Text with a unit is read by `humantime`, as the host reads its own
/// durations; a number, or text that is one, is seconds.
fn read_duration(setting: &Setting) -> Result<Duration, String> {
    let duration = match setting {
        Setting::Seconds(seconds) => seconds_duration(*seconds, &seconds.to_string())?,
        Setting::Text(text) => {
            let text = text.trim();
            let written = format!("`{text}`");
            let not_one = |why: String| {
                format!("{written} is not a duration{why}; write it like `30s`, `1500ms` or `2m`")
            };
            if !text.is_empty() && text.chars().all(|c| c.is_ascii_digit() || c == '.') {
                let seconds: f64 = text.parse().map_err(|_| not_one(String::new()))?;
                seconds_duration(seconds, &written)?
            } else {
                let duration =
                    humantime::parse_duration(text).map_err(|e| not_one(format!(" ({e})")))?;
                if duration > LONGEST {
                    return Err(too_long(&written));
                }
                duration
            }
        }
    };
    if duration.is_zero() {
        return Err("a time limit must be positive".to_string());
    }
    Ok(duration)
}

/// A number of seconds (as the person `written` it) as a duration.
fn seconds_duration(seconds: f64, written: &str) -> Result<Duration, String> {
    if seconds.is_nan() || seconds < 0.0 {
        Err(format!("{written} is not a duration"))
    } else if seconds > LONGEST.as_secs_f64() {
        Err(too_long(written))
    } else {
        Ok(Duration::from_secs_f64(seconds))
    }
}

fn too_long(written: &str) -> String {
    format!("{written} is longer than 100 years, the longest time limit")
}

fn supported_platform() -> bool {
    cfg!(target_os = "macos") && cfg!(target_arch = "aarch64")
}

fn platform_refusal() -> String {
    format!(
        "needs macOS 26 on Apple silicon; this machine is {}",
        platform()
    )
}

impl RuntimePlugin for AppleContainerRuntime {
    fn probe(&self) -> Result<ProbeReport, PluginError> {
        if !self.platform_ok() {
            return Ok(ProbeReport::unavailable(
                platform_refusal(),
                "run stet on a Mac with Apple silicon and macOS 26",
            )
            .with_fact("platform", platform()));
        }
        let Some(binary) = self.binary() else {
            return Ok(ProbeReport::unavailable(
                "the `container` CLI is not on PATH",
                "install Apple's container tool (the signed .pkg from its releases, or Homebrew) \
                 and run `container system start --enable-kernel-install`",
            ));
        };
        let cli = Cli {
            binary: binary.clone(),
            limits: self.limits,
        };
        let version = match cli.run(&["--version"], self.limits.status) {
            Ok(out) if out.success() => {
                cli::parse_version(&out.stdout).unwrap_or_else(|| "unknown".to_string())
            }
            Ok(out) => {
                return Ok(ProbeReport::unavailable(
                    format!(
                        "`{} --version` failed: {}",
                        binary.display(),
                        cli::error_text(&out.stderr)
                    ),
                    "reinstall Apple's container tool",
                ))
            }
            Err(e) => {
                return Ok(ProbeReport::unavailable(
                    format!("`{} --version`: {}", binary.display(), e.message),
                    "reinstall Apple's container tool",
                ))
            }
        };
        if cli::major_minor(&version).is_some_and(|v| v < cli::OLDEST) {
            return Ok(ProbeReport::unavailable(
                format!(
                    "container {version} is too old: stet needs 0.7 or later \
                     (for `--progress none` and `--network none`)"
                ),
                "update Apple's container tool (its `update-container.sh`, or a newer .pkg)",
            )
            .with_fact("binary", binary.display().to_string()));
        }
        match cli.run(&["system", "status"], self.limits.status) {
            Ok(out) if out.success() => {
                let mut report = ProbeReport::available(format!("container {version}"), PRIORITY);
                for capability in CAPABILITIES {
                    report = report.with_capability(*capability);
                }
                // Apple's `container` boots each sandbox as its own VM with its own Linux
                // kernel. Claimed only where that CLI can be the real one: with the
                // platform check skipped (tests, on Linux) the CLI is a stand-in whose
                // sandboxes share this host's kernel, and the host's `own-kernel` wall
                // would rightly find the claim false.
                let isolation = if supported_platform() {
                    report = report.with_capability(stet_plugin_api::capability::OWN_KERNEL);
                    ISOLATION
                } else {
                    ISOLATION_UNCLAIMED
                };
                report = report
                    .with_fact(stet_plugin_api::fact::ISOLATION, isolation)
                    .with_fact("binary", binary.display().to_string())
                    .with_fact("platform", platform())
                    .with_fact("user", "root inside (bind mounts have no uid mapping)");
                if !supported_platform() {
                    report = report.with_fact(
                        "platform-check",
                        "skipped (skip_platform_check: for testing only)",
                    );
                }
                Ok(report)
            }
            Ok(out) => {
                let said = [out.stdout.trim(), out.stderr.trim()]
                    .into_iter()
                    .find(|s| !s.is_empty())
                    .and_then(|s| s.lines().next())
                    .map(|l| format!(" ({})", l.trim_start_matches("Error: ")))
                    .unwrap_or_default();
                Ok(ProbeReport::unavailable(
                    format!(
                        "container {version} is installed but its system service is not running{said}"
                    ),
                    "run `container system start --enable-kernel-install` (in a logged-in macOS session)",
                )
                .with_fact("binary", binary.display().to_string()))
            }
            Err(e) => Ok(ProbeReport::unavailable(
                format!("`container system status`: {}", e.message),
                cli::RESTART_REMEDY,
            )
            .with_fact("binary", binary.display().to_string())),
        }
    }

    fn create_sandbox(&self, spec: SandboxSpec) -> Result<SandboxInfo, PluginError> {
        let cli = self.cli()?;
        sandbox::create(&cli, spec)
    }

    fn spawn(
        &self,
        sandbox: &str,
        spec: ProcessSpec,
    ) -> Result<Box<dyn ProcessPlugin>, PluginError> {
        let cli = self.cli()?;
        Ok(Box::new(process::start(cli, sandbox, spec)?))
    }

    /// A forwarded socket is a `--volume` of the socket: Apple's runtime relays a mounted
    /// unix socket into the VM over vsock (its RuntimeService turns a socket mount into a
    /// `UnixSocketConfiguration` directed into the container), which needs no network, so
    /// it works with `--network none`. (`--publish-socket` is the other direction, out of
    /// the container.) A first process is exec'd into the new sandbox at once.
    fn start(
        &self,
        spec: SandboxSpec,
        options: Vec<stet_plugin_api::SandboxOption>,
    ) -> Result<(SandboxInfo, Option<Box<dyn ProcessPlugin>>), PluginError> {
        stet_plugin_api::start_by_spawning(
            self,
            spec,
            options,
            stet_plugin_api::SocketForwarding::AsMount,
        )
    }

    fn teardown(&self, sandbox: &str) -> Result<(), PluginError> {
        let cli = self.cli()?;
        sandbox::remove(&cli, sandbox)
    }

    fn list_sandboxes(&self, labels: &[Label]) -> Result<Vec<SandboxInfo>, PluginError> {
        let cli = self.cli()?;
        sandbox::list(&cli, labels)
    }

    fn image_status(&self, image: &str) -> Result<ImageStatus, PluginError> {
        let cli = self.cli()?;
        sandbox::image_status(&cli, image)
    }

    fn spawn_terminal(
        &self,
        _sandbox: &str,
        _spec: ProcessSpec,
        _size: TerminalSize,
    ) -> Result<Box<dyn TerminalPlugin>, PluginError> {
        Err(PluginError::unsupported(
            "the apple-container plugin cannot run processes on a terminal yet",
        )
        .with_remedy("run this with another runtime (`--runtime docker`)"))
    }
}

export_plugin!(
    runtime,
    name = "apple-container",
    version = env!("CARGO_PKG_VERSION"),
    new = AppleContainerRuntime::from_config
);

#[cfg(test)]
mod tests {
    use super::*;
    use stet_plugin_api::ErrorCode;

    #[test]
    #[cfg(not(all(target_os = "macos", target_arch = "aarch64")))]
    fn probe_names_the_platform_requirement_off_apple_silicon() {
        let report = AppleContainerRuntime::from_config("{}")
            .unwrap()
            .probe()
            .unwrap();
        assert!(!report.available);
        assert!(
            report.reason.contains("macOS 26 on Apple silicon"),
            "{}",
            report.reason
        );
        assert_eq!(
            report.remedy.as_str(),
            "run stet on a Mac with Apple silicon and macOS 26"
        );
    }

    #[test]
    #[cfg(not(all(target_os = "macos", target_arch = "aarch64")))]
    fn every_method_refuses_off_apple_silicon_before_running_anything() {
        // `binary` names something that would fail loudly if it were run.
        let runtime =
            AppleContainerRuntime::from_config(r#"{"binary":"/nonexistent/container"}"#).unwrap();
        let e = runtime
            .list_sandboxes(&[Label::new("stet.managed", "true")])
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::UNAVAILABLE);
        assert!(
            e.message.contains("needs macOS 26 on Apple silicon"),
            "{}",
            e.message
        );
        assert_eq!(
            runtime.teardown("x").unwrap_err().code,
            ErrorCode::UNAVAILABLE
        );
        assert_eq!(
            runtime.image_status("x").unwrap_err().code,
            ErrorCode::UNAVAILABLE
        );
    }

    #[test]
    fn skipping_the_platform_check_reaches_the_binary() {
        let runtime = AppleContainerRuntime::from_config(
            r#"{"binary":"/nonexistent/container","skip_platform_check":true}"#,
        )
        .unwrap();
        let report = runtime.probe().unwrap();
        assert!(!report.available);
        assert!(
            report.reason.contains("/nonexistent/container"),
            "{}",
            report.reason
        );
        let e = runtime.teardown("x").unwrap_err();
        assert_eq!(e.code, ErrorCode::UNAVAILABLE);
        assert!(
            e.message.contains("could not run /nonexistent/container"),
            "{}",
            e.message
        );
    }

    #[test]
    fn unknown_keys_are_refused_naming_the_keys() {
        let e = AppleContainerRuntime::from_config(r#"{"binray":"/x"}"#)
            .err()
            .unwrap();
        assert_eq!(e.code, ErrorCode::INVALID_INPUT);
        assert!(
            e.message.contains("unknown field `binray`"),
            "{}",
            e.message
        );
        for key in [
            "binary",
            "skip_platform_check",
            "command_timeout",
            "start_timeout",
            "status_timeout",
        ] {
            assert!(e.remedy.contains(key), "{key}: {}", e.remedy);
        }
    }

    #[test]
    fn time_limits_are_read_from_text_or_seconds() {
        let runtime = AppleContainerRuntime::from_config(
            r#"{"command_timeout":"1500ms","start_timeout":120,"status_timeout":"2s"}"#,
        )
        .unwrap();
        assert_eq!(
            runtime.limits,
            Limits {
                command: Duration::from_millis(1500),
                start: Duration::from_secs(120),
                status: Duration::from_secs(2),
            }
        );
        assert_eq!(
            AppleContainerRuntime::from_config("{}").unwrap().limits,
            Limits::default()
        );
        assert_eq!(
            read_duration(&Setting::Text("2m".into())).unwrap(),
            Duration::from_secs(120)
        );
        assert_eq!(
            read_duration(&Setting::Text("2.5m".into())).unwrap(),
            Duration::from_secs(150)
        );
        assert_eq!(
            read_duration(&Setting::Text("2.5".into())).unwrap(),
            Duration::from_millis(2500)
        );
        for bad in [
            r#"{"command_timeout":"0s"}"#,
            r#"{"start_timeout":"soon"}"#,
            r#"{"status_timeout":-1}"#,
        ] {
            let e = AppleContainerRuntime::from_config(bad).err().unwrap();
            assert_eq!(e.code, ErrorCode::INVALID_INPUT, "{bad}");
            assert!(e.message.contains("_timeout`"), "{}", e.message);
        }
    }

    #[test]
    fn huge_time_limits_are_refused_naming_the_value_never_a_panic() {
        for (config, value) in [
            (
                r#"{"start_timeout":1e30}"#,
                "1000000000000000000000000000000",
            ),
            (r#"{"start_timeout":"1e30"}"#, "`1e30`"),
            (
                r#"{"start_timeout":"99999999999999999999999s"}"#,
                "`99999999999999999999999s`",
            ),
            (
                r#"{"start_timeout":"18446744073709551615s"}"#,
                "`18446744073709551615s`",
            ),
            (r#"{"start_timeout":"101years"}"#, "`101years`"),
            (r#"{"start_timeout":4000000000}"#, "4000000000"),
            (
                r#"{"start_timeout":"99999999999999999999.5"}"#,
                "`99999999999999999999.5`",
            ),
        ] {
            let e = AppleContainerRuntime::from_config(config).err().unwrap();
            assert_eq!(e.code, ErrorCode::INVALID_INPUT, "{config}");
            assert!(e.message.contains("`start_timeout`"), "{}", e.message);
            assert!(e.message.contains(value), "{config}: {}", e.message);
        }
        assert_eq!(
            read_duration(&Setting::Text("100years".into())).unwrap(),
            LONGEST
        );
    }

    #[test]
    fn terminals_are_refused_with_a_way_out() {
        let runtime = AppleContainerRuntime::from_config("{}").unwrap();
        let e = runtime
            .spawn_terminal(
                "x",
                ProcessSpec {
                    argv: vec!["sh".into()].into(),
                    env: Default::default(),
                    workdir: stet_plugin_api::ROption::RNone,
                    stdin: Default::default(),
                },
                TerminalSize { rows: 24, cols: 80 },
            )
            .err()
            .unwrap();
        assert_eq!(e.code, ErrorCode::UNSUPPORTED);
        assert!(e.remedy.contains("--runtime docker"));
    }
}
