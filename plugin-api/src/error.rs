//! The one error type that crosses the plugin boundary.

use std::fmt;

use abi_stable::{std_types::RString, StableAbi};

/// A stable, machine-readable error code.
///
/// Codes are plain integers rather than an enum so that a plugin built against a newer
/// minor version of this API can return a code this host has never heard of without
/// undefined behaviour; the host shows unknown codes by number.
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub u32);

impl ErrorCode {
    /// The backend this plugin drives is not there or not answering (engine down, CLI missing).
    pub const UNAVAILABLE: ErrorCode = ErrorCode(1);
    /// The request itself is wrong (bad path, bad argument); retrying the same request fails again.
    pub const INVALID_INPUT: ErrorCode = ErrorCode(2);
    /// A named object (image, sandbox, process) does not exist.
    pub const NOT_FOUND: ErrorCode = ErrorCode(3);
    /// The plugin does not implement this operation (see its declared capabilities).
    pub const UNSUPPORTED: ErrorCode = ErrorCode(4);
    /// An operation did not finish within its time limit.
    pub const TIMEOUT: ErrorCode = ErrorCode(5);
    /// The operation was stopped by a kill request.
    pub const KILLED: ErrorCode = ErrorCode(6);
    /// The backend answered with an error of its own.
    pub const BACKEND: ErrorCode = ErrorCode(7);
    /// The plugin panicked; the panic was caught on the plugin side of the boundary.
    pub const PANICKED: ErrorCode = ErrorCode(8);
    /// Anything else: a bug in the plugin.
    pub const INTERNAL: ErrorCode = ErrorCode(9);

    /// A short lowercase name for the code, or `None` for a code this version does not know.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            Self::UNAVAILABLE => "unavailable",
            Self::INVALID_INPUT => "invalid-input",
            Self::NOT_FOUND => "not-found",
            Self::UNSUPPORTED => "unsupported",
            Self::TIMEOUT => "timeout",
            Self::KILLED => "killed",
            Self::BACKEND => "backend",
            Self::PANICKED => "panicked",
            Self::INTERNAL => "internal",
            _ => return None,
        })
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "code {}", self.0),
        }
    }
}

/// An error returned by a plugin: a stable code, a message saying what failed, and a
/// remedy saying what the person can do about it (empty when there is nothing to do).
///
/// The host adds the context the plugin cannot know (which plugin, which lane, which
/// sandbox) when it reports the error.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct PluginError {
    /// What kind of failure this is.
    pub code: ErrorCode,
    /// What failed, in one sentence, without a trailing period.
    pub message: RString,
    /// What to try, in one sentence; empty when there is no useful hint.
    pub remedy: RString,
}

impl PluginError {
    /// An error with the given code and message and no remedy.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        PluginError {
            code,
            message: RString::from(message.into()),
            remedy: RString::new(),
        }
    }

    /// Adds the remedy line shown to the person as `hint:`.
    pub fn with_remedy(mut self, remedy: impl Into<String>) -> Self {
        self.remedy = RString::from(remedy.into());
        self
    }

    /// Shorthand for [`ErrorCode::UNAVAILABLE`].
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::UNAVAILABLE, message)
    }

    /// Shorthand for [`ErrorCode::INVALID_INPUT`].
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::INVALID_INPUT, message)
    }

    /// Shorthand for [`ErrorCode::NOT_FOUND`].
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NOT_FOUND, message)
    }

    /// Shorthand for [`ErrorCode::UNSUPPORTED`].
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::UNSUPPORTED, message)
    }

    /// Shorthand for [`ErrorCode::BACKEND`].
    pub fn backend(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BACKEND, message)
    }

    /// Shorthand for [`ErrorCode::INTERNAL`].
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::INTERNAL, message)
    }
}

impl fmt::Display for PluginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for PluginError {}
