//! Sandbox I/O: opening the selected runtime in this process, sandboxes that are torn down
//! whatever happens, processes whose output streams live, and the labels that let a later
//! `stet gc` find what a crashed stet left behind.

use std::sync::Arc;

pub mod leftovers;
pub mod shell;
pub mod terminal;

use stet_plugin_api::abi::v1_1::ProcessBox;
use stet_plugin_api::abi::v1_2::TerminalBox;
use stet_plugin_api::conformance::{Driver, Running};
use stet_plugin_api::{
    host_sink, ExitStatus, Label, PluginError, PluginKind, ProbeReport, ProcessSpec, SandboxInfo,
    SandboxSpec, Stream, TerminalSize,
};

use crate::error::{Concept, Error};
use crate::plugins::loader::{Instance, RuntimeHandle};
use crate::plugins::probe::Probed;
use crate::plugins::selection::Selection;
use crate::plugins::survey;
use crate::settings::Settings;

/// The label every sandbox stet creates carries.
pub const MANAGED: (&str, &str) = ("stet.managed", "true");
/// The label naming the process (`<pid>:<start time>`) that owns a sandbox.
pub const OWNER: &str = "stet.owner";
/// The label naming the host that owns a sandbox.
pub const HOST: &str = "stet.host";
/// The label naming the stet run a sandbox belongs to.
pub const RUN: &str = "stet.run";

/// A runtime plugin loaded into this process and ready for calls.
pub struct OpenRuntime {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Its library, as loaded.
    pub library: std::path::PathBuf,
    /// Why it was chosen (and what was passed over).
    pub selection: Selection,
    /// The plugin object.
    pub handle: RuntimeHandle,
    /// What its probe said it can do.
    pub capabilities: Vec<String>,
    /// What its probe said of its backend: the version, then its facts (`key value`).
    pub backend: String,
    /// Its isolation class in its probe's words, when it states one (shown, never
    /// matched on).
    pub isolation: Option<String>,
}

impl OpenRuntime {
    /// Whether its probe offers `capability` (a [`stet_plugin_api::capability`] word).
    pub fn offers(&self, capability: &str) -> bool {
        self.capabilities.iter().any(|c| c == capability)
    }

    /// The limits this runtime does not enforce, by its probe, in a line; `None` when it
    /// enforces them all.
    pub fn unenforced_limits(&self) -> Option<String> {
        use stet_plugin_api::capability::{LIMITS, LIMIT_CPU, LIMIT_MEMORY, LIMIT_PIDS};
        let has = |c: &str| self.capabilities.iter().any(|x| x == c || x == LIMITS);
        let missing: Vec<&str> = [
            (LIMIT_PIDS, "processes"),
            (LIMIT_MEMORY, "memory"),
            (LIMIT_CPU, "cpu"),
        ]
        .into_iter()
        .filter(|(c, _)| !has(c))
        .map(|(_, word)| word)
        .collect();
        (!missing.is_empty()).then(|| {
            format!(
                "{} does not enforce the {} limit{} (its probe says so)",
                self.name,
                missing.join(", "),
                if missing.len() == 1 { "" } else { "s" }
            )
        })
    }
}

/// Probes the installed runtimes, selects one as SPEC §3 says, and loads it here.
pub fn open_runtime(settings: &Settings) -> Result<OpenRuntime, Error> {
    let (probed, selection) =
        survey::choose(&settings.plugins, PluginKind::Runtime, &settings.runtime)?;
    open_probed(settings, &probed, selection)
}

/// Loads a plugin that passed its probe, as a runtime.
pub fn open_probed(
    settings: &Settings,
    probed: &Probed,
    selection: Selection,
) -> Result<OpenRuntime, Error> {
    let Instance::Runtime(handle) = survey::instantiate(&settings.plugins, probed)? else {
        return Err(
            Concept::Sandbox.usage(format!("plugin {} is not a runtime", probed.manifest.name))
        );
    };
    Ok(OpenRuntime {
        name: probed.manifest.name.clone(),
        version: probed.manifest.version.to_string(),
        library: probed.manifest.library.clone(),
        selection,
        handle,
        capabilities: probed
            .available()
            .map(|p| p.capabilities.clone())
            .unwrap_or_default(),
        backend: probed
            .available()
            .map(|p| {
                let facts: Vec<String> = p
                    .facts
                    .iter()
                    .map(|f| format!("{} {}", f.key, f.value))
                    .collect();
                if facts.is_empty() {
                    p.backend_version.clone()
                } else {
                    format!("{} ({})", p.backend_version, facts.join(", "))
                }
            })
            .unwrap_or_default(),
        isolation: probed.available().and_then(|p| p.isolation()),
    })
}

