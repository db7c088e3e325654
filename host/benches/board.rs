//! Board benchmarks (run with `cargo xtask bench`): the real `stet board` process serving a
//! scratch repository whose queue holds 10,000 items (half of them landed on its bare
//! remote), one of them with 50 receipts and their logs. Measured, by a plain HTTP/1.1
//! client on one connection per request, as a browser's first load would be:
//!
//! - the anchor: the board's style sheet (`/static/board.css`, a constant body behind the
//!   same session check), the floor of a request to this server;
//! - the queue page (its first page, a search over all 10,000, a late page);
//! - the story of the item with 50 receipts (`/item/ID`; its status is reported: a build
//!   without the page answers 404);
//! - the page weight without charts: the queue page's HTML and the style sheet and script it
//!   loads;
//! - the board's memory (VmRSS) before and after a simulated hour of a drive's events: 3,600
//!   receipt writes (each call's start and end, 50 calls an item) with a line of output each
//!   appended to its log, the pages asked for every tenth event, as a person's open tab does.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use stet_cli::queue;
use stet_cli::receipts::{self, Receipt};

const ITEMS: usize = 10_000;
const RECEIPTS_OF_ONE: usize = 50;
const REQUESTS: usize = 200;
const EVENTS: usize = 3_600;

fn git(dir: &Path, args: &[&str]) -> String {
    stet_cli::git::run(dir, args).unwrap_or_else(|e| panic!("{e}"))
}

