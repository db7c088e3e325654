//! Everything about the `runsc` command: finding it, the flags every call shares, the calls
//! that make, signal, inspect and delete a sandbox.
//!
//! runsc keeps each sandbox's state under its `--root`; every call for one sandbox passes
//! the same root (and platform), so that any stet process — a drive, `stet gc` — reaches
//! it. The sandbox itself runs as two host processes runsc leaves behind (the sentry, the
//! kernel in user space, and the gofer, which serves it files); they are runsc's to end.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use stet_plugin_support::command::{run_bounded, Ran};

/// How long one control call (run detached, state, kill, delete) may take.
const CONTROL_LIMIT: Duration = Duration::from_secs(30);

/// A `runsc` binary and the flags every call for stet's sandboxes shares.
#[derive(Debug, Clone)]
pub struct Runsc {
    pub binary: PathBuf,
    /// runsc's state directory (`--root`).
    pub root: PathBuf,
    /// `--platform`, when configured (else runsc's default, ptrace).
    pub platform: Option<String>,
    /// Not root: runsc's `--rootless`, without cgroups (it cannot make them).
    pub rootless: bool,
}

/// How a sandbox is made beyond its bundle: what `runsc run` is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunFlags<'a> {
    /// `none`: loopback only; `host`: the host's network, through gVisor's own sockets.
    pub network: &'a str,
    /// A unix socket from the host is mounted: connecting to it is allowed (and only
    /// connecting: the sandbox cannot create a socket the host sees).
    pub host_sockets: bool,
}

