//! `stet drive`: drain the queue, one lane at a time, unattended.
//!
//! Preconditions (each refusing before anything is reserved) → the wall proof → consent →
//! then the loop (`drain.rs`): for each eligible item, up to the cap, reserve it on the
//! remote, open its lane, and work its stages (`lane.rs`): implement (the harness in a
//! fresh sandbox) → check (the configured command, in a sandbox) → review (the judge role:
//! LAND or REVISE, bounded rounds) → land (push the lane's branch, run the configured land
//! command, mark the item landed, release the reservation). Every agent call leaves a
//! receipt durable before it starts (`running`) and again before the next move; each move
//! holds the drain lock; the reservation is renewed while the lane is worked (`keeper.rs`).
//!
//! Waits named by a move — the pace between launches, a usage limit's reset, an unreachable
//! remote — are slept to the earliest time named, never below `--wait-floor`; a usage
//! limit that resets later than `--outage-limit` from now stops the drive instead, and so
//! does a login the model API refuses (log in again). What an agent answers, in whatever
//! shape, is its item's round, never an outage. Outage: three calls in a row that could not
//! be made (the sandbox, the harness, the model API not answering) enter the outage
//! schedule (1m,5m,10m,1h by default, the last repeating); when an outage has lasted
//! `--outage-limit` (8h) the drive stops, handing nothing back: lanes stay on their pushed
//! branches. Signals (`signals.rs`), watched from the first instant: while the drive starts
//! the first SIGINT, SIGTERM or SIGHUP ends it at once; once it drains, the first is a
//! stop honoured after the agent call in flight (host git already running on a lane gets
//! 3 s more) and the second kills the call's processes and every host git's process group
//! and exits at once, naming when the reservation lapses — either way leaving no sandbox
//! or temporary directory of its own. Sandboxes, temporary directories and running
//! receipts a killed drive left behind are reaped and marked interrupted at the start.
//!
//! What the person sees while it runs is `progress.rs`.

mod ahead;
pub mod consent;
mod drain;
mod keeper;
mod lane;
pub mod live;
mod plan;
mod progress;
#[cfg(test)]
mod scenarios;
mod signals;
mod state;
mod time;
mod worker;

pub use consent::Consent;
pub use progress::clock;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use time::Stop;
pub use time::{Clock, SystemClock};

use crate::error::{Concept, Error};
use crate::harness::{self, OpenHarness};
use crate::lanes;
use crate::printer::Printer;
use crate::queue;
use crate::receipts::{self, PluginRecord};
use crate::reservations::{Remote, ReservationError};
use crate::sandbox::{self, OpenRuntime};
use crate::settings::Settings;
use crate::walls;

/// How a drive ended (the CLI's exit code follows from it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Every item taken landed (or there was nothing to take).
    Done,
    /// The work ran and some items were given up (each marked failed on the remote), or
    /// landed without their land step (a pull request not opened: `stet land ID`).
    GaveUp,
    /// The drive could not go on: an outage or an unreachable remote past its limit, a
    /// usage limit that resets too far away, walls that stopped holding.
    Unusable,
    /// A signal stopped it (its number).
    Stopped(i32),
}

/// How a drive runs.
#[derive(Debug, Clone)]
pub struct DriveOptions {
    /// At most this many items are landed.
    pub cap: usize,
    /// How many items are worked at once, each in its own lane.
    pub jobs: usize,
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
    /// The outage schedule: the waits after three calls in a row that could not be made, in
    /// seconds; the last one repeats.
    pub outage_schedule_secs: Vec<i64>,
    /// The drive stops when an outage has lasted this long, in seconds.
    pub outage_limit_secs: i64,
    /// At least this long between two agent launches, in seconds (0: no pace).
    pub pace_secs: i64,
    /// An agent call (or a check) that has run this long is killed, in seconds.
    pub call_limit_secs: u64,
    /// Stream the agent's output to standard error.
    pub follow: bool,
    /// What runs on the host after a lane's branch is pushed: a pull request opened with
    /// `gh`, or the person's land command.
    pub land: Option<crate::land::How>,
    /// `--dry-run`: say what would be taken (as JSON when `Json`), reserve nothing.
    pub dry_run: Option<DryRun>,
}

/// How a drive asks the person's consent, once, before anything is reserved: the command
/// line's (`--yes`), the board's (`consent.rs`: a file and its FIFO) or a terminal's; the
/// drive itself asks no question. `Ok(false)`: not given, the drive ends doing nothing.
pub type AskConsent<'a> = &'a dyn Fn(&Consent) -> Result<bool, Error>;

