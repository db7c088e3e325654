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
//! pids = 4096                               # limits of every drive, ask and run sandbox
//! memory = "4GiB"
//! cpus = 2.0
//! disk = "10GiB"                            # how much a sandbox may write
//! files = 1000000                           # how many files it may make
//! lane_file_systems = true                  # each lane its own file system, where stet may mount
//!
//! [drive]
//! check = "cargo test"                      # run in a sandbox on each lane before review
//! jobs = 2                                  # items worked at once (--jobs)
//! land = "gh pr create --fill --head $STET_BRANCH"   # on the host, after a lane lands
//! pull_request_repo = "upstream/project"  # with land = "github": the repository a fork's pull requests go to
//! secrets_allowed = ["tests/fixtures/"]     # where secret shapes are expected (not pushed
//!                                           # otherwise; stet's own credentials never)
//! max_file = "16MiB"                        # the largest file an agent may add or change
//!
//! [lane]                                    # prepared once per clone, given to every lane
//! setup = ["uv sync --frozen"]              # run in order, in a sandbox on the base commit
//! setup_inputs = ["uv.lock"]                # files whose content keys what the setup made
//! setup_outputs = [".venv"]                 # what it fills: kept, and each lane's own copy
//! setup_network = ["pypi.org"]              # reached through stet's proxy, by the setup alone
//!
//! [plugins.docker]                          # handed to the docker plugin as JSON
//! host = "unix:///var/run/docker.sock"
//! ```
//!
//! Unknown keys and wrong types are errors naming the file, the line and the key: a
//! misspelt key silently ignored is a setting the person thinks they made.
//!
//! The repository's file is written by whoever can commit — a landed agent branch
//! included — so settings in it that act on the host or widen what a sandbox gets take
//! effect only once the person trusts its content (`trust.rs`); `settings.rs` applies
//! that rule.

// What this module reads comes from parties stet does not trust: nothing here may panic
// on it (issue 18).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects
    )
)]

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
    /// Whether it is the repository's file (written by whoever can commit).
    pub from_repository: bool,
    /// The bytes read, for trusting exactly this content.
    pub content: Vec<u8>,
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
    /// `[sandbox] lane_file_systems`: whether each lane is a file system of its own where
    /// stet may mount one (the disk and files limits then held by the kernel).
    pub lane_file_systems: Option<bool>,
    /// `[sandbox]` limits.
    pub limits: LimitSettings,
    /// `[drive] check`: the repository's check command.
    pub drive_check: Option<String>,
    /// `[lane]`: the setup every lane starts from (`seeds.rs`), when the file has one.
    pub lane_setup: Option<Setup>,
    /// `[drive] land`: run on the host after a lane's branch is pushed.
    pub drive_land: Option<String>,
    /// `[drive] pull_request_repo`: the repository (`OWNER/REPO`) pull requests are opened
    /// in, when the push remote is a fork of it.
    pub drive_pull_request_repo: Option<String>,
    /// `[drive] secrets_allowed`: paths where secret shapes are expected.
    pub drive_secrets_allowed: Vec<String>,
    /// `[drive] jobs`: how many items a drive works at once.
    pub drive_jobs: Option<usize>,
    /// `[drive] max_file`: the largest file, in bytes, an agent may add or change.
    pub drive_max_file: Option<u64>,
    /// `[network] allow`: hosts every proxied sandbox may reach beside what its harness
    /// declares (entries checked: `host`, `host:port`, `*.domain`).
    pub network_allow: Vec<String>,
    /// `[network] deny`: hosts no sandbox may reach, whoever lists them.
    pub network_deny: Vec<String>,
    /// `[network.connect_to]`: `host:port` dialled at another address (the proxy's
    /// [`stet_egress::server::ConnectTo`]), e.g. a relay, or the tests' double of an OAuth host.
    pub network_connect_to: Vec<stet_egress::server::ConnectTo>,
    /// `[plugins.<name>]` tables, as JSON for the plugins.
    pub plugins: BTreeMap<String, serde_json::Value>,
    /// The line of each key of each `[plugins.<name>]` table, for naming a wrong one.
    pub plugin_lines: BTreeMap<String, BTreeMap<String, usize>>,
}

