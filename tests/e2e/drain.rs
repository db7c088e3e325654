//! `stet drive` draining a queue through the real binary, the real Docker runtime, real git
//! with a bare remote, and the command harness running the stand-in agent
//! (`tests/agents/stand-in.sh`), which answers in shape, out of shape, late or not at all as
//! each item tells it. Two clones drive at once; drives are stopped mid-lane and killed
//! with SIGKILL at seeded random instants, and the next drive picks everything up.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use stet_e2e::{git, serial_drives, stand_in_world, Output, World};

fn remote(world: &World) -> PathBuf {
    world.root.path().join("remote.git")
}

/// A second clone of the world's remote, beside the first.
fn second_clone(world: &World, name: &str) -> PathBuf {
    let dir = world.root.path().join(name);
    git(
        world.root.path(),
        &[
            "clone",
            "--quiet",
            remote(world).to_str().unwrap(),
            dir.to_str().unwrap(),
        ],
    );
    let trusted = world.trust_in(&dir);
    assert_eq!(trusted.code, 0, "{}", trusted.stderr);
    dir
}

/// Items marked landed on the remote.
fn landed(world: &World) -> Vec<String> {
    stet_e2e::landed_on(&remote(world))
}

/// A drive running in the background, its standard error going to a file the test can
/// read while it runs (to wait for what it says, not for time).
struct Driving {
    child: Child,
    log: PathBuf,
}

impl std::ops::Deref for Driving {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.child
    }
}

impl std::ops::DerefMut for Driving {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Driving {
    /// What the drive has said so far.
    fn said(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for the drive to end and collects what it did.
    fn finish(self) -> Output {
        let out = self.child.wait_with_output().expect("wait for stet drive");
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: std::fs::read_to_string(&self.log).unwrap_or_default(),
        }
    }
}

fn drive_in(world: &World, dir: &Path, args: &[&str]) -> Driving {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let log = world.root.path().join(format!("drive-{n}.stderr"));
    let mut command = world.stet(&["drive", "--yes"]);
    command
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap());
    Driving {
        child: command.spawn().expect("start stet drive"),
        log,
    }
}

fn receipts_in(world: &World, dir: &Path) -> Vec<serde_json::Value> {
    let mut command = world.stet(&["receipts", "--json"]);
    command.current_dir(dir);
    let out = world.run(&mut command);
    assert_eq!(out.code, 0, "{}", out.stderr);
    stet_e2e::receipts_oldest_first(&out)
}

/// The stand-in's calls: (receipt id, role), one per call it started, from the first line
/// it prints on standard error, which every clone under the world keeps beside the call's
/// log (`.git/stet/logs/<id>.stderr.log`).
fn invocations(world: &World) -> Vec<(String, String)> {
    let mut calls = Vec::new();
    let clones = std::fs::read_dir(world.root.path())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path().join(".git/stet/logs"));
    for logs in clones {
        let Ok(entries) = std::fs::read_dir(&logs) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            if !entry.file_name().to_string_lossy().ends_with(".stderr.log") {
                continue;
            }
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            for line in text.lines() {
                if let Some(call) = line.strip_prefix("stand-in: call ") {
                    if let Some((id, role)) = call.split_once(' ') {
                        calls.push((id.to_string(), role.to_string()));
                    }
                }
            }
        }
    }
    calls.sort();
    calls
}

