//! The traits plugin authors implement, and the adapters that carry them across the
//! boundary with every call guarded against panics.

use std::panic::{catch_unwind, AssertUnwindSafe};

use abi_stable::{
    sabi_trait::TD_Opaque,
    std_types::{RBox, ROption, RResult, RSlice, RStr, RString, RVec},
};

use crate::abi::{v1, v1_0, v1_1, v1_2};
use crate::{
    CallOutcome, CredentialDecl, ErrorCode, ExitStatus, HarnessContext, ImageStatus, Label, Launch,
    LimitCounters, Outcome, PluginError, ProbeReport, ProcessSpec, Profile, Rendered, Role,
    RoleRequest, SandboxInfo, SandboxOption, SandboxOption_NE, SandboxSpec, Stream, TerminalSize,
    TranscriptEntry, WallCheck, WallReport,
};

/// Where a running process's output goes: the host's sink, seen from the plugin.
///
/// Call [`Sink::write`] for every chunk as soon as it arrives, in order; do not buffer a
/// whole output. The sink may be shared between threads behind a mutex.
pub struct Sink<'a> {
    inner: v1_1::SinkBox<'a>,
}

impl<'a> Sink<'a> {
    /// Wraps the host's sink. Plugins receive a `Sink` already made; this is for test support.
    pub fn new(inner: v1_1::SinkBox<'a>) -> Self {
        Sink { inner }
    }

    /// A sink that calls `f` for every chunk: for hosts and test support, which drive a
    /// plugin's [`ProcessPlugin::wait`] themselves. A panic in `f` is caught and the chunk
    /// dropped, because a panic must not unwind into plugin code.
    pub fn from_fn(f: &'a mut (dyn FnMut(Stream, &[u8]) + Send)) -> Self {
        Sink::new(host_sink(f))
    }

    /// Hands one chunk to the host.
    pub fn write(&mut self, stream: Stream, bytes: &[u8]) {
        self.inner.chunk(stream, RSlice::from_slice(bytes));
    }

    /// Hands one chunk of standard output to the host.
    pub fn stdout(&mut self, bytes: &[u8]) {
        self.write(Stream::Stdout, bytes);
    }

    /// Hands one chunk of standard error to the host.
    pub fn stderr(&mut self, bytes: &[u8]) {
        self.write(Stream::Stderr, bytes);
    }
}

/// The boundary object for a host-side chunk handler; see [`Sink::from_fn`].
pub fn host_sink<'a>(f: &'a mut (dyn FnMut(Stream, &[u8]) + Send)) -> v1_1::SinkBox<'a> {
    v1_1::OutputSink_TO::from_value(FnSink(f), TD_Opaque)
}

struct FnSink<'a>(&'a mut (dyn FnMut(Stream, &[u8]) + Send));

impl v1_1::OutputSink for FnSink<'_> {
    fn chunk(&mut self, stream: Stream, bytes: RSlice<'_, u8>) {
        let f = &mut self.0;
        if catch_unwind(AssertUnwindSafe(|| f(stream, bytes.as_slice()))).is_err() {
            eprintln!(
                "stet: an output handler panicked; a chunk of {} bytes was dropped",
                bytes.len()
            );
        }
    }
}

/// A runtime: where the agent runs.
///
/// # Threads, blocking and cancellation
///
/// The host calls every method on a thread of its own, never on an async executor, and
/// may call methods concurrently (several lanes at once): implementations are `Send +
/// Sync`. Methods may block for as long as the backend takes; a plugin that needs async
/// code owns its own executor inside the library. The host bounds `probe` by a time limit
/// (it runs probes in a separate process and kills it), and stops a running process
/// through [`ProcessPlugin::kill`].
///
/// # Errors and panics
///
/// Return a [`PluginError`] whose message says what failed and whose remedy says what to
/// do. A panic is caught on the plugin's side of the boundary and reaches the host as an
/// error with code [`ErrorCode::PANICKED`]; the host stays up and names the plugin.
/// Aborts and crashes cannot be caught in-process: the host probes in a child process so
/// that one broken plugin does not hide the others.
pub trait RuntimePlugin: Send + Sync + 'static {
    /// Is the backend there, which version, what can it do?
    ///
    /// Called once per drive and by `stet plugins probe`, in a short-lived child process
    /// under a time limit. Must not change anything. An absent backend is an
    /// [`ProbeReport::unavailable`] answer with a remedy, not an error. The reported
    /// priority decides selection when the person has not chosen a runtime.
    fn probe(&self) -> Result<ProbeReport, PluginError>;

    /// Creates and starts a sandbox so that processes can be spawned in it.
    ///
    /// Only the listed mounts may be visible; the environment is exactly `spec.env`; the
    /// network is as asked (none by default). A missing image is [`ErrorCode::NOT_FOUND`]
    /// with a remedy saying how to build it.
    fn create_sandbox(&self, spec: SandboxSpec) -> Result<SandboxInfo, PluginError>;

    /// Starts a process in a sandbox created by [`RuntimePlugin::create_sandbox`].
    /// Returns as soon as the process is started; output is read by
    /// [`ProcessPlugin::wait`].
    fn spawn(
        &self,
        sandbox: &str,
        spec: ProcessSpec,
    ) -> Result<Box<dyn ProcessPlugin>, PluginError>;

    /// Stops and removes a sandbox and everything running in it. Calling it again, or
    /// for a sandbox that is already gone, succeeds.
    fn teardown(&self, sandbox: &str) -> Result<(), PluginError>;

    /// Lists the sandboxes that carry every one of `labels` (all sandboxes when empty is
    /// not allowed: the host always names at least `stet.managed`).
    fn list_sandboxes(&self, labels: &[Label]) -> Result<Vec<SandboxInfo>, PluginError>;

    /// Whether `image` is present locally, and if not how to get it. Since API 1.1; the
    /// default answers "present" so that the host goes on to `create_sandbox`, whose own
    /// not-found error then names the image.
    fn image_status(&self, image: &str) -> Result<ImageStatus, PluginError> {
        let _ = image;
        Ok(ImageStatus {
            present: true,
            remedy: RString::new(),
        })
    }

    /// Starts a process on a terminal (a pseudo-terminal inside the sandbox) with live
    /// input, for interactive programs such as an agent's own login. Since API 1.2; the
    /// default answers [`ErrorCode::UNSUPPORTED`].
    fn spawn_terminal(
        &self,
        sandbox: &str,
        spec: ProcessSpec,
        size: TerminalSize,
    ) -> Result<Box<dyn TerminalPlugin>, PluginError> {
        let _ = (sandbox, spec, size);
        Err(PluginError::unsupported(
            "this runtime cannot run processes on a terminal",
        ))
    }

    /// Creates and starts a sandbox as [`RuntimePlugin::create_sandbox`] does, with
    /// `options` beyond the spec: a unix socket forwarded from the host
    /// ([`SandboxOption::ForwardSocket`]), the process to run as the sandbox's first one
    /// ([`SandboxOption::FirstProcess`], returned running). Every option must be provided
    /// or the sandbox refused with [`ErrorCode::UNSUPPORTED`] naming it; an option is
    /// never ignored. Say which you provide in the probe's capabilities
    /// ([`crate::capability::FORWARD_SOCKET`], [`crate::capability::FIRST_PROCESS`]).
    /// Since API 1.3; the default provides none: it creates the plain sandbox when no
    /// option is asked for.
    fn start(
        &self,
        spec: SandboxSpec,
        options: Vec<SandboxOption>,
    ) -> Result<(SandboxInfo, Option<Box<dyn ProcessPlugin>>), PluginError> {
        if let Some(option) = options.first() {
            return Err(PluginError::unsupported(format!(
                "this runtime cannot provide {}",
                option.name()
            )));
        }
        Ok((self.create_sandbox(spec)?, None))
    }

    /// Stops every process in `sandbox` for good — the ones the host spawned and
    /// anything they left running — so that nothing in it runs, or writes to a mount,
    /// again; the sandbox itself may stay until [`RuntimePlugin::teardown`] removes it.
    /// When this returns `Ok`, that must already hold: the host goes on to use what the
    /// sandbox could write (a lane's working copy) while the removal happens off its
    /// critical path. Killing them and waiting for their end qualifies; freezing them (a
    /// cgroup freezer) only if [`RuntimePlugin::teardown`] never thaws what was frozen
    /// before it is killed. A backend that can do neither quickly tears the sandbox down
    /// here. Calling it again, or on a sandbox that is gone or whose
    /// processes have all ended, succeeds. Since API 1.5; the default tears the sandbox
    /// down.
    fn stop(&self, sandbox: &str) -> Result<(), PluginError> {
        self.teardown(sandbox)
    }

    /// What `sandbox`'s control group has counted so far — forks refused at its pids
    /// limit, processes the OOM killer took — read from outside the sandbox, or `None`
    /// where this runtime cannot read them (the host then reads them from inside, with a
    /// process of its own, which costs an exec and can be interfered with by what the
    /// agent left running). Called after the host's process in it has ended, before
    /// [`RuntimePlugin::stop`]. Answer only what the kernel counted for exactly this
    /// sandbox: `None` is always safe. Since API 1.6; the default is `None`.
    fn limit_counters(&self, sandbox: &str) -> Result<Option<LimitCounters>, PluginError> {
        let _ = sandbox;
        Ok(None)
    }
}

