//! One lane's stages: implement → check → review → land, each a move under the drain lock,
//! each agent call recorded before it starts and again before the next move.

use stet_plugin_api::{EnvVar, OutcomeCode, ROption, Role, RoleRequest};

use crate::checkpoints::{Checkpoint, Mark, Next, SaveError};
use crate::error::{CliError, Exit};
use crate::harness;
use crate::lanes::{self, Lane};
use crate::queue;
use crate::receipts;
use crate::reservations::Reservation;
use crate::sandbox::{self, LaneAccess, LaneMounts, Plan, Sandbox};

use super::ahead::{Ahead, MakesNext, NextAhead, NextLane, PreparedCall};
use super::drain::{short, ItemEnd, Worker};
use super::{note, now_ms};

/// How one agent call ended, as the drive needs it.
struct Call {
    kind: OutcomeCode,
    detail: String,
    retry_at: Option<i64>,
    /// The call's receipt.
    receipt: String,
    /// The call never ran its task: the harness could not describe its launch, or the
    /// sandbox could not start or run it. Infrastructure, not the agent failing.
    infrastructure: bool,
    /// What the call left in the lane cannot be taken (a file over `[drive] max_file`):
    /// the item fails, saying why.
    refused: Option<String>,
}

impl Call {
    /// Whether the call failed for a reason outside the agent: what enters the outage
    /// rule instead of counting toward the item's rounds.
    fn outage(&self) -> bool {
        self.infrastructure
            || matches!(
                self.kind,
                OutcomeCode::SERVICE_UNAVAILABLE | OutcomeCode::NOT_LOGGED_IN
            )
    }
}

/// What a move did: the lane goes on from a new checkpoint, or its work ends here (for
/// now), with a checkpoint to save first or none.
enum Moved {
    On(Checkpoint),
    End(ItemEnd),
    SaveThenEnd(Checkpoint, ItemEnd),
    /// The item fails here, for this reason (marked on the remote).
    Fail(String),
}

/// What the reviewer answered.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Land,
    Revise(String),
    OutOfShape,
}

/// The review protocol the prompt asks for: LAND, or REVISE followed by what must change,
/// on the first line. (The agent's words, read because they are its answer; a harness
/// checks the shape too and says OUT_OF_SHAPE when it is not this.)
fn verdict(answer: &str) -> Verdict {
    let answer = answer.trim();
    let first = answer.lines().next().unwrap_or_default();
    let word: String = first
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    match word.to_ascii_uppercase().as_str() {
        "LAND" => Verdict::Land,
        "REVISE" => {
            let words = answer[word.len()..]
                .trim_start_matches([':', ' ', '\t'])
                .trim();
            Verdict::Revise(if words.is_empty() {
                "(the reviewer gave no reason)".to_string()
            } else {
                words.to_string()
            })
        }
        _ => Verdict::OutOfShape,
    }
}

/// At most `lines` last lines and `bytes` last bytes of `text`.
fn tail(text: &str, lines: usize, bytes: usize) -> String {
    let text = text.trim_end();
    let mut start = text.len().saturating_sub(bytes);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let cut = &text[start..];
    let kept: Vec<&str> = cut.lines().collect();
    kept[kept.len().saturating_sub(lines)..].join("\n")
}

/// The first line of `text`, for a one-line reason.
fn first_line(text: &str) -> &str {
    text.trim().lines().next().unwrap_or_default()
}

impl Worker<'_, '_> {
    pub(super) fn reservation(&self, item: &str, stage: &str) -> Reservation {
        Reservation {
            item: item.to_string(),
            holder: self.holder.clone(),
            lane: lanes::branch_of(item),
            stage: stage.to_string(),
            expires_at_unix: self.clock.now() + self.options.lease_secs,
        }
    }

    /// The drain lock, held for one move.
    pub(super) fn lock(&self) -> Result<nix::fcntl::Flock<std::fs::File>, CliError> {
        let path = receipts::git_dir(&self.repo).join("stet/drain.lock");
        crate::files::lock_exclusive(&path).map_err(|e| {
            CliError::failure(format!(
                "cannot take the drain lock {}: {e}",
                path.display()
            ))
        })
    }

    /// A new stage of `lane`: a move. The keeper keeps the stage for the reservation's next
    /// write; a reservation another drive took over ends the lane's work here.
    fn enter(&self, lane: &Lane, stage: &str) -> Result<(), ItemEnd> {
        let r#move = self.moves.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        self.progress.stage(self.slot, r#move, &lane.branch, stage);
        self.keeper.set_stage(stage).map_err(ItemEnd::Lost)?;
        // Cancelled on the remote (`stet rm`) since the last move: stop here. A remote that
        // does not answer now is the keeper's to report; the move goes on.
        if let Ok(marks) = self.remote().marks_for(&lane.item) {
            if marks.cancelled.contains(&lane.item) {
                let note = self
                    .remote()
                    .mark_note(crate::reservations::CANCELLED, &lane.item)
                    .unwrap_or_else(|| "cancelled on the remote".to_string());
                return Err(ItemEnd::Cancelled(note));
            }
        }
        if let Some(why) = self.keeper.unreachable() {
            let until = self
                .keeper
                .lapse()
                .map(|(_, at)| super::clock(at))
                .unwrap_or_default();
            self.progress.warn(&format!(
                "cannot renew the reservation of {} ({why}); it lapses at {until} unless the remote answers",
                lane.item
            ));
        }
        Ok(())
    }