/// When the item's reservation on the remote lapses, if one is held.
fn reservation_expiry(world: &World) -> Option<i64> {
    let message = git(
        &remote(world),
        &[
            "for-each-ref",
            "--format=%(contents:subject)",
            "refs/stet/reservations",
        ],
    );
    let line = message.lines().next()?;
    serde_json::from_str::<serde_json::Value>(line).ok()?["expires_at_unix"].as_i64()
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Stet's sandboxes still in the engine whose owning process is one of `pids`.
fn sandboxes_of(pids: &[u32]) -> usize {
    pids.iter()
        .map(|pid| stet_e2e::sandboxes_owned_by(*pid))
        .sum()
}

#[test]
fn three_seeded_items_land_on_the_bare_remote_with_a_receipt_for_every_call() {
    let _serial = serial_drives();
    let world = stand_in_world(&[
        "Write a.txt\n\nfile: a.txt",
        "Write b.txt, slowly\n\nfile: b.txt\nimplement: late 2\nreview: late 1",
        "Write c.txt, after one revision\n\nfile: c.txt\nreview: revise-once",
    ]);
    let child = drive_in(&world, &world.work, &["--follow"]);
    let pid = child.id();
    let out = child.finish();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("stet drive: 3 items of 3 eligible"),
        "{}",
        out.stderr
    );
    // Plain lines off a terminal: the moves, and the agent's own output with --follow.
    assert!(out.stderr.contains("move 1 · stet/"), "{}", out.stderr);
    assert!(out.stderr.contains("· implement"), "{}", out.stderr);
    assert!(out.stderr.contains("wrote a.txt"), "{}", out.stderr);
    assert!(
        out.stderr.contains("the reviewer asked for changes"),
        "{}",
        out.stderr
    );

    let mut items = landed(&world);
    items.sort();
    assert_eq!(items.len(), 3, "{items:?}\n{}", out.stderr);
    for (item, file) in items.iter().zip(["a.txt", "b.txt", "c.txt"]) {
        let tree = git(
            &remote(&world),
            &["ls-tree", "--name-only", &format!("stet/{item}")],
        );
        assert!(tree.lines().any(|f| f == file), "{item}: {tree}");
    }
    // c was revised once: its file holds the title twice.
    let c = git(
        &remote(&world),
        &["show", &format!("stet/{}:c.txt", items[2])],
    );
    assert_eq!(c.lines().count(), 2, "{c}");

    let receipts = receipts_in(&world, &world.work);
    let roles: Vec<&str> = receipts
        .iter()
        .map(|r| r["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles.iter().filter(|r| **r == "implement").count(),
        4,
        "{roles:?}"
    );
    assert_eq!(
        roles.iter().filter(|r| **r == "review").count(),
        4,
        "{roles:?}"
    );
    for r in &receipts {
        assert_eq!(r["outcome"], "done", "{r}");
        assert_eq!(r["harness"]["name"], "command");
        assert_eq!(r["runtime"]["name"], "docker");
        assert_eq!(r["harness"]["library_sha256"].as_str().unwrap().len(), 64);
        assert_eq!(
            r["cost_usd"].as_f64(),
            (r["role"] == "implement").then_some(0.001)
        );
        assert!(Path::new(r["log"].as_str().unwrap()).is_file(), "{r}");
    }
    // Every call the stand-in saw has its receipt, under the id the host gave it.
    let ids: Vec<&str> = receipts.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let calls = invocations(&world);
    assert!(!calls.is_empty(), "the stand-in announced no call");
    for (id, role) in calls {
        assert!(
            ids.contains(&id.as_str()),
            "the {role} call {id} has no receipt"
        );
    }
    let queue = world.run_stet(&["queue", "--json"]).json()["items"].clone();
    assert!(
        queue
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["state"] == "landed"),
        "{queue}"
    );
    assert_eq!(sandboxes_of(&[pid]), 0, "sandboxes left behind");
    let status = world.run_stet(&["status", "--json"]).json();
    assert_eq!(status["calls"], 8, "{status:#}");
    assert_eq!(status["outcomes"]["done"], 8, "{status:#}");
    assert_eq!(
        status["lanes_here"].as_array().unwrap().len(),
        0,
        "{status:#}"
    );
    assert!(
        (status["cost_usd"].as_f64().unwrap() - 0.004).abs() < 1e-9,
        "{status:#}"
    );
    // Nothing left to do: a second drive finds nothing eligible and reserves nothing.
    let again = world.run_stet(&["drive", "--yes"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stderr.contains("0 items of 0 eligible"),
        "{}",
        again.stderr
    );
}

/// The headline of the drive's rules: an item whose agent cannot do it (here it never
/// answers and is killed at the call limit) is given up after its rounds, marked failed
/// with why, and the item behind it is reached and landed. No outage: nothing waited.
#[test]
fn an_item_whose_agent_never_answers_is_given_up_after_its_rounds_and_the_next_item_lands() {
    let _serial = serial_drives();
    let world = stand_in_world(&[
        "Hang\n\nfile: h.txt\nimplement: silent",
        "Fine\n\nfile: f.txt",
    ]);
    let out = world.run_stet(&["drive", "--yes", "--call-limit", "2s", "--rounds", "2"]);
    assert_eq!(out.code, 4, "an item was given up: {}", out.stderr);
    assert!(out.stderr.contains("no answer within 2s"), "{}", out.stderr);
    assert!(!out.stderr.contains("outage"), "{}", out.stderr);
    assert!(!out.stderr.contains("waiting until"), "{}", out.stderr);
    let receipts = receipts_in(&world, &world.work);
    let hung: Vec<_> = receipts
        .iter()
        .filter(|r| r["lane"].as_str().unwrap().ends_with("-hang"))
        .collect();
    assert_eq!(hung.len(), 2, "two rounds: {receipts:?}");
    assert!(hung.iter().all(|r| r["outcome"] == "failed"), "{hung:?}");
    assert_eq!(landed(&world).len(), 1, "{}", out.stderr);
    let queue = world.run_stet(&["queue", "--json"]).json()["items"].clone();
    assert_eq!(queue[0]["state"], "failed", "{queue}");
    let why = queue[0]["why"].as_str().unwrap();
    assert!(
        why.starts_with("not landed after 2 rounds: the implementing agent failed its task: no answer within 2s"),
        "{why}"
    );
    assert_eq!(queue[1]["state"], "landed", "{queue}");
    // Nothing was pushed for the item that changed nothing.
    let branches = git(&remote(&world), &["branch", "--list", "stet/*"]);
    assert!(!branches.contains("-hang"), "{branches}");
}

/// A usage limit whose reset time cannot be read (the agent says `stet-retry-at: -5`,
/// which the command harness takes for no time) is waited at the floor and the call made
/// again; the third in a row is the item's round, with the agent's words — never a wait
/// for ever.
#[test]
fn a_usage_limit_without_a_reset_time_is_the_items_round_after_three_never_a_wait_for_ever() {
    let _serial = serial_drives();
    let world = stand_in_world(&["Limited\n\nfile: l.txt\nimplement: limited -5"]);
    let out = world.run_stet(&["drive", "--yes", "--wait-floor", "1s", "--rounds", "1"]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "the agent said it hit a usage limit 3 times in a row without a reset time stet could read (none given): the agent reported a usage limit (exit code 75): stand-in: usage limit reached"
        ),
        "{}",
        out.stderr
    );
    let calls: Vec<String> = invocations(&world).into_iter().map(|(_, r)| r).collect();
    assert_eq!(
        calls,
        ["implement", "implement", "implement"],
        "{}",
        out.stderr
    );
    assert_eq!(
        out.stderr.matches("waiting until").count(),
        2,
        "a wait at the floor after each of the first two: {}",
        out.stderr
    );
}

