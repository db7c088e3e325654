//! Finding and connecting to an engine.

use std::path::PathBuf;
use std::time::Duration;

use bollard::Docker;
use stet_plugin_api::ProbeReport;

/// How long one engine may take to answer a ping or a version request.
pub const ENGINE_TIMEOUT: Duration = Duration::from_secs(5);

/// Docker runs everywhere Docker runs; a native backend may report a higher priority.
pub const PRIORITY: i32 = 50;

/// An engine address and where it came from.
pub struct Candidate {
    pub address: String,
    pub source: &'static str,
}

/// The engine addresses to try, in order: the configured one, else `DOCKER_HOST`, else the
/// usual local sockets that exist (system, Docker Desktop, Colima, rootless, Podman).
pub fn candidates(configured: Option<&str>) -> Vec<Candidate> {
    if let Some(host) = configured {
        return vec![Candidate {
            address: host.to_string(),
            source: "[plugins.docker] host",
        }];
    }
    if let Ok(host) = std::env::var("DOCKER_HOST") {
        if !host.is_empty() {
            return vec![Candidate {
                address: host,
                source: "DOCKER_HOST",
            }];
        }
    }
    well_known_sockets()
        .into_iter()
        .map(|path| Candidate {
            address: format!("unix://{}", path.display()),
            source: "well-known socket",
        })
        .collect()
}

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

/// Connects to `address` and settles the API version with the engine (an engine older
/// than bollard's default API refuses requests made with the newer version).
pub async fn connect(address: &str) -> Result<Docker, String> {
    let docker = Docker::connect_with_host(address).map_err(|e| e.to_string())?;
    tokio::time::timeout(ENGINE_TIMEOUT, docker.negotiate_version())
        .await
        .map_err(|_| format!("no answer within {} s", ENGINE_TIMEOUT.as_secs()))?
        .map_err(|e| e.to_string())
}

/// Asks a connected engine for the probe's facts.
pub async fn describe(docker: &Docker, address: &str) -> Result<ProbeReport, String> {
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
    let mut report = ProbeReport::available(format!("{product} {engine_version}"), PRIORITY)
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
    for capability in crate::CAPABILITIES {
        report = report.with_capability(*capability);
    }
    Ok(report)
}
