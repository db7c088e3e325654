//! Choosing the runtime and the harness a drive uses, and saying why.
//!
//! The order is SPEC §3: an explicit choice (`--runtime`, `--harness`), else the configured
//! preference order, else the available plugin whose own probe reports the highest
//! priority, ties broken by name. The host never ranks backends itself: priorities come
//! from the plugins' probes. Every backend that was passed over is named with its reason.

use serde::Serialize;
use stet_plugin_api::PluginKind;

use super::probe::Probed;

/// What the person asked for, for one kind.
#[derive(Debug, Clone, Default)]
pub struct Preference {
    /// An explicit choice and where it came from (`--runtime`).
    pub explicit: Option<(String, String)>,
    /// A preference order and where it came from (`stet.toml [runtime] prefer`).
    pub prefer: Option<(Vec<String>, String)>,
}

/// A backend that was passed over, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Passed {
    /// Plugin name.
    pub name: String,
    /// Why it was not chosen.
    pub reason: String,
    /// What would make it usable, when known.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub remedy: String,
}

/// The outcome of selection for one kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Selection {
    /// `runtime` or `harness`.
    pub kind: &'static str,
    /// The chosen plugin, if any.
    pub chosen: Option<String>,
    /// Why it was chosen, or why nothing was.
    pub reason: String,
    /// Every unavailable backend, with its reason.
    pub unavailable: Vec<Passed>,
    /// Available backends that were not chosen (in JSON, their names).
    #[serde(serialize_with = "names_only")]
    pub also_available: Vec<Alternative>,
}

/// An available backend that was not chosen, and what its probe says of its isolation:
/// what a person weighs when choosing another (`stet doctor`, `stet init`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alternative {
    /// Plugin name.
    pub name: String,
    /// Its isolation class in its probe's words, when it states one
    /// ([`super::probe::Probe::isolation`]).
    pub isolation: Option<String>,
}

impl Alternative {
    fn of(probed: &Probed) -> Alternative {
        Alternative {
            name: probed.manifest.name.clone(),
            isolation: probed.available().and_then(|p| p.isolation()),
        }
    }

    /// Its name and isolation, as a person reads them: `NAME (isolation: a virtual
    /// machine per sandbox)`.
    pub fn said(&self) -> String {
        match &self.isolation {
            Some(isolation) => format!("{} (isolation: {isolation})", self.name),
            None => format!("{} (isolation: not stated by its probe)", self.name),
        }
    }
}

/// `also_available` in JSON stays the list of names it always was; each plugin's probe,
/// isolation fact included, is in the same report.
fn names_only<S: serde::Serializer>(
    alternatives: &[Alternative],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(alternatives.iter().map(|a| &a.name))
}

impl Selection {
    /// The explanation printed by `stet plugins probe` and `stet drive`: the choice and
    /// its reason, then one indented line per unavailable backend.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![match &self.chosen {
            Some(name) => format!("{}: {name} — {}", self.kind, self.reason),
            None => format!("{}: none usable — {}", self.kind, self.reason),
        }];
        for passed in &self.unavailable {
            lines.push(format!("  {} unavailable: {}", passed.name, passed.reason));
        }
        lines
    }

    /// The available backends passed over, each with its isolation, and how to choose one
    /// instead; `None` when there is none. (`--runtime NAME` for this command,
    /// `[runtime] prefer` for every command in this repository.)
    pub fn alternatives_line(&self) -> Option<String> {
        let said: Vec<String> = self.also_available.iter().map(Alternative::said).collect();
        let name = match self.also_available.as_slice() {
            [] => return None,
            [only] => only.name.as_str(),
            _ => "NAME",
        };
        let kind = self.kind;
        Some(format!(
            "also available here: {} — choose {} with --{kind} {name} or [{kind}] prefer = [\"{name}\"]",
            said.join(", "),
            if self.also_available.len() == 1 { "it" } else { "one" },
        ))
    }
}

