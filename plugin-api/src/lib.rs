//! The interface between the `stet` host and its plugins.
//!
//! Stet drains a queue of work items, running an AI coding agent for each in a fresh
//! sandbox. Where the agent runs (a **runtime**: Docker, Apple `container`, ...) and which
//! agent runs (a **harness**: Claude Code, any command-line agent) are plugins: shared
//! libraries the host loads at run time. This crate is everything a plugin author needs:
//!
//! - the traits to implement, [`RuntimePlugin`] and [`HarnessPlugin`], each method
//!   documented as a contract (threads, blocking, errors, panics, cancellation);
//! - the data that crosses the boundary ([`ProbeReport`], [`SandboxSpec`], ...) and the one
//!   error type, [`PluginError`], with a stable [`ErrorCode`];
//! - [`export_plugin!`], which exports the library's root module and guards every call
//!   against panics;
//! - the versioned binary interface in [`abi`], which the host loads through abi_stable.
//!
//! A minimal runtime plugin (a `cdylib` crate depending on this one):
//!
//! ```
//! use stet_plugin_api::{
//!     export_plugin, Label, PluginError, ProbeReport, ProcessPlugin, ProcessSpec,
//!     RuntimePlugin, SandboxInfo, SandboxSpec,
//! };
//!
//! struct Nowhere;
//!
//! impl RuntimePlugin for Nowhere {
//!     fn probe(&self) -> Result<ProbeReport, PluginError> {
//!         Ok(ProbeReport::unavailable("nowhere has no backend", "install somewhere"))
//!     }
//!     fn create_sandbox(&self, _: SandboxSpec) -> Result<SandboxInfo, PluginError> {
//!         Err(PluginError::unsupported("nowhere cannot create sandboxes"))
//!     }
//!     fn spawn(&self, _: &str, _: ProcessSpec) -> Result<Box<dyn ProcessPlugin>, PluginError> {
//!         Err(PluginError::unsupported("nowhere cannot run processes"))
//!     }
//!     fn teardown(&self, _: &str) -> Result<(), PluginError> {
//!         Ok(())
//!     }
//!     fn list_sandboxes(&self, _: &[Label]) -> Result<Vec<SandboxInfo>, PluginError> {
//!         Ok(Vec::new())
//!     }
//! }
//!
//! export_plugin!(runtime, name = "nowhere", version = "0.1.0", new = |_config| Ok(Nowhere));
//! # fn main() {}
//! ```
//!
//! Beside the library the plugin ships a `plugin.toml` manifest; see the host's
//! documentation (`docs/plugins.md`) for its keys.
//!
//! # Versions
//!
//! This crate's version is the API version. Within a major version, a plugin built against
//! an older minor version keeps loading in a newer host (the host falls back to the frozen
//! interface modules in [`abi`]), and a plugin built against a newer minor version loads in
//! an older host. A different major version is refused before any plugin code runs.
//!
//! No async type and no tokio handle crosses the boundary: plugins expose blocking calls,
//! and a plugin that needs async code owns its runtime inside the library.

#![deny(missing_docs)]
// Both come from abi_stable's macros (`#[sabi_trait]`, `*_Ref` prefix types).
#![allow(non_local_definitions, non_camel_case_types)]

pub mod abi;
#[cfg(feature = "conformance")]
pub mod conformance;
mod error;
mod export;
mod sdk;
mod types;

#[doc(hidden)]
pub use export::__private;

pub use abi_stable::std_types::{ROption, RResult, RSlice, RStr, RString, RVec};
pub use error::{ErrorCode, PluginError};
pub use sdk::{
    guard, host_sink, HarnessPlugin, ProcessPlugin, RuntimePlugin, Sink, TerminalPlugin,
};
pub use types::{
    EnvVar, ExitStatus, Fact, HarnessContext, ImageStatus, Label, Launch, Limits, Mount, Network,
    Outcome, OutcomeKind, PluginIdentity, PluginKind, ProbeReport, ProcessSpec, Profile, Role,
    RoleRequest, SandboxInfo, SandboxSpec, Stream, TerminalSize, UserIds, WallCheck,
};

/// The command every guard refuses: the live wall proof asks the agent to run it and
/// expects to see it refused. Harness plugins put it in the proof prompt; the host's guard
/// and approver refuse it.
pub const WALL_CANARY: &str = "stet-wall-canary";

/// What stet's session-start hook tells the agent. A harness that finds it in its agent's
/// output knows stet's walled settings were loaded (agents may have session hooks of their
/// own, so "a hook ran" proves nothing).
pub const SESSION_HOOK_MARKER: &str = "stet: walled session started";

/// Words a runtime's probe puts in [`ProbeReport::capabilities`], which the host matches
/// on (never on any other text of a plugin's).
pub mod capability {
    /// Mounts host directories, read-only or read-write, each at the path it is given,
    /// later mounts on top of earlier ones.
    pub const BIND_MOUNTS: &str = "bind-mounts";
    /// Gives a sandbox loopback only.
    pub const NETWORK_NONE: &str = "network-none";
    /// Gives a sandbox the ordinary outbound network.
    pub const NETWORK_OPEN: &str = "network-open";
    /// Enforces all of [`Limits`](crate::Limits): CPU, memory and processes.
    pub const LIMITS: &str = "limits";
    /// Enforces the memory limit (when not all of [`LIMITS`]).
    pub const LIMIT_MEMORY: &str = "limit-memory";
    /// Enforces the process limit (when not all of [`LIMITS`]).
    pub const LIMIT_PIDS: &str = "limit-pids";
    /// Enforces the CPU limit (when not all of [`LIMITS`]).
    pub const LIMIT_CPU: &str = "limit-cpu";
    /// Lists sandboxes by label.
    pub const LABELS: &str = "labels";
    /// Kills a running process from another thread.
    pub const KILL: &str = "kill";
    /// Runs processes as a given user.
    pub const RUN_AS_USER: &str = "run-as-user";
    /// Runs a process on a terminal.
    pub const TERMINAL: &str = "terminal";
}

/// The version of this API (`major.minor.patch`), which plugins report in their identity
/// and the host compares with its own.
pub const API_VERSION: &str = env!("CARGO_PKG_VERSION");
