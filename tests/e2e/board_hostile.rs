//! What the agent wrote is data in the browser too: a real `stet drive` (the Docker runtime,
//! the command harness) runs a hostile agent (`tests/agents/board-hostile.sh`) on two items
//! whose titles and texts are HTML, script, `javascript:` links, template syntax and bidi
//! overrides. The agent says the same in its output and its reviewer's words, lands a file
//! whose name and content are the same, and on the other item makes the check fail printing
//! them. `stet board` serves the repository throughout: a real headless Chromium watches the
//! live page while the drive runs (what its script draws from events is data too), then
//! crawls every page the board links to from the queue (and the pages of the navigation).
//! On each page nothing ran, nothing was fetched from elsewhere (a loopback listener every
//! payload URL names saw no connection), no inline script or event handler is in the HTML,
//! the policy header is there — and the payloads show as text where they belong.

use std::collections::{BTreeSet, VecDeque};
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stet_e2e::board::{request, RunningBoard};
use stet_e2e::{git, require_image, serial_drives, World};

/// Pages the crawl opens at most.
const MAX_PAGES: usize = 200;

fn hostile_agent() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("agents/board-hostile.sh")
}

/// A listener on another loopback port that records every connection made to it: each
/// payload that would fetch something names it, so a page that let one through is seen
/// here even when nothing on the page shows it.
struct Beacon {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Beacon {
    fn start() -> Beacon {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                // The connection counts, whatever it sends; its first line says what it
                // asked, when it says anything.
                let index = {
                    let mut seen = kept.lock().unwrap();
                    seen.push("a connection".to_string());
                    seen.len() - 1
                };
                let kept = kept.clone();
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                    let mut line = String::new();
                    if BufReader::new(stream).read_line(&mut line).is_ok() && !line.is_empty() {
                        kept.lock().unwrap()[index] = line.trim().to_string();
                    }
                });
            }
        });
        Beacon { port, seen }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// The payloads, each tagged with `tag` (where it was put), every URL at `beacon`. Each
/// would leave a mark if it ran: `window.__pwned`, the page's title `PWNED`, an element
/// whose id starts with `pwned`, or a request to the beacon.
fn payloads(beacon: &str, tag: &str) -> Vec<String> {
    [
        "<script>document.title='PWNED';window.__pwned='TAG'</script>",
        "<img src=BEACON/TAG.png onerror=\"window.__pwned='TAG'\" id=pwned-img-TAG>",
        "[a markdown link TAG](javascript:window.__pwned='TAG') ![an image](BEACON/TAG-md.png)",
        "<a href=\"javascript:window.__pwned='TAG'\" id=pwned-link-TAG>an HTML link TAG</a>",
        "</textarea><img src=BEACON/TAG-textarea.png onerror=\"window.__pwned='TAG'\">",
        "</title><script src=\"BEACON/TAG-title.js\"></script>",
        "\"><svg onload=\"window.__pwned='TAG'\" id=pwned-svg-TAG></svg>",
        "<svg><script>window.__pwned='TAG'</script></svg>",
        "{{ 7*7 }} {% if true %}TEMPLATE-TAG{% endif %} ${7*7} {{TAG}}",
        "<iframe src=\"BEACON/TAG-frame\"></iframe><link rel=stylesheet href=\"BEACON/TAG.css\">",
        "<meta http-equiv=refresh content=\"0;url=BEACON/TAG-meta\"><div id=pwned-div-TAG>planted</div>",
        "bidi TAG: \u{202E}gnp.exe\u{202C} \u{2066}isolated\u{2069} \u{202D}over\u{202C}",
        "<b id=pwned-last-TAG>the last line of TAG</b>",
    ]
    .iter()
    .map(|p| p.replace("BEACON", beacon).replace("TAG", tag))
    .collect()
}