/// Chooses a plugin of `kind` from probe results.
pub fn select(kind: PluginKind, probes: &[Probed], preference: &Preference) -> Selection {
    let kind_word = kind.as_str();
    let candidates: Vec<&Probed> = probes.iter().filter(|p| p.manifest.kind == kind).collect();
    let unavailable: Vec<Passed> = candidates
        .iter()
        .filter(|p| p.available().is_none())
        .map(|p| unavailable_reason(p))
        .collect();
    let available: Vec<&Probed> = candidates
        .iter()
        .copied()
        .filter(|p| p.available().is_some())
        .collect();
    let chosen = |name: &str, reason: String| Selection {
        kind: kind_word,
        chosen: Some(name.to_string()),
        reason,
        unavailable: unavailable.clone(),
        also_available: available
            .iter()
            .filter(|p| p.manifest.name != name)
            .map(|p| Alternative::of(p))
            .collect(),
    };
    let nothing = |reason: String| Selection {
        kind: kind_word,
        chosen: None,
        reason,
        unavailable: unavailable.clone(),
        also_available: Vec::new(),
    };

    if let Some((name, source)) = &preference.explicit {
        return match candidates.iter().find(|p| &p.manifest.name == name) {
            None => nothing(format!(
                "{source} asks for {name}, but no {kind_word} plugin named {name} is installed ({})",
                installed_list(&candidates)
            )),
            Some(p) if p.available().is_none() => nothing(format!(
                "{source} asks for {name}, which is unavailable: {}",
                unavailable_reason(p).reason
            )),
            Some(_) => chosen(name, format!("asked for by {source}")),
        };
    }

    let mut fallback_note = String::new();
    if let Some((order, source)) = &preference.prefer {
        if let Some(p) = order
            .iter()
            .find_map(|name| available.iter().find(|p| &p.manifest.name == name))
        {
            return chosen(
                &p.manifest.name,
                format!("first available in {source} ({})", order.join(", ")),
            );
        }
        fallback_note = format!("none of {source} ({}) is available; ", order.join(", "));
    }

    let best = available.iter().max_by(|a, b| {
        let (pa, pb) = (
            a.available().unwrap().priority,
            b.available().unwrap().priority,
        );
        // Higher priority wins; on a tie the name first in alphabetical order wins.
        pa.cmp(&pb)
            .then_with(|| b.manifest.name.cmp(&a.manifest.name))
    });
    match best {
        Some(p) if available.len() == 1 => chosen(
            &p.manifest.name,
            format!("{fallback_note}the only available {kind_word}"),
        ),
        Some(p) => chosen(
            &p.manifest.name,
            format!(
                "{fallback_note}highest priority reported by the available {kind_word}s ({})",
                p.available().unwrap().priority
            ),
        ),
        None if candidates.is_empty() => nothing(format!(
            "no {kind_word} plugin is installed; install one or point --plugins-dir at one"
        )),
        None => nothing(format!(
            "{fallback_note}no installed {kind_word} is available"
        )),
    }
}

fn unavailable_reason(p: &Probed) -> Passed {
    let (reason, remedy) = match &p.result {
        Ok(probe) => (probe.reason.clone(), probe.remedy.clone()),
        Err(failure) => (failure.summary(), failure.hint()),
    };
    Passed {
        name: p.manifest.name.clone(),
        reason,
        remedy,
    }
}

