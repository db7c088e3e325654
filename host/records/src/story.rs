//! An item's story as the remote and this clone know it: its state (marks, reservation,
//! checkpoint), each round's calls and checks from this clone's receipts, and its lane's
//! change. What `stet queue` and `stet show` print; read only, and what was written by a
//! sandbox (a check's output, the lane's change) read as bounded data.

use serde::Serialize;

use crate::error::{Concept, Error};
use crate::queue;
use crate::reservations::{Remote, ReservationError};

/// Where an item stands, from the remote's marks and reservations. Its words (`open`,
/// `reserved`, …) are said at the edge only: in `--json`, tables and the board.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ItemState {
    /// Queued, held by no one.
    #[default]
    Open,
    /// A drive holds it (its reservation runs).
    Reserved,
    /// Its reservation ran out: the next drive takes it over.
    Lapsed,
    /// Landed.
    Landed,
    /// Given up, with why.
    Failed,
    /// Cancelled by a person (`stet rm`).
    Cancelled,
    /// The remote could not be read.
    Unknown,
}

impl ItemState {
    /// Its word, as `--json` and the tables say it.
    pub fn word(self) -> &'static str {
        match self {
            ItemState::Open => "open",
            ItemState::Reserved => "reserved",
            ItemState::Lapsed => "lapsed",
            ItemState::Landed => "landed",
            ItemState::Failed => "failed",
            ItemState::Cancelled => "cancelled",
            ItemState::Unknown => "unknown",
        }
    }

    /// The state a word names (`--json`'s, the board's filter), if any.
    pub fn from_word(word: &str) -> Option<ItemState> {
        ItemState::ALL.into_iter().find(|s| s.word() == word)
    }

    /// Every state, in the order a person reads them.
    pub const ALL: [ItemState; 7] = [
        ItemState::Open,
        ItemState::Reserved,
        ItemState::Lapsed,
        ItemState::Landed,
        ItemState::Failed,
        ItemState::Cancelled,
        ItemState::Unknown,
    ];

    /// Whether a reservation holds it, running or run out.
    pub fn held(self) -> bool {
        matches!(self, ItemState::Reserved | ItemState::Lapsed)
    }
}

impl std::fmt::Display for ItemState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.word())
    }
}

/// One item as `stet queue` shows it. Its `--json` form is [`ItemJson`].
#[derive(Clone, Default)]
pub struct Row {
    pub id: String,
    /// What a person types for it (`handles.rs`).
    pub handle: String,
    pub title: String,
    pub state: ItemState,
    /// Who holds the reservation, for `reserved` and `lapsed`.
    pub holder: Option<String>,
    /// The lane's stage as its reservation says, for `reserved` and `lapsed`.
    pub stage: Option<String>,
    /// When the reservation lapses, for `reserved` and `lapsed`.
    pub until_unix: Option<i64>,
    /// The same, as RFC 3339.
    pub until: Option<String>,
    /// The lane's branch, when it has been pushed to the remote.
    pub lane: Option<String>,
    /// Why the item failed, for `failed`.
    pub why: Option<String>,
    /// The round its lane is in, when it has a checkpoint.
    pub round: Option<u32>,
    /// The move its lane goes on with, when it has a checkpoint.
    pub next: Option<&'static str>,
    /// Why its last round did not land, when one did not.
    pub reason: Option<String>,
    /// The pull request its landing opened (or found open), as its landed record keeps it.
    pub pull_request: Option<String>,
    /// Why its land step failed, for `landed`: `pull request not opened: …` (`stet land ID`
    /// makes it again).
    pub land_failed: Option<String>,
    /// What stet's proxy refused its calls on this clone (from their receipts): each
    /// host:port and how often.
    pub blocked: Vec<(String, u64)>,
    /// Whether a drive takes the item as this working copy has it: `only-here` when the
    /// base (the remote's branch lanes branch from, as last fetched) lacks its file,
    /// `changed-here` when it holds other text (the base's is driven); absent otherwise.
    pub here: Option<&'static str>,
    /// The base that is, by its remote-tracking name (`origin/main`), with `here`.
    pub base: Option<String>,
}