/// A process started by [`RuntimePlugin::spawn_terminal`].
pub trait TerminalPlugin: Send + Sync + 'static {
    /// Streams the terminal's output (as [`Stream::Stdout`]) until the process ends.
    fn wait(&self, sink: &mut Sink<'_>) -> Result<ExitStatus, PluginError>;
    /// Kills the process; idempotent, callable from any thread.
    fn kill(&self) -> Result<(), PluginError>;
    /// Sends keystrokes, in order; callable from any thread while `wait` blocks.
    fn write(&self, bytes: &[u8]) -> Result<(), PluginError>;
    /// Closes the input (end of file).
    fn close_input(&self) -> Result<(), PluginError>;
    /// Tells the process its terminal changed size.
    fn resize(&self, size: TerminalSize) -> Result<(), PluginError>;
}

/// A process started by [`RuntimePlugin::spawn`].
pub trait ProcessPlugin: Send + Sync + 'static {
    /// Streams output into `sink` chunk by chunk until the process ends, then returns how
    /// it ended. Called once, on a host thread that blocks in it.
    fn wait(&self, sink: &mut Sink<'_>) -> Result<ExitStatus, PluginError>;

    /// Kills the process and what it started. Called from another thread while `wait`
    /// blocks, or after it returned; must be idempotent.
    fn kill(&self) -> Result<(), PluginError>;
}

