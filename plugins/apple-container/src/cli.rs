//! Running Apple's `container` CLI: an environment built from scratch, a wall-clock limit
//! on every call, and its `Error: …` lines read into [`PluginError`]s.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::time::Duration;

use stet_plugin_api::{ErrorCode, PluginError};
use stet_plugin_support::{run_clean, Ran, RunError};

/// The `PATH` every `container` call runs with: where the signed package and Homebrew put
/// it, and the system's own directories. Nothing of the host's `PATH` is used.
pub const PATH: &str = "/usr/local/bin:/opt/homebrew/bin:/usr/bin:/bin:/usr/sbin:/sbin";

/// What to do when the service is not running.
pub const START_REMEDY: &str = "start Apple's container service in a logged-in macOS session: \
     `container system start --enable-kernel-install`";

/// What to do when the service stops answering.
pub const RESTART_REMEDY: &str = "restart Apple's container service: `container system stop`, \
     then `container system start --enable-kernel-install`";

/// What to do when the CLI itself is missing or broken.
pub const INSTALL_REMEDY: &str = "install Apple's container tool (the signed .pkg from \
     github.com/apple/container/releases, or Homebrew), or set `binary` under \
     [plugins.apple-container] in stet.toml";

/// The time limits of the plugin's CLI calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Every short call: list, inspect, kill, stop, delete, image inspect.
    pub command: Duration,
    /// `container run -d`, which boots a VM (about 0.8 s when all is well, much more
    /// under churn, apple/container#1884).
    pub start: Duration,
    /// `container --version` and `container system status` in the probe, which runs
    /// under the host's own probe limit (5 s by default): this one is shorter, so that
    /// the plugin answers with its own reason before the host gives up on it.
    pub status: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            command: Duration::from_secs(30),
            start: Duration::from_secs(90),
            status: Duration::from_secs(4),
        }
    }
}

/// The `container` executable and how long each call may take.
#[derive(Debug, Clone)]
pub struct Cli {
    /// The executable, by path.
    pub binary: PathBuf,
    /// The time limits.
    pub limits: Limits,
}

/// The environment every `container` call runs with, built from scratch: `PATH`, and
/// `HOME` when the host has one (the CLI finds its application data under it). No other
/// variable of the host's reaches the CLI, so none can reach a sandbox either (the CLI
/// copies `SSH_AUTH_SOCK`, and a bare `-e NAME`, from its own environment).
pub fn environment() -> Vec<(&'static str, OsString)> {
    let mut env = vec![("PATH", OsString::from(PATH))];
    if let Some(home) = std::env::var_os("HOME") {
        env.push(("HOME", home));
    }
    env
}

impl Cli {
    /// Runs `container args…` with a wall-clock `limit`; the CLI is killed when it passes.
    /// Any exit status is returned; only a failure to start or the limit is an error.
    pub fn run(&self, args: &[&str], limit: Duration) -> Result<Ran, PluginError> {
        let env = environment();
        let env: Vec<(&str, &OsStr)> = env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
        run_clean(&self.binary, args, &env, limit).map_err(|e| match e {
            RunError::Spawn(e) => {
                PluginError::unavailable(format!("could not run {}: {e}", self.binary.display()))
                    .with_remedy(INSTALL_REMEDY)
            }
            RunError::TimedOut(limit) => PluginError::new(
                ErrorCode::TIMEOUT,
                format!(
                    "`container {}` did not answer within {} and was killed",
                    describe(args),
                    seconds(limit)
                ),
            )
            .with_remedy(RESTART_REMEDY),
        })
    }

    /// Like [`Cli::run`], and a non-zero exit is the CLI's error, mapped.
    pub fn run_ok(&self, args: &[&str], limit: Duration) -> Result<Ran, PluginError> {
        let out = self.run(args, limit)?;
        if out.success() {
            Ok(out)
        } else {
            Err(failure(args, &out))
        }
    }
}

/// The words naming a command (`image inspect`), without its options and operands: what
/// error messages show, so that no label or environment value is repeated in them.
pub fn describe(args: &[&str]) -> String {
    match args {
        [group @ ("system" | "image"), command, ..] if !command.starts_with('-') => {
            format!("{group} {command}")
        }
        [command, ..] => command.to_string(),
        [] => String::new(),
    }
}

/// `4s`, `1.5s`.
pub fn seconds(limit: Duration) -> String {
    format!("{} s", limit.as_secs_f32())
}

/// What kind of failure the CLI reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The service is not running or not answering (an XPC error, the CLI's own hint to
    /// run `container system start`).
    ServiceDown,
    /// The container or image does not exist (`not found`, the older `notFound` code).
    NotFound,
    /// A name is already taken.
    AlreadyExists,
    /// The container is between states (stopping, not yet stopped): worth a retry.
    Busy,
    /// The container is not running (exec, kill).
    NotRunning,
    /// The CLI did not understand its arguments (exit 64): an older or newer CLI.
    Usage,
    /// Anything else.
    Other,
}