/// A runtime's isolation class as a person reads it (`isolation` from its probe, when it
/// states one): the consent, the CLI's and the board's alike, says it this way.
pub fn isolation_said(isolation: Option<&str>) -> String {
    match isolation {
        Some(said) => format!("{said} (the runtime's own words)"),
        None => "not stated by the runtime's probe".to_string(),
    }
}

pub use crate::error::plugin_error;

pub use crate::owner::{owner_alive, owner_token};

/// This machine's name, for the host label.
pub fn host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "unknown".to_string())
}

/// The labels every sandbox of this process carries.
pub fn ownership_labels(run: &str) -> Vec<Label> {
    let me = owner_token(std::process::id()).unwrap_or_else(|| format!("{}:", std::process::id()));
    vec![
        Label::new(MANAGED.0, MANAGED.1),
        Label::new(RUN, run),
        Label::new(OWNER, me),
        Label::new(HOST, host_name()),
    ]
}

/// What `reap` decided about one of stet's sandboxes.
#[derive(Debug, Clone)]
pub struct ReapVerdict {
    /// The runtime's id for the sandbox.
    pub sandbox: String,
    /// The stet run it belonged to.
    pub run: String,
    /// Removed (or, in a dry run, would be); kept otherwise.
    pub removed: bool,
    /// Why.
    pub reason: String,
    /// The teardown's error, when removing failed.
    pub error: Option<String>,
}

/// Finds the sandboxes a crashed or killed stet left behind in `runtime` (labelled as
/// stet's, on this host, whose owning process is gone) and removes them unless `dry_run`;
/// sandboxes of live stets and of other hosts are kept, with the reason.
pub fn reap(runtime: &OpenRuntime, dry_run: bool) -> Result<Vec<ReapVerdict>, Error> {
    let here = host_name();
    let listed = runtime
        .handle
        .list_sandboxes(vec![Label::new(MANAGED.0, MANAGED.1)])
        .map_err(|e| plugin_error(&runtime.name, "could not list sandboxes", &e))?;
    let mut verdicts = Vec::new();
    for info in listed {
        let label = |key: &str| {
            info.labels
                .iter()
                .find(|l| l.key.as_str() == key)
                .map(|l| l.value.to_string())
                .unwrap_or_default()
        };
        let (owner, host, run) = (label(OWNER), label(HOST), label(RUN));
        let pid = owner
            .split(':')
            .next()
            .filter(|p| !p.is_empty())
            .unwrap_or("unknown")
            .to_string();
        let mut verdict = ReapVerdict {
            sandbox: info.id.to_string(),
            run,
            removed: false,
            reason: String::new(),
            error: None,
        };
        if host != here {
            verdict.reason = format!("it belongs to host {host}");
        } else if owner_alive(&owner) {
            verdict.reason = format!("its stet (process {pid}) is still running");
        } else {
            verdict.reason = format!("its stet (process {pid}) is gone");
            verdict.removed = true;
            if !dry_run {
                if let Err(e) = runtime.handle.teardown(&info.id) {
                    verdict.removed = false;
                    verdict.error = Some(e.message.to_string());
                }
            }
        }
        verdicts.push(verdict);
    }
    Ok(verdicts)
}

/// A sandbox that is torn down when dropped, on every path out (or stopped and handed to
/// a [`Reaper`] with [`Sandbox::retire`]).
pub struct Sandbox<'a> {
    runtime: &'a OpenRuntime,
    /// The runtime's id for it.
    pub id: String,
}

/// Removes sandboxes off the critical path. A sandbox [retired](Sandbox::retire) to it
/// has been stopped already — nothing in it runs or writes again — so what is left is the
/// engine's slow part (unmounting, deleting its layer), which one thread of its own does
/// while the caller goes on. Every sandbox handed over is removed before [`with_reaper`]
/// returns; one left by a crash carries stet's labels and is reaped at the next start.
pub struct Reaper {
    pending: std::sync::mpsc::Sender<String>,
}

/// Runs `body` with a [`Reaper`] for sandboxes of `runtime`, and waits, when it is done,
/// until every sandbox retired to it is removed.
pub fn with_reaper<R>(runtime: &OpenRuntime, body: impl FnOnce(&Reaper) -> R) -> R {
    let (pending, retired) = std::sync::mpsc::channel::<String>();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            for id in retired {
                warn_not_removed(runtime, &id, runtime.handle.teardown(&id));
            }
        });
        let reaper = Reaper { pending };
        body(&reaper)
        // The reaper is dropped here, which ends the thread's loop once it has removed
        // what it holds; the scope waits for it.
    })
}