/// An item as every `--json` shape describes it (docs/json.md): `id`, `state`, `why` (why
/// it is in that state: a failure, or why its last round did not land) and `remedy` (what
/// the person can do about it), each `null` when there is nothing to say, never `""`; then
/// what else is known. The one place this shape is made: a field added here (a handle) is
/// in every command's output.
#[derive(Serialize)]
pub struct ItemJson<'a> {
    pub id: &'a str,
    pub handle: &'a str,
    pub title: &'a str,
    pub state: ItemState,
    pub why: Option<&'a str>,
    pub remedy: Option<String>,
    pub holder: Option<&'a str>,
    pub stage: Option<&'a str>,
    pub until_unix: Option<i64>,
    pub until: Option<&'a str>,
    pub lane: Option<&'a str>,
    pub round: Option<u32>,
    pub next: Option<&'static str>,
    /// The pull request its landing opened, `null` when none is recorded.
    pub pull_request: Option<&'a str>,
    /// Why its land step failed, for a landed item whose land step did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub land_failed: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub blocked: &'a [(String, u64)],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub here: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<&'a str>,
}

impl Row {
    /// Its `--json` form.
    pub fn json(&self) -> ItemJson<'_> {
        let remedy = match self.state {
            ItemState::Failed | ItemState::Cancelled => Some(format!("stet retry {}", self.handle)),
            ItemState::Landed if self.land_failed.is_some() => {
                Some(format!("stet land {}", self.handle))
            }
            ItemState::Lapsed => Some("the next stet drive takes it over".to_string()),
            _ => None,
        };
        ItemJson {
            id: &self.id,
            handle: &self.handle,
            title: &self.title,
            state: self.state,
            why: self
                .why
                .as_deref()
                .or(self.reason.as_deref())
                .filter(|w| !w.is_empty()),
            remedy,
            holder: self.holder.as_deref(),
            stage: self.stage.as_deref(),
            until_unix: self.until_unix,
            until: self.until.as_deref(),
            lane: self.lane.as_deref(),
            round: self.round,
            next: self.next,
            pull_request: self.pull_request.as_deref(),
            land_failed: self.land_failed.as_deref(),
            blocked: &self.blocked,
            here: self.here,
            base: self.base.as_deref(),
        }
    }
}

impl Serialize for Row {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.json().serialize(serializer)
    }
}

/// Every item of `items` with its state as the remote says (and a note when the remote
/// did not answer: then every state is `unknown`), at `now` (seconds since the epoch).
pub fn states(
    repo: &std::path::Path,
    items: &[queue::Item],
    remote_name: &str,
    now: i64,
) -> Result<(Vec<Row>, Option<String>), Error> {
    let repo = repo.to_path_buf();
    let remote = Remote {
        repo: &repo,
        name: remote_name,
    };
    let on_remote = remote.list().and_then(|r| {
        let marks = remote.marks()?;
        let reasons = if marks.failed.is_empty() {
            Default::default()
        } else {
            remote.failure_reasons()?
        };
        Ok((r, marks, reasons, remote.checkpoints()?))
    });
    let (reservations, marks, reasons, checkpoints, remote_note) = match on_remote {
        Ok((list, marks, reasons, checkpoints)) => (list, marks, reasons, checkpoints, None),
        Err(ReservationError::Remote { detail, .. }) => (
            Vec::new(),
            Default::default(),
            Default::default(),
            Default::default(),
            Some(format!(
                "the remote {} did not answer ({}): every item's state is unknown",
                remote_name,
                crate::reservations::first_cause(&detail)
            )),
        ),
        Err(e) => return Err(Concept::Drive.failure(e.to_string())),
    };
    let records = land_records(&remote, &marks, items);
    let blocked = blocked_by_item(&repo);
    // Which items a drive would not take as they are here: it reads the queue from the
    // base (`base.rs`), as this clone last fetched it.
    let base = crate::base::known(&repo, remote_name);
    let not_pushed = base
        .as_ref()
        .map(|b| queue::not_pushed(&repo, &queue::scan_at(&repo, &b.commit).0))
        .unwrap_or_default();
    let rows: Vec<Row> = items
        .iter()
        .map(|item| {
            let here = not_pushed.iter().find(|n| n.id == item.id).map(|n| {
                if n.in_base {
                    "changed-here"
                } else {
                    "only-here"
                }
            });
            let held = reservations.iter().find(|h| h.reservation.item == item.id);
            let state = match (&remote_note, held) {
                (Some(_), _) => ItemState::Unknown,
                (None, _) if marks.landed.contains(&item.id) => ItemState::Landed,
                // A cancel is the person's latest word: an item failed and then
                // cancelled is cancelled (`stet retry` clears both).
                (None, _) if marks.cancelled.contains(&item.id) => ItemState::Cancelled,
                (None, _) if marks.failed.contains(&item.id) => ItemState::Failed,
                (None, None) => ItemState::Open,
                (None, Some(h)) if h.reservation.expires_at_unix > now => ItemState::Reserved,
                (None, Some(_)) => ItemState::Lapsed,
            };
            let reserved = state.held();
            Row {
                id: item.id.clone(),
                handle: item.handle.clone(),
                title: item.title.clone(),
                state,
                holder: held
                    .filter(|_| reserved)
                    .map(|h| h.reservation.holder.clone()),
                stage: held
                    .filter(|_| reserved)
                    .map(|h| h.reservation.stage.clone()),
                until_unix: held
                    .filter(|_| reserved)
                    .map(|h| h.reservation.expires_at_unix),
                until: held.filter(|_| reserved).map(|h| {
                    crate::printer::rfc3339_ms(
                        u64::try_from(h.reservation.expires_at_unix).unwrap_or(0) * 1000,
                    )
                }),
                lane: marks
                    .lanes
                    .contains(&item.id)
                    .then(|| crate::lanes::branch_of(&item.id)),
                why: reasons.get(&item.id).cloned(),
                round: checkpoints.get(&item.id).map(|c| c.round),
                next: checkpoints.get(&item.id).map(|c| c.next.word()),
                reason: checkpoints.get(&item.id).and_then(|c| c.reason.clone()),
                pull_request: records
                    .get(&item.id)
                    .filter(|_| state == ItemState::Landed)
                    .and_then(|r| r.pull_request.clone()),
                land_failed: records
                    .get(&item.id)
                    .filter(|_| state == ItemState::Landed)
                    .and_then(|r| r.failed.clone()),
                blocked: blocked
                    .get(&item.id)
                    .map(|b| b.iter().map(|(t, n)| (t.clone(), *n)).collect())
                    .unwrap_or_default(),
                here,
                base: here.and(base.as_ref()).map(|b| b.name.clone()),
            }
        })
        .collect();
    Ok((rows, remote_note))
}

