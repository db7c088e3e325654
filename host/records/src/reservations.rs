//! Reservations on the remote: who works which item, until when.
//!
//! A reservation is a ref, `refs/stet/reservations/<item>`, on the repository's remote,
//! pointing at a commit (empty tree) whose message is the reservation as JSON. Taking,
//! renewing and releasing one is a compare-and-swap of that ref: a push with
//! `--force-with-lease=<ref>:<the oid we saw>` (empty for "must not exist"), which the
//! remote applies atomically under its ref lock. So two drives on two clones never both
//! win the same item, whichever machine they run on. A reservation lapses on its own at
//! its expiry; a peer may then take it over and continue from the lane's pushed branch.

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

use std::collections::HashSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Where reservations live on the remote.
pub const PREFIX: &str = "refs/stet/reservations/";
/// Where landed items are marked on the remote.
pub const LANDED: &str = "refs/stet/landed/";
/// The one record of every item landed: a commit whose tree holds `landed/<item>`, a blob
/// saying where it landed. One ref however many items land, so the remote's ref list — read
/// by every move of every drive — does not grow with the queue's history. (Marks of the
/// older form, a ref per item under [`LANDED`], are still read.)
pub const LEDGER: &str = "refs/stet/ledger";
/// Where this clone keeps the ledger it last read.
const SEEN_LEDGER: &str = "refs/stet/seen/ledger";
/// Where items a drive gave up on are marked on the remote, the commit message saying why.
pub const FAILED: &str = "refs/stet/failed/";
/// Items cancelled (`stet rm`): no drive takes them, a lane working one stops at its next
/// move.
pub const CANCELLED: &str = "refs/stet/cancelled/";
/// Where lanes' branches live on the remote.
pub const LANES: &str = "refs/heads/stet/";
/// Where this clone keeps the copies it fetched.
const SEEN: &str = "refs/stet/seen/reservations/";
const SEEN_FAILED: &str = "refs/stet/seen/failed/";

/// What the remote says about items, beside reservations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marks {
    /// Items marked landed.
    pub landed: std::collections::HashSet<String>,
    /// Items marked failed.
    pub failed: std::collections::HashSet<String>,
    /// Items whose lane has a pushed branch.
    pub lanes: std::collections::HashSet<String>,
    /// Where each of those branches is on the remote (its commit), as listed.
    pub lane_tips: std::collections::HashMap<String, String>,
    /// Items cancelled (`stet rm`).
    pub cancelled: std::collections::HashSet<String>,
    /// The ledger's commit as the remote listed it with these marks, if it has one (what
    /// [`Remote::landed_notes`] reads, with no second round trip).
    pub ledger: Option<String>,
}

impl Marks {
    /// Whether a drive may take `item`: not landed, failed or cancelled.
    pub fn open(&self, item: &str) -> bool {
        !self.landed.contains(item) && !self.failed.contains(item) && !self.cancelled.contains(item)
    }
}

/// What a reservation says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// The item.
    pub item: String,
    /// Who holds it (a clone's id and the drive's process).
    pub holder: String,
    /// The lane's branch.
    pub lane: String,
    /// The lane's stage when last written.
    pub stage: String,
    /// When it lapses, seconds since the Unix epoch.
    pub expires_at_unix: i64,
}

/// A reservation as read from the remote, with the object its ref pointed at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// What it says.
    pub reservation: Reservation,
    /// The commit the ref pointed at: the value a compare-and-swap expects.
    pub oid: String,
}

/// Why a reservation could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ReservationError {
    /// Someone else holds it and it has not lapsed.
    #[error("item {item} is reserved by {holder} until {until_unix}")]
    HeldByOther {
        item: String,
        holder: String,
        until_unix: i64,
    },
    /// The ref changed between reading and writing it: another drive won.
    #[error("item {item}: another drive changed the reservation first")]
    Raced { item: String },
    /// The remote could not be reached or refused for another reason.
    #[error("the remote {remote} did not answer: {detail}")]
    Remote { remote: String, detail: String },
}

/// What git said when it could not reach a remote, in a line: its first `fatal:` line (the
/// cause; the lines after it are advice), else its first line.
pub fn first_cause(detail: &str) -> &str {
    detail
        .lines()
        .find(|l| l.starts_with("fatal:"))
        .or_else(|| detail.lines().find(|l| !l.trim().is_empty()))
        .unwrap_or_default()
        .trim()
}

/// A repository and the name of its remote.
pub struct Remote<'a> {
    /// The local clone.
    pub repo: &'a Path,
    /// The remote's name (`origin`).
    pub name: &'a str,
}

