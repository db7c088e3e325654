//! A stet runtime on gVisor (`runsc`): each sandbox's system calls meet a kernel written in
//! user space — gVisor's sentry — not the host's. A container shares the host's kernel
//! with everything in it, so one exploitable kernel bug reachable from a container is a way
//! out; here the agent's programs reach only the sentry, which itself runs on a narrow
//! allow-list of host system calls.
//!
//! runsc has no daemon, so a sandbox is a record and runsc's own state, side by side:
//!
//! - a **sandbox** is a record under the state directory (the spec and labels as JSON, from
//!   the support crate's [`records`]) holding an OCI bundle ([`bundle`]) whose root is the
//!   image's file system, unpacked once per image id and shared read-only ([`images`]); the
//!   sandbox's writes to it go to a file store in the record's directory, gone with it.
//!   `runsc run --detach` starts it with `sleep infinity` as its first process — or, for a
//!   one-process sandbox (`stet run`), an attached `runsc run` starts it with that process
//!   as its first, streams it, and removes the sandbox when it ends, in one step as
//!   `docker run` does;
//! - each **process** is a `runsc exec --process <file>` child of the plugin, the file
//!   giving exactly its argv, environment, working directory and user, with no
//!   capabilities; its output streams through the exec's pipes;
//! - **kill** and **stop** kill the sandbox's sentry — the host process through which
//!   alone anything in it runs — and wait for its end (as the docker runtime kills the
//!   container: an exec has no handle of its own to signal); **teardown** stops it, removes
//!   the record, and leaves runsc to delete its own state in the background (a second or
//!   more of polling that nothing waits for);
//! - **limits**: memory and CPU on the host's control group of the sandbox; pids inside
//!   gVisor, where its processes are counted, as their `RLIMIT_NPROC` (see
//!   [`bundle::PIDS_AS`]);
//! - **network**: `none` is gVisor's loopback alone; `open` is the host's network through
//!   gVisor's sockets; a forwarded unix socket is a read-only mount of it, which runsc is
//!   told to let the sandbox connect to (`--host-uds=open`), nothing more.
//!
//! Built from the SDK and the support crate alone, as a third party would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;
use stet_plugin_api::{
    capability, export_plugin, ExitStatus, ImageStatus, Label, Network, PluginError, ProbeReport,
    ProcessPlugin, ProcessSpec, ROption, RuntimePlugin, SandboxInfo, SandboxSpec, Sink,
};

pub mod bundle;
pub mod images;
pub mod runsc;
pub use stet_plugin_support::{process, records};

use images::Images;
use process::{HostProcess, Processes, StatusEncoding};
use records::{Record, Store};
use runsc::{RunFlags, Runsc};
use stet_plugin_support::{check_sandbox_path, current_ids, merged_env};

/// The plugin's name: equal to `name` in plugin.toml.
pub const NAME: &str = "gvisor";
/// Below Docker's 50: on runsc's default platform (ptrace) system-call-heavy work — builds,
/// tests — runs slower, so the stronger isolation is the person's choice
/// (`--runtime gvisor`, `[runtime] prefer = ["gvisor"]`), never a silent default.
pub const PRIORITY: i32 = 45;
/// The oldest runsc release taken: 20221219 (Debian bookworm's) refuses `statx` with
/// `AT_NO_AUTOMOUNT`, which current coreutils' `ls` and `stat` pass, so they fail in the
/// sandbox; 20240729 (bookworm-backports, trixie) runs them. Releases are dated.
pub const OLDEST_RELEASE: u32 = 20230601;
/// The isolation class, in words for people (the probe's [`stet_plugin_api::fact::ISOLATION`]).
pub const ISOLATION: &str =
    "a kernel in user space (gVisor): the agent's system calls never reach the host's kernel";
