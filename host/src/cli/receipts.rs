//! `stet receipts`: what every agent call did, from the receipts in this clone.

use crate::error::{CliError, Exit};
use crate::printer::Printer;
use crate::receipts;

use super::{ReceiptsArgs, StatusArgs};

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
/// What `stet status --json` prints.
#[derive(serde::Serialize)]
struct Status {
    /// Items in the queue, and malformed files skipped.
    items: usize,
    malformed: usize,
    /// Lanes with a working copy on this clone (being worked, stopped or waiting).
    lanes_here: Vec<String>,
    /// Agent calls recorded, runs they belong to, and calls per outcome.
    calls: usize,
    runs: usize,
    outcomes: std::collections::BTreeMap<String, usize>,
    /// Cost reported by the agents, in US dollars.
    cost_usd: f64,
    /// The last agent call.
    last: Option<receipts::Receipt>,
}

pub fn status(args: &StatusArgs, printer: Printer) -> Result<Exit, CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::failure(format!("cannot resolve the current directory: {e}")))?;
    let repo = crate::config::repository_root(&cwd).ok_or_else(|| {
        CliError::usage(format!("{} is not inside a git repository", cwd.display()))
            .hint("cd into the repository")
    })?;
    let (items, malformed) = crate::queue::scan(&repo);
    let (all, _) = receipts::read_all(&repo);
    let lanes_here: Vec<String> = crate::lanes::kept(&repo)
        .iter()
        .map(|item| crate::lanes::branch_of(item))
        .collect();
    let mut outcomes = std::collections::BTreeMap::new();
    for r in &all {
        *outcomes.entry(r.outcome.clone()).or_insert(0) += 1;
    }
    let status = Status {
        items: items.len(),
        malformed: malformed.len(),
        lanes_here,
        calls: all.len(),
        runs: all
            .iter()
            .map(|r| r.run.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        outcomes,
        // A fold from +0.0: an empty f64 sum is -0.0, which prints as "$-0.0000".
        cost_usd: all
            .iter()
            .filter_map(|r| r.cost_usd)
            .fold(0.0, |a, b| a + b),
        last: all.last().cloned(),
    };
    if args.json {
        printer.json(&status);
        return Ok(Exit::Success);
    }
    printer.out(&format!(
        "queue: {} item(s){} — `stet queue` shows each one's state",
        status.items,
        if status.malformed == 0 {
            String::new()
        } else {
            format!(", {} malformed file(s) skipped", status.malformed)
        }
    ));
    if !status.lanes_here.is_empty() {
        printer.out(&format!(
            "lanes on this clone: {} — the next `stet drive` takes them up",
            status.lanes_here.join(", ")
        ));
    }
    let tally: Vec<String> = status
        .outcomes
        .iter()
        .map(|(outcome, n)| format!("{n} {outcome}"))
        .collect();
    printer.out(&format!(
        "receipts: {} of agent calls and checks in {} run(s){}, ${:.4} reported",
        status.calls,
        status.runs,
        if tally.is_empty() {
            String::new()
        } else {
            format!(" ({})", tally.join(", "))
        },
        status.cost_usd
    ));
    if let Some(last) = &status.last {
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
