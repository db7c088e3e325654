//! Host programs a runtime drives as commands: finding one, and running it to the end with
//! a time limit (the probe's trials, a sandbox's set-up). Processes that stream to the host
//! are [`crate::process`]'s.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
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

/// What a command run to its end printed, and how it ended.
#[derive(Debug, Clone)]
pub struct Ran {
    /// Its exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
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

/// Runs `command` with stdin closed and a wall-clock limit, collecting its output; kills
/// its process group at the limit. Output is read until the command exits, not until
/// its pipes close: a command that leaves a daemon behind (holding them open) still
/// returns.
pub fn run_bounded(mut command: Command, limit: Duration) -> Result<Ran, String> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = command
        .spawn()
        .map_err(|e| format!("could not start it: {e}"))?;
    let (sender, receiver) = std::sync::mpsc::channel();
    let collect = |pipe: Option<Box<dyn Read + Send>>, which: usize| {
        let sender = sender.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            let _ = sender.send((which, String::from_utf8_lossy(&bytes).into_owned()));
        })
    };
    collect(child.stdout.take().map(|p| Box::new(p) as _), 0);
    collect(child.stderr.take().map(|p| Box::new(p) as _), 1);
    drop(sender);
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < limit => std::thread::sleep(Duration::from_millis(2)),
            Ok(None) | Err(_) => {
                // SAFETY: plain syscall on our own child's group (not reaped yet).
                unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                let _ = child.wait();
                return Err(format!(
                    "it did not finish within {} s and was killed",
                    limit.as_secs_f32()
                ));
            }
        }
    };
    // What it wrote before it exited is in the pipes; a daemon it left holding them
    // open gets a moment, not a wait.
    let mut texts = [String::new(), String::new()];
    let grace = Instant::now() + Duration::from_millis(200);
    for _ in 0..2 {
        let left = grace.saturating_duration_since(Instant::now());
        match receiver.recv_timeout(left) {
            Ok((which, text)) => texts[which] = text,
            Err(_) => break,
        }
    }
    let [stdout, stderr] = texts;
    Ok(Ran {
        code: status.code(),
        stdout,
        stderr,
    })
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
        assert!(err.contains("did not finish"), "{err}");
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
