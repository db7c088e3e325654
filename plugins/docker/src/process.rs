//! Processes as `docker exec`s into a sandbox's container.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bollard::container::LogOutput;
use bollard::exec::{ResizeExecOptions, StartExecOptions, StartExecResults};
use bollard::models::ExecConfig;
use bollard::query_parameters::KillContainerOptionsBuilder;
use bollard::Docker;
use futures_util::{Stream, StreamExt};
use stet_plugin_api::{
    ExitStatus, PluginError, ProcessPlugin, ProcessSpec, ROption, Sink, TerminalPlugin,
    TerminalSize,
};
use tokio::io::AsyncWriteExt;

use crate::{message_of, status_of};

pub type Output = Pin<Box<dyn Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>>;

/// An exec that has been started and whose output has not been read yet.
pub struct Started {
    container: String,
    exec_id: String,
    output: Output,
    /// The program run (`argv[0]`), for saying so when it could not be started.
    program: String,
}

/// How the engine's message begins when it could not start an exec's program.
const ENGINE_EXEC_FAILED: &[u8] = b"OCI runtime exec failed";
/// How the sandbox's init (tini, which the plugin runs as every container's PID 1) says it
/// could not start a first process: `[FATAL tini (6)] exec <program> failed: <why>`, status
/// 127 when the program is not there, 126 when it cannot run.
const INIT_EXEC_FAILED: &[u8] = b"[FATAL tini (";

/// Largest chunk the engine hands us at once. Larger chunks mean fewer calls into the
/// host's sink; the engine still sends whatever it has as soon as it has it.
const CHUNK: usize = 64 * 1024;

pub async fn start(
    docker: &Docker,
    sandbox: &str,
    spec: ProcessSpec,
) -> Result<Started, PluginError> {
    let (started, input) = start_exec(docker, sandbox, spec, false).await?;
    drop(input);
    Ok(started)
}

type Input = Pin<Box<dyn tokio::io::AsyncWrite + Send>>;

/// Creates and starts an exec. Without a terminal, `spec.stdin` is written in the
/// background and the input is closed; with one, the input is handed back for live writes.
async fn start_exec(
    docker: &Docker,
    sandbox: &str,
    spec: ProcessSpec,
    tty: bool,
) -> Result<(Started, Option<Input>), PluginError> {
    if spec.argv.is_empty() {
        return Err(PluginError::invalid_input("no program given to run"));
    }
    let config = ExecConfig {
        attach_stdin: Some(tty || !spec.stdin.is_empty()),
        tty: Some(tty),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        cmd: Some(spec.argv.iter().map(|a| a.to_string()).collect()),
        env: Some(
            spec.env
                .iter()
                .map(|v| format!("{}={}", v.name, v.value))
                .collect(),
        ),
        working_dir: match &spec.workdir {
            ROption::RSome(dir) => Some(dir.to_string()),
            ROption::RNone => None,
        },
        ..Default::default()
    };
    let exec = docker.create_exec(sandbox, config).await.map_err(|e| {
        let message = format!(
            "could not start {} in sandbox {sandbox}: {}",
            spec.argv[0],
            message_of(&e)
        );
        match status_of(&e) {
            Some(404) => PluginError::not_found(message),
            _ => PluginError::backend(message),
        }
    })?;
    let options = StartExecOptions {
        detach: false,
        tty,
        output_capacity: Some(CHUNK),
    };
    let started = docker
        .start_exec(&exec.id, Some(options))
        .await
        .map_err(|e| {
            PluginError::backend(format!(
                "could not start {}: {}",
                spec.argv[0],
                message_of(&e)
            ))
        })?;
    let StartExecResults::Attached { output, mut input } = started else {
        return Err(PluginError::backend(
            "the engine detached an exec stet asked to attach",
        ));
    };
    let started = Started {
        container: sandbox.to_string(),
        exec_id: exec.id,
        output,
        program: spec.argv[0].to_string(),
    };
    if tty {
        if !spec.stdin.is_empty() {
            input.write_all(&spec.stdin).await.map_err(|e| {
                PluginError::backend(format!("could not write to the terminal: {e}"))
            })?;
        }
        return Ok((started, Some(input)));
    }
    if !spec.stdin.is_empty() {
        let bytes = spec.stdin.into_vec();
        // Written concurrently with reading the output, so a process that answers before
        // reading all its input cannot deadlock us.
        tokio::spawn(async move {
            let _ = input.write_all(&bytes).await;
            let _ = input.shutdown().await;
        });
    }
    Ok((started, None))
}

