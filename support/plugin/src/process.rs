//! A running host child process: output streamed live, stdin written then closed, killed
//! by process group, reaped exactly once.
//!
//! The only backend-specific part is the `Command` the caller builds; everything here
//! applies to any runtime whose processes are children of the plugin (a CLI such as
//! `bwrap`, `runc`, `container exec`).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, ChildStderr, ChildStdout, Command, Stdio};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex, Weak};

use stet_plugin_api::{ExitStatus, PluginError, ProcessPlugin, Sink, Stream};

/// The largest chunk handed to the host at once. The pipe gives whatever it has as soon
/// as it has it; this only bounds one read.
const CHUNK: usize = 64 * 1024;
/// Chunks in flight between the reader threads and the host's sink: bounds memory when
/// the process writes faster than the host reads.
const IN_FLIGHT: usize = 16;

/// What the killer and the waiter share.
pub struct Shared {
    pid: i32,
    inner: Mutex<Inner>,
}

struct Inner {
    child: Option<Child>,
    /// Set once the child is reaped; from then on its pid may belong to someone else.
    status: Option<std::process::ExitStatus>,
    killed: bool,
}

impl Shared {
    /// Kills the process's whole group (it leads one). Idempotent; a no-op once reaped,
    /// because the pid may have been reused by then. The lock makes "not reaped yet" and
    /// the kill one step: the waiter reaps only while holding it.
    pub fn kill(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.status.is_none() {
            // SAFETY: plain syscall; the group is ours (not reaped, see above).
            unsafe { libc::kill(-self.pid, libc::SIGKILL) };
            inner.killed = true;
        }
    }

    /// Kills what the process left running in its group once it has exited by itself,
    /// without counting as a `kill` of the process. A no-op once reaped.
    fn end_leftovers(&self) {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.status.is_none() {
            // SAFETY: plain syscall; the group is ours (not reaped, see `kill`).
            unsafe { libc::kill(-self.pid, libc::SIGKILL) };
        }
    }

    /// Whether it is still running (not reaped).
    pub fn running(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .status
            .is_none()
    }

    /// Reaps the child (it must have exited, or be about to). Returns its status and
    /// whether `kill` was called before.
    fn reap(&self) -> Result<(std::process::ExitStatus, bool), PluginError> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(status) = inner.status {
            return Ok((status, inner.killed));
        }
        let mut child = inner
            .child
            .take()
            .ok_or_else(|| PluginError::internal("the process was already reaped"))?;
        let status = child
            .wait()
            .map_err(|e| PluginError::backend(format!("could not wait for the process: {e}")))?;
        inner.status = Some(status);
        Ok((status, inner.killed))
    }
}

/// The processes one runtime instance started, per sandbox, so that its `teardown` can
/// kill them. (Processes started by another stet process are found through the records.)
/// The host calls from several threads at once: it is behind a lock.
#[derive(Default)]
pub struct Processes {
    by_sandbox: Mutex<HashMap<String, Vec<Weak<Shared>>>>,
}

impl Processes {
    /// Notes that `process` runs in `sandbox` (forgetting the ones already dropped).
    pub fn register(&self, sandbox: &str, process: &Arc<Shared>) {
        let mut all = self.by_sandbox.lock().unwrap_or_else(|p| p.into_inner());
        let list = all.entry(sandbox.to_string()).or_default();
        list.retain(|w| w.strong_count() > 0);
        list.push(Arc::downgrade(process));
    }

    /// The processes noted in `sandbox` whose handles still exist, forgotten here.
    pub fn take(&self, sandbox: &str) -> Vec<Arc<Shared>> {
        self.by_sandbox
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(sandbox)
            .unwrap_or_default()
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }
}

/// Blocks until process `pid` (our child) has exited, without reaping it, so that its pid
/// and process group stay ours until [`Shared::reap`]. False when there is no such child
/// (already reaped).
fn wait_exited(pid: i32) -> bool {
    loop {
        // SAFETY: `info` is plain data; waitid writes into it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 {
            return true;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return false;
        }
    }
}

/// How the exit status of the spawned program maps to the sandboxed process's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusEncoding {
    /// The child is the process itself: a signal death is reported as such.
    Direct,
    /// The child is a launcher that exits with 128 + N when its process died of signal N
    /// (as shells, `bwrap` and container CLIs do).
    ShellStyle,
}

/// A process started by [`start`].
pub struct HostProcess {
    shared: Arc<Shared>,
    stdout: Mutex<Option<ChildStdout>>,
    stderr: Mutex<Option<ChildStderr>>,
    encoding: StatusEncoding,
    /// The sandbox record's note of this process, removed once it is reaped.
    note: Option<PathBuf>,
}

