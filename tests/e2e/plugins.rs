//! `stet plugins list` and `stet plugins probe` through the real binary, with the real
//! plugins (the docker plugin against this machine's engine, the claude plugin against the
//! real Claude Code binary) and fixture plugins that misbehave on purpose.

use std::path::Path;

use stet_e2e::{artifacts, plugin_entry, World};

const REAL: [&str; 3] = ["apple-container", "claude", "docker"];

fn install_real(world: &World) {
    for name in REAL {
        world.install(name);
    }
}

#[test]
fn real_plugins_are_listed_from_their_manifests() {
    let world = World::new();
    install_real(&world);
    let out = world.run_stet(&["plugins", "list", "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json = out.json();
    for name in REAL {
        let p = plugin_entry(&json, name);
        assert_eq!(p["status"], "ok", "{p:#}");
        assert_eq!(p["api"], "1.7.0");
        assert_eq!(p["found_in"], "flag");
    }
    assert_eq!(plugin_entry(&json, "docker")["kind"], "runtime");
    assert_eq!(plugin_entry(&json, "claude")["kind"], "harness");
}

#[test]
fn real_plugins_are_probed_and_docker_is_selected_on_this_machine() {
    let world = World::new().with_claude();
    install_real(&world);
    let out = world.run_stet(&["plugins", "probe", "--json"]);
    let json = out.json();

    let docker = plugin_entry(&json, "docker");
    assert_eq!(docker["status"], "available", "{docker:#}");
    let version = docker["probe"]["backend_version"].as_str().unwrap();
    assert!(
        !version.is_empty() && version.chars().any(|c| c.is_ascii_digit()),
        "{version}"
    );

    let apple = plugin_entry(&json, "apple-container");
    assert_eq!(apple["status"], "unavailable");
    assert!(apple["probe"]["reason"]
        .as_str()
        .unwrap()
        .contains("macOS 26 on Apple silicon"));

    let claude = plugin_entry(&json, "claude");
    assert_eq!(claude["status"], "available", "{claude:#}");
    assert_eq!(claude["probe"]["backend_version"], "2.1.332 (Claude Code)");
    // The login is read from the walled profile, as the harness reads it (never the
    // person's own default configuration): a fresh world has no walled profile yet.
    let facts = claude["probe"]["facts"].as_array().unwrap();
    assert!(!facts.iter().any(|f| f["key"] == "login"), "{claude:#}");
    assert_eq!(
        claude["walled_profile"]["said"], "no walled profile yet (stet profile login makes it)",
        "{claude:#}"
    );

    assert_eq!(json["selection"]["runtime"]["chosen"], "docker");
    assert_eq!(json["selection"]["harness"]["chosen"], "claude");
    assert_eq!(out.code, 0, "{}", out.stderr);

    let text = world.run_stet(&["plugins", "probe"]);
    assert_eq!(text.code, 0);
    assert!(
        text.stdout.contains("runtime: docker — "),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("  apple-container unavailable: needs macOS 26 on Apple silicon"),
        "{}",
        text.stdout
    );
}

/// Lays out every broken plugin the issue names, beside a healthy docker plugin.
fn broken_world() -> World {
    let world = World::new();
    world.install("docker");
    for fixture in [
        "fixture-panics",
        "fixture-aborts",
        "fixture-segfaults",
        "fixture-hangs",
        "fixture-not-stet",
        "fixture-api-v2",
        "fixture-layout-mismatch",
    ] {
        world.install(fixture);
    }
    let p = &world.plugins;
    let manifest = |dir: &str, name: &str, library: &str| {
        std::fs::create_dir_all(p.join(dir)).unwrap();
        std::fs::write(
            p.join(dir).join("plugin.toml"),
            format!("name = \"{name}\"\nkind = \"runtime\"\nversion = \"0.1.0\"\napi = \"1.7.0\"\nlibrary = \"{library}\"\n"),
        )
        .unwrap();
    };
    // Not a shared library at all.
    manifest("text-file", "text-file", "lib.so");
    std::fs::write(p.join("text-file/lib.so"), "this is not a library\n").unwrap();
    // A real library cut short.
    manifest("truncated", "truncated", "lib.so");
    let docker_lib = std::fs::read(
        p.join("docker")
            .join(xtask::library_file("stet_plugin_docker")),
    )
    .unwrap();
    std::fs::write(
        p.join("truncated/lib.so"),
        &docker_lib[..docker_lib.len() / 3],
    )
    .unwrap();
    // The manifest says one thing, the library another.
    manifest("liar", "liar", "lib.so");
    std::fs::copy(
        artifacts().join(xtask::library_file("stet_plugin_claude")),
        p.join("liar/lib.so"),
    )
    .unwrap();
    // A manifest that says 1.1 for a library built for 2.0.
    manifest("v2-in-disguise", "v2-in-disguise", "lib.so");
    std::fs::copy(
        artifacts().join(xtask::library_file("stet_fixture_api_v2")),
        p.join("v2-in-disguise/lib.so"),
    )
    .unwrap();
    // A manifest with a syntax error on line 2.
    std::fs::create_dir_all(p.join("bad-syntax")).unwrap();
    std::fs::write(
        p.join("bad-syntax/plugin.toml"),
        "name = \"bad\"\nkind = runtime\n",
    )
    .unwrap();
    // A manifest whose library is missing.
    manifest("no-library", "no-library", "libgone.so");
    // A plugin built for another operating system.
    manifest("other-os", "other-os", "lib.so");
    let other_os = p.join("other-os/plugin.toml");
    let text = std::fs::read_to_string(&other_os).unwrap();
    std::fs::write(&other_os, format!("{text}platforms = [\"windows\"]\n")).unwrap();
    std::fs::write(p.join("other-os/lib.so"), "").unwrap();
    // The same name in a second directory.
    let second = world.root.path().join("second");
    world.install_into("docker", &second);
    world
}

#[test]
fn every_broken_plugin_gets_its_own_message_while_the_others_still_work() {
    let world = broken_world();
    let second = world.root.path().join("second");
    let second_dir = second.to_str().unwrap();
    let out = world.run_stet(&[
        "--plugins-dir",
        second_dir,
        "plugins",
        "probe",
        "--probe-timeout",
        "2s",
        "--json",
    ]);
    let json = out.json();
    let failure = |name: &str| {
        let p = json["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["dir"].as_str().unwrap().ends_with(&format!("/{name}")))
            .unwrap_or_else(|| panic!("{name} missing from {json:#}"));
        serde_json::to_string(p).unwrap()
    };
    let expect = |dir: &str, needles: &[&str]| {
        let p = failure(dir);
        for needle in needles {
            assert!(p.contains(needle), "{dir}: expected {needle:?} in {p}");
        }
    };
    expect(
        "fixture-panics",
        &[
            "\"failed\"",
            "probe panicked: the fixture probe panics on purpose",
        ],
    );
    expect(
        "fixture-aborts",
        &["\"crashed\"", "SIGABRT", "\"stage\":\"probe\""],
    );
    expect(
        "fixture-segfaults",
        &["\"crashed\"", "SIGSEGV", "\"stage\":\"probe\""],
    );
    expect("fixture-hangs", &["\"timed-out\"", "\"limit_ms\":2000"]);
    expect("fixture-not-stet", &["exports no stet root module"]);
    expect(
        "fixture-api-v2",
        &[
            "\"not-probed\"",
            "built for plugin API 2.0.0; this stet speaks plugin API 1.7.0",
        ],
    );
    expect("v2-in-disguise", &["\"failed\"", "plugin v2-in-disguise was built for plugin API 2.0.0; this stet speaks plugin API 1.7.0"]);
    expect("text-file", &["is not a loadable shared library"]);
    expect("truncated", &["the file is truncated"]);
    expect(
        "liar",
        &[
            "the library says harness claude 0.1.0",
            "manifest",
            "says runtime liar 0.1.0",
        ],
    );
    expect(
        "bad-syntax",
        &["\"not-probed\"", "bad-syntax/plugin.toml:2"],
    );
    expect("no-library", &["\"not-probed\"", "libgone.so is missing"]);
    expect(
        "other-os",
        &["\"not-probed\"", "built for windows, not linux"],
    );
    expect(
        "fixture-layout-mismatch",
        &[
            "\"failed\"",
            "its interface layout does not match plugin API 1.1.0 (Error:",
        ],
    );
    // The healthy plugin is still found and selected; its shadowed copy is named.
    assert_eq!(plugin_entry(&json, "docker")["status"], "available");
    let shadow = json["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            p["dir"]
                .as_str()
                .unwrap()
                .starts_with(second.to_str().unwrap())
        })
        .expect("shadowed copy listed");
    assert!(
        shadow["not_probed"]
            .as_str()
            .unwrap()
            .starts_with("shadowed by "),
        "{shadow}"
    );
    assert_eq!(json["selection"]["runtime"]["chosen"], "docker");
    // The probe as a whole was bounded by the hanging plugin's limit, not serialised.
    assert!(
        plugin_entry(&json, "docker")["elapsed_ms"]
            .as_u64()
            .unwrap()
            < 2000
    );
}

#[test]
fn listing_shows_each_status_without_loading_anything() {
    let world = broken_world();
    let second = world.root.path().join("second");
    let out = world.run_stet(&["--plugins-dir", second.to_str().unwrap(), "plugins", "list"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = world.redact(&out.stdout);
    insta::assert_snapshot!("plugins_list_broken", text);
}

#[test]
fn the_long_layout_report_is_shown_only_with_verbose() {
    let world = World::new();
    world.install("fixture-layout-mismatch");
    let quiet = world.run_stet(&["plugins", "probe", "fixture-layout-mismatch"]);
    assert_eq!(quiet.code, 3);
    assert_eq!(
        quiet.stdout.lines().count(),
        2,
        "one line and a hint:\n{}",
        quiet.stdout
    );
    assert!(quiet.stderr.is_empty(), "{}", quiet.stderr);
    let verbose = world.run_stet(&["-v", "plugins", "probe", "fixture-layout-mismatch"]);
    assert!(
        verbose
            .stderr
            .contains("--- fixture-layout-mismatch: details ---"),
        "{}",
        verbose.stderr
    );
    assert!(verbose.stderr.lines().count() > 20, "{}", verbose.stderr);
}

#[test]
fn a_plugin_built_for_1_1_loads_and_works() {
    let world = World::new();
    world.install("fixture-older-minor-1-1");
    let out = world.run_stet(&["plugins", "probe", "fixture-older-minor-1-1", "--json"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let json = out.json();
    let p = plugin_entry(&json, "fixture-older-minor-1-1");
    assert_eq!(p["interface"], "1.1");
    assert_eq!(p["identity"]["api_version"], "1.1.0");
    assert_eq!(p["probe"]["backend_version"], "older-minor backend 1.1");
}

/// A 1.2 plugin is an older member of the append-only v1 line: the host checks the fields it
/// has against its own and calls through v1, whose defaults answer for what 1.2 lacks
/// (every sandbox is made through `start`, which a 1.2 plugin does not have).
#[test]
fn a_plugin_built_for_1_2_loads_through_the_current_line_and_works() {
    let world = World::new();
    world.install("fixture-older-minor-1-2");
    let out = world.run_stet(&["plugins", "probe", "fixture-older-minor-1-2", "--json"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let json = out.json();
    let p = plugin_entry(&json, "fixture-older-minor-1-2");
    assert_eq!(p["interface"], "1.2");
    assert_eq!(p["identity"]["api_version"], "1.2.0");
    assert_eq!(p["probe"]["backend_version"], "older-minor backend 1.2");
    let out = world.run_stet(&[
        "run",
        "--runtime",
        "fixture-older-minor-1-2",
        "--",
        "echo",
        "made through the defaults",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "made through the defaults\n");
}

#[test]
fn older_minor_plugin_loads_and_works() {
    let world = World::new();
    world.install("fixture-older-minor");
    let out = world.run_stet(&["plugins", "probe", "fixture-older-minor", "--json"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let json = out.json();
    let p = plugin_entry(&json, "fixture-older-minor");
    assert_eq!(p["status"], "available");
    assert_eq!(p["interface"], "1.0");
    assert_eq!(p["identity"]["api_version"], "1.0.0");
    assert_eq!(p["probe"]["backend_version"], "older-minor backend 1.0");
}

#[test]
fn preference_order_from_a_trusted_stet_toml_is_honoured_and_unavailable_ones_are_skipped() {
    let world = World::new().with_claude();
    install_real(&world);
    world.install("fixture-older-minor");
    let prefer = "[runtime]\nprefer = [\"apple-container\", \"fixture-older-minor\", \"docker\"]\n";
    // Untrusted, the file's preference chooses nothing, and is named.
    world.repo_config("");
    std::fs::write(world.work.join("stet.toml"), prefer).unwrap();
    let out = world.run_stet(&["plugins", "probe"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("runtime: docker — highest priority reported by the available runtimes (50)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr
            .contains("is not trusted, so these settings in it were ignored: [runtime] prefer;"),
        "{}",
        out.stderr
    );
    // Trusted, it is honoured.
    world.repo_config(prefer);
    let out = world.run_stet(&["plugins", "probe"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("runtime: fixture-older-minor — first available in "),
        "{}",
        out.stdout
    );
    assert!(out
        .stdout
        .contains("stet.toml [runtime] prefer (apple-container, fixture-older-minor, docker)"));
    assert!(out
        .stdout
        .contains("  apple-container unavailable: needs macOS 26"));

    // Without a preference, the highest priority reported by the probes wins.
    world.repo_config("");
    let out = world.run_stet(&["plugins", "probe"]);
    assert!(
        out.stdout
            .contains("runtime: docker — highest priority reported by the available runtimes (50)"),
        "{}",
        out.stdout
    );

    // An explicit choice wins over both.
    let out = world.run_stet(&["plugins", "probe", "--runtime", "fixture-older-minor"]);
    assert!(
        out.stdout
            .contains("runtime: fixture-older-minor — asked for by --runtime"),
        "{}",
        out.stdout
    );
}

#[test]
fn nothing_usable_names_every_reason_and_exits_3() {
    let world = World::new();
    world.install("apple-container");
    world.install("fixture-hangs");
    world.install("claude");
    let out = world.run_stet(&["plugins", "probe", "--probe-timeout", "500ms"]);
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    insta::assert_snapshot!(
        "probe_nothing_usable",
        world.redact(&strip_timings(&out.stdout))
    );

    let asked = world.run_stet(&[
        "plugins",
        "probe",
        "--runtime",
        "apple-container",
        "--probe-timeout",
        "500ms",
    ]);
    assert_eq!(asked.code, 3);
    assert!(
        asked.stdout.contains("runtime: none usable — --runtime asks for apple-container, which is unavailable: needs macOS 26"),
        "{}",
        asked.stdout
    );
}

#[test]
fn config_errors_name_file_line_and_key_and_exit_2() {
    let world = World::new();
    world.install("docker");
    world.repo_config("[runtime]\nprefer = [\"docker\"]\n[probe]\ntimeout = \"5s\"\nretries = 3\n");
    let out = world.run_stet(&["plugins", "probe"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let stderr = world.redact(&out.stderr);
    assert!(
        stderr.contains("work/stet.toml:5: key `probe.retries`: unknown field `retries`"),
        "{stderr}"
    );
    assert!(stderr.contains("hint: "), "{stderr}");

    world.repo_config("");
    let out = world.run_stet(&["plugins", "probe", "--probe-timeout", "soon"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("--probe-timeout: `soon` is not a duration"),
        "{}",
        out.stderr
    );

    let out = world.run(
        world
            .stet(&["plugins", "list"])
            .args(["--plugins-dir", "/nonexistent/stet"]),
    );
    assert_eq!(out.code, 2);
    assert!(out
        .stderr
        .contains("--plugins-dir /nonexistent/stet is not a directory"));
}

#[test]
fn discovery_order_flag_then_env_then_user_data_then_beside_the_executable() {
    let world = World::new();
    let env_dir = world.root.path().join("env-plugins");
    let user_dir = world.root.path().join("home/.local/share/stet/plugins");
    world.install_into("docker", &env_dir);
    world.install_into("docker", &user_dir);
    // The user plugins directory holds what `stet plugins install` put there (its
    // checksums are locked); the shadowed docker copy is never looked at further.
    let source = world.root.path().join("source");
    world.install_into("claude", &source);
    let installed = world.run_stet(&[
        "plugins",
        "install",
        source.join("claude").to_str().unwrap(),
    ]);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    world.install("fixture-older-minor");
    let out = world.run(
        world
            .stet(&["plugins", "list", "--json"])
            .env("STET_PLUGINS_DIR", &env_dir),
    );
    let json = out.json();
    let rows: Vec<(String, String, String)> = json["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["found_in"].as_str().unwrap().to_string(),
                p["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let row = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
    assert_eq!(
        rows,
        [
            row("fixture-older-minor", "flag", "ok"),
            row("docker", "env", "ok"),
            row("claude", "user-data", "ok"),
            row("docker", "user-data", "shadowed"),
        ]
    );
}

#[test]
fn dist_tree_finds_its_plugins_with_no_flags() {
    let world = World::new();
    let dist = world.root.path().join("dist");
    xtask::assemble_dist(&artifacts(), &dist).expect("assemble dist");
    let out = world.run(&mut world.command(
        &dist.join("bin/stet"),
        &["plugins", "list", "--json"],
        false,
    ));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json = out.json();
    for name in REAL {
        let p = plugin_entry(&json, name);
        assert_eq!(p["found_in"], "beside-executable");
        assert_eq!(p["status"], "ok");
        assert!(Path::new(p["dir"].as_str().unwrap()).starts_with(&dist));
    }
}

#[test]
fn help_is_stable() {
    let world = World::new();
    let out = world.run_stet(&["--help"]);
    assert_eq!(out.code, 0);
    insta::assert_snapshot!("help", out.stdout);
    let out = world.run_stet(&["plugins", "probe", "--help"]);
    insta::assert_snapshot!("plugins_probe_help", out.stdout);
}

/// `(12 ms)` varies from run to run.
fn strip_timings(text: &str) -> String {
    text.lines()
        .map(|l| match l.rfind("  (") {
            Some(i) if l.ends_with(" ms)") => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

// A plugin built against a *newer* minor of the SDK: one ahead of this host's, made for the
// test as the next minor of an append-only interface would be (the version bumped, one
// defaulted method appended to the runtime interface).

/// The SDK one minor ahead, under `target/newer-sdk` (where the fixture's manifest looks).
fn newer_sdk() -> std::path::PathBuf {
    static MADE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    MADE.get_or_init(|| {
        let root = stet_e2e::repo_root();
        let sdk = root.join("target/newer-sdk");
        let _ = std::fs::remove_dir_all(&sdk);
        let copy = |from: &Path, to: &Path| {
            let mut pending = vec![(from.to_path_buf(), to.to_path_buf())];
            while let Some((f, t)) = pending.pop() {
                if f.is_dir() {
                    std::fs::create_dir_all(&t).unwrap();
                    for e in std::fs::read_dir(&f).unwrap().flatten() {
                        pending.push((e.path(), t.join(e.file_name())));
                    }
                } else {
                    std::fs::copy(&f, &t).unwrap();
                }
            }
        };
        copy(&root.join("plugin-api/src"), &sdk.join("src"));
        let current = stet_plugin_api_version();
        let manifest = std::fs::read_to_string(root.join("plugin-api/Cargo.toml"))
            .unwrap()
            .replace(&format!("version = \"{current}\""), "version = \"1.8.0\"")
            .replace("edition.workspace = true", "edition = \"2021\"")
            .replace("rust-version.workspace = true\n", "")
            .replace("license.workspace = true\n", "")
            .replace(
                "abi_stable.workspace = true",
                "abi_stable = { version = \"=0.11.3\", default-features = false }",
            );
        assert!(manifest.contains("version = \"1.8.0\""), "{manifest}");
        std::fs::write(sdk.join("Cargo.toml"), format!("{manifest}\n[workspace]\n")).unwrap();
        // The next minor appends a method with a default to the runtime interface.
        let v1 = sdk.join("src/abi/v1.rs");
        let text = std::fs::read_to_string(&v1).unwrap();
        let marker = "    // Next minor: append here, with a default body.";
        let at = text
            .find(marker)
            .expect("the append marker of v1's Runtime");
        let appended =
            "    /// A snapshot of a sandbox. New in 1.8 (the newer-minor fixture's SDK).\n    \
             fn snapshot(&self, sandbox: RStr<'_>) -> RResult<RString, PluginError> {\n        \
             let _ = sandbox;\n        \
             RResult::RErr(PluginError::unsupported(\"no snapshots\"))\n    }\n";
        std::fs::write(&v1, format!("{}{appended}{}", &text[..at], &text[at..])).unwrap();
        sdk
    })
    .clone()
}

/// This repository's plugin-API version.
fn stet_plugin_api_version() -> String {
    let manifest =
        std::fs::read_to_string(stet_e2e::repo_root().join("plugin-api/Cargo.toml")).unwrap();
    manifest
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("plugin-api's version")
        .to_string()
}

/// Builds the newer-minor fixture (with `features`) and lays it out as plugin `name` in
/// the world's plugins directory.
fn install_newer(world: &World, name: &str, features: &[&str]) {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    newer_sdk();
    let root = stet_e2e::repo_root();
    let fixture = root.join("tests/fixtures/newer-minor");
    let target = root.join("target/newer-minor");
    let mut build = std::process::Command::new(env!("CARGO"));
    build
        .args(["build", "--manifest-path"])
        .arg(fixture.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target);
    if !features.is_empty() {
        build.args(["--features", &features.join(",")]);
    }
    let out = build.output().expect("run cargo");
    assert!(
        out.status.success(),
        "building the newer-minor fixture:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = world.plugins.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let library = "libstet_fixture_newer_minor.so";
    std::fs::copy(target.join("debug").join(library), dir.join(library)).unwrap();
    let manifest = std::fs::read_to_string(fixture.join("plugin.toml.in"))
        .unwrap()
        .replace("\"NAME\"", &format!("\"{name}\""));
    std::fs::write(dir.join("plugin.toml"), manifest).unwrap();
}

#[test]
fn a_newer_minor_plugin_that_needs_nothing_new_loads_and_answers() {
    let world = World::new();
    install_newer(&world, "fixture-newer-minor", &[]);
    let out = world.run_stet(&["plugins", "probe", "fixture-newer-minor", "--json"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let json = out.json();
    let p = plugin_entry(&json, "fixture-newer-minor");
    assert_eq!(p["status"], "available", "{p:#}");
    assert_eq!(p["interface"], "1.8");
    assert_eq!(p["identity"]["api_version"], "1.8.0");
    assert_eq!(p["probe"]["backend_version"], "newer-minor backend 1.8");
}

#[test]
fn a_newer_minor_plugin_needing_what_this_host_lacks_is_refused_naming_both_versions() {
    let world = World::new();
    install_newer(&world, "fixture-newer-minor-needy", &["needs-newer-host"]);
    let out = world.run_stet(&["plugins", "probe", "fixture-newer-minor-needy"]);
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    let line = format!(
        "plugin fixture-newer-minor-needy was built for plugin API 1.8.0 and needs `snapshots` of the host, which this stet (plugin API {}) does not have",
        stet_plugin_api_version()
    );
    assert!(
        out.stdout.contains(&line) || out.stderr.contains(&line),
        "{}{}",
        out.stdout,
        out.stderr
    );
}

/// With `--runtime X` only X is probed: a runtime elsewhere on the path whose probe hangs
/// costs nothing and is never mentioned.
#[test]
fn an_explicit_runtime_is_the_only_one_probed() {
    stet_e2e::require_image();
    let world = World::new();
    world.install("docker");
    world.install("fixture-hangs");
    let out = world.run_stet(&["-v", "run", "--runtime", "docker", "--", "true"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("runtime: docker"), "{}", out.stderr);
    assert!(!out.stderr.contains("hangs"), "{}", out.stderr);
    // Without it, the hanging one is probed, and its time limit named.
    let out = world.run_stet(&["-v", "run", "--probe-timeout", "300ms", "--", "true"]);
    assert!(out.stderr.contains("hangs"), "{}", out.stderr);
}