/// What the probe reports this runtime can do (limits: see [`limits_capabilities`]).
pub const CAPABILITIES: &[&str] = &[
    capability::BIND_MOUNTS,
    capability::NETWORK_NONE,
    capability::NETWORK_OPEN,
    capability::LABELS,
    capability::KILL,
    capability::RUN_AS_USER,
    capability::FORWARD_SOCKET,
    capability::FIRST_PROCESS,
    // Proven live by the host's own-kernel wall, on the instance a drive uses.
    capability::OWN_KERNEL,
];
/// A sandbox's PATH when its environment sets none, as container engines give one.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// How long the probe's trial runs may take.
const PROBE_LIMIT: Duration = Duration::from_secs(10);
const INSTALL_REMEDY: &str =
    "install gVisor's runsc: `apt-get install -t bookworm-backports runsc` \
     (Debian 12; Debian 13 and Ubuntu 24.04 have a recent one in their own archive) or a release \
     from gvisor.dev; or point [plugins.gvisor] runsc at the binary";

/// The plugin's settings: the `[plugins.gvisor]` table of stet's configuration.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The runsc binary (default: `runsc` on PATH).
    pub runsc: Option<PathBuf>,
    /// runsc's `--platform` (default: runsc's own, ptrace).
    pub platform: Option<String>,
    /// The docker CLI images are read from (default: `docker` on PATH).
    pub docker: Option<PathBuf>,
    /// Where sandbox records and runsc's state live.
    pub state_dir: Option<PathBuf>,
    /// Where images are unpacked.
    pub cache_dir: Option<PathBuf>,
    /// Image names mapped to root file-system directories.
    #[serde(default)]
    pub images: BTreeMap<String, PathBuf>,
}

/// The gVisor runtime. The host may call it from several threads at once.
pub struct GvisorRuntime {
    config: Config,
    store: Store,
    images: Images,
    /// Processes started by this instance, per sandbox, for `teardown`.
    processes: Processes,
    /// Serialises unpacking: two sandboxes of a new image at once unpack it once.
    unpacking: Mutex<()>,
}

fn cache_dir(configured: Option<&Path>) -> PathBuf {
    if let Some(dir) = configured {
        return dir.to_path_buf();
    }
    let env_dir = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    if let Some(cache) = env_dir("XDG_CACHE_HOME") {
        cache.join("stet/gvisor")
    } else if let Some(home) = env_dir("HOME") {
        home.join(".cache/stet/gvisor")
    } else {
        std::env::temp_dir().join("stet-gvisor-cache")
    }
}

/// The release date in a runsc version (`0.0~20240729.0`, `release-20240729.0`).
fn release_date(version: &str) -> Option<u32> {
    version
        .split(|c: char| !c.is_ascii_digit())
        .find(|part| part.len() == 8 && part.starts_with("20"))
        .and_then(|part| part.parse().ok())
}

