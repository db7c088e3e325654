//! Plumbing shared by stet's own plugins.
//!
//! This is not part of the public SDK (`stet-plugin-api`): it holds helpers that more than
//! one of the plugins in this repository needs, so that none of them is copied. Third-party
//! plugins may use it, but it makes no stability promise.

#![deny(missing_docs)]

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use wait_timeout::ChildExt;

pub mod private_dir;
pub mod url;

/// What a bounded command printed and how it ended.
#[derive(Debug, Clone)]
pub struct CommandOutput {
    /// The exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// Everything it wrote to standard output.
    pub stdout: String,
    /// Everything it wrote to standard error.
    pub stderr: String,
}

impl CommandOutput {
    /// Whether it exited with code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// What an agent's CLI answered to `BINARY --version` (`ran`), trimmed: the version a
/// harness's probe reports; or why it gave none, in words naming the binary.
pub fn version_of(binary: &Path, ran: Result<CommandOutput, String>) -> Result<String, String> {
    match ran {
        Ok(out) if out.success() => Ok(out.stdout.trim().to_string()),
        Ok(out) => Err(format!(
            "`{} --version` exited with {:?}: {}",
            binary.display(),
            out.code,
            out.stderr.trim()
        )),
        Err(e) => Err(format!("`{} --version`: {e}", binary.display())),
    }
}

/// Why a bounded command gave no output.
#[derive(Debug)]
pub enum CommandError {
    /// It could not be started.
    Spawn(std::io::Error),
    /// It did not finish in time and was killed.
    TimedOut(Duration),
}

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommandError::Spawn(e) => write!(f, "could not start it: {e}"),
            CommandError::TimedOut(limit) => {
                write!(
                    f,
                    "it did not answer within {} s and was killed",
                    limit.as_secs_f32()
                )
            }
        }
    }
}

/// Runs `program` with `args` and an environment built from scratch (`env` only, nothing
/// inherited), standard input closed, and a wall-clock `limit`; kills it when the limit
/// passes. Output is read on helper threads so a chatty program cannot block on a full
/// pipe.
pub fn run_bounded<I, S>(
    program: &Path,
    args: I,
    env: &[(&str, &OsStr)],
    limit: Duration,
) -> Result<CommandOutput, CommandError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = Command::new(program);
    command
        .args(args)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().map_err(CommandError::Spawn)?;
    let stdout = read_in_background(child.stdout.take());
    let stderr = read_in_background(child.stderr.take());
    let status = match child.wait_timeout(limit).map_err(CommandError::Spawn)? {
        Some(status) => status,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(CommandError::TimedOut(limit));
        }
    };
    Ok(CommandOutput {
        code: status.code(),
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

fn read_in_background<R: Read + Send + 'static>(
    pipe: Option<R>,
) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut text);
        }
        String::from_utf8_lossy(&text).into_owned()
    })
}

/// Finds an executable called `name` on `path` (a `PATH`-style list), as a shell would.
pub fn find_on_path(name: &str, path: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// This machine as `os/arch` (`linux/x86_64`, `macos/aarch64`).
pub fn platform() -> String {
    format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH)
}

/// Reads a file a sandbox could have written, as data and no more: only a regular file is
/// read (a symbolic link is not followed: the file opened must be the very one looked at),
/// and at most `limit` bytes of it.
pub fn read_untrusted(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let looked = std::fs::symlink_metadata(path)?;
    if !looked.file_type().is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if looked.len() > limit {
        return Err(std::io::Error::other(format!(
            "{} bytes, more than the {limit} read",
            looked.len()
        )));
    }
    let file = std::fs::File::open(path)?;
    let opened = file.metadata()?;
    // Swapped for a link (or another file) between the look and the open.
    if (opened.dev(), opened.ino()) != (looked.dev(), looked.ino()) || !opened.is_file() {
        return Err(std::io::Error::other(
            "the file changed while it was opened",
        ));
    }
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_command_is_killed_at_its_limit() {
        let started = std::time::Instant::now();
        let result = run_bounded(
            Path::new("/bin/sh"),
            ["-c", "sleep 30"],
            &[],
            Duration::from_millis(200),
        );
        assert!(matches!(result, Err(CommandError::TimedOut(_))));
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn bounded_command_sees_only_the_given_environment() {
        let out = run_bounded(
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
}