impl Runsc {
    /// A command for `runsc <global flags> <args>`, with an environment from scratch.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .current_dir("/")
            .arg("--root")
            .arg(&self.root);
        if let Some(platform) = &self.platform {
            command.arg("--platform").arg(platform);
        }
        if self.rootless {
            command.args(["--rootless", "--ignore-cgroups"]);
        }
        command.args(args);
        command
    }

    /// `runsc --version`'s first line (`runsc version 0.0~20240729.0`), as its version.
    pub fn version(&self, limit: Duration) -> Result<String, String> {
        let mut command = Command::new(&self.binary);
        command.env_clear().current_dir("/").arg("--version");
        let ran = run_bounded(command, limit)?;
        if !ran.success() {
            return Err(ran.why());
        }
        Ok(ran
            .stdout
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .trim_start_matches("runsc version ")
            .to_string())
    }

    /// Creates and starts sandbox `id` from the bundle in `bundle` (its `config.json`),
    /// detached: runsc returns once the sandbox's first process runs.
    pub fn run(&self, id: &str, bundle: &Path, flags: RunFlags<'_>) -> Result<(), String> {
        ok(run_bounded(
            self.run_command(id, bundle, flags, true),
            CONTROL_LIMIT,
        )?)
    }

    /// The `runsc run` that creates and starts sandbox `id` from the bundle in `bundle`.
    /// Detached, it returns once the first process runs; attached, it is the first
    /// process's stand-in on the host, as `runsc exec` is for the others: the process's
    /// standard streams are its own, it ends when the process does, with its status
    /// (`128 + N` for signal N), after removing the sandbox (its state, its host control
    /// group) — ~10 ms, where a `runsc delete` polls for a second or more.
    pub fn run_command(
        &self,
        id: &str,
        bundle: &Path,
        flags: RunFlags<'_>,
        detach: bool,
    ) -> Command {
        let mut command = self.command(&[]);
        // Global flags go before the subcommand.
        command.arg(format!("--network={}", flags.network));
        // The sentry opens no host file itself; the gofer does it for it. Besides narrowing
        // what the sentry can reach, this keeps read-only mounts read-only: with direct
        // file access, runsc 20240729 answers EROFS to open(O_TRUNC) on a read-only bind
        // mount *after* truncating the host's file (found by the conformance kit's
        // nested read-only mount: a lane's git directory would be emptied).
        command.arg("--directfs=false");
        // The root's writes (the shared image stays read-only) are kept in the sandbox's
        // memory, which its memory limit bounds: in a file store on the host's disk they
        // would be bounded by nothing.
        command.arg("--overlay2=root:memory");
        if flags.host_sockets {
            command.arg("--host-uds=open");
        }
        command.arg("run");
        if detach {
            command.arg("--detach");
        }
        command.arg("--bundle").arg(bundle).arg(id);
        command
    }

    /// The status runsc keeps for sandbox `id` (`running`, `stopped`, …), with the
    /// sandbox's host process; `None` when runsc knows no such sandbox (never made, or
    /// removed: an attached `runsc run` removes its sandbox when its process ends).
    pub fn state(&self, id: &str) -> Result<Option<State>, String> {
        let ran = run_bounded(self.command(&["state", id]), CONTROL_LIMIT)?;
        if !ran.success() {
            if ran.stderr.contains("does not exist") || ran.stderr.contains("not exist") {
                return Ok(None);
            }
            return Err(ran.why());
        }
        let value: serde_json::Value = serde_json::from_str(&ran.stdout)
            .map_err(|e| format!("runsc state answered what is not JSON: {e}"))?;
        Ok(Some(State {
            status: value["status"].as_str().unwrap_or_default().to_string(),
            pid: value["pid"].as_i64().unwrap_or(0) as i32,
        }))
    }

    /// Ends sandbox `id` at once: its sentry — the one host process through which
    /// anything in the sandbox runs, or reaches a mount through the gofer — is killed and
    /// waited for. (`runsc kill --all` signals the processes inside, but runsc reports the
    /// sandbox running for a while after; `runsc delete` takes a second or more, polling.)
    /// The sentry is known by the pid runsc keeps and checked by its command line, so a
    /// pid reused since is never signalled. A sandbox runsc does not know, or whose
    /// sentry is gone, has nothing left to stop. Answers whether runsc knew the sandbox
    /// (and so still keeps state of it to delete).
    pub fn stop(&self, id: &str) -> Result<bool, String> {
        let Some(state) = self.state(id)? else {
            return Ok(false);
        };
        if state.pid <= 0 || !is_sentry_of(state.pid, id) {
            return Ok(true);
        }
        // SAFETY: plain syscall; the pid was just checked to be this sandbox's sentry.
        unsafe { libc::kill(state.pid, libc::SIGKILL) };
        let deadline = Instant::now() + CONTROL_LIMIT;
        while process_runs(state.pid) && is_sentry_of(state.pid, id) {
            if Instant::now() > deadline {
                return Err(format!(
                    "the sentry of sandbox {id} (pid {}) was killed but did not end within {} s",
                    state.pid,
                    CONTROL_LIMIT.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(true)
    }

    /// Deletes what runsc keeps of sandbox `id` (its state, its host control group) in the
    /// background: it takes runsc a second or more, and nothing runs in the sandbox any
    /// more once [`Runsc::stop`] has returned. The delete outlives this process if need
    /// be (its own process group; reaped by a thread here while this process lives).
    pub fn delete_in_background(&self, id: &str) -> Result<(), String> {
        use std::os::unix::process::CommandExt;
        let mut command = self.command(&["delete", "--force", id]);
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let mut child = command
            .spawn()
            .map_err(|e| format!("could not start runsc delete: {e}"))?;
        std::thread::Builder::new()
            .name("stet-gvisor-delete".into())
            .spawn(move || {
                let _ = child.wait();
            })
            .map_err(|e| format!("could not start a thread: {e}"))?;
        Ok(())
    }
}

/// What `runsc state` says of a sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    pub status: String,
    /// The sandbox's host process (the sentry), 0 when not running.
    pub pid: i32,
}

fn ok(ran: Ran) -> Result<(), String> {
    if ran.success() {
        Ok(())
    } else {
        Err(ran.why())
    }
}

/// Whether host process `pid` is the sentry of sandbox `id`: `runsc-sandbox … boot … ID`.
fn is_sentry_of(pid: i32, id: &str) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .collect();
    args.iter().any(|a| *a == b"boot") && args.last() == Some(&id.as_bytes())
}

/// Whether host process `pid` exists (and is not a zombie).
fn process_runs(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}
