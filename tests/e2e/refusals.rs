//! Every refusal of `drive`, `walls`, `run` and `queue` as the person sees it: the exit
//! code, standard output and standard error together, through the real binary, snapshotted
//! (insta). A refusal names what is wrong and what to do; a change to one shows up here.

use stet_e2e::{git, require_image, World};

/// How a command ended, as one text: its exit code, then what it printed on each stream,
/// with the world's paths redacted.
fn refusal(world: &World, dir: &std::path::Path, args: &[&str]) -> String {
    let mut command = world.stet(args);
    command.current_dir(dir).stdin(std::process::Stdio::null());
    let out = world.run(&mut command);
    world.redact(&format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        out.code, out.stdout, out.stderr
    ))
}

/// A world with the docker runtime and the command harness (the example agent) installed,
/// whose working directory is a clone of a fresh bare remote.
fn world() -> World {
    let world = World::new();
    world.install("docker");
    world.install("command");
    world.clone_of_fresh_remote();
    world
}

#[test]
fn drive_outside_a_repository() {
    let world = world();
    let outside = world.root.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    insta::assert_snapshot!(refusal(&world, &outside, &["drive", "--yes"]));
}

#[test]
fn drive_without_the_named_remote() {
    let world = world();
    insta::assert_snapshot!(refusal(
        &world,
        &world.work,
        &["drive", "--yes", "--remote", "upstream"]
    ));
}

#[test]
fn drive_inside_a_sandbox() {
    let world = world();
    let mut command = world.stet(&["drive", "--yes"]);
    command.current_dir(&world.work).env("STET_IN_SANDBOX", "1");
    let out = world.run(&mut command);
    insta::assert_snapshot!(world.redact(&format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        out.code, out.stdout, out.stderr
    )));
}

#[test]
fn drive_with_a_runtime_name_mistyped() {
    let world = world();
    insta::assert_snapshot!(refusal(
        &world,
        &world.work,
        &["drive", "--yes", "--runtime", "dockr"]
    ));
}

#[test]
fn drive_with_a_harness_that_is_not_configured() {
    require_image();
    let world = world();
    insta::assert_snapshot!(refusal(
        &world,
        &world.work,
        &["drive", "--yes", "--harness", "command"]
    ));
}

/// The harness's table is in the repository's stet.toml, which nobody trusted: the refusal
/// names that as the cause, and `stet trust` as the remedy, not the setting it holds.
#[test]
fn drive_with_the_harness_configured_in_an_untrusted_stet_toml() {
    require_image();
    let world = world();
    std::fs::write(
        world.work.join("stet.toml"),
        "[plugins.command]\nimplement = [\"/opt/agent/agent.sh\"]\n",
    )
    .unwrap();
    insta::assert_snapshot!(refusal(
        &world,
        &world.work,
        &["drive", "--yes", "--harness", "command"]
    ));
}

#[test]
fn drive_with_no_lanes() {
    let world = world();
    insta::assert_snapshot!(refusal(
        &world,
        &world.work,
        &["drive", "--yes", "--jobs", "0"]
    ));
}

#[test]
fn drive_with_a_wrong_rounds_value() {
    let world = world();
    insta::assert_snapshot!(refusal(
        &world,
        &world.work,
        &["drive", "--yes", "--rounds", "none"]
    ));
}

#[test]
fn walls_with_a_harness_name_mistyped() {
    let world = world();
    insta::assert_snapshot!(refusal(
        &world,
        &world.work,
        &["walls", "--harness", "comand"]
    ));
}

#[test]
fn walls_with_no_harness_installed() {
    let world = World::new();
    world.install("docker");
    world.clone_of_fresh_remote();
    insta::assert_snapshot!(refusal(&world, &world.work, &["walls"]));
}

#[test]
fn walls_with_a_wrong_typed_setting() {
    let world = world();
    std::fs::write(world.work.join("stet.toml"), "[sandbox]\npids = \"many\"\n").unwrap();
    insta::assert_snapshot!(refusal(&world, &world.work, &["walls"]));
}

#[test]
fn run_without_the_double_dash() {
    let world = world();
    insta::assert_snapshot!(refusal(&world, &world.work, &["run", "ls", "-la"]));
}