/// Checks that `id` is one of this runtime's sandbox ids (`gv-` and 16 hex digits) before
/// it names a directory or reaches runsc's command line (where `--all` would be a flag).
fn check_id(id: &str) -> Result<(), PluginError> {
    let ours = id
        .strip_prefix("gv-")
        .is_some_and(|hex| hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
    if ours {
        Ok(())
    } else {
        Err(PluginError::invalid_input(format!(
            "{id:?} is not a sandbox id of the gvisor runtime"
        )))
    }
}

fn is_socket(path: &str) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

impl GvisorRuntime {
    /// Builds the runtime from its settings (`{}` when none are configured). Cheap; does
    /// not run runsc.
    pub fn from_config(config: &str) -> Result<Self, PluginError> {
        let config: Config = serde_json::from_str(config).map_err(|e| {
            PluginError::invalid_input(format!("bad [plugins.{NAME}] settings: {e}")).with_remedy(
                "the keys are `runsc`, `platform`, `docker`, `state_dir`, `cache_dir` and \
                 `images` (a table of image names to root file-system directories)",
            )
        })?;
        Images::check_config(&config.images)?;
        let images = Images {
            docker: config.docker.clone(),
            cache: cache_dir(config.cache_dir.as_deref()),
            mapped: config.images.clone(),
        };
        Ok(GvisorRuntime {
            store: Store::locate(NAME, config.state_dir.as_deref())?,
            images,
            config,
            processes: Processes::default(),
            unpacking: Mutex::new(()),
        })
    }

    fn runsc(&self) -> Result<Runsc, PluginError> {
        let binary = stet_plugin_support::command::find(
            "runsc",
            self.config.runsc.as_deref(),
            "[plugins.gvisor] runsc",
        )
        .map_err(|why| PluginError::unavailable(why).with_remedy(INSTALL_REMEDY))?;
        Ok(Runsc {
            binary,
            // Beside the records, hidden from their listing.
            root: self.store.root().join(".runsc"),
            platform: self.config.platform.clone(),
            rootless: current_ids().0 != 0,
        })
    }

    /// The probe's trial: `true` in a throw-away sandbox of the host's own file system
    /// with no network, under runsc's own state directory for it.
    fn trial(&self, runsc: &Runsc) -> Result<(), String> {
        let scratch = std::env::temp_dir().join(records::new_id("stet-gvisor-probe"));
        records::create_private_dir(&scratch).map_err(|e| e.to_string())?;
        let trial = Runsc {
            root: scratch.clone(),
            ..runsc.clone()
        };
        let mut command = trial.command(&["--network=none", "do", "true"]);
        command.current_dir(&scratch);
        let ran = stet_plugin_support::command::run_bounded(command, PROBE_LIMIT);
        let _ = records::remove_tree(&scratch);
        match ran? {
            ran if ran.success() => Ok(()),
            ran => Err(ran.why()),
        }
    }

    /// Makes sandbox `spec` and starts it: detached, with the idle first process, or —
    /// given `first` — attached, with `first` as its first process, which comes back
    /// running.
    fn make(
        &self,
        runsc: &Runsc,
        spec: &SandboxSpec,
        first: Option<&ProcessSpec>,
    ) -> Result<(Record, Option<GvisorProcess>), PluginError> {
        let network = match spec.network {
            Network::None => "none",
            Network::Open => "host",
            Network::AllowHosts(_) => {
                return Err(PluginError::unsupported(
                    "the gvisor runtime cannot limit the network to a list of hosts",
                )
                .with_remedy(
                    "ask for no network (stet's egress proxy lists hosts), or the open network",
                ))
            }
        };
        check_sandbox_path("the working directory", &spec.workdir)?;
        for m in spec.mounts.iter() {
            check_sandbox_path("the mount source", &m.source)?;
            check_sandbox_path("the mount target", &m.target)?;
            if !Path::new(m.source.as_str()).exists() {
                return Err(PluginError::not_found(format!(
                    "mount source {} does not exist on the host",
                    m.source
                )));
            }
        }
        let rootfs = {
            let _one = self.unpacking.lock().unwrap_or_else(|p| p.into_inner());
            self.images.rootfs(&spec.image)?
        };
        let user = match spec.user {
            ROption::RSome(ids) => (ids.uid, ids.gid),
            ROption::RNone => current_ids(),
        };
        let mut record = Record::from_spec("gv", spec, network, user);
        if !record.env.iter().any(|(k, _)| k == "PATH") {
            // As a container engine does for an image that sets none: programs are found
            // where they are everywhere (the conformance kit counts PATH as the runtime's).
            record.env.insert(0, ("PATH".into(), DEFAULT_PATH.into()));
        }
        let stdin = first.map(|p| p.stdin.to_vec()).unwrap_or_default();
        let first = first.map(|p| process_of(&record, p)).transpose()?;
        let dir = self.store.create(&record)?;
        let made = (|| {
            let io = |what: &str| {
                let what = what.to_string();
                move |e: std::io::Error| PluginError::backend(format!("could not {what}: {e}"))
            };
            let attached = first.is_some();
            let config =
                bundle::config(&record, &rootfs.display().to_string(), &spec.limits, first);
            std::fs::write(dir.join("config.json"), config.to_string())
                .map_err(io("write the sandbox's bundle"))?;
            let flags = RunFlags {
                network,
                host_sockets: spec.mounts.iter().any(|m| is_socket(&m.source)),
            };
            if !attached {
                runsc.run(&record.id, &dir, flags).map_err(|why| {
                    PluginError::backend(format!("runsc could not start the sandbox: {why}"))
                        .with_remedy(
                            "every mount source must exist; `stet plugins probe` says whether runsc runs here",
                        )
                })?;
                return Ok(None);
            }
            let command = runsc.run_command(&record.id, &dir, flags, false);
            let process = self.track(runsc, &record.id, command, stdin, None)?;
            Ok(Some(process))
        })();
        match made {
            Ok(process) => Ok((record, process)),
            Err(e) => {
                let _ = self.teardown(&record.id);
                Err(e)
            }
        }
    }

    /// Starts `command` — the host side of a process in sandbox `sandbox` — and keeps
    /// track of it: registered for teardown, noted in the record for another stet
    /// process's `gc`. `file` is its process file, removed when it ends.
    fn track(
        &self,
        runsc: &Runsc,
        sandbox: &str,
        command: std::process::Command,
        stdin: Vec<u8>,
        file: Option<PathBuf>,
    ) -> Result<GvisorProcess, PluginError> {
        let (process, shared) = process::start(
            command,
            stdin,
            // runsc exits with 128 + N when the process died of signal N.
            StatusEncoding::ShellStyle,
            |mut c| c.spawn(),
        )
        .map_err(|e| {
            if let Some(file) = &file {
                let _ = std::fs::remove_file(file);
            }
            PluginError::backend(format!("could not start runsc: {e}"))
        })?;
        self.processes.register(sandbox, &shared);
        let note = self.store.add_process(sandbox, process.pid())?;
        Ok(GvisorProcess {
            host: process.with_note(note),
            runsc: runsc.clone(),
            sandbox: sandbox.to_string(),
            file,
            killed: Default::default(),
        })
    }
}

/// Process `spec` in sandbox `record`, as runsc reads it: its argv, its environment added
/// to the sandbox's, its working directory (else the sandbox's), the sandbox's user.
fn process_of(record: &Record, spec: &ProcessSpec) -> Result<serde_json::Value, PluginError> {
    if spec.argv.is_empty() {
        return Err(PluginError::invalid_input("no program given to run"));
    }
    let argv: Vec<String> = spec.argv.iter().map(|a| a.to_string()).collect();
    let extra: Vec<(String, String)> = spec
        .env
        .iter()
        .map(|v| (v.name.to_string(), v.value.to_string()))
        .collect();
    let env = merged_env(&record.env, &extra);
    let workdir = match &spec.workdir {
        ROption::RSome(dir) => {
            check_sandbox_path("the working directory", dir)?;
            dir.to_string()
        }
        ROption::RNone => record.workdir.clone(),
    };
    Ok(bundle::process(record, &argv, &env, &workdir))
}

/// How many processes of sandbox `id` the host's OOM killer took: the `oom_kill` count of
/// its memory control group (v1's `memory.oom_control`, v2's `memory.events`), which runsc
/// made at [`bundle::cgroup_path`]; 0 where there is none to read.
fn oom_kills(id: &str) -> u64 {
    let path = bundle::cgroup_path(id);
    let read = |file: String| std::fs::read_to_string(file).ok();
    let text = read(format!("/sys/fs/cgroup/memory{path}/memory.oom_control"))
        .or_else(|| read(format!("/sys/fs/cgroup{path}/memory.events")))
        .unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("oom_kill ")?.trim().parse().ok())
        .unwrap_or(0)
}

