//! Probing plugins, each in a child process of its own.
//!
//! A panic in plugin code is caught on the plugin's side of the boundary, but an abort, a
//! segfault or a hang cannot be caught in-process. So every probe runs in a short-lived
//! child (`stet __probe-worker`, the same binary) that loads one plugin, asks it, and
//! writes one JSON answer. The parent runs all children at once, kills any that outlive
//! the time limit (with everything they started: each child leads its own process group),
//! and reports every plugin, broken or not.

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use stet_plugin_api::ProbeReport;
use wait_timeout::ChildExt;

use super::loader::{self, Identity};
use super::manifest::{self, Manifest};

/// The short memory of answers that said "available".
pub mod cache;

/// The hidden subcommand the children run.
pub const WORKER_COMMAND: &str = "__probe-worker";

/// A probe's answer as plain data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    /// Whether the backend is usable now.
    pub available: bool,
    /// The backend's version.
    pub backend_version: String,
    /// Selection priority reported by the plugin.
    pub priority: i32,
    /// What the backend can do.
    pub capabilities: Vec<String>,
    /// Why it is unavailable (or a note); `null` in JSON when empty.
    #[serde(
        serialize_with = "crate::printer::empty_as_null",
        deserialize_with = "crate::printer::null_as_empty"
    )]
    pub reason: String,
    /// What to do about it; `null` in JSON when empty.
    #[serde(
        serialize_with = "crate::printer::empty_as_null",
        deserialize_with = "crate::printer::null_as_empty"
    )]
    pub remedy: String,
    /// Further facts, in the plugin's order.
    pub facts: Vec<Fact>,
}

/// One `key: value` fact from a probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fact {
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
}

/// A stated isolation class longer than this is cut: it stands in one line of the
/// consent, `stet doctor` and `stet init`.
const ISOLATION_CHARS: usize = 120;

impl Probe {
    /// The backend's isolation class in its probe's own words (the fact
    /// [`stet_plugin_api::fact::ISOLATION`]), as one short line; `None` when the probe
    /// states none. Shown to people, never matched on: what stet acts on are the
    /// capabilities and the walls it proves.
    pub fn isolation(&self) -> Option<String> {
        self.facts
            .iter()
            .find(|f| f.key == stet_plugin_api::fact::ISOLATION)
            .map(|f| crate::text::one_short_line(&f.value, ISOLATION_CHARS))
            .filter(|said| !said.is_empty())
    }
}

impl From<ProbeReport> for Probe {
    fn from(r: ProbeReport) -> Self {
        Probe {
            available: r.available,
            backend_version: r.backend_version.into_string(),
            priority: r.priority,
            capabilities: r
                .capabilities
                .into_iter()
                .map(|c| c.into_string())
                .collect(),
            reason: r.reason.into_string(),
            remedy: r.remedy.into_string(),
            facts: r
                .facts
                .into_iter()
                .map(|f| Fact {
                    key: f.key.into_string(),
                    value: f.value.into_string(),
                })
                .collect(),
        }
    }
}

/// What the worker writes back: one JSON object.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "kebab-case")]
enum WorkerAnswer {
    Probed {
        identity: Identity,
        interface: String,
        probe: Probe,
    },
    Failed {
        stage: String,
        message: String,
        hint: String,
        report: Option<String>,
    },
}

/// Why a plugin could not be probed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "failure", rename_all = "kebab-case")]
pub enum ProbeFailure {
    /// The plugin was refused from its manifest alone, before any of its code ran.
    Refused {
        /// Why.
        message: String,
    },
    /// Loading, instantiating or probing returned an error (a caught panic included).
    Error {
        /// `manifest`, `load`, `instantiate` or `probe`.
        stage: String,
        /// What failed.
        message: String,
        /// What to do; empty when the plugin gave no remedy.
        hint: String,
        /// abi_stable's full layout report, for `-v`.
        #[serde(skip_serializing_if = "Option::is_none")]
        report: Option<String>,
    },
    /// The child was ended by a signal: the plugin aborted or crashed.
    Crashed {
        /// The signal's name (`SIGSEGV`).
        signal: String,
        /// What the child was doing (`load`, `instantiate`, `probe`).
        stage: String,
        /// The last lines the child wrote to standard error.
        stderr: String,
    },
    /// The child exited without an answer.
    Exited {
        /// Its exit code.
        code: i32,
        /// What the child was doing.
        stage: String,
        /// The last lines the child wrote to standard error.
        stderr: String,
    },
    /// The probe did not finish within the time limit and was killed.
    TimedOut {
        /// The limit, in milliseconds.
        limit_ms: u64,
        /// What the child was doing when it was killed.
        stage: String,
    },
}