/// The CLI's error text: the `Error: ` line and what follows it, without the prefix; the
/// whole of standard error when there is no such line.
///
/// Two forms exist: since container 0.10 `<message>` with an optional ` (cause: "…")`;
/// up to 0.9, and always for stop/kill/delete (which aggregate), `<code>: "<message>"`
/// such as `notFound: "container x not found"`.
pub fn error_text(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().collect();
    let text = match lines.iter().rposition(|l| l.starts_with("Error: ")) {
        Some(i) => {
            let mut text = lines[i]["Error: ".len()..].to_string();
            // The service hint comes on the line after the error; usage text after a
            // parse error is left out.
            for more in &lines[i + 1..] {
                let more = more.trim();
                if more.is_empty() || more.to_ascii_lowercase().starts_with("usage:") {
                    break;
                }
                text.push_str("; ");
                text.push_str(more);
            }
            text
        }
        None => stderr.trim().to_string(),
    };
    const MOST: usize = 600;
    if text.len() > MOST {
        let mut cut = MOST;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}…", &text[..cut])
    } else {
        text
    }
}

/// Classifies an error text (and the exit code: 64 is an argument error).
pub fn classify(text: &str, code: Option<i32>) -> Kind {
    let lower = text.to_ascii_lowercase();
    if lower.contains("xpc connection error")
        || lower.contains("container system start")
        || lower.contains("connection invalid")
        || lower.contains("failed to get a response from apiserver")
        || lower.contains("apiserver is not running")
    {
        Kind::ServiceDown
    } else if lower.contains("not found") || text.contains("notFound") {
        Kind::NotFound
    } else if lower.contains("already exists") || text.starts_with("exists:") {
        Kind::AlreadyExists
    } else if lower.contains("stopping")
        || lower.contains("not yet stopped")
        || lower.contains("not stopped")
    {
        Kind::Busy
    } else if lower.contains("is not running")
        || lower.contains("container is stopped")
        || lower.contains("no runtime client")
    {
        Kind::NotRunning
    } else if code == Some(64) {
        Kind::Usage
    } else {
        Kind::Other
    }
}

/// The error for a `container` call that exited non-zero.
pub fn failure(args: &[&str], out: &Ran) -> PluginError {
    let text = error_text(&out.stderr);
    let text = if text.is_empty() {
        match out.code {
            Some(code) => format!("exit code {code}, no message"),
            None => "killed by a signal, no message".to_string(),
        }
    } else {
        text
    };
    let message = format!("`container {}` failed: {text}", describe(args));
    match classify(&text, out.code) {
        Kind::ServiceDown => PluginError::unavailable(message).with_remedy(START_REMEDY),
        Kind::NotFound => PluginError::not_found(message),
        Kind::Usage => PluginError::backend(message).with_remedy(
            "this `container` does not accept an option stet passes; \
             install container 0.7 or later (`container --version` says which is installed)",
        ),
        Kind::AlreadyExists | Kind::Busy | Kind::NotRunning | Kind::Other => {
            PluginError::backend(message)
        }
    }
}

/// `container CLI version 1.2.2 (build: release, commit: 0000000)` → `1.2.2`: the word
/// after `version`, as the regex `version (\S+)` would take it.
pub fn parse_version(text: &str) -> Option<String> {
    let at = text.find("version ")?;
    let word: String = text[at + "version ".len()..]
        .chars()
        .take_while(|c| !c.is_whitespace())
        .collect();
    (!word.is_empty()).then_some(word)
}

/// The numeric `major.minor` of a version such as `1.2.2` or `0.12.3-rc1`.
pub fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor: String = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some((major, minor.parse().ok()?))
}

/// The oldest CLI the plugin drives: `--progress none` arrived in 0.7 (and
/// `--network none` in 0.6).
pub const OLDEST: (u32, u32) = (0, 7);

#[cfg(test)]
mod tests {
    use super::*;

    fn out(code: i32, stderr: &str) -> Ran {
        Ran {
            code: Some(code),
            stdout: String::new(),
            stderr: stderr.to_string(),
        }
    }

    #[test]
    fn reads_the_cli_version_line() {
        assert_eq!(
            parse_version("container CLI version 1.2.2 (build: release, commit: 0000000)\n")
                .as_deref(),
            Some("1.2.2")
        );
        assert_eq!(
            parse_version(
                "container CLI version 0.1.0 (build: debug, commit: unspecified, sdk: 1)"
            )
            .as_deref(),
            Some("0.1.0")
        );
        assert_eq!(parse_version("garbage"), None);
        assert_eq!(parse_version("version "), None);
    }