/// What the landed ones of `items` have on record of their land step (a pull request, or
/// why not), by item.
fn land_records(
    remote: &Remote<'_>,
    marks: &crate::reservations::Marks,
    items: &[queue::Item],
) -> std::collections::HashMap<String, crate::land::Recorded> {
    let landed_here: Vec<&str> = items
        .iter()
        .map(|i| i.id.as_str())
        .filter(|id| marks.landed.contains(*id))
        .collect();
    if landed_here.is_empty() {
        return Default::default();
    }
    remote
        .landed_notes(&landed_here, marks.ledger.as_deref())
        .unwrap_or_default()
        .into_iter()
        .map(|(item, note)| (item, crate::land::recorded(&note)))
        .collect()
}

/// What the network wall refused each item's calls (target → times), as this clone's
/// receipts say.
fn blocked_by_item(
    repo: &std::path::Path,
) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, u64>> {
    let mut blocked: std::collections::BTreeMap<String, std::collections::BTreeMap<String, u64>> =
        Default::default();
    for receipt in crate::receipts::read_all(repo).0 {
        for b in receipt.network_blocked {
            *blocked
                .entry(receipt.item.clone())
                .or_default()
                .entry(b.target)
                .or_default() += b.count;
        }
    }
    blocked
}

/// What `stet queue`, `stet show` and `stet board` say of an item after its state: its
/// lane's stage and holder, where it landed, why it failed, and what to do about it.
pub fn detail_of(row: &Row) -> String {
    let detail = match (row.state, &row.holder, &row.stage, row.until_unix) {
        (ItemState::Reserved, Some(holder), Some(stage), Some(until)) => format!(
            " — in lane {} at {stage}, held by {holder} until {}",
            crate::lanes::branch_of(&row.id),
            crate::timestamp::clock(until)
        ),
        (ItemState::Lapsed, Some(holder), Some(stage), Some(until)) => format!(
            " — lane {} left at {stage} by {holder}, lapsed at {}; the next drive takes it up",
            crate::lanes::branch_of(&row.id),
            crate::timestamp::clock(until)
        ),
        (ItemState::Failed, ..) => format!(
            " — {} (stet retry {} to take it up again)",
            row.why.as_deref().unwrap_or("no reason recorded"),
            row.handle
        ),
        (ItemState::Landed, ..) => match (&row.pull_request, &row.land_failed) {
            (Some(url), _) => format!(
                " — {}, pull request {url}",
                crate::lanes::branch_of(&row.id)
            ),
            (None, Some(why)) => format!(
                " — {}, {why} (stet land {} makes it again)",
                crate::lanes::branch_of(&row.id),
                row.handle
            ),
            (None, None) => format!(" — {}", crate::lanes::branch_of(&row.id)),
        },
        (ItemState::Cancelled, ..) => format!(
            " — no drive takes it until stet retry {} (stet clean removes what it left here)",
            row.handle
        ),
        (ItemState::Open, ..) if row.lane.is_some() || row.round.is_some() => format!(
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
    let detail = match (&row.reason, row.state) {
        (Some(reason), ItemState::Open | ItemState::Reserved | ItemState::Lapsed) => {
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

/// One call or check of an item, as `stet show` tells it.
#[derive(Serialize)]
pub struct Step {
    pub receipt: String,
    pub role: crate::receipts::CallRole,
    pub outcome: crate::receipts::Outcome,
    pub detail: String,
    pub seconds: f64,
    pub cost_usd: Option<f64>,
    pub network_blocked: Vec<crate::receipts::BlockedRecord>,
    /// The last lines of its output (a check's; an agent's are in `stet log`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tail: Vec<String>,
    /// The agent call's number among the item's calls as listed (1 = the first): what
    /// `stet show ID --prompt N` takes. None for a check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<u32>,
    /// What the agent was asked, as its receipt names it (None for a check, and for a call
    /// made by a stet that kept no prompts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<crate::receipts::KeptPrompt>,
    /// When it started, milliseconds since the epoch (`stet board` shows it; the `--json`
    /// shapes name receipts for it).
    #[serde(skip)]
    pub started_unix_ms: u64,
    /// Its usage counters (tokens), as its receipt reports them (`stet board` shows them;
    /// `stet receipts --json` has them).
    #[serde(skip)]
    pub usage: Vec<(String, String)>,
}

#[derive(Serialize)]
pub struct Round {
    pub round: u32,
    pub steps: Vec<Step>,
}

/// Lines of a check's output kept.
const TAIL_LINES: usize = 15;

/// Each round's calls and checks of `item`, as this clone's receipts say, in order.
pub fn rounds(repo: &std::path::Path, item: &str) -> Vec<Round> {
    let (receipts, _) = crate::receipts::read_all(repo);
    let mut ours: Vec<&crate::receipts::Receipt> =
        receipts.iter().filter(|r| r.item == item).collect();
    ours.sort_by_key(|r| r.started_unix_ms);
    let mut rounds: Vec<Round> = Vec::new();
    let mut calls = 0u32;
    for r in ours {
        let call = (r.role != crate::receipts::CallRole::Check).then(|| {
            calls += 1;
            calls
        });
        let round = r.round.unwrap_or(1);
        let tail = if r.role == crate::receipts::CallRole::Check {
            // Written by a sandbox: read as data, the end only.
            crate::files::read_untrusted(&r.log, 8 << 20)
                .map(|bytes| {
                    let text = String::from_utf8_lossy(&bytes).into_owned();
                    let lines: Vec<String> = text.lines().map(str::to_string).collect();
                    lines[lines.len().saturating_sub(TAIL_LINES)..].to_vec()
                })
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let step = Step {
            receipt: r.id.clone(),
            role: r.role.clone(),
            outcome: r.outcome.clone(),
            detail: r.detail.clone(),
            seconds: r.ended_unix_ms.saturating_sub(r.started_unix_ms) as f64 / 1000.0,
            cost_usd: r.cost_usd,
            network_blocked: r.network_blocked.clone(),
            tail,
            call,
            prompt: r.prompt.clone(),
            started_unix_ms: r.started_unix_ms,
            usage: r.usage.clone(),
        };
        match rounds.last_mut() {
            Some(last) if last.round == round => last.steps.push(step),
            _ => rounds.push(Round {
                round,
                steps: vec![step],
            }),
        }
    }
    rounds
}

/// The prompt the `n`-th agent call of `item` received (1 = the first, in the order
/// [`rounds`] lists them), as kept beside its log, with the call it was.
pub fn prompt(repo: &std::path::Path, item: &str, n: u32) -> Result<Prompt, Error> {
    let steps: Vec<(u32, Step)> = rounds(repo, item)
        .into_iter()
        .flat_map(|r| r.steps.into_iter().map(move |s| (r.round, s)))
        .filter(|(_, s)| s.call.is_some())
        .collect();
    let count = steps.len();
    let Some((round, step)) = steps.into_iter().find(|(_, s)| s.call == Some(n)) else {
        return Err(match count {
            0 => Concept::Drive
                .usage(format!("{item} has no agent call on this clone"))
                .hint(format!("stet show {item} tells what is known of it")),
            _ => Concept::Drive
                .usage(format!(
                    "{item} has {} on this clone: there is no call {n}",
                    crate::printer::count(count, "agent call", "agent calls")
                ))
                .hint(format!(
                    "--prompt takes 1 to {count}, as stet show {item} numbers them"
                )),
        });
    };
    let Some(kept) = &step.prompt else {
        return Err(Concept::Drive
            .unusable(format!(
                "call {n} of {item} ({}) kept no prompt: it was made by a stet that did not keep prompts",
                step.receipt
            ))
            .hint("calls made from now on keep theirs"));
    };
    let text = kept.read().map_err(|e| {
        Concept::Drive
            .failure(format!(
                "cannot read the prompt of call {n} of {item}: {}",
                kept.file.display()
            ))
            .caused_by(e.to_string())
    })?;
    Ok(Prompt { round, step, text })
}

/// An agent call's prompt, as [`prompt`] reads it back.
pub struct Prompt {
    /// The round the call was made in.
    pub round: u32,
    /// The call.
    pub step: Step,
    /// The prompt as kept.
    pub text: String,
}

/// Which of a lane's change [`diff`] gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Diff {
    /// `git diff --stat`.
    Stat,
    /// The whole diff.
    Whole,
}

/// The lane's change against where it branched off the base (the remote's branch lanes
/// branch from, as this clone last fetched it: `base.rs`; the local HEAD when this clone
/// knows none), as this clone has its branch or the remote's ([`lane_ref`]; `None` when
/// neither has it), bounded: what the agent committed may be large.
pub fn diff(repo: &std::path::Path, remote: &str, item: &str, which: Diff) -> Option<String> {
    /// The most of a diff `show` holds and prints.
    const SHOWN_DIFF: usize = 8 << 20;
    // The lane's branch as this clone has it; its content is the agent's, so diffed by git
    // that runs no driver, filter or textconv of its.
    let branch = lane_ref(repo, remote, item)?.0;
    let git = crate::git::Inert::at(repo);
    let from = crate::base::known(repo, remote).map_or_else(|| "HEAD".to_string(), |b| b.commit);
    let base = git.run(&["merge-base", &from, &branch]).ok();
    let diff_of = |extra: &[&str]| -> Option<String> {
        let base = base.as_deref()?;
        let mut all = vec!["diff", "--no-ext-diff", "--no-textconv"];
        all.extend_from_slice(extra);
        all.extend([base, branch.as_str()]);
        // Streamed and bounded: what the agent committed may be large; a person reads the
        // start, and is told where to read the rest. (Untrimmed at the start: a stat's
        // lines start with a space.)
        let mut kept = Vec::new();
        let mut left_out = 0u64;
        git.stream(&all, 64 * 1024, &mut |piece| {
            if kept.len() + piece.len() <= SHOWN_DIFF {
                kept.extend_from_slice(piece);
            } else {
                left_out += piece.len() as u64;
            }
        })
        .ok()?;
        let mut text = String::from_utf8_lossy(&kept).trim_end().to_string();
        if left_out > 0 {
            text.push_str(&format!(
                "\n[stet: {left_out} more bytes of the diff not shown; git diff {base} {branch} shows them]"
            ));
        }
        Some(text)
    };
    match which {
        Diff::Stat => diff_of(&["--stat"]),
        Diff::Whole => diff_of(&[]),
    }
}

/// Where this clone reads `item`'s lane branch: the local `stet/<item>`, else the remote's
/// (`<remote>/stet/<item>`, fetched when the remote has it and this clone has not: after
/// `stet clean` removed the local branch). The ref, and its name as a person writes it.
pub fn lane_ref(repo: &std::path::Path, remote: &str, item: &str) -> Option<(String, String)> {
    let branch = crate::lanes::branch_of(item);
    let local = format!("refs/heads/{branch}");
    let tracking = format!("refs/remotes/{remote}/{branch}");
    let have = |r: &str| {
        crate::git::run(
            repo,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{r}^{{commit}}"),
            ],
        )
        .is_ok()
    };
    if have(&local) {
        return Some((local, branch));
    }
    if !have(&tracking) {
        // What `git fetch <remote> stet/<item>` makes: the remote's branch, as a
        // remote-tracking ref (objects only; nothing of it runs).
        crate::git::run(
            repo,
            &[
                "fetch",
                "--quiet",
                "--no-tags",
                remote,
                &format!("+refs/heads/{branch}:{tracking}"),
            ],
        )
        .ok()?;
    }
    have(&tracking).then(|| (tracking, format!("{remote}/{branch}")))
}