#[test]
fn run_of_a_command_the_image_does_not_have() {
    require_image();
    let world = world();
    insta::assert_snapshot!(refusal(
        &world,
        &world.work,
        &["run", "--", "no-such-command-here"]
    ));
}

#[test]
fn run_with_a_runtime_name_mistyped() {
    let world = world();
    insta::assert_snapshot!(refusal(
        &world,
        &world.work,
        &["run", "--runtime", "dockr", "--", "true"]
    ));
}

#[test]
fn run_with_an_empty_image() {
    let world = world();
    std::fs::write(world.work.join("stet.toml"), "[sandbox]\nimage = \"\"\n").unwrap();
    insta::assert_snapshot!(refusal(&world, &world.work, &["run", "--", "true"]));
}

#[test]
fn queue_outside_a_repository() {
    let world = world();
    let outside = world.root.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    insta::assert_snapshot!(refusal(&world, &outside, &["queue"]));
}

#[test]
fn queue_with_the_remote_unreachable() {
    let world = world();
    // Pushed: the item is on the base too, and only the remote's silence is shown.
    let added = world.add_pushed("Fix the typo");
    assert_eq!(added.code, 0, "{}", added.stderr);
    git(
        &world.work,
        &["remote", "set-url", "origin", "/nonexistent/remote.git"],
    );
    // The item's id carries the time it was added: shown as ID.
    let id = std::fs::read_dir(world.work.join(".stet/queue"))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .find_map(|name| name.strip_suffix(".md").map(str::to_string))
        .unwrap();
    insta::assert_snapshot!(refusal(&world, &world.work, &["queue"]).replace(&id, "[ID]"));
}

#[test]
fn retry_of_an_item_that_is_not_there() {
    let world = world();
    insta::assert_snapshot!(refusal(&world, &world.work, &["retry", "no-such-item"]));
}

#[test]
fn walls_with_a_plugin_setting_of_the_wrong_type() {
    let world = world();
    std::fs::write(
        world.work.join("stet.toml"),
        "[harness]\nprefer = [\"command\"]\n\n[plugins.command]\nimplement = \"./agent.sh\"\n",
    )
    .unwrap();
    let trusted = world.trust_in(&world.work);
    assert_eq!(trusted.code, 0, "{}", trusted.stderr);
    insta::assert_snapshot!(refusal(&world, &world.work, &["walls"]));
}

#[test]
fn walls_with_a_plugin_setting_misspelt() {
    let world = world();
    std::fs::write(
        world.work.join("stet.toml"),
        "[plugins.command]\nimplement = [\"./agent.sh\"]\nnetwrk = \"none\"\n",
    )
    .unwrap();
    let trusted = world.trust_in(&world.work);
    assert_eq!(trusted.code, 0, "{}", trusted.stderr);
    insta::assert_snapshot!(refusal(&world, &world.work, &["walls"]));
}

#[test]
fn gc_with_no_runtime_that_answers() {
    let world = world();
    std::fs::write(
        world.work.join("stet.toml"),
        "[plugins.docker]\nhost = \"unix:///nonexistent/docker.sock\"\n",
    )
    .unwrap();
    let trusted = world.trust_in(&world.work);
    assert_eq!(trusted.code, 0, "{}", trusted.stderr);
    insta::assert_snapshot!(refusal(&world, &world.work, &["gc"]));
}

/// The lane commands on an item no drive has worked: no lane, no branch, nothing to show or
/// take.
#[test]
fn lane_commands_on_an_item_never_worked() {
    let world = world();
    let added = world.add_pushed("Fix the typo");
    assert_eq!(added.code, 0, "{}", added.stderr);
    // The item by its handle, as a person types it; its id (time first) redacted.
    let handle = "fix-typo";
    let id = std::fs::read_dir(world.work.join(".stet/queue"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .find_map(|name| name.strip_suffix(".md").map(str::to_string))
        .unwrap();
    for command in ["diff", "checkout", "merge"] {
        insta::assert_snapshot!(
            format!("{command}_of_an_item_never_worked"),
            refusal(&world, &world.work, &[command, handle]).replace(&id, "[ID]")
        );
    }
}
