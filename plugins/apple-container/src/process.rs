//! Processes as `container exec` children: output streamed live, the CLI's exit code read
//! as the process's, and kill through the service.

use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stet_plugin_api::{ExitStatus, PluginError, ProcessPlugin, ProcessSpec, ROption, Sink, Stream};

use crate::cli::{self, Cli, Kind};
use crate::sandbox::{check_env_name, check_operand};

/// Largest chunk read from the CLI at once; a chunk is handed on as soon as it is read.
const CHUNK: usize = 64 * 1024;
/// Chunks in flight between the reading threads and the sink: output is held in bounded
/// memory however fast the process writes and however slow the sink is.
const IN_FLIGHT: usize = 16;
/// How long output may still arrive after the CLI has exited (the CLI itself waits up to
/// 3 s for its own pipes) before whatever holds the pipes open is killed.
const PIPE_GRACE: Duration = Duration::from_secs(5);
/// How long a CLI told to stop (SIGTERM, which it forwards to the process) gets before it
/// is killed, when the service could not kill the process itself.
const TERM_GRACE: Duration = Duration::from_secs(3);
/// How much of the end of standard error is kept to recognise the CLI's own errors.
const TAIL: usize = 4096;

/// The arguments of the `container exec` that runs a process.
///
/// `container exec [-i] [-e K=V…] [-w dir] <sandbox> argv…`: `-i` only when there is input
/// to give (without it the process's input is closed); the options before the id, the
/// argv after it untouched.
pub fn exec_args(sandbox: &str, spec: &ProcessSpec) -> Result<Vec<String>, PluginError> {
    check_operand("sandbox id", sandbox)?;
    if spec.argv.is_empty() {
        return Err(PluginError::invalid_input("no program given to run"));
    }
    let mut args = vec!["exec".to_string()];
    if !spec.stdin.is_empty() {
        args.push("-i".into());
    }
    for var in spec.env.iter() {
        check_env_name(&var.name)?;
        args.push("-e".into());
        args.push(format!("{}={}", var.name, var.value));
    }
    if let ROption::RSome(dir) = &spec.workdir {
        args.push("-w".into());
        args.push(dir.to_string());
    }
    args.push(sandbox.to_string());
    args.extend(spec.argv.iter().map(|a| a.to_string()));
    Ok(args)
}