/// A harness: which agent runs, and how it is walled in.
///
/// Threads, blocking, errors and panics are as for [`RuntimePlugin`]. A harness never
/// runs the agent itself: it describes launches, and the host runs them in a sandbox of
/// the selected runtime.
pub trait HarnessPlugin: Send + Sync + 'static {
    /// Is the agent's binary there, which version, is a login present (by state alone,
    /// never an account identifier)?
    fn probe(&self) -> Result<ProbeReport, PluginError>;

    /// The one walled profile this drive runs on; none or several is an error naming them.
    fn profile(&self, context: &HarnessContext) -> Result<Profile, PluginError>;

    /// Writes the walled settings (stet's hooks and nothing else) into the profile and
    /// returns exactly what was written, so the host can compare before each stage.
    fn write_settings(
        &self,
        context: &HarnessContext,
        profile: &Profile,
    ) -> Result<String, PluginError>;

    /// The static wall checks, one entry per wall, held or not.
    fn check_walls(
        &self,
        context: &HarnessContext,
        profile: &Profile,
    ) -> Result<Vec<WallCheck>, PluginError>;

    /// The launch for one role: process, mounts it needs, network it needs.
    fn launch(&self, request: &RoleRequest) -> Result<Launch, PluginError>;

    /// Reads the output of the [`Role::Proof`] launch into wall checks.
    fn read_proof(&self, output: &[u8]) -> Result<Vec<WallCheck>, PluginError>;

    /// Reads a role's full output into an outcome; tolerant of unknown fields.
    fn read_outcome(
        &self,
        role: Role,
        output: &[u8],
        exit: ExitStatus,
    ) -> Result<Outcome, PluginError>;

    /// The agent's own interactive login, writing its login into `profile_dir`; the host
    /// runs it on a terminal in a sandbox with the profile mounted. Since API 1.2; the
    /// default answers [`ErrorCode::UNSUPPORTED`].
    fn login_launch(
        &self,
        context: &HarnessContext,
        profile_dir: &str,
    ) -> Result<Launch, PluginError> {
        let _ = (context, profile_dir);
        Err(PluginError::unsupported("this harness has no login to run"))
    }

    /// The static walls with typed states ([`crate::WallState`]): the same walls as
    /// [`HarnessPlugin::check_walls`], saying *how* one is not held (absent, broken). Since
    /// API 1.3; the default reads `check_walls` (held or broken).
    fn check_walls_typed(
        &self,
        context: &HarnessContext,
        profile: &Profile,
    ) -> Result<Vec<WallReport>, PluginError> {
        Ok(self
            .check_walls(context, profile)?
            .into_iter()
            .map(Into::into)
            .collect())
    }

    /// The live proof's walls with typed states: an unreachable model API or an agent that
    /// cannot run in the image is said so, not reported as a broken wall. Since API 1.3;
    /// the default reads `read_proof`.
    fn read_proof_typed(&self, output: &[u8]) -> Result<Vec<WallReport>, PluginError> {
        Ok(self
            .read_proof(output)?
            .into_iter()
            .map(Into::into)
            .collect())
    }

    /// A role's output read into a typed outcome ([`crate::OutcomeCode`]), which can say
    /// that the model API did not answer (infrastructure) apart from the agent failing its
    /// task. The host gives the first and the last MiB of a long output. Since API 1.3;
    /// the default reads `read_outcome`.
    fn read_call(
        &self,
        role: Role,
        output: &[u8],
        exit: ExitStatus,
    ) -> Result<CallOutcome, PluginError> {
        Ok(self.read_outcome(role, output, exit)?.into())
    }

    /// The credentials the agent uses, and which requests carry them, so that the host can
    /// keep them out of the sandbox without knowing the harness. Since API 1.3; the default
    /// declares none.
    fn credentials(
        &self,
        context: &HarnessContext,
        profile: &Profile,
    ) -> Result<Vec<CredentialDecl>, PluginError> {
        let _ = (context, profile);
        Ok(Vec::new())
    }

    /// Each agent call runs on a fresh copy of the profile, `used`, which the host deletes
    /// afterwards: nothing a call writes there reaches a later call. Before that, this
    /// carries back into the profile what the harness's own rule keeps — a login its agent
    /// refreshed during the call, recognised by its shape — and returns the files it
    /// carried (relative to the profile). Called once per call, after the sandbox is gone.
    /// Since API 1.3; the default carries nothing.
    fn settle_profile(
        &self,
        context: &HarnessContext,
        profile: &Profile,
        used: &std::path::Path,
    ) -> Result<Vec<String>, PluginError> {
        let _ = (context, profile, used);
        Ok(Vec::new())
    }

    /// When the stored login in `profile` stops being accepted, in milliseconds since the
    /// Unix epoch; 0 when it does not expire as far as the harness knows (no stored login,
    /// or a long-lived token). The host renews a login that would expire before a call
    /// could end, with [`HarnessPlugin::refresh_launch`]. Since API 1.4; the default
    /// answers 0.
    fn login_expiry(
        &self,
        context: &HarnessContext,
        profile: &Profile,
    ) -> Result<u64, PluginError> {
        let _ = (context, profile);
        Ok(0)
    }

    /// The launch that renews the stored login: the agent's own binary, told to do nothing
    /// but what renews it, on a copy of the login that this method puts into `work_dir` (an
    /// empty directory private to the host's user; the launch mounts it). The host runs it
    /// in a sandbox of its own, the one place a real login enters a sandbox: no lane, no
    /// tools, only the hosts the launch declares (the login's own server), and at
    /// [`crate::GATEWAY_PORT`] a model API stub that answers at once and spends nothing.
    /// Since API 1.4; the default answers [`ErrorCode::UNSUPPORTED`].
    fn refresh_launch(
        &self,
        context: &HarnessContext,
        profile: &Profile,
        work_dir: &str,
    ) -> Result<Launch, PluginError> {
        let _ = (context, profile, work_dir);
        Err(PluginError::unsupported(
            "this harness cannot renew its login",
        ))
    }

    /// After the refresh launch: reads the login it renewed in `work_dir` (written inside a
    /// sandbox, so data to check by its shape) and puts it into the profile in place of
    /// the old one; returns the new expiry as [`HarnessPlugin::login_expiry`] says it. An
    /// error when the login was not renewed, saying why. Since API 1.4; the default answers
    /// [`ErrorCode::UNSUPPORTED`].
    fn settle_refresh(
        &self,
        context: &HarnessContext,
        profile: &Profile,
        work_dir: &str,
    ) -> Result<u64, PluginError> {
        let _ = (context, profile, work_dir);
        Err(PluginError::unsupported(
            "this harness cannot renew its login",
        ))
    }

    /// Renders a piece of `role`'s output (what its launch printed on standard output, as
    /// the host kept it in the call's log) as a transcript a person can read: the agent's
    /// words, each tool call with its arguments, tool results shortened, how the call
    /// ended. The host never reads the agent's format itself; this is where it is read.
    ///
    /// **When**: by `stet log` (and what shows a call later), after the call or while it
    /// runs, on the thread that asks; never during a drive's calls. The host passes the
    /// output in pieces, in order, each starting where the last answer's
    /// [`Rendered::consumed`] ended: answer the entries of the whole units (lines) at the
    /// piece's start and how many bytes they cover; an unfinished unit at its end is left
    /// unconsumed and comes again, longer. When `end` is true nothing follows the piece
    /// (or the host will not hold a longer one, about 16 MiB): render all of it.
    /// [`render_lines`] does this bookkeeping for line-based output.
    ///
    /// **Input is hostile**: the agent wrote it. Never panic on it, show what cannot be read
    /// as [`EntryKind::RAW`](crate::EntryKind::RAW) (shortened), keep memory bounded by
    /// the piece (no state between calls: each piece stands alone). Entries' text is made
    /// inert by the host before a terminal sees it. It must not block; a panic becomes
    /// [`ErrorCode::PANICKED`] and an error of any kind makes the host show the output as
    /// it is, with a note saying why. Since API 1.7; the default answers
    /// [`ErrorCode::UNSUPPORTED`] (the host then shows the output as it is).
    fn render_transcript(
        &self,
        role: Role,
        output: &[u8],
        end: bool,
    ) -> Result<Rendered, PluginError> {
        let _ = (role, output, end);
        Err(PluginError::unsupported(
            "this harness renders no transcript",
        ))
    }
}