fn warn_not_removed(runtime: &OpenRuntime, id: &str, result: Result<(), PluginError>) {
    if let Err(e) = result {
        crate::printer::Printer::default().warn(&format!(
            "{}: sandbox {} was not removed: {} (`stet gc` will retry)",
            runtime.name, id, e.message
        ));
    }
}

impl<'a> Sandbox<'a> {
    /// Creates a sandbox, checking the image first so that a missing one is named with the
    /// way to build it.
    pub fn create(runtime: &'a OpenRuntime, spec: SandboxSpec) -> Result<Self, Error> {
        let (sandbox, _) = Sandbox::start(runtime, spec, Vec::new())?;
        Ok(sandbox)
    }

    /// Creates a sandbox with `options` beyond its spec (a forwarded socket, its first
    /// process, which comes back running). Every sandbox is made this way, so a plugin
    /// of an older minor answers through the interface's defaults.
    pub fn start(
        runtime: &'a OpenRuntime,
        spec: SandboxSpec,
        options: Vec<stet_plugin_api::SandboxOption>,
    ) -> Result<(Self, Option<Process>), Error> {
        let image = spec.image.to_string();
        // A stop closes the process to new sandboxes before it removes its own: one made
        // meanwhile would outlive it.
        let _making = leftovers::making().ok_or_else(|| {
            Concept::Sandbox
                .unusable("stet is stopping: no new sandbox is made")
                .hint("start stet again when you want it to work")
        })?;
        // The image is looked up only when the sandbox could not be made: a made sandbox
        // needs no second inspect of an image the runtime just used.
        let (info, first) = runtime.handle.start(spec, options).map_err(|e| {
            match runtime.handle.image_status(&image) {
                Ok(status) if !status.present => Concept::Sandbox
                    .unusable(format!(
                        "image {image} is not available to runtime {}",
                        runtime.name
                    ))
                    .caused_by(status.remedy.to_string())
                    .hint(if image == DEFAULT_IMAGE {
                        "build stet's lane image with scripts/build-image.sh (no registry needed)"
                            .to_string()
                    } else {
                        format!(
                            "build or load {image} for {}, or pass --image",
                            runtime.name
                        )
                    }),
                _ => plugin_error(&runtime.name, "could not create a sandbox", &e),
            }
        })?;
        let first = first.map(|p| Process {
            inner: Arc::new(p),
            runtime: runtime.name.clone(),
        });
        Ok((
            Sandbox {
                runtime,
                id: info.id.into_string(),
            },
            first,
        ))
    }

    /// Ends the sandbox: stops everything in it now, so that what it could write is
    /// settled when this returns, and leaves its removal to `reaper`. Without a reaper,
    /// or when the runtime cannot stop it, it is torn down here instead.
    pub fn retire(self, reaper: Option<&Reaper>) {
        let Some(reaper) = reaper else {
            return;
        };
        if self.runtime.handle.stop(&self.id).is_err() {
            // Not stopped: torn down now, by the drop (which says if that fails too).
            return;
        }
        let mut this = self;
        let id = std::mem::take(&mut this.id);
        // Sent to a thread that lives as long as the reaper; had it gone, the removal
        // happens here.
        if let Err(back) = reaper.pending.send(id) {
            warn_not_removed(this.runtime, &back.0, this.runtime.handle.teardown(&back.0));
        }
    }

    /// Starts a process in the sandbox.
    pub fn spawn(&self, spec: ProcessSpec) -> Result<Process, Error> {
        let process = self
            .runtime
            .handle
            .spawn(&self.id, spec)
            .map_err(|e| plugin_error(&self.runtime.name, "could not start the process", &e))?;
        Ok(Process {
            inner: Arc::new(process),
            runtime: self.runtime.name.clone(),
        })
    }
}

impl Sandbox<'_> {
    /// Starts a process on a terminal in the sandbox.
    pub fn spawn_terminal(&self, spec: ProcessSpec, size: TerminalSize) -> Result<Terminal, Error> {
        let terminal = self
            .runtime
            .handle
            .spawn_terminal(&self.id, spec, size)
            .map_err(|e| plugin_error(&self.runtime.name, "could not start a terminal", &e))?;
        Ok(Terminal {
            inner: Arc::new(terminal),
            runtime: self.runtime.name.clone(),
        })
    }
}

