//! What each call of a lane is told: the item, and what a colleague would add — the
//! repository's rules, its check, and for a reviewer the base and the check's result.
//!
//! A prompt is built from the item, the settings, the checkpoint and the lane's last
//! commit, never from the working tree a sandbox wrote: a call made ahead (`ahead.rs`) is
//! prepared with the prompt it is then given.

use stet_plugin_api::Role;

use crate::checkpoints::{Checkpoint, Next};
use crate::error::Error;
use crate::lanes::Lane;
use crate::queue;
use crate::walls::hooks::RULES_FILES;

use super::super::worker::Worker;

/// What a prompt says beside the item.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(in crate::drive) struct Brief<'a> {
    /// The repository's check command, when it has one.
    pub check: Option<&'a str>,
    /// The rules files at the top of the lane's base (of [`RULES_FILES`]): the
    /// repository's own, never ones an agent of this item wrote.
    pub rules: Vec<&'static str>,
    /// The commit the lane branched from, where the rules are read.
    pub base: String,
}

impl Worker<'_, '_> {
    /// The brief for a call in `lane`: the settings' check, and the rules files the lane's
    /// base holds (read from git's tree, as data: a name is all that is taken). Not the
    /// lane's last commit: an implementing agent may have written rules files in the very
    /// change under review.
    pub(in crate::drive) fn brief(&self, lane: &Lane) -> Brief<'_> {
        let base = self.base_of(lane).unwrap_or_default();
        let listed = if base.is_empty() {
            String::new()
        } else {
            lane.history()
                .run(&["ls-tree", "--name-only", &base, "--"])
                .unwrap_or_default()
        };
        let names: Vec<&str> = listed.lines().collect();
        Brief {
            check: self.drive.options.check.as_deref(),
            rules: RULES_FILES
                .into_iter()
                .filter(|f| names.contains(f))
                .collect(),
            base,
        }
    }

    /// The prompt of the call `role` makes in `lane` at the checkpoint `at` (or the lane's
    /// first call, with no feedback).
    pub(in crate::drive) fn prompt_for(
        &self,
        role: Role,
        item: &queue::Item,
        lane: &Lane,
        at: Option<&Checkpoint>,
    ) -> Result<String, Error> {
        let brief = self.brief(lane);
        Ok(match role {
            // Only a review after a review has words for the reviewer (`after_review`).
            Role::Review => review_prompt(
                item,
                &brief.base,
                &brief,
                at.filter(|a| a.next == Next::Review)
                    .and_then(|a| a.feedback.as_deref()),
            ),
            _ => implement_prompt(item, at.and_then(|a| a.feedback.as_deref()), &brief),
        })
    }
}

/// The rules sentence, for an implementing agent or a reviewer: the rules as the lane's
/// base holds them (`git show BASE:FILE`), never as the working copy may have them now.
fn rules_sentence(brief: &Brief<'_>, what: &str) -> Option<String> {
    let base = short(&brief.base);
    let names: Vec<String> = brief
        .rules
        .iter()
        .map(|r| format!("`{r}` (`git show {base}:{r}`)"))
        .collect();
    let listed = match names.as_slice() {
        [] => return None,
        [one] => one.clone(),
        many => many.join(" and "),
    };
    Some(format!(
        "The repository's rules are in {listed}, as the branch's base holds them: {what}"
    ))
}

/// A commit id as a person reads it.
fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// The implementing call's prompt: the item, the rules, the check it can run before it
/// finishes, and why the last round was not accepted.
pub(in crate::drive) fn implement_prompt(
    item: &queue::Item,
    feedback: Option<&str>,
    brief: &Brief<'_>,
) -> String {
    let mut prompt = format!(
        "You are working in a git working copy on its own branch. Do what this work item asks, \
         and nothing else:\n\n{}\n",
        item.text.trim()
    );
    if let Some(rules) = rules_sentence(brief, "read them first and follow them.") {
        prompt.push_str(&format!("\n{rules}\n"));
    }
    if let Some(check) = brief.check {
        prompt.push_str(&format!(
            "\nWhen you are done, stet runs the repository's check in the working copy: \
             `{check}`. Your change is reviewed only if it passes: run it yourself before \
             you finish.\n"
        ));
    }
    if let Some(feedback) = feedback {
        prompt.push_str(&format!(
            "\nYour previous attempt was not accepted.\n{feedback}\n"
        ));
    }
    prompt.push_str("\nLeave your changes in the working copy; stet commits and pushes them.");
    prompt
}

