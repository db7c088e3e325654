//! `stet drive`, first cut: drain the queue, one item at a time, unattended.
//!
//! Preconditions (each refusing before anything is reserved) → the wall proof → consent →
//! for each eligible item, up to the cap: reserve it on the remote, open its lane, then
//! implement (the harness in a fresh sandbox) → check (the configured command, in a
//! sandbox) → review (the judge role: LAND or REVISE, bounded rounds) → land (push the
//! lane's branch, mark the item landed, release the reservation). Every agent call leaves
//! a durable receipt before the next move; each move holds the drain lock.
//!
//! Waits: a usage limit is waited out until its reset (never below `--wait-floor`), the
//! reservation released meanwhile. Signals: the first SIGINT, SIGTERM or SIGHUP is a stop,
//! honoured after the agent call in flight (its receipt recorded, the reservation released,
//! the lane's branch pushed, the exit line naming how to resume); the second kills the
//! call's processes and exits at once, naming when the reservation lapses. Sandboxes a
//! crashed drive left behind are reaped at the start.
//!
//! Outage: a judge failure, or three failures of the implementing agent in a row, enter the
//! outage schedule (`--outage-schedule`, 1m,5m,10m,1h by default, the last repeating); when
//! an outage has lasted `--outage-limit` (8h) the drive stops, handing nothing back: lanes
//! stay on their pushed branches.
//!
//! Not in this cut (see the closing notes of issue 5): pace and remote-unreachable waits,
//! renewing a reservation during a long call, the live progress display and `--follow`,
//! and the command harness.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use stet_plugin_api::{OutcomeKind, ROption, Role, RoleRequest};

use crate::error::{CliError, Exit};
use crate::harness::{self, OpenHarness};
use crate::lanes::{self, Lane};
use crate::printer::Printer;
use crate::queue;
use crate::receipts::{self, PluginRecord};
use crate::reservations::{Remote, Reservation, ReservationError};
use crate::sandbox::{self, OpenRuntime, Sandbox};
use crate::settings::Settings;

/// How a drive runs.
#[derive(Debug, Clone)]
pub struct DriveOptions {
    /// At most this many items are landed.
    pub cap: usize,
    /// Consent given on the command line.
    pub yes: bool,
    /// The remote lanes land on and reservations live on.
    pub remote: String,
    /// How long a reservation lasts without renewal, in seconds.
    pub lease_secs: i64,
    /// Review rounds before an item is given up.
    pub max_rounds: u32,
    /// The repository's check command, run in a sandbox on the lane.
    pub check: Option<String>,
    /// No wait is shorter than this, in seconds.
    pub wait_floor_secs: i64,
    /// The outage schedule: the waits after a judge failure or three runner failures in a
    /// row, in seconds; the last one repeats.
    pub outage_schedule_secs: Vec<i64>,
    /// The drive stops when an outage has lasted this long, in seconds.
    pub outage_limit_secs: i64,
}

/// A progress line on standard error, through the printer.
macro_rules! note {
    ($printer:expr, $($arg:tt)*) => {
        $printer.note(&format!($($arg)*))
    };
}

/// The variable every stet sandbox carries, so a drive started inside one refuses.
pub const IN_SANDBOX: &str = "STET_IN_SANDBOX";

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

struct Drive<'a> {
    repo: PathBuf,
    settings: &'a Settings,
    options: &'a DriveOptions,
    printer: Printer,
    harness: OpenHarness,
    runtime: OpenRuntime,
    profile: stet_plugin_api::Profile,
    profile_dir: String,
    run: String,
    holder: String,
    stop: Arc<AtomicBool>,
    /// The agent process running now, for a second signal to kill.
    in_flight: Arc<harness::InFlight>,
    /// The reservation held now and when it lapses, for the second signal's last words.
    reserved: Arc<std::sync::Mutex<Option<(String, i64)>>>,
    harness_record: PluginRecord,
    runtime_record: PluginRecord,
}

/// An outage in progress: when it began and how far along the schedule it is.
struct Outage {
    started_unix: i64,
    step: u32,
}

/// What became of one item.
enum ItemEnd {
    Landed,
    GaveUp(String),
    Stopped(Lane),
    RateLimited(Option<i64>),
    /// The implementing agent failed (its lane stays; the item is taken again).
    RunnerFailed(String),
    /// The judge failed: the drive enters its outage schedule at once.
    JudgeFailed(String),
}

