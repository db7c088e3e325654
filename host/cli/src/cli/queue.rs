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
    let added = crate::handles::add(&repo, &args.remote, &text).map_err(CliError::usage)?;
    let item = &added.item;
    let claimed = added.claim == crate::handles::Claim::Claimed;
    if args.json {
        #[derive(Serialize)]
        struct Added<'a> {
            id: &'a str,
            handle: &'a str,
            path: &'a std::path::Path,
            title: &'a str,
            /// Whether the handle is claimed on the remote (no other clone's item gets it).
            claimed: bool,
            /// Why it is not, when it is not.
            #[serde(skip_serializing_if = "Option::is_none")]
            not_claimed: Option<&'a str>,
        }
        printer.json(&Added {
            id: &item.id,
            handle: &item.handle,
            path: &item.path,
            title: &item.title,
            claimed,
            not_claimed: match &added.claim {
                crate::handles::Claim::NotClaimed(why) => Some(why),
                crate::handles::Claim::Claimed => None,
            },
        });
    } else {
        printer.out(&format!("added {}: {}", item.handle, item.title));
        printer.detail(&format!("id:   {}", item.id));
        printer.detail(&format!("file: {}", item.path.display()));
    }
    if let Some(wanted) = &added.wanted {
        printer.warn(&format!(
            "{wanted} is another item's handle already: this one is {}",
            item.handle
        ));
    }
    if let crate::handles::Claim::NotClaimed(why) = &added.claim {
        printer.warn(&format!(
            "the handle {} is not claimed on {}: {why}; another clone may give it to another \
             item meanwhile (both then stay reachable by id)",
            item.handle, args.remote
        ));
    }
    printer.note(&format!(
        "no drive takes it until it is on {}: git add {} && git commit -m 'queue {}' && git push",
        args.remote,
        relative(&repo, &item.path).display(),
        item.handle
    ));
    Ok(Exit::Success)
}

/// `path` as seen from the current directory when it is under it, else as it is.
fn relative(repo: &std::path::Path, path: &std::path::Path) -> std::path::PathBuf {
    let cwd = std::env::current_dir().unwrap_or_else(|_| repo.to_path_buf());
    path.strip_prefix(&cwd)
        .map(std::path::Path::to_path_buf)
        .unwrap_or_else(|_| path.to_path_buf())
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
        printer.out("the queue is empty: stet add \"what to do\" adds an item (then commit and push .stet/queue)");
        return Ok(exit);
    }
    let mut table = crate::printer::Table::new(&["STATE", "HANDLE", "ID", "TITLE"]).coloured(0);
    for row in &rows {
        table.row(vec![
            row.state.to_string(),
            row.handle.clone(),
            row.id.clone(),
            format!("{}{}", row.title, story::detail_of(row)),
        ]);
    }
    table.print();
    Ok(exit)
}

/// `stet retry ID`: clears an item's failed or cancelled mark (the one way either is
/// undone: `stet clean` never does) so the next drive takes it up again.
pub fn retry(args: &RetryArgs, printer: Printer) -> Result<Exit, CliError> {
    use crate::queue_actions::{Retried, RetryRefused};
    let repo = repo()?;
    let (items, _) = queue::read(&repo);
    let id = resolve(&items, &args.id)?.id.clone();
    match crate::queue_actions::retry(&repo, &args.remote, &id) {
        Ok(Retried::Cleared(had)) => {
            printer.out(&format!(
                "{id}: no longer {}; the next stet drive takes it up (its lane, if pushed, resumes)",
                had.join(" or ")
            ));
            Ok(Exit::Success)
        }
        Ok(Retried::Already) => {
            printer.out(&format!(
                "{id} is neither failed nor cancelled already: the next stet drive takes it up"
            ));
            Ok(Exit::Success)
        }
        Err(RetryRefused::Landed) => Err(CliError::usage(format!(
            "{id} has landed; there is nothing to retry"
        ))
        .hint(format!(
            "stet show {id} tells where it landed; add a new item for more work on it"
        ))),
        Err(RetryRefused::Unreachable(e)) => Err(CliError::new(
            Exit::Unusable,
            "the remote cannot be reached",
        )
        .caused_by(e.to_string())
        .hint("check the network and the remote, then run stet retry again")),
    }
}

