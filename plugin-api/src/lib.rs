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
//! This crate's version is the API version. Within a major version:
//!
//! - a plugin built against an older minor keeps loading in a newer host: from 1.2 on the
//!   interface ([`abi::v1`]) only grows by appending methods with defaults, which answer
//!   for what an older plugin lacks; 1.0 and 1.1 plugins load through their frozen modules;
//! - a plugin built against a newer minor loads in an older host, unless it names in
//!   [`export_plugin!`]'s `requires` something of the host ([`host_capability`]) that the
//!   older host lacks: then it is refused in one line naming both versions and what is
//!   missing.
//!
//! A different major version is refused before any plugin code runs. The frozen layouts and
//! the append-only rule are held against a committed record (`plugin-api/tests/layouts.rs`).
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

pub use abi_stable::std_types::{RBox, ROption, RResult, RSlice, RStr, RString, RVec};
pub use error::{ErrorCode, PluginError};
pub use sdk::{
    guard, host_sink, render_lines, start_by_spawning, take_options, HarnessPlugin, ProcessPlugin,
    RuntimePlugin, Sink, SocketForwarding, TerminalPlugin,
};
pub use types::{
    CallOutcome, CredentialDecl, CredentialSource, CredentialSource_NE, EntryKind, EnvVar,
    ExitStatus, Fact, ForwardedSocket, HarnessContext, ImageStatus, Label, Launch, LimitCounters,
    Limits, Mount, Network, Outcome, OutcomeCode, OutcomeKind, PluginIdentity, PluginKind,
    ProbeReport, ProcessSpec, Profile, Rendered, Role, RoleRequest, SandboxInfo, SandboxOption,
    SandboxOption_NE, SandboxSpec, Stream, TerminalSize, TranscriptEntry, UserIds, WallCheck,
    WallReport, WallState,
};

/// The command every guard refuses: the live wall proof asks the agent to run it and
/// expects to see it refused. Harness plugins put it in the proof prompt; the host's guard
/// and approver refuse it.
pub const WALL_CANARY: &str = "stet-wall-canary";

/// The variables the host adds to every process of a sandbox whose launch declared hosts
/// ([`Network::AllowHosts`]): they name stet's proxy, the one way out of a sandbox that has
/// no interface but loopback (`NO_PROXY` keeps that loopback direct). A harness's own
/// proof of its environment counts them as the host's. Since 1.3.
pub const PROXY_VARIABLES: [&str; 8] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

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
    /// Forwards a unix socket from the host into a sandbox
    /// ([`SandboxOption::ForwardSocket`](crate::SandboxOption::ForwardSocket)). New in 1.3.
    pub const FORWARD_SOCKET: &str = "forward-socket";
    /// Runs a process as a sandbox's first process
    /// ([`SandboxOption::FirstProcess`](crate::SandboxOption::FirstProcess)). New in 1.3.
    pub const FIRST_PROCESS: &str = "first-process";
    /// Its sandboxes meet a kernel other than the host's: a kernel in user space (such as
    /// gVisor's) or a virtual machine's. A process inside that finds a hole in the kernel
    /// it talks to finds it in that kernel, not in the one the host's other processes and
    /// the person's files rely on.
    ///
    /// Offer it only when every sandbox of the runtime is made that way, whatever its
    /// settings. The host does not take it on trust: a runtime that offers it gets the
    /// `own-kernel` wall, proven live before every drive by asking a sandbox which kernel
    /// answers it (`/proc/version`, `uname`) and comparing with the host's own; the wall
    /// is not held when the host's kernel answers. It says nothing of that kernel's own
    /// flaws, nor of the runtime's helper processes, which still run on the host's
    /// kernel. An addition to the SDK, not to the ABI: a host that does not know the word
    /// proves no such wall.
    pub const OWN_KERNEL: &str = "own-kernel";
}

/// The keys of [`ProbeReport::facts`] the host looks for by name, to show a fact where a
/// person needs it; it never matches on their values. Every fact, these included, is also
/// shown as it is with the probe (`stet plugins probe`).
pub mod fact {
    /// The runtime's isolation class, in words for people (`container: namespaces and
    /// cgroups on the host's kernel`, `a virtual machine per sandbox`): the host shows it
    /// where a person chooses a runtime or consents to a drive, and never matches on it —
    /// what it acts on are [`capability`](crate::capability) words and the walls it
    /// proves. One short line; say what the sandbox meets (whose kernel, which
    /// boundary), not how good it is. An addition to the SDK, not to the ABI.
    pub const ISOLATION: &str = "isolation";
}

/// What a plugin can need of the host, named in its root module's `requires`
/// ([`abi::v1::StetPlugin::requires`]). A host that lacks one refuses the plugin, naming it;
/// each host says which it has (`stet --version`).
pub mod host_capability {
    /// The host reads walls with typed states ([`crate::WallReport`]). Since 1.3.
    pub const TYPED_WALLS: &str = "typed-walls";
    /// The host reads typed outcomes ([`crate::CallOutcome`]). Since 1.3.
    pub const TYPED_OUTCOMES: &str = "typed-outcomes";
    /// The host gives every agent call a fresh copy of the profile and asks the harness to
    /// settle it afterwards (`settle_profile`). Since 1.3.
    pub const PROFILE_COPIES: &str = "profile-copies";
    /// The host makes sandboxes with options (`Runtime::start`). Since 1.3.
    pub const SANDBOX_OPTIONS: &str = "sandbox-options";
}

/// The ids of the walls stet knows, for [`WallReport::wall`]. A harness may report walls of
/// its own under other ids; the host matches on these.
pub mod wall {
    /// Exactly one walled profile directory.
    pub const PROFILE_ALONE: &str = "profile-alone";
    /// The profile holds a login (by state alone).
    pub const LOGIN_PRESENT: &str = "login-present";
    /// The walled settings are exactly what stet writes.
    pub const SETTINGS_EXACT: &str = "settings-exact";
    /// No billing key or provider switch in the environment.
    pub const NO_BILLING_KEY: &str = "no-billing-key";
    /// The live proof launch ran and said what it holds.
    pub const PROOF_LAUNCHED: &str = "proof-launched";
    /// The live proof reached the model API.
    pub const PROOF_MODEL_API_UNREACHABLE: &str = "proof-model-api-unreachable";
}

/// Inside a sandbox, the port on its loopback where the host serves the model API of the
/// first credential a harness declares with a header (`HarnessPlugin::credentials`), in
/// plain HTTP: stet's proxy puts the real credential in place of the stand-in the sandbox
/// holds and sends the request on to the declared host — over TLS, unless that host is on
/// the host's loopback. Each further declared host is served at the next port, in the
/// order declared. Point the agent's base URL there (`http://127.0.0.1:3180`, the path of
/// the configured base URL kept). Since 1.3 (an addition to the SDK, not to the ABI).
pub const GATEWAY_PORT: u16 = 3180;

/// The version of this API (`major.minor.patch`), which plugins report in their identity
/// and the host compares with its own.
pub const API_VERSION: &str = env!("CARGO_PKG_VERSION");