pub fn run(
    settings: &Settings,
    options: &DriveOptions,
    printer: Printer,
) -> Result<Exit, CliError> {
    // Preconditions, each before anything is reserved.
    if std::env::var_os(IN_SANDBOX).is_some() {
        return Err(
            CliError::usage("stet drive was started inside a stet sandbox")
                .hint("drive from your own shell; an agent never starts a drive"),
        );
    }
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::failure(format!("cannot resolve the current directory: {e}")))?;
    let repo = crate::config::repository_root(&cwd).ok_or_else(|| {
        CliError::usage(format!("{} is not inside a git repository", cwd.display()))
            .hint("cd into the repository whose queue you want drained")
    })?;
    if lanes::git(&repo, &["remote", "get-url", &options.remote]).is_err() {
        return Err(CliError::usage(format!("the repository has no remote named {}", options.remote))
            .hint("lanes land as branches on a remote: add one (git remote add origin URL) or pass --remote"));
    }
    let harness = harness::open_harness(settings)?;
    let proof = harness::prove(settings, &harness, harness::SettingsMode::Rewrite)?;
    if !proof.held() {
        let mut error = CliError::new(
            Exit::Unusable,
            "the walls do not hold; nothing was reserved",
        );
        for w in proof.walls.iter().filter(|w| !w.held) {
            error = error.caused_by(format!("{}: {}", w.wall, w.detail));
        }
        let remedy = proof
            .walls
            .iter()
            .find(|w| !w.held)
            .map(|w| w.remedy.clone())
            .unwrap_or_default();
        return Err(error.hint(remedy));
    }
    let runtime = sandbox::open_runtime(settings)?;
    // What a crashed drive left behind is reaped before anything new starts.
    let reaped = sandbox::reap(&runtime, false)?;
    let reaped = reaped.iter().filter(|v| v.removed).count();
    if reaped > 0 {
        note!(
            printer,
            "reaped {reaped} sandbox(es) a crashed stet left behind"
        );
    }
    let (items, malformed) = queue::read(&repo);
    for m in &malformed {
        printer.warn(&format!("skipped {}: {}", m.path.display(), m.why));
    }
    let remote = Remote {
        repo: &repo,
        name: &options.remote,
    };
    let landed = remote.landed().map_err(remote_error)?;
    let eligible: Vec<&queue::Item> = items.iter().filter(|i| !landed.contains(&i.id)).collect();

    // Consent: once, before anything is reserved.
    let estimate = estimate(&repo, options.cap.min(eligible.len()));
    note!(
        printer,
        "stet drive: up to {} of {} eligible items",
        options.cap,
        eligible.len()
    );
    note!(printer, "  estimate: {estimate}");
    note!(
        printer,
        "  runtime:  {} — {}",
        runtime.name,
        runtime.selection.reason
    );
    note!(
        printer,
        "  harness:  {} — {}",
        harness.name,
        harness.selection.reason
    );
    note!(
        printer,
        "  route:    {}; network {}",
        proof.route,
        proof.network.clone().unwrap_or_default()
    );
    if !options.yes {
        if !std::io::stdin().is_terminal() {
            return Err(
                CliError::usage("no consent: there is no terminal to ask, and no --yes")
                    .hint("pass --yes to drive from a script"),
            );
        }
        eprint!("drive? [y/N] ");
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            note!(printer, "not driving; nothing was reserved");
            return Ok(Exit::Success);
        }
    }

    let stop = Arc::new(AtomicBool::new(false));
    let in_flight: Arc<harness::InFlight> = Arc::new(std::sync::Mutex::new(None));
    let reserved: Arc<std::sync::Mutex<Option<(String, i64)>>> =
        Arc::new(std::sync::Mutex::new(None));
    watch_signals(printer, stop.clone(), in_flight.clone(), reserved.clone())?;
    let run = format!("drive-{}-{}", std::process::id(), now_ms());
    let profile = harness.profile()?;
    let drive = Drive {
        profile,
        holder: format!("{}:{}", sandbox::host_name(), clone_id(&repo)),
        harness_record: PluginRecord::of(&harness.name, &harness.version, &harness.library),
        runtime_record: PluginRecord::of(&runtime.name, &runtime.version, &runtime.library),
        profile_dir: proof.profile.clone(),
        repo: repo.clone(),
        settings,
        options,
        printer,
        harness,
        runtime,
        run,
        stop,
        in_flight,
        reserved,
    };
    drive.drain(eligible)
}