/// Starts a process on a terminal.
pub async fn start_terminal(
    docker: &Docker,
    sandbox: &str,
    spec: ProcessSpec,
    size: TerminalSize,
) -> Result<(Started, Input), PluginError> {
    let (started, input) = start_exec(docker, sandbox, spec, true).await?;
    let _ = docker
        .resize_exec(
            &started.exec_id,
            ResizeExecOptions {
                height: size.rows,
                width: size.cols,
            },
        )
        .await;
    Ok((started, input.expect("a terminal exec keeps its input")))
}

/// A running exec, as the host holds it.
pub struct DockerProcess {
    container: String,
    /// The exec, or `None` for the sandbox's first process (its main process).
    exec_id: Option<String>,
    /// The program an exec runs.
    program: String,
    output: Mutex<Option<Output>>,
    docker: Docker,
    tokio: Arc<tokio::runtime::Runtime>,
    killed: AtomicBool,
}

impl DockerProcess {
    pub fn new(started: Started, docker: Docker, tokio: Arc<tokio::runtime::Runtime>) -> Self {
        DockerProcess {
            container: started.container,
            exec_id: Some(started.exec_id),
            program: started.program,
            output: Mutex::new(Some(started.output)),
            docker,
            tokio,
            killed: AtomicBool::new(false),
        }
    }

    /// The sandbox's first process, attached to before it started; its input (if any) is
    /// written in the background and closed.
    pub fn first(
        container: String,
        first: crate::sandbox::FirstProcess,
        docker: Docker,
        tokio: Arc<tokio::runtime::Runtime>,
    ) -> Self {
        if let Some(mut input) = first.input {
            let bytes = first.stdin;
            tokio.spawn(async move {
                let _ = input.write_all(&bytes).await;
                let _ = input.shutdown().await;
            });
        }
        DockerProcess {
            container,
            exec_id: None,
            program: first.program,
            output: Mutex::new(Some(first.output)),
            docker,
            tokio,
            killed: AtomicBool::new(false),
        }
    }

    async fn exit_code(&self) -> Result<i64, PluginError> {
        let failed = |e: bollard::errors::Error| {
            PluginError::backend(format!(
                "could not read the exit status: {}",
                message_of(&e)
            ))
        };
        match &self.exec_id {
            Some(exec) => Ok(self
                .docker
                .inspect_exec(exec)
                .await
                .map_err(failed)?
                .exit_code
                .unwrap_or(-1)),
            None => {
                // The main process: wait for the container to stop, then read how.
                let mut waiting = self.docker.wait_container(
                    &self.container,
                    None::<bollard::query_parameters::WaitContainerOptions>,
                );
                match waiting.next().await {
                    Some(Ok(done)) => return Ok(done.status_code),
                    // A non-zero exit arrives as an error carrying the code.
                    Some(Err(bollard::errors::Error::DockerContainerWaitError {
                        code, ..
                    })) => return Ok(code),
                    // Otherwise the container's record says how it ended.
                    _ => {}
                }
                let inspected = self
                    .docker
                    .inspect_container(&self.container, None)
                    .await
                    .map_err(failed)?;
                Ok(inspected.state.and_then(|s| s.exit_code).unwrap_or(-1))
            }
        }
    }

    async fn exit_status(&self) -> Result<ExitStatus, PluginError> {
        let code = self.exit_code().await? as i32;
        let killed_by_kernel = code == 128 + 9 && !self.killed.load(Ordering::SeqCst);
        let out_of_memory = killed_by_kernel && self.oom_kills().await > 0;
        let mut status = if self.killed.load(Ordering::SeqCst) {
            ExitStatus::signalled(9)
        } else if (129..=128 + 31).contains(&code) {
            // The engine reports a process ended by signal N as 128 + N, as shells do.
            ExitStatus::signalled(code - 128)
        } else {
            ExitStatus::exited(code)
        };
        status.out_of_memory = out_of_memory;
        Ok(status)
    }
}

