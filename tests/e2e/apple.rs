//! The apple-container runtime through the real `stet` binary, against the stand-in for
//! Apple's `container` CLI (`tests/container-stand-in`; no Mac is available here), beside
//! the real Docker runtime: selection, the conformance kit through the host, a run, and the
//! service being down.

use std::path::{Path, PathBuf};

use stet_e2e::{artifacts, plugin_entry, require_image, World};

/// The stand-in, copied into the world with its settings beside it; returns its path.
fn stand_in(world: &World, settings: &str) -> PathBuf {
    let dir = world.root.path().join("container-cli");
    std::fs::create_dir_all(&dir).unwrap();
    let binary = dir.join("container");
    std::fs::copy(artifacts().join("container"), &binary)
        .expect("the stand-in is built (cargo build --workspace)");
    std::fs::write(dir.join("stand-in.toml"), settings).unwrap();
    binary
}

fn configure(world: &World, binary: &Path) {
    world.repo_config(&format!(
        "[plugins.apple-container]\nbinary = \"{}\"\nskip_platform_check = true\n",
        binary.display()
    ));
}

/// Removes the Docker containers the stand-in made for this world, whatever happened.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for id in stet_e2e::containers_with_label("stet.stand-in=1") {
            let out = std::process::Command::new("docker")
                .args([
                    "inspect",
                    "--format",
                    "{{index .Config.Labels \"stet.stand-in.state\"}}",
                    &id,
                ])
                .output()
                .unwrap();
            if String::from_utf8_lossy(&out.stdout).contains(&self.0.display().to_string()) {
                let _ = std::process::Command::new("docker")
                    .args(["rm", "--force", &id])
                    .output();
            }
        }
    }
}

