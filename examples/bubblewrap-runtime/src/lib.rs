//! A stet runtime on bubblewrap (`bwrap`): Linux namespaces without a daemon, a sandbox
//! in milliseconds. Made from the template in `examples/runtime-plugin`.
//!
//! bwrap has no daemon and no notion of a long-lived sandbox, so:
//!
//! - a **sandbox** is a record: a directory under the state directory holding the spec and
//!   labels as JSON, and the sandbox's `/tmp` (see [`records`], from the crate
//!   `stet-plugin-support` the template and this runtime share);
//! - each **process** is one `bwrap … -- argv` child of the plugin, built from the record
//!   (see [`bwrap::Launch`]): new user, pid, ipc, uts and cgroup namespaces, no
//!   capabilities, the spec's ids inside (mapped to the caller's own outside), a new
//!   network namespace with only loopback unless the network is open, the environment
//!   exactly as given, a read-only root made from the image, and the spec's bind mounts
//!   (read-write only when asked). It dies with the stet that started it;
//! - **kill** kills the bwrap process's group with SIGKILL; the sandbox's pid namespace
//!   ends with it, taking everything the process started;
//! - **teardown** kills what is left (also processes another stet started, found by pid
//!   and start time) and removes the record;
//! - **images** map to root file systems; `host` is the host's own system (see [`images`]).
//!
//! Not enforced: cpu, memory and pids limits (bwrap has no cgroups); the probe says so.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use stet_plugin_api::{
    export_plugin, ErrorCode, ImageStatus, Label, Network, PluginError, ProbeReport, ProcessPlugin,
    ProcessSpec, ROption, RuntimePlugin, SandboxInfo, SandboxSpec,
};

pub mod bwrap;
pub mod images;
pub use stet_plugin_support::{process, records};

use images::Image;
use process::{Processes, StatusEncoding};
use records::{Record, Store};
use stet_plugin_support::{check_sandbox_path, current_ids, merged_env};

/// The plugin's name: equal to `name` in plugin.toml.
pub const NAME: &str = "bubblewrap";
/// Below Docker's 50: Docker brings the lane image and enforces limits; see README.md.
pub const PRIORITY: i32 = 40;
/// What the probe reports this runtime can do.
pub const CAPABILITIES: &[&str] = &[
    "bind-mounts",
    "network-none",
    "network-open",
    "labels",
    "kill",
    "run-as-user",
    stet_plugin_api::capability::FORWARD_SOCKET,
    stet_plugin_api::capability::FIRST_PROCESS,
];
/// How long the probe's trial runs may take.
const PROBE_LIMIT: Duration = Duration::from_secs(3);
/// How long the trial run that checks a new sandbox may take.
const CREATE_LIMIT: Duration = Duration::from_secs(30);
const INSTALL_REMEDY: &str = "install bubblewrap: `apt-get install bubblewrap` (Debian, Ubuntu), \
     `dnf install bubblewrap` (Fedora, RHEL), `pacman -S bubblewrap` (Arch); or point \
     [plugins.bubblewrap] bwrap at the binary";
const USERNS_REMEDY: &str = "bubblewrap needs unprivileged user namespaces: \
     `sysctl -w kernel.unprivileged_userns_clone=1` (Debian before 11), \
     `sysctl -w user.max_user_namespaces=15000` when it is 0, and on Ubuntu 23.10 and later \
     `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` or an AppArmor profile \
     allowing userns for stet";

/// The plugin's settings: the `[plugins.bubblewrap]` table of stet's configuration.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The bwrap binary (default: `bwrap` on PATH).
    pub bwrap: Option<PathBuf>,
    /// Where sandbox records live (default: `$XDG_RUNTIME_DIR/stet-bubblewrap`, else
    /// `~/.local/state/stet/bubblewrap`).
    pub state_dir: Option<PathBuf>,
    /// Image names mapped to root file-system directories; `host` is built in.
    #[serde(default)]
    pub images: BTreeMap<String, PathBuf>,
}

