//! The harness side of a drive: opening the selected harness (its walled profile, settings
//! and static walls, through the plugin), and running one of its launches in a fresh
//! sandbox — output streamed to the call's log with a bounded head and tail kept, the call
//! limit, the lane's disk limit, and the limit counters read before teardown.

use std::path::{Path, PathBuf};

use stet_plugin_api::{
    CallOutcome, EnvVar, ExitStatus, HarnessContext, Launch, OutcomeCode, PluginError, PluginKind,
    Profile, ROption, Role, RoleRequest, Stream, WallReport, WallState,
};

use crate::error::{Concept, Error, Kind};
use crate::plugins::loader::{HarnessHandle, Instance};
use crate::plugins::selection::Selection;
use crate::plugins::survey;
use crate::sandbox::{plugin_error, stet_binary, DiskWatch, LaneAccess, OpenRuntime, Plan};
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
pub fn open_harness(settings: &Settings) -> Result<OpenHarness, Error> {
    let (probed, selection) =
        survey::choose(&settings.plugins, PluginKind::Harness, &settings.harness)?;
    open_probed(settings, &probed, selection)
}

/// Selects and loads the harness and the runtime a command runs it on, from one survey
/// (their probes run side by side).
pub fn open_with_runtime(settings: &Settings) -> Result<(OpenHarness, OpenRuntime), Error> {
    let mut chosen = survey::choose_each(
        &settings.plugins,
        &[
            (PluginKind::Harness, &settings.harness),
            (PluginKind::Runtime, &settings.runtime),
        ],
    )
    .into_iter();
    let (harness, runtime) = (
        chosen.next().expect("asked for a harness"),
        chosen.next().expect("asked for a runtime"),
    );
    // A mistake in the command line (a name no plugin has) comes before "nothing usable".
    if let Err(e) = &runtime {
        if e.kind == Kind::Usage && harness.as_ref().is_err_and(|h| h.kind != Kind::Usage) {
            return Err(e.clone());
        }
    }
    let (harness, harness_selection) = harness?;
    let (runtime, runtime_selection) = runtime?;
    Ok((
        open_probed(settings, &harness, harness_selection)?,
        crate::sandbox::open_probed(settings, &runtime, runtime_selection)?,
    ))
}

/// Loads a harness that passed its probe.
pub fn open_probed(
    settings: &Settings,
    probed: &crate::plugins::probe::Probed,
    selection: Selection,
) -> Result<OpenHarness, Error> {
    let Instance::Harness(handle) = survey::instantiate(&settings.plugins, probed)? else {
        return Err(
            Concept::Harness.usage(format!("plugin {} is not a harness", probed.manifest.name))
        );
    };
    let stet = stet_binary()?;
    Ok(OpenHarness {
        name: probed.manifest.name.clone(),
        version: probed.manifest.version.to_string(),
        library: probed.manifest.library.clone(),
        selection,
        handle,
        context: HarnessContext {
            profiles_root: settings.profiles_root.display().to_string().into(),
            stet_binary: stet.into(),
            host_env: std::env::vars().map(|(k, v)| EnvVar::new(k, v)).collect(),
        },
    })
}

impl OpenHarness {
    /// A harness object made in this process, not loaded from a library (the drive's
    /// scenario tests, through the SDK's own constructors).
    #[cfg(any(test, feature = "testing"))]
    pub fn in_process(name: &str, handle: HarnessHandle, context: HarnessContext) -> Self {
        OpenHarness {
            name: name.to_string(),
            version: "0.0.0".to_string(),
            library: PathBuf::from(format!("(in process: {name})")),
            selection: Selection {
                kind: "harness",
                chosen: Some(name.to_string()),
                reason: "made in process for a test".to_string(),
                ..Default::default()
            },
            handle,
            context,
        }
    }

