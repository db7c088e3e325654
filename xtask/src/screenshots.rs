//! `cargo xtask screenshots`: the board's pages as PNGs in `docs/board/`, drawn by a real
//! headless Chromium from a real `stet board` serving the demo's repository after a real
//! drive of the example agent: three items landed, one failed, one open, and a lane at work
//! for the live page.
//!
//! What changes between two runs is only what must (ids, times, the run's name): the items,
//! their states, the window (1280 wide) and the order of the pages are the same each time.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use xtask::browser::Browser;

use crate::{demo_git, demo_repository, run, DEMO_ITEMS};

/// The width of every screenshot.
const WIDTH: u32 = 1280;

/// An item the example agent cannot do (no instruction it knows): it fails.
const FAILING: &str =
    "Rename the project\n\nPick a better name for the project and use it everywhere.";
/// The item a second drive works while the live page is drawn.
const LIVE: &str =
    "Write the contributing guide\n\nwrite CONTRIBUTING.md: Open an item with stet add.";
/// An item left open.
const OPEN: &str = "Add a licence\n\nwrite LICENCE.md: Public domain.";

/// The live page's drive runs this check: it keeps the lane in its check long enough for
/// the page to show it, then checks as the demo does.
const SLOW_CHECK: &str = "sleep 10; git diff --check HEAD~1";

