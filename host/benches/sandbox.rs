//! Sandbox benchmarks against the real engine (run with `cargo xtask bench`, which builds
//! the release plugins and needs stet's lane image loaded). The shipped runtimes are
//! installed and stet selects one as it would for a person; the anchor is the engine's own
//! CLI (`ANCHOR_CLI`), the one backend name here.
//!
//! 1. `stet run -- true` against `ANCHOR_CLI run --rm --network none IMAGE true` (the same
//!    network as stet's default), paired runs, median of the per-pair ratios.
//! 2. Throughput of `head -c 1G /dev/zero` through each, to /dev/null.
//! 3. The stet process's peak memory for 64 MiB, 256 MiB and 1 GiB of `stet run` output.
//! 4. The stet process's peak memory for 64 MiB, 1 GiB and 4 GiB of an *agent's* output
//!    (`stet ask` with the command harness: streamed to the call's log, a bounded head and
//!    tail kept for the harness).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const IMAGE: &str = "stet-lane:1";
/// The engine's own command-line client, which `stet run` is measured against.
const ANCHOR_CLI: &str = "docker"; // anchor: the command stet is timed against

fn release_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

/// Lays out the shipped plugins of `kind` (and, by name, `also`), built in release mode:
/// stet then selects among them as it would for a person, by their probes.
fn install_plugins(plugins: &Path, kind: &str, also: &[&str]) {
    for plugin in xtask::plugin_crates(&xtask::repo_root().join("plugins")) {
        if plugin.kind == kind || also.contains(&plugin.name.as_str()) {
            xtask::install_plugin(&plugin, &release_dir(), plugins)
                .expect("the plugin is not built in release mode: run `cargo xtask bench`");
        }
    }
}

fn stet(scratch: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(release_dir().join("stet"));
    command
        .env_clear()
        .env("HOME", scratch)
        .env("XDG_CONFIG_HOME", scratch.join(".config"))
        .env("XDG_DATA_HOME", scratch.join(".local/share"))
        .env("PATH", "/usr/bin:/bin")
        .current_dir(scratch)
        .arg("--plugins-dir")
        .arg(scratch.join("plugins"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    command
}

/// The anchor stet is timed against: the engine's own CLI.
fn anchor(args: &[&str]) -> Command {
    let mut command = Command::new(ANCHOR_CLI);
    command
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    command
}

fn timed(command: &mut Command) -> Duration {
    let started = Instant::now();
    let status = command.status().unwrap();
    assert!(status.success(), "{command:?} failed");
    started.elapsed()
}

/// Runs `command`, sampling the child's peak resident memory (`VmHWM`) until it exits.
fn peak_memory(command: &mut Command) -> (Duration, u64) {
    let started = Instant::now();
    let mut child = command.spawn().unwrap();
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = 0u64;
    loop {
        if let Ok(text) = std::fs::read_to_string(&status_file) {
            if let Some(kib) = text
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse::<u64>().ok())
            {
                peak = peak.max(kib * 1024);
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success());
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    (started.elapsed(), peak)
}

fn median_f(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    install_plugins(&scratch.path().join("plugins"), "runtime", &[]);
    // Warm both paths once.
    timed(&mut stet(scratch.path(), &["run", "--", "true"]));
    timed(&mut anchor(&[
        "run",
        "--rm",
        "--network",
        "none",
        IMAGE,
        "true",
    ]));

    let mut ratios = Vec::new();
    let mut stet_ms = Vec::new();
    let mut anchor_ms = Vec::new();
    for _ in 0..15 {
        let s = timed(&mut stet(scratch.path(), &["run", "--", "true"]));
        let d = timed(&mut anchor(&[
            "run",
            "--rm",
            "--network",
            "none",
            IMAGE,
            "true",
        ]));
        ratios.push(s.as_secs_f64() / d.as_secs_f64());
        stet_ms.push(s.as_secs_f64() * 1000.0);
        anchor_ms.push(d.as_secs_f64() * 1000.0);
    }
    println!(
        "run true: stet median {:.0} ms, {ANCHOR_CLI} run --rm median {:.0} ms, median ratio {:.2} (15 pairs)",
        median_f(stet_ms),
        median_f(anchor_ms),
        median_f(ratios)
    );

    let gib = 1u64 << 30;
    let mut stet_rates = Vec::new();
    let mut anchor_rates = Vec::new();
    for _ in 0..3 {
        let s = timed(&mut stet(
            scratch.path(),
            &["run", "--", "head", "-c", "1G", "/dev/zero"],
        ));
        let d = timed(&mut anchor(&[
            "run",
            "--rm",
            "--network",
            "none",
            IMAGE,
            "head",
            "-c",
            "1G",
            "/dev/zero",
        ]));
        stet_rates.push(gib as f64 / s.as_secs_f64() / (1 << 20) as f64);
        anchor_rates.push(gib as f64 / d.as_secs_f64() / (1 << 20) as f64);
    }
    let (s, d) = (median_f(stet_rates), median_f(anchor_rates));
    println!(
        "1 GiB to /dev/null: stet {s:.0} MiB/s, {ANCHOR_CLI} run {d:.0} MiB/s, ratio {:.2}",
        s / d
    );

    for (label, size) in [("64 MiB", "64M"), ("256 MiB", "256M"), ("1 GiB", "1G")] {
        let (elapsed, peak) = peak_memory(&mut stet(
            scratch.path(),
            &["run", "--", "head", "-c", size, "/dev/zero"],
        ));
        println!(
            "stet peak memory with {label} of output: {:.1} MiB ({} ms)",
            peak as f64 / (1 << 20) as f64,
            elapsed.as_millis()
        );
    }

    // An agent's output, through the command harness (`stet ask` in a repository, so the
    // call leaves its receipt and log like a drive's).
    install_plugins(&scratch.path().join("plugins"), "runtime", &["command"]);
    let repo = scratch.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    assert!(Command::new("git")
        .args(["init", "--quiet"])
        .current_dir(&repo)
        .status()
        .unwrap()
        .success());
    for (label, size) in [("64 MiB", "64M"), ("1 GiB", "1G"), ("4 GiB", "4G")] {
        let agent = scratch.path().join(format!("agent-{size}.sh"));
        std::fs::write(
            &agent,
            format!("#!/bin/sh\nhead -c {size} /dev/zero\necho\n"),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        let config = scratch.path().join(".config/stet/config.toml");
        std::fs::create_dir_all(config.parent().unwrap()).unwrap();
        std::fs::write(
            &config,
            format!(
                "[harness]\nprofiles = \"{}\"\n[plugins.command]\nimplement = [\"{}\"]\n",
                scratch.path().join("profiles").display(),
                agent.display()
            ),
        )
        .unwrap();
        let mut ask = stet(scratch.path(), &["ask", "--harness", "command", "talk"]);
        ask.current_dir(&repo);
        let (elapsed, peak) = peak_memory(&mut ask);
        println!(
            "stet peak memory with {label} of agent output: {:.1} MiB ({} ms)",
            peak as f64 / (1 << 20) as f64,
            elapsed.as_millis()
        );
    }
}
