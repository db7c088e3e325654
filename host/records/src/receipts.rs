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

/// How a call ended, as its receipt says: the harness's outcome, the check's, or what the
/// host knows of a call that did not end by itself. Read back to resume a lane (a call
/// that finished is never made again), so it is a type, not a word to match.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The agent finished its work.
    Done,
    /// The agent failed its task, or the repository's check failed.
    Failed,
    /// The agent's output was not in the shape the harness expects.
    OutOfShape,
    /// The agent hit a usage limit.
    RateLimited,
    /// The profile has no login.
    NotLoggedIn,
    /// The model API did not answer.
    ServiceUnavailable,
    /// A resource limit of the sandbox ended the call.
    ResourceLimit,
    /// The repository's check passed.
    Passed,
    /// The sandbox or the harness could not make the call.
    NotRun,
    /// Written as the call starts, until it ends.
    Running,
    /// A running receipt whose drive died during the call.
    Interrupted,
    /// A word this stet does not know (a newer stet's, or `code N` for an outcome code of
    /// a newer plugin): kept as written, never taken for a finished call.
    #[serde(untagged)]
    Other(String),
}

impl Outcome {
    /// The outcome a harness reported.
    pub fn of_code(code: stet_plugin_api::OutcomeCode) -> Outcome {
        use stet_plugin_api::OutcomeCode as C;
        match code {
            C::DONE => Outcome::Done,
            C::FAILED => Outcome::Failed,
            C::OUT_OF_SHAPE => Outcome::OutOfShape,
            C::RATE_LIMITED => Outcome::RateLimited,
            C::NOT_LOGGED_IN => Outcome::NotLoggedIn,
            C::SERVICE_UNAVAILABLE => Outcome::ServiceUnavailable,
            C::RESOURCE_LIMIT => Outcome::ResourceLimit,
            other => Outcome::Other(format!("code {}", other.0)),
        }
    }

    /// The harness's outcome code of a call that ended with its task done or not — what a
    /// resumed lane goes on from —, `None` for one that did not finish (running,
    /// interrupted, not run, a wait or an outage) or is no agent call's.
    pub fn finished_call(&self) -> Option<stet_plugin_api::OutcomeCode> {
        use stet_plugin_api::OutcomeCode as C;
        match self {
            Outcome::Done => Some(C::DONE),
            Outcome::Failed => Some(C::FAILED),
            Outcome::OutOfShape => Some(C::OUT_OF_SHAPE),
            Outcome::ResourceLimit => Some(C::RESOURCE_LIMIT),
            _ => None,
        }
    }

    /// The word receipts and reports use.
    pub fn word(&self) -> &str {
        match self {
            Outcome::Done => "done",
            Outcome::Failed => "failed",
            Outcome::OutOfShape => "out-of-shape",
            Outcome::RateLimited => "rate-limited",
            Outcome::NotLoggedIn => "not-logged-in",
            Outcome::ServiceUnavailable => "service-unavailable",
            Outcome::ResourceLimit => "resource-limit",
            Outcome::Passed => "passed",
            Outcome::NotRun => "not-run",
            Outcome::Running => "running",
            Outcome::Interrupted => "interrupted",
            Outcome::Other(word) => word,
        }
    }
}

impl Default for Outcome {
    fn default() -> Self {
        Outcome::Other(String::new())
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.word())
    }
}

/// Who made a call: an agent in a role, or the repository's check.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CallRole {
    /// The implementing agent.
    Implement,
    /// The reviewing agent.
    Review,
    /// The start-up proof's live launch.
    Proof,
    /// The repository's check command (no agent).
    Check,
    /// The repository's `[lane] setup`, making a seed (no agent, no item).
    Setup,
    /// A word this stet does not know (a newer stet's): kept as written.
    #[serde(untagged)]
    Other(String),
}

impl CallRole {
    /// The role of an agent call.
    pub fn of(role: stet_plugin_api::Role) -> CallRole {
        match role {
            stet_plugin_api::Role::Implement => CallRole::Implement,
            stet_plugin_api::Role::Review => CallRole::Review,
            stet_plugin_api::Role::Proof => CallRole::Proof,
        }
    }

    /// The word receipts, sandboxes' names and reports use.
    pub fn word(&self) -> &str {
        match self {
            CallRole::Implement => "implement",
            CallRole::Review => "review",
            CallRole::Proof => "proof",
            CallRole::Check => "check",
            CallRole::Setup => "setup",
            CallRole::Other(word) => word,
        }
    }
}

