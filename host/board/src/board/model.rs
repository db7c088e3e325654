//! What the pages read: a snapshot of the queue with each item's state as the remote says,
//! read in the background (every [`REFRESH`], and at once after an action), so a page is
//! served from memory and never waits on the remote.
//!
//! The snapshot is replaced whole, never appended to: the board's memory follows the
//! queue's size, not how long it has run.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};

use crate::story::Row;

/// How often the remote is read when nothing asks sooner.
pub const REFRESH: Duration = Duration::from_secs(5);

/// The queue as last read.
#[derive(Default)]
pub struct Snapshot {
    /// Every item, in the queue's order, with its state.
    pub rows: Vec<Row>,
    /// Why the states are `unknown`, when the remote did not answer.
    pub remote_note: Option<String>,
    /// Queue files that could not be read, each with why.
    pub malformed: Vec<String>,
    /// When it was read, seconds since the epoch (0: not yet).
    pub read_at_unix: i64,
    /// How many snapshots were read before this one.
    pub generation: u64,
    /// The number of the last [`Model::refresh`] asked before this read began: a page that
    /// asked for number N shows a snapshot whose `answers` is at least N.
    pub answers: u64,
}

impl Snapshot {
    /// The row of the item `id`.
    pub fn row(&self, id: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.id == id)
    }
}

/// The snapshot and what keeps it fresh.
pub struct Model {
    current: watch::Receiver<Arc<Snapshot>>,
    wake: Arc<Notify>,
    asked: Arc<AtomicU64>,
}

impl Model {
    /// Starts reading `repo`'s queue and `remote`'s records, until `stopping`, from `first`
    /// (a snapshot read before the board answers anything, so no page shows an empty queue
    /// that is not).
    pub fn start(
        repo: &Path,
        remote: &str,
        first: Snapshot,
        mut stopping: watch::Receiver<bool>,
    ) -> Model {
        let (tx, current) = watch::channel(Arc::new(first));
        let wake = Arc::new(Notify::new());
        let repo = repo.to_path_buf();
        let remote = remote.to_string();
        let woken = wake.clone();
        let asked = Arc::new(AtomicU64::new(0));
        let asked_then = asked.clone();
        tokio::spawn(async move {
            let mut generation = 1;
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(REFRESH) => {}
                    _ = woken.notified() => {}
                    _ = stopping.changed() => return,
                }
                let (repo, remote) = (repo.clone(), remote.clone());
                let answers = asked_then.load(Ordering::SeqCst);
                if let Ok(mut snapshot) =
                    tokio::task::spawn_blocking(move || read(&repo, &remote)).await
                {
                    generation += 1;
                    snapshot.generation = generation;
                    snapshot.answers = answers;
                    tx.send_replace(Arc::new(snapshot));
                }
            }
        });
        Model {
            current,
            wake,
            asked,
        }
    }

    /// The snapshot as last read.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.borrow().clone()
    }

    /// Reads again now (after an action) and waits, at most `patience`, for that read: the
    /// page the action leads to then shows its effect.
    pub async fn refresh(&self, patience: Duration) -> Arc<Snapshot> {
        let mut rx = self.current.clone();
        let mine = self.asked.fetch_add(1, Ordering::SeqCst) + 1;
        self.wake.notify_one();
        let _ = tokio::time::timeout(patience, async {
            // A read already under way began before the action: wait for one begun after.
            while rx.borrow_and_update().answers < mine {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        self.snapshot()
    }

    /// Changes of the snapshot, for a page that follows them.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.current.clone()
    }
}

/// Makes what a row carries from others inert, as the terminal shows it: a title, a failure's
/// reason (a check's last line), a holder, a stage, a land step's failure are whoever wrote
/// them, and their control characters and bidi overrides are shown as escapes, never obeyed
/// (the templates then escape the markup).
pub fn inert_row(row: &mut Row) {
    let inert = |s: &mut String| {
        if let std::borrow::Cow::Owned(clean) = crate::text::inert(s) {
            *s = clean;
        }
    };
    inert(&mut row.title);
    for field in [
        &mut row.holder,
        &mut row.stage,
        &mut row.why,
        &mut row.reason,
        &mut row.pull_request,
        &mut row.land_failed,
        &mut row.lane,
    ]
    .into_iter()
    .flatten()
    {
        inert(field);
    }
}

/// Reads the queue and the remote's records now (blocking: git and files); the first
/// snapshot ([`Model::start`]) is one of these, with generation 1.
pub fn read(repo: &Path, remote: &str) -> Snapshot {
    let now = now_unix();
    let (items, malformed) = crate::queue::read(repo);
    let malformed = malformed
        .iter()
        .map(|m| crate::text::inert(&format!("{}: {}", m.path.display(), m.why)).into_owned())
        .collect();
    match crate::story::states(repo, &items, remote, now) {
        Ok((mut rows, remote_note)) => {
            rows.iter_mut().for_each(inert_row);
            Snapshot {
                rows,
                remote_note,
                malformed,
                read_at_unix: now,
                generation: 1,
                answers: 0,
            }
        }
        Err(e) => Snapshot {
            rows: Vec::new(),
            remote_note: Some(e.to_string()),
            malformed,
            read_at_unix: now,
            generation: 1,
            answers: 0,
        },
    }
}

/// Now, in seconds since the epoch.
pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}