    fn err(&self, doing: &str) -> impl Fn(PluginError) -> Error + '_ {
        let doing = doing.to_string();
        move |e| plugin_error(&self.name, &doing, &e)
    }

    /// The walled profile this drive runs on.
    pub fn profile(&self) -> Result<Profile, Error> {
        self.handle.profile(self.context.clone()).map_err(|e| {
            let mut error = plugin_error(&self.name, "has no walled profile to run on", &e);
            error.kind = Kind::Unusable;
            error
        })
    }

    /// The walled profile, or `None` when the harness says there is none yet
    /// ([`ErrorCode::NOT_FOUND`](stet_plugin_api::ErrorCode::NOT_FOUND)): what `stet profile
    /// login` creates.
    pub fn profile_if_any(&self) -> Result<Option<Profile>, Error> {
        match self.handle.profile(self.context.clone()) {
            Ok(profile) => Ok(Some(profile)),
            Err(e) if e.code == stet_plugin_api::ErrorCode::NOT_FOUND => Ok(None),
            Err(e) => {
                let mut error = plugin_error(&self.name, "has no walled profile to run on", &e);
                error.kind = Kind::Unusable;
                Err(error)
            }
        }
    }

    /// Writes the walled settings; returns what was written.
    pub fn write_settings(&self, profile: &Profile) -> Result<String, Error> {
        self.handle
            .write_settings(self.context.clone(), profile.clone())
            .map_err(self.err("could not write the walled settings"))
    }

    /// Rewrites the walled settings, as every drive does at its start; when someone had
    /// edited them, returns what the check saw, so the caller can say so.
    pub fn rewrite_settings(&self, profile: &Profile) -> Result<Option<String>, Error> {
        // Edited, not merely absent (stet has not written them yet).
        let edited = self
            .check_walls(profile)?
            .into_iter()
            .find(|w| {
                w.wall.as_str() == stet_plugin_api::wall::SETTINGS_EXACT
                    && w.state == WallState::BROKEN
            })
            .map(|w| w.detail.to_string());
        self.write_settings(profile)?;
        Ok(edited)
    }

    /// The static wall checks, with typed states.
    pub fn check_walls(&self, profile: &Profile) -> Result<Vec<WallReport>, Error> {
        self.handle
            .check_walls_typed(self.context.clone(), profile.clone())
            .map_err(self.err("could not check its walls"))
    }

    /// The launch for a role.
    pub fn launch(&self, request: RoleRequest) -> Result<Launch, Error> {
        self.handle
            .launch(request)
            .map_err(self.err("could not describe its launch"))
    }

    /// The agent's own login, to run on a terminal.
    pub fn login_launch(&self, profile_dir: &str) -> Result<Launch, Error> {
        self.handle
            .login_launch(self.context.clone(), profile_dir)
            .map_err(self.err("could not describe its login"))
    }

    /// Reads a role's output into a typed outcome.
    pub fn read_call(
        &self,
        role: Role,
        output: &[u8],
        exit: ExitStatus,
    ) -> Result<CallOutcome, Error> {
        self.handle
            .read_call(role, output, exit)
            .map_err(self.err("could not read the agent's output"))
    }

    /// When the stored login stops being accepted (ms since the epoch; 0: it does not).
    pub fn login_expiry(&self, profile: &Profile) -> Result<u64, Error> {
        self.handle
            .login_expiry(self.context.clone(), profile.clone())
            .map_err(self.err("could not say when its login expires"))
    }

    /// The launch that renews the stored login on a copy it puts into `work_dir`.
    pub fn refresh_launch(&self, profile: &Profile, work_dir: &Path) -> Result<Launch, Error> {
        self.handle
            .refresh_launch(self.context.clone(), profile.clone(), work_dir)
            .map_err(self.err("cannot renew its stored login"))
    }

    /// Puts the login renewed in `work_dir` into the profile; its new expiry.
    pub fn settle_refresh(&self, profile: &Profile, work_dir: &Path) -> Result<u64, Error> {
        self.handle
            .settle_refresh(self.context.clone(), profile.clone(), work_dir)
            .map_err(self.err("did not renew its stored login"))
    }

    /// Reads the proof launch's output into typed walls.
    pub fn read_proof(&self, output: &[u8]) -> Result<Vec<WallReport>, Error> {
        self.handle
            .read_proof_typed(output)
            .map_err(self.err("could not read the proof"))
    }
}

/// The profile one agent call runs on: a fresh copy of the walled profile, so that nothing
/// a call writes there reaches a later call. Deleted when dropped; [`CallProfile::settle`]
/// first lets the harness carry back what its own rule keeps (a login its agent refreshed).
pub struct CallProfile {
    /// The copy's stand-ins; revoked when this is dropped, after the call's sandbox.
    pub sealed: crate::credentials::Sealed,
    copy: tempfile::TempDir,
    /// The copy's path, as the launch is told it.
    pub dir: String,
}

