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
    assert!(probe.available, "no engine: {} ({})", probe.reason, probe.remedy);
    let image = std::env::var("STET_TEST_IMAGE").unwrap_or_else(|_| "stet-lane:1".into());
    let status = runtime.image_status(&image).unwrap();
    assert!(status.present, "{image} is missing: run scripts/build-image.sh ({})", status.remedy);

    let scratch = tempfile::tempdir().unwrap();
    let checks = conformance::run(&Direct(&runtime), &Options::new(image, scratch.path()));
    let report: Vec<String> = checks
        .iter()
        .map(|c| format!("{} {} ({} ms): {}", if c.passed { "pass" } else { "FAIL" }, c.name, c.elapsed.as_millis(), c.detail))
        .collect();
    println!("{}", report.join("\n"));
    assert!(conformance::all_passed(&checks), "\n{}", report.join("\n"));
    assert!(checks.len() >= 14, "only {} checks ran", checks.len());
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
    assert!(err.remedy.contains("docker build -t stet-no-such-image:0"), "{}", err.remedy);
    assert!(err.remedy.contains("never pulls"), "{}", err.remedy);
}