/// How `stet drive --dry-run` says what it would do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DryRun {
    Lines,
    Json,
}

/// A line in the drive's log, through its display (or a printer, before it exists).
macro_rules! note {
    ($to:expr, $($arg:tt)*) => {
        $to.note(&format!($($arg)*))
    };
}
pub(crate) use note;

pub use crate::sandbox::IN_SANDBOX;

impl Drive<'_> {
    /// Gives `lane` the drive's seed (`[lane] setup`), laid into its working tree now,
    /// unless it was given one when it was made: an item keeps the seed it started from.
    fn give_seed(&self, lane: &lanes::Lane) -> Result<(), Error> {
        let (Some(seed), Some(root)) = (&self.seed, lane.dir.parent()) else {
            return Ok(());
        };
        if crate::seeds::given(root).is_some() {
            return Ok(());
        }
        let failed = |e: String| {
            Concept::Setup
                .failure(format!("cannot give the lane {} its seed", lane.branch))
                .caused_by(e)
        };
        crate::seeds::give(root, seed).map_err(|e| failed(e.to_string()))?;
        lane.restore().map_err(|e| failed(e.to_string()))
    }

    /// What a new lane's own file system holds beyond its checkout: the limits, and room
    /// for its copy of the seed (its bytes, and a block for each entry), which is the
    /// lane's start and no part of what the agent may write.
    fn lane_bounds(&self) -> Option<lanes::disk::Bounds> {
        let bounds = lanes::disk::bounds(self.settings)?;
        Some(match &self.seed {
            Some(seed) => lanes::disk::Bounds {
                bytes: bounds
                    .bytes
                    .saturating_add(seed.bytes)
                    .saturating_add(seed.entries.saturating_mul(4096)),
                files: bounds.files.saturating_add(seed.entries),
            },
            None => bounds,
        })
    }

    /// The lock on the walled profile every lane copies (see `profile_lock`).
    fn lock_profile(&self) -> std::sync::MutexGuard<'_, u64> {
        self.profile_lock.lock().unwrap_or_else(|p| p.into_inner())
    }
}

struct Drive<'a> {
    repo: PathBuf,
    /// Where every lane branches from: the remote's base as the drive fetched it at its
    /// start (`base.rs`), never the local HEAD.
    base: crate::base::Base,
    settings: &'a Settings,
    options: &'a DriveOptions,
    /// Shared with the stop signals, which speak through it too.
    progress: Arc<progress::Progress>,
    /// Items the drive means to take: the cap, or fewer when fewer are eligible.
    planned: usize,
    /// When the drain began (the drive's clock), for the overall line's pace.
    began: std::sync::atomic::AtomicI64,
    harness: OpenHarness,
    runtime: Arc<OpenRuntime>,
    profile: stet_plugin_api::Profile,
    /// What every lane starts from (`[lane] setup`), when the repository has a setup.
    seed: Option<crate::seeds::Seed>,
    run: String,
    holder: String,
    /// A stop asked by a signal; every wait wakes for it.
    stop: Arc<Stop>,
    /// What every now and every wait of the loop is measured by.
    clock: Arc<dyn Clock>,
    /// What each lane holds alone (`--jobs` of them).
    slots: Vec<Slot>,
    /// What the lanes share: what became of the items, the waits that hold them all.
    tally: std::sync::Mutex<state::Tally>,
    /// Held while a call's copy of the walled profile is made or settled back, and while
    /// the login is renewed: lanes share the one profile. It counts the settles that
    /// carried something back, so that a copy made before one is known to be stale.
    profile_lock: std::sync::Mutex<u64>,
    harness_record: PluginRecord,
    runtime_record: PluginRecord,
    /// Whom the lanes' commits are by: the person, by their repository's git identity
    /// (stet is the committer); `None` when they have none, and stet authors them.
    author: Option<crate::git::Person>,
    /// Moves made so far, over all lanes (each stage of a lane is one).
    moves: std::sync::atomic::AtomicU64,
    /// When the last agent was launched (or will be, after its pace), for the pace.
    last_launch: std::sync::Mutex<Option<i64>>,
}

/// What one lane of a drive holds alone.
struct Slot {
    /// Its reservation, renewed while its lane is worked.
    keeper: keeper::Keeper,
    /// Its agent process running now, for a second signal to kill.
    in_flight: Arc<harness::InFlight>,
}