impl CallProfile {
    /// Copies the walled profile `profile` for one call, with a stand-in in place of each
    /// credential `harness` declares (`credentials::seal`).
    pub fn of(harness: &OpenHarness, profile: &Profile) -> Result<CallProfile, Error> {
        let copy = crate::sandbox::leftovers::temp_dir("stet-call-profile-").map_err(|e| {
            Concept::Harness.failure(format!("cannot make the call's profile: {e}"))
        })?;
        let dir = copy.path().join("profile");
        crate::files::copy_tree(Path::new(profile.dir.as_str()), &dir).map_err(|e| {
            Concept::Harness
                .failure(format!("cannot copy the walled profile {}", profile.dir))
                .caused_by(e.to_string())
        })?;
        let decls = harness
            .handle
            .credentials(harness.context.clone(), profile.clone())
            .map_err(harness.err("could not declare its credentials"))?;
        let sealed = crate::credentials::seal(&harness.name, &decls, &dir)?;
        Ok(CallProfile {
            sealed,
            dir: dir.display().to_string(),
            copy,
        })
    }

    /// After the call: the harness carries back what it keeps; the copy is deleted.
    /// Returns the files carried back.
    pub fn settle(self, harness: &OpenHarness, profile: &Profile) -> Result<Vec<String>, Error> {
        let carried = harness
            .handle
            .settle_profile(
                harness.context.clone(),
                profile.clone(),
                Path::new(&self.dir),
            )
            .map_err(harness.err("could not settle the call's profile"));
        drop(self.copy);
        carried
    }
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
    /// The call's credentials (its profile copy's stand-ins): the launch's environment is
    /// sealed too, and the proxy serves their gateways.
    pub sealed: Option<&'a mut crate::credentials::Sealed>,
    /// The sandbox's model API is stet's stub at [`stet_plugin_api::GATEWAY_PORT`], which
    /// answers at once and spends nothing (a login's refresh, `crate::credentials::renew`).
    pub stub_model_api: bool,
    /// Removes the sandbox off the critical path once it is stopped (a drive's); without
    /// one it is torn down before the call returns.
    pub reaper: Option<&'a crate::sandbox::Reaper>,
}

/// A resource limit a call ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitReached {
    /// The kernel killed a process of the sandbox for memory: the limit, in bytes.
    Memory(u64),
    /// What the sandbox wrote (its lane, its profile copy, its session directory) met the
    /// disk limit, in bytes; the call was ended.
    Disk(u64),
    /// What it made met the files limit; the call was ended.
    Files(u64),
    /// Forks were refused at the pids limit (how many, the limit).
    Pids(u64, u32),
}

impl LimitReached {
    /// The limit's name in receipts.
    pub fn word(&self) -> &'static str {
        match self {
            LimitReached::Memory(_) => "memory",
            LimitReached::Disk(_) => "disk",
            LimitReached::Files(_) => "files",
            LimitReached::Pids(..) => "pids",
        }
    }

    /// What happened, in a line.
    pub fn describe(&self) -> String {
        let size = crate::printer::size;
        match self {
            LimitReached::Memory(limit) => {
                format!("killed by the memory limit, {}", size(*limit))
            }
            LimitReached::Disk(limit) => format!(
                "ended: what it wrote (its lane, its profile copy, its session) met the disk limit, {}",
                size(*limit)
            ),
            LimitReached::Files(limit) => format!(
                "ended: the files it made (in its lane, its profile copy, its session) met the files limit, {limit}"
            ),
            LimitReached::Pids(refused, limit) => {
                format!("the process limit ({limit}) was reached: {refused} fork(s) failed")
            }
        }
    }

    /// Whether the call was ended by it (rather than only slowed).
    pub fn ended_the_call(&self) -> bool {
        !matches!(self, LimitReached::Pids(..))
    }
}

/// What a launch printed, and how it ended.
pub struct LaunchOutput {
    /// What the agent's hooks and approver recorded (JSON lines): session start and end,
    /// permission decisions. Read as data, bounded.
    pub session: Vec<serde_json::Value>,
    /// Standard output as stet keeps it in memory: all of it when short, else its first
    /// and last [`crate::capture::KEPT`] bytes (whole lines); the whole is in the log.
    pub stdout: Vec<u8>,
    /// How many bytes of standard output there were.
    pub stdout_bytes: u64,
    /// How many of them the log left out (its start and end are kept).
    pub log_cut: u64,
    /// The last 64 KiB of standard error.
    pub stderr: Vec<u8>,
    /// How it ended.
    pub status: ExitStatus,
    /// Set when the host killed it at its time limit.
    pub timed_out: Option<std::time::Duration>,
    /// A resource limit it ran into.
    pub limit: Option<LimitReached>,
    /// The network it had, in words.
    pub network: String,
    /// What stet's proxy refused it.
    pub blocked: Vec<crate::receipts::BlockedRecord>,
    /// Requests to its credential gateways, and those sent on with the real credential.
    pub gateway: stet_egress::server::GatewayCounts,
}

