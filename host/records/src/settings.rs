//! One resolve step: command-line flags, environment and configuration files merged into
//! the settings commands run on, field by field, each remembering where it came from.
//!
//! Precedence, highest first: flags, environment, the repository's `stet.toml`, the
//! user's `config.toml`, built-in defaults — except that the repository's file may only
//! narrow until the person trusts its content (`trust.rs`): its land command, profile
//! directory, plugin tables and runtime and harness preferences are ignored while it is
//! untrusted, and its sandbox limits and `[drive] jobs` apply only where they are lower.
//! Its image applies (it only shapes the sandbox), trusted or not, as a repository's: never
//! a login's ([`Settings::login_image`]), since whoever can commit can change the recipe it
//! is built from.
//! [`Settings::repository_config`] says what was ignored.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use etcetera::BaseStrategy;

use crate::config::{self, ConfigFile, LimitSettings, REPO_CONFIG_FILE};
use crate::error::{Concept, Error};
use crate::plugins::discovery;
use crate::plugins::selection::Preference;
use crate::plugins::PluginSettings;
use crate::printer::size;

/// The image sandboxes use when nothing names another.
pub const DEFAULT_IMAGE: &str = "stet-lane:1";

/// The most a file the agent added or changed may hold for stet to commit it, by default
/// (`[drive] max_file`).
pub const MAX_FILE: u64 = 16 << 20;

/// The default root of walled profiles: `~/.stet/profiles`.
pub fn default_profiles_root() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
        .join(".stet/profiles")
}

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
    /// Where plugins are found, how long a probe may take, each plugin's table.
    pub plugins: PluginSettings,
    /// How the runtime is chosen.
    pub runtime: Preference,
    /// How the harness is chosen.
    pub harness: Preference,
    /// The image sandboxes start from.
    pub image: String,
    /// The image a sandbox that holds a real login starts from (a login's refresh): the
    /// person's own choice (`--image`, their config file), else stet's lane image — never
    /// one a repository's `stet.toml` names, trusted or not: such an image is built from
    /// the repository's own recipe (`.stet/Containerfile`), which whoever can commit — a
    /// landed agent branch included — can change, and it would run beside the login.
    pub login_image: String,
    /// Where the one walled harness profile lives.
    pub profiles_root: PathBuf,
    /// The repository's check command (`[drive] check`).
    pub drive_check: Option<String>,
    /// The setup every lane starts from (`[lane]`, `seeds.rs`): from the person's own file
    /// or a trusted repository file only — its commands run with network.
    pub setup: Option<crate::config::Setup>,
    /// The command run on the host after a lane lands (`[drive] land`).
    pub drive_land: Option<String>,
    /// With `land = "github"`, the repository (`OWNER/REPO`) pull requests are opened in
    /// when the push remote is a fork of it (`[drive] pull_request_repo`).
    pub drive_pull_request_repo: Option<String>,
    /// Paths of a lane where secret shapes are expected (`[drive] secrets_allowed`).
    pub secrets_allowed: Vec<String>,
    /// How many items a drive works at once (`[drive] jobs`), when a file says.
    pub drive_jobs: Option<usize>,
    /// Whether each lane is a file system of its own where stet may mount one
    /// (`[sandbox] lane_file_systems`, default true).
    pub lane_file_systems: bool,
    /// The largest file an agent may add or change in a lane (`[drive] max_file`).
    pub max_file: u64,
    /// The configuration files that were read, lowest precedence first.
    pub config_files: Vec<PathBuf>,
    /// The limits of every sandbox a drive, `ask` or `run` makes.
    pub limits: SandboxLimits,
    /// What the person adds to, and takes from, what harnesses declare they need to reach.
    pub network: NetworkSettings,
    /// The repository's configuration file, when there is one, and whether it is trusted.
    pub repository_config: Option<RepositoryConfig>,
}

/// `[network]`, from every file that may say it: hosts allowed beside a harness's own
/// (the person's files and a trusted repository file only), and hosts denied (any file).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkSettings {
    /// Entries every proxied sandbox may reach too.
    pub allow: Vec<String>,
    /// Entries no sandbox may reach.
    pub deny: Vec<String>,
    /// Listed targets dialled at another address (`[network.connect_to]`; the person's files
    /// and a trusted repository file only).
    pub connect_to: Vec<stet_egress::server::ConnectTo>,
}