/// A usage limit whose reset is further away than the outage limit (here the agent names
/// the year 2100, through the command harness's `stet-retry-at:` and exit 75) is not slept
/// through: the drive stops at once with exit 3, naming the reset in UTC and the command to
/// resume; nothing is left reserved, no further call is made, and no item is failed.
#[test]
fn a_usage_limit_that_resets_in_the_year_2100_stops_the_drive_saying_when_to_resume() {
    let _serial = serial_drives();
    let world = stand_in_world(&[
        "Limited\n\nfile: l.txt\nimplement: limited 4102444800",
        "Next\n\nfile: n.txt",
    ]);
    let out = world.run_stet(&["drive", "--yes"]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("the agent hit its usage limit, which resets at 2100-01-01 00:00:00 UTC"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("resume with: stet drive, after 2100-01-01 00:00:00 UTC"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("waiting until"), "{}", out.stderr);
    let calls: Vec<String> = invocations(&world).into_iter().map(|(_, r)| r).collect();
    assert_eq!(calls, ["implement"], "no launch after the limit");
    let receipts = receipts_in(&world, &world.work);
    assert_eq!(receipts.len(), 1, "{receipts:?}");
    assert_eq!(receipts[0]["outcome"], "rate-limited", "{receipts:?}");
    let held = git(&remote(&world), &["for-each-ref", "refs/stet/reservations"]);
    assert!(held.is_empty(), "still reserved: {held}");
    let queue = world.run_stet(&["queue", "--json"]).json()["items"].clone();
    assert_eq!(queue[0]["state"], "open", "{queue}");
    assert_eq!(queue[1]["state"], "open", "{queue}");
    assert!(landed(&world).is_empty());
}

/// A review out of shape is its item's round, never an outage: the reviewer's words are
/// shown, the round is counted (so an item whose review is never in shape is given up),
/// no lane waits, and the implementing call is not made again.
#[test]
fn a_review_out_of_shape_is_its_items_round_never_an_outage() {
    let _serial = serial_drives();
    let world = stand_in_world(&["Shapeless\n\nfile: s.txt\nreview: out-of-shape"]);
    let out = world.run_stet(&[
        "drive",
        "--yes",
        "--rounds",
        "1",
        "--outage-schedule",
        "1s",
        "--wait-floor",
        "1s",
    ]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("round 1 of 1: the review was out of shape")
            && out.stderr.contains("Looks fine to me."),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("outage"), "{}", out.stderr);
    let receipts = receipts_in(&world, &world.work);
    let roles: Vec<&str> = receipts
        .iter()
        .map(|r| r["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["implement", "review"], "{receipts:?}");
    assert_eq!(receipts[1]["outcome"], "out-of-shape");
    let queue = world.run_stet(&["queue", "--json"]).json()["items"].clone();
    assert_eq!(queue[0]["state"], "failed", "{queue}");
    assert!(
        queue[0]["why"]
            .as_str()
            .unwrap()
            .contains("the review was out of shape"),
        "{queue}"
    );
    assert!(landed(&world).is_empty());
}

#[test]
fn a_stop_mid_lane_is_resumed_and_landed_by_a_second_clone() {
    let _serial = serial_drives();
    let world = stand_in_world(&["Slow\n\nfile: slow.txt\nimplement: late 3"]);
    let child = drive_in(&world, &world.work, &[]);
    wait_for("the implementing call", Duration::from_secs(60), || {
        !invocations(&world).is_empty()
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let stopped = child.finish();
    assert_eq!(
        stopped.code,
        128 + 15,
        "stopped by SIGTERM: {}",
        stopped.stderr
    );
    assert!(
        stopped.stderr.contains("stopped: run drive-"),
        "{}",
        stopped.stderr
    );
    assert!(
        stopped.stderr.contains("resume with: stet drive"),
        "{}",
        stopped.stderr
    );
    // The call in flight finished and was recorded; the lane is pushed, nothing is held.
    let first = receipts_in(&world, &world.work);
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0]["outcome"], "done");
    let pushed = git(
        &remote(&world),
        &["for-each-ref", "--format=%(objectname) %(refname)"],
    );
    assert!(!pushed.contains("refs/stet/reservations/"), "{pushed}");
    let queue = world.run_stet(&["queue"]);
    assert!(
        queue
            .stdout
            .contains("pushed; the next drive resumes it at round 1, review"),
        "{}",
        queue.stdout
    );

    let peer = second_clone(&world, "peer");
    let child = drive_in(&world, &peer, &[]);
    let resumed = child.finish();
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(landed(&world).len(), 1, "{}", resumed.stderr);
    // The peer continued from the pushed lane: its first call started at that commit.
    let peer_receipts = receipts_in(&world, &peer);
    assert_eq!(peer_receipts[0]["commit_before"], first[0]["commit_after"]);
}

#[test]
fn two_drives_on_two_clones_at_once_never_work_the_same_item() {
    let _serial = serial_drives();
    let world = stand_in_world(&[
        "One\n\nfile: 1.txt\nimplement: late 1",
        "Two\n\nfile: 2.txt\nimplement: late 1",
        "Three\n\nfile: 3.txt\nimplement: late 1",
        "Four\n\nfile: 4.txt\nimplement: late 1",
    ]);
    let peer = second_clone(&world, "peer");
    let a = drive_in(&world, &world.work, &[]);
    let b = drive_in(&world, &peer, &[]);
    let (a, b) = (a.finish(), b.finish());
    assert_eq!(a.code, 0, "{}", a.stderr);
    assert_eq!(b.code, 0, "{}", b.stderr);
    assert_eq!(landed(&world).len(), 4, "{}\n{}", a.stderr, b.stderr);
    let items = |dir: &Path| -> std::collections::BTreeSet<String> {
        receipts_in(&world, dir)
            .iter()
            .map(|r| r["item"].as_str().unwrap().to_string())
            .collect()
    };
    let (in_a, in_b) = (items(&world.work), items(&peer));
    assert!(
        in_a.is_disjoint(&in_b),
        "worked on both clones: {:?}",
        in_a.intersection(&in_b).collect::<Vec<_>>()
    );
    assert_eq!(in_a.len() + in_b.len(), 4, "{in_a:?} {in_b:?}");
}

/// The lanes on `dir`'s clone whose implementing call (of an item saying
/// `implement: until GO`) runs now and waits for its gate: their calls' logs say so.
fn lanes_waiting_for_go(dir: &Path) -> Vec<PathBuf> {
    let logs = dir.join(".git/stet/logs");
    let Ok(entries) = std::fs::read_dir(&logs) else {
        return Vec::new();
    };
    let mut lanes = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        // `<ms>-<item>-implement.log`: the call's standard output.
        let Some(item) = name
            .strip_suffix("-implement.log")
            .and_then(|rest| rest.split_once('-'))
            .map(|(_, item)| item.to_string())
        else {
            continue;
        };
        let said = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let lane = dir.join(".git/stet/lanes").join(&item).join("work");
        if said.contains("stand-in: waiting for GO") && !lane.join("GO").exists() {
            lanes.push(lane);
        }
    }
    lanes.sort();
    lanes.dedup();
    lanes
}

/// Three items queued, the first two saying `implement: until GO`, and a drive of two
/// lanes started on them; returns once both implementing calls wait for their gates at the
/// same time — which one lane alone could never reach — with the two lanes' directories.
fn two_lanes_waiting() -> (World, Driving, Vec<PathBuf>) {
    let world = stand_in_world(&[
        "One\n\nfile: 1.txt\nimplement: until GO",
        "Two\n\nfile: 2.txt\nimplement: until GO",
        "Three\n\nfile: 3.txt",
    ]);
    let child = drive_in(&world, &world.work, &["--jobs", "2"]);
    let mut waiting = Vec::new();
    wait_for(
        "two implementing calls at once",
        Duration::from_secs(120),
        || {
            waiting = lanes_waiting_for_go(&world.work);
            waiting.len() == 2
        },
    );
    (world, child, waiting)
}

#[test]
fn with_two_jobs_two_items_are_worked_at_once_and_every_item_lands() {
    let _serial = serial_drives();
    let (world, child, waiting) = two_lanes_waiting();
    for lane in &waiting {
        std::fs::write(lane.join("GO"), "").unwrap();
    }
    let out = child.finish();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("lanes:    2 at once"),
        "the consent names the lanes: {}",
        out.stderr
    );
    assert_eq!(landed(&world).len(), 3, "{}", out.stderr);
    assert!(out.stderr.contains("landed 3"), "{}", out.stderr);
    // Every call has its receipt, one implementing call per item.
    let receipts = receipts_in(&world, &world.work);
    let implements: Vec<&str> = receipts
        .iter()
        .filter(|r| r["role"] == "implement")
        .map(|r| r["item"].as_str().unwrap())
        .collect();
    let distinct: std::collections::BTreeSet<&str> = implements.iter().copied().collect();
    assert_eq!(implements.len(), 3, "{receipts:#?}");
    assert_eq!(
        distinct.len(),
        3,
        "an item was worked twice: {implements:?}"
    );
    assert!(receipts.iter().all(|r| r["outcome"] != "running"));
}

#[test]
fn two_clones_with_two_lanes_each_never_work_the_same_item() {
    let _serial = serial_drives();
    let items: Vec<String> = (1..=6)
        .map(|n| format!("Item {n}\n\nfile: {n}.txt\nimplement: late 1"))
        .collect();
    let world = stand_in_world(&items.iter().map(String::as_str).collect::<Vec<_>>());
    let peer = second_clone(&world, "peer");
    let a = drive_in(&world, &world.work, &["--jobs", "2"]);
    let b = drive_in(&world, &peer, &["--jobs", "2"]);
    let (a, b) = (a.finish(), b.finish());
    assert_eq!(a.code, 0, "{}", a.stderr);
    assert_eq!(b.code, 0, "{}", b.stderr);
    assert_eq!(landed(&world).len(), 6, "{}\n{}", a.stderr, b.stderr);
    let calls = |dir: &Path| -> Vec<String> {
        receipts_in(&world, dir)
            .iter()
            .filter(|r| r["role"] == "implement")
            .map(|r| r["item"].as_str().unwrap().to_string())
            .collect()
    };
    let mut all = calls(&world.work);
    all.extend(calls(&peer));
    let distinct: std::collections::BTreeSet<&String> = all.iter().collect();
    assert_eq!(all.len(), 6, "an item was implemented twice: {all:?}");
    assert_eq!(distinct.len(), 6, "{all:?}");
}

#[test]
fn a_stop_lets_every_lanes_call_in_flight_finish_and_releases_every_reservation() {
    let _serial = serial_drives();
    let (world, child, waiting) = two_lanes_waiting();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    wait_for("the stop to be heard", Duration::from_secs(60), || {
        child
            .said()
            .contains("stopping after the agent calls in flight")
    });
    // The calls go on after the stop; they end when their gates open.
    for lane in &waiting {
        std::fs::write(lane.join("GO"), "").unwrap();
    }
    let out = child.finish();
    assert_eq!(out.code, 128 + 15, "{}", out.stderr);
    let receipts = receipts_in(&world, &world.work);
    assert_eq!(
        receipts.len(),
        2,
        "the third item was not taken: {receipts:#?}"
    );
    assert!(
        receipts.iter().all(|r| r["outcome"] == "done"),
        "both calls finished: {receipts:#?}"
    );
    // Both lanes were pushed with their checkpoints; nothing is held.
    let pushed = git(&remote(&world), &["for-each-ref", "--format=%(refname)"]);
    assert!(!pushed.contains("refs/stet/reservations/"), "{pushed}");
    assert_eq!(
        pushed
            .lines()
            .filter(|r| r.starts_with("refs/heads/stet/"))
            .count(),
        2,
        "{pushed}"
    );
    assert!(landed(&world).is_empty());
    // The next drive lands all three, neither call made again.
    let resumed = drive_in(&world, &world.work, &["--jobs", "2"]).finish();
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(landed(&world).len(), 3, "{}", resumed.stderr);
    let implements = receipts_in(&world, &world.work)
        .iter()
        .filter(|r| r["role"] == "implement")
        .count();
    assert_eq!(implements, 3, "no implementing call was made again");
}

/// A small repeatable generator (the seed is printed; set STET_KILL_SEED to replay one).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn kill_9_at_seeded_random_instants_then_resume_lands_every_item_once_and_loses_no_receipt() {
    kill_9_then_resume(&[]);
}

#[test]
fn kill_9_at_seeded_random_instants_of_two_lanes_then_resume_lands_every_item_once() {
    kill_9_then_resume(&["--jobs", "2"]);
}

/// Drives killed with SIGKILL at seeded random instants, then one drive to the end, each
/// with `args`: every item lands once, no call is without a receipt, nothing is left.
fn kill_9_then_resume(args: &[&str]) {
    let _serial = serial_drives();
    let seed: u64 = std::env::var("STET_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20261130);
    eprintln!("kill -9 seed: {seed} (STET_KILL_SEED={seed} replays it)");
    let mut random = Lcg(seed);
    let world = stand_in_world(&[
        "Alpha\n\nfile: alpha.txt\nimplement: late 1\nreview: late 1",
        "Beta\n\nfile: beta.txt\nimplement: late 1\nreview: late 1",
        "Gamma\n\nfile: gamma.txt\nimplement: late 1\nreview: revise-once",
    ]);
    let mut pids = Vec::new();
    for round in 0..6 {
        let calls_before = invocations(&world).len();
        let mut child = drive_in(&world, &world.work, args);
        pids.push(child.id());
        // Even rounds kill at any instant from the start (the proof, reaping, a take, a
        // push...); odd rounds while an agent call is in flight (each lasts at least 1 s).
        let when = if round % 2 == 0 {
            let after = Duration::from_millis(300 + random.below(5000));
            std::thread::sleep(after);
            format!("{after:?} after the start")
        } else {
            let start = Instant::now();
            while invocations(&world).len() == calls_before
                && start.elapsed() < Duration::from_secs(60)
                && child.try_wait().unwrap().is_none()
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            let after = Duration::from_millis(random.below(800));
            std::thread::sleep(after);
            format!("{after:?} into a call")
        };
        let _ = child.kill(); // SIGKILL
        let out = child.finish();
        eprintln!(
            "round {round}: killed {when} (exit {}), {} landed so far",
            out.code,
            landed(&world).len()
        );
    }
    let last = drive_in(&world, &world.work, args);
    pids.push(last.id());
    let out = last.finish();
    assert_eq!(out.code, 0, "{}", out.stderr);

    let mut items = landed(&world);
    items.sort();
    assert_eq!(items.len(), 3, "{items:?}\n{}", out.stderr);
    let receipts = receipts_in(&world, &world.work);
    // No call without a receipt: every call the stand-in started is recorded, and none is
    // still "running" (the calls killed with their drive are marked interrupted).
    let ids: Vec<&str> = receipts.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let calls = invocations(&world);
    assert!(!calls.is_empty(), "the stand-in announced no call");
    for (id, role) in calls {
        assert!(
            ids.contains(&id.as_str()),
            "the {role} call {id} has no receipt"
        );
    }
    assert!(
        receipts.iter().all(|r| r["outcome"] != "running"),
        "{receipts:?}"
    );
    // Some kills did land inside a call: their receipts say so.
    assert!(
        receipts.iter().any(|r| r["outcome"] == "interrupted"),
        "no kill landed inside a call: {receipts:#?}"
    );
    // Landed once: no agent call on an item started after its landing mark was written.
    for item in &items {
        let marked_at = stet_e2e::landed_at(&remote(&world), item).unwrap();
        for r in receipts.iter().filter(|r| r["item"] == item.as_str()) {
            let started = r["started_unix_ms"].as_u64().unwrap() / 1000;
            assert!(started <= marked_at, "{item} worked after it landed: {r}");
        }
    }
    // Nothing of any of these drives is left in the engine.
    assert_eq!(sandboxes_of(&pids), 0, "sandboxes left behind");
    let held = git(&remote(&world), &["for-each-ref", "refs/stet/reservations"]);
    assert!(held.trim().is_empty(), "reservations left: {held}");
}

#[test]
fn a_reservation_is_renewed_during_a_long_call_so_a_peer_does_not_take_it() {
    let _serial = serial_drives();
    let world = stand_in_world(&["Long\n\nfile: long.txt\nimplement: late 7"]);
    let peer = second_clone(&world, "peer");
    let a = drive_in(&world, &world.work, &["--lease", "2s"]);
    wait_for("the implementing call", Duration::from_secs(60), || {
        !invocations(&world).is_empty()
    });
    // Past the first 2 s lease while A's agent is still working, A has renewed it: wait
    // until the reservation on the remote lapses later than the first one did, and the
    // first one's time has passed.
    let first = reservation_expiry(&world).expect("A holds the reservation");
    wait_for(
        "a renewal past the first lease",
        Duration::from_secs(60),
        || {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64;
            now > first && reservation_expiry(&world).is_some_and(|e| e > now)
        },
    );
    let b = drive_in(&world, &peer, &["--lease", "2s"]).finish();
    assert_eq!(b.code, 0, "{}", b.stderr);
    assert!(b.stderr.contains("landed 0"), "{}", b.stderr);
    assert!(receipts_in(&world, &peer).is_empty(), "the peer worked it");
    let a = a.finish();
    assert_eq!(a.code, 0, "{}", a.stderr);
    assert_eq!(landed(&world).len(), 1, "{}", a.stderr);
}

#[test]
fn an_unreachable_remote_is_waited_out_and_the_lane_lands_when_it_is_back() {
    let _serial = serial_drives();
    let world = stand_in_world(&["Away\n\nfile: away.txt\nimplement: late 2"]);
    let child = drive_in(&world, &world.work, &["--wait-floor", "1s"]);
    wait_for("the implementing call", Duration::from_secs(60), || {
        !invocations(&world).is_empty()
    });
    // The remote goes away while the agent works, and comes back once the drive has
    // found it gone and is waiting for it.
    let away = world.root.path().join("remote.git.away");
    std::fs::rename(remote(&world), &away).unwrap();
    wait_for(
        "the drive to find the remote gone",
        Duration::from_secs(60),
        || child.said().contains("did not answer"),
    );
    std::fs::rename(&away, remote(&world)).unwrap();
    let out = child.finish();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("did not answer"), "{}", out.stderr);
    assert!(out.stderr.contains("waiting until"), "{}", out.stderr);
    assert_eq!(landed(&world).len(), 1, "{}", out.stderr);
}

#[test]
fn on_a_terminal_the_drive_shows_a_live_line_with_move_lane_and_stage() {
    let _serial = serial_drives();
    let world = stand_in_world(&["Shown\n\nfile: shown.txt\nimplement: late 1"]);
    let mut command = world.stet_on_terminal(&["drive", "--yes"]);
    command.env("TERM", "xterm").stdin(Stdio::null());
    let out = world.run(&mut command);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    // `script` puts the terminal's output on stdout: the live line is redrawn in place
    // (carriage returns and erase-line sequences) and names the move, lane and stage.
    let screen = &out.stdout;
    assert!(screen.contains("move 1 · stet/"), "{screen}");
    assert!(screen.contains("· implement"), "{screen}");
    assert!(screen.contains("\x1b[2K"), "no live redraw: {screen:?}");
    assert!(screen.contains("landed on origin"), "{screen}");

    // A terminal that cannot redraw a line gets the plain lines instead.
    let world = stand_in_world(&["Plain\n\nfile: plain.txt"]);
    let mut command = world.stet_on_terminal(&["drive", "--yes"]);
    command.env("TERM", "dumb").stdin(Stdio::null());
    let out = world.run(&mut command);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("move 1 · stet/"), "{:?}", out.stdout);
    assert!(!out.stdout.contains("\x1b[2K"), "{:?}", out.stdout);
}

