//! Receipts: one durable record per agent call.
//!
//! Each receipt is its own file under `<repo>/.git/stet/receipts/`, written to a temporary
//! name, flushed to disk, renamed into place and the directory flushed, before the drive
//! makes its next move: a `kill -9` at any instant leaves either the whole receipt or none
//! of it, never half. The call's full output is written (and flushed) first, so a receipt
//! never names a log that is not there. Receipts live inside `.git` so they are never
//! committed and never reach a lane.

// What this module reads comes from parties stet does not trust: nothing here may panic
// on it (issue 18).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects
    )
)]

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The outcome of a receipt written as its call starts, until the call ends.
pub const RUNNING: &str = "running";
/// What a running receipt becomes when its drive died during the call.
pub const INTERRUPTED: &str = "interrupted";
/// The outcome of a call the sandbox or the harness could not make.
pub const NOT_RUN: &str = "not-run";

/// Where receipts live, relative to the repository's git directory.
const RECEIPTS: &str = "stet/receipts";
/// Where the calls' full output lives.
const LOGS: &str = "stet/logs";

/// A plugin as a receipt names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginRecord {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// sha256 of its library, as loaded.
    pub library_sha256: String,
}

/// One agent call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    /// The receipt's own id (also its file name).
    pub id: String,
    /// The drive run.
    pub run: String,
    /// The stet process that made the call (pid:start-time), to tell a call still running
    /// from one whose drive died.
    #[serde(default)]
    pub owner: String,
    /// The item.
    pub item: String,
    /// The lane's branch.
    pub lane: String,
    /// The role (`implement`, `review`, `proof`, or `check` for the repository's check).
    pub role: String,
    /// The lane's round the call was made in (a drive's calls; none for `ask`).
    #[serde(default)]
    pub round: Option<u32>,
    /// The runtime.
    pub runtime: PluginRecord,
    /// Why that runtime was selected.
    pub runtime_reason: String,
    /// The harness.
    pub harness: PluginRecord,
    /// The image the sandbox started from.
    pub image: String,
    /// The network route the agent had.
    pub network: String,
    /// Start and end, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// End.
    pub ended_unix_ms: u64,
    /// Exit code, when the agent exited by itself.
    pub exit_code: Option<i32>,
    /// Signal, when it was killed.
    pub exit_signal: Option<i32>,
    /// The outcome (`done`, `failed`, `out-of-shape`, `rate-limited`, `not-logged-in`,
    /// `service-unavailable`, `resource-limit`; `not-run` when the sandbox or the harness
    /// could not make the call; `passed` or `failed` for a check; `running` while it runs,
    /// `interrupted` when its drive died during it).
    pub outcome: String,
    /// The outcome's detail.
    pub detail: String,
    /// When a usage limit resets, seconds since the Unix epoch.
    pub retry_at_unix: Option<i64>,
    /// Cost in US dollars, when reported.
    pub cost_usd: Option<f64>,
    /// Usage counters, when reported.
    pub usage: Vec<(String, String)>,
    /// The lane's commit before and after the call.
    pub commit_before: String,
    /// After.
    pub commit_after: String,
    /// The call's full output.
    pub log: PathBuf,
    /// What the agent's hooks and approver recorded.
    pub session: Vec<serde_json::Value>,
    /// The sandbox's limits, in words (`4096 processes, 4 GiB memory, ...`).
    #[serde(default)]
    pub limits: String,
    /// A limit the call ran into (`memory`, `disk`, `pids`), when one was.
    #[serde(default)]
    pub limit_reached: Option<String>,
    /// How many bytes the call printed.
    #[serde(default)]
    pub output_bytes: u64,
    /// How many of them its log left out (the log keeps the start and the end of a long
    /// output, and says where it cut).
    #[serde(default)]
    pub log_cut_bytes: u64,
    /// Files of the profile the harness carried back from the call's copy (a refreshed
    /// login); everything else the call wrote there is gone.
    #[serde(default)]
    pub profile_carried: Vec<String>,
    /// What stet's proxy refused the call: each host:port, why, how often, first when.
    #[serde(default)]
    pub network_blocked: Vec<crate::network::BlockedRecord>,
}

