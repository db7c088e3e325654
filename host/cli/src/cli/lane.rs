//! Into and out of an item's lane: `stet shell` (a shell in a sandbox on it), `stet diff`
//! (its change alone), `stet checkout` and `stet merge` (its branch in the person's own
//! working copy).

use super::error::{CliError, Exit};
use super::queue::{repo, resolve};
use super::{CheckoutArgs, DiffArgs, MergeArgs, ShellArgs};
use crate::lanes::{self, Reopened, TakeError};
use crate::printer::Printer;
use crate::queue;
use crate::sandbox;
use crate::settings::Settings;

/// The item `given` names, by the queue of the repository here; else, when no queue file
/// names it (an item archived or removed), by the lane branches this clone or `remote`
/// has — its work is still there to show and take.
fn item_of(repo: &std::path::Path, given: &str, remote: &str) -> Result<queue::Item, CliError> {
    use crate::handles::Named;
    match crate::handles::named(repo, remote, given) {
        Named::One(item) => Ok(item),
        // Nowhere: the queue's refusal says what to do.
        Named::None => resolve(&[], given).cloned(),
        Named::Many(many) => resolve(&many, given).cloned(),
    }
}

fn item(repo: &std::path::Path, given: &str, remote: &str) -> Result<String, CliError> {
    Ok(item_of(repo, given, remote)?.id)
}

fn git_failed(e: lanes::GitError) -> CliError {
    CliError::failure("git failed").caused_by(e.to_string())
}

/// `stet shell ID`.
pub fn shell(settings: &Settings, args: &ShellArgs, printer: Printer) -> Result<Exit, CliError> {
    if !sandbox::terminal::on_terminal() {
        return Err(
            CliError::usage("stet shell needs a terminal: standard input is not one")
                .hint("run it in your own terminal; from a script, stet run -- CMD runs a command in a sandbox"),
        );
    }
    let repo = repo()?;
    let item = &item_of(&repo, &args.id, &args.remote)?;
    let id = item.id.clone();
    // A lane a drive works now is the agent's: a shell there would race it, and the
    // drive would commit the person's edits as the agent's work.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (rows, unreachable) =
        crate::story::states(&repo, std::slice::from_ref(item), &args.remote, now)?;
    let state = rows.first().map(|r| r.state).unwrap_or_default();
    if let Some(note) = unreachable {
        printer.warn(&format!(
            "{note}: whether a drive works {id} now is not known"
        ));
    }
    if state == crate::story::ItemState::Reserved {
        let row = &rows[0];
        return Err(CliError::new(
            Exit::Unusable,
            format!(
                "a drive is working {id} now{}: a shell in its lane would race the agent",
                row.holder
                    .as_deref()
                    .map(|h| format!(" (held by {h})"))
                    .unwrap_or_default()
            ),
        )
        .hint("wait until it is done with the item (stet queue shows its state), then run stet shell again"));
    }
    let bounds = lanes::disk::bounds(settings);
    let Some((lane, from)) = lanes::reopen(&repo, &args.remote, &id, bounds).map_err(git_failed)?
    else {
        return Err(CliError::usage(format!(
            "{id} has no lane on this clone and no branch {} here or on {}",
            lanes::branch_of(&id),
            args.remote
        ))
        .hint(format!(
            "no drive has worked it yet: stet drive takes it up (stet show {} tells its state)",
            queue::handle_of(&id)
        )));
    };
    match from {
        Reopened::Kept => {}
        Reopened::Local => printer.note(&format!(
            "opened {id}'s lane again from the local branch {}",
            lane.branch
        )),
        Reopened::Remote => printer.note(&format!(
            "opened {id}'s lane again from {}'s branch {}",
            args.remote, lane.branch
        )),
    }
    let runtime = sandbox::open_runtime(settings)?;
    for line in runtime.selection.lines() {
        printer.detail(&line);
    }
    printer.note(&format!(
        "a shell in a fresh {} sandbox on {} (only the lane writable, no network); exit to leave",
        runtime.name,
        lane.dir.display()
    ));
    let ended = sandbox::shell::run(settings, &runtime, &lane)?;
    printer.note(&format!(
        "your edits are in {}; stet diff {} shows them (nothing was committed or pushed)",
        lane.dir.display(),
        queue::handle_of(&id)
    ));
    if state != crate::story::ItemState::Landed {
        printer.note(&format!(
            "a drive that works {id} again starts from the lane's last commit: what is uncommitted there is removed"
        ));
    }
    match ended.signal {
        Some(signal) => Ok(Exit::Passthrough(128 + signal as u8)),
        None => Ok(super::run::passthrough(&ended.status?)),
    }
}

/// `stet diff ID`.
pub fn diff(args: &DiffArgs, printer: Printer) -> Result<Exit, CliError> {
    let repo = repo()?;
    let id = item(&repo, &args.id, &args.remote)?;
    let Some(change) = lanes::change(&repo, &args.remote, &id).map_err(git_failed)? else {
        return Err(CliError::usage(format!(
            "{id} has no lane on this clone and no branch {} here or on {}",
            lanes::branch_of(&id),
            args.remote
        ))
        .hint(format!(
            "there is no change yet: stet show {} tells its state",
            queue::handle_of(&id)
        )));
    };
    if args.json {
        return diff_json(&repo, &id, &change, printer);
    }
    let mut out = crate::printer::diff::DiffOut::open();
    let mut write_error = None;
    change
        .stream(&repo, &mut |piece| {
            if write_error.is_none() {
                if let Err(e) = out.piece(piece) {
                    write_error = Some(e);
                }
            }
        })
        .map_err(git_failed)?;
    match write_error {
        // A reader that left (`stet diff ID | head`) ends the output quietly.
        Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(Exit::Success),
        Some(e) => Err(CliError::failure(format!("cannot write the diff: {e}"))),
        None => {
            let _ = out.finish();
            Ok(Exit::Success)
        }
    }
}

