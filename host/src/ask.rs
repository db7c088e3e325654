//! `stet ask`: one walled agent call in a fresh sandbox on a directory — the person's
//! current one — made through the one walled call (`crate::call`), with a receipt when the
//! directory is in a repository.
//!
//! Every git directory under the directory is mounted read-only and held to what it was:
//! one the agent made or replaced is moved out of git's sight before any git looks again.

use std::path::{Path, PathBuf};

use serde::Serialize;
use stet_plugin_api::{CallOutcome, OutcomeCode, Profile, ROption, Role};

use crate::call::{self, Request, Walled};
use crate::error::{Concept, Error};
use crate::harness::{self, LaunchOutput, OpenHarness};
use crate::printer::Printer;
use crate::receipts;
use crate::sandbox::{self, LaneAccess, LaneMounts, Plan};
use crate::settings::Settings;

/// What one `stet ask` call did: what its `--json` prints.
#[derive(Serialize)]
pub struct Asked {
    pub harness: String,
    pub runtime: String,
    pub network: String,
    pub outcome: String,
    pub detail: String,
    pub retry_at_unix: Option<i64>,
    pub cost_usd: Option<f64>,
    pub usage: Vec<(String, String)>,
    pub exit_code: Option<i32>,
    pub session: Vec<serde_json::Value>,
    /// The receipt this call left (in a repository).
    pub receipt: Option<PathBuf>,
    /// Git directories the agent made or replaced, renamed out of git's sight.
    pub quarantined: Vec<sandbox::git_dirs::Quarantined>,
    /// How the agent's task ended.
    #[serde(skip)]
    pub kind: OutcomeCode,
}

/// What `stet ask` is asked.
pub struct Question<'a> {
    /// The directory the agent works in (canonical): mounted as its lane.
    pub dir: &'a Path,
    /// Implement (the directory writable) or review (read-only).
    pub role: Role,
    /// The prompt.
    pub prompt: &'a str,
    /// Where the call's full output goes; by default the repository's log of the call.
    pub log: Option<&'a Path>,
}

/// Makes one walled call as `question` says; `printer` is told warnings and notes.
pub fn ask(settings: &Settings, question: &Question<'_>, printer: Printer) -> Result<Asked, Error> {
    let cwd = question.dir;
    let git_dirs = fit_to_mount(cwd)?;
    let (harness, runtime) = harness::open_with_runtime(settings)?;
    let profile = harness.profile()?;
    walls_hold(&harness, &profile, printer)?;
    let walled = Walled {
        settings,
        runtime: &runtime,
        harness: &harness,
        profile: &profile,
    };
    // `stet ask` has no time limit: a login good for the next half hour is fresh enough.
    walled.keep_fresh(std::time::Duration::from_secs(30 * 60), &|text| {
        printer.note(text)
    })?;
    let workdir = cwd.display().to_string();
    let mut launched = walled.launch(Request {
        role: question.role,
        prompt: question.prompt,
        workdir: &workdir,
    })?;
    let repo = crate::config::repository_root(cwd);
    let commit_before = head(cwd);
    let started = call::now_ms();
    let call_id = format!("{started}-ask-{}", std::process::id());
    let log = match (question.log, &repo) {
        (Some(log), _) => Some(log.to_path_buf()),
        (None, Some(repo)) => Some(receipts::log_path(repo, &call_id)),
        (None, None) => None,
    };
    let access = match question.role {
        Role::Review => LaneAccess::ReadOnly,
        _ => LaneAccess::ReadWrite,
    };
    let output = walled.run(
        &mut launched,
        Plan::new("ask", &format!("ask-{}", std::process::id()), &workdir)
            .with_lane(LaneMounts::of_directory(cwd, &git_dirs), access),
        harness::Watch::default(),
        log.as_deref(),
    )?;
    let ended = call::now_ms();
    let quarantined = quarantine(cwd, &git_dirs, printer)?;
    let carried = walled.settle(launched.profile)?;
    let outcome = harness::outcome_of(&harness, question.role, &output)?;
    // In a repository, the call leaves a receipt (and its full output) like a drive's.
    let receipt =
        match &repo {
            Some(repo) => {
                let records = (
                    receipts::PluginRecord::of(&runtime.name, &runtime.version, &runtime.library),
                    receipts::PluginRecord::of(&harness.name, &harness.version, &harness.library),
                );
                let mut context = walled.context(call::Made {
                    id: call_id,
                    run: format!("ask-{}", std::process::id()),
                    item: String::new(),
                    lane: String::new(),
                    role: receipts::CallRole::of(question.role),
                    round: None,
                    network: output.network.clone(),
                    started_unix_ms: started,
                    commit_before,
                    log: log.clone().unwrap_or_default(),
                    prompt: Some(question.prompt.to_string()),
                    runtime: &records.0,
                    harness: &records.1,
                });
                context.ended_unix_ms = ended;
                context.commit_after = head(cwd);
                let mut end = harness::call_end(&output, &outcome);
                end.profile_carried = carried;
                Some(receipts::record_end(repo, context, end).map_err(|e| {
                    Concept::Call.failure(format!("cannot record the receipt: {e}"))
                })?)
            }
            None => None,
        };
    Ok(asked(
        &harness,
        &runtime.name,
        &output,
        &outcome,
        receipt,
        quarantined,
    ))
}

