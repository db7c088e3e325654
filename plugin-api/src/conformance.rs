//! The runtime conformance kit: one suite every runtime plugin must pass.
//!
//! Call [`run`] from a plugin's own tests with the plugin in-process
//! (`conformance::run(&Direct(&my_runtime), &options)`), or through the host with
//! `stet plugins conformance NAME`, which drives the installed library. Each check is
//! reported on its own, so one failure does not hide the others.
//!
//! The suite needs `git` on the host, and an image holding `sh`, `git`, coreutils and
//! `sleep` (stet's lane image, built by `scripts/build-image.sh`, has them). It creates
//! everything it uses under [`Options::scratch`] and removes its sandboxes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::{
    capability, EnvVar, ErrorCode, ExitStatus, ForwardedSocket, Label, LimitCounters, Limits,
    Mount, Network, PluginError, ProbeReport, ProcessPlugin, ProcessSpec, ROption, RuntimePlugin,
    SandboxInfo, SandboxOption, SandboxSpec, Sink, Stream, UserIds,
};

/// What the suite drives: a runtime, in-process or loaded by a host.
pub trait Driver: Sync {
    /// See [`RuntimePlugin::probe`].
    fn probe(&self) -> Result<ProbeReport, PluginError>;
    /// See [`RuntimePlugin::create_sandbox`].
    fn create_sandbox(&self, spec: SandboxSpec) -> Result<SandboxInfo, PluginError>;
    /// See [`RuntimePlugin::spawn`].
    fn spawn(&self, sandbox: &str, spec: ProcessSpec) -> Result<Box<dyn Running>, PluginError>;
    /// See [`RuntimePlugin::teardown`].
    fn teardown(&self, sandbox: &str) -> Result<(), PluginError>;
    /// See [`RuntimePlugin::list_sandboxes`].
    fn list_sandboxes(&self, labels: &[Label]) -> Result<Vec<SandboxInfo>, PluginError>;
    /// See [`RuntimePlugin::start`].
    fn start(&self, spec: SandboxSpec, options: Vec<SandboxOption>)
        -> Result<Started, PluginError>;
    /// See [`RuntimePlugin::stop`]. The default tears the sandbox down, as a runtime
    /// built before 1.5 does.
    fn stop(&self, sandbox: &str) -> Result<(), PluginError> {
        self.teardown(sandbox)
    }
    /// See [`RuntimePlugin::limit_counters`]. The default reads none, as a runtime built
    /// before 1.6 does.
    fn limit_counters(&self, sandbox: &str) -> Result<Option<LimitCounters>, PluginError> {
        let _ = sandbox;
        Ok(None)
    }
}

/// A sandbox made by [`Driver::start`], and its first process when one was asked for.
pub type Started = (SandboxInfo, Option<Box<dyn Running>>);

/// A process started through a [`Driver`].
pub trait Running: Send + Sync {
    /// Streams output to `on_chunk` until the process ends.
    fn wait(
        &self,
        on_chunk: &mut (dyn FnMut(Stream, &[u8]) + Send),
    ) -> Result<ExitStatus, PluginError>;
    /// Kills it; callable from another thread while `wait` blocks.
    fn kill(&self) -> Result<(), PluginError>;
}

/// A [`RuntimePlugin`] driven directly, without a library boundary.
pub struct Direct<'a, T>(pub &'a T);

struct DirectProcess(Box<dyn ProcessPlugin>);

impl Running for DirectProcess {
    fn wait(
        &self,
        on_chunk: &mut (dyn FnMut(Stream, &[u8]) + Send),
    ) -> Result<ExitStatus, PluginError> {
        self.0.wait(&mut Sink::from_fn(on_chunk))
    }

    fn kill(&self) -> Result<(), PluginError> {
        self.0.kill()
    }
}

impl<T: RuntimePlugin> Driver for Direct<'_, T> {
    fn probe(&self) -> Result<ProbeReport, PluginError> {
        self.0.probe()
    }
    fn create_sandbox(&self, spec: SandboxSpec) -> Result<SandboxInfo, PluginError> {
        self.0.create_sandbox(spec)
    }
    fn spawn(&self, sandbox: &str, spec: ProcessSpec) -> Result<Box<dyn Running>, PluginError> {
        Ok(Box::new(DirectProcess(self.0.spawn(sandbox, spec)?)))
    }
    fn teardown(&self, sandbox: &str) -> Result<(), PluginError> {
        self.0.teardown(sandbox)
    }
    fn list_sandboxes(&self, labels: &[Label]) -> Result<Vec<SandboxInfo>, PluginError> {
        self.0.list_sandboxes(labels)
    }
    fn start(
        &self,
        spec: SandboxSpec,
        options: Vec<SandboxOption>,
    ) -> Result<Started, PluginError> {
        let (info, first) = self.0.start(spec, options)?;
        Ok((
            info,
            first.map(|p| Box::new(DirectProcess(p)) as Box<dyn Running>),
        ))
    }
    fn stop(&self, sandbox: &str) -> Result<(), PluginError> {
        self.0.stop(sandbox)
    }
    fn limit_counters(&self, sandbox: &str) -> Result<Option<LimitCounters>, PluginError> {
        self.0.limit_counters(sandbox)
    }
}

