//! The live page: each lane of each drive working this queue — its item, stage, time in
//! stage and the agent's last lines — kept current by server-sent events.
//!
//! This clone's drives publish what they do (`drive/live.rs`: a small file per drive, at
//! each change of a lane); peers' lanes are the reservations of the board's snapshot. The
//! events (`GET /live/events`) look at both at most once a [`TICK`], send the view only
//! when it changed, and end when the board stops; each connection keeps the last view it
//! sent and the few drives it saw end, nothing more.

use crate::story::ItemState;
use std::convert::Infallible;

use std::path::Path;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::Html;
use axum::Extension;
use futures_util::Stream;
use serde::Serialize;

use super::{render, Chrome, PageError};
use crate::board::auth::Session;
use crate::board::model::Snapshot;
use crate::board::Shared;
use crate::drive::live::{self, LiveDrive};

/// How often the drives' files and the snapshot are looked at.
pub const TICK: Duration = Duration::from_secs(1);
/// The agent's last lines shown per lane.
pub const LINES: usize = 20;
/// At most this much of the end of a call's log is read.
pub const TAIL_BYTES: u64 = 256 * 1024;
/// A line longer than this is cut.
const LINE_CHARS: usize = 400;
/// Drives seen ending kept per connection.
const ENDED: usize = 8;

/// What the page shows, and each event carries (as JSON).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct View {
    /// This clone's drives.
    pub drives: Vec<DriveView>,
    /// Lanes of other drives, from the remote's reservations.
    pub peers: Vec<PeerLane>,
    /// Drives this page saw end: a sentence each.
    pub ended: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DriveView {
    pub run: String,
    pub pid: u32,
    /// Its process as `pid:start`: what a stop from the page names, so a process that took
    /// the pid since is never signalled.
    pub owner: String,
    /// When it began, as a time.
    pub started: String,
    pub overall: String,
    pub stopping: Option<String>,
    pub lanes: Vec<LaneView>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaneView {
    /// From 1.
    pub slot: usize,
    pub item: Option<String>,
    pub handle: Option<String>,
    pub title: Option<String>,
    pub stage: String,
    pub since_unix_ms: u64,
    pub round: Option<u32>,
    /// A wait: until when, and why.
    pub waiting: Option<String>,
    /// The running call's last lines, made inert.
    pub lines: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeerLane {
    pub item: String,
    pub handle: String,
    pub title: String,
    /// `reserved` or `lapsed`.
    pub state: ItemState,
    pub stage: String,
    pub holder: String,
    pub until: String,
}

impl LaneView {
    /// How long it has been in its stage, as the page first shows it (the script keeps it
    /// current).
    pub fn for_how_long(&self) -> String {
        let now = crate::board::model::now_unix() as u64 * 1000;
        elapsed(now.saturating_sub(self.since_unix_ms) / 1000)
    }
}

/// `secs` as the page counts them (the script writes the same).
pub fn elapsed(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min {:02} s", secs / 60, secs % 60),
        _ => format!("{} h {:02} min", secs / 3600, (secs % 3600) / 60),
    }
}

/// The view now (blocking: reads files).
pub fn view(repo: &Path, snapshot: &Snapshot) -> View {
    let drives: Vec<DriveView> = live::running(repo)
        .into_iter()
        .map(|d| drive_view(repo, snapshot, d))
        .collect();
    let worked: std::collections::HashSet<&str> = drives
        .iter()
        .flat_map(|d| d.lanes.iter().filter_map(|l| l.item.as_deref()))
        .collect();
    let peers = snapshot
        .rows
        .iter()
        .filter(|r| r.state.held())
        .filter(|r| !worked.contains(r.id.as_str()))
        .map(|r| PeerLane {
            item: r.id.clone(),
            handle: r.handle.clone(),
            title: r.title.clone(),
            state: r.state,
            stage: r.stage.clone().unwrap_or_default(),
            holder: r.holder.clone().unwrap_or_default(),
            until: r.until_unix.map(crate::drive::clock).unwrap_or_default(),
        })
        .collect();
    View {
        drives,
        peers,
        ended: Vec::new(),
    }
}

fn drive_view(repo: &Path, snapshot: &Snapshot, drive: LiveDrive) -> DriveView {
    let lanes = drive
        .lanes
        .into_iter()
        .enumerate()
        .map(|(n, lane)| {
            let row = lane.item.as_deref().and_then(|id| snapshot.row(id));
            LaneView {
                slot: n + 1,
                handle: row.map(|r| r.handle.clone()),
                title: row.map(|r| r.title.clone()),
                item: lane.item,
                stage: lane.stage,
                since_unix_ms: lane.since_unix_ms,
                round: lane.round,
                waiting: lane.waiting.map(|(why, until)| {
                    format!("waiting until {} · {why}", crate::drive::clock(until))
                }),
                lines: lane
                    .receipt
                    .as_deref()
                    .map(|id| last_lines(repo, id))
                    .unwrap_or_default(),
            }
        })
        .collect();
    DriveView {
        run: drive.run,
        pid: drive.pid,
        owner: drive.owner,
        started: crate::drive::clock((drive.started_unix_ms / 1000) as i64),
        overall: drive.overall,
        stopping: drive.stopping,
        lanes,
    }
}

/// The last [`LINES`] lines of the log of the call `receipt`, made inert; nothing when the
/// id is not one a drive makes or the log cannot be read.
pub fn last_lines(repo: &Path, receipt: &str) -> Vec<String> {
    let fit = !receipt.is_empty()
        && !receipt.starts_with('.')
        && receipt
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !fit {
        return Vec::new();
    }
    let text = crate::files::tail_untrusted(&crate::receipts::log_path(repo, receipt), TAIL_BYTES)
        .unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LINES)..]
        .iter()
        .map(|l| {
            let l: String = l.chars().take(LINE_CHARS).collect();
            crate::text::inert(&l).into_owned()
        })
        .collect()
}