/// A process started with `runsc exec` (or the first, with an attached `runsc run`): the
/// host side streams and reaps it; a kill ends every process of the sandbox, since the
/// host's process is the runsc client, not the program inside.
struct GvisorProcess {
    host: HostProcess,
    runsc: Runsc,
    sandbox: String,
    /// The process file, removed once the process has ended (the first process has
    /// none: it is in the bundle).
    file: Option<PathBuf>,
    /// Whether `kill` ended it: runsc exec then exits 128 (its sandbox is gone), which is
    /// reported as the SIGKILL it was.
    killed: std::sync::atomic::AtomicBool,
}

impl ProcessPlugin for GvisorProcess {
    fn wait(&self, sink: &mut Sink<'_>) -> Result<ExitStatus, PluginError> {
        let status = self.host.wait(sink);
        if let Some(file) = &self.file {
            let _ = std::fs::remove_file(file);
        }
        let killed = self.killed.load(std::sync::atomic::Ordering::SeqCst);
        match status {
            // runsc answers 128 when the sandbox itself went away under it.
            Ok(s) if killed && s.code == ROption::RSome(128) => Ok(ExitStatus::signalled(9)),
            Ok(s) if s.code == ROption::RSome(128) && oom_kills(&self.sandbox) > 0 => {
                // The host's OOM killer ended the sentry at the memory limit: the sandbox
                // is one process to it.
                let mut status = ExitStatus::signalled(9);
                status.out_of_memory = true;
                Ok(status)
            }
            other => other,
        }
    }

