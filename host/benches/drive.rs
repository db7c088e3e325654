//! Drive benchmarks (run with `cargo xtask bench`, which builds the release plugins and
//! needs stet's lane image loaded).
//!
//! 1. The host's bookkeeping per move with 10,000 queued items, half of them landed: in
//!    process, the pieces a move is made of — picking the next eligible item, writing a
//!    receipt durably — and, separately, the remote round trips a move makes (reading the
//!    marks, taking and releasing a reservation), which are git processes talking to a bare
//!    remote and so grow with the remote, not with stet.
//! 2. A whole `stet drive --cap 1` (the selected runtime, the command harness, the example agent) on
//!    queues of 100 and 10,000 items: wall time and the stet process's peak memory.
//! 3. Lanes made heavy by their agent — a 20 GiB sparse file, three of 400 MB, 100,000
//!    small files —: the peak memory of stet and every git it ran (wait4's high-water mark
//!    of the process and its waited-for children).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use stet_cli::queue;
use stet_cli::receipts;
use stet_cli::reservations::{Remote, Reservation};

const ITEMS: usize = 10_000;

fn release_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@b")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@b")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn git_input(dir: &Path, args: &[&str], input: &str) -> String {
    stet_cli::git::run_input(dir, args, input.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
}

/// A clone of a fresh bare remote with `items` queued (written directly, as a person's
/// editor would), the first `landed` of them marked landed on the remote.
fn scratch(root: &Path, items: usize, landed: usize) -> PathBuf {
    let bare = root.join("remote.git");
    let work = root.join("work");
    git(root, &["init", "--quiet", "--bare", bare.to_str().unwrap()]);
    std::fs::create_dir_all(work.join(queue::QUEUE_DIR)).unwrap();
    git(&work, &["init", "--quiet"]);
    git(&work, &["remote", "add", "origin", bare.to_str().unwrap()]);
    for n in 0..items {
        std::fs::write(
            work.join(queue::QUEUE_DIR)
                .join(format!("20261130-000000-{n:05}-item.md")),
            format!("Item {n}\n\nwrite out-{n}.txt: item {n} was here\n"),
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
    if landed > 0 {
        // The ledger, as drives leave it: one commit whose tree holds `landed/<item>`.
        let note = git_input(&work, &["hash-object", "-w", "--stdin"], "landed\n");
        let listing: String = (0..landed)
            .map(|n| format!("100644 blob {note}\t20261130-000000-{n:05}-item\n"))
            .collect();
        let entries = git_input(&work, &["mktree"], &listing);
        let root = git_input(
            &work,
            &["mktree"],
            &format!("040000 tree {entries}\tlanded\n"),
        );
        let ledger = git(&work, &["commit-tree", &root, "-m", "ledger"]);
        git(
            &work,
            &[
                "push",
                "--quiet",
                "origin",
                &format!("{ledger}:refs/stet/ledger"),
            ],
        );
    }
    work
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

fn bookkeeping() {
    let root = tempfile::tempdir().unwrap();
    let work = scratch(root.path(), ITEMS, ITEMS / 2);
    let remote = Remote {
        repo: &work,
        name: "origin",
    };

    let start = Instant::now();
    let (entries, malformed) = queue::scan(&work);
    let scan = start.elapsed();
    assert_eq!((entries.len(), malformed.len()), (ITEMS, 0));

    let mut marks_t = Vec::new();
    let mut pick_t = Vec::new();
    let mut take_t = Vec::new();
    let mut release_t = Vec::new();
    let mut receipt_t = Vec::new();
    let done: std::collections::HashSet<String> = Default::default();
    for round in 0..15 {
        let t = Instant::now();
        let marks = remote.marks().unwrap();
        marks_t.push(t.elapsed());
        assert_eq!(marks.landed.len(), ITEMS / 2);

        // What a move does in process: the first item not landed, failed or done here.
        let t = Instant::now();
        let next = entries
            .iter()
            .find(|e| {
                !done.contains(&e.id)
                    && !marks.landed.contains(&e.id)
                    && !marks.failed.contains(&e.id)
            })
            .unwrap();
        let item = next.load().unwrap();
        pick_t.push(t.elapsed());

        let t = Instant::now();
        let held = remote
            .take(
                Reservation {
                    item: item.id.clone(),
                    holder: "bench".into(),
                    lane: format!("stet/{}", item.id),
                    stage: "implement".into(),
                    expires_at_unix: 4_000_000_000,
                },
                0,
                |_| false,
            )
            .unwrap();
        take_t.push(t.elapsed());
        let t = Instant::now();
        remote.release(&held).unwrap();
        release_t.push(t.elapsed());

        let t = Instant::now();
        let path = receipts::git_dir(&work)
            .join("stet/receipts")
            .join(format!("bench-{round}.json"));
        receipts::write_durably(&path, &[b'x'; 2048]).unwrap();
        receipt_t.push(t.elapsed());
    }
    let in_process = median(pick_t.clone()) + median(receipt_t.clone());
    println!(
        "bookkeeping with {ITEMS} queued items, {} landed (median of 15 moves):",
        ITEMS / 2
    );
    println!("  scan the queue (once per drive)      {}", ms(scan));
    println!(
        "  pick the next item + read it         {}",
        ms(median(pick_t))
    );
    println!(
        "  write a receipt durably (fsync)      {}",
        ms(median(receipt_t))
    );
    println!("  = in-process bookkeeping per move    {}", ms(in_process));
    println!(
        "  remote: read the marks (ls-remote)   {}",
        ms(median(marks_t))
    );
    println!(
        "  remote: take a reservation (CAS)     {}",
        ms(median(take_t))
    );
    println!(
        "  remote: release it (CAS)             {}",
        ms(median(release_t))
    );
}

/// Lays out the shipped runtimes and the command harness of the build in `dir` (a
/// checkout's `target/release`), by the manifests of that checkout (an earlier build's
/// plugins declare the plugin API they were built for): stet selects the runtime by the
/// probes, as it would for a person.
fn install(plugins: &Path, dir: &Path) {
    let checkout = dir.parent().and_then(Path::parent).unwrap();
    for plugin in xtask::plugin_crates(&checkout.join("plugins")) {
        if plugin.kind == "runtime" || plugin.name == "command" {
            xtask::install_plugin(&plugin, dir, plugins).unwrap_or_else(|e| {
                panic!(
                    "{} is not built in release mode in {} ({e}): run `cargo xtask bench`",
                    plugin.name,
                    dir.display()
                )
            });
        }
    }
}

/// A clone with `items` queued (`landed` of them landed), the plugins of the build in
/// `dir`, and the person's own configuration (always trusted, as a repository's file
/// would be only after `stet trust`) for the command harness and the example agent, with
/// `extra` appended. Returns the clone and the plugins directory.
fn drive_setup(
    root: &Path,
    items: usize,
    landed: usize,
    dir: &Path,
    extra: &str,
) -> (PathBuf, PathBuf) {
    let work = scratch(root, items, landed);
    let plugins = root.join("plugins");
    install(&plugins, dir);
    let config = root.join(".config/stet/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(
        &config,
        format!(
            "[harness]\nprefer = [\"command\"]\nprofiles = \"{}\"\n\n[plugins.command]\nimplement = [\"{}\"]\n{extra}",
            root.join("profiles").display(),
            repo_root().join("examples/agent/agent.sh").display()
        ),
    )
    .unwrap();
    (work, plugins)
}

/// The peak resident memory of process `pid` so far (VmHWM), in KiB.
fn peak_rss_kib(pid: u32) -> Option<i64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn whole_drive(items: usize) -> (Duration, i64) {
    drive_of(items, 0, 1)
}

/// `stet drive --yes --cap CAP` of the build in `dir`, in `work`, from an environment
/// made from scratch whose home is `home`.
fn stet_drive(dir: &Path, home: &Path, work: &Path, plugins: &Path, cap: usize) -> Command {
    let mut command = Command::new(dir.join("stet"));
    command
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/bin:/bin")
        .current_dir(work)
        .arg("--plugins-dir")
        .arg(plugins)
        .args(["drive", "--yes", "--cap", &cap.to_string()]);
    command
}

/// `stet drive --cap CAP` on a queue of `items`, the first `landed` of them landed.
fn drive_of(items: usize, landed: usize, cap: usize) -> (Duration, i64) {
    let root = tempfile::tempdir().unwrap();
    let (work, plugins) = drive_setup(root.path(), items, landed, &release_dir(), "");
    let start = Instant::now();
    let mut child = stet_drive(&release_dir(), root.path(), &work, &plugins, cap)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The stet process's own high-water mark (not its git and engine children's), read
    // until it exits; the mark only grows, so the last reading is the peak to 10 ms.
    let mut peak = 0;
    let status = loop {
        if let Some(rss) = peak_rss_kib(child.id()) {
            peak = peak.max(rss);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = start.elapsed();
    assert!(status.success(), "stet drive failed on {items} items");
    if landed > 0 {
        let ledger = git(&work, &["ls-remote", "origin", "refs/stet/ledger"]);
        assert!(!ledger.is_empty());
    }
    (took, peak)
}

/// A 3-item drive on the same queue of 10,003 items (the same repository), with nothing
/// landed before and with the 10,000 items ahead of the three landed, interleaved: what
/// the remote's history costs a drive, apart from the repository's size.
fn history() {
    let mut fresh = Vec::new();
    let mut aged = Vec::new();
    for _ in 0..2 {
        fresh.push(drive_of(ITEMS + 3, 0, 3).0);
        aged.push(drive_of(ITEMS + 3, ITEMS, 3).0);
    }
    let (fresh, aged) = (median(fresh), median(aged));
    println!("a 3-item drive (medians of 2, interleaved):");
    println!(
        "  nothing landed before       {:>8.0} ms",
        fresh.as_secs_f64() * 1000.0
    );
    println!(
        "  {ITEMS} landed before        {:>8.0} ms  ratio {:.2}",
        aged.as_secs_f64() * 1000.0,
        aged.as_secs_f64() / fresh.as_secs_f64()
    );
}

/// A 3-item drive with the example agent and a check (every stage of an item: implement,
/// check, review, land) from its first move — the moment the first item's reservation is
/// said — to the stet process's exit, the start-up proof excluded; with the binaries in
/// `dir`, stet and the plugins alike.
fn staged_drive(dir: &Path) -> Duration {
    use std::io::BufRead;
    let root = tempfile::tempdir().unwrap();
    let (work, plugins) = drive_setup(
        root.path(),
        3,
        0,
        dir,
        "\n[drive]\ncheck = \"test -s out-0.txt || test -s out-1.txt || test -s out-2.txt\"\n",
    );
    let mut child = stet_drive(dir, root.path(), &work, &plugins, 3)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first_move = None;
    let mut said = String::new();
    for line in std::io::BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        if first_move.is_none() && line.contains(": reserved; lane ") {
            first_move = Some(Instant::now());
        }
        if std::env::var_os("STET_BENCH_TRACE").is_some() {
            let at = first_move
                .map(|t| t.elapsed().as_millis())
                .unwrap_or_default();
            eprintln!("{at:>6} {line}");
        }
        said.push_str(&line);
        said.push('\n');
    }
    let status = child.wait().unwrap();
    let span = first_move.expect("the drive took no item").elapsed();
    assert!(status.success(), "stet drive failed:\n{said}");
    assert!(said.contains("landed 3"), "{said}");
    span
}

/// The staged drive with this build, and, when `STET_BENCH_BEFORE` names another build's
/// release directory (a worktree of an earlier commit, built with `cargo build --release`),
/// with that one too, interleaved.
fn stages() {
    let before = std::env::var_os("STET_BENCH_BEFORE").map(PathBuf::from);
    let (mut now, mut then) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        if let Some(before) = &before {
            then.push(staged_drive(before));
        }
        now.push(staged_drive(&release_dir()));
    }
    let now = median(now);
    println!(
        "a 3-item drive, implement → check → review → land, first move to exit (medians of 3):"
    );
    println!(
        "  this build                  {:>8.0} ms",
        now.as_secs_f64() * 1000.0
    );
    if let Some(before) = &before {
        let then = median(then);
        println!(
            "  {}  {:>8.0} ms  ratio {:.2}",
            before.display(),
            then.as_secs_f64() * 1000.0,
            now.as_secs_f64() / then.as_secs_f64()
        );
    }
}

/// A one-item drive whose agent runs `script` (sh, in the lane): the drive's exit code,
/// its wall time, and the peak resident memory of stet and its waited-for children (git).
fn heavy_lane(script: &str) -> (i32, Duration, i64) {
    let root = tempfile::tempdir().unwrap();
    let agent = root.path().join("heavy-agent.sh");
    stet_exec_support::write_executable(
        &agent,
        format!(
            "#!/bin/sh\nif [ \"$STET_ROLE\" = review ]; then echo LAND; exit 0; fi\n{script}\n"
        )
        .as_bytes(),
    )
    .unwrap();
    let (work, plugins) = drive_setup(root.path(), 1, 0, &release_dir(), "");
    let config = root.path().join(".config/stet/config.toml");
    let text = std::fs::read_to_string(&config).unwrap().replace(
        &repo_root()
            .join("examples/agent/agent.sh")
            .display()
            .to_string(),
        &agent.display().to_string(),
    );
    std::fs::write(&config, text).unwrap();
    let start = Instant::now();
    // Reaped by wait4 below, which clippy cannot see. (This bench process is small when it
    // spawns the drive — it runs first —, so the spawner's memory Linux folds into the
    // child's high-water mark is a few MiB at most.)
    #[allow(clippy::zombie_processes)]
    let child = stet_drive(&release_dir(), root.path(), &work, &plugins, 1)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    // SAFETY: waits for our own child, with pointers to live locals.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (code, start.elapsed(), usage.ru_maxrss)
}

fn heavy_lanes() {
    println!("lanes made heavy by the agent: stet's and its git children's peak memory");
    for (what, script) in [
        ("a 20 GiB sparse file", "truncate -s 20G sparse.bin"),
        (
            "three 400 MB sparse files",
            "for n in 1 2 3; do truncate -s 400M hole-$n.bin; done",
        ),
        (
            "100,000 small files",
            "mkdir -p many && cd many && seq 100000 | split -l 1 -a 5 -",
        ),
    ] {
        let (code, took, peak) = heavy_lane(script);
        println!(
            "  {what:<28} peak {:>6.1} MiB  {:>7.1} s  (drive exit {code})",
            peak as f64 / 1024.0,
            took.as_secs_f64()
        );
    }
}

fn main() {
    if std::env::var_os("STET_BENCH_ONLY_STAGES").is_some() {
        return stages();
    }
    if std::env::var_os("STET_BENCH_ONLY_HEAVY").is_some() {
        return heavy_lanes();
    }
    heavy_lanes();
    stages();
    history();
    bookkeeping();
    let (small_t, small_rss) = whole_drive(100);
    let (large_t, large_rss) = whole_drive(ITEMS);
    println!("stet drive --cap 1 (the selected runtime, command harness, example agent):");
    println!(
        "  100 queued items     {:>8.0} ms  peak RSS {:.1} MiB",
        small_t.as_secs_f64() * 1000.0,
        small_rss as f64 / 1024.0
    );
    println!(
        "  {ITEMS} queued items  {:>8.0} ms  peak RSS {:.1} MiB",
        large_t.as_secs_f64() * 1000.0,
        large_rss as f64 / 1024.0
    );
}
