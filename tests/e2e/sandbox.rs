//! `stet run`, `stet gc` and `stet plugins conformance` through the real binary, on the real
//! Docker Engine with stet's lane image.

use std::process::Stdio;
use std::time::{Duration, Instant};

use stet_e2e::{require_image, sandboxes_owned_by, World};

fn docker_world() -> World {
    require_image();
    let world = World::new();
    world.install("docker");
    world
}

#[test]
fn run_streams_output_passes_the_exit_status_and_mounts_the_current_directory() {
    let world = docker_world();
    let out = world.run_stet(&[
        "run",
        "--",
        "sh",
        "-c",
        "echo to-stdout; echo to-stderr >&2; echo made-inside > inside.txt; exit 7",
    ]);
    assert_eq!(out.code, 7, "{}", out.stderr);
    assert_eq!(out.stdout, "to-stdout\n");
    assert_eq!(out.stderr, "to-stderr\n");
    let written = std::fs::read_to_string(world.work.join("inside.txt")).unwrap();
    assert_eq!(written, "made-inside\n");
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(world.work.join("inside.txt")).unwrap();
    assert_eq!(
        meta.uid(),
        nix::unistd::getuid().as_raw(),
        "files written inside belong to the caller"
    );
}

#[test]
fn run_builds_the_environment_from_scratch_and_has_no_network_by_default() {
    let world = docker_world();
    let out = world.run(
        world
            .stet(&["run", "--", "sh", "-c", "env; ls /sys/class/net"])
            .env("STET_SECRET_FOR_TEST", "must-not-leak"),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.contains("must-not-leak"), "{}", out.stdout);
    assert!(
        out.stdout.lines().any(|l| l == "HOME=/tmp"),
        "{}",
        out.stdout
    );
    assert_eq!(out.stdout.lines().last(), Some("lo"), "{}", out.stdout);

    let open = world.run_stet(&["run", "--network", "--", "ls", "/sys/class/net"]);
    assert!(open.stdout.lines().any(|l| l != "lo"), "{}", open.stdout);
}

