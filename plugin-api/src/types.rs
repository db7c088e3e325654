//! Plain data that crosses the plugin boundary.
//!
//! Every type here is `#[repr(C)]` and derives [`StableAbi`], so the host checks its layout
//! when it loads a plugin. Within one major version of the API these types never change:
//! new data arrives in new types used by new methods, never as a new field in an old type
//! (a new field would make every older plugin fail the layout check).

use abi_stable::{
    std_types::{ROption, RString, RVec},
    StableAbi,
};

/// Which interface a plugin implements.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PluginKind {
    /// Where the agent runs: creates sandboxes and runs processes in them.
    Runtime,
    /// Which agent runs and how it is walled in.
    Harness,
}

impl PluginKind {
    /// The lowercase name used in manifests and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            PluginKind::Runtime => "runtime",
            PluginKind::Harness => "harness",
        }
    }
}

/// What a plugin library says about itself. The host compares it with the plugin's
/// manifest before it calls anything else; a difference refuses the plugin.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct PluginIdentity {
    /// The plugin's name, unique among installed plugins (`docker`, `claude`).
    pub name: RString,
    /// The interface it implements.
    pub kind: PluginKind,
    /// The plugin's own semver version.
    pub version: RString,
    /// The version of `stet-plugin-api` the plugin was built against.
    pub api_version: RString,
}

/// One fact a probe reports, shown to the person as `key: value`.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    /// A short lowercase key (`engine`, `api-version`, `os/arch`, `login`).
    pub key: RString,
    /// The value, as text.
    pub value: RString,
}

impl Fact {
    /// Builds a fact from anything string-like.
    pub fn new(key: impl Into<String>, value: impl Into<String>) -> Self {
        Fact {
            key: key.into().into(),
            value: value.into().into(),
        }
    }
}

/// The answer to "is your backend there, and what can it do?".
///
/// A probe that cannot reach its backend returns `available: false` with a reason and a
/// remedy, not an error: errors are for the probe itself failing.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct ProbeReport {
    /// Whether the backend can be used right now.
    pub available: bool,
    /// The backend's version (`Docker Engine 20.10.24`, `2.1.332 (Claude Code)`), or empty.
    pub backend_version: RString,
    /// How strongly this backend should be preferred when the person has not chosen.
    /// Higher wins; ties are broken by plugin name. The host never ranks backends itself.
    pub priority: i32,
    /// What the backend can do right now (`network-none`, `limits`, `bind-mounts`, ...).
    pub capabilities: RVec<RString>,
    /// Why the backend is unavailable; for an available backend, optionally a note.
    pub reason: RString,
    /// What the person can do to make it available; empty when available.
    pub remedy: RString,
    /// Further facts for `stet plugins probe` (engine API version, OS/arch, login state),
    /// and for a runtime its isolation class, which the host also shows where a runtime
    /// is chosen ([`fact::ISOLATION`](crate::fact::ISOLATION)).
    pub facts: RVec<Fact>,
}

impl ProbeReport {
    /// An available backend with the given version and priority.
    pub fn available(backend_version: impl Into<String>, priority: i32) -> Self {
        ProbeReport {
            available: true,
            backend_version: backend_version.into().into(),
            priority,
            capabilities: RVec::new(),
            reason: RString::new(),
            remedy: RString::new(),
            facts: RVec::new(),
        }
    }

    /// An unavailable backend, saying why and what to do.
    pub fn unavailable(reason: impl Into<String>, remedy: impl Into<String>) -> Self {
        ProbeReport {
            available: false,
            backend_version: RString::new(),
            priority: 0,
            capabilities: RVec::new(),
            reason: reason.into().into(),
            remedy: remedy.into().into(),
            facts: RVec::new(),
        }
    }

    /// Adds a capability.
    pub fn with_capability(mut self, capability: impl Into<String>) -> Self {
        self.capabilities.push(capability.into().into());
        self
    }

    /// Adds a fact.
    pub fn with_fact(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.facts.push(Fact::new(key, value));
        self
    }
}

