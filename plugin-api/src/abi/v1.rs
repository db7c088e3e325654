//! The binary interface of every minor version from 1.2 on: the current one, and the only
//! one that grows.
//!
//! **Append-only.** Its prefix is 1.2's interface exactly (`#[sabi(last_prefix_field)]`
//! stays where 1.2 put it, for good, as abi_stable intends); each later minor appends
//! methods after it, every one with a default body. So:
//!
//! - a plugin built for an older minor (1.2 on) lacks the newer methods; the host checks the
//!   fields it has against its own (`host/plugin-host/src/plugins/loader.rs`) and calls through this
//!   module, the defaults answering for what the plugin lacks;
//! - a plugin built for a newer minor has methods this host does not know, which abi_stable
//!   accepts; what such a plugin needs from the host it names in [`StetPlugin::requires`],
//!   and a host that lacks it refuses the plugin in one line.
//!
//! New data travels in new types (a type that crossed the boundary never gains a field):
//! [`crate::WallReport`], [`crate::CallOutcome`], [`Started`], and non-exhaustive enums
//! ([`crate::SandboxOption`], [`crate::CredentialSource`]) that gain variants in later
//! minors without a layout change. `tests/e2e/invariants.rs` compares this module's layout
//! with the committed record (`plugin-api/abi-layouts.txt`): fields may only be appended.
//!
//! What each version added: 1.3 — [`Runtime::start`] (sandbox options: a forwarded unix
//! socket, the first process), [`Harness::check_walls_typed`],
//! [`Harness::read_proof_typed`], [`Harness::read_call`], [`Harness::credentials`],
//! [`Harness::settle_profile`], [`StetPlugin::requires`]; 1.4 — [`Harness::login_expiry`],
//! [`Harness::refresh_launch`], [`Harness::settle_refresh`]; 1.5 — [`Runtime::stop`];
//! 1.6 — [`Runtime::limit_counters`]; 1.7 — [`Harness::render_transcript`].
//!
//! Plugin authors do not implement these traits directly: they implement
//! [`RuntimePlugin`](crate::RuntimePlugin) or [`HarnessPlugin`](crate::HarnessPlugin) and
//! export them with [`export_plugin!`](crate::export_plugin), which wraps every call in a
//! panic guard. The host calls the `*_TO` trait objects defined here.

use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    package_version_strings, sabi_trait,
    sabi_types::VersionStrings,
    std_types::{RBox, ROption, RResult, RSlice, RStr, RString, RVec},
    StableAbi,
};

pub use super::v1_1::{OutputSink, OutputSink_TO, Process, ProcessBox, Process_TO, SinkBox};
pub use super::v1_2::{Terminal, TerminalBox, Terminal_TO};
use crate::{
    CallOutcome, CredentialDecl, ExitStatus, HarnessContext, ImageStatus, Label, Launch,
    LimitCounters, Outcome, PluginError, PluginIdentity, ProbeReport, ProcessSpec, Profile,
    Rendered, Role, RoleRequest, SandboxInfo, SandboxOption_NE, SandboxSpec, TerminalSize,
    WallCheck, WallReport,
};

/// A sandbox made by [`Runtime::start`]: the runtime's record of it, and the first process
/// when one was asked for ([`crate::SandboxOption::FirstProcess`]).
#[repr(C)]
#[derive(StableAbi)]
pub struct Started {
    /// The sandbox, as [`Runtime::create_sandbox`] reports it.
    pub info: SandboxInfo,
    /// The first process, running.
    pub first: ROption<ProcessBox>,
}

