//! `stet ask PROMPT`: one walled agent call in a fresh sandbox on the current directory
//! (`crate::ask`), printed.

use stet_plugin_api::{OutcomeCode, Role};

use super::error::{CliError, Exit};
use crate::ask::{self, Question};
use crate::printer::Printer;
use crate::settings::Settings;

use super::{AskArgs, AskRole};

pub fn run(settings: &Settings, args: &AskArgs, printer: Printer) -> Result<Exit, CliError> {
    let cwd = std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(|e| CliError::failure(format!("cannot resolve the current directory: {e}")))?;
    let role = match args.role {
        AskRole::Implement => Role::Implement,
        AskRole::Review => Role::Review,
    };
    let prompt = args.prompt.join(" ");
    let report = ask::ask(
        settings,
        &Question {
            dir: &cwd,
            role,
            prompt: &prompt,
            log: args.log.as_deref(),
        },
        printer,
    )?;
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
        if let Some(path) = &report.receipt {
            printer.detail(&format!("receipt: {}", path.display()));
        }
    }
    Ok(match report.kind {
        OutcomeCode::DONE => Exit::Success,
        // The agent ran and did not do the work: the work's failure, not a bug.
        OutcomeCode::FAILED | OutcomeCode::OUT_OF_SHAPE | OutcomeCode::RESOURCE_LIMIT => {
            Exit::GaveUp
        }
        _ => Exit::Unusable,
    })
}
