//! Host programs a runtime drives as commands: finding one, and running it to the end with
//! a time limit (the probe's trials, a sandbox's set-up). Processes that stream to the host
//! are [`crate::process`]'s.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Finds `program`: the `configured` path (named `setting` in what is said when it is not
/// an executable file), else the first `program` on `PATH`. The error says where it looked.
pub fn find(program: &str, configured: Option<&Path>, setting: &str) -> Result<PathBuf, String> {
    if let Some(path) = configured {
        return if is_executable(path) {
            Ok(path.to_path_buf())
        } else {
            Err(format!(
                "{setting} = {} is not an executable file",
                path.display()
            ))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| {
            format!(
                "{program} is not installed: it is not on PATH ({})",
                path.to_string_lossy()
            )
        })
}

/// Whether `path` is a file someone may execute.
pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Finds an executable called `name` on `path` (a `PATH`-style list), as a shell would.
pub fn find_on_path(name: &str, path: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

/// What a command run to its end printed, and how it ended.
#[derive(Debug, Clone)]
pub struct Ran {
    /// Its exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// What it wrote to standard output: its first [`OUTPUT_KEPT`] bytes.
    pub stdout: String,
    /// What it wrote to standard error: its first [`OUTPUT_KEPT`] bytes.
    pub stderr: String,
}

impl Ran {
    /// Whether it exited with code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// Its standard error, or its exit, for a message.
    pub fn why(&self) -> String {
        let stderr = self.stderr.trim();
        match (stderr.is_empty(), self.code) {
            (false, _) => stderr.to_string(),
            (true, Some(code)) => format!("it exited with code {code}"),
            (true, None) => "it was killed by a signal".to_string(),
        }
    }
}

/// Why a bounded command gave no output.
#[derive(Debug)]
pub enum RunError {
    /// It could not be started.
    Spawn(std::io::Error),
    /// It did not finish in time; its whole process group was killed.
    TimedOut(Duration),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Spawn(e) => write!(f, "could not start it: {e}"),
            RunError::TimedOut(limit) => write!(
                f,
                "it did not finish within {} s and was killed",
                limit.as_secs_f32()
            ),
        }
    }
}

impl std::error::Error for RunError {}

/// Its words, for a plugin that carries its errors as text until they become a
/// `PluginError` (`?` in a function returning `Result<_, String>`).
impl From<RunError> for String {
    fn from(e: RunError) -> String {
        e.to_string()
    }
}

/// How much of each of a bounded command's streams is kept; the rest is read and dropped,
/// so a command that prints without end neither blocks on a full pipe nor fills memory.
pub const OUTPUT_KEPT: usize = 4 << 20;

/// How long the output of a command that has exited is still read: what it wrote before
/// it exited is in the pipes; a process it left behind holding them gets this, not a wait.
const GRACE: Duration = Duration::from_millis(200);

/// Runs `command` to its end, bounded three ways: in time (at `limit` its whole process
/// group is killed — it leads a group of its own —, grandchildren included), in output
/// (the first [`OUTPUT_KEPT`] bytes of each stream kept), and in what it leaves behind (its
/// output is read until it exits, then for a moment: a daemon it started, holding the
/// pipes open, does not hold the run). Standard input is closed.
pub fn run_bounded(mut command: Command, limit: Duration) -> Result<Ran, RunError> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = command.spawn().map_err(RunError::Spawn)?;
    // Each stream is read into a buffer shared with this thread as it arrives, so what the
    // command wrote before it exited is kept even when a process it left holds the pipe.
    let (done, finished) = std::sync::mpsc::channel();
    let collect = |pipe: Option<Box<dyn Read + Send>>| {
        let kept = Arc::new(Mutex::new(Vec::new()));
        let into = kept.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            if let Some(pipe) = pipe {
                read_kept(pipe, &into);
            }
            let _ = done.send(());
        });
        kept
    };
    let out = collect(child.stdout.take().map(|p| Box::new(p) as _));
    let err = collect(child.stderr.take().map(|p| Box::new(p) as _));
    drop(done);
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < limit => std::thread::sleep(Duration::from_millis(2)),
            Ok(None) | Err(_) => {
                kill_group(&child);
                let _ = child.wait();
                return Err(RunError::TimedOut(limit));
            }
        }
    };
    let grace = Instant::now() + GRACE;
    for _ in 0..2 {
        let left = grace.saturating_duration_since(Instant::now());
        if finished.recv_timeout(left).is_err() {
            break;
        }
    }
    let text = |kept: &Mutex<Vec<u8>>| {
        String::from_utf8_lossy(&kept.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    };
    Ok(Ran {
        code: status.code(),
        stdout: text(&out),
        stderr: text(&err),
    })
}