    /// Works `item`'s lane from its checkpoint until it lands, is given up, or its work
    /// ends for now (a stop, a wait, an outage, a peer taking it over). Each move that
    /// finishes is checkpointed on the remote with the lane's branch before the next one
    /// starts, so a resumed lane never makes a finished call again. `opened` is the lane
    /// and first call made ahead for it, if they were; `next` makes the item after it
    /// ahead once this one is past its implementing call.
    pub(super) fn work<'env>(
        &'env self,
        item: &queue::Item,
        opened: Option<NextLane<'env>>,
        next: &NextAhead<'_, '_>,
    ) -> Result<ItemEnd, CliError> {
        // The working copy is made outside the drain lock (it writes only the lane's own
        // directory), so other lanes move meanwhile; the repository's copy of the branch
        // is a move of its own.
        // A lane made ahead is opened again all the same: it catches up with what a peer
        // pushed since (its sandbox mounts the same directories).
        let ready = opened.and_then(|opened| opened.implement);
        let lane = match lanes::open(&self.repo, &self.options.remote, &item.id, "HEAD") {
            Ok(lane) => lane,
            Err(e) => {
                if let Some(call) = ready {
                    call.discard(Some(self.reaper));
                }
                return Err(cannot_open(&item.id, e));
            }
        };
        // The later stages' sandboxes are made on threads of this scope while the earlier
        // ones run; whatever no stage took is retired before the lane is let go.
        std::thread::scope(|scope| {
            let mut ahead = Ahead::new(scope);
            ahead.implement_ready = ready;
            let end = self.work_lane(item, &lane, &mut ahead, next);
            ahead.discard(Some(self.reaper));
            end
        })
    }

    fn work_lane<'scope, 'env>(
        &'env self,
        item: &'env queue::Item,
        lane: &'env Lane,
        ahead: &mut Ahead<'scope, 'env>,
        next: &NextAhead<'_, '_>,
    ) -> Result<ItemEnd, CliError> {
        {
            let _lock = self.lock()?;
            // The repository holds the lane's branch from the start (a lane a peer pushed
            // is opened from the remote): its base is found there.
            lane.bring_back(&self.repo)
                .map_err(|e| cannot_open(&item.id, e))?;
        }
        let on_remote = match self.remote().checkpoint(&item.id) {
            Ok(checkpoint) => checkpoint,
            Err(e) => return Ok(ItemEnd::RemoteUnreachable(short(&e))),
        };
        let mut had_checkpoint = on_remote.is_some();
        let mut at = on_remote.unwrap_or_default();
        if at.round > 1 || at.next != Next::Implement {
            note!(
                self.progress,
                "{}: resuming at round {}, {}{}",
                item.id,
                at.round,
                at.next.word(),
                at.reason
                    .as_deref()
                    .map(|r| format!(" (last: {r})"))
                    .unwrap_or_default()
            );
        }
        // A passed check pushes no checkpoint of its own (it is no paid stage): resumed at
        // the check, its receipt says it passed on the lane's commit, and the lane goes on
        // to the review — whose call may have finished too, found next.
        if at.next == Next::Check {
            if let Some(receipt) = self.passed_check_since(item, lane, &at) {
                at = Checkpoint {
                    next: Next::Review,
                    receipt: Some(receipt),
                    ..at
                };
            }
        }
        // A call that finished after the checkpoint (the drive died, or the remote did not
        // answer, before the checkpoint reached it) is not made again: its receipt and the
        // work committed in the lane are its record.
        let mut finished = self.finished_since(item, lane, &at)?;
        loop {
            let landing = matches!(at.next, Next::Land | Next::LandAgain);
            if at.round > self.options.max_rounds && !landing {
                let why = format!(
                    "not landed after {}: {}",
                    crate::printer::count(self.options.max_rounds as usize, "round", "rounds"),
                    at.reason.as_deref().unwrap_or("no reason recorded")
                );
                return Ok(self.finish(lane, Mark::Failed, &why, had_checkpoint));
            }
            if self.ending() && !landing && finished.is_none() {
                return Ok(ItemEnd::Stopped(lane.branch.clone()));
            }
            // Past its implementing call, the item may land: the next one is made ready
            // meanwhile. Going round again, it holds nothing of the next one.
            match at.next {
                Next::Implement => next.cancel(),
                _ => next.start(),
            }
            if finished.is_none() {
                self.make_ahead(ahead, item, lane, &at);
            }
            let moved = match (at.next, finished.take()) {
                (Next::Implement, Some(call)) => self.after_implement(item, lane, &at, call)?,
                (Next::Implement, None) => self.implement(item, lane, &at, ahead)?,
                (Next::Check, _) => self.checked(item, lane, &at, ahead)?,
                (Next::Review, Some(call)) => self.after_review(item, &at, call),
                (Next::Review, None) => self.review(item, lane, &at, ahead)?,
                (Next::Land | Next::LandAgain, _) => return self.land(item, lane, &at),
            };
            match moved {
                // A passed check is not saved on its own: it is no paid stage, and the lane
                // holds nothing new (the check's writes are restored away). Nor is a
                // review that says LAND: the landing's first push follows at once, and
                // says it (the landed mark, or with a land command the landing begun).
                // Resumed before either reached the remote, this clone's receipts say
                // what passed and what the reviewer answered (`passed_check_since`,
                // `finished_since`); nothing paid is made again.
                Moved::On(next)
                    if (at.next == Next::Check && next.next == Next::Review)
                        || (at.next == Next::Review && next.next == Next::Land) =>
                {
                    at = next;
                }
                Moved::On(next) => {
                    if let Some(end) = self.save(lane, &next)? {
                        return Ok(end);
                    }
                    had_checkpoint = true;
                    at = next;
                }
                Moved::SaveThenEnd(next, end) => {
                    return Ok(self.save(lane, &next)?.unwrap_or(end));
                }
                Moved::End(end) => return Ok(end),
                Moved::Fail(why) => {
                    return Ok(self.finish(lane, Mark::Failed, &why, had_checkpoint))
                }
            }
        }
    }

    /// The call of `at`'s move this clone finished after `at` was made, if it did: a
    /// receipt of this item, round and role, with a final outcome, that started at the
    /// checkpoint's commit and ended at the lane's commit now.
    fn finished_since(
        &self,
        item: &queue::Item,
        lane: &Lane,
        at: &Checkpoint,
    ) -> Result<Option<Call>, CliError> {
        let role = match at.next {
            Next::Implement => "implement",
            Next::Review => "review",
            _ => return Ok(None),
        };
        let (receipts, _) = receipts::read_all(&self.repo);
        let started_at = if at.head.is_empty() {
            match self.base_of(lane) {
                Ok(base) => base,
                Err(_) => return Ok(None),
            }
        } else {
            at.head.clone()
        };
        let head = lane.head().unwrap_or_default();
        let found = receipts.into_iter().rev().find(|r| {
            r.item == item.id
                && r.role == role
                && r.round == Some(at.round)
                && Some(&r.id) != at.receipt.as_ref()
                && r.commit_before == started_at
                && r.commit_after == head
        });
        let Some(receipt) = found else {
            return Ok(None);
        };
        let kind = match receipt.outcome.as_str() {
            "done" => OutcomeCode::DONE,
            "failed" => OutcomeCode::FAILED,
            "out-of-shape" => OutcomeCode::OUT_OF_SHAPE,
            "resource-limit" => OutcomeCode::RESOURCE_LIMIT,
            // Running, interrupted, not run, a wait or an outage: no finished call.
            _ => return Ok(None),
        };
        note!(
            self.progress,
            "{}: the {role} call {} finished before the drive was cut short; going on from its receipt",
            item.id,
            receipt.id
        );
        Ok(Some(Call {
            kind,
            detail: receipt.detail,
            retry_at: None,
            receipt: receipt.id,
            infrastructure: false,
            refused: None,
        }))
    }

    /// The receipt of a check of `at`'s round that passed on the lane's commit as it is
    /// now, made after `at`, if this clone made one.
    fn passed_check_since(
        &self,
        item: &queue::Item,
        lane: &Lane,
        at: &Checkpoint,
    ) -> Option<String> {
        let head = lane.head().ok()?;
        let (receipts, _) = receipts::read_all(&self.repo);
        receipts
            .into_iter()
            .rev()
            .find(|r| {
                r.item == item.id
                    && r.role == "check"
                    && r.round == Some(at.round)
                    && r.outcome == "passed"
                    && Some(&r.id) != at.receipt.as_ref()
                    && r.commit_before == head
            })
            .map(|r| r.id)
    }

    /// The implementing agent's call of this round.
    fn implement<'env>(
        &'env self,
        item: &queue::Item,
        lane: &Lane,
        at: &Checkpoint,
        ahead: &mut Ahead<'_, 'env>,
    ) -> Result<Moved, CliError> {
        if let Err(end) = self.enter(lane, "implement") {
            return Ok(Moved::End(end));
        }
        if !self.pace() {
            return Ok(Moved::End(ItemEnd::Stopped(lane.branch.clone())));
        }
        // A call cut short before (the drive died during it) may have left work it never
        // committed: this call starts from the lane's last commit all the same.
        if let Err(e) = lane.restore() {
            return Ok(Moved::Fail(format!(
                "the lane could not be put back to its last commit: {e}"
            )));
        }
        let prompt = implement_prompt(item, at.feedback.as_deref());
        let message = format!("stet: {} (round {})", item.title, at.round);
        let call = self.agent_call(
            item,
            lane,
            at.round,
            Role::Implement,
            &prompt,
            Some(&message),
            ahead.take_implement(),
        )?;
        self.after_implement(item, lane, at, call)
    }

    /// Where an implementing call leaves the lane: a change moves it on to the check (or
    /// the review); no change or a failed task counts the round and tells the next round
    /// why; a call that could not be made, or a usage limit, ends the lane's work for now.
    fn after_implement(
        &self,
        item: &queue::Item,
        lane: &Lane,
        at: &Checkpoint,
        call: Call,
    ) -> Result<Moved, CliError> {
        let round = at.round;
        if let Some(why) = call.refused {
            return Ok(Moved::Fail(why));
        }
        if call.kind == OutcomeCode::RATE_LIMITED {
            return Ok(Moved::End(ItemEnd::RateLimited(call.retry_at)));
        }
        if call.outage() {
            return Ok(Moved::End(ItemEnd::RunnerFailed(format!(
                "implement: {}",
                call.detail
            ))));
        }
        let failed = |reason: String, feedback: String| {
            note!(
                self.progress,
                "{}: round {round} of {}: {reason}",
                item.id,
                self.options.max_rounds
            );
            Moved::On(Checkpoint {
                round: round + 1,
                next: Next::Implement,
                feedback: Some(feedback),
                reason: Some(reason),
                receipt: Some(call.receipt.clone()),
                head: String::new(),
                run: self.run.clone(),
            })
        };
        if call.kind != OutcomeCode::DONE {
            let detail = first_line(&call.detail).to_string();
            return Ok(failed(
                format!("the implementing agent failed its task: {detail}"),
                format!("Your previous attempt failed: {}", call.detail.trim()),
            ));
        }
        let changed = {
            let _lock = self.lock()?;
            self.changed(lane)?
        };
        if !changed {
            return Ok(failed(
                "the agent changed nothing".to_string(),
                "Your previous attempt changed nothing in the working copy; the work item \
                 asks for a change."
                    .to_string(),
            ));
        }
        Ok(Moved::On(Checkpoint {
            next: if self.options.check.is_some() {
                Next::Check
            } else {
                Next::Review
            },
            receipt: Some(call.receipt),
            run: self.run.clone(),
            ..at.clone()
        }))
    }

    /// The repository's check on this round's work: passed moves on to the review; failed
    /// counts the round and gives the next one its output.
    fn checked<'env>(
        &'env self,
        item: &queue::Item,
        lane: &Lane,
        at: &Checkpoint,
        ahead: &mut Ahead<'_, 'env>,
    ) -> Result<Moved, CliError> {
        let Some(check) = &self.options.check else {
            return Ok(Moved::On(Checkpoint {
                next: Next::Review,
                ..at.clone()
            }));
        };
        if let Err(end) = self.enter(lane, "check") {
            return Ok(Moved::End(end));
        }
        let outcome = match self.check(item, lane, at.round, check, ahead.take_check()) {
            Ok(outcome) => outcome,
            // The check could not run at all (the runtime failed): infrastructure.
            Err(e) => {
                return Ok(Moved::End(ItemEnd::RunnerFailed(format!(
                    "check: {}",
                    e.to_string().replace('\n', "; ")
                ))))
            }
        };
        if outcome.passed {
            note!(self.progress, "{}: the check `{check}` passed", item.id);
            return Ok(Moved::On(Checkpoint {
                next: Next::Review,
                receipt: Some(outcome.receipt),
                run: self.run.clone(),
                ..at.clone()
            }));
        }
        let shown = tail(&outcome.output, 12, 4096);
        note!(
            self.progress,
            "{}: round {} of {}: the check `{check}` failed; its output ends:\n{}",
            item.id,
            at.round,
            self.options.max_rounds,
            indent(if shown.is_empty() {
                "(no output)"
            } else {
                &shown
            })
        );
        let last = shown.lines().last().unwrap_or("no output").to_string();
        Ok(Moved::On(Checkpoint {
            round: at.round + 1,
            next: Next::Implement,
            feedback: Some(format!(
                "The check `{check}` failed. Its output ends:\n{}",
                tail(&outcome.output, 200, 16 * 1024)
            )),
            reason: Some(format!("the check `{check}` failed: {last}")),
            receipt: Some(outcome.receipt),
            head: String::new(),
            run: self.run.clone(),
        }))
    }

    /// The reviewing agent's call.
    fn review<'env>(
        &'env self,
        item: &queue::Item,
        lane: &Lane,
        at: &Checkpoint,
        ahead: &mut Ahead<'_, 'env>,
    ) -> Result<Moved, CliError> {
        if let Err(end) = self.enter(lane, "review") {
            return Ok(Moved::End(end));
        }
        if !self.pace() {
            return Ok(Moved::End(ItemEnd::Stopped(lane.branch.clone())));
        }
        // What the reviewer judges: everything the lane adds to the repository's HEAD.
        let base = self.base_of(lane)?;
        let prompt = review_prompt(item, &base);
        let call = self.agent_call(
            item,
            lane,
            at.round,
            Role::Review,
            &prompt,
            None,
            ahead.take_review(),
        )?;
        Ok(self.after_review(item, at, call))
    }

    /// Where a review leaves the lane: LAND moves on to the landing; REVISE counts the
    /// round and gives the next implementing call the reviewer's words; a review that
    /// failed or is out of shape is a judge failure: it counts the round too, and enters
    /// the outage schedule.
    fn after_review(&self, item: &queue::Item, at: &Checkpoint, call: Call) -> Moved {
        if call.kind == OutcomeCode::RATE_LIMITED {
            return Moved::End(ItemEnd::RateLimited(call.retry_at));
        }
        if call.outage() {
            return Moved::End(ItemEnd::RunnerFailed(format!("review: {}", call.detail)));
        }
        let answer = match call.kind {
            OutcomeCode::DONE => verdict(&call.detail),
            _ => Verdict::OutOfShape,
        };
        let on = |round: u32, next: Next, feedback: Option<String>, reason: String| Checkpoint {
            round,
            next,
            feedback,
            reason: Some(reason),
            receipt: Some(call.receipt.clone()),
            head: String::new(),
            run: self.run.clone(),
        };
        match answer {
            Verdict::Land => {
                note!(self.progress, "{}: the reviewer said LAND", item.id);
                Moved::On(Checkpoint {
                    next: Next::Land,
                    receipt: Some(call.receipt.clone()),
                    run: self.run.clone(),
                    ..at.clone()
                })
            }
            Verdict::Revise(words) => {
                note!(
                    self.progress,
                    "{}: round {} of {}: the reviewer asked for changes:\n{}",
                    item.id,
                    at.round,
                    self.options.max_rounds,
                    indent(&tail(&words, 12, 4096))
                );
                Moved::On(on(
                    at.round + 1,
                    Next::Implement,
                    Some(format!("The reviewer asked for changes:\n{words}")),
                    format!("the reviewer asked for changes: {}", first_line(&words)),
                ))
            }
            Verdict::OutOfShape => {
                let why = format!("review: {}", first_line(&call.detail));
                // Counted toward the rounds, and reviewed again (the implementing call's
                // work stands): one item whose review always fails is given up.
                Moved::SaveThenEnd(
                    on(
                        at.round + 1,
                        Next::Review,
                        at.feedback.clone(),
                        format!("the review failed: {why}"),
                    ),
                    ItemEnd::JudgeFailed(why),
                )
            }
        }
    }

    /// Lands the lane: the checkpoint says the landing began (with the branch, pushed),
    /// then the configured land command runs on the host — again, with `STET_LAND_RETRY=1`,
    /// when a landing was cut short —, then the item is marked landed and the checkpoint
    /// goes in one atomic push, and the working copy is removed.
    fn land(&self, item: &queue::Item, lane: &Lane, at: &Checkpoint) -> Result<ItemEnd, CliError> {
        if let Err(end) = self.enter(lane, "land") {
            return Ok(end);
        }
        let again = at.next == Next::LandAgain;
        if again {
            note!(
                self.progress,
                "{}: a landing was cut short; landing again{}",
                item.id,
                if self.options.land.is_some() {
                    " (the land command runs again with STET_LAND_RETRY=1)"
                } else {
                    ""
                }
            );
        } else if self.options.land.is_some() {
            // The land command may be cut short: the checkpoint says the landing began, so
            // the next drive runs it again saying so. Without one there is nothing to run
            // twice, and the landing is one push.
            let landing = Checkpoint {
                next: Next::LandAgain,
                run: self.run.clone(),
                ..at.clone()
            };
            if let Some(end) = self.save(lane, &landing)? {
                return Ok(end);
            }
        }
        let _lock = self.lock()?;
        if self.options.land.as_deref() == Some(crate::land::GITHUB) {
            let (receipts, _) = receipts::read_all(&self.repo);
            match crate::land::pull_request(&self.repo, item, &lane.branch, &receipts) {
                Ok(pr) if pr.reused => note!(
                    self.progress,
                    "{}: pull request {} was open for {} already",
                    item.id,
                    pr.url,
                    lane.branch
                ),
                Ok(pr) => note!(self.progress, "{}: opened pull request {}", item.id, pr.url),
                Err(why) => self.progress.warn(&format!(
                    "{}: no pull request: {why}; the branch {} is pushed",
                    item.id, lane.branch
                )),
            }
        } else if let Some(command) = &self.options.land {
            // The land command runs on the host, as the person: it is the one step that may
            // need the person's own credentials (to open a pull request, say).
            let mut land = std::process::Command::new("sh");
            land.args(["-c", command])
                .current_dir(&self.repo)
                .env("STET_ITEM", &item.id)
                .env("STET_BRANCH", &lane.branch)
                .env("STET_REMOTE", &self.options.remote);
            if again {
                land.env("STET_LAND_RETRY", "1");
            }
            match land.status() {
                Ok(s) if s.success() => {}
                Ok(s) => self.progress.warn(&format!(
                    "{}: the land command `{command}` failed ({s}); the branch is pushed",
                    item.id
                )),
                Err(e) => self.progress.warn(&format!(
                    "{}: cannot run the land command `{command}`: {e}; the branch is pushed",
                    item.id
                )),
            }
        }
        let landed = format!("landed {} by run {}", lane.branch, self.run);
        Ok(self.finish(lane, Mark::Landed, &landed, true))
    }

    /// Marks the item landed or failed on the remote (its checkpoint goes in the same
    /// push) and, once landed, removes the working copy. A remote that does not answer
    /// leaves the checkpoint as it was: the next attempt does only what is left.
    fn finish(&self, lane: &Lane, mark: Mark, note: &str, had_checkpoint: bool) -> ItemEnd {
        // One atomic push: the mark, the checkpoint's removal and the release.
        let finished = self.keeper.releasing(|held| {
            self.remote()
                .finish_item_releasing(&lane.item, mark, note, had_checkpoint, held)
        });
        match finished {
            Ok(()) => {}
            Err(SaveError::TakenByPeer(why)) => return ItemEnd::Lost(why),
            Err(SaveError::Remote(e)) => return ItemEnd::RemoteUnreachable(short(&e)),
        }
        match mark {
            Mark::Landed => {
                // Its directories make the next new lane: as many as there are lanes.
                // (Made ready for the pool off the lane's path; the drive waits for it at
                // its end.)
                lane.retire(self.options.jobs, self.base_of(lane).ok().as_deref());
                ItemEnd::Landed
            }
            Mark::Failed => ItemEnd::GaveUp(note.to_string()),
        }
    }

    /// Saves `checkpoint` under the drain lock on the remote, with the lane's branch when
    /// the lane holds a change (nothing is pushed for a lane that holds none), if the
    /// reservation is still this drive's. `Some` ends the lane's work: the reservation or
    /// the branch was taken by a peer, or the remote did not answer (then the receipts of
    /// this clone are the record until the next save).
    fn save(&self, lane: &Lane, checkpoint: &Checkpoint) -> Result<Option<ItemEnd>, CliError> {
        let _lock = self.lock()?;
        if let Some(why) = self.keeper.lost() {
            return Ok(Some(ItemEnd::Lost(why)));
        }
        let checkpoint = Checkpoint {
            head: lane.head().unwrap_or_default(),
            ..checkpoint.clone()
        };
        let changed = self.changed(lane)?;
        if changed {
            if let Some(end) = self.refuse_secrets(lane, &checkpoint)? {
                return Ok(Some(end));
            }
        }
        // The push renews the reservation too: no push of its own is needed for that.
        let saved = self.keeper.renewing(|renewal| {
            self.remote().save_checkpoint_renewing(
                &lane.item,
                &checkpoint,
                changed.then_some(lane.branch.as_str()),
                renewal,
            )
        });
        match saved {
            Ok(()) => Ok(None),
            Err(SaveError::TakenByPeer(why)) => {
                Ok(Some(ItemEnd::Lost(format!("taken by a peer: {why}"))))
            }
            Err(SaveError::Remote(e)) => Ok(Some(ItemEnd::RemoteUnreachable(short(&e)))),
        }
    }

    /// Before the lane's branch is pushed: its change must hold no secret (`scan.rs`). A
    /// finding keeps the branch here, saves the checkpoint without it and marks the item
    /// failed, naming each file, line and kind (never the value).
    fn refuse_secrets(
        &self,
        lane: &Lane,
        checkpoint: &Checkpoint,
    ) -> Result<Option<ItemEnd>, CliError> {
        let base = self.base_of(lane)?;
        let known = crate::credentials::known();
        let mut scanner = crate::scan::Scanner::new(&known, &self.settings.secrets_allowed);
        // Streamed: the change is never held whole (a long line comes in pieces).
        lane.git()
            .stream(
                &[
                    "diff",
                    "--no-color",
                    "--no-ext-diff",
                    "--no-textconv",
                    "--no-renames",
                    "--unified=0",
                    // Inert git marks every file binary (no diff driver runs): read them
                    // all as text, so a secret in any file is seen.
                    "--text",
                    &base,
                    "HEAD",
                ],
                64 * 1024,
                &mut |piece| scanner.feed(piece),
            )
            .map_err(|e| {
                CliError::failure(format!("cannot read the lane {}'s change", lane.branch))
                    .caused_by(e.to_string())
            })?;
        let findings = scanner.finish();
        if findings.is_empty() {
            return Ok(None);
        }
        let listed: Vec<String> = findings.iter().map(ToString::to_string).collect();
        let how = if findings.iter().all(|f| f.allowable) {
            "if none is a secret, list those paths under [drive] secrets_allowed and stet retry the item"
        } else {
            "remove it from the lane's history; stet's own credentials are never allowed"
        };
        let note = format!(
            "the change holds a secret, so its branch was not pushed: {} ({how})",
            listed.join(", ")
        );
        let saved = self.keeper.renewing(|renewal| {
            self.remote()
                .save_checkpoint_renewing(&lane.item, checkpoint, None, renewal)
        });
        match saved {
            Ok(()) => {}
            Err(SaveError::TakenByPeer(why)) => {
                return Ok(Some(ItemEnd::Lost(format!("taken by a peer: {why}"))))
            }
            Err(SaveError::Remote(e)) => return Ok(Some(ItemEnd::RemoteUnreachable(short(&e)))),
        }
        Ok(Some(self.finish(lane, Mark::Failed, &note, true)))
    }

    /// Whether the lane holds a change against its base (its tree differs from the tree
    /// it started from). Brings the lane's branch back into the repository first.
    fn changed(&self, lane: &Lane) -> Result<bool, CliError> {
        lane.bring_back(&self.repo).map_err(|e| {
            CliError::failure(format!("cannot bring the lane {} back", lane.branch))
                .caused_by(e.to_string())
        })?;
        let base = self.base_of(lane)?;
        let tree = |rev: &str| lanes::git(&self.repo, &["rev-parse", &format!("{rev}^{{tree}}")]);
        Ok(tree(&base).ok() != tree(&format!("refs/heads/{}", lane.branch)).ok())
    }

    /// Where the lane branched off the repository's HEAD.
    fn base_of(&self, lane: &Lane) -> Result<String, CliError> {
        lanes::git(
            &self.repo,
            &["merge-base", "HEAD", &format!("refs/heads/{}", lane.branch)],
        )
        .map_err(|e| {
            CliError::failure(format!(
                "cannot find where the lane {} branched off HEAD",
                lane.branch
            ))
            .caused_by(e.to_string())
        })
    }

    /// Before a launch: a wait every lane keeps, if one is on, then the pace since the last
    /// launch of any lane. Returns false when a stop cut a wait short, or the drive is
    /// ending (no agent is launched then).
    fn pace(&self) -> bool {
        // A lane that ended the drive meanwhile (a usage limit reset far away, an outage
        // past its limit) holds every further launch too.
        if !self.paused() || self.ending() {
            return false;
        }
        let pace = self.options.pace_secs;
        // The launch's time is claimed under the lock, so two lanes never take one slot.
        let wake = {
            let mut last = self.last_launch.lock().unwrap_or_else(|p| p.into_inner());
            let now = self.clock.now();
            let wake = match *last {
                Some(last) if pace > 0 && now <= last + pace => {
                    Some((last + pace).max(now + self.options.wait_floor_secs))
                }
                _ => None,
            };
            *last = Some(wake.unwrap_or(now));
            wake
        };
        match wake {
            Some(wake) => self.sleep_until("pace between agent launches", wake),
            None => true,
        }
    }

    /// How a call of `role` sees the lane: review judges it, and the mount, not the guard,
    /// keeps it from changing it.
    fn call_plan(&self, role: Role, lane: &Lane) -> Plan {
        let (word, access) = match role {
            Role::Review => ("review", LaneAccess::ReadOnly),
            Role::Proof => ("proof", LaneAccess::ReadWrite),
            _ => ("implement", LaneAccess::ReadWrite),
        };
        Plan::new(word, &self.run, &lane.dir.display().to_string())
            .with_lane(LaneMounts::of_lane(lane), access)
    }

    /// A fresh sandbox for the repository's check on the lane.
    fn check_sandbox(&self, lane: &Lane) -> Result<Sandbox<'_>, CliError> {
        let plan = Plan::new("check", &self.run, &lane.dir.display().to_string())
            .with_lane(LaneMounts::of_lane(lane), LaneAccess::ReadWrite);
        Sandbox::create(&self.runtime, plan.spec(self.settings))
    }

    /// Starts making, on threads of `ahead`'s scope, the sandboxes of the round's stages
    /// from `at` on that are not being made yet: the implementing call's, the check's,
    /// the review call's.
    fn make_ahead<'scope, 'env>(
        &'env self,
        ahead: &mut Ahead<'scope, 'env>,
        item: &'env queue::Item,
        lane: &'env Lane,
        at: &Checkpoint,
    ) {
        let scope = ahead.scope;
        // The stage's own sandbox and the next stage's: more at once would only slow the
        // engine's making of the one needed first.
        let checks = self.options.check.is_some();
        let (implement, check, review) = match at.next {
            Next::Implement => (true, checks, !checks),
            Next::Check => (false, false, true),
            Next::Review => (false, false, true),
            Next::Land | Next::LandAgain => return,
        };
        if !implement {
            // Made with the lane ahead, for a lane that turned out to resume later.
            if let Some(call) = ahead.implement_ready.take() {
                call.discard(Some(self.reaper));
            }
        }
        if implement && !ahead.has_implement() {
            let prompt = implement_prompt(item, at.feedback.as_deref());
            ahead.implement =
                Some(scope.spawn(move || self.prepare_call(lane, Role::Implement, &prompt)));
        }
        if check && ahead.check.is_none() {
            ahead.check = Some(scope.spawn(move || self.check_sandbox(lane)));
        }
        if review && ahead.review.is_none() {
            ahead.review = Some(scope.spawn(move || {
                let prompt = review_prompt(item, &self.base_of(lane)?);
                self.prepare_call(lane, Role::Review, &prompt)
            }));
        }
    }

    /// The next item this lane would take, opened ahead: the first open item of `items`
    /// in queue order that this lane can claim ahead, if nothing of its lane is on this
    /// clone yet (a lane kept from before is resumed where it is found, not ahead), with
    /// its first implementing call made ready.
    fn make_next<'w>(&'w self, items: &[queue::Entry]) -> Result<Option<NextLane<'w>>, CliError> {
        if self.ending() {
            return Ok(None);
        }
        // A remote that does not answer now is the next take's to report.
        let Ok(marks) = self.remote().marks() else {
            return Ok(None);
        };
        let Some(entry) = items
            .iter()
            .filter(|i| marks.open(&i.id))
            .find(|i| self.claim_ahead(&i.id))
        else {
            return Ok(None);
        };
        let unclaim = || self.unclaim_ahead(&entry.id);
        // A malformed item is the take's to report; nothing is made for it.
        let Ok(item) = entry.load() else {
            unclaim();
            return Ok(None);
        };
        let lane = match lanes::open_new(&self.repo, &self.options.remote, &entry.id, "HEAD") {
            Ok(Some(lane)) => lane,
            Ok(None) => {
                unclaim();
                return Ok(None);
            }
            Err(e) => {
                unclaim();
                return Err(cannot_open(&entry.id, e));
            }
        };
        // A stop asked meanwhile makes no sandbox (the lane stays, for the item's take).
        let implement = if self.ending() {
            None
        } else {
            self.prepare_call(&lane, Role::Implement, &implement_prompt(&item, None))
                .ok()
        };
        Ok(Some(NextLane {
            id: entry.id.clone(),
            implement,
        }))
    }

    /// Lets a lane made ahead go unused: its sandbox retired, its claim ahead dropped. The
    /// lane's directories stay: another drive of this clone that took the item may work in
    /// them, and a later take of the item here resumes them (`lanes::open`).
    fn let_next_go(&self, next: NextLane<'_>) {
        if let Some(call) = next.implement {
            call.discard(Some(self.reaper));
        }
        self.unclaim_ahead(&next.id);
    }

    /// The harness's launch of a call of `role` on `lane` with `profile` (its copy).
    fn launch_on(
        &self,
        lane: &Lane,
        role: Role,
        prompt: &str,
        profile: &harness::CallProfile,
    ) -> Result<stet_plugin_api::Launch, CliError> {
        self.harness.launch(RoleRequest {
            role,
            prompt: prompt.into(),
            profile_dir: profile.dir.clone().into(),
            workdir: lane.dir.display().to_string().into(),
        })
    }

    /// A call of `role` made ready: its profile copy (the login renewed first if due) and
    /// its sandbox, from the launch the harness gives for that copy and `prompt`.
    fn prepare_call(
        &self,
        lane: &Lane,
        role: Role,
        prompt: &str,
    ) -> Result<PreparedCall<'_>, CliError> {
        let (mut profile, login_expiry, settled) = {
            let settled = self.profile_lock.lock().unwrap_or_else(|p| p.into_inner());
            crate::refresh::keep_fresh(
                self.settings,
                &self.runtime,
                &self.harness,
                &self.profile,
                std::time::Duration::from_secs(self.options.call_limit_secs),
                &|text| self.progress.note(text),
            )?;
            (
                harness::CallProfile::of(&self.harness, &self.profile)?,
                self.harness.login_expiry(&self.profile)?,
                *settled,
            )
        };
        let launch = self
            .launch_on(lane, role, prompt, &profile)
            .map_err(|e| CliError::failure(e.to_string()))?;
        let ready = harness::ready_launch(
            self.settings,
            &self.runtime,
            &launch,
            self.call_plan(role, lane),
            Some(&mut profile.sealed),
            false,
        )?;
        Ok(PreparedCall {
            profile,
            ready,
            login_expiry,
            settled,
        })
    }

    /// One agent call, with its receipt recorded before it starts and when it ends. With
    /// `commit`, what the agent left in the working copy is committed with that message
    /// before the receipt, so the receipt's commit-after holds the call's work.
    #[allow(clippy::too_many_arguments)]
    fn agent_call<'env>(
        &'env self,
        item: &queue::Item,
        lane: &Lane,
        round: u32,
        role: Role,
        prompt: &str,
        commit: Option<&str>,
        prepared: Option<PreparedCall<'env>>,
    ) -> Result<Call, CliError> {
        let role_word = match role {
            Role::Implement => "implement",
            Role::Review => "review",
            Role::Proof => "proof",
        };
        // The walled settings must still be exactly what the drive wrote at its start.
        if let Some(w) = self
            .harness
            .check_walls(&self.profile)?
            .into_iter()
            .find(|w| w.wall.as_str() == stet_plugin_api::wall::SETTINGS_EXACT && !w.held())
        {
            return Err(CliError::new(Exit::Unusable, "the walled settings changed during the drive; it stops")
                .caused_by(w.detail.to_string())
                .hint("do not edit the profile's settings while a drive runs; start the drive again to rewrite them"));
        }
        let launch_on =
            |profile: &harness::CallProfile| self.launch_on(lane, role, prompt, profile);
        let (prepared, fresh, renewed) = {
            let settled = self.profile_lock.lock().unwrap_or_else(|p| p.into_inner());
            // A login that would expire before this call could end is renewed first.
            let renewed = crate::refresh::keep_fresh(
                self.settings,
                &self.runtime,
                &self.harness,
                &self.profile,
                std::time::Duration::from_secs(self.options.call_limit_secs),
                &|text| self.progress.note(text),
            );
            // The copy made ahead holds the profile as it is now — the login stored now,
            // everything earlier calls carried back — or it is not used.
            let current = |p: &PreparedCall| {
                matches!(renewed, Ok(None))
                    && p.settled == *settled
                    && self.harness.login_expiry(&self.profile).ok() == Some(p.login_expiry)
            };
            let fresh = prepared.as_ref().is_some_and(current);
            (prepared, fresh, renewed)
        };
        // Retired outside the profile's lock: stale, or not fitting the launch made now
        // (which asks for exactly the sandbox's mounts, network and environment).
        let prepared = match prepared {
            Some(p) if fresh => match launch_on(&p.profile) {
                Ok(launch) if p.ready.fits(&launch) => Some((p, launch)),
                _ => {
                    p.discard(Some(self.reaper));
                    None
                }
            },
            Some(p) => {
                p.discard(Some(self.reaper));
                None
            }
            None => None,
        };
        renewed?;
        let (mut call_profile, ready, launched) = match prepared {
            Some((p, launch)) => (p.profile, Some(p.ready), Ok(launch)),
            None => {
                // A fresh copy of the profile for this call alone.
                let profile = {
                    let _settled = self.profile_lock.lock().unwrap_or_else(|p| p.into_inner());
                    harness::CallProfile::of(&self.harness, &self.profile)?
                };
                let launched = launch_on(&profile);
                (profile, None, launched)
            }
        };
        let launch = match launched {
            Ok(launch) => launch,
            // The harness cannot launch: infrastructure; no call was made, no receipt.
            Err(e) => {
                return Ok(Call {
                    kind: OutcomeCode::FAILED,
                    detail: e.to_string().replace('\n', "; "),
                    retry_at: None,
                    receipt: String::new(),
                    infrastructure: true,
                    refused: None,
                })
            }
        };
        let started = now_ms();
        let id = format!("{started}-{}-{role_word}", item.id);
        let mut call = receipts::CallContext {
            log: receipts::log_path(&self.repo, &id),
            id,
            run: self.run.clone(),
            item: item.id.clone(),
            lane: lane.branch.clone(),
            role: role_word,
            round: Some(round),
            runtime: &self.runtime_record,
            runtime_reason: &self.runtime.selection.reason,
            harness: &self.harness_record,
            image: &self.settings.image,
            network: crate::network::describe(&launch.network, &self.settings.network),
            limits: self.settings.limits.describe(),
            started_unix_ms: started,
            ended_unix_ms: started,
            commit_before: lane.head().unwrap_or_default(),
            commit_after: String::new(),
        };
        receipts::record_start(&self.repo, &call)
            .map_err(|e| CliError::failure(format!("cannot record the receipt: {e}")))?;
        let progress = &self.progress;
        let follow = |_: stet_plugin_api::Stream, bytes: &[u8]| progress.follow(bytes);
        let watch = harness::Watch {
            in_flight: Some(self.in_flight),
            time_limit: Some(std::time::Duration::from_secs(self.options.call_limit_secs)),
            follow: self.options.follow.then_some(&follow as _),
            env: vec![EnvVar::new("STET_RECEIPT", call.id.clone())],
            sealed: Some(&mut call_profile.sealed),
            stub_model_api: false,
            reaper: Some(self.reaper),
        };
        let ran = match ready {
            Some(ready) => {
                harness::run_ready(ready, self.settings, &launch, watch, Some(&call.log))
            }
            None => harness::run_launch(
                self.settings,
                &self.runtime,
                &launch,
                self.call_plan(role, lane),
                watch,
                Some(&call.log),
            ),
        }
        .and_then(|output| {
            let outcome = harness::outcome_of(&self.harness, role, &output)?;
            Ok((output, outcome))
        });
        // The runtime or the harness failing (a sandbox that cannot start, an output the
        // harness cannot read) is this call failing: recorded, and counted toward an
        // outage by the caller, not the end of the drive.
        let infrastructure = ran.is_err();
        let (output, outcome) = match ran {
            Ok(ran) => ran,
            Err(e) => (
                harness::LaunchOutput::none(call.network.clone()),
                stet_plugin_api::CallOutcome {
                    kind: OutcomeCode::FAILED,
                    detail: e.to_string().lines().collect::<Vec<_>>().join("; ").into(),
                    retry_at_unix: ROption::RNone,
                    cost_usd: ROption::RNone,
                    usage: Default::default(),
                },
            ),
        };
        call.network = output.network.clone();
        call.ended_unix_ms = now_ms();
        let carried = {
            let mut settled = self.profile_lock.lock().unwrap_or_else(|p| p.into_inner());
            let carried = call_profile.settle(&self.harness, &self.profile);
            if !matches!(&carried, Ok(files) if files.is_empty()) {
                *settled += 1;
            }
            carried
        };
        let mut refused = None;
        if let Some(message) = commit {
            let _lock = self.lock()?;
            // Git's trailers: which agent made it, and the receipt of the call.
            let message = format!(
                "{message}\n\nStet-Agent: {} {}\nStet-Receipt: {}",
                self.harness.name, self.harness.version, call.id
            );
            match lane.commit_all_as(&message, self.author.as_ref(), self.settings.max_file) {
                Ok(committed) if !committed.removed.is_empty() => {
                    let listed: Vec<String> =
                        committed.removed.iter().map(ToString::to_string).collect();
                    self.progress.warn(&format!(
                        "{}: taken out of the lane before it was committed: {}",
                        item.id,
                        listed.join(", ")
                    ));
                }
                Ok(_) => {}
                Err(lanes::CommitError::TooLarge(why)) => refused = Some(why),
                Err(e) => self
                    .progress
                    .warn(&format!("{}: cannot commit the agent's work: {e}", item.id)),
            }
            // The next call (the check, the review, the next round's) sees only what was
            // committed: what this one left beside it — ignored files too — is gone.
            if let Err(e) = lane.restore() {
                refused.get_or_insert(format!(
                    "the lane could not be put back to its last commit after the call: {e}"
                ));
            }
        }
        call.commit_after = lane.head().unwrap_or_default();
        let mut end = harness::call_end(&output, &outcome);
        if infrastructure {
            end.outcome = receipts::NOT_RUN.to_string();
        }
        match carried {
            Ok(files) => end.profile_carried = files,
            Err(e) => self
                .progress
                .warn(&format!("{}: {e}", item.id).replace('\n', "; ")),
        }
        let receipt = call.id.clone();
        receipts::record_end(&self.repo, call, end)
            .map_err(|e| CliError::failure(format!("cannot record the receipt: {e}")))?;
        Ok(Call {
            kind: outcome.kind,
            detail: outcome.detail.to_string(),
            retry_at: outcome.retry_at_unix.into_option(),
            receipt,
            infrastructure,
            refused,
        })
    }

    /// The repository's check command in a fresh sandbox on the lane, with a receipt
    /// (role `check`) like an agent call's: its whole output is in its log, its tail in
    /// the outcome. Whatever the check wrote in the lane is restored away afterwards: it
    /// never reaches the landed branch.
    fn check<'env>(
        &'env self,
        item: &queue::Item,
        lane: &Lane,
        round: u32,
        command: &str,
        made: Option<Sandbox<'env>>,
    ) -> Result<Checked, CliError> {
        let started = now_ms();
        let id = format!("{started}-{}-check", item.id);
        let no_harness = receipts::PluginRecord {
            name: String::new(),
            version: String::new(),
            library_sha256: String::new(),
        };
        let mut call = receipts::CallContext {
            log: receipts::log_path(&self.repo, &id),
            id,
            run: self.run.clone(),
            item: item.id.clone(),
            lane: lane.branch.clone(),
            role: "check",
            round: Some(round),
            runtime: &self.runtime_record,
            runtime_reason: &self.runtime.selection.reason,
            harness: &no_harness,
            image: &self.settings.image,
            network: "none".to_string(),
            limits: self.settings.limits.describe(),
            started_unix_ms: started,
            ended_unix_ms: started,
            commit_before: lane.head().unwrap_or_default(),
            commit_after: String::new(),
        };
        let sandbox = match made {
            Some(sandbox) => sandbox,
            None => self.check_sandbox(lane)?,
        };
        receipts::record_start(&self.repo, &call)
            .map_err(|e| CliError::failure(format!("cannot record the receipt: {e}")))?;
        let process = sandbox.spawn(stet_plugin_api::ProcessSpec {
            argv: vec!["sh".into(), "-c".into(), command.into()].into(),
            env: Default::default(),
            workdir: ROption::RNone,
            stdin: Default::default(),
        })?;
        *self.in_flight.lock().unwrap_or_else(|p| p.into_inner()) = Some(process.clone());
        let limit = std::time::Duration::from_secs(self.options.call_limit_secs);
        let watchdog = sandbox::Watchdog::start(&process, limit);
        let disk = sandbox::DiskWatch::start(
            &process,
            vec![lane.dir.clone()],
            self.settings.limits.disk_bytes,
        );
        let mut output = crate::capture::Capture::new(Some(&call.log), 32 * 1024)
            .map_err(|e| CliError::failure(format!("cannot write {}: {e}", call.log.display())))?;
        let (progress, follow) = (&self.progress, self.options.follow);
        let status = process.wait(&mut |_, bytes| {
            if follow {
                progress.follow(bytes);
            }
            output.push(bytes);
        });
        *self.in_flight.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let status = status?;
        let events = sandbox.limit_events();
        sandbox.retire(Some(self.reaper));
        let output_bytes = output.total();
        let (kept, log_cut_bytes) = output.finish_counting().unwrap_or_default();
        let kept = String::from_utf8_lossy(&kept).into_owned();
        let restored = lane.restore();
        let limits = &self.settings.limits;
        let why = if watchdog.fired() {
            Some(format!(
                "the check did not finish within {} (--call-limit) and was killed",
                humantime::format_duration(limit)
            ))
        } else if disk.exceeded() {
            Some(harness::LimitReached::Disk(limits.disk_bytes).describe())
        } else if status.out_of_memory || (events.oom_kills > 0 && !status.success()) {
            Some(harness::LimitReached::Memory(limits.memory_bytes).describe())
        } else if events.pids_refused > 0 && !status.success() {
            Some(harness::LimitReached::Pids(events.pids_refused, limits.pids).describe())
        } else {
            None
        };
        if let Err(e) = restored {
            return Err(CliError::failure(format!(
                "cannot restore the lane {} after its check",
                lane.branch
            ))
            .caused_by(e.to_string()));
        }
        let passed = why.is_none() && status.success();
        let shown = match &why {
            Some(why) => format!("{kept}\n{why}"),
            None => kept,
        };
        call.ended_unix_ms = now_ms();
        call.commit_after = lane.head().unwrap_or_default();
        let receipt = call.id.clone();
        let end = receipts::CallEnd {
            exit_code: status.code.into_option(),
            exit_signal: status.signal.into_option(),
            outcome: if passed { "passed" } else { "failed" }.to_string(),
            detail: tail(&shown, 12, 4096),
            output_bytes,
            log_cut_bytes,
            ..Default::default()
        };
        receipts::record_end(&self.repo, call, end)
            .map_err(|e| CliError::failure(format!("cannot record the receipt: {e}")))?;
        Ok(Checked {
            passed,
            output: shown,
            receipt,
        })
    }
}

