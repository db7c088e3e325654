//! Third-party plugins, as a third party makes them: the template in
//! `examples/runtime-plugin` and the bubblewrap runtime made from it
//! (`examples/bubblewrap-runtime`) are separate Cargo projects, built out of tree with
//! `cargo build --release`, laid out as a plugin directory (plugin.toml + the library),
//! installed with the real `stet plugins install DIR`, and then used through the real
//! binary: listed, probed, the conformance kit run through the host, `stet run`.
//!
//! Needs bwrap on the host (`scripts/install-bwrap.sh`); the first run compiles each
//! example once (into `target/third-party`, kept between runs).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use stet_e2e::{artifacts, plugin_entry, repo_root, World};

/// Builds `examples/<example>` out of tree and returns its library. Both examples share
/// the target directory, so their common crates compile once.
fn build(example: &str, library: &str) -> PathBuf {
    let target = artifacts()
        .parent()
        .expect("the target directory")
        .join("third-party");
    let manifest = example_dir(example).join("Cargo.toml");
    let out = Command::new(env!("CARGO"))
        .args(["build", "--release", "--manifest-path"])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "cargo build --release --manifest-path {}:\n{}",
        manifest.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let built = target.join("release").join(library);
    assert!(built.is_file(), "{} was not built", built.display());
    built
}

/// The `library` a plugin.toml names, read as stet reads it.
fn manifest_library(manifest: &Path) -> String {
    let manifest = xtask::read_manifest(manifest).unwrap_or_else(|e| panic!("{e}"));
    let library = manifest.library.file_name().expect("a library file name");
    library.to_string_lossy().into_owned()
}

fn example_dir(example: &str) -> PathBuf {
    repo_root().join("examples").join(example)
}

/// Builds an example and lays it out as a plugin directory, as its README says: the
/// manifest beside the library it names.
fn plugin_dir(world: &World, example: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    // Each example is built once per test binary, one build at a time.
    static BUILT: OnceLock<Mutex<std::collections::HashMap<String, PathBuf>>> = OnceLock::new();
    let library = manifest_library(&example_dir(example).join("plugin.toml"));
    let built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(example.to_string())
        .or_insert_with(|| build(example, &library))
        .clone();
    let dir = world.root.path().join("downloads").join(example);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        example_dir(example).join("plugin.toml"),
        dir.join("plugin.toml"),
    )
    .unwrap();
    std::fs::copy(&built, dir.join(&library)).unwrap();
    // What install checks: nobody but the owner may write what it installs.
    for (path, mode) in [
        (dir.clone(), 0o755),
        (dir.join("plugin.toml"), 0o644),
        (dir.join(&library), 0o755),
    ] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    dir
}

/// `stet plugins install DIR`, which must succeed, put the plugin into the user plugins
/// directory and lock its library's checksum.
fn install(world: &World, dir: &Path, name: &str) {
    let out = world.run_stet_installed(&["plugins", "install", "--json", dir.to_str().unwrap()]);
    assert_eq!(
        out.code,
        0,
        "stet plugins install {}:\n{}\n{}",
        dir.display(),
        out.stdout,
        out.stderr
    );
    let json = out.json();
    assert_eq!(json["name"], name, "{json:#}");
    let sha = json["library_sha256"].as_str().unwrap();
    assert_eq!(sha.len(), 64, "{json:#}");
    let user_plugins = world.root.path().join("home/.local/share/stet/plugins");
    let installed = user_plugins.join(name);
    assert!(
        installed.join("plugin.toml").is_file()
            && installed
                .join(manifest_library(&dir.join("plugin.toml")))
                .is_file(),
        "{} does not hold the plugin after install",
        installed.display()
    );
    let lock =
        std::fs::read_to_string(user_plugins.parent().unwrap().join("plugins.lock")).unwrap();
    assert!(lock.contains(sha), "{lock}");
}

fn require_bwrap() {
    let found = Command::new("bwrap").arg("--version").output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "bwrap is not installed: run scripts/install-bwrap.sh (`apt-get install bubblewrap`)"
    );
}

