//! `stet drive` end to end: the real binary, the real Docker Engine, the real Claude Code
//! CLI walled in its sandbox, a fake model on loopback, real git with a bare remote.

use serde_json::json;
use stet_e2e::fake_api::{FakeApi, Reply};
use stet_e2e::{claude_binary, git, serial_drives, walled_claude_setup, World};

/// How the fake model behaves in a drive test.
#[derive(Clone, Copy)]
struct Behaviour {
    /// What the review role answers.
    verdict: &'static str,
    /// The shell command the implement role runs.
    command: &'static str,
    /// How long the implement role's first answer takes.
    implement_delay_secs: u64,
    /// Whether the first implement request meets a usage limit (reset 3 s later).
    first_implement_rate_limited: bool,
    /// Whether every implement request fails with an API error.
    implement_fails: bool,
    /// Whether every implement request meets a refused login (401).
    implement_login_refused: bool,
}

const FIX: Behaviour = Behaviour {
    verdict: "LAND\nIt does what was asked.",
    command: "printf 'fixed\\n' > FIXED.txt",
    implement_delay_secs: 0,
    first_implement_rate_limited: false,
    implement_fails: false,
    implement_login_refused: false,
};

/// A fake model that runs the wall proof's canary when asked, implements with a shell
/// command, and reviews with a verdict.
fn scripted(behaviour: Behaviour) -> FakeApi {
    let implements = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    FakeApi::start(move |request| {
        let body = request.body.to_string();
        if body.contains("This is a wall check") {
            return if request.tool_results().is_empty() {
                Reply::ToolUse {
                    name: "Bash".into(),
                    input: json!({"command": "stet-wall-canary", "description": "as asked"}),
                }
            } else {
                Reply::Text("it was refused".into())
            };
        }
        if body.contains("You are reviewing") {
            return Reply::Text(behaviour.verdict.into());
        }
        if !request.tool_results().is_empty() {
            return Reply::Text("implemented".into());
        }
        if behaviour.implement_login_refused {
            return Reply::Error {
                status: 401,
                headers: vec![],
                body: json!({"type": "error", "error": {"type": "authentication_error", "message": "OAuth token has been revoked"}}),
            };
        }
        if behaviour.implement_fails {
            return Reply::Error {
                status: 500,
                headers: vec![],
                body: json!({"type": "error", "error": {"type": "api_error", "message": "the fake is down"}}),
            };
        }
        let n = implements.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if n == 0 && behaviour.first_implement_rate_limited {
            let reset = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
                + 3;
            return Reply::Error {
                status: 429,
                headers: vec![
                    (
                        "anthropic-ratelimit-unified-status".into(),
                        "rejected".into(),
                    ),
                    (
                        "anthropic-ratelimit-unified-reset".into(),
                        reset.to_string(),
                    ),
                ],
                body: json!({"type": "error", "error": {"type": "rate_limit_error", "message": "usage limit reached"}}),
            };
        }
        if n == 0 {
            std::thread::sleep(std::time::Duration::from_secs(
                behaviour.implement_delay_secs,
            ));
        }
        Reply::ToolUse {
            name: "Bash".into(),
            input: json!({"command": behaviour.command, "description": "fix it"}),
        }
    })
}

fn model(verdict: &'static str) -> FakeApi {
    scripted(Behaviour { verdict, ..FIX })
}

fn drive_world(api: &FakeApi) -> World {
    let world = World::new();
    let config = walled_claude_setup(
        &world,
        &claude_binary().display().to_string(),
        &api.url,
        "\n[drive]\ncheck = \"test -s FIXED.txt\"\n",
    );
    world.clone_of_fresh_remote();
    std::fs::write(world.work.join("stet.toml"), config).unwrap();
    world.trust_in(&world.work);
    git(&world.work, &["add", "stet.toml"]);
    git(&world.work, &["commit", "--quiet", "-m", "configure stet"]);
    world
}

