//! A template for a stet runtime plugin.
//!
//! **This runtime does not isolate anything.** A "sandbox" is a record and a scratch
//! directory; a process is a plain child process on the host, run as the calling user,
//! with the environment built from scratch. Mounts are not mounted (a working directory
//! inside a mount's target is mapped to the mount's source), the network is the host's,
//! limits are not applied. Its probe says so and reports the lowest priority, so stet
//! picks it only when asked to (`--runtime example`) or when nothing else is available.
//! The conformance kit fails it on exactly the two checks that need isolation (see
//! `tests/conformance.rs`).
//!
//! What it is for: everything around the isolation is real and passes the kit — records,
//! labels, live streaming, stdin, exit codes and signals, kill from another thread,
//! idempotent teardown that also reaches processes another stet started. Copy it, and
//! replace [`ExampleRuntime::command`] (and `probe`) with your backend: the bubblewrap
//! example beside this one is this template with `bwrap` put there. The plumbing both
//! share (sandbox records on disk, host child processes) is the crate
//! `stet-plugin-support`, which a copy of this template keeps as a dependency.
//!
//! Every method of [`RuntimePlugin`] states its contract in a comment; the full contracts
//! are in `stet_plugin_api::RuntimePlugin`'s documentation.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use stet_plugin_api::{
    export_plugin, ImageStatus, Label, Network, PluginError, ProbeReport, ProcessPlugin,
    ProcessSpec, ROption, RuntimePlugin, SandboxInfo, SandboxSpec,
};

pub use stet_plugin_support::{process, records};

use process::{Processes, StatusEncoding};
use records::{Record, Store};
use stet_plugin_support::{current_ids, merged_env};

/// The plugin's name: equal to `name` in plugin.toml.
pub const NAME: &str = "example";
/// The only image this runtime knows: the host itself.
pub const HOST_IMAGE: &str = "host";
/// What the probe reports; lower than any runtime that isolates.
pub const PRIORITY: i32 = -100;

/// The plugin's settings: the `[plugins.example]` table of stet's configuration, handed
/// over as JSON. Unknown keys are refused, so that a misspelt key is not silently ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where sandbox records live (default: `$XDG_RUNTIME_DIR/stet-example`, else
    /// `~/.local/state/stet/example`).
    pub state_dir: Option<PathBuf>,
    /// The person's acknowledgement that this runtime isolates nothing. Without it the
    /// probe answers unavailable, so that stet never picks it by itself to run an agent.
    #[serde(default)]
    pub no_isolation: bool,
    /// For testing a host's `own-kernel` wall only, never for use: the probe then offers
    /// `capability::OWN_KERNEL`, which this runtime does not have (its processes are the
    /// host's kernel's), so that a host that proves the claim finds it false. A real
    /// runtime offers the capability only when every sandbox it makes meets a kernel of
    /// its own (a user-space kernel, a VM's).
    #[serde(default)]
    pub claim_own_kernel_falsely: bool,
}

/// The runtime. The host may call it from several threads at once: everything in it is
/// behind a lock or on disk.
pub struct ExampleRuntime {
    no_isolation: bool,
    claim_own_kernel_falsely: bool,
    store: Store,
    /// Processes started by this instance, per sandbox, so that `teardown` can kill them.
    /// (Processes started by another stet process are found through the records.)
    processes: Processes,
}

impl ExampleRuntime {
    /// Builds the runtime from its settings (`{}` when none are configured). Called once
    /// per load; must be cheap and must not touch the backend: that is `probe`'s job.
    pub fn from_config(config: &str) -> Result<Self, PluginError> {
        let config: Config = serde_json::from_str(config).map_err(|e| {
            PluginError::invalid_input(format!("bad [plugins.{NAME}] settings: {e}")).with_remedy(
                "the keys are `state_dir` (a directory for sandbox records), `no_isolation` and \
                 `claim_own_kernel_falsely` (tests of a host only)",
            )
        })?;
        Ok(ExampleRuntime {
            no_isolation: config.no_isolation,
            claim_own_kernel_falsely: config.claim_own_kernel_falsely,
            store: Store::locate(NAME, config.state_dir.as_deref())?,
            processes: Processes::default(),
        })
    }

