//! `stet add` and `stet queue` through the real binary, on a real clone of a bare remote.

use stet_e2e::{git, World};

/// The world's working directory as a clone of a fresh bare remote.
fn cloned(world: &World) {
    world.clone_of_fresh_remote();
}

#[test]
fn items_are_added_and_listed_in_order_and_bad_files_are_skipped_with_a_warning() {
    let world = World::new();
    cloned(&world);
    let first = world.run_stet(&["add", "Fix the typo in README"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(first.stdout.starts_with("added "), "{}", first.stdout);
    std::fs::write(
        world.root.path().join("item.md"),
        "Add a CHANGELOG\n\nWith the last three releases.\n",
    )
    .unwrap();
    let second = world.run_stet(&[
        "add",
        "-F",
        world.root.path().join("item.md").to_str().unwrap(),
    ]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    std::fs::write(world.work.join(".stet/queue/Not An Id.md"), "x").unwrap();

    let out = world.run_stet(&["queue", "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let rows = out.json()["items"].clone();
    let titles: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["Fix the typo in README", "Add a CHANGELOG"]);
    assert!(rows
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["state"] == "open"));
    assert!(out.stderr.contains("warning: skipped"), "{}", out.stderr);
    assert!(
        out.stderr.contains("`Not An Id` is not a valid item id"),
        "{}",
        out.stderr
    );
}

#[test]
fn an_unreachable_remote_leaves_states_unknown_and_says_so() {
    let world = World::new();
    cloned(&world);
    world.run_stet(&["add", "Something"]);
    git(
        &world.work,
        &["remote", "set-url", "origin", "/nonexistent/remote.git"],
    );
    let out = world.run_stet(&["queue"]);
    assert_eq!(out.code, 3, "nothing could be learnt: {}", out.stderr);
    let row = out.stdout.lines().nth(1).unwrap_or_default();
    assert!(out.stdout.starts_with("STATE    ID"), "{}", out.stdout);
    assert!(row.starts_with("unknown "), "{}", out.stdout);
    assert!(
        out.stderr.contains("the remote origin did not answer"),
        "{}",
        out.stderr
    );
}

#[test]
fn outside_a_repository_and_without_text_the_refusal_says_what_to_do() {
    let world = World::new();
    let out = world.run_stet(&["add", "x"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("is not inside a git repository"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("hint: "), "{}", out.stderr);
    cloned(&world);
    let out = world.run_stet(&["add"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("say what should be done"),
        "{}",
        out.stderr
    );
}

#[test]
fn completions_are_printed_for_each_shell_and_a_wrong_shell_is_named() {
    let world = World::new();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = world.run_stet(&["completions", shell]);
        assert_eq!(out.code, 0, "{shell}: {}", out.stderr);
        assert!(out.stdout.contains("drive"), "{shell}: no subcommands");
    }
    let out = world.run_stet(&["completions", "tcsh"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("possible values: bash"),
        "{}",
        out.stderr
    );
}

#[test]
fn status_summarises_the_clone_as_lines_and_as_json() {
    let world = World::new();
    cloned(&world);
    world.run_stet(&["add", "Something"]);
    let out = world.run_stet(&["status"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("queue: 1 item"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("receipts: 0 of agent calls and checks in 0 runs, $0.0000"),
        "{}",
        out.stdout
    );
    let json = world.run_stet(&["status", "--json"]).json();
    assert_eq!(json["items"], 1);
    assert_eq!(json["calls"], 0);
    assert!(json["last"].is_null());
}
