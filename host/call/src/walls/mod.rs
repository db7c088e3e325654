//! The walls: what holds a hostile agent in, and the live proof that it holds, made
//! before a drive's first move (and by `stet walls`) on the very runtime instance the drive
//! then uses.
//!
//! - the harness's static walls (through the plugin: the profile alone, a login present,
//!   the settings exact, no billing key) and its live proof launch (the tool list, the
//!   approver connected, stet's hooks firing, the guard refusing the canary);
//! - [`runtime`]: the runtime's walls in a sandbox made as an agent's would be —
//!   `lane-only`, `env-from-launch`, `network-as-launched`, and `own-kernel` for a runtime
//!   whose probe claims a kernel of its own;
//! - [`lane_git`]: `lane-git-inert` — the lane's git directory cannot be written from a
//!   sandbox, and stet's own git on a lane runs nothing planted in it;
//! - [`guard`]: the guard, which is **policy, not a wall**: what a role should not do
//!   (per-role shell lists, no pushing, no credential paths, the canary), decided by
//!   matching the agent's tool calls. It keeps a cooperative agent from mistakes; a hostile
//!   one is held by the sandbox, its mounts and its network, whatever the guard allows;
//! - [`hooks`]: the entry points the agent calls back into inside its sandbox (the hooks
//!   and the approver), which apply the guard and record the session.

pub mod guard;
pub mod hooks;
pub mod lane_git;
pub mod record;
pub mod runtime;

use std::io::Write;
use std::path::Path;

use serde::Serialize;
use stet_plugin_api::{Role, WallReport};

use crate::error::{Concept, Error};
use crate::harness::{self, OpenHarness};
use crate::sandbox::{LaneAccess, LaneMounts, OpenRuntime, Plan};
use crate::settings::Settings;

/// One wall as reported.
#[derive(Debug, Clone, Serialize)]
pub struct Wall {
    /// The wall's name.
    pub wall: String,
    /// Whether it held.
    pub held: bool,
    /// How it stands (its word in `--json`: `held`, `broken`, `absent`, …).
    pub state: Standing,
    /// What was seen.
    pub detail: String,
    /// What to do when it did not hold (`null` in JSON when nothing).
    #[serde(serialize_with = "crate::printer::empty_as_null")]
    pub remedy: String,
}

/// How a wall stands: the SDK's states, and the host's own for a proof the model API did
/// not serve. Its word is said at the edge only (`--json`, the table, the record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// It holds.
    Held,
    /// It is down: something leaks, or is not as it must be.
    Broken,
    /// What it is about is not there yet.
    Absent,
    /// The model API did not answer the proof: not proven.
    Unreachable,
    /// The agent cannot run where it must: not proven.
    CannotRun,
    /// The login's usage limit refused the proof: not proven.
    UsageLimited,
    /// The model API refused the profile's login: not proven.
    LoginRefused,
    /// A state a newer plugin reports that this stet does not know, by its number.
    Other(u32),
}

impl Standing {
    /// Its word, as `--json`, the table and the walls' record say it.
    pub fn word(self) -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed(match self {
            Standing::Held => "held",
            Standing::Broken => "broken",
            Standing::Absent => "absent",
            Standing::Unreachable => "unreachable",
            Standing::CannotRun => "cannot-run",
            Standing::UsageLimited => "usage-limited",
            Standing::LoginRefused => "login-refused",
            Standing::Other(n) => return std::borrow::Cow::Owned(format!("state {n}")),
        })
    }

    /// Whether a wall standing so is unproven rather than broken: the model API did not
    /// serve the proof, or the agent cannot run where it must.
    pub fn unproven(self) -> bool {
        matches!(
            self,
            Standing::Unreachable
                | Standing::CannotRun
                | Standing::UsageLimited
                | Standing::LoginRefused
        )
    }
}

impl From<stet_plugin_api::WallState> for Standing {
    fn from(state: stet_plugin_api::WallState) -> Standing {
        use stet_plugin_api::WallState;
        match state {
            WallState::HELD => Standing::Held,
            WallState::BROKEN => Standing::Broken,
            WallState::ABSENT => Standing::Absent,
            WallState::UNREACHABLE => Standing::Unreachable,
            WallState::CANNOT_RUN => Standing::CannotRun,
            WallState(n) => Standing::Other(n),
        }
    }
}

impl std::fmt::Display for Standing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.word())
    }
}

impl Serialize for Standing {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.word())
    }
}

impl From<WallReport> for Wall {
    fn from(w: WallReport) -> Self {
        Wall {
            held: w.held(),
            state: w.state.into(),
            wall: w.wall.into_string(),
            detail: w.detail.into_string(),
            remedy: w.remedy.into_string(),
        }
    }
}