impl Slot {
    fn start(repo: &Path, options: &DriveOptions, clock: &Arc<dyn Clock>) -> Slot {
        Slot {
            keeper: keeper::Keeper::start(
                repo.to_path_buf(),
                options.remote.clone(),
                options.lease_secs,
                clock.clone(),
            ),
            in_flight: Arc::new(std::sync::Mutex::new(None)),
        }
    }
}

pub fn run(
    settings: &Settings,
    options: &DriveOptions,
    ask: AskConsent<'_>,
    printer: Printer,
) -> Result<Ended, Error> {
    let repo = repository_to_drive(options)?;
    // Held for the whole drive: `stet log -f` waits for an item's first call while some
    // drive runs on this clone, and no longer.
    let _driving = crate::files::lock_shared(&driving_lock(&repo)).map_err(|e| {
        Concept::Drive.failure(format!(
            "cannot take {}: {e}",
            driving_lock(&repo).display()
        ))
    })?;
    // What every now and every wait of the drive is measured by, from here on.
    let clock: Arc<dyn Clock> = Arc::new(time::SystemClock);
    // Watched from here on: a stop at any instant leaves nothing of this drive behind.
    let signals = signals::Signals::watch(repo.clone(), printer, clock.clone())?;
    // Said at once: the proof takes seconds, and a silent start looks hung.
    if options.dry_run.is_none() {
        note!(
            printer,
            "stet drive: proving the walls (a short walled agent call in a sandbox) before anything is reserved"
        );
    }
    // Lanes branch from the remote's base as fetched now, and the queue is read from it:
    // what this clone alone has is not the work every clone drains.
    let base = fetch_base(&repo, &options.remote, printer)?;
    let proving = std::time::Instant::now();
    // One survey for both; the walls are proven on the very runtime instance the drive
    // then uses.
    let (harness, runtime) = harness::open_with_runtime(settings)?;
    let runtime = Arc::new(runtime);
    signals.runtime_opened(runtime.clone());
    let dry_run = options.dry_run;
    reap_leftovers(&runtime, dry_run.is_some(), printer)?;
    image_holds(settings, options, &harness, &runtime)?;
    if let Some(how) = dry_run {
        let json = how == DryRun::Json;
        plan::show(
            settings,
            options,
            &repo,
            &base,
            &harness,
            &runtime,
            clock.now(),
            json,
            printer,
        )?;
        return Ok(Ended::Done);
    }
    let proof = prove_waiting(
        settings, options, &repo, &harness, &runtime, &clock, printer,
    )?;
    walls_hold(&proof)?;
    let proven_in = proving.elapsed();
    settle_interrupted(&repo, printer)?;
    let Queue {
        items,
        eligible,
        held_elsewhere,
    } = queue_to_drain(&repo, &base, options, clock.now(), printer)?;

    // Consent: once, before anything is reserved.
    let consent = consent_of(
        ConsentFacts {
            repo: &repo,
            settings,
            options,
            eligible,
            held_elsewhere,
            proof: &proof,
            proven_in,
            base: &base,
        },
        &harness,
        &runtime,
    );
    for line in consent.lines() {
        note!(printer, "{line}");
    }
    if !ask(&consent)? {
        note!(printer, "not driving; nothing was reserved");
        return Ok(Ended::Done);
    }
    let seed = seed_of(
        settings,
        options,
        (&repo, &base),
        &runtime,
        clock.now_ms(),
        printer,
    )?;

    drain_consented(
        Consented {
            repo,
            base,
            seed,
            harness,
            runtime,
            eligible,
            clock,
            signals,
        },
        settings,
        options,
        &items,
        printer,
    )
}

/// What a drive holds once its walls are proven and the person has consented.
struct Consented {
    repo: PathBuf,
    base: crate::base::Base,
    seed: Option<crate::seeds::Seed>,
    harness: harness::OpenHarness,
    runtime: Arc<OpenRuntime>,
    /// How many of the queue's items it may take.
    eligible: usize,
    clock: Arc<dyn Clock>,
    signals: Arc<signals::Signals>,
}