/// Who makes an agent call and where, for its receipt: known before the call starts.
#[derive(Clone)]
pub struct CallContext<'a> {
    /// The receipt's id.
    pub id: String,
    /// The run (`drive-…`, `ask-…`).
    pub run: String,
    /// The item, or empty.
    pub item: String,
    /// The lane's branch, or empty.
    pub lane: String,
    /// The role's word.
    pub role: &'static str,
    /// The lane's round, for a drive's calls.
    pub round: Option<u32>,
    /// The runtime, as hashed when it was opened.
    pub runtime: &'a PluginRecord,
    /// Why the runtime was chosen.
    pub runtime_reason: &'a str,
    /// The harness.
    pub harness: &'a PluginRecord,
    /// The image.
    pub image: &'a str,
    /// The network route.
    pub network: String,
    /// The sandbox's limits, in words.
    pub limits: String,
    /// Start and end, ms since the epoch.
    pub started_unix_ms: u64,
    /// End.
    pub ended_unix_ms: u64,
    /// The lane's commit before and after.
    pub commit_before: String,
    /// After.
    pub commit_after: String,
    /// Where the call's full output goes (usually [`log_path`]).
    pub log: PathBuf,
}

/// How an agent call ended, for its receipt.
#[derive(Debug, Clone, Default)]
pub struct CallEnd {
    /// Exit code, when it exited by itself.
    pub exit_code: Option<i32>,
    /// Signal, when it was killed.
    pub exit_signal: Option<i32>,
    /// The outcome's word.
    pub outcome: String,
    /// The outcome's detail.
    pub detail: String,
    /// When a usage limit resets.
    pub retry_at_unix: Option<i64>,
    /// Cost, when reported.
    pub cost_usd: Option<f64>,
    /// Usage counters.
    pub usage: Vec<(String, String)>,
    /// What the hooks recorded.
    pub session: Vec<serde_json::Value>,
    /// A limit it ran into.
    pub limit_reached: Option<String>,
    /// Bytes printed.
    pub output_bytes: u64,
    /// Bytes the log left out.
    pub log_cut_bytes: u64,
    /// Profile files the harness carried back.
    pub profile_carried: Vec<String>,
    /// What stet's proxy refused it.
    pub network_blocked: Vec<crate::network::BlockedRecord>,
}

/// Records that an agent call is starting: a receipt whose outcome is [`RUNNING`],
/// durable before the agent is launched, so that a drive killed during the call still
/// leaves its trace (the next drive marks it interrupted). [`record_end`] replaces it when
/// the call ends. The call's log is created empty first, so the receipt never names a log
/// that is not there; the call streams its output into it.
pub fn record_start(repo: &Path, call: &CallContext<'_>) -> std::io::Result<PathBuf> {
    write_durably(&call.log, b"")?;
    let mut receipt = receipt_of(call.clone());
    receipt.outcome = RUNNING.to_string();
    record(repo, &receipt)
}

/// Records how an agent call ended (its log already written and flushed), durable before
/// this returns, and so before the caller's next move.
pub fn record_end(repo: &Path, call: CallContext<'_>, end: CallEnd) -> std::io::Result<PathBuf> {
    let receipt = Receipt {
        exit_code: end.exit_code,
        exit_signal: end.exit_signal,
        outcome: end.outcome,
        detail: end.detail,
        retry_at_unix: end.retry_at_unix,
        cost_usd: end.cost_usd,
        usage: end.usage,
        session: end.session,
        limit_reached: end.limit_reached,
        output_bytes: end.output_bytes,
        log_cut_bytes: end.log_cut_bytes,
        profile_carried: end.profile_carried,
        network_blocked: end.network_blocked,
        ..receipt_of(call)
    };
    record(repo, &receipt)
}

fn receipt_of(call: CallContext<'_>) -> Receipt {
    Receipt {
        id: call.id,
        run: call.run,
        owner: crate::sandbox::owner_token(std::process::id()).unwrap_or_default(),
        item: call.item,
        lane: call.lane,
        role: call.role.to_string(),
        round: call.round,
        runtime: call.runtime.clone(),
        runtime_reason: call.runtime_reason.to_string(),
        harness: call.harness.clone(),
        image: call.image.to_string(),
        network: call.network,
        limits: call.limits,
        started_unix_ms: call.started_unix_ms,
        ended_unix_ms: call.ended_unix_ms,
        exit_code: None,
        exit_signal: None,
        outcome: String::new(),
        detail: String::new(),
        retry_at_unix: None,
        cost_usd: None,
        usage: Vec::new(),
        commit_before: call.commit_before,
        commit_after: call.commit_after,
        log: call.log,
        session: Vec::new(),
        limit_reached: None,
        output_bytes: 0,
        log_cut_bytes: 0,
        profile_carried: Vec::new(),
        network_blocked: Vec::new(),
    }
}