impl Wall {
    /// A wall the host itself proves.
    pub fn of_host(name: &str, held: bool, detail: String, remedy: &str) -> Wall {
        Wall {
            wall: name.to_string(),
            held,
            state: if held {
                Standing::Held
            } else {
                Standing::Broken
            },
            detail,
            remedy: if held {
                String::new()
            } else {
                remedy.to_string()
            },
        }
    }
}

/// Everything the wall proof found.
#[derive(Debug, Serialize)]
pub struct Proof {
    /// The harness and runtime used.
    pub harness: String,
    /// The runtime the live launch ran in, when it ran.
    pub runtime: Option<String>,
    /// The profile directory.
    pub profile: String,
    /// How the agent is paid for and reaches its model.
    pub route: String,
    /// The network the live launch had.
    pub network: Option<String>,
    /// Whether the settings file had been edited and was replaced.
    pub replaced_edited_settings: Option<String>,
    /// Every wall, static then live.
    pub walls: Vec<Wall>,
    /// What the live launch's hooks and approver recorded.
    pub session: Vec<serde_json::Value>,
    /// Why the model API did not serve the live launch, when it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unserved: Option<Unserved>,
}

/// Why the model API did not serve the proof launch, as the harness read the launch's
/// output into a typed outcome: the proof then proves nothing of the agent's walls either
/// way, and names the party in the way instead of a hook that did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Unserved {
    /// The login's usage limit, which resets at this time (seconds since the epoch) when
    /// the API said.
    UsageLimited { resets_at_unix: Option<i64> },
    /// The model API refused the login.
    LoginRefused,
    /// The model API did not answer.
    Unreachable,
}

/// The walls a proof the model API did not serve is said by (the host's: whatever the
/// harness, these are read from its typed outcome).
pub const PROOF_USAGE_LIMITED: &str = "proof-usage-limited";
/// See [`PROOF_USAGE_LIMITED`].
pub const PROOF_LOGIN_REFUSED: &str = "proof-login-refused";

impl Proof {
    /// Whether every wall held.
    pub fn held(&self) -> bool {
        self.walls.iter().all(|w| w.held)
    }
}

/// How the proof treats the walled settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingsMode {
    /// Rewrite them first, as every drive does.
    Rewrite,
    /// Leave them as they are and make the live launch even if a static wall is broken: a
    /// diagnosis of the profile as it stands.
    AsTheyAre,
}

/// The live proof is one short launch; one that has not answered in this time is killed
/// and its walls reported as not proven.
const PROOF_LIMIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Proves the walls: profile, settings (rewritten), static checks, then — when they all
/// hold, or when diagnosing the settings as they are — one short live launch in a fresh
/// sandbox of `runtime`, the runtime's own walls and the lane's git, in sandboxes made as
/// the agent's would be. `log` receives the live launch's full output.
///
/// The proof is recorded in `repo`, when one is given, as the last proof of this runtime
/// and harness ([`record`]: what `stet board` shows); a record that cannot be written is
/// said on standard error and the proof still returned (it was made; only its keeping
/// failed).
pub fn prove(
    settings: &Settings,
    harness: &OpenHarness,
    runtime: &OpenRuntime,
    mode: SettingsMode,
    log: Option<&Path>,
    repo: Option<&Path>,
) -> Result<Proof, Error> {
    let proof = prove_unrecorded(settings, harness, runtime, mode, log)?;
    if let Some(repo) = repo {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let kept = record::Record::of(&proof, &runtime.name, now);
        if let Err(e) = record::save(repo, &kept) {
            crate::printer::Printer::default().warn(&format!(
                "the wall proof could not be kept in {}: {e}",
                record::dir(repo).display()
            ));
        }
    }
    Ok(proof)
}