/// Opens the lanes and drains `items`, then ends the display and the keepers.
fn drain_consented(
    consented: Consented,
    settings: &Settings,
    options: &DriveOptions,
    items: &[queue::Entry],
    printer: Printer,
) -> Result<Ended, Error> {
    let Consented {
        repo,
        base,
        seed,
        harness,
        runtime,
        eligible,
        clock,
        signals,
    } = consented;
    let stop = signals.stop();
    let slots: Vec<Slot> = (0..options.jobs)
        .map(|_| Slot::start(&repo, options, &clock))
        .collect();
    let live = std::io::stderr().is_terminal();
    let run = format!("drive-{}-{}", std::process::id(), clock.now_ms());
    let progress = Arc::new(
        progress::Progress::new(printer, live && !printer.quiet, options.jobs).publishing(
            live::Publisher::start(&repo, &run, options.jobs, clock.clone()),
        ),
    );
    signals.draining(
        slots
            .iter()
            .map(|s| (s.in_flight.clone(), s.keeper.clone()))
            .collect(),
        progress.clone(),
    );
    let profile = harness.profile()?;
    let author = crate::git::Person::of_repository(&repo);
    if author.is_none() {
        note!(
            printer,
            "the repository has no git identity (user.name, user.email): the lanes' commits are authored by stet"
        );
    }
    let drive = Drive {
        base,
        seed,
        profile,
        author,
        holder: holder(&repo),
        harness_record: PluginRecord::of(&harness.name, &harness.version, &harness.library),
        runtime_record: PluginRecord::of(&runtime.name, &runtime.version, &runtime.library),
        repo: repo.clone(),
        settings,
        options,
        progress,
        planned: options.cap.min(eligible),
        began: Default::default(),
        harness,
        runtime,
        run,
        stop,
        clock,
        slots,
        tally: Default::default(),
        profile_lock: Default::default(),
        moves: Default::default(),
        last_launch: Default::default(),
    };
    let exit = drive.drain(items);
    drive.progress.finish();
    for slot in &drive.slots {
        slot.keeper.finish();
    }
    exit
}

/// The seed every lane starts from, built now when the base's is missing (before anything
/// is reserved: a setup that fails refuses the drive); `None` without a setup.
fn seed_of(
    settings: &Settings,
    options: &DriveOptions,
    (repo, base): (&Path, &crate::base::Base),
    runtime: &OpenRuntime,
    now_ms: u64,
    printer: Printer,
) -> Result<Option<crate::seeds::Seed>, Error> {
    if settings.setup.is_none() {
        return Ok(None);
    }
    let ready = crate::setup::key_of(repo, settings, &base.commit)?
        .and_then(|key| crate::seeds::ready(repo, &key));
    if let Some(seed) = ready {
        note!(
            printer,
            "lanes start from seed {} ({})",
            seed.key,
            seed.outputs.join(", ")
        );
        return Ok(Some(seed));
    }
    note!(
        printer,
        "setting up: [lane] setup runs once on {} (its seed is every lane's start){}",
        base.name,
        if options.follow {
            ""
        } else {
            "; its output is in .git/stet/seeds/"
        }
    );
    let mut echo = crate::setup::echo_to_stderr(options.follow);
    let run = format!("setup-{}-{now_ms}", std::process::id());
    let limit = std::time::Duration::from_secs(options.call_limit_secs);
    let seeded = crate::setup::ensure(
        repo,
        settings,
        runtime,
        &base.commit,
        &run,
        limit,
        &mut echo,
    )?;
    Ok(seeded.map(|seeded| {
        let seed = seeded.seed;
        note!(
            printer,
            "seed {} {} in {:.1} s: {} ({})",
            seed.key,
            if seeded.built { "built" } else { "ready" },
            seed.took_ms as f64 / 1000.0,
            seed.outputs.join(", "),
            crate::printer::size(seed.bytes)
        );
        seed
    }))
}

/// The repository a drive in the current directory drains, once every precondition that
/// needs no plugin holds: not inside a sandbox, inside a git repository, with the remote.
fn repository_to_drive(options: &DriveOptions) -> Result<PathBuf, Error> {
    if std::env::var_os(IN_SANDBOX).is_some() {
        return Err(Concept::Drive
            .usage("stet drive was started inside a stet sandbox")
            .hint("drive from your own shell; an agent never starts a drive"));
    }
    let cwd = std::env::current_dir().map_err(|e| {
        Concept::Drive.failure(format!("cannot resolve the current directory: {e}"))
    })?;
    let repo = crate::config::repository_root(&cwd).ok_or_else(|| {
        Concept::Drive
            .usage(format!("{} is not inside a git repository", cwd.display()))
            .hint("cd into the repository whose queue you want drained")
    })?;
    if lanes::git(&repo, &["remote", "get-url", &options.remote]).is_err() {
        return Err(Concept::Drive.usage(format!("the repository has no remote named {}", options.remote))
            .hint("lanes land as branches on a remote: add one (git remote add origin URL) or pass --remote"));
    }
    Ok(repo)
}

