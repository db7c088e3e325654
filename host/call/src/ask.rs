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
use crate::sandbox::{LaneAccess, LaneMounts, Plan};
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
    pub quarantined: Vec<Quarantined>,
    /// How the agent's task ended.
    #[serde(skip)]
    pub kind: OutcomeCode,
}

/// A repository the agent made or changed, renamed out of git's sight: where it was, and
/// where what made it one is now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Quarantined {
    /// The repository (a `.git` entry, or a directory git would take for one).
    pub found: PathBuf,
    /// What was renamed: the `.git` entry, or the directory's `HEAD` (and `refs`).
    pub moved_to: PathBuf,
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
    let repositories = fit_to_mount(cwd)?;
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
    let pending = Pending::begin(cwd);
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
            .with_lane(LaneMounts::of_directory(cwd, &repositories), access),
        harness::Watch::default(),
        log.as_deref(),
    )?;
    let ended = call::now_ms();
    let quarantined = quarantine(cwd, pending.since, printer)?;
    pending.done();
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

/// A `stet ask` in progress in a directory: when its call started, kept on disk (in the
/// person's data directory, `stet/ask-pending/<sha256 of the path>`) until the gate has
/// looked at what the call left — so that the next `stet ask` there also looks at what
/// one killed before that left.
struct Pending {
    file: Option<PathBuf>,
    since: std::time::SystemTime,
}

impl Pending {
    /// Notes an ask beginning in `dir` now, or keeps the start of one that never ended.
    fn begin(dir: &Path) -> Pending {
        use sha2::Digest;
        let now = std::time::SystemTime::now();
        let file = etcetera::choose_base_strategy().ok().map(|x| {
            let name = format!(
                "{:x}",
                sha2::Sha256::digest(dir.as_os_str().as_encoded_bytes())
            );
            etcetera::BaseStrategy::data_dir(&x)
                .join("stet/ask-pending")
                .join(name)
        });
        let earlier = file
            .as_deref()
            .and_then(|f| crate::files::read_untrusted(f, 64).ok())
            .and_then(|text| String::from_utf8_lossy(&text).trim().parse::<u64>().ok())
            .map(|ms| std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
            .filter(|at| *at < now);
        let since = earlier.unwrap_or(now);
        if let Some(file) = &file {
            let ms = since
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or_default();
            let _ = file
                .parent()
                .map(std::fs::create_dir_all)
                .transpose()
                .and_then(|_| std::fs::write(file, format!("{ms}\n")));
        }
        Pending { file, since }
    }

    /// The gate has looked: nothing is pending here.
    fn done(self) {
        if let Some(file) = self.file {
            let _ = std::fs::remove_file(file);
        }
    }
}

/// The most repositories one `stet ask` mounts read-only: each is a mount of its own.
pub const MOST_MOUNTED: usize = 1000;

/// Refuses a directory the call cannot be given: one inside a git directory, one that
/// cannot be walked whole, or one holding more repositories than are mounted read-only.
/// Returns those it holds (by the gate's shapes, none missed).
fn fit_to_mount(cwd: &Path) -> Result<Vec<PathBuf>, Error> {
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
    // Every repository under it is mounted read-only, and what the call makes is moved out
    // of git's sight after.
    let found = crate::gate::survey(cwd).map_err(|e| {
        Concept::Call
            .usage(format!(
                "stet cannot look at every repository under {}",
                cwd.display()
            ))
            .caused_by(e.to_string())
            .hint("run stet ask in the repository (or the folder) the task is about")
    })?;
    let mounted: Vec<PathBuf> = found
        .iter()
        .filter(|r| !r.link)
        .map(|r| cwd.join(&r.path))
        .collect();
    if mounted.len() > MOST_MOUNTED {
        return Err(Concept::Call
            .usage(format!(
                "{} holds {} git repositories; stet ask mounts each read-only, at most {MOST_MOUNTED}",
                cwd.display(),
                mounted.len()
            ))
            .hint("run stet ask in the repository (or the folder) the task is about"));
    }
    Ok(mounted)
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

/// Before any git of stet's or the person's looks at the directory again, through the
/// gate: what the call touched is put right (set-id bits, group and other write, extended
/// attributes), special files it made are removed, and every repository it made or changed
/// is moved out of git's sight, each said.
fn quarantine(
    cwd: &Path,
    started: std::time::SystemTime,
    printer: Printer,
) -> Result<Vec<Quarantined>, Error> {
    let looked = crate::gate::after_ask(cwd, started).map_err(|e| {
        Concept::Call
            .failure(format!(
                "stet could not look at everything the agent left under {}",
                cwd.display()
            ))
            .caused_by(e.to_string())
            .hint("look for .git entries and directories holding HEAD, objects or refs the agent made, and remove them before running git there")
    })?;
    for removed in &looked.removed {
        printer.warn(&format!(
            "the agent made {}; removed ({})",
            cwd.join(&removed.path).display(),
            removed.why
        ));
    }
    let quarantined: Vec<Quarantined> = looked
        .repositories
        .iter()
        .filter_map(|r| {
            Some(Quarantined {
                found: cwd.join(&r.path),
                moved_to: cwd.join(r.moved_to.as_ref()?),
            })
        })
        .collect();
    for q in &quarantined {
        printer.warn(&format!(
            "the agent made or changed the git repository {}; moved out of git's sight: {}",
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
    quarantined: Vec<Quarantined>,
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
