//! One resolve step: command-line flags, environment and configuration files merged into
//! the settings commands run on, field by field, each remembering where it came from.
//!
//! Precedence, highest first: flags, environment, the repository's `stet.toml`, the
//! user's `config.toml`, built-in defaults.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use etcetera::BaseStrategy;

use crate::cli::GlobalArgs;
use crate::config::{self, ConfigFile, REPO_CONFIG_FILE};
use crate::error::CliError;
use crate::plugins::discovery::{self, SearchDir};
use crate::plugins::selection::Preference;

/// The probe time limit when nothing sets one.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Per-command flags that override configuration.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// `--runtime`.
    pub runtime: Option<String>,
    /// `--harness`.
    pub harness: Option<String>,
    /// `--probe-timeout`, unparsed.
    pub probe_timeout: Option<String>,
    /// `--image`.
    pub image: Option<String>,
    /// `--profiles`.
    pub profiles_root: Option<PathBuf>,
}

/// Everything a command needs to know, resolved.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Directories searched for plugins, in order.
    pub search_path: Vec<SearchDir>,
    /// Time limit for one plugin's probe.
    pub probe_timeout: Duration,
    /// How the runtime is chosen.
    pub runtime: Preference,
    /// How the harness is chosen.
    pub harness: Preference,
    /// Each plugin's settings table, as JSON.
    pub plugin_config: BTreeMap<String, serde_json::Value>,
    /// The image sandboxes start from.
    pub image: String,
    /// Where the one walled harness profile lives.
    pub profiles_root: PathBuf,
    /// The repository's check command (`[drive] check`).
    pub drive_check: Option<String>,
    /// The command run on the host after a lane lands (`[drive] land`).
    pub drive_land: Option<String>,
    /// The configuration files that were read, lowest precedence first.
    pub config_files: Vec<PathBuf>,
}

impl Settings {
    /// The settings JSON handed to plugin `name` (`{}` when none).
    pub fn plugin_config_json(&self, name: &str) -> String {
        self.plugin_config
            .get(name)
            .map(|v| v.to_string())
            .unwrap_or_else(|| "{}".to_string())
    }
}

/// Merges flags, environment and configuration files into [`Settings`].
pub fn resolve(global: &GlobalArgs, overrides: &Overrides) -> Result<Settings, CliError> {
    for dir in &global.plugins_dirs {
        if !dir.is_dir() {
            return Err(CliError::usage(format!(
                "--plugins-dir {} is not a directory",
                dir.display()
            ))
            .hint("name a directory holding plugin subdirectories (each with a plugin.toml)"));
        }
    }
    let xdg = etcetera::choose_base_strategy().ok();
    let files = read_config_files(xdg.as_ref())?;

    let probe_timeout = match &overrides.probe_timeout {
        Some(text) => config::parse_duration(text)
            .map_err(|why| CliError::usage(format!("--probe-timeout: {why}")))?,
        None => files
            .iter()
            .rev()
            .find_map(|f| f.probe_timeout)
            .unwrap_or(DEFAULT_PROBE_TIMEOUT),
    };
    let preference = |flag: &Option<String>,
                      flag_name: &str,
                      pick: fn(&ConfigFile) -> Option<&Vec<String>>,
                      section: &str| Preference {
        explicit: flag.clone().map(|name| (name, flag_name.to_string())),
        prefer: files.iter().rev().find_map(|f| {
            pick(f).map(|order| {
                (
                    order.clone(),
                    format!("{} [{section}] prefer", f.path.display()),
                )
            })
        }),
    };
    let runtime = preference(
        &overrides.runtime,
        "--runtime",
        |f| f.runtime_prefer.as_ref(),
        "runtime",
    );
    let harness = preference(
        &overrides.harness,
        "--harness",
        |f| f.harness_prefer.as_ref(),
        "harness",
    );

    // A plugin's table comes whole from the highest-precedence file that has one.
    let mut plugin_config = BTreeMap::new();
    for file in &files {
        for (name, table) in &file.plugins {
            plugin_config.insert(name.clone(), table.clone());
        }
    }

    let user_data = xdg
        .as_ref()
        .map(|x| x.data_dir().join("stet").join("plugins"));
    let executable = std::env::current_exe().ok();
    let search_path = discovery::search_path(
        &global.plugins_dirs,
        std::env::var_os("STET_PLUGINS_DIR").as_ref(),
        user_data.as_deref(),
        executable.as_deref(),
    );

    let image = overrides
        .image
        .clone()
        .or_else(|| files.iter().rev().find_map(|f| f.sandbox_image.clone()))
        .unwrap_or_else(|| crate::sandbox::DEFAULT_IMAGE.to_string());

    let profiles_root = overrides
        .profiles_root
        .clone()
        .or_else(|| files.iter().rev().find_map(|f| f.profiles_root.clone()))
        .unwrap_or_else(crate::harness::default_profiles_root);

    let drive_check = files.iter().rev().find_map(|f| f.drive_check.clone());
    let drive_land = files.iter().rev().find_map(|f| f.drive_land.clone());

    Ok(Settings {
        drive_check,
        drive_land,
        profiles_root,
        image,
        search_path,
        probe_timeout,
        runtime,
        harness,
        plugin_config,
        config_files: files.into_iter().map(|f| f.path).collect(),
    })
}

/// The user's file, then the repository's: lowest precedence first.
fn read_config_files(xdg: Option<&impl BaseStrategy>) -> Result<Vec<ConfigFile>, CliError> {
    let mut paths = Vec::new();
    if let Some(xdg) = xdg {
        paths.push(xdg.config_dir().join("stet").join("config.toml"));
    }
    if let Some(root) = std::env::current_dir()
        .ok()
        .and_then(|d| config::repository_root(&d))
    {
        paths.push(root.join(REPO_CONFIG_FILE));
    }
    let mut files = Vec::new();
    for path in paths {
        let file = config::read_optional(&path).map_err(|e| {
            CliError::usage(format!(
                "configuration file {} is not valid",
                e.path.display()
            ))
            .caused_by(e.to_string())
            .hint("fix the key named above; the keys are documented in docs/configuration.md")
        })?;
        files.extend(file);
    }
    Ok(files)
}