/// What a crashed or stopped stet left behind is reaped before anything new starts (the
/// image's look and the wall proof make sandboxes too); a dry run removes nothing.
fn reap_leftovers(runtime: &OpenRuntime, dry_run: bool, printer: Printer) -> Result<(), Error> {
    let reaped = sandbox::reap(runtime, dry_run)?;
    let reaped = reaped.iter().filter(|v| v.removed).count();
    if reaped > 0 {
        note!(
            printer,
            "reaped {} a crashed stet left behind",
            crate::printer::count(reaped, "sandbox", "sandboxes")
        );
    }
    let temps = sandbox::leftovers::reap_dead_temp_dirs(dry_run);
    if !temps.is_empty() && !dry_run {
        note!(
            printer,
            "removed {} a stopped stet left behind ({})",
            crate::printer::count(temps.len(), "temporary directory", "temporary directories"),
            crate::printer::size(temps.iter().map(|t| t.bytes).sum())
        );
    }
    Ok(())
}

/// Refuses a drive whose walls do not hold, or could not be proven, naming each that did
/// not and the first one's remedy.
fn walls_hold(proof: &walls::Proof) -> Result<(), Error> {
    if proof.held() {
        return Ok(());
    }
    let mut error = Concept::Drive.unusable(if walls::only_unproven(proof) {
        "the walls could not be proven; nothing was reserved"
    } else {
        "the walls do not hold; nothing was reserved"
    });
    for w in proof.walls.iter().filter(|w| !w.held) {
        error = error.caused_by(format!("{}: {}", w.wall, w.detail));
    }
    let remedy = proof
        .walls
        .iter()
        .find(|w| !w.held)
        .map(|w| w.remedy.clone())
        .unwrap_or_default();
    Err(error.hint(remedy))
}

/// Marks the calls a stet that ended without a stop left running as interrupted.
fn settle_interrupted(repo: &Path, printer: Printer) -> Result<(), Error> {
    let interrupted = receipts::settle_interrupted(repo, sandbox::owner_alive)
        .map_err(|e| Concept::Drive.failure(format!("cannot update the receipts: {e}")))?;
    for r in &interrupted {
        printer.warn(&format!(
            "receipt {}: the {} call of {} was interrupted (its stet ended during it without a stop; its log is kept)",
            r.id, r.role, r.item
        ));
    }
    Ok(())
}

/// The queue a drive drains, as the base holds it.
struct Queue {
    /// Every item's file (names only: an item's text is read when it is taken, so the
    /// drive's memory does not grow with the queue).
    items: Vec<queue::Entry>,
    /// How many are open and held by no live reservation of another drive.
    eligible: usize,
    /// How many a live reservation of another drive holds.
    held_elsewhere: usize,
}

/// Reads the queue at `base` and what the remote says of it at `now_unix`: eligible is
/// open and not held by a live reservation of another drive (this clone's own lapsed or
/// interrupted ones it takes over).
fn queue_to_drain(
    repo: &Path,
    base: &crate::base::Base,
    options: &DriveOptions,
    now_unix: i64,
    printer: Printer,
) -> Result<Queue, Error> {
    let (items, malformed) = queue::scan_at(repo, &base.commit);
    for m in &malformed {
        printer.warn(&format!("skipped {}: {}", m.path.display(), m.why));
    }
    say_not_pushed(printer, base, &queue::not_pushed(repo, &items));
    let remote = Remote {
        repo,
        name: &options.remote,
    };
    let marks = remote.marks().map_err(remote_error)?;
    let held_elsewhere: std::collections::HashSet<String> = remote
        .list()
        .map_err(remote_error)?
        .into_iter()
        .filter(|h| {
            h.reservation.expires_at_unix > now_unix
                && !ours_to_take_over(&holder(repo), &h.reservation.holder)
        })
        .map(|h| h.reservation.item)
        .collect();
    let eligible = items
        .iter()
        .filter(|i| marks.open(&i.id) && !held_elsewhere.contains(&i.id))
        .count();
    if !marks.failed.is_empty() {
        note!(
            printer,
            "{} failed before and not taken (stet queue says why; stet retry ID takes one up again)",
            crate::printer::count(
                items.iter().filter(|i| marks.failed.contains(&i.id)).count(),
                "item",
                "items"
            )
        );
    }
    Ok(Queue {
        items,
        eligible,
        held_elsewhere: held_elsewhere.len(),
    })
}

