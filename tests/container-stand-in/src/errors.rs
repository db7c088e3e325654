//! The error model of the real CLI, and how it is printed.
//!
//! Three kinds of failure exist in `container`:
//! - `ContainerizationError` (`code`, `message`, optional `cause`), thrown by nearly every
//!   operation. Its `description` is `code: "message"` (plus ` (cause: "<description of
//!   cause>")`); since 0.10 it is also a `LocalizedError` whose text is just `message` (plus
//!   the same cause suffix). swift-argument-parser prints the localized text when there is
//!   one, so the *top-level* error prints in the "message" form, while causes nested inside it
//!   always print in the "code" form.
//! - `AggregateError` (stop/kill/delete): not localized, so always the "code" form of each
//!   error, one per line.
//! - Plain errors whose description is a bare string (e.g. memory parsing: `invalid size`).
//!
//! Parse errors (`ParserError`, `ValidationError`) are handled in `args.rs`: they print usage
//! and exit 64.

/// `ContainerizationError.Code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    Unknown,
    InvalidArgument,
    InternalError,
    Exists,
    NotFound,
    InvalidState,
    Unsupported,
    Interrupted,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Unknown => "unknown",
            Code::InvalidArgument => "invalidArgument",
            Code::InternalError => "internalError",
            Code::Exists => "exists",
            Code::NotFound => "notFound",
            Code::InvalidState => "invalidState",
            Code::Unsupported => "unsupported",
            Code::Interrupted => "interrupted",
        }
    }
}

/// Which text a top-level `ContainerizationError` prints as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorForm {
    /// container ≥ 0.10: `Error: <message>`.
    Message,
    /// container ≤ 0.9: `Error: <code>: "<message>"`.
    Code,
}

#[derive(Debug, Clone)]
pub enum CliError {
    /// `ContainerizationError`.
    Cz {
        code: Code,
        message: String,
        cause: Option<Box<CliError>>,
    },
    /// `AggregateError`: one error per line, each in its description form.
    Aggregate(Vec<CliError>),
    /// An error whose description is this text (not localized).
    Plain(String),
    /// `ArgumentParser.ExitCode(n)`: exits with `n`, prints nothing.
    Exit(i32),
    /// A `ValidationError` thrown while running (exit 64 with the usage of `usage_of`).
    Validation { message: String },
}

pub type CliResult<T> = Result<T, CliError>;

pub fn cz(code: Code, message: impl Into<String>) -> CliError {
    CliError::Cz {
        code,
        message: message.into(),
        cause: None,
    }
}

pub fn cz_cause(code: Code, message: impl Into<String>, cause: CliError) -> CliError {
    CliError::Cz {
        code,
        message: message.into(),
        cause: Some(Box::new(cause)),
    }
}

/// The XPC error every client call gets when the API server is not registered.
pub fn xpc_down() -> CliError {
    cz(
        Code::Interrupted,
        "XPC connection error: Connection invalid",
    )
}

impl CliError {
    /// `String(describing: error)`.
    pub fn description(&self) -> String {
        match self {
            CliError::Cz {
                code,
                message,
                cause,
            } => match cause {
                None => format!("{}: \"{}\"", code.as_str(), message),
                Some(c) => format!(
                    "{}: \"{}\" (cause: \"{}\")",
                    code.as_str(),
                    message,
                    c.description()
                ),
            },
            CliError::Aggregate(errors) => errors
                .iter()
                .map(|e| e.description())
                .collect::<Vec<_>>()
                .join("\n"),
            CliError::Plain(s) => s.clone(),
            CliError::Exit(n) => format!("ExitCode(rawValue: {n})"),
            CliError::Validation { message } => message.clone(),
        }
    }

    /// swift-argument-parser's `describe()`: the localized text when the type has one.
    pub fn describe(&self, form: ErrorForm) -> String {
        match self {
            CliError::Cz { message, cause, .. } if form == ErrorForm::Message => match cause {
                None => message.clone(),
                Some(c) => format!("{} (cause: \"{}\")", message, c.description()),
            },
            other => other.description(),
        }
    }

    /// `Application.main`: an error that mentions an XPC connection error gets the hint to
    /// start the system service.
    pub fn with_xpc_hint(self) -> CliError {
        let text = self.description();
        if text.contains("XPC connection error") {
            cz(
                Code::Interrupted,
                format!(
                    "{text}\nEnsure container system service has been started with `container system start`."
                ),
            )
        } else {
            self
        }
    }
}