/// A process on a terminal in a sandbox; clones share it.
#[derive(Clone)]
pub struct Terminal {
    inner: Arc<TerminalBox>,
    runtime: String,
}

impl Terminal {
    /// Streams output to `on_chunk` until the process ends.
    pub fn wait(
        &self,
        on_chunk: &mut (dyn FnMut(Stream, &[u8]) + Send),
    ) -> Result<ExitStatus, Error> {
        let result: Result<ExitStatus, PluginError> = self.inner.wait(host_sink(on_chunk)).into();
        result.map_err(|e| plugin_error(&self.runtime, "lost the terminal", &e))
    }

    /// Sends keystrokes.
    pub fn write(&self, bytes: &[u8]) -> Result<(), PluginError> {
        self.inner.write(bytes.into()).into()
    }

    /// Closes the input.
    pub fn close_input(&self) -> Result<(), PluginError> {
        self.inner.close_input().into()
    }

    /// Tells the process its terminal changed size.
    pub fn resize(&self, size: TerminalSize) -> Result<(), PluginError> {
        self.inner.resize(size).into()
    }

    /// Kills the process (idempotent, from any thread).
    pub fn kill(&self) -> Result<(), PluginError> {
        self.inner.kill().into()
    }
}

impl Drop for Sandbox<'_> {
    fn drop(&mut self) {
        // Retired: its reaper removes it.
        if self.id.is_empty() {
            return;
        }
        warn_not_removed(
            self.runtime,
            &self.id,
            self.runtime.handle.teardown(&self.id),
        );
    }
}

/// What a sandbox sees of a lane (or of the directory `stet ask` works in): its working
/// tree, mounted read-write or read-only at its own path, and the git directories and
/// files that must be visible to the agent's git but never writable.
#[derive(Debug, Clone)]
pub struct LaneMounts {
    /// The working tree.
    pub work_tree: std::path::PathBuf,
    /// Mounted read-only over the working tree: (host path, path inside the sandbox).
    pub read_only: Vec<(std::path::PathBuf, std::path::PathBuf)>,
    /// Where the working tree is mounted too, as it is at its own path: a seeded lane's at
    /// the path its setup ran at ([`crate::seeds::ALIAS`]), so that the absolute paths
    /// the setup's tools wrote into its outputs name this lane's own copy.
    pub also_at: Option<std::path::PathBuf>,
}

impl LaneMounts {
    /// A lane: its git directory read-only at `<work tree>/.git`; a seeded lane's also at
    /// the setup's path, with its git directory there too.
    pub fn of_lane(lane: &crate::lanes::Lane) -> LaneMounts {
        let mounts = LaneMounts {
            work_tree: lane.dir.clone(),
            read_only: vec![(lane.git_dir.clone(), lane.dir.join(".git"))],
            also_at: None,
        };
        let seeded = lane.dir.parent().and_then(crate::seeds::given).is_some();
        if seeded {
            mounts.at_setup_path(lane)
        } else {
            mounts
        }
    }

    /// [`LaneMounts::of_lane`] at the setup's path too (a lane's setup, a seeded lane).
    pub fn at_setup_path(mut self, lane: &crate::lanes::Lane) -> LaneMounts {
        let alias = std::path::PathBuf::from(crate::seeds::ALIAS);
        self.read_only
            .push((lane.git_dir.clone(), alias.join(".git")));
        self.also_at = Some(alias);
        self
    }

    /// A directory of the person's own (`stet ask`): every repository found under it
    /// (`crate::gate::survey`: its `.git`, nested clones', submodules', worktrees', bare
    /// repositories, common directories — by shape, under any name) read-only at its own
    /// path, so the agent can read the history but plant nothing the person's git would
    /// obey later. (A `.git` that is a link is not mounted: a mount would follow it; the
    /// gate renames one the call touched.)
    pub fn of_directory(dir: &std::path::Path, repositories: &[std::path::PathBuf]) -> LaneMounts {
        LaneMounts {
            work_tree: dir.to_path_buf(),
            read_only: repositories
                .iter()
                .map(|p| (p.clone(), p.clone()))
                .collect(),
            also_at: None,
        }
    }
}

/// Whether a stage may change the lane it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneAccess {
    /// Implement, check, ask: the working tree is writable.
    ReadWrite,
    /// Review: enforced by the mount, not by the guard.
    ReadOnly,
}