/// Reading records fetches them into a namespace of this clone first
/// (`refs/stet/seen/…`, pruned): two lanes of one drive doing it at once would race on those
/// refs, so they take turns. (Drives on one clone read them under the drain lock.)
pub(crate) fn seen_refs() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

impl Remote<'_> {
    pub(crate) fn git(&self, args: &[&str]) -> Result<String, ReservationError> {
        crate::git::run(self.repo, args).map_err(|e| self.unreachable(e.detail))
    }

    /// A commit with the empty tree whose message is `message`: what every ref stet keeps
    /// on the remote points at.
    pub(crate) fn note_commit(&self, message: &str) -> Result<String, ReservationError> {
        let tree = self.git(&["mktree"])?.trim().to_string();
        Ok(self
            .git(&["commit-tree", &tree, "-m", message])?
            .trim()
            .to_string())
    }

    pub(crate) fn unreachable(&self, detail: String) -> ReservationError {
        ReservationError::Remote {
            remote: self.name.to_string(),
            detail,
        }
    }

    /// Every reservation on the remote, lapsed ones included.
    pub fn list(&self) -> Result<Vec<Held>, ReservationError> {
        let _turn = seen_refs();
        self.git(&[
            "fetch",
            "--quiet",
            "--no-tags",
            "--prune",
            self.name,
            &format!("+{PREFIX}*:{SEEN}*"),
        ])?;
        // One process for every reservation: each commit's message is one line of JSON.
        let refs = self.git(&[
            "for-each-ref",
            "--format=%(objectname) %(contents:subject)",
            SEEN,
        ])?;
        let mut held = Vec::new();
        for line in refs.lines() {
            let Some((oid, message)) = line.split_once(' ') else {
                continue;
            };
            // A ref someone else wrote by hand is not ours to interpret; it is skipped.
            if let Ok(reservation) = serde_json::from_str::<Reservation>(message.trim()) {
                held.push(Held {
                    reservation,
                    oid: oid.to_string(),
                });
            }
        }
        Ok(held)
    }

    /// The reservation of `item`, if any.
    pub fn get(&self, item: &str) -> Result<Option<Held>, ReservationError> {
        Ok(self
            .list()?
            .into_iter()
            .find(|h| h.reservation.item == item))
    }

    /// Takes `item` for `holder`: free, lapsed, already ours, or one `take_over` says may
    /// be taken over before it lapses. Returns what was written.
    pub fn take(
        &self,
        wanted: Reservation,
        now_unix: i64,
        take_over: impl Fn(&Reservation) -> bool,
    ) -> Result<Held, ReservationError> {
        let current = self.get(&wanted.item)?;
        if let Some(current) = &current {
            let r = &current.reservation;
            if r.holder != wanted.holder && r.expires_at_unix > now_unix && !take_over(r) {
                return Err(ReservationError::HeldByOther {
                    item: wanted.item.clone(),
                    holder: r.holder.clone(),
                    until_unix: r.expires_at_unix,
                });
            }
        }
        self.swap(&wanted, current.as_ref().map(|c| c.oid.as_str()))
    }

    /// Writes `next` over `held`, if the remote still holds exactly `held`.
    pub fn renew(&self, held: &Held, next: Reservation) -> Result<Held, ReservationError> {
        self.swap(&next, Some(&held.oid))
    }

    /// Deletes `held` from the remote, if it is still exactly `held`.
    pub fn release(&self, held: &Held) -> Result<(), ReservationError> {
        let reference = format!("{PREFIX}{}", held.reservation.item);
        self.push_with_lease(
            &reference,
            &held.oid,
            &format!(":{reference}"),
            &held.reservation.item,
        )
    }

    /// Marks `item` landed on the remote (`refs/stet/landed/<item>`, a commit whose message
    /// says where); the queue then shows it landed on every clone.
    pub fn mark_landed(&self, item: &str, note: &str) -> Result<(), ReservationError> {
        self.push_ledger(&[(item, note)], &[], (&[], &[]), || true)
            .map_err(|e| self.unreachable(e.to_string()))
    }

    /// Marks `item` failed on the remote (`refs/stet/failed/<item>`, the message saying
    /// why): no drive takes it again until someone clears the mark (`stet retry`).
    pub fn mark_failed(&self, item: &str, why: &str) -> Result<(), ReservationError> {
        self.mark(FAILED, item, why)
    }

    /// Marks `item` cancelled on the remote (the message saying by whom and when).
    pub fn mark_cancelled(&self, item: &str, note: &str) -> Result<(), ReservationError> {
        self.mark(CANCELLED, item, note)
    }

    /// Removes `item`'s landed mark (`stet clean --remote`, once its item file is gone: a
    /// mark must outlive the file it keeps drives off). Only a landed mark can be removed
    /// this way: a failed or cancelled one is undone by [`Remote::clear_for_retry`] alone,
    /// the person's own word, never by a clean.
    pub fn unmark_landed(&self, item: &str) -> Result<(), ReservationError> {
        // In the ledger, or (an older drive's) a ref of its own, or both.
        if let Some(ledger) = self.ledger_now()? {
            if self.ledger_items(&ledger)?.contains(item) {
                self.push_ledger(&[], &[item], (&[], &[]), || true)
                    .map_err(|e| self.unreachable(e.to_string()))?;
            }
        }
        let old = self.git(&["ls-remote", self.name, &format!("{LANDED}{item}")])?;
        if old.is_empty() {
            return Ok(());
        }
        self.git(&["push", "--quiet", self.name, &format!(":{LANDED}{item}")])
            .map(|_| ())
    }

    /// Clears `item`'s failed and cancelled marks in one push (`stet retry`: the one way a
    /// drive takes such an item again); returns which it had (`failed`, `cancelled`), none
    /// when it had neither.
    pub fn clear_for_retry(&self, item: &str) -> Result<Vec<&'static str>, ReservationError> {
        let marks = self.marks_for(item)?;
        let mut had = Vec::new();
        let mut deletions = Vec::new();
        for (set, word, prefix) in [
            (&marks.failed, "failed", FAILED),
            (&marks.cancelled, "cancelled", CANCELLED),
        ] {
            if set.contains(item) {
                had.push(word);
                deletions.push(format!(":{prefix}{item}"));
            }
        }
        if deletions.is_empty() {
            return Ok(had);
        }
        let mut args = vec!["push", "--quiet", self.name];
        args.extend(deletions.iter().map(String::as_str));
        self.git(&args)?;
        Ok(had)
    }

    fn mark(&self, prefix: &str, item: &str, note: &str) -> Result<(), ReservationError> {
        let oid = self.note_commit(note)?;
        self.git(&[
            "push",
            "--quiet",
            "--force",
            self.name,
            &format!("{oid}:{prefix}{item}"),
        ])
        .map(|_| ())
    }

    /// The items marked landed on the remote.
    pub fn landed(&self) -> Result<Vec<String>, ReservationError> {
        Ok(self.marks()?.landed.into_iter().collect())
    }

    /// What the remote says about every item, in one round trip: landed and failed marks,
    /// and which lanes have a pushed branch.
    pub fn marks(&self) -> Result<Marks, ReservationError> {
        let (mut marks, ledger) = self.marks_of(&[
            &format!("{LANDED}*"),
            &format!("{FAILED}*"),
            &format!("{CANCELLED}*"),
            &format!("{LANES}*"),
            LEDGER,
        ])?;
        if let Some(ledger) = ledger {
            marks.landed.extend(self.ledger_items(&ledger)?);
            marks.ledger = Some(ledger);
        }
        Ok(marks)
    }

    /// The marks of one item only (after taking it: a peer may have landed it meanwhile).
    pub fn marks_for(&self, item: &str) -> Result<Marks, ReservationError> {
        let (mut marks, ledger) = self.marks_of(&[
            &format!("{LANDED}{item}"),
            &format!("{FAILED}{item}"),
            &format!("{CANCELLED}{item}"),
            LEDGER,
        ])?;
        if let Some(ledger) = ledger {
            self.have_ledger(&ledger)?;
            if self
                .git(&["cat-file", "-e", &format!("{ledger}:landed/{item}")])
                .is_ok()
            {
                marks.landed.insert(item.to_string());
            }
        }
        Ok(marks)
    }

    /// The marks the refs matching `patterns` make, and the ledger's commit if it matched.
    fn marks_of(&self, patterns: &[&str]) -> Result<(Marks, Option<String>), ReservationError> {
        let mut args = vec!["ls-remote", self.name];
        args.extend_from_slice(patterns);
        let refs = self.git(&args)?;
        let mut marks = Marks::default();
        let mut ledger = None;
        for line in refs.lines() {
            let Some((oid, reference)) = line.split_once('\t') else {
                continue;
            };
            if reference == LEDGER {
                ledger = Some(oid.to_string());
            } else if let Some(item) = reference.strip_prefix(LANDED) {
                marks.landed.insert(item.to_string());
            } else if let Some(item) = reference.strip_prefix(FAILED) {
                marks.failed.insert(item.to_string());
            } else if let Some(item) = reference.strip_prefix(CANCELLED) {
                marks.cancelled.insert(item.to_string());
            } else if let Some(item) = reference.strip_prefix(LANES) {
                marks.lanes.insert(item.to_string());
                marks.lane_tips.insert(item.to_string(), oid.to_string());
            }
        }
        Ok((marks, ledger))
    }

    /// The message of `item`'s mark under `prefix` (who cancelled it, and when), if the
    /// remote has one.
    pub fn mark_note(&self, prefix: &str, item: &str) -> Option<String> {
        let seen = format!("refs/stet/seen/mark/{item}");
        let _turn = seen_refs();
        self.git(&[
            "fetch",
            "--quiet",
            "--no-tags",
            self.name,
            &format!("+{prefix}{item}:{seen}"),
        ])
        .ok()?;
        let note = self.git(&["log", "-1", "--format=%s", &seen]).ok();
        let _ = self.git(&["update-ref", "-d", &seen]);
        note.map(|n| n.trim().to_string()).filter(|n| !n.is_empty())
    }

    /// What the ledger records of each of `items` that it holds: the note its landing wrote
    /// (where it landed, and what its land step did: `land.rs`), at most 4 KiB of it (anyone
    /// who can push wrote it). An item marked by an older drive's ref of its own has none.
    /// `ledger` is the ledger's commit as [`Marks::ledger`] holds it; `None` asks the remote.
    pub fn landed_notes(
        &self,
        items: &[&str],
        ledger: Option<&str>,
    ) -> Result<std::collections::HashMap<String, String>, ReservationError> {
        const MOST: usize = 4 << 10;
        let mut notes = std::collections::HashMap::new();
        let ledger = match ledger {
            Some(ledger) => Some(ledger.to_string()),
            None => self.ledger_now()?,
        };
        let Some(ledger) = ledger else {
            return Ok(notes);
        };
        self.have_ledger(&ledger)?;
        for (item, meta) in self.ledger_entries(&ledger)? {
            if !items.contains(&item.as_str()) {
                continue;
            }
            let Some(oid) = meta.rsplit(' ').next() else {
                continue;
            };
            let size = self
                .git(&["cat-file", "-s", oid])
                .ok()
                .and_then(|s| s.trim().parse::<usize>().ok());
            if size.is_none_or(|s| s > MOST) {
                continue;
            }
            if let Ok(note) = self.git(&["cat-file", "blob", oid]) {
                notes.insert(item, note);
            }
        }
        Ok(notes)
    }

    /// Why each failed item failed, as its mark's message says.
    pub fn failure_reasons(
        &self,
    ) -> Result<std::collections::HashMap<String, String>, ReservationError> {
        let _turn = seen_refs();
        self.git(&[
            "fetch",
            "--quiet",
            "--no-tags",
            "--prune",
            self.name,
            &format!("+{FAILED}*:{SEEN_FAILED}*"),
        ])?;
        let refs = self.git(&[
            "for-each-ref",
            "--format=%(refname)%09%(contents:subject)",
            SEEN_FAILED,
        ])?;
        Ok(refs
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .filter_map(|(r, why)| {
                Some((r.strip_prefix(SEEN_FAILED)?.to_string(), why.to_string()))
            })
            .collect())
    }

    /// The ledger commit `oid` of the remote, here: fetched unless this clone has it.
    fn have_ledger(&self, oid: &str) -> Result<(), ReservationError> {
        // Under the turn of the fetch below: a fetch of few objects writes them one by one
        // (commit first), so a look while one runs could find the commit and not its trees.
        let _turn = seen_refs();
        if self.ledger_trees_here(oid) {
            return Ok(());
        }
        self.git(&[
            "fetch",
            "--quiet",
            "--no-tags",
            self.name,
            &format!("+{LEDGER}:{SEEN_LEDGER}"),
        ])
        .map(|_| ())
    }

    /// Whether the ledger commit `oid` and the trees it is read by are in this repository
    /// (its notes need not be: only their ids are copied).
    fn ledger_trees_here(&self, oid: &str) -> bool {
        let has = |object: String| self.git(&["cat-file", "-e", &object]).is_ok();
        has(format!("{oid}^{{commit}}"))
            && has(format!("{oid}^{{tree}}"))
            && self
                .git(&["ls-tree", "--name-only", oid])
                .is_ok_and(|names| {
                    !names.lines().any(|n| n == "landed") || has(format!("{oid}:landed"))
                })
    }

    /// The items the ledger commit `oid` holds.
    fn ledger_items(&self, oid: &str) -> Result<HashSet<String>, ReservationError> {
        self.have_ledger(oid)?;
        Ok(self
            .ledger_entries(oid)?
            .into_iter()
            .map(|(item, _)| item)
            .collect())
    }

    /// The ledger commit `oid`'s entries: each item, with its tree line (`mode type oid`).
    fn ledger_entries(&self, oid: &str) -> Result<Vec<(String, String)>, ReservationError> {
        // A ledger without landed items (all removed by `stet clean --remote`) has no
        // `landed` tree. Only that reads as empty: a ledger that cannot be read is an error,
        // never an empty ledger, which the next landing would write over every other.
        let root = self.git(&["ls-tree", "-z", oid])?;
        if !root.split('\0').any(|entry| {
            entry
                .split_once('\t')
                .is_some_and(|(_, name)| name == "landed")
        }) {
            return Ok(Vec::new());
        }
        let listing = self.git(&["ls-tree", "-z", &format!("{oid}:landed")])?;
        // Anyone who can push wrote it: an entry whose name cannot be an item id (a control
        // character for a terminal, a path) is not an item's, and is left out.
        Ok(listing
            .split('\0')
            .filter_map(|entry| entry.split_once('\t'))
            .filter(|(_, item)| crate::queue::valid_id(item))
            .map(|(meta, item)| (item.to_string(), meta.to_string()))
            .collect())
    }

    /// The ledger's commit on the remote now, if it has one.
    fn ledger_now(&self) -> Result<Option<String>, ReservationError> {
        let line = self.git(&["ls-remote", self.name, LEDGER])?;
        Ok(line.split_whitespace().next().map(str::to_string))
    }

    /// A new ledger commit on top of `base` with `add` (item, note) added and `remove`
    /// taken out; not pushed.
    fn ledger_with(
        &self,
        base: Option<&str>,
        add: &[(&str, &str)],
        remove: &[&str],
    ) -> Result<String, ReservationError> {
        let mut entries: std::collections::BTreeMap<String, String> = match base {
            Some(base) => {
                self.have_ledger(base)?;
                self.ledger_entries(base)?.into_iter().collect()
            }
            None => Default::default(),
        };
        for (item, note) in add {
            let blob = crate::git::run_input(
                self.repo,
                &["hash-object", "-w", "--stdin"],
                note.as_bytes(),
            )
            .map_err(|e| self.unreachable(e.detail))?;
            entries.insert(item.to_string(), format!("100644 blob {blob}"));
        }
        for item in remove {
            entries.remove(*item);
        }
        let listing: String = entries
            .iter()
            .map(|(item, meta)| format!("{meta}\t{item}\0"))
            .collect();
        // `--missing`: the entries copied from `base` name notes this clone may never have
        // fetched (a peer's landings; a concurrent fetch here may not have brought them
        // yet). Only their ids are needed: the remote holds them, under `base`.
        let mktree = |input: &str| {
            crate::git::run_input(self.repo, &["mktree", "-z", "--missing"], input.as_bytes())
                .map_err(|e| self.unreachable(e.detail))
        };
        let landed = mktree(&listing)?;
        let root = mktree(&format!("040000 tree {landed}\tlanded\0"))?;
        let message = match (add, remove) {
            ([(item, _)], []) => format!("landed {item}"),
            _ => format!("{} landed, {} removed", add.len(), remove.len()),
        };
        let mut args = vec!["commit-tree", &root, "-m", &message];
        if let Some(base) = base {
            args.extend(["-p", base]);
        }
        self.git(&args)
    }

    /// Pushes the ledger changed by `add` and `remove` with `also` (more push arguments:
    /// leases first, then refspecs) in one atomic push, on top of whatever ledger the remote
    /// has: a push that lost to another drive's change of the ledger alone is made again on
    /// top of that one. `still_ours` says, after a refused push, whether the rest of it may
    /// still go through (else the refusal was a peer's, and is returned).
    pub(crate) fn push_ledger(
        &self,
        add: &[(&str, &str)],
        remove: &[&str],
        also: (&[String], &[String]),
        still_ours: impl Fn() -> bool,
    ) -> Result<(), crate::git::PushError> {
        let unreachable = |e: ReservationError| {
            crate::git::PushError::Failed(crate::git::GitError {
                args: "push the ledger".into(),
                dir: self.repo.display().to_string(),
                detail: e.to_string(),
            })
        };
        let mut attempt: u32 = 0;
        loop {
            attempt = attempt.saturating_add(1);
            let base = self.ledger_now().map_err(unreachable)?;
            let next = self
                .ledger_with(base.as_deref(), add, remove)
                .map_err(unreachable)?;
            let lease = format!(
                "--force-with-lease={LEDGER}:{}",
                base.as_deref().unwrap_or("")
            );
            let spec = format!("{next}:{LEDGER}");
            let mut args: Vec<&str> = vec!["--atomic", &lease];
            args.extend(also.0.iter().map(String::as_str));
            args.push(self.name);
            args.push(&spec);
            args.extend(also.1.iter().map(String::as_str));
            match crate::git::push(self.repo, &args) {
                Err(crate::git::PushError::Raced { .. })
                    if attempt < 20 && self.ledger_now().ok().flatten() != base && still_ours() =>
                {
                    continue
                }
                other => return other,
            }
        }
    }

    /// The record of `next`, made here and not pushed yet (for a push that carries a
    /// renewal with other refs).
    pub fn record(&self, next: &Reservation) -> Result<Held, ReservationError> {
        let message = serde_json::to_string(next)
            .map_err(|e| self.unreachable(format!("cannot write the reservation: {e}")))?;
        Ok(Held {
            reservation: next.clone(),
            oid: self.note_commit(&message)?,
        })
    }

    /// The arguments that make a push carry a change of `held`'s ref: to `next` (a renewal),
    /// or away (`None`: a release) — each only if the remote still holds exactly `held`.
    pub(crate) fn lease_args(held: &Held, next: Option<&Held>) -> [String; 2] {
        let reference = format!("{PREFIX}{}", held.reservation.item);
        [
            format!("--force-with-lease={reference}:{}", held.oid),
            match next {
                // No `+`: a forced refspec would override the lease.
                Some(next) => format!("{}:{reference}", next.oid),
                None => format!(":{reference}"),
            },
        ]
    }

    fn swap(&self, next: &Reservation, expected: Option<&str>) -> Result<Held, ReservationError> {
        let held = self.record(next)?;
        let reference = format!("{PREFIX}{}", next.item);
        self.push_with_lease(
            &reference,
            expected.unwrap_or(""),
            &format!("{}:{reference}", held.oid),
            &next.item,
        )?;
        Ok(held)
    }

    fn push_with_lease(
        &self,
        reference: &str,
        expected: &str,
        refspec: &str,
        item: &str,
    ) -> Result<(), ReservationError> {
        let lease = format!("--force-with-lease={reference}:{expected}");
        match crate::git::push(self.repo, &[&lease, self.name, refspec]) {
            Ok(()) => Ok(()),
            // Someone else wrote the ref first, in whichever of git's forms: a stale lease,
            // or a concurrent push that held the remote's ref lock.
            Err(crate::git::PushError::Raced { .. }) => Err(ReservationError::Raced {
                item: item.to_string(),
            }),
            Err(crate::git::PushError::Failed(e)) => Err(self.unreachable(e.detail)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    fn run(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }

    /// A bare remote with one commit, and two clones of it.
    fn two_clones() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let bare = root.path().join("remote.git");
        run(
            root.path(),
            &["init", "--quiet", "--bare", bare.to_str().unwrap()],
        );
        let seed = root.path().join("seed");
        run(
            root.path(),
            &[
                "clone",
                "--quiet",
                bare.to_str().unwrap(),
                seed.to_str().unwrap(),
            ],
        );
        std::fs::write(seed.join("README"), "x").unwrap();
        run(&seed, &["add", "README"]);
        run(&seed, &["commit", "--quiet", "-m", "start"]);
        run(&seed, &["push", "--quiet", "origin", "HEAD"]);
        let a = root.path().join("a");
        let b = root.path().join("b");
        run(
            root.path(),
            &[
                "clone",
                "--quiet",
                bare.to_str().unwrap(),
                a.to_str().unwrap(),
            ],
        );
        run(
            root.path(),
            &[
                "clone",
                "--quiet",
                bare.to_str().unwrap(),
                b.to_str().unwrap(),
            ],
        );
        (root, a, b)
    }

    fn origin(repo: &Path) -> Remote<'_> {
        Remote {
            repo,
            name: "origin",
        }
    }

    fn wanted(holder: &str, expires: i64) -> Reservation {
        Reservation {
            item: "20261130-fix-typo".into(),
            holder: holder.into(),
            lane: "stet/20261130-fix-typo".into(),
            stage: "implement".into(),
            expires_at_unix: expires,
        }
    }

    #[test]
    fn one_clone_wins_and_a_lapsed_reservation_is_taken_over() {
        let (_root, a, b) = two_clones();
        let (ra, rb) = (origin(&a), origin(&b));
        let held = ra.take(wanted("clone-a", 1000), 100, |_| false).unwrap();
        // B sees A's reservation and is refused while it is current.
        match rb.take(wanted("clone-b", 1000), 100, |_| false) {
            Err(ReservationError::HeldByOther {
                holder, until_unix, ..
            }) => {
                assert_eq!((holder.as_str(), until_unix), ("clone-a", 1000));
            }
            other => panic!("{other:?}"),
        }
        // A renews; then the clock passes the expiry and B takes over the lapsed one.
        let renewed = ra.renew(&held, wanted("clone-a", 2000)).unwrap();
        let taken = rb.take(wanted("clone-b", 5000), 3000, |_| false).unwrap();
        assert_eq!(
            rb.get(&taken.reservation.item)
                .unwrap()
                .unwrap()
                .reservation
                .holder,
            "clone-b"
        );
        // A's renewal now loses the compare-and-swap instead of overwriting B.
        let late = ra.renew(&renewed, wanted("clone-a", 9000));
        assert!(
            matches!(late, Err(ReservationError::Raced { .. })),
            "{late:?}"
        );
        // B releases; the item is free again.
        rb.release(&taken).unwrap();
        assert!(ra.get("20261130-fix-typo").unwrap().is_none());
    }

    #[test]
    fn concurrent_takes_have_exactly_one_winner_and_the_loser_is_told_it_lost_a_race() {
        let (_root, a, b) = two_clones();
        // Pushes that meet at the remote's ref lock are refused as `[remote rejected]
        // (failed to update ref)`; a loser must see that as a race, never as an outage.
        for round in 0..12 {
            let item = format!("item-{round}");
            let take = |repo: &Path, holder: &str| {
                origin(repo).take(
                    Reservation {
                        item: item.clone(),
                        ..wanted(holder, 1000)
                    },
                    100,
                    |_| false,
                )
            };
            let (ra, rb) = std::thread::scope(|scope| {
                let ha = scope.spawn(|| take(&a, "clone-a"));
                let hb = scope.spawn(|| take(&b, "clone-b"));
                (ha.join().unwrap(), hb.join().unwrap())
            });
            assert_eq!(
                [ra.is_ok(), rb.is_ok()].iter().filter(|w| **w).count(),
                1,
                "round {round}: {ra:?} {rb:?}"
            );
            for lost in [ra, rb].into_iter().filter_map(Result::err) {
                assert!(
                    matches!(
                        lost,
                        ReservationError::Raced { .. } | ReservationError::HeldByOther { .. }
                    ),
                    "round {round}: the loser saw {lost:?}"
                );
            }
        }
    }

    #[test]
    fn an_unreachable_remote_is_named() {
        let (_root, a, _b) = two_clones();
        run(
            &a,
            &["remote", "set-url", "origin", "/nonexistent/remote.git"],
        );
        match (Remote {
            repo: &a,
            name: "origin",
        })
        .list()
        {
            Err(ReservationError::Remote { remote, .. }) => assert_eq!(remote, "origin"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_take_over_rule_takes_a_current_reservation_and_marks_are_read_in_one_trip() {
        let (_root, a, b) = two_clones();
        let (ra, rb) = (origin(&a), origin(&b));
        ra.take(wanted("clone-a", 1000), 100, |_| false).unwrap();
        // A rule that recognises the holder (its process gone) takes it before it lapses.
        let taken = rb
            .take(wanted("clone-b", 1000), 100, |r| r.holder == "clone-a")
            .unwrap();
        assert_eq!(taken.reservation.holder, "clone-b");

        ra.mark_landed("one", "landed stet/one").unwrap();
        ra.mark_failed("two", "not landed after 3 rounds").unwrap();
        let marks = rb.marks().unwrap();
        assert!(marks.landed.contains("one") && marks.failed.contains("two"));
        assert!(!marks.failed.contains("one"));
        assert_eq!(
            rb.failure_reasons().unwrap().get("two").map(String::as_str),
            Some("not landed after 3 rounds")
        );
        assert!(rb.marks_for("two").unwrap().failed.contains("two"));
        assert_eq!(rb.clear_for_retry("two").unwrap(), ["failed"]);
        assert!(ra.clear_for_retry("two").unwrap().is_empty());
        assert!(ra.marks().unwrap().failed.is_empty());
        // A cancelled item, failed too, has both marks cleared in one retry.
        ra.mark_cancelled("three", "cancelled by someone").unwrap();
        ra.mark_failed("three", "given up").unwrap();
        assert_eq!(
            rb.clear_for_retry("three").unwrap(),
            ["failed", "cancelled"]
        );
        assert!(rb.marks().unwrap().open("three"));
    }

    #[test]
    fn landings_from_two_clones_at_once_all_reach_the_one_ledger_and_marks_of_both_forms_are_read()
    {
        let (_root, a, b) = two_clones();
        // Four writers at once, two per clone: every landing that lost the ledger's race
        // is made again on top of the winner's.
        std::thread::scope(|scope| {
            for (n, dir) in [&a, &b, &a, &b].into_iter().enumerate() {
                scope.spawn(move || {
                    let remote = origin(dir);
                    for k in 0..5 {
                        let item = format!("item-{n}-{k}");
                        remote
                            .mark_landed(&item, &format!("landed stet/{item}"))
                            .unwrap();
                    }
                });
            }
        });
        let landed = origin(&a).marks().unwrap().landed;
        assert_eq!(landed.len(), 20, "{landed:?}");
        // One ref for all of them.
        let refs = run_out(&b, &["ls-remote", "origin", "refs/stet/*"]);
        assert_eq!(refs.lines().count(), 1, "{refs}");
        assert!(origin(&b)
            .marks_for("item-3-4")
            .unwrap()
            .landed
            .contains("item-3-4"));
        assert!(!origin(&b)
            .marks_for("item-9-9")
            .unwrap()
            .landed
            .contains("item-9-9"));

        // A mark an older drive left as a ref of its own still counts.
        let rb = origin(&b);
        let oid = rb.note_commit("landed stet/old").unwrap();
        run(
            &b,
            &["push", "--quiet", "origin", &format!("{oid}:{LANDED}old")],
        );
        assert!(rb.marks().unwrap().landed.contains("old"));
        assert!(rb.marks_for("old").unwrap().landed.contains("old"));
        // And both forms go when the mark is removed.
        rb.unmark_landed("old").unwrap();
        rb.unmark_landed("item-0-0").unwrap();
        let landed = rb.marks().unwrap().landed;
        assert!(!landed.contains("old") && !landed.contains("item-0-0"));
        assert_eq!(landed.len(), 19);
    }

    #[test]
    fn a_ledger_entry_whose_name_cannot_be_an_item_is_not_read_and_not_kept() {
        let (_root, a, _b) = two_clones();
        let ra = origin(&a);
        // Written by hand, as anyone with push access could: a terminal escape for a name.
        let blob = crate::git::run_input(&a, &["hash-object", "-w", "--stdin"], b"x").unwrap();
        let listing =
            format!("100644 blob {blob}\tevil\x1b]0;pwned\x07\0100644 blob {blob}\tfine\0");
        let landed = crate::git::run_input(&a, &["mktree", "-z"], listing.as_bytes()).unwrap();
        let root = crate::git::run_input(
            &a,
            &["mktree", "-z"],
            format!("040000 tree {landed}\tlanded\0").as_bytes(),
        )
        .unwrap();
        let commit = crate::git::run(&a, &["commit-tree", &root, "-m", "by hand"]).unwrap();
        run(
            &a,
            &["push", "--quiet", "origin", &format!("{commit}:{LEDGER}")],
        );
        let landed: Vec<String> = ra.marks().unwrap().landed.into_iter().collect();
        assert_eq!(landed, ["fine"]);
        // The next landing writes the ledger without it.
        ra.mark_landed("next", "landed stet/next").unwrap();
        assert_eq!(ra.marks().unwrap().landed.len(), 2);
        let ledger = ra.ledger_now().unwrap().unwrap();
        let names = run_out(&a, &["ls-tree", "--name-only", &format!("{ledger}:landed")]);
        assert!(!names.contains("evil"), "{names}");
    }

    fn run_out(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    #[test]
    fn a_reservation_reads_back_as_written_and_an_older_or_newer_one_still_reads() {
        let written = Reservation {
            item: "20260101-a".into(),
            holder: "host:clone:1".into(),
            lane: "stet/20260101-a".into(),
            stage: "review".into(),
            expires_at_unix: 1_700_000_000,
        };
        let json = serde_json::to_string(&written).unwrap();
        assert_eq!(serde_json::from_str::<Reservation>(&json).unwrap(), written);
        // A newer stet's field and stage word: read, the rest kept.
        let newer = json
            .replace("\"review\"", "\"judge\"")
            .replace('}', ",\"priority\":3}");
        let read: Reservation = serde_json::from_str(&newer).unwrap();
        assert_eq!(read.stage, "judge");
        assert_eq!(read.expires_at_unix, written.expires_at_unix);
    }
}
