//! The harness side of a drive: opening the selected harness, its walled profile and
//! settings, and the wall proof — static checks, then one short live launch in a real
//! sandbox showing the tool list, the approver and the guard refusing the canary.

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;
use stet_plugin_api::{
    EnvVar, ExitStatus, HarnessContext, Launch, Network, Outcome, PluginError, PluginKind, Profile,
    ROption, Role, RoleRequest, SandboxSpec, Stream, UserIds, WallCheck,
};

use crate::error::{CliError, Exit};
use crate::plugins::loader::{HarnessHandle, Instance};
use crate::plugins::selection::Selection;
use crate::plugins::survey;
use crate::sandbox::{self, plugin_error, OpenRuntime, Sandbox};
use crate::settings::Settings;

/// A harness plugin loaded into this process.
pub struct OpenHarness {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Its library, as loaded.
    pub library: PathBuf,
    /// Why it was chosen.
    pub selection: Selection,
    handle: HarnessHandle,
    /// What it is told about this drive.
    pub context: HarnessContext,
}

/// Selects and loads the harness.
pub fn open_harness(settings: &Settings) -> Result<OpenHarness, CliError> {
    let (probed, selection) = survey::choose(settings, PluginKind::Harness, &settings.harness)?;
    let Instance::Harness(handle) = survey::instantiate(settings, &probed)? else {
        return Err(CliError::usage(format!(
            "plugin {} is not a harness",
            probed.manifest.name
        )));
    };
    let stet = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| CliError::failure(format!("cannot find the running stet binary: {e}")))?;
    Ok(OpenHarness {
        name: probed.manifest.name.clone(),
        version: probed.manifest.version.to_string(),
        library: probed.manifest.library.clone(),
        selection,
        handle,
        context: HarnessContext {
            profiles_root: settings.profiles_root.display().to_string().into(),
            stet_binary: stet.display().to_string().into(),
            host_env: std::env::vars().map(|(k, v)| EnvVar::new(k, v)).collect(),
        },
    })
}

impl OpenHarness {
    fn err(&self, doing: &str) -> impl Fn(PluginError) -> CliError + '_ {
        let doing = doing.to_string();
        move |e| plugin_error(&self.name, &doing, &e)
    }

    /// The walled profile this drive runs on.
    pub fn profile(&self) -> Result<Profile, CliError> {
        self.handle.profile(self.context.clone()).map_err(|e| {
            let mut error = plugin_error(&self.name, "has no walled profile to run on", &e);
            error.exit = Exit::Unusable;
            error
        })
    }

    /// Writes the walled settings; returns what was written.
    pub fn write_settings(&self, profile: &Profile) -> Result<String, CliError> {
        self.handle
            .write_settings(self.context.clone(), profile.clone())
            .map_err(self.err("could not write the walled settings"))
    }

    /// Rewrites the walled settings, as every drive does at its start; when someone had
    /// edited them, returns what the check saw, so the caller can say so.
    pub fn rewrite_settings(&self, profile: &Profile) -> Result<Option<String>, CliError> {
        let edited = self
            .check_walls(profile)?
            .into_iter()
            .find(|w| {
                w.wall.as_str() == "settings-exact" && !w.held && !w.detail.ends_with("is absent")
            })
            .map(|w| w.detail.to_string());
        self.write_settings(profile)?;
        Ok(edited)
    }

    /// The static wall checks.
    pub fn check_walls(&self, profile: &Profile) -> Result<Vec<WallCheck>, CliError> {
        self.handle
            .check_walls(self.context.clone(), profile.clone())
            .map_err(self.err("could not check its walls"))
    }

    /// The launch for a role.
    pub fn launch(&self, request: RoleRequest) -> Result<Launch, CliError> {
        self.handle
            .launch(request)
            .map_err(self.err("could not describe its launch"))
    }

    /// The agent's own login, to run on a terminal.
    pub fn login_launch(&self, profile_dir: &str) -> Result<Launch, CliError> {
        self.handle
            .login_launch(self.context.clone(), profile_dir)
            .map_err(self.err("could not describe its login"))
    }

    /// Reads a role's output into an outcome.
    pub fn read_outcome(
        &self,
        role: Role,
        output: &[u8],
        exit: ExitStatus,
    ) -> Result<Outcome, CliError> {
        self.handle
            .read_outcome(role, output, exit)
            .map_err(self.err("could not read the agent's output"))
    }

    /// Reads the proof launch's output.
    pub fn read_proof(&self, output: &[u8]) -> Result<Vec<WallCheck>, CliError> {
        self.handle
            .read_proof(output)
            .map_err(self.err("could not read the proof"))
    }
}

