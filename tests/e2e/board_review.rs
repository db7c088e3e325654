//! A security review of `stet board`: a hostile agent (the command harness running a script
//! that writes markup, `javascript:` links, SVG with script and bidi overrides into its
//! output, its file names, its diff and a check's output) is driven for real, and every
//! page the board serves of what it did is opened in a real headless Chromium: nothing may
//! run, no element the agent wrote may become markup, nothing may be requested from
//! another origin.

use std::path::PathBuf;
use std::time::Duration;

use stet_e2e::board::{request, RunningBoard};
use stet_e2e::{git, require_image, serial_drives, World, IMAGE};

/// What the hostile agent writes everywhere it can.
const MARKUP: &str = r#"<script>window.__pwned='script'</script><img src=x onerror="window.__pwned='img'"><a id=jsl href="javascript:window.__pwned='link'">j</a></textarea><svg onload="window.__pwned='svg'"><style>body{display:none}</style><iframe src="http://evil.invalid/"></iframe>"#;

/// The agent: writes files whose names and contents are markup, prints markup and bidi
/// overrides on both streams, and says what of the clone's git directory it can see.
fn hostile_agent(dir: &std::path::Path) -> PathBuf {
    let path = dir.join("hostile.sh");
    let script = format!(
        r#"#!/bin/sh
cat > /dev/null
M='{m}'
printf '%s\n' "$M" > "$(printf 'a<img src=x onerror=alert(1)>\342\200\256txt.exe')"
printf '%s\n' "$M" > '"><svg onload=alert(2)>.md'
printf '%s check-bidi \342\200\256 gnp.exe\n' "$M" > check-output.txt
printf '%s\n' "$M" >> README
echo "agent-out $M"
printf 'bidi \342\200\256evil\n'
echo "agent-err $M" >&2
echo "git-is: $(cat .git 2>&1 | head -c 300)"
ls -la .git/ 2>&1 | head -20
mkdir -p .git/stet/live 2>&1 && echo '{{"run":"x","owner":"1:1","pid":1,"started_unix_ms":0,"overall":"planted","lanes":[]}}' > .git/stet/live/planted.json 2>&1; echo "planted: $?"
exit 0
"#,
        m = MARKUP.replace('\'', "'\\''")
    );
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn world() -> World {
    let world = World::new();
    world.install("docker");
    world.install("command");
    world.clone_of_fresh_remote();
    let profiles = world.root.path().join("profiles");
    let config = world.root.path().join("home/.config/stet");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::create_dir_all(&config).unwrap();
    let agent = hostile_agent(world.root.path());
    std::fs::write(
        config.join("config.toml"),
        format!(
            "[harness]\nprofiles = \"{}\"\n\n[sandbox]\nimage = \"{IMAGE}\"\n\n\
             [plugins.command]\nimplement = [\"{}\"]\nreview = [\"{}\"]\n\n\
             [drive]\ncheck = \"cat check-output.txt; false\"\n",
            profiles.display(),
            agent.display(),
            agent.display()
        ),
    )
    .unwrap();
    world
}

#[test]
fn what_a_hostile_agent_wrote_is_inert_text_on_every_page_of_the_board() {
    require_image();
    let _serial = serial_drives();
    let world = world();
    // The title and the check's output (which reaches the failure reason) each carry a
    // bidi override.
    let title = format!("{MARKUP} title-bidi \u{202E} gnp.exe");
    let out = world.run_stet(&["add", "--json", &title]);
    assert_eq!(out.code, 0, "stet add: {}", out.stderr);
    let id = out.json()["id"].as_str().unwrap().to_string();
    git(&world.work, &["add", "--all"]);
    git(&world.work, &["commit", "--quiet", "-m", "queue"]);
    git(&world.work, &["push", "--quiet", "origin", "HEAD"]);
    let drive = world.run_stet(&["drive", "--yes", "--rounds", "1"]);
    eprintln!("drive: {}\n{}\n{}", drive.code, drive.stdout, drive.stderr);

    let board = RunningBoard::start(&world, &[]);
    let cookie = board.session_cookie();
    let dump = std::env::var_os("REVIEW_DUMP").map(PathBuf::from);
    let item = request(
        board.port,
        "GET",
        &format!("/item/{id}"),
        &[("Cookie", &cookie)],
        None,
    );
    assert_eq!(item.status, 200, "{}", item.body);
    let mut pages: Vec<String> = ["/queue", "/live", "/costs", "/walls", "/drive"]
        .map(String::from)
        .to_vec();
    pages.push(format!("/item/{id}"));
    for href in item.body.split("href=\"").skip(1) {
        let href = &href[..href.find('"').unwrap()];
        if href.starts_with(&format!("/item/{id}/")) {
            pages.push(href.replace("&#38;", "&"));
        }
    }
    let browser = board.browser();
    let mut problems = Vec::new();
    for (n, page) in pages.iter().enumerate() {
        let raw = request(board.port, "GET", page, &[("Cookie", &cookie)], None);
        if let Some(dir) = &dump {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(
                dir.join(format!("{n}.html")),
                format!("{page}\n{}", raw.body),
            )
            .unwrap();
        }
        browser.goto(&format!("{}{page}", board.base)).unwrap();
        browser
            .wait_until(
                "document.readyState === 'complete'",
                Duration::from_secs(20),
            )
            .unwrap();
        let found = browser
            .execute(
                "return JSON.stringify({pwned: window.__pwned || null, \
                 scripts: [...document.scripts].map(s => s.src), \
                 injected: document.querySelectorAll('img[src=x], #jsl, iframe, svg[onload], style, [onerror], [onload]').length, \
                 resources: performance.getEntriesByType('resource').map(e => e.name).filter(u => !u.startsWith(location.origin)), \
                 bidi: (document.body.innerText.match(/[\\u202A-\\u202E\\u2066-\\u2069]/g) || []).length})",
            )
            .unwrap();
        let found: serde_json::Value = serde_json::from_str(found.as_str().unwrap()).unwrap();
        eprintln!("{page}: {found}");
        let expected_scripts = serde_json::json!([format!("{}/static/board.js", board.base)]);
        for (what, bad) in [
            ("a script ran", found["pwned"] != serde_json::Value::Null),
            (
                "an element the agent wrote is markup",
                found["injected"] != 0,
            ),
            (
                "something was requested from elsewhere",
                found["resources"] != serde_json::json!([]),
            ),
            (
                "a script other than board.js",
                found["scripts"] != expected_scripts,
            ),
            ("a bidi override shows raw", found["bidi"] != 0),
        ] {
            if bad {
                problems.push(format!("{page}: {what}: {found}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Cookies are not bound to a port: the board's session cookie goes to every server on
/// 127.0.0.1 the person's browser visits, so whoever else listens on a port of this machine
/// (another user, another local service) gets the session — and with it every page and
/// its form token. The session must not be usable from what any 127.0.0.1 server receives.
#[test]
fn the_session_cookie_is_not_sent_to_another_port_of_127_0_0_1() {
    use std::io::{BufRead, BufReader, Write};
    let world = World::new();
    world.clone_of_fresh_remote();
    let board = RunningBoard::start(&world, &[]);
    let browser = board.browser();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let heard = std::thread::spawn(move || {
        let mut all = Vec::new();
        // The page, then what it loads from its own origin (a same-site request).
        for _ in 0..2 {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let body = "<!doctype html><img src=/leak>";
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            all.push(head);
        }
        all
    });
    browser.goto(&format!("http://127.0.0.1:{port}/")).unwrap();
    let heard = heard.join().unwrap().join("\n");
    assert!(
        !heard.contains("stet_board="),
        "another port of 127.0.0.1 was sent the board's session:\n{heard}"
    );
}

/// A search is a few words: one of thousands (a 40 KB URL, by mistake or by a hostile
/// page's link) is refused at once saying the limit, never filtered word by word over every
/// row (which, on the board's one async thread, held every other request and Ctrl-C for a
/// minute); the board then answers as before.
#[test]
fn a_search_of_thousands_of_words_is_refused_saying_the_limit() {
    let world = World::new();
    world.clone_of_fresh_remote();
    let queue = world.work.join(".stet/queue");
    std::fs::create_dir_all(&queue).unwrap();
    for i in 0..3000 {
        std::fs::write(
            queue.join(format!("20250101-000000-{:03}-bulk-item-{i}.md", i % 1000)),
            // Every title holds the searched word: each row would be tried with every word.
            format!("bulk item {i} x\n"),
        )
        .unwrap();
    }
    let board = RunningBoard::start(&world, &[]);
    let cookie = board.session_cookie();
    let q = "x+".repeat(20_000);
    let long = request(
        board.port,
        "GET",
        &format!("/queue?q={q}"),
        &[("Cookie", &cookie)],
        None,
    );
    assert_eq!(long.status, 400, "{}", long.body);
    assert!(
        long.body.contains("that search is too long") && long.body.contains("16 words"),
        "{}",
        long.body
    );
    let short = request(
        board.port,
        "GET",
        "/queue?q=x+item",
        &[("Cookie", &cookie)],
        None,
    );
    assert_eq!(short.status, 200);
    assert!(
        short.body.contains("bulk item"),
        "{}",
        &short.body[..300.min(short.body.len())]
    );
}

/// Whoever can reach 127.0.0.1 can open connections to the board without its token: one
/// that sends half a request and waits is closed by the board (its head must arrive within
/// a time), so such connections cannot pile up and hold the board.
#[test]
fn a_connection_that_sends_half_a_request_is_closed_by_the_board() {
    use std::io::{Read, Write};
    let world = World::new();
    world.clone_of_fresh_remote();
    let board = RunningBoard::start(&world, &[]);
    let mut half = std::net::TcpStream::connect(("127.0.0.1", board.port)).unwrap();
    half.write_all(b"GET /queue HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        .unwrap();
    // The event: the board ends the connection. (The read's own limit only keeps a broken
    // board from hanging the test.)
    half.set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let mut answer = Vec::new();
    let read = half.read_to_end(&mut answer);
    assert!(
        read.is_ok(),
        "the board kept a half-sent request open: {read:?}"
    );
    // And answers a whole request as before.
    let cookie = board.session_cookie();
    assert_eq!(
        request(board.port, "GET", "/queue", &[("Cookie", &cookie)], None).status,
        200
    );
}

/// `--open` starts the person's browser with a page of their own that leads to the board,
/// never with the URL itself: a command line (the opener's, the browser's for its whole
/// life) is readable by every user of the machine, and the URL holds the token.
#[test]
fn open_hands_the_browser_a_private_page_never_the_token_on_a_command_line() {
    use std::io::{BufRead, BufReader, Read};
    let world = World::new();
    world.clone_of_fresh_remote();
    let bin = world.root.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let record = world.root.path().join("opened");
    nix::unistd::mkfifo(&record, nix::sys::stat::Mode::S_IRWXU).unwrap();
    // A stand-in opener: says what it was given, the mode of that file and what it holds.
    let opener = bin.join("xdg-open");
    std::fs::write(
        &opener,
        format!(
            "#!/bin/sh\n{{ echo \"argv: $*\"; echo \"mode: $(stat -c %a \"$1\")\"; cat \"$1\"; }} > '{}'\n",
            record.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut child = world
        .stet(&["board", "--open"])
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("stet board: ")
        .unwrap()
        .to_string();
    let token = url.split("token=").nth(1).unwrap().to_string();
    // Blocks until the opener writes: the event.
    let mut said = String::new();
    std::fs::File::open(&record)
        .unwrap()
        .read_to_string(&mut said)
        .unwrap();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    );
    let _ = child.wait();
    let argv = said.lines().next().unwrap_or_default();
    assert!(
        argv.starts_with("argv: /") && argv.ends_with(".html"),
        "{said}"
    );
    assert!(
        !argv.contains(&token),
        "the token is on a command line: {said}"
    );
    assert!(
        said.contains("mode: 600"),
        "the page is the person's alone: {said}"
    );
    assert!(said.contains(&url), "the page leads to the board: {said}");
}