/// [`HarnessPlugin::render_transcript`] for output made of lines: calls `render` with each
/// whole line of `output` (without its line end; an unfinished last line too when `end`),
/// in order, and answers the entries it pushed and the bytes those lines cover. Empty
/// lines are passed too (`render` may skip them).
pub fn render_lines(
    output: &[u8],
    end: bool,
    mut render: impl FnMut(&[u8], &mut Vec<TranscriptEntry>),
) -> Rendered {
    let mut entries = Vec::new();
    let whole = if end {
        output.len()
    } else {
        output
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |at| at.saturating_add(1))
    };
    let lines = output.get(..whole).unwrap_or_default();
    if !lines.is_empty() {
        let lines = lines.strip_suffix(b"\n").unwrap_or(lines);
        for line in lines.split(|b| *b == b'\n') {
            render(line.strip_suffix(b"\r").unwrap_or(line), &mut entries);
        }
    }
    Rendered {
        entries: entries.into(),
        consumed: whole as u64,
    }
}

/// How [`start_by_spawning`] provides a forwarded socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketForwarding {
    /// As a read-only mount of the socket at the sandbox's path (connecting needs no write).
    AsMount,
    /// Not at all: the option is refused by name.
    Refuse,
}

/// [`RuntimePlugin::start`] for a runtime whose processes each start afresh in the
/// sandbox (no idle first process to replace): the sandbox is created with
/// [`RuntimePlugin::create_sandbox`] — a forwarded socket as a mount, when `sockets` says
/// so — and a first process is spawned in it right away. A spawn that fails removes the
/// sandbox again. Any other option is refused by name.
pub fn start_by_spawning<R: RuntimePlugin + ?Sized>(
    runtime: &R,
    spec: SandboxSpec,
    options: Vec<SandboxOption>,
    sockets: SocketForwarding,
) -> Result<(SandboxInfo, Option<Box<dyn ProcessPlugin>>), PluginError> {
    let (spec, first) = take_options(spec, options, sockets)?;
    let info = runtime.create_sandbox(spec)?;
    let first = match first {
        Some(process) => match runtime.spawn(info.id.as_str(), process) {
            Ok(process) => Some(process),
            Err(e) => {
                let _ = runtime.teardown(info.id.as_str());
                return Err(e);
            }
        },
        None => None,
    };
    Ok((info, first))
}

/// The options of [`RuntimePlugin::start`] taken apart, for a runtime that runs the first
/// process itself: the spec with each forwarded socket added as a read-only mount of it
/// (when `sockets` is [`SocketForwarding::AsMount`]; a path that is no listening socket,
/// or a relative sandbox path, is refused), and the first process asked for, if any. Any
/// other option is refused by name, so that none is ever ignored.
pub fn take_options(
    mut spec: SandboxSpec,
    options: Vec<SandboxOption>,
    sockets: SocketForwarding,
) -> Result<(SandboxSpec, Option<ProcessSpec>), PluginError> {
    let mut first = None;
    for option in options {
        match option {
            SandboxOption::ForwardSocket(socket) if sockets == SocketForwarding::AsMount => {
                use std::os::unix::fs::FileTypeExt;
                let is_socket = std::fs::metadata(socket.host.as_str())
                    .map(|m| m.file_type().is_socket())
                    .unwrap_or(false);
                if !is_socket || !socket.sandbox.starts_with('/') {
                    return Err(PluginError::invalid_input(format!(
                        "cannot forward {} into the sandbox at {}: it must be a listening unix socket, and the sandbox path absolute",
                        socket.host, socket.sandbox
                    )));
                }
                let mut mounts = spec.mounts.to_vec();
                mounts.push(crate::Mount {
                    source: socket.host,
                    target: socket.sandbox,
                    writable: false,
                });
                spec.mounts = mounts.into();
            }
            SandboxOption::FirstProcess(process) => first = Some(RBox::into_inner(process)),
            #[allow(unreachable_patterns)]
            other => {
                return Err(PluginError::unsupported(format!(
                    "this runtime cannot provide {}",
                    other.name()
                )))
            }
        }
    }
    Ok((spec, first))
}

/// Runs `f`, turning a panic into a [`ErrorCode::PANICKED`] error naming `what`.
///
/// Every call into plugin code from the host goes through this, because a panic that
/// unwinds across the boundary makes abi_stable end the whole host process.
pub fn guard<T>(what: &str, f: impl FnOnce() -> Result<T, PluginError>) -> RResult<T, PluginError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result.into(),
        Err(payload) => RResult::RErr(PluginError::new(
            ErrorCode::PANICKED,
            format!("{what} panicked: {}", panic_message(payload.as_ref())),
        )),
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".to_string()
    }
}

pub(crate) struct RuntimeAdapter<T>(pub(crate) T);
pub(crate) struct ProcessAdapter(pub(crate) Box<dyn ProcessPlugin>);
pub(crate) struct HarnessAdapter<T>(pub(crate) T);
pub(crate) struct TerminalAdapter(pub(crate) Box<dyn TerminalPlugin>);

impl v1_2::Terminal for TerminalAdapter {
    fn wait(&self, sink: v1_1::SinkBox<'_>) -> RResult<ExitStatus, PluginError> {
        guard("wait", || self.0.wait(&mut Sink::new(sink)))
    }

    fn kill(&self) -> RResult<(), PluginError> {
        guard("kill", || self.0.kill())
    }

    fn write(&self, bytes: RSlice<'_, u8>) -> RResult<(), PluginError> {
        guard("write", || self.0.write(bytes.as_slice()))
    }

    fn close_input(&self) -> RResult<(), PluginError> {
        guard("close_input", || self.0.close_input())
    }

    fn resize(&self, size: TerminalSize) -> RResult<(), PluginError> {
        guard("resize", || self.0.resize(size))
    }
}

impl v1_1::Process for ProcessAdapter {
    fn wait(&self, sink: v1_1::SinkBox<'_>) -> RResult<ExitStatus, PluginError> {
        guard("wait", || self.0.wait(&mut Sink::new(sink)))
    }

    fn kill(&self) -> RResult<(), PluginError> {
        guard("kill", || self.0.kill())
    }
}

fn process_box(process: Box<dyn ProcessPlugin>) -> v1_1::ProcessBox {
    v1_1::Process_TO::from_value(ProcessAdapter(process), TD_Opaque)
}