/// An environment variable given to a sandbox or a process.
///
/// Environments are always built from scratch: nothing is inherited from the host.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct EnvVar {
    /// The variable's name.
    pub name: RString,
    /// Its value.
    pub value: RString,
}

impl EnvVar {
    /// Builds a variable from anything string-like.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        EnvVar {
            name: name.into().into(),
            value: value.into().into(),
        }
    }
}

/// A label attached to a sandbox, used to find it again (`stet.run`, `stet.lane`).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// The label's key.
    pub key: RString,
    /// Its value.
    pub value: RString,
}

impl Label {
    /// Builds a label from anything string-like.
    pub fn new(key: impl Into<String>, value: impl Into<String>) -> Self {
        Label {
            key: key.into().into(),
            value: value.into().into(),
        }
    }
}

/// A host directory made visible inside a sandbox.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Absolute path on the host.
    pub source: RString,
    /// Absolute path inside the sandbox.
    pub target: RString,
    /// Read-write when true; read-only otherwise. Only the lane is mounted writable.
    pub writable: bool,
}

/// The network a sandbox gets.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// Loopback only. The default.
    None,
    /// The runtime's ordinary outbound network.
    Open,
    /// Outbound to these hosts only. A runtime that cannot enforce an allow-list refuses
    /// this with [`crate::ErrorCode::UNSUPPORTED`] rather than opening everything.
    AllowHosts(RVec<RString>),
}

/// Resource limits for a sandbox. Zero means "the runtime's default".
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// CPU limit in thousandths of a core (1500 = one and a half cores).
    pub millicpus: u32,
    /// Memory limit in bytes.
    pub memory_bytes: u64,
    /// Maximum number of processes.
    pub pids: u32,
}

/// A numeric user and group.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserIds {
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

/// Everything a runtime needs to create a sandbox.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct SandboxSpec {
    /// A locally available image (`stet-lane:1`).
    pub image: RString,
    /// What the sandbox sees of the host. Anything not listed is not visible.
    pub mounts: RVec<Mount>,
    /// The sandbox's base environment, from scratch.
    pub env: RVec<EnvVar>,
    /// The working directory inside the sandbox.
    pub workdir: RString,
    /// The network the sandbox gets.
    pub network: Network,
    /// Resource limits.
    pub limits: Limits,
    /// Labels naming the stet run and lane, for listing and reaping.
    pub labels: RVec<Label>,
    /// Who processes run as, so that files written in the lane belong to the person on
    /// the host. `None` leaves it to the runtime.
    pub user: ROption<UserIds>,
}

/// A sandbox as a runtime reports it.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct SandboxInfo {
    /// The runtime's id for the sandbox, used in every later call.
    pub id: RString,
    /// The runtime's state word (`running`, `exited`, ...).
    pub state: RString,
    /// The sandbox's labels.
    pub labels: RVec<Label>,
}

/// A process to run inside an existing sandbox.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct ProcessSpec {
    /// Program and arguments; `argv[0]` is looked up on the sandbox's `PATH`.
    pub argv: RVec<RString>,
    /// Added to the sandbox's base environment for this process only.
    pub env: RVec<EnvVar>,
    /// Working directory; `None` uses the sandbox's.
    pub workdir: ROption<RString>,
    /// Bytes written to the process's standard input, which is then closed.
    pub stdin: RVec<u8>,
}

/// What a sandbox's control group has counted since it was made (new in 1.6): how often a
/// fork was refused at its pids limit, and how many processes the kernel's OOM killer
/// took. Read by the runtime from outside the sandbox, where nothing in it can reach.
#[repr(C)]
#[derive(StableAbi, Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LimitCounters {
    /// Forks refused at the pids limit (the control group's `pids.events` `max`).
    pub pids_refused: u64,
    /// Processes the OOM killer took (`memory.events`, or v1's `memory.oom_control`,
    /// `oom_kill`).
    pub oom_kills: u64,
}

/// What one entry of a rendered transcript is (new in 1.7): an integer code with named
/// constants, so that a newer harness's new kind is never undefined behaviour (a host shows
/// an unknown kind's text as it is).
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EntryKind(pub u32);