/// Where and with what the suite runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The image sandboxes are created from.
    pub image: String,
    /// A host directory the suite may create files under (it is not removed).
    pub scratch: PathBuf,
    /// Bytes pushed through the large-output check.
    pub large_output_bytes: u64,
}

impl Options {
    /// The defaults: 256 MiB of large output.
    pub fn new(image: impl Into<String>, scratch: impl Into<PathBuf>) -> Self {
        Options {
            image: image.into(),
            scratch: scratch.into(),
            large_output_bytes: 256 << 20,
        }
    }
}

/// One check's result.
#[derive(Debug, Clone)]
pub struct Check {
    /// What was checked.
    pub name: &'static str,
    /// Whether it held.
    pub passed: bool,
    /// What was seen (on failure: what went wrong).
    pub detail: String,
    /// How long it took.
    pub elapsed: Duration,
}

/// Every check the kit runs, by name, in the order it runs them: a plugin's test asks
/// [`not_run`] which of them a run lacks (the kit stops early when no sandbox can be made),
/// rather than counting.
pub const CHECKS: &[&str] = &[
    "create a sandbox with a git working copy mounted",
    "run a process and read its output",
    "stdout and stderr are kept apart",
    "output streams as it is produced, in order",
    "stdin reaches the process",
    "exit codes and signal deaths are reported",
    "large output passes in bounded memory",
    "git works inside on the mounted copy",
    "the environment holds exactly what was given",
    "with network none only loopback exists",
    "host files outside the mounts are not visible",
    "a read-only mount inside a writable one stays read-only",
    "a unix socket forwarded from the host answers inside",
    "a first process runs, streams, takes input and exits",
    "sandboxes are listed by label",
    "a process in flight is killed from another thread",
    "a stopped sandbox runs nothing more",
    "limit counters read from outside match the sandbox's own",
    "teardown succeeds, and again",
];

/// The checks of [`CHECKS`] that `checks` (a run's results) lacks: empty when every one ran.
pub fn not_run(checks: &[Check]) -> Vec<&'static str> {
    CHECKS
        .iter()
        .copied()
        .filter(|name| !checks.iter().any(|c| c.name == *name))
        .collect()
}

/// Whether every check passed.
pub fn all_passed(checks: &[Check]) -> bool {
    checks.iter().all(|c| c.passed)
}