impl DockerProcess {
    /// How many processes the kernel's OOM killer has killed in the sandbox.
    ///
    /// The engine marks a container `OOMKilled` only when its main process dies; an exec'd
    /// process killed for memory leaves no mark. So a process that died of SIGKILL nobody
    /// sent is checked against the cgroup's own counter (v2 `memory.events`, v1
    /// `memory.oom_control`): from the host's view of the cgroup where the engine runs on
    /// this kernel (`cgroup.rs`), else read from inside the sandbox.
    async fn oom_kills(&self) -> u64 {
        if let Ok(c) = self.docker.inspect_container(&self.container, None).await {
            let state = c.state.unwrap_or_default();
            if state.oom_killed == Some(true) {
                return 1;
            }
            if let (Some(true), Some(id), Some(pid)) = (state.running, c.id.as_deref(), state.pid) {
                if let Some(counted) = crate::cgroup::counters(id, pid) {
                    return counted.oom_kills;
                }
            }
        }
        let script = "cat /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null; true";
        // Right after an OOM kill the sandbox may still be short of memory and the reading
        // exec fail to start; it is retried a few times before the answer is "none seen".
        for attempt in 0..5 {
            if attempt > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            let config = ExecConfig {
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                cmd: Some(vec!["sh".into(), "-c".into(), script.into()]),
                ..Default::default()
            };
            let Ok(exec) = self.docker.create_exec(&self.container, config).await else {
                continue;
            };
            let Ok(StartExecResults::Attached { mut output, .. }) =
                self.docker.start_exec(&exec.id, None).await
            else {
                continue;
            };
            let mut text = Vec::new();
            while let Some(Ok(item)) = output.next().await {
                text.extend_from_slice(&item.into_bytes());
            }
            let text = String::from_utf8_lossy(&text);
            if !text.contains("oom_kill") {
                continue;
            }
            return text
                .lines()
                .filter_map(|l| l.strip_prefix("oom_kill "))
                .filter_map(|n| n.trim().parse::<u64>().ok())
                .max()
                .unwrap_or(0);
        }
        0
    }
}

impl ProcessPlugin for DockerProcess {
    fn wait(&self, sink: &mut Sink<'_>) -> Result<ExitStatus, PluginError> {
        self.pump(sink)
    }

    fn kill(&self) -> Result<(), PluginError> {
        self.kill_sandbox()
    }
}

