//! `stet add` and `stet queue`: the work queue under `.stet/queue/`.

use std::io::Read;

use serde::Serialize;

use crate::config::repository_root;
use crate::error::{CliError, Exit};
use crate::printer::Printer;
use crate::queue;
use crate::reservations::{Remote, ReservationError};

use super::{AddArgs, QueueArgs};

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

#[derive(Serialize)]
struct Row {
    id: String,
    title: String,
    state: String,
    holder: Option<String>,
    stage: Option<String>,
    until_unix: Option<i64>,
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
    let on_remote = remote.list().and_then(|r| Ok((r, remote.landed()?)));
    let (reservations, landed, remote_note) = match on_remote {
        Ok((list, landed)) => (list, landed, None),
        Err(ReservationError::Remote { detail, .. }) => (
            Vec::new(),
            Vec::new(),
            Some(format!(
                "remote {} unreachable ({detail}); reservations unknown",
                args.remote
            )),
        ),
        Err(e) => return Err(CliError::failure(e.to_string())),
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let rows: Vec<Row> = items
        .iter()
        .map(|item| {
            let held = reservations.iter().find(|h| h.reservation.item == item.id);
            let state = match (&remote_note, held) {
                (Some(_), _) => "unknown",
                (None, _) if landed.contains(&item.id) => "landed",
                (None, None) => "open",
                (None, Some(h)) if h.reservation.expires_at_unix > now => "reserved",
                (None, Some(_)) => "lapsed",
            };
            Row {
                id: item.id.clone(),
                title: item.title.clone(),
                state: state.to_string(),
                holder: held.map(|h| h.reservation.holder.clone()),
                stage: held.map(|h| h.reservation.stage.clone()),
                until_unix: held.map(|h| h.reservation.expires_at_unix),
            }
        })
        .collect();
    if let Some(note) = &remote_note {
        printer.warn(note);
    }
    if args.json {
        printer.json(&rows);
        return Ok(Exit::Success);
    }
    if rows.is_empty() {
        printer.out("the queue is empty (add an item: stet add \"what to do\")");
    }
    for row in &rows {
        let detail = match (&row.holder, &row.stage, row.until_unix) {
            (Some(holder), Some(stage), Some(until)) => {
                let until = humantime::format_rfc3339_seconds(
                    std::time::UNIX_EPOCH + std::time::Duration::from_secs(until.max(0) as u64),
                );
                format!(" — {holder}, stage {stage}, until {until}")
            }
            _ => String::new(),
        };
        printer.out(&format!(
            "{:<9} {}  {}{detail}",
            row.state, row.id, row.title
        ));
    }
    Ok(Exit::Success)
}