#[test]
fn on_a_terminal_a_drive_of_two_lanes_shows_a_live_line_for_each() {
    let _serial = serial_drives();
    let world = stand_in_world(&[
        "Left\n\nfile: left.txt\nimplement: late 2",
        "Right\n\nfile: right.txt\nimplement: late 2",
    ]);
    let mut command = world.stet_on_terminal(&["drive", "--yes", "--jobs", "2"]);
    command.env("TERM", "xterm").stdin(Stdio::null());
    let out = world.run(&mut command);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let screen = &out.stdout;
    for lane in ["left", "right"] {
        assert!(
            screen.contains(&format!("-{lane} · implement")),
            "{lane}'s line: {screen}"
        );
    }
    // Two live lines are redrawn together: the cursor goes back up over the first.
    assert!(screen.contains("\x1b[1A"), "one live line only: {screen:?}");
    assert!(screen.contains("landed 2"), "{screen}");
}

#[test]
fn an_item_given_up_is_marked_failed_with_why_skipped_by_the_next_drive_and_retried_on_request() {
    let _serial = serial_drives();
    let world = stand_in_world(&["Never good enough\n\nfile: n.txt\nreview: never"]);
    let out = world.run_stet(&["drive", "--yes", "--rounds", "2"]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    let why = "not landed after 2 rounds: the reviewer asked for changes: Not like this.";
    assert!(
        out.stderr.contains(&format!("given up: {why}")),
        "{}",
        out.stderr
    );
    let queue = world.run_stet(&["queue", "--json"]).json()["items"].clone();
    let row = &queue[0];
    assert_eq!(row["state"], "failed", "{queue}");
    assert_eq!(row["why"], why, "{queue}");
    let id = row["id"].as_str().unwrap().to_string();
    let text = world.run_stet(&["queue"]);
    assert!(
        text.stdout.contains(&format!(
            "{why} (stet retry {} to take it up again)",
            &id[20..]
        )),
        "{}",
        text.stdout
    );

    // The next drive does not take it again.
    let again = world.run_stet(&["drive", "--yes"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stderr.contains("1 item failed before"),
        "{}",
        again.stderr
    );
    assert!(
        again.stderr.contains("0 items of 0 eligible"),
        "{}",
        again.stderr
    );

    // Until someone says to.
    let retried = world.run_stet(&["retry", &id]);
    assert_eq!(retried.code, 0, "{}", retried.stderr);
    assert_eq!(
        world.run_stet(&["queue", "--json"]).json()["items"][0]["state"],
        "open"
    );
    // Twice is no error (as `stet rm` twice is not): it says it was so already.
    let twice = world.run_stet(&["retry", &id]);
    assert_eq!(twice.code, 0, "{}", twice.stderr);
    assert!(
        twice
            .stdout
            .contains("is neither failed nor cancelled already"),
        "{}",
        twice.stdout
    );
    let unknown = world.run_stet(&["retry", "no-such-item"]);
    assert_eq!(unknown.code, 2);
    assert!(
        unknown.stderr.contains("there is no item no-such-item"),
        "{}",
        unknown.stderr
    );
}

/// A drive killed (SIGKILL) while its land command runs: the next drive makes no agent
/// call again, runs the land command once more with STET_LAND_RETRY=1 (so that it can
/// check first: at least once, with that flag), and marks the item landed.
#[test]
fn a_landing_cut_short_by_kill_9_runs_the_land_command_again_with_the_retry_flag_and_no_call_again()
{
    let _serial = serial_drives();
    let world = stand_in_world(&["Land it\n\nfile: land.txt"]);
    let log = world.root.path().join("land.log");
    let pid = world.root.path().join("land.pid");
    let mut config = std::fs::read_to_string(world.work.join("stet.toml")).unwrap();
    config.push_str(&format!(
        "\n[drive]\nland = \"echo run ${{STET_LAND_RETRY:-first}} >> {log}; [ -n \\\"$STET_LAND_RETRY\\\" ] || {{ echo $$ > {pid}; exec sleep 600; }}\"\n",
        log = log.display(),
        pid = pid.display()
    ));
    std::fs::write(world.work.join("stet.toml"), config).unwrap();
    let trusted = world.trust_in(&world.work);
    assert_eq!(trusted.code, 0, "{}", trusted.stderr);

    let mut first = drive_in(&world, &world.work, &[]);
    wait_for("the land command", Duration::from_secs(120), || {
        std::fs::read_to_string(&pid).is_ok_and(|p| !p.trim().is_empty())
    });
    first.kill().unwrap(); // SIGKILL, in the middle of landing
                           // The land command outlives its drive (it holds the drive's stdout): it goes too.
    let land_pid: i32 = std::fs::read_to_string(&pid)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(land_pid),
        nix::sys::signal::Signal::SIGKILL,
    );
    let _ = first.finish();
    let calls_before = invocations(&world).len();

    let out = drive_in(&world, &world.work, &[]).finish();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("a landing was cut short"),
        "{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "run first\nrun 1\n",
        "once as it was, once again with the flag"
    );
    assert_eq!(
        invocations(&world).len(),
        calls_before,
        "no agent call again"
    );
    assert_eq!(landed(&world).len(), 1, "{}", out.stderr);
}

