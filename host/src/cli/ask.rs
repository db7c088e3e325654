//! `stet ask PROMPT`: one walled agent call in a fresh sandbox.

use serde::Serialize;
use stet_plugin_api::{OutcomeCode, ROption, Role, RoleRequest};

use crate::error::{CliError, Exit};
use crate::harness;
use crate::printer::Printer;
use crate::receipts;
use crate::sandbox::{self, LaneAccess, LaneMounts, Plan};
use crate::settings::Settings;

use super::{AskArgs, AskRole};

#[derive(Serialize)]
struct Report {
    harness: String,
    runtime: String,
    network: String,
    outcome: String,
    detail: String,
    retry_at_unix: Option<i64>,
    cost_usd: Option<f64>,
    usage: Vec<(String, String)>,
    exit_code: Option<i32>,
    session: Vec<serde_json::Value>,
    /// The receipt this call left (in a repository).
    receipt: Option<std::path::PathBuf>,
    /// Git directories the agent made or replaced, renamed out of git's sight.
    quarantined: Vec<sandbox::git_dirs::Quarantined>,
}

pub fn run(settings: &Settings, args: &AskArgs, printer: Printer) -> Result<Exit, CliError> {
    let cwd = std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(|e| CliError::failure(format!("cannot resolve the current directory: {e}")))?;
    // Inside a git directory the working directory *is* the person's `.git`.
    if crate::git::Inert::at(&cwd)
        .run(&["rev-parse", "--is-inside-git-dir"])
        .is_ok_and(|inside| inside == "true")
    {
        return Err(CliError::usage(format!(
            "{} is inside a git directory; stet ask mounts the current directory for the agent to write",
            cwd.display()
        ))
        .hint("cd into the working tree (the agent never gets write access to a .git)"));
    }
    // Every git directory under it is mounted read-only, and held to what it was after.
    let git_dirs = sandbox::git_dirs::find(&cwd);
    if git_dirs.len() > sandbox::git_dirs::MOST {
        return Err(CliError::usage(format!(
            "{} holds more than {} git directories; stet ask mounts each read-only",
            cwd.display(),
            sandbox::git_dirs::MOST
        ))
        .hint("run stet ask in the repository (or the folder) the task is about"));
    }
    let (harness, runtime) = harness::open_with_runtime(settings)?;
    let profile = harness.profile()?;
    if let Some(detail) = harness.rewrite_settings(&profile)? {
        printer.warn(&format!(
            "the walled settings had been edited and were replaced ({detail})"
        ));
    }
    let broken: Vec<_> = harness
        .check_walls(&profile)?
        .into_iter()
        .filter(|w| !w.held())
        .collect();
    if let Some(first) = broken.first() {
        let mut error = CliError::new(
            Exit::Unusable,
            format!(
                "{} of {} {} broken",
                crate::printer::count(broken.len(), "wall", "walls"),
                harness.name,
                if broken.len() == 1 { "is" } else { "are" }
            ),
        );
        for w in &broken {
            error = error.caused_by(format!("{}: {}", w.wall, w.detail));
        }
        return Err(error.hint(first.remedy.to_string()));
    }
    let role = match args.role {
        AskRole::Implement => Role::Implement,
        AskRole::Review => Role::Review,
    };
    // `stet ask` has no time limit: a login good for the next half hour is fresh enough.
    crate::refresh::keep_fresh(
        settings,
        &runtime,
        &harness,
        &profile,
        std::time::Duration::from_secs(30 * 60),
        &|text| printer.note(text),
    )?;
    let mut call_profile = harness::CallProfile::of(&harness, &profile)?;
    let launch = harness.launch(RoleRequest {
        role,
        prompt: args.prompt.join(" ").into(),
        profile_dir: call_profile.dir.clone().into(),
        workdir: cwd.display().to_string().into(),
    })?;
    let repo = crate::config::repository_root(&cwd);
    // The person's own repository: stet's git reads it inertly (an earlier call may have
    // written into its working tree), and the agent gets its `.git` read-only.
    let head = |dir: &std::path::Path| {
        crate::git::Inert::at(dir)
            .run(&["rev-parse", "--verify", "--quiet", "HEAD"])
            .unwrap_or_default()
    };
    let commit_before = head(&cwd);
    let started = now_ms();
    let call_id = format!("{started}-ask-{}", std::process::id());
    let log = match (&args.log, &repo) {
        (Some(log), _) => Some(log.clone()),
        (None, Some(repo)) => Some(receipts::log_path(repo, &call_id)),
        (None, None) => None,
    };
    let access = match role {
        Role::Review => LaneAccess::ReadOnly,
        _ => LaneAccess::ReadWrite,
    };
    let workdir = cwd.display().to_string();
    let output = harness::run_launch(
        settings,
        &runtime,
        &launch,
        Plan::new("ask", &format!("ask-{}", std::process::id()), &workdir)
            .with_lane(LaneMounts::of_directory(&cwd, &git_dirs), access),
        harness::Watch {
            sealed: Some(&mut call_profile.sealed),
            ..harness::Watch::default()
        },
        log.as_deref(),
    )?;
    let ended = now_ms();
    // Before any git of stet's or the person's looks at the directory again.
    let quarantined = sandbox::git_dirs::quarantine_new(&cwd, &git_dirs).map_err(|e| {
        CliError::failure(format!(
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
    let network = output.network.clone();
    let carried = call_profile.settle(&harness, &profile)?;
    let outcome = harness::outcome_of(&harness, role, &output)?;
    // In a repository, the call leaves a receipt (and its full output) like a drive's.
    let receipt_path = match &repo {
        Some(repo) => Some(record_receipt(
            repo,
            &harness,
            &runtime,
            settings,
            Call {
                id: call_id.clone(),
                log: log.clone().unwrap_or_default(),
                role: role_name(role),
                network: &network,
                started,
                ended,
                commit_before,
                commit_after: head(&cwd),
                carried,
            },
            &output,
            &outcome,
        )?),
        None => None,
    };
    let word = harness::outcome_word(outcome.kind);
    let report = Report {
        harness: harness.name.clone(),
        runtime: runtime.name.clone(),
        network,
        outcome: word,
        detail: outcome.detail.to_string(),
        retry_at_unix: outcome.retry_at_unix.into_option(),
        cost_usd: outcome.cost_usd.into_option(),
        usage: harness::usage_pairs(&outcome),
        exit_code: match output.status.code {
            ROption::RSome(c) => Some(c),
            ROption::RNone => None,
        },
        session: output.session.clone(),
        receipt: receipt_path,
        quarantined,
    };
    if args.json {
        printer.json(&report);
    } else {
        printer.out(&format!("outcome: {} — {}", report.outcome, report.detail));
        if let Some(at) = report.retry_at_unix {
            printer.out(&format!(
                "retry after: {} (unix {at})",
                humantime::format_rfc3339_seconds(
                    std::time::UNIX_EPOCH + std::time::Duration::from_secs(at.max(0) as u64)
                )
            ));
        }
        if let Some(cost) = report.cost_usd {
            printer.out(&format!("cost: ${cost:.6}"));
        }
        if !report.usage.is_empty() {
            let usage: Vec<String> = report
                .usage
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            printer.out(&format!("usage: {}", usage.join(" ")));
        }
        printer.detail(&format!(
            "harness {}, runtime {}, network {}",
            report.harness, report.runtime, report.network
        ));
        if let Some(path) = &report.receipt {
            printer.detail(&format!("receipt: {}", path.display()));
        }
    }
    Ok(match outcome.kind {
        OutcomeCode::DONE => Exit::Success,
        // The agent ran and did not do the work: the work's failure, not a bug.
        OutcomeCode::FAILED | OutcomeCode::OUT_OF_SHAPE | OutcomeCode::RESOURCE_LIMIT => {
            Exit::GaveUp
        }
        _ => Exit::Unusable,
    })
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Implement => "implement",
        Role::Review => "review",
        Role::Proof => "proof",
    }
}

/// What one call was, for its receipt.
struct Call<'a> {
    id: String,
    log: std::path::PathBuf,
    role: &'static str,
    network: &'a str,
    started: u64,
    ended: u64,
    commit_before: String,
    commit_after: String,
    /// Profile files the harness carried back.
    carried: Vec<String>,
}

fn record_receipt(
    repo: &std::path::Path,
    harness: &harness::OpenHarness,
    runtime: &sandbox::OpenRuntime,
    settings: &Settings,
    call: Call<'_>,
    output: &harness::LaunchOutput,
    outcome: &stet_plugin_api::CallOutcome,
) -> Result<std::path::PathBuf, CliError> {
    let runtime_record =
        receipts::PluginRecord::of(&runtime.name, &runtime.version, &runtime.library);
    let harness_record =
        receipts::PluginRecord::of(&harness.name, &harness.version, &harness.library);
    let call_context = receipts::CallContext {
        round: None,
        id: call.id,
        run: format!("ask-{}", std::process::id()),
        item: String::new(),
        lane: String::new(),
        role: call.role,
        runtime: &runtime_record,
        runtime_reason: &runtime.selection.reason,
        harness: &harness_record,
        image: &settings.image,
        network: call.network.to_string(),
        limits: settings.limits.describe(),
        started_unix_ms: call.started,
        ended_unix_ms: call.ended,
        commit_before: call.commit_before,
        commit_after: call.commit_after,
        log: call.log,
    };
    let mut end = harness::call_end(output, outcome);
    end.profile_carried = call.carried;
    receipts::record_end(repo, call_context, end)
        .map_err(|e| CliError::failure(format!("cannot record the receipt: {e}")))
}