/// The limits of a sandbox, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SandboxLimits {
    /// Processes (threads count).
    pub pids: u32,
    /// Memory, in bytes.
    pub memory_bytes: u64,
    /// CPU, in thousandths of a core.
    pub millicpus: u32,
    /// How much a sandbox may write (its lane's growth, its profile copy, its scratch),
    /// in bytes; hard links count once per link.
    pub disk_bytes: u64,
    /// How many files (inodes) it may make: empty files take no bytes, but a file
    /// system's inodes run out all the same.
    pub files: u64,
}

impl SandboxLimits {
    /// Defaults that fit a laptop: 4096 processes, half the memory up to 4 GiB, half the
    /// cores (at least one), 10 GiB written and a million files (a large repository's
    /// checkout and build hold a few hundred thousand).
    pub fn defaults() -> SandboxLimits {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get()) as u32;
        SandboxLimits {
            pids: 4096,
            memory_bytes: (physical_memory() / 2).clamp(256 << 20, 4 << 30),
            millicpus: (cores / 2).max(1) * 1000,
            disk_bytes: 10 << 30,
            files: DEFAULT_FILES,
        }
    }

    /// As the runtime contract carries them.
    pub fn runtime(&self) -> stet_plugin_api::Limits {
        stet_plugin_api::Limits {
            millicpus: self.millicpus,
            memory_bytes: self.memory_bytes,
            pids: self.pids,
        }
    }

    /// In a line: `4096 processes, 4 GiB memory, 1 cpu, 10 GiB disk, 1000000 files`.
    pub fn describe(&self) -> String {
        let cpus = self.millicpus as f64 / 1000.0;
        format!(
            "{} processes, {} memory, {} cpu{}, {} disk, {} files",
            self.pids,
            size(self.memory_bytes),
            cpus,
            if cpus == 1.0 { "" } else { "s" },
            size(self.disk_bytes),
            self.files
        )
    }
}

/// The files a sandbox may make unless the settings say otherwise.
pub const DEFAULT_FILES: u64 = 1_000_000;

/// This machine's memory, in bytes (8 GiB when it cannot be read).
fn physical_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map(|kib| kib * 1024)
        .unwrap_or(8 << 30)
}

/// The repository's `stet.toml` and what its trust decided.
#[derive(Debug, Clone)]
pub struct RepositoryConfig {
    /// The file.
    pub path: PathBuf,
    /// Whether the person trusted its current content.
    pub trusted: bool,
    /// The settings it holds that were not applied, because the file is untrusted.
    pub ignored: Vec<String>,
    /// Of those, the plugins whose `[plugins.<name>]` table was not applied.
    pub ignored_tables: Vec<String>,
}

impl RepositoryConfig {
    /// What to tell the person when settings were ignored.
    pub fn warning(&self) -> Option<String> {
        (!self.ignored.is_empty()).then(|| {
            format!(
                "{} is not trusted, so these settings in it were ignored: {}; \
                 run `stet trust` in the repository to apply them (after reading the file: \
                 whoever can commit can change it)",
                self.path.display(),
                self.ignored.join(", ")
            )
        })
    }
}