impl LaunchOutput {
    /// The output of a call that could not be made at all.
    pub fn none(network: String) -> LaunchOutput {
        LaunchOutput {
            session: Vec::new(),
            stdout: Vec::new(),
            stdout_bytes: 0,
            log_cut: 0,
            stderr: Vec::new(),
            status: ExitStatus {
                code: ROption::RNone,
                signal: ROption::RNone,
                out_of_memory: false,
            },
            timed_out: None,
            limit: None,
            network,
            blocked: Vec::new(),
            gateway: Default::default(),
        }
    }
}

/// Where a call's standard error is kept, beside its log: `<id>.stderr.log`.
pub fn stderr_log_of(log: &Path) -> PathBuf {
    log.with_extension("stderr.log")
}

/// The variable naming the file for an agent call's session record: set on every launch,
/// appended to by stet's hooks and approver inside the sandbox.
pub const SESSION_LOG_VAR: &str = "STET_SESSION_LOG";

/// The most of a session record read back (a sandbox writes it).
const SESSION_LIMIT: u64 = 1 << 20;

/// Runs a harness's launch in a fresh sandbox planned by `plan` (which names the lane and
/// how the stage may use it); standard output goes to `log` as it comes.
pub fn run_launch(
    settings: &Settings,
    runtime: &OpenRuntime,
    launch: &Launch,
    plan: Plan,
    mut watch: Watch<'_>,
    log: Option<&Path>,
) -> Result<LaunchOutput, Error> {
    let ready = ready_launch(
        settings,
        runtime,
        launch,
        plan,
        watch.sealed.as_deref_mut(),
        watch.stub_model_api,
    )?;
    run_ready(ready, settings, launch, watch, log)
}

/// A launch's sandbox, made and walled in, with nothing run in it yet: where
/// [`run_ready`] runs the launch's process. A drive makes the next stage's while the
/// current stage runs.
pub struct Ready<'a> {
    /// Where the agent's hooks record its session (outside the lane, so the working copy
    /// stays clean).
    session_dir: tempfile::TempDir,
    walled: crate::network::WalledSandbox<'a>,
    workdir: String,
    /// The host directories the disk limit is watched on: a lane mounted read-write, the
    /// session directory, every writable mount (the call's profile copy).
    disk: Vec<PathBuf>,
    /// Directories within them mounted read-only (`stet ask`'s repositories): not the
    /// sandbox's to grow.
    disk_read_only: Vec<PathBuf>,
    /// What the sandbox was made for: a launch asking for other mounts or another network
    /// cannot run in it.
    mounts: Vec<stet_plugin_api::Mount>,
    network: stet_plugin_api::Network,
    /// The launch's environment as the harness gave it: what the sandbox's proxy was made
    /// to serve (a credential in a variable among it).
    env: Vec<EnvVar>,
}

impl Ready<'_> {
    /// Whether `launch` asks for exactly the sandbox this is: its mounts, its network,
    /// and the environment the sandbox's proxy was made for.
    pub fn fits(&self, launch: &Launch) -> bool {
        launch.mounts.as_slice() == self.mounts.as_slice()
            && launch.network == self.network
            && launch.process.env.as_slice() == self.env.as_slice()
    }

    /// Ends it unused (stopped, then removed by `reaper`, or torn down here).
    pub fn discard(self, reaper: Option<&crate::sandbox::Reaper>) {
        let _ = self.walled.finish(reaper);
    }
}

