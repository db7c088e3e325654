//! `stet run -- CMD…`: one command in a fresh sandbox with the current directory mounted
//! read-write, output live, exit status passed through, the sandbox removed afterwards
//! (also on Ctrl-C).

use std::io::{IsTerminal, Read, Write};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use stet_plugin_api::{Network, ProcessSpec, ROption, Stream};

use super::error::{CliError, Exit};
use crate::printer::Printer;
use crate::sandbox::{self, LaneAccess, LaneMounts, Plan, Sandbox};
use crate::settings::Settings;

use super::RunArgs;

/// The most stdin `stet run` reads up front (the process gets it all at start).
const STDIN_LIMIT: u64 = 64 << 20;

pub fn run(settings: &Settings, args: &RunArgs, printer: Printer) -> Result<Exit, CliError> {
    let cwd = std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(|e| CliError::failure(format!("cannot resolve the current directory: {e}")))?;
    let stdin = read_stdin()?;
    let runtime = sandbox::open_runtime(settings)?;
    for line in runtime.selection.lines() {
        printer.detail(&line);
    }
    let cwd_text = cwd.display().to_string();
    let run_id = format!("run-{}-{}", std::process::id(), unique());
    let limits = limits_of(settings, args);
    // The person's own command in their own directory: the directory is theirs to change,
    // `.git` included (an agent is never run this way).
    let mut plan = Plan::new("run", &run_id, &cwd_text).with_lane(
        LaneMounts {
            work_tree: cwd.clone(),
            read_only: Vec::new(),
            also_at: None,
        },
        LaneAccess::ReadWrite,
    );
    if args.network {
        // The one way to an open network: the person's own command, asked for by name.
        printer.warn(&format!(
            "--network: this sandbox gets {}'s open network, with no allow-list (an agent never gets it)",
            runtime.name
        ));
        plan.network = Network::Open;
    }
    plan.limits = Some(limits);
    let spec = plan.spec(settings);
    printer.detail(&format!("limits: {}", limits.describe()));

    // On a terminal the command gets one (as `docker run -it`): keystrokes reach it as typed,
    // Ctrl-C included. With output redirected it runs as from a script.
    if sandbox::terminal::interactive() && sandbox::shell::can_run_terminals(&runtime) {
        return on_terminal(&runtime, spec, args, printer);
    }
    // Signals are caught before the sandbox exists, so that no Ctrl-C can leave it behind.
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|e| CliError::failure(format!("cannot watch for signals: {e}")))?;
    let signals_handle = signals.handle();
    let command = ProcessSpec {
        argv: args.command.iter().map(|a| a.as_str().into()).collect(),
        env: Default::default(),
        workdir: ROption::RNone,
        stdin: stdin.into(),
    };
    // The command as the sandbox's first process where the runtime offers it (one step,
    // as `docker run` is: no idle process to start and then exec into); else spawned.
    let first = runtime
        .capabilities
        .iter()
        .any(|c| c == stet_plugin_api::capability::FIRST_PROCESS);
    let (sandbox, process) = if first {
        let option =
            stet_plugin_api::SandboxOption::FirstProcess(stet_plugin_api::RBox::new(command));
        let (sandbox, process) = Sandbox::start(&runtime, spec, vec![option])?;
        let process = process.ok_or_else(|| {
            CliError::failure(format!(
                "runtime {} offered to run the command as the sandbox's first process but did not return it",
                runtime.name
            ))
        })?;
        (sandbox, process)
    } else {
        let sandbox = Sandbox::create(&runtime, spec)?;
        let process = sandbox.spawn(command)?;
        (sandbox, process)
    };

    let received = Arc::new(AtomicI32::new(0));
    let watcher = {
        let process = process.clone();
        let received = received.clone();
        std::thread::spawn(move || {
            for signal in signals.forever() {
                received.store(signal, Ordering::SeqCst);
                let _ = process.kill();
            }
        })
    };
    let status = process.wait(&mut |stream, bytes| {
        // Written and flushed chunk by chunk so output is live; a closed pipe on our side
        // is not the sandboxed command's problem.
        let _ = match stream {
            Stream::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes).and_then(|_| out.flush())
            }
            Stream::Stderr => {
                let mut err = std::io::stderr().lock();
                err.write_all(bytes).and_then(|_| err.flush())
            }
        };
    });
    signals_handle.close();
    let _ = watcher.join();
    drop(sandbox);
    let status = status?;

    let signal = received.load(Ordering::SeqCst);
    if signal != 0 {
        printer.warn(&format!(
            "stopped by signal {signal}; the sandbox was removed"
        ));
        return Ok(Exit::Passthrough(128 + signal as u8));
    }
    if status.out_of_memory {
        printer.warn("the command ran out of memory in its sandbox (raise --memory)");
    }
    Ok(passthrough(&status))
}

