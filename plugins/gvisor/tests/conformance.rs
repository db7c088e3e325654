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
    assert!(checks.len() >= 14, "only {} checks ran", checks.len());
}

/// The pids set-up runs as root with CAP_SYS_ADMIN inside the sandbox, before the agent:
/// a lane an earlier call wrote can hold programs named as the set-up's (`sh`, `umount`),
/// and the sandbox's PATH and working directory may name the lane. None of them runs, and
/// the set-up still takes the control group files away.
#[test]
fn programs_planted_in_the_lane_never_run_in_gvisors_privileged_set_up() {
    use std::os::unix::fs::PermissionsExt;
    use stet_plugin_api::{EnvVar, Label, Limits, Mount, Network, ROption, SandboxSpec};
    let runtime = runtime();
    let lane = tempfile::tempdir().unwrap();
    for program in ["sh", "umount", "echo"] {
        let path = lane.path().join(program);
        std::fs::write(
            &path,
            format!("#!/bin/dash\necho ran > /lane/planted-{program}-ran\nexit 0\n"),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let spec = SandboxSpec {
        image: "stet-lane:1".into(),
        mounts: vec![Mount {
            source: lane.path().display().to_string().into(),
            target: "/lane".into(),
            writable: true,
        }]
        .into(),
        env: vec![EnvVar::new("PATH", "/lane:/usr/bin:/bin")].into(),
        workdir: "/lane".into(),
        network: Network::None,
        limits: Limits {
            pids: 32,
            ..Default::default()
        },
        labels: vec![Label::new("stet.test", "planted-set-up")].into(),
        user: ROption::RNone,
    };
    let info = runtime.create_sandbox(spec).unwrap();
    let seen = {
        let process = runtime
            .spawn(
                &info.id,
                stet_plugin_api::ProcessSpec {
                    argv: vec!["/bin/ls".into(), "/sys/fs/cgroup".into()].into(),
                    env: Default::default(),
                    workdir: ROption::RNone,
                    stdin: Default::default(),
                },
            )
            .unwrap();
        let mut out = Vec::new();
        process
            .wait(&mut stet_plugin_api::Sink::from_fn(&mut |_, b| {
                out.extend_from_slice(b)
            }))
            .unwrap();
        String::from_utf8_lossy(&out).into_owned()
    };
    runtime.teardown(&info.id).unwrap();
    let ran: Vec<_> = std::fs::read_dir(lane.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("planted-"))
        .collect();
    assert!(ran.is_empty(), "planted programs ran: {ran:?}");
    assert_eq!(
        seen.trim(),
        "",
        "the control group files are gone: {seen:?}"
    );
}
