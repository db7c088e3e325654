//! Setting a repository up and checking it, as a new user would, through the real binary:
//! `stet init` writes a commented stet.toml and the queue directory; `stet doctor` checks
//! every precondition of a drive in one pass, against the real Docker runtime, the lane
//! image and a bare remote.

use std::path::{Path, PathBuf};

use stet_e2e::{git, require_image, World};

fn stand_in() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("agents/stand-in.sh")
}

/// A clone of a fresh bare remote with docker and the command harness installed, the
/// harness configured (in the person's own config) to run the stand-in agent.
fn world() -> World {
    require_image();
    let world = World::new();
    world.install("docker");
    world.install("command");
    world.clone_of_fresh_remote();
    let config = world.root.path().join("home/.config/stet");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "[plugins.command]\nimplement = [\"{}\"]\n",
            stand_in().display()
        ),
    )
    .unwrap();
    world
}

fn check<'a>(json: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {json:#}"))
}

#[test]
fn init_writes_a_commented_config_with_what_it_found_and_refuses_to_overwrite() {
    let world = world();
    std::fs::write(world.work.join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
    let out = world.run_stet(&["init"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let text = std::fs::read_to_string(world.work.join("stet.toml")).unwrap();
    assert!(
        text.contains("# Found by stet init: command 0.1.0"),
        "{text}"
    );
    assert!(text.contains("prefer = [\"command\"]"), "{text}");
    assert!(
        text.contains("# Found by stet init: docker 0.1.0"),
        "{text}"
    );
    // The check needs cargo, which the lane image lacks: an image made for it, never an
    // image and a check that cannot run together.
    assert!(text.contains("image = \"stet-lane-rust:1\""), "{text}");
    let recipe = std::fs::read_to_string(world.work.join(".stet/Containerfile")).unwrap();
    assert!(recipe.contains("\nFROM stet-lane:1\n"), "{recipe}");
    assert!(text.contains("Guessed from Cargo.toml"), "{text}");
    assert!(
        text.contains("check = \"CARGO_HOME=/stet-lane/.cargo-home cargo test --offline\""),
        "{text}"
    );
    assert!(
        text.contains("setup_outputs = [\"target\", \".cargo-home\"]"),
        "{text}"
    );
    assert!(world.work.join(".stet/queue/.gitkeep").is_file());
    assert!(
        out.stdout
            .contains("  check: CARGO_HOME=/stet-lane/.cargo-home cargo test --offline (guessed from Cargo.toml)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("git add stet.toml .stet/queue/.gitkeep .stet/Containerfile && git commit"),
        "{}",
        out.stdout
    );
    // What it wrote is a configuration stet reads: the queue and the drive take it.
    let queue = world.run_stet(&["add", "Do a thing"]);
    assert_eq!(queue.code, 0, "{}", queue.stderr);
    let listed = world.run_stet(&["queue"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(listed.stdout.contains("Do a thing"), "{}", listed.stdout);
    // Never over a file that is there.
    let before = std::fs::read(world.work.join("stet.toml")).unwrap();
    let again = world.run_stet(&["init"]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert!(
        again.stderr.contains(&format!(
            "{} already exists; stet init writes one only where there is none",
            world.work.join("stet.toml").display()
        )),
        "{}",
        again.stderr
    );
    assert_eq!(std::fs::read(world.work.join("stet.toml")).unwrap(), before);
}

/// What `stet init` wrote is trusted as written, in this clone: its harness and runtime
/// preferences apply at once, with nothing ignored; an edit makes it untrusted as any
/// other, and what it then ignores is named.
#[test]
fn a_stet_toml_that_init_wrote_is_trusted_until_it_is_edited() {
    let world = world();
    let out = world.run_stet(&["init"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("  trusted as written"),
        "{}",
        out.stdout
    );
    let path = world.work.join("stet.toml");
    let doctor = world.run_stet(&["doctor", "--json"]);
    let json = doctor.json();
    assert_eq!(doctor.code, 0, "{json:#}\n{}", doctor.stderr);
    assert_eq!(
        check(&json, "config")["detail"],
        format!("{} is trusted as it is: all of it applies", path.display())
    );
    assert!(!doctor.stderr.contains("not trusted"), "{}", doctor.stderr);
    // The drive's choice is the file's preference.
    let probe = world.run_stet(&["plugins", "probe"]);
    assert!(
        probe
            .stdout
            .contains("harness: command — first available in ")
            && probe
                .stdout
                .contains("stet.toml [harness] prefer (command)"),
        "{}",
        probe.stdout
    );

    // Any edit, and it is a file nobody trusted.
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("# an edit\n");
    std::fs::write(&path, text).unwrap();
    let doctor = world.run_stet(&["doctor", "--json"]);
    let json = doctor.json();
    assert_eq!(
        check(&json, "config")["detail"],
        format!(
            "{} is not trusted, so ignored: [runtime] prefer, [harness] prefer; stet trust applies them (after reading it)",
            path.display()
        )
    );
    assert!(
        doctor.stderr.contains(
            "is not trusted, so these settings in it were ignored: [runtime] prefer, [harness] prefer;"
        ),
        "{}",
        doctor.stderr
    );
    let text = world.run_stet(&["doctor"]);
    assert!(
        text.stdout.contains("config ") && text.stdout.contains("is not trusted, so ignored"),
        "{}",
        text.stdout
    );
}

#[test]
fn init_outside_a_repository_says_so() {
    let world = World::new();
    let out = world.run_stet(&["init"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("is not inside a git repository"),
        "{}",
        out.stderr
    );
    assert!(!world.work.join("stet.toml").exists());
}

#[test]
fn doctor_passes_where_a_drive_could_start_and_names_each_missing_piece() {
    let world = world();
    let out = world.run_stet(&["doctor", "--json"]);
    let json = out.json();
    assert_eq!(out.code, 0, "{json:#}\n{}", out.stderr);
    assert_eq!(json["schema"], 1);
    assert_eq!(json["ready"], true);
    for name in [
        "git",
        "repository",
        "remote",
        "runtime",
        "image",
        "image-sh",
        "image-git",
        "image-agent",
        "harness",
        "profile",
        "disk",
    ] {
        assert_eq!(check(&json, name)["ok"], true, "{name}: {json:#}");
    }
    assert!(
        check(&json, "remote")["detail"]
            .as_str()
            .unwrap()
            .contains("takes pushes"),
        "{json:#}"
    );
    // The runtime with its engine, as its probe said it (version, endpoint).
    let runtime = check(&json, "runtime")["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(runtime.starts_with("docker 0.1.0: "), "{runtime}");
    assert!(runtime.contains("endpoint "), "{runtime}");
    // The probe ref is gone again.
    let refs = git(
        &world.root.path().join("remote.git"),
        &["for-each-ref", "refs/stet"],
    );
    assert!(refs.is_empty(), "{refs}");
    let text = world.run_stet(&["doctor"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout.ends_with("a drive could start here\n"),
        "{}",
        text.stdout
    );

    // A check the image cannot run, a remote that is gone, an image that is not there.
    std::fs::write(
        world.work.join("stet.toml"),
        "[drive]\ncheck = \"cargo test\"\n",
    )
    .unwrap();
    let out = world.run_stet(&["doctor", "--json"]);
    let json = out.json();
    assert_eq!(out.code, 3, "{json:#}");
    let c = check(&json, "image-check");
    assert_eq!(c["ok"], false, "{json:#}");
    assert_eq!(
        c["detail"],
        "stet-lane:1 lacks cargo, which the check `cargo test` runs"
    );
    assert!(
        c["remedy"].as_str().unwrap().contains("Your own image"),
        "{c:#}"
    );
    git(
        &world.work,
        &["remote", "set-url", "origin", "/nonexistent/remote.git"],
    );
    let json = world.run_stet(&["doctor", "--json"]).json();
    let c = check(&json, "remote");
    assert_eq!(c["ok"], false, "{json:#}");
    assert!(
        c["detail"].as_str().unwrap().contains("does not answer"),
        "{c:#}"
    );
    std::fs::write(
        world.work.join("stet.toml"),
        "[sandbox]\nimage = \"stet-no-such-image:0\"\n",
    )
    .unwrap();
    let text = world.run_stet(&["doctor"]);
    assert_eq!(text.code, 3);
    assert!(
        text.stdout.contains("FAIL image")
            && text
                .stdout
                .contains("stet-no-such-image:0 is not available to docker"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("problems stop a drive here"),
        "{}",
        text.stdout
    );
}

#[test]
fn doctor_names_an_agent_whose_interpreter_the_image_lacks() {
    let world = world();
    let agent = world.root.path().join("agent.js");
    stet_exec_support::write_executable(&agent, b"#!/usr/bin/env node\nconsole.log(1)\n").unwrap();
    let config = world.root.path().join("home/.config/stet/config.toml");
    std::fs::write(
        &config,
        format!("[plugins.command]\nimplement = [\"{}\"]\n", agent.display()),
    )
    .unwrap();
    let json = world.run_stet(&["doctor", "--json"]).json();
    let c = check(&json, "image-agent");
    assert_eq!(c["ok"], false, "{json:#}");
    assert!(
        c["detail"]
            .as_str()
            .unwrap()
            .starts_with("stet-lane:1 lacks node, which runs "),
        "{c:#}"
    );
    assert_eq!(json["ready"], false);
}

/// A drive whose check's program (or whose agent's interpreter) the image lacks refuses
/// before consent, by the look `stet doctor` takes, naming the image, the program and
/// what to do — before any agent is asked anything: no receipt, no reservation, no call.
#[test]
fn a_drive_refuses_before_any_call_when_the_image_lacks_the_checks_program_or_the_agents_interpreter(
) {
    let world = world();
    std::fs::write(
        world.work.join("stet.toml"),
        "[drive]\ncheck = \"python3 -m pytest\"\n",
    )
    .unwrap();
    let added = world.run_stet(&["add", "Mark it done\n\nfile: DONE"]);
    assert_eq!(added.code, 0, "{}", added.stderr);
    git(&world.work, &["add", "stet.toml", ".stet"]);
    git(&world.work, &["commit", "--quiet", "-m", "queue"]);
    git(&world.work, &["push", "--quiet", "origin", "HEAD"]);
    let nothing_happened = |world: &World| {
        let receipts = world.work.join(".git/stet/receipts");
        let written = std::fs::read_dir(&receipts)
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.path().is_file())
                    .count()
            })
            .unwrap_or(0);
        assert_eq!(written, 0, "no receipt is written");
        let refs = stet_e2e::drive_records(&world.root.path().join("remote.git"));
        assert!(refs.is_empty(), "nothing reserved: {refs}");
    };
    let out = world.run_stet(&["drive", "--yes"]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("error: the image stet-lane:1 cannot run this drive; nothing was reserved"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(
            "stet-lane:1 lacks python3 with the module pytest, which the check `python3 -m pytest` runs"
        ),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("hint: use an image with"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("drive?"),
        "refused before consent: {}",
        out.stderr
    );
    nothing_happened(&world);

    // An agent whose interpreter the image lacks: named the same way.
    std::fs::write(world.work.join("stet.toml"), "").unwrap();
    let agent = world.root.path().join("agent.js");
    stet_exec_support::write_executable(&agent, b"#!/usr/bin/env node\nconsole.log(1)\n").unwrap();
    std::fs::write(
        world.root.path().join("home/.config/stet/config.toml"),
        format!("[plugins.command]\nimplement = [\"{}\"]\n", agent.display()),
    )
    .unwrap();
    let out = world.run_stet(&["drive", "--yes"]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr.contains("stet-lane:1 lacks node, which runs ")
            && out.stderr.contains("so the agent cannot start inside it"),
        "{}",
        out.stderr
    );
    nothing_happened(&world);
}

/// An image built for the test and removed after it.
struct OwnImage(String);

impl Drop for OwnImage {
    fn drop(&mut self) {
        let _ = std::process::Command::new("docker")
            .args(["image", "rm", "--force", &self.0])
            .output();
    }
}

#[test]
fn a_drive_runs_its_check_in_your_own_image_with_the_tool_the_lane_image_lacks() {
    let world = world();
    // "Your own image", as docs/configuration.md's recipe makes one: FROM an image you
    // have (here the lane image itself), adding what the check needs.
    let context = world.root.path().join("image");
    std::fs::create_dir_all(&context).unwrap();
    stet_exec_support::write_executable(
        &context.join("lanecheck"),
        b"#!/bin/sh\n# The project's own check tool: the lane must hold a non-empty DONE.\ntest -s DONE || { echo 'lanecheck: DONE is missing' >&2; exit 1; }\necho 'lanecheck: ok'\n",
    )
    .unwrap();
    std::fs::write(
        context.join("Dockerfile"),
        // A dev image's entrypoint and user, which stet must not run as or through.
        format!(
            "FROM {}\nCOPY lanecheck /usr/local/bin/lanecheck\nENTRYPOINT [\"/bin/false\"]\nUSER 4242\n",
            stet_e2e::IMAGE
        ),
    )
    .unwrap();
    let image = OwnImage(format!("stet-e2e-own-image:{}", std::process::id()));
    let built = std::process::Command::new("docker")
        .args(["build", "--quiet", "--tag", &image.0])
        .arg(&context)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );

    std::fs::write(
        world.work.join("stet.toml"),
        "[drive]\ncheck = \"lanecheck\"\n",
    )
    .unwrap();
    // The lane image lacks the tool: doctor says so before any drive.
    let json = world.run_stet(&["doctor", "--json"]).json();
    assert_eq!(check(&json, "image-check")["ok"], false, "{json:#}");
    // Your own image has it.
    std::fs::write(
        world.work.join("stet.toml"),
        format!(
            "[sandbox]\nimage = \"{}\"\n\n[drive]\ncheck = \"lanecheck\"\n",
            image.0
        ),
    )
    .unwrap();
    let json = world.run_stet(&["doctor", "--json"]).json();
    assert_eq!(check(&json, "image-check")["ok"], true, "{json:#}");
    assert_eq!(json["ready"], true, "{json:#}");

    let added = world.run_stet(&["add", "Mark it done\n\nfile: DONE"]);
    assert_eq!(added.code, 0, "{}", added.stderr);
    git(&world.work, &["add", "stet.toml", ".stet"]);
    git(&world.work, &["commit", "--quiet", "-m", "queue"]);
    git(&world.work, &["push", "--quiet", "origin", "HEAD"]);
    let out = world.run_stet(&["drive", "--yes"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("the check `lanecheck` passed"),
        "{}",
        out.stderr
    );
}

/// What the stand-in `gh` was called with, call by call.
fn gh_calls(world: &World) -> Vec<Vec<String>> {
    let state = world.root.path().join("home/gh-stand-in");
    let mut calls: Vec<(usize, Vec<String>)> = std::fs::read_dir(&state)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let n: usize = name.strip_prefix("call.")?.parse().ok()?;
                    let bytes = std::fs::read(e.path()).ok()?;
                    let args = bytes
                        .split(|b| *b == 0)
                        .filter(|a| !a.is_empty())
                        .map(|a| String::from_utf8_lossy(a).into_owned())
                        .collect();
                    Some((n, args))
                })
                .collect()
        })
        .unwrap_or_default();
    calls.sort();
    calls.into_iter().map(|(_, args)| args).collect()
}

fn after<'a>(args: &'a [String], option: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == option)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

#[test]
fn landing_on_github_opens_a_pull_request_once_and_commits_are_the_persons() {
    let mut world = world();
    world
        .path_prefix
        .push(Path::new(env!("CARGO_MANIFEST_DIR")).join("stand-ins"));
    let config = world.root.path().join("home/.config/stet/config.toml");
    std::fs::write(
        &config,
        format!(
            "[plugins.command]\nimplement = [\"{}\"]\n\n[drive]\nland = \"github\"\n",
            stand_in().display()
        ),
    )
    .unwrap();
    git(&world.work, &["config", "user.name", "Pat Person"]);
    git(&world.work, &["config", "user.email", "pat@example.com"]);
    for item in [
        "Fix the first thing\n\nThe first thing is broken.\nfile: FIRST",
        "Fix the second thing\n\nfile: SECOND",
    ] {
        let added = world.run_stet(&["add", item]);
        assert_eq!(added.code, 0, "{}", added.stderr);
        stet_e2e::next_millisecond();
    }
    git(&world.work, &["add", ".stet"]);
    git(&world.work, &["commit", "--quiet", "-m", "queue"]);
    git(&world.work, &["push", "--quiet", "origin", "HEAD"]);
    let base = git(&world.work, &["symbolic-ref", "--short", "HEAD"]);
    let ids: Vec<String> = {
        let mut ids: Vec<String> = std::fs::read_dir(world.work.join(".stet/queue"))
            .unwrap()
            .filter_map(|e| {
                e.unwrap()
                    .file_name()
                    .to_string_lossy()
                    .strip_suffix(".md")
                    .map(str::to_string)
            })
            .collect();
        ids.sort();
        ids
    };
    // The second item's branch has a pull request open already (a landing cut short).
    let state = world.root.path().join("home/gh-stand-in");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(
        state.join("open"),
        format!("stet/{} https://github.test/owner/repo/pull/7\n", ids[1]),
    )
    .unwrap();

    let out = world.run_stet(&["drive", "--yes"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "{}: opened pull request https://github.test/owner/repo/pull/2",
            ids[0]
        )),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(&format!(
            "{}: pull request https://github.test/owner/repo/pull/7 was open for stet/{} already",
            ids[1], ids[1]
        )),
        "{}",
        out.stderr
    );
    let calls = gh_calls(&world);
    let creates: Vec<&Vec<String>> = calls
        .iter()
        .filter(|c| c[..2] == ["pr", "create"])
        .collect();
    assert_eq!(creates.len(), 1, "{calls:#?}");
    let create = creates[0];
    assert_eq!(
        after(create, "--head"),
        Some(format!("stet/{}", ids[0]).as_str())
    );
    assert_eq!(after(create, "--title"), Some("Fix the first thing"));
    assert_eq!(after(create, "--base"), Some(base.trim()));
    let body = after(create, "--body").unwrap();
    assert!(body.starts_with("The first thing is broken."), "{body}");
    assert!(body.contains("Landed by stet from `.stet/queue/"), "{body}");
    assert!(body.contains("| 1 | implement | done |"), "{body}");
    assert!(body.contains(", no check."), "{body}");

    // The lane's commit is the person's, committed by stet, with the agent and the receipt.
    let remote = world.root.path().join("remote.git");
    let log = git(
        &remote,
        &[
            "log",
            "-1",
            "--format=%an <%ae>|%cn|%B",
            &format!("stet/{}", ids[0]),
        ],
    );
    let (who, rest) = log.split_once('|').unwrap();
    assert_eq!(who, "Pat Person <pat@example.com>");
    let (committer, message) = rest.split_once('|').unwrap();
    assert_eq!(committer, "stet");
    assert!(
        message.contains("\nStet-Agent: command 0.1.0\nStet-Receipt: "),
        "{message}"
    );
}

/// A world whose drives land on GitHub through the stand-in `gh`, with `drive_extra` in
/// the person's `[drive]` section; one item queued and pushed, its id returned.
fn github_world(drive_extra: &str) -> (World, String) {
    let mut world = world();
    world
        .path_prefix
        .push(Path::new(env!("CARGO_MANIFEST_DIR")).join("stand-ins"));
    std::fs::write(
        world.root.path().join("home/.config/stet/config.toml"),
        format!(
            "[plugins.command]\nimplement = [\"{}\"]\n\n[drive]\nland = \"github\"\n{drive_extra}",
            stand_in().display()
        ),
    )
    .unwrap();
    let added = world.run_stet(&["add", "Fix the thing\n\nfile: FIXED"]);
    assert_eq!(added.code, 0, "{}", added.stderr);
    git(&world.work, &["add", ".stet"]);
    git(&world.work, &["commit", "--quiet", "-m", "queue"]);
    git(&world.work, &["push", "--quiet", "origin", "HEAD"]);
    let id = world.run_stet(&["queue", "--json"]).json()["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    (world, id)
}

#[test]
fn a_pull_request_not_opened_fails_the_land_step_visibly_and_stet_land_opens_it() {
    let (world, id) = github_world("");
    let state = world.root.path().join("home/gh-stand-in");
    std::fs::create_dir_all(&state).unwrap();
    // gh's own words when the login may not open pull requests.
    std::fs::write(
        state.join("fail"),
        "pull request create failed: GraphQL: Resource not accessible by integration (createPullRequest)\n",
    )
    .unwrap();
    // doctor checks gh's login, and says what to do when it is not.
    let doctor = world.run_stet(&["doctor", "--json"]).json();
    assert_eq!(check(&doctor, "pull requests")["ok"], true, "{doctor:#}");
    std::fs::write(state.join("logged-out"), "").unwrap();
    let doctor = world.run_stet(&["doctor", "--json"]).json();
    let gh = check(&doctor, "pull requests");
    assert_eq!(gh["ok"], false, "{doctor:#}");
    assert!(
        gh["detail"].as_str().unwrap().contains("not logged in"),
        "{doctor:#}"
    );
    assert!(
        gh["remedy"].as_str().unwrap().contains("gh auth login"),
        "{doctor:#}"
    );
    std::fs::remove_file(state.join("logged-out")).unwrap();

    let out = world.run_stet(&["drive", "--yes"]);
    // The consent screen said where pull requests go.
    assert!(
        out.stderr
            .contains("  land:     a pull request per landed lane, opened with gh in "),
        "{}",
        out.stderr
    );
    // The work ran and is not done: 4, as for an item given up.
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "{id}: landed on origin as stet/{id}, pull request not opened: gh pr create failed (exit status: 1): pull request create failed: GraphQL: Resource not accessible by integration (createPullRequest); the branch is kept (stet land {} makes the land step again)", &id[20..]
        )),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("landed 1, 1 item without its land step"),
        "{}",
        out.stderr
    );
    // The branch is kept on the remote; the item's record says why.
    let remote = world.root.path().join("remote.git");
    assert!(!git(
        &remote,
        &["rev-parse", "--verify", &format!("refs/heads/stet/{id}")]
    )
    .trim()
    .is_empty());
    let item = &world.run_stet(&["queue", "--json"]).json()["items"][0];
    assert_eq!(item["state"], "landed", "{item:#}");
    assert_eq!(item["pull_request"], serde_json::Value::Null, "{item:#}");
    assert!(
        item["land_failed"]
            .as_str()
            .unwrap()
            .starts_with("pull request not opened: gh pr create failed"),
        "{item:#}"
    );
    let shown = world.run_stet(&["show", &id]);
    assert!(
        shown.stdout.contains(&format!(
            "state: landed — stet/{id}, pull request not opened: gh pr create failed"
        )),
        "{}",
        shown.stdout
    );

    // Failing again: exit 4, the record still says why.
    let again = world.run_stet(&["land", &id]);
    assert_eq!(again.code, 4, "{}", again.stderr);
    assert!(
        again.stderr.contains("pull request not opened"),
        "{}",
        again.stderr
    );
    let create = gh_calls(&world)
        .into_iter()
        .rfind(|c| c[..2] == ["pr", "create"])
        .unwrap();
    assert_eq!(
        after(&create, "--head"),
        Some(format!("stet/{id}").as_str())
    );
    assert_eq!(after(&create, "--repo"), None);

    // Mended: `stet land` opens it and the record keeps its address.
    std::fs::remove_file(state.join("fail")).unwrap();
    let landed = world.run_stet(&["land", &id]);
    assert_eq!(landed.code, 0, "{}", landed.stderr);
    let url = "https://github.test/owner/repo/pull/1";
    assert_eq!(landed.stdout, format!("{id}: opened pull request {url}\n"));
    let item = &world.run_stet(&["queue", "--json"]).json()["items"][0];
    assert_eq!(item["pull_request"], url, "{item:#}");
    assert!(item.get("land_failed").is_none(), "{item:#}");
    assert_eq!(
        world.run_stet(&["show", "--json", &id]).json()["pull_request"],
        url
    );
    let queue = world.run_stet(&["queue"]);
    assert!(
        queue
            .stdout
            .contains(&format!("stet/{id}, pull request {url}")),
        "{}",
        queue.stdout
    );
    // Asked again: already so.
    let twice = world.run_stet(&["land", &id]);
    assert_eq!(twice.code, 0, "{}", twice.stderr);
    assert_eq!(
        twice.stdout,
        format!("{id}: its pull request is {url} already\n")
    );
    let json = world.run_stet(&["land", "--json", &id]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    let json = json.json();
    assert_eq!(
        (&json["done"], &json["pull_request"]),
        (&"already".into(), &url.into()),
        "{json}"
    );
}

#[test]
fn a_forks_pull_request_is_opened_in_the_base_repository_with_an_owner_head() {
    let (world, id) = github_world("pull_request_repo = \"upstream/project\"\n");
    let out = world.run_stet(&["drive", "--yes"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("opened with gh in upstream/project (from the fork "),
        "{}",
        out.stderr
    );
    // The push remote's owner: the directory holding it, for a remote given by its path.
    let owner = world
        .root
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let calls = gh_calls(&world);
    let list = calls.iter().find(|c| c[..2] == ["pr", "list"]).unwrap();
    assert_eq!(after(list, "--repo"), Some("upstream/project"));
    assert_eq!(after(list, "--head"), Some(format!("stet/{id}").as_str()));
    let create = calls.iter().find(|c| c[..2] == ["pr", "create"]).unwrap();
    assert_eq!(after(create, "--repo"), Some("upstream/project"));
    assert_eq!(
        after(create, "--head"),
        Some(format!("{owner}:stet/{id}").as_str())
    );
    let item = &world.run_stet(&["queue", "--json"]).json()["items"][0];
    assert_eq!(
        item["pull_request"], "https://github.test/upstream/project/pull/1",
        "{item:#}"
    );
    // A second landing of the same branch finds it by the fork's owner.
    let land = world.run_stet(&["land", &id]);
    assert_eq!(land.code, 0, "{}", land.stderr);
    assert!(land.stdout.contains("already"), "{}", land.stdout);
}

/// Waits until the implement call of `id` (an item saying `implement: until GO`) runs and
/// waits for its gate: its log says so. An event, not a time: the drive is at that point.
fn waiting_for_go(world: &World, id: &str) {
    let started = std::time::Instant::now();
    loop {
        let out = world.run_stet(&["log", id]);
        if out.code == 0 && out.stdout.contains("stand-in: waiting for GO") {
            return;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "the call never started: {}",
            out.stderr
        );
        std::thread::yield_now();
    }
}

/// Queues `items` (committed and pushed) in `world`; returns their ids in order.
fn queue(world: &World, items: &[&str]) -> Vec<String> {
    let mut ids = Vec::new();
    for item in items {
        let added = world.run_stet(&["add", "--json", item]);
        assert_eq!(added.code, 0, "{}", added.stderr);
        ids.push(added.json()["id"].as_str().unwrap().to_string());
        stet_e2e::next_millisecond();
    }
    git(&world.work, &["add", "-A"]);
    git(&world.work, &["commit", "--quiet", "-m", "queue"]);
    git(&world.work, &["push", "--quiet", "origin", "HEAD"]);
    ids
}

#[test]
fn show_tells_an_items_story_round_by_round_by_any_unique_start_of_its_id() {
    let world = world();
    let config = world.root.path().join("home/.config/stet/config.toml");
    std::fs::write(
        &config,
        format!(
            "[plugins.command]\nimplement = [\"{}\"]\n\n[drive]\ncheck = \"echo checking TWICE; test -s TWICE\"\n",
            stand_in().display()
        ),
    )
    .unwrap();
    let ids = queue(
        &world,
        &[
            "Say it twice\n\nfile: TWICE\nreview: revise-once",
            "Another\n\nfile: OTHER",
        ],
    );
    let out = world.run_stet(&["drive", "--yes", "--cap", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);

    // Both ids start alike: a short start names both, and is refused, listing them.
    let common: String = ids[0]
        .chars()
        .zip(ids[1].chars())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a)
        .collect();
    let ambiguous = world.run_stet(&["show", &common]);
    assert_eq!(ambiguous.code, 2, "{}", ambiguous.stderr);
    assert!(
        ambiguous.stderr.contains(&format!(
            "`{common}` names 2 items: say-twice ({}), another ({})",
            ids[0], ids[1]
        )),
        "{}",
        ambiguous.stderr
    );
    let unique = &ids[0][..common.len() + 1];
    let text = world.run_stet(&["show", unique]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    let shown = &text.stdout;
    assert!(
        shown.starts_with(&format!(
            "{}  Say it twice\nhandle: say-twice\nstate: landed — stet/{}\n",
            ids[0], ids[0]
        )),
        "{shown}"
    );
    assert!(shown.contains("\nround 1\n  implement done"), "{shown}");
    assert!(shown.contains("\nround 2\n"), "{shown}");
    // The reviewer's words, and the check's output.
    assert!(
        shown.contains("      REVISE\n      Say it twice."),
        "{shown}"
    );
    assert!(shown.contains("      │ checking TWICE"), "{shown}");
    assert!(
        shown.contains(&format!(
            "stet/{} against its base (stet show --diff",
            ids[0]
        )),
        "{shown}"
    );
    assert!(shown.contains(" TWICE | 2 ++"), "{shown}");
    let json = world.run_stet(&["show", unique, "--json"]).json();
    assert_eq!(json["schema"], 1);
    assert_eq!(json["state"], "landed");
    let roles: Vec<&str> = json["rounds"][0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["implement", "check", "review"]);
    let diff = world.run_stet(&["show", unique, "--diff"]);
    assert!(diff.stdout.contains("+Say it twice"), "{}", diff.stdout);
    // The item not yet worked: no call, no lane.
    let other = world.run_stet(&["show", &ids[1]]);
    assert_eq!(other.code, 0, "{}", other.stderr);
    assert!(other.stdout.contains("state: open\n"), "{}", other.stdout);
    assert!(
        other
            .stdout
            .contains("no call of this item on this clone yet"),
        "{}",
        other.stdout
    );
    assert!(
        other.stdout.contains(&format!(
            "the lane's branch stet/{} is neither on this clone nor on origin",
            ids[1]
        )),
        "{}",
        other.stdout
    );
    // Retry takes a start of an id too.
    let retry = world.run_stet(&["retry", &ids[1][..common.len() + 1]]);
    assert_eq!(retry.code, 0, "{}", retry.stderr);
    assert!(
        retry.stdout.contains(&format!(
            "{} is neither failed nor cancelled already",
            ids[1]
        )),
        "{}",
        retry.stdout
    );
}

#[test]
fn log_prints_the_latest_call_and_follows_the_items_calls_while_a_drive_works_it() {
    let world = world();
    let ids = queue(
        &world,
        &["Wait for it\n\nfile: WAITED\nimplement: until GO"],
    );
    let id = &ids[0];
    let nothing = world.run_stet(&["log", id]);
    assert_eq!(nothing.code, 2, "{}", nothing.stderr);
    assert!(
        nothing
            .stderr
            .contains("has no agent call on this clone yet"),
        "{}",
        nothing.stderr
    );

    let drive = world
        .stet(&["drive", "--yes"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The implement call is running (it waits for GO): its receipt exists and says so.
    let gate = world.work.join(format!(".git/stet/lanes/{id}/work/GO"));
    waiting_for_go(&world, id);
    // While the drive works it, status says so (not that a next drive takes it up).
    let status = world.run_stet(&["status"]);
    assert!(
        status
            .stdout
            .contains(&format!("  stet/{id} — being worked by ")),
        "{}",
        status.stdout
    );
    assert!(
        !status.stdout.contains("next stet drive"),
        "{}",
        status.stdout
    );
    let mut follow = world
        .stet(&["log", &id[..12], "-f"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Let the agent go on only once the follower is attached: its header is out.
    let mut stderr = std::io::BufReader::new(follow.stderr.take().unwrap());
    let mut header = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut header).unwrap();
    assert!(
        header.starts_with(&format!("── {id} · implement · round 1 · receipt ")),
        "{header}"
    );
    std::fs::write(&gate, "").unwrap();
    let followed = stet_e2e::Output::finish(follow);
    let drove = stet_e2e::Output::finish(drive);
    assert_eq!(drove.code, 0);
    assert_eq!(followed.code, 0, "{}", followed.stderr);
    // The implement call's output as it came, then the review's: every call of the item.
    let out = &followed.stdout;
    let waited = out
        .find("stand-in: waiting for GO")
        .unwrap_or_else(|| panic!("{out}"));
    let wrote = out.find("wrote WAITED").unwrap_or_else(|| panic!("{out}"));
    let landed = out.find("LAND").unwrap_or_else(|| panic!("{out}"));
    assert!(waited < wrote && wrote < landed, "{out}");
    // Once the drive is done, the latest call alone: the review.
    let last = world.run_stet(&["log", id]);
    assert_eq!(last.stdout.trim(), "LAND", "{}", last.stdout);
}

/// `log -f` on an item no call has reached yet waits while the drive on this clone works
/// another, then follows the item's calls from its first; the call's standard error comes
/// after its output, labelled, on standard error.
#[test]
fn log_follow_waits_for_an_items_first_call_while_a_drive_runs_here() {
    let world = world();
    let ids = queue(
        &world,
        &[
            "Wait for it\n\nfile: WAITED\nimplement: until GO",
            "Then this\n\nfile: THEN",
        ],
    );
    let drive = world
        .stet(&["drive", "--yes", "--jobs", "1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The drive works the first item, which waits for GO: the second has no call yet.
    waiting_for_go(&world, &ids[0]);
    let mut follow = world
        .stet(&["log", "-f", &ids[1]])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The follower says it waits (an event: its first line), and only then may the drive
    // go on to the second item.
    let mut stderr = std::io::BufReader::new(follow.stderr.take().unwrap());
    let mut waiting = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut waiting).unwrap();
    assert_eq!(
        waiting,
        format!(
            "waiting for the first agent call of {} (a drive runs on this clone)\n",
            ids[1]
        )
    );
    std::fs::write(
        world
            .work
            .join(format!(".git/stet/lanes/{}/work/GO", ids[0])),
        "",
    )
    .unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let followed = stet_e2e::Output::finish(follow);
    let drove = stet_e2e::Output::finish(drive);
    assert_eq!(drove.code, 0);
    assert_eq!(followed.code, 0, "{rest}");
    // The second item's calls, its implement call first; nothing of the first item's.
    let out = &followed.stdout;
    assert!(out.starts_with("wrote THEN\n"), "{out}");
    assert!(out.contains("LAND"), "{out}");
    assert!(!out.contains("WAITED"), "{out}");
    assert!(
        rest.starts_with(&format!("── {} · implement · round 1 · receipt ", ids[1])),
        "{rest}"
    );
    assert!(
        rest.contains("── the call's standard error (") && rest.contains("stand-in: call "),
        "{rest}"
    );
    // With no drive on this clone, nothing is waited for.
    let other = queue(&world, &["Never driven\n\nfile: NEVER"]);
    let alone = world.run_stet(&["log", "-f", &other[0]]);
    assert_eq!(alone.code, 2, "{}", alone.stderr);
    assert!(
        alone.stderr.contains("and no drive runs here to make one"),
        "{}",
        alone.stderr
    );
}

#[test]
fn rm_cancels_an_item_for_every_clone_and_stops_a_lane_working_it_at_its_next_move() {
    let world = world();
    let ids = queue(
        &world,
        &[
            "Wait for it\n\nfile: WAITED\nimplement: until GO",
            "Never mind\n\nfile: NEVER",
        ],
    );
    // Cancelled before any drive: no drive takes it.
    let rm = world.run_stet(&["rm", &ids[1]]);
    assert_eq!(rm.code, 0, "{}", rm.stderr);
    assert!(
        rm.stdout
            .starts_with(&format!("cancelled {} on origin", ids[1])),
        "{}",
        rm.stdout
    );
    let listed = world.run_stet(&["queue"]);
    assert!(
        listed
            .stdout
            .lines()
            .any(|l| l
                .split_whitespace()
                .take(3)
                .eq(["cancelled", "never-mind", ids[1].as_str()])),
        "{}",
        listed.stdout
    );

    // Cancelled while a drive works it: the lane stops at its next move.
    let drive = world
        .stet(&["drive", "--yes"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    waiting_for_go(&world, &ids[0]);
    let rm = world.run_stet(&["rm", &ids[0]]);
    assert_eq!(rm.code, 0, "{}", rm.stderr);
    std::fs::write(
        world
            .work
            .join(format!(".git/stet/lanes/{}/work/GO", ids[0])),
        "",
    )
    .unwrap();
    let drove = stet_e2e::Output::finish(drive);
    assert_eq!(drove.code, 0, "{}", drove.stderr);
    assert!(
        drove
            .stderr
            .contains(&format!("{}: cancelled (cancelled by ", ids[0])),
        "{}",
        drove.stderr
    );
    // The implement call's work is kept on the remote; no review was made, and the other
    // item was never taken.
    let remote = world.root.path().join("remote.git");
    assert!(!git(
        &remote,
        &["for-each-ref", &format!("refs/heads/stet/{}", ids[0])]
    )
    .is_empty());
    let first = world.run_stet(&["show", &ids[0], "--json"]).json();
    assert_eq!(first["state"], "cancelled", "{first:#}");
    let roles: Vec<&str> = first["rounds"][0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["implement"], "{first:#}");
    let second = world.run_stet(&["show", &ids[1], "--json"]).json();
    assert_eq!(second["rounds"].as_array().unwrap().len(), 0, "{second:#}");
    let again = world.run_stet(&["rm", &ids[0]]);
    assert_eq!(
        again.stdout.trim(),
        format!("{} was cancelled already", ids[0])
    );
}

#[test]
fn clean_removes_finished_items_leftovers_and_on_the_remote_only_merged_work_and_spent_marks() {
    let world = world();
    let ids = queue(
        &world,
        &[
            "Land me\n\nfile: LANDED",
            "Stop me\n\nfile: STOPPED\nimplement: until GO",
        ],
    );
    let drive = world
        .stet(&["drive", "--yes"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    waiting_for_go(&world, &ids[1]);
    assert_eq!(world.run_stet(&["rm", &ids[1]]).code, 0);
    std::fs::write(
        world
            .work
            .join(format!(".git/stet/lanes/{}/work/GO", ids[1])),
        "",
    )
    .unwrap();
    let drove = stet_e2e::Output::finish(drive);
    assert_eq!(drove.code, 0, "{}", drove.stderr);
    let lane = world.work.join(format!(".git/stet/lanes/{}", ids[1]));
    assert!(
        lane.is_dir(),
        "the cancelled item's lane is kept until stet clean"
    );

    let out = world.run_stet(&["clean"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains(&format!("removed  the lane of {} (cancelled) — ", ids[1])),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!(
            "removed  the local branch stet/{} (landed)",
            ids[0]
        )),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("freed "), "{}", out.stdout);
    assert!(!lane.exists());
    // (The landed lane's copy made the second lane; the pool is gone with the rest.)
    assert!(!world.work.join(".git/stet/pool").exists());
    let local = git(&world.work, &["for-each-ref", "refs/heads/stet/"]);
    assert!(local.is_empty(), "{local}");

    // On the remote: unmerged work is never removed.
    let remote = world.root.path().join("remote.git");
    let base = git(&world.work, &["symbolic-ref", "--short", "HEAD"]);
    let out = world.run_stet(&["clean", "--remote"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!(
            "kept     stet/{} on origin (landed): not merged into {}",
            ids[0],
            base.trim()
        )),
        "{}",
        out.stdout
    );
    assert!(!git(
        &remote,
        &["for-each-ref", &format!("refs/heads/stet/{}", ids[0])]
    )
    .is_empty());
    // Merged: its branch goes; its mark stays while its item file is there.
    git(
        &world.work,
        &["fetch", "--quiet", "origin", &format!("stet/{}", ids[0])],
    );
    git(
        &world.work,
        &["merge", "--quiet", "--no-edit", "FETCH_HEAD"],
    );
    git(&world.work, &["push", "--quiet", "origin", "HEAD"]);
    let out = world.run_stet(&["clean", "--remote"]);
    assert!(
        out.stdout.contains(&format!(
            "removed  stet/{} on origin (landed): merged into {}",
            ids[0],
            base.trim()
        )),
        "{}",
        out.stdout
    );
    assert!(git(
        &remote,
        &["for-each-ref", &format!("refs/heads/stet/{}", ids[0])]
    )
    .is_empty());
    assert!(stet_e2e::landed_on(&remote).contains(&ids[0]));
    assert_eq!(
        world
            .run_stet(&["queue"])
            .stdout
            .lines()
            .filter(|l| l.starts_with("landed"))
            .count(),
        1
    );
    // The item file removed: the mark is spent.
    git(
        &world.work,
        &["rm", "--quiet", &format!(".stet/queue/{}.md", ids[0])],
    );
    git(&world.work, &["commit", "--quiet", "-m", "done with it"]);
    git(&world.work, &["push", "--quiet", "origin", "HEAD"]);
    let out = world.run_stet(&["clean", "--remote"]);
    assert!(
        out.stdout.contains(&format!(
            "removed  the landed mark of {} on origin: its item file is gone",
            ids[0]
        )),
        "{}",
        out.stdout
    );
    assert!(!stet_e2e::landed_on(&remote).contains(&ids[0]));
    // The cancelled item's branch was never merged: kept, with its mark.
    assert!(!git(
        &remote,
        &["for-each-ref", &format!("refs/heads/stet/{}", ids[1])]
    )
    .is_empty());
    assert!(!git(
        &remote,
        &["for-each-ref", &format!("refs/stet/cancelled/{}", ids[1])]
    )
    .is_empty());
}

#[test]
fn output_people_read_headers_newest_first_colour_on_a_terminal_only_quiet_and_versioned_json() {
    let world = world();
    let ids = queue(
        &world,
        &["First thing\n\nfile: ONE", "Second thing\n\nfile: TWO"],
    );
    let out = world.run_stet(&["drive", "--yes"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("stet drive: 2 items of 2 eligible"),
        "{}",
        out.stderr
    );
    // The closing summary: what became of each item, how long, what it cost, what next.
    assert!(out.stderr.contains(": landed 2 — "), "{}", out.stderr);
    assert!(out.stderr.contains("$0.0020 reported"), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "  landed:    {}, {} (stet show ID tells each one's story)",
            ids[0], ids[1]
        )),
        "{}",
        out.stderr
    );

    // Headers; colour only when asked for a terminal's sake, never in a pipe.
    let plain = world.run_stet(&["queue"]);
    assert!(
        plain
            .stdout
            .split_whitespace()
            .take(4)
            .eq(["STATE", "HANDLE", "ID", "TITLE"]),
        "{}",
        plain.stdout
    );
    // Every row's columns start where the header's do (widths by the widest cell).
    let header = plain.stdout.lines().next().unwrap();
    let (id_at, title_at) = (
        header.find(" ID").unwrap() + 1,
        header.find("TITLE").unwrap(),
    );
    for (row, id) in plain.stdout.lines().skip(1).zip(&ids) {
        assert_eq!(row.find(id.as_str()), Some(id_at), "{}", plain.stdout);
        assert_eq!(&row[title_at - 2..title_at], "  ", "{}", plain.stdout);
        assert_ne!(&row[title_at..title_at + 1], " ", "{}", plain.stdout);
    }
    assert!(!plain.stdout.contains('\u{1b}'), "{:?}", plain.stdout);
    let mut forced = world.stet(&["queue"]);
    forced.env("CLICOLOR_FORCE", "1");
    let coloured = world.run(&mut forced);
    assert!(
        coloured.stdout.contains("\u{1b}[32mlanded"),
        "{:?}",
        coloured.stdout
    );
    let mut no_colour = world.stet(&["queue"]);
    no_colour.env("CLICOLOR_FORCE", "1").env("NO_COLOR", "1");
    assert!(!world.run(&mut no_colour).stdout.contains('\u{1b}'));

    // Receipts: a header, newest first, by item and by count, durations people read.
    let receipts = world.run_stet(&["receipts"]);
    let lines: Vec<&str> = receipts.stdout.lines().collect();
    assert!(lines[0].starts_with("STARTED"), "{}", receipts.stdout);
    assert!(
        lines[1].contains(&ids[1]) && lines[1].contains("review"),
        "{}",
        receipts.stdout
    );
    assert!(
        lines[1].contains(" s "),
        "sub-second durations: {}",
        receipts.stdout
    );
    let common: String = ids[0]
        .chars()
        .zip(ids[1].chars())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a)
        .collect();
    let of_first = world.run_stet(&["receipts", "--item", &common]);
    assert_eq!(
        of_first.code, 2,
        "a start two ids share: {}",
        of_first.stderr
    );
    let of_first = world.run_stet(&["receipts", "--item", &ids[0], "--last", "1"]);
    let rows: Vec<&str> = of_first.stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{}", of_first.stdout);
    assert!(
        rows[0].contains("review") && rows[0].contains(&ids[0]),
        "{}",
        of_first.stdout
    );
    let json = world
        .run_stet(&["receipts", "--json", "--last", "2"])
        .json();
    assert_eq!(json["schema"], 1);
    let newest = &json["receipts"][0];
    assert!(
        newest["started"].as_str().unwrap().ends_with('Z'),
        "{newest:#}"
    );
    let implement = &json["receipts"][1];
    assert_eq!(implement["role"], "implement", "{json:#}");
    assert_eq!(
        implement["usage"]["turns"], 1,
        "usage is numbers: {implement:#}"
    );
    for args in [
        &["queue", "--json"][..],
        &["status", "--json"],
        &["plugins", "list", "--json"],
    ] {
        assert_eq!(world.run_stet(args).json()["schema"], 1, "{args:?}");
    }

    // Quiet: results, warnings and errors only.
    let ids = queue(&world, &["Third thing\n\nfile: THREE"]);
    let quiet = world.run_stet(&["-q", "drive", "--yes"]);
    assert_eq!(quiet.code, 0, "{}", quiet.stderr);
    assert_eq!(quiet.stderr, "", "{}", quiet.stderr);
    assert!(world
        .run_stet(&["queue"])
        .stdout
        .lines()
        .any(|l| l
            .split_whitespace()
            .take(3)
            .eq(["landed", "third-thing", ids[0].as_str()])));
}

/// Two finished items that did not land: one given up (marked failed after its one
/// round), one cancelled before any drive (`stet rm`). Returns (failed, cancelled).
fn one_failed_one_cancelled(world: &World) -> (String, String) {
    let ids = queue(
        world,
        &[
            "Give me up\n\nfile: GIVEN_UP\nreview: never",
            "Cancel me\n\nfile: CANCELLED",
        ],
    );
    assert_eq!(world.run_stet(&["rm", &ids[1]]).code, 0);
    let drove = world.run_stet(&["drive", "--yes", "--rounds", "1"]);
    assert_eq!(drove.code, 4, "{}", drove.stderr);
    let json = world.run_stet(&["queue", "--json"]).json();
    let states: Vec<&str> = json["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["failed", "cancelled"], "{json:#}");
    (ids[0].clone(), ids[1].clone())
}

/// A drive takes neither item; then `stet retry` of each, and the next drive takes both.
fn only_retry_makes_them_eligible(world: &World, failed: &str, cancelled: &str) {
    let out = world.run_stet(&["drive", "--yes", "--rounds", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("stet drive: 0 items of 0 eligible"),
        "{}",
        out.stderr
    );
    for id in [failed, cancelled] {
        let retried = world.run_stet(&["retry", id]);
        assert_eq!(retried.code, 0, "{}", retried.stderr);
    }
    let retried = world.run_stet(&["queue", "--json"]).json();
    assert!(
        retried["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["state"] == "open"),
        "{retried:#}"
    );
    // (The failed one is given up again: its review still never says LAND.)
    let out = world.run_stet(&["drive", "--yes", "--rounds", "1"]);
    assert!(
        out.stderr.contains("stet drive: 2 items of 2 eligible"),
        "{}",
        out.stderr
    );
    let remote = world.root.path().join("remote.git");
    assert!(stet_e2e::landed_on(&remote).contains(&cancelled.to_string()));
}

#[test]
fn clean_never_makes_a_failed_or_cancelled_item_eligible_again_only_retry_does() {
    let world = world();
    let (failed, cancelled) = one_failed_one_cancelled(&world);
    let out = world.run_stet(&["clean"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains(&format!("removed  the lane of {failed} (failed)")),
        "{}",
        out.stdout
    );
    only_retry_makes_them_eligible(&world, &failed, &cancelled);
}

/// The marks outlive their items' files: gone from the remote's tree (and their branches
/// from the remote) when `stet clean --remote` runs, the files coming back later do not
/// bring the items back.
#[test]
fn clean_remote_never_makes_a_failed_or_cancelled_item_eligible_again_only_retry_does() {
    let world = world();
    let (failed, cancelled) = one_failed_one_cancelled(&world);
    let remote = world.root.path().join("remote.git");
    git(
        &world.work,
        &["push", "--quiet", "origin", &format!(":stet/{failed}")],
    );
    for id in [&failed, &cancelled] {
        git(
            &world.work,
            &["rm", "--quiet", &format!(".stet/queue/{id}.md")],
        );
    }
    git(&world.work, &["commit", "--quiet", "-m", "done with them"]);
    git(&world.work, &["push", "--quiet", "origin", "HEAD"]);
    let out = world.run_stet(&["clean", "--remote"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.contains(" mark of "), "{}", out.stdout);
    for mark in [
        format!("refs/stet/failed/{failed}"),
        format!("refs/stet/cancelled/{cancelled}"),
    ] {
        assert!(
            !git(&remote, &["for-each-ref", &mark]).is_empty(),
            "{mark} was removed: {}",
            out.stdout
        );
    }
    // The files come back (a revert, a merge of an old branch): the marks still hold.
    git(&world.work, &["revert", "--no-edit", "HEAD"]);
    git(&world.work, &["push", "--quiet", "origin", "HEAD"]);
    only_retry_makes_them_eligible(&world, &failed, &cancelled);
}

/// The files of `branch`'s tree on the remote.
fn files_on(remote: &Path, branch: &str) -> Vec<String> {
    git(remote, &["ls-tree", "-r", "--name-only", branch])
        .lines()
        .map(str::to_string)
        .collect()
}

/// Lanes branch from the remote's base as fetched: a commit only this clone has does not
/// ride into a lane, and the drive says once that the local branch is ahead; queue files
/// only here (untracked, or committed and not pushed) are named and not driven.
#[test]
fn lanes_branch_from_the_remotes_base_and_items_only_here_are_named_not_driven() {
    let world = world();
    let remote = world.root.path().join("remote.git");
    let ids = queue(&world, &["Pushed\n\nfile: PUSHED"]);
    // A local commit, not pushed, with an item in it; and an item not even committed.
    std::fs::write(world.work.join("LOCAL_ONLY"), "not pushed\n").unwrap();
    let committed = world.run_stet(&["add", "--json", "Committed here\n\nfile: COMMITTED"]);
    assert_eq!(committed.code, 0, "{}", committed.stderr);
    git(&world.work, &["add", "--all"]);
    git(&world.work, &["commit", "--quiet", "-m", "local work"]);
    stet_e2e::next_millisecond();
    let untracked = world.run_stet(&["add", "--json", "Untracked\n\nfile: UNTRACKED"]);
    let id_of = |out: &stet_e2e::Output| out.json()["id"].as_str().unwrap().to_string();
    let (committed, untracked) = (id_of(&committed), id_of(&untracked));
    let base = git(&world.work, &["symbolic-ref", "--short", "HEAD"])
        .trim()
        .to_string();

    // What `stet queue` says of them, before any drive.
    let listed = world.run_stet(&["queue"]);
    assert!(
        listed.stdout.contains(&format!(
            "  Untracked — only in this working copy, not on origin/{base}: no drive takes it until you commit and push it"
        )),
        "{}",
        listed.stdout
    );

    let out = world.run_stet(&["drive", "--yes"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let said = |text: &str| out.stderr.matches(text).count();
    assert_eq!(
        said(&format!(
            "your HEAD is 1 commit ahead of origin/{base}: the lanes branch from origin/{base} without it"
        )),
        1,
        "{}",
        out.stderr
    );
    assert_eq!(
        said(&format!(
            "not driven: 2 item files in .stet/queue are not on origin/{base} (untracked, uncommitted or not pushed): {committed}, {untracked}; commit and push them for a drive to take them"
        )),
        1,
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("stet drive: 1 item of 1 eligible"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains(&format!("  base:     origin/{base} at ")),
        "{}",
        out.stderr
    );
    // The lane holds the remote's base and its own change: not the local commit.
    let lane = files_on(&remote, &format!("stet/{}", ids[0]));
    assert!(lane.contains(&"PUSHED".to_string()), "{lane:?}");
    assert!(!lane.contains(&"LOCAL_ONLY".to_string()), "{lane:?}");
    assert!(
        !lane
            .iter()
            .any(|f| f.contains(&committed) || f.contains(&untracked)),
        "{lane:?}"
    );
    let landed = stet_e2e::landed_on(&remote);
    assert_eq!(landed, [ids[0].clone()], "{}", out.stderr);

    // Pushed, they are driven; and the lanes then hold the pushed commit.
    git(&world.work, &["add", "--all"]);
    git(
        &world.work,
        &["commit", "--quiet", "-m", "queue the last one"],
    );
    git(&world.work, &["push", "--quiet", "origin", "HEAD"]);
    let out = world.run_stet(&["drive", "--yes"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("not driven"), "{}", out.stderr);
    assert!(!out.stderr.contains("ahead of"), "{}", out.stderr);
    assert!(
        out.stderr.contains("stet drive: 2 items of 2 eligible"),
        "{}",
        out.stderr
    );
    assert!(files_on(&remote, &format!("stet/{committed}")).contains(&"LOCAL_ONLY".to_string()));
}

/// A fresh clone of an empty remote: no base until the first push (the drive refuses,
/// naming what to do), then the pushed branch is the base though the remote's HEAD names a
/// branch never born.
#[test]
fn a_clone_of_an_empty_remote_drives_once_its_first_push_makes_a_base() {
    let world = world();
    let bare = world.root.path().join("empty.git");
    git(
        world.root.path(),
        &["init", "--quiet", "--bare", bare.to_str().unwrap()],
    );
    let clone = world.root.path().join("fresh");
    git(
        world.root.path(),
        &[
            "clone",
            "--quiet",
            bare.to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    git(&clone, &["checkout", "--quiet", "-b", "trunk"]);
    let mut add = world.stet(&["add", "First\n\nfile: FIRST"]);
    add.current_dir(&clone);
    assert_eq!(world.run(&mut add).code, 0);
    git(&clone, &["add", "--all"]);
    git(&clone, &["commit", "--quiet", "-m", "the first item"]);
    let drive = |world: &World| {
        let mut drive = world.stet(&["drive", "--yes"]);
        drive.current_dir(&clone);
        world.run(&mut drive)
    };
    let refused = drive(&world);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("error: there is no base on the remote for the lanes to branch from"),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains(
            "hint: push the branch the lanes should start from (git push -u origin HEAD)"
        ),
        "{}",
        refused.stderr
    );
    git(&clone, &["push", "--quiet", "origin", "HEAD"]);
    let out = drive(&world);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("  base:     origin/trunk at "),
        "{}",
        out.stderr
    );
    let landed = stet_e2e::landed_on(&bare);
    assert_eq!(landed.len(), 1, "{}", out.stderr);
    let lane = files_on(&bare, &format!("stet/{}", landed[0]));
    assert!(lane.contains(&"FIRST".to_string()), "{lane:?}");
}

/// A pull request merged by squash or by rebase leaves its branch off the base's history:
/// `stet clean --remote` still finds the branch's change in the base and removes it, and
/// keeps a branch whose change the base lacks. `--dry-run` first removes nothing; then
/// `--archive` takes the landed items' files out of the queue in a commit the person pushes,
/// their text left in git history (a file the person edited is kept, with the edit), after
/// which `clean --remote` spends the merged items' marks.
#[test]
fn clean_remote_removes_squashed_and_rebased_branches_keeps_unmerged_work_and_archives_landed_files(
) {
    let world = world();
    let remote = world.root.path().join("remote.git");
    let ids = queue(
        &world,
        &[
            "Squash me\n\nfile: SQUASHED",
            "Rebase me\n\nfile: REBASED",
            "Leave me\n\nfile: UNMERGED",
        ],
    );
    let drove = world.run_stet(&["drive", "--yes", "--rounds", "1"]);
    assert_eq!(drove.code, 0, "{}", drove.stderr);
    let base = git(&world.work, &["symbolic-ref", "--short", "HEAD"]);
    let base = base.trim();
    git(
        &world.work,
        &["pull", "--quiet", "--ff-only", "origin", base],
    );
    // Squashed, with a fixup of the reviewer's in the same commit (its patch is not the
    // lane's), as a pull request's "squash and merge" makes it.
    git(
        &world.work,
        &["fetch", "--quiet", "origin", &format!("stet/{}", ids[0])],
    );
    git(&world.work, &["merge", "--quiet", "--squash", "FETCH_HEAD"]);
    std::fs::write(world.work.join("NOTES"), "reviewed\n").unwrap();
    git(&world.work, &["add", "NOTES"]);
    git(&world.work, &["commit", "--quiet", "-m", "Squash me (#1)"]);
    // Rebased: each of the lane's commits applied anew on the base.
    git(
        &world.work,
        &["fetch", "--quiet", "origin", &format!("stet/{}", ids[1])],
    );
    let fork = git(&world.work, &["merge-base", "HEAD", "FETCH_HEAD"]);
    git(
        &world.work,
        &[
            "cherry-pick",
            "--allow-empty",
            &format!("{}..FETCH_HEAD", fork.trim()),
        ],
    );
    git(&world.work, &["push", "--quiet", "origin", "HEAD"]);
    let branches = || git(&remote, &["for-each-ref", "refs/heads/stet/"]);
    let refs_before = git(&remote, &["for-each-ref"]);

    let dry = world.run_stet(&["clean", "--remote", "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    for line in [
        format!(
            "would remove stet/{} on origin (landed): squashed into {base}",
            ids[0]
        ),
        format!(
            "would remove stet/{} on origin (landed): rebased into {base}",
            ids[1]
        ),
        format!(
            "kept         stet/{} on origin (landed): not merged into {base}",
            ids[2]
        ),
    ] {
        assert!(dry.stdout.contains(&line), "{line}\n{}", dry.stdout);
    }
    assert!(dry.stdout.contains("nothing was removed"), "{}", dry.stdout);
    assert_eq!(
        git(&remote, &["for-each-ref"]),
        refs_before,
        "a dry run removes nothing"
    );
    let json = world
        .run_stet(&["clean", "--remote", "--dry-run", "--json"])
        .json();
    let entry = json["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "remote-branch" && e["id"] == ids[0].as_str())
        .unwrap_or_else(|| panic!("{json:#}"));
    assert_eq!(entry["action"], "would-remove", "{json:#}");
    assert_eq!(entry["branch"], format!("stet/{}", ids[0]), "{json:#}");
    assert_eq!(entry["why"], format!("squashed into {base}"), "{json:#}");
    assert_eq!(entry["remedy"], serde_json::Value::Null, "{json:#}");
    assert_eq!(json["schema"], 1, "{json:#}");

    let out = world.run_stet(&["clean", "--remote"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let left = branches();
    assert!(!left.contains(&ids[0]) && !left.contains(&ids[1]), "{left}");
    assert!(left.contains(&ids[2]), "unmerged work is kept: {left}");
    assert!(
        out.stderr
            .contains("3 landed items' files are still in .stet/queue: stet clean --archive"),
        "{}",
        out.stderr
    );

    // Archiving: said first, then one commit on the current branch, not pushed by stet.
    let files = |id: &str| world.work.join(format!(".stet/queue/{id}.md"));
    let head = git(&world.work, &["rev-parse", "HEAD"]);
    let dry = world.run_stet(&["clean", "--archive", "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(
        dry.stdout
            .contains(&format!("would remove the file of {} (landed)", ids[2])),
        "{}",
        dry.stdout
    );
    assert!(ids.iter().all(|id| files(id).is_file()));
    assert_eq!(git(&world.work, &["rev-parse", "HEAD"]), head, "no commit");
    let remote_base = git(&remote, &["rev-parse", base]);
    // The person's own edit of one file: that file is kept, with its edit.
    let edited = format!(
        "{}\nan edit of mine\n",
        std::fs::read_to_string(files(&ids[2])).unwrap()
    );
    std::fs::write(files(&ids[2]), &edited).unwrap();
    let out = world.run_stet(&["clean", "--archive"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!(
            "on {base}: 2 landed items' files removed from .stet/queue; push it"
        )),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!(
            "kept     the file of {} (landed): it differs here from what HEAD holds",
            ids[2]
        )),
        "{}",
        out.stdout
    );
    assert_eq!(std::fs::read_to_string(files(&ids[2])).unwrap(), edited);
    assert!(!files(&ids[0]).exists() && !files(&ids[1]).exists());
    let message = git(&world.work, &["log", "-1", "--format=%B"]);
    for (id, title) in ids.iter().zip(["Squash me", "Rebase me"]) {
        assert!(message.contains(&format!("{id}: {title}")), "{message}");
        let text = git(
            &world.work,
            &["show", &format!("HEAD^:.stet/queue/{id}.md")],
        );
        assert!(text.starts_with(title), "its text stays in history: {text}");
    }
    assert!(!message.contains(&ids[2]), "{message}");
    assert_eq!(
        git(&world.work, &["status", "--porcelain"]).trim(),
        format!("M .stet/queue/{}.md", ids[2]),
        "only the person's edit is left uncommitted"
    );
    assert_eq!(
        git(&remote, &["rev-parse", base]),
        remote_base,
        "stet pushes nothing: the person does"
    );
    git(&world.work, &["push", "--quiet", "origin", "HEAD"]);
    let out = world.run_stet(&["clean", "--remote"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let landed = stet_e2e::landed_on(&remote);
    assert!(
        !landed.contains(&ids[0]) && !landed.contains(&ids[1]),
        "the merged items' marks are spent: {}",
        out.stdout
    );
    assert!(
        landed.contains(&ids[2]),
        "an unmerged branch's mark stays with it: {}",
        out.stdout
    );
}

/// `[lane] setup` runs once, in a sandbox on the base, and every lane starts from what it
/// made (the seed): a hostile agent rewrites a dependency and a build output in its lane,
/// plants a file there and un-ignores them all in its `.gitignore`, yet the check of that
/// round, the next lane's agent and the seed itself see the setup's bytes; nothing of it
/// is committed. `stet seed` says the seed
/// is ready without running the setup again; a changed input builds a new one.
#[test]
fn a_setup_seeds_every_lane_and_what_an_agent_writes_there_reaches_no_other_lane_or_round() {
    let world = world();
    let remote = world.root.path().join("remote.git");
    let agent = world.root.path().join("poisoner.sh");
    std::fs::write(
        &agent,
        "#!/bin/sh\nset -eu\nprompt=$(cat)\n\
         case \"${STET_ROLE:-implement}\" in\n\
         implement)\n\
           file=$(printf '%s\\n' \"$prompt\" | sed -n 's/^file: *//p' | head -n 1)\n\
           cat deps/lib.txt > \"$file\"\n\
           echo POISONED > deps/lib.txt\n\
           echo POISONED > deps/out.o\n\
           echo planted > deps/planted\n\
           echo POISONED > /stet-lane/deps/alias.txt\n\
           printf '!deps/\\n!deps/**\\n' >> .gitignore\n\
           ;;\n\
         review) echo LAND ;;\n\
         esac\n",
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(
        world.root.path().join("home/.config/stet/config.toml"),
        format!(
            "[plugins.command]\nimplement = [\"{}\"]\nreview = [\"{}\"]\n",
            agent.display(),
            agent.display()
        ),
    )
    .unwrap();
    std::fs::write(world.work.join(".gitignore"), "deps/\n").unwrap();
    std::fs::write(world.work.join("deps.lock"), "lock v1\n").unwrap();
    world.repo_config(
        "[drive]\n\
         check = \"grep -qx 'lock v1' deps/lib.txt && grep -qx built deps/out.o && test ! -e deps/planted && test \\\"$(cat /stet-lane/deps/where)\\\" = /stet-lane && test -f /stet-lane/deps/lib.txt\"\n\n\
         [lane]\n\
         setup = [\"mkdir -p deps && cp deps.lock deps/lib.txt\", \"echo built > deps/out.o && pwd > deps/where\"]\n\
         setup_inputs = [\"deps.lock\"]\n\
         setup_outputs = [\"deps\"]\n",
    );
    let ids = queue(&world, &["First\n\nfile: FIRST", "Second\n\nfile: SECOND"]);

    let out = world.run_stet(&["drive", "--yes"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("setting up: [lane] setup runs once on origin/"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains(" built in "), "{}", out.stderr);
    // Each lane's agent saw the setup's bytes, not the other lane's poison; the branch
    // carries the agent's file and nothing of the seed.
    for (id, file) in ids.iter().zip(["FIRST", "SECOND"]) {
        let branch = format!("stet/{id}");
        let files = files_on(&remote, &branch);
        assert!(files.contains(&file.to_string()), "{files:?}");
        assert!(files.iter().all(|f| !f.starts_with("deps/")), "{files:?}");
        // The agent un-ignored the outputs in the .gitignore it committed: still none
        // of the seed landed.
        let ignore = git(&remote, &["show", &format!("{branch}:.gitignore")]);
        assert!(ignore.contains("!deps/"), "{ignore}");
        let seen = git(&remote, &["show", &format!("{branch}:{file}")]);
        assert_eq!(seen, "lock v1\n", "{id} saw {seen:?}");
    }
    // The setup has its receipt: passed, with what it kept.
    let receipts = stet_e2e::receipts_oldest_first(&world.run_stet(&["receipts", "--json"]));
    let setups: Vec<_> = receipts.iter().filter(|r| r["role"] == "setup").collect();
    assert_eq!(setups.len(), 1, "{receipts:#?}");
    assert_eq!(setups[0]["outcome"], "passed", "{:#}", setups[0]);
    assert_eq!(setups[0]["item"], "", "{:#}", setups[0]);
    // The seed on this clone holds the setup's bytes.
    let seeds = world.work.join(".git/stet/seeds");
    let kept: Vec<_> = std::fs::read_dir(&seeds)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().join("seed.json").is_file())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let outputs = kept[0].path().join("outputs/deps");
    assert_eq!(
        std::fs::read_to_string(outputs.join("lib.txt")).unwrap(),
        "lock v1\n"
    );
    assert_eq!(
        std::fs::read_to_string(outputs.join("out.o")).unwrap(),
        "built\n"
    );
    assert!(!outputs.join("planted").exists() && !outputs.join("alias.txt").exists());

    // Ready: `stet seed` reuses it.
    let again = world.run_stet(&["seed", "--json"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    let json = again.json();
    assert_eq!(json["built"], false, "{json:#}");
    let key = json["seed"]["key"].as_str().unwrap().to_string();
    assert_eq!(json["seed"]["outputs"], serde_json::json!(["deps"]));
    // A changed input: a new seed, built by `stet seed`, with the new bytes.
    std::fs::write(world.work.join("deps.lock"), "lock v2\n").unwrap();
    git(&world.work, &["commit", "--quiet", "-am", "lock v2"]);
    git(&world.work, &["push", "--quiet", "origin", "HEAD"]);
    let rebuilt = world.run_stet(&["seed", "--json"]);
    assert_eq!(rebuilt.code, 0, "{}", rebuilt.stderr);
    let json = rebuilt.json();
    assert_eq!(json["built"], true, "{json:#}");
    assert_ne!(json["seed"]["key"].as_str().unwrap(), key);
    let new = seeds.join(json["seed"]["key"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(new.join("outputs/deps/lib.txt")).unwrap(),
        "lock v2\n"
    );
    let doctor = world.run_stet(&["doctor", "--json"]);
    let seed_check = check(&doctor.json(), "seed").clone();
    assert_eq!(seed_check["ok"], true, "{seed_check:#}");
    let detail = seed_check["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("ready for origin/") && detail.contains("deps, "),
        "{detail}"
    );
    // The first seed is stale now (no lane holds it): `stet clean` removes it, not the new.
    let cleaned = world.run_stet(&["clean"]);
    assert_eq!(cleaned.code, 0, "{}", cleaned.stderr);
    assert!(
        cleaned.stdout.contains(&format!(
            "removed  seed {key} (deps) — built for an older base or setup"
        )),
        "{}",
        cleaned.stdout
    );
    assert!(!seeds.join(&key).exists() && new.is_dir());
}

/// A setup command that fails refuses the drive before anything is reserved, saying which
/// command, how it ended and the end of its output; an untrusted `stet.toml`'s setup is
/// never run, and `stet seed` says why.
#[test]
fn a_failing_setup_refuses_the_drive_before_any_reservation_and_an_untrusted_one_never_runs() {
    let world = world();
    let remote = world.root.path().join("remote.git");
    std::fs::write(world.work.join(".gitignore"), "deps/\n").unwrap();
    world.repo_config(
        "[lane]\nsetup = [\"echo fetching the registry; exit 3\"]\nsetup_outputs = [\"deps\"]\n",
    );
    queue(&world, &["Work\n\nfile: WORK"]);
    let out = world.run_stet(&["drive", "--yes"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "error: the setup command `echo fetching the registry; exit 3` exited with 3"
        ),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("fetching the registry"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("hint: fix [lane] setup in stet.toml"),
        "{}",
        out.stderr
    );
    let refs = git(
        &remote,
        &["for-each-ref", "--format=%(refname)", "refs/stet/"],
    );
    assert!(!refs.contains("reservations"), "{refs}");
    let receipts = stet_e2e::receipts_oldest_first(&world.run_stet(&["receipts", "--json"]));
    assert_eq!(receipts.len(), 1, "only the setup's: {receipts:#?}");
    assert_eq!(receipts[0]["role"], "setup");
    assert_eq!(receipts[0]["outcome"], "failed", "{:#}", receipts[0]);

    // The same file changed and not trusted: its setup is ignored, and `stet seed` says so.
    std::fs::write(
        world.work.join("stet.toml"),
        "[lane]\nsetup = [\"touch /stet-lane/ran\"]\nsetup_outputs = [\"deps\"]\n",
    )
    .unwrap();
    let seed = world.run_stet(&["seed"]);
    assert_eq!(seed.code, 2, "{}", seed.stderr);
    assert!(
        seed.stderr.contains("ignored: [lane] setup"),
        "{}",
        seed.stderr
    );
    assert!(
        seed.stderr
            .contains("hint: stet.toml's [lane] setup applies once you trust the file"),
        "{}",
        seed.stderr
    );
}

/// A world holding a real project: `fetch` (a program and its arguments) run in the
/// world's root, then `archive` (a tarball it left there) unpacked into the working copy;
/// the person's agent is `agent`, a shell script run by the command harness, which answers
/// LAND to every review; `ignored` is the project's .gitignore.
fn real_project(fetch: &[&str], archive: &str, agent: &str, ignored: &str) -> World {
    let world = world();
    let fetched = std::process::Command::new(fetch[0])
        .args(&fetch[1..])
        .current_dir(world.root.path())
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .output()
        .expect("python3 (the test setup installs it, with pip)");
    assert!(
        fetched.status.success(),
        "the test fetches {archive} from its registry: {}",
        String::from_utf8_lossy(&fetched.stderr)
    );
    let unpacked = std::process::Command::new("tar")
        .args(["xzf", archive, "--strip-components=1", "-C"])
        .arg(&world.work)
        .current_dir(world.root.path())
        .status()
        .unwrap();
    assert!(unpacked.success());
    std::fs::write(world.work.join(".gitignore"), ignored).unwrap();
    let script = world.root.path().join("agent.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nset -eu\nprompt=$(cat)\n\
             case \"${{STET_ROLE:-implement}}\" in\n\
             implement)\n\
               name=$(printf '%s\\n' \"$prompt\" | sed -n 's/^test: *//p' | head -n 1)\n\
               {agent}\n\
               ;;\n\
             review) echo LAND ;;\n\
             esac\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(
        world.root.path().join("home/.config/stet/config.toml"),
        format!(
            "[plugins.command]\nimplement = [\"{}\"]\n",
            script.display()
        ),
    )
    .unwrap();
    world
}

/// `stet init` in `world`, its stet.toml holding each of `lines`; then the image its recipe
/// names, built as the recipe's first lines say. This machine's way out inspects TLS: its
/// certificate authorities (public certificates, in the host's store) go into the image
/// after init's lines, with `extra` (what else a tool needs to use them), as a person
/// behind such a relay would add them.
fn init_and_build(world: &World, lines: &[&str], tag: &str, extra: &str) -> OwnImage {
    let init = world.run_stet(&["init"]);
    assert_eq!(init.code, 0, "{}", init.stderr);
    let config = std::fs::read_to_string(world.work.join("stet.toml")).unwrap();
    for line in lines {
        assert!(config.contains(line), "{line} in:\n{config}");
    }
    assert!(config.contains(&format!("image = \"{tag}\"")), "{config}");
    let mut containerfile =
        std::fs::read_to_string(world.work.join(".stet/Containerfile")).unwrap();
    let context = world.root.path().join("image");
    std::fs::create_dir_all(context.join("ca")).unwrap();
    for entry in std::fs::read_dir("/usr/local/share/ca-certificates")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "crt"))
    {
        std::fs::copy(entry.path(), context.join("ca").join(entry.file_name())).unwrap();
    }
    containerfile.push_str(&format!(
        "COPY ca/ /usr/local/share/ca-certificates/\nRUN update-ca-certificates{extra}\n"
    ));
    std::fs::write(context.join("Containerfile"), containerfile).unwrap();
    let image = OwnImage(tag.to_string());
    let built = std::process::Command::new("docker")
        .args(["build", "--quiet", "--tag", tag, "--file"])
        .arg(context.join("Containerfile"))
        .arg(&context)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let doctor = world.run_stet(&["doctor", "--json"]).json();
    assert_eq!(check(&doctor, "image-check")["ok"], true, "{doctor:#}");
    image
}

/// Drives `world`'s queue of `items`, each landing with `changed` and nothing of
/// `outputs`; the setup ran once. Returns each check's log, oldest first, each passed.
fn drive_real_project(
    world: &World,
    items: &[&str],
    changed: &[String],
    outputs: &[&str],
) -> Vec<String> {
    let remote = world.root.path().join("remote.git");
    let ids = queue(world, items);
    let out = world.run_stet(&["drive", "--yes"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stderr.matches(" built in ").count(),
        1,
        "{}",
        out.stderr
    );
    for (id, changed) in ids.iter().zip(changed) {
        let files = files_on(&remote, &format!("stet/{id}"));
        assert!(files.contains(changed), "{files:?}");
        assert!(
            files
                .iter()
                .all(|f| outputs.iter().all(|o| !f.starts_with(&format!("{o}/")))),
            "{files:?}"
        );
    }
    let receipts = stet_e2e::receipts_oldest_first(&world.run_stet(&["receipts", "--json"]));
    let checks: Vec<&serde_json::Value> =
        receipts.iter().filter(|r| r["role"] == "check").collect();
    assert_eq!(checks.len(), items.len(), "{receipts:#?}");
    checks
        .into_iter()
        .map(|check| {
            assert_eq!(check["outcome"], "passed", "{check:#}");
            let id = check["id"].as_str().unwrap();
            std::fs::read_to_string(world.work.join(format!(".git/stet/logs/{id}.log"))).unwrap()
        })
        .collect()
}

/// A real package nobody here wrote, fetched from PyPI by the test's setup: `parse`, whose
/// check is its own pytest suite — set up as a new user would: `stet init` guesses the
/// check and a setup (a virtual environment with pytest and the package, editable, from
/// PyPI through stet's proxy) and writes the image's recipe; the recipe builds, `stet
/// doctor` finds everything ready, and a drive runs the setup once and lands both items,
/// each lane's check running the whole suite on its own copy of that environment.
#[test]
fn a_real_python_package_set_up_by_init_lands_items_whose_check_runs_its_own_tests() {
    let world = real_project(
        &["python3", "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:", "parse==1.20.2", "--dest", "."],
        "parse-1.20.2.tar.gz",
        // A test of its own added to the package's suite.
        "printf 'from parse import parse\\n\\n\\ndef test_%s():\\n    assert parse(\"{} {}\", \"a b\").fixed == (\"a\", \"b\")\\n' \"$name\" > \"tests/test_$name.py\"",
        ".venv/\n*.egg-info/\n__pycache__/\n",
    );
    let _image = init_and_build(
        &world,
        &[
            "check = \".venv/bin/python -m pytest\"",
            "setup = [\"python3 -m venv .venv\", \".venv/bin/pip install --disable-pip-version-check pytest -e .\"]",
            "setup_outputs = [\".venv\"]",
            "setup_network = [\"pypi.org\", \"files.pythonhosted.org\"]",
        ],
        "stet-lane-python:1",
        // pip keeps certificate authorities of its own unless told to use the system's.
        " && printf '[global]\\ncert = /etc/ssl/certs/ca-certificates.crt\\n' > /etc/pip.conf",
    );
    let doctor = world.run_stet(&["doctor", "--json"]).json();
    let seed = check(&doctor, "seed")["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(seed.starts_with("not built for origin/"), "{doctor:#}");
    let logs = drive_real_project(
        &world,
        &["Test pairs\n\ntest: pairs", "Test again\n\ntest: again"],
        &["tests/test_pairs.py".into(), "tests/test_again.py".into()],
        &[".venv"],
    );
    for log in logs {
        let passed: u32 = log
            .split_whitespace()
            .zip(log.split_whitespace().skip(1))
            .find(|(_, w)| w.starts_with("passed"))
            .and_then(|(n, _)| n.parse().ok())
            .unwrap_or(0);
        // parse 1.20.2 has 96 tests (one skipped here); the agent added one.
        assert!(
            passed >= 97 && !log.contains("failed"),
            "the suite ran whole: {log}"
        );
    }
}

/// A real crate nobody here wrote, fetched from crates.io by the test's setup: `url` 2.5.4,
/// 70-odd crates with its dependencies, whose check is its own `cargo test` — set up by
/// `stet init` (dependencies fetched from crates.io through stet's proxy into the seed's
/// `CARGO_HOME`, the tests built once into its `target`); each lane's check builds only the
/// crate itself, offline, and runs its whole suite with the agent's new test.
#[test]
fn a_real_rust_crate_set_up_by_init_lands_items_whose_check_runs_its_own_tests() {
    let world = real_project(
        &[
            "python3",
            "-c",
            "import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])",
            "https://static.crates.io/crates/url/url-2.5.4.crate",
            "url-2.5.4.crate",
        ],
        "url-2.5.4.crate",
        // A test of its own added to the crate's unit tests (it lists its test files:
        // autotests = false).
        "printf '\\n#[test]\\nfn agent_%s() {\\n    let u = url::Url::parse(\"https://example.com/a?b=c\").unwrap();\\n    assert_eq!(u.path(), \"/a\");\\n}\\n' \"$name\" >> tests/unit.rs",
        "/target\n/.cargo-home\n",
    );
    let _image = init_and_build(
        &world,
        &[
            "check = \"CARGO_HOME=/stet-lane/.cargo-home cargo test --offline\"",
            "setup_outputs = [\"target\", \".cargo-home\"]",
            "setup_network = [\"index.crates.io\", \"static.crates.io\"]",
        ],
        "stet-lane-rust:1",
        "",
    );
    let logs = drive_real_project(
        &world,
        &["Test paths\n\ntest: paths", "Test again\n\ntest: again"],
        &["tests/unit.rs".into(), "tests/unit.rs".into()],
        &["target", ".cargo-home"],
    );
    // Each check built the crate alone (its dependencies were the seed's) and ran its
    // whole suite with the agent's test.
    for (log, name) in logs.iter().zip(["paths", "again"]) {
        let compiled: Vec<&str> = log
            .lines()
            .filter(|l| l.trim_start().starts_with("Compiling "))
            .collect();
        assert_eq!(compiled.len(), 1, "only the crate is built: {log}");
        assert!(compiled[0].contains("Compiling url v2.5.4"), "{log}");
        assert!(log.contains(&format!("test agent_{name} ... ok")), "{log}");
        assert!(!log.contains("FAILED"), "{log}");
    }
}