/// Everything that decides a sandbox, gathered in one place: every sandbox stet makes is
/// planned here and turned into the runtime's spec by [`Plan::spec`], so the image, the
/// owner's labels, the user, the limits and the lane's walls are the same for all.
#[derive(Debug, Clone)]
pub struct Plan {
    /// What it is for (`implement`, `review`, `check`, `proof`, `walls`, `ask`, `run`,
    /// `login`): its `stet.kind` label.
    pub kind: String,
    /// The stet run it belongs to (its `stet.run` label).
    pub run: String,
    /// The working directory.
    pub workdir: String,
    /// The lane and how the stage may use it.
    pub lane: Option<(LaneMounts, LaneAccess)>,
    /// Further mounts (a harness's binaries and profile).
    pub mounts: Vec<stet_plugin_api::Mount>,
    /// The network.
    pub network: stet_plugin_api::Network,
    /// The sandbox's base environment.
    pub env: Vec<stet_plugin_api::EnvVar>,
    /// Limits other than the settings' (`stet run`'s flags).
    pub limits: Option<crate::settings::SandboxLimits>,
}

impl Plan {
    /// A sandbox for `kind` of `run`, working in `workdir`, with no lane, no network and
    /// the base environment.
    pub fn new(kind: &str, run: &str, workdir: &str) -> Plan {
        Plan {
            kind: kind.to_string(),
            run: run.to_string(),
            workdir: workdir.to_string(),
            lane: None,
            mounts: Vec::new(),
            network: stet_plugin_api::Network::None,
            env: base_env(),
            limits: None,
        }
    }

    /// With `lane` mounted as `access` allows.
    pub fn with_lane(mut self, lane: LaneMounts, access: LaneAccess) -> Plan {
        self.lane = Some((lane, access));
        self
    }

    /// The runtime's spec, with `settings`' image and limits.
    pub fn spec(self, settings: &Settings) -> SandboxSpec {
        use stet_plugin_api::Mount;
        let text = |p: &std::path::Path| p.display().to_string();
        let mut mounts = Vec::new();
        if let Some((lane, access)) = &self.lane {
            mounts.push(Mount {
                source: text(&lane.work_tree).into(),
                target: text(&lane.work_tree).into(),
                writable: *access == LaneAccess::ReadWrite,
            });
            if let Some(also_at) = &lane.also_at {
                mounts.push(Mount {
                    source: text(&lane.work_tree).into(),
                    target: text(also_at).into(),
                    writable: *access == LaneAccess::ReadWrite,
                });
            }
            // After the working tree, so that a runtime mounting in order puts them on top.
            for (source, target) in &lane.read_only {
                mounts.push(Mount {
                    source: text(source).into(),
                    target: text(target).into(),
                    writable: false,
                });
            }
        }
        mounts.extend(self.mounts);
        let mut labels = ownership_labels(&self.run);
        labels.push(Label::new("stet.kind", self.kind));
        SandboxSpec {
            image: settings.image.clone().into(),
            mounts: mounts.into(),
            env: self.env.into(),
            workdir: self.workdir.into(),
            network: self.network,
            limits: self.limits.unwrap_or(settings.limits).runtime(),
            labels: labels.into(),
            user: stet_plugin_api::ROption::RSome(stet_plugin_api::UserIds {
                uid: nix::unistd::getuid().as_raw(),
                gid: nix::unistd::getgid().as_raw(),
            }),
        }
    }
}

/// The environment every sandbox starts from: built from scratch, nothing of the host's.
pub fn base_env() -> Vec<stet_plugin_api::EnvVar> {
    use stet_plugin_api::EnvVar;
    vec![
        EnvVar::new(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        ),
        EnvVar::new("HOME", "/tmp"),
        EnvVar::new("LANG", "C.UTF-8"),
        // The lane belongs to the person on the host; git inside may run as another uid
        // and must not refuse the working copy as someone else's.
        EnvVar::new("GIT_CONFIG_COUNT", "1"),
        EnvVar::new("GIT_CONFIG_KEY_0", "safe.directory"),
        EnvVar::new("GIT_CONFIG_VALUE_0", "*"),
        // A drive started inside a sandbox refuses.
        EnvVar::new(IN_SANDBOX, "1"),
    ]
}

pub use crate::settings::DEFAULT_IMAGE;