/// One wall as reported.
#[derive(Debug, Clone, Serialize)]
pub struct Wall {
    /// The wall's name.
    pub wall: String,
    /// Whether it held.
    pub held: bool,
    /// What was seen.
    pub detail: String,
    /// What to do when it did not hold.
    pub remedy: String,
}

impl From<WallCheck> for Wall {
    fn from(w: WallCheck) -> Self {
        Wall {
            wall: w.wall.into_string(),
            held: w.held,
            detail: w.detail.into_string(),
            remedy: w.remedy.into_string(),
        }
    }
}

/// Everything the wall proof found.
#[derive(Debug, Serialize)]
pub struct Proof {
    /// The harness and runtime used.
    pub harness: String,
    /// The runtime the live launch ran in, when it ran.
    pub runtime: Option<String>,
    /// The profile directory.
    pub profile: String,
    /// How the agent is paid for and reaches its model.
    pub route: String,
    /// The network the live launch had.
    pub network: Option<String>,
    /// Whether the settings file had been edited and was replaced.
    pub replaced_edited_settings: Option<String>,
    /// Every wall, static then live.
    pub walls: Vec<Wall>,
    /// What the live launch's hooks and approver recorded.
    pub session: Vec<serde_json::Value>,
    /// The live launch's full output.
    #[serde(skip)]
    pub output: Vec<u8>,
}

impl Proof {
    /// Whether every wall held.
    pub fn held(&self) -> bool {
        self.walls.iter().all(|w| w.held)
    }
}

/// How the proof treats the walled settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingsMode {
    /// Rewrite them first, as every drive does.
    Rewrite,
    /// Leave them as they are and make the live launch even if a static wall is broken: a
    /// diagnosis of the profile as it stands.
    AsTheyAre,
}

/// The live proof is one short launch; one that has not answered in this time is killed
/// and its walls reported as not proven.
const PROOF_LIMIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Proves the walls: profile, settings (rewritten), static checks, then — when they all
/// hold, or when diagnosing the settings as they are — one short live launch in a fresh
/// sandbox of the selected runtime.
pub fn prove(
    settings: &Settings,
    harness: &OpenHarness,
    mode: SettingsMode,
) -> Result<Proof, CliError> {
    let profile = harness.profile()?;
    let replaced = match mode {
        SettingsMode::Rewrite => harness.rewrite_settings(&profile)?,
        SettingsMode::AsTheyAre => None,
    };
    let mut proof = Proof {
        harness: harness.name.clone(),
        runtime: None,
        profile: profile.dir.to_string(),
        route: profile.route.to_string(),
        network: None,
        replaced_edited_settings: replaced,
        walls: harness
            .check_walls(&profile)?
            .into_iter()
            .map(Wall::from)
            .collect(),
        session: Vec::new(),
        output: Vec::new(),
    };
    if !proof.held() && mode == SettingsMode::Rewrite {
        return Ok(proof);
    }
    let runtime = sandbox::open_runtime(settings)?;
    proof.runtime = Some(runtime.name.clone());
    let lane = tempfile::Builder::new()
        .prefix("stet-proof-")
        .tempdir()
        .map_err(|e| CliError::failure(format!("cannot make a scratch lane: {e}")))?;
    let lane_path = lane
        .path()
        .canonicalize()
        .unwrap_or_else(|_| lane.path().to_path_buf());
    // A lane is a git working copy with no remote; the proof's scratch lane is one too, so
    // that what the proof reports about git in the lane is what a drive's lane would show.
    crate::git::run(&lane_path, &["init", "--quiet"])
        .map_err(|e| CliError::failure(format!("cannot make a scratch lane: {e}")))?;
    let launch = harness.launch(RoleRequest {
        role: Role::Proof,
        prompt: "".into(),
        profile_dir: profile.dir.clone(),
        workdir: lane_path.display().to_string().into(),
    })?;
    let (output, network) = run_launch(
        settings,
        &runtime,
        &launch,
        &lane_path,
        "proof",
        Watch {
            time_limit: Some(PROOF_LIMIT),
            ..Watch::default()
        },
    )?;
    proof.network = Some(network);
    proof.session = output.session.clone();
    proof.output = output.stdout.clone();
    proof.walls.extend(
        harness
            .read_proof(&output.stdout)?
            .into_iter()
            .map(Wall::from),
    );
    // The runtime's own walls, in a sandbox made as the agent's would be.
    proof
        .walls
        .extend(crate::runtime_walls::prove(settings, &runtime, &launch)?);
    Ok(proof)
}

