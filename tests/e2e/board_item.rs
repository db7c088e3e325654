//! An item's story on `stet board` and the actions on it, through the real binary, a real
//! drive (the example agent under the command harness, on Docker) and a real headless
//! Chromium; what the actions did is read back from the CLI and the bare remote.

use std::path::Path;
use std::time::Duration;

use stet_e2e::board::{request, Browser, RunningBoard};
use stet_e2e::{example_agent, git, require_image, serial_drives, World, IMAGE};

/// A world whose working copy is a clone of a fresh bare remote, with the person's own
/// configuration (always trusted): the walled profiles, the lane image, the command
/// harness running the example agent, and a check that prints a word of its own.
fn world() -> World {
    let world = World::new();
    world.install("docker");
    world.install("command");
    world.clone_of_fresh_remote();
    let profiles = world.root.path().join("profiles");
    let config = world.root.path().join("home/.config/stet");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "[harness]\nprofiles = \"{}\"\n\n[sandbox]\nimage = \"{IMAGE}\"\n\n\
             [plugins.command]\nimplement = [\"{}\"]\n\n\
             [drive]\ncheck = \"echo checked-by-the-board-test; test -s hello.txt\"\n",
            profiles.display(),
            example_agent().display()
        ),
    )
    .unwrap();
    world
}

/// The id `stet add --json` printed.
fn add(world: &World, text: &str) -> String {
    let out = world.run_stet(&["add", "--json", text]);
    assert_eq!(out.code, 0, "stet add: {}", out.stderr);
    out.json()["id"].as_str().unwrap().to_string()
}

/// The state `stet queue --json` gives `id`.
fn state_of(world: &World, id: &str) -> String {
    let out = world.run_stet(&["queue", "--json"]);
    assert_eq!(out.code, 0, "stet queue: {}", out.stderr);
    out.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == id)
        .unwrap_or_else(|| panic!("{id} is not in the queue: {}", out.stdout))["state"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The refs under `refs/stet/` on the bare remote.
fn remote_refs(remote: &Path) -> String {
    git(
        remote,
        &["for-each-ref", "--format=%(refname)", "refs/stet/"],
    )
}

/// How long a page may take to show what is awaited.
const PATIENCE: Duration = Duration::from_secs(20);

/// Waits until the page's text holds `wanted`; returns the text.
fn page_with(browser: &Browser, wanted: &str) -> String {
    let literal = serde_json::to_string(wanted).unwrap();
    browser
        .wait_until(
            &format!("document.body && document.body.innerText.includes({literal})"),
            PATIENCE,
        )
        .unwrap_or_else(|e| panic!("the page never showed {wanted:?}: {e}"));
    browser.text().unwrap()
}

/// The text of the first element matching `css`, once there is one.
fn text_of(browser: &Browser, css: &str) -> String {
    let element = browser.find(css, PATIENCE).unwrap();
    browser.text_of(&element).unwrap()
}

/// Clicks the first element matching `css`.
fn click(browser: &Browser, css: &str) {
    let element = browser.find(css, PATIENCE).unwrap();
    browser.click(&element).unwrap();
}

/// Types `text` into the first element matching `css`.
fn type_into(browser: &Browser, css: &str, text: &str) {
    let element = browser.find(css, PATIENCE).unwrap();
    browser.type_into(&element, text).unwrap();
}

#[test]
fn the_story_of_a_driven_item_shows_rounds_prompt_transcript_and_diff_and_retry_and_cancel_work_from_the_page(
) {
    require_image();
    let _serial = serial_drives();
    let world = world();
    let remote = world.root.path().join("remote.git");
    let landing = add(&world, "write hello.txt: hi from the board");
    stet_e2e::next_millisecond();
    let failing = add(&world, "Nothing the example agent understands");
    git(&world.work, &["add", "--all"]);
    git(&world.work, &["commit", "--quiet", "-m", "queue two items"]);
    git(&world.work, &["push", "--quiet", "origin", "HEAD"]);
    let drive = world.run_stet(&["drive", "--yes", "--rounds", "1"]);
    // It gave up on one item: exit 4.
    assert_eq!(drive.code, 4, "{}\n{}", drive.stdout, drive.stderr);
    assert_eq!(state_of(&world, &landing), "landed");
    assert_eq!(state_of(&world, &failing), "failed");

    let board = RunningBoard::start(&world, &[]);
    let browser = board.browser();
    // The queue links to the story; a handle's start names the item as the CLI's do.
    browser
        .goto(&format!("{}/item/write-hello", board.base))
        .unwrap();
    let text = page_with(&browser, "Round 1");
    assert!(
        text.contains("write hello.txt: hi from the board"),
        "{text}"
    );
    assert!(text.contains("landed"), "{text}");
    for word in ["implement", "check", "review", "done", "passed"] {
        assert!(text.contains(word), "{word}: {text}");
    }
    assert!(
        text.contains("checked-by-the-board-test"),
        "the check's output tail: {text}"
    );
    assert!(text.contains("LAND"), "the reviewer's words: {text}");
    assert!(
        text.contains("instructions 1"),
        "the call's usage from its receipt: {text}"
    );
    let files = text_of(&browser, "#diff-files");
    assert!(files.contains("hello.txt"), "the diff's file: {files}");
    let added = text_of(&browser, "pre.diff .add");
    assert!(added.contains("+hi from the board"), "{added}");

    // The prompt the implementing call received, inert text on its own page.
    click(&browser, "a.prompt");
    page_with(&browser, "Prompt of call 1");
    let prompt = text_of(&browser, "#prompt-text");
    assert!(
        prompt.contains("write hello.txt: hi from the board"),
        "{prompt}"
    );

    // The implementing call's transcript, as the command harness renders it for stet log.
    browser
        .goto(&format!("{}/item/{landing}", board.base))
        .unwrap();
    page_with(&browser, "Round 1");
    click(&browser, "a.transcript");
    let text = page_with(&browser, "implement call, round 1");
    let log = world.run_stet(&["log", &landing, "--role", "implement"]);
    assert_eq!(log.code, 0, "{}", log.stderr);
    let transcript = text_of(&browser, "#transcript");
    for line in log.stdout.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            transcript.contains(line.trim()),
            "stet log's line {line:?} is on the page: {transcript}\n{text}"
        );
    }
    assert!(transcript.contains("wrote hello.txt"), "{transcript}");

    // Retry, from the failed item's page: the CLI's path; the queue and the remote say so.
    browser
        .goto(&format!("{}/item/{failing}", board.base))
        .unwrap();
    let text = page_with(&browser, "Round 1");
    assert!(text.contains("failed"), "{text}");
    assert!(
        text.contains("no instruction I understand"),
        "why it failed: {text}"
    );
    assert!(
        text.contains(&format!("stet retry {}", stet_queue_handle(&failing))),
        "the button says what it does: {text}"
    );
    let failed_mark = format!("refs/stet/failed/{failing}");
    assert!(remote_refs(&remote).contains(&failed_mark));
    click(&browser, "#retry");
    let text = page_with(&browser, "Retried:");
    assert!(text.contains("open"), "{text}");
    assert_eq!(state_of(&world, &failing), "open");
    assert!(!remote_refs(&remote).contains(&failed_mark));

    // Cancel, from the same page.
    click(&browser, "#cancel");
    let text = page_with(&browser, "Cancelled");
    assert!(text_of(&browser, "#state").contains("cancelled"), "{text}");
    assert_eq!(state_of(&world, &failing), "cancelled");
    assert!(remote_refs(&remote).contains(&format!("refs/stet/cancelled/{failing}")));

    // An item whose queue file is gone is still told by its lane branch, as the CLI's lane
    // commands name it.
    let file = world.work.join(format!(".stet/queue/{landing}.md"));
    std::fs::remove_file(&file).unwrap();
    browser
        .goto(&format!("{}/item/{landing}", board.base))
        .unwrap();
    let text = page_with(&browser, "its queue file is gone");
    assert!(text.contains("landed"), "{text}");
    assert!(
        text_of(&browser, "#diff-files").contains("hello.txt"),
        "{text}"
    );
}