/// On a terminal, with two lanes: the overall line and the lane lines are drawn live; a
/// stop is said above them (not drawn over), and when the drive ends no copy of them is
/// left on the screen — read through a terminal emulator, as a person would see it.
#[test]
fn on_a_terminal_a_stop_of_two_lanes_is_said_and_leaves_no_frozen_lines() {
    use std::io::Read;
    let _serial = serial_drives();
    let world = stand_in_world(&[
        "One\n\nfile: 1.txt\nimplement: until GO",
        "Two\n\nfile: 2.txt\nimplement: until GO",
        "Three\n\nfile: 3.txt",
    ]);
    let size = nix::pty::Winsize {
        ws_row: 200,
        ws_col: 200,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).expect("a pseudo-terminal");
    let mut command = world.stet(&["drive", "--yes", "--jobs", "2"]);
    command
        .env("TERM", "xterm-256color")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(pty.slave));
    let mut child = command.spawn().expect("start stet drive");
    // Dropped with the command: the terminal's far end is then the drive's alone, and
    // reading it ends when the drive does.
    drop(command);
    let screen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let reader = {
        let screen = screen.clone();
        let mut master = std::fs::File::from(pty.master);
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = master.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                screen.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        })
    };
    let said = || String::from_utf8_lossy(&screen.lock().unwrap()).into_owned();
    let mut waiting = Vec::new();
    wait_for(
        "two implementing calls at once, drawn live",
        Duration::from_secs(120),
        || {
            waiting = lanes_waiting_for_go(&world.work);
            waiting.len() == 2 && said().contains("drive: 0 of 3 done")
        },
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    wait_for("the stop to be said", Duration::from_secs(60), || {
        said().contains("stopping after the agent calls in flight")
    });
    for lane in &waiting {
        std::fs::write(lane.join("GO"), "").unwrap();
    }
    let status = child.wait().unwrap();
    reader.join().unwrap();
    assert_eq!(status.code(), Some(130), "{}", said());
    let nonzero = |n: u16| std::num::NonZeroU16::new(n).unwrap();
    let mut terminal = vt100::Parser::new(nonzero(size.ws_row), nonzero(size.ws_col), 0);
    terminal.process(&screen.lock().unwrap());
    let seen = terminal.screen().contents();
    assert!(
        seen.contains("stopping after the agent calls in flight (press again to kill them)"),
        "the stop is on the screen:\n{seen}"
    );
    assert!(seen.contains("resume with: stet drive"), "{seen}");
    let frozen: Vec<&str> = seen
        .lines()
        .filter(|l| l.contains("move ") && l.contains(" · stet/") || l.contains(" of 3 done"))
        .collect();
    assert!(
        frozen.is_empty(),
        "live lines left on the screen: {frozen:#?}\n{seen}"
    );
}