impl DockerProcess {
    /// Streams the exec's output into `sink` until it ends, then reads how it ended.
    fn pump(&self, sink: &mut Sink<'_>) -> Result<ExitStatus, PluginError> {
        let output = self
            .output
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| {
                PluginError::invalid_input("wait was already called for this process")
            })?;
        self.tokio.block_on(async {
            let mut output = output;
            // When the engine cannot start an exec's program, the exec's only output is the
            // engine's own message (on stdout) and its status 126: that message is held
            // back until the status says which it was.
            // The runtime's own "exec <program>: no such file or directory" (on stderr,
            // status 1) says the same of a program whose interpreter is missing.
            // A first process's init says it on stderr ([`INIT_EXEC_FAILED`]), then 127/126.
            let mut lead = match self.exec_id {
                Some(_) => Lead::new(vec![
                    (true, ENGINE_EXEC_FAILED.to_vec()),
                    (false, format!("exec {}: ", self.program).into_bytes()),
                ]),
                None => Lead::new(vec![(false, INIT_EXEC_FAILED.to_vec())]),
            };
            let mut emit = |on_stdout: bool, bytes: &[u8]| {
                if on_stdout {
                    sink.stdout(bytes)
                } else {
                    sink.stderr(bytes)
                }
            };
            while let Some(item) = output.next().await {
                match item {
                    Ok(LogOutput::StdOut { message }) | Ok(LogOutput::Console { message }) => {
                        lead.feed(true, &message, &mut emit)
                    }
                    Ok(LogOutput::StdErr { message }) => lead.feed(false, &message, &mut emit),
                    Ok(LogOutput::StdIn { .. }) => {}
                    // A killed sandbox ends the stream with an error; the exit status says
                    // what happened.
                    Err(_) if self.killed.load(Ordering::SeqCst) => break,
                    Err(e) => {
                        return Err(PluginError::backend(format!(
                            "the output stream broke: {}",
                            message_of(&e)
                        )))
                    }
                }
            }
            let held = lead.finish(&mut emit);
            let status = self.exit_status().await?;
            if self.exec_id.is_none() {
                if let Some((_, bytes)) = held {
                    let program = &self.program;
                    match status.code {
                        ROption::RSome(127) => emit(
                            false,
                            format!("stet: {program}: not found in the sandbox\n").as_bytes(),
                        ),
                        ROption::RSome(126) => emit(
                            false,
                            format!(
                                "stet: {program}: found in the sandbox but cannot be run there (not executable, or its interpreter is missing)\n"
                            )
                            .as_bytes(),
                        ),
                        _ => emit(false, &bytes),
                    }
                }
                return Ok(status);
            }
            // The engine answers 126 for a program it could not start (not there, not
            // executable, its interpreter missing): said as a shell says it, in one line.
            if let Some((on_stdout, bytes)) = held {
                let expected = if on_stdout { 126 } else { 1 };
                if status.code != ROption::RSome(expected) {
                    emit(on_stdout, &bytes);
                    return Ok(status);
                }
                let (code, line) = self.why_not_started().await;
                emit(false, line.as_bytes());
                return Ok(ExitStatus::exited(code));
            }
            Ok(status)
        })
    }

    /// Why the program of this exec could not be started, as the exit status and the line
    /// a shell would give: 127 when it is not there, 126 when it is and cannot run.
    async fn why_not_started(&self) -> (i32, String) {
        let program = &self.program;
        let config = ExecConfig {
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            cmd: Some(vec![
                "sh".into(),
                "-c".into(),
                "command -v \"$0\"".into(),
                program.clone(),
            ]),
            ..Default::default()
        };
        let mut found = None;
        if let Ok(exec) = self.docker.create_exec(&self.container, config).await {
            if let Ok(StartExecResults::Attached { mut output, .. }) =
                self.docker.start_exec(&exec.id, None).await
            {
                let mut text = Vec::new();
                while let Some(Ok(item)) = output.next().await {
                    text.extend_from_slice(&item.into_bytes());
                }
                let code = self
                    .docker
                    .inspect_exec(&exec.id)
                    .await
                    .ok()
                    .and_then(|e| e.exit_code);
                found = Some((
                    code == Some(0),
                    String::from_utf8_lossy(&text).trim().to_string(),
                ));
            }
        }
        match found {
            Some((false, _)) => (127, format!("stet: {program}: not found in the sandbox\n")),
            Some((true, path)) => (
                126,
                format!(
                    "stet: {program}: found at {path} in the sandbox but cannot be run there (not executable, or its interpreter is missing)\n"
                ),
            ),
            None => (
                126,
                format!("stet: {program}: could not be started in the sandbox\n"),
            ),
        }
    }

    fn kill_sandbox(&self) -> Result<(), PluginError> {
        self.killed.store(true, Ordering::SeqCst);
        // An exec cannot be signalled through the API, so the sandbox's processes are
        // killed together; the sandbox then waits for its teardown.
        let options = KillContainerOptionsBuilder::default()
            .signal("SIGKILL")
            .build();
        match self
            .tokio
            .block_on(self.docker.kill_container(&self.container, Some(options)))
        {
            Ok(()) => Ok(()),
            // Not running any more, or gone: nothing left to kill.
            Err(e) if matches!(status_of(&e), Some(404) | Some(409)) => Ok(()),
            Err(e) => Err(PluginError::backend(format!(
                "could not kill the processes of sandbox {}: {}",
                self.container,
                message_of(&e)
            ))),
        }
    }
}