impl ProbeFailure {
    /// One line saying what happened, for listings.
    pub fn summary(&self) -> String {
        match self {
            ProbeFailure::Refused { message } => message.clone(),
            ProbeFailure::Error { stage, message, .. } => format!("{stage} failed: {message}"),
            ProbeFailure::Crashed { signal, stage, .. } => {
                let what = if signal == "SIGABRT" {
                    "aborted"
                } else {
                    "crashed"
                };
                format!(
                    "the plugin {what} the probe process ({signal}) {}",
                    doing(stage)
                )
            }
            ProbeFailure::Exited { code, stage, .. } => {
                format!(
                    "the probe process exited with code {code} {} without an answer",
                    doing(stage)
                )
            }
            ProbeFailure::TimedOut { limit_ms, stage } => format!(
                "no answer within {} {}; the probe was killed",
                humantime::format_duration(Duration::from_millis(*limit_ms)),
                doing(stage)
            ),
        }
    }

    /// What the person can do about it.
    pub fn hint(&self) -> String {
        match self {
            ProbeFailure::Refused { .. } => "see `stet plugins list`".to_string(),
            ProbeFailure::Error { hint, .. } if !hint.is_empty() => hint.clone(),
            ProbeFailure::Error { .. } | ProbeFailure::Crashed { .. } | ProbeFailure::Exited { .. } => {
                "this is a bug in the plugin: report it to its author, or remove its directory".to_string()
            }
            ProbeFailure::TimedOut { .. } => {
                "the backend may be hanging; if it is only slow, raise [probe] timeout in stet.toml or pass --probe-timeout"
                    .to_string()
            }
        }
    }

    /// Extra text for `-v`: the layout report or the child's standard error.
    pub fn detail(&self) -> Option<&str> {
        match self {
            ProbeFailure::Error { report, .. } => report.as_deref(),
            ProbeFailure::Crashed { stderr, .. } | ProbeFailure::Exited { stderr, .. } => {
                Some(stderr).filter(|s| !s.is_empty()).map(String::as_str)
            }
            ProbeFailure::TimedOut { .. } | ProbeFailure::Refused { .. } => None,
        }
    }
}

/// "while loading its library", for a worker stage marker.
fn doing(stage: &str) -> &'static str {
    match stage {
        STAGE_LOAD => "while loading its library",
        STAGE_INSTANTIATE => "while building the plugin object",
        STAGE_PROBE => "while probing",
        _ => "while starting",
    }
}

const STAGE_LOAD: &str = "load";
const STAGE_INSTANTIATE: &str = "instantiate";
const STAGE_PROBE: &str = "probe";

/// One plugin's probe result.
#[derive(Debug, Clone)]
pub struct Probed {
    /// The manifest that was probed.
    pub manifest: Manifest,
    /// What the library said about itself, when it got that far.
    pub identity: Option<Identity>,
    /// The interface version used.
    pub interface: Option<String>,
    /// The probe's answer, or why there is none.
    pub result: Result<Probe, ProbeFailure>,
    /// How long the probe took, child start to answer.
    pub elapsed: Duration,
    /// When the answer is one remembered from an earlier command (`probe::cache`): how old
    /// it is. No probe ran then.
    pub reused: Option<Duration>,
}

impl Probed {
    /// The answer, if the backend is available.
    pub fn available(&self) -> Option<&Probe> {
        self.result.as_ref().ok().filter(|p| p.available)
    }
}

