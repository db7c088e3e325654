//! `stet ask PROMPT`: one walled agent call in a fresh sandbox.

use serde::Serialize;
use stet_plugin_api::{OutcomeKind, ROption, Role, RoleRequest};

use crate::error::{CliError, Exit};
use crate::harness;
use crate::printer::Printer;
use crate::sandbox;
use crate::settings::Settings;

use super::{AskArgs, AskRole};

#[derive(Serialize)]
struct Report {
    harness: String,
    runtime: String,
    network: String,
    outcome: &'static str,
    detail: String,
    retry_at_unix: Option<i64>,
    cost_usd: Option<f64>,
    usage: Vec<(String, String)>,
    exit_code: Option<i32>,
    session: Vec<serde_json::Value>,
}

pub fn run(settings: &Settings, args: &AskArgs, printer: Printer) -> Result<Exit, CliError> {
    let cwd = std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(|e| CliError::failure(format!("cannot resolve the current directory: {e}")))?;
    let harness = harness::open_harness(settings)?;
    let profile = harness.profile()?;
    if let Some(detail) = harness.rewrite_settings(&profile)? {
        printer.warn(&format!(
            "the walled settings had been edited and were replaced ({detail})"
        ));
    }
    let broken: Vec<_> = harness
        .check_walls(&profile)?
        .into_iter()
        .filter(|w| !w.held)
        .collect();
    if let Some(first) = broken.first() {
        let mut error = CliError::new(
            Exit::Unusable,
            format!("{} wall(s) of {} are broken", broken.len(), harness.name),
        );
        for w in &broken {
            error = error.caused_by(format!("{}: {}", w.wall, w.detail));
        }
        return Err(error.hint(first.remedy.to_string()));
    }
    let role = match args.role {
        AskRole::Implement => Role::Implement,
        AskRole::Review => Role::Review,
    };
    let runtime = sandbox::open_runtime(settings)?;
    let launch = harness.launch(RoleRequest {
        role,
        prompt: args.prompt.join(" ").into(),
        profile_dir: profile.dir.clone(),
        workdir: cwd.display().to_string().into(),
    })?;
    let (output, network) = harness::run_launch(settings, &runtime, &launch, &cwd, "ask")?;
    if let Some(log) = &args.log {
        std::fs::write(log, &output.stdout)
            .map_err(|e| CliError::failure(format!("cannot write {}: {e}", log.display())))?;
    }
    let outcome = harness.read_outcome(role, &output.stdout, output.status)?;
    let word = match outcome.kind {
        OutcomeKind::Done => "done",
        OutcomeKind::Failed => "failed",
        OutcomeKind::OutOfShape => "out-of-shape",
        OutcomeKind::RateLimited => "rate-limited",
        OutcomeKind::NotLoggedIn => "not-logged-in",
    };
    let report = Report {
        harness: harness.name.clone(),
        runtime: runtime.name.clone(),
        network,
        outcome: word,
        detail: outcome.detail.to_string(),
        retry_at_unix: outcome.retry_at_unix.into_option(),
        cost_usd: outcome.cost_usd.into_option(),
        usage: outcome
            .usage
            .iter()
            .map(|f| (f.key.to_string(), f.value.to_string()))
            .collect(),
        exit_code: match output.status.code {
            ROption::RSome(c) => Some(c),
            ROption::RNone => None,
        },
        session: output.session.clone(),
    };
    if args.json {
        printer.json(&report);
    } else {
        printer.out(&format!("outcome: {} — {}", report.outcome, report.detail));
        if let Some(at) = report.retry_at_unix {
            printer.out(&format!(
                "retry after: {} (unix {at})",
                humantime::format_rfc3339_seconds(
                    std::time::UNIX_EPOCH + std::time::Duration::from_secs(at.max(0) as u64)
                )
            ));
        }
        if let Some(cost) = report.cost_usd {
            printer.out(&format!("cost: ${cost:.6}"));
        }
        if !report.usage.is_empty() {
            let usage: Vec<String> = report
                .usage
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            printer.out(&format!("usage: {}", usage.join(" ")));
        }
        printer.detail(&format!(
            "harness {}, runtime {}, network {}",
            report.harness, report.runtime, report.network
        ));
    }
    Ok(match outcome.kind {
        OutcomeKind::Done => Exit::Success,
        OutcomeKind::Failed | OutcomeKind::OutOfShape => Exit::Failure,
        OutcomeKind::RateLimited | OutcomeKind::NotLoggedIn => Exit::Unusable,
    })
}