/// Starts `command` (whose program, arguments, environment and working directory the
/// caller set) as the leader of a new process group, with piped stdio; writes `stdin` to
/// it on a thread of its own and closes it.
///
/// `spawn` performs the actual `fork`/`exec`; it exists so that a runtime can make it
/// happen on a thread of its choosing (see the bubblewrap example's `--die-with-parent`).
pub fn start(
    mut command: Command,
    stdin: Vec<u8>,
    encoding: StatusEncoding,
    spawn: impl FnOnce(Command) -> std::io::Result<Child>,
) -> Result<(HostProcess, Arc<Shared>), std::io::Error> {
    command
        .stdin(if stdin.is_empty() {
            Stdio::null()
        } else {
            Stdio::piped()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that kill reaches what it started too.
        .process_group(0);
    let mut child = spawn(command)?;
    if let Some(mut input) = child.stdin.take() {
        // A process that stops reading early closes the pipe: that is its business.
        let writer = std::thread::Builder::new()
            .name("stet-stdin".into())
            .spawn(move || {
                let _ = input.write_all(&stdin);
            });
        if let Err(e) = writer {
            // SAFETY: plain syscall on our own child's group (not reaped yet).
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            return Err(e);
        }
    }
    let shared = Arc::new(Shared {
        pid: child.id() as i32,
        inner: Mutex::new(Inner {
            child: None,
            status: None,
            killed: false,
        }),
    });
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    shared.inner.lock().unwrap().child = Some(child);
    Ok((
        HostProcess {
            shared: shared.clone(),
            stdout: Mutex::new(stdout),
            stderr: Mutex::new(stderr),
            encoding,
            note: None,
        },
        shared,
    ))
}

impl HostProcess {
    /// The process's pid (it leads its own process group).
    pub fn pid(&self) -> i32 {
        self.shared.pid
    }

    /// Removes `note` once the process is reaped.
    pub fn with_note(mut self, note: PathBuf) -> Self {
        self.note = Some(note);
        self
    }
}

fn reader(
    mut pipe: impl Read + Send + 'static,
    stream: Stream,
    chunks: SyncSender<(Stream, Vec<u8>)>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("stet-output".into())
        .spawn(move || {
            let mut buf = vec![0u8; CHUNK];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => {
                        if chunks.send((stream, buf[..n].to_vec())).is_err() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => return,
                }
            }
        })
}

impl ProcessPlugin for HostProcess {
    /// Streams stdout and stderr chunk by chunk, in the order they arrive, until both
    /// are closed and the process has exited; then reaps it and reports how it ended.
    fn wait(&self, sink: &mut Sink<'_>) -> Result<ExitStatus, PluginError> {
        let (stdout, stderr) = (
            self.stdout.lock().unwrap().take(),
            self.stderr.lock().unwrap().take(),
        );
        let (tx, rx) = sync_channel(IN_FLIGHT);
        let spawn_err =
            |e: std::io::Error| PluginError::internal(format!("could not start a thread: {e}"));
        let mut readers = Vec::new();
        if let Some(out) = stdout {
            readers.push(reader(out, Stream::Stdout, tx.clone()).map_err(spawn_err)?);
        }
        if let Some(err) = stderr {
            readers.push(reader(err, Stream::Stderr, tx.clone()).map_err(spawn_err)?);
        }
        // Once the process itself has exited, what it left running in its group would keep
        // the pipes open forever: end it, as the end of a sandbox's pid namespace would.
        let shared = self.shared.clone();
        let exit_watch = std::thread::Builder::new()
            .name("stet-exit".into())
            .spawn(move || {
                if wait_exited(shared.pid) {
                    shared.end_leftovers();
                }
            })
            .map_err(spawn_err)?;
        drop(tx);
        for (stream, bytes) in rx {
            sink.write(stream, &bytes);
        }
        for r in readers {
            let _ = r.join();
        }
        let _ = exit_watch.join();
        let (status, killed) = self.shared.reap()?;
        if let Some(note) = &self.note {
            let _ = std::fs::remove_file(note);
        }
        Ok(match (status.code(), status.signal(), self.encoding) {
            // Killed through `kill`: whatever the launcher made of it, it was SIGKILL.
            (Some(137), _, StatusEncoding::ShellStyle) if killed => {
                ExitStatus::signalled(libc::SIGKILL)
            }
            (Some(code), _, StatusEncoding::ShellStyle) if (129..=128 + 64).contains(&code) => {
                ExitStatus::signalled(code - 128)
            }
            (Some(code), _, _) => ExitStatus::exited(code),
            (None, Some(signal), _) => ExitStatus::signalled(signal),
            (None, None, _) => {
                return Err(PluginError::backend(format!(
                    "the process ended in an unknown way: {status:?}"
                )))
            }
        })
    }

    /// Kills the process group with SIGKILL; `wait` then returns. Idempotent.
    fn kill(&self) -> Result<(), PluginError> {
        self.shared.kill();
        Ok(())
    }
}

impl Drop for HostProcess {
    /// A process dropped without `wait` (the host gave up on it) is killed and reaped, so
    /// that neither it nor a zombie outlives its handle.
    fn drop(&mut self) {
        if self.shared.running() {
            self.shared.kill();
            let _ = self.shared.reap();
            if let Some(note) = &self.note {
                let _ = std::fs::remove_file(note);
            }
        }
    }
}