impl EntryKind {
    /// The agent's own words.
    pub const TEXT: EntryKind = EntryKind(0);
    /// A tool the agent called: `label` its name, `text` its arguments, compact.
    pub const TOOL_CALL: EntryKind = EntryKind(1);
    /// What a tool answered, shortened: `label` is `error` when the tool failed; what was
    /// left out is in `cut_lines` and `cut_bytes`.
    pub const TOOL_RESULT: EntryKind = EntryKind(2);
    /// How the call ended, in words (`text`) and figures (`facts`: `cost_usd`, `turns`,
    /// `duration_ms`, `is_error`, as the harness knows them).
    pub const RESULT: EntryKind = EntryKind(3);
    /// What the harness says about the session itself (its start: model, tools).
    pub const NOTE: EntryKind = EntryKind(4);
    /// Output the harness could not read, as it is (shortened when long).
    pub const RAW: EntryKind = EntryKind(5);

    /// A short lowercase name (`text`, `tool-call`, `tool-result`, `result`, `note`,
    /// `raw`), or `None` for a code this version does not know.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            Self::TEXT => "text",
            Self::TOOL_CALL => "tool-call",
            Self::TOOL_RESULT => "tool-result",
            Self::RESULT => "result",
            Self::NOTE => "note",
            Self::RAW => "raw",
            _ => return None,
        })
    }
}

/// One entry of a call's transcript as its harness renders it (new in 1.7). Typed rather
/// than formatted, so that each place that shows it — a terminal, `--json`, a web page —
/// lays it out its own way, and the host never reads the agent's own format.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct TranscriptEntry {
    /// What it is.
    pub kind: EntryKind,
    /// A tool's name for a tool call, `error` for a failed tool's result; else empty.
    pub label: RString,
    /// The text, one or more lines. Text from the agent: the host makes it inert.
    pub text: RString,
    /// Lines of the original left out of `text` (a shortened tool result or raw line).
    pub cut_lines: u64,
    /// Bytes of the original left out of `text`.
    pub cut_bytes: u64,
    /// Figures, as `key: value` (see [`EntryKind::RESULT`]).
    pub facts: RVec<Fact>,
}

impl TranscriptEntry {
    /// An entry of `kind` with `text`, no label, nothing cut, no figures.
    pub fn new(kind: EntryKind, text: impl Into<String>) -> Self {
        TranscriptEntry {
            kind,
            label: RString::new(),
            text: text.into().into(),
            cut_lines: 0,
            cut_bytes: 0,
            facts: RVec::new(),
        }
    }

    /// The same entry with `label`.
    pub fn labelled(mut self, label: impl Into<String>) -> Self {
        self.label = label.into().into();
        self
    }
}

/// What [`crate::HarnessPlugin::render_transcript`] made of a piece of a call's output
/// (new in 1.7): its entries, and how many bytes of the piece they cover (the rest, an
/// unfinished unit such as a line still being written, comes again with what follows).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq, Default)]
pub struct Rendered {
    /// The entries, in order.
    pub entries: RVec<TranscriptEntry>,
    /// Bytes of the piece rendered, from its start.
    pub consumed: u64,
}

/// How a process ended.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitStatus {
    /// The exit code, when the process exited by itself.
    pub code: ROption<i32>,
    /// The signal that ended it, when it was killed.
    pub signal: ROption<i32>,
    /// Whether the runtime reports the sandbox ran out of memory.
    pub out_of_memory: bool,
}

impl ExitStatus {
    /// A process that exited with `code`.
    pub fn exited(code: i32) -> Self {
        ExitStatus {
            code: ROption::RSome(code),
            signal: ROption::RNone,
            out_of_memory: false,
        }
    }

    /// A process that was ended by `signal`.
    pub fn signalled(signal: i32) -> Self {
        ExitStatus {
            code: ROption::RNone,
            signal: ROption::RSome(signal),
            out_of_memory: false,
        }
    }

    /// Whether the process exited with code 0.
    pub fn success(&self) -> bool {
        self.code == ROption::RSome(0)
    }
}

