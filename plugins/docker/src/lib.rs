//! stet's Docker runtime: Docker Engine, and engines that speak its API (Podman, Colima,
//! rootless Docker, remote engines), driven through bollard.
//!
//! bollard is async; this library owns a private tokio runtime and blocks on it inside each
//! call, so nothing async crosses the plugin boundary (the host calls us from its own
//! threads, several at once).
//!
//! A sandbox is a container started from a local image with `sleep infinity` under
//! docker's init; processes are `docker exec`s into it. What this runtime guarantees:
//! only the listed mounts (read-only unless asked), the environment exactly as given
//! (plus what the engine itself sets: `HOSTNAME`, and `PATH`/`HOME` when not given), no
//! capabilities, no new privileges, no network unless asked, cpu/memory/pids limits, a
//! read-only root whose writable places (`/tmp`, `/var/tmp`, `/run`) are in memory within
//! the memory limit (the image's writable layer would be the host's disk, unbounded),
//! labels, and output streamed chunk by chunk as the engine delivers it.

use std::sync::{Arc, Mutex};

use bollard::Docker;
use serde::Deserialize;
use stet_plugin_api::{
    capability, export_plugin, ImageStatus, Label, LimitCounters, PluginError, ProbeReport,
    ProcessPlugin, ProcessSpec, RuntimePlugin, SandboxInfo, SandboxOption, SandboxSpec,
    TerminalPlugin, TerminalSize,
};

mod cgroup;
mod connect;
mod process;
mod sandbox;

/// What the probe reports this runtime can do.
pub const CAPABILITIES: &[&str] = &[
    capability::BIND_MOUNTS,
    capability::NETWORK_NONE,
    capability::NETWORK_OPEN,
    capability::LIMITS,
    capability::LABELS,
    capability::KILL,
    capability::RUN_AS_USER,
    capability::TERMINAL,
    capability::FORWARD_SOCKET,
    capability::FIRST_PROCESS,
];

/// The plugin's settings, from `[plugins.docker]` in stet's configuration.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// An engine address (`unix:///path`, `tcp://host:port`); overrides `DOCKER_HOST`.
    host: Option<String>,
    /// The Docker network a sandbox joins when it asks for the open network (default
    /// `bridge`). `host` shares the host's network namespace: tests use it to reach a
    /// fake service on loopback.
    open_network: Option<String>,
}

/// The Docker runtime.
pub struct DockerRuntime {
    config: Config,
    tokio: Arc<tokio::runtime::Runtime>,
    /// The engine, connected on first use and kept.
    engine: Mutex<Option<Docker>>,
}

impl DockerRuntime {
    /// Builds the runtime from its JSON settings.
    pub fn from_config(config: &str) -> Result<Self, PluginError> {
        let config: Config = serde_json::from_str(config).map_err(|e| {
            PluginError::invalid_input(format!("bad [plugins.docker] settings: {e}")).with_remedy(
                "the keys are `host` (an engine address such as unix:///var/run/docker.sock) and `open_network` (a Docker network name)",
            )
        })?;
        // Two workers: one thread may block in a process's output stream while another
        // kills it or creates the next sandbox.
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("stet-docker")
            .enable_all()
            .build()
            .map_err(|e| {
                PluginError::internal(format!("could not start the plugin's async runtime: {e}"))
            })?;
        Ok(DockerRuntime {
            config,
            tokio: Arc::new(tokio),
            engine: Mutex::new(None),
        })
    }

    /// The engine, connecting to the first candidate that answers.
    fn engine(&self) -> Result<Docker, PluginError> {
        let mut engine = self.engine.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(docker) = engine.as_ref() {
            return Ok(docker.clone());
        }
        let mut tried = Vec::new();
        for candidate in connect::candidates(self.config.host.as_deref()) {
            if skip_absent_socket(&candidate) {
                continue;
            }
            match self.tokio.block_on(connect::connect(&candidate.address)) {
                Ok(docker) => {
                    *engine = Some(docker.clone());
                    return Ok(docker);
                }
                Err(why) => tried.push(format!(
                    "{} ({}): {why}",
                    candidate.address, candidate.source
                )),
            }
        }
        Err(PluginError::unavailable(format!(
            "no Docker engine answered{}",
            if tried.is_empty() {
                String::new()
            } else {
                format!("; tried {}", tried.join("; "))
            }
        ))
        .with_remedy(ENGINE_REMEDY))
    }
}

const ENGINE_REMEDY: &str = "start the engine (dockerd, Docker Desktop, `colima start`, \
     `podman system service`) or point DOCKER_HOST at it";