#[test]
fn the_template_builds_out_of_tree_installs_and_loads_and_the_kit_names_what_it_lacks() {
    let world = World::new();
    let dir = plugin_dir(&world, "runtime-plugin");
    install(&world, &dir, "example");

    let list = world.run_stet_installed(&["plugins", "list", "--json"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    let listed = plugin_entry(&list.json(), "example").clone();
    assert_eq!(listed["status"], "ok", "{listed:#}");
    assert_eq!(listed["kind"], "runtime");
    assert_eq!(listed["api"], "1.7.0");

    // It isolates nothing, so it is not available until the person says they know.
    let probe = world.run_stet_installed(&["plugins", "probe", "--json"]);
    let json = probe.json();
    let example = plugin_entry(&json, "example");
    assert_eq!(example["status"], "unavailable", "{example:#}");
    assert!(
        example["probe"]["remedy"]
            .as_str()
            .unwrap()
            .contains("no_isolation = true"),
        "{example:#}"
    );
    world.repo_config("[plugins.example]\nno_isolation = true\n");
    let probe = world.run_stet_installed(&["plugins", "probe", "--json"]);
    let json = probe.json();
    let example = plugin_entry(&json, "example");
    assert_eq!(example["status"], "available", "{example:#}");
    assert_eq!(example["probe"]["priority"], -100, "{example:#}");
    assert!(
        example["probe"]["reason"]
            .as_str()
            .unwrap()
            .contains("NO ISOLATION"),
        "{example:#}"
    );

    let run = world.run_stet_installed(&[
        "run",
        "--runtime",
        "example",
        "--image",
        "host",
        "--",
        "sh",
        "-c",
        "echo hi",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "hi\n");

    // The kit, through the host, fails it on the isolation it does not have, and on
    // nothing else (network none also fails wherever the host has more than loopback).
    let kit = world.run_stet_installed(&["plugins", "conformance", "example", "--image", "host"]);
    assert_eq!(kit.code, 1, "{}\n{}", kit.stdout, kit.stderr);
    assert!(
        kit.stdout
            .contains("  FAIL  host files outside the mounts are not visible"),
        "{}",
        kit.stdout
    );
    let isolation = [
        "with network none only loopback exists",
        "host files outside the mounts are not visible",
        "a read-only mount inside a writable one stays read-only",
        // Its processes run on the host, where the lane's sandbox path is not.
        "a stopped sandbox runs nothing more",
    ];
    for line in kit.stdout.lines().filter(|l| l.starts_with("  FAIL  ")) {
        assert!(
            isolation.iter().any(|check| line.contains(check)),
            "{line}\n\n{}",
            kit.stdout
        );
    }

    // The host proves the runtime's walls before a drive, whatever the harness: on this
    // runtime they break, and say what leaked (a negative control for `lane-only`).
    let source = world.root.path().join("harness-source");
    world.install_into("command", &source);
    install(&world, &source.join("command"), "command");
    world.repo_config(&format!(
        "[plugins.example]\nno_isolation = true\n\n[sandbox]\nimage = \"host\"\n\n\
         [plugins.command]\nimplement = [\"{}\"]\n",
        repo_root().join("examples/agent/agent.sh").display()
    ));
    let walls = world.run_stet_installed(&[
        "walls",
        "--runtime",
        "example",
        "--harness",
        "command",
        "--json",
    ]);
    assert_eq!(walls.code, 3, "{}\n{}", walls.stdout, walls.stderr);
    let json = walls.json();
    let lane_only = json["walls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["wall"] == "lane-only")
        .unwrap_or_else(|| panic!("no lane-only wall: {json:#}"));
    assert_eq!(lane_only["held"], false, "{lane_only:#}");
    assert_eq!(
        lane_only["detail"],
        "a file outside every mount is visible inside the sandbox"
    );
    // No kernel of its own claimed, no `own-kernel` wall.
    let named = |json: &serde_json::Value, name: &str| -> Option<serde_json::Value> {
        json["walls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["wall"] == name)
            .cloned()
    };
    assert_eq!(named(&json, "own-kernel"), None, "{json:#}");

    // A runtime that claims a kernel of its own gets the wall, proven live: this one
    // claims it falsely on purpose (its processes are the host kernel's), and the host
    // finds its own kernel answering inside.
    world.repo_config(&format!(
        "[plugins.example]\nno_isolation = true\nclaim_own_kernel_falsely = true\n\n\
         [sandbox]\nimage = \"host\"\n\n[plugins.command]\nimplement = [\"{}\"]\n",
        repo_root().join("examples/agent/agent.sh").display()
    ));
    let walls = world.run_stet_installed(&[
        "walls",
        "--runtime",
        "example",
        "--harness",
        "command",
        "--json",
    ]);
    assert_eq!(walls.code, 3, "{}\n{}", walls.stdout, walls.stderr);
    let json = walls.json();
    let own_kernel = named(&json, "own-kernel")
        .unwrap_or_else(|| panic!("a runtime claiming its own kernel has the wall: {json:#}"));
    assert_eq!(own_kernel["held"], false, "{own_kernel:#}");
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let detail = own_kernel["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("the host's own kernel answered inside: Linux ")
            && detail.contains(release.trim()),
        "{own_kernel:#}"
    );
    assert!(
        own_kernel["remedy"]
            .as_str()
            .unwrap()
            .contains("do not count on that isolation"),
        "{own_kernel:#}"
    );
}

#[test]
fn bubblewrap_builds_out_of_tree_installs_passes_the_kit_through_the_host_and_runs() {
    require_bwrap();
    let world = World::new();
    let dir = plugin_dir(&world, "bubblewrap-runtime");
    install(&world, &dir, "bubblewrap");

    let list = world.run_stet_installed(&["plugins", "list", "--json"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert_eq!(plugin_entry(&list.json(), "bubblewrap")["status"], "ok");

    let probe = world.run_stet_installed(&["plugins", "probe", "--json"]);
    let json = probe.json();
    let bubblewrap = plugin_entry(&json, "bubblewrap");
    assert_eq!(bubblewrap["status"], "available", "{bubblewrap:#}");
    assert!(
        bubblewrap["probe"]["backend_version"]
            .as_str()
            .unwrap()
            .starts_with("bubblewrap "),
        "{bubblewrap:#}"
    );
    assert_eq!(bubblewrap["probe"]["priority"], 40, "{bubblewrap:#}");
    assert_eq!(json["selection"]["runtime"]["chosen"], "bubblewrap");

    let kit =
        world.run_stet_installed(&["plugins", "conformance", "bubblewrap", "--image", "host"]);
    assert_eq!(kit.code, 0, "{}\n{}", kit.stdout, kit.stderr);
    assert!(
        kit.stdout.trim_end().ends_with(" passed, 0 failed"),
        "{}",
        kit.stdout
    );

    // The image from the repository's configuration, as a person would set it.
    world.repo_config("[sandbox]\nimage = \"host\"\n");
    let run = world.run_stet_installed(&[
        "run",
        "--runtime",
        "bubblewrap",
        "--",
        "sh",
        "-c",
        "echo hi",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "hi\n");

    // The current directory is mounted read-write, files belong to the caller, the exit
    // status passes through, and nothing is left behind.
    let run = world.run_stet_installed(&[
        "run",
        "--runtime",
        "bubblewrap",
        "--",
        "sh",
        "-c",
        "echo made-inside > inside.txt; ls /sys/class/net; exit 7",
    ]);
    assert_eq!(run.code, 7, "{}", run.stderr);
    assert_eq!(run.stdout, "lo\n");
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(world.work.join("inside.txt")).unwrap();
    assert_eq!(meta.uid(), nix::unistd::getuid().as_raw());
    // Each sandbox is a record under the state directory while it exists; none is left.
    let state = world.root.path().join("home/.local/state/stet/bubblewrap");
    assert!(
        state.is_dir(),
        "sandboxes were recorded in {}",
        state.display()
    );
    let left: Vec<_> = std::fs::read_dir(&state)
        .map(|entries| entries.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left in {}: {left:?}", state.display());
    let gc = world.run_stet_installed(&["gc", "--json"]);
    assert_eq!(gc.code, 0, "{}", gc.stderr);
    assert!(
        gc.json()["removed"].as_array().unwrap().is_empty(),
        "{}",
        gc.stdout
    );
}

#[test]
fn the_network_wall_holds_on_bubblewrap_through_its_forwarded_socket() {
    require_bwrap();
    let world = World::new();
    world.install("command");
    let dir = plugin_dir(&world, "bubblewrap-runtime");
    install(&world, &dir, "bubblewrap");
    let agent = stet_e2e::repo_root().join("examples/agent/agent.sh");
    // An agent that declares a host: its sandbox has loopback only and stet's proxy, and
    // the proof shows, from inside one, the listed listener reached, an unlisted one
    // refused, and nothing there with the proxy variables removed.
    world.repo_config(&format!(
        "[harness]\nprefer = [\"command\"]\n\n[sandbox]\nimage = \"host\"\n\n\
         [plugins.command]\nimplement = [\"{}\"]\n\
         allow_hosts = [\"api.example.com\"]\n",
        agent.display()
    ));
    let out = world.run_stet(&["walls", "--runtime", "bubblewrap", "--json"]);
    assert!(!out.stdout.is_empty(), "{}", out.stderr);
    let json = out.json();
    assert_eq!(out.code, 0, "{json:#}\n{}", out.stderr);
    assert_eq!(json["runtime"], "bubblewrap", "{json:#}");
    for name in ["network-as-launched", "egress-allow-list"] {
        let wall = stet_e2e::wall(&json, name);
        assert_eq!(wall["held"], true, "{wall:#}");
    }
}

#[test]
fn docker_outranks_bubblewrap_when_both_are_available() {
    require_bwrap();
    let world = World::new();
    world.install("docker");
    let dir = plugin_dir(&world, "bubblewrap-runtime");
    install(&world, &dir, "bubblewrap");
    let probe = world.run_stet(&["plugins", "probe", "--json"]);
    let json = probe.json();
    assert_eq!(
        plugin_entry(&json, "docker")["status"],
        "available",
        "{json:#}"
    );
    assert_eq!(plugin_entry(&json, "bubblewrap")["status"], "available");
    assert_eq!(json["selection"]["runtime"]["chosen"], "docker", "{json:#}");
}