/// Which output stream a chunk of bytes came from.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Whether an image is present in the runtime's local store.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct ImageStatus {
    /// Whether the image can be used without fetching anything.
    pub present: bool,
    /// When absent: how to build or fetch it.
    pub remedy: RString,
}

/// The roles a harness launches an agent for.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Make the change the work item asks for.
    Implement,
    /// Judge the lane's change: land or revise.
    Review,
    /// The short live launch of the wall proof.
    Proof,
}

/// Facts about the drive a harness needs to prepare its walls.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct HarnessContext {
    /// The directory under which walled profiles live (`~/.stet/profiles`).
    pub profiles_root: RString,
    /// The stet binary by absolute path as seen where the agent runs, for hooks.
    pub stet_binary: RString,
    /// The host's environment, for checks only (a billing key present is refused).
    /// A harness never forwards it; launches build their environment from scratch.
    pub host_env: RVec<EnvVar>,
}

/// The profile a drive runs on: one walled directory holding the agent's login.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// Absolute path of the profile directory.
    pub dir: RString,
    /// Whether the agent reports a login in it (by state alone, never an account).
    pub logged_in: bool,
    /// How the route is described on the consent screen and in receipts.
    pub route: RString,
}

/// One wall: a named property checked before the first move.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct WallCheck {
    /// The wall's name (`profile-alone`, `login-present`, `settings-exact`, ...).
    pub wall: RString,
    /// Whether the wall held.
    pub held: bool,
    /// What was seen.
    pub detail: RString,
    /// When broken: what to do.
    pub remedy: RString,
}

/// What a harness asks for one agent call; the host runs it in a sandbox.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct RoleRequest {
    /// The role to launch.
    pub role: Role,
    /// The prompt, delivered on standard input.
    pub prompt: RString,
    /// The profile from [`Profile`].
    pub profile_dir: RString,
    /// The lane's working copy as seen inside the sandbox.
    pub workdir: RString,
}

/// A launch: the process a harness wants run, and what its sandbox must provide.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// The process to run.
    pub process: ProcessSpec,
    /// Host paths that must be visible inside the sandbox (the agent binary, stet, the profile).
    pub mounts: RVec<Mount>,
    /// The network the agent needs (its model API), named on the consent screen.
    pub network: Network,
}

/// How an agent call ended, as the harness reads the call's output.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutcomeKind {
    /// The agent finished its work.
    Done,
    /// The agent reported a failure.
    Failed,
    /// The output was not in the shape the harness expects.
    OutOfShape,
    /// The agent hit a usage limit; see [`Outcome::retry_at_unix`].
    RateLimited,
    /// The profile has no login.
    NotLoggedIn,
}

/// The outcome of one agent call.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct Outcome {
    /// How the call ended.
    pub kind: OutcomeKind,
    /// The agent's final message or the reason for the outcome.
    pub detail: RString,
    /// For a usage limit: when to try again, seconds since the Unix epoch.
    pub retry_at_unix: ROption<i64>,
    /// Cost in US dollars, when the agent reports it.
    pub cost_usd: ROption<f64>,
    /// Usage counters the agent reports (`input_tokens`, `output_tokens`, `turns`, ...).
    pub usage: RVec<Fact>,
}

/// The size of a terminal, in character cells.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminalSize {
    /// Rows.
    pub rows: u16,
    /// Columns.
    pub cols: u16,
}

// ---------------------------------------------------------------------------------------
// New in 1.3. Kinds and states are integer codes with named constants (as ErrorCode is), so
// that a newer plugin can send one this host has never heard of without undefined
// behaviour; lists of options are non-exhaustive enums, which gain variants in later minor
// versions. The host matches on these, never on a plugin's words.
// ---------------------------------------------------------------------------------------

use abi_stable::std_types::RBox;

/// The state of one wall, as the host decides on it.
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WallState(pub u32);