/// The running stet binary, by absolute path: what sandboxes mount as itself (the hooks,
/// the approver, the egress bridge, the wall probes).
pub fn stet_binary() -> Result<String, Error> {
    std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map(|p| p.display().to_string())
        .map_err(|e| {
            Concept::Sandbox.failure(format!("cannot find the running stet binary: {e}")).hint(
                "run stet from a file that still exists (it was moved or deleted while running)",
            )
        })
}

/// The variable every stet sandbox carries, so a drive started inside one refuses.
pub const IN_SANDBOX: &str = "STET_IN_SANDBOX";

/// A process running in a sandbox; clones share it, so one thread can wait while another
/// kills.
#[derive(Clone)]
pub struct Process {
    inner: Arc<ProcessBox>,
    runtime: String,
}

impl Process {
    /// Streams output to `on_chunk` until the process ends.
    pub fn wait(
        &self,
        on_chunk: &mut (dyn FnMut(Stream, &[u8]) + Send),
    ) -> Result<ExitStatus, Error> {
        let result: Result<ExitStatus, PluginError> = self.inner.wait(host_sink(on_chunk)).into();
        result.map_err(|e| plugin_error(&self.runtime, "lost the process", &e))
    }

    /// Kills it; safe from any thread.
    pub fn kill(&self) -> Result<(), Error> {
        let result: Result<(), PluginError> = self.inner.kill().into();
        result.map_err(|e| plugin_error(&self.runtime, "could not kill the process", &e))
    }
}

/// Kills a process that is still running when its time limit passes; stands down as soon
/// as it is dropped (the process ended first).
pub struct Watchdog {
    _done: std::sync::mpsc::Sender<()>,
    fired: Arc<std::sync::atomic::AtomicBool>,
}

impl Watchdog {
    /// Watches `process` for `limit`.
    pub fn start(process: &Process, limit: std::time::Duration) -> Watchdog {
        use std::sync::atomic::{AtomicBool, Ordering};
        let (done, watch) = std::sync::mpsc::channel::<()>();
        let fired = Arc::new(AtomicBool::new(false));
        let (process, flag) = (process.clone(), fired.clone());
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = watch.recv_timeout(limit) {
                flag.store(true, Ordering::SeqCst);
                let _ = process.kill();
            }
        });
        Watchdog { _done: done, fired }
    }

    /// Whether the limit passed and the process was killed.
    pub fn fired(&self) -> bool {
        self.fired.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Which disk limit a sandbox met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskMet {
    /// `[sandbox] disk`.
    Bytes,
    /// `[sandbox] files`.
    Files,
}

/// Ends a process that meets the disk or files limit while it runs. A lane that is a file
/// system of its own (`crate::lanes::disk`) is held by the kernel, which refuses the write
/// past it; its room is looked at four times a second, so that the limit, once met, ends
/// the call and is named. Every other host directory the sandbox may write (a lane
/// without one, the call's profile copy, its session directory) is measured — bytes, each
/// hard link counted, a sparse file by its length, and files — a second after the last
/// look ended, and the process is killed once they pass a limit together. Such a look
/// takes a walk of at most the files limit's entries: an agent may pass the disk limit by
/// what it writes within one look (the consent says so where no lane has a file system of
/// its own). Each is looked at once more when the process ends.
pub struct DiskWatch {
    _done: std::sync::mpsc::Sender<()>,
    met: Arc<std::sync::Mutex<Option<DiskMet>>>,
    trees: Vec<std::path::PathBuf>,
    read_only: Vec<std::path::PathBuf>,
    lanes: Vec<std::path::PathBuf>,
    limits: crate::files::Footprint,
}

/// The limit `trees` together pass, if any, the read-only directories within them aside.
fn trees_met(
    trees: &[std::path::PathBuf],
    read_only: &[std::path::PathBuf],
    limits: crate::files::Footprint,
) -> Option<DiskMet> {
    let mut total = crate::files::Footprint::default();
    for tree in trees {
        let left = crate::files::Footprint {
            bytes: limits.bytes.saturating_sub(total.bytes),
            files: limits.files.saturating_sub(total.files),
        };
        let seen = crate::files::footprint(tree, left, read_only);
        total.bytes = total.bytes.saturating_add(seen.bytes);
        total.files = total.files.saturating_add(seen.files);
        if total.files > limits.files {
            return Some(DiskMet::Files);
        }
        if total.bytes > limits.bytes {
            return Some(DiskMet::Bytes);
        }
    }
    None
}

/// The limit a lane file system of `lanes` met, if any.
fn lanes_met(lanes: &[std::path::PathBuf]) -> Option<DiskMet> {
    lanes.iter().find_map(|lane| {
        crate::lanes::disk::room(lane)
            .and_then(|room| room.met())
            .map(|met| match met {
                crate::lanes::disk::Met::Bytes => DiskMet::Bytes,
                crate::lanes::disk::Met::Files => DiskMet::Files,
            })
    })
}

impl DiskWatch {
    /// Watches what `process`'s sandbox can write: `writable`, the host directories it
    /// mounts read-write (but for `read_only`, directories within them mounted read-only:
    /// `stet ask`'s repositories), within `limits` (bytes and files).
    pub fn start(
        process: &Process,
        writable: Vec<std::path::PathBuf>,
        read_only: Vec<std::path::PathBuf>,
        limits: crate::files::Footprint,
    ) -> DiskWatch {
        let (lanes, trees): (Vec<_>, Vec<_>) = writable
            .into_iter()
            .partition(|dir| crate::lanes::disk::mounted(dir));
        let (done, watch) = std::sync::mpsc::channel::<()>();
        let met = Arc::new(std::sync::Mutex::new(None));
        let (process, found) = (process.clone(), met.clone());
        let (watched_lanes, watched_trees, skipped) =
            (lanes.clone(), trees.clone(), read_only.clone());
        std::thread::spawn(move || {
            const TICK: std::time::Duration = std::time::Duration::from_millis(250);
            let mut next_walk = std::time::Instant::now() + std::time::Duration::from_secs(1);
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = watch.recv_timeout(TICK) {
                let mut seen = lanes_met(&watched_lanes);
                if seen.is_none() && std::time::Instant::now() >= next_walk {
                    seen = trees_met(&watched_trees, &skipped, limits);
                    next_walk = std::time::Instant::now() + std::time::Duration::from_secs(1);
                }
                if let Some(seen) = seen {
                    *found.lock().unwrap_or_else(|p| p.into_inner()) = Some(seen);
                    let _ = process.kill();
                    return;
                }
            }
        });
        DiskWatch {
            _done: done,
            met,
            trees,
            read_only,
            lanes,
            limits,
        }
    }

    /// The limit met: while the process ran, or now that it ended.
    pub fn met(&self) -> Option<DiskMet> {
        let seen = *self.met.lock().unwrap_or_else(|p| p.into_inner());
        seen.or_else(|| lanes_met(&self.lanes))
            .or_else(|| trees_met(&self.trees, &self.read_only, self.limits))
    }
}

/// What a sandbox's control group counted, read from inside it after its process ended:
/// how often a fork was refused at the pids limit, and how many processes the kernel's
/// OOM killer took. Nothing is known where the runtime gives no cgroup view.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitEvents {
    /// Forks refused at the pids limit (`pids.events` `max`).
    pub pids_refused: u64,
    /// Processes killed for memory (`memory.events` `oom_kill`).
    pub oom_kills: u64,
}

