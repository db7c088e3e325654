//! One survey of installed plugins: discover, probe the loadable ones in isolation, and
//! count the ones refused from their manifests as unavailable backends of their kind.
//! `stet plugins probe`, `stet run` and `stet gc` all start here.

use super::discovery::{self, Found, Status};
use super::probe::{self, ProbeFailure, ProbeRequest, Probed};
use super::version::host_api;
use crate::settings::Settings;

/// What a survey found.
pub struct Survey {
    /// Every plugin directory on the search path, in search order.
    pub found: Vec<Found>,
    /// Probe results of the plugins that could be loaded.
    pub probed: Vec<Probed>,
    /// `probed` plus the plugins refused from their manifests (not shadowed ones), as the
    /// candidates selection reports on.
    pub candidates: Vec<Probed>,
}

/// Discovers plugins and probes those `wanted` accepts (by manifest), each in its own
/// child process under the configured time limit.
pub fn survey(settings: &Settings, wanted: impl Fn(&Found) -> bool) -> Survey {
    let host = host_api();
    let found: Vec<Found> = discovery::discover(&settings.search_path, &host)
        .into_iter()
        .filter(|f| wanted(f))
        .collect();
    let requests: Vec<ProbeRequest> = found
        .iter()
        .filter_map(Found::usable)
        .map(|manifest| ProbeRequest {
            manifest: manifest.clone(),
            config_json: settings.plugin_config_json(&manifest.name),
        })
        .collect();
    let probed = probe::probe_all(requests, &probe::current_stet(), settings.probe_timeout);
    let mut candidates = probed.clone();
    for f in &found {
        if let (Some(manifest), None) = (&f.manifest, f.usable()) {
            if !matches!(f.status, Status::ShadowedBy(_)) {
                candidates.push(Probed {
                    manifest: manifest.clone(),
                    identity: None,
                    interface: None,
                    result: Err(ProbeFailure::Refused {
                        message: not_probed_reason(f, &host),
                    }),
                    elapsed: Default::default(),
                });
            }
        }
    }
    Survey {
        found,
        probed,
        candidates,
    }
}

/// Why a plugin was not probed, from its listing status.
pub fn not_probed_reason(f: &Found, host: &semver::Version) -> String {
    let m = f.manifest.as_ref();
    match &f.status {
        Status::Ok => "not probed".to_string(),
        Status::ManifestError(e) => format!("manifest error: {e}"),
        Status::WrongPlatform => format!(
            "built for {}, not {}",
            m.map(|m| m.platforms.join(", ")).unwrap_or_default(),
            std::env::consts::OS
        ),
        Status::IncompatibleApi => format!(
            "plugin {} was built for plugin API {}; this stet speaks plugin API {host}",
            f.display_name(),
            m.map(|m| m.api.to_string()).unwrap_or_default()
        ),
        Status::LibraryMissing => format!(
            "library {} is missing",
            m.map(|m| m.library.display().to_string())
                .unwrap_or_default()
        ),
        Status::ShadowedBy(winner) => format!("shadowed by {}", winner.display()),
    }
}
