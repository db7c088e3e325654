//! Configuration files: `stet.toml` at the repository's root and the user's
//! `$XDG_CONFIG_HOME/stet/config.toml`. Both have the same keys.
//!
//! ```toml
//! [runtime]
//! prefer = ["apple-container", "docker"]   # tried in order before priorities
//!
//! [harness]
//! prefer = ["claude"]
//! profiles = "~/.stet/profiles"             # where the one walled profile lives
//!
//! [probe]
//! timeout = "5s"                            # per plugin probe
//!
//! [sandbox]
//! image = "stet-lane:1"                     # the image sandboxes start from
//!
//! [drive]
//! check = "cargo test"                      # run in a sandbox on each lane before review
//! land = "gh pr create --fill --head $STET_BRANCH"   # on the host, after a lane lands
//!
//! [plugins.docker]                          # handed to the docker plugin as JSON
//! host = "unix:///var/run/docker.sock"
//! ```
//!
//! Unknown keys and wrong types are errors naming the file, the line and the key: a
//! misspelt key silently ignored is a setting the person thinks they made.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

/// The name of the repository's configuration file.
pub const REPO_CONFIG_FILE: &str = "stet.toml";

/// One configuration file, parsed and checked.
#[derive(Debug, Clone, Default)]
pub struct ConfigFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// `[runtime] prefer`.
    pub runtime_prefer: Option<Vec<String>>,
    /// `[harness] prefer`.
    pub harness_prefer: Option<Vec<String>>,
    /// `[harness] profiles`, with a leading `~/` expanded.
    pub profiles_root: Option<PathBuf>,
    /// `[probe] timeout`.
    pub probe_timeout: Option<Duration>,
    /// `[sandbox] image`.
    pub sandbox_image: Option<String>,
    /// `[drive] check`: the repository's check command.
    pub drive_check: Option<String>,
    /// `[drive] land`: run on the host after a lane's branch is pushed.
    pub drive_land: Option<String>,
    /// `[plugins.<name>]` tables, as JSON for the plugins.
    pub plugins: BTreeMap<String, serde_json::Value>,
}

/// A configuration file that could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ConfigError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong, naming the key.
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    runtime: Option<RawKind>,
    harness: Option<RawHarness>,
    probe: Option<RawProbe>,
    sandbox: Option<RawSandbox>,
    drive: Option<RawDrive>,
    #[serde(default)]
    plugins: BTreeMap<String, toml::Table>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKind {
    prefer: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHarness {
    prefer: Option<Vec<String>>,
    profiles: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDrive {
    check: Option<String>,
    land: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSandbox {
    image: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProbe {
    timeout: Option<Spanned<String>>,
}

/// Reads `path` if it exists; a missing file is no configuration.
pub fn read_optional(path: &Path) -> Result<Option<ConfigFile>, ConfigError> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(path, &text).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ConfigError {
            path: path.to_path_buf(),
            line: None,
            message: format!("cannot be read: {e}"),
        }),
    }
}

/// Parses configuration `text` as if read from `path`.
pub fn parse(path: &Path, text: &str) -> Result<ConfigFile, ConfigError> {
    let error = |offset: Option<usize>, message: String| ConfigError {
        path: path.to_path_buf(),
        line: offset.map(|o| text[..o.min(text.len())].matches('\n').count() + 1),
        message,
    };
    let raw: RawConfig = toml::from_str(text)
        .map_err(|e| error(e.span().map(|s| s.start), e.message().to_string()))?;
    let probe_timeout = match raw.probe.and_then(|p| p.timeout) {
        None => None,
        Some(spanned) => Some(parse_duration(spanned.get_ref()).map_err(|why| {
            error(
                Some(spanned.span().start),
                format!("key `probe.timeout`: {why}"),
            )
        })?),
    };
    let plugins = raw
        .plugins
        .into_iter()
        .map(|(name, table)| {
            let json = serde_json::to_value(&table).map_err(|e| {
                error(
                    None,
                    format!("table `plugins.{name}` cannot be handed to the plugin: {e}"),
                )
            })?;
            Ok((name, json))
        })
        .collect::<Result<_, ConfigError>>()?;
    Ok(ConfigFile {
        path: path.to_path_buf(),
        runtime_prefer: raw.runtime.and_then(|r| r.prefer),
        harness_prefer: raw.harness.as_ref().and_then(|h| h.prefer.clone()),
        profiles_root: raw
            .harness
            .and_then(|h| h.profiles)
            .map(|p| expand_home(&p)),
        probe_timeout,
        sandbox_image: raw.sandbox.and_then(|s| s.image),
        drive_check: raw.drive.as_ref().and_then(|d| d.check.clone()),
        drive_land: raw.drive.and_then(|d| d.land),
        plugins,
    })
}

/// `~/x` → `$HOME/x`; other paths as they are.
pub fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// Parses a duration such as `5s`, `1500ms` or `2m`; zero is refused.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text)
        .map_err(|e| format!("`{text}` is not a duration ({e}); write it like `5s` or `1500ms`"))?;
    if d.is_zero() {
        return Err(format!("`{text}` is zero; a time limit must be positive"));
    }
    Ok(d)
}

/// The root of the git working copy containing `dir`, if any.
pub fn repository_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str) -> Result<ConfigFile, ConfigError> {
        parse(Path::new("/repo/stet.toml"), text)
    }

    #[test]
    fn reads_every_section() {
        let c = parse_str(
            "[runtime]\nprefer = [\"a\", \"b\"]\n[probe]\ntimeout = \"1500ms\"\n[plugins.docker]\nhost = \"unix:///x\"\n",
        )
        .unwrap();
        assert_eq!(c.runtime_prefer.unwrap(), ["a", "b"]);
        assert_eq!(c.probe_timeout, Some(Duration::from_millis(1500)));
        assert_eq!(c.plugins["docker"]["host"], "unix:///x");
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let err = parse_str("[runtime]\nprefr = [\"a\"]\n").unwrap_err();
        assert_eq!(err.line, Some(2));
        assert!(
            err.to_string()
                .starts_with("/repo/stet.toml:2: unknown field `prefr`"),
            "{err}"
        );
    }

    #[test]
    fn wrong_type_names_the_line() {
        let err = parse_str("[runtime]\nprefer = \"docker\"\n").unwrap_err();
        assert_eq!(err.line, Some(2));
    }

    #[test]
    fn bad_duration_names_the_key() {
        let err = parse_str("[probe]\ntimeout = \"soon\"\n").unwrap_err();
        assert_eq!(err.line, Some(2));
        assert!(err.message.contains("probe.timeout"), "{err}");
    }
}