/// What [`consent_of`] is made from, beyond the plugins.
struct ConsentFacts<'a> {
    repo: &'a Path,
    settings: &'a Settings,
    options: &'a DriveOptions,
    eligible: usize,
    held_elsewhere: usize,
    proof: &'a walls::Proof,
    proven_in: std::time::Duration,
    base: &'a crate::base::Base,
}

/// The consent's facts, as the terminal and the board show them.
fn consent_of(facts: ConsentFacts<'_>, harness: &OpenHarness, runtime: &OpenRuntime) -> Consent {
    let ConsentFacts {
        repo,
        settings,
        options,
        eligible,
        held_elsewhere,
        proof,
        proven_in,
        base,
    } = facts;
    let land = match &options.land {
        Some(crate::land::How::PullRequest { repo: into }) => {
            // Where they will be opened: the repository named, else the push remote's.
            let push = || {
                crate::git::run(repo, &["remote", "get-url", "--push", &options.remote])
                    .map(|u| crate::land::without_credentials(&u))
                    .unwrap_or_else(|_| options.remote.clone())
            };
            let at = match into {
                Some(into) => format!("{into} (from the fork {})", push()),
                None => push(),
            };
            Some(format!(
                "a pull request per landed lane, opened with gh in {at}, into {}",
                base.branch
            ))
        }
        Some(crate::land::How::Command(command)) => Some(format!(
            "`{command}` runs on this machine, as you, after each lane is pushed"
        )),
        None => None,
    };
    Consent {
        items: options.cap.min(eligible),
        eligible,
        held_elsewhere,
        walls: proof.walls.len(),
        proven_in: crate::printer::duration(proven_in.as_secs_f64()),
        estimate: estimate(repo, options.cap.min(eligible)),
        base: base.name.clone(),
        base_commit: base.commit.clone(),
        jobs: options.jobs,
        runtime: runtime.name.clone(),
        runtime_why: runtime.selection.reason.clone(),
        isolation: runtime.isolation.clone(),
        harness: harness.name.clone(),
        harness_why: harness.selection.reason.clone(),
        route: proof.route.to_string(),
        network: proof.network.clone().unwrap_or_default(),
        land,
        limits: format!(
            "{} per sandbox{}; disk and files {}",
            settings.limits.describe(),
            runtime
                .unenforced_limits()
                .map(|why| format!(" — {why}"))
                .unwrap_or_default(),
            crate::lanes::disk::enforcement(settings.lane_file_systems).describe(&settings.limits)
        ),
    }
}

/// The remote's base, fetched (a local branch ahead of it said once); a refusal naming
/// what to do when there is none.
fn fetch_base(repo: &Path, remote: &str, printer: Printer) -> Result<crate::base::Base, Error> {
    let base = crate::base::fetch(repo, remote).map_err(|e| match e {
        crate::base::BaseError::Unreachable { .. } => Concept::Drive
            .unusable("the remote cannot be reached")
            .caused_by(e.to_string())
            .hint("check the network and the remote; nothing was reserved"),
        crate::base::BaseError::None { .. } => Concept::Drive
            .usage("there is no base on the remote for the lanes to branch from")
            .caused_by(e.to_string())
            .hint(format!(
                "push the branch the lanes should start from (git push -u {remote} HEAD): lanes branch from the remote's default branch, else the one yours tracks, else the one of its name"
            )),
    })?;
    if let Some(ahead) = crate::base::local_ahead(repo, &base).filter(|n| *n > 0) {
        let them = if ahead == 1 { "it" } else { "them" };
        note!(
            printer,
            "your HEAD is {} ahead of {}: the lanes branch from {} without {them} (push to give {them} to the lanes)",
            crate::printer::count(ahead as usize, "commit", "commits"),
            base.name,
            base.name,
        );
    }
    Ok(base)
}