/// One plugin to probe, with its settings.
pub struct ProbeRequest {
    /// The plugin's manifest.
    pub manifest: Manifest,
    /// Its settings table as JSON.
    pub config_json: String,
}

/// Probes every requested plugin concurrently, each in its own child process running
/// `stet_binary`, each bounded by `limit`. Results come back in request order.
pub fn probe_all(requests: Vec<ProbeRequest>, stet_binary: &Path, limit: Duration) -> Vec<Probed> {
    probe_all_with(requests, stet_binary, limit, Reuse::Never)
}

/// Whether a probe may answer from [`cache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reuse {
    /// Always probe (`stet plugins probe`, install).
    Never,
    /// Reuse a fresh "available" answer of the same library, stet and settings; remember
    /// new ones (commands that select a plugin to use it).
    Fresh,
}

/// [`probe_all`], answering from the cache where `reuse` allows.
pub fn probe_all_with(
    requests: Vec<ProbeRequest>,
    stet_binary: &Path,
    limit: Duration,
    reuse: Reuse,
) -> Vec<Probed> {
    let handles: Vec<_> = requests
        .into_iter()
        .map(|request| {
            let stet_binary = stet_binary.to_path_buf();
            std::thread::spawn(move || {
                let key = (reuse == Reuse::Fresh)
                    .then(|| {
                        cache::key(
                            &request.manifest.path,
                            &request.manifest.library,
                            &request.config_json,
                            &stet_binary,
                        )
                    })
                    .flatten();
                if let Some(entry) = key.as_deref().and_then(cache::get) {
                    return Probed {
                        manifest: request.manifest,
                        identity: Some(entry.identity.clone()),
                        interface: Some(entry.interface.clone()),
                        result: Ok(entry.probe.clone()),
                        elapsed: Duration::ZERO,
                        reused: Some(entry.age()),
                    };
                }
                let probed = probe_one(request, &stet_binary, limit);
                if let (Some(key), Some(identity), Some(interface), Ok(probe)) = (
                    key,
                    probed.identity.clone(),
                    probed.interface.clone(),
                    probed.result.clone(),
                ) {
                    cache::put(key, identity, interface, probe);
                }
                probed
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("probe threads do not panic"))
        .collect()
}

fn probe_one(request: ProbeRequest, stet_binary: &Path, limit: Duration) -> Probed {
    let started = Instant::now();
    let manifest = request.manifest;
    let done = |identity, interface, result| Probed {
        manifest: manifest.clone(),
        identity,
        interface,
        result,
        elapsed: started.elapsed(),
        reused: None,
    };
    let mut child = match Command::new(stet_binary)
        .arg(WORKER_COMMAND)
        .arg(&manifest.path)
        .arg(&request.config_json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            return done(
                None,
                None,
                Err(ProbeFailure::Error {
                    stage: "start".into(),
                    message: format!("could not start {}: {e}", stet_binary.display()),
                    hint: "check that the stet binary is intact".into(),
                    report: None,
                }),
            )
        }
    };
    let stdout = read_all_in_background(child.stdout.take());
    let stderr = read_all_in_background(child.stderr.take());
    let status = child.wait_timeout(limit).ok().flatten();
    // Whatever happened, nothing the probe started may outlive it.
    kill_group(child.id());
    let status = match status {
        Some(status) => status,
        None => {
            let _ = child.wait();
            let stdout = stdout.join().unwrap_or_default();
            return done(
                None,
                None,
                Err(ProbeFailure::TimedOut {
                    limit_ms: limit.as_millis() as u64,
                    stage: last_stage(&String::from_utf8_lossy(&stdout)),
                }),
            );
        }
    };
    let stdout = stdout.join().unwrap_or_default();
    let stdout = String::from_utf8_lossy(&stdout);
    let stage = last_stage(&stdout);
    let stderr = tail(
        &String::from_utf8_lossy(&stderr.join().unwrap_or_default()),
        12,
    );
    if let Some(signal) = status.signal() {
        return done(
            None,
            None,
            Err(ProbeFailure::Crashed {
                signal: signal_name(signal),
                stage,
                stderr,
            }),
        );
    }
    let answer = stdout.lines().last().unwrap_or_default();
    match serde_json::from_str::<WorkerAnswer>(answer) {
        Ok(WorkerAnswer::Probed {
            identity,
            interface,
            probe,
        }) => done(Some(identity), Some(interface), Ok(probe)),
        Ok(WorkerAnswer::Failed {
            stage,
            message,
            hint,
            report,
        }) => done(
            None,
            None,
            Err(ProbeFailure::Error {
                stage,
                message,
                hint,
                report,
            }),
        ),
        Err(_) => done(
            None,
            None,
            Err(ProbeFailure::Exited {
                code: status.code().unwrap_or(-1),
                stage,
                stderr,
            }),
        ),
    }
}

/// The worker announces each stage on its answer channel before entering it, so that a
/// crash or a hang can be placed.
fn last_stage(output: &str) -> String {
    output
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("stage "))
        .unwrap_or("start")
        .to_string()
}

fn read_all_in_background<R: Read + Send + 'static>(
    pipe: Option<R>,
) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    })
}

