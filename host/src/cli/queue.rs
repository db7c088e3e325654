//! `stet add` and `stet queue`: the work queue under `.stet/queue/`.

use std::io::Read;

use serde::Serialize;

use super::error::{CliError, Exit};
use crate::config::repository_root;
use crate::printer::Printer;
use crate::queue;
use crate::reservations::{Remote, ReservationError};
use crate::story::{self, Row};

use super::{AddArgs, QueueArgs, RetryArgs};

pub(super) fn repo() -> Result<std::path::PathBuf, CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::failure(format!("cannot resolve the current directory: {e}")))?;
    repository_root(&cwd).ok_or_else(|| {
        CliError::usage(format!("{} is not inside a git repository", cwd.display()))
            .hint("the queue lives in the repository the drive works on: cd into it")
    })
}

/// Now, in seconds since the epoch: whether a reservation has lapsed.
fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
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

pub fn list(args: &QueueArgs, printer: Printer) -> Result<Exit, CliError> {
    let repo = repo()?;
    let (items, malformed) = queue::read(&repo);
    for m in &malformed {
        printer.warn(&format!("skipped {}: {}", m.path.display(), m.why));
    }
    let (rows, remote_note) = story::states(&repo, &items, &args.remote, now_unix())?;
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
        #[derive(Serialize)]
        struct Items<'a> {
            items: &'a [Row],
        }
        printer.json(&Items { items: &rows });
        return Ok(exit);
    }
    if rows.is_empty() {
        printer.out("the queue is empty (add an item: stet add \"what to do\")");
        return Ok(exit);
    }
    let width = rows.iter().map(|r| r.id.len()).max().unwrap_or(2);
    printer.out(&format!("{:<10}{:<width$}  TITLE", "STATE", "ID"));
    for row in &rows {
        let detail = detail_of(row);
        printer.out_state(
            &row.state,
            10,
            &format!("{:<width$}  {}{detail}", row.id, row.title),
        );
    }
    Ok(exit)
}

