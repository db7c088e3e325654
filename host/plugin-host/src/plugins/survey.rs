//! One survey of installed plugins: discover, probe the loadable ones in isolation, and
//! count the ones refused from their manifests as unavailable backends of their kind.
//! `stet plugins probe`, `stet run` and `stet gc` all start here.

use stet_plugin_api::PluginKind;

use super::discovery::{self, Found, Status};
use super::loader::{self, Instance};
use super::probe::{self, ProbeFailure, ProbeRequest, Probed};
use super::selection::{self, Preference, Selection};
use super::version::host_api;
use super::PluginSettings;
use crate::error::{plugin_error, Concept, Error};

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
pub fn survey(settings: &PluginSettings, wanted: impl Fn(&Found) -> bool) -> Survey {
    let found: Vec<Found> = discovery::discover(&settings.search_path, &host_api())
        .into_iter()
        .filter(|f| wanted(f))
        .collect();
    survey_of(settings, found, probe::Reuse::Never)
}

/// Probes the loadable plugins of `found` at once; the others are candidates refused by
/// their manifests (a plugin built for another platform is never probed).
fn survey_of(settings: &PluginSettings, found: Vec<Found>, reuse: probe::Reuse) -> Survey {
    let host = host_api();
    let requests: Vec<ProbeRequest> = found
        .iter()
        .filter_map(Found::usable)
        .map(|manifest| ProbeRequest {
            manifest: manifest.clone(),
            config_json: settings.config_json(&manifest.name),
        })
        .collect();
    let probed = probe::probe_all_with(
        requests,
        &probe::current_stet(),
        settings.probe_timeout,
        reuse,
    );
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
                    reused: None,
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

/// Surveys the plugins of `kind` and selects one as SPEC §3 says; "nothing usable" is an
/// error naming every candidate's reason and remedy.
pub fn choose(
    settings: &PluginSettings,
    kind: PluginKind,
    preference: &Preference,
) -> Result<(Probed, Selection), Error> {
    choose_each(settings, &[(kind, preference)])
        .pop()
        .expect("one answer per kind asked")
}

/// One survey for every kind a command needs (a drive's harness and runtime are probed
/// together, in parallel), then a selection per kind, in the order asked. Only what can
/// be chosen is probed: with an explicit choice (`--runtime docker`), that plugin alone;
/// an explicit name no plugin of that kind has is refused at once, with the closest
/// installed name.
pub fn choose_each(
    settings: &PluginSettings,
    asks: &[(PluginKind, &Preference)],
) -> Vec<Result<(Probed, Selection), Error>> {
    let all = discovery::discover(&settings.search_path, &host_api());
    if all.is_empty() {
        return asks
            .iter()
            .map(|_| Err(discovery::none_found(&settings.search_path)))
            .collect();
    }
    let wanted = |f: &Found| {
        f.manifest.as_ref().is_some_and(|m| {
            asks.iter().any(|(kind, preference)| {
                m.kind == *kind
                    && preference
                        .explicit
                        .as_ref()
                        .is_none_or(|(name, _)| *name == m.name)
            })
        })
    };
    // A plugin's table is checked against the settings its manifest declares before the
    // plugin is handed it (to probe or to build).
    for manifest in all.iter().filter(|f| wanted(f)).filter_map(Found::usable) {
        if let Err(e) = settings.check(manifest) {
            return asks.iter().map(|_| Err(e.clone())).collect();
        }
    }
    // Selecting a plugin to use it: a fresh answer of the same library may stand in for a
    // probe (`probe::cache`).
    let survey = survey_of(
        settings,
        all.iter().filter(|f| wanted(f)).cloned().collect(),
        probe::Reuse::Fresh,
    );
    asks.iter()
        .map(|(kind, preference)| {
            if let Some((name, source)) = &preference.explicit {
                let installed: Vec<&str> = all
                    .iter()
                    .filter_map(|f| f.manifest.as_ref())
                    .filter(|m| m.kind == *kind)
                    .map(|m| m.name.as_str())
                    .collect();
                if !installed.contains(&name.as_str()) {
                    return Err(no_such_plugin(*kind, name, source, &installed));
                }
            }
            select_from(&survey, *kind, preference, &settings.untrusted_tables)
        })
        .collect()
}

/// A name that no installed plugin of `kind` has: the closest installed name, if one is
/// close, is the hint.
fn no_such_plugin(kind: PluginKind, name: &str, source: &str, installed: &[&str]) -> Error {
    let listed = if installed.is_empty() {
        "none is installed".to_string()
    } else {
        format!("installed: {}", installed.join(", "))
    };
    let error = Concept::Plugins.usage(format!(
        "{source} asks for {name}, but no {} plugin named {name} is installed ({listed})",
        kind.as_str()
    ));
    let closest = installed
        .iter()
        .map(|candidate| (strsim::jaro_winkler(name, candidate), *candidate))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match closest {
        Some((_, candidate)) => error.hint(format!("did you mean {candidate}?")),
        None => error.hint(format!(
            "stet plugins list shows the installed plugins; install a {} named {name} or choose another",
            kind.as_str()
        )),
    }
}

fn select_from(
    survey: &Survey,
    kind: PluginKind,
    preference: &Preference,
    untrusted_tables: &std::collections::BTreeMap<String, std::path::PathBuf>,
) -> Result<(Probed, Selection), Error> {
    let mut selection = selection::select(kind, &survey.candidates, preference);
    // A plugin that is unusable while its table sits in an untrusted file: that is the
    // cause to name, not what the plugin says it lacks (it never saw the table).
    for passed in &mut selection.unavailable {
        if let Some(file) = untrusted_tables.get(&passed.name) {
            let said = passed.reason.clone();
            passed.reason = format!(
                "{said} — its [plugins.{}] in {} is not applied: that file is not trusted",
                passed.name,
                file.display()
            );
            // An explicit choice's summary quotes the plugin's reason: the cause goes there too.
            selection.reason = selection.reason.replace(&said, &passed.reason);
            passed.remedy = format!(
                "read {}, then run `stet trust` in the repository to apply it",
                file.display()
            );
        }
    }
    let Some(chosen) = selection.chosen.clone() else {
        let mut error = Concept::Plugins.unusable(format!("no usable {}", kind.as_str()));
        for line in selection.lines() {
            error = error.caused_by(line.trim().to_string());
        }
        let remedies: Vec<String> = selection
            .unavailable
            .iter()
            .filter(|p| !p.remedy.is_empty())
            .map(|p| format!("{}: {}", p.name, p.remedy))
            .collect();
        return Err(error.hint(if remedies.is_empty() {
            format!(
                "install a {} plugin (see `stet plugins list` for where stet looks)",
                kind.as_str()
            )
        } else {
            remedies.join("; ")
        }));
    };
    let probed = survey
        .probed
        .iter()
        .find(|p| p.manifest.name == chosen && p.manifest.kind == kind)
        .cloned()
        .expect("a chosen plugin was probed");
    if let Some(age) = probed.reused {
        selection.reason = format!(
            "{} (its probe's answer of {} ago, reused)",
            selection.reason,
            crate::printer::duration(age.as_secs_f64())
        );
    }
    Ok((probed, selection))
}

/// Loads a plugin that passed its probe into this process and builds its object.
pub fn instantiate(settings: &PluginSettings, probed: &Probed) -> Result<Instance, Error> {
    let manifest = &probed.manifest;
    settings.check(manifest)?;
    let loaded = loader::load(manifest).map_err(|e| {
        Concept::Plugins
            .failure(format!("plugin {} could not be loaded", manifest.name))
            .caused_by(e.to_string())
            .hint(e.hint())
    })?;
    loaded
        .instantiate(&settings.config_json(&manifest.name))
        .map_err(|e| plugin_error(&manifest.name, "could not start", &e))
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
        Status::UnsafePermissions(why) => {
            format!("refused: {why} (chmod go-w it, or install it again with stet plugins install)")
        }
        Status::Untrusted(why) => format!(
            "refused: {why} (if you trust it: stet plugins trust {})",
            f.display_name()
        ),
        Status::Unreadable(why) => format!("refused: {why}"),
    }
}
