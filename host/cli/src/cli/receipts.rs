//! `stet receipts`: what every agent call did, from the receipts in this clone.

use super::error::{CliError, Exit};
use crate::printer::Printer;
use crate::receipts;
use crate::story::ItemState;

use super::{ReceiptsArgs, StatusArgs};

pub fn run(args: &ReceiptsArgs, printer: Printer) -> Result<Exit, CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::failure(format!("cannot resolve the current directory: {e}")))?;
    let repo = crate::config::repository_root(&cwd).ok_or_else(|| {
        CliError::usage(format!("{} is not inside a git repository", cwd.display()))
            .hint("receipts are kept per clone: cd into the repository")
    })?;
    let (mut all, unreadable) = receipts::read_all(&repo);
    for (path, why) in &unreadable {
        printer.warn(&format!("skipped {}: {why}", path.display()));
    }
    if let Some(given) = &args.item {
        let (items, _) = crate::queue::read(&repo);
        // An item of the queue by its handle, id or a unique start of either; else a
        // receipt's item by its id or handle as given (an item whose file is gone).
        let gone: std::collections::BTreeSet<&str> = all
            .iter()
            .filter(|r| r.item == *given || crate::queue::handle_of(&r.item) == given)
            .map(|r| r.item.as_str())
            .collect();
        let id = match super::queue::resolve(&items, given) {
            Ok(item) => item.id.clone(),
            Err(_) if gone.len() == 1 => gone.iter().map(|id| id.to_string()).collect(),
            Err(e) => return Err(e),
        };
        all.retain(|r| r.item == id);
    }
    // Newest first.
    all.sort_by(|a, b| {
        b.started_unix_ms
            .cmp(&a.started_unix_ms)
            .then(b.id.cmp(&a.id))
    });
    if let Some(last) = args.last {
        all.truncate(last);
    }
    if args.json {
        #[derive(serde::Serialize)]
        struct Receipts {
            receipts: Vec<serde_json::Value>,
        }
        let receipts = all.iter().map(json_of).collect();
        printer.json(&Receipts { receipts });
        return Ok(Exit::Success);
    }
    if all.is_empty() {
        // Said as what would fill the listing: no receipt was asked for, or none is here yet.
        printer.out(match (args.last, &args.item) {
            (Some(0), _) => "no receipts shown: --last 0 asks for none (--last N shows the newest N)",
            (_, Some(_)) => "no receipts of that item in this clone: a drive on this clone makes them as it works it",
            (_, None) => "no receipts yet in this clone: stet drive (or stet ask) makes one per agent call and check",
        });
        return Ok(Exit::Success);
    }
    let mut table = crate::printer::Table::new(&[
        "STARTED",
        "ROLE",
        "OUTCOME",
        "TIME",
        "COST",
        "ITEM",
        "RUNTIME/HARNESS",
    ])
    .right(3)
    .right(4)
    .coloured(2);
    for r in &all {
        let cost = r
            .cost_usd
            .map(|c| format!("${c:.4}"))
            .unwrap_or_else(|| "-".into());
        let item = if r.item.is_empty() {
            "-".to_string()
        } else {
            r.item.clone()
        };
        let time = crate::printer::duration(
            r.ended_unix_ms.saturating_sub(r.started_unix_ms) as f64 / 1000.0,
        );
        table.row(vec![
            crate::printer::rfc3339_ms(r.started_unix_ms),
            r.role.to_string(),
            r.outcome.to_string(),
            time,
            cost,
            item,
            format!("{}/{}", r.runtime.name, r.harness.name),
        ]);
    }
    table.print_with(|i| {
        if let Some(r) = all.get(i) {
            printer.detail(&format!("    {} — log {}", r.detail, r.log.display()));
        }
    });
    Ok(Exit::Success)
}

/// A receipt as `--json` shows it: as kept, plus its times as RFC 3339 and its usage as an
/// object of numbers (a count that is not a number stays a string).
fn json_of(r: &receipts::Receipt) -> serde_json::Value {
    let mut value = serde_json::to_value(r).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.insert(
            "started".into(),
            crate::printer::rfc3339_ms(r.started_unix_ms).into(),
        );
        object.insert(
            "ended".into(),
            crate::printer::rfc3339_ms(r.ended_unix_ms).into(),
        );
        let usage: serde_json::Map<String, serde_json::Value> = r
            .usage
            .iter()
            .map(|(k, v)| {
                let n = v
                    .parse::<u64>()
                    .map(serde_json::Value::from)
                    .or_else(|_| v.parse::<f64>().map(serde_json::Value::from))
                    .unwrap_or_else(|_| v.clone().into());
                (k.clone(), n)
            })
            .collect();
        object.insert("usage".into(), usage.into());
    }
    value
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
    /// The last agent call, with its item's handle.
    last: Option<Last>,
}