/// Starts `container exec` as a child leading its own process group, so that a Ctrl-C
/// meant for stet is not forwarded by the CLI to the process (stet decides what a first
/// signal means), and so that kill reaches whatever the CLI started on the host.
pub fn start(cli: Arc<Cli>, sandbox: &str, spec: ProcessSpec) -> Result<ExecProcess, PluginError> {
    let args = exec_args(sandbox, &spec)?;
    let mut command = Command::new(&cli.binary);
    command
        .args(&args)
        .env_clear()
        .envs(cli::environment())
        .stdin(if spec.stdin.is_empty() {
            Stdio::null()
        } else {
            Stdio::piped()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = command.spawn().map_err(|e| {
        PluginError::unavailable(format!("could not run {}: {e}", cli.binary.display()))
            .with_remedy(cli::INSTALL_REMEDY)
    })?;
    if let Some(mut input) = child.stdin.take() {
        let bytes = spec.stdin.into_vec();
        // Written beside the reading, so a process that answers before it has read all
        // its input cannot deadlock with us. A process that stops reading ends the write.
        std::thread::spawn(move || {
            let _ = input.write_all(&bytes);
        });
    }
    let pipes = Pipes {
        stdout: child.stdout.take(),
        stderr: child.stderr.take(),
    };
    Ok(ExecProcess {
        sandbox: sandbox.to_string(),
        argv0: spec.argv[0].to_string(),
        cli,
        group: child.id() as libc::pid_t,
        child: Mutex::new(Some(child)),
        pipes: Mutex::new(Some(pipes)),
        killed: AtomicBool::new(false),
    })
}

struct Pipes {
    stdout: Option<std::process::ChildStdout>,
    stderr: Option<std::process::ChildStderr>,
}

/// A running `container exec`, as the host holds it.
pub struct ExecProcess {
    sandbox: String,
    argv0: String,
    cli: Arc<Cli>,
    /// The child's process group (its own pid).
    group: libc::pid_t,
    /// The CLI. Reaped only under this lock, so a signal sent under it never reaches a
    /// process that has reused the id.
    child: Mutex<Option<Child>>,
    pipes: Mutex<Option<Pipes>>,
    killed: AtomicBool,
}

impl ExecProcess {
    /// How the CLI ended, if it has; reaps it.
    fn try_exit(&self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// Waits for the CLI to end, without holding the lock for long, so that `kill` can
    /// run meanwhile.
    fn reap(&self) -> Result<std::process::ExitStatus, PluginError> {
        loop {
            {
                let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
                let Some(c) = child.as_mut() else {
                    return Err(PluginError::internal("the container CLI child is gone"));
                };
                match c.try_wait() {
                    Ok(Some(status)) => return Ok(status),
                    Ok(None) => {}
                    Err(e) => {
                        return Err(PluginError::internal(format!(
                            "could not wait for `container exec`: {e}"
                        )))
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends `signal` to the CLI's process group, unless the CLI has been reaped (then its
    /// id may belong to someone else). With `whole_group` false, to the CLI alone.
    fn signal(&self, signal: libc::c_int, whole_group: bool) {
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        let running = child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)));
        if running {
            let target = if whole_group { -self.group } else { self.group };
            // SAFETY: kill(2) with a pid we own (our unreaped child or its group).
            unsafe {
                libc::kill(target, signal);
            }
        }
    }

    /// Sends SIGKILL to what is left of the CLI's group after the CLI has been reaped:
    /// only used while its pipes are still held open, which keeps the group's id taken.
    fn kill_orphaned_group(&self) {
        // SAFETY: kill(2); the group id stays reserved while any member holds our pipes.
        unsafe {
            libc::kill(-self.group, libc::SIGKILL);
        }
    }

    /// Streams the CLI's output into `sink` until it ends, then reads how it ended.
    fn pump(&self, sink: &mut Sink<'_>) -> Result<ExitStatus, PluginError> {
        let pipes = self
            .pipes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| {
                PluginError::invalid_input("wait was already called for this process")
            })?;
        let (tx, rx) = sync_channel::<(Stream, Vec<u8>)>(IN_FLIGHT);
        if let Some(out) = pipes.stdout {
            read_into(out, Stream::Stdout, tx.clone());
        }
        if let Some(err) = pipes.stderr {
            read_into(err, Stream::Stderr, tx.clone());
        }
        drop(tx);
        let mut tail = Vec::new();
        let mut exited_at: Option<Instant> = None;
        let mut group_killed = false;
        loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok((stream, bytes)) => {
                    if stream == Stream::Stderr {
                        keep_tail(&mut tail, &bytes);
                    }
                    sink.write(stream, &bytes);
                }
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    if exited_at.is_none() && self.try_exit().is_some() {
                        exited_at = Some(Instant::now());
                    }
                    // The CLI is gone but something it started still holds the pipes.
                    if let Some(at) = exited_at {
                        if at.elapsed() > PIPE_GRACE && !group_killed {
                            self.kill_orphaned_group();
                            group_killed = true;
                        } else if at.elapsed() > PIPE_GRACE * 2 {
                            break;
                        }
                    }
                }
            }
        }
        let status = self.reap()?;
        self.exit_status(status, &String::from_utf8_lossy(&tail))
    }

    /// How the process ended, from the CLI's exit.
    fn exit_status(
        &self,
        status: std::process::ExitStatus,
        stderr_tail: &str,
    ) -> Result<ExitStatus, PluginError> {
        if self.killed.load(Ordering::SeqCst) {
            // Killed on request: by the signal the CLI reports, else by SIGKILL.
            let read = read_exit(status.code(), status.signal());
            return Ok(if read.signal.is_some() {
                read
            } else {
                ExitStatus::signalled(libc::SIGKILL)
            });
        }
        if let Some(error) = cli_failure(&self.sandbox, &self.argv0, status.code(), stderr_tail) {
            return Err(error);
        }
        Ok(read_exit(status.code(), status.signal()))
    }

    /// Kills the sandbox's processes, this one with them.
    ///
    /// `container kill -s KILL <sandbox>`: signals cannot be sent to an exec'd process
    /// through the CLI, and killing the CLI (SIGKILL) would leave the process running in
    /// the VM. Then the CLI, if still there, is killed too, so that `wait` returns at once.
    /// When the service cannot kill (it hangs, or answers an error), the CLI is sent
    /// SIGTERM, which it forwards to the process, and given a moment before it is killed.
    fn kill_sandbox(&self) -> Result<(), PluginError> {
        if self.killed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let args = ["kill", "-s", "KILL", self.sandbox.as_str()];
        let outcome = match self.cli.run(&args, self.cli.limits.command) {
            Ok(out) if out.success() => Ok(()),
            Ok(out) => match cli::classify(&cli::error_text(&out.stderr), out.code) {
                // Nothing left running to kill.
                Kind::NotFound | Kind::NotRunning => Ok(()),
                _ => Err(cli::failure(&args, &out)),
            },
            Err(e) => Err(e),
        };
        match outcome {
            Ok(()) => {
                self.signal(libc::SIGKILL, true);
                Ok(())
            }
            Err(e) => {
                self.signal(libc::SIGTERM, false);
                let deadline = Instant::now() + TERM_GRACE;
                while Instant::now() < deadline {
                    if self.try_exit().is_some() {
                        return Ok(());
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                self.signal(libc::SIGKILL, true);
                Err(PluginError::new(
                    e.code,
                    format!(
                        "could not kill the processes of sandbox {}: {}",
                        self.sandbox, e.message
                    ),
                )
                .with_remedy(format!(
                    "the process may still run inside the sandbox; tear it down (`container \
                     delete --force {}`); {}",
                    self.sandbox,
                    cli::RESTART_REMEDY
                )))
            }
        }
    }
}

impl ProcessPlugin for ExecProcess {
    fn wait(&self, sink: &mut Sink<'_>) -> Result<ExitStatus, PluginError> {
        self.pump(sink)
    }

    fn kill(&self) -> Result<(), PluginError> {
        self.kill_sandbox()
    }
}

impl Drop for ExecProcess {
    /// A process dropped before it ended keeps running (as a Docker exec would); its CLI
    /// is reaped in the background so that no zombie is left.
    fn drop(&mut self) {
        let child = self
            .child
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(mut child) = child {
            if matches!(child.try_wait(), Ok(None)) {
                std::thread::spawn(move || {
                    let _ = child.wait();
                });
            }
        }
    }
}

fn read_into<R: Read + Send + 'static>(
    mut pipe: R,
    stream: Stream,
    tx: SyncSender<(Stream, Vec<u8>)>,
) {
    std::thread::spawn(move || {
        let mut buffer = vec![0u8; CHUNK];
        loop {
            match pipe.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => {
                    if tx.send((stream, buffer[..n].to_vec())).is_err() {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    });
}

/// Whether `text` names `id` as a whole word (not as part of a longer name).
fn mentions(text: &str, id: &str) -> bool {
    let name_char = |c: char| c.is_ascii_alphanumeric() || "_.-".contains(c);
    text.match_indices(id).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + id.len()..].chars().next();
        !before.is_some_and(name_char) && !after.is_some_and(name_char)
    })
}

fn keep_tail(tail: &mut Vec<u8>, bytes: &[u8]) {
    tail.extend_from_slice(bytes);
    if tail.len() > TAIL {
        tail.drain(..tail.len() - TAIL);
    }
}

/// The process's exit from the CLI's: its exit code is the process's, and a process ended
/// by signal N is reported by the CLI as 128 + N (as shells do), so 129–159 read as
/// signals. The CLI cannot tell a process that died of SIGTERM from one that called
/// `exit(143)`; both read as signal 15.
pub fn read_exit(code: Option<i32>, signal: Option<i32>) -> ExitStatus {
    match (code, signal) {
        (Some(code), _) if (129..=128 + 31).contains(&code) => ExitStatus::signalled(code - 128),
        (Some(code), _) => ExitStatus::exited(code),
        // The CLI itself was killed (not by us): the process's end is unknown; the
        // signal that ended the CLI is the best answer there is.
        (None, Some(signal)) => ExitStatus::signalled(signal),
        (None, None) => ExitStatus::signalled(libc::SIGKILL),
    }
}

/// The CLI's own failure at the end of standard error, as opposed to the process's exit:
/// the sandbox is missing or stopped, the service is down, or the CLI refused its
/// arguments. Matched narrowly (the CLI's `Error:` line naming the sandbox, or the
/// service hint, or usage text after exit 64) so that a process printing an error of its
/// own and exiting 1 is still read as that process's exit.
pub fn cli_failure(
    sandbox: &str,
    argv0: &str,
    code: Option<i32>,
    tail: &str,
) -> Option<PluginError> {
    let from = if tail.starts_with("Error: ") {
        0
    } else {
        tail.rfind("\nError: ")? + 1
    };
    let text = cli::error_text(&tail[from..]);
    let about_sandbox = mentions(&text, sandbox);
    let usage = tail.to_ascii_lowercase().contains("usage: container exec");
    match (code, cli::classify(&text, code)) {
        (Some(1), Kind::ServiceDown) => Some(
            PluginError::unavailable(format!("`container exec` failed: {text}"))
                .with_remedy(cli::START_REMEDY),
        ),
        (Some(1), Kind::NotFound) if about_sandbox => Some(PluginError::not_found(format!(
            "sandbox {sandbox} does not exist: {text}"
        ))),
        (Some(1), Kind::NotRunning) if about_sandbox => Some(
            PluginError::backend(format!(
                "sandbox {sandbox} is not running, so {argv0} could not start in it: {text}"
            ))
            .with_remedy("create a new sandbox"),
        ),
        (Some(64), _) if usage => Some(
            PluginError::backend(format!("`container exec` refused its arguments: {text}"))
                .with_remedy(
                "install container 0.7 or later (`container --version` says which is installed)",
            ),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stet_plugin_api::{EnvVar, ErrorCode};

    fn spec(argv: &[&str], stdin: &[u8]) -> ProcessSpec {
        ProcessSpec {
            argv: argv.iter().map(|a| (*a).into()).collect(),
            env: Default::default(),
            workdir: ROption::RNone,
            stdin: stdin.to_vec().into(),
        }
    }

    #[test]
    fn the_exact_exec_command() {
        let mut s = spec(&["sh", "-c", "echo $A -w"], b"input");
        s.env = vec![EnvVar::new("A", "1=2"), EnvVar::new("B", "")].into();
        s.workdir = ROption::RSome("/lane/sub".into());
        assert_eq!(
            exec_args("stet-1-2-0", &s).unwrap(),
            [
                "exec",
                "-i",
                "-e",
                "A=1=2",
                "-e",
                "B=",
                "-w",
                "/lane/sub",
                "stet-1-2-0",
                "sh",
                "-c",
                "echo $A -w"
            ]
        );
    }

    #[test]
    fn no_input_no_dash_i() {
        assert_eq!(
            exec_args("sb", &spec(&["echo", "hello"], b"")).unwrap(),
            ["exec", "sb", "echo", "hello"]
        );
    }

    #[test]
    fn refuses_an_empty_argv_a_bad_name_and_an_option_like_id() {
        assert_eq!(
            exec_args("sb", &spec(&[], b"")).unwrap_err().code,
            ErrorCode::INVALID_INPUT
        );
        let mut s = spec(&["true"], b"");
        s.env = vec![EnvVar::new("", "x")].into();
        assert_eq!(
            exec_args("sb", &s).unwrap_err().code,
            ErrorCode::INVALID_INPUT
        );
        assert_eq!(
            exec_args("--all", &spec(&["true"], b"")).unwrap_err().code,
            ErrorCode::INVALID_INPUT
        );
    }

    #[test]
    fn exit_codes_and_signal_deaths() {
        assert_eq!(read_exit(Some(0), None), ExitStatus::exited(0));
        assert_eq!(read_exit(Some(7), None), ExitStatus::exited(7));
        assert_eq!(read_exit(Some(128), None), ExitStatus::exited(128));
        assert_eq!(read_exit(Some(137), None), ExitStatus::signalled(9));
        assert_eq!(read_exit(Some(143), None), ExitStatus::signalled(15));
        assert_eq!(read_exit(Some(159), None), ExitStatus::signalled(31));
        assert_eq!(read_exit(Some(160), None), ExitStatus::exited(160));
        // #2210: a missing executable is 255, like a real `exit 255`.
        assert_eq!(read_exit(Some(255), None), ExitStatus::exited(255));
        assert_eq!(read_exit(None, Some(15)), ExitStatus::signalled(15));
    }

    #[test]
    fn the_cli_s_own_errors_are_told_from_the_process_s() {
        let sb = "stet-1-2-0";
        let e = cli_failure(
            sb,
            "echo",
            Some(1),
            "Error: get failed: container stet-1-2-0 not found\n",
        )
        .unwrap();
        assert_eq!(e.code, ErrorCode::NOT_FOUND);
        let e = cli_failure(
            sb,
            "echo",
            Some(1),
            "Error: notFound: \"container stet-1-2-0\"\n",
        )
        .unwrap();
        assert_eq!(e.code, ErrorCode::NOT_FOUND);
        let e = cli_failure(
            sb,
            "echo",
            Some(1),
            "Error: container stet-1-2-0 is not running\n",
        )
        .unwrap();
        assert_eq!(e.code, ErrorCode::BACKEND);
        assert!(e.message.contains("is not running"));
        let e = cli_failure(
            sb,
            "echo",
            Some(1),
            "Error: XPC connection error: Connection invalid\nEnsure container system service has been started with `container system start`.\n",
        )
        .unwrap();
        assert_eq!(e.code, ErrorCode::UNAVAILABLE);
        let e = cli_failure(
            sb,
            "echo",
            Some(64),
            "Error: Unknown option '-i'\nUsage: container exec [<options>] <container-id> <arguments> ...\n",
        )
        .unwrap();
        assert_eq!(e.code, ErrorCode::BACKEND);

        // The process's own: no error.
        assert!(cli_failure(sb, "ls", Some(1), "Error: file not found\n").is_none());
        assert!(cli_failure(sb, "ls", Some(1), "ls: cannot access 'x': No such file\n").is_none());
        assert!(cli_failure(sb, "x", Some(64), "Error: usage: x [-v]\n").is_none());
        assert!(cli_failure(
            sb,
            "x",
            Some(2),
            "Error: get failed: container stet-1-2-0 not found\n"
        )
        .is_none());
        assert!(cli_failure(
            sb,
            "x",
            Some(1),
            "Error: get failed: container other not found\n"
        )
        .is_none());
        assert!(cli_failure(
            sb,
            "x",
            Some(1),
            "Error: get failed: container stet-1-2-01 not found\n"
        )
        .is_none());
        // Output before the CLI's error line does not hide it.
        assert!(cli_failure(
            sb,
            "x",
            Some(1),
            "some output\nError: get failed: container stet-1-2-0 not found\n"
        )
        .is_some());
    }

    #[test]
    fn the_tail_keeps_the_end() {
        let mut tail = Vec::new();
        keep_tail(&mut tail, &vec![b'a'; TAIL]);
        keep_tail(&mut tail, b"Error: x\n");
        assert_eq!(tail.len(), TAIL);
        assert!(tail.ends_with(b"Error: x\n"));
    }
}
