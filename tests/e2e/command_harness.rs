//! The command harness through the real `stet` binary and the real Docker Engine, with the
//! example agent (`examples/agent/agent.sh`, no model) and stand-in agents written here.
//!
//! When these tests run as root, stet is run as an unprivileged uid in the Docker socket's
//! group, with the world handed to it, as a person would run it; one test runs it as root
//! on purpose and sees the agent run as the lane's owner, root, and the wall say so.

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use stet_e2e::{
    chown_all, docker_group, example_agent, require_image, running_as_root, wall, Output, World,
    IMAGE, UNPRIVILEGED_UID,
};

/// A world with docker and command installed and the repository's stet.toml pointing the
/// command harness at `[plugins.command]` lines `table`.
struct Cmd {
    world: World,
    /// Who stet runs as, when not the test's own user.
    who: Option<(u32, u32)>,
}

impl Cmd {
    /// Runs as an unprivileged user (the test's own, or 4242 when the test is root).
    fn new(table: &str) -> Cmd {
        let who = running_as_root().then(|| (UNPRIVILEGED_UID, docker_group()));
        Cmd::with(table, who)
    }

    fn with(table: &str, who: Option<(u32, u32)>) -> Cmd {
        require_image();
        let world = World::new();
        world.install("docker");
        world.install("command");
        let cmd = Cmd { world, who };
        cmd.configure(table);
        cmd
    }

    fn configure(&self, table: &str) {
        self.world.repo_config(&format!(
            "[harness]\nprofiles = \"{}\"\n\n[sandbox]\nimage = \"{IMAGE}\"\n\n[plugins.command]\n{table}\n",
            self.profiles().display()
        ));
    }

    fn profiles(&self) -> PathBuf {
        self.world.root.path().join("profiles")
    }

    /// Runs `stet args…` in the world, as `who`; the world is handed to `who` first.
    fn run(&self, args: &[&str]) -> Output {
        let mut command = self.world.stet(args);
        if let Some((uid, gid)) = self.who {
            chown_all(self.world.root.path(), uid, gid);
            command.uid(uid).gid(gid);
        }
        self.world.run(&mut command)
    }

    /// Makes the world a clone of a fresh remote holding its configured stet.toml and
    /// `files` (path, text), trusted, committed and pushed: where a drive starts. Returns
    /// the remote.
    fn on_fresh_remote(&self, files: &[(&str, &str)]) -> PathBuf {
        let config = std::fs::read_to_string(self.world.work.join("stet.toml")).unwrap();
        let remote = self.world.clone_of_fresh_remote();
        std::fs::write(self.world.work.join("stet.toml"), config).unwrap();
        for (path, text) in files {
            std::fs::write(self.world.work.join(path), text).unwrap();
        }
        self.world.trust_in(&self.world.work);
        git(&self.world.work, &["add", "--all"]);
        git(
            &self.world.work,
            &["commit", "--quiet", "-m", "configure stet"],
        );
        git(&self.world.work, &["push", "--quiet", "origin", "HEAD"]);
        remote
    }

    /// A stand-in agent: a shell script at `<root>/bin/NAME`.
    fn stand_in(&self, name: &str, body: &str) -> PathBuf {
        let path = self.world.root.path().join("bin").join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        stet_exec_support::write_executable(&path, format!("#!/bin/sh\n{body}\n").as_bytes())
            .unwrap();
        path
    }
}

fn implement(agent: &Path) -> String {
    format!("implement = [\"{}\"]", agent.display())
}

const STATIC_WALLS: [&str; 3] = ["command-found", "profile-alone", "no-credential-in-env"];
/// The runtime's own walls, which the host proves for every harness.
const RUNTIME_WALLS: [&str; 3] = ["lane-only", "env-from-launch", "network-as-launched"];
const LIVE_WALLS: [&str; 6] = [
    "env-from-scratch",
    "runs-as-lane-owner",
    "network-as-configured",
    "mounts-read-only",
    "no-remote-in-lane",
    "command-in-sandbox",
];

/// Runs git in `dir` with a fixed identity, as the test's own user (before the world is
/// handed over).
fn git(dir: &Path, args: &[&str]) -> String {
    stet_e2e::git(dir, args)
}

