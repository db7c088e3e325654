//! What `stet plugins probe` reports and `stet board`'s walls page shows: every plugin
//! found, each probed in an isolated child process ([`survey`]), with its version, kind and
//! whether it is available or why not, and the selection a drive would make of a runtime
//! and a harness, with its reasons.

use serde::Serialize;
use stet_plugin_api::PluginKind;

use crate::plugins::discovery::{self, Found};
use crate::plugins::loader::Identity;
use crate::plugins::probe::{Probe, ProbeFailure, Probed};
use crate::plugins::selection::{self, Selection};
use crate::plugins::survey::{self, not_probed_reason, Survey};
use crate::plugins::version::host_api;
use crate::settings::Settings;

#[derive(Serialize)]
pub struct Report {
    pub host_api: String,
    pub probe_timeout_ms: u64,
    pub plugins: Vec<PluginReport>,
    pub selection: Option<Selections>,
}

#[derive(Serialize)]
pub struct Selections {
    pub runtime: Selection,
    pub harness: Selection,
}

#[derive(Serialize)]
pub struct PluginReport {
    pub name: String,
    pub kind: Option<&'static str>,
    /// The plugin's own version, from its manifest.
    pub version: Option<String>,
    /// The sha256 of its library, as it is on disk now.
    library_sha256: Option<String>,
    pub dir: String,
    /// available, unavailable, failed, or not-probed.
    pub status: &'static str,
    pub identity: Option<Identity>,
    pub interface: Option<String>,
    pub probe: Option<Probe>,
    pub failure: Option<ProbeFailure>,
    /// Why a plugin was not probed (its listing status and detail).
    pub not_probed: Option<String>,
    pub elapsed_ms: Option<u64>,
    /// For an available harness: the walled profile a drive would run on, and whether it
    /// holds a login (by state alone), as the harness reads that profile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub walled_profile: Option<WalledProfile>,
}

#[derive(Serialize)]
pub struct WalledProfile {
    /// The profile's directory, when there is one.
    pub dir: Option<String>,
    /// Whether it holds a login.
    pub logged_in: Option<bool>,
    /// What the person sees.
    pub said: String,
}

/// The walled profile of an available harness, as the harness itself reads it.
pub fn walled_profile(settings: &Settings, probed: &Probed) -> WalledProfile {
    let opened = crate::harness::open_probed(settings, probed, Default::default());
    match opened.and_then(|h| h.profile_if_any()) {
        Ok(Some(profile)) => WalledProfile {
            said: format!(
                "{} in the walled profile {}",
                if profile.logged_in {
                    "logged in"
                } else {
                    "no login (stet profile login)"
                },
                profile.dir
            ),
            dir: Some(profile.dir.to_string()),
            logged_in: Some(profile.logged_in),
        },
        Ok(None) => WalledProfile {
            dir: None,
            logged_in: None,
            said: "no walled profile yet (stet profile login makes it)".to_string(),
        },
        Err(e) => WalledProfile {
            dir: None,
            logged_in: None,
            said: format!("unknown: {}", e.message),
        },
    }
}

pub fn plugin_report(f: &Found, probed: &[Probed], host: &semver::Version) -> PluginReport {
    let result = f
        .usable()
        .and_then(|m| probed.iter().find(|p| p.manifest.path == m.path));
    let (status, probe, failure) = match result.map(|p| &p.result) {
        None => ("not-probed", None, None),
        Some(Ok(p)) if p.available => ("available", Some(p.clone()), None),
        Some(Ok(p)) => ("unavailable", Some(p.clone()), None),
        Some(Err(e)) => ("failed", None, Some(e.clone())),
    };
    PluginReport {
        name: f.display_name(),
        kind: f.manifest.as_ref().map(|m| m.kind.as_str()),
        version: f.manifest.as_ref().map(|m| m.version.to_string()),
        library_sha256: f
            .manifest
            .as_ref()
            .filter(|m| m.library.is_file())
            .and_then(|m| crate::plugins::trust::sha256_cached(&m.library).ok()),
        dir: f.dir.display().to_string(),
        status,
        identity: result.and_then(|p| p.identity.clone()),
        interface: result.and_then(|p| p.interface.clone()),
        probe,
        failure,
        not_probed: result.is_none().then(|| not_probed_reason(f, host)),
        elapsed_ms: result.map(|p| p.elapsed.as_millis() as u64),
        walled_profile: None,
    }
}

/// Probes every plugin found (or, when `names` is not empty, those named), each plugin's
/// settings table checked first, and — for a survey of every plugin — selects a runtime
/// and a harness as a drive would. Blocking: each probe is a child process, bounded by the
/// probe timeout.
pub fn survey(settings: &Settings, names: &[String]) -> Result<Report, crate::error::Error> {
    let host = host_api();
    for found in discovery::discover(&settings.plugins.search_path, &host) {
        if let Some(manifest) = found
            .usable()
            .filter(|_| names.is_empty() || names.contains(&found.display_name()))
        {
            settings.plugins.check(manifest)?;
        }
    }
    let Survey {
        found,
        probed,
        candidates,
    } = survey::survey(&settings.plugins, |f| {
        names.is_empty() || names.contains(&f.display_name())
    });
    let selection = names.is_empty().then(|| Selections {
        runtime: selection::select(PluginKind::Runtime, &candidates, &settings.runtime),
        harness: selection::select(PluginKind::Harness, &candidates, &settings.harness),
    });
    let plugins = found
        .iter()
        .map(|f| {
            let mut report = plugin_report(f, &probed, &host);
            let harness = probed.iter().find(|p| {
                p.manifest.kind == PluginKind::Harness
                    && Some(&p.manifest.path) == f.manifest.as_ref().map(|m| &m.path)
                    && p.available().is_some()
            });
            report.walled_profile = harness.map(|p| walled_profile(settings, p));
            report
        })
        .collect();
    Ok(Report {
        host_api: host.to_string(),
        probe_timeout_ms: settings.plugins.probe_timeout.as_millis() as u64,
        plugins,
        selection,
    })
}

impl Report {
    /// Whether a drive could start on what was probed: a runtime and a harness selected
    /// (for a survey of every plugin), or every plugin named available.
    pub fn usable(&self) -> bool {
        match &self.selection {
            Some(s) => s.runtime.chosen.is_some() && s.harness.chosen.is_some(),
            None => self.plugins.iter().all(|p| p.status == "available"),
        }
    }
}
