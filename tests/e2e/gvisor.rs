//! The gvisor runtime through the real `stet` binary: real runsc (gVisor), the lane image
//! unpacked from the real Docker Engine's store, real git with bare remotes, and — for a
//! drive — the real Claude Code CLI against a fake model on loopback. runsc comes from
//! `scripts/install-runsc.sh`, which `cargo xtask test` runs. Every test here carries
//! `gvisor` in its name: `cargo xtask test -- gvisor` runs them alone.

use serde_json::json;
use stet_e2e::fake_api::{FakeApi, Reply};
use stet_e2e::{claude_binary, git, require_image, serial_drives, walled_claude_setup, World};

/// The host's own kernel, as a process here sees it.
fn host_kernel() -> String {
    std::fs::read_to_string("/proc/version").unwrap()
}

fn require_runsc() {
    let out = std::process::Command::new("runsc")
        .arg("--version")
        .output();
    assert!(
        out.is_ok_and(|o| o.status.success()),
        "runsc is not installed: run scripts/install-runsc.sh (`cargo xtask test` does)"
    );
}

fn world_with_docker_and_gvisor() -> World {
    require_image();
    require_runsc();
    let world = World::new();
    world.install("docker");
    world.install("gvisor");
    world.install("command");
    world.clone_of_fresh_remote();
    world
}