/// The most of a patch `stet diff --json` holds (as `stet show --diff` does).
const MAX_JSON_PATCH: usize = 8 * 1024 * 1024;

/// `stet diff ID --json`: the patch as text (the agent's, so bounded and never coloured;
/// JSON escapes what a terminal would act on).
fn diff_json(
    repo: &std::path::Path,
    id: &str,
    change: &lanes::Change,
    printer: Printer,
) -> Result<Exit, CliError> {
    let mut patch = Vec::new();
    let mut cut_bytes: u64 = 0;
    change
        .stream(repo, &mut |piece| {
            let room = MAX_JSON_PATCH.saturating_sub(patch.len());
            let take = piece.len().min(room);
            patch.extend_from_slice(&piece[..take]);
            cut_bytes += (piece.len() - take) as u64;
        })
        .map_err(git_failed)?;
    #[derive(serde::Serialize)]
    struct Diffed<'a> {
        id: &'a str,
        handle: &'a str,
        patch: String,
        cut_bytes: u64,
    }
    printer.json(&Diffed {
        id,
        handle: queue::handle_of(id),
        patch: String::from_utf8_lossy(&patch).into_owned(),
        cut_bytes,
    });
    Ok(Exit::Success)
}

/// What `stet checkout --json` and `stet merge --json` print.
#[derive(serde::Serialize)]
struct TakenJson<'a> {
    id: &'a str,
    handle: &'a str,
    branch: &'a str,
    commit: &'a str,
    done: &'static str,
}

/// What a refusal to take a branch says.
fn refused(e: TakeError, id: &str, command: &str, remote: &str) -> CliError {
    match e {
        TakeError::Dirty(lines) => CliError::usage(format!(
            "the working copy has uncommitted changes: {}",
            lines
                .iter()
                .map(|l| l.trim())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .hint(format!(
            "commit them, or put them aside with git stash, then run stet {command} {id} again"
        )),
        TakeError::NoBranch(branch) => CliError::usage(format!(
            "{id} has no branch {branch} here or on {remote}"
        ))
        .hint(format!(
            "there is no work of it to take yet: stet show {} tells its state",
            queue::handle_of(id)
        )),
        TakeError::Elsewhere {
            branch,
            here,
            there,
        } => CliError::usage(format!(
            "a local branch {branch} exists at {}, and the remote's is at {}",
            short(&here),
            short(&there)
        ))
        .hint(format!(
            "git switch {branch} to use the local one, or git branch -m {branch} OTHER-NAME to keep it and run stet {command} {id} again"
        )),
        TakeError::CarriesRepository(words) => CliError::new(Exit::Failure, words).hint(format!(
            "stet takes no branch that would put a repository into your working copy; look at it with git ls-tree -r {} and stet retry {} to work it again",
            lanes::branch_of(id),
            queue::handle_of(id)
        )),
        TakeError::Conflict(files) => CliError::new(
            Exit::Failure,
            format!("the merge of {} stopped on conflicts in: {}", lanes::branch_of(id), files.join(", ")),
        )
        .hint("resolve them and git commit, or git merge --abort to go back"),
        TakeError::Git(e) => git_failed(e),
    }
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// `stet checkout ID`.
pub fn checkout(args: &CheckoutArgs, printer: Printer) -> Result<Exit, CliError> {
    let repo = repo()?;
    let id = item(&repo, &args.id, &args.remote)?;
    let taken = lanes::checkout(&repo, &args.remote, &id)
        .map_err(|e| refused(e, &id, "checkout", &args.remote))?;
    let line = format!(
        "{} {} at {}",
        if taken.already {
            "already on"
        } else {
            "switched to"
        },
        taken.branch,
        short(&taken.commit)
    );
    say_taken(&id, &taken, "switched", line, args.json, printer)
}

/// What checkout and merge say they did: `line`, or as JSON (`done` is `did`, or
/// `already`).
fn say_taken(
    id: &str,
    taken: &lanes::Taken,
    did: &'static str,
    line: String,
    json: bool,
    printer: Printer,
) -> Result<Exit, CliError> {
    if json {
        printer.json(&TakenJson {
            id,
            handle: queue::handle_of(id),
            branch: &taken.branch,
            commit: &taken.commit,
            done: if taken.already { "already" } else { did },
        });
    } else {
        printer.out(&line);
    }
    Ok(Exit::Success)
}

/// `stet merge ID`.
pub fn merge(args: &MergeArgs, printer: Printer) -> Result<Exit, CliError> {
    let repo = repo()?;
    let id = item(&repo, &args.id, &args.remote)?;
    let taken = lanes::merge(&repo, &args.remote, &id)
        .map_err(|e| refused(e, &id, "merge", &args.remote))?;
    let line = if taken.already {
        format!(
            "{} at {} is merged already",
            taken.branch,
            short(&taken.commit)
        )
    } else {
        format!(
            "merged {} at {} into the current branch",
            taken.branch,
            short(&taken.commit)
        )
    };
    say_taken(&id, &taken, "merged", line, args.json, printer)
}