/// The sandbox's limits: the settings', each flag given in its place.
fn limits_of(settings: &Settings, args: &RunArgs) -> crate::settings::SandboxLimits {
    let mut limits = settings.limits;
    if let Some(cpus) = args.cpus {
        limits.millicpus = (cpus * 1000.0).round() as u32;
    }
    if let Some(mib) = args.memory_mib {
        limits.memory_bytes = mib << 20;
    }
    if let Some(pids) = args.pids {
        limits.pids = pids;
    }
    limits
}

/// The exit code that passes `status` through (a signal death as 128 + the signal).
pub(super) fn passthrough(status: &stet_plugin_api::ExitStatus) -> Exit {
    Exit::Passthrough(match (status.code, status.signal) {
        (ROption::RSome(code), _) => code.clamp(0, 255) as u8,
        (_, ROption::RSome(signal)) => 128 + signal.clamp(0, 127) as u8,
        _ => 1,
    })
}

/// `stet run` on the person's terminal: the command on a terminal in the sandbox (its
/// output and errors on that one terminal, as `docker run -it` gives them). A TERM or HUP
/// to stet kills it; the sandbox is removed either way.
fn on_terminal(
    runtime: &sandbox::OpenRuntime,
    spec: stet_plugin_api::SandboxSpec,
    args: &RunArgs,
    printer: Printer,
) -> Result<Exit, CliError> {
    let sandbox = Sandbox::create(runtime, spec)?;
    let env: Vec<stet_plugin_api::EnvVar> = sandbox::shell::terminal_type()
        .map(|t| stet_plugin_api::EnvVar::new("TERM", t))
        .into_iter()
        .collect();
    let terminal = sandbox.spawn_terminal(
        ProcessSpec {
            argv: args.command.iter().map(|a| a.as_str().into()).collect(),
            env: env.into(),
            workdir: ROption::RNone,
            stdin: Default::default(),
        },
        sandbox::terminal::size(),
    )?;
    let ended = sandbox::terminal::attach(&terminal)?;
    drop(sandbox);
    if let Some(signal) = ended.signal {
        printer.warn(&format!(
            "stopped by signal {signal}; the sandbox was removed"
        ));
        return Ok(Exit::Passthrough(128 + signal as u8));
    }
    let status = ended.status?;
    if status.out_of_memory {
        printer.warn("the command ran out of memory in its sandbox (raise --memory)");
    }
    Ok(passthrough(&status))
}

fn read_stdin() -> Result<Vec<u8>, CliError> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Ok(Vec::new());
    }
    let mut bytes = Vec::new();
    stdin
        .lock()
        .take(STDIN_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::failure(format!("cannot read standard input: {e}")))?;
    if bytes.len() as u64 > STDIN_LIMIT {
        return Err(CliError::usage(format!(
            "standard input is larger than {} MiB; stet run hands it to the command up front",
            STDIN_LIMIT >> 20
        ))
        .hint("put the data in a file in the current directory (it is mounted) and read it from there"));
    }
    Ok(bytes)
}

/// A short value that differs between runs of the same pid.
pub fn unique() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{:x}", nanos & 0xffff_ffff)
}