    /// THE BACKEND-SPECIFIC PART: the command that runs `argv` in the sandbox. Here: the
    /// program itself, on the host, in the mapped working directory, with exactly the
    /// environment given. A real runtime returns its launcher instead (`bwrap … -- argv`).
    fn command(
        &self,
        record: &Record,
        argv: &[String],
        env: &[(String, String)],
        workdir: &str,
    ) -> Result<Command, PluginError> {
        let dir = host_path(record, workdir, &self.store.dir(&record.id)?)?;
        let mut command = Command::new(&argv[0]);
        command
            .args(&argv[1..])
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(dir);
        Ok(command)
    }
}

/// Where a sandbox path is on the host: inside a mount's target, the same place under its
/// source (the deepest mount wins); elsewhere the path itself. An empty path is the
/// sandbox's scratch directory.
fn host_path(record: &Record, path: &str, sandbox_dir: &Path) -> Result<PathBuf, PluginError> {
    if path.is_empty() {
        return Ok(sandbox_dir.join("scratch"));
    }
    let wanted = Path::new(path);
    let mapped = record
        .mounts
        .iter()
        .filter_map(|m| {
            let rest = wanted.strip_prefix(&m.target).ok()?;
            Some((Path::new(&m.target).components().count(), m, rest))
        })
        .max_by_key(|(depth, _, _)| *depth)
        .map(|(_, m, rest)| Path::new(&m.source).join(rest));
    let host = mapped.unwrap_or_else(|| wanted.to_path_buf());
    if !host.is_dir() {
        return Err(PluginError::invalid_input(format!(
            "the working directory {path} is not a directory (on the host: {})",
            host.display()
        )));
    }
    Ok(host)
}

impl RuntimePlugin for ExampleRuntime {
    /// Contract: is the backend there, which version, what can it do — without changing
    /// anything. Runs in a short-lived child process under a time limit. An absent backend
    /// is `ProbeReport::unavailable(reason, remedy)`, not an error. The priority decides
    /// selection when the person has not chosen a runtime.
    fn probe(&self) -> Result<ProbeReport, PluginError> {
        // A real runtime checks its backend here (is the binary installed, does the daemon
        // answer?) and reports `unavailable` with the remedy when not. This one has no
        // backend to check; it refuses to be picked until the person says they know it
        // isolates nothing.
        if !self.no_isolation {
            return Ok(ProbeReport::unavailable(
                "NO ISOLATION: a template that runs processes as plain host processes",
                format!(
                    "for developing a plugin only: set no_isolation = true under [plugins.{NAME}]"
                ),
            ));
        }
        let mut report = ProbeReport::available("host processes (no isolation)", PRIORITY)
            .with_capability("labels")
            .with_capability("kill")
            .with_capability("network-open")
            .with_capability(stet_plugin_api::capability::FIRST_PROCESS)
            // For people, shown with the runtime wherever one is chosen (never matched on).
            .with_fact(
                stet_plugin_api::fact::ISOLATION,
                "none: processes run on the host as you",
            )
            .with_fact("state-dir", self.store.root().display().to_string())
            .with_fact("images", HOST_IMAGE);
        if self.claim_own_kernel_falsely {
            report = report.with_capability(stet_plugin_api::capability::OWN_KERNEL);
        }
        // For an available backend, `reason` is an optional note shown with it.
        report.reason = "NO ISOLATION: a template that runs processes as plain host \
                         processes; mounts, network none and limits are not enforced"
            .into();
        Ok(report)
    }

