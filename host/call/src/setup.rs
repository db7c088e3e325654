//! A lane's setup (`[lane] setup`): its commands run once per clone and seed key, in a
//! sandbox made from the base commit — never from what an agent wrote — with the
//! repository's image, stet's proxy for the hosts the setup names and nothing else; what
//! it fills is kept as the seed every lane starts from (`stet-records`' `seeds.rs`).
//!
//! Only a person's own file or a trusted `stet.toml` names a setup (`settings.rs`): its
//! commands run with network, and what they make is in every lane.

use std::path::{Path, PathBuf};
use std::time::Duration;

use stet_plugin_api::{Network, ProcessSpec, ROption, RVec};

use crate::error::{Concept, Error};
use crate::lanes;
use crate::network::WalledSandbox;
use crate::sandbox::{self, LaneAccess, LaneMounts, OpenRuntime, Plan};
use crate::seeds::{self, Seed};
use crate::settings::Settings;

/// How long a setup may take, all its commands together, unless the caller says.
pub const DEFAULT_LIMIT: Duration = Duration::from_secs(60 * 60);

/// What [`ensure`] found or did.
#[derive(Debug, Clone)]
pub struct Seeded {
    /// The seed.
    pub seed: Seed,
    /// Whether this call built it (else it was kept from before).
    pub built: bool,
    /// The setup's output log, when this call built it.
    pub log: Option<PathBuf>,
    /// The setup's receipt (role `setup`), when this call built it.
    pub receipt: Option<String>,
    /// The hosts the proxy refused the setup, with how often.
    pub refused: Vec<(String, u64)>,
}

/// Where a person watches a setup: its output, made inert, on stderr as it comes; nothing
/// when `shown` is false (`--json`, a drive without `--follow`: the log has it all).
pub fn echo_to_stderr(shown: bool) -> impl FnMut(&[u8]) + Send {
    let mut pending = Vec::new();
    move |bytes: &[u8]| {
        if shown {
            let text = crate::text::inert_bytes(&mut pending, bytes);
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), text.as_bytes());
        }
    }
}

/// The key of the seed `settings`' setup makes on `base` (a commit or ref of `repo`);
/// `None` without a setup. Refuses a setup whose outputs the base tracks.
pub fn key_of(repo: &Path, settings: &Settings, base: &str) -> Result<Option<String>, Error> {
    let Some(setup) = &settings.setup else {
        return Ok(None);
    };
    let git_failed = |e: crate::git::GitError| {
        Concept::Setup
            .failure(format!("cannot read the base {base} for the setup"))
            .caused_by(e.to_string())
    };
    let tracked = seeds::tracked_outputs(repo, setup, base).map_err(git_failed)?;
    if !tracked.is_empty() {
        return Err(Concept::Setup
            .usage(format!(
                "[lane] setup_outputs names {}, which the base tracks; a setup fills only what git leaves alone",
                tracked.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", ")
            ))
            .hint("name the ignored directories the setup fills (target, .venv, node_modules), and list them in .gitignore"));
    }
    seeds::key(repo, setup, &settings.image, base)
        .map(Some)
        .map_err(git_failed)
}

/// The seed for `base`: kept from before when its key is unchanged, else built now by
/// running the setup (its output streamed to `on_output` and kept in its log). `None`
/// without a setup. One stet of a clone builds at a time; another waits, then uses it.
pub fn ensure(
    repo: &Path,
    settings: &Settings,
    runtime: &OpenRuntime,
    base: &str,
    run: &str,
    limit: Duration,
    on_output: &mut (dyn FnMut(&[u8]) + Send),
) -> Result<Option<Seeded>, Error> {
    let Some(key) = key_of(repo, settings, base)? else {
        return Ok(None);
    };
    let kept = |seed| Seeded {
        seed,
        built: false,
        log: None,
        receipt: None,
        refused: Vec::new(),
    };
    if let Some(seed) = seeds::ready(repo, &key) {
        return Ok(Some(kept(seed)));
    }
    let lock = seeds::seeds_dir(repo).join(".building.lock");
    let _building = crate::files::lock_exclusive(&lock)
        .map_err(|e| Concept::Setup.failure(format!("cannot lock {}: {e}", lock.display())))?;
    if let Some(seed) = seeds::ready(repo, &key) {
        return Ok(Some(kept(seed)));
    }
    build(repo, settings, runtime, base, run, &key, limit, on_output).map(Some)
}

