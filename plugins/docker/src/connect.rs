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

/// How long one request may take, as bollard's default.
const REQUEST_TIMEOUT_SECS: u64 = 120;

/// Connects to `address` and settles the API version with the engine (an engine older
/// than bollard's default API refuses requests made with the newer version).
pub async fn connect(address: &str) -> Result<Docker, String> {
    if let Some(socket) = address.strip_prefix("unix://") {
        if let Ok(Some((major, minor))) =
            tokio::time::timeout(ENGINE_TIMEOUT, pinged_api_version(socket)).await
        {
            let default = bollard::API_DEFAULT_VERSION;
            let version = if (major, minor) < (default.major_version, default.minor_version) {
                bollard::ClientVersion {
                    major_version: major,
                    minor_version: minor,
                }
            } else {
                *default
            };
            // Bollard's own request timeout (a removal of a large sandbox takes long); the
            // short one is for the engine answering at all.
            return Docker::connect_with_unix(address, REQUEST_TIMEOUT_SECS, &version)
                .map_err(|e| e.to_string());
        }
    }
    // Any other engine, or one whose ping did not say: bollard's own negotiation.
    let docker = Docker::connect_with_host(address).map_err(|e| e.to_string())?;
    tokio::time::timeout(ENGINE_TIMEOUT, docker.negotiate_version())
        .await
        .map_err(|_| format!("no answer within {} s", ENGINE_TIMEOUT.as_secs()))?
        .map_err(|e| e.to_string())
}

/// The API version of the engine at a unix socket, from the `Api-Version` header of its
/// answer to `HEAD /_ping`, as docker's own CLI negotiates. (`GET /version`, which
/// bollard's negotiation asks, gathers every component's version and costs this engine
/// 7–11 ms to the ping's 0.6 — every stet process pays it once.) None when the engine
/// does not say, or says something else than `MAJOR.MINOR`.
async fn pinged_api_version(socket: &str) -> Option<(usize, usize)> {
    let stream = tokio::net::UnixStream::connect(socket).await.ok()?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .ok()?;
    // The connection is driven on the runtime until the answer is in and `sender` is gone.
    tokio::spawn(connection);
    let request = hyper::Request::head("/_ping")
        .header(hyper::header::HOST, "docker")
        .body(http_body_util::Empty::<&'static [u8]>::new())
        .ok()?;
    let answer = sender.send_request(request).await.ok()?;
    let version = answer.headers().get("api-version")?.to_str().ok()?;
    let (major, minor) = version.trim().split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
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
        // A container shares the kernel of the host the engine runs on (this machine, or
        // the VM or remote machine the endpoint leads to): no `own-kernel` capability.
        .with_fact(
            stet_plugin_api::fact::ISOLATION,
            "container: namespaces and cgroups on the host's kernel",
        )
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the engine the tests run with: the ping's header says the API version the
    /// engine's own `/version` reports, and a connection made with it is answered.
    #[test]
    fn the_pinged_api_version_is_the_one_the_engine_reports() {
        let socket = well_known_sockets()
            .into_iter()
            .find(|s| s.exists())
            .expect("a running engine (the tests need one)");
        let socket = socket.display().to_string();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let (major, minor) = pinged_api_version(&socket).await.expect("a ping answer");
            let docker = connect(&format!("unix://{socket}")).await.unwrap();
            let reported = docker.version().await.unwrap().api_version.unwrap();
            assert_eq!(format!("{major}.{minor}"), reported);
        });
    }
}