fn installed_list(candidates: &[&Probed]) -> String {
    if candidates.is_empty() {
        return "none is installed".to_string();
    }
    let names: Vec<&str> = candidates
        .iter()
        .map(|p| p.manifest.name.as_str())
        .collect();
    format!("installed: {}", names.join(", "))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use super::*;
    use crate::plugins::manifest::Manifest;
    use crate::plugins::probe::{Probe, ProbeFailure};

    fn probed(name: &str, kind: PluginKind, result: Result<Probe, ProbeFailure>) -> Probed {
        Probed {
            manifest: Manifest {
                path: PathBuf::from(format!("/p/{name}/plugin.toml")),
                name: name.into(),
                kind,
                version: semver::Version::new(0, 1, 0),
                api: semver::Version::new(1, 1, 0),
                library: PathBuf::from("/p/lib.so"),
                description: String::new(),
                platforms: vec![],
                capabilities: vec![],
                settings: None,
                example: String::new(),
                image_build: String::new(),
            },
            identity: None,
            interface: None,
            result,
            elapsed: Duration::ZERO,
            reused: None,
        }
    }

    fn up(priority: i32) -> Result<Probe, ProbeFailure> {
        Ok(Probe {
            available: true,
            backend_version: "1".into(),
            priority,
            capabilities: vec![],
            reason: String::new(),
            remedy: String::new(),
            facts: vec![],
        })
    }

    fn down(reason: &str) -> Result<Probe, ProbeFailure> {
        Ok(Probe {
            available: false,
            backend_version: String::new(),
            priority: 0,
            capabilities: vec![],
            reason: reason.into(),
            remedy: "fix it".into(),
            facts: vec![],
        })
    }

    fn names(s: &Selection) -> Vec<&str> {
        s.also_available.iter().map(|a| a.name.as_str()).collect()
    }

    fn runtimes() -> Vec<Probed> {
        vec![
            probed(
                "apple-container",
                PluginKind::Runtime,
                down("needs macOS 26 on Apple silicon"),
            ),
            probed("docker", PluginKind::Runtime, up(50)),
            probed("podman", PluginKind::Runtime, up(50)),
            probed("claude", PluginKind::Harness, up(50)),
        ]
    }

    #[test]
    fn highest_priority_wins_ties_by_name_and_rejections_are_named() {
        let s = select(PluginKind::Runtime, &runtimes(), &Preference::default());
        assert_eq!(s.chosen.as_deref(), Some("docker"));
        assert_eq!(
            s.lines(),
            [
                "runtime: docker — highest priority reported by the available runtimes (50)",
                "  apple-container unavailable: needs macOS 26 on Apple silicon",
            ]
        );
        assert_eq!(names(&s), ["podman"]);
    }

    #[test]
    fn preference_order_is_honoured_and_skips_unavailable() {
        let pref = Preference {
            explicit: None,
            prefer: Some((
                vec!["apple-container".into(), "podman".into(), "docker".into()],
                "stet.toml [runtime] prefer".into(),
            )),
        };
        let s = select(PluginKind::Runtime, &runtimes(), &pref);
        assert_eq!(s.chosen.as_deref(), Some("podman"));
        assert!(s
            .reason
            .starts_with("first available in stet.toml [runtime] prefer"));
    }

    #[test]
    fn explicit_choice_of_an_unavailable_backend_is_refused_with_its_reason() {
        let pref = Preference {
            explicit: Some(("apple-container".into(), "--runtime".into())),
            prefer: None,
        };
        let s = select(PluginKind::Runtime, &runtimes(), &pref);
        assert_eq!(s.chosen, None);
        assert!(s.reason.contains("needs macOS 26"), "{}", s.reason);
    }

    #[test]
    fn nothing_usable_is_never_said_bare() {
        let probes = vec![probed(
            "docker",
            PluginKind::Runtime,
            Err(ProbeFailure::TimedOut {
                limit_ms: 3000,
                stage: "probe".into(),
            }),
        )];
        let s = select(PluginKind::Runtime, &probes, &Preference::default());
        assert_eq!(s.chosen, None);
        assert_eq!(
            s.lines(),
            [
                "runtime: none usable — no installed runtime is available",
                "  docker unavailable: no answer within 3s while probing; the probe was killed",
            ]
        );
    }

    fn explicit(name: &str) -> Preference {
        Preference {
            explicit: Some((name.into(), "--runtime".into())),
            prefer: None,
        }
    }

    #[test]
    fn an_explicit_choice_of_an_available_backend_wins_over_priority_and_preference() {
        let pref = Preference {
            explicit: Some(("podman".into(), "--runtime".into())),
            prefer: Some((vec!["docker".into()], "stet.toml [runtime] prefer".into())),
        };
        let s = select(PluginKind::Runtime, &runtimes(), &pref);
        assert_eq!(s.chosen.as_deref(), Some("podman"));
        assert_eq!(s.reason, "asked for by --runtime");
        assert_eq!(names(&s), ["docker"]);
        assert_eq!(s.unavailable.len(), 1);
        assert_eq!(s.unavailable[0].name, "apple-container");
        assert_eq!(s.unavailable[0].remedy, "fix it");
    }

    #[test]
    fn an_explicit_choice_of_a_backend_not_installed_names_the_installed_ones() {
        let s = select(PluginKind::Runtime, &runtimes(), &explicit("dockr"));
        assert_eq!(s.chosen, None);
        assert_eq!(
            s.reason,
            "--runtime asks for dockr, but no runtime plugin named dockr is installed \
             (installed: apple-container, docker, podman)"
        );
        // A harness of that name is not a runtime.
        let s = select(PluginKind::Runtime, &runtimes(), &explicit("claude"));
        assert_eq!(s.chosen, None);
        assert!(
            s.reason.contains("no runtime plugin named claude"),
            "{}",
            s.reason
        );
        let s = select(PluginKind::Runtime, &[], &explicit("docker"));
        assert_eq!(
            s.reason,
            "--runtime asks for docker, but no runtime plugin named docker is installed \
             (none is installed)"
        );
    }

    #[test]
    fn a_preference_with_nothing_available_falls_back_to_priority_and_says_so() {
        let pref = Preference {
            explicit: None,
            prefer: Some((
                vec!["apple-container".into(), "lima".into()],
                "stet.toml [runtime] prefer".into(),
            )),
        };
        let s = select(PluginKind::Runtime, &runtimes(), &pref);
        assert_eq!(s.chosen.as_deref(), Some("docker"));
        assert_eq!(
            s.reason,
            "none of stet.toml [runtime] prefer (apple-container, lima) is available; \
             highest priority reported by the available runtimes (50)"
        );
    }

    #[test]
    fn a_higher_priority_beats_the_alphabet_and_a_lone_backend_is_the_only_one() {
        let probes = vec![
            probed("aardvark", PluginKind::Runtime, up(10)),
            probed("zebra", PluginKind::Runtime, up(90)),
        ];
        let s = select(PluginKind::Runtime, &probes, &Preference::default());
        assert_eq!(s.chosen.as_deref(), Some("zebra"));
        assert_eq!(
            s.reason,
            "highest priority reported by the available runtimes (90)"
        );
        assert_eq!(names(&s), ["aardvark"]);

        let s = select(PluginKind::Harness, &runtimes(), &Preference::default());
        assert_eq!(s.chosen.as_deref(), Some("claude"));
        assert_eq!(s.lines(), ["harness: claude — the only available harness"]);
        assert!(s.also_available.is_empty());
        assert!(s.unavailable.is_empty(), "runtimes are not harnesses");
    }

    #[test]
    fn the_backends_passed_over_are_named_with_their_isolation_and_how_to_choose_them() {
        let stating = |isolation: &str| {
            up(10).map(|mut p| {
                p.facts.push(crate::plugins::probe::Fact {
                    key: stet_plugin_api::fact::ISOLATION.into(),
                    value: isolation.into(),
                });
                p
            })
        };
        let mut probes = vec![
            probed("docker", PluginKind::Runtime, up(50)),
            probed(
                "vm",
                PluginKind::Runtime,
                stating("a virtual machine per sandbox"),
            ),
        ];
        let s = select(PluginKind::Runtime, &probes, &Preference::default());
        assert_eq!(
            s.alternatives_line().as_deref(),
            Some(
                "also available here: vm (isolation: a virtual machine per sandbox) — \
                 choose it with --runtime vm or [runtime] prefer = [\"vm\"]"
            )
        );
        // In JSON, the names alone, as before.
        assert_eq!(
            serde_json::to_value(&s).unwrap()["also_available"],
            serde_json::json!(["vm"])
        );
        probes.push(probed("quiet", PluginKind::Runtime, up(10)));
        let s = select(PluginKind::Runtime, &probes, &Preference::default());
        assert_eq!(
            s.alternatives_line().as_deref(),
            Some(
                "also available here: vm (isolation: a virtual machine per sandbox), \
                 quiet (isolation: not stated by its probe) — \
                 choose one with --runtime NAME or [runtime] prefer = [\"NAME\"]"
            )
        );
        let alone = select(PluginKind::Runtime, &probes[..1], &Preference::default());
        assert_eq!(alone.alternatives_line(), None);
    }

    #[test]
    fn with_no_plugin_of_the_kind_the_reason_says_to_install_one() {
        let probes = vec![probed("docker", PluginKind::Runtime, up(50))];
        let s = select(PluginKind::Harness, &probes, &Preference::default());
        assert_eq!(s.chosen, None);
        assert_eq!(
            s.lines(),
            ["harness: none usable — no harness plugin is installed; \
              install one or point --plugins-dir at one"]
        );
    }

    #[test]
    fn the_json_of_a_selection_carries_each_remedy_and_leaves_out_an_empty_one() {
        let probes = vec![
            probed("docker", PluginKind::Runtime, up(50)),
            probed(
                "podman",
                PluginKind::Runtime,
                Err(ProbeFailure::TimedOut {
                    limit_ms: 3000,
                    stage: "probe".into(),
                }),
            ),
            probed(
                "quiet",
                PluginKind::Runtime,
                Err(ProbeFailure::Error {
                    stage: "probe".into(),
                    message: "it said no".into(),
                    hint: String::new(),
                    report: None,
                }),
            ),
        ];
        let s = select(PluginKind::Runtime, &probes, &Preference::default());
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["kind"], "runtime");
        assert_eq!(json["chosen"], "docker");
        assert_eq!(json["reason"], "the only available runtime");
        assert_eq!(json["also_available"], serde_json::json!([]));
        assert_eq!(
            json["unavailable"][0],
            serde_json::json!({
                "name": "podman",
                "reason": "no answer within 3s while probing; the probe was killed",
                "remedy": "the backend may be hanging; if it is only slow, raise [probe] timeout \
                           in stet.toml or pass --probe-timeout",
            })
        );
        // A plugin's error without a hint gets the bug-report remedy, never an empty one.
        assert_eq!(
            json["unavailable"][1]["remedy"],
            "this is a bug in the plugin: report it to its author, or remove its directory"
        );
        let passed = Passed {
            name: "x".into(),
            reason: "y".into(),
            remedy: String::new(),
        };
        assert_eq!(
            serde_json::to_value(&passed).unwrap(),
            serde_json::json!({"name": "x", "reason": "y"})
        );
    }
}