/// The agent process running now, if any: where a second signal finds what to kill.
pub type InFlight = std::sync::Mutex<Option<crate::sandbox::Process>>;

/// What sees an agent's output as it comes.
pub type Follow<'f> = dyn Fn(Stream, &[u8]) + Sync + 'f;

/// How the host watches a launch while it runs.
#[derive(Default)]
pub struct Watch<'a> {
    /// Where the running process is published, for a second signal to kill.
    pub in_flight: Option<&'a InFlight>,
    /// The call is killed when it has run this long (an agent that never answers).
    pub time_limit: Option<std::time::Duration>,
    /// Sees the agent's output as it comes (`stet drive --follow`).
    pub follow: Option<&'a Follow<'a>>,
    /// Variables the host adds to the agent's environment (the receipt's id).
    pub env: Vec<EnvVar>,
}

/// What a launch printed.
pub struct LaunchOutput {
    /// What the agent's hooks and approver recorded (JSON lines): session start and end,
    /// permission decisions.
    pub session: Vec<serde_json::Value>,
    /// Standard output (stream-json for the agent).
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
    /// How it ended.
    pub status: ExitStatus,
    /// Set when the host killed it at its time limit.
    pub timed_out: Option<std::time::Duration>,
}

/// Runs a harness's launch in a fresh sandbox with `lane` mounted read-write; returns what
/// it printed and how the network was given.
pub fn run_launch(
    settings: &Settings,
    runtime: &OpenRuntime,
    launch: &Launch,
    lane: &std::path::Path,
    role: &str,
    watch: Watch<'_>,
) -> Result<(LaunchOutput, String), CliError> {
    let lane_text = lane.display().to_string();
    // The agent's hooks record its session here, outside the lane so the working copy
    // stays clean.
    let session_dir = tempfile::Builder::new()
        .prefix("stet-session-")
        .tempdir()
        .map_err(|e| CliError::failure(format!("cannot make a session directory: {e}")))?;
    let session_dir_text = session_dir.path().display().to_string();
    let session_log = session_dir.path().join("session.jsonl");
    let mut mounts = vec![
        stet_plugin_api::Mount {
            source: lane_text.clone().into(),
            target: lane_text.clone().into(),
            writable: true,
        },
        stet_plugin_api::Mount {
            source: session_dir_text.clone().into(),
            target: session_dir_text.into(),
            writable: true,
        },
    ];
    mounts.extend(launch.mounts.iter().cloned());
    // A runtime that cannot limit egress to the declared hosts gets its open network; the
    // route names the hosts so the person sees what the agent needs.
    let (network, described) = match &launch.network {
        Network::None => (Network::None, "none".to_string()),
        Network::Open => (Network::Open, "open".to_string()),
        Network::AllowHosts(hosts) => {
            let hosts: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
            (
                Network::Open,
                format!(
                    "open (the agent needs {}; egress is not limited to it yet)",
                    hosts.join(", ")
                ),
            )
        }
    };
    let mut labels = sandbox::ownership_labels(&format!("{role}-{}", std::process::id()));
    labels.push(stet_plugin_api::Label::new("stet.kind", role));
    let spec = SandboxSpec {
        image: settings.image.clone().into(),
        mounts: mounts.into(),
        env: Default::default(),
        workdir: lane_text.clone().into(),
        network,
        limits: Default::default(),
        labels: labels.into(),
        user: ROption::RSome(UserIds {
            uid: nix::unistd::getuid().as_raw(),
            gid: nix::unistd::getgid().as_raw(),
        }),
    };
    let sandbox = Sandbox::create(runtime, spec)?;
    let mut process = launch.process.clone();
    process.workdir = ROption::RSome(lane_text.into());
    process.env.push(EnvVar::new(
        crate::agent_hooks::SESSION_LOG_VAR,
        session_log.display().to_string(),
    ));
    process.env.push(EnvVar::new(crate::drive::IN_SANDBOX, "1"));
    process.env.extend(watch.env.iter().cloned());
    let running = sandbox.spawn(process)?;
    // Published while it runs, so that a second signal can kill it from another thread.
    if let Some(slot) = watch.in_flight {
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(running.clone());
    }
    // An agent that never answers is killed at the time limit.
    let watchdog = watch
        .time_limit
        .map(|limit| crate::sandbox::Watchdog::start(&running, limit));
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let status = running.wait(&mut |stream, bytes| {
        if let Some(follow) = watch.follow {
            follow(stream, bytes);
        }
        match stream {
            Stream::Stdout => stdout.extend_from_slice(bytes),
            Stream::Stderr => stderr.extend_from_slice(bytes),
        }
    });
    if let Some(slot) = watch.in_flight {
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
    let status = status?;
    let timed_out = watchdog.filter(|w| w.fired()).and(watch.time_limit);
    drop(sandbox);
    let session = std::fs::read_to_string(&session_log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    Ok((
        LaunchOutput {
            session,
            stdout,
            stderr,
            status,
            timed_out,
        },
        described,
    ))
}

/// Prints a proof as lines.
pub fn print(proof: &Proof, out: &mut dyn Write) {
    let _ = writeln!(
        out,
        "harness: {} — profile {}",
        proof.harness, proof.profile
    );
    let _ = writeln!(out, "route: {}", proof.route);
    if let Some(detail) = &proof.replaced_edited_settings {
        let _ = writeln!(
            out,
            "note: the walled settings had been edited and were replaced ({detail})"
        );
    }
    if let (Some(runtime), Some(network)) = (&proof.runtime, &proof.network) {
        let _ = writeln!(out, "live proof: runtime {runtime}, network {network}");
    }
    let width = proof.walls.iter().map(|w| w.wall.len()).max().unwrap_or(0);
    for w in &proof.walls {
        let _ = writeln!(
            out,
            "  {}  {:<width$}  {}",
            if w.held { "held  " } else { "BROKEN" },
            w.wall,
            w.detail
        );
        if !w.held && !w.remedy.is_empty() {
            let _ = writeln!(out, "          hint: {}", w.remedy);
        }
    }
}

/// The default root of walled profiles: `~/.stet/profiles`.
pub fn default_profiles_root() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
        .join(".stet/profiles")
}

/// The word an outcome is known by in reports and receipts.
pub fn outcome_word(kind: stet_plugin_api::OutcomeKind) -> &'static str {
    use stet_plugin_api::OutcomeKind;
    match kind {
        OutcomeKind::Done => "done",
        OutcomeKind::Failed => "failed",
        OutcomeKind::OutOfShape => "out-of-shape",
        OutcomeKind::RateLimited => "rate-limited",
        OutcomeKind::NotLoggedIn => "not-logged-in",
    }
}

