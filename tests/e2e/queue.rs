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
    assert!(
        out.stdout
            .split_whitespace()
            .take(4)
            .eq(["STATE", "HANDLE", "ID", "TITLE"]),
        "{}",
        out.stdout
    );
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

/// The handle `stet add --json` gave, and whether it is claimed on the remote.
fn added(out: &stet_e2e::Output) -> (String, String, bool) {
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json = out.json();
    (
        json["handle"].as_str().unwrap().to_string(),
        json["id"].as_str().unwrap().to_string(),
        json["claimed"].as_bool().unwrap(),
    )
}

#[test]
fn two_clones_adding_one_title_get_two_handles_and_the_later_is_told() {
    let world = World::new();
    let bare = world.clone_of_fresh_remote();
    let other = world.root.path().join("other");
    git(
        world.root.path(),
        &[
            "clone",
            "--quiet",
            bare.to_str().unwrap(),
            other.to_str().unwrap(),
        ],
    );
    let first = world.run_stet(&["add", "--json", "Fix the typo in the README"]);
    let (handle, id, claimed) = added(&first);
    assert_eq!(handle, "fix-typo-readme");
    assert!(
        id.ends_with("-fix-typo-readme") && claimed,
        "{}",
        first.stdout
    );
    // What to do next is said: the item is only here until it is pushed.
    assert!(
        first.stderr.contains(&format!(
            "git add .stet/queue/{id}.md && git commit -m 'queue fix-typo-readme' && git push"
        )),
        "{}",
        first.stderr
    );
    // The other clone has not pulled the item (it is not even committed): the claim on the
    // remote is what tells it.
    let mut later = world.stet(&["add", "Fix the typo in the README"]);
    later.current_dir(&other);
    let later = world.run(&mut later);
    assert_eq!(later.code, 0, "{}", later.stderr);
    assert_eq!(
        later.stdout,
        "added fix-typo-readme-2: Fix the typo in the README\n"
    );
    assert!(
        later.stderr.contains(
            "warning: fix-typo-readme is another item's handle already: this one is fix-typo-readme-2"
        ),
        "{}",
        later.stderr
    );
    let claims = git(
        &bare,
        &["for-each-ref", "--format=%(refname)", "refs/stet/handles/"],
    );
    assert_eq!(
        claims,
        "refs/stet/handles/fix-typo-readme\nrefs/stet/handles/fix-typo-readme-2\n"
    );

    // The handle, a start of it, or the id name the item; the queue shows the handle.
    world.run_stet(&["add", "Add a CHANGELOG"]);
    for given in ["fix-typo-readme", "fix-t", id.as_str(), &id[..20]] {
        let shown = world.run_stet(&["show", given]);
        assert_eq!(shown.code, 0, "{given}: {}", shown.stderr);
        assert!(
            shown.stdout.starts_with(&format!(
                "{id}  Fix the typo in the README\nhandle: fix-typo-readme\n"
            )),
            "{given}: {}",
            shown.stdout
        );
    }
    let json = world.run_stet(&["show", "--json", "fix"]).json();
    assert_eq!(json["handle"], "fix-typo-readme");
    let listed = world.run_stet(&["queue", "--json"]).json();
    let handles: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["handle"].as_str().unwrap())
        .collect();
    assert_eq!(handles, ["fix-typo-readme", "add-changelog"]);
    let table = world.run_stet(&["queue"]).stdout;
    assert!(
        table.contains(&format!("fix-typo-readme  {id}  Fix the typo")),
        "{table}"
    );
    // A start two items share is refused, naming each by handle and id.
    let mut ambiguous = world.stet(&["show", "fix"]);
    ambiguous.current_dir(&other);
    world.run_stet(&["add", "Fix the build"]);
    let mut both = world.stet(&["-C", other.to_str().unwrap(), "add", "Fix the tests"]);
    assert_eq!(world.run(&mut both).code, 0);
    let out = world.run(&mut ambiguous);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("error: `fix` names 2 items: fix-typo-readme-2 ("),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("), fix-tests ("), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("hint: give more of the handle, or the id"),
        "{}",
        out.stderr
    );
}