/// The last agent call as `stet status --json` shows it.
#[derive(serde::Serialize)]
struct Last {
    #[serde(flatten)]
    receipt: receipts::Receipt,
    /// The handle of its item (`handles.rs`), derived from the item's id.
    handle: String,
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
        *outcomes.entry(r.outcome.word().to_string()).or_insert(0) += 1;
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
        last: all.last().map(|r| Last {
            receipt: r.clone(),
            handle: crate::queue::handle_of(&r.item).to_string(),
        }),
    };
    if args.json {
        printer.json(&status);
        return Ok(Exit::Success);
    }
    printer.out(&format!(
        "queue: {}{} — `stet queue` shows each one's state",
        crate::printer::count(status.items, "item", "items"),
        if status.malformed == 0 {
            String::new()
        } else {
            format!(
                ", {} skipped",
                crate::printer::count(status.malformed, "malformed file", "malformed files")
            )
        }
    ));
    if !status.lanes_here.is_empty() {
        printer.out("lanes on this clone:");
        for line in lanes_here_now(&repo, &args.remote) {
            printer.out(&format!("  {line}"));
        }
    }
    let tally: Vec<String> = status
        .outcomes
        .iter()
        .map(|(outcome, n)| format!("{n} {outcome}"))
        .collect();
    printer.out(&format!(
        "receipts: {} of agent calls and checks in {}{}, ${:.4} reported",
        status.calls,
        crate::printer::count(status.runs, "run", "runs"),
        if tally.is_empty() {
            String::new()
        } else {
            format!(" ({})", tally.join(", "))
        },
        status.cost_usd
    ));
    if let Some(Last {
        receipt: last,
        handle,
    }) = &status.last
    {
        let when = humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(last.ended_unix_ms),
        );
        let item = if last.item.is_empty() {
            "-"
        } else {
            handle.as_str()
        };
        printer.out(&format!(
            "last call: {when} {} {item}: {} — {}",
            last.role, last.outcome, last.detail
        ));
    }
    Ok(Exit::Success)
}

/// Each lane kept on this clone with what becomes of it, by its item's state as the remote
/// says (a drive takes up only an open or lapsed item; a failed or cancelled one waits for
/// `stet retry`; a reserved one is being worked now).
fn lanes_here_now(repo: &std::path::Path, remote: &str) -> Vec<String> {
    let kept = crate::lanes::kept(repo);
    let (items, _) = crate::queue::read(repo);
    let ours: Vec<crate::queue::Item> =
        items.into_iter().filter(|i| kept.contains(&i.id)).collect();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let rows = crate::story::states(repo, &ours, remote, now)
        .map(|(rows, _)| rows)
        .unwrap_or_default();
    kept.iter()
        .map(|id| {
            let branch = crate::lanes::branch_of(id);
            let Some(row) = rows.iter().find(|r| r.id == *id) else {
                return format!(
                    "{branch} — its item's file is not in the queue here; stet clean removes the lane once the remote marks it finished"
                );
            };
            let what = match row.state {
                ItemState::Reserved => format!(
                    "being worked by {}{} — stet log -f {} follows it",
                    row.holder.as_deref().unwrap_or("a drive"),
                    row.stage
                        .as_deref()
                        .map(|s| format!(" at {s}"))
                        .unwrap_or_default(),
                    row.handle
                ),
                ItemState::Lapsed => {
                    "left by a drive that stopped; the next stet drive takes it up".to_string()
                }
                ItemState::Open => "waiting; the next stet drive takes it up".to_string(),
                ItemState::Failed => format!(
                    "failed ({}); stet retry {} takes it up again",
                    row.why.as_deref().unwrap_or("no reason recorded"),
                    row.handle
                ),
                ItemState::Cancelled => format!(
                    "cancelled; stet retry {} takes it up again, stet clean removes the lane",
                    row.handle
                ),
                ItemState::Landed => "landed; stet clean removes the lane".to_string(),
                ItemState::Unknown => format!(
                    "state unknown: {remote} did not answer (stet queue tells once it does)"
                ),
            };
            format!("{branch} — {what}")
        })
        .collect()
}