/// Who made an agent call and where, for its receipt.
#[derive(Clone)]
pub struct CallContext<'a> {
    /// The receipt's id.
    pub id: String,
    /// The run (`drive-…`, `ask-…`).
    pub run: String,
    /// The item, or empty.
    pub item: String,
    /// The lane's branch, or empty.
    pub lane: String,
    /// The role's word.
    pub role: &'static str,
    /// The runtime and harness, as hashed when they were opened.
    pub runtime: &'a crate::receipts::PluginRecord,
    /// Why the runtime was chosen.
    pub runtime_reason: &'a str,
    /// The harness.
    pub harness: &'a crate::receipts::PluginRecord,
    /// The image.
    pub image: &'a str,
    /// The network route.
    pub network: String,
    /// Start and end, ms since the epoch.
    pub started_unix_ms: u64,
    /// End.
    pub ended_unix_ms: u64,
    /// The lane's commit before and after.
    pub commit_before: String,
    /// After.
    pub commit_after: String,
}

/// Records that an agent call is starting: a receipt whose outcome is
/// [`receipts::RUNNING`](crate::receipts::RUNNING), durable before the agent is launched, so
/// that a drive killed during the call still leaves its trace (the next drive marks it
/// interrupted). [`record_call`] replaces it when the call ends.
pub fn record_start(repo: &std::path::Path, call: &CallContext<'_>) -> Result<PathBuf, CliError> {
    use crate::receipts;
    let log = receipts::log_path(repo, &call.id);
    receipts::write_durably(&log, b"")
        .map_err(|e| CliError::failure(format!("cannot write {}: {e}", log.display())))?;
    let mut receipt = receipt_of(call.clone(), log);
    receipt.outcome = receipts::RUNNING.to_string();
    receipts::record(repo, &receipt)
        .map_err(|e| CliError::failure(format!("cannot record the receipt: {e}")))
}

