//! The library's error: what failed, in which of stet's concepts, why, and what to try.
//!
//! A library function says what went wrong and whose it is to mend — the person's input
//! ([`Kind::Usage`]), something stet needs that is not usable now ([`Kind::Unusable`]),
//! what stet refuses by policy to carry into a sandbox ([`Kind::Refused`]), or an unexpected
//! failure ([`Kind::Failure`]) — and where ([`Concept`]). What a command
//! makes of it (its exit code, how it is printed) is the CLI's (`cli/error.rs`); what the
//! drive makes of it (the item's fault or the infrastructure's) is the drive's, by a match
//! on these types.

use std::fmt;

/// Which of stet's concepts failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Concept {
    /// Configuration files and resolved settings.
    Settings,
    /// Plugin discovery, loading, probing, selection, installation.
    Plugins,
    /// A runtime's sandbox: making, running, limits, teardown.
    Sandbox,
    /// The egress proxy and the sandbox's network.
    Network,
    /// Credentials sealed away and their stand-ins.
    Credentials,
    /// The harness: the walled profile, launches, reading a call's output.
    Harness,
    /// A login renewed in its own sandbox.
    Login,
    /// The walls and their proof.
    Walls,
    /// One walled agent call (`stet ask`, a drive's stage).
    Call,
    /// The drive: its lanes, reservations and checkpoints on the remote.
    Drive,
    /// A lane's setup (`[lane] setup`) and the seeds it makes.
    Setup,
}

/// Whose it is to mend what failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The person's input is wrong: the command line, a configuration file, a manifest.
    Usage,
    /// Something stet needs is not usable now: no runtime or harness, a plugin that
    /// cannot answer, the walls not holding, a remote or engine that does not answer.
    Unusable,
    /// Something failed that the person did not cause: an I/O error, a bug.
    Failure,
    /// Stet refuses, by policy, what this one call would carry into its sandbox (its
    /// prompt holds a real credential: a string match, not a wall — the walls keep what
    /// the agent reaches). Time does not mend it and it says nothing of the
    /// infrastructure, so a drive counts it against the call's item, never toward an
    /// outage.
    Refused,
}

/// A failure to report: what failed, the chain of causes, and what to try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// Where it failed.
    pub concept: Concept,
    /// Whose it is to mend.
    pub kind: Kind,
    /// What failed.
    pub message: String,
    /// Underlying causes, outermost first.
    pub causes: Vec<String>,
    /// What to try.
    pub hint: Option<String>,
}

impl Concept {
    /// A failure of `kind` here.
    pub fn error(self, kind: Kind, message: impl Into<String>) -> Error {
        Error {
            concept: self,
            kind,
            message: message.into(),
            causes: Vec::new(),
            hint: None,
        }
    }

    /// A mistake in the person's input, found here.
    pub fn usage(self, message: impl Into<String>) -> Error {
        self.error(Kind::Usage, message)
    }

    /// Something needed here is not usable now.
    pub fn unusable(self, message: impl Into<String>) -> Error {
        self.error(Kind::Unusable, message)
    }

    /// What this call would carry into its sandbox, refused by the walls here.
    pub fn refused(self, message: impl Into<String>) -> Error {
        self.error(Kind::Refused, message)
    }

    /// An unexpected failure here.
    pub fn failure(self, message: impl Into<String>) -> Error {
        self.error(Kind::Failure, message)
    }
}

impl Error {
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

impl fmt::Display for Error {
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

impl std::error::Error for Error {}

/// A plugin's error with the host's context: which plugin, doing what. Its code says
/// whose it is to mend: input the plugin refused or a thing it did not find is the
/// person's, a plugin that cannot serve now is unusable, anything else a failure.
pub fn plugin_error(plugin: &str, doing: &str, error: &stet_plugin_api::PluginError) -> Error {
    let kind = match error.code {
        stet_plugin_api::ErrorCode::INVALID_INPUT | stet_plugin_api::ErrorCode::NOT_FOUND => {
            Kind::Usage
        }
        stet_plugin_api::ErrorCode::UNAVAILABLE => Kind::Unusable,
        _ => Kind::Failure,
    };
    let mut e = Concept::Plugins
        .error(kind, format!("{plugin}: {doing}"))
        .caused_by(format!("{} ({})", error.message, error.code));
    if !error.remedy.is_empty() {
        e = e.hint(error.remedy.as_str());
    }
    e
}