    fn kill(&self) -> Result<(), PluginError> {
        self.killed.store(true, std::sync::atomic::Ordering::SeqCst);
        let stopped = self.runsc.stop(&self.sandbox).map(|_| ());
        self.host.kill()?;
        stopped.map_err(|why| {
            PluginError::backend(format!(
                "could not kill the processes of sandbox {}: {why}",
                self.sandbox
            ))
        })
    }
}

impl RuntimePlugin for GvisorRuntime {
    /// Contract: is the backend there, which version, what can it do — without changing
    /// anything, under the host's time limit. Here: runsc is found, its release is one that
    /// runs current programs, and it runs `true` in a throw-away sandbox.
    fn probe(&self) -> Result<ProbeReport, PluginError> {
        if !cfg!(target_os = "linux") {
            return Ok(ProbeReport::unavailable(
                "gVisor runs on Linux only",
                "use another runtime here",
            ));
        }
        let runsc = match self.runsc() {
            Ok(runsc) => runsc,
            Err(e) => return Ok(ProbeReport::unavailable(e.message, e.remedy)),
        };
        let version = match runsc.version(PROBE_LIMIT) {
            Ok(version) => version,
            Err(why) => {
                return Ok(ProbeReport::unavailable(
                    format!("{} --version failed: {why}", runsc.binary.display()),
                    INSTALL_REMEDY,
                ))
            }
        };
        match release_date(&version) {
            Some(date) if date >= OLDEST_RELEASE => {}
            _ => {
                return Ok(ProbeReport::unavailable(
                    format!(
                        "runsc {version} is older than release {OLDEST_RELEASE}: it refuses the \
                         statx calls current programs (coreutils' ls, stat) make"
                    ),
                    INSTALL_REMEDY,
                ))
            }
        }
        if let Err(why) = self.trial(&runsc) {
            return Ok(ProbeReport::unavailable(
                format!("runsc {version} does not run a sandbox here: {why}"),
                "runsc needs root, or user namespaces for --rootless; on the kvm platform, \
                 /dev/kvm (nested virtualisation); the default platform, ptrace, needs neither",
            ));
        }
        let mode = if runsc.rootless {
            "rootless (no cgroups: memory and CPU limits are not enforced)"
        } else {
            "root"
        };
        let mut report = ProbeReport::available(format!("runsc {version}"), PRIORITY)
            .with_fact("runsc", runsc.binary.display().to_string())
            .with_fact(
                "platform",
                runsc
                    .platform
                    .clone()
                    .unwrap_or_else(|| "ptrace (runsc's default)".into()),
            )
            .with_fact("mode", mode)
            .with_fact(stet_plugin_api::fact::ISOLATION, ISOLATION)
            .with_fact("state-dir", self.store.root().display().to_string())
            .with_fact("image-cache", self.images.cache.display().to_string());
        for capability in CAPABILITIES {
            report = report.with_capability(*capability);
        }
        report = report.with_capability(capability::LIMIT_PIDS);
        if !runsc.rootless {
            report = report
                .with_capability(capability::LIMITS)
                .with_capability(capability::LIMIT_MEMORY)
                .with_capability(capability::LIMIT_CPU);
        }
        Ok(report)
    }