/// The item `given` names: its id, its handle, or a unique start of either
/// (`handles::resolve`).
pub(crate) fn resolve<'i>(
    items: &'i [queue::Item],
    given: &str,
) -> Result<&'i queue::Item, CliError> {
    match crate::handles::resolve(items, given) {
        crate::handles::Resolved::One(item) => Ok(item),
        crate::handles::Resolved::None => Err(CliError::usage(format!(
            "there is no item {given} in the queue"
        ))
        .hint(
            "stet queue lists the items, their handles and ids (any unique start of either will do)",
        )),
        crate::handles::Resolved::Many(many) => Err(CliError::usage(format!(
            "`{given}` names {} items: {}",
            many.len(),
            many.iter()
                .map(|i| format!("{} ({})", i.handle, i.id))
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .hint("give more of the handle, or the id")),
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
    /// The lane's working copy, when it is on this clone.
    #[serde(skip_serializing_if = "Option::is_none")]
    lane_path: Option<std::path::PathBuf>,
}

/// What a kept lane is to other local users, in words: its directory (`<item>/`, above
/// `work/`) is its owner's alone, or says how to make it so.
fn kept_words(work: &std::path::Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let root = work.parent().unwrap_or(work);
    match std::fs::metadata(root).map(|m| m.permissions().mode() & 0o077) {
        Ok(0) => "kept on this clone, yours alone".to_string(),
        _ => format!(
            "kept on this clone, open to other users: chmod 700 {}",
            root.display()
        ),
    }
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
    let lane_path = crate::lanes::here(&repo, &item.id).map(|lane| lane.dir);
    if args.json {
        printer.json(&Shown {
            row: &row,
            text: &item.text,
            rounds,
            diff_stat,
            diff,
            lane_path: lane_path.clone(),
        });
        return Ok(if remote_note.is_some() {
            Exit::Unusable
        } else {
            Exit::Success
        });
    }
    // --diff asks for the change alone (to read, or to pipe to `git apply`): the story is
    // what `stet show` without it prints.
    if args.diff {
        match &diff {
            Some(diff) if !diff.is_empty() => printer.out(diff),
            Some(_) => printer.note(&format!(
                "{} holds no change against its base",
                crate::lanes::branch_of(&item.id)
            )),
            None => {
                return Err(CliError::usage(format!(
                    "the lane's branch {} is neither on this clone nor on {}",
                    crate::lanes::branch_of(&item.id),
                    args.remote
                ))
                .hint(format!(
                    "stet show {} tells where the item is; a lane has a branch once a drive pushed its work",
                    item.id
                )))
            }
        }
        return Ok(if remote_note.is_some() {
            Exit::Unusable
        } else {
            Exit::Success
        });
    }
    printer.out(&format!("{}  {}", item.id, item.title));
    printer.out(&format!("handle: {}", item.handle));
    printer.out(&format!("state: {}{}", row.state, story::detail_of(&row)));
    printer.out(&format!("file:  {}", item.path.display()));
    if let Some(path) = &lane_path {
        printer.out(&format!(
            "lane:  {} ({}; stet shell {} opens a shell there)",
            path.display(),
            kept_words(path),
            item.id
        ));
    }
    printer.out("");
    for line in item.text.trim_end().lines() {
        printer.out(&format!("  {line}"));
    }
    if rounds.is_empty() {
        printer.out("");
        printer.out("no call of this item on this clone yet");
    }
    say_rounds(&rounds, &item.id, &printer);
    printer.out("");
    // The branch as this clone reads it: its own, or the remote's after `stet clean`.
    let shown = story::lane_ref(&repo, &args.remote, &item.id)
        .map(|(_, name)| name)
        .unwrap_or_else(|| crate::lanes::branch_of(&item.id));
    match &diff_stat {
        Some(stat) if !stat.is_empty() => {
            printer.out(&format!(
                "{shown} against its base (stet show --diff {} prints the whole diff):",
                item.id
            ));
            printer.out(stat);
        }
        Some(_) => printer.out(&format!("{shown} holds no change against its base")),
        None if remote_note.is_some() => printer.out(&format!(
            "the lane's branch {} is not on this clone, and {} did not answer",
            crate::lanes::branch_of(&item.id),
            args.remote
        )),
        None => printer.out(&format!(
            "the lane's branch {} is neither on this clone nor on {}: no drive pushed a change of it yet",
            crate::lanes::branch_of(&item.id),
            args.remote
        )),
    }
    Ok(if remote_note.is_some() {
        Exit::Unusable
    } else {
        Exit::Success
    })
}

/// Each round of an item's story, its calls and checks in order: outcome, time, cost, the
/// receipt, the prompt kept, what the reviewer or a failure said, the hosts refused, a
/// check's tail.
fn say_rounds(rounds: &[story::Round], id: &str, printer: &Printer) {
    for round in rounds {
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
                    crate::queue::handle_of(id)
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

/// How often `stet log -f` looks for more output, or for an item's first call.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// `stet log ID [-f] [--raw] [--role R] [--round N] [--json]`: the transcript of the item's
/// latest agent call, rendered by its harness (or as it is); with `-f`, every call of the
/// item after it too, as it comes, while a drive on this clone works the item.
pub fn log(
    args: &super::LogArgs,
    plugins_dirs: &[std::path::PathBuf],
    printer: Printer,
) -> Result<Exit, CliError> {
    use crate::receipts::CallRole;
    use crate::transcript;
    let repo = repo()?;
    let (items, _) = queue::read(&repo);
    let item = resolve(&items, &args.id)?.id.clone();
    let role = args.role.map(|r| match r {
        super::LogRole::Implement => CallRole::Implement,
        super::LogRole::Review => CallRole::Review,
    });
    let latest = |repo: &std::path::Path| {
        transcript::pick(
            crate::receipts::read_all(repo).0,
            &item,
            role.as_ref(),
            args.round,
        )
    };
    let which = match (&role, args.round) {
        (None, None) => "agent call".to_string(),
        (Some(role), None) => format!("{role} call"),
        (None, Some(n)) => format!("agent call in round {n}"),
        (Some(role), Some(n)) => format!("{role} call in round {n}"),
    };
    let no_call = |why: &str| {
        CliError::usage(format!("{item} has no {which} on this clone{why}"))
            .hint(format!("stet show {item} tells what is known of it"))
    };
    let mut call = match latest(&repo) {
        Some(call) => call,
        None if !args.follow => return Err(no_call(" yet")),
        None => {
            // Waited for while a drive runs here; the drive's lock says so at once.
            let mut said = false;
            loop {
                if let Some(call) = latest(&repo) {
                    break call;
                }
                if !crate::drive::driving_here(&repo) {
                    return Err(if said {
                        no_call(": the drive here ended without one")
                    } else {
                        no_call(" yet, and no drive runs here to make one").hint(format!(
                            "start stet drive on this clone, then stet log -f {item}; stet show {item} tells what is known of it"
                        ))
                    });
                }
                if !said {
                    printer.note(&format!(
                        "waiting for the first {which} of {item} (a drive runs on this clone)"
                    ));
                    said = true;
                }
                std::thread::sleep(FOLLOW_EVERY);
            }
        }
    };
    // The settings are read for the plugins' search path alone: a broken configuration
    // turns rendering off, never the reading of a log.
    let settings = crate::settings::resolve(plugins_dirs, &Default::default());
    let open = |call: &crate::receipts::Receipt| {
        (!args.raw).then(|| transcript::renderer_for(&settings, call))
    };
    if args.json {
        return log_json(&call, open(&call), printer);
    }
    let mut out = std::io::stdout().lock();
    loop {
        printer.note(&format!(
            "── {} · {} · round {} · receipt {}",
            item,
            call.role,
            call.round.unwrap_or(1),
            call.id
        ));
        let mut shown = LogView::new(open(&call));
        if let Some(why) = shown.why_raw() {
            printer.note(&format!("shown as the agent wrote it: {why}"));
        }
        let mut tail = transcript::Tail::of(&call.log);
        let next = loop {
            // What is there now, all of it, before looking at the call's state.
            shown.show_all(&mut tail, &mut out, printer);
            if !args.follow {
                break None;
            }
            let working = crate::sandbox::owner_alive(&call.owner)
                && crate::lanes::kept(&repo).contains(&item);
            match latest(&repo) {
                // A newer call of the item began: this one is over.
                Some(next) if next.id != call.id => break Some(next),
                // Running, or ended with the drive still on the item: watch for more.
                Some(now) if working => call = now,
                _ => break None,
            }
            std::thread::sleep(FOLLOW_EVERY);
        };
        // One last read of what the call wrote before it ended, then its end.
        shown.show_all(&mut tail, &mut out, printer);
        shown.show(&mut out, printer, &[], true);
        call_stderr(&call.log, printer);
        match next {
            Some(next) => call = next,
            None => break,
        }
    }
    Ok(Exit::Success)
}

/// How `stet log` shows a call's output: rendered (entries through the printer, inert), or
/// as the agent wrote it (`--raw`: bytes made inert).
enum LogView {
    Rendered(crate::transcript::Renderer),
    Raw(Vec<u8>),
}

impl LogView {
    fn new(renderer: Option<crate::transcript::Renderer>) -> LogView {
        match renderer {
            Some(r) => LogView::Rendered(r),
            None => LogView::Raw(Vec::new()),
        }
    }

    fn why_raw(&self) -> Option<&str> {
        match self {
            LogView::Rendered(r) => r.why_raw.as_deref(),
            LogView::Raw(_) => None,
        }
    }

    /// Shows what the log holds now beyond what was shown, all of it.
    fn show_all(
        &mut self,
        tail: &mut crate::transcript::Tail,
        out: &mut impl std::io::Write,
        printer: Printer,
    ) {
        loop {
            let bytes = tail.more();
            if bytes.is_empty() {
                return;
            }
            self.show(out, printer, &bytes, false);
        }
    }

    fn show(&mut self, out: &mut impl std::io::Write, printer: Printer, bytes: &[u8], end: bool) {
        match self {
            LogView::Rendered(r) => {
                let was_rendered = r.why_raw.is_none();
                let entries = r.feed(bytes, end);
                for e in &entries {
                    printer.out(&e.lines());
                }
                if was_rendered {
                    if let Some(why) = &r.why_raw {
                        printer.warn(&format!("the rest is shown as the agent wrote it: {why}"));
                    }
                }
            }
            LogView::Raw(pending) => {
                let mut text = crate::text::inert_bytes(pending, bytes);
                if end && !pending.is_empty() {
                    text.push_str(&crate::text::inert(&String::from_utf8_lossy(pending)));
                    pending.clear();
                }
                let _ = out.write_all(text.as_bytes());
            }
        }
        let _ = out.flush();
    }
}

/// The call's standard error, labelled, on standard error (made inert), when it wrote any.
fn call_stderr(log: &std::path::Path, printer: Printer) {
    use std::io::Write;
    let path = crate::harness::stderr_log_of(log);
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    if size == 0 {
        return;
    }
    printer.note(&format!(
        "── the call's standard error ({})",
        crate::printer::size(size)
    ));
    let mut tail = crate::transcript::Tail::of(&path);
    let mut pending = Vec::new();
    let mut err = std::io::stderr().lock();
    let mut last = b'\n';
    loop {
        let bytes = tail.more();
        let Some(end) = bytes.last() else {
            break;
        };
        last = *end;
        let _ = err.write_all(crate::text::inert_bytes(&mut pending, &bytes).as_bytes());
    }
    let mut rest = crate::text::inert(&String::from_utf8_lossy(&pending)).into_owned();
    if last != b'\n' {
        rest.push('\n');
    }
    let _ = err.write_all(rest.as_bytes());
}

/// `stet log --json`: the call and its rendered entries.
fn log_json(
    call: &crate::receipts::Receipt,
    renderer: Option<crate::transcript::Renderer>,
    printer: Printer,
) -> Result<Exit, CliError> {
    #[derive(Serialize)]
    struct Transcript<'a> {
        item: &'a str,
        receipt: &'a str,
        role: &'a crate::receipts::CallRole,
        round: Option<u32>,
        harness: &'a str,
        rendered: bool,
        why_raw: Option<String>,
        entries: Vec<crate::transcript::Entry>,
        stderr: String,
        stderr_bytes: u64,
    }
    let renderer = renderer.unwrap_or_else(|| crate::transcript::Renderer::raw("--raw"));
    let whole = crate::transcript::whole(call, renderer, u64::MAX);
    printer.json(&Transcript {
        item: &call.item,
        receipt: &call.id,
        role: &call.role,
        round: call.round,
        harness: &call.harness.name,
        rendered: whole.why_raw.is_none(),
        why_raw: whole.why_raw,
        entries: whole.entries,
        stderr: whole.stderr,
        stderr_bytes: whole.stderr_bytes,
    });
    Ok(Exit::Success)
}

/// `stet rm ID`: cancels an item on the remote.
pub fn rm(args: &super::RmArgs, printer: Printer) -> Result<Exit, CliError> {
    use crate::queue_actions::{CancelRefused, Cancelled};
    let repo = repo()?;
    let (items, _) = queue::read(&repo);
    let id = resolve(&items, &args.id)?.id.clone();
    match crate::queue_actions::cancel(&repo, &args.remote, &id, "stet rm", now_unix()) {
        Ok(Cancelled::Now) => {
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
        Ok(Cancelled::Already) => {
            printer.out(&format!("{id} was cancelled already"));
            Ok(Exit::Success)
        }
        Err(CancelRefused::Landed) => Err(CliError::usage(format!(
            "{id} has landed; there is nothing to cancel"
        ))
        .hint("stet clean --remote removes its branch once merged")),
        Err(CancelRefused::Unreachable(e)) => Err(CliError::new(
            Exit::Unusable,
            "the remote cannot be reached",
        )
        .caused_by(e.to_string())
        .hint("check the network and the remote, then run stet rm again")),
    }
}

/// The remote did not answer `stet land`.
fn land_unreachable(e: ReservationError) -> CliError {
    CliError::new(Exit::Unusable, "the remote cannot be reached")
        .caused_by(e.to_string())
        .hint("check the network and the remote, then run stet land again")
}

/// The land step the settings set, and `id`'s landed record on `remote` (its words);
/// refused, saying what to do, when no land step is set or `id` has not landed.
fn land_step_and_record(
    settings: &crate::settings::Settings,
    remote: &Remote<'_>,
    id: &str,
) -> Result<(crate::land::How, String), CliError> {
    let Some(land) = settings.drive_land.as_deref() else {
        return Err(CliError::usage("no land step is set: no configuration file stet acts on sets [drive] land")
            .hint("set [drive] land = \"github\" (or a command) in your config.toml, or in stet.toml and stet trust it"));
    };
    let how = crate::land::How::of(land, settings.drive_pull_request_repo.as_deref());
    if !remote
        .marks_for(id)
        .map_err(land_unreachable)?
        .landed
        .contains(id)
    {
        return Err(CliError::usage(format!(
            "{id} has not landed: there is no land step to make again"
        ))
        .hint("stet drive lands it (its land step runs then); stet queue shows its state"));
    }
    let note = remote
        .landed_notes(&[id], None)
        .map_err(land_unreachable)?
        .remove(id)
        .unwrap_or_default();
    Ok((how, note))
}

/// `stet land ID`: makes a landed item's land step again (its pull request, or the land
/// command), when its drive's failed; records what it did in the item's landed record.
pub fn land(
    settings: &crate::settings::Settings,
    args: &super::LandArgs,
    printer: Printer,
) -> Result<Exit, CliError> {
    let repo = repo()?;
    let (items, _) = queue::read(&repo);
    let item = resolve(&items, &args.id)?;
    let id = item.id.clone();
    let remote = Remote {
        repo: &repo,
        name: &args.remote,
    };
    let (how, note) = land_step_and_record(settings, &remote, &id)?;
    let before = crate::land::recorded(&note);
    // What `--json` prints: the item, what was done, its pull request.
    let said = |done: &str, pull_request: Option<&str>, line: String| {
        if args.json {
            #[derive(Serialize)]
            struct Landed<'a> {
                id: &'a str,
                handle: &'a str,
                done: &'a str,
                pull_request: Option<&'a str>,
            }
            printer.json(&Landed {
                id: &id,
                handle: queue::handle_of(&id),
                done,
                pull_request,
            });
        } else {
            printer.out(&line);
        }
    };
    if let Some(url) = &before.pull_request {
        said(
            "already",
            Some(url),
            format!("{id}: its pull request is {url} already"),
        );
        return Ok(Exit::Success);
    }
    // A land command that succeeded left no failure in the record: it is the person's
    // (a deploy, a merge) and is not run twice.
    if matches!(how, crate::land::How::Command(_)) && before.failed.is_none() {
        said(
            "already",
            None,
            format!("{id}: its land command succeeded already (its record says no failure); nothing to make again"),
        );
        return Ok(Exit::Success);
    }
    let branch = crate::lanes::branch_of(&id);
    let Some(base) = crate::base::known(&repo, &args.remote) else {
        return Err(CliError::usage(format!(
            "this clone knows no branch of {} that lanes branch from",
            args.remote
        ))
        .hint(format!(
            "git fetch {}, then run stet land again",
            args.remote
        )));
    };
    let (receipts, _) = crate::receipts::read_all(&repo);
    let outcome = crate::land::land(
        &crate::land::Landing {
            repo: &repo,
            item,
            branch: &branch,
            base: &base.branch,
            remote: &args.remote,
            again: true,
        },
        &how,
        &receipts,
    );
    // The record's first line (where it landed) stays; what the land step did is new.
    let landed = note
        .lines()
        .next()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| format!("landed {branch}"));
    let record = crate::land::record(&landed, &outcome, Some(&how));
    remote.mark_landed(&id, &record).map_err(land_unreachable)?;
    match outcome {
        Ok(Some(pr)) if pr.reused => {
            said(
                "found-open",
                Some(&pr.url),
                format!(
                    "{id}: pull request {} was open for {branch} already",
                    pr.url
                ),
            );
            Ok(Exit::Success)
        }
        Ok(Some(pr)) => {
            said(
                "opened",
                Some(&pr.url),
                format!("{id}: opened pull request {}", pr.url),
            );
            Ok(Exit::Success)
        }
        Ok(None) => {
            said("ran", None, format!("{id}: the land command succeeded"));
            Ok(Exit::Success)
        }
        Err(why) => Err(CliError::new(
            Exit::GaveUp,
            format!(
                "{id}: {}; the branch {branch} stays pushed",
                crate::land::recorded(&record).failed.unwrap_or(why)
            ),
        )
        .hint(format!("fix what it says, then run stet land {id} again"))),
    }
}