#[test]
fn two_items_are_driven_to_landings_on_the_remote() {
    let _serial = serial_drives();
    let api = model("LAND\nIt does what was asked.");
    let world = drive_world(&api);
    assert_eq!(world.add_pushed("Add a FIXED.txt file").code, 0);
    assert_eq!(world.add_pushed("Also add FIXED.txt elsewhere").code, 0);
    let out = world.run_stet(&["drive", "--yes"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("stet drive: 2 items of 2 eligible"),
        "{}",
        out.stderr
    );

    let remote = world.root.path().join("remote.git");
    let branches = git(&remote, &["branch", "--list", "stet/*"]);
    assert_eq!(branches.lines().count(), 2, "{branches}");
    for branch in branches.lines() {
        let branch = branch.trim();
        let file = git(&remote, &["show", &format!("{branch}:FIXED.txt")]);
        assert_eq!(file, "fixed\n");
    }
    let queue = world.run_stet(&["queue", "--json"]).json()["items"].clone();
    assert!(
        queue
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["state"] == "landed"),
        "{queue:#}"
    );
    // No reservation is left behind.
    assert!(git(&remote, &["for-each-ref", "refs/stet/reservations"])
        .trim()
        .is_empty());
    // One receipt per agent call and per check: implement, check, review for each item.
    let receipts = stet_e2e::receipts_oldest_first(&world.run_stet(&["receipts", "--json"]));
    let roles: Vec<&str> = receipts
        .iter()
        .map(|r| r["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "implement",
            "check",
            "review",
            "implement",
            "check",
            "review"
        ],
        "{receipts:#?}"
    );

    let status = world.run_stet(&["status"]);
    assert!(
        status
            .stdout
            .contains("receipts: 6 of agent calls and checks in 1 run (4 done, 2 passed)"),
        "{}",
        status.stdout
    );
    // The implement call's transcript, rendered by the harness that made it: the session
    // summed up, the tool call with its command, the model's words, the cost at the end.
    let item = receipts[0]["item"].as_str().unwrap();
    let log = world.run_stet(&["log", item, "--role", "implement"]);
    assert_eq!(log.code, 0, "{}", log.stderr);
    let text = &log.stdout;
    assert!(
        text.starts_with("· session started · model "),
        "{text}{}",
        log.stderr
    );
    assert!(
        text.contains("\n→ Bash printf 'fixed\\n' > FIXED.txt\n"),
        "{text}"
    );
    assert!(text.contains("\nimplemented\n"), "{text}");
    let end = text.lines().last().unwrap();
    assert!(end.starts_with("■ finished · 2 turns · "), "{text}");
    assert!(end.contains(" · $0."), "{text}");
    assert!(
        !text.contains("\"type\""),
        "no stream-json line is left: {text}"
    );
    // --raw: the stream as the CLI wrote it.
    let raw = world.run_stet(&["log", item, "--role", "implement", "--raw"]);
    assert!(
        raw.stdout.starts_with("{\"type\":\"system\",")
            && raw.stdout.contains("\"subtype\":\"init\""),
        "{}",
        raw.stdout
    );
    // --json: the typed entries, the figures as facts.
    let json = world
        .run_stet(&["log", item, "--role", "implement", "--json"])
        .json();
    assert_eq!(json["harness"], "claude");
    assert_eq!(json["rendered"], true);
    let entries = json["entries"].as_array().unwrap();
    assert!(
        entries
            .iter()
            .any(|e| e["kind"] == "tool-call" && e["label"] == "Bash"),
        "{json:#}"
    );
    let result = entries.last().unwrap();
    assert_eq!(result["kind"], "result", "{json:#}");
    assert_eq!(result["facts"]["turns"], "2", "{json:#}");
    let cost: f64 = result["facts"]["cost_usd"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (cost - receipts[0]["cost_usd"].as_f64().unwrap()).abs() < 1e-9,
        "{json:#}"
    );
    // A second drive finds nothing eligible.
    let again = world.run_stet(&["drive", "--yes"]);
    assert_eq!(again.code, 0);
    assert!(
        again.stderr.contains("0 items of 0 eligible"),
        "{}",
        again.stderr
    );
}