fn prove_unrecorded(
    settings: &Settings,
    harness: &OpenHarness,
    runtime: &OpenRuntime,
    mode: SettingsMode,
    log: Option<&Path>,
) -> Result<Proof, Error> {
    let profile = harness.profile()?;
    let replaced = match mode {
        SettingsMode::Rewrite => harness.rewrite_settings(&profile)?,
        SettingsMode::AsTheyAre => None,
    };
    let mut proof = Proof {
        harness: harness.name.clone(),
        runtime: None,
        profile: profile.dir.to_string(),
        route: profile.route.to_string(),
        network: None,
        replaced_edited_settings: replaced,
        walls: harness
            .check_walls(&profile)?
            .into_iter()
            .map(Wall::from)
            .collect(),
        session: Vec::new(),
        unserved: None,
    };
    if !proof.held() && mode == SettingsMode::Rewrite {
        return Ok(proof);
    }
    proof.runtime = Some(runtime.name.clone());
    let scratch = crate::sandbox::leftovers::temp_dir("stet-proof-")
        .map_err(|e| Concept::Walls.failure(format!("cannot make a scratch lane: {e}")))?;
    // A lane laid out and walled as a drive's, so that what the proof reports about the
    // lane and git in it is what a drive's lane would show.
    let root = scratch
        .path()
        .canonicalize()
        .unwrap_or_else(|_| scratch.path().to_path_buf());
    let lane = crate::lanes::scratch(&root)
        .map_err(|e| Concept::Walls.failure(format!("cannot make a scratch lane: {e}")))?;
    let workdir = lane.dir.display().to_string();
    // The proof runs on a fresh copy of the profile, as every call does; it lives until
    // the runtime's walls, which make their sandbox with the proof launch's mounts.
    let walled = crate::call::Walled {
        settings,
        runtime,
        harness,
        profile: &profile,
    };
    walled.keep_fresh(PROOF_LIMIT, &|text| {
        crate::printer::Printer::default().note(text)
    })?;
    let mut launched = walled.launch(crate::call::Request {
        role: Role::Proof,
        prompt: "",
        workdir: &workdir,
    })?;
    let run = format!("proof-{}", std::process::id());
    let output = walled.run(
        &mut launched,
        Plan::new("proof", &run, &workdir)
            .with_lane(LaneMounts::of_lane(&lane), LaneAccess::ReadWrite),
        harness::Watch {
            time_limit: Some(PROOF_LIMIT),
            ..harness::Watch::default()
        },
        log,
    )?;
    let (mut call_profile, launch) = (launched.profile, launched.launch);
    proof.network = Some(output.network.clone());
    let credential = call_profile.sealed.check(output.gateway);
    proof.session = output.session.clone();
    proof.unserved = unserved(harness, &output);
    match (cannot_run(settings, &launch, &output), proof.unserved) {
        // The agent never ran: nothing it printed is a proof of anything.
        (Some(wall), _) => proof.walls.push(wall),
        // The model never answered: nor is what the agent printed then.
        (None, Some(unserved)) => proof.walls.push(unserved_wall(unserved, &output, harness)),
        (None, None) => proof.walls.extend(
            harness
                .read_proof(&output.stdout)?
                .into_iter()
                .map(Wall::from),
        ),
    }
    // The model API not answering is said by its own wall: the credential wall then
    // checks what the sandbox holds, not whether a request was authenticated.
    let model_answered = proof.unserved.is_none()
        && !proof
            .walls
            .iter()
            .any(|w| w.wall == stet_plugin_api::wall::PROOF_MODEL_API_UNREACHABLE && !w.held);
    let credential = credential.map(|mut check| {
        check.swaps_expected &= model_answered;
        check
    });
    // The runtime's own walls, in a sandbox made as the agent's would be.
    proof.walls.extend(runtime::prove(
        settings,
        runtime,
        &launch,
        Some(&mut call_profile.sealed),
        credential,
    )?);
    proof.walls.push(lane_git::prove(settings, runtime)?);
    call_profile.settle(harness, &profile)?;
    Ok(proof)
}

/// Why the model API did not serve the proof launch, read from the harness's typed outcome
/// of its output (never from its words); `None` when it served it, or when the harness
/// cannot read a proof's output as a call's.
fn unserved(harness: &OpenHarness, output: &harness::LaunchOutput) -> Option<Unserved> {
    let outcome = harness::outcome_of(harness, Role::Proof, output).ok()?;
    match crate::receipts::Outcome::of_code(outcome.kind) {
        crate::receipts::Outcome::RateLimited => Some(Unserved::UsageLimited {
            resets_at_unix: outcome.retry_at_unix.into_option(),
        }),
        crate::receipts::Outcome::NotLoggedIn => Some(Unserved::LoginRefused),
        crate::receipts::Outcome::ServiceUnavailable => Some(Unserved::Unreachable),
        _ => None,
    }
}