/// Names, once, the queue files of the working copy the drive does not take as they are
/// there: they are read from the base, which lacks them or holds other text.
fn say_not_pushed(printer: Printer, base: &crate::base::Base, files: &[queue::NotPushed]) {
    let list = |files: Vec<&queue::NotPushed>| {
        const SHOWN: usize = 10;
        let mut names: Vec<String> = files.iter().take(SHOWN).map(|f| f.id.clone()).collect();
        if files.len() > SHOWN {
            names.push(format!("and {} more", files.len() - SHOWN));
        }
        (files.len(), names.join(", "))
    };
    let (missing, differing): (Vec<_>, Vec<_>) = files.iter().partition(|f| !f.in_base);
    if !missing.is_empty() {
        let (n, names) = list(missing);
        printer.warn(&format!(
            "not driven: {} in {} {} not on {} (untracked, uncommitted or not pushed): {names}; commit and push {} for a drive to take {}",
            crate::printer::count(n, "item file", "item files"),
            queue::QUEUE_DIR,
            if n == 1 { "is" } else { "are" },
            base.name,
            if n == 1 { "it" } else { "them" },
            if n == 1 { "it" } else { "them" },
        ));
    }
    if !differing.is_empty() {
        let (n, names) = list(differing);
        printer.warn(&format!(
            "{} in {} {} from {}'s, whose text the drive works: {names}; commit and push your change for a drive to work it",
            crate::printer::count(n, "item file", "item files"),
            queue::QUEUE_DIR,
            if n == 1 { "differs" } else { "differ" },
            base.name,
        ));
    }
}

/// The wall proof, with a usage limit waited for as the drive waits for one: until its
/// reset (never less than the wait floor), then proven again; a reset further away than
/// the outage limit refuses, saying when to drive. A refused login or an unreachable API
/// is the proof's to name: the caller refuses with it.
fn prove_waiting(
    settings: &Settings,
    options: &DriveOptions,
    repo: &std::path::Path,
    harness: &OpenHarness,
    runtime: &OpenRuntime,
    clock: &Arc<dyn Clock>,
    printer: Printer,
) -> Result<walls::Proof, Error> {
    let began = clock.now();
    loop {
        let proof = walls::prove(
            settings,
            harness,
            runtime,
            walls::SettingsMode::Rewrite,
            None,
            Some(repo),
        )?;
        let Some(walls::Unserved::UsageLimited { resets_at_unix }) = proof.unserved else {
            return Ok(proof);
        };
        let now = clock.now();
        let wake = resets_at_unix
            .unwrap_or(0)
            .max(now + options.wait_floor_secs);
        let limit = options.outage_limit_secs;
        if wake.saturating_sub(now) > limit || now - began > limit {
            return Err(Concept::Drive
                .unusable(format!(
                    "the agent hit its usage limit while the walls were proven; it resets at {}, later than the outage limit ({}); nothing was reserved",
                    progress::utc(wake),
                    state::duration(limit)
                ))
                .hint(format!("run stet drive again after {}", progress::utc(wake))));
        }
        note!(
            printer,
            "the agent hit its usage limit while the walls were proven: waiting until {} (its reset), then proving them again",
            progress::utc(wake)
        );
        // No signal is watched yet: a Ctrl-C here ends stet as it would any command, with
        // nothing reserved.
        clock.sleep_until(wake, &Stop::default());
    }
}

/// The image holds what the drive's sandboxes run — sh, git, the check's program, the
/// agent's interpreter —, by the look `stet doctor` takes, before any agent is asked
/// anything: a check whose program the image lacks would fail every round, each a paid
/// call, and the agent be told its code failed.
fn image_holds(
    settings: &Settings,
    options: &DriveOptions,
    harness: &OpenHarness,
    runtime: &OpenRuntime,
) -> Result<(), Error> {
    let agent = crate::doctor::agent_program(harness);
    let lacking: Vec<_> = crate::doctor::image(
        settings,
        runtime,
        options.check.as_deref(),
        agent.as_deref(),
    )
    .into_iter()
    .filter(|c| !c.ok)
    .collect();
    if lacking.is_empty() {
        return Ok(());
    }
    let mut error = Concept::Drive.unusable(format!(
        "the image {} cannot run this drive; nothing was reserved",
        settings.image
    ));
    for c in &lacking {
        error = error.caused_by(c.detail.clone());
    }
    let remedies: Vec<&str> = lacking
        .iter()
        .map(|c| c.remedy.as_str())
        .filter(|r| !r.is_empty())
        .collect();
    Err(error.hint(format!(
        "{}; stet doctor checks it again",
        remedies.join("; ")
    )))
}

fn remote_error(e: ReservationError) -> Error {
    Concept::Drive
        .unusable("the remote cannot be reached")
        .caused_by(e.to_string())
        .hint("check the network and the remote; nothing was reserved")
}

/// The lock every drive on a clone holds (shared) while it runs.
fn driving_lock(repo: &Path) -> std::path::PathBuf {
    receipts::git_dir(repo).join("stet/driving.lock")
}

