//! `stet add` and `stet queue`: the work queue under `.stet/queue/`.

use std::io::Read;

use serde::Serialize;

use crate::config::repository_root;
use crate::error::{CliError, Exit};
use crate::printer::Printer;
use crate::queue;
use crate::reservations::{Remote, ReservationError};

use super::{AddArgs, QueueArgs, RetryArgs};

fn repo() -> Result<std::path::PathBuf, CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::failure(format!("cannot resolve the current directory: {e}")))?;
    repository_root(&cwd).ok_or_else(|| {
        CliError::usage(format!("{} is not inside a git repository", cwd.display()))
            .hint("the queue lives in the repository the drive works on: cd into it")
    })
}

pub fn add(args: &AddArgs, printer: Printer) -> Result<Exit, CliError> {
    let repo = repo()?;
    let text = match (&args.file, args.text.is_empty()) {
        (Some(path), true) if path.as_os_str() == "-" => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| CliError::failure(format!("cannot read standard input: {e}")))?;
            text
        }
        (Some(path), true) => std::fs::read_to_string(path)
            .map_err(|e| CliError::usage(format!("cannot read {}: {e}", path.display())))?,
        (None, false) => args.text.join(" "),
        (Some(_), false) => {
            return Err(CliError::usage(
                "give the item as text or with -F FILE, not both",
            ))
        }
        (None, true) => {
            return Err(CliError::usage(
                "say what should be done: stet add \"fix the typo in README\"",
            ))
        }
    };
    let item = queue::add(&repo, &text).map_err(CliError::usage)?;
    printer.out(&format!("added {}: {}", item.id, item.title));
    printer.detail(&format!("file: {}", item.path.display()));
    Ok(Exit::Success)
}

/// One item as `stet queue` shows it.
#[derive(Serialize)]
struct Row {
    id: String,
    title: String,
    /// `open`, `reserved`, `lapsed`, `landed`, `failed` or `unknown`.
    state: String,
    /// Who holds the reservation, for `reserved` and `lapsed`.
    holder: Option<String>,
    /// The lane's stage as its reservation says, for `reserved` and `lapsed`.
    stage: Option<String>,
    /// When the reservation lapses, for `reserved` and `lapsed`.
    until_unix: Option<i64>,
    /// The lane's branch, when it has been pushed to the remote.
    lane: Option<String>,
    /// Why the item failed, for `failed`.
    why: Option<String>,
    /// The round its lane is in, when it has a checkpoint.
    round: Option<u32>,
    /// The move its lane goes on with, when it has a checkpoint.
    next: Option<&'static str>,
    /// Why its last round did not land, when one did not.
    reason: Option<String>,
    /// What stet's proxy refused its calls on this clone (from their receipts): each
    /// host:port and how often.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    blocked: Vec<(String, u64)>,
}