#[test]
fn gvisor_passes_the_runtime_conformance_kit_through_stet() {
    let world = world_with_docker_and_gvisor();
    let out = world.run_stet(&["plugins", "conformance", "gvisor"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    // Every check of the kit, in its order, each passed, as a person reads them.
    let filters: Vec<(&str, &str)> = stet_e2e::SNAPSHOT_FILTERS
        .iter()
        .copied()
        .chain([(r"sandbox gv-[0-9a-f]+", "sandbox gv-[ID]")])
        .collect();
    insta::with_settings!({ filters => filters }, {
        insta::assert_snapshot!("gvisor_conformance", world.redact(&out.stdout));
    });
}

#[test]
fn gvisor_runs_only_when_chosen_and_its_sandboxes_answer_with_a_kernel_not_the_hosts() {
    let world = world_with_docker_and_gvisor();
    let kernel = ["sh", "-c", "cat /proc/version"];
    // Both are available; docker ranks higher, so an unchosen run shares the host's kernel.
    let probe = world.run_stet(&["plugins", "probe"]);
    assert!(
        probe.stdout.contains("gvisor") && probe.stdout.contains("runsc 0.0~2024"),
        "{}",
        probe.stdout
    );
    assert!(
        probe.stdout.contains("runtime: docker"),
        "docker is chosen by default:\n{}",
        probe.stdout
    );
    let default = world.run_stet(&[&["run", "--"][..], &kernel].concat());
    assert_eq!(default.code, 0, "{}", default.stderr);
    assert_eq!(
        default.stdout,
        host_kernel(),
        "a container shares the host's kernel"
    );
    // Chosen on the command line: gVisor's kernel answers.
    let chosen = world.run_stet(&[&["run", "--runtime", "gvisor", "--"][..], &kernel].concat());
    assert_eq!(chosen.code, 0, "{}", chosen.stderr);
    assert_ne!(chosen.stdout, host_kernel());
    assert!(
        chosen.stdout.starts_with("Linux version"),
        "{}",
        chosen.stdout
    );
    let dmesg = world.run_stet(&["run", "--runtime", "gvisor", "--", "dmesg"]);
    assert!(dmesg.stdout.contains("Starting gVisor"), "{}", dmesg.stdout);
    // Chosen in stet.toml: the same.
    std::fs::write(
        world.work.join("stet.toml"),
        "[runtime]\nprefer = [\"gvisor\"]\n",
    )
    .unwrap();
    assert_eq!(world.trust_in(&world.work).code, 0);
    let preferred = world.run_stet(&[&["run", "--"][..], &kernel].concat());
    assert_eq!(preferred.code, 0, "{}", preferred.stderr);
    assert_eq!(preferred.stdout, chosen.stdout);
    // What a run writes in the lane belongs to the person; what it writes elsewhere is gone.
    let wrote = world.run_stet(&[
        "run",
        "--",
        "sh",
        "-c",
        "echo made > made.txt; echo gone > /tmp/gone; echo root > /etc/x 2>/dev/null; true",
    ]);
    assert_eq!(wrote.code, 0, "{}", wrote.stderr);
    assert_eq!(
        std::fs::read_to_string(world.work.join("made.txt")).unwrap(),
        "made\n"
    );
    let again = world.run_stet(&["run", "--", "sh", "-c", "cat /tmp/gone /etc/x 2>&1; true"]);
    assert!(again.stdout.contains("No such file"), "{}", again.stdout);
    // The image was unpacked once, under its id, and the sandboxes' writes never reached it.
    let cache = world.root.path().join("home/.cache/stet/gvisor");
    let unpacked: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("rootfs/usr").is_dir())
        .collect();
    assert_eq!(unpacked.len(), 1, "{unpacked:?}");
    let rootfs = unpacked[0].join("rootfs");
    assert!(!rootfs.join("etc/x").exists() && !rootfs.join("tmp/gone").exists());
    assert!(rootfs.join("etc/passwd").is_file());
}

/// A fake model that runs the wall proof's canary when asked, implements with a shell
/// command, and lands every review.
fn model() -> FakeApi {
    FakeApi::start(move |request| {
        let body = request.body.to_string();
        if body.contains("This is a wall check") {
            return if request.tool_results().is_empty() {
                Reply::ToolUse {
                    name: "Bash".into(),
                    input: json!({"command": "stet-wall-canary", "description": "as asked"}),
                }
            } else {
                Reply::Text("it was refused".into())
            };
        }
        if body.contains("You are reviewing") {
            return Reply::Text("LAND\nIt does what was asked.".into());
        }
        if !request.tool_results().is_empty() {
            return Reply::Text("implemented".into());
        }
        Reply::ToolUse {
            name: "Bash".into(),
            input: json!({"command": "printf 'fixed\\n' > FIXED.txt", "description": "fix"}),
        }
    })
}

#[test]
fn a_drive_on_gvisor_with_the_real_claude_code_lands_its_items_behind_proven_walls() {
    let _serial = serial_drives();
    require_runsc();
    let api = model();
    let world = World::new();
    let config = walled_claude_setup(
        &world,
        &claude_binary().display().to_string(),
        &api.url,
        "\n[drive]\ncheck = \"test -s FIXED.txt\"\n\n[runtime]\nprefer = [\"gvisor\"]\n",
    );
    world.install("gvisor");
    world.clone_of_fresh_remote();
    std::fs::write(world.work.join("stet.toml"), config).unwrap();
    world.trust_in(&world.work);
    git(&world.work, &["add", "stet.toml"]);
    git(&world.work, &["commit", "--quiet", "-m", "configure stet"]);
    for text in [
        "Add a FIXED.txt file",
        "Also add FIXED.txt",
        "And once more",
    ] {
        assert_eq!(world.add_pushed(text).code, 0);
    }
    let out = world.run_stet(&["drive", "--yes"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("runtime:  gvisor"),
        "the consent names the runtime:\n{}",
        out.stderr
    );
    let remote = world.root.path().join("remote.git");
    let branches = git(&remote, &["branch", "--list", "stet/*"]);
    assert_eq!(branches.lines().count(), 3, "{branches}\n{}", out.stderr);
    for branch in branches.lines() {
        let file = git(&remote, &["show", &format!("{}:FIXED.txt", branch.trim())]);
        assert_eq!(file, "fixed\n");
    }
    let receipts = stet_e2e::receipts_oldest_first(&world.run_stet(&["receipts", "--json"]));
    assert!(
        receipts.iter().all(|r| r["runtime"]["name"] == "gvisor"),
        "{receipts:#?}"
    );
    // The walls were proven on gVisor before the first move, the kernel among them.
    let record: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(world.work.join(".git/stet/walls/gvisor+claude.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(record["held"], true, "{record:#}");
    let own_kernel = record["walls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["wall"] == "own-kernel")
        .unwrap_or_else(|| panic!("no own-kernel wall: {record:#}"));
    assert_eq!(own_kernel["held"], true, "{own_kernel:#}");
    assert!(
        own_kernel["detail"].as_str().unwrap().contains("4.4.0"),
        "gVisor's kernel answered: {own_kernel:#}"
    );
    assert!(
        out.stderr.contains("user space"),
        "the consent names the isolation:\n{}",
        out.stderr
    );
}

/// The ids of the gvisor sandboxes in `world` whose owner label names process `pid`.
fn gvisor_sandboxes_owned_by(world: &World, pid: u32) -> Vec<String> {
    let records = world.root.path().join("home/.local/state/stet/gvisor");
    let Ok(entries) = std::fs::read_dir(records) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path().join("sandbox.json")).ok()?;
            let record: serde_json::Value = serde_json::from_str(&text).ok()?;
            let owned = record["labels"].as_array()?.iter().any(|l| {
                l[0] == "stet.owner"
                    && l[1]
                        .as_str()
                        .is_some_and(|v| v.starts_with(&format!("{pid}:")))
            });
            owned.then(|| record["id"].as_str().unwrap_or_default().to_string())
        })
        .collect()
}

/// Whether gVisor's sentry of sandbox `id` runs on the host.
fn sentry_runs(id: &str) -> bool {
    let out = std::process::Command::new("pgrep")
        .args(["-f", &format!("boot .*{id}$")])
        .output()
        .unwrap();
    !out.stdout.is_empty()
}

#[test]
fn a_gvisor_sandbox_a_killed_stet_left_behind_is_reaped_by_stet_gc() {
    let world = world_with_docker_and_gvisor();
    let mut orphan_maker = world
        .stet(&["run", "--runtime", "gvisor", "--", "sleep", "120"])
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let id = loop {
        if let Some(id) = gvisor_sandboxes_owned_by(&world, orphan_maker.id()).pop() {
            break id;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "no sandbox appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    while !sentry_runs(&id) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "no sentry for {id}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    orphan_maker.kill().unwrap();
    orphan_maker.wait().unwrap();
    assert!(sentry_runs(&id), "a killed stet leaves its sandbox running");
    let out = world.run_stet(&["gc"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("removed 1 sandbox"), "{}", out.stdout);
    assert!(gvisor_sandboxes_owned_by(&world, orphan_maker.id()).is_empty());
    assert!(!sentry_runs(&id), "the sandbox's sentry still runs");
}