#[test]
fn a_reviewer_that_never_lands_gives_the_item_up_after_the_rounds() {
    let _serial = serial_drives();
    let api = model("REVISE\nNot like this.");
    let world = drive_world(&api);
    world.add_pushed("Add a FIXED.txt file");
    let out = world.run_stet(&["drive", "--yes", "--rounds", "2"]);
    assert_eq!(out.code, 4, "some item given up: {}", out.stderr);
    assert!(
        out.stderr.contains(
            "given up: not landed after 2 rounds: the reviewer asked for changes: Not like this."
        ),
        "{}",
        out.stderr
    );
    // What the reviewer said is shown under the move, each round.
    assert_eq!(
        out.stderr
            .matches("the reviewer asked for changes:\n    | Not like this.")
            .count(),
        2,
        "{}",
        out.stderr
    );
    // The lane's work is on the remote all the same, and the reservation is released.
    let remote = world.root.path().join("remote.git");
    assert_eq!(
        git(&remote, &["branch", "--list", "stet/*"])
            .lines()
            .count(),
        1
    );
    assert!(git(&remote, &["for-each-ref", "refs/stet/reservations"])
        .trim()
        .is_empty());
}

#[test]
fn no_terminal_and_no_yes_refuses_before_reserving_anything() {
    let _serial = serial_drives();
    let api = model("LAND");
    let world = drive_world(&api);
    world.add_pushed("Add a FIXED.txt file");
    let out = world.run_stet(&["drive"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("no consent"), "{}", out.stderr);
    let remote = world.root.path().join("remote.git");
    assert!(stet_e2e::drive_records(&remote).is_empty());
}

#[test]
fn a_drive_started_inside_a_sandbox_refuses() {
    let _serial = serial_drives();
    let api = model("LAND");
    let world = drive_world(&api);
    let out = world.run(world.stet(&["drive", "--yes"]).env("STET_IN_SANDBOX", "1"));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("started inside a stet sandbox"),
        "{}",
        out.stderr
    );
}

/// An agent that rewrites the walled settings from inside its sandbox changes only its
/// call's copy of the profile: the walled settings stay exactly what the drive wrote, every
/// later stage runs with them, and the copy is gone after the call.
#[test]
fn an_agent_rewriting_its_settings_changes_only_its_calls_copy_of_the_profile() {
    let _serial = serial_drives();
    let api = scripted(Behaviour {
        command: "printf '{}' > \"$CLAUDE_CONFIG_DIR/settings.json\"; echo fixed > FIXED.txt",
        ..FIX
    });
    let world = drive_world(&api);
    world.add_pushed("Do something");
    let settings = world.root.path().join("profiles/claude/settings.json");
    let out = world.run_stet(&["drive", "--yes"]);
    assert!(
        !out.stderr
            .contains("the walled settings changed during the drive"),
        "{}",
        out.stderr
    );
    // The stages after the implementing call were made with the settings as written.
    assert!(out.stderr.contains("· check"), "{}", out.stderr);
    let now = std::fs::read_to_string(&settings).unwrap();
    assert!(now.contains("hook"), "{now}");
    // The agent's shell really wrote its copy: its tool result is not an error.
    let results: Vec<String> = api
        .requests()
        .iter()
        .flat_map(|r| r.tool_results())
        .map(|r| r.to_string())
        .collect();
    assert!(
        results.iter().any(|r| r.contains("\"is_error\":false")),
        "{results:?}"
    );
    let remote = world.root.path().join("remote.git");
    let left = git(&remote, &["for-each-ref", "refs/stet/reservations"]);
    assert!(left.trim().is_empty(), "reservations left: {left}");
}