/// Merges flags, environment and configuration files into [`Settings`]; `plugins_dirs` are
/// the `--plugins-dir` flags.
pub fn resolve(plugins_dirs: &[PathBuf], overrides: &Overrides) -> Result<Settings, Error> {
    for dir in plugins_dirs {
        if !dir.is_dir() {
            return Err(Concept::Settings
                .usage(format!(
                    "--plugins-dir {} is not a directory",
                    dir.display()
                ))
                .hint("name a directory holding plugin subdirectories (each with a plugin.toml)"));
        }
    }
    let xdg = etcetera::choose_base_strategy().ok();
    let mut files = read_config_files(xdg.as_ref())?;
    let trust_store = xdg
        .as_ref()
        .map(|x| crate::trust::store_path(&x.config_dir()));
    let repository_config = untrusted_narrow_only(&mut files, trust_store.as_deref());

    let probe_timeout = probe_timeout_of(overrides, &files)?;
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

    let (plugin_config, plugin_origin) = plugin_tables(&files);

    // The tables an untrusted repository file holds, of plugins no file of the person's
    // configures: the cause, when such a plugin is unusable without its table.
    let untrusted_tables = repository_config
        .iter()
        .flat_map(|r| r.ignored_tables.iter().map(|name| (name, &r.path)))
        .filter(|(name, _)| !plugin_config.contains_key(*name))
        .map(|(name, path)| (name.clone(), path.clone()))
        .collect();

    let search_path = search_path_of(plugins_dirs, xdg.as_ref());

    let (image, login_image) = images(overrides.image.as_deref(), &files);

    let profiles_root = overrides
        .profiles_root
        .clone()
        .or_else(|| files.iter().rev().find_map(|f| f.profiles_root.clone()))
        .unwrap_or_else(default_profiles_root);

    let drive_check = files.iter().rev().find_map(|f| f.drive_check.clone());
    let setup = files.iter().rev().find_map(|f| f.lane_setup.clone());
    let drive_land = files.iter().rev().find_map(|f| f.drive_land.clone());
    let drive_pull_request_repo = files
        .iter()
        .rev()
        .find_map(|f| f.drive_pull_request_repo.clone());
    let drive_jobs = files.iter().rev().find_map(|f| f.drive_jobs);
    let lane_file_systems = files
        .iter()
        .rev()
        .find_map(|f| f.lane_file_systems)
        .unwrap_or(true);
    let max_file = files
        .iter()
        .rev()
        .find_map(|f| f.drive_max_file)
        .unwrap_or(MAX_FILE);
    let secrets_allowed: Vec<String> = files
        .iter()
        .flat_map(|f| f.drive_secrets_allowed.iter().cloned())
        .collect();

    Ok(Settings {
        limits: limits_of(&files),
        network: network_of(&files),
        repository_config,
        drive_check,
        setup,
        drive_land,
        drive_pull_request_repo,
        drive_jobs,
        lane_file_systems,
        max_file,
        secrets_allowed,
        profiles_root,
        image,
        login_image,
        plugins: PluginSettings {
            search_path,
            probe_timeout,
            plugin_config,
            plugin_origin,
            untrusted_tables,
        },
        runtime,
        harness,
        config_files: files.into_iter().map(|f| f.path).collect(),
    })
}

/// How long a plugin's probe may take: `--probe-timeout`, else the last file that says,
/// else the default.
fn probe_timeout_of(
    overrides: &Overrides,
    files: &[ConfigFile],
) -> Result<std::time::Duration, Error> {
    Ok(match &overrides.probe_timeout {
        Some(text) => config::parse_duration(text)
            .map_err(|why| Concept::Settings.usage(format!("--probe-timeout: {why}")))?,
        None => files
            .iter()
            .rev()
            .find_map(|f| f.probe_timeout)
            .unwrap_or(DEFAULT_PROBE_TIMEOUT),
    })
}

/// Where plugins are looked for: `--plugins-dir`, `STET_PLUGINS_DIR`, the person's data
/// directory, beside the executable.
fn search_path_of(
    plugins_dirs: &[PathBuf],
    xdg: Option<&impl etcetera::BaseStrategy>,
) -> Vec<discovery::SearchDir> {
    let user_data = xdg.map(|x| x.data_dir().join("stet").join("plugins"));
    let executable = std::env::current_exe().ok();
    discovery::search_path(
        plugins_dirs,
        std::env::var_os("STET_PLUGINS_DIR").as_ref(),
        user_data.as_deref(),
        executable.as_deref(),
    )
}

/// The plugins' tables and where each came from (file, line by key): a plugin's table
/// comes whole from the highest-precedence file that has one.
#[allow(clippy::type_complexity)]
fn plugin_tables(
    files: &[ConfigFile],
) -> (
    BTreeMap<String, serde_json::Value>,
    BTreeMap<String, (PathBuf, BTreeMap<String, usize>)>,
) {
    let mut plugin_config = BTreeMap::new();
    let mut plugin_origin = BTreeMap::new();
    for file in files {
        for (name, table) in &file.plugins {
            plugin_config.insert(name.clone(), table.clone());
            plugin_origin.insert(
                name.clone(),
                (
                    file.path.clone(),
                    file.plugin_lines.get(name).cloned().unwrap_or_default(),
                ),
            );
        }
    }
    (plugin_config, plugin_origin)
}

/// The sandbox's limits: the defaults, each replaced by the files in precedence order.
fn limits_of(files: &[ConfigFile]) -> SandboxLimits {
    let mut limits = SandboxLimits::defaults();
    for file in files {
        let l = file.limits;
        limits.pids = l.pids.unwrap_or(limits.pids);
        limits.memory_bytes = l.memory_bytes.unwrap_or(limits.memory_bytes);
        limits.millicpus = l.millicpus.unwrap_or(limits.millicpus);
        limits.disk_bytes = l.disk_bytes.unwrap_or(limits.disk_bytes);
        limits.files = l.files.unwrap_or(limits.files);
    }
    limits
}

