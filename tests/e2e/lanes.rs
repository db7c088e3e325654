//! Into and out of an item's lane through the real `stet` binary, the real Docker Engine and
//! real git with a bare remote: `stet diff` after a drive of the example agent landed an
//! item, `stet shell` on a real pseudo-terminal (its commands run in the sandbox, an edit
//! stays in the lane, `stet diff` shows it, nothing is pushed), `stet run` on one,
//! `stet checkout` and `stet merge` (and their refusals, snapshotted as in commands.rs).
//!
//! stet runs as an unprivileged user when the tests run as root, as a person runs it.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use stet_e2e::{
    chown_all, docker_group, example_agent, require_image, running_as_root, serial_drives, Output,
    World, IMAGE,
};

/// What changes from run to run in a snapshot here.
const FILTERS: &[(&str, &str)] = &[
    (r"\b\d{8}-\d{6}-\d{3}-", "[ITEM]-"),
    (r"\b[0-9a-f]{40}\b", "[GIT-OID]"),
    (r"\b[0-9a-f]{12}\b", "[COMMIT]"),
];

/// Drives `argv` on a new pseudo-terminal (python3's `pty`): for each step, waits until the
/// output after the last step's mark holds the step's mark, then types its keys (`<close>`:
/// closes the terminal, as a closed window does); then reads to the end. Prints what the
/// terminal showed, then `pid N` (the program's), and exits with the program's exit code.
/// Every wait is for output (bounded at two minutes, then it fails saying what it waited
/// for), never for time.
const PTY_DRIVER: &str = r#"
import json, os, pty, select, sys, time
argv = json.loads(sys.argv[1])
steps = json.loads(sys.argv[2])
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)
seen = b""
at = 0
ended = False
def more(limit):
    global seen, ended
    ready, _, _ = select.select([fd], [], [], max(0.0, limit - time.time()))
    if not ready:
        return
    try:
        chunk = os.read(fd, 65536)
    except OSError:
        chunk = b""
    if not chunk:
        ended = True
    seen += chunk
for mark, keys in steps:
    limit = time.time() + 120
    while mark.encode() not in seen[at:]:
        if ended or time.time() > limit:
            sys.stdout.write(seen.decode("utf-8", "replace"))
            sys.stdout.write("\n[pty driver: never saw %r]\n" % mark)
            os.kill(pid, 9)
            sys.exit(99)
        more(limit)
    at = seen.index(mark.encode(), at) + len(mark)
    if keys == "<close>":
        os.close(fd)
        ended = True
        break
    os.write(fd, keys.encode())
limit = time.time() + 120
while not ended and time.time() < limit:
    more(limit)
_, status = os.waitpid(pid, 0)
sys.stdout.write(seen.decode("utf-8", "replace"))
sys.stdout.write("\npid %d\n" % pid)
sys.exit(os.waitstatus_to_exitcode(status))
"#;

/// A person's world: a clone of a bare remote, stet set up and pushed, the example agent
/// as the command harness's implementer.
struct Person {
    world: World,
    who: Option<(u32, u32)>,
}

impl Person {
    fn new() -> Person {
        Person::with_agent(&example_agent())
    }

