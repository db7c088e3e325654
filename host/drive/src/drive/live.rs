//! What a drive is doing, published for whoever looks (`stet board`'s live page): a small
//! JSON file per drive, `.git/stet/live/<pid>.json`, rewritten whole (a temporary file and
//! a rename) at each change of a lane — a stage entered, a wait begun, a call started, an
//! item done — and removed when the drive ends, however it ends but SIGKILL. A file whose
//! drive is gone (its owner token names no live process) is stale: readers skip it, and
//! the next drive on the clone removes it.
//!
//! The file holds no agent output: only where the running call's log is (its receipt id;
//! the reader finds the log by [`crate::receipts::log_path`]).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// The directory of the files, under the clone's git directory.
pub fn dir(repo: &Path) -> PathBuf {
    crate::receipts::git_dir(repo).join("stet/live")
}

/// A drive as it publishes itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveDrive {
    /// The drive's run id (`drive-<pid>-<ms>`), as its receipts name it.
    pub run: String,
    /// Its process: `pid:start`, as sandboxes' owners are named.
    pub owner: String,
    pub pid: u32,
    /// When its drain began, milliseconds since the epoch.
    pub started_unix_ms: u64,
    /// The overall line as last said (`drive: 1 of 3 done · …`).
    pub overall: String,
    /// A stop asked: what it waits for.
    pub stopping: Option<String>,
    /// One per lane slot (`--jobs`).
    pub lanes: Vec<LiveLane>,
}

/// One lane slot of a drive.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveLane {
    /// The item worked, none between items.
    pub item: Option<String>,
    /// Its lane's branch.
    pub branch: Option<String>,
    /// The stage (`implement`, `check`, `review`, `land`), or what the slot does between
    /// items (`looking for an item`).
    pub stage: String,
    /// Since when, milliseconds since the epoch.
    pub since_unix_ms: u64,
    /// The round of the call running, once one started in this stage.
    pub round: Option<u32>,
    /// The receipt of the agent call running now in this stage.
    pub receipt: Option<String>,
    /// A wait the slot is in: why, and until when (seconds since the epoch).
    pub waiting: Option<(String, i64)>,
}

/// Publishes a drive's state; removes its file when dropped or [`Publisher::end`]ed.
pub struct Publisher {
    path: PathBuf,
    state: Mutex<LiveDrive>,
    /// The drive's clock: the times the file says are the drive's.
    clock: std::sync::Arc<dyn super::time::Clock>,
}

impl Publisher {
    /// Starts publishing the drive `run` of `lanes` lanes on `repo` (and removes files of
    /// drives that are gone).
    pub fn start(
        repo: &Path,
        run: &str,
        lanes: usize,
        clock: std::sync::Arc<dyn super::time::Clock>,
    ) -> Publisher {
        let dir = dir(repo);
        for (path, drive) in read_dir(&dir) {
            if !crate::sandbox::owner_alive(&drive.owner) {
                let _ = std::fs::remove_file(path);
            }
        }
        let pid = std::process::id();
        let now = clock.now_ms();
        let publisher = Publisher {
            path: dir.join(format!("{pid}.json")),
            state: Mutex::new(LiveDrive {
                run: run.to_string(),
                owner: crate::sandbox::owner_token(pid).unwrap_or_else(|| format!("{pid}:")),
                pid,
                started_unix_ms: now,
                overall: String::new(),
                stopping: None,
                lanes: (0..lanes.max(1))
                    .map(|_| LiveLane {
                        stage: IDLE.to_string(),
                        since_unix_ms: now,
                        ..Default::default()
                    })
                    .collect(),
            }),
            clock,
        };
        publisher.change(|_| {});
        publisher
    }