/// The network settings: every file's allow, deny and connect-to lists, together.
fn network_of(files: &[ConfigFile]) -> NetworkSettings {
    let mut network = NetworkSettings::default();
    for file in files {
        network.allow.extend(file.network_allow.iter().cloned());
        network.deny.extend(file.network_deny.iter().cloned());
        network
            .connect_to
            .extend(file.network_connect_to.iter().cloned());
    }
    network
}

/// The sandboxes' image (`--image`, else the last file naming one, the repository's
/// included, trusted or not, else stet's), and the image of a sandbox holding a real login
/// (the same, but never from a repository's file).
fn images(flag: Option<&str>, files: &[ConfigFile]) -> (String, String) {
    let named = |from_repository: bool| {
        flag.map(str::to_string)
            .or_else(|| {
                files
                    .iter()
                    .rev()
                    .filter(|f| from_repository || !f.from_repository)
                    .find_map(|f| f.sandbox_image.clone())
            })
            .unwrap_or_else(|| DEFAULT_IMAGE.to_string())
    };
    (named(true), named(false))
}

/// Applies the trust rule to the repository's file (the last of `files`, when there is
/// one): untrusted by the person's record in `store` (`trust.rs`), it keeps only what
/// narrows. Returns what was decided.
fn untrusted_narrow_only(
    files: &mut [ConfigFile],
    store: Option<&std::path::Path>,
) -> Option<RepositoryConfig> {
    let (repo, persons) = files.split_last_mut()?;
    if !repo.from_repository {
        return None;
    }
    let trusted =
        store.is_some_and(|store| crate::trust::is_trusted(store, &repo.path, &repo.content));
    let (ignored, ignored_tables) = if trusted {
        (Vec::new(), Vec::new())
    } else {
        let tables = repo.plugins.keys().cloned().collect();
        (narrow_only(repo, persons), tables)
    };
    Some(RepositoryConfig {
        path: repo.path.clone(),
        trusted,
        ignored,
        ignored_tables,
    })
}

/// What an untrusted repository file `repo` may not do, taken out of it: what acts on the
/// host or widens a sandbox, which plugins run (its runtime and harness preferences), and
/// numbers above what the person's own files (`persons`) or the defaults give (its
/// sandbox limits, how many lanes a drive works). What narrows stays: a lower limit or
/// `[drive] jobs`, `[network] deny`, its check and its image (which only shape the
/// sandbox). Returns the settings taken out, named as the file spells them.
fn narrow_only(repo: &mut ConfigFile, persons: &[ConfigFile]) -> Vec<String> {
    let mut ignored = Vec::new();
    // Which plugins run is the person's word: a preference names the agent a drive
    // launches and the runtime that walls it in.
    if repo.runtime_prefer.take().is_some() {
        ignored.push("[runtime] prefer".to_string());
    }
    if repo.harness_prefer.take().is_some() {
        ignored.push("[harness] prefer".to_string());
    }
    if repo.drive_land.take().is_some() {
        ignored.push("[drive] land".to_string());
    }
    // A setup runs commands with network, and what it makes is in every lane.
    if repo.lane_setup.take().is_some() {
        ignored.push("[lane] setup".to_string());
    }
    // Where pull requests go is the person's word, as the land command is.
    if repo.drive_pull_request_repo.take().is_some() {
        ignored.push("[drive] pull_request_repo".to_string());
    }
    // More lanes is more agents at once, each with the sandbox limits: only fewer.
    let their_jobs = persons
        .iter()
        .rev()
        .find_map(|f| f.drive_jobs)
        .unwrap_or(config::DEFAULT_JOBS);
    if repo.drive_jobs.is_some_and(|jobs| jobs > their_jobs) {
        repo.drive_jobs = None;
        ignored.push("[drive] jobs (it raises the number of lanes)".to_string());
    }
    // Allowing secret shapes lets more leave: only from a trusted file.
    if !std::mem::take(&mut repo.drive_secrets_allowed).is_empty() {
        ignored.push("[drive] secrets_allowed".to_string());
    }
    if repo.profiles_root.take().is_some() {
        ignored.push("[harness] profiles".to_string());
    }
    for name in std::mem::take(&mut repo.plugins).into_keys() {
        ignored.push(format!("[plugins.{name}]"));
    }
    // Hosts it allows widen the network wall; hosts it denies narrow it, and apply.
    if !std::mem::take(&mut repo.network_allow).is_empty() {
        ignored.push("[network] allow".to_string());
    }
    // Where a host is dialled is the person's word alone.
    if !std::mem::take(&mut repo.network_connect_to).is_empty() {
        ignored.push("[network.connect_to]".to_string());
    }
    // Limits: only lower than what the person's own settings (or the defaults) give.
    let theirs = limits_of(persons);
    let LimitSettings {
        pids,
        memory_bytes,
        millicpus,
        disk_bytes,
        files,
    } = &mut repo.limits;
    if pids.is_some_and(|p| p > theirs.pids) {
        *pids = None;
        ignored.push("[sandbox] pids (it raises the limit)".to_string());
    }
    if memory_bytes.is_some_and(|m| m > theirs.memory_bytes) {
        *memory_bytes = None;
        ignored.push("[sandbox] memory (it raises the limit)".to_string());
    }
    if millicpus.is_some_and(|c| c > theirs.millicpus) {
        *millicpus = None;
        ignored.push("[sandbox] cpus (it raises the limit)".to_string());
    }
    if disk_bytes.is_some_and(|d| d > theirs.disk_bytes) {
        *disk_bytes = None;
        ignored.push("[sandbox] disk (it raises the limit)".to_string());
    }
    if files.is_some_and(|f| f > theirs.files) {
        *files = None;
        ignored.push("[sandbox] files (it raises the limit)".to_string());
    }
    // Without a file system of its own a lane's limits are only watched: that is the
    // person's choice alone.
    if repo.lane_file_systems == Some(false) {
        repo.lane_file_systems = None;
        ignored.push("[sandbox] lane_file_systems = false (it weakens the disk limit)".to_string());
    }
    // A larger file an agent may commit is more for the host's git to read: only smaller.
    let their_max_file = persons
        .iter()
        .rev()
        .find_map(|f| f.drive_max_file)
        .unwrap_or(MAX_FILE);
    if repo.drive_max_file.is_some_and(|m| m > their_max_file) {
        repo.drive_max_file = None;
        ignored.push("[drive] max_file (it raises the limit)".to_string());
    }
    ignored
}

