//! An item's story (`/item/{id}`): its text, its state, each round's calls and checks, the
//! prompt each call received (`/item/{id}/prompt/{n}`), each call's transcript rendered by
//! its harness as `stet log` renders it (`/item/{id}/call/{receipt}`), its lane's diff and
//! the hosts its calls were refused; and the actions on it — add (from the queue page),
//! retry and cancel — each through the function the CLI's command calls.
//!
//! Everything read here is read on a blocking thread (git, receipts, logs, a harness
//! plugin), bounded; everything shown that an item, an agent, a check or a diff holds goes
//! through the template's escaping, made inert first (control characters and bidirectional
//! overrides written out, as the terminal shows them).

use crate::story::ItemState;
use std::time::Duration;

use axum::extract::rejection::FormRejection;
use axum::extract::{Path, Query, State};
use axum::response::{Html, Redirect};
use axum::{Extension, Form};
use serde::Deserialize;

use super::{render, Chrome, PageError};
use crate::board::auth::{form_token_ok, Session};
use crate::board::Shared;
use crate::handles::Named;
use crate::queue::Item;
use crate::story::{Row, Step};

/// The most of a lane's diff a page shows (`stet diff` prints all of it).
pub const SHOWN_DIFF: usize = 2 << 20;
/// The most of a call's log a transcript page reads (`stet log` reads all of it).
pub const SHOWN_LOG: u64 = 4 << 20;
/// How long an action waits for the board's next read of the remote, so the page it leads
/// to shows its effect.
const AFTER_ACTION: Duration = Duration::from_secs(5);

/// Text from others, made inert (as a terminal shows it) for the template to escape.
fn inert(text: &str) -> String {
    crate::text::inert(text).into_owned()
}

/// What the address may say after an action: a fixed code, never free text.
#[derive(Debug, Default, Deserialize)]
pub struct Ask {
    #[serde(default)]
    pub done: Option<String>,
}

/// What an action did, as the page says it (the code is the `done` of its redirect).
fn said(done: &str, handle: &str) -> Option<String> {
    Some(match done {
        "added" => format!("Added {handle} to the queue file here."),
        "added-not-claimed" => format!(
            "Added {handle} to the queue file here; its handle is not claimed on the remote (it \
             did not answer), so another clone may give it to another item meanwhile (both stay \
             reachable by id)."
        ),
        "retried" => format!(
            "Retried: {handle} is no longer failed or cancelled; the next stet drive takes it up \
             (its lane, if pushed, resumes)."
        ),
        "retry-already" => format!(
            "{handle} was neither failed nor cancelled already: the next stet drive takes it up."
        ),
        "retry-landed" => format!(
            "{handle} has landed; there is nothing to retry: add a new item for more work on it."
        ),
        "cancelled" => format!(
            "Cancelled {handle}: no drive takes it, and a drive working it stops at its next \
             move. Its file stays in .stet/queue (git rm it when you like); stet clean removes \
             what it left on a clone."
        ),
        "cancel-already" => format!("{handle} was cancelled already."),
        "cancel-landed" => format!("{handle} has landed; there is nothing to cancel."),
        _ => return None,
    })
}

/// One call or check as the page lists it.
pub struct StepView {
    pub receipt: String,
    pub role: String,
    pub outcome: String,
    /// An agent call (it has a transcript), not a check.
    pub call: bool,
    pub started: String,
    pub took: String,
    pub cost: String,
    /// Its usage counters, `name value` joined.
    pub tokens: String,
    /// The reviewer's words, or why the call or check did not do what it was asked.
    pub words: String,
    /// The last lines of a check's output.
    pub tail: String,
    /// The call's number and its prompt's size, when it kept its prompt.
    pub prompt: Option<(u32, String)>,
    /// What the network wall refused it.
    pub blocked: Vec<String>,
}

