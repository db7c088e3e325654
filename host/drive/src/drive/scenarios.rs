//! The drive's loop against in-process fakes: every rule of the drain, the lane, the
//! keeper and the outage schedule, fast and without a sandbox.
//!
//! The runtime and the harness are made through the SDK's own constructors (the very
//! boundary objects a plugin library exports), so the host talks to them exactly as to a
//! loaded plugin. The fake runtime runs no process: each "process" acts out what the test
//! scripted for that role (write a file in the lane, answer LAND, fail the task, find the
//! model API down, hit a usage limit). Git is real, with a bare remote in a temporary
//! directory; the clock is a [`FakeClock`], so an eight-hour outage passes at once and the
//! waits it made are read back.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use stet_plugin_api::{
    CallOutcome, CredentialDecl, CredentialSource, CredentialSource_NE, ExitStatus, HarnessContext,
    HarnessPlugin, Label, Launch, Network, Outcome, OutcomeCode, PluginError, ProbeReport,
    ProcessPlugin, ProcessSpec, Profile, ROption, Role, RoleRequest, RuntimePlugin, SandboxInfo,
    SandboxSpec, Sink, WallCheck,
};

use super::time::fake::FakeClock;
use super::time::{Clock, Stop};
use super::{progress, Drive, DriveOptions, Ended};
use crate::checkpoints::{Checkpoint, Next};
use crate::git::run as git;
use crate::harness::OpenHarness;
use crate::plugins::loader::{HarnessHandle, RuntimeHandle};
use crate::receipts::PluginRecord;
use crate::reservations::Remote;
use crate::sandbox::OpenRuntime;
use crate::settings::{SandboxLimits, Settings};