#[test]
fn a_drive_reaps_what_a_killed_stet_left_behind_before_it_starts() {
    let _serial = serial_drives();
    let api = model("LAND");
    let world = drive_world(&api);
    let mut orphan_maker = world.stet(&["run", "--", "sleep", "120"]).spawn().unwrap();
    let started = std::time::Instant::now();
    while stet_e2e::sandboxes_owned_by(orphan_maker.id()) == 0 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "no sandbox appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    orphan_maker.kill().unwrap();
    orphan_maker.wait().unwrap();
    let out = world.run_stet(&["drive", "--yes"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("reaped 1 sandbox a crashed stet left behind"),
        "{}",
        out.stderr
    );
    assert_eq!(stet_e2e::sandboxes_owned_by(orphan_maker.id()), 0);
}

/// A usage limit makes the drive wait until the reset (never below the floor), with the
/// reservation released meanwhile, and then carry on.
#[test]
fn a_usage_limit_is_waited_out_and_the_item_still_lands() {
    let _serial = serial_drives();
    let api = scripted(Behaviour {
        first_implement_rate_limited: true,
        ..FIX
    });
    let world = drive_world(&api);
    world.add_pushed("Add a FIXED.txt file");
    let started = std::time::Instant::now();
    let out = world.run_stet(&["drive", "--yes", "--wait-floor", "1s"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("the agent hit its usage limit")
            && out.stderr.contains("waiting until"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("landed on origin"), "{}", out.stderr);
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(2),
        "it waited"
    );
    let receipts = stet_e2e::receipts_oldest_first(&world.run_stet(&["receipts", "--json"]));
    let outcomes: Vec<&str> = receipts
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        ["rate-limited", "done", "passed", "done"],
        "{receipts:#?}"
    );
}

/// A login the model API refuses mid-drive (a 401) stops the drive at once, saying to log
/// in again — never an outage waited for hours; no item is given up, nothing stays
/// reserved.
#[test]
fn a_login_refused_mid_drive_stops_the_drive_at_once_saying_to_log_in_again() {
    let _serial = serial_drives();
    let api = scripted(Behaviour {
        implement_login_refused: true,
        ..FIX
    });
    let world = drive_world(&api);
    world.add_pushed("Add a FIXED.txt file");
    let out = world.run_stet(&["drive", "--yes"]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "the model API refused the profile's login (the model API refused the login: "
        ) && out
            .stderr
            .contains("log in again (stet profile login), then resume with: stet drive"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("outage"), "{}", out.stderr);
    let receipts = stet_e2e::receipts_oldest_first(&world.run_stet(&["receipts", "--json"]));
    let outcomes: Vec<&str> = receipts
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["not-logged-in"], "{receipts:#?}");
    let queue = world.run_stet(&["queue", "--json"]).json()["items"].clone();
    assert_eq!(queue[0]["state"], "open", "{queue}");
}

