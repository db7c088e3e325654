//! `stet receipts`: what every agent call did, from the receipts in this clone.

use crate::error::{CliError, Exit};
use crate::printer::Printer;
use crate::receipts;

use super::ReceiptsArgs;

pub fn run(args: &ReceiptsArgs, printer: Printer) -> Result<Exit, CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::failure(format!("cannot resolve the current directory: {e}")))?;
    let repo = crate::config::repository_root(&cwd).ok_or_else(|| {
        CliError::usage(format!("{} is not inside a git repository", cwd.display()))
            .hint("receipts are kept per clone: cd into the repository")
    })?;
    let (all, unreadable) = receipts::read_all(&repo);
    for (path, why) in &unreadable {
        printer.warn(&format!("skipped {}: {why}", path.display()));
    }
    if args.json {
        printer.json(&all);
        return Ok(Exit::Success);
    }
    if all.is_empty() {
        printer.out("no receipts yet in this clone");
    }
    for r in &all {
        let when = humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(r.started_unix_ms),
        );
        let cost = r.cost_usd.map(|c| format!(" ${c:.4}")).unwrap_or_default();
        let item = if r.item.is_empty() {
            "-"
        } else {
            r.item.as_str()
        };
        printer.out(&format!(
            "{when}  {:<9} {:<13} {item}  {}s{cost}  {}/{}",
            r.role,
            r.outcome,
            r.ended_unix_ms.saturating_sub(r.started_unix_ms) / 1000,
            r.runtime.name,
            r.harness.name
        ));
        printer.detail(&format!("    {} — log {}", r.detail, r.log.display()));
    }
    Ok(Exit::Success)
}

/// `stet status`: what drives in this clone did, in one screen.
pub fn status(printer: Printer) -> Result<Exit, CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::failure(format!("cannot resolve the current directory: {e}")))?;
    let repo = crate::config::repository_root(&cwd).ok_or_else(|| {
        CliError::usage(format!("{} is not inside a git repository", cwd.display()))
            .hint("cd into the repository")
    })?;
    let (items, malformed) = crate::queue::read(&repo);
    let (all, _) = receipts::read_all(&repo);
    let runs: std::collections::BTreeSet<&str> = all.iter().map(|r| r.run.as_str()).collect();
    let cost: f64 = all.iter().filter_map(|r| r.cost_usd).sum();
    printer.out(&format!(
        "queue: {} item(s){} — `stet queue` shows each one's state",
        items.len(),
        if malformed.is_empty() {
            String::new()
        } else {
            format!(", {} malformed file(s) skipped", malformed.len())
        }
    ));
    printer.out(&format!(
        "receipts: {} agent call(s) in {} run(s), ${cost:.4} reported",
        all.len(),
        runs.len()
    ));
    if let Some(last) = all.last() {
        let when = humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(last.ended_unix_ms),
        );
        let item = if last.item.is_empty() {
            "-"
        } else {
            last.item.as_str()
        };
        printer.out(&format!(
            "last call: {when} {} {item}: {} — {}",
            last.role, last.outcome, last.detail
        ));
    }
    Ok(Exit::Success)
}