/// The first SIGINT, SIGTERM or SIGHUP asks the drive to stop after the agent call in
/// flight; the second kills that call's processes and exits at once, naming when the
/// reservation lapses (the next drive reaps the sandbox and takes the lane up).
fn watch_signals(
    printer: Printer,
    stop: Arc<AtomicBool>,
    in_flight: Arc<harness::InFlight>,
    reserved: Arc<std::sync::Mutex<Option<(String, i64)>>>,
) -> Result<(), CliError> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|e| CliError::failure(format!("cannot watch for signals: {e}")))?;
    std::thread::spawn(move || {
        for _ in signals.forever() {
            if !stop.swap(true, Ordering::SeqCst) {
                note!(
                    printer,
                    "stopping after the agent call in flight (press again to kill it)"
                );
                continue;
            }
            if let Some(process) = in_flight.lock().unwrap_or_else(|p| p.into_inner()).take() {
                let _ = process.kill();
            }
            let what = match reserved.lock().unwrap_or_else(|p| p.into_inner()).clone() {
                Some((item, lapse)) => format!(
                    "the reservation of {item} lapses at {}",
                    humantime::format_rfc3339_seconds(
                        std::time::UNIX_EPOCH + std::time::Duration::from_secs(lapse.max(0) as u64)
                    )
                ),
                None => "nothing was reserved".to_string(),
            };
            note!(
                printer,
                "killed the agent's processes; {what}; the next stet drive reaps the sandbox and takes the lane up"
            );
            std::process::exit(130);
        }
    });
    Ok(())
}

fn remote_error(e: ReservationError) -> CliError {
    CliError::new(Exit::Unusable, "the remote cannot be reached")
        .caused_by(e.to_string())
        .hint("check the network and the remote; nothing was reserved")
}

/// A stable id for this clone, kept in its git directory.
fn clone_id(repo: &Path) -> String {
    let path = receipts::git_dir(repo).join("stet/clone-id");
    if let Ok(id) = std::fs::read_to_string(&path) {
        return id.trim().to_string();
    }
    let id = format!("{:x}{:x}", now_ms(), std::process::id());
    let _ = receipts::write_durably(&path, id.as_bytes());
    id
}