/// Starts `stet drive --yes` and returns once its implement call has reached the model
/// (the wall proof's requests come first), so a test can signal it mid-call.
fn drive_until_implementing(world: &World, api: &FakeApi) -> std::process::Child {
    let child = world
        .stet(&["drive", "--yes"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !api
        .requests()
        .iter()
        .any(|r| r.body.to_string().contains("Do what this work item asks"))
    {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "no implement call"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child
}

/// The first Ctrl-C stops after the call in flight: its receipt is recorded, the
/// reservation released, the lane's branch left pushed; the next drive takes it up.
#[test]
fn a_stop_mid_lane_then_a_resume_lands_the_item() {
    let _serial = serial_drives();
    let api = scripted(Behaviour {
        implement_delay_secs: 2,
        ..FIX
    });
    let world = drive_world(&api);
    world.add_pushed("Add a FIXED.txt file");
    let child = drive_until_implementing(&world, &api);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "stopped by SIGINT: {stderr}");
    assert!(stderr.contains("stopped: run drive-"), "{stderr}");
    assert!(stderr.contains("resume with: stet drive"), "{stderr}");
    let remote = world.root.path().join("remote.git");
    assert!(
        git(&remote, &["for-each-ref", "refs/stet/reservations"])
            .trim()
            .is_empty(),
        "released"
    );
    let pushed = git(&remote, &["branch", "--list", "stet/*"]);
    assert_eq!(
        pushed.lines().count(),
        1,
        "the lane's branch stays pushed: {pushed}"
    );
    let receipts = stet_e2e::receipts_oldest_first(&world.run_stet(&["receipts", "--json"]));
    assert_eq!(receipts.len(), 1, "the call in flight was recorded");
    assert_eq!(receipts[0]["outcome"], "done");

    let resumed = world.run_stet(&["drive", "--yes"]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert!(
        resumed.stderr.contains("landed on origin"),
        "{}",
        resumed.stderr
    );
}

/// A second Ctrl-C kills the agent at once, removes its sandboxes, says in the call's
/// receipt that the person stopped it, and names when the reservation lapses; the next
/// drive on this clone takes its own reservation up and lands the item.
#[test]
fn a_second_signal_kills_at_once_and_the_next_drive_takes_the_lane_up() {
    let _serial = serial_drives();
    let api = scripted(Behaviour {
        implement_delay_secs: 4,
        ..FIX
    });
    let world = drive_world(&api);
    world.add_pushed("Add a FIXED.txt file");
    let mut child = drive_until_implementing(&world, &api);
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    // The drive's lines as they come, so the second press waits for the first's answer.
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
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    loop {
        let line = seen
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the drive answers the first press");
        if line.contains("stopping after the agent call in flight") {
            break;
        }
    }
    let pressed = std::time::Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let status = child.wait().unwrap();
    let stderr = reader.join().unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(
        pressed.elapsed() < std::time::Duration::from_secs(3),
        "exited at once"
    );
    assert!(
        stderr.contains("killed the agent's processes; the reservation of"),
        "{stderr}"
    );
    assert!(stderr.contains("lapses at"), "{stderr}");
    let remote = world.root.path().join("remote.git");
    assert!(
        !git(&remote, &["for-each-ref", "refs/stet/reservations"])
            .trim()
            .is_empty(),
        "not released"
    );

    // The call's sandbox, and the next stage's and the next item's if the engine had made
    // them before the kill, went with it.
    assert_eq!(
        stet_e2e::sandboxes_owned_by(pid.as_raw() as u32),
        0,
        "{stderr}"
    );
    let receipts = stet_e2e::receipts_oldest_first(&world.run_stet(&["receipts", "--json"]));
    assert_eq!(receipts[0]["outcome"], "interrupted", "{receipts:#?}");
    assert_eq!(receipts[0]["stopped_by_signal"], 2, "{receipts:#?}");

    let resumed = world.run_stet(&["drive", "--yes"]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert!(!resumed.stderr.contains("reaped"), "{}", resumed.stderr);
    assert!(
        resumed.stderr.contains("landed on origin"),
        "{}",
        resumed.stderr
    );
}

/// A model API that answers 500, three calls in a row, enters the outage schedule; when
/// the outage has lasted its limit the drive stops, handing nothing back.
#[test]
fn a_model_api_that_keeps_failing_enters_the_outage_schedule_and_stops_at_its_limit() {
    let _serial = serial_drives();
    let api = scripted(Behaviour {
        implement_fails: true,
        ..FIX
    });
    let world = drive_world(&api);
    world.add_pushed("Add a FIXED.txt file");
    let out = world.run_stet(&[
        "drive",
        "--yes",
        "--outage-schedule",
        "1s",
        "--outage-limit",
        "2s",
    ]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    // The model API answering 500 is infrastructure (the harness says SERVICE_UNAVAILABLE),
    // not the agent failing its task: it never counts toward the item's rounds.
    assert!(
        out.stderr
            .contains("a call could not be made (implement: api_error"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("given up"), "{}", out.stderr);
    assert!(
        out.stderr.contains("outage: trying again after 1s"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("the drive stops; nothing was handed back"),
        "{}",
        out.stderr
    );
    let remote = world.root.path().join("remote.git");
    assert!(stet_e2e::landed_on(&remote).is_empty());
    let receipts = stet_e2e::receipts_oldest_first(&world.run_stet(&["receipts", "--json"]));
    let failed = receipts
        .iter()
        .filter(|r| r["outcome"] == "service-unavailable")
        .count();
    assert!(failed >= 6, "two rounds of three failures: {receipts:#?}");
}

/// Ctrl-C during the start-up proof of the real Claude Code ends the drive at once, with a
/// message, its proof's sandbox and every temporary directory of it gone, nothing reserved.
#[test]
fn a_stop_during_the_proof_ends_the_drive_at_once_and_leaves_nothing() {
    let _serial = serial_drives();
    let api = model("LAND");
    let world = drive_world(&api);
    world.add_pushed("Add a FIXED.txt file");
    let tmp = world.root.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let child = world
        .stet(&["drive", "--yes"])
        .env("TMPDIR", &tmp)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // The proof's agent has asked the model: its sandbox runs.
    let started = std::time::Instant::now();
    while api.requests().is_empty() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the proof never reached the model"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("stopped while the drive was starting; nothing was reserved"),
        "{stderr}"
    );
    assert_eq!(stet_e2e::sandboxes_owned_by(pid), 0, "{stderr}");
    let left: Vec<String> = std::fs::read_dir(&tmp)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("stet-"))
        .collect();
    assert!(left.is_empty(), "temporary directories left: {left:?}");
    let remote = world.root.path().join("remote.git");
    assert!(stet_e2e::drive_records(&remote).is_empty());
}