    /// Contract: create a sandbox so that processes can be spawned in it. Only the listed
    /// mounts are visible, the environment is exactly `spec.env`, the network is as asked.
    /// A missing image is NOT_FOUND with a remedy. The first sandbox of an image unpacks it.
    fn create_sandbox(&self, spec: SandboxSpec) -> Result<SandboxInfo, PluginError> {
        let runsc = self.runsc()?;
        let (record, _) = self.make(&runsc, &spec, None)?;
        Ok(SandboxInfo {
            id: record.id.into(),
            state: "running".into(),
            labels: spec.labels,
        })
    }

    /// Contract: start a process in the sandbox and return as soon as it runs; `wait`
    /// streams its output. `spec.env` is added to the sandbox's environment,
    /// `spec.workdir` replaces the sandbox's, `spec.stdin` is written then closed.
    fn spawn(
        &self,
        sandbox: &str,
        spec: ProcessSpec,
    ) -> Result<Box<dyn ProcessPlugin>, PluginError> {
        check_id(sandbox)?;
        let runsc = self.runsc()?;
        let record = self.store.record(sandbox)?;
        let process = process_of(&record, &spec)?;
        let file = self
            .store
            .dir(sandbox)?
            .join(format!("{}.process.json", records::new_id("p")));
        std::fs::write(&file, process.to_string()).map_err(|e| {
            PluginError::backend(format!("could not write the process's file: {e}"))
        })?;
        let command = runsc.command(&["exec", "--process", &file.display().to_string(), sandbox]);
        let process = self.track(&runsc, sandbox, command, spec.stdin.to_vec(), Some(file))?;
        Ok(Box::new(process))
    }

    /// Contract: stop and remove the sandbox and everything running in it; again, or for
    /// a sandbox already gone, succeeds.
    fn teardown(&self, sandbox: &str) -> Result<(), PluginError> {
        check_id(sandbox)?;
        let runsc = self.runsc()?;
        // An attached `runsc run` removed its own sandbox when its process ended: runsc
        // knows it no more, and there is nothing of it to delete.
        let stopped = runsc.stop(sandbox);
        let Some(dir) = self.store.detach(sandbox)? else {
            // Torn down before (or never made here): nothing of it is left to end.
            return Ok(());
        };
        let ours = self.processes.take(sandbox);
        records::end_detached(&dir, ours)?;
        let known = stopped.map_err(|why| {
            PluginError::backend(format!("could not stop sandbox {sandbox}: {why}"))
        })?;
        if !known {
            return Ok(());
        }
        runsc.delete_in_background(sandbox).map_err(|why| {
            PluginError::backend(format!(
                "could not delete sandbox {sandbox} in runsc: {why}"
            ))
            .with_remedy("`runsc --root STATE_DIR/.runsc delete --force ID` removes it by hand")
        })
    }

    /// Contract: the sandboxes carrying every one of `labels`.
    fn list_sandboxes(&self, labels: &[Label]) -> Result<Vec<SandboxInfo>, PluginError> {
        self.store.sandboxes(labels)
    }

    /// Contract (API 1.1): whether `image` is present, and if not how to get it.
    fn image_status(&self, image: &str) -> Result<ImageStatus, PluginError> {
        self.images.status(image)
    }