/// The user's file, then the repository's: lowest precedence first.
fn read_config_files(xdg: Option<&impl BaseStrategy>) -> Result<Vec<ConfigFile>, Error> {
    let mut paths = Vec::new();
    if let Some(xdg) = xdg {
        paths.push((xdg.config_dir().join("stet").join("config.toml"), None));
    }
    if let Some(root) = std::env::current_dir()
        .ok()
        .and_then(|d| config::repository_root(&d))
    {
        paths.push((root.join(REPO_CONFIG_FILE), Some(root)));
    }
    let mut files = Vec::new();
    for (path, repository) in paths {
        let read = match &repository {
            Some(root) => config::read_repository(root, &path),
            None => config::read_optional(&path),
        };
        let file = read.map_err(|e| {
            Concept::Settings
                .usage(format!(
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The person's `config.toml` holding `text`.
    fn persons(text: &str) -> ConfigFile {
        config::parse(std::path::Path::new("config.toml"), text).unwrap()
    }

    /// A repository's `stet.toml` holding `text`, written at `path` (trust is for a file's
    /// content at its path).
    fn repository(path: &std::path::Path, text: &str) -> ConfigFile {
        std::fs::write(path, text).unwrap();
        let mut file = config::parse(path, text).unwrap();
        file.from_repository = true;
        file.content = text.as_bytes().to_vec();
        file
    }

    /// What a setting resolves to: the repository's file over the person's, as `resolve`
    /// takes it.
    fn jobs(files: &[ConfigFile]) -> Option<usize> {
        files.iter().rev().find_map(|f| f.drive_jobs)
    }

    const EVERYTHING: &str = "[runtime]\nprefer = [\"their-runtime\"]\n\n\
        [harness]\nprefer = [\"their-agent\"]\nprofiles = \"/theirs\"\n\n\
        [sandbox]\nimage = \"their-image:1\"\npids = 100\n\n\
        [drive]\ncheck = \"make test\"\njobs = 8\nland = \"touch /tmp/landed\"\n\n\
        [network]\ndeny = [\"telemetry.example.com\"]\n\n\
        [plugins.command]\nimplement = [\"/bin/their-agent\"]\n";

    #[test]
    fn an_untrusted_file_raises_no_jobs_chooses_no_plugin_and_names_both() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::trust::store_path(dir.path());
        let mut files = vec![repository(&dir.path().join("stet.toml"), EVERYTHING)];
        let decided = untrusted_narrow_only(&mut files, Some(&store)).unwrap();
        assert!(!decided.trusted);
        assert_eq!(
            decided.ignored,
            [
                "[runtime] prefer",
                "[harness] prefer",
                "[drive] land",
                "[drive] jobs (it raises the number of lanes)",
                "[harness] profiles",
                "[plugins.command]",
            ]
        );
        let repo = &files[0];
        assert_eq!(repo.runtime_prefer, None);
        assert_eq!(repo.harness_prefer, None);
        assert_eq!(jobs(&files), None, "the default, 1, is what applies");
        // What only shapes or narrows the sandbox stays: the image, a lower limit, the
        // check, a denied host.
        assert_eq!(repo.sandbox_image.as_deref(), Some("their-image:1"));
        assert_eq!(repo.limits.pids, Some(100));
        assert_eq!(repo.drive_check.as_deref(), Some("make test"));
        assert_eq!(repo.network_deny, ["telemetry.example.com"]);
        let warning = decided.warning().unwrap();
        assert!(
            warning.contains("[runtime] prefer, [harness] prefer")
                && warning.contains("run `stet trust`"),
            "{warning}"
        );
    }

    #[test]
    fn an_untrusted_file_may_lower_jobs_below_the_persons_own_but_not_raise_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stet.toml");
        // Lower than the person's 4: applies, silently.
        let mut files = vec![
            persons("[drive]\njobs = 4\n"),
            repository(&path, "[drive]\njobs = 2\n"),
        ];
        let decided = untrusted_narrow_only(&mut files, None).unwrap();
        assert!(decided.ignored.is_empty(), "{:?}", decided.ignored);
        assert_eq!(jobs(&files), Some(2));
        // As many as theirs: nothing raised, nothing to name.
        let mut files = vec![
            persons("[drive]\njobs = 4\n"),
            repository(&path, "[drive]\njobs = 4\n"),
        ];
        assert!(untrusted_narrow_only(&mut files, None)
            .unwrap()
            .ignored
            .is_empty());
        assert_eq!(jobs(&files), Some(4));
        // Higher: the person's own number applies, and the raise is named.
        let mut files = vec![
            persons("[drive]\njobs = 4\n"),
            repository(&path, "[drive]\njobs = 8\n"),
        ];
        let decided = untrusted_narrow_only(&mut files, None).unwrap();
        assert_eq!(
            decided.ignored,
            ["[drive] jobs (it raises the number of lanes)"]
        );
        assert_eq!(jobs(&files), Some(4));
        // With nothing of the person's, the default is theirs: one lane.
        let mut files = vec![repository(&path, "[drive]\njobs = 2\n")];
        let decided = untrusted_narrow_only(&mut files, None).unwrap();
        assert_eq!(
            decided.ignored,
            ["[drive] jobs (it raises the number of lanes)"]
        );
        assert_eq!(jobs(&files), None);
    }

    #[test]
    fn the_persons_own_preferences_apply_under_an_untrusted_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut files = vec![
            persons("[runtime]\nprefer = [\"my-runtime\"]\n\n[harness]\nprefer = [\"my-agent\"]\n"),
            repository(
                &dir.path().join("stet.toml"),
                "[runtime]\nprefer = [\"their-runtime\"]\n\n[harness]\nprefer = [\"their-agent\"]\n",
            ),
        ];
        untrusted_narrow_only(&mut files, None).unwrap();
        let runtime = files.iter().rev().find_map(|f| f.runtime_prefer.clone());
        let harness = files.iter().rev().find_map(|f| f.harness_prefer.clone());
        assert_eq!(runtime, Some(vec!["my-runtime".to_string()]));
        assert_eq!(harness, Some(vec!["my-agent".to_string()]));
    }

    #[test]
    fn a_trusted_file_applies_whole_until_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::trust::store_path(dir.path());
        let path = dir.path().join("stet.toml");
        crate::trust::record(&store, &path, EVERYTHING.as_bytes(), false).unwrap();
        let mut files = vec![
            persons("[drive]\njobs = 2\n"),
            repository(&path, EVERYTHING),
        ];
        let decided = untrusted_narrow_only(&mut files, Some(&store)).unwrap();
        assert!(decided.trusted);
        assert!(decided.ignored.is_empty());
        assert_eq!(decided.warning(), None);
        assert_eq!(jobs(&files), Some(8));
        assert_eq!(
            files[1].harness_prefer,
            Some(vec!["their-agent".to_string()])
        );
        assert!(files[1].drive_land.is_some());
        // One byte more, and it is a file nobody trusted.
        let changed = format!("{EVERYTHING}\n");
        let mut files = vec![repository(&path, &changed)];
        let decided = untrusted_narrow_only(&mut files, Some(&store)).unwrap();
        assert!(!decided.trusted);
        assert!(decided.ignored.contains(&"[harness] prefer".to_string()));
    }

    #[test]
    fn a_repositorys_image_shapes_its_sandboxes_but_never_a_logins_even_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::trust::store_path(dir.path());
        let path = dir.path().join("stet.toml");
        crate::trust::record(&store, &path, EVERYTHING.as_bytes(), false).unwrap();
        let mut files = vec![repository(&path, EVERYTHING)];
        assert!(
            untrusted_narrow_only(&mut files, Some(&store))
                .unwrap()
                .trusted
        );
        assert_eq!(
            images(None, &files),
            ("their-image:1".to_string(), DEFAULT_IMAGE.to_string())
        );
        files.insert(0, persons("[sandbox]\nimage = \"mine:1\"\n"));
        assert_eq!(
            images(None, &files),
            ("their-image:1".to_string(), "mine:1".to_string())
        );
        assert_eq!(
            images(Some("flag:1"), &files),
            ("flag:1".to_string(), "flag:1".to_string())
        );
    }

    #[test]
    fn the_persons_own_file_alone_is_not_judged() {
        let mut files = vec![persons("[drive]\njobs = 8\n")];
        assert!(untrusted_narrow_only(&mut files, None).is_none());
        assert_eq!(jobs(&files), Some(8));
    }

    /// The person's limits, as `narrow_only` starts from them.
    const PERSONS_LIMITS: &str =
        "[sandbox]\npids = 1000\nmemory = \"1GiB\"\ncpus = 2\ndisk = \"2GiB\"\n\n\
         [drive]\nmax_file = \"8MiB\"\n";

    #[test]
    fn an_untrusted_file_raises_no_sandbox_limit_and_names_each_raise() {
        let dir = tempfile::tempdir().unwrap();
        let mut files = vec![
            persons(PERSONS_LIMITS),
            repository(
                &dir.path().join("stet.toml"),
                "[sandbox]\npids = 2000\nmemory = \"2GiB\"\ncpus = 4\ndisk = \"4GiB\"\nfiles = 2000000\n\n\
                 [drive]\nmax_file = \"16MiB\"\n",
            ),
        ];
        let decided = untrusted_narrow_only(&mut files, None).unwrap();
        assert!(!decided.trusted);
        assert_eq!(
            decided.ignored,
            [
                "[sandbox] pids (it raises the limit)",
                "[sandbox] memory (it raises the limit)",
                "[sandbox] cpus (it raises the limit)",
                "[sandbox] disk (it raises the limit)",
                "[sandbox] files (it raises the limit)",
                "[drive] max_file (it raises the limit)",
            ]
        );
        let repo = &files[1];
        assert_eq!(
            repo.limits,
            LimitSettings::default(),
            "every raise is taken out"
        );
        assert_eq!(repo.drive_max_file, None);
    }

    #[test]
    fn an_untrusted_file_may_lower_every_limit_silently() {
        let dir = tempfile::tempdir().unwrap();
        let mut files = vec![
            persons(PERSONS_LIMITS),
            repository(
                &dir.path().join("stet.toml"),
                "[sandbox]\npids = 500\nmemory = \"512MiB\"\ncpus = 1\ndisk = \"1GiB\"\n\n\
                 [drive]\nmax_file = \"1MiB\"\n",
            ),
        ];
        let decided = untrusted_narrow_only(&mut files, None).unwrap();
        assert!(decided.ignored.is_empty(), "{:?}", decided.ignored);
        assert_eq!(decided.warning(), None);
        let limits = files[1].limits;
        assert_eq!(limits.pids, Some(500));
        assert_eq!(limits.memory_bytes, Some(512 << 20));
        assert_eq!(limits.millicpus, Some(1000));
        assert_eq!(limits.disk_bytes, Some(1 << 30));
        assert_eq!(files[1].drive_max_file, Some(1 << 20));
    }

    #[test]
    fn without_the_persons_limits_an_untrusted_file_is_held_to_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let defaults = SandboxLimits::defaults();
        let above = defaults.pids + 1;
        let text = format!("[sandbox]\npids = {above}\n\n[drive]\nmax_file = \"32MiB\"\n");
        let mut files = vec![repository(&dir.path().join("stet.toml"), &text)];
        let decided = untrusted_narrow_only(&mut files, None).unwrap();
        assert_eq!(
            decided.ignored,
            [
                "[sandbox] pids (it raises the limit)",
                "[drive] max_file (it raises the limit)",
            ]
        );
        assert_eq!(files[0].limits.pids, None);
        // The default itself is no raise.
        let text = format!("[sandbox]\npids = {}\n", defaults.pids);
        let mut files = vec![repository(&dir.path().join("stet.toml"), &text)];
        let decided = untrusted_narrow_only(&mut files, None).unwrap();
        assert!(decided.ignored.is_empty(), "{:?}", decided.ignored);
        assert_eq!(files[0].limits.pids, Some(defaults.pids));
    }

    #[test]
    fn an_untrusted_file_widens_no_network_and_allows_no_secret_but_its_denials_apply() {
        let dir = tempfile::tempdir().unwrap();
        let mut files = vec![repository(
            &dir.path().join("stet.toml"),
            "[drive]\nsecrets_allowed = [\"tests/fixtures/\"]\n\n\
             [network]\nallow = [\"their-host.example.com\"]\ndeny = [\"telemetry.example.com\"]\n\n\
             [network.connect_to]\n\"api.example.com:443\" = \"127.0.0.1:8443\"\n",
        )];
        let decided = untrusted_narrow_only(&mut files, None).unwrap();
        assert_eq!(
            decided.ignored,
            [
                "[drive] secrets_allowed",
                "[network] allow",
                "[network.connect_to]",
            ]
        );
        let repo = &files[0];
        assert!(repo.drive_secrets_allowed.is_empty());
        assert!(repo.network_allow.is_empty());
        assert!(repo.network_connect_to.is_empty());
        assert_eq!(repo.network_deny, ["telemetry.example.com"]);
    }

    #[test]
    fn a_trusted_file_raises_limits_and_widens_the_network() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::trust::store_path(dir.path());
        let path = dir.path().join("stet.toml");
        let text = "[sandbox]\npids = 2000\nimage = \"their-image:1\"\n\n\
                    [network]\nallow = [\"their-host.example.com\"]\n";
        crate::trust::record(&store, &path, text.as_bytes(), false).unwrap();
        let mut files = vec![persons(PERSONS_LIMITS), repository(&path, text)];
        let decided = untrusted_narrow_only(&mut files, Some(&store)).unwrap();
        assert!(decided.trusted);
        assert!(decided.ignored.is_empty(), "{:?}", decided.ignored);
        assert_eq!(files[1].limits.pids, Some(2000));
        assert_eq!(files[1].network_allow, ["their-host.example.com"]);
        assert_eq!(files[1].sandbox_image.as_deref(), Some("their-image:1"));
    }

    #[test]
    fn a_setup_applies_from_a_trusted_file_only_and_an_untrusted_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::trust::store_path(dir.path());
        let path = dir.path().join("stet.toml");
        let text = "[lane]\nsetup = [\"make deps\"]\nsetup_outputs = [\"deps\"]\n\
                    setup_network = [\"registry.example.com\"]\n";
        let mut files = vec![persons(""), repository(&path, text)];
        let decided = untrusted_narrow_only(&mut files, Some(&store)).unwrap();
        assert_eq!(decided.ignored, ["[lane] setup"]);
        assert_eq!(files[1].lane_setup, None);
        crate::trust::record(&store, &path, text.as_bytes(), false).unwrap();
        let mut files = vec![persons(""), repository(&path, text)];
        let decided = untrusted_narrow_only(&mut files, Some(&store)).unwrap();
        assert!(decided.ignored.is_empty(), "{:?}", decided.ignored);
        let setup = files[1].lane_setup.clone().unwrap();
        assert_eq!(setup.commands, ["make deps"]);
        assert_eq!(setup.outputs, ["deps"]);
        assert_eq!(setup.network, ["registry.example.com"]);
    }

    #[test]
    fn trust_recorded_for_another_path_does_not_carry_over() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::trust::store_path(dir.path());
        let trusted_path = dir.path().join("trusted/stet.toml");
        std::fs::create_dir_all(trusted_path.parent().unwrap()).unwrap();
        let text = "[harness]\nprefer = [\"their-agent\"]\n";
        crate::trust::record(&store, &trusted_path, text.as_bytes(), false).unwrap();
        let mut files = vec![repository(&dir.path().join("stet.toml"), text)];
        let decided = untrusted_narrow_only(&mut files, Some(&store)).unwrap();
        assert!(!decided.trusted);
        assert_eq!(decided.ignored, ["[harness] prefer"]);
    }
}