/// Runs the setup on a checkout of `base` and keeps what it filled as the seed `key`.
#[allow(clippy::too_many_arguments)]
fn build(
    repo: &Path,
    settings: &Settings,
    runtime: &OpenRuntime,
    base: &str,
    run: &str,
    key: &str,
    limit: Duration,
    on_output: &mut (dyn FnMut(&[u8]) + Send),
) -> Result<Seeded, Error> {
    let setup = settings.setup.clone().unwrap_or_default();
    let failed = |what: &str, e: &dyn std::fmt::Display| {
        Concept::Setup.failure(format!("cannot {what}: {e}"))
    };
    let commit = crate::git::Inert::at(repo)
        .run(&["rev-parse", "--verify", &format!("{base}^{{commit}}")])
        .map_err(|e| failed("read the base", &e))?;
    // Under the lock: what a killed build left is this clone's, and no one else's now.
    let scratch = seeds::seeds_dir(repo).join(".setup");
    if scratch.exists() {
        lanes::delete(&scratch).map_err(|e| failed("remove an earlier setup's checkout", &e))?;
    }
    let lane = lanes::checkout_at(repo, &scratch, &commit)
        .map_err(|e| failed("check the base out for the setup", &e))?;
    let started = crate::timestamp::now_ms();
    let receipt = format!("{started}-setup-{}", &key[..key.len().min(12)]);
    let runtime_record =
        crate::receipts::PluginRecord::of(&runtime.name, &runtime.version, &runtime.library);
    let no_harness = crate::receipts::PluginRecord {
        name: String::new(),
        version: String::new(),
        library_sha256: String::new(),
    };
    let call = crate::receipts::CallContext {
        id: receipt.clone(),
        run: run.to_string(),
        item: String::new(),
        lane: String::new(),
        role: crate::receipts::CallRole::Setup,
        round: None,
        runtime: &runtime_record,
        runtime_reason: &runtime.selection.reason,
        harness: &no_harness,
        image: &settings.image,
        network: crate::network::describe(&network_of(&setup), &settings.network),
        limits: settings.limits.describe(),
        started_unix_ms: started,
        ended_unix_ms: started,
        commit_before: commit.clone(),
        commit_after: commit.clone(),
        log: crate::receipts::log_path(repo, &receipt),
        prompt: None,
    };
    crate::receipts::record_start(repo, &call)
        .map_err(|e| failed("record the setup's receipt", &e))?;
    let ran = run_commands(settings, runtime, &lane, run, &call.log, limit, on_output);
    let result = ran.and_then(|refused| {
        let seed = Seed {
            key: key.to_string(),
            base: commit.clone(),
            commands: setup.commands.clone(),
            image: settings.image.clone(),
            outputs: setup.outputs.clone(),
            bytes: 0,
            entries: 0,
            built_unix_ms: crate::timestamp::now_ms(),
            took_ms: crate::timestamp::now_ms().saturating_sub(started),
        };
        let seed = seeds::keep(
            repo,
            &lane.dir,
            seed,
            seeds::Limit {
                bytes: settings.limits.disk_bytes,
                entries: settings.limits.files,
            },
        )
        .map_err(|e| {
            Concept::Setup
                .usage(format!("the setup's outputs cannot be kept: {e}"))
                .hint("make the setup fill every path [lane] setup_outputs names")
        })?;
        Ok(Seeded {
            seed,
            built: true,
            log: Some(call.log.clone()),
            receipt: Some(receipt.clone()),
            refused,
        })
    });
    let _ = lanes::delete(&scratch);
    end_receipt(repo, call, &result);
    result
}

/// The setup's receipt, ended: passed with the seed it made (its bytes and entries as
/// usage), or failed with why; what the proxy refused it.
fn end_receipt(
    repo: &Path,
    mut call: crate::receipts::CallContext<'_>,
    result: &Result<Seeded, Error>,
) {
    call.ended_unix_ms = crate::timestamp::now_ms();
    let (outcome, detail, usage, blocked) = match result {
        Ok(seeded) => (
            crate::receipts::Outcome::Passed,
            format!(
                "seed {}: {}",
                seeded.seed.key,
                seeded.seed.outputs.join(", ")
            ),
            vec![
                ("seed_bytes".to_string(), seeded.seed.bytes.to_string()),
                ("seed_entries".to_string(), seeded.seed.entries.to_string()),
            ],
            seeded
                .refused
                .iter()
                .map(|(target, count)| crate::receipts::BlockedRecord {
                    target: target.clone(),
                    why: "not in [lane] setup_network".to_string(),
                    count: *count,
                    first_unix_ms: 0,
                })
                .collect(),
        ),
        Err(e) => (
            crate::receipts::Outcome::Failed,
            e.message.clone(),
            Vec::new(),
            Vec::new(),
        ),
    };
    let output_bytes = std::fs::metadata(&call.log).map_or(0, |m| m.len());
    let _ = crate::receipts::record_end(
        repo,
        call,
        crate::receipts::CallEnd {
            outcome,
            detail,
            usage,
            output_bytes,
            network_blocked: blocked,
            ..Default::default()
        },
    );
}