fn git_input(dir: &Path, args: &[&str], input: &str) -> String {
    stet_cli::git::run_input(dir, args, input.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
}

fn item_id(n: usize) -> String {
    format!("20261130-000000-{n:05}-item")
}

/// A clone of a fresh bare remote with `ITEMS` items queued in one commit (written as a
/// person's editor would), the first half of them marked landed on the remote.
fn scratch(root: &Path) -> PathBuf {
    let bare = root.join("remote.git");
    let work = root.join("work");
    git(root, &["init", "--quiet", "--bare", bare.to_str().unwrap()]);
    std::fs::create_dir_all(work.join(queue::QUEUE_DIR)).unwrap();
    git(&work, &["init", "--quiet"]);
    git(&work, &["remote", "add", "origin", bare.to_str().unwrap()]);
    for n in 0..ITEMS {
        std::fs::write(
            work.join(queue::QUEUE_DIR)
                .join(format!("{}.md", item_id(n))),
            format!("Item {n} of the bench\n\nwrite out-{n}.txt: item {n} was here\n"),
        )
        .unwrap();
    }
    std::fs::write(work.join("README"), "bench\n").unwrap();
    git(&work, &["add", "."]);
    git(&work, &["commit", "--quiet", "-m", "queue"]);
    git(
        &work,
        &["push", "--quiet", "origin", "HEAD:refs/heads/main"],
    );
    // The ledger, as drives leave it: one commit whose tree holds `landed/<item>`.
    let note = git_input(&work, &["hash-object", "-w", "--stdin"], "landed\n");
    let listing: String = (0..ITEMS / 2)
        .map(|n| format!("100644 blob {note}\t{}\n", item_id(n)))
        .collect();
    let entries = git_input(&work, &["mktree"], &listing);
    let tree = git_input(
        &work,
        &["mktree"],
        &format!("040000 tree {entries}\tlanded\n"),
    );
    let ledger = git(&work, &["commit-tree", &tree, "-m", "ledger"]);
    git(
        &work,
        &[
            "push",
            "--quiet",
            "origin",
            &format!("{ledger}:refs/stet/ledger"),
        ],
    );
    work
}

/// Call `n` of item `item`, as the drive records it (through `receipts::record`, so the
/// file is what stet writes): implement, check and review in turn, each a round's, with cost
/// and tokens; `ended` false for a call still running.
fn receipt(repo: &Path, item: &str, n: usize, ended: bool) -> Receipt {
    let id = format!("20261130-{:06}-{item}-{n}", n);
    let role = ["implement", "check", "review"][n % 3];
    let started = 1_764_460_800_000 + n as u64 * 60_000;
    let value = serde_json::json!({
        "id": id,
        "run": "drive-4242-1764460800000",
        "owner": "4242:123456",
        "item": item,
        "lane": format!("stet/{item}"),
        "role": role,
        "round": 1 + (n / 3) as u32,
        "runtime": {"name": "runtime-a", "version": "0.1.0", "library_sha256": "ab".repeat(32)},
        "runtime_reason": "the first runtime whose probe passed",
        "harness": {"name": "command", "version": "0.1.0", "library_sha256": "cd".repeat(32)},
        "image": "stet-lane:1",
        "network": "none",
        "started_unix_ms": started,
        "ended_unix_ms": if ended { started + 42_000 } else { 0 },
        "exit_code": if ended { Some(0) } else { None },
        "exit_signal": null,
        "outcome": if ended { "done" } else { "running" },
        "detail": if ended { "the agent finished" } else { "" },
        "retry_at_unix": null,
        "cost_usd": if role == "check" { None } else { Some(0.0123 * (n + 1) as f64) },
        "usage": [["input_tokens", "12345"], ["output_tokens", "2345"]],
        "commit_before": "0".repeat(40),
        "commit_after": "1".repeat(40),
        "log": receipts::log_path(repo, &id),
        "session": [],
        "limits": "4096 processes, 4 GiB memory",
        "limit_reached": null,
        "output_bytes": 4096,
        "log_cut_bytes": 0,
        "profile_carried": [],
        "network_blocked": [],
    });
    serde_json::from_value(value).expect("the bench's receipt has the receipt's shape")
}

/// Writes call `n` of `item` and a log of `lines` lines for it.
fn record(repo: &Path, item: &str, n: usize, ended: bool, lines: usize) {
    let receipt = receipt(repo, item, n, ended);
    let log: String = (0..lines)
        .map(|l| format!("line {l} of what call {n} printed: wrote out-{n}.txt\n"))
        .collect();
    std::fs::create_dir_all(receipt.log.parent().unwrap()).unwrap();
    std::fs::write(&receipt.log, log).unwrap();
    receipts::record(repo, &receipt).unwrap();
}

/// The board, started on `repo`, its URL read from what it prints.
struct Board {
    child: Child,
    port: u16,
    /// Its own name and port (`stet-<random>.localhost:PORT`), the Host its pages answer to.
    name: String,
    cookie: String,
}

impl Board {
    fn start(repo: &Path) -> Board {
        let mut child = Command::new(env!("CARGO_BIN_EXE_stet"))
            .arg("board")
            .current_dir(repo)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start stet board");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = out.read_to_string(&mut rest);
        });
        let url = line
            .trim()
            .strip_prefix("stet board: ")
            .unwrap_or_else(|| panic!("stet board printed no URL: {line:?}"))
            .to_string();
        let port: u16 = url
            .split("/?")
            .next()
            .and_then(|b| b.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .unwrap();
        let token = url.split("token=").nth(1).unwrap();
        // As a browser: the printed address trades the token for a ticket on the board's
        // own name (`stet-<random>.localhost`), which sets the cookie there; every page
        // answers to that name only.
        let printed = format!("127.0.0.1:{port}");
        let (_, head, _) = get(&printed, port, &format!("/?token={token}"), "");
        let location = header(&head, "location").expect("the board's URL leads to its name");
        let name = location
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap()
            .to_string();
        let ticket = format!("/?{}", location.split("/?").nth(1).unwrap_or_default());
        let (_, head, _) = get(&name, port, &ticket, "");
        let cookie = header(&head, "set-cookie")
            .map(|c| c.split(';').next().unwrap().to_string())
            .expect("the board's name sets a cookie");
        Board {
            child,
            port,
            name,
            cookie,
        }
    }

    fn get(&self, path: &str) -> (u16, String, Vec<u8>) {
        get(&self.name, self.port, path, &self.cookie)
    }

    /// `n` requests of `path`, one after another: (median, p95, status, body size).
    fn time(&self, path: &str, n: usize) -> (Duration, Duration, u16, usize) {
        let (status, _, body) = self.get(path);
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            let _ = self.get(path);
            samples.push(t.elapsed());
        }
        samples.sort();
        (
            samples[n / 2],
            samples[(n * 95 / 100).min(n - 1)],
            status,
            body.len(),
        )
    }

    /// Resident memory and its high-water mark, KiB.
    fn memory(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }
}