/// The estimate from past receipts: average cost per landed item.
fn estimate(repo: &Path, items: usize) -> String {
    let (past, _) = receipts::read_all(repo);
    let costs: Vec<f64> = past.iter().filter_map(|r| r.cost_usd).collect();
    let items_seen = past
        .iter()
        .filter(|r| !r.item.is_empty())
        .map(|r| r.item.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    if costs.is_empty() || items_seen == 0 {
        return format!("{items} item(s); no past receipts to estimate cost from");
    }
    let per_item = costs.iter().sum::<f64>() / items_seen as f64;
    format!(
        "{items} item(s) at about ${per_item:.4} each (from {} past receipts), about ${:.4}",
        past.len(),
        per_item * items as f64
    )
}

impl Drive<'_> {
    fn drain(&self, eligible: Vec<&queue::Item>) -> Result<Exit, CliError> {
        let mut landed = 0;
        let mut gave_up: Vec<String> = Vec::new();
        let mut done_here: Vec<String> = Vec::new();
        let mut runner_failures = 0u32;
        let mut outage: Option<Outage> = None;
        // Items are taken in queue order; an item that hit a usage limit is taken again
        // after the wait, one that landed or was given up is not taken again in this run.
        while landed < self.options.cap && !self.stop.load(Ordering::SeqCst) {
            let remote = Remote {
                repo: &self.repo,
                name: &self.options.remote,
            };
            let now = (now_ms() / 1000) as i64;
            let mut claimed = None;
            for item in eligible.iter().filter(|i| !done_here.contains(&i.id)) {
                match remote.take(self.reservation(&item.id, "implement"), now) {
                    Ok(held) => {
                        claimed = Some((*item, held));
                        break;
                    }
                    Err(ReservationError::HeldByOther { holder, .. }) => {
                        self.printer
                            .detail(&format!("{}: reserved by {holder}; skipped", item.id));
                    }
                    Err(ReservationError::Raced { .. }) => {}
                    Err(e) => return Err(remote_error(e)),
                }
            }
            let Some((item, held)) = claimed else {
                break;
            };
            self.hold(Some(&held));
            note!(
                self.printer,
                "{}: reserved; lane {}",
                item.id,
                lanes::branch_of(&item.id)
            );
            let end = self.work(item, &held);
            let current = remote.get(&item.id).ok().flatten();
            self.hold(None);
            // Whatever became of the item, its reservation is released: landed and given-up
            // items are done, a stopped or waiting one goes back to the queue.
            if let Some(h) = &current {
                let _ = remote.release(h);
            }
            let end = end?;
            let failed = match &end {
                ItemEnd::RunnerFailed(why) => {
                    runner_failures += 1;
                    note!(
                        self.printer,
                        "{}: the agent failed ({why}); the lane stays",
                        item.id
                    );
                    runner_failures >= 3
                }
                ItemEnd::JudgeFailed(why) => {
                    note!(self.printer, "{}: the judge failed ({why})", item.id);
                    true
                }
                _ => {
                    runner_failures = 0;
                    outage = None;
                    false
                }
            };
            if failed {
                runner_failures = 0;
                let state = outage.get_or_insert_with(|| Outage {
                    started_unix: (now_ms() / 1000) as i64,
                    step: 0,
                });
                let now = (now_ms() / 1000) as i64;
                if now - state.started_unix >= self.options.outage_limit_secs {
                    note!(
                        self.printer,
                        "outage for {}: the drive stops; nothing was handed back, the lanes stay on their branches",
                        humantime::format_duration(std::time::Duration::from_secs((now - state.started_unix) as u64))
                    );
                    return Ok(Exit::Unusable);
                }
                let schedule = &self.options.outage_schedule_secs;
                let wait = schedule[(state.step as usize).min(schedule.len() - 1)];
                state.step += 1;
                note!(
                    self.printer,
                    "outage: waiting {} before trying again",
                    humantime::format_duration(std::time::Duration::from_secs(wait as u64))
                );
                if !self.sleep_until(now + wait) {
                    note!(
                        self.printer,
                        "stopped during the outage: run {}; resume with: stet drive",
                        self.run
                    );
                    return Ok(Exit::Success);
                }
                continue;
            }
            match end {
                ItemEnd::RunnerFailed(_) | ItemEnd::JudgeFailed(_) => {}
                ItemEnd::Landed => {
                    landed += 1;
                    done_here.push(item.id.clone());
                    note!(
                        self.printer,
                        "{}: landed on {} as {}",
                        item.id,
                        self.options.remote,
                        lanes::branch_of(&item.id)
                    );
                }
                ItemEnd::GaveUp(why) => {
                    note!(self.printer, "{}: given up: {why}", item.id);
                    done_here.push(item.id.clone());
                    gave_up.push(item.id.clone());
                }
                ItemEnd::Stopped(lane) => {
                    note!(
                        self.printer,
                        "stopped: run {}, lane {} (pushed, reservation released); resume with: stet drive",
                        self.run,
                        lane.branch
                    );
                    return Ok(Exit::Success);
                }
                ItemEnd::RateLimited(until) => {
                    let floor = self.options.wait_floor_secs;
                    let now = (now_ms() / 1000) as i64;
                    let wake = until.unwrap_or(now).max(now + floor);
                    note!(
                        self.printer,
                        "{}: the agent hit its usage limit; waiting until {} (reservation released)",
                        item.id,
                        humantime::format_rfc3339_seconds(
                            std::time::UNIX_EPOCH + std::time::Duration::from_secs(wake.max(0) as u64)
                        )
                    );
                    if !self.sleep_until(wake) {
                        note!(
                            self.printer,
                            "stopped during the wait: run {}; resume with: stet drive",
                            self.run
                        );
                        return Ok(Exit::Success);
                    }
                }
            }
        }
        note!(
            self.printer,
            "drive {}: landed {landed}{}",
            self.run,
            if gave_up.is_empty() {
                String::new()
            } else {
                format!(", gave up on {}", gave_up.join(", "))
            }
        );
        Ok(if gave_up.is_empty() {
            Exit::Success
        } else {
            Exit::Failure
        })
    }

    /// Remembers the reservation held now, for the second signal's last words.
    fn hold(&self, held: Option<&crate::reservations::Held>) {
        *self.reserved.lock().unwrap_or_else(|p| p.into_inner()) =
            held.map(|h| (h.reservation.item.clone(), h.reservation.expires_at_unix));
    }

    /// Sleeps until `wake` (seconds since the epoch), waking early for a stop; returns
    /// whether the whole wait passed.
    fn sleep_until(&self, wake: i64) -> bool {
        while (now_ms() / 1000) as i64 <= wake {
            if self.stop.load(Ordering::SeqCst) {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        !self.stop.load(Ordering::SeqCst)
    }

    fn reservation(&self, item: &str, stage: &str) -> Reservation {
        Reservation {
            item: item.to_string(),
            holder: self.holder.clone(),
            lane: lanes::branch_of(item),
            stage: stage.to_string(),
            expires_at_unix: (now_ms() / 1000) as i64 + self.options.lease_secs,
        }
    }

    /// The drain lock, held for one move.
    fn lock(&self) -> Result<nix::fcntl::Flock<std::fs::File>, CliError> {
        let path = receipts::git_dir(&self.repo).join("stet/drain.lock");
        let _ = std::fs::create_dir_all(path.parent().expect("in .git/stet"));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| CliError::failure(format!("cannot open {}: {e}", path.display())))?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| CliError::failure(format!("cannot take the drain lock: {e}")))
    }

    fn work(
        &self,
        item: &queue::Item,
        held: &crate::reservations::Held,
    ) -> Result<ItemEnd, CliError> {
        let lane = {
            let _lock = self.lock()?;
            lanes::open(&self.repo, &self.options.remote, &item.id, "HEAD").map_err(|e| {
                CliError::failure(format!("cannot open the lane of {}", item.id))
                    .caused_by(e.to_string())
            })?
        };
        let base = lane.head().unwrap_or_default();
        let mut feedback: Option<String> = None;
        let mut held = held.clone();
        for round in 1..=self.options.max_rounds {
            // implement
            let prompt = implement_prompt(item, feedback.as_deref());
            let outcome = self.agent_call(item, &lane, Role::Implement, &prompt)?;
            {
                let _lock = self.lock()?;
                let _ = lane.commit_all(&format!("stet: {} (round {round})", item.title));
                let _ = lane.push(&self.repo, &self.options.remote);
            }
            match outcome.0 {
                OutcomeKind::Done => {}
                OutcomeKind::RateLimited => return Ok(ItemEnd::RateLimited(outcome.2)),
                _ => return Ok(ItemEnd::RunnerFailed(format!("implement: {}", outcome.1))),
            }
            if self.stop.load(Ordering::SeqCst) {
                return Ok(ItemEnd::Stopped(lane));
            }
            held = self.renew(&held, &item.id, "check")?;
            // check
            if let Some(check) = &self.options.check {
                let (passed, output) = self.check(&lane, check)?;
                if !passed {
                    feedback = Some(format!("The check `{check}` failed:\n{output}"));
                    continue;
                }
            }
            held = self.renew(&held, &item.id, "review")?;
            // review
            let outcome =
                self.agent_call(item, &lane, Role::Review, &review_prompt(item, &base))?;
            match outcome.0 {
                OutcomeKind::Done => {}
                OutcomeKind::RateLimited => return Ok(ItemEnd::RateLimited(outcome.2)),
                _ => return Ok(ItemEnd::JudgeFailed(format!("review: {}", outcome.1))),
            }
            let verdict = outcome.1.trim().to_string();
            if verdict.to_ascii_uppercase().starts_with("LAND") {
                let _lock = self.lock()?;
                lane.push(&self.repo, &self.options.remote).map_err(|e| {
                    CliError::failure(format!("cannot land {}", item.id)).caused_by(e.to_string())
                })?;
                let remote = Remote {
                    repo: &self.repo,
                    name: &self.options.remote,
                };
                remote
                    .mark_landed(
                        &item.id,
                        &format!("landed {} by run {}", lane.branch, self.run),
                    )
                    .map_err(remote_error)?;
                lane.remove();
                return Ok(ItemEnd::Landed);
            }
            feedback = Some(format!("The reviewer asked for changes:\n{verdict}"));
            if self.stop.load(Ordering::SeqCst) {
                return Ok(ItemEnd::Stopped(lane));
            }
        }
        Ok(ItemEnd::GaveUp(format!(
            "not landed after {} rounds",
            self.options.max_rounds
        )))
    }

    fn renew(
        &self,
        held: &crate::reservations::Held,
        item: &str,
        stage: &str,
    ) -> Result<crate::reservations::Held, CliError> {
        let remote = Remote {
            repo: &self.repo,
            name: &self.options.remote,
        };
        remote
            .renew(held, self.reservation(item, stage))
            .map_err(|e| {
                CliError::failure(format!("lost the reservation of {item}"))
                    .caused_by(e.to_string())
                    .hint(
                        "another drive took it over after it lapsed; this one stops working on it",
                    )
            })
    }

    /// One agent call, with its receipt recorded before anything else happens.
    fn agent_call(
        &self,
        item: &queue::Item,
        lane: &Lane,
        role: Role,
        prompt: &str,
    ) -> Result<(OutcomeKind, String, Option<i64>), CliError> {
        let role_word = match role {
            Role::Implement => "implement",
            Role::Review => "review",
            Role::Proof => "proof",
        };
        note!(self.printer, "{}: {role_word}", item.id);
        // The walled settings must still be exactly what the drive wrote at its start.
        if let Some(w) = self
            .harness
            .check_walls(&self.profile)?
            .into_iter()
            .find(|w| w.wall.as_str() == "settings-exact" && !w.held)
        {
            return Err(CliError::new(Exit::Unusable, "the walled settings changed during the drive; it stops")
                .caused_by(w.detail.to_string())
                .hint("do not edit the profile's settings while a drive runs; start the drive again to rewrite them"));
        }
        let launch = self.harness.launch(RoleRequest {
            role,
            prompt: prompt.into(),
            profile_dir: self.profile_dir.clone().into(),
            workdir: lane.dir.display().to_string().into(),
        })?;
        let commit_before = lane.head().unwrap_or_default();
        let started = now_ms();
        let (output, network) = harness::run_launch(
            self.settings,
            &self.runtime,
            &launch,
            &lane.dir,
            role_word,
            Some(&self.in_flight),
        )?;
        let ended = now_ms();
        let outcome = self
            .harness
            .read_outcome(role, &output.stdout, output.status)?;
        harness::record_call(
            &self.repo,
            harness::CallContext {
                id: format!("{started}-{}-{role_word}", item.id),
                run: self.run.clone(),
                item: item.id.clone(),
                lane: lane.branch.clone(),
                role: role_word,
                runtime: &self.runtime_record,
                runtime_reason: &self.runtime.selection.reason,
                harness: &self.harness_record,
                image: &self.settings.image,
                network,
                started_unix_ms: started,
                ended_unix_ms: ended,
                commit_before,
                commit_after: lane.head().unwrap_or_default(),
            },
            &output,
            &outcome,
        )?;
        Ok((
            outcome.kind,
            outcome.detail.to_string(),
            outcome.retry_at_unix.into_option(),
        ))
    }

    /// The repository's check command in a fresh sandbox on the lane: passed, and output.
    fn check(&self, lane: &Lane, command: &str) -> Result<(bool, String), CliError> {
        note!(self.printer, "{}: check", lane.item);
        let dir = lane.dir.display().to_string();
        let mut labels = sandbox::ownership_labels(&self.run);
        labels.push(stet_plugin_api::Label::new("stet.kind", "check"));
        let spec = stet_plugin_api::SandboxSpec {
            image: self.settings.image.clone().into(),
            mounts: vec![stet_plugin_api::Mount {
                source: dir.clone().into(),
                target: dir.clone().into(),
                writable: true,
            }]
            .into(),
            env: sandbox::base_env().into(),
            workdir: dir.into(),
            network: stet_plugin_api::Network::None,
            limits: Default::default(),
            labels: labels.into(),
            user: ROption::RSome(stet_plugin_api::UserIds {
                uid: nix::unistd::getuid().as_raw(),
                gid: nix::unistd::getgid().as_raw(),
            }),
        };
        let sandbox = Sandbox::create(&self.runtime, spec)?;
        let process = sandbox.spawn(stet_plugin_api::ProcessSpec {
            argv: vec!["sh".into(), "-c".into(), command.into()].into(),
            env: Default::default(),
            workdir: ROption::RNone,
            stdin: Default::default(),
        })?;
        let mut output = Vec::new();
        let status = process.wait(&mut |_, bytes| {
            // Only the tail matters for the agent; keep memory bounded.
            output.extend_from_slice(bytes);
            if output.len() > 64 * 1024 {
                output.drain(..output.len() - 64 * 1024);
            }
        })?;
        Ok((
            status.success(),
            String::from_utf8_lossy(&output).into_owned(),
        ))
    }
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