#[test]
fn with_both_runtimes_the_native_one_is_selected_and_passes_the_kit_through_the_host() {
    require_image();
    let world = World::new();
    world.install("docker");
    world.install("apple-container");
    let binary = stand_in(&world, "shape = \"1.x\"\nstart_delay_ms = 800\n");
    let _cleanup = Cleanup(world.root.path().to_path_buf());
    configure(&world, &binary);

    let probe = world.run_stet(&["plugins", "probe", "--json"]);
    let json = probe.json();
    let apple = plugin_entry(&json, "apple-container");
    assert_eq!(apple["status"], "available", "{apple:#}");
    assert_eq!(apple["probe"]["priority"], 100, "{apple:#}");
    assert_eq!(
        apple["probe"]["backend_version"], "container 1.2.2",
        "{apple:#}"
    );
    let runtime = &json["selection"]["runtime"];
    assert_eq!(runtime["chosen"], "apple-container", "{runtime:#}");
    // With the platform check skipped the CLI may be a stand-in: no kernel of its own is
    // claimed, and its isolation says why.
    assert!(
        !apple["probe"]["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "own-kernel"),
        "{apple:#}"
    );

    // `stet doctor` names the runtime passed over, with its isolation, and how to choose it.
    let doctor = world.run_stet(&["doctor"]);
    assert!(
        doctor.stdout.contains(
            "also available here: docker (isolation: container: namespaces and cgroups on \
             the host's kernel) — choose it with --runtime docker or [runtime] prefer = [\"docker\"]"
        ),
        "{}",
        doctor.stdout
    );

    let kit = world.run_stet(&["plugins", "conformance", "apple-container"]);
    assert_eq!(kit.code, 0, "{}\n{}", kit.stdout, kit.stderr);

    let run = world.run_stet(&["run", "--", "sh", "-c", "echo hi; exit 3"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert_eq!(run.stdout, "hi\n");
}

#[test]
fn init_names_the_runtime_passed_over_with_its_isolation_and_how_to_choose_it() {
    require_image();
    let world = World::new();
    world.install("docker");
    world.install("apple-container");
    let binary = stand_in(&world, "shape = \"1.x\"\n");
    let _cleanup = Cleanup(world.root.path().to_path_buf());
    // The stand-in's table in the person's own configuration: the repository has no
    // stet.toml yet, init writes it.
    let config = world.root.path().join("home/.config/stet");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "[plugins.apple-container]\nbinary = \"{}\"\nskip_platform_check = true\n",
            binary.display()
        ),
    )
    .unwrap();
    stet_e2e::git(&world.work, &["init", "--quiet"]);

    let init = world.run_stet(&["init"]);
    assert_eq!(init.code, 0, "{}\n{}", init.stdout, init.stderr);
    assert!(
        init.stdout.contains("  runtime: apple-container "),
        "{}",
        init.stdout
    );
    assert!(
        init.stdout.contains(
            "\n    also available here: docker (isolation: container: namespaces and cgroups \
             on the host's kernel) — choose it with --runtime docker or [runtime] prefer = [\"docker\"]\n"
        ),
        "{}",
        init.stdout
    );
}

#[test]
fn the_service_down_is_named_with_its_remedy_and_docker_is_selected_instead() {
    require_image();
    let world = World::new();
    world.install("docker");
    world.install("apple-container");
    let binary = stand_in(&world, "service = \"down\"\n");
    configure(&world, &binary);
    let probe = world.run_stet(&["plugins", "probe", "--json"]);
    let json = probe.json();
    let apple = plugin_entry(&json, "apple-container");
    assert_eq!(apple["status"], "unavailable", "{apple:#}");
    assert!(
        apple["probe"]["remedy"]
            .as_str()
            .unwrap()
            .contains("container system start"),
        "{apple:#}"
    );
    assert_eq!(json["selection"]["runtime"]["chosen"], "docker", "{json:#}");
}

#[test]
fn a_drive_lands_an_item_through_the_native_runtime_with_the_command_harness() {
    require_image();
    let world = World::new();
    world.install("apple-container");
    world.install("command");
    let binary = stand_in(&world, "shape = \"1.x\"\n");
    let _cleanup = Cleanup(world.root.path().to_path_buf());
    world.clone_of_fresh_remote();
    let agent = stet_e2e::repo_root().join("examples/agent/agent.sh");
    std::fs::write(
        world.work.join("stet.toml"),
        format!(
            "[harness]\nprefer = [\"command\"]\n\n[plugins.command]\nimplement = [\"{}\"]\n\n\
             [plugins.apple-container]\nbinary = \"{}\"\nskip_platform_check = true\n",
            agent.display(),
            binary.display()
        ),
    )
    .unwrap();
    world.trust_in(&world.work);
    stet_e2e::git(&world.work, &["add", "stet.toml"]);
    stet_e2e::git(&world.work, &["commit", "--quiet", "-m", "configure stet"]);
    let added = world.add_pushed("Say hello\n\nwrite hello.txt: hello from a VM");
    assert_eq!(added.code, 0, "{}", added.stderr);

    let out = world.run_stet(&["drive", "--yes"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("runtime:  apple-container"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("landed on origin"), "{}", out.stderr);
    let remote = world.root.path().join("remote.git");
    let branch = stet_e2e::git(&remote, &["branch", "--list", "stet/*"]);
    let branch = branch.trim().trim_start_matches("* ").trim();
    let hello = stet_e2e::git(&remote, &["show", &format!("{branch}:hello.txt")]);
    assert_eq!(hello.trim(), "hello from a VM");
    let receipts = stet_e2e::receipts_oldest_first(&world.run_stet(&["receipts", "--json"]));
    assert_eq!(receipts.len(), 2, "implement and review: {receipts:#?}");
    assert!(receipts
        .iter()
        .all(|r| r["runtime"]["name"] == "apple-container"));
}

#[test]
fn the_network_wall_holds_on_the_native_runtime_through_its_forwarded_socket() {
    require_image();
    let world = World::new();
    world.install("apple-container");
    world.install("command");
    let binary = stand_in(&world, "shape = \"1.x\"\n");
    let _cleanup = Cleanup(world.root.path().to_path_buf());
    let agent = stet_e2e::repo_root().join("examples/agent/agent.sh");
    // An agent that declares a host: its sandboxes get stet's proxy, and the proof shows,
    // from inside one, the listed listener reached, an unlisted one refused, and nothing
    // there with the proxy variables removed.
    world.repo_config(&format!(
        "[harness]\nprefer = [\"command\"]\n\n[plugins.command]\nimplement = [\"{}\"]\n\
         allow_hosts = [\"api.example.com\"]\n\n\
         [plugins.apple-container]\nbinary = \"{}\"\nskip_platform_check = true\n",
        agent.display(),
        binary.display()
    ));
    let out = world.run_stet(&["walls", "--runtime", "apple-container", "--json"]);
    assert!(!out.stdout.is_empty(), "{}", out.stderr);
    let json = out.json();
    assert_eq!(out.code, 0, "{json:#}\n{}", out.stderr);
    assert_eq!(json["runtime"], "apple-container", "{json:#}");
    for name in ["network-as-launched", "egress-allow-list"] {
        let wall = stet_e2e::wall(&json, name);
        assert_eq!(wall["held"], true, "{wall:#}");
    }
}