/// Every check on a line of its own (`pass`/`FAIL`, name, time, what was seen), for a
/// plugin's test to print and to fail with.
pub fn report(checks: &[Check]) -> String {
    checks
        .iter()
        .map(|c| {
            format!(
                "{} {} ({} ms): {}",
                if c.passed { "pass" } else { "FAIL" },
                c.name,
                c.elapsed.as_millis(),
                c.detail
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a process printed and how it ended.
struct Ran {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    status: ExitStatus,
}

impl Ran {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

type Outcome = Result<String, String>;

const LANE: &str = "/lane";
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

struct Suite<'a> {
    driver: &'a dyn Driver,
    options: &'a Options,
    run_id: String,
    lane: PathBuf,
    hidden: PathBuf,
    env: Vec<EnvVar>,
    checks: Vec<Check>,
}

/// Runs every check against `driver` and returns one result per check.
pub fn run(driver: &dyn Driver, options: &Options) -> Vec<Check> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let run_id = format!("{}-{nanos}", std::process::id());
    let root = options.scratch.join(format!("conformance-{run_id}"));
    let mut suite = Suite {
        driver,
        options,
        lane: root.join("lane"),
        hidden: root.join("hidden"),
        env: vec![
            EnvVar::new("PATH", PATH),
            EnvVar::new("STET_CONFORMANCE", run_id.clone()),
            // The lane belongs to the person on the host; git inside runs as whoever the
            // runtime maps them to, so it must not refuse the copy as someone else's.
            EnvVar::new("GIT_CONFIG_COUNT", "1"),
            EnvVar::new("GIT_CONFIG_KEY_0", "safe.directory"),
            EnvVar::new("GIT_CONFIG_VALUE_0", "*"),
        ],
        run_id,
        checks: Vec::new(),
    };
    suite.all();
    suite.checks
}

impl Suite<'_> {
    fn record(&mut self, name: &'static str, f: impl FnOnce(&mut Self) -> Outcome) {
        debug_assert!(CHECKS.contains(&name), "{name:?} is not in CHECKS");
        let started = Instant::now();
        let outcome = f(self);
        self.checks.push(Check {
            name,
            passed: outcome.is_ok(),
            detail: outcome.unwrap_or_else(|e| e),
            elapsed: started.elapsed(),
        });
    }

    fn labels(&self, role: &str) -> Vec<Label> {
        vec![
            Label::new("stet.conformance", self.run_id.clone()),
            Label::new("stet.conformance.role", role),
        ]
    }

    fn spec(&self, role: &str) -> SandboxSpec {
        let ids = owner_of(&self.lane);
        SandboxSpec {
            image: self.options.image.clone().into(),
            mounts: vec![Mount {
                source: self.lane.display().to_string().into(),
                target: LANE.into(),
                writable: true,
            }]
            .into(),
            env: self.env.clone().into(),
            workdir: LANE.into(),
            network: Network::None,
            limits: Limits {
                millicpus: 1000,
                memory_bytes: 512 << 20,
                pids: 256,
            },
            labels: self.labels(role).into(),
            user: ids.map(ROption::RSome).unwrap_or(ROption::RNone),
        }
    }

    fn exec(&self, sandbox: &str, argv: &[&str], stdin: &[u8]) -> Result<Ran, String> {
        let process = self
            .driver
            .spawn(sandbox, process(argv, stdin))
            .map_err(|e| format!("spawn {argv:?}: {e}"))?;
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        let status = process
            .wait(&mut |stream, bytes| match stream {
                Stream::Stdout => stdout.extend_from_slice(bytes),
                Stream::Stderr => stderr.extend_from_slice(bytes),
            })
            .map_err(|e| format!("wait {argv:?}: {e}"))?;
        Ok(Ran {
            stdout,
            stderr,
            status,
        })
    }

    fn all(&mut self) {
        let mut sandbox = None;
        self.record("create a sandbox with a git working copy mounted", |s| {
            s.prepare_host()?;
            let info = s
                .driver
                .create_sandbox(s.spec("main"))
                .map_err(|e| e.to_string())?;
            let detail = format!("sandbox {}", short(&info.id));
            sandbox = Some(info.id.to_string());
            Ok(detail)
        });
        let Some(sandbox) = sandbox else {
            return;
        };
        let sb = sandbox.as_str();
        self.record("run a process and read its output", |s| {
            let ran = s.exec(sb, &["echo", "hello"], b"")?;
            expect(ran.stdout() == "hello\n" && ran.status.success(), || {
                format!("stdout {:?}, {:?}", ran.stdout(), ran.status)
            })
        });
        self.record("stdout and stderr are kept apart", |s| {
            let ran = s.exec(sb, &["sh", "-c", "echo out; echo err >&2"], b"")?;
            expect(ran.stdout == b"out\n" && ran.stderr == b"err\n", || {
                format!(
                    "stdout {:?}, stderr {:?}",
                    ran.stdout(),
                    String::from_utf8_lossy(&ran.stderr)
                )
            })
        });
        self.record("output streams as it is produced, in order", |s| {
            s.streaming(sb)
        });
        self.record("stdin reaches the process", |s| {
            let input = vec![b'x'; 100_000];
            let ran = s.exec(sb, &["wc", "-c"], &input)?;
            expect(ran.stdout().trim() == "100000", || {
                format!("wc -c said {:?}", ran.stdout())
            })
        });
        self.record("exit codes and signal deaths are reported", |s| {
            let seven = s.exec(sb, &["sh", "-c", "exit 7"], b"")?.status;
            let killed = s.exec(sb, &["sh", "-c", "kill -9 $$"], b"")?.status;
            expect(
                seven.code == ROption::RSome(7) && killed.signal == ROption::RSome(9),
                || format!("exit 7 gave {seven:?}; kill -9 gave {killed:?}"),
            )
        });
        self.record("large output passes in bounded memory", |s| {
            s.large_output(sb)
        });
        self.record("git works inside on the mounted copy", |s| s.git_inside(sb));
        self.record("the environment holds exactly what was given", |s| {
            s.environment(sb)
        });
        self.record("with network none only loopback exists", |s| {
            s.only_loopback(sb)
        });
        self.record("host files outside the mounts are not visible", |s| {
            s.host_files_hidden(sb)
        });
        self.record(
            "a read-only mount inside a writable one stays read-only",
            |s| s.nested_read_only(),
        );
        let probe = self.driver.probe().ok();
        let offers = |c: &str| {
            probe
                .as_ref()
                .is_some_and(|p| p.capabilities.iter().any(|x| x.as_str() == c))
        };
        let (socket, first) = (
            offers(capability::FORWARD_SOCKET),
            offers(capability::FIRST_PROCESS),
        );
        self.record(
            "a unix socket forwarded from the host answers inside",
            |s| s.forwarded_socket(socket),
        );
        self.record(
            "a first process runs, streams, takes input and exits",
            |s| s.first_process(first),
        );
        self.record("sandboxes are listed by label", |s| {
            let found = s
                .driver
                .list_sandboxes(&s.labels("main"))
                .map_err(|e| e.to_string())?;
            expect(found.iter().any(|f| f.id.as_str() == sb), || {
                format!("{} not among {} listed", short(sb), found.len())
            })
        });
        self.record("a process in flight is killed from another thread", |s| {
            s.kill()
        });
        self.record("a stopped sandbox runs nothing more", |s| s.stop());
        self.record(
            "limit counters read from outside match the sandbox's own",
            |s| s.limit_counters(),
        );
        self.record("teardown succeeds, and again", |s| s.teardown_twice(sb));
    }

    /// Only loopback, with network none: sysfs lists the interfaces where the kernel has
    /// one (a kernel in user space may not); /proc/net/dev lists them everywhere.
    fn only_loopback(&self, sb: &str) -> Outcome {
        let ran = self.exec(
            sb,
            &[
                "sh",
                "-c",
                "ls /sys/class/net 2>/dev/null | grep . || \
                 sed -n 's/^ *\\([^:| ]*\\):.*/\\1/p' /proc/net/dev",
            ],
            b"",
        )?;
        expect(
            ran.stdout().split_whitespace().collect::<Vec<_>>() == ["lo"],
            || format!("interfaces: {:?}", ran.stdout()),
        )
    }

    /// Neither the hidden canary nor an entry of the host's home is visible inside.
    fn host_files_hidden(&self, sb: &str) -> Outcome {
        let canary = self.hidden.join("canary");
        let mut script = format!("test -e '{}' && echo canary; ", canary.display());
        if let Some(private) = host_home_entry() {
            script.push_str(&format!("test -e '{}' && echo home; ", private.display()));
        }
        script.push_str("true");
        let ran = self.exec(sb, &["sh", "-c", &script], b"")?;
        expect(ran.stdout().trim().is_empty(), || {
            format!("visible inside: {}", ran.stdout().trim())
        })
    }

    /// A teardown succeeds, a second one too, and the sandbox is no longer listed.
    fn teardown_twice(&self, sb: &str) -> Outcome {
        self.driver
            .teardown(sb)
            .map_err(|e| format!("first: {e}"))?;
        self.driver
            .teardown(sb)
            .map_err(|e| format!("second: {e}"))?;
        let left = self
            .driver
            .list_sandboxes(&self.labels("main"))
            .map_err(|e| e.to_string())?;
        expect(left.is_empty(), || {
            format!("{} still listed after teardown", left.len())
        })
    }

    /// A lane's git directory is mounted read-only inside the lane's writable working tree
    /// (stet's first wall around host-side git): the runtime must keep it read-only there,
    /// and let the rest of the tree be written.
    fn nested_read_only(&self) -> Outcome {
        let outer = self.lane.with_file_name("nest");
        let inner = self.lane.with_file_name("nest-inner");
        for dir in [&outer, &inner] {
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
        std::fs::create_dir_all(outer.join("inner")).map_err(|e| e.to_string())?;
        std::fs::write(inner.join("config"), "kept\n").map_err(|e| e.to_string())?;
        let mut spec = self.spec("nested");
        spec.mounts = vec![
            Mount {
                source: outer.display().to_string().into(),
                target: "/nest".into(),
                writable: true,
            },
            Mount {
                source: inner.display().to_string().into(),
                target: "/nest/inner".into(),
                writable: false,
            },
        ]
        .into();
        spec.workdir = "/nest".into();
        let info = self
            .driver
            .create_sandbox(spec)
            .map_err(|e| e.to_string())?;
        let ran = self.exec(
            &info.id,
            &[
                "sh",
                "-c",
                "echo x > /nest/outer.txt && echo outer-written; \
                 echo planted > /nest/inner/config 2>/dev/null && echo inner-written; \
                 touch /nest/inner/new 2>/dev/null && echo inner-created; \
                 rm -rf /nest/inner 2>/dev/null; test -d /nest/inner && echo inner-kept; true",
            ],
            b"",
        );
        let _ = self.driver.teardown(&info.id);
        let ran = ran?;
        let out = ran.stdout();
        let host_kept = std::fs::read_to_string(inner.join("config"))
            .ok()
            .as_deref()
            == Some("kept\n")
            && !inner.join("new").exists();
        let outer_seen = outer.join("outer.txt").exists();
        expect(
            out.contains("outer-written")
                && !out.contains("inner-written")
                && !out.contains("inner-created")
                && out.contains("inner-kept")
                && host_kept
                && outer_seen,
            || {
                format!("inside: {}; host copy kept: {host_kept}; outer write seen on the host: {outer_seen}", out.trim().replace('\n', ", "))
            },
        )
    }

    /// With [`capability::FORWARD_SOCKET`] in the probe, a listener on the host is reached
    /// through its socket inside the sandbox; without it, the option must be refused by
    /// name, never ignored.
    fn forwarded_socket(&self, offered: bool) -> Outcome {
        use std::io::Write;
        let dir = self.lane.with_file_name("socket");
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let host = dir.join("kit.sock");
        let listener =
            std::os::unix::net::UnixListener::bind(&host).map_err(|e| format!("bind: {e}"))?;
        listener.set_nonblocking(false).map_err(|e| e.to_string())?;
        let inside = "/run/stet-kit.sock";
        let option = SandboxOption::ForwardSocket(ForwardedSocket {
            host: host.display().to_string().into(),
            sandbox: inside.into(),
        });
        let started = self.driver.start(self.spec("socket"), vec![option]);
        let (info, _) = match (started, offered) {
            (Err(e), false) if e.code == ErrorCode::UNSUPPORTED => {
                return Ok(format!("not offered, and refused by name: {}", e.message))
            }
            (Err(e), _) => return Err(format!("start: {e}")),
            (Ok((info, _)), false) => {
                let _ = self.driver.teardown(&info.id);
                return Err(
                    "the probe does not offer forward-socket, yet the option was taken (ignored?)"
                        .into(),
                );
            }
            (Ok(started), true) => started,
        };
        let answer = std::thread::spawn(move || {
            if let Ok((mut peer, _)) = listener.accept() {
                let _ = peer.write_all(b"stet-forwarded\n");
            }
        });
        let script = format!(
            "test -S {inside} && echo socket; \
             if command -v perl >/dev/null; then perl -MIO::Socket::UNIX -e '$s=IO::Socket::UNIX->new(Peer=>\"{inside}\") or die; print <$s>'; fi; true"
        );
        let ran = self.exec(&info.id, &["sh", "-c", &script], b"");
        let _ = self.driver.teardown(&info.id);
        // Unblock the listener if nothing connected.
        let _ = std::os::unix::net::UnixStream::connect(&host);
        let _ = answer.join();
        let ran = ran?;
        let out = ran.stdout();
        expect(
            out.contains("socket") && (out.contains("stet-forwarded") || !out.contains("perl")),
            || format!("inside: {:?}", out.trim()),
        )
        .map(|_| {
            if out.contains("stet-forwarded") {
                "a host listener answered through the socket".to_string()
            } else {
                "the socket is there (no perl in the image to connect with)".to_string()
            }
        })
    }

    /// With [`capability::FIRST_PROCESS`], the sandbox's first process is the one asked
    /// for: its output streams back, its input arrives, its exit code is reported.
    fn first_process(&self, offered: bool) -> Outcome {
        let option = SandboxOption::FirstProcess(crate::RBox::new(process(
            &[
                "sh",
                "-c",
                "echo first; read line; echo \"got $line\"; exit 3",
            ],
            b"input\n",
        )));
        let started = self.driver.start(self.spec("first"), vec![option]);
        let (info, first) = match (started, offered) {
            (Err(e), false) if e.code == ErrorCode::UNSUPPORTED => {
                return Ok(format!("not offered, and refused by name: {}", e.message))
            }
            (Err(e), _) => return Err(format!("start: {e}")),
            (Ok((info, _)), false) => {
                let _ = self.driver.teardown(&info.id);
                return Err(
                    "the probe does not offer first-process, yet the option was taken (ignored?)"
                        .into(),
                );
            }
            (Ok(started), true) => started,
        };
        let Some(first) = first else {
            let _ = self.driver.teardown(&info.id);
            return Err("no first process came back".into());
        };
        let mut stdout = Vec::new();
        let status = first.wait(&mut |stream, bytes| {
            if stream == Stream::Stdout {
                stdout.extend_from_slice(bytes);
            }
        });
        let _ = self.driver.teardown(&info.id);
        let status = status.map_err(|e| format!("wait: {e}"))?;
        let out = String::from_utf8_lossy(&stdout).into_owned();
        expect(
            out == "first\ngot input\n" && status.code == ROption::RSome(3),
            || format!("stdout {out:?}, {status:?}"),
        )
    }

    fn prepare_host(&self) -> Result<(), String> {
        std::fs::create_dir_all(&self.lane).map_err(|e| e.to_string())?;
        std::fs::create_dir_all(&self.hidden).map_err(|e| e.to_string())?;
        std::fs::write(self.hidden.join("canary"), "not for sandboxes")
            .map_err(|e| e.to_string())?;
        std::fs::write(self.lane.join("README"), "a lane\n").map_err(|e| e.to_string())?;
        git(&self.lane, &["init", "--quiet"])?;
        git(&self.lane, &["add", "README"])?;
        git(
            &self.lane,
            &[
                "-c",
                "user.name=stet",
                "-c",
                "user.email=stet@localhost",
                "commit",
                "--quiet",
                "-m",
                "start",
            ],
        )?;
        Ok(())
    }

    fn streaming(&self, sb: &str) -> Outcome {
        let process = self
            .driver
            .spawn(
                sb,
                process(
                    &[
                        "sh",
                        "-c",
                        "echo first; sleep 1; echo second >&2; sleep 0.3; echo third",
                    ],
                    b"",
                ),
            )
            .map_err(|e| e.to_string())?;
        let started = Instant::now();
        let arrivals = Mutex::new(Vec::new());
        process
            .wait(&mut |stream, bytes| {
                arrivals
                    .lock()
                    .unwrap()
                    .push((started.elapsed(), stream, bytes.to_vec()))
            })
            .map_err(|e| e.to_string())?;
        let arrivals = arrivals.into_inner().unwrap();
        let first = arrivals
            .iter()
            .find(|(_, _, b)| b.starts_with(b"first"))
            .ok_or("`first` never arrived")?;
        let end = arrivals.last().map(|a| a.0).unwrap_or_default();
        let order: Vec<(Stream, String)> = arrivals
            .iter()
            .map(|(_, s, b)| (*s, String::from_utf8_lossy(b).into_owned()))
            .collect();
        let joined: String = order.iter().map(|(_, t)| t.as_str()).collect();
        if joined != "first\nsecond\nthird\n" {
            return Err(format!("chunks out of order: {order:?}"));
        }
        expect(
            end.saturating_sub(first.0) >= Duration::from_millis(700),
            || {
                format!(
                    "`first` arrived at {} ms and the rest at {} ms: output was held back",
                    first.0.as_millis(),
                    end.as_millis()
                )
            },
        )
        .map(|_| {
            format!(
                "first chunk after {} ms, last after {} ms",
                first.0.as_millis(),
                end.as_millis()
            )
        })
    }

    fn large_output(&self, sb: &str) -> Outcome {
        let bytes = self.options.large_output_bytes;
        let process = self
            .driver
            .spawn(
                sb,
                process(&["head", "-c", &bytes.to_string(), "/dev/zero"], b""),
            )
            .map_err(|e| e.to_string())?;
        let before = peak_rss();
        let mut received = 0u64;
        let mut largest = 0usize;
        let started = Instant::now();
        let status = process
            .wait(&mut |_, chunk| {
                received += chunk.len() as u64;
                largest = largest.max(chunk.len());
            })
            .map_err(|e| e.to_string())?;
        let elapsed = started.elapsed();
        let growth = peak_rss()
            .zip(before)
            .map(|(after, before)| after.saturating_sub(before));
        if received != bytes || !status.success() {
            return Err(format!("received {received} of {bytes} bytes, {status:?}"));
        }
        let rate = bytes as f64 / elapsed.as_secs_f64() / (1 << 20) as f64;
        match growth {
            Some(growth) if growth > 64 << 20 => Err(format!(
                "peak memory grew by {} MiB for {} MiB of output",
                growth >> 20,
                bytes >> 20
            )),
            Some(growth) => Ok(format!(
                "{} MiB at {rate:.0} MiB/s, largest chunk {largest} B, peak memory +{} MiB",
                bytes >> 20,
                growth >> 20
            )),
            None => Ok(format!(
                "{} MiB at {rate:.0} MiB/s (peak memory not measurable here)",
                bytes >> 20
            )),
        }
    }

    fn git_inside(&self, sb: &str) -> Outcome {
        let script = "git status --short && echo inside > inside.txt && git add inside.txt \
             && git -c user.name=sandbox -c user.email=sandbox@localhost commit --quiet -m inside";
        let ran = self.exec(sb, &["sh", "-c", script], b"")?;
        if !ran.status.success() {
            return Err(format!(
                "{:?}: {}",
                ran.status,
                String::from_utf8_lossy(&ran.stderr).trim()
            ));
        }
        let log = git(&self.lane, &["log", "--format=%s"])?;
        if log.lines().next() != Some("inside") {
            return Err(format!(
                "the host does not see the commit made inside: {log:?}"
            ));
        }
        match (
            owner_of(&self.lane.join("inside.txt")),
            owner_of(&self.lane),
        ) {
            (Some(file), Some(lane)) if file != lane => Err(format!(
                "a file written inside belongs to {}:{} on the host, not to the lane's owner {}:{}",
                file.uid, file.gid, lane.uid, lane.gid
            )),
            _ => Ok("commit made inside is on the host's branch".to_string()),
        }
    }

    fn environment(&self, sb: &str) -> Outcome {
        let ran = self.exec(sb, &["env"], b"")?;
        let seen: Vec<(String, String)> = ran
            .stdout()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for given in &self.env {
            if !seen
                .iter()
                .any(|(k, v)| k == given.name.as_str() && v == given.value.as_str())
            {
                return Err(format!("{} is missing or changed", given.name));
            }
        }
        // What the runtime itself may set: the host name, a home, and the shell's own.
        const RUNTIME_MANAGED: [&str; 6] = ["HOSTNAME", "HOME", "PATH", "PWD", "SHLVL", "_"];
        let extra: Vec<&str> = seen
            .iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| {
                !RUNTIME_MANAGED.contains(k) && !self.env.iter().any(|g| g.name.as_str() == *k)
            })
            .collect();
        if !extra.is_empty() {
            return Err(format!("variables nobody gave: {}", extra.join(", ")));
        }
        let leaked: Vec<String> = std::env::vars()
            .filter(|(k, v)| v.len() > 3 && seen.iter().any(|(sk, sv)| sk == k && sv == v))
            .filter(|(k, _)| {
                !self.env.iter().any(|g| g.name.as_str() == k)
                    && !RUNTIME_MANAGED.contains(&k.as_str())
            })
            .map(|(k, _)| k)
            .collect();
        expect(leaked.is_empty(), || {
            format!("host variables leaked in: {}", leaked.join(", "))
        })
        .map(|_| format!("{} variables, none from the host", seen.len()))
    }

    fn kill(&self) -> Outcome {
        let info = self
            .driver
            .create_sandbox(self.spec("kill"))
            .map_err(|e| format!("second sandbox: {e}"))?;
        let outcome = (|| {
            let process = self
                .driver
                .spawn(&info.id, process(&["sleep", "60"], b""))
                .map_err(|e| e.to_string())?;
            let started = Instant::now();
            let status = std::thread::scope(|scope| {
                let killer = scope.spawn(|| {
                    std::thread::sleep(Duration::from_millis(300));
                    process.kill()
                });
                let status = process.wait(&mut |_, _| {});
                (status, killer.join())
            });
            let elapsed = started.elapsed();
            match status {
                (Ok(status), Ok(Ok(())))
                    if elapsed < Duration::from_secs(20) && !status.success() =>
                {
                    Ok(format!(
                        "ended after {} ms with {status:?}",
                        elapsed.as_millis()
                    ))
                }
                (status, killed) => Err(format!(
                    "after {} ms: wait {status:?}, kill {killed:?}",
                    elapsed.as_millis()
                )),
            }
        })();
        let removed = self.driver.teardown(&info.id);
        outcome.and_then(|detail| {
            removed
                .map(|_| detail)
                .map_err(|e| format!("teardown: {e}"))
        })
    }
}

impl Suite<'_> {
    /// A process the host never spawned (one the agent left running in the background)
    /// writes to the lane as fast as it can until [`Driver::stop`] returns, and never
    /// after — nor during the sandbox's removal (which must not wake what stop stopped):
    /// the host uses the lane the moment stop answers, while the sandbox is removed later.
    fn stop(&self) -> Outcome {
        let info = self
            .driver
            .create_sandbox(self.spec("stop"))
            .map_err(|e| format!("a sandbox to stop: {e}"))?;
        let beat = self.lane.join("stop-beat");
        let length = || std::fs::metadata(&beat).map(|m| m.len()).unwrap_or(0);
        let outcome = (|| {
            // Several writers: a removal that wakes them gives each a moment to run.
            let writer = format!(
                "(while :; do echo x >> {LANE}/stop-beat; done) >/dev/null 2>&1 </dev/null &"
            );
            // The parent waits (a few seconds at most) until they have written twice, so
            // that they have run before it ends: a runtime whose processes all end with the
            // one it spawned (a pid namespace per process) leaves nothing running, and
            // passes for that — where without the wait the writers might never run at all.
            let settle = format!(
                "i=0; while :; do n=$(wc -c < {LANE}/stop-beat 2>/dev/null | tr -d ' '); \
                 [ \"${{n:-0}}\" -ge 4 ] && break; i=$((i+1)); [ $i -ge 500 ] && break; \
                 sleep 0.01; done"
            );
            let script = format!("{} {settle}", [writer.as_str(); 4].join(" "));
            let ran = self.exec(&info.id, &["sh", "-c", &script], b"")?;
            if !ran.status.success() {
                return Err(format!("the loop did not start: {:?}", ran.status));
            }
            // Until it has written twice: it runs on after its parent ended.
            let deadline = Instant::now() + Duration::from_secs(20);
            while length() < 4 {
                if Instant::now() > deadline {
                    return Err("the process left running never wrote to the lane".to_string());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            self.driver
                .stop(&info.id)
                .map_err(|e| format!("stop: {e}"))?;
            let stopped = length();
            // Half a second: a process still running would have written thousands of lines.
            std::thread::sleep(Duration::from_millis(500));
            let after = length();
            self.driver
                .stop(&info.id)
                .map_err(|e| format!("a second stop: {e}"))?;
            if after != stopped {
                return Err(format!(
                    "the process left running wrote {} more bytes after stop returned",
                    after - stopped
                ));
            }
            self.driver
                .teardown(&info.id)
                .map_err(|e| format!("teardown after stop: {e}"))?;
            let removed = length();
            expect(removed == stopped, || {
                format!(
                    "the process left running wrote {} more bytes while the stopped sandbox was removed",
                    removed - stopped
                )
            })
            .map(|_| "the process left running wrote nothing after stop, nor during the removal".to_string())
        })();
        // Removed already when the check got that far; a second teardown succeeds.
        let removed = self.driver.teardown(&info.id);
        let _ = std::fs::remove_file(&beat);
        outcome.and_then(|detail| {
            removed
                .map(|_| detail)
                .map_err(|e| format!("teardown after stop: {e}"))
        })
    }
}

impl Suite<'_> {
    /// Where the runtime reads a sandbox's limit counters from outside, they are the
    /// kernel's for that sandbox: none refused in a fresh one, and after a fork storm at a
    /// low pids limit, forks refused — as many as the sandbox's own control group files
    /// say inside.
    fn limit_counters(&self) -> Outcome {
        let spec = SandboxSpec {
            limits: Limits {
                pids: 16,
                ..self.spec("limits").limits
            },
            ..self.spec("limits")
        };
        let info = self
            .driver
            .create_sandbox(spec)
            .map_err(|e| format!("a sandbox with a pids limit: {e}"))?;
        let outcome = (|| {
            let read = || {
                self.driver
                    .limit_counters(&info.id)
                    .map_err(|e| format!("limit_counters: {e}"))
            };
            let Some(fresh) = read()? else {
                return Ok(
                    "not read from outside by this runtime (the host reads them inside)"
                        .to_string(),
                );
            };
            if fresh.pids_refused != 0 || fresh.oom_kills != 0 {
                return Err(format!("a fresh sandbox already counts {fresh:?}"));
            }
            // More short sleeps than the limit allows at once; the shell waits for the ones
            // it got, so the pids are free again when it ends.
            let storm = "i=0; while [ $i -lt 40 ]; do sleep 1 & i=$((i+1)); done 2>/dev/null; wait";
            self.exec(&info.id, &["sh", "-c", storm], b"")?;
            let outside = read()?.ok_or("limit_counters answered once, then no more")?;
            let inside = self.exec(
                &info.id,
                &[
                    "sh",
                    "-c",
                    "cat /sys/fs/cgroup/pids.events /sys/fs/cgroup/pids/pids.events 2>/dev/null; true",
                ],
                b"",
            )?;
            let counted = inside
                .stdout()
                .lines()
                .find_map(|l| l.strip_prefix("max ")?.trim().parse::<u64>().ok());
            if outside.pids_refused == 0 {
                return Err(format!(
                    "a fork storm at a pids limit of 16 left {outside:?} (inside: {counted:?})"
                ));
            }
            match counted {
                Some(inside) if inside != outside.pids_refused => Err(format!(
                    "outside {} forks refused, inside {inside}",
                    outside.pids_refused
                )),
                _ => Ok(format!(
                    "{} forks refused at the pids limit, counted outside{}",
                    outside.pids_refused,
                    if counted.is_some() { " as inside" } else { "" }
                )),
            }
        })();
        let removed = self.driver.teardown(&info.id);
        outcome.and_then(|detail| {
            removed
                .map(|_| detail)
                .map_err(|e| format!("teardown: {e}"))
        })
    }
}

fn process(argv: &[&str], stdin: &[u8]) -> ProcessSpec {
    ProcessSpec {
        argv: argv.iter().map(|a| (*a).into()).collect(),
        env: Default::default(),
        workdir: ROption::RNone,
        stdin: stdin.to_vec().into(),
    }
}

fn expect(ok: bool, why: impl FnOnce() -> String) -> Outcome {
    if ok {
        Ok(String::new())
    } else {
        Err(why())
    }
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("git {args:?}: {e} (the kit needs git on the host)"))?;
    if !out.status.success() {
        return Err(format!(
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn owner_of(path: &Path) -> Option<UserIds> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some(UserIds {
        uid: meta.uid(),
        gid: meta.gid(),
    })
}

/// Something in the host's home directory that an image would not have by chance (not
/// a skeleton dotfile), to check the home is not visible.
fn host_home_entry() -> Option<PathBuf> {
    const SKELETON: [&str; 4] = [".bashrc", ".profile", ".bash_logout", ".cache"];
    let home = PathBuf::from(std::env::var_os("HOME")?);
    let mut names: Vec<PathBuf> = std::fs::read_dir(&home)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| !SKELETON.iter().any(|s| e.file_name() == *s))
        .map(|e| e.path())
        .collect();
    names.sort();
    names.into_iter().next()
}

/// This process's peak resident memory in bytes (Linux: `VmHWM`).
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod checks_tests {
    /// Every check the kit records is listed in `CHECKS`, once, in the order it runs.
    #[test]
    fn every_check_recorded_is_listed_in_order() {
        let source = include_str!("conformance.rs");
        // The kit's checks: `record(` then the name's literal, on its line or the next.
        let kit = &source
            [source.find("fn all(&mut self)").unwrap()..source.find("mod checks_tests").unwrap()];
        let recorded: Vec<&str> = kit
            .split("record(")
            .skip(1)
            .filter_map(|rest| rest.trim_start().strip_prefix('"'))
            .filter_map(|rest| rest.split('"').next())
            .collect();
        assert_eq!(recorded, super::CHECKS);
    }
}