    #[test]
    fn compares_versions_by_major_and_minor() {
        assert_eq!(major_minor("1.2.2"), Some((1, 2)));
        assert_eq!(major_minor("0.12.3-rc1"), Some((0, 12)));
        assert_eq!(major_minor("0.6"), Some((0, 6)));
        assert_eq!(major_minor("unknown"), None);
        assert!(major_minor("0.6.0").unwrap() < OLDEST);
        assert!(major_minor("0.7.0").unwrap() >= OLDEST);
        assert!(major_minor("0.12.3").unwrap() >= OLDEST);
    }

    #[test]
    fn the_service_down_hint_is_unavailable_with_the_start_remedy() {
        let e = failure(
            &["list", "--all", "--format", "json"],
            &out(
                1,
                "Error: failed to list containers: XPC connection error: Connection invalid\n\
                 Ensure container system service has been started with `container system start`.\n",
            ),
        );
        assert_eq!(e.code, ErrorCode::UNAVAILABLE);
        assert!(
            e.message.starts_with(
                "`container list` failed: failed to list containers: XPC connection error"
            ),
            "{}",
            e.message
        );
        assert!(e
            .remedy
            .contains("container system start --enable-kernel-install"));
    }

    #[test]
    fn not_found_in_both_error_forms() {
        // ≥ 0.10: the message alone.
        let e = failure(
            &["exec", "stet-x", "true"],
            &out(1, "Error: get failed: container stet-x not found\n"),
        );
        assert_eq!(e.code, ErrorCode::NOT_FOUND);
        assert_eq!(
            e.message.as_str(),
            "`container exec` failed: get failed: container stet-x not found"
        );
        // ≤ 0.9, and stop/kill/delete always: `<code>: "<message>"`, aggregated.
        let e = failure(
            &["delete", "--force", "stet-x"],
            &out(
                1,
                "Error: internalError: \"failed to delete one or more containers\" (cause: \"notFound: \"container with ID stet-x not found\"\")\n",
            ),
        );
        assert_eq!(e.code, ErrorCode::NOT_FOUND);
        let e = failure(
            &["image", "inspect", "nope:1"],
            &out(1, "Error: notFound: \"image nope:1\"\n"),
        );
        assert_eq!(e.code, ErrorCode::NOT_FOUND);
        assert!(e.message.starts_with("`container image inspect` failed"));
    }

    #[test]
    fn other_kinds_are_told_apart() {
        assert_eq!(
            classify("container with id stet-x already exists", Some(1)),
            Kind::AlreadyExists
        );
        assert_eq!(
            classify("exists: \"container stet-x\"", Some(1)),
            Kind::AlreadyExists
        );
        assert_eq!(
            classify("internalError: \"failed to delete\" (cause: \"invalidState: \"container stet-x is stopping\"\")", Some(1)),
            Kind::Busy
        );
        assert_eq!(
            classify(
                "container stet-x is not yet stopped and cannot be deleted",
                Some(1)
            ),
            Kind::Busy
        );
        assert_eq!(
            classify("container stet-x is not running", Some(1)),
            Kind::NotRunning
        );
        assert_eq!(
            classify("internalError: \"failed to kill\" (cause: \"invalidState: \"no runtime client for container stet-x: container is stopped\"\")", Some(1)),
            Kind::NotRunning
        );
        assert_eq!(
            classify("Unknown option '--progress'", Some(64)),
            Kind::Usage
        );
        assert_eq!(classify("something else", Some(1)), Kind::Other);
    }

    #[test]
    fn usage_text_after_a_parse_error_is_left_out() {
        let text = error_text(
            "Error: Unknown option '--progress'\nUsage: container run [<options>] <image> [<arguments> ...]\n  See 'container run --help' for more information.\n",
        );
        assert_eq!(text, "Unknown option '--progress'");
        let e = failure(
            &["run", "-d"],
            &out(
                64,
                "Error: Unknown option '--progress'\nUsage: container run\n",
            ),
        );
        assert_eq!(e.code, ErrorCode::BACKEND);
        assert!(e.remedy.contains("0.7 or later"));
    }

    #[test]
    fn an_empty_stderr_names_the_exit_code() {
        let e = failure(&["kill", "-s", "KILL", "x"], &out(3, ""));
        assert_eq!(
            e.message.as_str(),
            "`container kill` failed: exit code 3, no message"
        );
    }

    #[test]
    fn error_messages_never_repeat_options_or_values() {
        assert_eq!(
            describe(&["run", "-d", "--name", "stet-1", "-e", "SECRET=x"]),
            "run"
        );
        assert_eq!(describe(&["system", "status"]), "system status");
        assert_eq!(
            describe(&["image", "inspect", "stet-lane:1"]),
            "image inspect"
        );
    }

    #[test]
    fn the_environment_is_path_and_home_only() {
        let env = environment();
        let names: Vec<&str> = env.iter().map(|(k, _)| *k).collect();
        assert!(names == ["PATH"] || names == ["PATH", "HOME"], "{names:?}");
        assert_eq!(env[0].1, OsString::from(PATH));
    }
}
