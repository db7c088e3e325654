//! The plugin's own plumbing against a few lines of shell standing in for `container`:
//! the exact commands it runs, live output, input, exit codes, kill, the teardown retries,
//! hangs. No VM and no Docker: the fake runs processes on this host. The conformance kit
//! against the faithful stand-in is in `stand_in.rs`.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use stet_plugin_api::{
    ErrorCode, ExitStatus, Label, ProcessSpec, ROption, RuntimePlugin, Sink, Stream,
};
use stet_plugin_apple_container::AppleContainerRuntime;

/// The fake: logs each call's arguments (one per line, then `--`), then acts on them.
/// `exec` runs the argv after the id here, forwarding SIGTERM as the real CLI does and
/// exiting 128 + N for a signal death; `kill` kills what `exec` started; the rest answer
/// from files the test writes (`<command>.out`, `<command>.err`, `<command>.code`, one
/// code per call in `<command>.codes`, `<command>.hang`, `<command>.hang-once`).
const FAKE: &str = r#"#!/bin/sh
dir=$(dirname "$0")
for a in "$@"; do printf '%s\n' "$a" >> "$dir/calls"; done
echo -- >> "$dir/calls"
env | sort > "$dir/env"
cmd=$1
[ "$cmd" = system ] && cmd=system-$2
[ "$cmd" = image ] && cmd=image-$2
if [ -e "$dir/$cmd.hang" ]; then
  sleep 30
fi
if [ -e "$dir/$cmd.hang-once" ]; then
  rm "$dir/$cmd.hang-once"
  sleep 30
fi
case "$1" in
  exec)
    shift
    interactive=
    while [ $# -gt 0 ]; do
      case "$1" in
        -i) interactive=1; shift ;;
        -e|-w) shift 2 ;;
        *) break ;;
      esac
    done
    id=$1; shift
    if [ "$id" = gone ]; then
      echo "Error: get failed: container gone not found" >&2
      exit 1
    fi
    # An asynchronous command's input is /dev/null unless given explicitly.
    exec 3<&0
    if [ -n "$interactive" ]; then "$@" <&3 & else "$@" < /dev/null & fi
    child=$!
    echo $child > "$dir/exec.pid"
    trap 'kill -TERM $child' TERM
    wait $child; rc=$?
    # A trapped signal interrupts `wait`; wait again for the real end.
    while kill -0 $child 2>/dev/null; do wait $child; rc=$?; done
    exit $rc ;;
  kill)
    [ -e "$dir/exec.pid" ] && kill -9 "$(cat "$dir/exec.pid")" 2>/dev/null
    ;;
esac
[ -e "$dir/$cmd.out" ] && cat "$dir/$cmd.out"
[ -e "$dir/$cmd.err" ] && cat "$dir/$cmd.err" >&2
if [ -e "$dir/$cmd.codes" ]; then
  code=$(head -n 1 "$dir/$cmd.codes")
  tail -n +2 "$dir/$cmd.codes" > "$dir/$cmd.codes.next"
  mv "$dir/$cmd.codes.next" "$dir/$cmd.codes"
  [ -s "$dir/$cmd.codes" ] || rm "$dir/$cmd.codes"
  exit "${code:-0}"
fi
[ -e "$dir/$cmd.code" ] && exit "$(cat "$dir/$cmd.code")"
exit 0
"#;

struct Fake {
    dir: tempfile::TempDir,
}