impl LimitEvents {
    /// Reads `pids.events` and `memory.events` as the script prints them, each after a
    /// line naming it (both files have a `max` line, meaning different things).
    fn read(text: &str) -> LimitEvents {
        let mut events = LimitEvents::default();
        let mut file = "";
        for line in text.lines() {
            match line.trim() {
                "[pids]" => file = "pids",
                "[memory]" => file = "memory",
                line => {
                    let Some((key, n)) = line.split_once(' ') else {
                        continue;
                    };
                    let n = n.trim().parse::<u64>().unwrap_or(0);
                    match (file, key) {
                        ("pids", "max") => events.pids_refused = events.pids_refused.max(n),
                        ("memory", "oom_kill") => events.oom_kills = events.oom_kills.max(n),
                        _ => {}
                    }
                }
            }
        }
        events
    }
}

/// Prints the control group's counters (cgroup v2's files, else v1's) with shell builtins
/// only: once the shell has started, nothing more needs a process, so leftovers holding
/// every pid cannot stop the reading.
pub const LIMIT_EVENTS_SCRIPT: &str =
    "for f in /sys/fs/cgroup/pids.events /sys/fs/cgroup/pids/pids.events; do \
     [ -r \"$f\" ] && { echo '[pids]'; while read -r l; do echo \"$l\"; done < \"$f\"; }; done; \
     for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do \
     [ -r \"$f\" ] && { echo '[memory]'; while read -r l; do echo \"$l\"; done < \"$f\"; }; done; \
     echo '[end]'";