    /// Contract: create and start a sandbox. Only the listed mounts may be visible, the
    /// environment is exactly `spec.env`, the network is as asked (none by default). A
    /// missing image is NOT_FOUND with a remedy. (This template keeps only the bookkeeping
    /// of that contract; see the crate documentation.)
    fn create_sandbox(&self, spec: SandboxSpec) -> Result<SandboxInfo, PluginError> {
        if spec.image.as_str() != HOST_IMAGE {
            return Err(PluginError::not_found(format!(
                "image {} is not available to runtime {NAME}",
                spec.image
            ))
            .with_remedy(format!(
                "this runtime runs on the host and knows one image, `{HOST_IMAGE}`: pass --image {HOST_IMAGE}"
            )));
        }
        if let Network::AllowHosts(_) = spec.network {
            return Err(PluginError::unsupported(format!(
                "runtime {NAME} cannot limit the network to a list of hosts"
            )));
        }
        let me = current_ids();
        let user = match spec.user {
            ROption::RSome(ids) if (ids.uid, ids.gid) != me => {
                return Err(PluginError::unsupported(format!(
                    "runtime {NAME} runs processes as the calling user ({}:{}), not as {}:{}",
                    me.0, me.1, ids.uid, ids.gid
                )))
            }
            _ => me,
        };
        let network = match spec.network {
            Network::Open => "open",
            _ => "none",
        };
        let record = Record::from_spec("ex", &spec, network, user);
        let dir = self.store.create(&record)?;
        let check = records::create_private_dir(&dir.join("scratch"))
            .map_err(|e| PluginError::backend(format!("could not create a scratch dir: {e}")))
            .and_then(|_| host_path(&record, &record.workdir, &dir).map(|_| ()));
        if let Err(e) = check {
            let _ = self.teardown(&record.id);
            return Err(e);
        }
        Ok(SandboxInfo {
            id: record.id.into(),
            state: "idle".into(),
            labels: spec.labels,
        })
    }

    /// Contract: start a process in the sandbox and return as soon as it runs; output is
    /// read by `wait`. `spec.env` is added to the sandbox's environment for this process
    /// only; `spec.workdir` replaces the sandbox's; `spec.stdin` is written, then closed.
    fn spawn(
        &self,
        sandbox: &str,
        spec: ProcessSpec,
    ) -> Result<Box<dyn ProcessPlugin>, PluginError> {
        if spec.argv.is_empty() {
            return Err(PluginError::invalid_input("no program given to run"));
        }
        let record = self.store.record(sandbox)?;
        let argv: Vec<String> = spec.argv.iter().map(|a| a.to_string()).collect();
        let extra: Vec<(String, String)> = spec
            .env
            .iter()
            .map(|v| (v.name.to_string(), v.value.to_string()))
            .collect();
        let env = merged_env(&record.env, &extra);
        let workdir = match &spec.workdir {
            ROption::RSome(dir) => dir.to_string(),
            ROption::RNone => record.workdir.clone(),
        };
        let command = self.command(&record, &argv, &env, &workdir)?;
        let (process, shared) = process::start(
            command,
            spec.stdin.to_vec(),
            StatusEncoding::Direct,
            |mut c| c.spawn(),
        )
        .map_err(|e| {
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                stet_plugin_api::ErrorCode::NOT_FOUND
            } else {
                stet_plugin_api::ErrorCode::BACKEND
            };
            PluginError::new(code, format!("could not start {}: {e}", argv[0]))
        })?;
        self.processes.register(sandbox, &shared);
        let note = self.store.add_process(sandbox, process.pid())?;
        Ok(Box::new(process.with_note(note)))
    }

    /// Contract: stop and remove the sandbox and everything running in it. Calling it
    /// again, or for a sandbox that is already gone, succeeds.
    fn teardown(&self, sandbox: &str) -> Result<(), PluginError> {
        let Some(dir) = self.store.detach(sandbox)? else {
            return Ok(());
        };
        // Ours first (their handles know whether they were reaped), then whatever another
        // stet process started (checked by pid and start time).
        records::end_detached(&dir, self.processes.take(sandbox))
    }

    /// Contract: the sandboxes carrying every one of `labels` (never empty: the host
    /// always names at least `stet.managed`).
    /// Contract: as `create_sandbox`, with options. This template provides a first process
    /// (spawned at once) and refuses a forwarded socket: with no mounts of its own it has
    /// no sandbox path to put one at. Your runtime: mount the socket at its path.
    fn start(
        &self,
        spec: SandboxSpec,
        options: Vec<stet_plugin_api::SandboxOption>,
    ) -> Result<(SandboxInfo, Option<Box<dyn ProcessPlugin>>), PluginError> {
        stet_plugin_api::start_by_spawning(
            self,
            spec,
            options,
            stet_plugin_api::SocketForwarding::Refuse,
        )
    }

    fn list_sandboxes(&self, labels: &[Label]) -> Result<Vec<SandboxInfo>, PluginError> {
        self.store.sandboxes(labels)
    }

    /// Contract (since API 1.1): whether `image` is present, and if not how to get it.
    fn image_status(&self, image: &str) -> Result<ImageStatus, PluginError> {
        Ok(if image == HOST_IMAGE {
            ImageStatus {
                present: true,
                remedy: "".into(),
            }
        } else {
            ImageStatus {
                present: false,
                remedy: format!(
                    "runtime {NAME} runs on the host and knows one image, `{HOST_IMAGE}`: pass --image {HOST_IMAGE}"
                )
                .into(),
            }
        })
    }

    // `spawn_terminal` (since API 1.2) keeps its default: UNSUPPORTED. A runtime that can
    // give a process a pseudo-terminal implements it for `stet profile login`.
}

