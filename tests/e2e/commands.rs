//! Every command's happy path, and its `--json` output, through the real `stet` binary: the
//! exit code, standard output and standard error together in one snapshot (insta), with
//! what changes from run to run redacted (ids, times, paths, durations, versions, hashes,
//! ports), as uv's CLI tests do. A change to what a command prints shows up here.
//!
//! Three worlds, each set up once and walked through several commands in the order a person
//! would run them: a repository from `stet init` to `stet clean` (with a drive of the example
//! agent, no model), the walled commands (`run`, `walls`, `ask`), and the plugins and
//! housekeeping commands. stet runs as an unprivileged user when the tests run as root, as
//! the command harness's tests run it, so what the walls say is the same on any machine.
//!
//! Not snapshotted: `stet profile login` (interactive, on a terminal, with the harness's own
//! login), `stet net` (hidden: the network wall's pieces inside a sandbox), `--help` (pinned
//! by docs/cli.md, which a test keeps current).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use stet_e2e::{
    chown_all, docker_group, example_agent, require_image, running_as_root, serial_drives, Output,
    World, IMAGE,
};

/// What changes from run to run, and what stands in for it in a snapshot.
const FILTERS: &[(&str, &str)] = stet_e2e::SNAPSHOT_FILTERS;

/// A world whose commands run as a person would run stet: unprivileged (uid 4242 in the
/// Docker socket's group) when the tests run as root.
struct Person {
    world: World,
    who: Option<(u32, u32)>,
}

impl Person {
    fn new() -> Person {
        let world = World::new();
        world.install("docker");
        world.install("command");
        Person {
            world,
            who: running_as_root().then(|| (stet_e2e::UNPRIVILEGED_UID, docker_group())),
        }
    }

    fn work(&self) -> &Path {
        &self.world.work
    }

    fn profiles(&self) -> PathBuf {
        self.world.root.path().join("profiles")
    }

    /// Writes the person's own `config.toml` (always trusted): the walled profiles, the lane
    /// image, and the command harness running the example agent.
    fn person_config(&self) {
        let dir = self.world.root.path().join("home/.config/stet");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(self.profiles()).unwrap();
        std::fs::write(
            dir.join("config.toml"),
            format!(
                "[harness]\nprofiles = \"{}\"\n\n[sandbox]\nimage = \"{IMAGE}\"\n\n\
                 [plugins.command]\nimplement = [\"{}\"]\n",
                self.profiles().display(),
                example_agent().display()
            ),
        )
        .unwrap();
    }

    /// Runs `stet args…` in the working directory, as the person; the world is handed to
    /// them first.
    fn run(&self, args: &[&str]) -> Output {
        let mut command = self.world.stet(args);
        command.stdin(std::process::Stdio::null());
        if let Some((uid, gid)) = self.who {
            chown_all(self.world.root.path(), uid, gid);
            command.uid(uid).gid(gid);
        }
        self.world.run(&mut command)
    }

    /// How `stet args…` ended, as one text: the command, its exit code, then what it
    /// printed on each stream, with the world's paths redacted.
    fn transcript(&self, args: &[&str]) -> (Output, String) {
        let out = self.run(args);
        let text = self
            .world
            .redact(&format!(
                "$ stet {}\nexit: {}\n--- stdout\n{}--- stderr\n{}",
                args.iter()
                    .map(|a| if a.contains(' ') {
                        format!("'{a}'")
                    } else {
                        a.to_string()
                    })
                    .collect::<Vec<_>>()
                    .join(" "),
                out.code,
                out.stdout,
                out.stderr
            ))
            .replace(&stet_e2e::repo_root().display().to_string(), "[REPO]");
        (out, mounts_in_order(&text))
    }

    /// Snapshots `stet args…` as `name`, and returns what it did.
    fn snap(&self, name: &str, args: &[&str]) -> Output {
        let (out, text) = self.transcript(args);
        let filters: Vec<(&str, &str)> = FILTERS.to_vec();
        insta::with_settings!({ filters => filters }, {
            insta::assert_snapshot!(name, text);
        });
        out
    }

