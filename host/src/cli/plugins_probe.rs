//! `stet plugins probe`: load and probe plugins in isolated children, then show the
//! selection `stet drive` would make.

use serde::Serialize;
use stet_plugin_api::PluginKind;

use super::error::{CliError, Exit};
use crate::plugins::discovery::{self, Found};
use crate::plugins::loader::Identity;
use crate::plugins::probe::{Probe, ProbeFailure, Probed};
use crate::plugins::selection::{self, Selection};
use crate::plugins::survey::{self, not_probed_reason, Survey};
use crate::plugins::version::host_api;
use crate::printer::Printer;
use crate::settings::Settings;

use super::ProbeArgs;

#[derive(Serialize)]
struct Report {
    host_api: String,
    probe_timeout_ms: u64,
    plugins: Vec<PluginReport>,
    selection: Option<Selections>,
}

#[derive(Serialize)]
struct Selections {
    runtime: Selection,
    harness: Selection,
}

#[derive(Serialize)]
struct PluginReport {
    name: String,
    kind: Option<&'static str>,
    /// The plugin's own version, from its manifest.
    version: Option<String>,
    /// The sha256 of its library, as it is on disk now.
    library_sha256: Option<String>,
    dir: String,
    /// available, unavailable, failed, or not-probed.
    status: &'static str,
    identity: Option<Identity>,
    interface: Option<String>,
    probe: Option<Probe>,
    failure: Option<ProbeFailure>,
    /// Why a plugin was not probed (its listing status and detail).
    not_probed: Option<String>,
    elapsed_ms: Option<u64>,
    /// For an available harness: the walled profile a drive would run on, and whether it
    /// holds a login (by state alone), as the harness reads that profile.
    #[serde(skip_serializing_if = "Option::is_none")]
    walled_profile: Option<WalledProfile>,
}

#[derive(Serialize)]
struct WalledProfile {
    /// The profile's directory, when there is one.
    dir: Option<String>,
    /// Whether it holds a login.
    logged_in: Option<bool>,
    /// What the person sees.
    said: String,
}

/// The walled profile of an available harness, as the harness itself reads it.
fn walled_profile(settings: &Settings, probed: &Probed) -> WalledProfile {
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

pub fn run(settings: &Settings, args: &ProbeArgs, printer: Printer) -> Result<Exit, CliError> {
    let host = host_api();
    if !args.names.is_empty() {
        let found = discovery::discover(&settings.plugins.search_path, &host);
        for name in &args.names {
            if !found.iter().any(|f| &f.display_name() == name) {
                let installed: Vec<String> = found.iter().map(Found::display_name).collect();
                return Err(CliError::usage(format!("no plugin named {name} is installed"))
                    .hint(if installed.is_empty() {
                        "no plugins were found at all: see `stet plugins list` for where stet looked".to_string()
                    } else {
                        format!("installed: {}", installed.join(", "))
                    }));
            }
        }
    }

    let names = &args.names;
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

    let selections = args.names.is_empty().then(|| Selections {
        runtime: selection::select(PluginKind::Runtime, &candidates, &settings.runtime),
        harness: selection::select(PluginKind::Harness, &candidates, &settings.harness),
    });

    let exit = match &selections {
        Some(s) if s.runtime.chosen.is_some() && s.harness.chosen.is_some() => Exit::Success,
        Some(_) => Exit::Unusable,
        None if probed.len() == found.len() && probed.iter().all(|p| p.available().is_some()) => {
            Exit::Success
        }
        None => Exit::Unusable,
    };

    let reports: Vec<PluginReport> = found
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
    if args.json {
        printer.json(&Report {
            host_api: host.to_string(),
            probe_timeout_ms: settings.plugins.probe_timeout.as_millis() as u64,
            plugins: reports,
            selection: selections,
        });
        return Ok(exit);
    }

    if reports.is_empty() {
        return Err(discovery::none_found(&settings.plugins.search_path).into());
    }
    let name_width = reports.iter().map(|r| r.name.len()).max().unwrap_or(0);
    for report in &reports {
        print_plugin(&printer, report, name_width);
    }
    if let Some(s) = &selections {
        printer.out("");
        for selection in [&s.runtime, &s.harness] {
            for line in selection.lines() {
                printer.out(&line);
            }
        }
        for selection in [&s.runtime, &s.harness] {
            if selection.chosen.is_none() {
                for passed in &selection.unavailable {
                    if !passed.remedy.is_empty() {
                        printer.out(&format!("hint: to use {}: {}", passed.name, passed.remedy));
                    }
                }
            }
        }
    }
    Ok(exit)
}

fn plugin_report(f: &Found, probed: &[Probed], host: &semver::Version) -> PluginReport {
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

fn print_plugin(printer: &Printer, report: &PluginReport, name_width: usize) {
    let kind = report.kind.unwrap_or("-");
    let head = format!(
        "{:<name_width$}  {:<8} {:<12}",
        report.name, kind, report.status
    );
    let timing = report
        .elapsed_ms
        .map(|ms| format!("  ({ms} ms)"))
        .unwrap_or_default();
    match (&report.probe, &report.failure, &report.not_probed) {
        (Some(p), _, _) if p.available => {
            let version = if p.backend_version.is_empty() {
                "version unknown"
            } else {
                &p.backend_version
            };
            printer.out(&format!(
                "{head} {version}, priority {}{timing}",
                p.priority
            ));
            for fact in &p.facts {
                printer.out(&format!("    {}: {}", fact.key, fact.value));
            }
            if let Some(profile) = &report.walled_profile {
                printer.out(&format!("    login: {}", profile.said));
            }
            if !p.capabilities.is_empty() {
                printer.out(&format!("    capabilities: {}", p.capabilities.join(", ")));
            }
        }
        (Some(p), _, _) => {
            printer.out(&format!("{head} {}{timing}", p.reason));
            for fact in &p.facts {
                printer.out(&format!("    {}: {}", fact.key, fact.value));
            }
            if !p.remedy.is_empty() {
                printer.out(&format!("    hint: {}", p.remedy));
            }
        }
        (None, Some(failure), _) => {
            printer.out(&format!("{head} {}{timing}", failure.summary()));
            printer.out(&format!("    hint: {}", failure.hint()));
            if let Some(detail) = failure.detail() {
                printer.detail(&format!("--- {}: details ---\n{detail}", report.name));
            }
        }
        (None, None, reason) => {
            printer.out(&format!("{head} {}", reason.as_deref().unwrap_or("")));
        }
    }
}