    /// A person whose command harness implements with `agent`.
    fn with_agent(agent: &Path) -> Person {
        let world = World::new();
        world.install("docker");
        world.install("command");
        let p = Person {
            world,
            who: running_as_root().then(|| (stet_e2e::UNPRIVILEGED_UID, docker_group())),
        };
        p.world.clone_of_fresh_remote();
        let profiles = p.world.root.path().join("profiles");
        let dir = p.world.root.path().join("home/.config/stet");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&profiles).unwrap();
        std::fs::write(
            dir.join("config.toml"),
            format!(
                "[harness]\nprofiles = \"{}\"\n\n[sandbox]\nimage = \"{IMAGE}\"\n\n\
                 [plugins.command]\nimplement = [\"{}\"]\n",
                profiles.display(),
                agent.display()
            ),
        )
        .unwrap();
        p
    }

    fn work(&self) -> &Path {
        &self.world.work
    }

    /// Hands the world to the person and runs `command` as them.
    fn as_person(&self, command: &mut std::process::Command) {
        if let Some((uid, gid)) = self.who {
            chown_all(self.world.root.path(), uid, gid);
            command.uid(uid).gid(gid);
        }
    }

    /// `stet args…`, with no terminal.
    fn run(&self, args: &[&str]) -> Output {
        let mut command = self.world.stet(args);
        command.stdin(std::process::Stdio::null());
        self.as_person(&mut command);
        self.world.run(&mut command)
    }

    /// `stet args…` on a pseudo-terminal, typing each step's keys once its mark is shown.
    fn on_terminal(&self, args: &[&str], steps: &[(&str, &str)]) -> Output {
        self.on_terminal_with(args, steps, &[])
    }

    /// [`Person::on_terminal`] with `env` set for stet too.
    fn on_terminal_with(
        &self,
        args: &[&str],
        steps: &[(&str, &str)],
        env: &[(&str, &str)],
    ) -> Output {
        let mut argv = vec![
            stet_e2e::artifacts().join("stet").display().to_string(),
            "--plugins-dir".to_string(),
            self.world.plugins.display().to_string(),
        ];
        argv.extend(args.iter().map(|a| a.to_string()));
        let steps: Vec<[&str; 2]> = steps.iter().map(|(m, k)| [*m, *k]).collect();
        let mut command = self.world.command(
            Path::new("python3"),
            &[
                "-c",
                PTY_DRIVER,
                &serde_json::to_string(&argv).unwrap(),
                &serde_json::to_string(&steps).unwrap(),
            ],
            false,
        );
        command.env("TERM", "xterm");
        command.envs(env.iter().copied());
        self.as_person(&mut command);
        self.world.run(&mut command)
    }

    /// Snapshots a refusal: exit code, stdout and stderr with the world's paths redacted.
    fn snap(&self, name: &str, args: &[&str]) -> Output {
        let out = self.run(args);
        let text = self.world.redact(&format!(
            "$ stet {}\nexit: {}\n--- stdout\n{}--- stderr\n{}",
            args.join(" "),
            out.code,
            out.stdout,
            out.stderr
        ));
        let filters: Vec<(&str, &str)> = FILTERS.to_vec();
        insta::with_settings!({ filters => filters }, {
            insta::assert_snapshot!(name, text);
        });
        out
    }

    /// Git in the working directory, as the person; fails the test on error.
    fn git(&self, args: &[&str]) -> String {
        let out = self.git_output(args);
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn git_output(&self, args: &[&str]) -> std::process::Output {
        let mut command = std::process::Command::new("git");
        command
            .args(args)
            .current_dir(self.work())
            .env("HOME", self.world.root.path().join("home"))
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t");
        self.as_person(&mut command);
        command.output().expect("run git")
    }

    /// Sets stet up, queues `items` and drives them; returns their ids.
    fn driven(&self, items: &[&str]) -> Vec<String> {
        let ids = self.queued(items);
        let drive = self.run(&["drive", "--yes", "--rounds", "1"]);
        assert_eq!(drive.code, 0, "{}{}", drive.stdout, drive.stderr);
        ids
    }

    /// Sets stet up and queues `items` (committed and pushed); returns their ids.
    fn queued(&self, items: &[&str]) -> Vec<String> {
        let init = self.run(&["init"]);
        assert_eq!(init.code, 0, "{}{}", init.stdout, init.stderr);
        self.run(&["trust"]);
        let mut ids = Vec::new();
        for item in items {
            let added = self.run(&["add", "--json", item]);
            assert_eq!(added.code, 0, "{}{}", added.stdout, added.stderr);
            ids.push(added.json()["id"].as_str().unwrap().to_string());
            stet_e2e::next_millisecond();
        }
        self.git(&["add", "--all"]);
        self.git(&["commit", "--quiet", "-m", "set stet up and queue"]);
        self.git(&["push", "--quiet", "origin", "HEAD"]);
        ids
    }

    /// The commit the remote's branch of `item` is at.
    fn remote_branch(&self, item: &str) -> String {
        self.git(&["ls-remote", "origin", &format!("refs/heads/stet/{item}")])
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string()
    }

    fn lane_dir(&self, item: &str) -> PathBuf {
        self.work().join(".git/stet/lanes").join(item).join("work")
    }
}