/// The bubblewrap runtime. The host may call it from several threads at once.
pub struct BubblewrapRuntime {
    config: Config,
    store: Store,
    /// Processes started by this instance, per sandbox, for `teardown`.
    processes: Processes,
    /// Each sandbox's network namespace (network none), which all its processes join.
    netns: Mutex<HashMap<String, Arc<bwrap::Netns>>>,
}

fn io_error(doing: &str) -> impl Fn(std::io::Error) -> PluginError + '_ {
    move |e| PluginError::backend(format!("could not {doing}: {e}"))
}

impl BubblewrapRuntime {
    /// Builds the runtime from its settings (`{}` when none are configured). Cheap; does
    /// not run bwrap.
    pub fn from_config(config: &str) -> Result<Self, PluginError> {
        let config: Config = serde_json::from_str(config).map_err(|e| {
            PluginError::invalid_input(format!("bad [plugins.{NAME}] settings: {e}")).with_remedy(
                "the keys are `bwrap` (the binary), `state_dir` (a directory for sandbox \
                 records) and `images` (a table of image names to root file-system directories)",
            )
        })?;
        images::check_config(&config.images)?;
        Ok(BubblewrapRuntime {
            store: Store::locate(NAME, config.state_dir.as_deref())?,
            config,
            processes: Processes::default(),
            netns: Mutex::new(HashMap::new()),
        })
    }

    fn bwrap(&self) -> Result<PathBuf, PluginError> {
        bwrap::find(self.config.bwrap.as_deref())
            .map_err(|why| PluginError::unavailable(why).with_remedy(INSTALL_REMEDY))
    }

    /// The probe's trial: `true` in a sandbox of the host image with network none, made
    /// exactly as `spawn` makes one (namespaces, sysfs, loopback, mounts).
    fn trial(&self, bwrap: &Path) -> Result<(), String> {
        let record = Record {
            id: "bw-probe".into(),
            image: images::HOST.into(),
            mounts: Vec::new(),
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            workdir: "/".into(),
            network: "none".into(),
            user: current_ids(),
            labels: Vec::new(),
            created: 0,
        };
        let argv = ["true".to_string()];
        let launch = bwrap::Launch {
            record: &record,
            image: &Image::Host,
            tmp: None,
            argv: &argv,
            env: &record.env,
            workdir: "/",
            netns: None,
        };
        match bwrap::run_bounded(launch.command(bwrap), PROBE_LIMIT)? {
            ran if ran.success() => Ok(()),
            ran => Err(ran.why()),
        }
    }
}

impl RuntimePlugin for BubblewrapRuntime {
    /// Contract: is the backend there, which version, what can it do — without changing
    /// anything, under the host's time limit. Here: bwrap is found, answers `--version`,
    /// and runs `true` in a trial sandbox made exactly as `spawn` makes them; when that
    /// fails, `bwrap --ro-bind / / true` tells whether bwrap works at all.
    fn probe(&self) -> Result<ProbeReport, PluginError> {
        if !cfg!(target_os = "linux") {
            return Ok(ProbeReport::unavailable(
                "bubblewrap runs on Linux only",
                "use another runtime here (docker)",
            ));
        }
        let bwrap = match bwrap::find(self.config.bwrap.as_deref()) {
            Ok(path) => path,
            Err(why) => return Ok(ProbeReport::unavailable(why, INSTALL_REMEDY)),
        };
        let command = |args: &[&str]| {
            let mut c = std::process::Command::new(&bwrap);
            c.args(args).env_clear().current_dir("/");
            c
        };
        let version = match bwrap::run_bounded(command(&["--version"]), PROBE_LIMIT) {
            Ok(ran) if ran.success() => ran.stdout.trim().to_string(),
            Ok(ran) => {
                return Ok(ProbeReport::unavailable(
                    format!("{} --version failed: {}", bwrap.display(), ran.why()),
                    INSTALL_REMEDY,
                ))
            }
            Err(why) => {
                return Ok(ProbeReport::unavailable(
                    format!("{} --version: {why}", bwrap.display()),
                    INSTALL_REMEDY,
                ))
            }
        };
        if let Err(why) = self.trial(&bwrap) {
            // Which part fails: bwrap at all, or the namespaces a sandbox needs?
            let plain = bwrap::run_bounded(command(&["--ro-bind", "/", "/", "true"]), PROBE_LIMIT)
                .map_err(String::from)
                .and_then(|ran| {
                    if ran.success() {
                        Ok(())
                    } else {
                        Err(ran.why())
                    }
                });
            let reason = match plain {
                Err(plain) => format!("{version} does not work here: {plain}"),
                Ok(()) => {
                    format!("{version} works, but not with the namespaces a sandbox needs: {why}")
                }
            };
            return Ok(ProbeReport::unavailable(reason, USERNS_REMEDY));
        }
        let images: Vec<String> = std::iter::once(images::HOST.to_string())
            .chain(
                self.config
                    .images
                    .iter()
                    .map(|(name, dir)| format!("{name} = {}", dir.display())),
            )
            .collect();
        let mut report = ProbeReport::available(version, PRIORITY)
            // Said for people (the host shows it, never matches on it). No `own-kernel`
            // capability: every process here is a process of the host's kernel.
            .with_fact(
                stet_plugin_api::fact::ISOLATION,
                "namespaces on the host's kernel (user, pid, mount, network; no cgroups)",
            )
            .with_fact("bwrap", bwrap.display().to_string())
            .with_fact("state-dir", self.store.root().display().to_string())
            .with_fact("images", images.join(", "))
            .with_fact("limits", "not enforced (bubblewrap has no cgroups)");
        for capability in CAPABILITIES {
            report = report.with_capability(*capability);
        }
        report.reason = "cpu, memory and pids limits are not enforced".into();
        Ok(report)
    }

