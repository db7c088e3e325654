//! The runtime conformance kit against the real Docker Engine, with the plugin in-process.
//! Needs the engine running and stet's lane image loaded (`scripts/build-image.sh`,
//! which `cargo xtask test` runs).

use stet_plugin_api::conformance::{self, Direct, Options};
use stet_plugin_api::RuntimePlugin;
use stet_plugin_docker::DockerRuntime;

#[test]
fn docker_passes_the_runtime_conformance_kit() {
    let runtime = DockerRuntime::from_config("{}").unwrap();
    let probe = runtime.probe().unwrap();
    assert!(
        probe.available,
        "no engine: {} ({})",
        probe.reason, probe.remedy
    );
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

#[test]
fn a_missing_image_is_a_clear_error() {
    let runtime = DockerRuntime::from_config("{}").unwrap();
    let spec = stet_plugin_api::SandboxSpec {
        image: "stet-no-such-image:0".into(),
        mounts: Default::default(),
        env: Default::default(),
        workdir: "/".into(),
        network: stet_plugin_api::Network::None,
        limits: Default::default(),
        labels: vec![stet_plugin_api::Label::new("stet.test", "missing-image")].into(),
        user: stet_plugin_api::ROption::RNone,
    };
    let err = runtime.create_sandbox(spec).unwrap_err();
    assert_eq!(err.code, stet_plugin_api::ErrorCode::NOT_FOUND);
    assert!(
        err.remedy.contains("docker build -t stet-no-such-image:0"),
        "{}",
        err.remedy
    );
    assert!(err.remedy.contains("never pulls"), "{}", err.remedy);
}

#[test]
fn out_of_memory_kills_are_reported() {
    let runtime = DockerRuntime::from_config("{}").unwrap();
    let spec = stet_plugin_api::SandboxSpec {
        image: "stet-lane:1".into(),
        mounts: Default::default(),
        env: vec![stet_plugin_api::EnvVar::new("PATH", "/usr/bin:/bin")].into(),
        workdir: "/".into(),
        network: stet_plugin_api::Network::None,
        limits: stet_plugin_api::Limits {
            millicpus: 0,
            memory_bytes: 32 << 20,
            pids: 64,
        },
        labels: vec![stet_plugin_api::Label::new("stet.test", "oom")].into(),
        user: stet_plugin_api::ROption::RNone,
    };
    let sandbox = runtime.create_sandbox(spec).unwrap();
    // `tail -n 1` keeps the whole current line in memory, and /dev/zero has no newline.
    let process = runtime
        .spawn(
            &sandbox.id,
            stet_plugin_api::ProcessSpec {
                argv: vec![
                    "sh".into(),
                    "-c".into(),
                    "head -c 512M /dev/zero | tail -n 1 >/dev/null".into(),
                ]
                .into(),
                env: Default::default(),
                workdir: stet_plugin_api::ROption::RNone,
                stdin: Default::default(),
            },
        )
        .unwrap();
    let mut ignore = |_: stet_plugin_api::Stream, _: &[u8]| {};
    let status = process
        .wait(&mut stet_plugin_api::Sink::from_fn(&mut ignore))
        .unwrap();
    runtime.teardown(&sandbox.id).unwrap();
    assert!(!status.success(), "{status:?}");
    assert!(status.out_of_memory, "{status:?}");
}