pub fn screenshots(root: &Path) -> Result<(), String> {
    let stet = build(root)?;
    run(&mut Command::new(root.join("scripts/build-image.sh")))?;
    let demo = root.join("target/screenshots");
    let mut items: Vec<&str> = DEMO_ITEMS.to_vec();
    items.push(FAILING);
    let repo = demo_repository(root, &stet, &demo, None, &items)?;
    eprintln!(
        "\nrunning: stet drive --yes --rounds 2 (in {})",
        repo.display()
    );
    // Three land, one fails: the drive says so in its exit status, which is not an error here.
    let _ = Command::new(&stet)
        .args(["drive", "--yes", "--rounds", "2"])
        .current_dir(&repo)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", stet.display()))?;
    for item in [LIVE, OPEN] {
        run(Command::new(&stet).args(["add", item]).current_dir(&repo))?;
        std::thread::sleep(Duration::from_millis(5));
    }
    demo_git(&repo, &["add", ".stet"])?;
    demo_git(&repo, &["commit", "--quiet", "-m", "two more items"])?;
    demo_git(&repo, &["push", "--quiet", "origin", "HEAD"])?;
    let queue = queue_json(&stet, &repo)?;
    let landed = item_where(&queue, |i| i["state"] == "landed")?;
    let live = item_where(&queue, |i| i["title"] == "Write the contributing guide")?;
    // The live page names the item by its handle, its id or its title: any of them.
    let live_names: Vec<String> = ["handle", "id", "title"]
        .iter()
        .filter_map(|k| live[*k].as_str().map(str::to_string))
        .collect();
    let landed_id = landed["id"].as_str().unwrap_or_default().to_string();

    let out_dir = root.join("docs/board");
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| format!("cannot make {}: {e}", out_dir.display()))?;
    let board = Board::start(&stet, &repo)?;
    let pages = [
        ("queue", "/queue".to_string()),
        ("item", format!("/item/{landed_id}")),
        ("costs", "/costs".to_string()),
        ("walls", "/walls".to_string()),
    ];
    let mut written = Vec::new();
    for (name, path) in &pages {
        if let Some(file) = board.shoot(name, path, &out_dir, &[])? {
            written.push(file);
        }
    }
    // The live page while a lane works: a second drive takes the live item (and only it)
    // with a check that lasts; the picture is taken once the page names the item.
    let mut drive = Command::new(&stet)
        .args(["drive", "--yes", "--cap", "1", "--check", SLOW_CHECK])
        .current_dir(&repo)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", stet.display()))?;
    let shot = board.shoot("live", "/live", &out_dir, &live_names);
    let _ = drive.wait();
    if let Some(file) = shot? {
        written.push(file);
    }
    board.stop();
    eprintln!(
        "\nscreenshots: {}",
        written
            .iter()
            .map(|p| p.strip_prefix(root).unwrap_or(p).display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

/// Builds stet and its plugins (the debug profile: pictures need no optimiser) and lays
/// them out as a distribution under target/screenshots/dist; returns its `stet`.
fn build(root: &Path) -> Result<PathBuf, String> {
    let mut build = crate::cargo(root);
    build.args(["build", "--package", "stet"]);
    for plugin in xtask::plugin_crates(&root.join("plugins")) {
        build.args(["--package", &crate::package_name(&plugin.dir)?]);
    }
    run(&mut build)?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| if t.is_absolute() { t } else { root.join(t) })
        .unwrap_or_else(|| root.join("target"));
    let dist = root.join("target/screenshots-dist");
    xtask::assemble_dist(&target.join("debug"), &dist)
        .map_err(|e| format!("cannot lay out {}: {e}", dist.display()))?;
    Ok(dist.join("bin/stet"))
}

fn queue_json(stet: &Path, repo: &Path) -> Result<serde_json::Value, String> {
    let out = Command::new(stet)
        .args(["queue", "--json"])
        .current_dir(repo)
        .output()
        .map_err(|e| format!("cannot run stet queue: {e}"))?;
    serde_json::from_slice(&out.stdout).map_err(|e| format!("stet queue --json: {e}"))
}

fn item_where(
    queue: &serde_json::Value,
    wanted: impl Fn(&serde_json::Value) -> bool,
) -> Result<serde_json::Value, String> {
    queue["items"]
        .as_array()
        .and_then(|items| items.iter().find(|i| wanted(i)))
        .cloned()
        .ok_or_else(|| format!("the demo's queue lacks an item it should have: {queue}"))
}

/// A running `stet board` on the demo.
struct Board {
    child: Child,
    url: String,
    port: u16,
    /// The board's own name and port (`stet-<random>.localhost:PORT`), where its pages are.
    name: String,
    cookie: String,
}

impl Board {
    fn start(stet: &Path, repo: &Path) -> Result<Board, String> {
        let mut child = Command::new(stet)
            .arg("board")
            .current_dir(repo)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start stet board: {e}"))?;
        let mut out = BufReader::new(child.stdout.take().ok_or("stet board has no stdout")?);
        let mut line = String::new();
        let _ = out.read_line(&mut line);
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = out.read_to_string(&mut rest);
        });
        let Some(url) = line.trim().strip_prefix("stet board: ").map(str::to_string) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("stet board printed no URL: {line:?}"));
        };
        let port = url
            .split("/?")
            .next()
            .and_then(|base| base.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("no port in {url}"))?;
        let token = url.split("token=").nth(1).unwrap_or_default();
        // The token, on the printed address, leads to the board's own name with a ticket;
        // the ticket, there, to the session's cookie.
        let printed = format!("127.0.0.1:{port}");
        let (_, headers) = get(&printed, port, &format!("/?token={token}"), None)?;
        let location = header(&headers, "location").ok_or("the board's URL led nowhere")?;
        let name = location
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or_default()
            .to_string();
        let ticket = format!("/?{}", location.split("/?").nth(1).unwrap_or_default());
        let (_, headers) = get(&name, port, &ticket, None)?;
        let cookie = headers
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("set-cookie").then(|| {
                    value
                        .trim()
                        .split(';')
                        .next()
                        .unwrap_or_default()
                        .to_string()
                })
            })
            .ok_or("the board's URL set no cookie")?;
        Ok(Board {
            child,
            url,
            port,
            name,
            cookie,
        })
    }

    /// Draws `path` into `dir/NAME.png` (the whole page), once the page shows one of
    /// `waiting_for` when there are any (up to a minute; drawn as it is after that). A page
    /// the board does not have (404) is left out, and said so.
    fn shoot(
        &self,
        name: &str,
        path: &str,
        dir: &Path,
        waiting_for: &[String],
    ) -> Result<Option<PathBuf>, String> {
        let (status, _) = get(&self.name, self.port, path, Some(&self.cookie))?;
        if status == 404 {
            eprintln!(
                "screenshots: {path} answered 404: no {name}.png (this build has no such page)"
            );
            return Ok(None);
        }
        let browser = Browser::start(WIDTH, 800)?;
        browser.goto(&self.url)?;
        browser.goto(&format!("http://{}{path}", self.name))?;
        if !waiting_for.is_empty() {
            let condition = waiting_for
                .iter()
                .map(|text| {
                    format!(
                        "document.body.innerText.includes({})",
                        serde_json::Value::String(text.clone())
                    )
                })
                .collect::<Vec<_>>()
                .join(" || ");
            let condition = format!("document.body && ({condition})");
            if let Err(e) = browser.wait_until(&condition, Duration::from_secs(60)) {
                eprintln!(
                    "screenshots: {path} did not show {waiting_for:?} in time; drawn as it is ({e})"
                );
            }
        }
        let png = browser.screenshot_full(WIDTH)?;
        let file = dir.join(format!("{name}.png"));
        std::fs::write(&file, png).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        eprintln!("screenshots: {path} → {}", file.display());
        Ok(Some(file))
    }

    /// Stops the board as Ctrl-C does.
    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// The value of the header `name` in a response's head.
fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (n, value) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name)
            .then(|| value.trim().to_string())
    })
}

/// A GET of `path` from the board on 127.0.0.1:`port`, with the Host `host`; its status and
/// its head.
fn get(host: &str, port: u16, path: &str, cookie: Option<&str>) -> Result<(u16, String), String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .map_err(|e| format!("cannot reach the board: {e}"))?;
    let mut head = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    if let Some(cookie) = cookie {
        head.push_str(&format!("Cookie: {cookie}\r\n"));
    }
    head.push_str("\r\n");
    stream
        .write_all(head.as_bytes())
        .map_err(|e| format!("cannot ask the board: {e}"))?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .map_err(|e| format!("cannot read the board's answer: {e}"))?;
    let text = String::from_utf8_lossy(&raw);
    let head = text
        .split("\r\n\r\n")
        .next()
        .unwrap_or_default()
        .to_string();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((status, head))
}