/// The methods every interface version of `Runtime` shares, written once.
macro_rules! shared_runtime_methods {
    () => {
        fn probe(&self) -> RResult<ProbeReport, PluginError> {
            guard("probe", || self.0.probe())
        }

        fn create_sandbox(&self, spec: SandboxSpec) -> RResult<SandboxInfo, PluginError> {
            guard("create_sandbox", || self.0.create_sandbox(spec))
        }

        fn spawn(
            &self,
            sandbox: RStr<'_>,
            spec: ProcessSpec,
        ) -> RResult<v1_1::ProcessBox, PluginError> {
            guard("spawn", || {
                self.0.spawn(sandbox.as_str(), spec).map(process_box)
            })
        }

        fn teardown(&self, sandbox: RStr<'_>) -> RResult<(), PluginError> {
            guard("teardown", || self.0.teardown(sandbox.as_str()))
        }

        fn list_sandboxes(&self, labels: RVec<Label>) -> RResult<RVec<SandboxInfo>, PluginError> {
            guard("list_sandboxes", || {
                self.0.list_sandboxes(labels.as_slice()).map(RVec::from)
            })
        }
    };
}

impl<T: RuntimePlugin> v1_2::Runtime for RuntimeAdapter<T> {
    shared_runtime_methods!();

    fn image_status(&self, image: RStr<'_>) -> RResult<ImageStatus, PluginError> {
        guard("image_status", || self.0.image_status(image.as_str()))
    }

    fn spawn_terminal(
        &self,
        sandbox: RStr<'_>,
        spec: ProcessSpec,
        size: TerminalSize,
    ) -> RResult<v1_2::TerminalBox, PluginError> {
        guard("spawn_terminal", || {
            self.0
                .spawn_terminal(sandbox.as_str(), spec, size)
                .map(|t| v1_2::Terminal_TO::from_value(TerminalAdapter(t), TD_Opaque))
        })
    }
}

impl<T: RuntimePlugin> v1::Runtime for RuntimeAdapter<T> {
    shared_runtime_methods!();

    fn image_status(&self, image: RStr<'_>) -> RResult<ImageStatus, PluginError> {
        guard("image_status", || self.0.image_status(image.as_str()))
    }

    fn spawn_terminal(
        &self,
        sandbox: RStr<'_>,
        spec: ProcessSpec,
        size: TerminalSize,
    ) -> RResult<v1_2::TerminalBox, PluginError> {
        guard("spawn_terminal", || {
            self.0
                .spawn_terminal(sandbox.as_str(), spec, size)
                .map(|t| v1_2::Terminal_TO::from_value(TerminalAdapter(t), TD_Opaque))
        })
    }

    fn start(
        &self,
        spec: SandboxSpec,
        options: RVec<SandboxOption_NE>,
    ) -> RResult<v1::Started, PluginError> {
        guard("start", || {
            let mut known = Vec::with_capacity(options.len());
            for option in options.iter() {
                match option.as_enum() {
                    Ok(option) => known.push(option.clone()),
                    // A newer host asks for something this plugin's API has no word for.
                    Err(_) => {
                        return Err(PluginError::unsupported(
                            "the host asked for a sandbox option this plugin's API version does not know",
                        )
                        .with_remedy("install a build of the plugin for a newer stet-plugin-api"))
                    }
                }
            }
            let (info, first) = self.0.start(spec, known)?;
            Ok(v1::Started {
                info,
                first: first.map(process_box).into(),
            })
        })
    }

    fn stop(&self, sandbox: RStr<'_>) -> RResult<(), PluginError> {
        guard("stop", || self.0.stop(sandbox.as_str()))
    }

    fn limit_counters(&self, sandbox: RStr<'_>) -> RResult<ROption<LimitCounters>, PluginError> {
        guard("limit_counters", || {
            self.0.limit_counters(sandbox.as_str()).map(ROption::from)
        })
    }
}

// The frozen 1.2, 1.1 and 1.0 interfaces, so that compatibility fixtures can be exported
// exactly as plugins built against those versions were.
impl<T: RuntimePlugin> v1_1::Runtime for RuntimeAdapter<T> {
    shared_runtime_methods!();

    fn image_status(&self, image: RStr<'_>) -> RResult<ImageStatus, PluginError> {
        guard("image_status", || self.0.image_status(image.as_str()))
    }
}

impl<T: RuntimePlugin> v1_0::Runtime for RuntimeAdapter<T> {
    shared_runtime_methods!();
}

/// The methods every interface version of `Harness` shares, written once.
macro_rules! shared_harness_methods {
    () => {
        fn probe(&self) -> RResult<ProbeReport, PluginError> {
            guard("probe", || self.0.probe())
        }

        fn profile(&self, context: HarnessContext) -> RResult<Profile, PluginError> {
            guard("profile", || self.0.profile(&context))
        }

        fn write_settings(
            &self,
            context: HarnessContext,
            profile: Profile,
        ) -> RResult<RString, PluginError> {
            guard("write_settings", || {
                self.0.write_settings(&context, &profile).map(RString::from)
            })
        }

        fn check_walls(
            &self,
            context: HarnessContext,
            profile: Profile,
        ) -> RResult<RVec<WallCheck>, PluginError> {
            guard("check_walls", || {
                self.0.check_walls(&context, &profile).map(RVec::from)
            })
        }

        fn launch(&self, request: RoleRequest) -> RResult<Launch, PluginError> {
            guard("launch", || self.0.launch(&request))
        }

        fn read_proof(&self, output: RSlice<'_, u8>) -> RResult<RVec<WallCheck>, PluginError> {
            guard("read_proof", || {
                self.0.read_proof(output.as_slice()).map(RVec::from)
            })
        }

        fn read_outcome(
            &self,
            role: Role,
            output: RSlice<'_, u8>,
            exit: ExitStatus,
        ) -> RResult<Outcome, PluginError> {
            guard("read_outcome", || {
                self.0.read_outcome(role, output.as_slice(), exit)
            })
        }
    };
}

impl<T: HarnessPlugin> v1::Harness for HarnessAdapter<T> {
    shared_harness_methods!();

    fn login_launch(
        &self,
        context: HarnessContext,
        profile_dir: RStr<'_>,
    ) -> RResult<Launch, PluginError> {
        guard("login_launch", || {
            self.0.login_launch(&context, profile_dir.as_str())
        })
    }

    fn check_walls_typed(
        &self,
        context: HarnessContext,
        profile: Profile,
    ) -> RResult<RVec<WallReport>, PluginError> {
        guard("check_walls_typed", || {
            self.0.check_walls_typed(&context, &profile).map(RVec::from)
        })
    }

    fn read_proof_typed(&self, output: RSlice<'_, u8>) -> RResult<RVec<WallReport>, PluginError> {
        guard("read_proof_typed", || {
            self.0.read_proof_typed(output.as_slice()).map(RVec::from)
        })
    }

