//! Version 1.1 of the binary interface, frozen.
//!
//! What changed from [1.0](super::v1_0): [`Runtime::image_status`] was added, so the host can
//! say how to build a missing image before it tries to create a sandbox from it.
//!
//! Nothing here changes any more: it is the layout plugins built against 1.1 export. The
//! sink and process traits defined here are shared, unchanged, by later versions.

use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    sabi_trait,
    sabi_types::VersionStrings,
    std_types::{RBox, RResult, RSlice, RStr, RString, RVec},
    StableAbi,
};

use crate::{
    ExitStatus, HarnessContext, ImageStatus, Label, Launch, Outcome, PluginError, PluginIdentity,
    ProbeReport, ProcessSpec, Profile, Role, RoleRequest, SandboxInfo, SandboxSpec, Stream,
    WallCheck,
};

/// Receives a process's output as it is produced. Implemented by the host.
///
/// Plugins may call it from any thread, one call at a time. It never panics and never
/// blocks for long: the host copies the bytes and returns.
#[sabi_trait]
pub trait OutputSink: Send {
    /// One chunk of output from `stream`, in the order the process wrote it.
    #[sabi(last_prefix_field)]
    fn chunk(&mut self, stream: Stream, bytes: RSlice<'_, u8>);
}

/// The host's sink as plugins receive it.
pub type SinkBox<'a> = OutputSink_TO<'a, RBox<()>>;

/// A process running in a sandbox. Implemented by runtime plugins.
///
/// The host calls [`Process::wait`] on one thread and may call [`Process::kill`] from another
/// while `wait` blocks; that is how a call in flight is killed.
#[sabi_trait]
pub trait Process: Send + Sync {
    /// Streams the process's output into `sink` until it ends, then returns how it ended.
    /// Called once.
    fn wait(&self, sink: SinkBox<'_>) -> RResult<ExitStatus, PluginError>;

    /// Kills the process (and what it started). Safe to call from any thread, at any time,
    /// any number of times; a `wait` in progress then returns soon after.
    #[sabi(last_prefix_field)]
    fn kill(&self) -> RResult<(), PluginError>;
}

/// A process handle as the host holds it.
pub type ProcessBox = Process_TO<'static, RBox<()>>;

/// Where the agent runs. Implemented by runtime plugins; see
/// [`RuntimePlugin`](crate::RuntimePlugin) for the contract of each method.
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
    #[sabi(last_prefix_field)]
    fn image_status(&self, image: RStr<'_>) -> RResult<ImageStatus, PluginError>;
}

/// A runtime as the host holds it.
pub type RuntimeBox = Runtime_TO<'static, RBox<()>>;

/// Which agent runs and how it is walled in. Implemented by harness plugins; see
/// [`HarnessPlugin`](crate::HarnessPlugin) for the contract of each method.
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
    #[sabi(last_prefix_field)]
    fn read_outcome(
        &self,
        role: Role,
        output: RSlice<'_, u8>,
        exit: ExitStatus,
    ) -> RResult<Outcome, PluginError>;
}

/// A harness as the host holds it.
pub type HarnessBox = Harness_TO<'static, RBox<()>>;

/// The 1.1 root module.
///
/// A library implements exactly one kind; the constructor for the other kind returns an
/// [`UNSUPPORTED`](crate::ErrorCode::UNSUPPORTED) error.
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

/// The API version this frozen module describes.
pub const VERSION: &str = "1.1.0";

impl RootModule for StetPlugin_Ref {
    declare_root_module_statics! {StetPlugin_Ref}
    const BASE_NAME: &'static str = "stet_plugin";
    const NAME: &'static str = "stet plugin";
    const VERSION_STRINGS: VersionStrings = VersionStrings {
        version: RStr::from_str(VERSION),
    };
}