/// Records one agent call: its full output first, then its receipt, each durable before
/// this returns (and so before the caller's next move).
pub fn record_call(
    repo: &std::path::Path,
    call: CallContext<'_>,
    output: &LaunchOutput,
    outcome: &Outcome,
) -> Result<PathBuf, CliError> {
    use crate::receipts;
    let log = receipts::log_path(repo, &call.id);
    receipts::write_durably(&log, &output.stdout)
        .map_err(|e| CliError::failure(format!("cannot write {}: {e}", log.display())))?;
    let receipt = receipts::Receipt {
        exit_code: output.status.code.into_option(),
        exit_signal: output.status.signal.into_option(),
        outcome: outcome_word(outcome.kind).to_string(),
        detail: outcome.detail.to_string(),
        retry_at_unix: outcome.retry_at_unix.into_option(),
        cost_usd: outcome.cost_usd.into_option(),
        usage: usage_pairs(outcome),
        session: output.session.clone(),
        ..receipt_of(call, log)
    };
    receipts::record(repo, &receipt)
        .map_err(|e| CliError::failure(format!("cannot record the receipt: {e}")))
}

fn receipt_of(call: CallContext<'_>, log: PathBuf) -> crate::receipts::Receipt {
    crate::receipts::Receipt {
        id: call.id,
        run: call.run,
        owner: crate::sandbox::owner_token(std::process::id()).unwrap_or_default(),
        item: call.item,
        lane: call.lane,
        role: call.role.to_string(),
        runtime: call.runtime.clone(),
        runtime_reason: call.runtime_reason.to_string(),
        harness: call.harness.clone(),
        image: call.image.to_string(),
        network: call.network,
        started_unix_ms: call.started_unix_ms,
        ended_unix_ms: call.ended_unix_ms,
        exit_code: None,
        exit_signal: None,
        outcome: String::new(),
        detail: String::new(),
        retry_at_unix: None,
        cost_usd: None,
        usage: Vec::new(),
        commit_before: call.commit_before,
        commit_after: call.commit_after,
        log,
        session: Vec::new(),
    }
}

/// An outcome's usage counters as `(key, value)` pairs, for reports and receipts.
pub fn usage_pairs(outcome: &Outcome) -> Vec<(String, String)> {
    outcome
        .usage
        .iter()
        .map(|f| (f.key.to_string(), f.value.to_string()))
        .collect()
}
