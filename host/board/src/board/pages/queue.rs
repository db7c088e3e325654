//! The queue: every item by state, filtered and searched on the server, a page of
//! [`PER_PAGE`] at a time (a queue of 10,000 items is one snapshot in memory, and a page of
//! it is drawn in well under the 50 ms the benchmark holds it to).

use crate::story::ItemState;
use axum::extract::{Query, State};
use axum::response::Html;
use axum::Extension;
use serde::Deserialize;

use super::{render, Chrome, PageError};
use crate::board::auth::Session;
use crate::board::Shared;
use crate::story::Row;

/// Items on a page.
pub const PER_PAGE: usize = 100;

/// The states a person filters by, in the order the page lists them. `reserved` and
/// `lapsed` are both "in a lane".
pub const STATES: [ItemState; 7] = ItemState::ALL;

/// What the address asks.
#[derive(Debug, Default, Deserialize)]
pub struct Ask {
    /// One state, or none for every item.
    #[serde(default)]
    pub state: Option<String>,
    /// Words the handle, id or title contains (case does not matter).
    #[serde(default)]
    pub q: Option<String>,
    /// The page, from 1.
    #[serde(default)]
    pub page: Option<usize>,
}

/// One item as the page lists it.
pub struct Line<'a> {
    pub row: &'a Row,
    /// What is known beyond the state: the lane's stage and holder, where it landed, why it
    /// failed.
    pub detail: String,
}

#[derive(askama::Template)]
#[template(path = "board/queue.html")]
pub struct QueuePage<'a> {
    pub chrome: Chrome,
    /// Each state with how many items are in it.
    pub counts: Vec<(&'static str, usize)>,
    pub total: usize,
    pub state: &'a str,
    pub q: &'a str,
    pub lines: Vec<Line<'a>>,
    /// Items matching, on every page.
    pub matching: usize,
    pub page: usize,
    pub pages: usize,
    /// Queue files that could not be read.
    pub malformed: &'a [String],
}

impl QueuePage<'_> {
    /// The address of page `page` with the same filter.
    pub fn href(&self, page: usize) -> String {
        let mut query = vec![format!("page={page}")];
        if !self.state.is_empty() {
            query.push(format!("state={}", encode(self.state)));
        }
        if !self.q.is_empty() {
            query.push(format!("q={}", encode(self.q)));
        }
        format!("/queue?{}", query.join("&"))
    }
}

/// Percent-encodes a query value.
pub fn encode(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What the page says of an item beyond its state.
pub fn detail_of(row: &Row) -> String {
    match row.state {
        ItemState::Reserved | ItemState::Lapsed => {
            let mut parts = Vec::new();
            if let Some(stage) = &row.stage {
                parts.push(format!("at {stage}"));
            }
            if let Some(holder) = &row.holder {
                parts.push(format!("held by {holder}"));
            }
            if let Some(until) = row.until_unix {
                parts.push(format!(
                    "{} {}",
                    if row.state == ItemState::Lapsed {
                        "lapsed"
                    } else {
                        "until"
                    },
                    crate::drive::clock(until)
                ));
            }
            parts.join(", ")
        }
        ItemState::Landed => match (&row.pull_request, &row.land_failed, &row.lane) {
            (_, Some(failed), _) => failed.clone(),
            (Some(pr), None, _) => format!("pull request {pr}"),
            (None, None, Some(lane)) => format!("branch {lane}"),
            (None, None, None) => String::new(),
        },
        ItemState::Failed => row.why.clone().unwrap_or_default(),
        _ => row.reason.clone().unwrap_or_default(),
    }
}

/// Whether `row` matches the words `q` (already lowercase).
fn matches(row: &Row, q: &str) -> bool {
    q.split_whitespace().all(|word| {
        row.handle.to_lowercase().contains(word)
            || row.id.to_lowercase().contains(word)
            || row.title.to_lowercase().contains(word)
    })
}

/// The longest search taken, in characters and in words: a search is a few words, and a
/// longer one would only hold a thread.
pub const MAX_SEARCH_CHARS: usize = 200;
pub const MAX_SEARCH_WORDS: usize = 16;

pub async fn page(
    State(board): State<Shared>,
    Extension(session): Extension<Session>,
    Query(ask): Query<Ask>,
) -> Result<Html<String>, PageError> {
    // Filtering 10,000 rows is work: off the async thread, so no search holds another page
    // (or a stop).
    tokio::task::spawn_blocking(move || draw(&board, &session, &ask))
        .await
        .map_err(|e| PageError::internal(format!("the queue page could not be drawn: {e}")))?
}

fn draw(board: &Shared, session: &Session, ask: &Ask) -> Result<Html<String>, PageError> {
    let snapshot = board.model.snapshot();
    let state = ask.state.as_deref().unwrap_or("").trim();
    if !state.is_empty() && ItemState::from_word(state).is_none() {
        return Err(PageError::bad_request(format!(
            "there is no state {state:?}: the states are {}",
            STATES
                .iter()
                .map(|s| s.word())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let q = ask.q.as_deref().unwrap_or("").trim();
    if q.chars().count() > MAX_SEARCH_CHARS || q.split_whitespace().count() > MAX_SEARCH_WORDS {
        return Err(PageError::bad_request(format!(
            "that search is too long: search for at most {MAX_SEARCH_WORDS} words of \
             {MAX_SEARCH_CHARS} characters in all (a handle, an id or words of a title)"
        )));
    }
    let lower = q.to_lowercase();
    let matching: Vec<&Row> = snapshot
        .rows
        .iter()
        .filter(|r| state.is_empty() || r.state.word() == state)
        .filter(|r| lower.is_empty() || matches(r, &lower))
        .collect();
    let pages = matching.len().div_ceil(PER_PAGE).max(1);
    let page = ask.page.unwrap_or(1).clamp(1, pages);
    let lines = matching
        .iter()
        .skip((page - 1) * PER_PAGE)
        .take(PER_PAGE)
        .map(|row| Line {
            row,
            detail: detail_of(row),
        })
        .collect();
    let counts = STATES
        .iter()
        .map(|s| {
            (
                s.word(),
                snapshot.rows.iter().filter(|r| r.state == *s).count(),
            )
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    render(&QueuePage {
        chrome: Chrome::of(board, session, "queue"),
        counts,
        total: snapshot.rows.len(),
        state,
        q,
        lines,
        matching: matching.len(),
        page,
        pages,
        malformed: &snapshot.malformed,
    })
}