/// The item: a hostile title, a hostile text, and what the agent is to do with it (the
/// payloads it writes elsewhere are tagged `@@`, which the agent replaces by the place).
fn item_text(beacon: &str, attack: &str, tag: &str) -> String {
    let title = format!(
        "{tag} <script>document.title='PWNED';window.__pwned='title'</script> \
         <img src={beacon}/title.png onerror=\"window.__pwned='title'\"> \"><svg onload=window.__pwned=1> \
         </title></textarea> {{{{ 7*7 }}}} {{% if 1 %}}x{{% endif %}} \
         [link](javascript:window.__pwned='title') \u{202E}txt.exe"
    );
    let mut text = vec![title, String::new()];
    text.extend(payloads(beacon, &format!("item-text-{tag}")));
    text.push(String::new());
    text.push(format!("attack: {attack}"));
    text.push("hold: 3".to_string());
    text.extend(
        payloads(beacon, "@@")
            .into_iter()
            .map(|p| format!("payload: {p}")),
    );
    text.join("\n")
}

/// The repository's check: it fails, printing the payloads, where the agent left them.
const CHECK: &str = "if [ -e check-says.txt ]; then cat check-says.txt; exit 1; fi";

/// A world whose remote holds the two hostile items: one the agent lands, one whose check
/// fails; the drive is left to the test.
fn world_with_hostile_items(beacon: &str) -> World {
    require_image();
    let world = World::new();
    world.install("docker");
    world.install("command");
    world.clone_of_fresh_remote();
    std::fs::write(
        world.work.join("stet.toml"),
        format!(
            "[harness]\nprefer = [\"command\"]\n\n[plugins.command]\nimplement = [\"{}\"]\n\n\
             [drive]\ncheck = \"{}\"\n",
            hostile_agent().display(),
            CHECK.replace('"', "\\\""),
        ),
    )
    .unwrap();
    for (attack, tag) in [("land", "LANDS"), ("fail", "FAILS")] {
        let added = world.run_stet(&["add", &item_text(beacon, attack, tag)]);
        assert_eq!(added.code, 0, "stet add: {}", added.stderr);
        stet_e2e::next_millisecond();
    }
    let trusted = world.trust_in(&world.work);
    assert_eq!(trusted.code, 0, "{}", trusted.stderr);
    git(&world.work, &["add", "stet.toml", ".stet"]);
    git(&world.work, &["commit", "--quiet", "-m", "hostile items"]);
    git(&world.work, &["push", "--quiet", "origin", "HEAD"]);
    world
}

/// Asserts the drive (which said `said`) landed one item and failed the other.
fn assert_one_landed_one_failed(world: &World, said: &str) {
    let queue = world.run_stet(&["queue", "--json"]);
    assert_eq!(queue.code, 0, "{}", queue.stderr);
    let json = queue.json();
    let items = json["items"]
        .as_array()
        .unwrap_or_else(|| panic!("stet queue --json: {json}"))
        .clone();
    let state_of = |tag: &str| {
        items
            .iter()
            .find(|i| i["title"].as_str().is_some_and(|t| t.starts_with(tag)))
            .map(|i| i["state"].as_str().unwrap_or_default().to_string())
            .unwrap_or_default()
    };
    assert_eq!(
        (state_of("LANDS").as_str(), state_of("FAILS").as_str()),
        ("landed", "failed"),
        "the drive lands one item and fails the other on its check; it said:\n{said}\n{}",
        queue.stdout
    );
}