/// The wall that says why the model API did not serve the proof, with what the harness
/// saw and what to do.
fn unserved_wall(
    unserved: Unserved,
    output: &harness::LaunchOutput,
    harness: &OpenHarness,
) -> Wall {
    let said = harness::outcome_of(harness, Role::Proof, output)
        .map(|o| o.detail.to_string())
        .unwrap_or_default();
    let said = said
        .trim()
        .lines()
        .next()
        .unwrap_or("no answer")
        .to_string();
    let (wall, state, detail, remedy) = match unserved {
        Unserved::UsageLimited { resets_at_unix } => (
            PROOF_USAGE_LIMITED,
            Standing::UsageLimited,
            format!(
                "the model API refused the proof launch: the login's usage limit{} ({said})",
                match resets_at_unix {
                    // (Clamped to the year 9999, the last RFC 3339 can write.)
                    Some(at) => format!(
                        ", which resets at {}",
                        crate::printer::rfc3339_ms(at.clamp(0, 253_402_300_799) as u64 * 1000)
                    ),
                    None => String::new(),
                }
            ),
            "wait for the reset (a drive waits for it when it is within --outage-limit), then run stet walls again".to_string(),
        ),
        Unserved::LoginRefused => (
            PROOF_LOGIN_REFUSED,
            Standing::LoginRefused,
            format!("the model API refused the profile's login ({said})"),
            "log in again: stet profile login (see \"The walled agent\" in the README), then run stet walls again".to_string(),
        ),
        Unserved::Unreachable => (
            stet_plugin_api::wall::PROOF_MODEL_API_UNREACHABLE,
            Standing::Unreachable,
            format!("the proof launch did not reach the model API: {said}"),
            "check that the model API answers from the sandbox's network (its base URL, the network route), then run stet walls again".to_string(),
        ),
    };
    Wall {
        wall: wall.to_string(),
        held: false,
        state,
        detail,
        remedy,
    }
}

/// The proof launch's agent could not be started inside the sandbox (the shell's 126: not
/// executable there, 127: not found — a script whose interpreter the image lacks, a binary
/// for another platform): said so, with what the image needs, instead of whatever the
/// harness makes of an output the agent never wrote.
fn cannot_run(
    settings: &Settings,
    launch: &stet_plugin_api::Launch,
    output: &harness::LaunchOutput,
) -> Option<Wall> {
    let code = output.status.code.into_option()?;
    if code != 126 && code != 127 {
        return None;
    }
    let program = launch.process.argv.first()?.to_string();
    let said = String::from_utf8_lossy(&output.stderr);
    let said = said
        .trim()
        .lines()
        .last()
        .unwrap_or("no message")
        .to_string();
    // The first line of the program, as the host sees it (it is mounted as itself).
    let mut head = [0u8; 256];
    let read = std::fs::File::open(&program)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .unwrap_or(0);
    let first = String::from_utf8_lossy(&head[..read]);
    let interpreter = first
        .strip_prefix("#!")
        .and_then(|l| l.lines().next())
        .map(|l| l.trim().to_string());
    let remedy = match &interpreter {
        Some(line) => {
            let needed = line
                .split_whitespace()
                .rfind(|w| !w.starts_with('-'))
                .map(|w| w.rsplit('/').next().unwrap_or(w).to_string())
                .unwrap_or_else(|| line.clone());
            format!(
                "{program} is a script run by `{line}`: install {needed} in the image {} (or point the harness at a build of the agent that needs no interpreter)",
                settings.image
            )
        }
        None => format!(
            "install what {program} needs in the image {}, or use a build of it for the image's platform",
            settings.image
        ),
    };
    Some(Wall {
        wall: stet_plugin_api::wall::PROOF_LAUNCHED.to_string(),
        held: false,
        state: Standing::CannotRun,
        detail: format!(
            "the agent {program} cannot run inside the image {} (exit {code}: {said})",
            settings.image
        ),
        remedy,
    })
}

/// Whether every wall that did not hold is unproven rather than broken: the model API
/// did not serve the proof (a usage limit, a refused login, no answer), or the agent
/// cannot run where it must.
pub fn only_unproven(proof: &Proof) -> bool {
    proof
        .walls
        .iter()
        .filter(|w| !w.held)
        .all(|w| w.state.unproven())
}

/// Prints a proof as lines.
pub fn print(proof: &Proof, out: &mut dyn Write) {
    let _ = writeln!(
        out,
        "harness: {} — profile {}",
        proof.harness, proof.profile
    );
    let _ = writeln!(out, "route: {}", proof.route);
    if let Some(detail) = &proof.replaced_edited_settings {
        let _ = writeln!(
            out,
            "note: the walled settings had been edited and were replaced ({detail})"
        );
    }
    if let (Some(runtime), Some(network)) = (&proof.runtime, &proof.network) {
        let _ = writeln!(out, "live proof: runtime {runtime}, network {network}");
    }
    let width = proof.walls.iter().map(|w| w.wall.len()).max().unwrap_or(0);
    for w in &proof.walls {
        let _ = writeln!(
            out,
            "  {}  {:<width$}  {}",
            match w.state {
                _ if w.held => "held  ".to_string(),
                other => other.word().to_ascii_uppercase(),
            },
            w.wall,
            w.detail
        );
        if !w.held && !w.remedy.is_empty() {
            let _ = writeln!(out, "          hint: {}", w.remedy);
        }
    }
    let _ = writeln!(
        out,
        "note: the guard (what refused the canary) is policy, not a wall; the walls are what the sandbox, its mounts and stet's own host-side code enforce"
    );
}