/// The handle in an item's id (`<stamp>-<handle>`).
fn stet_queue_handle(id: &str) -> &str {
    id.splitn(4, '-').nth(3).unwrap_or(id)
}

#[test]
fn an_item_added_from_the_queue_page_is_written_as_stet_add_writes_it_and_a_post_without_the_form_token_changes_nothing(
) {
    let world = World::new();
    let remote = world.clone_of_fresh_remote();
    let board = RunningBoard::start(&world, &[]);
    let browser = board.browser();
    type_into(&browser, "#add-title", "write notes.txt: from the board");
    type_into(
        &browser,
        "#add-text",
        "A second paragraph, <b>not bold</b>.",
    );
    click(&browser, "#add");
    let text = page_with(&browser, "Added write-notes-txt-board");
    assert!(
        text.contains("git add .stet/queue/") && text.contains("git push"),
        "what stet add says: no drive takes it until it is pushed, with the command: {text}"
    );
    let item_text = text_of(&browser, "#item-text");
    assert!(
        item_text.contains("A second paragraph, <b>not bold</b>."),
        "{item_text}"
    );
    let out = world.run_stet(&["queue", "--json"]);
    let items = out.json()["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 1, "{}", out.stdout);
    assert_eq!(items[0]["handle"], "write-notes-txt-board");
    assert_eq!(items[0]["here"], "only-here");
    let id = items[0]["id"].as_str().unwrap().to_string();
    let file = world.work.join(format!(".stet/queue/{id}.md"));
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(
        written.starts_with("write notes.txt: from the board\n\nA second paragraph"),
        "{written}"
    );
    // Its handle is claimed on the remote, as stet add claims it.
    assert!(
        remote_refs(&remote).contains("refs/stet/handles/write-notes-txt-board"),
        "{}",
        remote_refs(&remote)
    );

    // A form without the session's token: refused, and nothing changes.
    let cookie = board.session_cookie();
    let before = remote_refs(&remote);
    let cancel = request(
        board.port,
        "POST",
        &format!("/item/{id}/cancel"),
        &[("Cookie", &cookie)],
        Some("csrf=0000"),
    );
    assert_eq!(cancel.status, 403, "{cancel:?}");
    let bare = request(
        board.port,
        "POST",
        "/add",
        &[("Cookie", &cookie)],
        Some("title=write+forged.txt%3A+x"),
    );
    assert_eq!(bare.status, 403, "{bare:?}");
    let empty = request(
        board.port,
        "POST",
        &format!("/item/{id}/cancel"),
        &[("Cookie", &cookie)],
        None,
    );
    assert_eq!(empty.status, 403, "a POST with no form at all: {empty:?}");
    // A GET of an action's address changes nothing either.
    let get = request(
        board.port,
        "GET",
        &format!("/item/{id}/cancel"),
        &[("Cookie", &cookie)],
        None,
    );
    assert_eq!(get.status, 405, "{get:?}");
    assert_eq!(remote_refs(&remote), before);
    let out = world.run_stet(&["queue", "--json"]);
    let items = out.json()["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 1, "no item was added: {}", out.stdout);
    assert_eq!(items[0]["state"], "open");
}