    fn read_call(
        &self,
        role: Role,
        output: RSlice<'_, u8>,
        exit: ExitStatus,
    ) -> RResult<CallOutcome, PluginError> {
        guard("read_call", || {
            self.0.read_call(role, output.as_slice(), exit)
        })
    }

    fn credentials(
        &self,
        context: HarnessContext,
        profile: Profile,
    ) -> RResult<RVec<CredentialDecl>, PluginError> {
        guard("credentials", || {
            self.0.credentials(&context, &profile).map(RVec::from)
        })
    }

    fn settle_profile(
        &self,
        context: HarnessContext,
        profile: Profile,
        used: RStr<'_>,
    ) -> RResult<RVec<RString>, PluginError> {
        guard("settle_profile", || {
            self.0
                .settle_profile(&context, &profile, std::path::Path::new(used.as_str()))
                .map(|files| files.into_iter().map(RString::from).collect())
        })
    }

    fn login_expiry(&self, context: HarnessContext, profile: Profile) -> RResult<u64, PluginError> {
        guard("login_expiry", || self.0.login_expiry(&context, &profile))
    }

    fn refresh_launch(
        &self,
        context: HarnessContext,
        profile: Profile,
        work_dir: RStr<'_>,
    ) -> RResult<Launch, PluginError> {
        guard("refresh_launch", || {
            self.0.refresh_launch(&context, &profile, work_dir.as_str())
        })
    }

    fn settle_refresh(
        &self,
        context: HarnessContext,
        profile: Profile,
        work_dir: RStr<'_>,
    ) -> RResult<u64, PluginError> {
        guard("settle_refresh", || {
            self.0.settle_refresh(&context, &profile, work_dir.as_str())
        })
    }

    fn render_transcript(
        &self,
        role: Role,
        output: RSlice<'_, u8>,
        end: bool,
    ) -> RResult<Rendered, PluginError> {
        guard("render_transcript", || {
            self.0.render_transcript(role, output.as_slice(), end)
        })
    }
}

impl<T: HarnessPlugin> v1_2::Harness for HarnessAdapter<T> {
    shared_harness_methods!();

    fn login_launch(
        &self,
        context: HarnessContext,
        profile_dir: RStr<'_>,
    ) -> RResult<Launch, PluginError> {
        guard("login_launch", || {
            self.0.login_launch(&context, profile_dir.as_str())
        })
    }
}

impl<T: HarnessPlugin> v1_1::Harness for HarnessAdapter<T> {
    shared_harness_methods!();
}

#[cfg(test)]
mod tests {
    //! The adapters between the plugin traits and the ABI-stable interfaces, driven in
    //! process through the same trait objects the host holds.

    use std::sync::Mutex;

    use abi_stable::sabi_trait::TD_Opaque;
    use abi_stable::std_types::{RBox, ROption, RResult, RVec};

    use super::*;
    use crate::{Limits, Network};

    /// A runtime that records what it is asked and answers from a script: an image named
    /// `panic` makes `create_sandbox` panic, a sandbox named `gone` is not found.
    #[derive(Default)]
    struct Fake {
        calls: Mutex<Vec<String>>,
        spawn_fails: bool,
    }

    impl Fake {
        fn called(&self, what: String) {
            self.calls.lock().unwrap().push(what);
        }
    }

    impl RuntimePlugin for Fake {
        fn probe(&self) -> Result<ProbeReport, PluginError> {
            Ok(ProbeReport::available("fake 1.0", 7).with_fact("engine", "none"))
        }

        fn create_sandbox(&self, spec: SandboxSpec) -> Result<SandboxInfo, PluginError> {
            if spec.image.as_str() == "panic" {
                panic!("the image is a trap");
            }
            let mounts: Vec<&str> = spec.mounts.iter().map(|m| m.target.as_str()).collect();
            self.called(format!("create {} {mounts:?}", spec.image));
            Ok(SandboxInfo {
                id: "sandbox-1".into(),
                state: "running".into(),
                labels: spec.labels,
            })
        }

        fn spawn(
            &self,
            sandbox: &str,
            spec: ProcessSpec,
        ) -> Result<Box<dyn ProcessPlugin>, PluginError> {
            self.called(format!("spawn {sandbox} {}", spec.argv[0]));
            if self.spawn_fails {
                return Err(PluginError::backend("no such program"));
            }
            Ok(Box::new(Chatty))
        }

        fn teardown(&self, sandbox: &str) -> Result<(), PluginError> {
            self.called(format!("teardown {sandbox}"));
            if sandbox == "gone" {
                return Err(PluginError::not_found("no sandbox gone").with_remedy("run stet gc"));
            }
            Ok(())
        }

        fn list_sandboxes(&self, labels: &[Label]) -> Result<Vec<SandboxInfo>, PluginError> {
            Ok(vec![SandboxInfo {
                id: "listed".into(),
                state: "exited".into(),
                labels: labels.to_vec().into(),
            }])
        }
    }

    /// A process that writes to both streams, exits 3, and panics when killed.
    struct Chatty;

    impl ProcessPlugin for Chatty {
        fn wait(&self, sink: &mut Sink<'_>) -> Result<ExitStatus, PluginError> {
            sink.stdout(b"out 1\n");
            sink.stderr(b"err 1\n");
            sink.stdout(b"out 2\n");
            Ok(ExitStatus::exited(3))
        }

        fn kill(&self) -> Result<(), PluginError> {
            panic!("{}", String::from("kill is not wired"));
        }
    }

    fn boxed(fake: Fake) -> abi::v1::RuntimeBox {
        abi::v1::Runtime_TO::from_value(RuntimeAdapter(fake), TD_Opaque)
    }

    use crate::abi;

    fn spec(image: &str) -> SandboxSpec {
        SandboxSpec {
            image: image.into(),
            mounts: RVec::new(),
            env: RVec::new(),
            workdir: "/work".into(),
            network: Network::None,
            limits: Limits::default(),
            labels: vec![Label::new("stet.managed", "true")].into(),
            user: ROption::RNone,
        }
    }

    fn process(program: &str) -> ProcessSpec {
        ProcessSpec {
            argv: vec![program.into()].into(),
            env: RVec::new(),
            workdir: ROption::RNone,
            stdin: RVec::new(),
        }
    }

