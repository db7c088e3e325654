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