    /// Changes the state with `f` and writes it (a write that fails is let be: the file is
    /// for looking, never for the drive's own work).
    fn change(&self, f: impl FnOnce(&mut LiveDrive)) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let before = state.clone();
        f(&mut state);
        if *state != before || !self.path.exists() {
            if let Ok(json) = serde_json::to_vec(&*state) {
                let _ = crate::files::write_durably(&self.path, &json);
            }
        }
    }

    fn lane(&self, slot: usize, f: impl FnOnce(&mut LiveLane)) {
        self.change(|state| {
            let last = state.lanes.len().saturating_sub(1);
            if let Some(lane) = state.lanes.get_mut(slot.min(last)) {
                f(lane)
            }
        });
    }

    /// Slot `slot` enters `stage` of `item`'s lane `branch`.
    pub fn stage(&self, slot: usize, item: &str, branch: &str, stage: &str) {
        self.lane(slot, |lane| {
            *lane = LiveLane {
                item: Some(item.to_string()),
                branch: Some(branch.to_string()),
                stage: stage.to_string(),
                since_unix_ms: self.clock.now_ms(),
                ..Default::default()
            }
        });
    }

    /// Slot `slot` waits until `until_unix`, for `reason`.
    pub fn wait(&self, slot: usize, reason: &str, until_unix: i64) {
        self.lane(slot, |lane| {
            lane.waiting = Some((reason.to_string(), until_unix));
        });
    }

    /// Slot `slot` started the agent call `receipt`, of round `round`.
    pub fn call(&self, slot: usize, receipt: &str, round: u32) {
        self.lane(slot, |lane| {
            lane.receipt = Some(receipt.to_string());
            lane.round = Some(round);
            lane.waiting = None;
        });
    }

    /// Slot `slot` is done with its item.
    pub fn idle(&self, slot: usize) {
        self.lane(slot, |lane| {
            *lane = LiveLane {
                stage: IDLE.to_string(),
                since_unix_ms: self.clock.now_ms(),
                ..Default::default()
            }
        });
    }

    /// The overall line changed.
    pub fn overall(&self, text: &str) {
        self.change(|state| state.overall = text.to_string());
    }

    /// A stop was asked.
    pub fn stopping(&self, waits_for: &str) {
        self.change(|state| state.stopping = Some(waits_for.to_string()));
    }

    /// The drive ends: its file goes.
    pub fn end(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.end();
    }
}

/// What a slot between items does.
pub const IDLE: &str = "looking for an item";

/// Every drive running on `repo`'s clone now, by its file (stale ones skipped), oldest
/// first.
pub fn running(repo: &Path) -> Vec<LiveDrive> {
    let mut drives: Vec<LiveDrive> = read_dir(&dir(repo))
        .into_iter()
        .map(|(_, d)| d)
        .filter(|d| crate::sandbox::owner_alive(&d.owner))
        .collect();
    drives.sort_by_key(|d| (d.started_unix_ms, d.pid));
    drives
}

/// The files in `dir` that read as drives (at most a few KiB each; others skipped).
fn read_dir(dir: &Path) -> Vec<(PathBuf, LiveDrive)> {
    /// A file larger than this is not one a drive wrote.
    const LIMIT: u64 = 64 * 1024;
    /// At most this many files are looked at.
    const FILES: usize = 64;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .take(FILES)
        .filter_map(|p| {
            let bytes = crate::files::read_untrusted(&p, LIMIT).ok()?;
            let drive = serde_json::from_slice(&bytes).ok()?;
            Some((p, drive))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drive_publishes_each_change_of_a_lane_and_its_file_goes_at_its_end() {
        let repo = tempfile::tempdir().unwrap();
        crate::git::run(repo.path(), &["init", "--quiet"]).unwrap();
        // A stale file of a drive that is gone is removed by the next drive, and never read.
        std::fs::create_dir_all(dir(repo.path())).unwrap();
        let stale = dir(repo.path()).join("4194999.json");
        let gone = LiveDrive {
            owner: "4194999:1".into(),
            ..Default::default()
        };
        std::fs::write(&stale, serde_json::to_vec(&gone).unwrap()).unwrap();
        let publisher = Publisher::start(
            repo.path(),
            "drive-1",
            2,
            std::sync::Arc::new(super::super::time::SystemClock),
        );
        assert!(!stale.exists());
        let drives = running(repo.path());
        assert_eq!(drives.len(), 1);
        assert_eq!(drives[0].lanes.len(), 2);
        assert_eq!(drives[0].lanes[0].stage, IDLE);
        publisher.stage(1, "item-1", "stet/item-1", "implement");
        publisher.call(1, "1-item-1-implement", 2);
        let lane = running(repo.path())[0].lanes[1].clone();
        assert_eq!(lane.item.as_deref(), Some("item-1"));
        assert_eq!(lane.stage, "implement");
        assert_eq!(lane.receipt.as_deref(), Some("1-item-1-implement"));
        assert_eq!(lane.round, Some(2));
        publisher.idle(1);
        assert_eq!(running(repo.path())[0].lanes[1].item, None);
        drop(publisher);
        assert!(running(repo.path()).is_empty());
        assert_eq!(std::fs::read_dir(dir(repo.path())).unwrap().count(), 0);
    }
}