/// Sandbox limits as a configuration file sets them; each one absent means "not set here".
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LimitSettings {
    /// `pids`: processes (threads included).
    pub pids: Option<u32>,
    /// `memory`, in bytes.
    pub memory_bytes: Option<u64>,
    /// `cpus`, in thousandths of a core.
    pub millicpus: Option<u32>,
    /// `disk`: how much a sandbox may write, in bytes.
    pub disk_bytes: Option<u64>,
    /// `files`: how many files (inodes) a sandbox may make.
    pub files: Option<u64>,
}

/// `[lane]`: what prepares a lane before any agent works in it — run once per clone in a
/// sandbox on the base commit, its outputs kept as a seed and given to every lane.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Setup {
    /// `setup`: shell commands, run in order; the first that fails ends the setup.
    pub commands: Vec<String>,
    /// `setup_inputs`: the files (relative to the repository's root) whose content, as the
    /// base holds it, keys the seed: a lock file changed, the setup runs again.
    pub inputs: Vec<String>,
    /// `setup_outputs`: what the setup fills (relative paths; never tracked by git), kept
    /// as the seed.
    pub outputs: Vec<String>,
    /// `setup_network`: the hosts the setup may reach through stet's proxy (entries as
    /// `[network] allow` takes them); none: no network.
    pub network: Vec<String>,
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
    network: Option<RawNetwork>,
    lane: Option<RawLane>,
    #[serde(default)]
    plugins: BTreeMap<String, toml::Table>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetwork {
    allow: Option<Vec<Spanned<String>>>,
    deny: Option<Vec<Spanned<String>>>,
    connect_to: Option<BTreeMap<String, Spanned<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLane {
    setup: Option<Vec<Spanned<String>>>,
    setup_inputs: Option<Vec<Spanned<String>>>,
    setup_outputs: Option<Vec<Spanned<String>>>,
    setup_network: Option<Vec<Spanned<String>>>,
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
    pull_request_repo: Option<Spanned<String>>,
    jobs: Option<Spanned<i64>>,
    secrets_allowed: Option<Vec<String>>,
    max_file: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSandbox {
    image: Option<Spanned<String>>,
    pids: Option<Spanned<i64>>,
    memory: Option<Spanned<String>>,
    cpus: Option<Spanned<f64>>,
    disk: Option<Spanned<String>>,
    files: Option<Spanned<i64>>,
    lane_file_systems: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProbe {
    timeout: Option<Spanned<String>>,
}

/// The most lanes a drive works at once (`[drive] jobs`, `--jobs`).
pub const MAX_JOBS: usize = 64;

/// How many lanes a drive works at once when neither `--jobs` nor a file says.
pub const DEFAULT_JOBS: usize = 1;

/// The largest configuration file read.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Reads the repository's file `path` (in `root`) if it exists. It is written by whoever
/// can commit, so a symbolic link is followed only to a file inside the repository, and
/// only a regular file of reasonable size is read.
pub fn read_repository(root: &Path, path: &Path) -> Result<Option<ConfigFile>, ConfigError> {
    let refuse = |message: String| ConfigError {
        path: path.to_path_buf(),
        line: None,
        message,
    };
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(refuse(format!("cannot be read: {e}"))),
        Ok(meta) if meta.file_type().is_symlink() => {
            let target = path
                .canonicalize()
                .map_err(|e| refuse(format!("is a symbolic link that cannot be followed: {e}")))?;
            let inside = root.canonicalize().is_ok_and(|r| target.starts_with(r));
            if !inside {
                return Err(refuse(format!(
                    "is a symbolic link to {}, outside the repository; stet reads a repository's configuration only from inside it",
                    target.display()
                )));
            }
        }
        Ok(_) => {}
    }
    let mut file = read_optional(path)?;
    if let Some(file) = &mut file {
        file.from_repository = true;
    }
    Ok(file)
}

/// Reads `path` if it exists; a missing file is no configuration.
pub fn read_optional(path: &Path) -> Result<Option<ConfigFile>, ConfigError> {
    let read = std::fs::metadata(path).and_then(|meta| {
        if !meta.is_file() {
            return Err(std::io::Error::other("it is not a regular file"));
        }
        if meta.len() > MAX_CONFIG_BYTES {
            return Err(std::io::Error::other(format!(
                "it is {} bytes, more than a configuration file holds ({MAX_CONFIG_BYTES})",
                meta.len()
            )));
        }
        std::fs::read_to_string(path)
    });
    match read {
        Ok(text) => parse(path, &text).map(|mut f| {
            f.content = text.into_bytes();
            Some(f)
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ConfigError {
            path: path.to_path_buf(),
            line: None,
            message: format!("cannot be read: {e}"),
        }),
    }
}

/// The dotted path of the key whose value (or name) spans `offset` in `text`, the deepest
/// one: `sandbox.pids`, `plugins.command.implement`.
fn key_at(text: &str, offset: usize) -> Option<String> {
    use toml::de::{DeTable, DeValue};
    fn walk(table: &DeTable<'_>, offset: usize, path: &mut Vec<String>) -> bool {
        for (key, value) in table {
            let (k, v) = (key.span(), value.span());
            if !(k.contains(&offset) || v.contains(&offset) || (k.start..v.end).contains(&offset)) {
                continue;
            }
            path.push(key.get_ref().to_string());
            if let DeValue::Table(inner) = value.get_ref() {
                walk(inner, offset, path);
            }
            return true;
        }
        // A table header (`[sandbox]`) holds its keys after it: spans of tables opened by a
        // header cover the header only, so look into each table too.
        for (key, value) in table {
            if let DeValue::Table(inner) = value.get_ref() {
                path.push(key.get_ref().to_string());
                if walk(inner, offset, path) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let parsed = DeTable::parse(text).ok()?;
    let mut path = Vec::new();
    walk(parsed.get_ref(), offset, &mut path).then(|| path.join("."))
}

/// Parses configuration `text` as if read from `path`.
pub fn parse(path: &Path, text: &str) -> Result<ConfigFile, ConfigError> {
    let reader = Reader { path, text };
    let error = |offset: Option<usize>, message: String| reader.error(offset, message);
    let mut raw: RawConfig = toml::from_str(text).map_err(|e| {
        let at = e.span().map(|s| s.start);
        // Serde names the type, not the key: the key is found where the error points.
        // Serde's words for the types, said as a person would.
        let said = e
            .message()
            .replace("expected i64", "expected an integer")
            .replace("expected u32", "expected a whole number")
            .replace("expected f64", "expected a number")
            .replace("expected a sequence", "expected an array");
        let message = match at.and_then(|offset| key_at(text, offset)) {
            Some(key) => format!("key `{key}`: {said}"),
            None => said,
        };
        error(at, message)
    })?;
    let probe_timeout = match raw.probe.and_then(|p| p.timeout) {
        None => None,
        Some(spanned) => Some(parse_duration(spanned.get_ref()).map_err(|why| {
            error(
                Some(spanned.span().start),
                format!("key `probe.timeout`: {why}"),
            )
        })?),
    };
    let drive_jobs = raw
        .drive
        .as_mut()
        .and_then(|d| d.jobs.take())
        .map(|jobs| jobs_of(&reader, &jobs))
        .transpose()?;
    let drive_max_file = match raw.drive.as_mut().and_then(|d| d.max_file.take()) {
        None => None,
        Some(value) => {
            let at = Some(value.span().start);
            let bytes = parse_size(value.get_ref())
                .map_err(|why| error(at, format!("key `drive.max_file`: {why}")))?;
            if bytes < 1024 {
                return Err(error(
                    at,
                    format!(
                        "key `drive.max_file`: {} is below the least stet allows (1 KiB)",
                        value.get_ref()
                    ),
                ));
            }
            Some(bytes)
        }
    };
    let Sandbox {
        image: sandbox_image,
        lane_file_systems,
        limits,
    } = match raw.sandbox {
        Some(sandbox) => sandbox_of(&reader, sandbox)?,
        None => Sandbox::default(),
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
    let plugin_lines = plugin_key_lines(text);
    let lane_setup = raw
        .lane
        .map(|lane| setup_of(&reader, lane))
        .transpose()?
        .flatten();
    let (network_allow, network_deny, network_connect_to) = match raw.network {
        Some(network) => network_of(&reader, network)?,
        None => Default::default(),
    };
    let drive_pull_request_repo = raw
        .drive
        .as_ref()
        .and_then(|d| d.pull_request_repo.as_ref())
        .map(|repo| pull_request_repo_of(&reader, repo))
        .transpose()?;
    Ok(ConfigFile {
        path: path.to_path_buf(),
        from_repository: false,
        content: Vec::new(),
        runtime_prefer: raw.runtime.and_then(|r| r.prefer),
        harness_prefer: raw.harness.as_ref().and_then(|h| h.prefer.clone()),
        profiles_root: raw
            .harness
            .and_then(|h| h.profiles)
            .map(|p| expand_home(&p)),
        probe_timeout,
        sandbox_image,
        lane_file_systems,
        limits,
        drive_check: raw.drive.as_ref().and_then(|d| d.check.clone()),
        lane_setup,
        drive_land: raw.drive.as_ref().and_then(|d| d.land.clone()),
        drive_pull_request_repo,
        drive_secrets_allowed: raw
            .drive
            .and_then(|d| d.secrets_allowed)
            .unwrap_or_default(),
        drive_jobs,
        drive_max_file,
        network_allow,
        network_deny,
        network_connect_to,
        plugins,
        plugin_lines,
    })
}

/// Where a configuration's text is, for errors that name its file and line.
struct Reader<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Reader<'_> {
    /// An error at `offset` (a byte of the text) naming its line, when known.
    fn error(&self, offset: Option<usize>, message: String) -> ConfigError {
        ConfigError {
            path: self.path.to_path_buf(),
            line: offset.map(|o| {
                self.text[..o.min(self.text.len())]
                    .matches('\n')
                    .count()
                    .saturating_add(1)
            }),
            message,
        }
    }

    /// A whole number of `key` within `range`, or an error saying it is not `what` (a
    /// process limit, a number of lanes) between the range's ends.
    fn within(
        &self,
        key: &str,
        value: &Spanned<i64>,
        range: std::ops::RangeInclusive<i64>,
        what: &str,
    ) -> Result<i64, ConfigError> {
        let n = *value.get_ref();
        if !range.contains(&n) {
            return Err(self.error(
                Some(value.span().start),
                format!(
                    "key `{key}`: {n} is not {what} between {} and {}",
                    range.start(),
                    range.end()
                ),
            ));
        }
        Ok(n)
    }
}

/// `[drive] pull_request_repo`: `OWNER/REPO`, each part of letters, digits, `-`, `_`, `.`.
fn pull_request_repo_of(
    reader: &Reader<'_>,
    repo: &Spanned<String>,
) -> Result<String, ConfigError> {
    let valid = repo.get_ref().split_once('/').is_some_and(|(owner, name)| {
        [owner, name].iter().all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        })
    });
    if !valid {
        return Err(reader.error(
            Some(repo.span().start),
            format!(
                "key `drive.pull_request_repo`: `{}` is not OWNER/REPO, like \"upstream-org/project\"",
                repo.get_ref()
            ),
        ));
    }
    Ok(repo.get_ref().clone())
}

/// `[drive] jobs`: how many lanes, between 1 and [`MAX_JOBS`].
fn jobs_of(reader: &Reader<'_>, jobs: &Spanned<i64>) -> Result<usize, ConfigError> {
    let n = reader.within("drive.jobs", jobs, 1..=MAX_JOBS as i64, "a number of lanes")?;
    Ok(n as usize)
}

/// The `[sandbox]` table, checked.
#[derive(Default)]
struct Sandbox {
    image: Option<String>,
    lane_file_systems: Option<bool>,
    limits: LimitSettings,
}

/// Reads the `[sandbox]` table: each value within what stet allows, or an error naming the
/// key and its line.
fn sandbox_of(reader: &Reader<'_>, sandbox: RawSandbox) -> Result<Sandbox, ConfigError> {
    let error = |offset: Option<usize>, message: String| reader.error(offset, message);
    let mut sandbox_image = None;
    let mut limits = LimitSettings::default();
    if let Some(image) = sandbox.image {
        if image.get_ref().trim().is_empty() {
            return Err(error(
                Some(image.span().start),
                "key `sandbox.image` is empty: name an image (e.g. \"stet-lane:1\"), or leave the key out".into(),
            ));
        }
        sandbox_image = Some(image.into_inner());
    }
    if let Some(pids) = &sandbox.pids {
        let n = reader.within("sandbox.pids", pids, 16..=1_000_000, "a process limit")?;
        limits.pids = Some(n as u32);
    }
    if let Some(files) = &sandbox.files {
        let n = reader.within(
            "sandbox.files",
            files,
            1_000..=1_000_000_000,
            "a number of files",
        )?;
        limits.files = Some(n as u64);
    }
    if let Some(cpus) = sandbox.cpus {
        let n = *cpus.get_ref();
        if !(0.01..=1024.0).contains(&n) {
            return Err(error(
                Some(cpus.span().start),
                format!("key `sandbox.cpus`: {n} is not a number of cores (e.g. 2 or 1.5)"),
            ));
        }
        limits.millicpus = Some((n * 1000.0).round() as u32);
    }
    for (key, value, slot, least) in [
        (
            "memory",
            sandbox.memory,
            &mut limits.memory_bytes,
            64u64 << 20,
        ),
        ("disk", sandbox.disk, &mut limits.disk_bytes, 1u64 << 20),
    ] {
        if let Some(value) = value {
            let bytes = parse_size(value.get_ref()).map_err(|why| {
                error(
                    Some(value.span().start),
                    format!("key `sandbox.{key}`: {why}"),
                )
            })?;
            if bytes < least {
                return Err(error(
                    Some(value.span().start),
                    format!(
                        "key `sandbox.{key}`: {} is below the least stet allows ({})",
                        value.get_ref(),
                        crate::printer::size(least)
                    ),
                ));
            }
            *slot = Some(bytes);
        }
    }
    Ok(Sandbox {
        image: sandbox_image,
        lane_file_systems: sandbox.lane_file_systems,
        limits,
    })
}

/// Reads the `[lane]` table: `None` when it names no setup (and nothing else), else the
/// setup with every path and host checked, or an error naming the key and its line.
fn setup_of(reader: &Reader<'_>, lane: RawLane) -> Result<Option<Setup>, ConfigError> {
    let at = |entry: &Spanned<String>| Some(entry.span().start);
    let strings = |entries: Option<Vec<Spanned<String>>>| entries.unwrap_or_default();
    let (commands, inputs, outputs, network) = (
        strings(lane.setup),
        strings(lane.setup_inputs),
        strings(lane.setup_outputs),
        strings(lane.setup_network),
    );
    if commands.is_empty() {
        if let Some(first) = inputs.iter().chain(&outputs).chain(&network).next() {
            return Err(reader.error(
                at(first),
                "table `lane` names inputs, outputs or hosts of a setup but no `setup` commands: \
                 add `setup = [\"...\"]`, or leave the table out"
                    .into(),
            ));
        }
        return Ok(None);
    }
    for (i, command) in commands.iter().enumerate() {
        if command.get_ref().trim().is_empty() {
            return Err(reader.error(
                at(command),
                format!("key `lane.setup[{i}]` is empty: name a command, or leave it out"),
            ));
        }
    }
    if outputs.is_empty() {
        return Err(reader.error(
            commands.first().and_then(at),
            "key `lane.setup_outputs` is missing: a setup keeps only what it names, \
             like setup_outputs = [\".venv\"] or [\"target\", \".cargo-home\"]"
                .into(),
        ));
    }
    for (key, paths) in [("setup_inputs", &inputs), ("setup_outputs", &outputs)] {
        for (i, path) in paths.iter().enumerate() {
            relative_path(path.get_ref())
                .map_err(|why| reader.error(at(path), format!("key `lane.{key}[{i}]`: {why}")))?;
        }
    }
    for (i, a) in outputs.iter().enumerate() {
        if let Some(b) = outputs
            .iter()
            .skip(i.saturating_add(1))
            .find(|b| nested(a.get_ref(), b.get_ref()))
        {
            return Err(reader.error(
                at(b),
                format!(
                    "key `lane.setup_outputs`: `{}` and `{}` overlap; name each directory once",
                    a.get_ref(),
                    b.get_ref()
                ),
            ));
        }
    }
    for (i, entry) in network.iter().enumerate() {
        check_entry(entry.get_ref()).map_err(|why| {
            reader.error(at(entry), format!("key `lane.setup_network[{i}]`: {why}"))
        })?;
    }
    let text = |entries: Vec<Spanned<String>>| -> Vec<String> {
        entries
            .into_iter()
            .map(|e| e.into_inner().trim_end_matches('/').to_string())
            .collect()
    };
    Ok(Some(Setup {
        commands: commands.into_iter().map(Spanned::into_inner).collect(),
        inputs: text(inputs),
        outputs: text(outputs),
        network: network.into_iter().map(Spanned::into_inner).collect(),
    }))
}

/// Whether one of two relative paths is the other or inside it.
fn nested(a: &str, b: &str) -> bool {
    let (a, b) = (a.trim_end_matches('/'), b.trim_end_matches('/'));
    a == b || b.starts_with(&format!("{a}/")) || a.starts_with(&format!("{b}/"))
}

/// A path inside the repository, as a setup names one: relative, without `.`/`..`, and
/// nothing of git's or stet's own.
fn relative_path(path: &str) -> Result<(), String> {
    let trimmed = path.trim_end_matches('/');
    if trimmed.chars().any(char::is_control) || trimmed.starts_with(':') {
        return Err(format!(
            "`{}` holds a control character or starts with `:` (git's pathspec magic)",
            path.escape_debug()
        ));
    }
    if trimmed.is_empty() || trimmed.starts_with('/') {
        return Err(format!(
            "`{path}` is not a path relative to the repository's root, like \"target\""
        ));
    }
    for part in trimmed.split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return Err(format!(
                "`{path}` has an empty, `.` or `..` part; name the path from the repository's root"
            ));
        }
        if part.eq_ignore_ascii_case(".git") || part == ".stet" {
            return Err(format!("`{path}` is inside git's or stet's own directory"));
        }
    }
    Ok(())
}

/// The `[network]` table's allow-list, deny-list and fixed addresses.
type Network = (
    Vec<String>,
    Vec<String>,
    Vec<stet_egress::server::ConnectTo>,
);

/// Reads the `[network]` table: every entry as the proxy will read it, or an error naming
/// the key and its line.
fn network_of(reader: &Reader<'_>, network: RawNetwork) -> Result<Network, ConfigError> {
    let error = |offset: Option<usize>, message: String| reader.error(offset, message);
    let mut network_allow = Vec::new();
    let mut network_deny = Vec::new();
    let mut network_connect_to = Vec::new();
    for (key, entries, into) in [
        ("allow", network.allow, &mut network_allow),
        ("deny", network.deny, &mut network_deny),
    ] {
        for (i, entry) in entries.into_iter().flatten().enumerate() {
            check_entry(entry.get_ref()).map_err(|why| {
                error(
                    Some(entry.span().start),
                    format!("key `network.{key}[{i}]`: {why}"),
                )
            })?;
            into.push(entry.into_inner());
        }
    }
    for (target, addr) in network.connect_to.into_iter().flatten() {
        let at = Some(addr.span().start);
        let key = format!("key `network.connect_to.\"{target}\"`");
        let (host, port) = match check_entry(&target)
            .ok()
            .and_then(|()| target.rsplit_once(':'))
            .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
        {
            Some(found) => found,
            None => {
                return Err(error(
                    at,
                    format!("{key}: a target is `host:port`, like \"api.example.com:443\""),
                ))
            }
        };
        let addr = addr.get_ref().parse::<std::net::SocketAddr>().map_err(|_| {
            error(
                at,
                format!(
                    "{key}: `{}` is not an address and port, like \"127.0.0.1:8443\" (a name would need a lookup the proxy does not make)",
                    addr.get_ref()
                ),
            )
        })?;
        network_connect_to.push(stet_egress::server::ConnectTo {
            host: stet_egress::policy::canonical(host),
            port,
            addr,
        });
    }
    Ok((network_allow, network_deny, network_connect_to))
}

/// The line of every key directly under each `[plugins.<name>]` table of `text`.
fn plugin_key_lines(text: &str) -> BTreeMap<String, BTreeMap<String, usize>> {
    use toml::de::{DeTable, DeValue};
    let line = |offset: usize| {
        text[..offset.min(text.len())]
            .matches('\n')
            .count()
            .saturating_add(1)
    };
    let mut lines = BTreeMap::new();
    let Ok(parsed) = DeTable::parse(text) else {
        return lines;
    };
    let Some(plugins) = parsed
        .get_ref()
        .iter()
        .find(|(k, _)| k.get_ref() == "plugins")
        .map(|(_, v)| v)
    else {
        return lines;
    };
    let DeValue::Table(plugins) = plugins.get_ref() else {
        return lines;
    };
    for (name, table) in plugins {
        if let DeValue::Table(table) = table.get_ref() {
            let keys = table
                .iter()
                .map(|(key, _)| (key.get_ref().to_string(), line(key.span().start)))
                .collect();
            lines.insert(name.get_ref().to_string(), keys);
        }
    }
    lines
}

/// Parses a size such as `4GiB`, `512 MiB` or `10G` (powers of 1024 for `K`, `M`, `G`
/// with or without `iB`; `KB`, `MB`, `GB` are powers of 1000).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let normal = text.trim();
    // A bare K/M/G/T suffix means the binary unit, as in `docker run --memory 4g`.
    let normal = match normal.char_indices().last() {
        Some((i, c)) if "kKmMgGtT".contains(c) => {
            format!("{}{}iB", &normal[..i], c.to_ascii_uppercase())
        }
        _ => normal.to_string(),
    };
    normal
        .parse::<bytesize::ByteSize>()
        .map(|b| b.as_u64())
        .map_err(|_| format!("`{text}` is not a size; write it like `4GiB` or `512MiB`"))
}

/// `~/x` → `$HOME/x`; other paths as they are.
pub fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// The longest duration stet takes: a deadline (now + the duration) and its seconds or
/// milliseconds as an `i64` stay far inside what they hold.
pub const LONGEST_DURATION: Duration = Duration::from_secs(100 * 31_557_600);

/// Parses a duration such as `5s`, `1500ms` or `2m`; zero is refused, and so is one longer
/// than 100 years (a number too large for any duration included), by its value.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text)
        .map_err(|e| format!("`{text}` is not a duration ({e}); write it like `5s` or `1500ms`"))?;
    if d.is_zero() {
        return Err(format!("`{text}` is zero; a time limit must be positive"));
    }
    if d > LONGEST_DURATION {
        return Err(format!(
            "`{text}` is longer than 100 years, the longest duration stet takes"
        ));
    }
    Ok(d)
}