impl Drop for Board {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// The value of the first header `name` in `head`.
fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (n, value) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name)
            .then(|| value.trim().to_string())
    })
}

/// One GET on a connection of its own, to the board on `port` under the Host `host`:
/// status, head, body.
fn get(host: &str, port: u16, path: &str, cookie: &str) -> (u16, String, Vec<u8>) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the board");
    let mut head = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    if !cookie.is_empty() {
        head.push_str(&format!("Cookie: {cookie}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(raw.len());
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let body = raw.get(split + 4..).unwrap_or_default().to_vec();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // A chunked body's framing is left in: a few bytes a chunk, not worth a decoder here.
    (status, head, body)
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn kib(n: usize) -> String {
    format!("{:.1} KiB", n as f64 / 1024.0)
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// The `/static/…` files a page's HTML loads (its style sheets and scripts).
fn static_files(html: &str) -> Vec<String> {
    let mut files: Vec<String> = html
        .split(['"', '\''])
        .filter(|s| s.starts_with("/static/"))
        .map(str::to_string)
        .collect();
    files.sort();
    files.dedup();
    files
}

fn main() {
    let root = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let work = scratch(root.path());
    let storied = item_id(0);
    for n in 0..RECEIPTS_OF_ONE {
        record(&work, &storied, n, true, 40);
    }
    println!(
        "made a {ITEMS}-item queue ({} landed) and {RECEIPTS_OF_ONE} receipts of one item in {:.1} s",
        ITEMS / 2,
        t.elapsed().as_secs_f64()
    );
    let board = Board::start(&work);
    let (rss_start, _) = board.memory();

    let rows = [
        (
            "the style sheet (anchor)      ",
            "/static/board.css".to_string(),
        ),
        ("the queue, first page         ", "/queue".to_string()),
        (
            "the queue, searched (all 10k) ",
            "/queue?q=item+9999".to_string(),
        ),
        (
            "the queue, page 60 of 100     ",
            "/queue?page=60".to_string(),
        ),
        ("the story, 50 receipts        ", format!("/item/{storied}")),
    ];
    println!(
        "stet board with {ITEMS} queued items (median / p95 of {REQUESTS} requests, a connection each):"
    );
    let mut anchor = Duration::ZERO;
    for (label, path) in &rows {
        let (median, p95, status, bytes) = board.time(path, REQUESTS);
        if anchor.is_zero() {
            anchor = median;
        }
        println!(
            "  {label} {:>9} / {:>9}  {:>5.1}x the anchor  {status}  {}",
            ms(median),
            ms(p95),
            median.as_secs_f64() / anchor.as_secs_f64(),
            kib(bytes),
        );
    }

    let (_, _, html) = board.get("/queue");
    let html = String::from_utf8_lossy(&html).into_owned();
    let mut weight = html.len();
    let mut parts = vec![format!("HTML {}", kib(html.len()))];
    for file in static_files(&html) {
        let (_, _, body) = board.get(&file);
        weight += body.len();
        parts.push(format!("{file} {}", kib(body.len())));
    }
    println!(
        "  page weight without charts (the queue page, 100 rows): {}  ({})",
        kib(weight),
        parts.join(", ")
    );

    // An hour of a drive's events, as fast as they can be written.
    let (rss_before, _) = board.memory();
    let (live_status, _, _) = board.get("/live");
    let t = Instant::now();
    for event in 0..EVENTS {
        let item = item_id(ITEMS / 2 + event / (2 * RECEIPTS_OF_ONE));
        let call = (event / 2) % RECEIPTS_OF_ONE;
        record(&work, &item, call, event % 2 == 1, 1 + call % 20);
        if event % 10 == 0 {
            let _ = board.get("/queue");
            if live_status == 200 {
                let _ = board.get("/live");
            }
            let _ = board.get(&format!("/item/{item}"));
        }
    }
    let spent = t.elapsed();
    let (rss_after, hwm) = board.memory();
    println!(
        "  memory (VmRSS): {} at start, {} after the requests above, {} after {EVENTS} drive events \
         ({} receipts, {:.1} s; /live answered {live_status}); peak {}",
        mib(rss_start),
        mib(rss_before),
        mib(rss_after),
        EVENTS / 2,
        spent.as_secs_f64(),
        mib(hwm)
    );
}
