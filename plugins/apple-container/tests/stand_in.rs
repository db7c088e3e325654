//! The runtime conformance kit, and the probe's answers, against the `container`
//! stand-in (crate `tests/container-stand-in`): a faithful stand-in for Apple's CLI that
//! runs each sandbox as a Docker container, so that this plugin can be driven on Linux.
//!
//! Needs the stand-in built (`cargo build -p stet-container-stand-in`, which puts it at
//! `<workspace>/target/debug/container`; `STET_CONTAINER_STAND_IN` names another), the
//! Docker Engine running and stet's lane image loaded (`scripts/build-image.sh`). Without
//! the stand-in each test fails saying so and how to leave it out by name: a test that
//! passes without running would say something it never checked.
//!
//! Each test copies the stand-in into a scratch directory and writes its `stand-in.toml`
//! beside it, so tests run side by side with their own state.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use stet_plugin_api::conformance::{self, Direct, Options};
use stet_plugin_api::{
    ErrorCode, Label, Limits, Mount, Network, ProcessSpec, ROption, RuntimePlugin, SandboxSpec,
    Sink, Stream,
};
use stet_plugin_apple_container::AppleContainerRuntime;

const IMAGE: &str = "stet-lane:1";

/// The conformance runs are heavy (two sandboxes, 256 MiB of output each) and measure the
/// test process's peak memory: one at a time.
static HEAVY: Mutex<()> = Mutex::new(());

fn built_stand_in() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("STET_CONTAINER_STAND_IN") {
        return Some(PathBuf::from(path));
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| {
            if t.is_absolute() {
                t
            } else {
                workspace.join(t)
            }
        })
        .unwrap_or_else(|| workspace.join("target"));
    let path = target.join("debug").join("container");
    path.is_file().then_some(path)
}

/// A private copy of the stand-in with its settings beside it.
struct StandIn {
    scratch: tempfile::TempDir,
    binary: PathBuf,
}

impl StandIn {
    /// Fails the test, saying why and how to leave it out, when the stand-in has not been
    /// built.
    fn new(settings: &str) -> StandIn {
        let Some(built) = built_stand_in() else {
            let test = std::thread::current()
                .name()
                .unwrap_or("this test")
                .to_string();
            panic!(
                "{test} cannot run here: the `container` stand-in is not built: run \
                 `cargo build -p stet-container-stand-in` (or set STET_CONTAINER_STAND_IN). \
                 Leave it out by name if that is intended: cargo xtask test -- -- --skip {test}"
            );
        };
        let scratch = tempfile::tempdir().unwrap();
        let bin = scratch.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let binary = bin.join("container");
        // A hard link where it can be: a copy holds the file open for writing, and a
        // process another test forks meanwhile inherits that until it execs, which makes
        // running the copy fail with ETXTBSY ("Text file busy").
        if std::fs::hard_link(&built, &binary).is_err() {
            std::fs::copy(&built, &binary).unwrap();
        }
        let state = scratch.path().join("state");
        std::fs::create_dir(&state).unwrap();
        std::fs::write(
            bin.join("stand-in.toml"),
            format!("state_dir = {:?}\n{settings}", state.display().to_string()),
        )
        .unwrap();
        StandIn { scratch, binary }
    }

    fn runtime(&self, extra: &str) -> AppleContainerRuntime {
        let config = format!(
            r#"{{"binary":{:?},"skip_platform_check":true{extra}}}"#,
            self.binary.display().to_string()
        );
        AppleContainerRuntime::from_config(&config).unwrap()
    }

    fn work(&self) -> PathBuf {
        let work = self.scratch.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        work
    }
}

/// The Docker containers the stand-in still holds for this copy's state.
fn left_in_docker(stand_in: &StandIn) -> Option<Vec<String>> {
    let state = stand_in.scratch.path().join("state");
    let out = std::process::Command::new("docker")
        .args(["ps", "-a", "--format", "{{.Names}}", "--filter"])
        .arg(format!("label=stet.stand-in.state={}", state.display()))
        .output()
        .ok()?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    })
}

