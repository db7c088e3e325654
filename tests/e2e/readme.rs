//! The README's examples run as written: every ```sh block of README.md either runs here, in
//! the order the README gives them, in one scratch world — a clone of a fresh bare remote,
//! the real Docker runtime, the command harness running the example agent, as a person
//! would have set it up — and must exit 0; or the line before it says why it cannot run
//! here: `<!-- not run by the README test: WHY -->` (a login, macOS, an install into the
//! home directory, the whole test suite itself).
//!
//! `stet` and `dist/bin/stet` in a block are the stet under test, with its plugins. A
//! block runs under `bash -euo pipefail` in the world's working copy, as an unprivileged
//! person when the tests run as root.

use std::os::unix::process::CommandExt;
use std::path::Path;

use stet_e2e::{
    chown_all, docker_group, example_agent, require_image, running_as_root, serial_drives, World,
    IMAGE,
};

/// The mark that keeps a block from running, with why.
const NOT_RUN: &str = "<!-- not run by the README test:";

/// A ```sh block of the README.
#[derive(Debug)]
struct Block {
    /// Its first line's number in the README (1-based), for messages.
    line: usize,
    text: String,
    /// Why it does not run here, when it is marked so.
    not_run: Option<String>,
}

/// The README's ```sh blocks, each with the mark before it, if any.
fn blocks(readme: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    let mut before = String::new();
    for (n, line) in readme.lines().enumerate() {
        if let Some(block) = open.as_mut() {
            if line.trim_start().starts_with("```") {
                blocks.push(open.take().unwrap());
            } else {
                block.text.push_str(line);
                block.text.push('\n');
            }
            continue;
        }
        if line.trim_start().starts_with("```sh") {
            let not_run = before
                .trim()
                .strip_prefix(NOT_RUN)
                .and_then(|why| why.strip_suffix("-->"))
                .map(|why| why.trim().to_string());
            open = Some(Block {
                line: n + 1,
                text: String::new(),
                not_run,
            });
        }
        if !line.trim().is_empty() {
            before = line.to_string();
        }
    }
    assert!(open.is_none(), "the README ends inside a ```sh block");
    blocks
}

#[test]
fn every_sh_block_is_found_with_its_mark() {
    let found = blocks(
        "text\n\n<!-- not run by the README test: it logs in -->\n```sh\nclaude login\n```\n\n```sh\nstet queue\n```\n",
    );
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].not_run.as_deref(), Some("it logs in"));
    assert_eq!(found[0].text, "claude login\n");
    assert_eq!(found[1].not_run, None);
    assert_eq!(found[1].line, 8);
}

#[test]
fn the_readmes_examples_run_as_written() {
    require_image();
    let _serial = serial_drives();
    let readme = std::fs::read_to_string(stet_e2e::repo_root().join("README.md")).unwrap();
    let blocks = blocks(&readme);
    for block in &blocks {
        if let Some(why) = &block.not_run {
            assert!(
                why.len() >= 10,
                "README.md:{}: say why the block does not run here: {why:?}",
                block.line
            );
        }
    }
    let world = World::new();
    world.install("docker");
    world.install("command");
    world.clone_of_fresh_remote();
    let home = world.root.path().join("home");
    // The person's own set-up: a git identity, and stet's user configuration choosing the
    // example agent (their own file, always trusted).
    std::fs::create_dir_all(home.join(".config/stet")).unwrap();
    std::fs::write(
        home.join(".gitconfig"),
        "[user]\n\tname = A Person\n\temail = person@example.invalid\n",
    )
    .unwrap();
    std::fs::write(
        home.join(".config/stet/config.toml"),
        format!(
            "[harness]\nprefer = [\"command\"]\n\n[sandbox]\nimage = \"{IMAGE}\"\n\n\
             [plugins.command]\nimplement = [\"{}\"]\n",
            example_agent().display()
        ),
    )
    .unwrap();
    // `stet` on PATH and `dist/bin/stet` in the working copy (as in a checkout of stet
    // after `cargo xtask dist`), both the stet under test with the world's plugins.
    let bin = world.root.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let wrapper = format!(
        "#!/bin/sh\nexec '{}' --plugins-dir '{}' \"$@\"\n",
        stet_e2e::artifacts().join("stet").display(),
        world.plugins.display()
    );
    for dir in [bin.clone(), world.work.join("dist/bin")] {
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("stet");
        std::fs::write(&path, &wrapper).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    // As in stet's checkout, the built tree and the scripts are beside the README.
    std::os::unix::fs::symlink(
        stet_e2e::repo_root().join("scripts"),
        world.work.join("scripts"),
    )
    .unwrap();
    std::fs::write(world.work.join(".git/info/exclude"), "/dist/\n/scripts\n").unwrap();
    let who = running_as_root().then(|| (stet_e2e::UNPRIVILEGED_UID, docker_group()));
    let mut ran = 0;
    for block in blocks.iter().filter(|b| b.not_run.is_none()) {
        let mut command = world.command(Path::new("/bin/bash"), &[], false);
        command
            .args(["-euo", "pipefail", "-c", &block.text])
            .env(
                "PATH",
                format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
            )
            .stdin(std::process::Stdio::null());
        if let Some((uid, gid)) = who {
            chown_all(world.root.path(), uid, gid);
            command.uid(uid).gid(gid);
        }
        let out = world.run(&mut command);
        assert_eq!(
            out.code, 0,
            "README.md:{}: the block did not run as written:\n{}\n--- stdout\n{}--- stderr\n{}",
            block.line, block.text, out.stdout, out.stderr
        );
        ran += 1;
    }
    assert!(ran > 0, "no block of the README ran");
    eprintln!(
        "{ran} README blocks ran; {} marked not to run here",
        blocks.len() - ran
    );
}