/// Refuses a directory the call cannot be given: one inside a git directory, or one
/// holding more git directories than are mounted read-only. Returns those it holds.
fn fit_to_mount(cwd: &Path) -> Result<Vec<sandbox::git_dirs::GitDir>, Error> {
    // Inside a git directory the working directory *is* the person's `.git`.
    if crate::git::Inert::at(cwd)
        .run(&["rev-parse", "--is-inside-git-dir"])
        .is_ok_and(|inside| inside == "true")
    {
        return Err(Concept::Call.usage(format!(
            "{} is inside a git directory; stet ask mounts the current directory for the agent to write",
            cwd.display()
        ))
        .hint("cd into the working tree (the agent never gets write access to a .git)"));
    }
    // Every git directory under it is mounted read-only, and held to what it was after.
    let git_dirs = sandbox::git_dirs::find(cwd);
    if git_dirs.len() > sandbox::git_dirs::MOST {
        return Err(Concept::Call
            .usage(format!(
                "{} holds more than {} git directories; stet ask mounts each read-only",
                cwd.display(),
                sandbox::git_dirs::MOST
            ))
            .hint("run stet ask in the repository (or the folder) the task is about"));
    }
    Ok(git_dirs)
}

/// The walled settings rewritten if edited, then every static wall must hold.
fn walls_hold(harness: &OpenHarness, profile: &Profile, printer: Printer) -> Result<(), Error> {
    if let Some(detail) = harness.rewrite_settings(profile)? {
        printer.warn(&format!(
            "the walled settings had been edited and were replaced ({detail})"
        ));
    }
    let broken: Vec<_> = harness
        .check_walls(profile)?
        .into_iter()
        .filter(|w| !w.held())
        .collect();
    let Some(first) = broken.first() else {
        return Ok(());
    };
    let mut error = Concept::Call.unusable(format!(
        "{} of {} {} broken",
        crate::printer::count(broken.len(), "wall", "walls"),
        harness.name,
        if broken.len() == 1 { "is" } else { "are" }
    ));
    for w in &broken {
        error = error.caused_by(format!("{}: {}", w.wall, w.detail));
    }
    Err(error.hint(first.remedy.to_string()))
}

/// Before any git of stet's or the person's looks at the directory again: git
/// directories the agent made or replaced are moved out of git's sight, each said.
fn quarantine(
    cwd: &Path,
    git_dirs: &[sandbox::git_dirs::GitDir],
    printer: Printer,
) -> Result<Vec<sandbox::git_dirs::Quarantined>, Error> {
    let quarantined = sandbox::git_dirs::quarantine_new(cwd, git_dirs).map_err(|e| {
        Concept::Call
            .failure(format!(
                "cannot move aside a git directory the agent made under {}",
                cwd.display()
            ))
            .caused_by(e.to_string())
            .hint("look for .git entries the agent made, and remove them before running git there")
    })?;
    for q in &quarantined {
        printer.warn(&format!(
            "the agent made or replaced the git directory {}; moved out of git's sight to {}",
            q.found.display(),
            q.moved_to.display()
        ));
    }
    Ok(quarantined)
}

/// The person's own repository's HEAD: stet's git reads it inertly (an earlier call may
/// have written into its working tree), and the agent gets its `.git` read-only.
fn head(dir: &Path) -> String {
    crate::git::Inert::at(dir)
        .run(&["rev-parse", "--verify", "--quiet", "HEAD"])
        .unwrap_or_default()
}

fn asked(
    harness: &OpenHarness,
    runtime: &str,
    output: &LaunchOutput,
    outcome: &CallOutcome,
    receipt: Option<PathBuf>,
    quarantined: Vec<sandbox::git_dirs::Quarantined>,
) -> Asked {
    Asked {
        harness: harness.name.clone(),
        runtime: runtime.to_string(),
        network: output.network.clone(),
        outcome: harness::outcome_word(outcome.kind),
        detail: outcome.detail.to_string(),
        retry_at_unix: outcome.retry_at_unix.into_option(),
        cost_usd: outcome.cost_usd.into_option(),
        usage: harness::usage_pairs(outcome),
        exit_code: match output.status.code {
            ROption::RSome(c) => Some(c),
            ROption::RNone => None,
        },
        session: output.session.clone(),
        receipt,
        quarantined,
        kind: outcome.kind,
    }
}