/// What `stet queue` says of an item after its id and title.
fn detail_of(row: &Row) -> String {
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
        ("cancelled", ..) => format!(
            " — no drive takes it until stet retry {} (stet clean removes what it left here)",
            row.id
        ),
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
    let base = row.base.as_deref().unwrap_or("the base");
    let detail = match row.here {
        Some("only-here") => format!(
            "{detail} — only in this working copy, not on {base}: no drive takes it until you commit and push it"
        ),
        Some(_) => format!(
            "{detail} — changed here: a drive works {base}'s text until you commit and push the change"
        ),
        None => detail,
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
    detail
}

/// `stet retry ID`: clears an item's failed or cancelled mark (the one way either is
/// undone: `stet clean` never does) so the next drive takes it up again.
pub fn retry(args: &RetryArgs, printer: Printer) -> Result<Exit, CliError> {
    let repo = repo()?;
    let (items, _) = queue::read(&repo);
    let id = resolve(&items, &args.id)?.id.clone();
    let remote = Remote {
        repo: &repo,
        name: &args.remote,
    };
    match remote.clear_for_retry(&id).and_then(|had| {
        if !had.is_empty() {
            remote.restart(&id)?;
        }
        Ok(had)
    }) {
        Ok(had) if !had.is_empty() => {
            printer.out(&format!(
                "{id}: no longer {}; the next stet drive takes it up (its lane, if pushed, resumes)",
                had.join(" or ")
            ));
            Ok(Exit::Success)
        }
        Ok(_) => Err(CliError::usage(format!(
            "{id} has not failed and is not cancelled"
        ))
        .hint("only a failed or cancelled item can be retried; stet queue shows each item's state")),
        Err(e) => Err(
            CliError::new(Exit::Unusable, "the remote cannot be reached")
                .caused_by(e.to_string())
                .hint("check the network and the remote, then run stet retry again"),
        ),
    }
}

/// The item `given` names: its id, or the start of exactly one id.
pub(crate) fn resolve<'i>(
    items: &'i [queue::Item],
    given: &str,
) -> Result<&'i queue::Item, CliError> {
    if let Some(item) = items.iter().find(|i| i.id == given) {
        return Ok(item);
    }
    let starting: Vec<&queue::Item> = items
        .iter()
        .filter(|i| !given.is_empty() && i.id.starts_with(given))
        .collect();
    match starting.as_slice() {
        [one] => Ok(one),
        [] => Err(
            CliError::usage(format!("there is no item {given} in the queue")).hint(
                "stet queue lists the items and their ids (any unique start of an id will do)",
            ),
        ),
        many => Err(CliError::usage(format!(
            "`{given}` starts {} item ids: {}",
            many.len(),
            many.iter()
                .map(|i| i.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .hint("give more of the id")),
    }
}

#[derive(Serialize)]
struct Shown<'a> {
    #[serde(flatten)]
    row: &'a Row,
    text: &'a str,
    rounds: Vec<story::Round>,
    /// The lane's change against its base (`git diff --stat`), when its branch is here.
    diff_stat: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    diff: Option<String>,
}

/// `stet show ID`: an item's story on this clone and the remote.
pub fn show(args: &super::ShowArgs, printer: Printer) -> Result<Exit, CliError> {
    let repo = repo()?;
    let (items, _) = queue::read(&repo);
    let item = resolve(&items, &args.id)?;
    let (mut rows, remote_note) =
        story::states(&repo, std::slice::from_ref(item), &args.remote, now_unix())?;
    let row = rows.remove(0);
    if let Some(note) = &remote_note {
        printer.warn(note);
    }
    if let Some(n) = args.prompt {
        return show_prompt(&repo, &item.id, n, args.json, printer);
    }
    let rounds = story::rounds(&repo, &item.id);
    let diff_stat = story::diff(&repo, &args.remote, &item.id, story::Diff::Stat);
    let diff = if args.diff {
        story::diff(&repo, &args.remote, &item.id, story::Diff::Whole)
    } else {
        None
    };
    if args.json {
        printer.json(&Shown {
            row: &row,
            text: &item.text,
            rounds,
            diff_stat,
            diff,
        });
        return Ok(if remote_note.is_some() {
            Exit::Unusable
        } else {
            Exit::Success
        });
    }
    printer.out(&format!("{}  {}", item.id, item.title));
    printer.out(&format!("state: {}{}", row.state, detail_of(&row)));
    printer.out(&format!("file:  {}", item.path.display()));
    printer.out("");
    for line in item.text.trim_end().lines() {
        printer.out(&format!("  {line}"));
    }
    if rounds.is_empty() {
        printer.out("");
        printer.out("no call of this item on this clone yet");
    }
    for round in &rounds {
        printer.out("");
        printer.out(&format!("round {}", round.round));
        for step in &round.steps {
            let cost = step
                .cost_usd
                .map(|c| format!("  ${c:.4}"))
                .unwrap_or_default();
            printer.out(&format!(
                "  {:<9} {:<13} {:>7}{cost}  receipt {}",
                step.role,
                step.outcome,
                crate::printer::duration(step.seconds),
                step.receipt
            ));
            if let (Some(n), Some(kept)) = (step.call, &step.prompt) {
                printer.out(&format!(
                    "      asked: prompt {n}, {} (stet show {} --prompt {n})",
                    crate::printer::size(kept.bytes),
                    item.id
                ));
            }
            // A check's detail is its output, shown as its tail below.
            if !step.detail.is_empty()
                && step.tail.is_empty()
                && (step.role == crate::receipts::CallRole::Review
                    || step.outcome != crate::receipts::Outcome::Done)
            {
                for line in step.detail.lines().take(6) {
                    printer.out(&format!("      {line}"));
                }
            }
            for b in &step.network_blocked {
                printer.out(&format!(
                    "      network blocked: {} ×{} ({})",
                    b.target, b.count, b.why
                ));
            }
            for line in &step.tail {
                printer.out(&format!("      │ {line}"));
            }
        }
    }
    printer.out("");
    match (&diff_stat, &diff) {
        (_, Some(diff)) => printer.out(diff),
        (Some(stat), None) if !stat.is_empty() => {
            printer.out(&format!(
                "{} against its base:",
                crate::lanes::branch_of(&item.id)
            ));
            printer.out(stat);
        }
        (Some(_), None) => printer.out(&format!(
            "{} holds no change against its base",
            crate::lanes::branch_of(&item.id)
        )),
        (None, _) => printer.out(&format!(
            "the lane's branch {} is not on this clone{}",
            crate::lanes::branch_of(&item.id),
            if row.lane.is_some() {
                format!(
                    " (it is on the remote: git fetch {} {})",
                    args.remote,
                    crate::lanes::branch_of(&item.id)
                )
            } else {
                String::new()
            }
        )),
    }
    Ok(if remote_note.is_some() {
        Exit::Unusable
    } else {
        Exit::Success
    })
}

/// `stet show ID --prompt N`: the prompt the item's N-th agent call received, as kept
/// (through the printer: it holds the item's text and earlier agents' words, made inert).
fn show_prompt(
    repo: &std::path::Path,
    item: &str,
    n: u32,
    json: bool,
    printer: Printer,
) -> Result<Exit, CliError> {
    let story::Prompt { round, step, text } = story::prompt(repo, item, n)?;
    if json {
        #[derive(Serialize)]
        struct Prompt<'a> {
            call: u32,
            receipt: &'a str,
            role: &'a crate::receipts::CallRole,
            prompt: &'a Option<crate::receipts::KeptPrompt>,
            text: &'a str,
        }
        printer.json(&Prompt {
            call: n,
            receipt: &step.receipt,
            role: &step.role,
            prompt: &step.prompt,
            text: &text,
        });
    } else {
        printer.detail(&format!(
            "prompt of call {n} of {item}: {} in round {}, receipt {}",
            step.role, round, step.receipt
        ));
        printer.out(text.trim_end());
    }
    Ok(Exit::Success)
}