fn kill_group(pid: u32) {
    use nix::sys::signal::{killpg, Signal};
    use nix::unistd::Pid;
    let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
}

fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {signal}"))
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The child's side: load the plugin at `manifest_path`, probe it, write one JSON answer.
///
/// The answer goes to the original standard output; before any plugin code runs, standard
/// output is pointed at standard error, so whatever a plugin prints cannot corrupt it.
pub fn worker_main(manifest_path: &Path, config_json: &str) -> ExitCode {
    let answer_fd = match redirect_stdout_to_stderr() {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("stet probe worker: cannot set up its output: {e}");
            return ExitCode::from(1);
        }
    };
    let mut out = std::fs::File::from(answer_fd);
    let answer = answer(manifest_path, config_json, &mut |stage| {
        let _ = writeln!(out, "stage {stage}");
    });
    let written = serde_json::to_vec(&answer)
        .map_err(std::io::Error::other)
        .and_then(|json| out.write_all(&json));
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(1),
    }
}

fn answer(manifest_path: &Path, config_json: &str, enter: &mut dyn FnMut(&str)) -> WorkerAnswer {
    let failed =
        |stage: &str, message: String, hint: String, report: Option<String>| WorkerAnswer::Failed {
            stage: stage.into(),
            message,
            hint,
            report,
        };
    let manifest = match manifest::read(manifest_path) {
        Ok(m) => m,
        Err(e) => {
            return failed(
                "manifest",
                e.to_string(),
                "fix the manifest, or reinstall the plugin".into(),
                None,
            )
        }
    };
    enter(STAGE_LOAD);
    let loaded = match loader::load(&manifest) {
        Ok(l) => l,
        Err(e) => {
            return failed(
                STAGE_LOAD,
                e.to_string(),
                e.hint(),
                e.report().map(str::to_string),
            )
        }
    };
    enter(STAGE_INSTANTIATE);
    let instance = match loaded.instantiate(config_json) {
        Ok(i) => i,
        Err(e) => {
            return failed(
                STAGE_INSTANTIATE,
                e.message.to_string(),
                e.remedy.to_string(),
                None,
            )
        }
    };
    enter(STAGE_PROBE);
    match instance.probe() {
        Ok(report) => WorkerAnswer::Probed {
            identity: loaded.identity.clone(),
            interface: loaded.interface.to_string(),
            probe: report.into(),
        },
        Err(e) => failed(
            STAGE_PROBE,
            e.message.to_string(),
            e.remedy.to_string(),
            None,
        ),
    }
}

fn redirect_stdout_to_stderr() -> std::io::Result<OwnedFd> {
    let stdout = std::io::stdout();
    let saved = nix::unistd::dup(stdout.as_fd()).map_err(std::io::Error::from)?;
    // Fd 1 becomes a copy of fd 2; `saved` keeps the original stdout open for the answer.
    nix::unistd::dup2_stdout(std::io::stderr().as_fd()).map_err(std::io::Error::from)?;
    Ok(saved)
}

