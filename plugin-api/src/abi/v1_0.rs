//! Version 1.0 of the binary interface, frozen.
//!
//! Nothing in this module ever changes: it is the exact layout a plugin built against
//! stet-plugin-api 1.0 exports, kept so that a newer host can still load such a plugin.
//! abi_stable refuses a plugin whose root module has fewer fields than the host expects
//! (even when fields were only appended), so the host tries the current layout first and
//! falls back to this one.
//!
//! Only the items that differ from 1.1 are copied here; everything else (the harness,
//! processes, sinks, data types) is shared, because its layout did not change. The type
//! names must stay the same as in 1.0: abi_stable compares them.

use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    sabi_trait,
    sabi_types::VersionStrings,
    std_types::{RBox, RResult, RStr, RVec},
    StableAbi,
};

pub use super::v1_1::{HarnessBox, ProcessBox};
use crate::{
    Label, PluginError, PluginIdentity, ProbeReport, ProcessSpec, SandboxInfo, SandboxSpec,
};

/// The 1.0 runtime: as 1.1 without `image_status`.
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
    #[sabi(last_prefix_field)]
    fn list_sandboxes(&self, labels: RVec<Label>) -> RResult<RVec<SandboxInfo>, PluginError>;
}

/// A 1.0 runtime as the host holds it.
pub type RuntimeBox = Runtime_TO<'static, RBox<()>>;

/// The 1.0 root module.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = StetPlugin_Ref)))]
#[sabi(missing_field(panic))]
pub struct StetPlugin {
    /// What the library says about itself.
    pub identity: extern "C" fn() -> PluginIdentity,
    /// Builds the runtime.
    pub new_runtime: extern "C" fn(config: RStr<'_>) -> RResult<RuntimeBox, PluginError>,
    /// Builds the harness.
    #[sabi(last_prefix_field)]
    pub new_harness: extern "C" fn(config: RStr<'_>) -> RResult<HarnessBox, PluginError>,
}

/// The API version this frozen module describes.
pub const VERSION: &str = "1.0.0";

impl RootModule for StetPlugin_Ref {
    declare_root_module_statics! {StetPlugin_Ref}
    const BASE_NAME: &'static str = "stet_plugin";
    const NAME: &'static str = "stet plugin";
    const VERSION_STRINGS: VersionStrings = VersionStrings {
        version: RStr::from_str(VERSION),
    };
}