impl PluginRecord {
    /// Names a loaded plugin, hashing its library.
    pub fn of(name: &str, version: &str, library: &Path) -> PluginRecord {
        PluginRecord {
            name: name.to_string(),
            version: version.to_string(),
            library_sha256: crate::plugins::trust::sha256_cached(library)
                .unwrap_or_else(|e| format!("unreadable: {e}")),
        }
    }
}

pub use crate::files::write_durably;
pub use crate::git::git_dir;

/// Where the full output of the call `receipt_id` goes.
pub fn log_path(repo: &Path, receipt_id: &str) -> PathBuf {
    git_dir(repo).join(LOGS).join(format!("{receipt_id}.log"))
}

/// Records a receipt (its log must already be written).
pub fn record(repo: &Path, receipt: &Receipt) -> std::io::Result<PathBuf> {
    let path = git_dir(repo)
        .join(RECEIPTS)
        .join(format!("{}.json", receipt.id));
    let json = serde_json::to_vec_pretty(receipt).map_err(std::io::Error::other)?;
    write_durably(&path, &json)?;
    Ok(path)
}

/// Every receipt, oldest first, and the files that could not be read as one.
pub fn read_all(repo: &Path) -> (Vec<Receipt>, Vec<(PathBuf, String)>) {
    let dir = git_dir(repo).join(RECEIPTS);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return (Vec::new(), Vec::new());
    };
    let mut receipts = Vec::new();
    let mut unreadable = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if name.starts_with('.') || !name.ends_with(".json") {
            continue;
        }
        match std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Receipt>(&b).map_err(|e| e.to_string()))
        {
            Ok(r) => receipts.push(r),
            Err(why) => unreadable.push((path, why)),
        }
    }
    receipts.sort_by(|a, b| (a.started_unix_ms, &a.id).cmp(&(b.started_unix_ms, &b.id)));
    (receipts, unreadable)
}

/// Marks the running receipts whose stet process is gone (`owner_alive` says) as
/// interrupted; returns them as marked.
pub fn settle_interrupted(
    repo: &Path,
    owner_alive: impl Fn(&str) -> bool,
) -> std::io::Result<Vec<Receipt>> {
    let (all, _) = read_all(repo);
    let mut settled = Vec::new();
    for mut receipt in all {
        if receipt.outcome != RUNNING || owner_alive(&receipt.owner) {
            continue;
        }
        receipt.outcome = INTERRUPTED.to_string();
        receipt.detail =
            "the drive that made this call ended during it (killed or crashed); the call's output is lost"
                .to_string();
        record(repo, &receipt)?;
        settled.push(receipt);
    }
    Ok(settled)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt(id: &str, started: u64) -> Receipt {
        let plugin = PluginRecord {
            name: "p".into(),
            version: "1".into(),
            library_sha256: "00".into(),
        };
        Receipt {
            id: id.into(),
            run: "run-1".into(),
            owner: String::new(),
            item: "item".into(),
            lane: "stet/item".into(),
            role: "implement".into(),
            round: Some(1),
            runtime: plugin.clone(),
            runtime_reason: "the only available runtime".into(),
            harness: plugin,
            image: "stet-lane:1".into(),
            network: "none".into(),
            started_unix_ms: started,
            ended_unix_ms: started + 5,
            exit_code: Some(0),
            exit_signal: None,
            outcome: "done".into(),
            detail: "ok".into(),
            retry_at_unix: None,
            cost_usd: Some(0.01),
            usage: vec![("input_tokens".into(), "3".into())],
            commit_before: "a".into(),
            commit_after: "b".into(),
            log: PathBuf::from("/x.log"),
            session: vec![],
            limits: "4096 processes".into(),
            limit_reached: None,
            output_bytes: 3,
            log_cut_bytes: 0,
            profile_carried: vec![],
            network_blocked: vec![],
        }
    }

    #[test]
    fn receipts_round_trip_in_order_and_partials_are_ignored() {
        let repo = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(repo.path().join(".git")).unwrap();
        record(repo.path(), &receipt("r2", 20)).unwrap();
        record(repo.path(), &receipt("r1", 10)).unwrap();
        // What a kill -9 during a write leaves behind: a partial, never a half receipt.
        let dir = git_dir(repo.path()).join(RECEIPTS);
        std::fs::write(dir.join(".r3.json.partial"), "{\"id\":").unwrap();
        std::fs::write(dir.join("garbage.json"), "not json").unwrap();
        let (receipts, unreadable) = read_all(repo.path());
        assert_eq!(
            receipts.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["r1", "r2"]
        );
        assert_eq!(receipts[0], receipt("r1", 10));
        assert_eq!(unreadable.len(), 1);
    }
}
