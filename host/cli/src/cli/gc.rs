//! `stet gc`: remove sandboxes a crashed stet left behind, found by label in every
//! available runtime, and its temporary directories, found by the owner in their names; say
//! what was removed and what was kept.

use serde::Serialize;
use stet_plugin_api::PluginKind;

use super::error::{CliError, Exit};
use crate::plugins::survey;
use crate::printer::Printer;
use crate::sandbox;
use crate::settings::Settings;

use super::GcArgs;

#[derive(Serialize)]
struct Report {
    removed: Vec<Entry>,
    kept: Vec<Entry>,
    runtimes_skipped: Vec<Skipped>,
    temp_dirs_removed: Vec<TempDir>,
}

#[derive(Serialize)]
struct TempDir {
    path: String,
    bytes: u64,
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
    let survey = survey::survey(&settings.plugins, |f| {
        f.manifest
            .as_ref()
            .is_some_and(|m| m.kind == PluginKind::Runtime)
    });
    let mut report = Report {
        removed: Vec::new(),
        kept: Vec::new(),
        runtimes_skipped: Vec::new(),
        temp_dirs_removed: sandbox::leftovers::reap_dead_temp_dirs(args.dry_run)
            .into_iter()
            .map(|t| TempDir {
                path: t.path.display().to_string(),
                bytes: t.bytes,
            })
            .collect(),
    };
    let mut failures = Vec::new();
    for probed in &survey.probed {
        let name = probed.manifest.name.clone();
        if probed.available().is_none() {
            let reason = match &probed.result {
                Ok(probe) => probe.reason.clone(),
                Err(failure) => failure.summary(),
            };
            report.runtimes_skipped.push(Skipped {
                runtime: name,
                reason: format!("unavailable: {reason}"),
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
        for v in sandbox::reap(&runtime, args.dry_run)? {
            let entry = Entry {
                runtime: name.clone(),
                sandbox: v.sandbox.clone(),
                run: v.run.clone(),
                reason: v.reason.clone(),
            };
            match (&v.error, v.removed) {
                (Some(error), _) => {
                    failures.push(format!("{name}: sandbox {}: {error}", v.sandbox))
                }
                (None, true) => report.removed.push(entry),
                (None, false) => report.kept.push(entry),
            }
        }
    }

    let asked = survey.probed.len() - report.runtimes_skipped.len();
    if asked == 0 {
        // Nothing could be looked at: "removed 0" would say there was nothing to remove.
        let mut error = CliError::new(
            Exit::Unusable,
            "no runtime could be asked for the sandboxes stet left behind",
        );
        for s in &report.runtimes_skipped {
            error = error.caused_by(format!("{}: {}", s.runtime, s.reason));
        }
        if report.runtimes_skipped.is_empty() {
            error = error.caused_by("no runtime plugin is installed");
        }
        return Err(error
            .hint("start the runtime's engine (its daemon or service), then run stet gc again"));
    }
    if args.json {
        printer.json(&report);
    } else {
        say(&report, args.dry_run, &printer);
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

/// The report in words: each sandbox removed and kept, each temporary directory, each
/// runtime not asked, then the counts.
fn say(report: &Report, dry_run: bool, printer: &Printer) {
    let verb = if dry_run { "would remove" } else { "removed" };
    for (done, entries) in [(verb, &report.removed), ("kept", &report.kept)] {
        for e in entries {
            printer.out(&format!(
                "{done} {} sandbox {} (run {}): {}",
                e.runtime,
                short(&e.sandbox),
                e.run,
                e.reason
            ));
        }
    }
    for t in &report.temp_dirs_removed {
        printer.out(&format!(
            "{verb} the temporary directory {} ({}): its stet is gone",
            t.path,
            crate::printer::size(t.bytes)
        ));
    }
    for s in &report.runtimes_skipped {
        printer.warn(&format!(
            "runtime {} was not asked for its sandboxes: {}",
            s.runtime, s.reason
        ));
    }
    printer.out(&format!(
        "{} {} sandbox{}, kept {}",
        verb,
        report.removed.len(),
        if report.removed.len() == 1 { "" } else { "es" },
        report.kept.len()
    ));
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}