/// Makes `launch`'s sandbox as `plan` says, walled in: the session directory, the launch's
/// mounts, the network it declared (through the proxy, which serves the gateways of
/// `sealed`, the call's credentials, whose stand-ins replace them in the launch first), or
/// the model API stub.
pub fn ready_launch<'a>(
    settings: &Settings,
    runtime: &'a OpenRuntime,
    launch: &Launch,
    mut plan: Plan,
    sealed: Option<&mut crate::credentials::Sealed>,
    stub_model_api: bool,
) -> Result<Ready<'a>, Error> {
    let session_dir = crate::sandbox::leftovers::temp_dir("stet-session-")
        .map_err(|e| Concept::Harness.failure(format!("cannot make a session directory: {e}")))?;
    let session_dir_text = session_dir.path().display().to_string();
    plan.mounts.push(stet_plugin_api::Mount {
        source: session_dir_text.clone().into(),
        target: session_dir_text.into(),
        writable: true,
    });
    plan.mounts.extend(launch.mounts.iter().cloned());
    // The launch's process carries its whole environment.
    plan.env = Vec::new();
    let workdir = plan.workdir.clone();
    // Every host directory the sandbox can write counts toward its disk limit: what it
    // writes outside the lane is on the host's disk all the same.
    let disk_read_only: Vec<PathBuf> = plan
        .lane
        .iter()
        .filter(|(_, access)| *access == LaneAccess::ReadWrite)
        .flat_map(|(lane, _)| lane.read_only.iter().map(|(source, _)| source.clone()))
        .collect();
    let disk: Vec<PathBuf> = plan
        .lane
        .iter()
        .filter(|(_, access)| *access == LaneAccess::ReadWrite)
        .map(|(lane, _)| lane.work_tree.clone())
        .chain(
            plan.mounts
                .iter()
                .filter(|m| m.writable)
                .map(|m| PathBuf::from(m.source.as_str())),
        )
        .collect();
    // Sealing learns the credentials the launch passes in variables, which the gateways
    // need; nothing real may be in what the sandbox is made with.
    let gateways = match sealed {
        Some(sealed) => {
            let mut env = launch.process.env.to_vec();
            sealed.seal_env(&mut env)?;
            sealed.check_launch(&launch.process, &launch.mounts)?;
            sealed.gateways()
        }
        None => Vec::new(),
    };
    let stubs: &[u16] = if stub_model_api {
        &[stet_plugin_api::GATEWAY_PORT]
    } else {
        &[]
    };
    let walled = crate::network::WalledSandbox::make(
        settings,
        runtime,
        &launch.network,
        gateways,
        stubs,
        plan,
    )?;
    Ok(Ready {
        session_dir,
        walled,
        workdir,
        disk,
        disk_read_only,
        mounts: launch.mounts.to_vec(),
        network: launch.network.clone(),
        env: launch.process.env.to_vec(),
    })
}