/// `settings` picks the CLI the stand-in plays; every run boots "VMs" as slowly as the
/// real one does (about 0.8 s).
fn conformance_with(what: &str, settings: &str) {
    let stand_in = StandIn::new(&format!(
        "{settings}service = \"running\"\nstart_delay_ms = 800\n"
    ));
    let _one_at_a_time = HEAVY.lock().unwrap_or_else(|p| p.into_inner());
    let runtime = stand_in.runtime("");
    let probe = runtime.probe().unwrap();
    assert!(
        probe.available,
        "{what}: {} ({})",
        probe.reason, probe.remedy
    );
    assert_eq!(probe.priority, 100);
    assert!(
        probe.backend_version.starts_with("container "),
        "{}",
        probe.backend_version
    );

    let status = runtime.image_status(IMAGE).unwrap();
    assert!(
        status.present,
        "{IMAGE} is missing: run scripts/build-image.sh ({})",
        status.remedy
    );
    let absent = runtime.image_status("stet-no-such-image:0").unwrap();
    assert!(!absent.present);
    assert!(
        absent
            .remedy
            .contains("container image pull stet-no-such-image:0"),
        "{}",
        absent.remedy
    );

    let checks = conformance::run(&Direct(&runtime), &Options::new(IMAGE, stand_in.work()));
    let report = conformance::report(&checks);
    println!("{what}:\n{}", report);
    assert!(conformance::all_passed(&checks), "{what}:\n{}", report);
    assert_eq!(
        conformance::not_run(&checks),
        Vec::<&str>::new(),
        "the kit stopped early"
    );
    if let Some(left) = left_in_docker(&stand_in) {
        assert!(left.is_empty(), "left behind: {left:?}");
    }
}

#[test]
fn passes_the_runtime_conformance_kit_with_the_1x_shape() {
    conformance_with("1.x", "shape = \"1.x\"\n");
}

#[test]
fn passes_the_runtime_conformance_kit_with_the_0x_shape() {
    conformance_with("0.12", "shape = \"0.x\"\n");
}

/// container 0.9: the 0.x shape, errors in the `<code>: "<message>"` form, and
/// `list --format json` listing every container whatever `--all` says.
#[test]
fn passes_the_runtime_conformance_kit_as_container_0_9() {
    conformance_with(
        "0.9",
        "shape = \"0.x\"\nversion = \"0.9.0\"\nerror_form = \"code\"\njson_ignores_all = true\n",
    );
}

#[test]
fn a_service_that_is_down_is_unavailable_with_the_start_remedy() {
    let stand_in = StandIn::new("shape = \"1.x\"\nservice = \"down\"\n");
    let runtime = stand_in.runtime("");
    let probe = runtime.probe().unwrap();
    assert!(!probe.available, "{probe:?}");
    assert!(probe.reason.contains("not running"), "{}", probe.reason);
    assert!(
        probe
            .remedy
            .contains("container system start --enable-kernel-install"),
        "{}",
        probe.remedy
    );
    // Past the probe, the CLI's XPC error is read as the service being down.
    let e = runtime
        .list_sandboxes(&[Label::new("stet.managed", "true")])
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::UNAVAILABLE, "{e}");
    assert!(e.remedy.contains("container system start"), "{}", e.remedy);
}