impl std::fmt::Display for CallRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.word())
    }
}

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
    pub role: CallRole,
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
    pub outcome: Outcome,
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
    pub network_blocked: Vec<BlockedRecord>,
    /// What the agent was asked: its prompt, kept beside the log. None for the repository's
    /// check (no agent) and for receipts written before prompts were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<KeptPrompt>,
    /// The signal by which the person stopped the call (a drive's second stop), when they
    /// did; `ended_unix_ms` is when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by_signal: Option<i32>,
}

/// A call's prompt as its receipt names it: the file it is kept in, and the hash and size
/// of all of it (the file keeps at most [`MAX_PROMPT_BYTES`] of it, saying where it cut).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptPrompt {
    /// Where it is kept (`<id>.prompt` beside the call's log).
    pub file: PathBuf,
    /// sha256 of the whole prompt the agent received, hex.
    pub sha256: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// How many of them the file leaves out (0: all of it is kept).
    #[serde(default)]
    pub cut_bytes: u64,
}

/// The most of a prompt kept (its start; item texts and the feedback a round passes on are
/// bounded well below it, so only a pathological item is cut).
pub const MAX_PROMPT_BYTES: usize = 256 << 10;

impl KeptPrompt {
    /// What is kept of `prompt` in `file`, and the bytes to write there.
    fn of(prompt: &str, file: PathBuf) -> (KeptPrompt, Vec<u8>) {
        // The longest start of it within the bound that ends on a character.
        let end = (0..=prompt.len().min(MAX_PROMPT_BYTES))
            .rev()
            .find(|&i| prompt.is_char_boundary(i))
            .unwrap_or(0);
        let (kept, rest) = prompt.split_at_checked(end).unwrap_or(("", prompt));
        let mut kept = kept.as_bytes().to_vec();
        let cut = rest.len() as u64;
        if cut > 0 {
            kept.extend_from_slice(format!("\n[stet: {cut} more bytes not kept]\n").as_bytes());
        }
        let record = KeptPrompt {
            file,
            sha256: crate::plugins::trust::sha256_bytes(prompt.as_bytes()),
            bytes: prompt.len() as u64,
            cut_bytes: cut,
        };
        (record, kept)
    }

    /// The prompt as kept, as text (the file is stet's, but a prompt holds an item's text and
    /// an agent's earlier words: shown, it goes through the printer's inert text).
    pub fn read(&self) -> std::io::Result<String> {
        let bytes = std::fs::read(&self.file)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
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
    pub role: CallRole,
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
    /// The prompt the agent is given (none for the repository's check): kept beside the
    /// log by [`record_start`].
    pub prompt: Option<String>,
}

/// How an agent call ended, for its receipt.
#[derive(Debug, Clone, Default)]
pub struct CallEnd {
    /// Exit code, when it exited by itself.
    pub exit_code: Option<i32>,
    /// Signal, when it was killed.
    pub exit_signal: Option<i32>,
    /// The outcome's word.
    pub outcome: Outcome,
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
    pub network_blocked: Vec<BlockedRecord>,
}

/// Records that an agent call is starting: a receipt whose outcome is [`Outcome::Running`],
/// durable before the agent is launched, so that a drive killed during the call still
/// leaves its trace (the next drive marks it interrupted). [`record_end`] replaces it when
/// the call ends. The call's log is created empty first, so the receipt never names a log
/// that is not there; the call streams its output into it.
pub fn record_start(repo: &Path, call: &CallContext<'_>) -> std::io::Result<PathBuf> {
    if STOPPING.load(std::sync::atomic::Ordering::SeqCst) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Interrupted,
            "stet is stopping: no call starts",
        ));
    }
    write_durably(&call.log, b"")?;
    keep_prompt(call)?;
    let mut receipt = receipt_of(call.clone());
    receipt.outcome = Outcome::Running;
    record(repo, &receipt)
}