/// The root of the git working copy containing `dir`, if any.
pub fn repository_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

/// Checks one `[network]` allow or deny entry as a configuration file writes it (the
/// proxy reads the same words, `network::Egress::start`).
fn check_entry(text: &str) -> Result<(), String> {
    stet_egress::policy::Entry::parse(text).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_durations_are_refused_naming_the_value() {
        for huge in [
            "99999999999999999999999s",
            "18446744073709551615s",
            "101years",
            "9999999999999999h",
        ] {
            let why = parse_duration(huge).unwrap_err();
            assert!(why.contains(&format!("`{huge}`")), "{why}");
        }
        assert_eq!(parse_duration("100years").unwrap(), LONGEST_DURATION);
        assert_eq!(parse_duration("2.5m").unwrap(), Duration::from_secs(150));
    }

    #[test]
    fn connect_to_takes_a_listed_target_and_an_address() {
        let text = "[network.connect_to]\n\"Platform.Claude.com:443\" = \"127.0.0.1:8443\"\n";
        let c = parse(Path::new("config.toml"), text).unwrap();
        assert_eq!(
            c.network_connect_to,
            [stet_egress::server::ConnectTo {
                host: "platform.claude.com".into(),
                port: 443,
                addr: "127.0.0.1:8443".parse().unwrap(),
            }]
        );
        let named = "[network.connect_to]\n\"a.example:443\" = \"relay.example:443\"\n";
        let e = parse(Path::new("config.toml"), named)
            .unwrap_err()
            .to_string();
        assert!(e.contains("config.toml:2"), "{e}");
        assert!(
            e.contains("`relay.example:443` is not an address and port"),
            "{e}"
        );
        let portless = "[network.connect_to]\n\"a.example\" = \"127.0.0.1:1\"\n";
        let e = parse(Path::new("config.toml"), portless)
            .unwrap_err()
            .to_string();
        assert!(e.contains("a target is `host:port`"), "{e}");
    }

    #[test]
    fn the_keys_of_plugin_tables_are_placed_by_line() {
        let text =
            "[sandbox]\npids = 100\n\n[plugins.command]\nimplement = 5\nnetwork = \"none\"\n";
        let c = parse(Path::new("stet.toml"), text).unwrap();
        assert_eq!(c.plugin_lines["command"]["implement"], 5);
        assert_eq!(c.plugin_lines["command"]["network"], 6);
    }

    #[test]
    fn a_wrong_type_is_named_by_its_key_and_line() {
        let text = "[runtime]\nprefer = [\"docker\"]\n\n[sandbox]\npids = \"many\"\n";
        let e = parse(Path::new("stet.toml"), text).unwrap_err();
        assert_eq!(e.line, Some(5));
        assert!(
            e.message.starts_with("key `sandbox.pids`: invalid type"),
            "{}",
            e.message
        );
        let e = parse(Path::new("stet.toml"), "probe = { timeout = 5 }\n").unwrap_err();
        assert!(
            e.message.starts_with("key `probe.timeout`"),
            "{}",
            e.message
        );
    }

    fn parse_str(text: &str) -> Result<ConfigFile, ConfigError> {
        parse(Path::new("/repo/stet.toml"), text)
    }

    #[test]
    fn a_lane_setup_is_read_with_its_paths_and_hosts_checked() {
        let file = parse_str(
            "[lane]\nsetup = [\"uv sync\", \"make\"]\nsetup_inputs = [\"uv.lock\"]\n\
             setup_outputs = [\".venv/\", \"build\"]\nsetup_network = [\"pypi.org\"]\n",
        )
        .unwrap();
        let setup = file.lane_setup.unwrap();
        assert_eq!(setup.commands, ["uv sync", "make"]);
        assert_eq!(setup.inputs, ["uv.lock"]);
        assert_eq!(setup.outputs, [".venv", "build"]);
        assert_eq!(setup.network, ["pypi.org"]);
        for (text, says) in [
            (
                "setup = [\"make\"]\n",
                "key `lane.setup_outputs` is missing",
            ),
            (
                "setup = [\" \"]\nsetup_outputs = [\"a\"]\n",
                "key `lane.setup[0]` is empty",
            ),
            ("setup_outputs = [\"a\"]\n", "no `setup` commands"),
            (
                "setup = [\"m\"]\nsetup_outputs = [\"/abs\"]\n",
                "not a path relative",
            ),
            (
                "setup = [\"m\"]\nsetup_outputs = [\"a/../b\"]\n",
                "`..` part",
            ),
            (
                "setup = [\"m\"]\nsetup_outputs = [\"x/.git\"]\n",
                "git's or stet's own",
            ),
            (
                "setup = [\"m\"]\nsetup_inputs = [\".stet/q\"]\nsetup_outputs = [\"a\"]\n",
                "`lane.setup_inputs[0]`",
            ),
            (
                "setup = [\"m\"]\nsetup_outputs = [\"a\", \"a/b\"]\n",
                "overlap",
            ),
            (
                "setup = [\"m\"]\nsetup_outputs = [\"a\"]\nsetup_network = [\"http://x\"]\n",
                "`lane.setup_network[0]`",
            ),
        ] {
            let err = parse_str(&format!("[lane]\n{text}")).unwrap_err();
            assert!(err.to_string().contains(says), "{text}: {err}");
            assert!(err.line.is_some(), "{text}: {err}");
        }
        assert_eq!(parse_str("[lane]\n").unwrap().lane_setup, None);
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
                .starts_with("/repo/stet.toml:2: key `runtime.prefr`: unknown field `prefr`"),
            "{err}"
        );
    }

    #[test]
    fn wrong_type_names_the_line() {
        let err = parse_str("[runtime]\nprefer = \"docker\"\n").unwrap_err();
        assert_eq!(err.line, Some(2));
    }

    #[test]
    fn sandbox_limits_and_their_errors() {
        let c = parse_str(
            "[sandbox]\npids = 512\nmemory = \"2GiB\"\ncpus = 1.5\ndisk = \"10g\"\nfiles = 50000\n",
        )
        .unwrap();
        assert_eq!(
            c.limits,
            LimitSettings {
                pids: Some(512),
                memory_bytes: Some(2 << 30),
                millicpus: Some(1500),
                disk_bytes: Some(10 << 30),
                files: Some(50_000),
            }
        );
        let err = parse_str("[sandbox]\nfiles = 10\n").unwrap_err();
        assert!(err.message.contains("sandbox.files"), "{err}");
        let err = parse_str("[sandbox]\nimage = \"stet-lane:1\"\nmemory = \"lots\"\n").unwrap_err();
        assert_eq!(err.line, Some(3));
        assert!(err.message.contains("sandbox.memory"), "{err}");
        let err = parse_str("[sandbox]\nimage = \"\"\n").unwrap_err();
        assert!(err.message.contains("sandbox.image"), "{err}");
        assert!(parse_str("[sandbox]\npids = 3\n").is_err());
        assert!(parse_str("[sandbox]\ncpus = 0\n").is_err());
    }

    #[test]
    fn drive_jobs_and_their_errors() {
        let c = parse_str("[drive]\njobs = 3\n").unwrap();
        assert_eq!(c.drive_jobs, Some(3));
        assert_eq!(parse_str("[drive]\n").unwrap().drive_jobs, None);
        for bad in ["0", "-1", "65"] {
            let err = parse_str(&format!("[drive]\ncheck = \"true\"\njobs = {bad}\n")).unwrap_err();
            assert_eq!(err.line, Some(3), "{err}");
            assert!(err.message.contains("drive.jobs"), "{err}");
            assert!(err.message.contains("between 1 and 64"), "{err}");
        }
    }

    #[test]
    fn bad_duration_names_the_key() {
        let err = parse_str("[probe]\ntimeout = \"soon\"\n").unwrap_err();
        assert_eq!(err.line, Some(2));
        assert!(err.message.contains("probe.timeout"), "{err}");
    }
}
