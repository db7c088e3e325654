//! `stet board` through the real binary, in a real headless Chromium driven over
//! WebDriver (chromedriver), and by plain HTTP for what a browser would never send.

use stet_e2e::board::{request, RunningBoard};
use stet_e2e::World;

/// A world whose working copy is a clone of a fresh bare remote, with `items` queued and
/// pushed.
fn world_with(items: &[&str]) -> World {
    let world = World::new();
    world.clone_of_fresh_remote();
    for item in items {
        let added = world.add_pushed(item);
        assert_eq!(added.code, 0, "stet add: {}", added.stderr);
    }
    world
}

#[test]
fn the_printed_url_opens_the_queue_in_a_real_browser_and_drops_the_token() {
    let world = world_with(&["Fix the typo in the README", "Add a changelog"]);
    let board = RunningBoard::start(&world, &[]);
    assert!(
        board.url.starts_with("http://127.0.0.1:") && board.url.contains("/?token="),
        "{}",
        board.url
    );
    let browser = board.browser();
    let url = browser.url().unwrap();
    assert_eq!(
        url,
        format!("{}/queue", board.base),
        "the token stays out of the address"
    );
    let text = browser.text().unwrap();
    assert!(text.contains("Fix the typo in the README"), "{text}");
    assert!(text.contains("Add a changelog"), "{text}");
    assert!(
        text.contains("fix-typo-readme"),
        "the handle is listed: {text}"
    );
    // The search narrows the list on the server.
    browser
        .goto(&format!("{}/queue?q=changelog", board.base))
        .unwrap();
    let text = browser.text().unwrap();
    assert!(text.contains("Add a changelog"), "{text}");
    assert!(!text.contains("Fix the typo"), "{text}");
}

#[test]
fn a_request_without_the_token_or_from_another_host_is_refused() {
    let world = world_with(&["Fix the typo in the README"]);
    let board = RunningBoard::start(&world, &[]);
    let bare = request(board.port, "GET", "/queue", &[], None);
    assert_eq!(bare.status, 401, "{bare:?}");
    assert!(
        bare.body.contains("open the URL stet board printed"),
        "{bare:?}"
    );
    let wrong = request(board.port, "GET", "/?token=0000", &[], None);
    assert_eq!(wrong.status, 403, "{wrong:?}");
    assert!(wrong.header("set-cookie").is_none(), "{wrong:?}");
    let cookie = board.session_cookie();
    let ok = request(board.port, "GET", "/queue", &[("Cookie", &cookie)], None);
    assert_eq!(ok.status, 200, "{ok:?}");
    assert!(ok.body.contains("Fix the typo in the README"));
    let csp = ok.header("content-security-policy").unwrap_or_default();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("default-src 'none'"),
        "{csp}"
    );
    // A page elsewhere reaching the board through a name it rebinds to 127.0.0.1.
    let host = format!("board.example:{}", board.port);
    let rebound = request(
        board.port,
        "GET",
        "/queue",
        &[("Host", &host), ("Cookie", &cookie)],
        None,
    );
    assert_eq!(rebound.status, 403, "{rebound:?}");
    let forged = request(
        board.port,
        "GET",
        "/queue",
        &[("Cookie", "stet_board=forged")],
        None,
    );
    assert_eq!(forged.status, 401, "{forged:?}");
}

#[test]
fn ctrl_c_stops_the_board_cleanly() {
    let world = world_with(&[]);
    let board = RunningBoard::start(&world, &[]);
    let cookie = board.session_cookie();
    assert_eq!(
        request(board.port, "GET", "/queue", &[("Cookie", &cookie)], None).status,
        200
    );
    let port = board.port;
    let (status, stderr) = board.stop();
    assert!(status.success(), "{status:?}: {stderr}");
    assert!(stderr.contains("stet board stopped"), "{stderr}");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "nothing listens after the stop"
    );
}

#[test]
fn a_port_in_use_or_a_directory_outside_a_repository_is_refused_saying_what_to_do() {
    let world = world_with(&[]);
    let taken = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = world.run_stet(&["board", "--port", &port]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr
            .contains(&format!("cannot listen on 127.0.0.1:{port}"))
            && out.stderr.contains("pass another --port"),
        "{}",
        out.stderr
    );
    let outside = tempfile::tempdir().unwrap();
    let out = world.run(world.stet(&["board"]).current_dir(outside.path()));
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.contains("is not inside a git repository"),
        "{}",
        out.stderr
    );
}

/// What a board's page holds that changes from run to run, beyond what stet prints: the
/// form token, the board's own name.
const PAGE_FILTERS: &[(&str, &str)] = &[
    (
        r#"name="csrf" value="[^"]*""#,
        r#"name="csrf" value="[CSRF]""#,
    ),
    (r"stet-[a-z0-9]+\.localhost", "stet-[NAME].localhost"),
];

/// Each page a person reads before any drive, as the board serves it (HTML, the volatile
/// parts redacted): the queue, an item, the walls, the costs, the drive's form.
#[test]
fn the_pages_before_a_drive_are_pinned() {
    let world = world_with(&["Fix the typo in the README", "Add a changelog"]);
    let board = RunningBoard::start(&world, &[]);
    let cookie = board.session_cookie();
    let get = |path: &str| {
        let page = request(board.port, "GET", path, &[("Cookie", &cookie)], None);
        assert_eq!(page.status, 200, "{path}: {page:?}");
        world.redact(&page.body)
    };
    let queue = get("/queue");
    let id = queue
        .split("href=\"/item/")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no item linked from the queue: {queue}"))
        .to_string();
    let filters: Vec<(&str, &str)> = stet_e2e::SNAPSHOT_FILTERS
        .iter()
        .chain(PAGE_FILTERS)
        .copied()
        .collect();
    insta::with_settings!({ filters => filters }, {
        insta::assert_snapshot!("page_queue", queue);
        insta::assert_snapshot!("page_item", get(&format!("/item/{id}")));
        insta::assert_snapshot!("page_walls", get("/walls"));
        insta::assert_snapshot!("page_costs", get("/costs"));
        insta::assert_snapshot!("page_drive", get("/drive"));
    });
}