/// Records how an agent call ended (its log already written and flushed), durable before
/// this returns, and so before the caller's next move.
pub fn record_end(repo: &Path, call: CallContext<'_>, end: CallEnd) -> std::io::Result<PathBuf> {
    if STOPPING.load(std::sync::atomic::Ordering::SeqCst) {
        // The stop writes this call's end: the person stopped it, whatever its process
        // said when it was killed.
        return Ok(git_dir(repo)
            .join(RECEIPTS)
            .join(format!("{}.json", call.id)));
    }
    // A call recorded only when it ended (`stet ask`) keeps its prompt now.
    keep_prompt(&call)?;
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
    let prompt = call
        .prompt
        .as_deref()
        .map(|p| KeptPrompt::of(p, prompt_path_of(&call.log)).0);
    Receipt {
        prompt,
        id: call.id,
        run: call.run,
        owner: crate::owner::owner_token(std::process::id()).unwrap_or_default(),
        item: call.item,
        lane: call.lane,
        role: call.role,
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
        outcome: Outcome::default(),
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
        stopped_by_signal: None,
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

/// Keeps the call's prompt beside its log, durable before its receipt names it.
fn keep_prompt(call: &CallContext<'_>) -> std::io::Result<()> {
    match &call.prompt {
        Some(prompt) => {
            let file = prompt_path_of(&call.log);
            let (_, kept) = KeptPrompt::of(prompt, file.clone());
            write_durably(&file, &kept)
        }
        None => Ok(()),
    }
}

/// Where the prompt of the call whose output goes to `log` is kept: beside it.
fn prompt_path_of(log: &Path) -> PathBuf {
    log.with_extension("prompt")
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
        if receipt.outcome != Outcome::Running || owner_alive(&receipt.owner) {
            continue;
        }
        let kept = kept_output(&mut receipt);
        receipt.outcome = Outcome::Interrupted;
        receipt.detail = format!(
            "the stet that made this call ended during it without a stop (killed or crashed); {kept}"
        );
        record(repo, &receipt)?;
        settled.push(receipt);
    }
    Ok(settled)
}

/// Set when a stop ends this process ([`stopping`]).
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A stop is ending this process, killing its calls: from now on no call starts and no
/// call's end is recorded by the call (whose process the stop killed) — the stop records
/// it, with [`settle_stopped`].
pub fn stopping() {
    STOPPING.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Marks the running receipts of the stet process `owner` (this one) as interrupted by the
/// person's stop, `signal`, at `at_unix_ms` (`when`, in words); returns them as marked.
pub fn settle_stopped(
    repo: &Path,
    owner: &str,
    signal: i32,
    at_unix_ms: u64,
    when: &str,
) -> std::io::Result<Vec<Receipt>> {
    let (all, _) = read_all(repo);
    let mut settled = Vec::new();
    for mut receipt in all {
        if receipt.outcome != Outcome::Running || receipt.owner != owner {
            continue;
        }
        receipt.ended_unix_ms = at_unix_ms.max(receipt.started_unix_ms);
        let kept = kept_output(&mut receipt);
        receipt.outcome = Outcome::Interrupted;
        receipt.stopped_by_signal = Some(signal);
        receipt.detail = format!(
            "stopped by the person at {when}: a second stop signal ({}) killed the call; {kept}",
            signal_name(signal)
        );
        record(repo, &receipt)?;
        settled.push(receipt);
    }
    Ok(settled)
}

/// What a cut-short call's log kept, in words; the receipt takes the log's size as its
/// output, and, when no end was recorded, the log's last write as its end.
fn kept_output(receipt: &mut Receipt) -> String {
    let Ok(meta) = std::fs::symlink_metadata(&receipt.log) else {
        return "it left no log".to_string();
    };
    receipt.output_bytes = receipt.output_bytes.max(meta.len());
    if receipt.ended_unix_ms <= receipt.started_unix_ms {
        let written = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        receipt.ended_unix_ms = written.max(receipt.started_unix_ms);
    }
    format!(
        "its output until then is kept in its log ({})",
        crate::printer::size(meta.len())
    )
}

/// A stop signal's name.
pub fn signal_name(signal: i32) -> String {
    match signal {
        1 => "SIGHUP".to_string(),
        2 => "SIGINT, Ctrl-C".to_string(),
        15 => "SIGTERM".to_string(),
        n => format!("signal {n}"),
    }
}

/// One host a call's sandbox was refused, as its receipt records it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BlockedRecord {
    /// `host:port`.
    pub target: String,
    /// Why, in a line.
    pub why: String,
    /// How many times.
    pub count: u64,
    /// The first time, ms since the epoch.
    pub first_unix_ms: u64,
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
            role: CallRole::Implement,
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
            outcome: Outcome::Done,
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
            prompt: None,
            stopped_by_signal: None,
        }
    }

    #[test]
    fn a_calls_prompt_is_kept_beside_its_log_and_named_by_its_hash() {
        let repo = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(repo.path().join(".git")).unwrap();
        let plugin = PluginRecord {
            name: "p".into(),
            version: "1".into(),
            library_sha256: "00".into(),
        };
        let context = |id: &str, prompt: Option<String>| CallContext {
            id: id.into(),
            run: "run-1".into(),
            item: "item".into(),
            lane: "stet/item".into(),
            role: CallRole::Review,
            round: Some(2),
            runtime: &plugin,
            runtime_reason: "",
            harness: &plugin,
            image: "i",
            network: "none".into(),
            limits: String::new(),
            started_unix_ms: 1,
            ended_unix_ms: 1,
            commit_before: String::new(),
            commit_after: String::new(),
            log: log_path(repo.path(), id),
            prompt,
        };
        let asked = "Review this.\n\u{1b}[2J and this".to_string();
        record_start(repo.path(), &context("a", Some(asked.clone()))).unwrap();
        record_end(
            repo.path(),
            context("a", Some(asked.clone())),
            CallEnd::default(),
        )
        .unwrap();
        // A prompt over the bound is kept up to it, and says so; its hash is of all of it.
        let long = "é".repeat(MAX_PROMPT_BYTES); // two bytes each: cut inside one
        record_start(repo.path(), &context("b", Some(long.clone()))).unwrap();
        // The repository's check asks no agent anything.
        record_start(repo.path(), &context("c", None)).unwrap();
        let (all, _) = read_all(repo.path());
        let kept = all[0].prompt.clone().unwrap();
        assert_eq!(
            kept.file,
            log_path(repo.path(), "a").with_extension("prompt")
        );
        assert_eq!(
            kept.sha256,
            crate::plugins::trust::sha256_bytes(asked.as_bytes())
        );
        assert_eq!((kept.bytes, kept.cut_bytes), (asked.len() as u64, 0));
        assert_eq!(kept.read().unwrap(), asked);
        let cut = all[1].prompt.clone().unwrap();
        assert_eq!(cut.bytes, long.len() as u64);
        assert_eq!(cut.cut_bytes, long.len() as u64 - MAX_PROMPT_BYTES as u64);
        assert_eq!(
            cut.sha256,
            crate::plugins::trust::sha256_bytes(long.as_bytes())
        );
        let text = cut.read().unwrap();
        assert!(text.ends_with(&format!(
            "\n[stet: {} more bytes not kept]\n",
            cut.cut_bytes
        )));
        assert!(text.len() <= MAX_PROMPT_BYTES + 64);
        assert_eq!(all[2].prompt, None);
        assert!(!log_path(repo.path(), "c").with_extension("prompt").exists());
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

    #[test]
    fn a_call_cut_short_keeps_its_log_and_its_time_and_says_who_stopped_it() {
        let repo = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(repo.path().join(".git")).unwrap();
        let now = crate::timestamp::now_ms();
        for (id, owner) in [("died", "4194999:1"), ("stopped", "me:1")] {
            let log = repo.path().join(format!("{id}.log"));
            std::fs::write(&log, vec![b'x'; 5 * 1024]).unwrap();
            let mut r = receipt(id, now - 6_000);
            r.owner = owner.into();
            r.outcome = Outcome::Running;
            r.ended_unix_ms = r.started_unix_ms;
            r.output_bytes = 0;
            r.log = log;
            record(repo.path(), &r).unwrap();
        }
        // Killed: its end is its log's last write.
        let died = settle_interrupted(repo.path(), |o| o == "me:1").unwrap();
        assert_eq!(died.len(), 1);
        assert_eq!(died[0].outcome, Outcome::Interrupted);
        assert_eq!(died[0].output_bytes, 5 * 1024);
        assert!(died[0].ended_unix_ms >= now - 1_000, "{died:?}");
        assert!(died[0].detail.contains("without a stop") && died[0].detail.contains("5 KiB"));
        assert_eq!(died[0].stopped_by_signal, None);
        // Stopped by the person: by which signal, when.
        let stopped = settle_stopped(repo.path(), "me:1", 2, now, "18:00:00").unwrap();
        assert_eq!(stopped.len(), 1);
        assert_eq!(stopped[0].stopped_by_signal, Some(2));
        assert_eq!(stopped[0].ended_unix_ms, now);
        assert_eq!(
            stopped[0].detail,
            "stopped by the person at 18:00:00: a second stop signal (SIGINT, Ctrl-C) killed the call; its output until then is kept in its log (5 KiB)"
        );
        let (all, _) = read_all(repo.path());
        assert!(all.iter().all(|r| r.outcome == Outcome::Interrupted));
    }

    #[test]
    fn every_outcome_and_role_reads_back_as_it_was_written() {
        let outcomes = [
            (Outcome::Done, "done"),
            (Outcome::Failed, "failed"),
            (Outcome::OutOfShape, "out-of-shape"),
            (Outcome::RateLimited, "rate-limited"),
            (Outcome::NotLoggedIn, "not-logged-in"),
            (Outcome::ServiceUnavailable, "service-unavailable"),
            (Outcome::ResourceLimit, "resource-limit"),
            (Outcome::Passed, "passed"),
            (Outcome::NotRun, "not-run"),
            (Outcome::Running, "running"),
            (Outcome::Interrupted, "interrupted"),
            (Outcome::Other("code 9".into()), "code 9"),
        ];
        for (outcome, word) in outcomes {
            let json = serde_json::to_string(&outcome).unwrap();
            assert_eq!(json, format!("\"{word}\""));
            assert_eq!(outcome.word(), word);
            assert_eq!(serde_json::from_str::<Outcome>(&json).unwrap(), outcome);
        }
        for (role, word) in [
            (CallRole::Implement, "implement"),
            (CallRole::Review, "review"),
            (CallRole::Proof, "proof"),
            (CallRole::Check, "check"),
            (CallRole::Other("judge".into()), "judge"),
        ] {
            let json = serde_json::to_string(&role).unwrap();
            assert_eq!(json, format!("\"{word}\""));
            assert_eq!(serde_json::from_str::<CallRole>(&json).unwrap(), role);
        }
        // The harness's words are the receipts' words: a code read back is the code.
        for code in 0..7 {
            let code = stet_plugin_api::OutcomeCode(code);
            assert_eq!(Some(Outcome::of_code(code).word()), code.name());
        }
        assert_eq!(
            Outcome::of_code(stet_plugin_api::OutcomeCode(42)),
            Outcome::Other("code 42".into())
        );
    }

    #[test]
    fn only_a_call_that_ended_its_task_is_a_finished_call() {
        use stet_plugin_api::OutcomeCode as C;
        assert_eq!(Outcome::Done.finished_call(), Some(C::DONE));
        assert_eq!(Outcome::Failed.finished_call(), Some(C::FAILED));
        assert_eq!(Outcome::OutOfShape.finished_call(), Some(C::OUT_OF_SHAPE));
        assert_eq!(
            Outcome::ResourceLimit.finished_call(),
            Some(C::RESOURCE_LIMIT)
        );
        for unfinished in [
            Outcome::Running,
            Outcome::Interrupted,
            Outcome::NotRun,
            Outcome::RateLimited,
            Outcome::NotLoggedIn,
            Outcome::ServiceUnavailable,
            Outcome::Passed,
            Outcome::Other("done-ish".into()),
        ] {
            assert_eq!(unfinished.finished_call(), None, "{unfinished}");
        }
    }

    #[test]
    fn a_receipt_written_before_the_outcome_was_typed_still_reads() {
        // As a drive of the stet before typed receipts wrote it (no owner, limits or
        // later fields), and one from a newer stet with words this one does not know.
        let old = r#"{"id":"1-item-check","run":"drive-1","item":"item","lane":"stet/item",
            "role":"check","round":2,"runtime":{"name":"docker","version":"0.1.0",
            "library_sha256":"ab"},"runtime_reason":"the only one","harness":{"name":"",
            "version":"","library_sha256":""},"image":"stet-lane:1","network":"none",
            "started_unix_ms":1,"ended_unix_ms":2,"exit_code":0,"exit_signal":null,
            "outcome":"passed","detail":"ok","retry_at_unix":null,"cost_usd":null,
            "usage":[],"commit_before":"a","commit_after":"a","log":"/x.log","session":[]}"#;
        let receipt: Receipt = serde_json::from_str(old).unwrap();
        assert_eq!(receipt.role, CallRole::Check);
        assert_eq!(receipt.outcome, Outcome::Passed);
        let newer = old
            .replace(r#""role":"check""#, r#""role":"judge""#)
            .replace(r#""outcome":"passed""#, r#""outcome":"vetoed""#);
        let receipt: Receipt = serde_json::from_str(&newer).unwrap();
        assert_eq!(receipt.role, CallRole::Other("judge".into()));
        assert_eq!(receipt.outcome, Outcome::Other("vetoed".into()));
        assert_eq!(receipt.outcome.finished_call(), None);
        // And what is read is written back the same.
        let again: Receipt =
            serde_json::from_str(&serde_json::to_string(&receipt).unwrap()).unwrap();
        assert_eq!(again, receipt);
    }
}