/// The network a setup's sandbox is made with: none, or the hosts it names through the
/// proxy.
fn network_of(setup: &crate::config::Setup) -> Network {
    if setup.network.is_empty() {
        Network::None
    } else {
        Network::AllowHosts(
            setup
                .network
                .iter()
                .map(|h| h.as_str().into())
                .collect::<RVec<_>>(),
        )
    }
}

/// The setup's commands in order, in one sandbox on `lane` (at the setup's path), the
/// first that fails ending it; returns what the proxy refused.
#[allow(clippy::too_many_arguments)]
fn run_commands(
    settings: &Settings,
    runtime: &OpenRuntime,
    lane: &lanes::Lane,
    run: &str,
    log: &Path,
    limit: Duration,
    on_output: &mut (dyn FnMut(&[u8]) + Send),
) -> Result<Vec<(String, u64)>, Error> {
    let setup = settings.setup.clone().unwrap_or_default();
    let network = network_of(&setup);
    let plan = Plan::new("setup", run, seeds::ALIAS).with_lane(
        LaneMounts::of_lane(lane).at_setup_path(lane),
        LaneAccess::ReadWrite,
    );
    let walled = WalledSandbox::make(settings, runtime, &network, Vec::new(), &[], plan)?;
    let mut output = crate::capture::Capture::new(Some(log), 16 * 1024)
        .map_err(|e| Concept::Setup.failure(format!("cannot write {}: {e}", log.display())))?;
    let deadline = std::time::Instant::now() + limit;
    let mut failure = None;
    let mut ended_badly = None;
    for command in &setup.commands {
        let said = format!("$ {command}\n");
        on_output(said.as_bytes());
        output.push(said.as_bytes());
        let process = match walled.sandbox.spawn(ProcessSpec {
            argv: vec!["sh".into(), "-c".into(), command.as_str().into()].into(),
            env: walled.env().into(),
            workdir: ROption::RSome(seeds::ALIAS.into()),
            stdin: Default::default(),
        }) {
            Ok(process) => process,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let watchdog = sandbox::Watchdog::start(&process, left);
        // What the setup writes is held to the disk and files limits, as a call's is.
        let disk = sandbox::DiskWatch::start(
            &process,
            vec![lane.dir.clone()],
            Vec::new(),
            crate::files::Footprint {
                bytes: settings.limits.disk_bytes,
                files: settings.limits.files,
            },
        );
        let status = process.wait(&mut |_, bytes| {
            on_output(bytes);
            output.push(bytes);
        });
        let met = disk.met();
        let ended = match status {
            Ok(_) if met.is_some() => format!(
                "wrote past the {} limit ({}) and was stopped",
                if met == Some(sandbox::DiskMet::Files) {
                    "files"
                } else {
                    "disk"
                },
                if met == Some(sandbox::DiskMet::Files) {
                    settings.limits.files.to_string()
                } else {
                    crate::printer::size(settings.limits.disk_bytes)
                }
            ),
            Ok(status) if status.success() => continue,
            Ok(_) if watchdog.fired() => format!(
                "did not finish within {} and was killed",
                humantime::format_duration(limit)
            ),
            Ok(status) => match (status.code.into_option(), status.signal.into_option()) {
                (Some(code), _) => format!("exited with {code}"),
                (None, Some(signal)) => format!("was ended by signal {signal}"),
                (None, None) => "ended without an exit status".to_string(),
            },
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        ended_badly = Some(format!("the setup command `{command}` {ended}"));
        break;
    }
    let (blocked, _) = walled.finish(None);
    let kept = output.finish().unwrap_or_default();
    if let Some(e) = failure {
        return Err(e);
    }
    if let Some(ended) = ended_badly {
        let kept = String::from_utf8_lossy(&kept);
        let lines: Vec<&str> = kept.lines().collect();
        let tail = lines[lines.len().saturating_sub(12)..].join("\n");
        let mut error = Concept::Setup.usage(ended).hint(format!(
            "fix [lane] setup in stet.toml (its whole output is in {})",
            log.display()
        ));
        if !tail.trim().is_empty() {
            error = error.caused_by(format!("its output ends:\n{}", crate::text::inert(&tail)));
        }
        if !blocked.is_empty() {
            error = error.caused_by(format!(
                "stet's proxy refused it {}; [lane] setup_network lists the hosts a setup may reach",
                blocked.iter().map(|b| b.target.clone()).collect::<Vec<_>>().join(", ")
            ));
        }
        return Err(error);
    }
    Ok(blocked.into_iter().map(|b| (b.target, b.count)).collect())
}
