//! The review stage: the reviewing agent's call, and what its answer means for the lane.

use stet_plugin_api::{OutcomeCode, Role};

use crate::checkpoints::{Checkpoint, Next};
use crate::error::Error;
use crate::lanes::Lane;
use crate::queue;

use super::super::ahead::Ahead;
use super::super::note;
use super::super::state::ItemEnd;
use super::super::worker::{first_line, indent, shown_words, tail, Worker};
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
        // What the reviewer judges: everything the lane adds to its base.
        let prompt = self.prompt_for(Role::Review, item, lane, Some(at))?;
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
    /// round and gives the next implementing call the reviewer's words; a review out of
    /// shape (no LAND or REVISE first, output the harness cannot read) or failed counts
    /// the round too, shows what the reviewer said and asks for the review again with
    /// those words (the implementing call's work stands). None of these is an outage:
    /// only a usage limit, a refused login or a call that could not be made ends the
    /// lane's work for now.
    pub(in crate::drive) fn after_review(
        &self,
        item: &queue::Item,
        at: &Checkpoint,
        call: Call,
    ) -> Moved {
        if let Some(why) = call.refused_by_policy() {
            return Moved::Fail(format!("the review was not made: {why}"));
        }
        if let Some(end) = call.outside_the_item("review") {
            return Moved::End(end);
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
                let said = call.detail.trim();
                let unread = "Your previous review could not be read: its first line must be \
                              LAND, or REVISE followed by what must change. What was seen of it:";
                let (why, feedback) = match call.kind {
                    // The answer, read here: its first word is neither.
                    OutcomeCode::DONE => ("the review began with neither LAND nor REVISE", unread),
                    // The harness read the output, and says why it is not an answer.
                    OutcomeCode::OUT_OF_SHAPE => ("the review was out of shape", unread),
                    _ => (
                        "the review did not finish",
                        "Your previous review did not finish. What was seen of it:",
                    ),
                };
                note!(
                    self.drive.progress,
                    "{}: round {} of {}: {why}; the reviewer said:\n{}",
                    item.id,
                    at.round,
                    self.drive.options.max_rounds,
                    shown_words(said)
                );
                // Counted toward the rounds, and reviewed again (the implementing call's
                // work stands), the reviewer told what was wrong with its answer: one
                // item whose review is never in shape is given up, and holds no one else.
                Moved::On(on(
                    at.round + 1,
                    Next::Review,
                    Some(format!("{feedback}\n{}", tail(said, 200, 16 * 1024))),
                    format!("{why}: {}", first_line(said)),
                ))
            }
        }
    }
}