#[test]
fn probe_shows_command_available_when_configured_and_the_remedy_when_not() {
    let c = Cmd::new("");
    let out = c.run(&["plugins", "probe", "command"]);
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("command  harness  unavailable  no agent command is configured"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(
            "hint: set implement = [\"/path/to/agent\"] under [plugins.command] in stet.toml"
        ),
        "{}",
        out.stdout
    );

    c.configure(&implement(&example_agent()));
    let out = c.run(&["plugins", "probe", "command"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let agent = example_agent().display().to_string();
    assert!(
        out.stdout.contains(&format!(
            "command  harness  available    {agent}, priority 10"
        )),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!("implement: [\"{agent}\"]")),
        "{}",
        out.stdout
    );

    // A host path that is not there makes it unavailable, naming it.
    c.configure("implement = [\"/nonexistent/agent.sh\"]");
    let out = c.run(&["plugins", "probe", "--json", "command"]);
    assert_eq!(out.code, 3);
    let probe = &out.json()["plugins"][0]["probe"];
    assert_eq!(probe["available"], false);
    assert_eq!(
        probe["reason"],
        "the implement command /nonexistent/agent.sh does not exist"
    );
}

#[test]
fn a_relative_command_is_resolved_against_the_repository_root() {
    let c = Cmd::new("implement = [\"tools/agent.sh\", \"--quiet\"]");
    let tools = c.world.work.join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    std::fs::copy(example_agent(), tools.join("agent.sh")).unwrap();
    let deeper = c.world.work.join("src/deeper");
    std::fs::create_dir_all(&deeper).unwrap();
    let mut command = c.world.stet(&["plugins", "probe", "--json", "command"]);
    command.current_dir(&deeper);
    if let Some((uid, gid)) = c.who {
        chown_all(c.world.root.path(), uid, gid);
        command.uid(uid).gid(gid);
    }
    let out = c.world.run(&mut command);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let probe = &out.json()["plugins"][0]["probe"];
    let resolved = c.world.work.join("tools/agent.sh").display().to_string();
    assert_eq!(probe["backend_version"], resolved.as_str(), "{probe:#}");
}

#[test]
fn every_wall_holds_with_the_example_agent() {
    let c = Cmd::new(&implement(&example_agent()));
    let out = c.run(&["walls", "--harness", "command", "--json"]);
    let json = out.json();
    assert_eq!(out.code, 0, "{json:#}\n{}", out.stderr);
    for name in STATIC_WALLS
        .iter()
        .chain(LIVE_WALLS.iter())
        .chain(RUNTIME_WALLS.iter())
    {
        assert_eq!(wall(&json, name)["held"], true, "{name}: {json:#}");
    }
    assert_eq!(
        wall(&json, "lane-only")["detail"],
        "the lane is writable and seen by the host; a file outside every mount is not visible"
    );
    assert_eq!(json["harness"], "command");
    assert_eq!(json["runtime"], "docker");
    assert_eq!(json["network"], "none");
    // A container shares the host's kernel: its runtime claims no kernel of its own, and
    // the proof shows no `own-kernel` wall it could not hold.
    assert!(
        json["walls"]
            .as_array()
            .unwrap()
            .iter()
            .all(|w| w["wall"] != "own-kernel"),
        "{json:#}"
    );
    let profile = c.profiles().join(".command");
    assert_eq!(json["profile"], profile.display().to_string());
    assert!(
        json["route"]
            .as_str()
            .unwrap()
            .starts_with(&format!("the command `{}`", example_agent().display())),
        "{json:#}"
    );
    // The profile was made private, and nothing was written into it.
    let meta = std::fs::metadata(&profile).unwrap();
    assert_eq!(meta.mode() & 0o077, 0, "{:o}", meta.mode());
    assert_eq!(std::fs::read_dir(&profile).unwrap().count(), 0);
    // The proof saw the launch's own environment and nothing of stet's.
    let env = wall(&json, "env-from-scratch")["detail"].as_str().unwrap();
    assert!(env.contains("STET_ROLE") && env.contains("HOME"), "{env}");
    assert_eq!(
        wall(&json, "network-as-configured")["detail"],
        "network none: interfaces lo"
    );

    // The text form, as a person sees it.
    let out = c.run(&["walls", "--harness", "command"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("live proof: runtime docker, network none"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("  held    runs-as-lane-owner     the agent runs as the lane's owner, uid"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("BROKEN"), "{}", out.stdout);
}

#[test]
fn as_root_the_agent_runs_as_the_lanes_owner_root_and_the_wall_says_so() {
    stet_e2e::require(
        running_as_root(),
        "as_root_the_agent_runs_as_the_lanes_owner_root_and_the_wall_says_so",
        "it needs the tests (and so stet) to run as root",
    );
    let c = Cmd::with(&implement(&example_agent()), None);
    let out = c.run(&["walls", "--harness", "command", "--json"]);
    let json = out.json();
    assert_eq!(out.code, 0, "{json:#}");
    let owner = wall(&json, "runs-as-lane-owner");
    assert_eq!(
        owner["detail"],
        "the agent runs as the lane's owner, uid 0: stet itself runs as root"
    );
    for name in STATIC_WALLS.iter().chain(LIVE_WALLS.iter()) {
        assert_eq!(wall(&json, name)["held"], true, "{name}: {json:#}");
    }
}

#[test]
fn a_credential_in_env_is_refused_before_any_launch() {
    let c = Cmd::new(&format!(
        "{}\nenv = {{ MODEL = \"small\", API_TOKEN = \"value-of-the-token\" }}",
        implement(&example_agent())
    ));
    let out = c.run(&["walls", "--harness", "command"]);
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(
            "BROKEN  no-credential-in-env  env names that look like credentials: API_TOKEN"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("hint: remove them from [plugins.command] env: keep the agent's login in its profile directory (its HOME)"),
        "{}",
        out.stdout
    );
    // Stopped at the static walls: no live launch was made.
    assert!(!out.stdout.contains("live proof"), "{}", out.stdout);
    assert!(!out.stdout.contains("value-of-the-token"));

    let out = c.run(&["ask", "--harness", "command", "write hello.txt: hi"]);
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("no-credential-in-env: env names that look like credentials: API_TOKEN"),
        "{}",
        out.stderr
    );
    assert!(!c.world.work.join("hello.txt").exists());
}

#[test]
fn a_command_missing_from_the_sandbox_breaks_the_live_wall() {
    // A bare name is left to the sandbox's PATH; the image has no such program.
    let c = Cmd::new("implement = [\"no-such-agent\", \"exec\"]");
    let out = c.run(&["walls", "--harness", "command", "--json"]);
    let json = out.json();
    assert_eq!(out.code, 3, "{json:#}");
    let found = wall(&json, "command-found");
    assert_eq!(found["held"], true);
    assert_eq!(
        found["detail"],
        "implement: `no-such-agent` looked up on the sandbox's PATH"
    );
    let live = wall(&json, "command-in-sandbox");
    assert_eq!(live["held"], false, "{json:#}");
    assert_eq!(
        live["detail"],
        "not found or not executable in the sandbox: no-such-agent"
    );
}

#[test]
fn ask_makes_the_example_agent_write_the_file() {
    let c = Cmd::new(&implement(&example_agent()));
    let out = c.run(&[
        "ask",
        "--harness",
        "command",
        "--json",
        "write hello.txt: hi",
    ]);
    let json = out.json();
    assert_eq!(out.code, 0, "{json:#}\n{}", out.stderr);
    assert_eq!(json["harness"], "command");
    assert_eq!(json["outcome"], "done");
    assert_eq!(json["detail"], "wrote hello.txt");
    assert_eq!(json["usage"], serde_json::json!([["instructions", "1"]]));
    assert_eq!(
        std::fs::read_to_string(c.world.work.join("hello.txt")).unwrap(),
        "hi\n"
    );
    // The call left a receipt with its full output.
    let receipts = stet_e2e::receipts_oldest_first(&c.run(&["receipts", "--json"]));
    let receipt = &receipts[0];
    assert_eq!(receipt["harness"]["name"], "command");
    assert_eq!(receipt["outcome"], "done");
    let log = std::fs::read_to_string(receipt["log"].as_str().unwrap()).unwrap();
    assert!(log.contains("stet-usage: instructions=1"), "{log}");

    // A prompt with no instruction it understands is a failure quoting its last line.
    let out = c.run(&[
        "ask",
        "--harness",
        "command",
        "--json",
        "make",
        "it",
        "nice",
    ]);
    let json = out.json();
    assert_eq!(out.code, 4, "{json:#}");
    assert_eq!(json["outcome"], "failed");
    assert!(
        json["detail"]
            .as_str()
            .unwrap()
            .starts_with("exit code 1; its last line: no instruction I understand"),
        "{json:#}"
    );
    // So is a path outside the working copy.
    let out = c.run(&[
        "ask",
        "--harness",
        "command",
        "--json",
        "write ../escape.txt: x",
    ]);
    assert_eq!(out.code, 4);
    assert!(!c.world.root.path().join("escape.txt").exists());
}

#[test]
fn the_example_reviewer_lands_a_change_and_asks_to_revise_none() {
    let c = Cmd::new(&implement(&example_agent()));
    git(&c.world.work, &["add", "stet.toml"]);
    git(&c.world.work, &["commit", "--quiet", "-m", "base"]);
    let base = git(&c.world.work, &["rev-parse", "HEAD"])
        .trim()
        .to_string();
    std::fs::write(c.world.work.join("hello.txt"), "hi\n").unwrap();
    git(&c.world.work, &["add", "hello.txt"]);
    git(&c.world.work, &["commit", "--quiet", "-m", "change"]);
    // The sentence stet's review prompt ends with.
    let prompt =
        |base: &str| format!("You are reviewing a change.\n\nSee it with `git diff {base}`.");
    let out = c.run(&[
        "ask",
        "--harness",
        "command",
        "--role",
        "review",
        "--json",
        &prompt(&base),
    ]);
    let json = out.json();
    assert_eq!(out.code, 0, "{json:#}\n{}", out.stderr);
    assert_eq!(json["outcome"], "done");
    let detail = json["detail"].as_str().unwrap();
    assert!(detail.starts_with("LAND\n"), "{detail}");
    assert!(detail.contains("hello.txt"), "{detail}");

    let out = c.run(&[
        "ask",
        "--harness",
        "command",
        "--role",
        "review",
        "--json",
        &prompt("HEAD"),
    ]);
    let json = out.json();
    assert_eq!(out.code, 0, "{json:#}");
    assert_eq!(
        json["detail"],
        "REVISE\nthere is no change since HEAD: the work item was not done"
    );
}

#[test]
fn the_outcome_protocol_through_the_real_binary() {
    let c = Cmd::new("");
    let limited = c.stand_in(
        "limited.sh",
        "cat >/dev/null\necho 'stet-cost-usd: 0.5'\necho 'stet-retry-at: 1893456000'\necho 'the quota is used up'\nexit 75",
    );
    let chatty = c.stand_in(
        "chatty.sh",
        "cat >/dev/null\necho \"role $STET_ROLE\"\necho 'stet-usage: turns=2'\necho 'stet-usage: broken'\necho 'looks fine to me'",
    );
    c.configure(&format!(
        "implement = [\"{}\"]\nreview = [\"{}\"]",
        limited.display(),
        chatty.display()
    ));
    let out = c.run(&["ask", "--harness", "command", "--json", "anything"]);
    let json = out.json();
    assert_eq!(out.code, 3, "{json:#}\n{}", out.stderr);
    assert_eq!(json["outcome"], "rate-limited");
    assert_eq!(json["retry_at_unix"], 1893456000);
    assert_eq!(json["cost_usd"], 0.5);
    assert_eq!(
        json["detail"],
        "the agent reported a usage limit (exit code 75): the quota is used up"
    );

    let out = c.run(&[
        "ask",
        "--harness",
        "command",
        "--role",
        "review",
        "--json",
        "judge",
    ]);
    let json = out.json();
    assert_eq!(out.code, 4, "{json:#}\n{}", out.stderr);
    assert_eq!(json["outcome"], "out-of-shape");
    assert_eq!(
        json["detail"],
        "the review's first line was `role review`; expected LAND, or REVISE followed by what must change, on the first line"
    );
    assert_eq!(json["usage"], serde_json::json!([["turns", "2"]]));
}

/// The sandbox, not the agent's good manners, keeps an agent in its lane: one that writes
/// outside it on purpose reaches nothing of the host's.
#[test]
fn an_agent_writing_outside_its_lane_reaches_nothing_of_the_host() {
    let c = Cmd::new("");
    let outside = c.world.root.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let escaping = c.stand_in(
        "escaping.sh",
        &format!(
            "cat >/dev/null
             echo x > ../escape.txt 2>/dev/null && echo wrote-parent
             echo x > '{outside}/escape.txt' 2>/dev/null && echo wrote-outside
             echo x > inside.txt && echo wrote-inside",
            outside = outside.display()
        ),
    );
    c.configure(&format!("implement = [\"{}\"]", escaping.display()));
    let out = c.run(&["ask", "--harness", "command", "--json", "escape"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    // Inside the lane it works; outside, whatever the sandbox let it write stayed there.
    assert!(c.world.work.join("inside.txt").is_file());
    assert!(!c.world.root.path().join("escape.txt").exists());
    assert!(!outside.join("escape.txt").exists());
}

/// Runs git in `dir` whoever owns it (the world may have been handed to another uid).
fn git_any_owner(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "safe.directory=*"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The whole path: a queued item implemented by the example agent in its lane, committed
/// by stet, reviewed against the lane's base (LAND), and landed on the remote.
#[test]
fn a_drive_lands_an_item_with_the_example_agent() {
    let c = Cmd::new(&implement(&example_agent()));
    let remote = c.on_fresh_remote(&[]);
    let out = c.run(&["add", "write hello.txt: hi from the drive"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    push_queue(&c);
    let out = c.run(&["drive", "--yes", "--harness", "command"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);

    let branches = git_any_owner(
        &remote,
        &["for-each-ref", "--format=%(refname)", "refs/heads/stet/"],
    );
    let branch = branches.lines().next().unwrap_or_else(|| {
        panic!("no lane landed on the remote:\n{}", out.stderr);
    });
    assert_eq!(
        git_any_owner(&remote, &["show", &format!("{branch}:hello.txt")]),
        "hi from the drive\n"
    );
    let landed = stet_e2e::landed_on(&remote);
    assert_eq!(landed.len(), 1, "{landed:?}");

    // One receipt per call: implement done, then the review's verdict.
    let receipts = stet_e2e::receipts_oldest_first(&c.run(&["receipts", "--json"]));
    let mut calls: Vec<(String, String, String)> = receipts
        .iter()
        .map(|r| {
            (
                r["role"].as_str().unwrap().to_string(),
                r["outcome"].as_str().unwrap().to_string(),
                r["detail"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    calls.sort();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(
        (
            calls[0].0.as_str(),
            calls[0].1.as_str(),
            calls[0].2.as_str()
        ),
        ("implement", "done", "wrote hello.txt")
    );
    assert_eq!(
        (calls[1].0.as_str(), calls[1].1.as_str()),
        ("review", "done")
    );
    assert!(calls[1].2.starts_with("LAND\n"), "{calls:?}");
}

/// Inside the sandbox the lane reads as a developer's would: a reviewer's `git diff BASE`
/// prints the change as text, though the repository's `.gitattributes` marks every file
/// `-diff` and names a filter (the lane's `info/attributes` leaves both unspecified). Each
/// call's prompt is kept: the implementing one names the rules file and the check, the
/// review the base, the check's result and the rules; `stet show` numbers the calls and
/// `--prompt N` prints what each was asked, its hash in the receipt.
#[test]
fn a_reviewer_reads_the_lanes_diff_as_text_and_every_call_keeps_what_it_was_asked() {
    let c = Cmd::new("");
    let reviewer = c.stand_in(
        "diff-reviewer.sh",
        "prompt=$(cat)\n\
         base=$(printf '%s\\n' \"$prompt\" | sed -n 's/.*`git diff \\([^`]*\\)`.*/\\1/p' | tail -n 1)\n\
         echo LAND\n\
         git diff \"$base\"",
    );
    c.configure(&format!(
        "implement = [\"{}\"]\nreview = [\"{}\"]\n\n[drive]\ncheck = \"test -s hello.txt\"",
        example_agent().display(),
        reviewer.display()
    ));
    c.on_fresh_remote(&[
        (".gitattributes", "* -diff filter=evil\n"),
        ("AGENTS.md", "Greet politely.\n"),
    ]);
    let out = c.run(&["add", "write hello.txt: hi from the lane"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    push_queue(&c);
    let out = c.run(&["drive", "--yes", "--harness", "command"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);

    let receipts = stet_e2e::receipts_oldest_first(&c.run(&["receipts", "--json"]));
    let review = receipts
        .iter()
        .find(|r| r["role"] == "review")
        .unwrap_or_else(|| panic!("no review: {receipts:#?}"));
    let detail = review["detail"].as_str().unwrap();
    assert!(detail.contains("+hi from the lane"), "{detail}");
    assert!(!detail.contains("Binary files"), "{detail}");

    let item = review["item"].as_str().unwrap();
    let shown = c.run(&["show", item]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        shown.stdout.contains("asked: prompt 1, ") && shown.stdout.contains("--prompt 2)"),
        "{}",
        shown.stdout
    );
    let implement = c.run(&["show", item, "--prompt", "1"]);
    assert_eq!(implement.code, 0, "{}", implement.stderr);
    assert!(
        implement
            .stdout
            .contains("write hello.txt: hi from the lane"),
        "{}",
        implement.stdout
    );
    assert!(
        implement.stdout.contains("`AGENTS.md`"),
        "{}",
        implement.stdout
    );
    assert!(
        implement.stdout.contains("`test -s hello.txt`"),
        "{}",
        implement.stdout
    );
    let asked = c.run(&["show", item, "--prompt", "2", "--json"]).json();
    assert_eq!(asked["role"], "review");
    let text = asked["text"].as_str().unwrap();
    assert!(
        text.contains("The repository's check, `test -s hello.txt`, passed"),
        "{text}"
    );
    assert!(
        text.contains("See the whole change with `git diff "),
        "{text}"
    );
    // The receipt names the prompt by the hash of what the agent received.
    assert_eq!(asked["prompt"]["sha256"], review["prompt"]["sha256"]);
    use sha2::Digest as _;
    let hash: String = sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(review["prompt"]["sha256"], hash);
    let out = c.run(&["show", item, "--prompt", "3"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("there is no call 3"), "{}", out.stderr);
}

/// Pushes the queue (a drive reads it from the remote's base), by the test's own user in
/// the world already handed over: its git told (globally, which the remote's side reads
/// too) that the person's directories are safe.
fn push_queue(c: &Cmd) {
    let global = c.world.root.path().join("test-gitconfig");
    std::fs::write(&global, "[safe]\n\tdirectory = *\n").unwrap();
    for args in [
        &["add", ".stet"][..],
        &["commit", "--quiet", "-m", "queue"],
        &["push", "--quiet", "origin", "HEAD"],
    ] {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&c.world.work)
            .env("GIT_CONFIG_GLOBAL", &global)
            .env("GIT_AUTHOR_NAME", "test")
            .env("GIT_AUTHOR_EMAIL", "test@localhost")
            .env("GIT_COMMITTER_NAME", "test")
            .env("GIT_COMMITTER_EMAIL", "test@localhost")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The `Authorization` header of a request a recording service saw ("none" without one).
fn authorization(head: &stet_e2e::http::Head) -> String {
    head.headers
        .iter()
        .find(|(name, _)| name == "authorization")
        .map_or_else(|| "none".to_string(), |(_, value)| value.clone())
}

#[test]
fn a_configured_credential_reaches_its_api_while_the_agent_holds_a_stand_in() {
    const REAL: &str = "the-real-api-secret-0123456789abcdef";
    let (port, seen) = stet_e2e::http::recording_service(|auth| auth == format!("Bearer {REAL}"));
    let c = Cmd::new("");
    // bash, for /dev/tcp.
    let agent = c.world.root.path().join("bin/api-agent");
    std::fs::create_dir_all(agent.parent().unwrap()).unwrap();
    stet_exec_support::write_executable(
        &agent,
        "#!/bin/bash\n\
         cat >/dev/null\n\
         printf '%s' \"$EXAMPLE_API_KEY\" > held.txt\n\
         hostport=${EXAMPLE_BASE_URL#http://}\n\
         exec 3<>/dev/tcp/${hostport%:*}/${hostport#*:} || exit 1\n\
         printf 'GET /v1/models HTTP/1.1\\r\\nHost: %s\\r\\nAuthorization: Bearer %s\\r\\nConnection: close\\r\\n\\r\\n' \"$hostport\" \"$EXAMPLE_API_KEY\" >&3\n\
         timeout 10 cat <&3 > answer.txt\n\
         echo asked\n"
            .as_bytes(),
    )
    .unwrap();
    c.configure(&format!(
        "implement = [\"{}\"]\n\
         credentials = [{{ host = \"127.0.0.1:{port}\", from = {{ env = \"STET_TEST_API_SECRET\" }}, \
         variable = \"EXAMPLE_API_KEY\", base_url = \"EXAMPLE_BASE_URL\" }}]",
        agent.display()
    ));
    let with_secret = |args: &[&str]| {
        let mut command = c.world.stet(args);
        command.env("STET_TEST_API_SECRET", REAL);
        c.world.run(&mut command)
    };
    // The walls hold with it configured: the proof's sandbox holds the stand-in only.
    let walls = with_secret(&["walls", "--harness", "command", "--json"]);
    assert!(!walls.stdout.is_empty(), "{}", walls.stderr);
    let json = walls.json();
    assert_eq!(walls.code, 0, "{json:#}\n{}", walls.stderr);
    assert_eq!(
        wall(&json, "credential-not-in-sandbox")["held"],
        true,
        "{json:#}"
    );

    let out = with_secret(&["ask", "--harness", "command", "--json", "ask the api"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let held = std::fs::read_to_string(c.world.work.join("held.txt")).unwrap();
    assert_ne!(held, REAL);
    assert_eq!(held.len(), REAL.len(), "a stand-in of its shape: {held}");
    assert!(
        !held.contains("real-api"),
        "no part of the secret is kept: {held}"
    );
    let answer = std::fs::read_to_string(c.world.work.join("answer.txt")).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let seen: Vec<String> = seen.lock().unwrap().iter().map(authorization).collect();
    assert!(seen.contains(&format!("Bearer {REAL}")), "{seen:?}");
    // Read at call time: without the secret on the host, the call is refused by name.
    let out = c.run(&["ask", "--harness", "command", "ask the api"]);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains(
            "cannot read the credential for EXAMPLE_API_KEY: STET_TEST_API_SECRET is not set"
        ),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains(REAL));
}

/// The setup that leaked (issue 25): the agent logged in with the profile as its HOME, its
/// `auth.json` not declared. Every call is refused, naming the file, what it holds and what
/// to declare, before the agent runs; declared, the same profile runs.
#[test]
fn an_undeclared_login_in_the_profile_refuses_the_call_by_name() {
    let c = Cmd::new("");
    let agent = c.stand_in("agent", "cat >/dev/null\necho ran > ran.txt\necho done");
    c.configure(&implement(&agent));
    stet_e2e::dummy_codex_login(&c.profiles().join(".command"));
    let out = c.run(&["ask", "--harness", "command", "do it"]);
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stderr.contains(
            "the walled profile's .codex/auth.json holds a JSON Web Token at /tokens/access_token, \
             which harness `command` does not declare as a credential; the call is not made"
        ),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(
            r#"credential_files = [{ path = ".codex/auth.json", pointers = ["/tokens/access_token"]"#
        ),
        "{}",
        out.stderr
    );
    for real in [
        stet_e2e::DUMMY_CODEX_ACCESS_TOKEN,
        stet_e2e::DUMMY_CODEX_ID_TOKEN,
        stet_e2e::DUMMY_CODEX_REFRESH_TOKEN,
    ] {
        assert!(!out.stderr.contains(real) && !out.stdout.contains(real));
    }
    assert!(!c.world.work.join("ran.txt").exists(), "the agent ran");
    // The walls say it too, before a drive's first move.
    let walls = c.run(&["walls", "--harness", "command"]);
    assert_ne!(walls.code, 0);
    assert!(
        walls
            .stderr
            .contains("the walled profile's .codex/auth.json holds"),
        "{}",
        walls.stderr
    );
    // Declared (the access token for its API, the others kept out): the call is made.
    c.configure(&format!(
        "{}\ncredential_files = [\n\
         {{ path = \".codex/auth.json\", pointers = [\"/tokens/access_token\"], host = \"chatgpt.example.invalid/backend-api/codex\" }},\n\
         {{ path = \".codex/auth.json\", pointers = [\"/tokens/id_token\", \"/tokens/refresh_token\"] }},\n]",
        implement(&agent)
    ));
    let out = c.run(&["ask", "--harness", "command", "do it"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(c.world.work.join("ran.txt").exists());
}

/// Where in a drive's start a stop is sent: after which event (then a seeded delay).
#[derive(Debug, Clone, Copy)]
enum StopAt {
    /// The drive's first line: the proof is about to start.
    FirstLine,
    /// The proof's sandbox exists.
    ProofSandbox,
    /// The lane's directory exists: the lane is being made.
    LaneMaking,
    /// The implementing call's receipt says `running`.
    Call,
}

/// A small seeded generator (xorshift), so that a failing instant can be run again.
struct Seeded(u64);

impl Seeded {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Polls `happened` every 10 ms until it holds; fails, naming `what`, after a minute.
fn wait_for(what: &str, seed: u64, mut happened: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !happened() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "seed {seed}: {what} never happened"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The stet temporary directories under `dir`.
fn stet_temp_dirs(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("stet-"))
                .collect()
        })
        .unwrap_or_default()
}

/// A repository with one item for the command harness, whose implementing agent prints
/// for a while (its log fills) before it does what the example agent does.
fn stoppable_drive_world() -> (Cmd, PathBuf) {
    let c = Cmd::new("");
    let example = std::fs::read_to_string(example_agent()).unwrap();
    let body = example.strip_prefix("#!/bin/sh\n").unwrap_or(&example);
    let agent = c.stand_in(
        "slow-agent.sh",
        &format!(
            "if [ \"${{STET_ROLE:-implement}}\" = implement ]; then\n  i=0\n  while [ $i -lt 100 ]; do echo \"working, line $i of the agent's output\"; i=$((i+1)); done\n  sleep 3\nfi\n{body}"
        ),
    );
    c.configure(&implement(&agent));
    c.on_fresh_remote(&[]);
    let out = c.run(&["add", "write hello.txt: hi from the drive"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    push_queue(&c);
    let tmp = c.world.root.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    (c, tmp)
}

/// Starts a drive in `c`, stops it with SIGINT at `instant` (plus a seeded delay), once or
/// twice, and checks that it ended with the stop's code and a message, left no sandbox
/// and no temporary directory, and that any call it cut short has a receipt saying so.
/// Returns how long the drive's first line took, when `instant` waited for it.
fn stop_at(
    instant: StopAt,
    twice: bool,
    rng: &mut Seeded,
    seed: u64,
) -> Option<std::time::Duration> {
    let (c, tmp) = stoppable_drive_world();
    let mut command = c.world.stet(&["drive", "--yes", "--harness", "command"]);
    command
        .env("TMPDIR", &tmp)
        .stderr(std::process::Stdio::piped());
    if let Some((uid, gid)) = c.who {
        chown_all(c.world.root.path(), uid, gid);
        command.uid(uid).gid(gid);
    }
    let spawned = std::time::Instant::now();
    let mut child = command.spawn().unwrap();
    let pid = child.id();
    let (lines, seen) = std::sync::mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            all.push_str(&line);
            all.push('\n');
            let _ = lines.send(line);
        }
        all
    });
    let git_dir = c.world.work.join(".git/stet");
    let context = format!("seed {seed}, {instant:?}, twice {twice}");
    let mut first_line = None;
    match instant {
        StopAt::FirstLine => {
            let line = seen
                .recv_timeout(std::time::Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("{context}: no first line"));
            assert!(line.contains("proving the walls"), "{context}: {line}");
            first_line = Some(spawned.elapsed());
        }
        StopAt::ProofSandbox => wait_for("the proof's sandbox", seed, || {
            stet_e2e::sandboxes_owned_by(pid) > 0
        }),
        StopAt::LaneMaking => {
            wait_for("the lane's making", seed, || git_dir.join("lanes").exists())
        }
        StopAt::Call => wait_for("the implementing call", seed, || {
            std::fs::read_dir(git_dir.join("receipts")).is_ok_and(|entries| {
                entries.filter_map(Result::ok).any(|e| {
                    std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("\"running\""))
                })
            })
        }),
    }
    std::thread::sleep(std::time::Duration::from_millis(rng.below(400)));
    let signal = || {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGINT,
        );
    };
    signal();
    if twice {
        // The second press once the first is answered (or the drive has ended).
        while let Ok(line) = seen.recv_timeout(std::time::Duration::from_secs(60)) {
            if line.contains("stopping after") || line.contains("stopped") {
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(rng.below(300)));
        signal();
    }
    let status = child.wait().unwrap();
    let stderr = reader.join().unwrap();
    assert_eq!(status.code(), Some(130), "{context}: {stderr}");
    assert!(
        stderr.contains("(stopped by SIGINT") || stderr.contains("stopped: run drive-"),
        "{context}: no stop message: {stderr}"
    );
    assert_eq!(
        stet_e2e::sandboxes_owned_by(pid),
        0,
        "{context}: sandboxes left: {stderr}"
    );
    let left = stet_temp_dirs(&tmp);
    assert!(
        left.is_empty(),
        "{context}: temporary directories left: {left:?}\n{stderr}"
    );
    let mut outcomes = Vec::new();
    for entry in std::fs::read_dir(git_dir.join("receipts"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
    {
        let receipt: serde_json::Value =
            serde_json::from_slice(&std::fs::read(entry.path()).unwrap()).unwrap();
        outcomes.push(receipt["outcome"].as_str().unwrap_or_default().to_string());
        assert_ne!(receipt["outcome"], "running", "{context}: {receipt:#}");
        if receipt["outcome"] == "interrupted" {
            assert_eq!(receipt["stopped_by_signal"], 2, "{context}: {receipt:#}");
            let detail = receipt["detail"].as_str().unwrap();
            assert!(
                detail.contains("stopped by the person at") && detail.contains("kept in its log"),
                "{context}: {detail}"
            );
            assert!(
                receipt["ended_unix_ms"].as_u64() > receipt["started_unix_ms"].as_u64(),
                "{context}: {receipt:#}"
            );
            assert!(
                receipt["output_bytes"].as_u64() > Some(0),
                "{context}: the log's output is counted: {receipt:#}"
            );
        }
    }
    // Mid-call, one stop lets the call finish; a second cuts it short.
    if let StopAt::Call = instant {
        let expected = if twice { "interrupted" } else { "done" };
        assert_eq!(outcomes, [expected], "{context}: {stderr}");
    }
    first_line
}

/// A stop at every instant of a drive's start — the proof, the lane's making, the call —
/// once or twice, leaves nothing running and no temporary directory, and a call it cut
/// short says in its receipt who stopped it and when, its log kept. The delays after each
/// event are seeded (`STET_TEST_SEED` repeats a run). And a drive says what it is
/// proving at once: its first line comes within 100 ms of the start (the faster of two
/// starts, on a machine shared with other tests).
#[test]
fn a_stop_at_any_instant_of_the_start_leaves_nothing_behind() {
    let seed = std::env::var("STET_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("seed {seed} (STET_TEST_SEED={seed} repeats this run)");
    let mut rng = Seeded(seed);
    let mut first_lines = Vec::new();
    for instant in [
        StopAt::FirstLine,
        StopAt::ProofSandbox,
        StopAt::LaneMaking,
        StopAt::Call,
    ] {
        for twice in [false, true] {
            first_lines.extend(stop_at(instant, twice, &mut rng, seed));
        }
    }
    let fastest = first_lines.iter().min().copied();
    eprintln!("the first line came after {first_lines:?}");
    assert!(
        fastest.is_some_and(|f| f < std::time::Duration::from_millis(100)),
        "the first line came after {first_lines:?}"
    );
}

/// Runs `stet args…` in `c`'s world with the temporary directory `tmp`.
fn run_with_tmp(c: &Cmd, tmp: &Path, args: &[&str]) -> Output {
    let mut command = c.world.stet(args);
    command.env("TMPDIR", tmp);
    if let Some((uid, gid)) = c.who {
        chown_all(c.world.root.path(), uid, gid);
        command.uid(uid).gid(gid);
    }
    c.world.run(&mut command)
}

/// What a stet killed mid-call leaves — its sandboxes, its call's profile copy and other
/// temporary directories — `stet clean`, `stet gc` and the next drive each remove; the
/// call's receipt then says its stet ended without a stop, keeps its log and its time.
#[test]
fn what_a_killed_stet_left_clean_gc_and_the_next_drive_remove() {
    let (c, tmp) = stoppable_drive_world();
    let mut command = c.world.stet(&["drive", "--yes", "--harness", "command"]);
    command.env("TMPDIR", &tmp);
    if let Some((uid, gid)) = c.who {
        chown_all(c.world.root.path(), uid, gid);
        command.uid(uid).gid(gid);
    }
    let mut child = command.stderr(std::process::Stdio::null()).spawn().unwrap();
    let receipts = c.world.work.join(".git/stet/receipts");
    wait_for("the implementing call", 0, || {
        std::fs::read_dir(&receipts).is_ok_and(|entries| {
            entries
                .filter_map(Result::ok)
                .any(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("\"running\"")))
        })
    });
    // Its output has begun reaching its log.
    let logs = c.world.work.join(".git/stet/logs");
    wait_for("the call's output", 0, || {
        std::fs::read_dir(&logs).is_ok_and(|entries| {
            entries
                .filter_map(Result::ok)
                // The call's output log: not its kept prompt, written before it starts.
                .filter(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.ends_with(".log") && !name.ends_with(".stderr.log")
                })
                .any(|e| e.metadata().is_ok_and(|m| m.len() > 0))
        })
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let left = stet_temp_dirs(&tmp);
    assert!(
        left.iter().any(|n| n.starts_with("stet-call-profile-")),
        "the killed stet left its call's profile copy: {left:?}"
    );
    assert!(
        stet_e2e::sandboxes_owned_by(child.id()) > 0,
        "and its sandbox"
    );

    let out = run_with_tmp(&c, &tmp, &["clean"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("temporary director") && out.stdout.contains("a stopped stet left"),
        "{}",
        out.stdout
    );
    assert_eq!(stet_temp_dirs(&tmp), Vec::<String>::new());

    // The same leftovers again, for gc and for the next drive (named for the dead process).
    let plant = || {
        for name in &left {
            std::fs::create_dir_all(tmp.join(name).join("profile")).unwrap();
        }
    };
    plant();
    let out = run_with_tmp(&c, &tmp, &["gc"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("removed the temporary directory"),
        "{}",
        out.stdout
    );
    assert_eq!(stet_temp_dirs(&tmp), Vec::<String>::new());
    assert_eq!(
        stet_e2e::sandboxes_owned_by(child.id()),
        0,
        "{}",
        out.stdout
    );

    plant();
    let out = run_with_tmp(&c, &tmp, &["drive", "--yes", "--harness", "command"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("a stopped stet left behind"),
        "{}",
        out.stderr
    );
    assert_eq!(stet_temp_dirs(&tmp), Vec::<String>::new());
    let all = stet_e2e::receipts_oldest_first(&run_with_tmp(&c, &tmp, &["receipts", "--json"]));
    let cut = all
        .iter()
        .find(|r| r["outcome"] == "interrupted")
        .unwrap_or_else(|| panic!("no interrupted receipt: {all:#?}"));
    let detail = cut["detail"].as_str().unwrap();
    assert!(
        detail.contains("without a stop") && detail.contains("kept in its log"),
        "{detail}"
    );
    assert!(cut["output_bytes"].as_u64() > Some(0), "{cut:#}");
    assert!(
        cut["ended_unix_ms"].as_u64() > cut["started_unix_ms"].as_u64(),
        "{cut:#}"
    );
}

/// A work item holding the login the harness declares: its prompt would carry the real
/// credential into the sandbox. `stet ask` refuses such a prompt (exit 2, saying what to
/// do); a drive fails that item alone, at once, saying why, and lands the other. The
/// secret is printed nowhere.
#[test]
fn a_prompt_carrying_the_declared_login_is_refused_and_only_its_item_fails() {
    let token = stet_e2e::DUMMY_CODEX_ACCESS_TOKEN;
    let c = Cmd::new(&format!(
        "{}\ncredential_files = [{{ path = \".codex/auth.json\", pointers = [\"/tokens/access_token\", \"/tokens/id_token\", \"/tokens/refresh_token\"] }}]",
        implement(&example_agent())
    ));
    stet_e2e::dummy_codex_login(&c.profiles().join(".command"));
    let asked = c.run(&[
        "ask",
        "--harness",
        "command",
        &format!("call the API with {token}"),
    ]);
    assert_eq!(asked.code, 2, "{}", asked.stderr);
    assert!(
        asked
            .stderr
            .contains("would enter the sandbox in the agent's prompt; the call is not made"),
        "{}",
        asked.stderr
    );
    assert!(
        asked
            .stderr
            .contains("take the credential out of the work item"),
        "{}",
        asked.stderr
    );
    let remote = c.on_fresh_remote(&[]);
    for text in [
        format!("write leak.txt: the key\n\nUse {token} to call the API."),
        "write hello.txt: hi from the drive".to_string(),
    ] {
        let out = c.run(&["add", &text]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        stet_e2e::next_millisecond();
    }
    push_queue(&c);
    let out = c.run(&["drive", "--yes", "--harness", "command"]);
    assert_eq!(out.code, 4, "one item given up: {}", out.stderr);
    assert!(
        out.stderr.contains(
            "-write-leak-txt-key: given up: the implementing call was not made: the credential \
             `.codex/auth.json#/tokens/access_token` would enter the sandbox in the agent's prompt; \
             the call is not made; take the credential out of the work item"
        ),
        "{}",
        out.stderr
    );
    assert_eq!(stet_e2e::landed_on(&remote).len(), 1, "{}", out.stderr);
    for printed in [&asked.stdout, &asked.stderr, &out.stdout, &out.stderr] {
        assert!(
            !printed.contains(token),
            "the secret was printed: {printed}"
        );
    }
    assert!(!c.world.work.join("leak.txt").exists());
}
