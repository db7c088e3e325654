//! `stet gc`: remove sandboxes a crashed stet left behind, found by label in every
//! available runtime, and say what was removed and what was kept.

use serde::Serialize;
use stet_plugin_api::{Label, PluginKind};

use crate::error::{CliError, Exit};
use crate::plugins::survey;
use crate::printer::Printer;
use crate::sandbox::{self, HOST, MANAGED, OWNER, RUN};
use crate::settings::Settings;

use super::GcArgs;

#[derive(Serialize)]
struct Report {
    removed: Vec<Entry>,
    kept: Vec<Entry>,
    runtimes_skipped: Vec<Skipped>,
}

#[derive(Serialize)]
struct Entry {
    runtime: String,
    sandbox: String,
    run: String,
    reason: String,
}

#[derive(Serialize)]
struct Skipped {
    runtime: String,
    reason: String,
}

pub fn run(settings: &Settings, args: &GcArgs, printer: Printer) -> Result<Exit, CliError> {
    let survey = survey::survey(settings, |f| {
        f.manifest
            .as_ref()
            .is_some_and(|m| m.kind == PluginKind::Runtime)
    });
    let here = sandbox::host_name();
    let mut report = Report {
        removed: Vec::new(),
        kept: Vec::new(),
        runtimes_skipped: Vec::new(),
    };
    let mut failures = Vec::new();
    for probed in &survey.probed {
        let name = probed.manifest.name.clone();
        if probed.available().is_none() {
            report.runtimes_skipped.push(Skipped {
                runtime: name,
                reason: "unavailable".to_string(),
            });
            continue;
        }
        let runtime = match sandbox::open_probed(settings, probed, Default::default()) {
            Ok(r) => r,
            Err(e) => {
                report.runtimes_skipped.push(Skipped {
                    runtime: name,
                    reason: e.message.clone(),
                });
                continue;
            }
        };
        let listed = runtime
            .handle
            .list_sandboxes(vec![Label::new(MANAGED.0, MANAGED.1)])
            .map_err(|e| sandbox::plugin_error(&name, "could not list sandboxes", &e))?;
        for info in listed {
            let label = |key: &str| {
                info.labels
                    .iter()
                    .find(|l| l.key.as_str() == key)
                    .map(|l| l.value.to_string())
                    .unwrap_or_default()
            };
            let (owner, host, run) = (label(OWNER), label(HOST), label(RUN));
            let entry = |reason: String| Entry {
                runtime: name.clone(),
                sandbox: info.id.to_string(),
                run: run.clone(),
                reason,
            };
            if host != here {
                report
                    .kept
                    .push(entry(format!("it belongs to host {host}")));
            } else if sandbox::owner_alive(&owner) {
                report.kept.push(entry(format!(
                    "its stet (process {}) is still running",
                    pid_of(&owner)
                )));
            } else if args.dry_run {
                report.removed.push(entry(format!(
                    "its stet (process {}) is gone",
                    pid_of(&owner)
                )));
            } else {
                match runtime.handle.teardown(&info.id) {
                    Ok(()) => report.removed.push(entry(format!(
                        "its stet (process {}) is gone",
                        pid_of(&owner)
                    ))),
                    Err(e) => failures.push(format!("{name}: sandbox {}: {}", info.id, e.message)),
                }
            }
        }
    }

    if args.json {
        printer.json(&report);
    } else {
        let verb = if args.dry_run {
            "would remove"
        } else {
            "removed"
        };
        for e in &report.removed {
            printer.out(&format!(
                "{verb} {} sandbox {} (run {}): {}",
                e.runtime,
                short(&e.sandbox),
                e.run,
                e.reason
            ));
        }
        for e in &report.kept {
            printer.out(&format!(
                "kept {} sandbox {} (run {}): {}",
                e.runtime,
                short(&e.sandbox),
                e.run,
                e.reason
            ));
        }
        for s in &report.runtimes_skipped {
            printer.detail(&format!("skipped runtime {}: {}", s.runtime, s.reason));
        }
        printer.out(&format!(
            "{} {} sandbox{}, kept {}",
            verb,
            report.removed.len(),
            if report.removed.len() == 1 { "" } else { "es" },
            report.kept.len()
        ));
    }
    if failures.is_empty() {
        Ok(Exit::Success)
    } else {
        let mut error = CliError::failure("some sandboxes could not be removed");
        for f in failures {
            error = error.caused_by(f);
        }
        Err(error.hint(
            "run `stet gc` again; if it keeps failing, remove them with the runtime's own tools",
        ))
    }
}

fn pid_of(owner: &str) -> &str {
    owner
        .split(':')
        .next()
        .filter(|p| !p.is_empty())
        .unwrap_or("unknown")
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}