    /// A forwarded socket is a read-only mount of it (see [`runsc::RunFlags::host_sockets`]);
    /// a first process is the sandbox's own, started with it by an attached `runsc run`
    /// (one runsc call where create-then-exec takes two, and no idle process).
    fn start(
        &self,
        spec: SandboxSpec,
        options: Vec<stet_plugin_api::SandboxOption>,
    ) -> Result<(SandboxInfo, Option<Box<dyn ProcessPlugin>>), PluginError> {
        let (spec, first) = stet_plugin_api::take_options(
            spec,
            options,
            stet_plugin_api::SocketForwarding::AsMount,
        )?;
        let runsc = self.runsc()?;
        let (record, process) = self.make(&runsc, &spec, first.as_ref())?;
        let info = SandboxInfo {
            id: record.id.into(),
            state: "running".into(),
            labels: spec.labels,
        };
        Ok((info, process.map(|p| Box::new(p) as Box<dyn ProcessPlugin>)))
    }

    /// Contract (API 1.5): nothing in the sandbox runs or writes once this returns: its
    /// sentry (through which alone anything in it runs or reaches a mount) is killed and
    /// its end waited for.
    fn stop(&self, sandbox: &str) -> Result<(), PluginError> {
        check_id(sandbox)?;
        self.runsc()?.stop(sandbox).map(|_| ()).map_err(|why| {
            PluginError::backend(format!("could not stop sandbox {sandbox}: {why}"))
                .with_remedy("tear the sandbox down instead (`stet gc` removes what stet left)")
        })
    }

    // `limit_counters` keeps its default (None): gVisor keeps no count of the clones its
    // RLIMIT_NPROC refused, and the host's control group counts gVisor's threads, not the
    // agent's.
    // `spawn_terminal` keeps its default (UNSUPPORTED): no pseudo-terminal yet.
}

export_plugin!(
    runtime,
    name = NAME,
    version = env!("CARGO_PKG_VERSION"),
    new = GvisorRuntime::from_config
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked() {
        assert!(GvisorRuntime::from_config("{}").is_ok());
        let ok = GvisorRuntime::from_config(
            r#"{"runsc": "/usr/bin/runsc", "platform": "ptrace", "state_dir": "/tmp/x",
                "images": {"lane": "/srv/lane"}}"#,
        );
        assert!(ok.is_ok());
        let typo = GvisorRuntime::from_config(r#"{"image": {}}"#)
            .err()
            .unwrap();
        assert!(typo.message.contains("unknown field"), "{}", typo.message);
        let relative = GvisorRuntime::from_config(r#"{"images": {"lane": "srv/lane"}}"#)
            .err()
            .unwrap();
        assert!(relative.message.contains("not an absolute path"));
    }

    #[test]
    fn release_dates_are_read_from_either_way_of_writing_the_version() {
        assert_eq!(release_date("0.0~20240729.0"), Some(20240729));
        assert_eq!(release_date("release-20221219.0"), Some(20221219));
        assert_eq!(release_date("0.0~20221219.0"), Some(20221219));
        assert_eq!(release_date("unknown"), None);
        assert!(release_date("0.0~20221219.0").unwrap() < OLDEST_RELEASE);
        assert!(release_date("0.0~20240729.0").unwrap() >= OLDEST_RELEASE);
    }

    #[test]
    fn ids_that_are_not_this_runtimes_are_refused_before_runsc_hears_of_them() {
        let runtime = GvisorRuntime::from_config(r#"{"state_dir": "/nonexistent/stet"}"#).unwrap();
        let err = runtime.teardown("../../etc").unwrap_err();
        assert_eq!(err.code, stet_plugin_api::ErrorCode::INVALID_INPUT);
        let err = runtime.stop("--all").unwrap_err();
        assert_eq!(err.code, stet_plugin_api::ErrorCode::INVALID_INPUT);
    }
}