    /// Contract: create a sandbox so that processes can be spawned in it. Only the listed
    /// mounts are visible, the environment is exactly `spec.env`, the network is as asked.
    /// A missing image is NOT_FOUND with a remedy. Here the record is written and one
    /// trial `true` runs in it, so that a bad mount or working directory fails now, with
    /// bwrap's own words, rather than at the first spawn.
    fn create_sandbox(&self, spec: SandboxSpec) -> Result<SandboxInfo, PluginError> {
        let bwrap = self.bwrap()?;
        let image = images::resolve(spec.image.as_str(), &self.config.images)?;
        let network = match spec.network {
            Network::None => "none",
            Network::Open => "open",
            Network::AllowHosts(_) => {
                return Err(PluginError::unsupported(
                    "bubblewrap cannot limit the network to a list of hosts",
                )
                .with_remedy("ask for no network, or the open network"))
            }
        };
        check_sandbox_path("the working directory", &spec.workdir)?;
        for m in spec.mounts.iter() {
            check_sandbox_path("the mount source", &m.source)?;
            check_sandbox_path("the mount target", &m.target)?;
        }
        let user = match spec.user {
            ROption::RSome(ids) => (ids.uid, ids.gid),
            ROption::RNone => current_ids(),
        };
        let record = Record::from_spec("bw", &spec, network, user);
        // One network namespace for the sandbox's lifetime: its processes share a loopback
        // (an egress bridge one of them listens with is reached by the others).
        let netns = match network {
            "open" => None,
            _ => Some(Arc::new(bwrap::Netns::new().map_err(|e| {
                PluginError::backend(format!("cannot make the sandbox's network namespace: {e}"))
                    .with_remedy(
                        "allow unprivileged user namespaces (kernel.unprivileged_userns_clone=1)",
                    )
            })?)),
        };
        let dir = self.store.create(&record)?;
        let checked = (|| {
            let tmp = dir.join("tmp");
            std::fs::create_dir(&tmp).map_err(io_error("create the sandbox's /tmp"))?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777))
                .map_err(io_error("open the sandbox's /tmp"))?;
            let argv = ["true".to_string()];
            let launch = bwrap::Launch {
                record: &record,
                image: &image,
                tmp: Some(&tmp),
                argv: &argv,
                env: &record.env,
                workdir: &record.workdir,
                netns: netns.as_deref(),
            };
            match bwrap::run_bounded(launch.command(&bwrap), CREATE_LIMIT) {
                Ok(ran) if ran.success() => Ok(()),
                Ok(ran) => Err(ran.why()),
                Err(why) => Err(why.to_string()),
            }
            .map_err(|why| {
                PluginError::backend(format!("bwrap could not make the sandbox: {why}"))
                    .with_remedy(
                        "every mount source must exist, and a mount target or working \
                         directory inside the image's read-only directories must exist in the image",
                    )
            })
        })();
        if let Some(netns) = netns {
            self.netns
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(record.id.clone(), netns);
        }
        if let Err(e) = checked {
            let _ = self.teardown(&record.id);
            return Err(e);
        }
        Ok(SandboxInfo {
            id: record.id.into(),
            state: "idle".into(),
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
        if spec.argv.is_empty() {
            return Err(PluginError::invalid_input("no program given to run"));
        }
        let bwrap = self.bwrap()?;
        let record = self.store.record(sandbox)?;
        let image = images::resolve(&record.image, &self.config.images)?;
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
        let tmp = self.store.dir(sandbox)?.join("tmp");
        let netns = self
            .netns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(sandbox)
            .cloned();
        if netns.is_none() && record.network != "open" {
            // Its namespace lives in the process that made it; a fresh one here would be a
            // second, separate loopback.
            return Err(PluginError::unsupported(
                "this sandbox's network namespace is held by the process that made it",
            )
            .with_remedy(
                "run processes in a bubblewrap sandbox from the stet process that created it",
            ));
        }
        let launch = bwrap::Launch {
            record: &record,
            image: &image,
            tmp: Some(&tmp),
            argv: &argv,
            env: &env,
            workdir: &workdir,
            netns: netns.as_deref(),
        };
        let (process, shared) = process::start(
            launch.command(&bwrap),
            spec.stdin.to_vec(),
            // bwrap exits with 128 + N when the process died of signal N.
            StatusEncoding::ShellStyle,
            bwrap::spawn_from_keeper,
        )
        .map_err(|e| {
            PluginError::new(
                ErrorCode::BACKEND,
                format!("could not start bwrap ({}): {e}", bwrap.display()),
            )
        })?;
        self.processes.register(sandbox, &shared);
        let note = self.store.add_process(sandbox, process.pid())?;
        Ok(Box::new(process.with_note(note)))
    }

    /// Contract: stop and remove the sandbox and everything running in it; again, or for
    /// a sandbox already gone, succeeds.
    fn teardown(&self, sandbox: &str) -> Result<(), PluginError> {
        let Some(dir) = self.store.detach(sandbox)? else {
            return Ok(());
        };
        let ours = self.processes.take(sandbox);
        self.netns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(sandbox);
        records::end_detached(&dir, ours)
    }

    /// Contract: the sandboxes carrying every one of `labels`.
    /// A forwarded socket is bound read-only at its path (bwrap binds sockets as it binds
    /// files; a unix socket needs no network, so it works with network none); a first
    /// process is spawned at once, since every process here is its own bwrap.
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

    fn list_sandboxes(&self, labels: &[Label]) -> Result<Vec<SandboxInfo>, PluginError> {
        self.store.sandboxes(labels)
    }

    /// Contract (API 1.1): whether `image` is present, and if not how to get it.
    fn image_status(&self, image: &str) -> Result<ImageStatus, PluginError> {
        Ok(images::status(image, &self.config.images))
    }

    // `spawn_terminal` keeps its default (UNSUPPORTED): no pseudo-terminal yet.
}

export_plugin!(
    runtime,
    name = NAME,
    version = env!("CARGO_PKG_VERSION"),
    new = BubblewrapRuntime::from_config
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked() {
        assert!(BubblewrapRuntime::from_config("{}").is_ok());
        let ok = BubblewrapRuntime::from_config(
            r#"{"bwrap": "/usr/bin/bwrap", "state_dir": "/tmp/x", "images": {"lane": "/srv/lane"}}"#,
        );
        assert!(ok.is_ok());
        let typo = BubblewrapRuntime::from_config(r#"{"image": {}}"#)
            .err()
            .unwrap();
        assert!(typo.message.contains("unknown field"), "{}", typo.message);
        let relative = BubblewrapRuntime::from_config(r#"{"images": {"lane": "srv/lane"}}"#)
            .err()
            .unwrap();
        assert!(relative.message.contains("not an absolute path"));
    }
}