/// The start of a process's output, held back while it may still be the one line its
/// engine, runtime or init says when the program could not be started: such a line can
/// arrive split over several frames (tini writes it in three), so it is gathered up to its
/// newline before it is judged.
struct Lead {
    /// The beginnings that line may have, each with the stream it comes on (`true`: stdout).
    prefixes: Vec<(bool, Vec<u8>)>,
    held: Vec<u8>,
    on_stdout: bool,
    state: LeadState,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum LeadState {
    /// Nothing decided: what is held may still become one of the lines.
    Watching,
    /// What is held is one of the lines, whole; the exit status decides what it meant.
    Matched,
    /// The output is the program's own: everything goes straight through.
    Passed,
}

impl Lead {
    /// Longest line held back: a message of the engine's is far shorter.
    const LIMIT: usize = 4096;

    fn new(prefixes: Vec<(bool, Vec<u8>)>) -> Self {
        Lead {
            prefixes,
            held: Vec::new(),
            on_stdout: false,
            state: LeadState::Watching,
        }
    }

    /// Takes one frame of output, passing on through `emit` whatever is known not to be
    /// such a line.
    fn feed(&mut self, on_stdout: bool, bytes: &[u8], emit: &mut impl FnMut(bool, &[u8])) {
        match self.state {
            LeadState::Passed => return emit(on_stdout, bytes),
            // More output after the line: it was the program's own after all.
            LeadState::Matched => {
                self.pass(emit);
                return emit(on_stdout, bytes);
            }
            LeadState::Watching => {}
        }
        if !self.held.is_empty() && on_stdout != self.on_stdout {
            self.pass(emit);
            return emit(on_stdout, bytes);
        }
        self.on_stdout = on_stdout;
        self.held.extend_from_slice(bytes);
        let mut begun = false;
        let mut may_begin = false;
        for (stream, prefix) in &self.prefixes {
            if *stream != on_stdout {
                continue;
            }
            begun |= self.held.starts_with(prefix);
            may_begin |= prefix.starts_with(&self.held);
        }
        if begun {
            if self.held.contains(&b'\n') || self.held.len() >= Self::LIMIT {
                self.state = LeadState::Matched;
            }
        } else if !may_begin {
            self.pass(emit);
        }
    }

    /// At the end of the output: the line held, if the output was only that (its stream
    /// and bytes); anything else held is passed on.
    fn finish(&mut self, emit: &mut impl FnMut(bool, &[u8])) -> Option<(bool, Vec<u8>)> {
        let begun = self
            .prefixes
            .iter()
            .any(|(stream, prefix)| *stream == self.on_stdout && self.held.starts_with(prefix));
        match self.state {
            LeadState::Matched => {}
            LeadState::Watching if begun => {}
            _ => {
                self.pass(emit);
                return None;
            }
        }
        self.state = LeadState::Passed;
        Some((self.on_stdout, std::mem::take(&mut self.held)))
    }

    fn pass(&mut self, emit: &mut impl FnMut(bool, &[u8])) {
        self.state = LeadState::Passed;
        if !self.held.is_empty() {
            emit(self.on_stdout, &std::mem::take(&mut self.held));
        }
    }
}

/// A process on a terminal: an exec with a TTY and live input.
pub struct DockerTerminal {
    process: DockerProcess,
    input: tokio::sync::Mutex<Option<Input>>,
}

impl DockerTerminal {
    pub fn new(
        started: Started,
        input: Input,
        docker: Docker,
        tokio: Arc<tokio::runtime::Runtime>,
    ) -> Self {
        DockerTerminal {
            process: DockerProcess::new(started, docker, tokio),
            input: tokio::sync::Mutex::new(Some(input)),
        }
    }
}

impl TerminalPlugin for DockerTerminal {
    fn wait(&self, sink: &mut Sink<'_>) -> Result<ExitStatus, PluginError> {
        self.process.pump(sink)
    }

    fn kill(&self) -> Result<(), PluginError> {
        self.process.kill_sandbox()
    }