fn skip_absent_socket(candidate: &connect::Candidate) -> bool {
    candidate.source == "well-known socket"
        && candidate
            .address
            .strip_prefix("unix://")
            .is_some_and(|path| !std::path::Path::new(path).exists())
}

impl RuntimePlugin for DockerRuntime {
    fn probe(&self) -> Result<ProbeReport, PluginError> {
        let mut tried = Vec::new();
        for candidate in connect::candidates(self.config.host.as_deref()) {
            if skip_absent_socket(&candidate) {
                tried.push(format!(
                    "{} (absent)",
                    candidate.address.trim_start_matches("unix://")
                ));
                continue;
            }
            let answer = self.tokio.block_on(async {
                let docker = connect::connect(&candidate.address).await?;
                connect::describe(&docker, &candidate.address).await
            });
            match answer {
                Ok(report) => return Ok(report.with_fact("found-by", candidate.source)),
                Err(why) => tried.push(format!(
                    "{} ({}): {why}",
                    candidate.address, candidate.source
                )),
            }
        }
        Ok(ProbeReport::unavailable(
            format!("no Docker engine answered; tried {}", tried.join("; ")),
            ENGINE_REMEDY,
        ))
    }

    fn create_sandbox(&self, spec: SandboxSpec) -> Result<SandboxInfo, PluginError> {
        let docker = self.engine()?;
        let open_network = self.config.open_network.as_deref().unwrap_or("bridge");
        self.tokio
            .block_on(sandbox::create(&docker, spec, open_network))
    }

    fn start(
        &self,
        spec: SandboxSpec,
        options: Vec<SandboxOption>,
    ) -> Result<(SandboxInfo, Option<Box<dyn ProcessPlugin>>), PluginError> {
        let docker = self.engine()?;
        let open_network = self.config.open_network.as_deref().unwrap_or("bridge");
        let (info, first) =
            self.tokio
                .block_on(sandbox::create_with(&docker, spec, open_network, options))?;
        let first = first.map(|f| {
            Box::new(process::DockerProcess::first(
                info.id.to_string(),
                f,
                docker,
                self.tokio.clone(),
            )) as Box<dyn ProcessPlugin>
        });
        Ok((info, first))
    }

    fn spawn(
        &self,
        sandbox: &str,
        spec: ProcessSpec,
    ) -> Result<Box<dyn ProcessPlugin>, PluginError> {
        let docker = self.engine()?;
        let process = self
            .tokio
            .block_on(process::start(&docker, sandbox, spec))?;
        Ok(Box::new(process::DockerProcess::new(
            process,
            docker,
            self.tokio.clone(),
        )))
    }

    fn spawn_terminal(
        &self,
        sandbox: &str,
        spec: ProcessSpec,
        size: TerminalSize,
    ) -> Result<Box<dyn TerminalPlugin>, PluginError> {
        let docker = self.engine()?;
        let (started, input) = self
            .tokio
            .block_on(process::start_terminal(&docker, sandbox, spec, size))?;
        Ok(Box::new(process::DockerTerminal::new(
            started,
            input,
            docker,
            self.tokio.clone(),
        )))
    }

    fn teardown(&self, sandbox: &str) -> Result<(), PluginError> {
        let docker = self.engine()?;
        self.tokio.block_on(sandbox::remove(&docker, sandbox))
    }

    fn stop(&self, sandbox: &str) -> Result<(), PluginError> {
        let docker = self.engine()?;
        self.tokio.block_on(sandbox::stop(&docker, sandbox))
    }

    fn limit_counters(&self, sandbox: &str) -> Result<Option<LimitCounters>, PluginError> {
        let docker = self.engine()?;
        let Some((id, pid)) = self.tokio.block_on(sandbox::init_of(&docker, sandbox)) else {
            return Ok(None);
        };
        Ok(cgroup::counters(&id, pid))
    }

    fn list_sandboxes(&self, labels: &[Label]) -> Result<Vec<SandboxInfo>, PluginError> {
        let docker = self.engine()?;
        self.tokio.block_on(sandbox::list(&docker, labels))
    }

    fn image_status(&self, image: &str) -> Result<ImageStatus, PluginError> {
        let docker = self.engine()?;
        self.tokio.block_on(sandbox::image_status(&docker, image))
    }
}

/// A bollard error's HTTP status, when the engine answered with one.
fn status_of(error: &bollard::errors::Error) -> Option<u16> {
    match error {
        bollard::errors::Error::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// The engine's message for an error, without bollard's wrapping.
fn message_of(error: &bollard::errors::Error) -> String {
    match error {
        bollard::errors::Error::DockerResponseServerError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

export_plugin!(
    runtime,
    name = "docker",
    version = env!("CARGO_PKG_VERSION"),
    new = DockerRuntime::from_config
);