pub fn list(args: &QueueArgs, printer: Printer) -> Result<Exit, CliError> {
    let repo = repo()?;
    let (items, malformed) = queue::read(&repo);
    for m in &malformed {
        printer.warn(&format!("skipped {}: {}", m.path.display(), m.why));
    }
    let remote = Remote {
        repo: &repo,
        name: &args.remote,
    };
    let on_remote = remote.list().and_then(|r| {
        let marks = remote.marks()?;
        let reasons = if marks.failed.is_empty() {
            Default::default()
        } else {
            remote.failure_reasons()?
        };
        Ok((r, marks, reasons, remote.checkpoints()?))
    });
    let (reservations, marks, reasons, checkpoints, remote_note) = match on_remote {
        Ok((list, marks, reasons, checkpoints)) => (list, marks, reasons, checkpoints, None),
        Err(ReservationError::Remote { detail, .. }) => (
            Vec::new(),
            Default::default(),
            Default::default(),
            Default::default(),
            Some(format!(
                "the remote {} did not answer ({}): every item's state is unknown",
                args.remote,
                crate::reservations::first_cause(&detail)
            )),
        ),
        Err(e) => return Err(CliError::failure(e.to_string())),
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    // What the network wall refused each item's calls, as this clone's receipts say.
    let mut blocked: std::collections::BTreeMap<String, std::collections::BTreeMap<String, u64>> =
        Default::default();
    for receipt in crate::receipts::read_all(&repo).0 {
        for b in receipt.network_blocked {
            *blocked
                .entry(receipt.item.clone())
                .or_default()
                .entry(b.target)
                .or_default() += b.count;
        }
    }
    let rows: Vec<Row> = items
        .iter()
        .map(|item| {
            let held = reservations.iter().find(|h| h.reservation.item == item.id);
            let state = match (&remote_note, held) {
                (Some(_), _) => "unknown",
                (None, _) if marks.landed.contains(&item.id) => "landed",
                (None, _) if marks.failed.contains(&item.id) => "failed",
                (None, None) => "open",
                (None, Some(h)) if h.reservation.expires_at_unix > now => "reserved",
                (None, Some(_)) => "lapsed",
            };
            let reserved = matches!(state, "reserved" | "lapsed");
            Row {
                id: item.id.clone(),
                title: item.title.clone(),
                state: state.to_string(),
                holder: held
                    .filter(|_| reserved)
                    .map(|h| h.reservation.holder.clone()),
                stage: held
                    .filter(|_| reserved)
                    .map(|h| h.reservation.stage.clone()),
                until_unix: held
                    .filter(|_| reserved)
                    .map(|h| h.reservation.expires_at_unix),
                lane: marks
                    .lanes
                    .contains(&item.id)
                    .then(|| crate::lanes::branch_of(&item.id)),
                why: reasons.get(&item.id).cloned(),
                round: checkpoints.get(&item.id).map(|c| c.round),
                next: checkpoints.get(&item.id).map(|c| c.next.word()),
                reason: checkpoints.get(&item.id).and_then(|c| c.reason.clone()),
                blocked: blocked
                    .get(&item.id)
                    .map(|b| b.iter().map(|(t, n)| (t.clone(), *n)).collect())
                    .unwrap_or_default(),
            }
        })
        .collect();
    // The list is shown all the same (from the files); the exit says nothing could be
    // learnt from the remote.
    let exit = match &remote_note {
        Some(note) => {
            printer.warn(&format!(
                "{note}; check the network and the remote, then run stet queue again"
            ));
            Exit::Unusable
        }
        None => Exit::Success,
    };
    if args.json {
        printer.json(&rows);
        return Ok(exit);
    }
    if rows.is_empty() {
        printer.out("the queue is empty (add an item: stet add \"what to do\")");
    }
    for row in &rows {
        let detail = match (row.state.as_str(), &row.holder, &row.stage, row.until_unix) {
            ("reserved", Some(holder), Some(stage), Some(until)) => format!(
                " — in lane {} at {stage}, held by {holder} until {}",
                crate::lanes::branch_of(&row.id),
                crate::drive::clock(until)
            ),
            ("lapsed", Some(holder), Some(stage), Some(until)) => format!(
                " — lane {} left at {stage} by {holder}, lapsed at {}; the next drive takes it up",
                crate::lanes::branch_of(&row.id),
                crate::drive::clock(until)
            ),
            ("failed", ..) => format!(
                " — {} (stet retry {} to take it up again)",
                row.why.as_deref().unwrap_or("no reason recorded"),
                row.id
            ),
            ("landed", ..) => format!(" — {}", crate::lanes::branch_of(&row.id)),
            ("open", ..) if row.lane.is_some() || row.round.is_some() => format!(
                " — {}the next drive resumes it{}",
                if row.lane.is_some() {
                    format!("lane {} pushed; ", crate::lanes::branch_of(&row.id))
                } else {
                    String::new()
                },
                match (row.round, row.next) {
                    (Some(round), Some(next)) => format!(" at round {round}, {next}"),
                    _ => String::new(),
                }
            ),
            _ => String::new(),
        };
        let detail = match (&row.reason, row.state.as_str()) {
            (Some(reason), "open" | "reserved" | "lapsed") => {
                format!("{detail} (last: {reason})")
            }
            _ => detail,
        };
        let detail = if row.blocked.is_empty() {
            detail
        } else {
            let list: Vec<String> = row
                .blocked
                .iter()
                .map(|(target, n)| format!("{target} ×{n}"))
                .collect();
            format!("{detail} [network blocked: {}]", list.join(", "))
        };
        printer.out(&format!(
            "{:<9} {}  {}{detail}",
            row.state, row.id, row.title
        ));
    }
    Ok(exit)
}

/// `stet retry ID`: clears an item's failed mark so the next drive takes it up again.
pub fn retry(args: &RetryArgs, printer: Printer) -> Result<Exit, CliError> {
    let repo = repo()?;
    if !queue::valid_id(&args.id) {
        return Err(CliError::usage(format!("`{}` is not an item id", args.id))
            .hint("stet queue lists the items and their ids"));
    }
    let (items, _) = queue::read(&repo);
    if !items.iter().any(|i| i.id == args.id) {
        return Err(
            CliError::usage(format!("there is no item {} in the queue", args.id))
                .hint("stet queue lists the items and their ids"),
        );
    }
    let remote = Remote {
        repo: &repo,
        name: &args.remote,
    };
    match remote.clear_failed(&args.id).and_then(|cleared| {
        if cleared {
            remote.restart(&args.id)?;
        }
        Ok(cleared)
    }) {
        Ok(true) => {
            printer.out(&format!(
                "{}: no longer failed; the next stet drive takes it up (its lane, if pushed, resumes)",
                args.id
            ));
            Ok(Exit::Success)
        }
        Ok(false) => Err(CliError::usage(format!("{} has not failed", args.id))
            .hint("only a failed item can be retried; stet queue shows each item's state")),
        Err(e) => Err(
            CliError::new(Exit::Unusable, "the remote cannot be reached")
                .caused_by(e.to_string())
                .hint("check the network and the remote, then run stet retry again"),
        ),
    }
}