#[test]
fn a_hanging_status_is_answered_within_the_time_limit() {
    let stand_in = StandIn::new("shape = \"1.x\"\nservice = \"running\"\nhang = [\"system\"]\n");
    let runtime = stand_in.runtime(r#","status_timeout":"1s""#);
    let started = Instant::now();
    let probe = runtime.probe().unwrap();
    let elapsed = started.elapsed();
    assert!(!probe.available, "{probe:?}");
    assert!(
        probe.reason.contains("did not answer within 1 s"),
        "{}",
        probe.reason
    );
    assert!(
        probe.remedy.contains("container system stop"),
        "{}",
        probe.remedy
    );
    assert!(elapsed < Duration::from_secs(4), "took {elapsed:?}");
}

fn spec(mounts: Vec<Mount>, workdir: &str, labels: Vec<Label>) -> SandboxSpec {
    SandboxSpec {
        image: IMAGE.into(),
        mounts: mounts.into(),
        env: vec![
            stet_plugin_api::EnvVar::new("PATH", "/usr/local/bin:/usr/bin:/bin"),
            stet_plugin_api::EnvVar::new("GIT_CONFIG_COUNT", "1"),
            stet_plugin_api::EnvVar::new("GIT_CONFIG_KEY_0", "safe.directory"),
            stet_plugin_api::EnvVar::new("GIT_CONFIG_VALUE_0", "*"),
        ]
        .into(),
        workdir: workdir.into(),
        network: Network::None,
        limits: Limits {
            millicpus: 1000,
            memory_bytes: 256 << 20,
            pids: 0,
        },
        labels: labels.into(),
        user: ROption::RNone,
    }
}

fn run(runtime: &AppleContainerRuntime, sandbox: &str, script: &str) -> (String, String, bool) {
    let process = runtime
        .spawn(
            sandbox,
            ProcessSpec {
                argv: vec!["sh".into(), "-c".into(), script.into()].into(),
                env: Default::default(),
                workdir: ROption::RNone,
                stdin: Default::default(),
            },
        )
        .unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut collect = |stream: Stream, bytes: &[u8]| match stream {
        Stream::Stdout => out.extend_from_slice(bytes),
        Stream::Stderr => err.extend_from_slice(bytes),
    };
    let status = process.wait(&mut Sink::from_fn(&mut collect)).unwrap();
    (
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
        status.success(),
    )
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn git_works_inside_a_mounted_worktree() {
    let stand_in = StandIn::new("shape = \"1.x\"\nservice = \"running\"\n");
    let runtime = stand_in.runtime("");
    let work = stand_in.work().canonicalize().unwrap();
    let main = work.join("main");
    std::fs::create_dir(&main).unwrap();
    git(&main, &["init", "--quiet"]);
    let who = ["-c", "user.name=stet", "-c", "user.email=stet@localhost"];
    git(
        &main,
        &[
            &who[..],
            &["commit", "--quiet", "--allow-empty", "-m", "start"],
        ]
        .concat(),
    );
    git(
        &main,
        &["worktree", "add", "--quiet", "-b", "side", "../wt"],
    );
    let wt = work.join("wt");

    let labels = vec![Label::new(
        "stet.test",
        format!("worktree-{}", std::process::id()),
    )];
    let info = runtime
        .create_sandbox(spec(
            vec![Mount {
                source: wt.display().to_string().into(),
                target: "/lane".into(),
                writable: true,
            }],
            "/lane",
            labels.clone(),
        ))
        .unwrap();
    let (out, err, ok) = run(
        &runtime,
        &info.id,
        "git status --short && echo inside > inside.txt && git add inside.txt \
         && git -c user.name=sandbox -c user.email=sandbox@localhost commit --quiet -m inside \
         && echo committed",
    );
    let listed = runtime.list_sandboxes(&labels).unwrap();
    runtime.teardown(&info.id).unwrap();
    assert!(ok, "stdout {out:?}, stderr {err:?}");
    assert_eq!(out.trim(), "committed");
    assert!(listed.iter().any(|s| s.id == info.id));
    // The commit is on the worktree's branch, in the main repository.
    assert_eq!(
        git(&main, &["log", "-1", "--format=%s", "side"]).trim(),
        "inside"
    );
    assert!(runtime.list_sandboxes(&labels).unwrap().is_empty());
}

#[test]
fn a_missing_image_is_a_clear_error_and_no_sandbox_is_left() {
    let stand_in = StandIn::new("shape = \"1.x\"\nservice = \"running\"\n");
    let runtime = stand_in.runtime("");
    let labels = vec![Label::new(
        "stet.test",
        format!("missing-{}", std::process::id()),
    )];
    let mut s = spec(vec![], "/", labels.clone());
    s.image = "stet-no-such-image:0".into();
    let e = runtime.create_sandbox(s).unwrap_err();
    assert_eq!(e.code, ErrorCode::NOT_FOUND, "{e}");
    assert!(e.remedy.contains("stet never pulls"), "{}", e.remedy);
    assert!(runtime.list_sandboxes(&labels).unwrap().is_empty());
}

#[test]
fn a_process_in_a_torn_down_sandbox_is_an_error_not_an_exit() {
    let stand_in = StandIn::new("shape = \"1.x\"\nservice = \"running\"\n");
    let runtime = stand_in.runtime("");
    let process = runtime
        .spawn(
            "stet-never-created",
            ProcessSpec {
                argv: vec!["true".into()].into(),
                env: Default::default(),
                workdir: ROption::RNone,
                stdin: Default::default(),
            },
        )
        .unwrap();
    let mut ignore = |_: Stream, _: &[u8]| {};
    let e = process.wait(&mut Sink::from_fn(&mut ignore)).unwrap_err();
    assert_eq!(e.code, ErrorCode::NOT_FOUND, "{e}");
    // Teardown of what does not exist succeeds.
    runtime.teardown("stet-never-created").unwrap();
}
