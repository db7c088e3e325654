//! stet's Docker runtime: Docker Engine, and engines that speak its API (Podman, Colima,
//! rootless Docker, remote engines), driven through bollard.
//!
//! bollard is async; this library owns a private tokio runtime and blocks on it inside each
//! call, so nothing async crosses the plugin boundary (the host calls us from its own
//! threads). This cut implements the probe; sandbox operations answer
//! `unsupported` until the runtime contract lands.

use std::path::PathBuf;
use std::time::Duration;

use bollard::Docker;
use serde::Deserialize;
use stet_plugin_api::{
    export_plugin, Label, PluginError, ProbeReport, ProcessPlugin, ProcessSpec, RuntimePlugin,
    SandboxInfo, SandboxSpec,
};

/// How long one engine may take to answer a ping or a version request.
const ENGINE_TIMEOUT: Duration = Duration::from_secs(5);

/// Docker runs everywhere Docker runs; a native backend may report a higher priority.
const PRIORITY: i32 = 50;

/// The plugin's settings, from `[plugins.docker]` in stet's configuration.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// An engine address (`unix:///path`, `tcp://host:port`); overrides `DOCKER_HOST`.
    host: Option<String>,
}

/// The Docker runtime.
pub struct DockerRuntime {
    config: Config,
    tokio: tokio::runtime::Runtime,
}

impl DockerRuntime {
    /// Builds the runtime from its JSON settings.
    pub fn from_config(config: &str) -> Result<Self, PluginError> {
        let config: Config = serde_json::from_str(config).map_err(|e| {
            PluginError::invalid_input(format!("bad [plugins.docker] settings: {e}")).with_remedy(
                "the only key is `host`, an engine address such as unix:///var/run/docker.sock",
            )
        })?;
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| {
                PluginError::internal(format!("could not start the plugin's async runtime: {e}"))
            })?;
        Ok(DockerRuntime { config, tokio })
    }

    /// The engine addresses to try, in order, each with where it came from.
    fn candidates(&self) -> Vec<(String, &'static str)> {
        if let Some(host) = &self.config.host {
            return vec![(host.clone(), "[plugins.docker] host")];
        }
        if let Ok(host) = std::env::var("DOCKER_HOST") {
            if !host.is_empty() {
                return vec![(host, "DOCKER_HOST")];
            }
        }
        well_known_sockets()
            .into_iter()
            .map(|path| (format!("unix://{}", path.display()), "well-known socket"))
            .collect()
    }

    async fn ask(address: &str) -> Result<(String, ProbeReport), String> {
        let docker = Docker::connect_with_host(address).map_err(|e| e.to_string())?;
        let docker = tokio::time::timeout(ENGINE_TIMEOUT, docker.negotiate_version())
            .await
            .map_err(|_| format!("no answer within {} s", ENGINE_TIMEOUT.as_secs()))?
            .map_err(|e| e.to_string())?;
        let version = tokio::time::timeout(ENGINE_TIMEOUT, docker.version())
            .await
            .map_err(|_| format!("no answer within {} s", ENGINE_TIMEOUT.as_secs()))?
            .map_err(|e| e.to_string())?;
        let product = version
            .platform
            .as_ref()
            .map(|p| p.name.clone())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "Docker Engine".to_string());
        let engine_version = version.version.clone().unwrap_or_else(|| "unknown".into());
        let report = ProbeReport::available(format!("{product} {engine_version}"), PRIORITY)
            .with_fact("endpoint", address)
            .with_fact(
                "api-version",
                version.api_version.clone().unwrap_or_default(),
            )
            .with_fact(
                "os/arch",
                format!(
                    "{}/{}",
                    version.os.clone().unwrap_or_default(),
                    version.arch.clone().unwrap_or_default()
                ),
            );
        Ok((address.to_string(), report))
    }
}

/// Where engines usually listen when `DOCKER_HOST` is not set: the system socket, Docker
/// Desktop, Colima, rootless Docker and Podman. Only sockets that exist are tried.
fn well_known_sockets() -> Vec<PathBuf> {
    let mut paths = vec![PathBuf::from("/var/run/docker.sock")];
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
        paths.push(home.join(".docker/run/docker.sock"));
        paths.push(home.join(".colima/default/docker.sock"));
        paths.push(home.join(".local/share/containers/podman/machine/podman.sock"));
    }
    if let Some(runtime_dir) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        paths.push(runtime_dir.join("docker.sock"));
        paths.push(runtime_dir.join("podman/podman.sock"));
    }
    paths.push(PathBuf::from("/run/podman/podman.sock"));
    paths
}

impl RuntimePlugin for DockerRuntime {
    fn probe(&self) -> Result<ProbeReport, PluginError> {
        let candidates = self.candidates();
        let mut tried = Vec::new();
        for (address, source) in &candidates {
            if let Some(path) = address.strip_prefix("unix://") {
                if source == &"well-known socket" && !std::path::Path::new(path).exists() {
                    tried.push(format!("{path} (absent)"));
                    continue;
                }
            }
            match self.tokio.block_on(Self::ask(address)) {
                Ok((_, report)) => return Ok(report.with_fact("found-by", *source)),
                Err(why) => tried.push(format!("{address} ({source}): {why}")),
            }
        }
        Ok(ProbeReport::unavailable(
            format!("no Docker engine answered; tried {}", tried.join("; ")),
            "start the engine (dockerd, Docker Desktop, `colima start`, `podman system service`) \
             or point DOCKER_HOST at it",
        ))
    }

    fn create_sandbox(&self, _spec: SandboxSpec) -> Result<SandboxInfo, PluginError> {
        Err(not_yet("create_sandbox"))
    }

    fn spawn(
        &self,
        _sandbox: &str,
        _spec: ProcessSpec,
    ) -> Result<Box<dyn ProcessPlugin>, PluginError> {
        Err(not_yet("spawn"))
    }

    fn teardown(&self, _sandbox: &str) -> Result<(), PluginError> {
        Err(not_yet("teardown"))
    }

    fn list_sandboxes(&self, _labels: &[Label]) -> Result<Vec<SandboxInfo>, PluginError> {
        Err(not_yet("list_sandboxes"))
    }
}

fn not_yet(operation: &str) -> PluginError {
    PluginError::unsupported(format!(
        "the docker plugin {} does not implement {operation} yet",
        env!("CARGO_PKG_VERSION")
    ))
    .with_remedy("install a newer docker plugin")
}

export_plugin!(
    runtime,
    name = "docker",
    version = env!("CARGO_PKG_VERSION"),
    new = DockerRuntime::from_config
);
