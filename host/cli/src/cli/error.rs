//! The error a command ends with, printed once at the top as
//! `error: … / caused by: … / hint: …`, and the exit codes. The library's errors
//! (`crate::error::Error`) become one by their kind; a command's own refusals are made
//! here.

use std::fmt;
use std::process::ExitCode;

/// Exit codes, documented in the README and `docs/cli.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: the command did what it was asked.
    Success,
    /// 1: something failed that the person did not cause (a bug, an I/O error), or a
    /// check the command ran failed (`plugins conformance`).
    Failure,
    /// 2: the command line, a configuration file or a manifest is wrong.
    Usage,
    /// 3: nothing could run: no usable runtime or harness (or a named plugin, or an
    /// image, is unavailable), a runtime that is down, a remote that does not answer, the
    /// walls not holding, a drive's usage limit that resets later than its outage limit.
    Unusable,
    /// 4: the work ran and was not done: a drive gave some items up (each is marked failed
    /// on the remote with why; `stet queue` shows it) or landed some whose land step failed
    /// (a pull request not opened: `stet land ID`, which exits 4 too when it fails again),
    /// or `ask`'s agent failed its task.
    GaveUp,
    /// 128+N: the command stopped because of signal N (130 for Ctrl-C).
    Signal(i32),
    /// The exit status of a command run in a sandbox (`stet run`), passed through.
    Passthrough(u8),
}

impl Exit {
    /// The process exit status.
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::Unusable => 3,
            Exit::GaveUp => 4,
            Exit::Signal(n) => (128 + n).clamp(0, 255) as u8,
            Exit::Passthrough(code) => code,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit.code())
    }
}

/// A failure to report: what failed, the chain of causes, and what to try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    /// What failed.
    pub message: String,
    /// Underlying causes, outermost first.
    pub causes: Vec<String>,
    /// What to try.
    pub hint: Option<String>,
    /// The exit code.
    pub exit: Exit,
}

impl CliError {
    /// A failure with `exit`.
    pub fn new(exit: Exit, message: impl Into<String>) -> Self {
        CliError {
            message: message.into(),
            causes: Vec::new(),
            hint: None,
            exit,
        }
    }

    /// A mistake in the command line or a configuration file.
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Exit::Usage, message)
    }

    /// An unexpected failure.
    pub fn failure(message: impl Into<String>) -> Self {
        Self::new(Exit::Failure, message)
    }

    /// Adds a cause.
    pub fn caused_by(mut self, cause: impl Into<String>) -> Self {
        self.causes.push(cause.into());
        self
    }

    /// Sets the hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: {}", self.message)?;
        for cause in &self.causes {
            write!(f, "\n  caused by: {cause}")?;
        }
        if let Some(hint) = &self.hint {
            write!(f, "\nhint: {hint}")?;
        }
        Ok(())
    }
}

impl From<crate::error::Error> for CliError {
    /// Whose it is to mend decides the exit code: the person's input or set-up (a call the
    /// walls refuse) 2, something not usable now 3, anything else 1.
    fn from(e: crate::error::Error) -> Self {
        let exit = match e.kind {
            crate::error::Kind::Usage | crate::error::Kind::Refused => Exit::Usage,
            crate::error::Kind::Unusable => Exit::Unusable,
            crate::error::Kind::Failure => Exit::Failure,
        };
        CliError {
            message: e.message,
            causes: e.causes,
            hint: e.hint,
            exit,
        }
    }
}

impl From<crate::drive::Ended> for Exit {
    /// A drive that gave items up exits 4, one that could not go on 3, one a signal
    /// stopped 128 + the signal.
    fn from(ended: crate::drive::Ended) -> Self {
        match ended {
            crate::drive::Ended::Done => Exit::Success,
            crate::drive::Ended::GaveUp => Exit::GaveUp,
            crate::drive::Ended::Unusable => Exit::Unusable,
            crate::drive::Ended::Stopped(signal) => Exit::Signal(signal),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Exit;
    use crate::drive::Ended;

    #[test]
    fn how_a_drive_ended_is_its_exit_code() {
        for (ended, code) in [
            (Ended::Done, 0),
            (Ended::GaveUp, 4),
            (Ended::Unusable, 3),
            (Ended::Stopped(2), 130),
            (Ended::Stopped(15), 143),
        ] {
            assert_eq!(Exit::from(ended).code(), code, "{ended:?}");
        }
    }
}
