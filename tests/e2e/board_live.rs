//! `stet board`'s live page and its drives, through the real binary, the real Docker
//! runtime and the command harness running the stand-in agent (`tests/agents/stand-in.sh`,
//! whose `implement: until GO` waits for a file the test makes in the lane), in a real
//! headless Chromium: the page follows a drive by server-sent events, and a drive started
//! from the page asks its consent there, lands, and stops when told.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use stet_e2e::board::{request, Browser, RunningBoard};
use stet_e2e::{serial_drives, stand_in_world, World};

fn landed(world: &World) -> Vec<String> {
    stet_e2e::landed_on(&world.root.path().join("remote.git"))
}

/// Waits until the page's `condition` (a script's boolean) holds; a page reloading
/// meanwhile (a drive's page does, while the drive runs) is asked again.
fn wait_in(browser: &Browser, what: &str, condition: &str, limit: Duration) {
    let start = Instant::now();
    let script = format!("return Boolean({condition})");
    loop {
        if browser.execute(&script).ok().and_then(|v| v.as_bool()) == Some(true) {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "timed out waiting for {what}; the page says:\n{}",
            browser.text().unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Whether the page's text contains `text` (as a script's condition).
fn shows(text: &str) -> String {
    format!(
        "document.body && document.body.innerText.includes({})",
        serde_json::to_string(text).unwrap()
    )
}

/// Clicks the element `css` once it is there (a reload in between is tried again).
fn click(browser: &Browser, css: &str) {
    let start = Instant::now();
    loop {
        let clicked = browser
            .find(css, Duration::from_secs(5))
            .and_then(|button| browser.click(&button));
        match clicked {
            Ok(()) => return,
            Err(e) => assert!(
                start.elapsed() < Duration::from_secs(120),
                "cannot click {css}: {e}; the page says:\n{}",
                browser.text().unwrap_or_default()
            ),
        }
    }
}

/// The lane directory of the item whose implementing call waits for its gate `GO`, once
/// its call's log says it waits.
fn lane_waiting_for_go(dir: &Path) -> Option<PathBuf> {
    let logs = std::fs::read_dir(dir.join(".git/stet/logs")).ok()?;
    logs.filter_map(Result::ok).find_map(|entry| {
        let name = entry.file_name().to_string_lossy().into_owned();
        let item = name
            .strip_suffix("-implement.log")?
            .split_once('-')?
            .1
            .to_string();
        let said = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let lane = dir.join(".git/stet/lanes").join(&item).join("work");
        (said.contains("stand-in: waiting for GO") && !lane.join("GO").exists()).then_some(lane)
    })
}

#[test]
fn the_live_page_follows_a_running_drive_by_events_and_says_when_it_ended() {
    let _serial = serial_drives();
    let world = stand_in_world(&["Gated\n\nfile: 1.txt\nimplement: until GO"]);
    let board = RunningBoard::start(&world, &[]);
    let browser = board.browser();
    browser.goto(&format!("{}/live", board.base)).unwrap();
    assert!(
        browser
            .text()
            .unwrap()
            .contains("No drive runs on this clone."),
        "{}",
        browser.text().unwrap()
    );
    // Set on this very page: it is still there at the end only if the page never reloaded
    // (what changed came by events).
    browser.execute("window.stetNoReload = true").unwrap();
    let log = world.root.path().join("drive.stderr");
    let mut drive = world
        .stet(&["drive", "--yes"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start stet drive");
    // The lane, its item, its stage and the agent's own last line, while its call waits.
    wait_in(
        &browser,
        "the agent's line on the live page",
        &shows("stand-in: waiting for GO"),
        Duration::from_secs(120),
    );
    let text = browser.text().unwrap();
    assert!(text.contains("lane 1"), "{text}");
    assert!(text.contains("implement"), "the stage: {text}");
    assert!(text.contains("gated"), "the item's handle: {text}");
    let href = browser
        .execute("return document.querySelector('#live-drives a').getAttribute('href')")
        .unwrap();
    let href = href.as_str().unwrap().to_string();
    let item = href.strip_prefix("/item/").expect("a link to the item");
    assert!(
        browser
            .execute("return document.querySelector('.live-since').textContent")
            .unwrap()
            .as_str()
            .unwrap()
            .ends_with(" s"),
        "time in stage"
    );
    // Let the agent answer: the lane goes on to review and lands; the drive ends.
    let lane = world.work.join(".git/stet/lanes").join(item).join("work");
    std::fs::write(lane.join("GO"), "").unwrap();
    let status = drive.wait().unwrap();
    assert!(
        status.success(),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    wait_in(
        &browser,
        "the page to say the drive ended",
        &format!(
            "{} && {}",
            shows("ended at"),
            shows("No drive runs on this clone.")
        ),
        Duration::from_secs(30),
    );
    assert_eq!(
        browser
            .execute("return window.stetNoReload === true")
            .unwrap(),
        serde_json::Value::Bool(true),
        "the page was updated in place, not reloaded"
    );
    assert_eq!(landed(&world), vec![item.to_string()]);
    // The drive's file is gone with it.
    let live = world.work.join(".git/stet/live");
    assert_eq!(
        std::fs::read_dir(&live).map(|d| d.count()).unwrap_or(0),
        0,
        "{live:?}"
    );
    // Ctrl-C stops the board though the page still follows its events.
    let (status, stderr) = board.stop();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("stet board stopped"), "{stderr}");
    drop(browser);
}

/// The drive's process, as its page names it.
fn drive_pid(browser: &Browser) -> u32 {
    let text = browser.text().unwrap();
    text.split("Process ")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .and_then(|pid| pid.trim().parse().ok())
        .unwrap_or_else(|| panic!("no process on the page: {text}"))
}

/// Starts a drive of cap 1 from the board's form and returns at its consent.
fn start_from_the_page(browser: &Browser, board: &RunningBoard) {
    browser.goto(&format!("{}/drive", board.base)).unwrap();
    let cap = browser
        .find("input[name=cap]", Duration::from_secs(5))
        .unwrap();
    browser
        .execute("document.querySelector('input[name=cap]').value = ''")
        .unwrap();
    browser.type_into(&cap, "1").unwrap();
    click(browser, ".drive-form button[type=submit]");
    // The page reloads while the walls are proven, then shows the consent.
    wait_in(
        browser,
        "the consent",
        "document.querySelector('button[value=drive]') !== null",
        Duration::from_secs(120),
    );
}

#[test]
fn a_drive_started_from_the_page_asks_consent_there_lands_and_one_stopped_from_the_page_ends() {
    let _serial = serial_drives();
    let world = stand_in_world(&[
        "Quick\n\nfile: 1.txt",
        "Gated\n\nfile: 2.txt\nimplement: until GO",
    ]);
    let board = RunningBoard::start(&world, &[]);
    let browser = board.browser();
    // A POST without the session's form token starts nothing.
    let cookie = board.session_cookie();
    let forged = request(
        board.port,
        "POST",
        "/drive",
        &[("Cookie", &cookie)],
        Some("csrf=wrong&cap=1&jobs=1&rounds=3"),
    );
    assert_eq!(forged.status, 403, "{forged:?}");
    assert!(!world.work.join(".git/stet/board").exists());

    // The consent shows what the terminal's does; nothing is reserved before the answer.
    start_from_the_page(&browser, &board);
    let text = browser.text().unwrap();
    for what in [
        "1 item of 2 eligible",
        "Runtime",
        "runtime:  docker — ",
        // The runtime's isolation class, in its probe's words, on both.
        "Isolation",
        "isolation: container: namespaces and cgroups on the host's kernel",
        "Harness",
        "harness:  command — ",
        "Limits",
        "limits:   ",
        "Estimate",
        "Route",
        "Don't drive",
    ] {
        assert!(text.contains(what), "{what:?} on the consent: {text}");
    }
    assert!(landed(&world).is_empty());
    click(&browser, "button[value=drive]");
    wait_in(
        &browser,
        "the drive to end",
        &shows("The drive ended: exit code 0."),
        Duration::from_secs(180),
    );
    assert_eq!(landed(&world).len(), 1, "{}", browser.text().unwrap());
    assert!(
        browser.text().unwrap().contains("landed"),
        "its output: {}",
        browser.text().unwrap()
    );

    // A second one, stopped from its page while its agent works: Stop, then Kill.
    start_from_the_page(&browser, &board);
    let pid = drive_pid(&browser);
    click(&browser, "button[value=drive]");
    let start = Instant::now();
    while lane_waiting_for_go(&world.work).is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the gated call never started: {}",
            browser.text().unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    click(&browser, "form[action$='/stop'] button");
    wait_in(
        &browser,
        "the stop to be heard",
        &format!(
            "{} && {}",
            shows("Stopping after the agent calls in flight"),
            shows("stopping after the agent call in flight")
        ),
        Duration::from_secs(30),
    );
    click(&browser, "form[action$='/stop'] button");
    wait_in(
        &browser,
        "the drive to end",
        &shows("The drive ended: exit code 130."),
        Duration::from_secs(60),
    );
    assert_eq!(stet_e2e::sandboxes_owned_by(pid), 0, "no sandbox left");
    assert_eq!(landed(&world).len(), 1, "the stopped item did not land");
    // The board's Ctrl-C still stops it at once.
    let (status, stderr) = board.stop();
    assert!(status.success(), "{stderr}");
}

/// Any drive of this clone — this one started from a terminal — is stopped from the live
/// page as Ctrl-C stops it: the first press after the call in flight (the page then says
/// the drive is stopping and offers the second), the second at once; a form without the
/// session's token signals nothing.
#[test]
fn a_drive_started_from_a_terminal_is_stopped_then_killed_from_the_live_page() {
    let _serial = serial_drives();
    let world = stand_in_world(&["Gated\n\nfile: 1.txt\nimplement: until GO"]);
    let board = RunningBoard::start(&world, &[]);
    let browser = board.browser();
    browser.goto(&format!("{}/live", board.base)).unwrap();
    let log = world.root.path().join("drive.stderr");
    let mut drive = world
        .stet(&["drive", "--yes"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start stet drive");
    let pid = drive.id();
    wait_in(
        &browser,
        "the agent's line on the live page",
        &shows("stand-in: waiting for GO"),
        Duration::from_secs(120),
    );
    // A form from elsewhere (no token) stops nothing.
    let cookie = board.session_cookie();
    let owner = browser
        .execute("return document.querySelector('.live-stop input[name=owner]').value")
        .unwrap();
    let owner = owner.as_str().unwrap().to_string();
    assert!(owner.starts_with(&format!("{pid}:")), "{owner}");
    let forged = request(
        board.port,
        "POST",
        "/live/stop",
        &[("Cookie", &cookie)],
        Some(&format!("csrf=forged&owner={}", owner.replace(':', "%3A"))),
    );
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert!(drive.try_wait().unwrap().is_none(), "the drive runs on");
    // The first press: the drive says it is stopping after the call in flight.
    click(&browser, ".live-stop button");
    wait_in(
        &browser,
        "the drive to say it is stopping",
        &format!(
            "{} && document.querySelector('.live-stopping') !== null",
            shows("Kill the calls in flight now")
        ),
        Duration::from_secs(60),
    );
    assert!(
        drive.try_wait().unwrap().is_none(),
        "the call in flight goes on"
    );
    // The second: the call is killed and the drive ends as a second Ctrl-C ends it.
    click(&browser, ".live-stop button");
    let status = drive.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(130),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(landed(&world).is_empty());
    assert_eq!(stet_e2e::sandboxes_owned_by(pid), 0, "no sandbox left");
    wait_in(
        &browser,
        "the page to say the drive ended",
        &shows("No drive runs on this clone."),
        Duration::from_secs(30),
    );
}