impl Sandbox<'_> {
    /// Reads the sandbox's limit counters: from the runtime, where it reads them from
    /// outside (1.6), else with a short process of its own (the counters are read-only
    /// inside the sandbox). Processes the agent left behind may hold every pid
    /// for a while (a fork storm's children): the reading is tried again for a few seconds
    /// before the answer is "nothing seen".
    pub fn limit_events(&self) -> LimitEvents {
        // Read from outside where the runtime can: no process of its own, and nothing the
        // agent left running can interfere with the reading.
        if let Ok(Some(counted)) = self.runtime.handle.limit_counters(&self.id) {
            return LimitEvents {
                pids_refused: counted.pids_refused,
                oom_kills: counted.oom_kills,
            };
        }
        let spec = || ProcessSpec {
            argv: vec!["sh".into(), "-c".into(), LIMIT_EVENTS_SCRIPT.into()].into(),
            env: Default::default(),
            workdir: stet_plugin_api::ROption::RNone,
            stdin: Default::default(),
        };
        for attempt in 0..20 {
            if attempt > 0 {
                std::thread::sleep(std::time::Duration::from_millis(250));
            }
            let Ok(process) = self.spawn(spec()) else {
                continue;
            };
            let _watchdog = Watchdog::start(&process, std::time::Duration::from_secs(10));
            let mut text = Vec::new();
            let status = process.wait(&mut |_, bytes| {
                if text.len() < 4096 {
                    text.extend_from_slice(bytes);
                }
            });
            let text = String::from_utf8_lossy(&text);
            if status.is_ok() && text.contains("[end]") {
                return LimitEvents::read(&text);
            }
        }
        LimitEvents::default()
    }
}

/// A loaded runtime, driven by the conformance kit.
pub struct Conformance<'a>(pub &'a RuntimeHandle);

struct RunningBox(ProcessBox);

impl Running for RunningBox {
    fn wait(
        &self,
        on_chunk: &mut (dyn FnMut(Stream, &[u8]) + Send),
    ) -> Result<ExitStatus, PluginError> {
        self.0.wait(host_sink(on_chunk)).into()
    }

    fn kill(&self) -> Result<(), PluginError> {
        self.0.kill().into()
    }
}

impl Driver for Conformance<'_> {
    fn probe(&self) -> Result<ProbeReport, PluginError> {
        self.0.probe()
    }
    fn create_sandbox(&self, spec: SandboxSpec) -> Result<SandboxInfo, PluginError> {
        self.0.create_sandbox(spec)
    }
    fn spawn(&self, sandbox: &str, spec: ProcessSpec) -> Result<Box<dyn Running>, PluginError> {
        Ok(Box::new(RunningBox(self.0.spawn(sandbox, spec)?)))
    }
    fn teardown(&self, sandbox: &str) -> Result<(), PluginError> {
        self.0.teardown(sandbox)
    }
    fn list_sandboxes(&self, labels: &[Label]) -> Result<Vec<SandboxInfo>, PluginError> {
        self.0.list_sandboxes(labels.to_vec())
    }
    fn start(
        &self,
        spec: SandboxSpec,
        options: Vec<stet_plugin_api::SandboxOption>,
    ) -> Result<stet_plugin_api::conformance::Started, PluginError> {
        let (info, first) = self.0.start(spec, options)?;
        Ok((
            info,
            first.map(|p| Box::new(RunningBox(p)) as Box<dyn Running>),
        ))
    }
    fn stop(&self, sandbox: &str) -> Result<(), PluginError> {
        self.0.stop(sandbox)
    }

    fn limit_counters(
        &self,
        sandbox: &str,
    ) -> Result<Option<stet_plugin_api::LimitCounters>, PluginError> {
        self.0.limit_counters(sandbox)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_counters_are_read_from_the_cgroup_files() {
        let events = LimitEvents::read(
            "[pids]\nmax 17\n[memory]\nlow 0\nhigh 0\nmax 9\noom 2\noom_kill 1\n",
        );
        assert_eq!(
            events,
            LimitEvents {
                pids_refused: 17,
                oom_kills: 1
            }
        );
        assert_eq!(LimitEvents::read(""), LimitEvents::default());
    }

    #[test]
    fn this_process_is_alive_and_a_made_up_one_is_not() {
        let me = owner_token(std::process::id()).unwrap();
        assert!(owner_alive(&me));
        // Same pid, another start time: the pid was reused.
        let (pid, _) = me.split_once(':').unwrap();
        assert!(!owner_alive(&format!("{pid}:1")));
        assert!(!owner_alive("999999999:1"));
        assert!(!owner_alive("garbage"));
    }
}