// The library's root module: what stet looks up when it loads the library. `name` and
// `version` must equal plugin.toml's.
export_plugin!(
    runtime,
    name = NAME,
    version = env!("CARGO_PKG_VERSION"),
    new = ExampleRuntime::from_config
);

#[cfg(test)]
mod tests {
    use super::*;
    use records::MountRecord;

    #[test]
    fn settings_are_checked() {
        assert!(ExampleRuntime::from_config("{}").is_ok());
        let err = ExampleRuntime::from_config(r#"{"stat_dir": "/x"}"#)
            .err()
            .unwrap();
        assert!(err.message.contains("unknown field"), "{}", err.message);
    }

    #[test]
    fn it_is_never_available_without_the_acknowledgement() {
        let state = tempfile::tempdir().unwrap();
        let config = |ack: bool| {
            serde_json::json!({ "state_dir": state.path(), "no_isolation": ack }).to_string()
        };
        let refused = ExampleRuntime::from_config(&config(false))
            .unwrap()
            .probe()
            .unwrap();
        assert!(!refused.available);
        assert!(
            refused.remedy.contains("no_isolation = true"),
            "{}",
            refused.remedy
        );
        let allowed = ExampleRuntime::from_config(&config(true))
            .unwrap()
            .probe()
            .unwrap();
        assert!(allowed.available);
    }

    #[test]
    fn paths_inside_a_mount_map_to_its_source() {
        let record = Record {
            id: "ex-1".into(),
            image: HOST_IMAGE.into(),
            mounts: vec![MountRecord {
                source: "/".into(),
                target: "/lane".into(),
                writable: true,
            }],
            env: vec![],
            workdir: "/lane/tmp".into(),
            network: "none".into(),
            user: (0, 0),
            labels: vec![],
            created: 0,
        };
        let dir = Path::new("/nowhere");
        assert_eq!(
            host_path(&record, "/lane/tmp", dir).unwrap(),
            Path::new("/tmp")
        );
        assert_eq!(host_path(&record, "/usr", dir).unwrap(), Path::new("/usr"));
        assert!(host_path(&record, "/lane/no/such/dir", dir).is_err());
    }
}