/// What the page's DOM shows of an attack that ran: the marks the payloads leave, links
/// whose scheme would run script, and anything naming the beacon.
const MARKS: &str = r#"
const found = [];
if (window.__pwned !== undefined) found.push('window.__pwned = ' + window.__pwned);
if (document.title.indexOf('PWNED') >= 0) found.push('the title was set: ' + document.title);
for (const e of document.querySelectorAll('[id^="pwned"]')) found.push('an element was planted: ' + e.outerHTML.slice(0, 200));
for (const e of document.querySelectorAll('[href],[src],[action],[formaction],[data],[poster],[srcset]')) {
  for (const name of ['href', 'src', 'action', 'formaction', 'data', 'poster', 'srcset']) {
    const v = (e.getAttribute(name) || '').trim().toLowerCase();
    if (v.startsWith('javascript:') || v.startsWith('data:') || v.startsWith('vbscript:')) found.push('a ' + name + ' runs script: ' + e.outerHTML.slice(0, 200));
    if (v.indexOf(arguments_beacon) >= 0) found.push('a ' + name + ' names the beacon: ' + e.outerHTML.slice(0, 200));
  }
}
for (const e of document.querySelectorAll('iframe, object, embed, base, meta[http-equiv]')) found.push('a planted ' + e.tagName + ': ' + e.outerHTML.slice(0, 200));
for (const e of document.querySelectorAll('*')) {
  for (const a of e.attributes) if (/^on/i.test(a.name)) found.push('an event handler: ' + e.outerHTML.slice(0, 200));
}
for (const s of document.scripts) if (!s.src || !s.src.startsWith(location.origin + '/')) found.push('a script not of this origin: ' + s.outerHTML.slice(0, 200));
return found;
"#;

/// An element's tag name and attributes, as read from the HTML source.
struct Tag {
    name: String,
    closing: bool,
    attributes: Vec<(String, String)>,
}

/// The tags of an HTML document, read the way a browser reads them: text between tags is
/// skipped (so escaped text, `&lt;script&gt;`, is never taken for a tag), quoted attribute
/// values may hold `>`, comments are skipped, and the content of `script`, `style`,
/// `textarea` and `title` runs to its own closing tag. Returns the tags and, for each
/// `script` element, its body.
fn tags_of(html: &str) -> (Vec<Tag>, Vec<String>) {
    let bytes = html.as_bytes();
    let lower = html.to_ascii_lowercase();
    let (mut tags, mut bodies) = (Vec::new(), Vec::new());
    let mut i = 0;
    while let Some(at) = html[i..].find('<').map(|at| at + i) {
        i = at + 1;
        if html[at..].starts_with("<!--") {
            i = html[at..]
                .find("-->")
                .map_or(html.len(), |end| at + end + 3);
            continue;
        }
        let closing = bytes.get(i) == Some(&b'/');
        let start = if closing { i + 1 } else { i };
        if !bytes.get(start).is_some_and(|b| b.is_ascii_alphabetic()) {
            // `<` followed by anything but a letter is text (or a doctype, `<!`).
            if bytes.get(i) == Some(&b'!') {
                i = html[at..].find('>').map_or(html.len(), |end| at + end + 1);
            }
            continue;
        }
        let mut j = start;
        while j < bytes.len()
            && !bytes[j].is_ascii_whitespace()
            && bytes[j] != b'>'
            && bytes[j] != b'/'
        {
            j += 1;
        }
        let name = lower[start..j].to_string();
        let mut attributes = Vec::new();
        // Attributes: name[=value], value quoted or not, until `>`.
        loop {
            while j < bytes.len() && (bytes[j].is_ascii_whitespace() || bytes[j] == b'/') {
                j += 1;
            }
            if j >= bytes.len() || bytes[j] == b'>' {
                j += 1;
                break;
            }
            let a = j;
            while j < bytes.len()
                && !bytes[j].is_ascii_whitespace()
                && !matches!(bytes[j], b'>' | b'=' | b'/')
            {
                j += 1;
            }
            let attribute = lower[a..j].to_string();
            let mut value = String::new();
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            if bytes.get(j) == Some(&b'=') {
                j += 1;
                while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                    j += 1;
                }
                match bytes.get(j) {
                    Some(&q) if q == b'"' || q == b'\'' => {
                        let end = html[j + 1..]
                            .find(q as char)
                            .map_or(html.len(), |e| j + 1 + e);
                        value = html[j + 1..end].to_string();
                        j = end + 1;
                    }
                    _ => {
                        let v = j;
                        while j < bytes.len() && !bytes[j].is_ascii_whitespace() && bytes[j] != b'>'
                        {
                            j += 1;
                        }
                        value = html[v..j].to_string();
                    }
                }
            }
            if !attribute.is_empty() {
                attributes.push((attribute, value));
            }
        }
        i = j.min(html.len());
        if !closing && matches!(name.as_str(), "script" | "style" | "textarea" | "title") {
            let close = format!("</{name}");
            let end = lower[i..].find(&close).map_or(html.len(), |e| i + e);
            if name == "script" {
                bodies.push(html[i..end].to_string());
            }
            i = end;
        }
        tags.push(Tag {
            name,
            closing,
            attributes,
        });
    }
    (tags, bodies)
}