    fn ok<T>(result: RResult<T, PluginError>) -> T {
        match result {
            RResult::ROk(value) => value,
            RResult::RErr(e) => panic!("{e:?}"),
        }
    }

    fn err<T>(result: RResult<T, PluginError>) -> PluginError {
        match result {
            RResult::ROk(_) => panic!("expected an error"),
            RResult::RErr(e) => e,
        }
    }

    #[test]
    fn a_runtime_answers_through_the_boundary_as_it_answers_in_process() {
        let runtime = boxed(Fake::default());
        assert_eq!(
            ok(runtime.probe()),
            ProbeReport::available("fake 1.0", 7).with_fact("engine", "none")
        );
        let info = ok(runtime.create_sandbox(spec("stet-lane:1")));
        assert_eq!(info.id.as_str(), "sandbox-1");
        assert_eq!(info.labels[0], Label::new("stet.managed", "true"));
        let listed = ok(runtime.list_sandboxes(vec![Label::new("stet.run", "r1")].into()));
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].labels.as_slice(), [Label::new("stet.run", "r1")]);
        // An error keeps its code, message and remedy.
        let e = err(runtime.teardown("gone".into()));
        assert_eq!(
            e,
            PluginError::not_found("no sandbox gone").with_remedy("run stet gc")
        );
        // The defaults of later minor versions: no counters, and stop tears down.
        assert_eq!(
            ok(runtime.limit_counters("sandbox-1".into())),
            ROption::RNone
        );
        ok(runtime.stop("sandbox-1".into()));
    }

    #[test]
    fn a_panic_in_a_plugin_method_comes_back_as_a_panicked_error_naming_the_method() {
        let runtime = boxed(Fake::default());
        let e = err(runtime.create_sandbox(spec("panic")));
        assert_eq!(e.code, ErrorCode::PANICKED);
        assert_eq!(
            e.message.as_str(),
            "create_sandbox panicked: the image is a trap"
        );
        // A panic with a formatted (String) message, from a process the runtime handed out.
        let process = ok(runtime.spawn("sandbox-1".into(), process("sh")));
        let e = err(process.kill());
        assert_eq!(e.code, ErrorCode::PANICKED);
        assert_eq!(e.message.as_str(), "kill panicked: kill is not wired");
        // A payload that is not text still comes back as an error.
        let e = err::<()>(guard("probe", || std::panic::panic_any(42_u8)));
        assert_eq!(
            e.message.as_str(),
            "probe panicked: a non-string panic payload"
        );
    }

    #[test]
    fn a_process_streams_its_chunks_in_order_into_the_hosts_sink() {
        let runtime = boxed(Fake::default());
        let process = ok(runtime.spawn("sandbox-1".into(), process("sh")));
        let mut seen = Vec::new();
        let mut handler = |stream: Stream, bytes: &[u8]| seen.push((stream, bytes.to_vec()));
        let status = ok(process.wait(host_sink(&mut handler)));
        assert_eq!(status, ExitStatus::exited(3));
        assert_eq!(
            seen,
            [
                (Stream::Stdout, b"out 1\n".to_vec()),
                (Stream::Stderr, b"err 1\n".to_vec()),
                (Stream::Stdout, b"out 2\n".to_vec()),
            ]
        );
    }

    #[test]
    fn a_host_handler_that_panics_loses_only_that_chunk() {
        let runtime = boxed(Fake::default());
        let process = ok(runtime.spawn("sandbox-1".into(), process("sh")));
        let mut seen = Vec::new();
        let mut handler = |stream: Stream, bytes: &[u8]| {
            if bytes == b"err 1\n" {
                panic!("the handler cannot take stderr");
            }
            seen.push((stream, bytes.to_vec()));
        };
        let status = ok(process.wait(host_sink(&mut handler)));
        assert_eq!(status, ExitStatus::exited(3), "the plugin went on");
        assert_eq!(
            seen,
            [
                (Stream::Stdout, b"out 1\n".to_vec()),
                (Stream::Stdout, b"out 2\n".to_vec()),
            ]
        );
    }

    #[test]
    fn the_default_start_makes_a_plain_sandbox_and_refuses_any_option_by_name() {
        let runtime = boxed(Fake::default());
        let started = ok(runtime.start(spec("stet-lane:1"), RVec::new()));
        assert_eq!(started.info.id.as_str(), "sandbox-1");
        assert!(started.first.is_none());
        let first = SandboxOption::FirstProcess(RBox::new(process("sh")));
        let e = err(runtime.start(
            spec("stet-lane:1"),
            vec![SandboxOption_NE::new(first)].into(),
        ));
        assert_eq!(e.code, ErrorCode::UNSUPPORTED);
        assert_eq!(
            e.message.as_str(),
            "this runtime cannot provide first-process"
        );
    }

    #[test]
    fn start_by_spawning_runs_the_first_process_and_removes_the_sandbox_when_it_fails() {
        let fake = Fake::default();
        let first = SandboxOption::FirstProcess(RBox::new(process("sh")));
        let (info, process) = start_by_spawning(
            &fake,
            spec("stet-lane:1"),
            vec![first.clone()],
            SocketForwarding::Refuse,
        )
        .unwrap();
        assert_eq!(info.id.as_str(), "sandbox-1");
        assert!(process.is_some());
        assert_eq!(
            *fake.calls.lock().unwrap(),
            ["create stet-lane:1 []", "spawn sandbox-1 sh"]
        );

        let failing = Fake {
            spawn_fails: true,
            ..Fake::default()
        };
        let e = start_by_spawning(
            &failing,
            spec("stet-lane:1"),
            vec![first],
            SocketForwarding::Refuse,
        )
        .err()
        .expect("the spawn failed");
        assert_eq!(e, PluginError::backend("no such program"));
        assert_eq!(
            *failing.calls.lock().unwrap(),
            [
                "create stet-lane:1 []",
                "spawn sandbox-1 sh",
                "teardown sandbox-1"
            ],
            "a sandbox whose first process never ran is not left behind"
        );
    }

    #[test]
    fn start_by_spawning_forwards_a_socket_as_a_mount_only_when_it_is_one() {
        let dir = tempfile_dir();
        let socket = dir.join("proxy.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let forward = |host: &std::path::Path, sandbox: &str| {
            SandboxOption::ForwardSocket(crate::ForwardedSocket {
                host: host.display().to_string().into(),
                sandbox: sandbox.into(),
            })
        };

        let fake = Fake::default();
        let e = start_by_spawning(
            &fake,
            spec("stet-lane:1"),
            vec![forward(&socket, "/run/proxy.sock")],
            SocketForwarding::Refuse,
        )
        .err()
        .expect("refused");
        assert_eq!(e.code, ErrorCode::UNSUPPORTED);
        assert_eq!(
            e.message.as_str(),
            "this runtime cannot provide forward-socket"
        );

        let (_, first) = start_by_spawning(
            &fake,
            spec("stet-lane:1"),
            vec![forward(&socket, "/run/proxy.sock")],
            SocketForwarding::AsMount,
        )
        .unwrap();
        assert!(first.is_none());
        assert_eq!(
            fake.calls.lock().unwrap().last().unwrap(),
            "create stet-lane:1 [\"/run/proxy.sock\"]"
        );

        // A plain file, or a relative path inside, is refused before anything is made.
        let plain = dir.join("plain");
        std::fs::write(&plain, b"").unwrap();
        for (host, inside) in [(&plain, "/run/proxy.sock"), (&socket, "run/proxy.sock")] {
            let e = start_by_spawning(
                &fake,
                spec("stet-lane:1"),
                vec![forward(host, inside)],
                SocketForwarding::AsMount,
            )
            .err()
            .expect("refused");
            assert_eq!(e.code, ErrorCode::INVALID_INPUT, "{e:?}");
        }
        assert_eq!(fake.calls.lock().unwrap().len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A fresh private directory (the SDK has no tempfile dependency).
    fn tempfile_dir() -> std::path::PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "stet-sdk-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A harness whose every method is out of reach but rendering, which it does (or, for
    /// `Panics`, panics in, or for `Old`, never learnt: the default).
    enum Renders {
        Lines,
        Panics,
        Old,
    }

    impl HarnessPlugin for Renders {
        fn probe(&self) -> Result<ProbeReport, PluginError> {
            unreachable!()
        }
        fn profile(&self, _: &HarnessContext) -> Result<Profile, PluginError> {
            unreachable!()
        }
        fn write_settings(&self, _: &HarnessContext, _: &Profile) -> Result<String, PluginError> {
            unreachable!()
        }
        fn check_walls(
            &self,
            _: &HarnessContext,
            _: &Profile,
        ) -> Result<Vec<WallCheck>, PluginError> {
            unreachable!()
        }
        fn launch(&self, _: &RoleRequest) -> Result<Launch, PluginError> {
            unreachable!()
        }
        fn read_proof(&self, _: &[u8]) -> Result<Vec<WallCheck>, PluginError> {
            unreachable!()
        }
        fn read_outcome(&self, _: Role, _: &[u8], _: ExitStatus) -> Result<Outcome, PluginError> {
            unreachable!()
        }
        fn render_transcript(
            &self,
            role: Role,
            output: &[u8],
            end: bool,
        ) -> Result<Rendered, PluginError> {
            match self {
                Renders::Lines => Ok(render_lines(output, end, |line, entries| {
                    entries.push(TranscriptEntry::new(
                        crate::EntryKind::TEXT,
                        format!("{role:?}: {}", String::from_utf8_lossy(line)),
                    ))
                })),
                Renders::Panics => panic!("a line too strange"),
                Renders::Old => Err(PluginError::unsupported(
                    "unreachable: the default is not this",
                )),
            }
        }
    }

    fn harness(h: Renders) -> abi::v1::HarnessBox {
        abi::v1::Harness_TO::from_value(HarnessAdapter(h), TD_Opaque)
    }

    #[test]
    fn a_transcript_crosses_the_boundary_line_by_line_and_a_panic_in_it_is_named() {
        let h = harness(Renders::Lines);
        let piece = b"one\r\ntwo\nthr";
        let r = ok(h.render_transcript(Role::Review, piece.as_slice().into(), false));
        let texts: Vec<&str> = r.entries.iter().map(|e| e.text.as_str()).collect();
        assert_eq!(texts, ["Review: one", "Review: two"]);
        assert_eq!(r.consumed, 9);
        let r = ok(h.render_transcript(Role::Review, b"three".as_slice().into(), true));
        assert_eq!(r.entries[0].text.as_str(), "Review: three");
        assert_eq!(r.consumed, 5);
        // Nothing whole: nothing consumed, no entry; an empty end renders nothing.
        let r = ok(h.render_transcript(Role::Review, b"th".as_slice().into(), false));
        assert_eq!((r.consumed, r.entries.len()), (0, 0));
        let r = ok(h.render_transcript(Role::Review, b"".as_slice().into(), true));
        assert_eq!((r.consumed, r.entries.len()), (0, 0));

        let e = err(harness(Renders::Panics).render_transcript(
            Role::Implement,
            b"x".as_slice().into(),
            true,
        ));
        assert_eq!(e.code, ErrorCode::PANICKED);
        assert!(
            e.message
                .contains("render_transcript panicked: a line too strange"),
            "{e}"
        );
    }

    #[test]
    fn a_harness_that_renders_nothing_answers_unsupported_by_default() {
        struct Plain(Renders);
        impl HarnessPlugin for Plain {
            fn probe(&self) -> Result<ProbeReport, PluginError> {
                self.0.probe()
            }
            fn profile(&self, c: &HarnessContext) -> Result<Profile, PluginError> {
                self.0.profile(c)
            }
            fn write_settings(
                &self,
                c: &HarnessContext,
                p: &Profile,
            ) -> Result<String, PluginError> {
                self.0.write_settings(c, p)
            }
            fn check_walls(
                &self,
                c: &HarnessContext,
                p: &Profile,
            ) -> Result<Vec<WallCheck>, PluginError> {
                self.0.check_walls(c, p)
            }
            fn launch(&self, r: &RoleRequest) -> Result<Launch, PluginError> {
                self.0.launch(r)
            }
            fn read_proof(&self, o: &[u8]) -> Result<Vec<WallCheck>, PluginError> {
                self.0.read_proof(o)
            }
            fn read_outcome(
                &self,
                r: Role,
                o: &[u8],
                e: ExitStatus,
            ) -> Result<Outcome, PluginError> {
                self.0.read_outcome(r, o, e)
            }
        }
        let h: abi::v1::HarnessBox =
            abi::v1::Harness_TO::from_value(HarnessAdapter(Plain(Renders::Old)), TD_Opaque);
        let e = err(h.render_transcript(Role::Implement, b"x\n".as_slice().into(), true));
        assert_eq!(e.code, ErrorCode::UNSUPPORTED);
        assert!(e.message.contains("renders no transcript"), "{e}");
    }
}
