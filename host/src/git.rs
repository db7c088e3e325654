//! Running git: one place that sets stet's identity for the commits it makes (lanes,
//! reservation and landing markers), whatever the person has configured, and never lets
//! git prompt for credentials.

use std::path::Path;
use std::process::{Command, Output};

/// A git command that failed, with what it said.
#[derive(Debug, thiserror::Error)]
#[error("git {args} in {dir}: {detail}")]
pub struct GitError {
    /// The arguments.
    pub args: String,
    /// Where it ran.
    pub dir: String,
    /// What git said.
    pub detail: String,
}

/// Runs git in `dir` and returns its output whatever its exit status.
pub fn output(dir: &Path, args: &[&str]) -> Result<Output, GitError> {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "stet")
        .env("GIT_AUTHOR_EMAIL", "stet@localhost")
        .env("GIT_COMMITTER_NAME", "stet")
        .env("GIT_COMMITTER_EMAIL", "stet@localhost")
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|e| GitError {
            args: args.join(" "),
            dir: dir.display().to_string(),
            detail: format!("cannot run git: {e}"),
        })
}

/// Runs git in `dir`; a failure carries what git said on stderr. Returns stdout, trimmed.
pub fn run(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    let out = output(dir, args)?;
    if !out.status.success() {
        return Err(GitError {
            args: args.join(" "),
            dir: dir.display().to_string(),
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}