/// The reviewing call's prompt: the item, the base the change is measured from, what the
/// check said, the rules, and the answer's shape. (The last sentence naming `git diff
/// BASE` is the one the example agent reads.)
/// `feedback` is what the reviewer is told about its own answer before (a review out of
/// shape), which only a review after one has.
pub(in crate::drive) fn review_prompt(
    item: &queue::Item,
    base: &str,
    brief: &Brief<'_>,
    feedback: Option<&str>,
) -> String {
    let mut prompt = format!(
        "You are reviewing a change made on its own branch for this work item:\n\n{}\n\n\
         The change is every commit since {base}, where the branch left its base: \
         `git log -p {base}..HEAD` shows each commit.\n",
        item.text.trim()
    );
    match brief.check {
        Some(check) => prompt.push_str(&format!(
            "The repository's check, `{check}`, passed on this change.\n"
        )),
        None => prompt
            .push_str("The repository has no check configured: nothing has run the change yet.\n"),
    }
    if let Some(rules) = rules_sentence(
        brief,
        "the change must follow them (a change to them is part of what you review, not a rule).",
    ) {
        prompt.push_str(&format!("{rules}\n"));
    }
    prompt.push_str(&format!(
        "\nSee the whole change with `git diff {base}`. Answer with LAND on the first line if \
         the change does what was asked and nothing else, or with REVISE on the first line \
         followed by what must change."
    ));
    if let Some(feedback) = feedback {
        prompt.push_str(&format!("\n\n{feedback}\n"));
    }
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(text: &str) -> queue::Item {
        queue::Item {
            id: "i".into(),
            handle: "i".into(),
            title: "t".into(),
            text: text.into(),
            path: "i.md".into(),
        }
    }

    #[test]
    fn the_implementing_prompt_names_the_rules_the_check_and_the_last_rounds_words() {
        let brief = Brief {
            check: Some("python3 -m pytest -q"),
            rules: vec!["AGENTS.md", "CLAUDE.md"],
            base: "0123456789abcdef0123".into(),
        };
        let prompt = implement_prompt(&item("Add a greeting."), Some("it failed"), &brief);
        insta::assert_snapshot!(prompt, @r"
        You are working in a git working copy on its own branch. Do what this work item asks, and nothing else:

        Add a greeting.

        The repository's rules are in `AGENTS.md` (`git show 0123456789ab:AGENTS.md`) and `CLAUDE.md` (`git show 0123456789ab:CLAUDE.md`), as the branch's base holds them: read them first and follow them.

        When you are done, stet runs the repository's check in the working copy: `python3 -m pytest -q`. Your change is reviewed only if it passes: run it yourself before you finish.

        Your previous attempt was not accepted.
        it failed

        Leave your changes in the working copy; stet commits and pushes them.
        ");
        let bare = implement_prompt(&item("Add a greeting."), None, &Brief::default());
        assert!(!bare.contains("rules") && !bare.contains("check"), "{bare}");
    }

    #[test]
    fn the_review_prompt_names_the_base_the_checks_result_and_the_rules() {
        let brief = Brief {
            check: Some("make test"),
            rules: vec!["AGENTS.md"],
            base: "abc123".into(),
        };
        let prompt = review_prompt(&item("Add a greeting."), "abc123", &brief, None);
        insta::assert_snapshot!(prompt, @r"
        You are reviewing a change made on its own branch for this work item:

        Add a greeting.

        The change is every commit since abc123, where the branch left its base: `git log -p abc123..HEAD` shows each commit.
        The repository's check, `make test`, passed on this change.
        The repository's rules are in `AGENTS.md` (`git show abc123:AGENTS.md`), as the branch's base holds them: the change must follow them (a change to them is part of what you review, not a rule).

        See the whole change with `git diff abc123`. Answer with LAND on the first line if the change does what was asked and nothing else, or with REVISE on the first line followed by what must change.
        ");
        let unchecked = review_prompt(&item("x"), "abc123", &Brief::default(), None);
        assert!(unchecked.contains("no check configured"), "{unchecked}");
    }
}