impl StepView {
    fn of(step: &Step) -> StepView {
        let check = step.role == crate::receipts::CallRole::Check;
        // As `stet show` tells a step: a check's output is its tail; a review's detail is
        // the reviewer's words; any other call's detail, when it did not end done.
        let words = if !step.detail.is_empty()
            && step.tail.is_empty()
            && (step.role == crate::receipts::CallRole::Review
                || step.outcome != crate::receipts::Outcome::Done)
        {
            inert(&step.detail)
        } else {
            String::new()
        };
        StepView {
            receipt: step.receipt.clone(),
            role: step.role.to_string(),
            outcome: step.outcome.to_string(),
            call: !check,
            started: crate::printer::rfc3339_ms(step.started_unix_ms),
            took: crate::printer::duration(step.seconds),
            cost: step
                .cost_usd
                .map(|c| format!("${c:.4}"))
                .unwrap_or_default(),
            tokens: step
                .usage
                .iter()
                .map(|(k, v)| inert(&format!("{k} {v}")))
                .collect::<Vec<_>>()
                .join(", "),
            words,
            tail: inert(&step.tail.join("\n")),
            prompt: match (step.call, &step.prompt) {
                (Some(n), Some(kept)) => Some((n, crate::printer::size(kept.bytes))),
                _ => None,
            },
            blocked: step
                .network_blocked
                .iter()
                .map(|b| inert(&format!("{} ×{} ({})", b.target, b.count, b.why)))
                .collect(),
        }
    }
}

/// A round as the page lists it.
pub struct RoundView {
    pub round: u32,
    pub steps: Vec<StepView>,
}

/// One line of a diff, with its class for colour (`add`, `del`, `hunk`, `meta`, `ctx`).
pub struct DiffLine {
    pub class: &'static str,
    pub text: String,
}

/// One file's part of a diff.
pub struct FileDiff {
    /// Its place in the list, for the anchor (a file's name is the agent's: never an id).
    pub n: usize,
    pub name: String,
    pub added: usize,
    pub removed: usize,
    pub lines: Vec<DiffLine>,
}

/// Splits a unified diff (git's) into its files, each line classed.
pub fn files_of(diff: &str) -> Vec<FileDiff> {
    let mut files: Vec<FileDiff> = Vec::new();
    let mut in_header = true;
    for line in diff.lines() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            files.push(FileDiff {
                n: files.len() + 1,
                // Until the `+++`/`---` lines name it: `a/x b/x`.
                name: inert(
                    rest.split(" b/")
                        .next()
                        .unwrap_or(rest)
                        .trim_start_matches("a/"),
                ),
                added: 0,
                removed: 0,
                lines: Vec::new(),
            });
            in_header = true;
        }
        if files.is_empty() {
            files.push(FileDiff {
                n: 1,
                name: String::new(),
                added: 0,
                removed: 0,
                lines: Vec::new(),
            });
        }
        let file = files.last_mut().expect("one file at least");
        let class = if in_header {
            if let Some(name) = line.strip_prefix("+++ b/") {
                file.name = inert(name);
            } else if let Some(name) = line.strip_prefix("--- a/") {
                file.name = inert(name);
            }
            if line.starts_with("@@") {
                in_header = false;
                "hunk"
            } else {
                "meta"
            }
        } else if line.starts_with("@@") {
            "hunk"
        } else if line.starts_with('+') {
            file.added += 1;
            "add"
        } else if line.starts_with('-') {
            file.removed += 1;
            "del"
        } else if line.starts_with("\\ ") || line.starts_with("[stet:") {
            "meta"
        } else {
            "ctx"
        };
        file.lines.push(DiffLine {
            class,
            text: inert(line),
        });
    }
    files
}

/// The lane's change as the page shows it.
pub struct DiffView {
    /// The branch (or lane) it is read from, as a person names it.
    pub from: String,
    pub files: Vec<FileDiff>,
    /// Why there is none, or what was left out.
    pub note: Option<String>,
}

/// The story page.
#[derive(askama::Template)]
#[template(path = "board/item.html")]
pub struct ItemPage {
    pub chrome: Chrome,
    pub item: Item,
    /// Its queue file is gone: it is known by its lane branch alone.
    pub archived: bool,
    pub row: Row,
    pub detail: String,
    /// The item's file, relative to the repository.
    pub file: String,
    pub text: String,
    pub flash: Option<String>,
    /// The git command that puts an item added here on the remote, while it is only here.
    pub push_hint: Option<String>,
    pub rounds: Vec<RoundView>,
    pub diff: DiffView,
    pub remote: String,
}