/// How often `stet log -f` looks for more output.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// `stet log ID [-f]`: the agent's output of the item's latest call; with `-f`, every call
/// of the item after it too, as it comes, while a drive on this clone works the item.
pub fn log(args: &super::LogArgs, printer: Printer) -> Result<Exit, CliError> {
    use std::io::{Read, Seek, SeekFrom, Write};
    let repo = repo()?;
    let (items, _) = queue::read(&repo);
    let item = resolve(&items, &args.id)?.id.clone();
    let latest = |repo: &std::path::Path| {
        let (receipts, _) = crate::receipts::read_all(repo);
        receipts
            .into_iter()
            .filter(|r| r.item == item && r.role != crate::receipts::CallRole::Check)
            .max_by_key(|r| r.started_unix_ms)
    };
    let Some(mut call) = latest(&repo) else {
        return Err(
            CliError::usage(format!("{item} has no agent call on this clone yet"))
                .hint(format!("stet show {item} tells what is known of it")),
        );
    };
    let mut out = std::io::stdout().lock();
    let mut pending = Vec::new();
    let mut offset = 0u64;
    let mut shown_header = false;
    loop {
        if !shown_header {
            printer.note(&format!(
                "── {} · {} · round {} · receipt {}",
                item,
                call.role,
                call.round.unwrap_or(1),
                call.id
            ));
            shown_header = true;
        }
        // The log is the agent's output: shown inert (no terminal control gets through).
        if let Ok(mut file) = std::fs::File::open(&call.log) {
            if file.seek(SeekFrom::Start(offset)).is_ok() {
                let mut chunk = Vec::new();
                if let Ok(n) = file.take(1 << 20).read_to_end(&mut chunk) {
                    offset += n as u64;
                    let text = crate::text::inert_bytes(&mut pending, &chunk);
                    let _ = out.write_all(text.as_bytes());
                    let _ = out.flush();
                }
            }
        }
        if !args.follow {
            break;
        }
        let working =
            crate::sandbox::owner_alive(&call.owner) && crate::lanes::kept(&repo).contains(&item);
        match latest(&repo) {
            // A newer call of the item began: follow it from its start.
            Some(next) if next.id != call.id => {
                call = next;
                offset = 0;
                shown_header = false;
                let _ = out.write_all(crate::text::inert_bytes(&mut pending, b"\n").as_bytes());
                continue;
            }
            // Running, or ended with the drive still on the item: watch for more.
            Some(now) if working => call = now,
            _ => {
                // One last read of what the call wrote before it ended.
                if let Ok(mut file) = std::fs::File::open(&call.log) {
                    if file.seek(SeekFrom::Start(offset)).is_ok() {
                        let mut rest = Vec::new();
                        let _ = file.take(1 << 20).read_to_end(&mut rest);
                        let _ =
                            out.write_all(crate::text::inert_bytes(&mut pending, &rest).as_bytes());
                    }
                }
                break;
            }
        }
        std::thread::sleep(FOLLOW_EVERY);
    }
    if !pending.is_empty() {
        let _ = out.write_all(crate::text::inert(&String::from_utf8_lossy(&pending)).as_bytes());
    }
    let _ = out.flush();
    Ok(Exit::Success)
}

/// `stet rm ID`: cancels an item on the remote.
pub fn rm(args: &super::RmArgs, printer: Printer) -> Result<Exit, CliError> {
    let repo = repo()?;
    let (items, _) = queue::read(&repo);
    let id = resolve(&items, &args.id)?.id.clone();
    let remote = Remote {
        repo: &repo,
        name: &args.remote,
    };
    let unreachable = |e: ReservationError| {
        CliError::new(Exit::Unusable, "the remote cannot be reached")
            .caused_by(e.to_string())
            .hint("check the network and the remote, then run stet rm again")
    };
    let marks = remote.marks_for(&id).map_err(unreachable)?;
    if marks.landed.contains(&id) {
        return Err(
            CliError::usage(format!("{id} has landed; there is nothing to cancel"))
                .hint("stet clean --remote removes its branch once merged"),
        );
    }
    if marks.cancelled.contains(&id) {
        printer.out(&format!("{id} was cancelled already"));
        return Ok(Exit::Success);
    }
    let when = crate::drive::clock(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0),
    );
    let by = crate::git::Person::of_repository(&repo)
        .map(|p| format!("{} <{}>", p.name, p.email))
        .unwrap_or_else(|| "stet rm".to_string());
    remote
        .mark_cancelled(&id, &format!("cancelled by {by} at {when}"))
        .map_err(unreachable)?;
    printer.out(&format!(
        "cancelled {id} on {}: no drive takes it, and a drive working it stops at its next move",
        args.remote
    ));
    printer.out(&format!(
        "its file stays in {} (git rm it when you like); stet clean removes what it left on a clone",
        queue::QUEUE_DIR
    ));
    Ok(Exit::Success)
}