fn refuse<T>(what: String) -> RResult<T, PluginError> {
    RResult::RErr(
        PluginError::unsupported(what)
            .with_remedy("install a build of the plugin for a newer stet-plugin-api"),
    )
}

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
    /// Starts a process on a terminal in a sandbox. New in 1.2. The end of the prefix:
    /// everything below is appended, with a default.
    #[sabi(last_prefix_field)]
    fn spawn_terminal(
        &self,
        sandbox: RStr<'_>,
        spec: ProcessSpec,
        size: TerminalSize,
    ) -> RResult<TerminalBox, PluginError>;

    /// Creates and starts a sandbox with `options` beyond its spec. New in 1.3; a runtime
    /// built before it has no options to offer, so the default makes the plain sandbox when
    /// none is asked for and refuses, naming the first option, otherwise.
    fn start(
        &self,
        spec: SandboxSpec,
        options: RVec<SandboxOption_NE>,
    ) -> RResult<Started, PluginError> {
        if let Some(option) = options.first() {
            let name = option
                .as_enum()
                .map(|o| o.name())
                .unwrap_or("an unknown option");
            return refuse(format!(
                "this runtime was built before plugin API 1.3 and cannot provide {name}"
            ));
        }
        match self.create_sandbox(spec) {
            RResult::ROk(info) => RResult::ROk(Started {
                info,
                first: ROption::RNone,
            }),
            RResult::RErr(e) => RResult::RErr(e),
        }
    }

    /// Stops every process in a sandbox for good, so that nothing in it runs or writes
    /// again, and leaves its removal to [`Runtime::teardown`]. New in 1.5; a runtime
    /// built before it stops a sandbox by tearing it down.
    fn stop(&self, sandbox: RStr<'_>) -> RResult<(), PluginError> {
        self.teardown(sandbox)
    }

    /// A sandbox's limit counters read from outside it, or `RNone` where this runtime
    /// cannot (the host then reads them from inside). New in 1.6; a runtime built before
    /// it answers `RNone`.
    fn limit_counters(&self, _sandbox: RStr<'_>) -> RResult<ROption<LimitCounters>, PluginError> {
        RResult::ROk(ROption::RNone)
    }
    // Next minor: append here, with a default body.
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
    /// The end of the prefix: everything below is appended, with a default.
    #[sabi(last_prefix_field)]
    fn login_launch(
        &self,
        context: HarnessContext,
        profile_dir: RStr<'_>,
    ) -> RResult<Launch, PluginError>;

    /// The static walls with typed states. New in 1.3; the default reads
    /// [`Harness::check_walls`] (held or broken).
    fn check_walls_typed(
        &self,
        context: HarnessContext,
        profile: Profile,
    ) -> RResult<RVec<WallReport>, PluginError> {
        match self.check_walls(context, profile) {
            RResult::ROk(walls) => RResult::ROk(walls.into_iter().map(Into::into).collect()),
            RResult::RErr(e) => RResult::RErr(e),
        }
    }

    /// The live proof's walls with typed states. New in 1.3; the default reads
    /// [`Harness::read_proof`].
    fn read_proof_typed(&self, output: RSlice<'_, u8>) -> RResult<RVec<WallReport>, PluginError> {
        match self.read_proof(output) {
            RResult::ROk(walls) => RResult::ROk(walls.into_iter().map(Into::into).collect()),
            RResult::RErr(e) => RResult::RErr(e),
        }
    }

    /// A role's output read into a typed outcome. New in 1.3; the default reads
    /// [`Harness::read_outcome`].
    fn read_call(
        &self,
        role: Role,
        output: RSlice<'_, u8>,
        exit: ExitStatus,
    ) -> RResult<CallOutcome, PluginError> {
        match self.read_outcome(role, output, exit) {
            RResult::ROk(outcome) => RResult::ROk(outcome.into()),
            RResult::RErr(e) => RResult::RErr(e),
        }
    }

    /// The credentials the agent uses, declared so that the host can keep them out of the
    /// sandbox. New in 1.3; the default declares none.
    fn credentials(
        &self,
        context: HarnessContext,
        profile: Profile,
    ) -> RResult<RVec<CredentialDecl>, PluginError> {
        let _ = (context, profile);
        RResult::ROk(RVec::new())
    }

    /// After a call that ran on `used`, a fresh copy of the profile, carries back into
    /// the profile what the harness's own rule keeps (a login its agent refreshed during
    /// the call); returns the files it carried. New in 1.3; the default carries nothing.
    fn settle_profile(
        &self,
        context: HarnessContext,
        profile: Profile,
        used: RStr<'_>,
    ) -> RResult<RVec<RString>, PluginError> {
        let _ = (context, profile, used);
        RResult::ROk(RVec::new())
    }

    /// When the stored login stops being accepted (ms since the epoch; 0: it does not
    /// expire). New in 1.4; the default answers 0.
    fn login_expiry(&self, context: HarnessContext, profile: Profile) -> RResult<u64, PluginError> {
        let _ = (context, profile);
        RResult::ROk(0)
    }

    /// The launch that renews the stored login, on a copy it puts into `work_dir`. New in
    /// 1.4; the default answers unsupported.
    fn refresh_launch(
        &self,
        context: HarnessContext,
        profile: Profile,
        work_dir: RStr<'_>,
    ) -> RResult<Launch, PluginError> {
        let _ = (context, profile, work_dir);
        refuse("renewing a login".to_string())
    }

    /// Puts the login the refresh launch renewed in `work_dir` into the profile; returns
    /// its new expiry. New in 1.4; the default answers unsupported.
    fn settle_refresh(
        &self,
        context: HarnessContext,
        profile: Profile,
        work_dir: RStr<'_>,
    ) -> RResult<u64, PluginError> {
        let _ = (context, profile, work_dir);
        refuse("renewing a login".to_string())
    }

    /// A piece of a role's output rendered as typed transcript entries; `end`: nothing
    /// follows the piece. New in 1.7; the default answers unsupported (the host then shows
    /// the output as it is).
    fn render_transcript(
        &self,
        role: Role,
        output: RSlice<'_, u8>,
        end: bool,
    ) -> RResult<Rendered, PluginError> {
        let _ = (role, output, end);
        refuse("rendering a transcript".to_string())
    }
    // Next minor: append here, with a default body.
}

/// A harness as the host holds it.
pub type HarnessBox = Harness_TO<'static, RBox<()>>;

/// The root module every plugin library exports, from 1.2 on.
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
    /// The end of the prefix.
    #[sabi(last_prefix_field)]
    pub new_harness: extern "C" fn(config: RStr<'_>) -> RResult<HarnessBox, PluginError>,
    /// What the plugin needs of the host, by [`crate::host_capability`] names; a host that
    /// lacks one refuses the plugin, naming it. New in 1.3; absent in older plugins, which
    /// need nothing beyond their own version.
    #[sabi(missing_field(option))]
    pub requires: extern "C" fn() -> RVec<RString>,
    // Next minor: append here.
}

impl RootModule for StetPlugin_Ref {
    declare_root_module_statics! {StetPlugin_Ref}
    const BASE_NAME: &'static str = "stet_plugin";
    const NAME: &'static str = "stet plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}