/// After a drive landed an item, `stet diff` prints exactly its branch's change against the
/// base, nothing else on stdout; then a shell on its lane (gone: opened again from the
/// branch) runs typed commands in the sandbox, and what it edits stays in the lane, shown
/// by `stet diff`, with nothing committed or pushed.
#[test]
fn diff_of_a_landed_item_then_a_shell_whose_edits_stay_in_the_lane() {
    require_image();
    let _serial = serial_drives();
    let p = Person::new();
    let ids = p.driven(&["write hello.txt: hi from the drive"]);
    let id = &ids[0];
    assert!(
        !p.lane_dir(id).exists(),
        "a landed lane is pooled, not kept"
    );

    let diff = p.run(&["diff", id]);
    assert_eq!(diff.code, 0, "{}", diff.stderr);
    p.git(&["fetch", "--quiet", "origin"]);
    let main = p.git(&["symbolic-ref", "--short", "HEAD"]);
    let base = p.git(&[
        "merge-base",
        &format!("origin/{}", main.trim()),
        &format!("origin/stet/{id}"),
    ]);
    let expected = p.git(&[
        "diff",
        "--no-ext-diff",
        "--no-color",
        base.trim(),
        &format!("origin/stet/{id}"),
    ]);
    assert_eq!(diff.stdout, expected);
    // The same change as JSON, for scripts.
    let json = p.run(&["diff", "--json", id]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    let json = json.json();
    assert_eq!(json["patch"], expected.as_str(), "{json}");
    assert_eq!(json["cut_bytes"], 0);
    assert_eq!(json["id"], id.as_str());
    assert!(
        diff.stdout.contains("+hi from the drive\n") && !diff.stdout.contains("stet.toml"),
        "{}",
        diff.stdout
    );

    let pushed = p.remote_branch(id);
    let hidden = p.work().display().to_string();
    let shell = p.on_terminal(
        &["shell", id],
        &[
            (
                "(stet shell) $ ",
                &format!(
                    "echo IN-$((6*7)) uid=$(id -u); test -e '{hidden}/stet.toml' && echo HOST-SEEN || echo HOST-UNSEEN\n"
                ),
            ),
            (
                "IN-42",
                "echo edited > edit.txt; echo more >> hello.txt; printf 'esc \\033]0;owned\\007 end\\n' > esc.txt; echo DONE-$((1+1))\n",
            ),
            ("DONE-2", "exit\n"),
        ],
    );
    assert_eq!(shell.code, 0, "{}{}", shell.stdout, shell.stderr);
    let uid = stet_e2e::UNPRIVILEGED_UID.to_string();
    let uid = if running_as_root() { uid } else { nix_uid() };
    assert!(
        shell.stdout.contains(&format!("IN-42 uid={uid}")),
        "{}",
        shell.stdout
    );
    assert!(shell.stdout.contains("HOST-UNSEEN"), "{}", shell.stdout);
    let lane = p.lane_dir(id);
    assert!(
        shell
            .stdout
            .contains(&format!("your edits are in {}; stet diff", lane.display())),
        "{}",
        shell.stdout
    );
    assert_eq!(
        std::fs::read_to_string(lane.join("edit.txt")).unwrap(),
        "edited\n"
    );
    assert_eq!(p.remote_branch(id), pushed, "the shell pushed nothing");
    let lane_git = lane.parent().unwrap().join("git");
    assert_eq!(
        p.git(&["--git-dir", lane_git.to_str().unwrap(), "rev-parse", "HEAD"])
            .trim(),
        pushed,
        "nor committed anything"
    );

    let after = p.run(&["diff", id]);
    assert_eq!(after.code, 0, "{}", after.stderr);
    assert!(
        after
            .stdout
            .contains("+++ b/edit.txt\n@@ -0,0 +1 @@\n+edited\n")
            && after.stdout.contains("+hi from the drive\n+more\n"),
        "{}",
        after.stdout
    );

    // What the sandbox wrote reaches no terminal as an escape sequence.
    assert!(
        after.stdout.contains(r"+esc \x1b]0;owned\x07 end") && !after.stdout.contains('\x1b'),
        "{}",
        after.stdout
    );

    // On a terminal: stet's own colours, through the person's pager; none with NO_COLOR.
    let pager = [("GIT_PAGER", "sed s/^/PAGED:/")];
    let paged = p.on_terminal_with(&["diff", id], &[], &pager);
    assert_eq!(paged.code, 0, "{}", paged.stdout);
    assert!(
        paged.stdout.contains("PAGED:\x1b[32m+edited\x1b[0m")
            && paged.stdout.contains("PAGED:\x1b[36m@@"),
        "{:?}",
        paged.stdout
    );
    let plain = p.on_terminal_with(
        &["diff", id],
        &[],
        &[("GIT_PAGER", "sed s/^/PAGED:/"), ("NO_COLOR", "1")],
    );
    assert!(
        plain.stdout.contains("PAGED:+edited") && !plain.stdout.contains("\x1b[3"),
        "{:?}",
        plain.stdout
    );

    // What the shell left is never cleaned away unseen.
    let clean = p.run(&["clean"]);
    assert_eq!(clean.code, 0, "{}", clean.stderr);
    assert!(
        clean.stdout.contains(&format!(
            "the lane of {id} (landed): it holds edits never committed (stet diff {id} shows them)"
        )),
        "{}",
        clean.stdout
    );
    assert!(lane.join("edit.txt").is_file());

    let show = p.run(&["show", id]);
    assert!(
        show.stdout.contains(&format!("lane:  {}", lane.display())),
        "{}",
        show.stdout
    );
}

fn nix_uid() -> String {
    String::from_utf8(
        std::process::Command::new("id")
            .arg("-u")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string()
}

/// `stet run` hands its terminal through: `sh` is interactive, and its exit status passes.
#[test]
fn run_on_a_terminal_is_interactive() {
    require_image();
    let p = Person::new();
    let out = p.on_terminal(
        &["run", "--", "sh"],
        &[("$ ", "echo RUN-$((6*7)); exit 3\n")],
    );
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("RUN-42"), "{}", out.stdout);

    // The terminal closed under it: the command is killed and its sandbox removed.
    let out = p.on_terminal(&["run", "--", "sh"], &[("$ ", "<close>")]);
    assert_eq!(
        out.code, 129,
        "stopped by HUP: {}{}",
        out.stdout, out.stderr
    );
    let pid: u32 = out
        .stdout
        .rsplit("pid ")
        .next()
        .and_then(|p| p.trim().parse().ok())
        .expect("the driver names the pid");
    assert_eq!(stet_e2e::sandboxes_owned_by(pid), 0);
}

/// Checkout and merge of a landed item's branch, their refusals on a dirty working copy,
/// on a local branch elsewhere and on a conflict; and a shell with no terminal.
#[test]
fn checkout_and_merge_take_the_landed_work_and_refuse_what_would_lose_any() {
    require_image();
    let _serial = serial_drives();
    let p = Person::new();
    let ids = p.driven(&["write hello.txt: hi from the drive"]);
    let id = &ids[0];

    p.snap("shell_without_a_terminal", &["shell", id]);

    std::fs::write(p.work().join("README"), "changed here\n").unwrap();
    p.snap("checkout_refuses_a_dirty_tree", &["checkout", id]);
    p.snap("merge_refuses_a_dirty_tree", &["merge", id]);
    p.git(&["checkout", "--quiet", "--", "README"]);

    // The local branch the drive left is dropped: checkout makes it from the remote's.
    p.git(&["branch", "-D", &format!("stet/{id}")]);
    let out = p.run(&["checkout", "--json", id]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let said = out.json();
    assert_eq!(said["done"], "switched", "{said}");
    assert_eq!(said["branch"], format!("stet/{id}"), "{said}");
    assert_eq!(said["commit"], p.remote_branch(id), "{said}");
    assert_eq!(
        p.git(&["symbolic-ref", "--short", "HEAD"]).trim(),
        format!("stet/{id}")
    );
    assert_eq!(p.git(&["rev-parse", "HEAD"]).trim(), p.remote_branch(id));
    assert!(p.work().join("hello.txt").is_file());

    // The person's own commit on it: stet clean keeps the branch, checked out or not.
    p.git(&["commit", "--quiet", "--allow-empty", "-m", "mine"]);
    let local_branch_kept = |why: &str| {
        let out = p.run(&["clean", "--json"]);
        assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
        let json = out.json();
        let entry = json["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == "local-branch")
            .cloned()
            .unwrap_or_else(|| panic!("no local branch entry: {json}"));
        assert_eq!(entry["action"], "kept", "{json}");
        assert!(entry["why"].as_str().unwrap().contains(why), "{json}");
        assert!(
            !p.git(&["branch", "--list", &format!("stet/{id}")])
                .is_empty(),
            "the branch is still here"
        );
    };
    local_branch_kept("checked out here");

    // A local branch of that name at another commit is refused by name.
    p.git(&["switch", "--quiet", "-"]);
    local_branch_kept("commits the remote's branch does not");
    p.snap(
        "checkout_refuses_a_local_branch_elsewhere",
        &["checkout", id],
    );
    p.git(&["branch", "-D", &format!("stet/{id}")]);

    // A conflict is named with what to do. (The merge commit is the person's: their
    // identity, as their own git would use it.)
    p.git(&["config", "user.name", "A Person"]);
    p.git(&["config", "user.email", "person@example.com"]);
    let main = p.git(&["rev-parse", "HEAD"]);
    std::fs::write(p.work().join("hello.txt"), "mine\n").unwrap();
    p.git(&["add", "hello.txt"]);
    p.git(&["commit", "--quiet", "-m", "my hello"]);
    p.snap("merge_stops_on_a_conflict", &["merge", id]);
    p.git(&["merge", "--abort"]);
    p.git(&["reset", "--quiet", "--hard", main.trim()]);
    // Work of the person's own since the lane branched: the merge makes a merge commit.
    std::fs::write(p.work().join("other.txt"), "mine\n").unwrap();
    p.git(&["add", "other.txt"]);
    p.git(&["commit", "--quiet", "-m", "other work"]);

    let out = p.run(&["merge", "--json", id]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(out.json()["done"], "merged", "{}", out.stdout);
    assert_eq!(
        std::fs::read_to_string(p.work().join("hello.txt")).unwrap(),
        "hi from the drive\n"
    );
    assert_eq!(
        p.git(&["rev-parse", "HEAD^2"]).trim(),
        p.remote_branch(id),
        "a merge commit of the branch"
    );
    assert_eq!(
        p.git(&["log", "-1", "--format=%an <%ae>"]).trim(),
        "A Person <person@example.com>"
    );

    // Its queue file gone (archived, removed): the lane commands still name it by its
    // handle, from its branch.
    p.git(&["rm", "--quiet", &format!(".stet/queue/{id}.md")]);
    p.git(&["commit", "--quiet", "-m", "archive it"]);
    let handle = &id[20..];
    let again = p.run(&["merge", "--json", handle]);
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    assert_eq!(again.json()["done"], "already", "{}", again.stdout);
    assert_eq!(again.json()["id"], id.as_str());
}

/// A shell on an item a drive is working now is refused (it would race the agent, and the
/// drive would commit the person's edits as the agent's), saying what to do.
#[test]
fn a_shell_on_an_item_a_drive_is_working_is_refused() {
    require_image();
    let _serial = serial_drives();
    // An implementer that works until it is stopped; the wall proof's launch passes.
    let root = tempfile::tempdir().unwrap();
    let agent = root.path().join("slow-agent.sh");
    let example = std::fs::read_to_string(example_agent()).unwrap();
    let body = example.strip_prefix("#!/bin/sh\n").unwrap_or(&example);
    stet_exec_support::write_executable(
        &agent,
        format!(
            "#!/bin/sh\nif [ \"${{STET_ROLE:-implement}}\" = implement ]; then exec sleep 600; fi\n{body}"
        )
        .as_bytes(),
    )
    .unwrap();
    std::fs::set_permissions(
        root.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let p = Person::with_agent(&agent);
    let ids = p.queued(&["write hello.txt: hi from the drive"]);
    let id = &ids[0];
    let mut drive = p.world.stet(&["drive", "--yes", "--rounds", "1"]);
    drive
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    p.as_person(&mut drive);
    let mut drive = drive.spawn().unwrap();
    // The drive's lines, as they come (its stop is acknowledged there).
    let (lines, said) = std::sync::mpsc::channel::<String>();
    let stderr = drive.stderr.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines.send(line);
        }
    });
    // Wait for the event: the implementing call's receipt, written before the agent starts.
    let receipts = p.work().join(".git/stet/receipts");
    let started = std::time::Instant::now();
    while !std::fs::read_dir(&receipts).is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .any(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("\"running\"")))
    }) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "the implementing call never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    let shell = p.on_terminal(&["shell", id], &[]);
    // Stopped: a first Ctrl-C, acknowledged, then a second that kills the call at once.
    let pid = nix::unistd::Pid::from_raw(drive.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    loop {
        let line = said
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the drive acknowledges the stop");
        if line.contains("stopping after the") {
            break;
        }
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    drive.wait().unwrap();
    assert_eq!(shell.code, 3, "{}", shell.stdout);
    assert!(
        shell
            .stdout
            .contains(&format!("error: a drive is working {id} now (held by ")),
        "{}",
        shell.stdout
    );
    assert!(
        shell
            .stdout
            .contains("hint: wait until it is done with the item"),
        "{}",
        shell.stdout
    );
}
