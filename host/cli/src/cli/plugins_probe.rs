//! `stet plugins probe`: load and probe plugins in isolated children, then show the
//! selection `stet drive` would make.

use super::error::{CliError, Exit};
use crate::plugin_report::{self, PluginReport, Report};
use crate::plugins::discovery::{self, Found};
use crate::plugins::version::host_api;
use crate::printer::Printer;
use crate::settings::Settings;

use super::ProbeArgs;

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

    let report = plugin_report::survey(settings, &args.names)?;
    let exit = if report.usable() {
        Exit::Success
    } else {
        Exit::Unusable
    };
    if args.json {
        printer.json(&report);
        return Ok(exit);
    }
    let Report {
        plugins: reports,
        selection: selections,
        ..
    } = report;

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
