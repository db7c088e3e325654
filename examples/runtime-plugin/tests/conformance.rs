//! The runtime conformance kit, with the plugin in-process (no library boundary, no stet
//! needed). `stet plugins conformance example --image host` runs the same kit through the
//! installed library.
//!
//! The kit needs `git` on the host; its image must hold `sh`, `git`, coreutils and
//! `sleep`. This template's one image is the host itself.

use stet_plugin_api::conformance::{self, Direct, Options};
use stet_plugin_api::RuntimePlugin;
use stet_runtime_example::ExampleRuntime;

/// The checks this template fails, by design: it has no isolation. A runtime made from it
/// must pass them: empty this list once yours does.
const EXPECTED_FAILURES: &[&str] = &[
    "with network none only loopback exists",
    "host files outside the mounts are not visible",
    "a read-only mount inside a writable one stays read-only",
    // Its processes run on the host, where the lane's sandbox path is not: the writer the
    // check leaves running cannot write to the lane.
    "a stopped sandbox runs nothing more",
];

#[test]
fn the_runtime_conformance_kit() {
    let state = tempfile::tempdir().unwrap();
    let config = serde_json::json!({ "state_dir": state.path(), "no_isolation": true }).to_string();
    let runtime = ExampleRuntime::from_config(&config).unwrap();
    let probe = runtime.probe().unwrap();
    assert!(probe.available, "{} ({})", probe.reason, probe.remedy);

    let image = std::env::var("STET_TEST_IMAGE").unwrap_or_else(|_| "host".into());
    let scratch = tempfile::tempdir().unwrap();
    let checks = conformance::run(&Direct(&runtime), &Options::new(image, scratch.path()));
    let report = conformance::report(&checks);
    println!("{report}");
    assert_eq!(
        conformance::not_run(&checks),
        Vec::<&str>::new(),
        "the kit stopped early"
    );
    for check in &checks {
        let expected_to_fail = EXPECTED_FAILURES.contains(&check.name);
        assert!(
            check.passed != expected_to_fail,
            "{}: {}\n\n{}",
            check.name,
            if expected_to_fail {
                "passed, but is listed in EXPECTED_FAILURES: remove it from the list"
            } else {
                "failed"
            },
            report
        );
    }
    // Everything the kit created was torn down.
    assert!(
        std::fs::read_dir(state.path()).unwrap().next().is_none(),
        "records left in the state directory"
    );
}