/// How a check ended.
struct Checked {
    passed: bool,
    /// Its output as kept (the tail is what matters), and why it was stopped, if it was.
    output: String,
    /// Its receipt.
    receipt: String,
}

/// `text` indented under the line it belongs to.
fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn implement_prompt(item: &queue::Item, feedback: Option<&str>) -> String {
    let mut prompt = format!(
        "You are working in a git working copy on its own branch. Do what this work item asks, \
         and nothing else:\n\n{}\n",
        item.text.trim()
    );
    if let Some(feedback) = feedback {
        prompt.push_str(&format!(
            "\nYour previous attempt was not accepted.\n{feedback}\n"
        ));
    }
    prompt.push_str("\nLeave your changes in the working copy; stet commits and pushes them.");
    prompt
}

fn review_prompt(item: &queue::Item, base: &str) -> String {
    format!(
        "You are reviewing a change made for this work item:\n\n{}\n\nSee it with `git diff {base}`. \
         Answer with LAND on the first line if the change does what was asked and nothing else, \
         or with REVISE on the first line followed by what must change.",
        item.text.trim()
    )
}

/// Why a lane could not be opened, for `item`.
fn cannot_open(item: &str, e: lanes::GitError) -> CliError {
    CliError::failure(format!("cannot open the lane of {item}")).caused_by(e.to_string())
}

/// A lane's worker with the queue it takes from: how its next item is made ahead.
pub(super) struct NextMaker<'w, 'd, 'a> {
    pub worker: &'w Worker<'d, 'a>,
    pub items: &'w [queue::Entry],
}

impl<'w> MakesNext<'w> for NextMaker<'w, '_, '_> {
    fn make_next(&self) -> Result<Option<NextLane<'w>>, CliError> {
        self.worker.make_next(self.items)
    }

    fn let_go(&self, next: NextLane<'w>) {
        self.worker.let_next_go(next);
    }
}