    /// Git in the working directory, as the person (with a fixed identity).
    fn git(&self, args: &[&str]) -> String {
        let mut command = std::process::Command::new("git");
        command
            .args(args)
            .current_dir(self.work())
            .env("HOME", self.world.root.path().join("home"))
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t");
        if let Some((uid, gid)) = self.who {
            chown_all(self.world.root.path(), uid, gid);
            command.uid(uid).gid(gid);
        }
        let out = command.output().expect("run git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// `text` with the list of writable mounts the walls' proof reports (`writable: A B …`)
/// sorted: the engine lists a sandbox's mounts in no fixed order.
fn mounts_in_order(text: &str) -> String {
    const WRITABLE: &str = "writable: ";
    let mut lines = Vec::new();
    for line in text.split('\n') {
        let Some(at) = line.find(WRITABLE) else {
            lines.push(line.to_string());
            continue;
        };
        let (head, rest) = line.split_at(at + WRITABLE.len());
        let end = rest.find('"').unwrap_or(rest.len());
        let mut mounts: Vec<&str> = rest[..end].split(' ').collect();
        mounts.sort_unstable();
        lines.push(format!("{head}{}{}", mounts.join(" "), &rest[end..]));
    }
    lines.join("\n")
}

/// The handle of the item `stet add` just added (`added HANDLE: title`), which every
/// command takes as it takes the id.
fn added_id(out: &Output) -> String {
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    out.stdout
        .strip_prefix("added ")
        .and_then(|rest| rest.split([':', ' ', '\n']).next())
        .unwrap_or_else(|| panic!("no id in {:?}", out.stdout))
        .to_string()
}

/// A repository from `stet init` to `stet clean`: the queue commands around one drive of the
/// example agent, which lands one item and gives another up.
#[test]
fn a_repository_from_init_through_a_drive_to_clean() {
    require_image();
    let _serial = serial_drives();
    let p = Person::new();
    p.world.clone_of_fresh_remote();
    p.person_config();

    p.snap("init", &["init"]);
    p.snap("trust", &["trust"]);
    p.git(&["add", "--all"]);
    p.git(&["commit", "--quiet", "-m", "set stet up"]);
    p.git(&["push", "--quiet", "origin", "HEAD"]);
    p.snap("doctor", &["doctor"]);
    p.snap("doctor_json", &["doctor", "--json"]);

    p.snap("queue_when_empty", &["queue"]);
    p.snap("status_before_any_drive", &["status"]);
    p.snap("status_json_before_any_drive", &["status", "--json"]);
    let landing = added_id(&p.snap("add", &["add", "write hello.txt: hi from the drive"]));
    stet_e2e::next_millisecond();
    let item = p.world.root.path().join("item.md");
    std::fs::write(
        &item,
        "Nothing the example agent understands\n\nA body of more lines.\n",
    )
    .unwrap();
    let failing = added_id(&p.snap("add_from_a_file", &["add", "-F", item.to_str().unwrap()]));
    stet_e2e::next_millisecond();
    let cancelled = p.snap(
        "add_json",
        &[
            "add",
            "--json",
            "write never.txt: cancelled before any drive",
        ],
    );
    assert_eq!(cancelled.code, 0, "{}", cancelled.stderr);
    let cancelled = cancelled.json()["handle"].as_str().unwrap().to_string();
    p.git(&["add", "--all"]);
    p.git(&["commit", "--quiet", "-m", "queue three items"]);
    p.git(&["push", "--quiet", "origin", "HEAD"]);
    p.snap("queue_before_the_drive", &["queue"]);
    p.snap("queue_json_before_the_drive", &["queue", "--json"]);
    p.snap("show_an_open_item", &["show", &landing]);
    p.snap("rm", &["rm", &cancelled]);

    // A dry run first: what the drive would take, reserving nothing on the remote.
    let remote = p.world.root.path().join("remote.git");
    let refs = || stet_e2e::git(&remote, &["-c", "safe.directory=*", "for-each-ref"]);
    let before = refs();
    p.snap("drive_dry_run", &["drive", "--dry-run"]);
    p.snap("drive_dry_run_json", &["drive", "--dry-run", "--json"]);
    assert_eq!(refs(), before, "a dry run changes nothing on the remote");

    p.snap("drive", &["drive", "--yes", "--rounds", "1"]);

    p.snap("queue", &["queue"]);
    p.snap("queue_json", &["queue", "--json"]);
    p.snap("show", &["show", &landing]);
    p.snap("show_json", &["show", "--json", &landing]);
    p.snap("show_diff", &["show", "--diff", &landing]);
    p.snap("show_prompt", &["show", &landing, "--prompt", "2"]);
    p.snap("show_a_failed_item", &["show", &failing]);
    p.snap("show_a_cancelled_item", &["show", &cancelled]);
    p.snap("show_json_of_a_failed_item", &["show", "--json", &failing]);
    p.snap("log", &["log", &landing]);
    p.snap("log_of_a_failed_item", &["log", &failing]);
    p.snap("log_raw", &["log", "--raw", &landing]);
    p.snap("log_of_a_role", &["log", &landing, "--role", "implement"]);
    p.snap("log_json", &["log", "--json", &landing, "--round", "1"]);
    p.snap(
        "log_of_a_round_it_never_had",
        &["log", &landing, "--round", "2"],
    );
    p.snap("log_follow_with_no_drive_here", &["log", "-f", &cancelled]);
    p.snap("receipts", &["receipts"]);
    p.snap("receipts_json", &["receipts", "--json"]);
    p.snap("receipts_of_one_item", &["receipts", "--item", &landing]);
    p.snap("receipts_last_json", &["receipts", "--last", "1", "--json"]);
    p.snap("receipts_verbose", &["-v", "receipts", "--last", "1"]);
    p.snap("receipts_last_0", &["receipts", "--last", "0"]);
    p.snap("land_without_a_land_step", &["land", &landing]);
    p.snap("status", &["status"]);
    p.snap("status_json", &["status", "--json"]);
    // Failed, then cancelled: the person's latest word shows, and retry clears both.
    p.snap("rm_of_a_failed_item", &["rm", &failing]);
    p.snap("rm_again", &["rm", &failing]);
    p.snap("show_a_failed_then_cancelled_item", &["show", &failing]);
    p.snap("status_of_a_cancelled_lane", &["status"]);
    p.snap("retry", &["retry", &failing]);
    p.snap("retry_again", &["retry", &failing]);
    p.snap("queue_json_after_retry", &["queue", "--json"]);
    p.snap("drive_quiet", &["-q", "drive", "--yes", "--rounds", "1"]);
    p.snap(
        "drive_json",
        &["-q", "drive", "--yes", "--rounds", "1", "--json"],
    );
    let lanes = p.work().join(".git/stet/lanes");
    let kept = std::fs::read_dir(&lanes).unwrap().count();
    p.snap("clean_dry_run", &["clean", "--dry-run"]);
    assert_eq!(
        std::fs::read_dir(&lanes).unwrap().count(),
        kept,
        "a dry run removes nothing"
    );
    p.snap("clean_json", &["clean", "--json"]);
    p.snap("clean_with_nothing_left", &["clean"]);
    // The local branch is gone: show reads the remote's.
    p.snap("show_after_clean", &["show", &landing]);
    p.snap("show_diff_after_clean", &["show", "--diff", &landing]);
    p.snap("trust_revoke", &["trust", "--revoke"]);
}

/// The walled commands on a repository the person set up: a command in a sandbox, the
/// walls' proof, one walled agent call.
#[test]
fn run_walls_and_ask_in_a_configured_repository() {
    require_image();
    let _serial = serial_drives();
    let p = Person::new();
    p.world.clone_of_fresh_remote();
    p.person_config();

    p.snap("run", &["run", "--", "sh", "-c", "echo out; echo err >&2"]);
    p.snap(
        "run_passes_the_exit_status_through",
        &["run", "--", "sh", "-c", "exit 3"],
    );
    p.snap("walls", &["walls", "--harness", "command"]);
    p.snap("walls_json", &["walls", "--harness", "command", "--json"]);
    p.snap(
        "ask",
        &["ask", "--harness", "command", "write asked.txt: once"],
    );
    p.snap(
        "ask_json",
        &[
            "ask",
            "--harness",
            "command",
            "--json",
            "write asked.txt: twice",
        ],
    );
    p.snap(
        "ask_as_the_reviewer",
        &[
            "ask",
            "--harness",
            "command",
            "--role",
            "review",
            "Review this",
        ],
    );
}

/// The plugins commands and the housekeeping ones that need no repository.
#[test]
fn plugins_and_housekeeping() {
    require_image();
    let _serial = serial_drives();
    let p = Person::new();
    p.world.clone_of_fresh_remote();
    p.person_config();

    p.snap("plugins_list", &["plugins", "list"]);
    p.snap("plugins_list_json", &["plugins", "list", "--json"]);
    p.snap("plugins_probe", &["plugins", "probe"]);
    p.snap("plugins_probe_json", &["plugins", "probe", "--json"]);
    p.snap("plugins_probe_one", &["plugins", "probe", "docker"]);
    p.snap("plugins_list_verbose", &["-v", "plugins", "list"]);
    p.snap("plugins_conformance", &["plugins", "conformance", "docker"]);
    p.snap(
        "plugins_conformance_json",
        &["plugins", "conformance", "--json", "docker"],
    );

    let docker = p.world.plugins.join("docker");
    let command = p.world.plugins.join("command");
    p.snap(
        "plugins_install",
        &["plugins", "install", docker.to_str().unwrap()],
    );
    p.snap(
        "plugins_install_json",
        &["plugins", "install", "--json", command.to_str().unwrap()],
    );
    p.snap("plugins_trust", &["plugins", "trust", "docker"]);
    p.snap(
        "plugins_trust_json",
        &["plugins", "trust", "--json", "docker"],
    );
    p.snap("plugins_uninstall", &["plugins", "uninstall", "command"]);
    p.snap(
        "plugins_uninstall_json",
        &["plugins", "uninstall", "--json", "docker"],
    );

    p.snap("gc", &["gc"]);
    p.snap("gc_json", &["gc", "--json"]);
    p.snap("gc_dry_run", &["gc", "--dry-run"]);
    p.snap("completions_fish", &["completions", "fish"]);
    p.snap("version", &["--version"]);
}

/// A set-up that works the first time, from a fresh repository with a Rust project and no
/// harness configured: `init` exits 0, writes an image recipe for the check's toolchain and
/// says what is still missing, on which `doctor` fails; an untrusted edit is named as the
/// cause where its setting is ignored, and `trust --diff` shows it; the item commands'
/// `--json`.
#[test]
fn a_set_up_from_a_fresh_repository_says_what_is_missing_until_a_drive_can_start() {
    require_image();
    let _serial = serial_drives();
    let p = Person::new();
    p.world.clone_of_fresh_remote();
    // The person's own settings: where the walled profiles are; no harness configured.
    let dir = p.world.root.path().join("home/.config/stet");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(p.profiles()).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!("[harness]\nprofiles = \"{}\"\n", p.profiles().display()),
    )
    .unwrap();
    std::fs::write(
        p.work().join("Cargo.toml"),
        "[package]\nname = \"x\"\nversion = \"0.1.0\"\n",
    )
    .unwrap();

    let init = p.snap("init_in_a_fresh_repository", &["init"]);
    assert_eq!(init.code, 0, "{}", init.stderr);
    let file = |path: &str| std::fs::read_to_string(p.work().join(path)).unwrap();
    let filters: Vec<(&str, &str)> = FILTERS.to_vec();
    insta::with_settings!({ filters => filters }, {
        insta::assert_snapshot!("init_stet_toml", p.world.redact(&file("stet.toml")));
        insta::assert_snapshot!("init_containerfile", file(".stet/Containerfile"));
    });
    let doctor = p.snap("doctor_after_init", &["doctor"]);
    assert_eq!(doctor.code, 3, "doctor fails on what init said is missing");

    // A table the person adds is untrusted until `stet trust`: named as the cause.
    let mut text = file("stet.toml");
    text.push_str(&format!(
        "\n[plugins.command]\nimplement = [\"{}\"]\n",
        example_agent().display()
    ));
    std::fs::write(p.work().join("stet.toml"), text).unwrap();
    p.snap("doctor_with_an_untrusted_table", &["doctor"]);
    p.snap("trust_diff", &["trust", "--diff"]);
    p.snap("trust_json", &["trust", "--json"]);
    p.snap("trust_diff_when_unchanged", &["trust", "--diff"]);

    // The item commands that act on one item, for scripts.
    let id = added_id(&p.run(&["add", "write a.txt: a"]));
    p.git(&["add", "--all"]);
    p.git(&["commit", "--quiet", "-m", "set up"]);
    p.git(&["push", "--quiet", "origin", "HEAD"]);
    p.snap("rm_json", &["rm", "--json", &id]);
    p.snap("retry_json", &["retry", "--json", &id]);

    // init --json, where there is no stet.toml (its Containerfile kept as it is).
    std::fs::remove_file(p.work().join("stet.toml")).unwrap();
    p.snap("init_json", &["init", "--json"]);
}