/// Runs `launch`'s process in `ready`, its sandbox (which must [fit](Ready::fits) it),
/// watched as `watch` says; standard output goes to `log` as it comes.
pub fn run_ready(
    ready: Ready<'_>,
    settings: &Settings,
    launch: &Launch,
    mut watch: Watch<'_>,
    log: Option<&Path>,
) -> Result<LaunchOutput, Error> {
    if !ready.fits(launch) {
        let fault = Concept::Harness.failure(
            "the launch asks for other mounts or another network than its sandbox was made with",
        );
        ready.discard(watch.reaper);
        return Err(fault);
    }
    let Ready {
        session_dir,
        walled,
        workdir,
        disk,
        disk_read_only,
        ..
    } = ready;
    let session_log = session_dir.path().join("session.jsonl");
    let mut process = launch.process.clone();
    if let Some(sealed) = watch.sealed.as_deref_mut() {
        sealed.seal_env(process.env.as_mut_slice())?;
        // The mounts are the ones `ready_launch` read through (the launch fits them); only
        // the arguments and the standard input, which carry the prompt, are new.
        sealed.check_launch(&process, &[])?;
    }
    let described = walled.described.clone();
    let sandbox = &walled.sandbox;
    process.workdir = ROption::RSome(workdir.into());
    process.env.extend(walled.env());
    process.env.push(EnvVar::new(
        SESSION_LOG_VAR,
        session_log.display().to_string(),
    ));
    process
        .env
        .push(EnvVar::new(crate::sandbox::IN_SANDBOX, "1"));
    process.env.extend(watch.env.iter().cloned());
    let mut stdout = crate::capture::Capture::new(log, crate::capture::KEPT).map_err(|e| {
        Concept::Harness.failure(format!(
            "cannot write the call's log {}: {e}",
            log.map(|l| l.display().to_string()).unwrap_or_default()
        ))
    })?;
    // Standard error beside the log, apart from it (the log is the agent's stdout, in the
    // shape its harness reads).
    let stderr_log = log.map(stderr_log_of);
    let mut stderr =
        crate::capture::Capture::new(stderr_log.as_deref(), 32 * 1024).map_err(|e| {
            Concept::Harness.failure(format!("cannot keep the call's standard error: {e}"))
        })?;
    let running = sandbox.spawn(process)?;
    // Published while it runs, so that a second signal can kill it from another thread.
    if let Some(slot) = watch.in_flight {
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(running.clone());
    }
    // An agent that never answers is killed at the time limit; one whose lane grows past
    // the disk limit, when it does.
    let watchdog = watch
        .time_limit
        .map(|limit| crate::sandbox::Watchdog::start(&running, limit));
    let disk_watch = (!disk.is_empty()).then(|| {
        DiskWatch::start(
            &running,
            disk,
            disk_read_only,
            crate::files::Footprint {
                bytes: settings.limits.disk_bytes,
                files: settings.limits.files,
            },
        )
    });
    let status = running.wait(&mut |stream, bytes| {
        if let Some(follow) = watch.follow {
            follow(stream, bytes);
        }
        match stream {
            Stream::Stdout => stdout.push(bytes),
            Stream::Stderr => stderr.push(bytes),
        }
    });
    if let Some(slot) = watch.in_flight {
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
    let status = status?;
    let timed_out = watchdog.filter(|w| w.fired()).and(watch.time_limit);
    let limit = limit_reached(
        settings,
        disk_watch.and_then(|w| w.met()),
        sandbox.limit_events(),
        &status,
        timed_out.is_some(),
    );
    let (blocked, gateway) = walled.finish(watch.reaper);
    let stdout_bytes = stdout.total();
    let (stdout, log_cut) = stdout.finish_counting().map_err(|e| {
        Concept::Harness.failure(format!(
            "cannot write the call's log {}: {e}",
            log.map(|l| l.display().to_string()).unwrap_or_default()
        ))
    })?;
    let stderr = stderr.finish().unwrap_or_default();
    Ok(LaunchOutput {
        session: session_records(&session_log),
        stdout,
        stdout_bytes,
        log_cut,
        stderr,
        status,
        timed_out,
        limit,
        network: described,
        blocked,
        gateway,
    })
}

/// Which limit ended a call, if one did: the disk or files limit its watch met, else the
/// memory limit (the runtime says so, or an out-of-memory kill took a process the call
/// did not time out), else the process limit (a fork refused).
fn limit_reached(
    settings: &Settings,
    disk: Option<crate::sandbox::DiskMet>,
    events: crate::sandbox::LimitEvents,
    status: &ExitStatus,
    timed_out: bool,
) -> Option<LimitReached> {
    let limits = settings.limits;
    match disk {
        Some(crate::sandbox::DiskMet::Bytes) => return Some(LimitReached::Disk(limits.disk_bytes)),
        Some(crate::sandbox::DiskMet::Files) => return Some(LimitReached::Files(limits.files)),
        None => {}
    }
    if status.out_of_memory
        || (events.oom_kills > 0 && status.signal.into_option().is_some() && !timed_out)
    {
        Some(LimitReached::Memory(limits.memory_bytes))
    } else if events.pids_refused > 0 {
        Some(LimitReached::Pids(events.pids_refused, limits.pids))
    } else {
        None
    }
}

/// The session records the agent's hook wrote to `path`: written inside the sandbox, read
/// as data only (no link followed, bounded; a line that is not JSON is left out).
fn session_records(path: &Path) -> Vec<serde_json::Value> {
    crate::files::read_untrusted(path, SESSION_LIMIT)
        .map(|bytes| {
            String::from_utf8_lossy(&bytes)
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The word an outcome is known by in reports and receipts (`code N` for a code from a
/// newer plugin this host has no word for).
pub fn outcome_word(kind: OutcomeCode) -> String {
    kind.name()
        .map(str::to_string)
        .unwrap_or_else(|| format!("code {}", kind.0))
}

/// Reads a call's outcome from the harness, then says what the host knows better: a call
/// killed at the call limit or by a resource limit ended for that reason, whatever the
/// harness made of its output.
pub fn outcome_of(
    harness: &OpenHarness,
    role: Role,
    output: &LaunchOutput,
) -> Result<CallOutcome, Error> {
    let mut outcome = harness.read_call(role, &output.stdout, output.status)?;
    if let Some(limit) = output.timed_out {
        outcome.kind = OutcomeCode::FAILED;
        outcome.detail = format!(
            "no answer within {} (--call-limit); the agent's processes were killed",
            humantime::format_duration(limit)
        )
        .into();
    } else if let Some(limit) = output.limit {
        if limit.ended_the_call() {
            outcome.kind = OutcomeCode::RESOURCE_LIMIT;
            outcome.detail = limit.describe().into();
        } else if outcome.kind != OutcomeCode::DONE {
            outcome.detail = format!("{} ({})", outcome.detail, limit.describe()).into();
        }
    }
    Ok(outcome)
}

/// How a call ended, for its receipt.
pub fn call_end(output: &LaunchOutput, outcome: &CallOutcome) -> crate::receipts::CallEnd {
    crate::receipts::CallEnd {
        exit_code: output.status.code.into_option(),
        exit_signal: output.status.signal.into_option(),
        outcome: crate::receipts::Outcome::of_code(outcome.kind),
        detail: outcome.detail.to_string(),
        retry_at_unix: outcome.retry_at_unix.into_option(),
        cost_usd: outcome.cost_usd.into_option(),
        usage: usage_pairs(outcome),
        session: output.session.clone(),
        limit_reached: output.limit.map(|l| l.word().to_string()),
        output_bytes: output.stdout_bytes,
        log_cut_bytes: output.log_cut,
        profile_carried: Vec::new(),
        network_blocked: output.blocked.clone(),
    }
}

/// An outcome's usage counters as `(key, value)` pairs, for reports and receipts.
pub fn usage_pairs(outcome: &CallOutcome) -> Vec<(String, String)> {
    outcome
        .usage
        .iter()
        .map(|f| (f.key.to_string(), f.value.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use stet_plugin_api::{
        Fact, HarnessPlugin, Launch, Outcome, PluginError, ProbeReport, Profile, RoleRequest,
        WallCheck,
    };

    use super::*;
    use crate::plugins::loader::HarnessHandle;

    /// A harness whose reading of every call is what its config says: `done`, or `failed`.
    struct Reads(OutcomeCode);

    impl HarnessPlugin for Reads {
        fn probe(&self) -> Result<ProbeReport, PluginError> {
            Ok(ProbeReport::available("reads 1", 1))
        }
        fn profile(&self, _: &HarnessContext) -> Result<Profile, PluginError> {
            Err(PluginError::unsupported("not in this test"))
        }
        fn write_settings(&self, _: &HarnessContext, _: &Profile) -> Result<String, PluginError> {
            Err(PluginError::unsupported("not in this test"))
        }
        fn check_walls(
            &self,
            _: &HarnessContext,
            _: &Profile,
        ) -> Result<Vec<WallCheck>, PluginError> {
            Err(PluginError::unsupported("not in this test"))
        }
        fn launch(&self, _: &RoleRequest) -> Result<Launch, PluginError> {
            Err(PluginError::unsupported("not in this test"))
        }
        fn read_proof(&self, _: &[u8]) -> Result<Vec<WallCheck>, PluginError> {
            Err(PluginError::unsupported("not in this test"))
        }
        fn read_outcome(&self, _: Role, _: &[u8], _: ExitStatus) -> Result<Outcome, PluginError> {
            Err(PluginError::unsupported("not in this test"))
        }
        fn read_call(
            &self,
            _: Role,
            output: &[u8],
            _: ExitStatus,
        ) -> Result<CallOutcome, PluginError> {
            Ok(CallOutcome {
                kind: self.0,
                detail: String::from_utf8_lossy(output).into_owned().into(),
                retry_at_unix: ROption::RNone,
                cost_usd: ROption::RSome(0.25),
                usage: vec![Fact::new("turns", "3"), Fact::new("tokens", "1200")].into(),
            })
        }
    }

    fn done(config: &str) -> Result<Reads, PluginError> {
        Ok(Reads(if config == "failed" {
            OutcomeCode::FAILED
        } else {
            OutcomeCode::DONE
        }))
    }

    fn harness(reads: &'static str) -> OpenHarness {
        OpenHarness::in_process(
            "reads",
            HarnessHandle::V1(
                stet_plugin_api::__private::new_harness(
                    stet_plugin_api::RStr::from_str(reads),
                    done,
                )
                .unwrap(),
            ),
            HarnessContext {
                profiles_root: "/nonexistent/profiles".into(),
                stet_binary: "/nonexistent/stet".into(),
                host_env: Default::default(),
            },
        )
    }

    fn output(stdout: &str) -> LaunchOutput {
        let mut output = LaunchOutput::none("none".into());
        output.stdout = stdout.as_bytes().to_vec();
        output.stdout_bytes = stdout.len() as u64;
        output.status = ExitStatus::exited(0);
        output
    }

    #[test]
    fn an_outcome_is_known_by_its_word_or_by_its_code_when_this_host_has_none() {
        assert_eq!(outcome_word(OutcomeCode::DONE), "done");
        assert_eq!(outcome_word(OutcomeCode::OUT_OF_SHAPE), "out-of-shape");
        assert_eq!(outcome_word(OutcomeCode::RESOURCE_LIMIT), "resource-limit");
        assert_eq!(outcome_word(OutcomeCode(99)), "code 99");
    }

    #[test]
    fn the_harness_reads_the_call_unless_the_host_knows_better() {
        let harness = harness("done");
        let outcome = outcome_of(&harness, Role::Implement, &output("wrote it")).unwrap();
        assert_eq!(outcome.kind, OutcomeCode::DONE);
        assert_eq!(outcome.detail.as_str(), "wrote it");

        // Killed at the call limit: failed, whatever the harness read.
        let mut timed_out = output("wrote it");
        timed_out.timed_out = Some(Duration::from_secs(120));
        let outcome = outcome_of(&harness, Role::Implement, &timed_out).unwrap();
        assert_eq!(outcome.kind, OutcomeCode::FAILED);
        assert_eq!(
            outcome.detail.as_str(),
            "no answer within 2m (--call-limit); the agent's processes were killed"
        );

        // Killed by the memory or disk limit: that is the outcome.
        let mut memory = output("wrote it");
        memory.limit = Some(LimitReached::Memory(512 << 20));
        let outcome = outcome_of(&harness, Role::Implement, &memory).unwrap();
        assert_eq!(outcome.kind, OutcomeCode::RESOURCE_LIMIT);
        assert_eq!(
            outcome.detail.as_str(),
            "killed by the memory limit, 512 MiB"
        );

        // Forks refused at the pids limit end nothing: a call that was done stays done…
        let mut pids = output("wrote it");
        pids.limit = Some(LimitReached::Pids(3, 64));
        let outcome = outcome_of(&harness, Role::Implement, &pids).unwrap();
        assert_eq!(outcome.kind, OutcomeCode::DONE);
        assert_eq!(outcome.detail.as_str(), "wrote it");
        // …and a failed one says it ran into the limit.
        let outcome = outcome_of(&self::harness("failed"), Role::Implement, &pids).unwrap();
        assert_eq!(outcome.kind, OutcomeCode::FAILED);
        assert_eq!(
            outcome.detail.as_str(),
            "wrote it (the process limit (64) was reached: 3 fork(s) failed)"
        );
    }

    #[test]
    fn a_calls_end_carries_what_the_receipt_records() {
        let harness = harness("done");
        let mut out = output("wrote it");
        out.status = ExitStatus::signalled(9);
        out.limit = Some(LimitReached::Disk(1 << 30));
        out.log_cut = 10;
        let outcome = outcome_of(&harness, Role::Review, &out).unwrap();
        let end = call_end(&out, &outcome);
        assert_eq!(end.exit_code, None);
        assert_eq!(end.exit_signal, Some(9));
        assert_eq!(end.outcome, crate::receipts::Outcome::ResourceLimit);
        assert!(
            end.detail.ends_with("met the disk limit, 1 GiB"),
            "{}",
            end.detail
        );
        assert_eq!(end.cost_usd, Some(0.25));
        assert_eq!(
            end.usage,
            [
                ("turns".to_string(), "3".to_string()),
                ("tokens".to_string(), "1200".to_string())
            ]
        );
        assert_eq!(end.limit_reached.as_deref(), Some("disk"));
        assert_eq!((end.output_bytes, end.log_cut_bytes), (8, 10));
        assert!(end.profile_carried.is_empty());
    }

    #[test]
    fn a_calls_standard_error_is_kept_beside_its_log() {
        assert_eq!(
            stderr_log_of(Path::new("/r/.git/stet/logs/123-item-implement.log")),
            Path::new("/r/.git/stet/logs/123-item-implement.stderr.log")
        );
    }
}
