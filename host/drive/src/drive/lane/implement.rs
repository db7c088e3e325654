//! The implementing stage: the agent's call of this round, and where it leaves the lane.

use stet_plugin_api::{OutcomeCode, Role};

use crate::checkpoints::{Checkpoint, Next};
use crate::error::Error;
use crate::lanes::Lane;
use crate::queue;

use super::super::ahead::Ahead;
use super::super::note;
use super::super::state::ItemEnd;
use super::super::worker::{first_line, shown_words, tail, Worker};
use super::call::{Call, Refused};
use super::Moved;
impl Worker<'_, '_> {
    /// The implementing agent's call of this round.
    pub(in crate::drive) fn implement<'env>(
        &'env self,
        item: &queue::Item,
        lane: &Lane,
        at: &Checkpoint,
        ahead: &mut Ahead<'_, 'env>,
    ) -> Result<Moved, Error> {
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
        let prompt = self.prompt_for(Role::Implement, item, lane, Some(at))?;
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
    /// the review); no change, a failed task or an answer out of shape counts the round,
    /// shows what the agent said and tells the next round; a call that could not be made,
    /// a usage limit or a refused login ends the lane's work for now.
    pub(in crate::drive) fn after_implement(
        &self,
        item: &queue::Item,
        lane: &Lane,
        at: &Checkpoint,
        mut call: Call,
    ) -> Result<Moved, Error> {
        let round = at.round;
        let refused = match call.refused.take() {
            Some(Refused::Fail(why)) => return Ok(Moved::Fail(why)),
            Some(Refused::Round(why)) => Some(why),
            None => None,
        };
        if let Some(why) = call.refused_by_policy() {
            return Ok(Moved::Fail(format!(
                "the implementing call was not made: {why}"
            )));
        }
        if let Some(end) = call.outside_the_item("implement") {
            return Ok(Moved::End(end));
        }
        let said = call.detail.trim();
        // What the agent said is shown unless the reason, in a line, already says all of it.
        let failed = |reason: String, feedback: String| {
            let words = if said.is_empty() || said.lines().count() > 1 || !reason.contains(said) {
                format!("; the agent said:\n{}", shown_words(said))
            } else {
                String::new()
            };
            note!(
                self.drive.progress,
                "{}: round {round} of {}: {reason}{words}",
                item.id,
                self.drive.options.max_rounds
            );
            Moved::On(Checkpoint {
                round: round + 1,
                next: Next::Implement,
                feedback: Some(feedback),
                reason: Some(reason),
                receipt: Some(call.receipt.clone()),
                head: String::new(),
                run: self.drive.run.clone(),
            })
        };
        if let Some(why) = refused {
            return Ok(failed(
                why.clone(),
                format!("Your previous attempt was not taken: {why}"),
            ));
        }
        if call.kind != OutcomeCode::DONE {
            let detail = first_line(said).to_string();
            return Ok(failed(
                format!("the implementing agent failed its task: {detail}"),
                format!("Your previous attempt failed: {said}"),
            ));
        }
        let changed = {
            let _lock = self.lock()?;
            self.changed(lane)?
        };
        if !changed {
            // Its words are why, as far as anyone can tell: the next round reads them.
            return Ok(failed(
                "the agent changed nothing".to_string(),
                format!(
                    "Your previous attempt changed nothing in the working copy; the work item \
                     asks for a change. Your answer then was:\n{}",
                    if said.is_empty() {
                        "(nothing)".to_string()
                    } else {
                        tail(said, 200, 16 * 1024)
                    }
                ),
            ));
        }
        // The feedback was this call's to read: what comes next (a check, a review) is
        // told of its own round's answers, never of the ones before.
        Ok(Moved::On(Checkpoint {
            next: if self.drive.options.check.is_some() {
                Next::Check
            } else {
                Next::Review
            },
            feedback: None,
            receipt: Some(call.receipt),
            run: self.drive.run.clone(),
            ..at.clone()
        }))
    }
}
