//! The runtime conformance kit with the plugin in-process. Needs bwrap and git on the host
//! (`apt-get install bubblewrap git`). The image is `host` (the host's own /usr and a
//! curated /etc, which hold sh, git, coreutils and sleep) unless STET_TEST_IMAGE names a
//! configured root file system (then STET_TEST_ROOTFS is its directory).

use stet_plugin_api::conformance::{self, Direct, Options};
use stet_plugin_api::{ErrorCode, Label, Network, ROption, RuntimePlugin, SandboxSpec};
use stet_runtime_bubblewrap::BubblewrapRuntime;

fn runtime(state: &std::path::Path) -> (BubblewrapRuntime, String) {
    let image = std::env::var("STET_TEST_IMAGE").unwrap_or_else(|_| "host".into());
    let mut config = serde_json::json!({ "state_dir": state });
    if let Ok(rootfs) = std::env::var("STET_TEST_ROOTFS") {
        config["images"] = serde_json::json!({ image.clone(): rootfs });
    }
    let runtime = BubblewrapRuntime::from_config(&config.to_string()).unwrap();
    let probe = runtime.probe().unwrap();
    assert!(
        probe.available,
        "bubblewrap is unavailable: {} ({})",
        probe.reason, probe.remedy
    );
    (runtime, image)
}

#[test]
fn bubblewrap_passes_the_runtime_conformance_kit() {
    let state = tempfile::tempdir().unwrap();
    let (runtime, image) = runtime(state.path());
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
    assert!(
        std::fs::read_dir(state.path()).unwrap().next().is_none(),
        "records left in the state directory"
    );
}

fn spec(image: &str, workdir: &str) -> SandboxSpec {
    SandboxSpec {
        image: image.into(),
        mounts: Default::default(),
        env: vec![stet_plugin_api::EnvVar::new("PATH", "/usr/bin:/bin")].into(),
        workdir: workdir.into(),
        network: Network::None,
        limits: Default::default(),
        labels: vec![Label::new("stet.test", "bubblewrap")].into(),
        user: ROption::RNone,
    }
}

#[test]
fn an_unmapped_image_is_not_found_with_the_way_to_map_it() {
    let state = tempfile::tempdir().unwrap();
    let (runtime, _) = runtime(state.path());
    let status = runtime.image_status("stet-lane:1").unwrap();
    assert!(!status.present);
    assert!(status.remedy.contains("docker export"), "{}", status.remedy);
    let err = runtime
        .create_sandbox(spec("stet-lane:1", "/"))
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::NOT_FOUND);
    assert!(err.remedy.contains("--image host"), "{}", err.remedy);
}

#[test]
fn a_sandbox_bwrap_cannot_make_fails_at_create_and_leaves_nothing() {
    let state = tempfile::tempdir().unwrap();
    let (runtime, _) = runtime(state.path());
    // /usr is read-only in the host image: a working directory that is not there cannot
    // be made.
    let err = runtime
        .create_sandbox(spec("host", "/usr/no-such-dir"))
        .unwrap_err();
    assert!(
        err.message.contains("bwrap could not make the sandbox"),
        "{}",
        err.message
    );
    assert!(err.message.contains("/usr/no-such-dir"), "{}", err.message);
    assert!(runtime
        .list_sandboxes(&[Label::new("stet.test", "bubblewrap")])
        .unwrap()
        .is_empty());
}

#[test]
fn inside_there_are_no_capabilities_no_host_secrets_and_a_read_only_root() {
    let state = tempfile::tempdir().unwrap();
    let (runtime, _) = runtime(state.path());
    let sandbox = runtime.create_sandbox(spec("host", "/")).unwrap();
    let script = "grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status; \
                  test -e /etc/shadow && echo shadow-visible; \
                  touch /usr/x 2>/dev/null && echo usr-writable; \
                  touch /x 2>/dev/null && echo root-writable; \
                  touch /tmp/x && echo tmp-writable; \
                  echo pid=$$";
    let process = runtime
        .spawn(
            &sandbox.id,
            stet_plugin_api::ProcessSpec {
                argv: vec!["sh".into(), "-c".into(), script.into()].into(),
                env: Default::default(),
                workdir: ROption::RNone,
                stdin: Default::default(),
            },
        )
        .unwrap();
    let mut out = Vec::new();
    let mut collect = |_: stet_plugin_api::Stream, b: &[u8]| out.extend_from_slice(b);
    let status = process
        .wait(&mut stet_plugin_api::Sink::from_fn(&mut collect))
        .unwrap();
    runtime.teardown(&sandbox.id).unwrap();
    let out = String::from_utf8_lossy(&out);
    assert!(status.success(), "{status:?}: {out}");
    for cap in ["CapEff", "CapPrm", "CapBnd"] {
        assert!(out.contains(&format!("{cap}:\t0000000000000000")), "{out}");
    }
    assert!(!out.contains("shadow-visible"), "{out}");
    assert!(!out.contains("usr-writable"), "{out}");
    assert!(!out.contains("root-writable"), "{out}");
    assert!(out.contains("tmp-writable"), "{out}");
    // The sandbox has its own pid namespace (bwrap's reaper is pid 1).
    assert!(out.contains("pid=2"), "{out}");
}

#[test]
fn without_bwrap_the_probe_says_how_to_install_it() {
    let state = tempfile::tempdir().unwrap();
    let config = serde_json::json!({ "state_dir": state.path(), "bwrap": "/nonexistent/bwrap" });
    let runtime = BubblewrapRuntime::from_config(&config.to_string()).unwrap();
    let probe = runtime.probe().unwrap();
    assert!(!probe.available);
    assert!(
        probe.reason.contains("/nonexistent/bwrap"),
        "{}",
        probe.reason
    );
    assert!(
        probe.remedy.contains("apt-get install bubblewrap")
            && probe.remedy.contains("dnf install bubblewrap"),
        "{}",
        probe.remedy
    );
    // Creating a sandbox says the same, as an error.
    let err = runtime.create_sandbox(spec("host", "/")).unwrap_err();
    assert_eq!(err.code, ErrorCode::UNAVAILABLE);
}

#[test]
fn a_bwrap_that_does_not_work_makes_the_runtime_unavailable() {
    let state = tempfile::tempdir().unwrap();
    let fake = state.path().join("bwrap");
    // Written by a child process (`install`), never opened for writing here: a fork by
    // another test thread could otherwise hold it open and its exec fail with ETXTBSY.
    let staged = state.path().join("bwrap.staged");
    std::fs::write(
        &staged,
        "#!/bin/sh\n[ \"$1\" = --version ] && echo 'bubblewrap 0.0.0' && exit 0\n\
         echo 'bwrap: No permissions to create new namespace' >&2; exit 1\n",
    )
    .unwrap();
    let installed = std::process::Command::new("install")
        .args(["-m", "755"])
        .arg(&staged)
        .arg(&fake)
        .status()
        .unwrap();
    assert!(installed.success());
    let config = serde_json::json!({ "state_dir": state.path().join("state"), "bwrap": fake });
    let runtime = BubblewrapRuntime::from_config(&config.to_string()).unwrap();
    let probe = runtime.probe().unwrap();
    assert!(!probe.available);
    assert!(
        probe
            .reason
            .contains("bubblewrap 0.0.0 does not work here: bwrap: No permissions"),
        "{}",
        probe.reason
    );
    assert!(probe.remedy.contains("user namespaces"), "{}", probe.remedy);
}
