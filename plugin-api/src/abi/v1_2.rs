//! Version 1.2 of the binary interface, frozen.
//!
//! What changed from [1.1](super::v1_1): a runtime can run a process on a terminal with
//! live input ([`Runtime::spawn_terminal`], [`Terminal`]), and a harness can describe its
//! agent's own login ([`Harness::login_launch`]), so that `stet profile login` runs that
//! login inside a sandbox with the profile mounted.
//!
//! Nothing here changes any more: it is the layout plugins built against 1.2 export, and the
//! prefix of [`v1`](super::v1), the append-only interface of 1.2 and every later minor
//! (through which the host talks to 1.2 plugins). The terminal trait defined here is shared,
//! unchanged, by later versions.

use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    sabi_trait,
    sabi_types::VersionStrings,
    std_types::{RBox, RResult, RSlice, RStr, RString, RVec},
    StableAbi,
};

pub use super::v1_1::{OutputSink, OutputSink_TO, Process, ProcessBox, Process_TO, SinkBox};
use crate::{
    ExitStatus, HarnessContext, ImageStatus, Label, Launch, Outcome, PluginError, PluginIdentity,
    ProbeReport, ProcessSpec, Profile, Role, RoleRequest, SandboxInfo, SandboxSpec, TerminalSize,
    WallCheck,
};

/// A process running on a terminal in a sandbox, with live input. Implemented by runtime
/// plugins. Output arrives as [`Stream::Stdout`](crate::Stream::Stdout) only (a terminal
/// merges the streams).
#[sabi_trait]
pub trait Terminal: Send + Sync {
    /// Streams the terminal's output into `sink` until the process ends. Called once.
    fn wait(&self, sink: SinkBox<'_>) -> RResult<ExitStatus, PluginError>;
    /// Kills the process; callable from any thread while `wait` blocks.
    fn kill(&self) -> RResult<(), PluginError>;
    /// Sends keystrokes; callable from any thread while `wait` blocks.
    fn write(&self, bytes: RSlice<'_, u8>) -> RResult<(), PluginError>;
    /// Closes the input.
    fn close_input(&self) -> RResult<(), PluginError>;
    /// Tells the process its terminal changed size.
    #[sabi(last_prefix_field)]
    fn resize(&self, size: TerminalSize) -> RResult<(), PluginError>;
}

/// A terminal process as the host holds it.
pub type TerminalBox = Terminal_TO<'static, RBox<()>>;

/// Where the agent runs.
#[sabi_trait]
pub trait Runtime: Send + Sync {
    /// Is the backend there, which version, what can it do.
    fn probe(&self) -> RResult<ProbeReport, PluginError>;
    /// Creates and starts a sandbox.
    fn create_sandbox(&self, spec: SandboxSpec) -> RResult<SandboxInfo, PluginError>;
    /// Starts a process in a sandbox.
    fn spawn(&self, sandbox: RStr<'_>, spec: ProcessSpec) -> RResult<ProcessBox, PluginError>;
    /// Stops and removes a sandbox; a second call succeeds.
    fn teardown(&self, sandbox: RStr<'_>) -> RResult<(), PluginError>;
    /// Lists sandboxes carrying all of `labels`.
    fn list_sandboxes(&self, labels: RVec<Label>) -> RResult<RVec<SandboxInfo>, PluginError>;
    /// Whether an image is available locally. New in 1.1.
    fn image_status(&self, image: RStr<'_>) -> RResult<ImageStatus, PluginError>;
    /// Starts a process on a terminal in a sandbox. New in 1.2.
    #[sabi(last_prefix_field)]
    fn spawn_terminal(
        &self,
        sandbox: RStr<'_>,
        spec: ProcessSpec,
        size: TerminalSize,
    ) -> RResult<TerminalBox, PluginError>;
}

/// A runtime as the host holds it.
pub type RuntimeBox = Runtime_TO<'static, RBox<()>>;

/// Which agent runs and how it is walled in.
#[sabi_trait]
pub trait Harness: Send + Sync {
    /// Binary present, version, login state (by state alone).
    fn probe(&self) -> RResult<ProbeReport, PluginError>;
    /// The one walled profile this drive runs on.
    fn profile(&self, context: HarnessContext) -> RResult<Profile, PluginError>;
    /// Writes the walled settings into the profile; returns what was written.
    fn write_settings(
        &self,
        context: HarnessContext,
        profile: Profile,
    ) -> RResult<RString, PluginError>;
    /// The static wall checks.
    fn check_walls(
        &self,
        context: HarnessContext,
        profile: Profile,
    ) -> RResult<RVec<WallCheck>, PluginError>;
    /// The launch for one role.
    fn launch(&self, request: RoleRequest) -> RResult<Launch, PluginError>;
    /// Reads the live proof launch's output into wall checks.
    fn read_proof(&self, output: RSlice<'_, u8>) -> RResult<RVec<WallCheck>, PluginError>;
    /// Reads a role's output into an outcome.
    fn read_outcome(
        &self,
        role: Role,
        output: RSlice<'_, u8>,
        exit: ExitStatus,
    ) -> RResult<Outcome, PluginError>;
    /// The agent's own interactive login into `profile_dir`, run on a terminal. New in 1.2.
    #[sabi(last_prefix_field)]
    fn login_launch(
        &self,
        context: HarnessContext,
        profile_dir: RStr<'_>,
    ) -> RResult<Launch, PluginError>;
}

/// A harness as the host holds it.
pub type HarnessBox = Harness_TO<'static, RBox<()>>;

/// The root module every plugin library exports, version 1.2.
///
/// A library implements exactly one kind; the constructor for the other kind returns an
/// [`INVALID_INPUT`](crate::ErrorCode::INVALID_INPUT) error.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = StetPlugin_Ref)))]
#[sabi(missing_field(panic))]
pub struct StetPlugin {
    /// What the library says about itself; compared with its manifest.
    pub identity: extern "C" fn() -> PluginIdentity,
    /// Builds the runtime. `config` is the plugin's settings table as JSON (`{}` if none).
    pub new_runtime: extern "C" fn(config: RStr<'_>) -> RResult<RuntimeBox, PluginError>,
    /// Builds the harness. `config` is the plugin's settings table as JSON (`{}` if none).
    #[sabi(last_prefix_field)]
    pub new_harness: extern "C" fn(config: RStr<'_>) -> RResult<HarnessBox, PluginError>,
}

impl RootModule for StetPlugin_Ref {
    declare_root_module_statics! {StetPlugin_Ref}
    const BASE_NAME: &'static str = "stet_plugin";
    const NAME: &'static str = "stet plugin";
    const VERSION_STRINGS: VersionStrings = VersionStrings {
        version: RStr::from_str(VERSION),
    };
}

/// The API version of this frozen interface.
pub const VERSION: &str = "1.2.0";