/// [`run_bounded`] of `program` with `args` and an environment built from scratch: `env`
/// only, nothing inherited.
pub fn run_clean<I, S>(
    program: &Path,
    args: I,
    env: &[(&str, &OsStr)],
    limit: Duration,
) -> Result<Ran, RunError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = Command::new(program);
    command.args(args).env_clear();
    for (name, value) in env {
        command.env(name, value);
    }
    run_bounded(command, limit)
}

/// Reads `pipe` to its end, keeping its first [`OUTPUT_KEPT`] bytes in `kept` as they come.
fn read_kept(mut pipe: Box<dyn Read + Send>, kept: &Mutex<Vec<u8>>) {
    let mut chunk = [0u8; 64 * 1024];
    loop {
        match pipe.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => {
                let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
                let room = OUTPUT_KEPT.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Kills the process group `child` leads (not reaped yet, so its id is still its own).
fn kill_group(child: &std::process::Child) {
    // SAFETY: a plain syscall on the group of our own child, which it leads.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bounded_run_collects_output_and_a_slow_one_is_killed() {
        let mut c = Command::new("sh");
        c.args(["-c", "echo out; echo err >&2; exit 3"]);
        let ran = run_bounded(c, Duration::from_secs(10)).unwrap();
        assert_eq!((ran.code, ran.stdout.as_str()), (Some(3), "out\n"));
        assert_eq!(ran.why(), "err");
        let mut slow = Command::new("sleep");
        slow.arg("30");
        let err = run_bounded(slow, Duration::from_millis(100)).unwrap_err();
        assert!(matches!(err, RunError::TimedOut(_)), "{err}");
    }

    #[test]
    fn a_daemon_left_holding_the_pipes_does_not_hold_the_run() {
        let mut c = Command::new("sh");
        // The background sleep keeps stdout open after sh exits.
        c.args(["-c", "echo started; sleep 30 & exit 0"]);
        let started = Instant::now();
        let ran = run_bounded(c, Duration::from_secs(10)).unwrap();
        assert!(ran.success());
        assert!(started.elapsed() < Duration::from_secs(10));
        // What it wrote before it exited is kept, though the pipe is still held open.
        assert_eq!(ran.stdout, "started\n");
    }

    #[test]
    fn at_its_limit_the_whole_group_is_killed_grandchildren_too() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild");
        let mut c = Command::new("sh");
        // A grandchild holding the pipes, then the command waits past its limit.
        c.arg("-c").arg(format!(
            "sleep 300 & echo $! > {}; wait",
            pid_file.display()
        ));
        let err = run_bounded(c, Duration::from_millis(500)).unwrap_err();
        assert!(matches!(err, RunError::TimedOut(_)), "{err}");
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The grandchild was sent SIGKILL with its group: it ends (reaped by init, or a
        // zombie) as soon as the kernel delivers it; without the group kill it would sleep
        // for five minutes.
        let state = || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .next();
            state.map(str::to_string)
        };
        let since = Instant::now();
        while !matches!(state().as_deref(), None | Some("Z")) {
            assert!(
                since.elapsed() < Duration::from_secs(30),
                "the grandchild still runs: {:?}",
                state()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn output_past_what_is_kept_is_read_and_dropped() {
        let mut c = Command::new("sh");
        c.args([
            "-c",
            "head -c 20000000 /dev/zero | tr '\\0' x; echo done >&2",
        ]);
        let ran = run_bounded(c, Duration::from_secs(60)).unwrap();
        assert!(ran.success(), "{}", ran.why());
        assert_eq!(ran.stdout.len(), OUTPUT_KEPT);
        assert_eq!(ran.stderr, "done\n");
    }

    #[test]
    fn a_clean_run_sees_only_the_given_environment() {
        let out = run_clean(
            Path::new("/bin/sh"),
            ["-c", "env"],
            &[("ONLY", OsStr::new("this"))],
            Duration::from_secs(10),
        )
        .unwrap();
        assert!(out.success());
        let names: Vec<&str> = out
            .stdout
            .lines()
            .filter_map(|l| l.split('=').next())
            .filter(|n| !["PWD", "SHLVL", "_"].contains(n))
            .collect();
        assert_eq!(names, ["ONLY"]);
    }

    #[test]
    fn finds_executables_on_a_path_list() {
        assert_eq!(
            find_on_path("sh", OsStr::new("/nonexistent:/bin")),
            Some(PathBuf::from("/bin/sh"))
        );
        assert_eq!(
            find_on_path("no-such-program-here", OsStr::new("/bin")),
            None
        );
    }

    #[test]
    fn a_program_is_found_on_path_or_where_configured() {
        assert!(find("sh", None, "x").is_ok());
        let err = find("stet-no-such-program", None, "x").unwrap_err();
        assert!(err.contains("not on PATH"), "{err}");
        let err = find("sh", Some(Path::new("/nonexistent/sh")), "[plugins.x] sh").unwrap_err();
        assert!(err.starts_with("[plugins.x] sh = /nonexistent/sh"), "{err}");
    }
}