impl WallState {
    /// The wall holds.
    pub const HELD: WallState = WallState(0);
    /// The wall is down: something leaks, or is not as it must be.
    pub const BROKEN: WallState = WallState(1);
    /// What the wall is about is not there yet (a settings file stet has not written).
    pub const ABSENT: WallState = WallState(2);
    /// A service the proof needs did not answer (the model API), so the wall is not proven.
    pub const UNREACHABLE: WallState = WallState(3);
    /// The agent cannot run where it must (its binary, or its interpreter, is missing in the
    /// image), so the wall is not proven.
    pub const CANNOT_RUN: WallState = WallState(4);

    /// A short lowercase name, or `None` for a state this version does not know.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            Self::HELD => "held",
            Self::BROKEN => "broken",
            Self::ABSENT => "absent",
            Self::UNREACHABLE => "unreachable",
            Self::CANNOT_RUN => "cannot-run",
            _ => return None,
        })
    }
}

/// One wall with a typed state: what [`WallCheck`] became in 1.3.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct WallReport {
    /// The wall's id: one of [`crate::wall`]'s constants, or the plugin's own.
    pub wall: RString,
    /// Its state.
    pub state: WallState,
    /// What was seen.
    pub detail: RString,
    /// When not held: what to do.
    pub remedy: RString,
}

impl WallReport {
    /// Wall `wall`, held or broken as `held` says, with `detail`; `remedy` is kept only
    /// when it is broken (a held wall needs none).
    pub fn checked(wall: &str, held: bool, detail: impl Into<String>, remedy: &str) -> Self {
        WallReport {
            wall: wall.into(),
            state: if held {
                WallState::HELD
            } else {
                WallState::BROKEN
            },
            detail: detail.into().into(),
            remedy: if held { "".into() } else { remedy.into() },
        }
    }

    /// Whether the wall held.
    pub fn held(&self) -> bool {
        self.state == WallState::HELD
    }
}

impl From<WallCheck> for WallReport {
    fn from(w: WallCheck) -> Self {
        WallReport {
            wall: w.wall,
            state: if w.held {
                WallState::HELD
            } else {
                WallState::BROKEN
            },
            detail: w.detail,
            remedy: w.remedy,
        }
    }
}

impl From<WallReport> for WallCheck {
    fn from(w: WallReport) -> Self {
        WallCheck {
            held: w.held(),
            wall: w.wall,
            detail: w.detail,
            remedy: w.remedy,
        }
    }
}

/// How an agent call ended: what [`OutcomeKind`] became in 1.3.
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OutcomeCode(pub u32);

impl OutcomeCode {
    /// The agent finished its work.
    pub const DONE: OutcomeCode = OutcomeCode(0);
    /// The agent ran and failed its task (it could not do it): counts toward the item's
    /// rounds, never toward an outage.
    pub const FAILED: OutcomeCode = OutcomeCode(1);
    /// The output was not in the shape the harness expects.
    pub const OUT_OF_SHAPE: OutcomeCode = OutcomeCode(2);
    /// The agent hit a usage limit; see [`CallOutcome::retry_at_unix`].
    pub const RATE_LIMITED: OutcomeCode = OutcomeCode(3);
    /// The profile has no login.
    pub const NOT_LOGGED_IN: OutcomeCode = OutcomeCode(4);
    /// A service the agent needs (its model API) did not answer: infrastructure, not the
    /// agent failing its task.
    pub const SERVICE_UNAVAILABLE: OutcomeCode = OutcomeCode(5);
    /// The call was killed by a resource limit of its sandbox (memory, processes, disk).
    pub const RESOURCE_LIMIT: OutcomeCode = OutcomeCode(6);

    /// A short lowercase name, or `None` for a code this version does not know.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            Self::DONE => "done",
            Self::FAILED => "failed",
            Self::OUT_OF_SHAPE => "out-of-shape",
            Self::RATE_LIMITED => "rate-limited",
            Self::NOT_LOGGED_IN => "not-logged-in",
            Self::SERVICE_UNAVAILABLE => "service-unavailable",
            Self::RESOURCE_LIMIT => "resource-limit",
            _ => return None,
        })
    }
}