#[test]
fn an_item_added_while_the_remote_is_away_is_written_and_its_handle_said_unclaimed() {
    let world = World::new();
    cloned(&world);
    git(
        &world.work,
        &["remote", "set-url", "origin", "/nonexistent/remote.git"],
    );
    let out = world.run_stet(&["add", "--json", "Fix the typo"]);
    let (handle, id, claimed) = added(&out);
    assert_eq!(handle, "fix-typo");
    assert!(!claimed, "{}", out.stdout);
    assert!(
        world.work.join(format!(".stet/queue/{id}.md")).is_file(),
        "the item is written all the same"
    );
    assert!(
        out.stderr.contains(
            "warning: the handle fix-typo is not claimed on origin: the remote origin did not answer"
        ),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("another clone may give it to another item"),
        "{}",
        out.stderr
    );
}

#[test]
fn dash_c_runs_as_if_started_in_the_directory_and_a_missing_one_is_named() {
    let world = World::new();
    cloned(&world);
    let work = world.work.to_str().unwrap();
    let mut add = world.stet(&["-C", work, "add", "Fix the typo"]);
    add.current_dir(world.root.path());
    let out = world.run(&mut add);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // Relative, and taken in turn, as git takes them.
    let mut queue = world.stet(&["-C", "work", "-C", ".stet", "queue", "--json"]);
    queue.current_dir(world.root.path());
    let out = world.run(&mut queue);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["items"][0]["handle"], "fix-typo");
    // Outside a repository without -C: refused, as before.
    let mut outside = world.stet(&["queue"]);
    outside.current_dir(world.root.path());
    assert_eq!(world.run(&mut outside).code, 2);
    let mut missing = world.stet(&["-C", "no-such-dir", "queue"]);
    missing.current_dir(world.root.path());
    let out = world.run(&mut missing);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .starts_with("error: cannot run in no-such-dir: No such file or directory"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("hint: -C takes a directory"),
        "{}",
        out.stderr
    );
}

/// What the shell's dynamic completion gets from `stet` for the words `line` (the last
/// being the one completed), as bash asks it: `COMPLETE=bash stet -- WORDS…`.
fn completed(world: &World, dir: &std::path::Path, line: &[&str]) -> Vec<String> {
    let mut args = vec!["--", "stet"];
    args.extend_from_slice(line);
    let mut command = world.command(&stet_e2e::artifacts().join("stet"), &args, false);
    command
        .current_dir(dir)
        .env("COMPLETE", "bash")
        .env("_CLAP_COMPLETE_INDEX", line.len().to_string())
        .env("_CLAP_IFS", "\n");
    let out = world.run(&mut command);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.stdout.lines().map(str::to_string).collect()
}

#[test]
fn the_shell_completes_handles_from_the_working_copys_queue() {
    let world = World::new();
    cloned(&world);
    for title in [
        "Fix the typo in the README",
        "Fix the build",
        "Add a CHANGELOG",
    ] {
        assert_eq!(world.run_stet(&["add", title]).code, 0);
    }
    // No remote is asked: completion works with the remote gone.
    git(
        &world.work,
        &["remote", "set-url", "origin", "/nonexistent/remote.git"],
    );
    assert_eq!(
        completed(&world, &world.work, &["show", "fix"]),
        ["fix-typo-readme", "fix-build"]
    );
    assert_eq!(
        completed(&world, &world.work, &["rm", "add"]),
        ["add-changelog"]
    );
    assert_eq!(
        completed(&world, &world.work, &["receipts", "--item", "fix-b"]),
        ["fix-build"]
    );
    // With -C, from that directory's queue; outside any repository, no handle.
    assert_eq!(
        completed(&world, world.root.path(), &["-C", "work", "log", "fix-t"]),
        ["fix-typo-readme"]
    );
    assert!(completed(&world, world.root.path(), &["show", "fix"]).is_empty());
    // The registration script the shell sources names stet's own binary.
    let mut register = world.command(&stet_e2e::artifacts().join("stet"), &[], false);
    register.env("COMPLETE", "bash");
    let out = world.run(&mut register);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("complete -o nospace"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains(&stet_e2e::artifacts().join("stet").display().to_string()),
        "{}",
        out.stdout
    );
}