impl Fake {
    fn new() -> Fake {
        let dir = tempfile::tempdir().unwrap();
        let binary = dir.path().join("container");
        stet_exec_support::write_executable(&binary, FAKE.as_bytes()).unwrap();
        Fake { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn set(&self, name: &str, content: &str) {
        std::fs::write(self.path(name), content).unwrap();
    }

    fn runtime(&self, extra: &str) -> AppleContainerRuntime {
        AppleContainerRuntime::from_config(&format!(
            r#"{{"binary":{:?},"skip_platform_check":true{extra}}}"#,
            self.path("container").display().to_string()
        ))
        .unwrap()
    }

    /// Every call so far, each as its argument list.
    fn calls(&self) -> Vec<Vec<String>> {
        let text = std::fs::read_to_string(self.path("calls")).unwrap_or_default();
        let mut calls = vec![];
        let mut call = vec![];
        for line in text.lines() {
            if line == "--" {
                calls.push(std::mem::take(&mut call));
            } else {
                call.push(line.to_string());
            }
        }
        calls
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

type Chunks = Vec<(Duration, Stream, Vec<u8>)>;

fn run(runtime: &AppleContainerRuntime, argv: &[&str], stdin: &[u8]) -> (Chunks, ExitStatus) {
    let started = Instant::now();
    let p = runtime.spawn("stet-1", process(argv, stdin)).unwrap();
    let chunks = Mutex::new(Vec::new());
    let mut collect = |stream: Stream, bytes: &[u8]| {
        chunks
            .lock()
            .unwrap()
            .push((started.elapsed(), stream, bytes.to_vec()))
    };
    let status = p.wait(&mut Sink::from_fn(&mut collect)).unwrap();
    (chunks.into_inner().unwrap(), status)
}

fn text(chunks: &Chunks, stream: Stream) -> String {
    chunks
        .iter()
        .filter(|c| c.1 == stream)
        .map(|c| String::from_utf8_lossy(&c.2).into_owned())
        .collect()
}

#[test]
fn exec_streams_both_streams_apart_and_live() {
    let fake = Fake::new();
    let runtime = fake.runtime("");
    let (chunks, status) = run(
        &runtime,
        &[
            "sh",
            "-c",
            "echo first; sleep 1; echo second >&2; echo third",
        ],
        b"",
    );
    assert!(status.success(), "{status:?}");
    assert_eq!(text(&chunks, Stream::Stdout), "first\nthird\n");
    assert_eq!(text(&chunks, Stream::Stderr), "second\n");
    let first = chunks.iter().find(|c| c.2.starts_with(b"first")).unwrap().0;
    let last = chunks.last().unwrap().0;
    assert!(
        last - first >= Duration::from_millis(700),
        "{first:?} then {last:?}"
    );
    assert_eq!(
        fake.calls(),
        [[
            "exec",
            "stet-1",
            "sh",
            "-c",
            "echo first; sleep 1; echo second >&2; echo third"
        ]]
    );
}

#[test]
fn exec_passes_env_workdir_and_input_and_nothing_of_the_host() {
    let fake = Fake::new();
    let runtime = fake.runtime("");
    let mut spec = process(&["wc", "-c"], &[b'x'; 100_000]);
    spec.env = vec![stet_plugin_api::EnvVar::new("A", "1")].into();
    spec.workdir = ROption::RSome("/lane".into());
    let p = runtime.spawn("stet-1", spec).unwrap();
    let mut out = Vec::new();
    let mut collect = |_: Stream, bytes: &[u8]| out.extend_from_slice(bytes);
    let status = p.wait(&mut Sink::from_fn(&mut collect)).unwrap();
    assert!(status.success());
    assert_eq!(String::from_utf8_lossy(&out).trim(), "100000");
    assert_eq!(
        fake.calls(),
        [["exec", "-i", "-e", "A=1", "-w", "/lane", "stet-1", "wc", "-c"]]
    );
    let env = std::fs::read_to_string(fake.path("env")).unwrap();
    let names: Vec<&str> = env
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .filter(|k| !["PWD", "SHLVL", "_"].contains(k))
        .collect();
    assert!(names == ["HOME", "PATH"] || names == ["PATH"], "{names:?}");
}

#[test]
fn exit_codes_signal_deaths_and_the_cli_s_own_errors() {
    let fake = Fake::new();
    let runtime = fake.runtime("");
    assert_eq!(
        run(&runtime, &["sh", "-c", "exit 7"], b"").1,
        ExitStatus::exited(7)
    );
    assert_eq!(
        run(&runtime, &["sh", "-c", "kill -9 $$"], b"").1,
        ExitStatus::signalled(9)
    );
    // A process's own "Error:" line and exit 1 is its exit.
    assert_eq!(
        run(
            &runtime,
            &["sh", "-c", "echo 'Error: not found' >&2; exit 1"],
            b""
        )
        .1,
        ExitStatus::exited(1)
    );
    let p = runtime.spawn("gone", process(&["true"], b"")).unwrap();
    let mut ignore = |_: Stream, _: &[u8]| {};
    let e = p.wait(&mut Sink::from_fn(&mut ignore)).unwrap_err();
    assert_eq!(e.code, ErrorCode::NOT_FOUND);
    assert!(
        e.message.contains("sandbox gone does not exist"),
        "{}",
        e.message
    );
}

#[test]
fn kill_kills_through_the_service_and_wait_returns_at_once() {
    let fake = Fake::new();
    let runtime = fake.runtime("");
    let p = runtime
        .spawn("stet-1", process(&["sleep", "60"], b""))
        .unwrap();
    let started = Instant::now();
    let status = std::thread::scope(|scope| {
        let killer = scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            p.kill()
        });
        let mut ignore = |_: Stream, _: &[u8]| {};
        let status = p.wait(&mut Sink::from_fn(&mut ignore));
        killer.join().unwrap().unwrap();
        status.unwrap()
    });
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(status, ExitStatus::signalled(9));
    // Idempotent, and after the end.
    p.kill().unwrap();
    let calls = fake.calls();
    assert_eq!(calls[1], ["kill", "-s", "KILL", "stet-1"]);
    assert_eq!(calls.len(), 2, "{calls:?}");
}

#[test]
fn kill_falls_back_to_sigterm_through_the_cli_when_the_service_fails() {
    let fake = Fake::new();
    fake.set("kill.hang", "");
    let runtime = fake.runtime(r#","command_timeout":"500ms""#);
    let p = runtime
        .spawn("stet-1", process(&["sleep", "60"], b""))
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let status = std::thread::scope(|scope| {
        let killer = scope.spawn(|| p.kill());
        let mut ignore = |_: Stream, _: &[u8]| {};
        let status = p.wait(&mut Sink::from_fn(&mut ignore));
        // The CLI forwarded SIGTERM and the process ended: the kill held.
        killer.join().unwrap().unwrap();
        status.unwrap()
    });
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(!status.success());
}

#[test]
fn teardown_treats_not_found_as_done_and_retries_a_busy_container() {
    let fake = Fake::new();
    let runtime = fake.runtime("");
    fake.set("delete.codes", "1\n");
    fake.set(
        "delete.err",
        "Error: internalError: \"failed to delete one or more containers\" (cause: \"notFound: \"container with ID stet-1 not found\"\")\n",
    );
    runtime.teardown("stet-1").unwrap();
    assert_eq!(fake.calls(), [["delete", "--force", "stet-1"]]);

    let fake = Fake::new();
    let runtime = fake.runtime("");
    fake.set("delete.codes", "1\n1\n0\n");
    fake.set(
        "delete.err",
        "Error: internalError: \"failed to delete one or more containers\" (cause: \"invalidState: \"container stet-1 is stopping\"\")\n",
    );
    runtime.teardown("stet-1").unwrap();
    assert_eq!(fake.calls().len(), 3);
}

#[test]
fn teardown_survives_a_hung_delete() {
    let fake = Fake::new();
    fake.set("delete.hang-once", "");
    let runtime = fake.runtime(r#","command_timeout":"500ms""#);
    let started = Instant::now();
    runtime.teardown("stet-1").unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        fake.calls(),
        [
            vec!["delete", "--force", "stet-1"],
            vec!["stop", "-t", "1", "stet-1"],
            vec!["delete", "--force", "stet-1"]
        ]
    );
}

#[test]
fn teardown_that_keeps_hanging_is_a_timeout_naming_gc() {
    let fake = Fake::new();
    fake.set("delete.hang", "");
    let runtime = fake.runtime(r#","command_timeout":"300ms""#);
    let e = runtime.teardown("stet-1").unwrap_err();
    assert_eq!(e.code, ErrorCode::TIMEOUT, "{e}");
    assert!(e.remedy.contains("stet gc"), "{}", e.remedy);
}

#[test]
fn list_runs_the_exact_command_and_filters_by_label() {
    let fake = Fake::new();
    fake.set(
        "list.out",
        r#"[{"status":"running","configuration":{"id":"a","labels":{"stet.managed":"true"}},"networks":[],"startedDate":776340001.25},{"status":"stopped","configuration":{"id":"b","labels":{"other":"x"}},"networks":[]}]"#,
    );
    let runtime = fake.runtime("");
    let found = runtime
        .list_sandboxes(&[Label::new("stet.managed", "true")])
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].id.as_str(), "a");
    assert_eq!(found[0].state.as_str(), "running");
    assert_eq!(fake.calls(), [["list", "--all", "--format", "json"]]);
    assert_eq!(
        runtime.list_sandboxes(&[]).unwrap_err().code,
        ErrorCode::INVALID_INPUT
    );
}

#[test]
fn create_checks_the_image_then_runs_the_exact_command() {
    let fake = Fake::new();
    fake.set("run.out", "stet-made\n");
    let runtime = fake.runtime("");
    let lane = tempfile::tempdir().unwrap();
    let lane_path = lane.path().display().to_string();
    let spec = stet_plugin_api::SandboxSpec {
        image: "stet-lane:1".into(),
        mounts: vec![stet_plugin_api::Mount {
            source: lane_path.clone().into(),
            target: "/lane".into(),
            writable: true,
        }]
        .into(),
        env: vec![stet_plugin_api::EnvVar::new("PATH", "/bin")].into(),
        workdir: "/lane".into(),
        network: stet_plugin_api::Network::None,
        limits: stet_plugin_api::Limits {
            millicpus: 1000,
            memory_bytes: 512 << 20,
            pids: 64,
        },
        labels: vec![Label::new("stet.managed", "true")].into(),
        user: ROption::RNone,
    };
    let info = runtime.create_sandbox(spec.clone()).unwrap();
    assert_eq!(info.id.as_str(), "stet-made");
    let calls = fake.calls();
    assert_eq!(calls[0], ["image", "inspect", "stet-lane:1"]);
    let name = calls[1][3].clone();
    assert!(name.starts_with("stet-"), "{name}");
    let volume = format!("{lane_path}:/lane");
    assert_eq!(
        calls[1],
        [
            "run",
            "-d",
            "--name",
            &name,
            "--progress",
            "none",
            "-l",
            "stet.managed=true",
            "--cpus",
            "1",
            "--memory",
            "512M",
            "-v",
            &volume,
            "-w",
            "/lane",
            "-e",
            "PATH=/bin",
            "-u",
            "0:0",
            "--network",
            "none",
            "stet-lane:1",
            "sleep",
            "infinity"
        ]
    );

    // A missing image: not found, with the remedy, and no run.
    let fake = Fake::new();
    fake.set("image-inspect.code", "1");
    fake.set("image-inspect.err", "Error: image not found: stet-lane:1\n");
    let runtime = fake.runtime("");
    let e = runtime.create_sandbox(spec.clone()).unwrap_err();
    assert_eq!(e.code, ErrorCode::NOT_FOUND);
    assert!(e.remedy.contains("container image load"), "{}", e.remedy);
    assert_eq!(fake.calls().len(), 1);

    // A run that fails removes what it may have left.
    let fake = Fake::new();
    fake.set("run.code", "1");
    fake.set("run.err", "Error: failed to bootstrap container\n");
    let runtime = fake.runtime("");
    let e = runtime.create_sandbox(spec).unwrap_err();
    assert_eq!(e.code, ErrorCode::BACKEND);
    assert!(
        e.message.contains("failed to bootstrap container"),
        "{}",
        e.message
    );
    let calls = fake.calls();
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[2][..2], ["delete", "--force"]);
    assert_eq!(calls[2][2], calls[1][3]);
}

#[test]
fn the_probe_reads_version_and_status() {
    let fake = Fake::new();
    fake.set(
        "--version.out",
        "container CLI version 1.2.2 (build: release, commit: 0000000)\n",
    );
    let runtime = fake.runtime("");
    let report = runtime.probe().unwrap();
    assert!(report.available, "{report:?}");
    assert_eq!(report.backend_version.as_str(), "container 1.2.2");
    assert_eq!(report.priority, 100);
    assert_eq!(fake.calls(), [vec!["--version"], vec!["system", "status"]]);
    // A fake CLI on this Linux runs its "VMs" on this host's kernel: the plugin claims no
    // kernel of its own where the platform check is skipped, and says why.
    let isolation = report
        .facts
        .iter()
        .find(|f| f.key.as_str() == stet_plugin_api::fact::ISOLATION)
        .map(|f| f.value.to_string());
    if cfg!(all(target_os = "macos", target_arch = "aarch64")) {
        assert_eq!(
            isolation.as_deref(),
            Some(stet_plugin_apple_container::ISOLATION)
        );
    } else {
        assert!(!report
            .capabilities
            .iter()
            .any(|c| c.as_str() == stet_plugin_api::capability::OWN_KERNEL));
        assert_eq!(
            isolation.as_deref(),
            Some(stet_plugin_apple_container::ISOLATION_UNCLAIMED)
        );
    }

    fake.set("system-status.code", "1");
    fake.set(
        "system-status.out",
        "apiserver is not running and not registered with launchd\n",
    );
    let report = runtime.probe().unwrap();
    assert!(!report.available);
    assert!(
        report.reason.contains("not registered with launchd"),
        "{}",
        report.reason
    );
    assert!(report
        .remedy
        .contains("container system start --enable-kernel-install"));

    std::fs::remove_file(fake.path("system-status.code")).unwrap();
    fake.set("system-status.hang", "");
    let runtime = fake.runtime(r#","status_timeout":"500ms""#);
    let started = Instant::now();
    let report = runtime.probe().unwrap();
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(!report.available);
    assert!(
        report.reason.contains("did not answer within 0.5 s"),
        "{}",
        report.reason
    );

    fake.set(
        "--version.out",
        "container CLI version 0.5.0 (build: release, commit: 0000000)\n",
    );
    let report = runtime.probe().unwrap();
    assert!(!report.available);
    assert!(report.reason.contains("too old"), "{}", report.reason);
}

#[test]
fn image_status_present_absent_and_service_down() {
    let fake = Fake::new();
    let runtime = fake.runtime("");
    assert!(runtime.image_status("stet-lane:1").unwrap().present);
    fake.set("image-inspect.code", "1");
    fake.set("image-inspect.err", "Error: image not found: stet-lane:1\n");
    let absent = runtime.image_status("stet-lane:1").unwrap();
    assert!(!absent.present);
    assert!(absent.remedy.contains("container image pull stet-lane:1"));
    fake.set(
        "image-inspect.err",
        "Error: XPC connection error: Connection invalid\nEnsure container system service has been started with `container system start`.\n",
    );
    let e = runtime.image_status("stet-lane:1").unwrap_err();
    assert_eq!(e.code, ErrorCode::UNAVAILABLE);
}