/// The view now, read off the async threads.
async fn view_now(board: &Shared) -> View {
    let repo = board.options.repo.clone();
    let snapshot = board.model.snapshot();
    tokio::task::spawn_blocking(move || view(&repo, &snapshot))
        .await
        .unwrap_or_default()
}

#[derive(askama::Template)]
#[template(path = "board/live.html")]
pub struct LivePage {
    pub chrome: Chrome,
    pub view: View,
}

pub async fn page(
    State(board): State<Shared>,
    Extension(session): Extension<Session>,
) -> Result<Html<String>, PageError> {
    let view = view_now(&board).await;
    render(&LivePage {
        chrome: Chrome::of(&board, &session, "live"),
        view,
    })
}

/// Each connection's state between ticks.
struct Following {
    board: Shared,
    stopping: tokio::sync::watch::Receiver<bool>,
    tick: tokio::time::Interval,
    /// The view last sent (none yet: the first is always sent).
    sent: Option<View>,
}

/// `GET /live/events`: the view, each time it changes, until the board stops.
pub async fn events(
    State(board): State<Shared>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let following = Following {
        stopping: board.stopping.clone(),
        board,
        tick,
        sent: None,
    };
    let stream = futures_util::stream::unfold(following, |mut f| async move {
        loop {
            if *f.stopping.borrow() {
                return None;
            }
            tokio::select! {
                _ = f.tick.tick() => {}
                _ = f.stopping.changed() => return None,
            }
            let mut view = view_now(&f.board).await;
            if let Some(sent) = &f.sent {
                let mut ended = sent.ended.clone();
                for gone in sent
                    .drives
                    .iter()
                    .filter(|d| !view.drives.iter().any(|n| n.run == d.run))
                {
                    ended.push(format!(
                        "drive {} ended at {}",
                        gone.run,
                        crate::drive::clock(crate::board::model::now_unix())
                    ));
                }
                let excess = ended.len().saturating_sub(ENDED);
                ended.drain(..excess);
                view.ended = ended;
                if view == *sent {
                    continue;
                }
            }
            let data = serde_json::to_string(&view).unwrap_or_else(|_| "{}".to_string());
            f.sent = Some(view);
            return Some((Ok(Event::default().event("live").data(data)), f));
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agents_last_lines_are_a_bounded_inert_tail_of_its_log() {
        let repo = tempfile::tempdir().unwrap();
        crate::git::run(repo.path(), &["init", "--quiet"]).unwrap();
        let log = crate::receipts::log_path(repo.path(), "1-item-implement");
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        let mut text = "x".repeat(TAIL_BYTES as usize);
        for n in 0..30 {
            text.push_str(&format!("\nline {n} \u{1b}[31m"));
        }
        std::fs::write(&log, text).unwrap();
        let lines = last_lines(repo.path(), "1-item-implement");
        assert_eq!(lines.len(), LINES);
        assert_eq!(lines[0], "line 10 \\x1b[31m");
        assert_eq!(lines[LINES - 1], "line 29 \\x1b[31m");
        // An id that is not a receipt's names no file.
        assert!(last_lines(repo.path(), "../../etc/passwd").is_empty());
        assert!(last_lines(repo.path(), "").is_empty());
    }

    fn row(id: &str, state: &str) -> crate::story::Row {
        crate::story::Row {
            id: id.into(),
            handle: format!("{id}-handle"),
            title: format!("{id} title"),
            state: crate::story::ItemState::from_word(state).unwrap(),
            holder: Some("peer:clone:1:1".into()),
            stage: Some("review".into()),
            until_unix: Some(4_102_444_800),
            ..Default::default()
        }
    }

    #[test]
    fn peers_lanes_are_the_reservations_no_drive_of_this_clone_works() {
        let repo = tempfile::tempdir().unwrap();
        crate::git::run(repo.path(), &["init", "--quiet"]).unwrap();
        let publisher = crate::drive::live::Publisher::start(
            repo.path(),
            "drive-1",
            1,
            std::sync::Arc::new(crate::drive::SystemClock),
        );
        publisher.stage(0, "mine", "stet/mine", "implement");
        let snapshot = Snapshot {
            rows: vec![
                row("mine", "reserved"),
                row("theirs", "lapsed"),
                row("open-one", "open"),
            ],
            ..Default::default()
        };
        let view = view(repo.path(), &snapshot);
        assert_eq!(view.drives.len(), 1);
        let lane = &view.drives[0].lanes[0];
        assert_eq!(lane.item.as_deref(), Some("mine"));
        assert_eq!(lane.handle.as_deref(), Some("mine-handle"));
        assert_eq!(lane.stage, "implement");
        assert_eq!(view.peers.len(), 1, "{:?}", view.peers);
        assert_eq!(view.peers[0].item, "theirs");
        assert_eq!(view.peers[0].until, "2100-01-01T00:00:00Z");
        drop(publisher);
        assert!(super::view(repo.path(), &snapshot).drives.is_empty());
    }
}

/// What the live page's Stop sends.
#[derive(serde::Deserialize)]
pub struct StopForm {
    #[serde(default)]
    pub csrf: String,
    /// The drive's process as `pid:start`, as the page showed it.
    #[serde(default)]
    pub owner: String,
}

/// `POST /live/stop`: stops a drive of this clone as Ctrl-C does — the first time after the
/// calls in flight, the second at once (the drive's own signals decide) — whether it was
/// started from a terminal or from the board. Only a drive whose published file names
/// that very process (pid and start time) and which runs now is signalled.
pub async fn stop(
    axum::extract::State(board): axum::extract::State<Shared>,
    Extension(session): Extension<Session>,
    axum::extract::Form(form): axum::extract::Form<StopForm>,
) -> Result<axum::response::Redirect, PageError> {
    if !crate::board::auth::form_token_ok(&session, &form.csrf) {
        return Err(PageError::forbidden(
            "the form's token is not this session's: reload the page and try again",
        ));
    }
    let repo = board.options.repo.clone();
    let owner = form.owner.clone();
    let signalled = tokio::task::spawn_blocking(move || {
        let drive = live::running(&repo)
            .into_iter()
            .find(|d| d.owner == owner)?;
        let pid = i32::try_from(drive.pid).ok()?;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGINT,
        )
        .ok()
    })
    .await
    .map_err(|e| PageError::internal(format!("the drive could not be stopped: {e}")))?;
    match signalled {
        Some(()) => Ok(axum::response::Redirect::to("/live")),
        None => Err(PageError::not_found(
            "no drive of this clone runs as that process now (it ended, or the page is old): \
             see /live",
        )),
    }
}