#[test]
fn run_hands_stdin_to_the_command() {
    let world = docker_world();
    let mut child = world
        .stet(&["run", "--", "wc", "-c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&[b'x'; 5000])
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "5000");
}

#[test]
fn ctrl_c_kills_the_command_and_removes_the_sandbox() {
    let world = docker_world();
    let child = world
        .stet(&["run", "--", "sleep", "60"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let started = Instant::now();
    // The command itself runs (not only its sandbox) before the Ctrl-C.
    while !stet_e2e::runs_in_sandbox_of(pid, "sleep 60") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the command never started in its sandbox"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(
        sandboxes_owned_by(pid),
        0,
        "the sandbox outlived the Ctrl-C"
    );
}

#[test]
fn a_missing_image_says_how_to_build_it() {
    let world = docker_world();
    let out = world.run_stet(&["run", "--image", "stet-absent:0", "--", "true"]);
    assert_eq!(out.code, 3);
    assert!(
        out.stderr
            .contains("error: image stet-absent:0 is not available to runtime docker"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("never pulls"), "{}", out.stderr);
    assert!(out.stderr.contains("hint: "), "{}", out.stderr);
}

#[test]
fn gc_removes_what_a_killed_stet_left_and_keeps_what_a_live_one_uses() {
    let world = docker_world();
    // A stet killed with SIGKILL cannot clean up: its sandbox is an orphan.
    let mut dead = world.stet(&["run", "--", "sleep", "120"]).spawn().unwrap();
    // A live one keeps its sandbox.
    let mut live = world.stet(&["run", "--", "sleep", "120"]).spawn().unwrap();
    let started = Instant::now();
    while !(sandboxes_owned_by(dead.id()) == 1 && sandboxes_owned_by(live.id()) == 1) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "sandboxes never appeared"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    dead.kill().unwrap();
    dead.wait().unwrap();

    let out = world.run_stet(&["gc", "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json = out.json();
    let mentions = |list: &str, pid: u32| {
        json[list].as_array().unwrap().iter().any(|e| {
            e["reason"]
                .as_str()
                .unwrap()
                .contains(&format!("process {pid})"))
        })
    };
    assert!(mentions("removed", dead.id()), "{json:#}");
    assert!(mentions("kept", live.id()), "{json:#}");
    assert!(sandboxes_owned_by(dead.id()) == 0);
    assert!(sandboxes_owned_by(live.id()) == 1);

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(live.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(live.wait().unwrap().code(), Some(143));
    assert!(sandboxes_owned_by(live.id()) == 0);
}

#[test]
fn docker_passes_the_conformance_kit_through_the_host() {
    let world = docker_world();
    let out = world.run_stet(&["plugins", "conformance", "docker"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("  pass  create a sandbox with a git working copy mounted"),
        "{}",
        out.stdout
    );
    assert!(out
        .stdout
        .contains("  pass  a process in flight is killed from another thread"));
    // A stop the drive trusts before the removal: the engine's freeze, checked live.
    assert!(out
        .stdout
        .contains("  pass  a stopped sandbox runs nothing more"));
    // The engine runs on this kernel: the counters are read from outside, and agree.
    assert!(
        out.stdout
            .contains("  pass  limit counters read from outside match the sandbox's own"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("counted outside as inside"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.trim_end().ends_with(" passed, 0 failed"),
        "{}",
        out.stdout
    );
}

#[test]
fn conformance_refuses_a_harness_and_an_unavailable_runtime() {
    let world = World::new();
    world.install("claude");
    world.install("apple-container");
    let out = world.run_stet(&["plugins", "conformance", "claude"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("is a harness plugin; the conformance kit tests runtimes"),
        "{}",
        out.stderr
    );
    let out = world.run_stet(&["plugins", "conformance", "apple-container"]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(out.stderr.contains("needs macOS 26"), "{}", out.stderr);
}

#[test]
fn a_command_that_is_not_in_the_image_exits_127_with_one_line() {
    let world = docker_world();
    let out = world.run_stet(&["run", "--", "no-such-command-here", "x"]);
    assert_eq!(out.code, 127, "{}", out.stderr);
    assert_eq!(out.stderr.trim().lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stdout.is_empty(),
        "the engine's own message is not passed on: {}",
        out.stdout
    );
    assert!(
        out.stderr.contains("no-such-command-here"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_fresh_available_probe_answer_is_reused_by_commands_never_by_plugins_probe_and_never_for_a_changed_library(
) {
    require_image();
    let world = World::new();
    let library_dir = world.install("docker");
    let run = |world: &World| world.run_stet(&["-v", "run", "--", "true"]);
    let first = run(&world);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(!first.stderr.contains("reused"), "{}", first.stderr);
    let second = run(&world);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(
        second
            .stderr
            .contains("runtime: docker — the only available runtime (its probe's answer of "),
        "{}",
        second.stderr
    );
    assert!(second.stderr.contains(" ago, reused)"), "{}", second.stderr);
    // The command that asks always asks.
    let probe = world.run_stet(&["plugins", "probe"]);
    assert!(
        !probe.stdout.contains("reused") && !probe.stderr.contains("reused"),
        "{}",
        probe.stdout
    );
    // A library written again is a library probed again.
    let library = std::fs::read_dir(&library_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "so"))
        .unwrap();
    let bytes = std::fs::read(&library).unwrap();
    std::fs::remove_file(&library).unwrap();
    std::fs::write(&library, bytes).unwrap();
    let third = run(&world);
    assert_eq!(third.code, 0, "{}", third.stderr);
    assert!(!third.stderr.contains("reused"), "{}", third.stderr);
}

#[test]
fn a_probe_answer_is_not_reused_in_another_environment() {
    require_image();
    let world = World::new();
    world.install("docker");
    let first = world.run_stet(&["-v", "run", "--", "true"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    // Another engine address: the runtime is asked again (and is not there).
    let mut elsewhere = world.stet(&["-v", "run", "--", "true"]);
    elsewhere.env("DOCKER_HOST", "unix:///nonexistent/docker.sock");
    let out = world.run(&mut elsewhere);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(!out.stderr.contains("reused"), "{}", out.stderr);
}
