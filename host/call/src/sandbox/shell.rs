//! `stet shell`: a person's interactive shell in a fresh sandbox on a lane, walled in as an
//! agent's implementing sandbox is — planned by the same [`Plan`] (environment from
//! scratch, only the lane's working tree writable, its git directory read-only, no
//! network, running as the person) on the runtime a drive selects — with the person's
//! terminal handed to it.
//!
//! Nothing is committed or pushed: what the person changed stays in the lane's working
//! copy, for `stet diff` to show.

use stet_plugin_api::{EnvVar, ProcessSpec, ROption};

use super::{terminal, LaneAccess, LaneMounts, OpenRuntime, Plan, Sandbox};
use crate::error::{Concept, Error};
use crate::lanes::Lane;
use crate::settings::Settings;

/// The shell the sandbox runs: bash where the image has it, else sh; interactive either
/// way, with a prompt that says where it is.
const SHELL: &str = "if command -v bash >/dev/null 2>&1; then exec bash --norc -i; fi; exec sh -i";

/// The prompt inside.
const PROMPT: &str = "(stet shell) $ ";

/// Whether `runtime` can run a process on a terminal (by its probe).
pub fn can_run_terminals(runtime: &OpenRuntime) -> bool {
    runtime
        .capabilities
        .iter()
        .any(|c| c == stet_plugin_api::capability::TERMINAL)
}

/// The person's terminal type, when it is a plain word (it is handed inside so that the
/// shell can draw; nothing else of the host's environment is).
pub fn terminal_type() -> Option<String> {
    std::env::var("TERM").ok().filter(|t| {
        !t.is_empty()
            && t.len() <= 64
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.+".contains(c))
    })
}

/// Runs an interactive shell on `lane` in a fresh sandbox of `runtime`, on the person's
/// terminal, until it ends; the sandbox is removed then.
pub fn run(
    settings: &Settings,
    runtime: &OpenRuntime,
    lane: &Lane,
) -> Result<terminal::Ended, Error> {
    if !can_run_terminals(runtime) {
        return Err(Concept::Sandbox
            .unusable(format!(
                "runtime {} cannot run a process on a terminal (its probe does not offer it)",
                runtime.name
            ))
            .hint("choose a runtime that can (stet plugins probe lists what each offers)"));
    }
    let workdir = lane.dir.display().to_string();
    let plan = Plan::new("shell", &format!("shell-{}", std::process::id()), &workdir)
        .with_lane(LaneMounts::of_lane(lane), LaneAccess::ReadWrite);
    let sandbox = Sandbox::create(runtime, plan.spec(settings))?;
    let mut env = vec![EnvVar::new("PS1", PROMPT)];
    if let Some(term) = terminal_type() {
        env.push(EnvVar::new("TERM", term));
    }
    let shell = sandbox.spawn_terminal(
        ProcessSpec {
            argv: vec!["sh".into(), "-c".into(), SHELL.into()].into(),
            env: env.into(),
            workdir: ROption::RNone,
            stdin: Default::default(),
        },
        terminal::size(),
    )?;
    let ended = terminal::attach(&shell);
    drop(sandbox);
    ended
}