    fn write(&self, bytes: &[u8]) -> Result<(), PluginError> {
        self.process.tokio.block_on(async {
            let mut input = self.input.lock().await;
            let Some(input) = input.as_mut() else {
                return Err(PluginError::invalid_input("the terminal's input is closed"));
            };
            input
                .write_all(bytes)
                .await
                .and(input.flush().await)
                .map_err(|e| PluginError::backend(format!("could not write to the terminal: {e}")))
        })
    }

    fn close_input(&self) -> Result<(), PluginError> {
        self.process.tokio.block_on(async {
            if let Some(mut input) = self.input.lock().await.take() {
                let _ = input.shutdown().await;
            }
            Ok(())
        })
    }

    fn resize(&self, size: TerminalSize) -> Result<(), PluginError> {
        let options = ResizeExecOptions {
            height: size.rows,
            width: size.cols,
        };
        self.process
            .tokio
            .block_on(
                self.process
                    .docker
                    .resize_exec(self.process.exec_id.as_deref().unwrap_or_default(), options),
            )
            .map_err(|e| {
                PluginError::backend(format!("could not resize the terminal: {}", message_of(&e)))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Frames = Vec<(bool, Vec<u8>)>;

    fn run(frames: &[(bool, &[u8])]) -> (Frames, Option<(bool, Vec<u8>)>) {
        let mut lead = Lead::new(vec![
            (true, ENGINE_EXEC_FAILED.to_vec()),
            (false, INIT_EXEC_FAILED.to_vec()),
        ]);
        let mut out = Vec::new();
        let mut emit = |s: bool, b: &[u8]| out.push((s, b.to_vec()));
        for (stream, bytes) in frames {
            lead.feed(*stream, bytes, &mut emit);
        }
        let held = lead.finish(&mut emit);
        (out, held)
    }

    #[test]
    fn an_init_line_split_over_frames_is_held_whole() {
        // As tini writes it: three writes, three frames.
        let (out, held) = run(&[
            (false, b"[FATAL tini (7)] "),
            (false, b"exec x failed: No such file or directory"),
            (false, b"\n"),
        ]);
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(
            held,
            Some((
                false,
                b"[FATAL tini (7)] exec x failed: No such file or directory\n".to_vec()
            ))
        );
        // Split even inside the prefix.
        let (out, held) = run(&[(false, b"[FAT"), (false, b"AL tini (7)] exec x\n")]);
        assert!(out.is_empty());
        assert!(held.is_some());
    }

    #[test]
    fn output_that_is_not_such_a_line_passes_at_once_and_in_order() {
        let (out, held) = run(&[(false, b"[FA"), (false, b"ULT] no"), (true, b"out")]);
        assert_eq!(
            out,
            vec![(false, b"[FAULT] no".to_vec()), (true, b"out".to_vec())]
        );
        assert_eq!(held, None);
        // The line's beginning on the other stream is the program's own.
        let (out, held) = run(&[(true, b"[FATAL tini (7)] x\n")]);
        assert_eq!(out, vec![(true, b"[FATAL tini (7)] x\n".to_vec())]);
        assert_eq!(held, None);
    }

    #[test]
    fn more_output_after_the_line_makes_it_the_programs_own() {
        let (out, held) = run(&[(false, b"[FATAL tini (7)] x\n"), (false, b"more")]);
        assert_eq!(
            out,
            vec![
                (false, b"[FATAL tini (7)] x\n".to_vec()),
                (false, b"more".to_vec())
            ]
        );
        assert_eq!(held, None);
    }

    #[test]
    fn a_line_without_its_newline_is_judged_at_the_end_or_at_the_limit() {
        let (out, held) = run(&[(false, b"[FATAL tini (7)] x")]);
        assert!(out.is_empty());
        assert!(held.is_some());
        let long = [b"[FATAL tini (7)] ".as_slice(), &[b'x'; Lead::LIMIT]].concat();
        let (out, held) = run(&[(false, &long), (false, b"after")]);
        assert_eq!(out, vec![(false, long.clone()), (false, b"after".to_vec())]);
        assert_eq!(held, None);
    }
}