impl ItemPage {
    pub fn can_retry(&self) -> bool {
        !self.archived && matches!(self.row.state, ItemState::Failed | ItemState::Cancelled)
    }

    pub fn can_cancel(&self) -> bool {
        !self.archived && !matches!(self.row.state, ItemState::Landed | ItemState::Cancelled)
    }
}

/// The item `given` names (an id, a handle, a unique start of either; else an item known
/// by its lane branch), as the CLI resolves it, or the page that says why not.
fn named(board: &Shared, given: &str) -> Result<(Item, bool), PageError> {
    let repo = &board.options.repo;
    match crate::handles::named(repo, &board.options.remote, given) {
        Named::One(item) => {
            let archived = item.path.as_os_str().is_empty();
            Ok((item, archived))
        }
        Named::None => Err(PageError::not_found(format!(
            "there is no item {} in the queue, nor a lane branch of one: the queue page lists \
             the items, their handles and ids (any unique start of either will do)",
            inert(given)
        ))),
        Named::Many(many) => Err(PageError::bad_request(format!(
            "`{}` names {} items: {}; give more of the handle, or the id",
            inert(given),
            many.len(),
            many.iter()
                .map(|i| format!("{} ({})", i.handle, i.id))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Runs blocking work (git, files, a plugin) off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, PageError> + Send + 'static,
) -> Result<T, PageError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| PageError::internal(format!("reading the item failed: {e}")))?
}

/// The item's file relative to the repository.
fn relative(repo: &std::path::Path, path: &std::path::Path) -> String {
    path.strip_prefix(repo)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Reads the story of `given` (blocking).
fn story(board: &Shared, session: &Session, given: &str) -> Result<ItemPage, PageError> {
    let repo = board.options.repo.clone();
    let remote = board.options.remote.clone();
    let (item, archived) = named(board, given)?;
    // The board's snapshot has the row of an item in the queue (the refresh after an
    // action made it); an archived one is asked of the remote now.
    let snapshot = board.model.snapshot();
    let row = match snapshot.row(&item.id) {
        Some(row) => row.clone(),
        None => {
            let (mut rows, _) = crate::story::states(
                &repo,
                std::slice::from_ref(&item),
                &remote,
                crate::board::model::now_unix(),
            )
            .map_err(|e| PageError::internal(format!("the item's state cannot be read: {e}")))?;
            let mut row = rows.remove(0);
            crate::board::model::inert_row(&mut row);
            row
        }
    };
    let rounds = crate::story::rounds(&repo, &item.id)
        .into_iter()
        .map(|r| RoundView {
            round: r.round,
            steps: r.steps.iter().map(StepView::of).collect(),
        })
        .collect();
    let diff = diff_of(&repo, &remote, &item.id, snapshot.remote_note.is_some());
    let file = relative(&repo, &item.path);
    let push_hint = (row.here == Some("only-here")).then(|| {
        format!(
            "git add {file} && git commit -m 'queue {}' && git push",
            item.handle
        )
    });
    Ok(ItemPage {
        chrome: Chrome::of(board, session, "queue"),
        detail: inert(&crate::story::detail_of(&row)),
        text: inert(item.text.trim_end()),
        file,
        push_hint,
        archived,
        row,
        item,
        flash: None,
        rounds,
        diff,
        remote,
    })
}

/// The lane's change, as `stet diff` reads it (the kept lane's working tree, else its
/// branch here or on the remote), bounded.
fn diff_of(repo: &std::path::Path, remote: &str, id: &str, remote_silent: bool) -> DiffView {
    let branch = crate::lanes::branch_of(id);
    let change = match crate::lanes::change(repo, remote, id) {
        Ok(Some(change)) => change,
        Ok(None) => {
            return DiffView {
                from: branch.clone(),
                files: Vec::new(),
                note: Some(if remote_silent {
                    format!("The lane's branch {branch} is not on this clone, and {remote} did not answer.")
                } else {
                    format!("The lane's branch {branch} is neither on this clone nor on {remote}: no drive pushed a change of it yet.")
                }),
            }
        }
        Err(e) => {
            return DiffView {
                from: branch,
                files: Vec::new(),
                note: Some(format!(
                    "git could not read the lane's change: {}",
                    inert(&e.to_string())
                )),
            }
        }
    };
    let from = match &change {
        crate::lanes::Change::Lane { .. } => format!("the lane kept here ({branch})"),
        crate::lanes::Change::Branch { .. } => crate::story::lane_ref(repo, remote, id)
            .map(|(_, name)| name)
            .unwrap_or(branch),
    };
    let mut kept = Vec::new();
    let mut left_out = 0u64;
    let streamed = change.stream(repo, &mut |piece| {
        let room = SHOWN_DIFF.saturating_sub(kept.len());
        let take = piece.len().min(room);
        kept.extend_from_slice(&piece[..take]);
        left_out += (piece.len() - take) as u64;
    });
    if let Err(e) = streamed {
        return DiffView {
            from,
            files: Vec::new(),
            note: Some(format!(
                "git could not read the lane's change: {}",
                inert(&e.to_string())
            )),
        };
    }
    let text = String::from_utf8_lossy(&kept);
    let files = files_of(&text);
    let note = if files.is_empty() {
        Some("It holds no change against its base.".to_string())
    } else if left_out > 0 {
        Some(format!(
            "{} more of the diff not shown: stet diff {id} prints all of it.",
            crate::printer::size(left_out)
        ))
    } else {
        None
    };
    DiffView { from, files, note }
}

/// `GET /item/{id}`.
pub async fn page(
    State(board): State<Shared>,
    Extension(session): Extension<Session>,
    Path(id): Path<String>,
    Query(ask): Query<Ask>,
) -> Result<Html<String>, PageError> {
    let mut page = blocking(move || story(&board, &session, &id)).await?;
    page.flash = ask
        .done
        .as_deref()
        .and_then(|done| said(done, &page.item.handle));
    render(&page)
}

/// The prompt page.
#[derive(askama::Template)]
#[template(path = "board/item_prompt.html")]
pub struct PromptPage {
    pub chrome: Chrome,
    pub id: String,
    pub handle: String,
    pub n: u32,
    pub round: u32,
    pub role: String,
    pub receipt: String,
    pub text: String,
}

/// `GET /item/{id}/prompt/{n}`: what the item's n-th agent call was asked, as kept.
pub async fn prompt(
    State(board): State<Shared>,
    Extension(session): Extension<Session>,
    Path((id, n)): Path<(String, u32)>,
) -> Result<Html<String>, PageError> {
    let shared = board.clone();
    let (item, prompt) = blocking(move || {
        let (item, _) = named(&shared, &id)?;
        let prompt = crate::story::prompt(&shared.options.repo, &item.id, n)
            .map_err(|e| PageError::not_found(inert(&e.to_string())))?;
        Ok((item, prompt))
    })
    .await?;
    render(&PromptPage {
        chrome: Chrome::of(&board, &session, "queue"),
        id: item.id,
        handle: item.handle,
        n,
        round: prompt.round,
        role: prompt.step.role.to_string(),
        receipt: prompt.step.receipt,
        text: inert(prompt.text.trim_end()),
    })
}

/// One entry of a transcript as the page shows it: its kind (for its class) and its lines
/// as `stet log` lays them out.
pub struct EntryView {
    pub kind: String,
    pub lines: String,
}

/// A call's transcript page.
#[derive(askama::Template)]
#[template(path = "board/item_call.html")]
pub struct CallPage {
    pub chrome: Chrome,
    pub id: String,
    pub handle: String,
    pub receipt: String,
    pub role: String,
    pub round: u32,
    pub harness: String,
    pub outcome: String,
    pub why_raw: Option<String>,
    pub entries: Vec<EntryView>,
    pub stderr: String,
    pub stderr_size: String,
    pub left_out: Option<String>,
}

/// `GET /item/{id}/call/{receipt}`: the call's transcript, rendered by the harness its
/// receipt names, loaded as `stet log` loads it (`transcript::whole`), bounded.
pub async fn call(
    State(board): State<Shared>,
    Extension(session): Extension<Session>,
    Path((id, receipt)): Path<(String, String)>,
) -> Result<Html<String>, PageError> {
    let shared = board;
    let page = blocking(move || {
        let (item, _) = named(&shared, &id)?;
        let (receipts, _) = crate::receipts::read_all(&shared.options.repo);
        let Some(call) = receipts
            .into_iter()
            .find(|r| r.id == receipt && r.item == item.id)
        else {
            return Err(PageError::not_found(format!(
                "{} has no receipt {} on this clone: its story page lists its calls",
                item.handle,
                inert(&receipt)
            )));
        };
        if call.role == crate::receipts::CallRole::Check {
            return Err(PageError::not_found(format!(
                "receipt {} is a check's: its output's tail is on the item's page",
                call.id
            )));
        }
        let settings = crate::settings::resolve(&shared.options.plugins_dirs, &Default::default());
        let renderer = crate::transcript::renderer_for(&settings, &call);
        let whole = crate::transcript::whole(&call, renderer, SHOWN_LOG);
        Ok(CallPage {
            chrome: Chrome::of(&shared, &session, "queue"),
            id: item.id,
            handle: item.handle,
            receipt: call.id.clone(),
            role: call.role.to_string(),
            round: call.round.unwrap_or(1),
            harness: inert(&call.harness.name),
            outcome: call.outcome.to_string(),
            why_raw: whole.why_raw.as_deref().map(inert),
            entries: whole
                .entries
                .iter()
                .map(|e| EntryView {
                    kind: e.kind.clone(),
                    lines: inert(&e.lines()),
                })
                .collect(),
            stderr: inert(&whole.stderr),
            stderr_size: crate::printer::size(whole.stderr_bytes),
            left_out: (whole.left_out > 0).then(|| {
                format!(
                    "{} more of the log not read here: stet log {} shows all of it",
                    crate::printer::size(whole.left_out),
                    call.item
                )
            }),
        })
    })
    .await?;
    render(&page)
}

/// A form that carries nothing but its token.
#[derive(Debug, Default, Deserialize)]
pub struct Plain {
    #[serde(default)]
    pub csrf: String,
}

/// The add form.
#[derive(Debug, Default, Deserialize)]
pub struct AddForm {
    #[serde(default)]
    pub csrf: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub text: String,
}

/// The form, when it carries the session's token; else the refusal (a body that is not a
/// form carries none).
fn token_checked<T>(
    session: &Session,
    form: Result<Form<T>, FormRejection>,
    token: impl Fn(&T) -> &String,
) -> Result<T, PageError> {
    match form {
        Ok(Form(form)) if form_token_ok(session, token(&form)) => Ok(form),
        _ => Err(refused()),
    }
}

fn refused() -> PageError {
    PageError::forbidden(
        "this form's token is not this session's: reload the page and submit it again",
    )
}

fn unreachable(command: &str, e: crate::reservations::ReservationError) -> PageError {
    PageError {
        status: axum::http::StatusCode::BAD_GATEWAY,
        message: format!(
            "the remote cannot be reached ({}): check the network and the remote, then {command} again",
            inert(&e.to_string())
        ),
    }
}

/// The item `given` names in the queue here, as `stet retry` and `stet rm` resolve it.
fn in_queue(board: &Shared, given: &str) -> Result<Item, PageError> {
    let (items, _) = crate::queue::read(&board.options.repo);
    match crate::handles::resolve(&items, given) {
        crate::handles::Resolved::One(item) => Ok(item.clone()),
        _ => Err(PageError::not_found(format!(
            "there is no item {} in the queue: the queue page lists the items",
            inert(given)
        ))),
    }
}

/// `POST /add`: `stet add`'s own path (`handles::add`) with the form's title and text.
pub async fn add(
    State(board): State<Shared>,
    Extension(session): Extension<Session>,
    form: Result<Form<AddForm>, FormRejection>,
) -> Result<Redirect, PageError> {
    let form = token_checked(&session, form, |f: &AddForm| &f.csrf)?;
    let title = form.title.trim().to_string();
    if title.is_empty() || title.contains(['\n', '\r']) {
        return Err(PageError::bad_request(
            "say what should be done: the title is one line, such as \"fix the typo in README\"",
        ));
    }
    let text = match form.text.trim() {
        "" => title,
        body => format!("{title}\n\n{body}\n"),
    };
    let shared = board.clone();
    let added = blocking(move || {
        crate::handles::add(&shared.options.repo, &shared.options.remote, &text)
            .map_err(|why| PageError::bad_request(inert(&why)))
    })
    .await?;
    board.model.refresh(AFTER_ACTION).await;
    let done = match added.claim {
        crate::handles::Claim::Claimed => "added",
        crate::handles::Claim::NotClaimed(_) => "added-not-claimed",
    };
    Ok(Redirect::to(&format!(
        "/item/{}?done={done}",
        super::queue::encode(&added.item.id)
    )))
}

/// `POST /item/{id}/retry`: `stet retry`'s own path (`queue_actions::retry`).
pub async fn retry(
    State(board): State<Shared>,
    Extension(session): Extension<Session>,
    Path(id): Path<String>,
    form: Result<Form<Plain>, FormRejection>,
) -> Result<Redirect, PageError> {
    use crate::queue_actions::{Retried, RetryRefused};
    token_checked(&session, form, |f: &Plain| &f.csrf)?;
    let shared = board.clone();
    let (item, outcome) = blocking(move || {
        let item = in_queue(&shared, &id)?;
        let outcome =
            crate::queue_actions::retry(&shared.options.repo, &shared.options.remote, &item.id);
        Ok((item, outcome))
    })
    .await?;
    let done = match outcome {
        Ok(Retried::Cleared(_)) => "retried",
        Ok(Retried::Already) => "retry-already",
        Err(RetryRefused::Landed) => "retry-landed",
        Err(RetryRefused::Unreachable(e)) => return Err(unreachable("retry", e)),
    };
    board.model.refresh(AFTER_ACTION).await;
    Ok(Redirect::to(&format!(
        "/item/{}?done={done}",
        super::queue::encode(&item.id)
    )))
}

/// `POST /item/{id}/cancel`: `stet rm`'s own path (`queue_actions::cancel`).
pub async fn cancel(
    State(board): State<Shared>,
    Extension(session): Extension<Session>,
    Path(id): Path<String>,
    form: Result<Form<Plain>, FormRejection>,
) -> Result<Redirect, PageError> {
    use crate::queue_actions::{CancelRefused, Cancelled};
    token_checked(&session, form, |f: &Plain| &f.csrf)?;
    let shared = board.clone();
    let (item, outcome) = blocking(move || {
        let item = in_queue(&shared, &id)?;
        let outcome = crate::queue_actions::cancel(
            &shared.options.repo,
            &shared.options.remote,
            &item.id,
            "stet board",
            crate::board::model::now_unix(),
        );
        Ok((item, outcome))
    })
    .await?;
    let done = match outcome {
        Ok(Cancelled::Now) => "cancelled",
        Ok(Cancelled::Already) => "cancel-already",
        Err(CancelRefused::Landed) => "cancel-landed",
        Err(CancelRefused::Unreachable(e)) => return Err(unreachable("cancel", e)),
    };
    board.model.refresh(AFTER_ACTION).await;
    Ok(Redirect::to(&format!(
        "/item/{}?done={done}",
        super::queue::encode(&item.id)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_is_split_into_its_files_with_each_line_classed() {
        let diff = "diff --git a/hello.txt b/hello.txt\nnew file mode 100644\n--- /dev/null\n\
                    +++ b/hello.txt\n@@ -0,0 +1 @@\n+hi\ndiff --git a/old b/old\n--- a/old\n\
                    +++ b/old\n@@ -1,2 +1 @@\n-gone\n kept\n";
        let files = files_of(diff);
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].name, "hello.txt");
        assert_eq!((files[0].added, files[0].removed), (1, 0));
        assert_eq!(files[1].name, "old");
        assert_eq!((files[1].added, files[1].removed), (0, 1));
        let classes: Vec<&str> = files[1].lines.iter().map(|l| l.class).collect();
        assert_eq!(classes, ["meta", "meta", "meta", "hunk", "del", "ctx"]);
        assert_eq!(files[0].lines[3].class, "meta", "+++ is the header's");
    }

    #[test]
    fn a_flash_is_one_of_the_boards_own_sentences_or_nothing() {
        assert!(said("retried", "x").unwrap().contains("no longer failed"));
        assert_eq!(said("<script>", "x"), None);
    }
}