/// What the fake agent does in one call.
#[derive(Clone, Debug)]
enum Act {
    /// Appends a line to this file in the lane, and finishes.
    Write(&'static str),
    /// Finishes without changing anything.
    Nothing,
    /// Answers this (a reviewer's words), and finishes.
    Say(&'static str),
    /// Exits 1: the agent failed its task.
    Fail,
    /// The model API did not answer.
    Unavailable,
    /// The model API refused the profile's login.
    LoginRefused,
    /// Prints what the harness cannot read at all.
    Unreadable,
    /// Writes this file, then a stop is asked (a Ctrl-C during the call).
    WriteThenStop(&'static str),
    /// Answers this, then a stop is asked.
    SayThenStop(&'static str),
    /// Writes this file while a peer moves the lane's branch on the remote.
    WriteWhileAPeerPushes(&'static str),
    /// Writes this file, then the remote goes away (moved aside until the test restores it).
    WriteThenLoseTheRemote(&'static str),
    /// Answers this, then the remote goes away (as [`Act::WriteThenLoseTheRemote`]).
    SayThenLoseTheRemote(&'static str),
    /// Answers this once a sandbox on this item's lane has been made (the next item's,
    /// made ahead while this call runs).
    SayOnceMadeFor(&'static str, &'static str),
    /// Hits the usage limit, which resets at this time (seconds since the epoch).
    Limited(i64),
    /// Does this to the world (moves the clock, acts as a peer), then writes this file.
    RunThenWrite(fn(&Script), &'static str),
    /// Does this to the world, then answers this.
    RunThenSay(fn(&Script), &'static str),
}

/// One test's world, shared by its fake runtime and harness.
#[derive(Default)]
struct Script {
    /// What each implementing call does, in turn (then: write `change`).
    implement: Mutex<VecDeque<Act>>,
    /// What each review does, in turn (then: LAND).
    review: Mutex<VecDeque<Act>>,
    /// Each check's exit code and output, in turn (then: 0, `ok`).
    check: Mutex<VecDeque<(i32, &'static str)>>,
    /// How many sandboxes from now on cannot be made (the engine is down).
    sandboxes_fail: Mutex<u32>,
    /// Every call, as `role` (and `check`), in order.
    calls: Mutex<Vec<String>>,
    /// Every implementing prompt, in order.
    prompts: Mutex<Vec<String>>,
    /// Every review prompt, in order.
    review_prompts: Mutex<Vec<String>>,
    /// Every sandbox made and ended, as `made KIND ITEM` / `ended KIND ITEM` (the item
    /// whose lane it is made on), and every call, as `call ROLE ITEM`, in order.
    events: Mutex<Vec<String>>,
    /// The sandboxes not ended yet: id → `KIND ITEM`.
    sandboxes: Mutex<HashMap<String, String>>,
    /// The stop the drive watches, for the acts that ask for one.
    stop: Mutex<Option<Arc<Stop>>>,
    /// The bare remote, for the acts that move it.
    remote: Mutex<Option<PathBuf>>,
    /// The walled profile directory.
    profile: Mutex<String>,
    /// The clone the drive works in, for the acts that read or write the remote through it.
    repo: Mutex<Option<PathBuf>>,
    /// The drive's clock, for the acts that move it.
    clock: Mutex<Option<Arc<FakeClock>>>,
    /// The drive's reservation keepers, one a lane, for the acts that wait on them.
    keepers: Mutex<Vec<super::keeper::Keeper>>,
    /// Whether the harness declares the login in the profile's `auth.json` (at `/token`)
    /// as its credential.
    declares_a_credential: Mutex<bool>,
}

impl Script {
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    fn count(&self, role: &str) -> usize {
        self.calls().iter().filter(|c| *c == role).count()
    }

    fn clock(&self) -> Arc<FakeClock> {
        self.clock.lock().unwrap().clone().expect("a drive runs")
    }

    /// The keeper of the first lane.
    fn keeper(&self) -> super::keeper::Keeper {
        self.keepers.lock().unwrap()[0].clone()
    }

    /// Runs `f` on the drive's remote, as the drive's clone sees it.
    fn on_remote<T>(&self, f: impl FnOnce(Remote<'_>) -> T) -> T {
        let repo = self.repo.lock().unwrap().clone().unwrap();
        f(Remote {
            repo: &repo,
            name: "origin",
        })
    }

    /// Notes what an act saw, among the events.
    fn saw(&self, what: String) {
        self.events.lock().unwrap().push(what);
    }
}

/// Scripts by id: the SDK's constructors take a plain `fn(&str)`, so a fake finds its
/// script by the configuration string it is given.
fn scripts() -> &'static Mutex<HashMap<String, Arc<Script>>> {
    static SCRIPTS: OnceLock<Mutex<HashMap<String, Arc<Script>>>> = OnceLock::new();
    SCRIPTS.get_or_init(Default::default)
}

fn script_of(config: &str) -> Result<Arc<Script>, PluginError> {
    scripts()
        .lock()
        .unwrap()
        .get(config)
        .cloned()
        .ok_or_else(|| PluginError::invalid_input(format!("no script {config}")))
}

struct FakeRuntime(Arc<Script>);

impl RuntimePlugin for FakeRuntime {
    fn probe(&self) -> Result<ProbeReport, PluginError> {
        Ok(ProbeReport::available("fake engine", 1))
    }

    fn create_sandbox(&self, spec: SandboxSpec) -> Result<SandboxInfo, PluginError> {
        let mut failing = self.0.sandboxes_fail.lock().unwrap();
        if *failing > 0 {
            *failing -= 1;
            return Err(PluginError::unavailable("the fake engine is down"));
        }
        let item = Path::new(spec.workdir.as_str())
            .parent()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let kind = spec
            .labels
            .iter()
            .find(|l| l.key.as_str() == "stet.kind")
            .map(|l| l.value.to_string())
            .unwrap_or_default();
        let mut events = self.0.events.lock().unwrap();
        let id = format!("fake-{}", events.len());
        let what = format!("{kind} {item}");
        events.push(format!("made {what}"));
        self.0.sandboxes.lock().unwrap().insert(id.clone(), what);
        Ok(SandboxInfo {
            id: id.into(),
            state: "running".into(),
            labels: spec.labels,
        })
    }

    fn spawn(&self, _: &str, spec: ProcessSpec) -> Result<Box<dyn ProcessPlugin>, PluginError> {
        Ok(Box::new(FakeProcess {
            script: self.0.clone(),
            spec,
        }))
    }

    fn teardown(&self, id: &str) -> Result<(), PluginError> {
        // Stopped (the default stop is a teardown), then removed: ended once.
        if let Some(what) = self.0.sandboxes.lock().unwrap().remove(id) {
            self.0.events.lock().unwrap().push(format!("ended {what}"));
        }
        Ok(())
    }

    fn list_sandboxes(&self, _: &[Label]) -> Result<Vec<SandboxInfo>, PluginError> {
        Ok(Vec::new())
    }
}

struct FakeProcess {
    script: Arc<Script>,
    spec: ProcessSpec,
}

impl FakeProcess {
    fn lane_file(&self, name: &str) -> PathBuf {
        let workdir = self.spec.workdir.as_ref().map(|w| w.to_string());
        Path::new(&workdir.expect("an agent runs in its lane")).join(name)
    }

    fn write(&self, name: &str) {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.lane_file(name))
            .unwrap();
        writeln!(file, "a line").unwrap();
    }

    fn stop(&self) {
        if let Some(stop) = &*self.script.stop.lock().unwrap() {
            stop.request(2);
        }
    }

    fn remote(&self) -> PathBuf {
        self.script.remote.lock().unwrap().clone().unwrap()
    }

    /// Acts `act` out; returns the output (`outcome: WORD` first) and the exit code.
    fn act(&self, act: Act) -> (String, i32) {
        match act {
            Act::Write(name) => {
                self.write(name);
                (format!("outcome: done\nwrote {name}"), 0)
            }
            Act::Nothing => ("outcome: done\ndid nothing".into(), 0),
            Act::Say(words) => (format!("outcome: done\n{words}"), 0),
            Act::Fail => ("outcome: failed\ntold to fail".into(), 1),
            Act::Limited(at) => (format!("outcome: limited\n{at}"), 75),
            Act::Unavailable => (
                "outcome: unavailable\nthe model API did not answer".into(),
                1,
            ),
            Act::LoginRefused => ("outcome: refused\nthe login was refused (401)".into(), 1),
            Act::Unreadable => ("\u{1}garbage".into(), 0),
            Act::WriteThenStop(name) => {
                let done = self.act(Act::Write(name));
                self.stop();
                done
            }
            Act::SayThenStop(words) => {
                self.stop();
                (format!("outcome: done\n{words}"), 0)
            }
            Act::WriteWhileAPeerPushes(name) => {
                let remote = self.remote();
                let head = git(&remote, &["rev-parse", "HEAD"]).unwrap();
                let theirs = git(
                    &remote,
                    &[
                        "commit-tree",
                        &format!("{head}^{{tree}}"),
                        "-p",
                        &head,
                        "-m",
                        "a peer",
                    ],
                )
                .unwrap();
                // The lane's working tree is `.git/stet/lanes/<item>/work`.
                let work = self.lane_file("");
                let item = work.parent().unwrap().file_name().unwrap();
                let item = item.to_string_lossy().into_owned();
                git(
                    &remote,
                    &["update-ref", &format!("refs/heads/stet/{item}"), &theirs],
                )
                .unwrap();
                self.act(Act::Write(name))
            }
            Act::SayThenLoseTheRemote(words) => {
                let remote = self.remote();
                std::fs::rename(&remote, remote.with_extension("gone")).unwrap();
                self.act(Act::Say(words))
            }
            Act::SayOnceMadeFor(words, item) => {
                // Waits for the event, not for a time: the limit only ends a test that
                // would otherwise hang.
                let made = format!("made implement {item}");
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
                while !self.script.events.lock().unwrap().contains(&made) {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "no sandbox was made on {item}'s lane during the call"
                    );
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                self.act(Act::Say(words))
            }
            Act::WriteThenLoseTheRemote(name) => {
                let remote = self.remote();
                std::fs::rename(&remote, remote.with_extension("gone")).unwrap();
                self.act(Act::Write(name))
            }
            Act::RunThenWrite(run, name) => {
                run(&self.script);
                self.act(Act::Write(name))
            }
            Act::RunThenSay(run, words) => {
                run(&self.script);
                self.act(Act::Say(words))
            }
        }
    }
}

impl ProcessPlugin for FakeProcess {
    fn wait(&self, sink: &mut Sink<'_>) -> Result<ExitStatus, PluginError> {
        let argv: Vec<String> = self.spec.argv.iter().map(|a| a.to_string()).collect();
        let (output, code) = match argv.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            ["sh", "-c", script] if script == crate::sandbox::LIMIT_EVENTS_SCRIPT => {
                ("[end]\n".to_string(), 0)
            }
            ["sh", "-c", _check] => {
                self.script.calls.lock().unwrap().push("check".into());
                let (code, output) = self
                    .script
                    .check
                    .lock()
                    .unwrap()
                    .pop_front()
                    .unwrap_or((0, "ok"));
                (output.to_string(), code)
            }
            ["fake-agent", role] => {
                self.script.calls.lock().unwrap().push(role.to_string());
                let item = self
                    .lane_file("")
                    .parent()
                    .and_then(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
                    .unwrap_or_default();
                self.script
                    .events
                    .lock()
                    .unwrap()
                    .push(format!("call {role} {item}"));
                let prompt = String::from_utf8_lossy(&self.spec.stdin).into_owned();
                let act = if role == "implement" {
                    self.script.prompts.lock().unwrap().push(prompt);
                    self.script.implement.lock().unwrap().pop_front()
                } else {
                    self.script.review_prompts.lock().unwrap().push(prompt);
                    self.script.review.lock().unwrap().pop_front()
                };
                let act = act.unwrap_or(if role == "implement" {
                    Act::Write("change")
                } else {
                    Act::Say("LAND")
                });
                self.act(act)
            }
            _ => panic!("the fake runtime was asked to run {argv:?}"),
        };
        sink.stdout(output.as_bytes());
        Ok(ExitStatus::exited(code))
    }

    fn kill(&self) -> Result<(), PluginError> {
        Ok(())
    }
}

struct FakeHarness(Arc<Script>);

impl HarnessPlugin for FakeHarness {
    fn probe(&self) -> Result<ProbeReport, PluginError> {
        Ok(ProbeReport::available("fake agent", 1))
    }

    fn profile(&self, _: &HarnessContext) -> Result<Profile, PluginError> {
        Ok(Profile {
            dir: self.0.profile.lock().unwrap().clone().into(),
            logged_in: true,
            route: "the fake route".into(),
        })
    }

    fn write_settings(&self, _: &HarnessContext, _: &Profile) -> Result<String, PluginError> {
        Ok(String::new())
    }

    fn check_walls(&self, _: &HarnessContext, _: &Profile) -> Result<Vec<WallCheck>, PluginError> {
        Ok(Vec::new())
    }

    fn launch(&self, request: &RoleRequest) -> Result<Launch, PluginError> {
        let role = match request.role {
            Role::Implement => "implement",
            Role::Review => "review",
            Role::Proof => "proof",
        };
        Ok(Launch {
            process: ProcessSpec {
                argv: vec!["fake-agent".into(), role.into()].into(),
                env: Default::default(),
                workdir: ROption::RNone,
                stdin: request.prompt.as_bytes().to_vec().into(),
            },
            mounts: Default::default(),
            network: Network::None,
        })
    }

    fn read_proof(&self, _: &[u8]) -> Result<Vec<WallCheck>, PluginError> {
        Ok(Vec::new())
    }

    fn credentials(
        &self,
        _: &HarnessContext,
        _: &Profile,
    ) -> Result<Vec<CredentialDecl>, PluginError> {
        if !*self.0.declares_a_credential.lock().unwrap() {
            return Ok(Vec::new());
        }
        // Kept out of the sandbox and sent nowhere: no host, no header, so no gateway.
        Ok(vec![CredentialDecl {
            id: "fake-login".into(),
            source: CredentialSource_NE::new(CredentialSource::ProfileFile {
                path: "auth.json".into(),
                pointer: "/token".into(),
            }),
            host: "".into(),
            header: "".into(),
            value: "".into(),
        }])
    }

    fn read_outcome(&self, _: Role, _: &[u8], _: ExitStatus) -> Result<Outcome, PluginError> {
        Err(PluginError::unsupported("read_call answers"))
    }

    fn read_call(&self, _: Role, output: &[u8], _: ExitStatus) -> Result<CallOutcome, PluginError> {
        let text = String::from_utf8_lossy(output);
        if text.starts_with('\u{1}') {
            return Err(PluginError::invalid_input(
                "the fake cannot read this output",
            ));
        }
        let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
        let kind = match first.trim_start_matches("outcome: ") {
            "done" => OutcomeCode::DONE,
            "failed" => OutcomeCode::FAILED,
            "unavailable" => OutcomeCode::SERVICE_UNAVAILABLE,
            "limited" => OutcomeCode::RATE_LIMITED,
            "refused" => OutcomeCode::NOT_LOGGED_IN,
            _ => OutcomeCode::OUT_OF_SHAPE,
        };
        let retry_at = match kind {
            OutcomeCode::RATE_LIMITED => rest.trim().parse().ok(),
            _ => None,
        };
        Ok(CallOutcome {
            kind,
            detail: rest.into(),
            retry_at_unix: retry_at.into(),
            cost_usd: ROption::RNone,
            usage: Default::default(),
        })
    }
}

fn new_runtime(config: &str) -> Result<FakeRuntime, PluginError> {
    script_of(config).map(FakeRuntime)
}

fn new_harness(config: &str) -> Result<FakeHarness, PluginError> {
    script_of(config).map(FakeHarness)
}

/// A repository with a bare remote, a queue, and the fakes' script.
struct World {
    root: tempfile::TempDir,
    repo: PathBuf,
    remote: PathBuf,
    script: Arc<Script>,
    id: String,
    settings: Settings,
}

impl World {
    /// A clone of a fresh bare remote with `items` queued (committed and pushed).
    fn new(items: &[&str]) -> World {
        let texts: Vec<(&str, String)> = items
            .iter()
            .map(|item| (*item, format!("Do {item}\n")))
            .collect();
        World::with_texts(&texts)
    }

    /// A clone of a fresh bare remote with these items, each with its text, queued.
    fn with_texts(items: &[(&str, String)]) -> World {
        let (root, remote, repo) = crate::git::testing::clone_of_fresh_remote();
        let queue = repo.join(crate::queue::QUEUE_DIR);
        std::fs::create_dir_all(&queue).unwrap();
        for (item, text) in items {
            std::fs::write(queue.join(format!("{item}.md")), text).unwrap();
        }
        git(&repo, &["add", "."]).unwrap();
        git(&repo, &["commit", "--quiet", "-m", "queue"]).unwrap();
        git(&repo, &["push", "--quiet", "origin", "HEAD"]).unwrap();
        let profile = root.path().join("profile");
        std::fs::create_dir_all(&profile).unwrap();
        let script = Arc::new(Script::default());
        *script.remote.lock().unwrap() = Some(remote.clone());
        *script.profile.lock().unwrap() = profile.display().to_string();
        *script.repo.lock().unwrap() = Some(repo.clone());
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let id = format!(
            "scenario-{}",
            NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        );
        scripts().lock().unwrap().insert(id.clone(), script.clone());
        let settings = Settings {
            plugins: crate::plugins::PluginSettings {
                search_path: Vec::new(),
                probe_timeout: std::time::Duration::from_secs(5),
                plugin_config: Default::default(),
                plugin_origin: Default::default(),
                untrusted_tables: Default::default(),
            },
            runtime: Default::default(),
            harness: Default::default(),
            image: "fake-image".into(),
            login_image: "fake-image".into(),
            profiles_root: root.path().to_path_buf(),
            drive_check: None,
            setup: None,
            drive_land: None,
            drive_pull_request_repo: None,
            secrets_allowed: Vec::new(),
            drive_jobs: None,
            // The scenarios' lanes are plain directories, whoever runs them.
            lane_file_systems: false,
            max_file: crate::lanes::MAX_FILE,
            config_files: Vec::new(),
            limits: SandboxLimits::defaults(),
            network: Default::default(),
            repository_config: None,
        };
        World {
            root,
            repo,
            remote,
            script,
            id,
            settings,
        }
    }

    fn options(&self) -> DriveOptions {
        DriveOptions {
            jobs: 1,
            cap: 8,
            remote: "origin".into(),
            lease_secs: 3600,
            max_rounds: 3,
            check: None,
            wait_floor_secs: 30,
            outage_schedule_secs: vec![60, 300, 600, 3600],
            outage_limit_secs: 8 * 3600,
            pace_secs: 0,
            call_limit_secs: 600,
            follow: false,
            land: None,
            dry_run: None,
        }
    }

    /// One drive over the queue with `options`; what it ended with, and what it showed.
    fn drive(&self, options: &DriveOptions, clock: &Arc<FakeClock>) -> (Ended, Vec<String>) {
        let config = stet_plugin_api::RStr::from_str(&self.id);
        let runtime = OpenRuntime {
            name: "fake".into(),
            version: "0.0.0".into(),
            library: PathBuf::from("(in process)"),
            selection: Default::default(),
            handle: RuntimeHandle::V1(
                stet_plugin_api::__private::new_runtime(config, new_runtime).unwrap(),
            ),
            capabilities: Vec::new(),
            backend: String::new(),
            isolation: None,
        };
        let harness = OpenHarness::in_process(
            "fake",
            HarnessHandle::V1(
                stet_plugin_api::__private::new_harness(config, new_harness).unwrap(),
            ),
            HarnessContext {
                profiles_root: self.root.path().display().to_string().into(),
                stet_binary: "/nonexistent/stet".into(),
                host_env: Default::default(),
            },
        );
        let stop = Arc::new(Stop::default());
        *self.script.stop.lock().unwrap() = Some(stop.clone());
        let record = |name: &str| PluginRecord {
            name: name.into(),
            version: "0.0.0".into(),
            library_sha256: String::new(),
        };
        let slots: Vec<super::Slot> = (0..options.jobs)
            .map(|_| {
                let clock: Arc<dyn Clock> = clock.clone();
                super::Slot::start(&self.repo, options, &clock)
            })
            .collect();
        *self.script.clock.lock().unwrap() = Some(clock.clone());
        *self.script.keepers.lock().unwrap() = slots.iter().map(|s| s.keeper.clone()).collect();
        let base = crate::base::fetch(&self.repo, "origin").unwrap();
        let (items, _) = crate::queue::scan_at(&self.repo, &base.commit);
        let drive = Drive {
            base,
            seed: None,
            repo: self.repo.clone(),
            settings: &self.settings,
            options,
            progress: Arc::new(progress::Progress::new(
                Default::default(),
                false,
                options.jobs,
            )),
            planned: options.cap.min(items.len()),
            began: Default::default(),
            profile: harness.profile().unwrap(),
            harness,
            runtime: Arc::new(runtime),
            run: format!("drive-test-{}", self.id),
            holder: super::holder(&self.repo),
            stop,
            clock: clock.clone(),
            slots,
            tally: Default::default(),
            profile_lock: Default::default(),
            harness_record: record("fake"),
            runtime_record: record("fake"),
            author: None,
            moves: Default::default(),
            last_launch: Default::default(),
        };
        let exit = drive.drain(&items).unwrap();
        for slot in &drive.slots {
            slot.keeper.finish();
        }
        let seen = drive.progress.seen.lock().unwrap().clone();
        (exit, seen)
    }

    fn origin(&self) -> Remote<'_> {
        Remote {
            repo: &self.repo,
            name: "origin",
        }
    }

    fn failed_why(&self, item: &str) -> Option<String> {
        self.origin().failure_reasons().unwrap().remove(item)
    }

    fn landed(&self) -> Vec<String> {
        let mut landed: Vec<String> = self.origin().marks().unwrap().landed.into_iter().collect();
        landed.sort();
        landed
    }

    fn remote_branch(&self, item: &str) -> Option<String> {
        git(
            &self.remote,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("refs/heads/stet/{item}"),
            ],
        )
        .ok()
    }

    fn script_implement(&self, acts: &[Act]) {
        self.script
            .implement
            .lock()
            .unwrap()
            .extend(acts.iter().cloned());
    }

    fn script_review(&self, acts: &[Act]) {
        self.script
            .review
            .lock()
            .unwrap()
            .extend(acts.iter().cloned());
    }
}

fn shown(lines: &[String], what: &str) -> bool {
    lines.iter().any(|l| l.contains(what))
}

#[test]
fn an_agent_that_fails_its_task_gives_its_item_up_after_the_rounds_and_the_next_item_lands() {
    let world = World::new(&["a-fails", "b-works"]);
    world.script_implement(&[Act::Fail, Act::Fail]);
    let options = DriveOptions {
        max_rounds: 2,
        ..world.options()
    };
    let clock = Arc::new(FakeClock::new());
    let (exit, lines) = world.drive(&options, &clock);
    assert_eq!(exit, Ended::GaveUp, "{lines:#?}");
    let why = world
        .failed_why("a-fails")
        .expect("marked failed on the remote");
    assert!(
        why.contains("not landed after 2 rounds") && why.contains("failed its task"),
        "{why}"
    );
    assert_eq!(world.landed(), ["b-works"]);
    assert_eq!(
        world.script.calls(),
        ["implement", "implement", "implement", "review"],
        "two rounds for a, then b"
    );
    assert!(
        clock.waits().is_empty(),
        "a task failure is no outage: {:?}",
        clock.waits()
    );
    assert!(
        world.script.prompts.lock().unwrap()[1].contains("Your previous attempt failed"),
        "the second round is told why"
    );
    assert!(shown(&lines, "a-fails: given up"), "{lines:#?}");
}

#[test]
fn a_lane_without_a_change_is_never_pushed_and_ends_failed_after_its_rounds() {
    let world = World::new(&["nothing"]);
    world.script_implement(&[Act::Nothing, Act::Nothing]);
    let options = DriveOptions {
        max_rounds: 2,
        ..world.options()
    };
    let (exit, lines) = world.drive(&options, &Arc::new(FakeClock::new()));
    assert_eq!(exit, Ended::GaveUp, "{lines:#?}");
    assert!(
        world.remote_branch("nothing").is_none(),
        "no branch was pushed"
    );
    assert!(world.landed().is_empty());
    let why = world.failed_why("nothing").unwrap();
    assert!(why.contains("the agent changed nothing"), "{why}");
    assert_eq!(world.script.count("review"), 0, "nothing to review");
}

#[test]
fn calls_that_cannot_start_enter_the_outage_schedule_and_the_drive_stops_at_its_limit() {
    let world = World::new(&["item"]);
    *world.script.sandboxes_fail.lock().unwrap() = u32::MAX;
    let options = DriveOptions {
        outage_schedule_secs: vec![60, 300],
        outage_limit_secs: 600,
        ..world.options()
    };
    let clock = Arc::new(FakeClock::new());
    let (exit, lines) = world.drive(&options, &clock);
    assert_eq!(exit, Ended::Unusable, "{lines:#?}");
    // Three failures in a row before each wait; the last step repeats; the limit ends it.
    assert_eq!(clock.waits(), [60, 300, 300]);
    assert!(
        world.failed_why("item").is_none(),
        "infrastructure never gives an item up"
    );
    assert!(world.script.calls().is_empty());
    assert!(shown(&lines, "the fake engine is down"), "{lines:#?}");
}

#[test]
fn a_model_api_that_does_not_answer_is_an_outage_not_a_task_failure() {
    let world = World::new(&["item"]);
    world.script_implement(&[Act::Unavailable, Act::Unavailable, Act::Unavailable]);
    let clock = Arc::new(FakeClock::new());
    let (exit, lines) = world.drive(&world.options(), &clock);
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert_eq!(clock.waits(), [60], "one outage wait after three in a row");
    assert_eq!(world.landed(), ["item"]);
    assert_eq!(world.script.count("implement"), 4);
    assert!(
        !world.script.prompts.lock().unwrap()[3].contains("previous attempt"),
        "an outage is not the agent's failure: the round was not counted"
    );
}

/// The login the fake harness declares, as its profile holds it.
const LOGIN: &str = "fake-login-5f0c2b9e7d1a4c38";

#[test]
fn a_call_refused_by_policy_fails_its_item_at_once_and_is_never_an_outage() {
    // The person pasted the login into one item: its prompt would carry the credential
    // into the sandbox. That is the item's, whatever time passes; the next item lands.
    let world = World::with_texts(&[
        ("a-leaks", format!("Call the API with {LOGIN}\n")),
        ("b-works", "Do b-works\n".to_string()),
    ]);
    *world.script.declares_a_credential.lock().unwrap() = true;
    let profile = world.script.profile.lock().unwrap().clone();
    std::fs::write(
        Path::new(&profile).join("auth.json"),
        format!(r#"{{"token":"{LOGIN}"}}"#),
    )
    .unwrap();
    let clock = Arc::new(FakeClock::new());
    let (exit, lines) = world.drive(&world.options(), &clock);
    assert_eq!(exit, Ended::GaveUp, "{lines:#?}");
    let why = world
        .failed_why("a-leaks")
        .expect("marked failed on the remote");
    assert!(
        why.contains("the implementing call was not made")
            && why.contains("would enter the sandbox in the agent's prompt"),
        "{why}"
    );
    assert!(
        !why.contains(LOGIN),
        "the refusal never says the secret: {why}"
    );
    assert_eq!(world.landed(), ["b-works"]);
    assert_eq!(
        world.script.calls(),
        ["implement", "review"],
        "no call of the refused item ran, and it took one try, not its rounds"
    );
    assert!(
        clock.waits().is_empty(),
        "a refusal by policy is no outage: {:?}",
        clock.waits()
    );
    assert!(
        !world.script.prompts.lock().unwrap()[0].contains(LOGIN),
        "the next item's agent was not told it"
    );
}

#[test]
fn a_review_out_of_shape_is_its_items_round_its_words_shown_and_handed_to_the_next_review_never_an_outage(
) {
    let world = World::new(&["judged", "next"]);
    world.script_review(&[
        Act::Say("Looks fine to me."),
        Act::Unreadable,
        Act::Say("LAND"),
    ]);
    let clock = Arc::new(FakeClock::new());
    let (exit, lines) = world.drive(&world.options(), &clock);
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert!(clock.waits().is_empty(), "no outage: {:?}", clock.waits());
    // The implementing call's work stood: it was reviewed again, not redone.
    assert_eq!(
        world.script.calls(),
        [
            "implement",
            "review",
            "review",
            "review",
            "implement",
            "review"
        ]
    );
    let text = lines.join("\n");
    assert!(
        text.contains(
            "judged: round 1 of 3: the review began with neither LAND nor REVISE; the reviewer said:\n    | Looks fine to me."
        ),
        "{text}"
    );
    assert!(
        text.contains("judged: round 2 of 3: the review was out of shape")
            && text.contains("the harness could not read the agent's output"),
        "{text}"
    );
    let prompts = world.script.review_prompts.lock().unwrap().clone();
    assert!(!prompts[0].contains("previous review"), "{}", prompts[0]);
    assert!(
        prompts[1].contains("Your previous review could not be read")
            && prompts[1].contains("Looks fine to me."),
        "{}",
        prompts[1]
    );
    assert!(
        prompts[2].contains("the harness could not read"),
        "{}",
        prompts[2]
    );
    assert_eq!(world.landed(), ["judged", "next"]);
}

#[test]
fn a_review_never_in_shape_gives_its_item_up_after_the_rounds_and_holds_no_one_else() {
    let world = World::new(&["judged", "next"]);
    world.script_review(&[Act::Say("Looks fine to me."), Act::Say("Looks fine to me.")]);
    let options = DriveOptions {
        max_rounds: 2,
        ..world.options()
    };
    let clock = Arc::new(FakeClock::new());
    let (exit, lines) = world.drive(&options, &clock);
    assert_eq!(exit, Ended::GaveUp, "{lines:#?}");
    assert!(clock.waits().is_empty(), "no outage: {:?}", clock.waits());
    let why = world.failed_why("judged").unwrap();
    assert!(
        why.contains("the review began with neither LAND nor REVISE: Looks fine to me."),
        "{why}"
    );
    assert_eq!(
        world.script.calls(),
        ["implement", "review", "review", "implement", "review"]
    );
    assert_eq!(world.landed(), ["next"]);
}

#[test]
fn an_implementing_call_that_changes_nothing_is_a_round_its_words_shown_and_handed_to_the_next() {
    let world = World::new(&["item"]);
    world.script_implement(&[Act::Say("It already says hello, so I left it.")]);
    let clock = Arc::new(FakeClock::new());
    let (exit, lines) = world.drive(&world.options(), &clock);
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert!(clock.waits().is_empty(), "no outage: {:?}", clock.waits());
    let text = lines.join("\n");
    assert!(
        text.contains(
            "item: round 1 of 3: the agent changed nothing; the agent said:\n    | It already says hello, so I left it."
        ),
        "{text}"
    );
    let prompts = world.script.prompts.lock().unwrap().clone();
    assert!(
        prompts[1].contains("changed nothing")
            && prompts[1].contains("It already says hello, so I left it."),
        "{}",
        prompts[1]
    );
    assert_eq!(world.landed(), ["item"]);
}

#[test]
fn implementing_output_the_harness_cannot_read_is_a_round_not_an_outage() {
    let world = World::new(&["item"]);
    world.script_implement(&[Act::Unreadable]);
    let clock = Arc::new(FakeClock::new());
    let (exit, lines) = world.drive(&world.options(), &clock);
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert!(clock.waits().is_empty(), "no outage: {:?}", clock.waits());
    assert!(
        world.script.prompts.lock().unwrap()[1]
            .contains("the harness could not read the agent's output"),
        "the next round is told"
    );
    assert_eq!(world.landed(), ["item"]);
}

#[test]
fn a_login_the_model_api_refuses_stops_the_drive_at_once_saying_to_log_in_again() {
    let world = World::new(&["item", "next"]);
    world.script_implement(&[Act::LoginRefused]);
    let clock = Arc::new(FakeClock::new());
    let (exit, lines) = world.drive(&world.options(), &clock);
    assert_eq!(exit, Ended::Unusable, "{lines:#?}");
    assert!(
        clock.waits().is_empty(),
        "no outage wait: {:?}",
        clock.waits()
    );
    assert!(
        shown(&lines, "item: the model API refused the profile's login (the login was refused (401)): the drive stops")
            && shown(&lines, "log in again (stet profile login), then resume with: stet drive"),
        "{lines:#?}"
    );
    assert!(world.failed_why("item").is_none(), "no item failed");
    assert!(world.landed().is_empty());
    assert_eq!(world.script.calls(), ["implement"], "no lane went on");
}

#[test]
fn the_checks_output_and_the_reviewers_words_are_shown_kept_and_handed_to_the_next_round() {
    let world = World::new(&["item"]);
    world
        .script
        .check
        .lock()
        .unwrap()
        .extend([(127, "sh: 1: cargo: not found"), (0, "ok")]);
    world.script_review(&[Act::Say("REVISE\nSay it twice."), Act::Say("LAND")]);
    let options = DriveOptions {
        check: Some("cargo test".into()),
        ..world.options()
    };
    let (exit, lines) = world.drive(&options, &Arc::new(FakeClock::new()));
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    let text = lines.join("\n");
    assert!(text.contains("the check `cargo test` failed"), "{text}");
    assert!(text.contains("    | sh: 1: cargo: not found"), "{text}");
    assert!(
        text.contains("the reviewer asked for changes:\n    | Say it twice."),
        "{text}"
    );
    let prompts = world.script.prompts.lock().unwrap().clone();
    assert!(prompts[1].contains("cargo: not found"), "{}", prompts[1]);
    assert!(prompts[2].contains("Say it twice."), "{}", prompts[2]);
    // The check has receipts like a call's, its output in its log: failed in round 1,
    // passed in round 2 (which the reviewer sent back) and in round 3.
    let (receipts, _) = crate::receipts::read_all(&world.repo);
    let checks: Vec<_> = receipts
        .iter()
        .filter(|r| r.role == crate::receipts::CallRole::Check)
        .collect();
    assert_eq!(
        checks.iter().map(|r| r.outcome.word()).collect::<Vec<_>>(),
        ["failed", "passed", "passed"]
    );
    let log = std::fs::read_to_string(&checks[0].log).unwrap();
    assert!(log.contains("cargo: not found"), "{log}");
    assert_eq!(world.landed(), ["item"]);
}

#[test]
fn a_stop_during_review_resumes_at_the_review_and_the_implementing_call_is_not_made_again() {
    let world = World::new(&["item"]);
    world.script_review(&[Act::SayThenStop("REVISE\nOnce more.")]);
    let clock = Arc::new(FakeClock::new());
    let (exit, lines) = world.drive(&world.options(), &clock);
    assert_eq!(exit, Ended::Stopped(2), "{lines:#?}");
    assert_eq!(world.script.calls(), ["implement", "review"]);
    let saved = world.origin().checkpoint("item").unwrap().unwrap();
    assert_eq!((saved.round, saved.next), (2, Next::Implement));
    assert!(
        world.remote_branch("item").is_some(),
        "the change was pushed with it"
    );

    // The next drive goes on with round 2's implementing call, told what the reviewer said.
    let (exit, lines) = world.drive(&world.options(), &clock);
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert!(
        shown(&lines, "resuming at round 2, implement"),
        "{lines:#?}"
    );
    assert_eq!(
        world.script.calls(),
        ["implement", "review", "implement", "review"]
    );
    assert!(world.script.prompts.lock().unwrap()[1].contains("Once more."));
    assert_eq!(world.landed(), ["item"]);
    assert_eq!(
        world.origin().checkpoint("item").unwrap(),
        None,
        "gone with the mark"
    );
}

#[test]
fn a_stop_after_implementing_resumes_at_the_review() {
    let world = World::new(&["item"]);
    world.script_implement(&[Act::WriteThenStop("change")]);
    let clock = Arc::new(FakeClock::new());
    let (exit, _) = world.drive(&world.options(), &clock);
    assert_eq!(exit, Ended::Stopped(2));
    let (exit, lines) = world.drive(&world.options(), &clock);
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert_eq!(
        world.script.calls(),
        ["implement", "review"],
        "implemented once"
    );
    assert_eq!(world.landed(), ["item"]);
}

#[test]
fn a_landing_cut_short_runs_the_land_command_again_with_the_retry_flag_and_nothing_else() {
    let world = World::new(&["item"]);
    // What a kill during the land command leaves: the branch pushed with a change, and
    // the checkpoint saying the landing began.
    git(&world.repo, &["checkout", "--quiet", "-b", "stet/item"]).unwrap();
    std::fs::write(world.repo.join("change"), "done\n").unwrap();
    git(&world.repo, &["add", "change"]).unwrap();
    git(&world.repo, &["commit", "--quiet", "-m", "the work"]).unwrap();
    git(&world.repo, &["checkout", "--quiet", "-"]).unwrap();
    let landing = Checkpoint {
        next: Next::LandAgain,
        ..Default::default()
    };
    world
        .origin()
        .save_checkpoint("item", &landing, Some("stet/item"))
        .unwrap();
    let log = world.root.path().join("land.log");
    let options = DriveOptions {
        land: Some(crate::land::How::Command(format!(
            "echo \"$STET_ITEM retry=${{STET_LAND_RETRY:-}}\" >> {}",
            log.display()
        ))),
        ..world.options()
    };
    let (exit, lines) = world.drive(&options, &Arc::new(FakeClock::new()));
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert!(
        world.script.calls().is_empty(),
        "no call again: {:?}",
        world.script.calls()
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "item retry=1\n");
    assert_eq!(world.landed(), ["item"]);
    assert!(shown(&lines, "a landing was cut short"), "{lines:#?}");
}

#[test]
fn the_land_command_runs_once_without_the_retry_flag_on_a_clean_landing() {
    let world = World::new(&["item"]);
    let log = world.root.path().join("land.log");
    let options = DriveOptions {
        land: Some(crate::land::How::Command(format!(
            "echo \"retry=${{STET_LAND_RETRY:-}}\" >> {}",
            log.display()
        ))),
        ..world.options()
    };
    let (exit, _) = world.drive(&options, &Arc::new(FakeClock::new()));
    assert_eq!(exit, Ended::Done);
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "retry=\n");
}

#[test]
fn a_failing_land_command_lands_the_item_saying_why_and_ends_the_drive_not_done() {
    let world = World::new(&["item"]);
    let options = DriveOptions {
        land: Some(crate::land::How::Command("exit 3".into())),
        ..world.options()
    };
    let (exit, lines) = world.drive(&options, &Arc::new(FakeClock::new()));
    assert_eq!(exit, Ended::GaveUp, "{lines:#?}");
    // Landed all the same: its branch pushed, its record saying what failed.
    assert_eq!(world.landed(), ["item"]);
    let notes = world.origin().landed_notes(&["item"], None).unwrap();
    assert_eq!(
        crate::land::recorded(&notes["item"]).failed.as_deref(),
        Some("land command failed: the land command `exit 3` failed (exit status: 3)")
    );
    assert!(
        shown(&lines, "stet land item makes the land step again"),
        "{lines:#?}"
    );
    assert!(shown(&lines, "1 item without its land step"), "{lines:#?}");
}

#[test]
fn a_branch_a_peer_moved_is_taken_by_a_peer_and_never_waits_as_an_outage() {
    let world = World::new(&["item"]);
    world.script_implement(&[Act::WriteWhileAPeerPushes("change")]);
    let clock = Arc::new(FakeClock::new());
    let (exit, lines) = world.drive(&world.options(), &clock);
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert!(clock.waits().is_empty(), "{:?}", clock.waits());
    assert!(shown(&lines, "taken by a peer"), "{lines:#?}");
    assert!(world.landed().is_empty());
}

#[test]
fn a_call_whose_checkpoint_the_remote_did_not_take_is_not_made_again_its_receipt_is_the_record() {
    let world = World::new(&["item"]);
    world.script_implement(&[Act::WriteThenLoseTheRemote("change")]);
    let options = DriveOptions {
        outage_limit_secs: 60,
        ..world.options()
    };
    let clock = Arc::new(FakeClock::new());
    let (exit, lines) = world.drive(&options, &clock);
    assert_eq!(exit, Ended::Unusable, "the remote stayed away: {lines:#?}");
    assert!(
        clock.waits().iter().all(|w| *w >= 30),
        "never below the floor"
    );
    std::fs::rename(world.remote.with_extension("gone"), &world.remote).unwrap();
    clock.advance(options.lease_secs + 1);
    let (exit, lines) = world.drive(&world.options(), &clock);
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert!(
        shown(
            &lines,
            "finished before the drive was cut short; going on from its receipt"
        ),
        "{lines:#?}"
    );
    assert_eq!(world.script.calls(), ["implement", "review"]);
    assert_eq!(world.landed(), ["item"]);
}

#[test]
fn a_review_whose_checkpoint_the_remote_did_not_take_after_a_passed_check_is_not_made_again() {
    let world = World::new(&["item"]);
    world.script_review(&[Act::SayThenLoseTheRemote("LAND")]);
    let options = DriveOptions {
        check: Some("cargo test".into()),
        outage_limit_secs: 60,
        ..world.options()
    };
    let clock = Arc::new(FakeClock::new());
    let (exit, lines) = world.drive(&options, &clock);
    assert_eq!(exit, Ended::Unusable, "the remote stayed away: {lines:#?}");
    std::fs::rename(world.remote.with_extension("gone"), &world.remote).unwrap();
    clock.advance(options.lease_secs + 1);
    // The remote's checkpoint says the check is next (a passed check pushes none of its
    // own); this clone's receipts say it passed, and the review answered.
    let (exit, lines) = world.drive(
        &DriveOptions {
            check: Some("cargo test".into()),
            ..world.options()
        },
        &clock,
    );
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert_eq!(world.script.calls(), ["implement", "check", "review"]);
    assert_eq!(world.landed(), ["item"]);
}

#[test]
fn a_stop_during_a_wait_ends_at_once_with_the_signals_exit() {
    let world = World::new(&["item"]);
    *world.script.sandboxes_fail.lock().unwrap() = u32::MAX;
    let clock = Arc::new(FakeClock::new());
    clock.stop_at_wait(0, 15);
    let (exit, lines) = world.drive(&world.options(), &clock);
    assert_eq!(exit, Ended::Stopped(15), "{lines:#?}");
    assert!(shown(&lines, "stopped during a wait"), "{lines:#?}");
}

#[test]
fn a_usage_limit_that_resets_within_the_outage_limit_holds_the_drive_until_then() {
    let world = World::new(&["item"]);
    let clock = Arc::new(FakeClock::new());
    let options = DriveOptions {
        outage_limit_secs: 3600,
        ..world.options()
    };
    // At the outage limit exactly: waited for.
    world.script_implement(&[Act::Limited(clock.now() + 3600)]);
    let (exit, lines) = world.drive(&options, &clock);
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert_eq!(clock.waits(), [3600], "one wait, to the reset");
    assert_eq!(world.script.calls(), ["implement", "implement", "review"]);
    assert_eq!(world.landed(), ["item"]);
    assert!(
        shown(&lines, "item: the agent hit its usage limit"),
        "{lines:#?}"
    );
}

#[test]
fn a_usage_limit_resetting_past_the_outage_limit_stops_the_drive_saying_when_to_resume() {
    // A second past the limit, a weekly limit (both from now), and an agent that names the
    // year 2100.
    const YEAR_2100: i64 = 4_102_444_800;
    for from_now in [Some(3601), Some(7 * 24 * 3600), None] {
        let world = World::new(&["limited", "next"]);
        let clock = Arc::new(FakeClock::new());
        let reset = from_now.map_or(YEAR_2100, |secs| clock.now() + secs);
        let options = DriveOptions {
            outage_limit_secs: 3600,
            ..world.options()
        };
        world.script_implement(&[Act::Limited(reset)]);
        let (exit, lines) = world.drive(&options, &clock);
        assert_eq!(exit, Ended::Unusable, "{lines:#?}");
        assert!(clock.waits().is_empty(), "no wait: {:?}", clock.waits());
        assert_eq!(world.script.calls(), ["implement"], "no further launch");
        assert!(
            world.origin().list().unwrap().is_empty(),
            "every reservation released"
        );
        assert!(world.landed().is_empty());
        for item in ["limited", "next"] {
            assert_eq!(world.failed_why(item), None, "a usage limit fails no item");
        }
        let at = progress::utc(reset);
        if reset == YEAR_2100 {
            assert_eq!(at, "2100-01-01 00:00:00 UTC");
        }
        assert!(
            shown(
                &lines,
                &format!("limited: the agent hit its usage limit, which resets at {at}")
            ),
            "{lines:#?}"
        );
        assert!(
            shown(&lines, &format!("resume with: stet drive, after {at}")),
            "{lines:#?}"
        );
    }
}

#[test]
fn a_usage_limit_without_a_reset_time_that_can_be_read_is_the_items_round_after_three_never_a_wait_for_ever(
) {
    // A reset before now, and 2^64-1 as a plugin's i64 reads it.
    for reset in [-5, -1] {
        let world = World::new(&["limited", "next"]);
        let clock = Arc::new(FakeClock::new());
        let options = DriveOptions {
            max_rounds: 2,
            ..world.options()
        };
        world.script_implement(&vec![Act::Limited(reset); 6]);
        let (exit, lines) = world.drive(&options, &clock);
        assert_eq!(exit, Ended::GaveUp, "{lines:#?}");
        let floor = options.wait_floor_secs;
        assert_eq!(
            clock.waits(),
            [floor, floor, floor, floor],
            "two waits at the floor per round, then the round"
        );
        let why = world.failed_why("limited").expect("given up");
        assert!(
            why.contains("hit a usage limit 3 times in a row without a reset time stet could read"),
            "{why}"
        );
        assert_eq!(world.landed(), ["next"], "the next item still lands");
    }
}

/// Every push the remote received from now on, as the refs each one updated: a hook of the
/// bare remote records them (`post-receive` gets one line per ref of a push).
fn record_pushes(remote: &std::path::Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let log = remote.join("pushes.log");
    let hook = remote.join("hooks/post-receive");
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\nrefs=$(cut -d' ' -f3 | tr '\\n' ' ')\necho \"$refs\" >> '{}'\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    log
}

#[test]
fn an_item_costs_three_pushes_the_take_the_implementing_calls_checkpoint_and_one_landing() {
    let world = World::new(&["one", "two"]);
    let pushes = record_pushes(&world.remote);
    // With a check: it passes, and is no paid stage, so it pushes nothing; the review
    // says LAND, which the landing's push says.
    let options = DriveOptions {
        check: Some("cargo test".into()),
        ..world.options()
    };
    let (exit, lines) = world.drive(&options, &Arc::new(FakeClock::new()));
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert_eq!(world.landed().len(), 2);
    let calls = world.script.calls.lock().unwrap().clone();
    assert_eq!(
        calls.iter().filter(|c| *c == "check").count(),
        2,
        "{calls:?}"
    );
    let log = std::fs::read_to_string(&pushes).unwrap();
    let pushed: Vec<&str> = log.lines().collect();
    // Per item: the take; the implementing call's checkpoint with the branch (and the
    // renewal); the landing — the ledger's new entry, the checkpoint removed, the
    // reservation released — in one push. No push for a stage change alone.
    assert_eq!(pushed.len(), 6, "{log}");
    for item in ["one", "two"] {
        let of: Vec<&&str> = pushed
            .iter()
            .filter(|p| p.contains(&format!("/{item} ")) || p.ends_with(&format!("/{item}")))
            .collect();
        assert_eq!(of.len(), 3, "{item}: {of:#?}");
        assert_eq!(of[0].trim(), format!("refs/stet/reservations/{item}"));
        // (The renewal there is a no-op when it falls in the second of the take: the same
        // record, so the hook does not list the ref; its lease is checked all the same.)
        assert!(of[1].contains(&format!("refs/heads/stet/{item}")), "{of:?}");
        assert!(
            of[1].contains(&format!("refs/stet/progress/{item}")),
            "{of:?}"
        );
        for part in ["refs/stet/progress/", "refs/stet/reservations/"] {
            assert!(of[2].contains(&format!("{part}{item}")), "{of:?}");
        }
        // The landed mark is an entry of the one ledger, not a ref of its own.
        assert!(of[2].contains("refs/stet/ledger"), "{of:?}");
    }
    // And nothing is left held.
    assert!(world.origin().list().unwrap().is_empty());
}

/// The events of the fake runtime and agent that start with one of `what`, in order.
fn events_of<'a>(events: &'a [String], what: &[&str]) -> Vec<&'a str> {
    events
        .iter()
        .map(String::as_str)
        .filter(|e| what.iter().any(|w| e.starts_with(w)))
        .collect()
}

#[test]
fn the_next_items_lane_and_first_sandbox_are_made_while_the_item_before_it_is_reviewed() {
    let world = World::new(&["one", "two"]);
    // The review of `one` answers only once a sandbox on `two`'s lane exists.
    world.script_review(&[Act::SayOnceMadeFor("LAND", "two")]);
    let (exit, lines) = world.drive(&world.options(), &Arc::new(FakeClock::new()));
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert_eq!(world.landed(), ["one", "two"]);
    let events = world.script.events.lock().unwrap().clone();
    // `two`'s implementing call ran in the sandbox made ahead (during `one`'s review, which
    // waited for it): no other implementing sandbox was made on its lane, none ended unused.
    let two = events_of(
        &events,
        &[
            "made implement two",
            "ended implement two",
            "call implement two",
        ],
    );
    assert_eq!(
        two,
        [
            "made implement two",
            "call implement two",
            "ended implement two"
        ],
        "{events:#?}"
    );
    // Each item's lane was worked once, in queue order.
    let calls: Vec<_> = events.iter().filter(|e| e.starts_with("call ")).collect();
    assert_eq!(
        calls,
        [
            "call implement one",
            "call review one",
            "call implement two",
            "call review two"
        ],
        "{events:#?}"
    );
}

#[test]
fn an_item_sent_back_to_its_agent_lets_the_next_items_lane_go_before_its_next_round() {
    let world = World::new(&["one", "two"]);
    world.script_review(&[
        Act::SayOnceMadeFor("REVISE\nAgain.", "two"),
        Act::Say("LAND"),
    ]);
    let (exit, lines) = world.drive(&world.options(), &Arc::new(FakeClock::new()));
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert_eq!(world.landed(), ["one", "two"]);
    let events = world.script.events.lock().unwrap().clone();
    // The sandbox made ahead on `two`'s lane (during `one`'s first review, which waited for
    // it) ends before `one` goes round again; `two` is worked once `one` has landed, in the
    // lane kept for it.
    let order = events_of(&events, &["ended implement two", "call implement"]);
    assert_eq!(
        order,
        [
            "call implement one",
            "ended implement two",
            "call implement one",
            "call implement two",
            "ended implement two"
        ],
        "{events:#?}"
    );
}

// The one clock: the reservation is stamped, found due, renewed and found lapsed on the
// drive's clock, which these tests move while the agent works.

/// The lease of [`World::options`].
const LEASE: i64 = 3600;

/// A holder of another clone, on another host: never taken over before its reservation
/// lapses.
const PEER: &str = "peer-host:peer-clone:4194999:1";

/// What the remote says of `item`'s reservation: who holds it and until when.
fn reservation_of(script: &Script, item: &str) -> Option<(String, i64)> {
    script.on_remote(|remote| {
        remote
            .get(item)
            .unwrap()
            .map(|h| (h.reservation.holder, h.reservation.expires_at_unix))
    })
}

/// The drive's clock passes the renewal point (a third of the lease) while the agent
/// works: the keeper renews, on its own, for a lease from then.
fn pass_the_renewal_point(script: &Script) {
    let (clock, keeper) = (script.clock(), script.keeper());
    let (item, taken_until) = keeper.lapse().expect("the item is held");
    clock.advance(LEASE / 3);
    let renewed_until = clock.now() + LEASE;
    keeper.wait_until(|seen| seen.expires == Some(renewed_until));
    let (_, on_remote) = reservation_of(script, &item).unwrap();
    script.saw(format!(
        "renewed by the keeper: {} s later on the remote",
        on_remote - taken_until
    ));
}

#[test]
fn the_keeper_renews_while_the_agent_works_once_the_clock_passes_a_third_of_the_lease() {
    let world = World::new(&["item"]);
    world.script_implement(&[Act::RunThenWrite(pass_the_renewal_point, "change")]);
    let clock = Arc::new(FakeClock::new());
    let (exit, lines) = world.drive(&world.options(), &clock);
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    let events = world.script.events.lock().unwrap().clone();
    assert!(
        events.contains(&format!(
            "renewed by the keeper: {} s later on the remote",
            LEASE / 3
        )),
        "{events:#?}"
    );
    assert!(clock.waits().is_empty(), "no wait of the drive's own");
    assert!(
        !lines.iter().any(|l| l.contains("cannot renew")),
        "{lines:#?}"
    );
    assert_eq!(world.landed(), ["item"]);
    assert!(world.origin().list().unwrap().is_empty(), "released");
}

/// The remote refuses every push (a hook) while the clock passes the renewal point: the
/// keeper's renewal does not reach it. Then the remote takes pushes again.
fn refuse_the_renewal(script: &Script) {
    use std::os::unix::fs::PermissionsExt;
    let (clock, keeper) = (script.clock(), script.keeper());
    let hook = script
        .remote
        .lock()
        .unwrap()
        .clone()
        .unwrap()
        .join("hooks/pre-receive");
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    std::fs::write(&hook, "#!/bin/sh\necho 'refused: a test' >&2\nexit 1\n").unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    clock.advance(LEASE / 3);
    let seen = keeper.wait_until(|seen| seen.unreachable.is_some());
    assert!(seen.lost.is_none(), "a refusal is no loss: {seen:?}");
    std::fs::remove_file(&hook).unwrap();
}

#[test]
fn a_renewal_the_remote_refused_is_warned_about_at_the_next_move_with_when_it_lapses() {
    let world = World::new(&["item"]);
    world.script_review(&[Act::RunThenSay(refuse_the_renewal, "LAND")]);
    let clock = Arc::new(FakeClock::new());
    let lapses = clock.now() + LEASE;
    let (exit, lines) = world.drive(&world.options(), &clock);
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert!(
        shown(
            &lines,
            &format!(
                "it lapses at {} unless the remote answers",
                super::clock(lapses)
            )
        ),
        "the lane goes on, warned, at its landing: {lines:#?}"
    );
    assert!(
        shown(&lines, "warning: cannot renew the reservation of item"),
        "{lines:#?}"
    );
    // Not lapsed yet: the landing's push (which carries the release) lands it.
    assert_eq!(world.landed(), ["item"]);
    assert!(world.origin().list().unwrap().is_empty(), "released");
}

/// While the agent works a peer, whose clock ran past the reservation's expiry, takes it
/// over; returns when it lapsed (on the peer's clock).
fn a_peer_takes_over(script: &Script) -> i64 {
    let (item, until) = script.keeper().lapse().expect("the item is held");
    let later = until + 1;
    script.on_remote(|remote| {
        remote
            .take(
                crate::reservations::Reservation {
                    item: item.clone(),
                    holder: PEER.into(),
                    lane: crate::lanes::branch_of(&item),
                    stage: "implement".into(),
                    expires_at_unix: later + LEASE,
                },
                later,
                |_| false,
            )
            .expect("a lapsed reservation is taken over")
    });
    later
}

/// As [`a_peer_takes_over`], and then the drive's clock passes the lapse too: the keeper
/// wakes, and its renewal loses to the peer's.
fn lapse_and_a_peer_takes_over(script: &Script) {
    let (clock, keeper) = (script.clock(), script.keeper());
    let later = a_peer_takes_over(script);
    clock.advance(later - clock.now());
    let seen = keeper.wait_until(|seen| seen.lost.is_some());
    assert_eq!(seen.expires, None, "nothing is held: {seen:?}");
}

/// As [`a_peer_takes_over`]; the drive's clock stands still, so the keeper does not look.
fn a_peer_takes_over_on_its_clock(script: &Script) {
    a_peer_takes_over(script);
}

/// What the item's lane left on the remote after a peer took it over: only the peer's
/// reservation.
fn left_to_the_peer(world: &World) {
    assert_eq!(world.script.calls(), ["implement"], "no further call");
    assert!(world.landed().is_empty());
    assert_eq!(world.failed_why("item"), None, "a loss fails no item");
    assert!(
        world.remote_branch("item").is_none(),
        "nothing of this lane is pushed over the peer's"
    );
    let held: Vec<String> = world
        .origin()
        .list()
        .unwrap()
        .into_iter()
        .map(|h| h.reservation.holder)
        .collect();
    assert_eq!(held, [PEER], "the peer's reservation stands");
}

#[test]
fn a_reservation_a_peer_took_over_is_noticed_by_the_push_after_the_call_and_left_to_the_peer() {
    let world = World::new(&["item"]);
    world.script_implement(&[Act::RunThenWrite(a_peer_takes_over_on_its_clock, "change")]);
    let (exit, lines) = world.drive(&world.options(), &Arc::new(FakeClock::new()));
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert!(
        shown(
            &lines,
            "item: another drive took the lane over (taken by a peer: "
        ),
        "{lines:#?}"
    );
    left_to_the_peer(&world);
}

#[test]
fn a_lapse_a_peer_took_over_is_noticed_by_the_keeper_as_the_clock_passes_it_and_left_to_the_peer() {
    let world = World::new(&["item"]);
    world.script_implement(&[Act::RunThenWrite(lapse_and_a_peer_takes_over, "change")]);
    let clock = Arc::new(FakeClock::new());
    let (exit, lines) = world.drive(&world.options(), &clock);
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert!(
        shown(
            &lines,
            "item: another drive took the lane over (item item: another drive changed the reservation first); leaving it"
        ),
        "{lines:#?}"
    );
    left_to_the_peer(&world);
}

/// Takes `item` for the peer, until `until` (on the drive's clock).
fn a_peer_holds(world: &World, item: &str, until: i64) {
    world
        .origin()
        .take(
            crate::reservations::Reservation {
                item: item.into(),
                holder: PEER.into(),
                lane: crate::lanes::branch_of(item),
                stage: "implement".into(),
                expires_at_unix: until,
            },
            0,
            |_| false,
        )
        .unwrap();
}

#[test]
fn a_peers_reservation_is_skipped_while_it_holds_and_taken_over_once_the_clock_passes_its_expiry() {
    let world = World::new(&["a-held", "b-lapsed"]);
    let clock = Arc::new(FakeClock::new());
    a_peer_holds(&world, "a-held", clock.now() + 600);
    a_peer_holds(&world, "b-lapsed", clock.now());
    let (exit, lines) = world.drive(&world.options(), &clock);
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert_eq!(world.landed(), ["b-lapsed"], "lapsed at the drive's now");
    assert_eq!(world.script.calls(), ["implement", "review"]);
    // The drive's clock jumps past the peer's expiry: taken over.
    clock.advance(600);
    let (exit, lines) = world.drive(&world.options(), &clock);
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert_eq!(world.landed(), ["a-held", "b-lapsed"]);
    assert!(world.origin().list().unwrap().is_empty(), "released");
}

/// The drive's clock goes back two leases while the agent works.
fn turn_the_clock_back(script: &Script) {
    script.clock().advance(-2 * LEASE);
}

/// Notes until when the remote holds the item, as the reviewer starts.
fn note_the_reservation(script: &Script) {
    let (item, _) = script.keeper().lapse().expect("the item is held");
    let (holder, until) = reservation_of(script, &item).unwrap();
    script.saw(format!("held by {holder} until {until}"));
}

#[test]
fn a_clock_gone_back_during_a_call_never_shortens_the_reservation_and_the_item_lands() {
    let world = World::new(&["item"]);
    world.script_implement(&[Act::RunThenWrite(turn_the_clock_back, "change")]);
    world.script_review(&[Act::RunThenSay(note_the_reservation, "LAND")]);
    let clock = Arc::new(FakeClock::new());
    let taken_until = clock.now() + LEASE;
    let holder = super::holder(&world.repo);
    let (exit, lines) = world.drive(&world.options(), &clock);
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    // The implementing call's checkpoint carried a renewal: a lease from the clock's now
    // would have lapsed an hour before; it kept the expiry it renewed.
    let events = world.script.events.lock().unwrap().clone();
    assert!(
        events.contains(&format!("held by {holder} until {taken_until}")),
        "{events:#?}"
    );
    assert_eq!(world.landed(), ["item"]);
}

/// The drive's clock jumps past the reservation's expiry while the agent works; no peer
/// took it: the keeper renews it for a lease from the new now.
fn jump_past_the_expiry(script: &Script) {
    let (clock, keeper) = (script.clock(), script.keeper());
    clock.advance(LEASE + 1);
    let renewed_until = clock.now() + LEASE;
    let seen = keeper.wait_until(|seen| seen.expires == Some(renewed_until));
    assert_eq!(seen.lost, None);
}

#[test]
fn a_clock_jumping_past_the_expiry_with_no_peer_about_is_renewed_and_the_item_lands() {
    let world = World::new(&["item"]);
    world.script_implement(&[Act::RunThenWrite(jump_past_the_expiry, "change")]);
    let clock = Arc::new(FakeClock::new());
    let (exit, lines) = world.drive(&world.options(), &clock);
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert_eq!(world.landed(), ["item"]);
    assert!(
        !lines.iter().any(|l| l.contains("another drive")),
        "{lines:#?}"
    );
}

#[test]
fn a_lane_whose_checkpoint_names_a_move_this_stet_does_not_know_is_left_not_worked_again() {
    let world = World::new(&["item"]);
    // As a newer stet would leave it: a move this one has no word for.
    let newer = Checkpoint {
        round: 2,
        next: Next::Unknown,
        ..Default::default()
    };
    world
        .origin()
        .save_checkpoint("item", &newer, None)
        .unwrap();
    assert_eq!(
        world.origin().checkpoint("item").unwrap().map(|c| c.next),
        Some(Next::Unknown),
        "the record reads back as a move not known"
    );
    let (exit, lines) = world.drive(&world.options(), &Arc::new(FakeClock::new()));
    assert_eq!(exit, Ended::Done, "{lines:#?}");
    assert!(
        world.script.calls().is_empty(),
        "no call made again: {:?}",
        world.script.calls()
    );
    assert!(
        shown(&lines, "a newer stet's lane, left to it"),
        "{lines:#?}"
    );
    assert!(world.landed().is_empty());
    assert_eq!(world.failed_why("item"), None, "not marked failed");
    assert_eq!(
        world.origin().checkpoint("item").unwrap().map(|c| c.round),
        Some(2),
        "its checkpoint kept for the stet that knows the move"
    );
}