/// Where the current process's binary is, for starting workers.
pub fn current_stet() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("stet"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_isolation_fact_is_one_short_line_and_absent_when_not_stated() {
        let probe = |facts: &[(&str, &str)]| Probe {
            available: true,
            backend_version: "1".into(),
            priority: 0,
            capabilities: vec![],
            reason: String::new(),
            remedy: String::new(),
            facts: facts
                .iter()
                .map(|(key, value)| Fact {
                    key: key.to_string(),
                    value: value.to_string(),
                })
                .collect(),
        };
        assert_eq!(probe(&[("engine", "x")]).isolation(), None);
        assert_eq!(probe(&[("isolation", "  \n")]).isolation(), None);
        assert_eq!(
            probe(&[
                ("engine", "x"),
                ("isolation", "a VM per sandbox\nsecond line")
            ])
            .isolation()
            .as_deref(),
            Some("a VM per sandbox")
        );
        let long = "a".repeat(500);
        let said = probe(&[("isolation", &long)]).isolation().unwrap();
        assert_eq!(said.chars().count(), ISOLATION_CHARS);
    }

    #[test]
    fn each_failure_says_what_happened_where_and_what_to_do() {
        let crashed = ProbeFailure::Crashed {
            signal: "SIGSEGV".into(),
            stage: STAGE_LOAD.into(),
            stderr: "last words".into(),
        };
        assert_eq!(
            crashed.summary(),
            "the plugin crashed the probe process (SIGSEGV) while loading its library"
        );
        assert_eq!(crashed.detail(), Some("last words"));
        let aborted = ProbeFailure::Crashed {
            signal: "SIGABRT".into(),
            stage: STAGE_INSTANTIATE.into(),
            stderr: String::new(),
        };
        assert_eq!(
            aborted.summary(),
            "the plugin aborted the probe process (SIGABRT) while building the plugin object"
        );
        assert_eq!(aborted.detail(), None, "no empty detail");
        let exited = ProbeFailure::Exited {
            code: 7,
            stage: "start".into(),
            stderr: String::new(),
        };
        assert_eq!(
            exited.summary(),
            "the probe process exited with code 7 while starting without an answer"
        );
        for failure in [&crashed, &aborted, &exited] {
            assert_eq!(
                failure.hint(),
                "this is a bug in the plugin: report it to its author, or remove its directory"
            );
        }

        let error = ProbeFailure::Error {
            stage: STAGE_PROBE.into(),
            message: "the engine said no".into(),
            hint: "start the engine".into(),
            report: Some("layout report".into()),
        };
        assert_eq!(error.summary(), "probe failed: the engine said no");
        assert_eq!(error.hint(), "start the engine");
        assert_eq!(error.detail(), Some("layout report"));

        let refused = ProbeFailure::Refused {
            message: "built for plan9".into(),
        };
        assert_eq!(refused.summary(), "built for plan9");
        assert_eq!(refused.hint(), "see `stet plugins list`");
        assert_eq!(refused.detail(), None);
    }

    #[test]
    fn the_last_stage_announced_places_a_crash_and_nothing_announced_is_the_start() {
        assert_eq!(last_stage("stage load\nstage instantiate\n"), "instantiate");
        assert_eq!(last_stage("stage load\nnoise\n"), "load");
        assert_eq!(last_stage(""), "start");
        assert_eq!(doing(&last_stage("")), "while starting");
    }

    #[test]
    fn signals_are_named_and_stderr_is_cut_to_its_last_lines() {
        assert_eq!(signal_name(11), "SIGSEGV");
        assert_eq!(signal_name(6), "SIGABRT");
        assert_eq!(signal_name(1000), "signal 1000");
        assert_eq!(tail("a\nb\nc\nd", 2), "c\nd");
        assert_eq!(tail("a", 5), "a");
    }
}