impl From<OutcomeKind> for OutcomeCode {
    fn from(kind: OutcomeKind) -> Self {
        match kind {
            OutcomeKind::Done => Self::DONE,
            OutcomeKind::Failed => Self::FAILED,
            OutcomeKind::OutOfShape => Self::OUT_OF_SHAPE,
            OutcomeKind::RateLimited => Self::RATE_LIMITED,
            OutcomeKind::NotLoggedIn => Self::NOT_LOGGED_IN,
        }
    }
}

/// The outcome of one agent call, with a typed kind that grows: what [`Outcome`] became in
/// 1.3.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct CallOutcome {
    /// How the call ended.
    pub kind: OutcomeCode,
    /// The agent's final message or the reason for the outcome.
    pub detail: RString,
    /// For a usage limit: when to try again, seconds since the Unix epoch.
    pub retry_at_unix: ROption<i64>,
    /// Cost in US dollars, when the agent reports it.
    pub cost_usd: ROption<f64>,
    /// Usage counters the agent reports.
    pub usage: RVec<Fact>,
}

impl From<Outcome> for CallOutcome {
    fn from(o: Outcome) -> Self {
        CallOutcome {
            kind: o.kind.into(),
            detail: o.detail,
            retry_at_unix: o.retry_at_unix,
            cost_usd: o.cost_usd,
            usage: o.usage,
        }
    }
}

/// A unix socket on the host made reachable inside a sandbox (stet's egress proxy).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct ForwardedSocket {
    /// The listening socket's absolute path on the host.
    pub host: RString,
    /// The absolute path it appears at inside the sandbox.
    pub sandbox: RString,
}

/// Something more a sandbox is asked for, beyond its [`SandboxSpec`]. Non-exhaustive: later
/// minor versions add variants, and a runtime that does not know one (or cannot provide
/// it) refuses the sandbox with [`ErrorCode::UNSUPPORTED`](crate::ErrorCode::UNSUPPORTED)
/// naming it — never ignores it.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
#[sabi(kind(WithNonExhaustive(size = [usize; 16], traits(Debug, Clone, PartialEq))))]
#[non_exhaustive]
pub enum SandboxOption {
    /// Forward a unix socket from the host into the sandbox
    /// ([`crate::capability::FORWARD_SOCKET`]).
    ForwardSocket(ForwardedSocket),
    /// Run this process as the sandbox's first process instead of an idle one, for
    /// one-process sandboxes (`stet run`); it comes back in [`crate::abi::v1::Started`]
    /// ([`crate::capability::FIRST_PROCESS`]).
    FirstProcess(RBox<ProcessSpec>),
}

impl SandboxOption {
    /// The option's name, for refusals.
    pub fn name(&self) -> &'static str {
        match self {
            SandboxOption::ForwardSocket(_) => "forward-socket",
            SandboxOption::FirstProcess(_) => "first-process",
        }
    }
}

/// Where a harness keeps the credential it sends to its model API. Non-exhaustive.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
#[sabi(kind(WithNonExhaustive(size = [usize; 12], traits(Debug, Clone, PartialEq))))]
#[non_exhaustive]
pub enum CredentialSource {
    /// A JSON file in the profile: its path relative to the profile directory, and the
    /// JSON pointer (RFC 6901) to the secret inside it (`/claudeAiOauth/accessToken`).
    ProfileFile {
        /// Relative to the profile directory.
        path: RString,
        /// Where in the file's JSON the secret is.
        pointer: RString,
    },
    /// A variable of the agent's environment.
    Environment {
        /// The variable's name.
        name: RString,
    },
}

/// A harness's declaration of the credential its agent uses, so that the host can keep it
/// out of the sandbox without knowing the harness: where it is kept, and which requests
/// carry it.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct CredentialDecl {
    /// A short name for it (`claude-login`).
    pub id: RString,
    /// Where the harness keeps it.
    pub source: CredentialSource_NE,
    /// The host (and `:port`, when not 443) its requests go to.
    pub host: RString,
    /// The header it travels in (`Authorization`).
    pub header: RString,
    /// The header's value, `{secret}` standing for the secret (`Bearer {secret}`).
    pub value: RString,
}
