//! `stet doctor`: every precondition of a drive, a line each (`crate::doctor`).

use serde::Serialize;

use super::error::{CliError, Exit};
use crate::doctor::{self, Check};
use crate::printer::Printer;
use crate::settings::Settings;

use super::DoctorArgs;

#[derive(Serialize)]
struct Report<'a> {
    /// Whether a drive could start here.
    ready: bool,
    checks: &'a [Check],
}

pub fn run(settings: &Settings, args: &DoctorArgs, printer: Printer) -> Result<Exit, CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::failure(format!("cannot resolve the current directory: {e}")))?;
    let (mut checks, repo) = doctor::repository(&cwd, &args.remote);
    checks.extend(doctor::configuration(settings));
    let runtime = crate::sandbox::open_runtime(settings);
    let harness = crate::harness::open_harness(settings);
    checks.push(doctor::runtime(&runtime));
    checks.extend(doctor::other_runtimes(&runtime));
    if let Ok(runtime) = &runtime {
        let agent = harness.as_ref().ok().and_then(doctor::agent_program);
        checks.extend(doctor::image(
            settings,
            runtime,
            settings.drive_check.as_deref(),
            agent.as_deref(),
        ));
    }
    checks.extend(doctor::harness(&harness));
    if let Some(repo) = &repo {
        checks.push(doctor::disk(settings, repo));
        checks.extend(doctor::seed(settings, repo, &args.remote));
        checks.extend(doctor::pull_requests(settings, repo));
    }
    let ready = checks.iter().all(|c| c.ok);
    if args.json {
        printer.json(&Report {
            ready,
            checks: &checks,
        });
    } else {
        let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
        for check in &checks {
            let mark = if check.ok { "ok" } else { "FAIL" };
            printer.out_state(mark, 5, &format!("{:width$}  {}", check.name, check.detail));
            if !check.ok && !check.remedy.is_empty() {
                printer.out(&format!("     {:width$}  → {}", "", check.remedy));
            }
        }
        let failed = checks.iter().filter(|c| !c.ok).count();
        printer.out("");
        printer.out(&if ready {
            "a drive could start here".to_string()
        } else {
            match failed {
                1 => "1 problem stops a drive here".to_string(),
                n => format!("{n} problems stop a drive here"),
            }
        });
    }
    Ok(if ready { Exit::Success } else { Exit::Unusable })
}
