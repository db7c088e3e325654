//! The runtime conformance kit against real gVisor (runsc), with the plugin in process.
//! Needs runsc (`scripts/install-runsc.sh`, which `cargo xtask test` runs), Docker with
//! stet's lane image loaded (`scripts/build-image.sh`), and root.

use stet_plugin_api::conformance::{self, Direct, Options};
use stet_plugin_api::RuntimePlugin;
use stet_plugin_gvisor::GvisorRuntime;

fn runtime() -> GvisorRuntime {
    let runtime = GvisorRuntime::from_config("{}").unwrap();
    let probe = runtime.probe().unwrap();
    assert!(
        probe.available,
        "runsc does not run here: {} ({})",
        probe.reason, probe.remedy
    );
    runtime
}

#[test]
fn gvisor_passes_the_runtime_conformance_kit() {
    let runtime = runtime();
    let image = std::env::var("STET_TEST_IMAGE").unwrap_or_else(|_| "stet-lane:1".into());
    let status = runtime.image_status(&image).unwrap();
    assert!(
        status.present,
        "{image} is missing: run scripts/build-image.sh ({})",
        status.remedy
    );
    let scratch = tempfile::tempdir().unwrap();
    let checks = conformance::run(&Direct(&runtime), &Options::new(image, scratch.path()));
    let report = conformance::report(&checks);
    println!("{report}");
    assert!(conformance::all_passed(&checks), "\n{}", report);
    assert_eq!(
        conformance::not_run(&checks),
        Vec::<&str>::new(),
        "the kit stopped early"
    );
}

/// The pids limit is the sandbox's RLIMIT_NPROC: it counts the processes of every exec
/// together (runsc gives each the first process's limits), a process cannot raise it, and
/// no control group file system is there to write a limit into.
#[test]
fn gvisors_pids_limit_spans_every_process_and_cannot_be_raised() {
    use stet_plugin_api::{EnvVar, Label, Limits, Network, ROption, SandboxSpec};
    let runtime = runtime();
    let spec = SandboxSpec {
        image: "stet-lane:1".into(),
        mounts: Default::default(),
        env: vec![EnvVar::new("PATH", "/usr/bin:/bin")].into(),
        workdir: "/".into(),
        network: Network::None,
        limits: Limits {
            pids: 32,
            ..Default::default()
        },
        labels: vec![Label::new("stet.test", "pids-limit")].into(),
        user: ROption::RNone,
    };
    let info = runtime.create_sandbox(spec).unwrap();
    let run = |script: &str| {
        let process = runtime
            .spawn(
                &info.id,
                stet_plugin_api::ProcessSpec {
                    argv: vec!["sh".into(), "-c".into(), script.into()].into(),
                    env: Default::default(),
                    workdir: ROption::RNone,
                    stdin: Default::default(),
                },
            )
            .unwrap();
        let mut out = Vec::new();
        let status = process
            .wait(&mut stet_plugin_api::Sink::from_fn(&mut |_, b| {
                out.extend_from_slice(b)
            }))
            .unwrap();
        (status, String::from_utf8_lossy(&out).into_owned())
    };
    // Everything runs before any assertion, so that a failing one leaves no sandbox.
    let (_, limit) = run(
        "exec bash -c 'ulimit -Hu; ulimit -u 100000 && echo RAISED; ulimit -Hu 100000 && echo RAISED; \
         ls -A /sys/fs/cgroup' 2>/dev/null",
    );
    // One exec holds 20 processes; a second may start no more than the limit leaves.
    let (first, first_said) = run(
        "i=0; while [ $i -lt 20 ]; do sleep 60 >/dev/null 2>&1 & i=$((i+1)); done; echo started",
    );
    let (second, said) = run(
        "i=0; while [ $i -lt 20 ]; do sleep 60 >/dev/null 2>&1 & i=$((i+1)); echo $i; done 2>&1",
    );
    let started = said
        .lines()
        .filter_map(|l| l.trim().parse::<u32>().ok())
        .max();
    runtime.teardown(&info.id).unwrap();
    assert_eq!(
        limit.trim(),
        "32",
        "the limit is 32, it stays so, and there are no cgroup files"
    );
    assert_eq!(first.code, ROption::RSome(0), "{first_said}");
    assert_ne!(second.code, ROption::RSome(0), "{said}");
    assert!(
        started.is_some_and(|n| n < 20),
        "the second exec started {started:?} of 20 beside the first's 20 at a limit of 32: {said}"
    );
}