/// What in a page's HTML source would run or fetch: inline script, event handlers, style
/// attributes, script URLs, elements that load from elsewhere, the beacon's address.
fn unsafe_markup(html: &str, beacon: &str) -> Vec<String> {
    let (tags, bodies) = tags_of(html);
    let mut found = Vec::new();
    for body in bodies {
        if !body.trim().is_empty() {
            found.push(format!(
                "an inline script: {}",
                body.chars().take(200).collect::<String>()
            ));
        }
    }
    for tag in tags.iter().filter(|t| !t.closing) {
        let shown = || {
            format!(
                "<{} {}>",
                tag.name,
                tag.attributes
                    .iter()
                    .map(|(n, v)| format!("{n}={v:?}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        };
        if tag.name == "script"
            && !tag
                .attributes
                .iter()
                .any(|(n, v)| n == "src" && v.starts_with('/'))
        {
            found.push(format!("a script not from this origin's path: {}", shown()));
        }
        if matches!(
            tag.name.as_str(),
            "iframe" | "object" | "embed" | "base" | "frame"
        ) || (tag.name == "meta" && tag.attributes.iter().any(|(n, _)| n == "http-equiv"))
        {
            found.push(format!("a planted element: {}", shown()));
        }
        for (name, value) in &tag.attributes {
            let lowered = value.trim().to_ascii_lowercase();
            if name.len() > 2
                && name.starts_with("on")
                && name[2..].bytes().all(|b| b.is_ascii_lowercase())
            {
                found.push(format!("an event handler: {}", shown()));
            }
            if name == "style" {
                found.push(format!("a style attribute: {}", shown()));
            }
            if lowered.starts_with("javascript:") || lowered.starts_with("vbscript:") {
                found.push(format!("a script URL: {}", shown()));
            }
            if value.contains(beacon) {
                found.push(format!("an attribute naming the beacon: {}", shown()));
            }
        }
    }
    found
}

/// Where the crawl may go from `href` (absolute, as the DOM resolves it): this board's own
/// pages, without their fragment; never its static files or an event stream.
fn crawlable(base: &str, href: &str) -> Option<String> {
    let rest = href.strip_prefix(base)?;
    if !rest.starts_with('/') {
        return None;
    }
    let path = rest.split('#').next().unwrap_or(rest);
    let route = path.split('?').next().unwrap_or(path);
    if route.starts_with("/static/")
        || route.ends_with("/events")
        || route.contains("/events/")
        || path.contains("token=")
    {
        return None;
    }
    Some(path.to_string())
}

/// One page as the crawl saw it.
struct Seen {
    path: String,
    status: u16,
    text: String,
}

#[test]
fn nothing_the_agent_wrote_runs_or_fetches_on_any_page_of_the_board() {
    let _serial = serial_drives();
    let beacon = Beacon::start();
    let world = world_with_hostile_items(&beacon.url());
    let board = RunningBoard::start(&world, &[]);
    let browser = board.browser();
    let cookie = board.session_cookie();
    let beacon_host = format!("127.0.0.1:{}", beacon.port);
    let marks = MARKS.replace("arguments_beacon", &format!("{beacon_host:?}"));
    let mut problems: Vec<String> = Vec::new();

    // The drive runs while the live page is open (when the board has one): what reaches it
    // as events, drawn by the page's script, is data too.
    let live = request(board.port, "GET", "/live", &[("Cookie", &cookie)], None);
    let live_open = live.status == 200 && !live.body.trim().is_empty();
    if live_open {
        browser.goto(&format!("{}/live", board.base)).unwrap();
    }
    let log = world.root.path().join("drive.stderr");
    let mut drive = world
        .stet(&["drive", "--yes", "--rounds", "1"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start stet drive");
    let mut live_showed_output = false;
    while drive.try_wait().unwrap().is_none() {
        if live_open {
            let found = browser.execute(&marks).unwrap();
            for found in found.as_array().into_iter().flatten() {
                problems.push(format!(
                    "/live during the drive: {}",
                    found.as_str().unwrap_or_default()
                ));
            }
            live_showed_output |= browser
                .text()
                .unwrap_or_default()
                .contains("window.__pwned='agent-output'");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    assert_one_landed_one_failed(&world, &said);
    if live_open {
        eprintln!("the live page showed the agent's output during the drive: {live_showed_output}");
    }
    // The board reads the remote in the background: the queue shows the failure once it has
    // read it (an event the page shows, waited for).
    browser.goto(&format!("{}/queue", board.base)).unwrap();
    let mut tries = 0;
    while !browser
        .text()
        .unwrap_or_default()
        .contains("the last line of check-output")
    {
        tries += 1;
        assert!(
            tries < 60,
            "the queue never showed the failed item's reason: {}",
            browser.text().unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
        browser.goto(&format!("{}/queue", board.base)).unwrap();
    }

    let mut queued: VecDeque<String> = ["/queue", "/live", "/costs", "/walls"]
        .iter()
        .map(|p| p.to_string())
        .collect();
    let mut visited: BTreeSet<String> = queued.iter().cloned().collect();
    let mut pages: Vec<Seen> = Vec::new();
    while let Some(path) = queued.pop_front() {
        if pages.len() >= MAX_PAGES {
            break;
        }
        // The source and headers as served (the DOM is the browser's reading of them).
        let served = request(board.port, "GET", &path, &[("Cookie", &cookie)], None);
        match served.header("content-security-policy") {
            Some(csp)
                if csp.contains("script-src 'self'") && csp.contains("default-src 'none'") => {}
            other => problems.push(format!("{path}: the policy header is {other:?}")),
        }
        let content_type = served
            .header("content-type")
            .unwrap_or_default()
            .to_ascii_lowercase();
        if content_type.starts_with("text/html") {
            for found in unsafe_markup(&served.body, &beacon_host) {
                problems.push(format!("{path} (its HTML): {found}"));
            }
        } else if !served.body.trim().is_empty() {
            // A raw log or diff served as itself: never read as markup by the browser.
            let plain = [
                "text/plain",
                "application/json",
                "text/x-diff",
                "text/x-patch",
            ]
            .iter()
            .any(|t| content_type.starts_with(t));
            if !plain || served.header("x-content-type-options") != Some("nosniff") {
                problems.push(format!(
                    "{path}: served as {content_type:?} (nosniff: {:?}), which a browser may \
                     read as markup",
                    served.header("x-content-type-options")
                ));
            }
        }
        if served.body.trim().is_empty() {
            // No page of the board's (a route this build does not have): the browser would
            // show its own error page, which is not the board's to check.
            pages.push(Seen {
                path,
                status: served.status,
                text: String::new(),
            });
            continue;
        }
        let url = format!("{}{path}", board.base);
        browser.goto(&url).unwrap();
        let found = browser.execute(&marks).unwrap();
        for found in found.as_array().into_iter().flatten() {
            problems.push(format!(
                "{path} (in the browser): {}",
                found.as_str().unwrap_or_default()
            ));
        }
        let text = browser.text().unwrap();
        let links = browser
            .execute("return Array.from(document.querySelectorAll('a[href]'), a => a.href)")
            .unwrap();
        for href in links
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|h| h.as_str())
        {
            if let Some(next) = crawlable(&board.base, href) {
                if visited.insert(next.clone()) {
                    queued.push_back(next);
                }
            }
        }
        pages.push(Seen {
            path,
            status: served.status,
            text,
        });
    }
    let crawled: Vec<String> = pages
        .iter()
        .map(|p| format!("{} {}", p.status, p.path))
        .collect();
    eprintln!("crawled {} pages:\n{}", pages.len(), crawled.join("\n"));
    assert!(
        problems.is_empty(),
        "what the agent wrote ran, or could have:\n{}\n\ncrawled:\n{}",
        problems.join("\n"),
        crawled.join("\n")
    );
    assert!(
        beacon.seen().is_empty(),
        "the pages fetched from elsewhere: {:?}",
        beacon.seen()
    );
    for page in &pages {
        assert!(
            page.status != 500,
            "{} failed with 500: a hostile text is data, never a crash:\n{}",
            page.path,
            page.text
        );
    }

    // Shown, not hidden: the payloads are on the pages as text.
    let queue = &pages.iter().find(|p| p.path == "/queue").unwrap().text;
    for tag in ["LANDS", "FAILS"] {
        let title_shown =
            format!("{tag} <script>document.title='PWNED';window.__pwned='title'</script>");
        assert!(
            queue.contains(&title_shown),
            "the title shows as text on the queue: {queue}"
        );
    }
    assert!(
        queue.contains("{{ 7*7 }}"),
        "template syntax is text: {queue}"
    );
    let everything: String = pages
        .iter()
        .map(|p| p.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    // The failed item's reason is the check's last line.
    assert!(
        everything.contains("the last line of check-output"),
        "the check's output shows: {everything}"
    );
    // The item's story shows the rest, when the board has the item page.
    let items: Vec<&Seen> = pages
        .iter()
        .filter(|p| p.path.starts_with("/item/") && p.status == 200)
        .collect();
    if items.is_empty() {
        eprintln!("no item page answered: the text, output, diff and file name checks wait for it");
    } else {
        for (what, shown) in [
            (
                "the item's text",
                "<script>document.title='PWNED';window.__pwned='item-text-LANDS'</script>",
            ),
            (
                "the agent's output",
                "<script>document.title='PWNED';window.__pwned='agent-output'</script>",
            ),
            ("the diff's content", "window.__pwned='diff-content'"),
            // Git quotes a name with a `"` or a bidi override in it (`\"`, octal): this
            // part of it reads the same quoted or not.
            ("a file name", "<svg onload=window.__pwned=2> {{ 7*7 }}"),
        ] {
            assert!(
                everything.contains(shown),
                "{what} shows as text on the item's pages ({}): {shown}",
                items
                    .iter()
                    .map(|p| p.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let (status, stderr) = board.stop();
    assert!(status.success(), "{status:?}: {stderr}");
}

#[test]
fn the_source_check_finds_markup_that_would_run_and_passes_escaped_text() {
    let beacon = "127.0.0.1:9";
    let clean = "<!doctype html><html><head><title>&lt;script&gt; a</title>\
        <script src=\"/static/board.js\" defer></script></head><body>\
        <p>&lt;img src=x onerror=alert(1)&gt; says on=\"x\" and onerror=1</p>\
        <textarea><img onerror=1></textarea><a href=\"/item/1\">x</a></body></html>";
    assert_eq!(unsafe_markup(clean, beacon), Vec::<String>::new());
    for bad in [
        "<p><script>alert(1)</script></p>",
        "<img src=x onerror=alert(1)>",
        "<p title=\"a\"onclick=\"x\">",
        "<a href=\" javascript:alert(1)\">x</a>",
        "<svg><script>alert(1)</script></svg>",
        "<div style=\"color:red\">",
        "<img src=\"http://127.0.0.1:9/x.png\">",
        "<textarea></textarea><img src=x onerror=1>",
        "<iframe src=\"/x\"></iframe>",
        "<meta http-equiv=refresh content=\"0;url=/x\">",
    ] {
        assert!(!unsafe_markup(bad, beacon).is_empty(), "not found in {bad}");
    }
}