/// Whether a drive runs on the clone of `repo` now.
pub fn driving_here(repo: &Path) -> bool {
    crate::files::locked_by_another(&driving_lock(repo))
}

/// Who holds this drive's reservations: this host, this clone, this process. A drive on
/// the same clone takes over a reservation whose process is gone at once (see
/// [`ours_to_take_over`]); a peer waits for it to lapse.
fn holder(repo: &Path) -> String {
    format!(
        "{}:{}:{}",
        sandbox::host_name(),
        clone_id(repo),
        sandbox::owner_token(std::process::id()).unwrap_or_default()
    )
}

/// Whether a reservation held by `holder` may be taken over by this drive before it
/// lapses: it was made on this host and clone by a stet process that is gone.
fn ours_to_take_over(mine: &str, holder: &str) -> bool {
    let prefix = |h: &str| h.splitn(3, ':').take(2).collect::<Vec<_>>().join(":");
    let Some(owner) = holder.splitn(3, ':').nth(2) else {
        return false;
    };
    // Without a process to ask about, nothing says the holder is gone: wait for the lapse.
    if owner.split(':').next().unwrap_or_default().is_empty() {
        return false;
    }
    prefix(mine) == prefix(holder) && !sandbox::owner_alive(owner)
}

/// A stable id for this clone: kept in its git directory, bound to where it is and to this
/// boot of this machine.
fn clone_id(repo: &Path) -> String {
    let git_dir = receipts::git_dir(repo);
    let path = git_dir.join("stet/clone-id");
    let stored = match std::fs::read_to_string(&path) {
        Ok(id) => id.trim().to_string(),
        Err(_) => {
            // The process that made it, by pid and start time: unique on this boot, and
            // bound to it with the rest below.
            let id = sandbox::owner_token(std::process::id())
                .unwrap_or_else(|| std::process::id().to_string())
                .replace(':', "-");
            let _ = receipts::write_durably(&path, id.as_bytes());
            id
        }
    };
    // The stored id travels with a copied repository, and host names repeat (containers,
    // CI): where the clone is and which boot of which machine it is on are part of its
    // identity too, so a copy elsewhere never passes for this clone.
    let place = git_dir
        .canonicalize()
        .unwrap_or(git_dir)
        .display()
        .to_string();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .or_else(|_| std::fs::read_to_string("/etc/machine-id"))
        .unwrap_or_default();
    let digest =
        crate::plugins::trust::sha256_bytes(format!("{place}\n{}", boot.trim()).as_bytes());
    format!("{stored}-{}", &digest[..12])
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
        return format!(
            "{}; no past receipts to estimate cost from",
            crate::printer::count(items, "item", "items")
        );
    }
    let per_item = costs.iter().sum::<f64>() / items_seen as f64;
    format!(
        "{} at about ${per_item:.4} each (from {} past receipts), about ${:.4}",
        crate::printer::count(items, "item", "items"),
        past.len(),
        per_item * items as f64
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_gone_process_of_this_very_clone_is_taken_over_before_the_lapse() {
        let me = format!(
            "host:clone-1:{}",
            sandbox::owner_token(std::process::id()).unwrap()
        );
        // A process that cannot exist, on this clone: gone, so taken over.
        assert!(ours_to_take_over(&me, "host:clone-1:4194999:1"));
        // Alive (this very process): not taken over.
        assert!(!ours_to_take_over(&me, &me));
        // Another clone, or another host: wait for the lapse.
        assert!(!ours_to_take_over(&me, "host:clone-2:4194999:1"));
        assert!(!ours_to_take_over(&me, "other:clone-1:4194999:1"));
        // No process named: nothing says it is gone.
        assert!(!ours_to_take_over(&me, "host:clone-1:"));
        assert!(!ours_to_take_over(&me, "host:clone-1"));
    }

    #[test]
    fn a_clone_id_is_bound_to_where_the_clone_is() {
        let a = tempfile::tempdir().unwrap();
        crate::git::run(a.path(), &["init", "--quiet"]).unwrap();
        let first = clone_id(a.path());
        assert_eq!(clone_id(a.path()), first, "stable");
        // A copy of the repository (its stored id included) elsewhere is another clone.
        let b = tempfile::tempdir().unwrap();
        let stored = receipts::git_dir(a.path()).join("stet/clone-id");
        let copy = receipts::git_dir(b.path()).join("stet/clone-id");
        std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
        std::fs::copy(&stored, &copy).unwrap();
        assert_ne!(clone_id(b.path()), first);
    }
}
