//! The review stage: the reviewing agent's call, and what its answer means for the lane.

use stet_plugin_api::{OutcomeCode, Role};

use crate::checkpoints::{Checkpoint, Next};
use crate::error::Error;
use crate::lanes::Lane;
use crate::queue;

use super::super::ahead::Ahead;
use super::super::note;
use super::super::state::ItemEnd;
use super::super::worker::{first_line, indent, tail, Worker};
use super::call::Call;
use super::Moved;
/// What the reviewer answered.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::drive) enum Verdict {
    Land,
    Revise(String),
    OutOfShape,
}

/// The review protocol the prompt asks for: LAND, or REVISE followed by what must change,
/// on the first line. (The agent's words, read because they are its answer; a harness
/// checks the shape too and says OUT_OF_SHAPE when it is not this.)
pub(in crate::drive) fn verdict(answer: &str) -> Verdict {
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

impl Worker<'_, '_> {
    /// The reviewing agent's call.
    pub(in crate::drive) fn review<'env>(
        &'env self,
        item: &queue::Item,
        lane: &Lane,
        at: &Checkpoint,
        ahead: &mut Ahead<'_, 'env>,
    ) -> Result<Moved, Error> {
        if let Err(end) = self.enter(lane, "review") {
            return Ok(Moved::End(end));
        }
        if !self.pace() {
            return Ok(Moved::End(ItemEnd::Stopped(lane.branch.clone())));
        }
        // What the reviewer judges: everything the lane adds to the drive's base.
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
    pub(in crate::drive) fn after_review(
        &self,
        item: &queue::Item,
        at: &Checkpoint,
        call: Call,
    ) -> Moved {
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
            run: self.drive.run.clone(),
        };
        match answer {
            Verdict::Land => {
                note!(self.drive.progress, "{}: the reviewer said LAND", item.id);
                Moved::On(Checkpoint {
                    next: Next::Land,
                    receipt: Some(call.receipt.clone()),
                    run: self.drive.run.clone(),
                    ..at.clone()
                })
            }
            Verdict::Revise(words) => {
                note!(
                    self.drive.progress,
                    "{}: round {} of {}: the reviewer asked for changes:\n{}",
                    item.id,
                    at.round,
                    self.drive.options.max_rounds,
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
}

pub(in crate::drive) fn review_prompt(item: &queue::Item, base: &str) -> String {
    format!(
        "You are reviewing a change made for this work item:\n\n{}\n\nSee it with `git diff {base}`. \
         Answer with LAND on the first line if the change does what was asked and nothing else, \
         or with REVISE on the first line followed by what must change.",
        item.text.trim()
    )
}
