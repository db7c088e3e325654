//! Lane benchmarks (run with `cargo xtask bench`): what opening a lane costs in a large
//! repository, against `git worktree add` on the same repository in the same run.
//!
//! The repository is generated with `git fast-import`: 50,000 files in its tree, 20,000
//! commits of history. Measured, two interleaved repetitions each:
//!
//! - the anchor: `git worktree add --detach` (and its disk: the working tree and its
//!   administrative directory), removed again between repetitions;
//! - the first lane of a clone (nothing pooled): `lanes::open`, and its disk;
//! - every later lane: the last lane retires (lands) into the pool with one file of the
//!   agent's work committed, and the next item's lane is opened from it;
//! - a lane put back to its commit (what happens before every call and check), without a
//!   seed and with one shaped like a Rust crate's (`url` 2.5.4's `target` and `CARGO_HOME`
//!   after its tests were built: 4,900 files, 390 MiB), against `cp -a` of the same seed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use stet_cli::lanes;

const FILES: usize = 50_000;
const COMMITS: usize = 20_000;

/// The host's own git runner (a fixed identity, no prompt), failing the bench on an error.
fn git(dir: &Path, args: &[&str]) -> String {
    stet_cli::git::run(dir, args).unwrap_or_else(|e| panic!("{e}"))
}

/// A repository of `FILES` files (in 500 directories) and `COMMITS` commits, each after the
/// first changing one file, with an empty bare remote as `origin`.
fn generate(root: &Path) -> PathBuf {
    let work = root.join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "--quiet", "-b", "main"]);
    let bare = root.join("remote.git");
    git(root, &["init", "--quiet", "--bare", bare.to_str().unwrap()]);
    git(&work, &["remote", "add", "origin", bare.to_str().unwrap()]);
    let mut import = Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(&work)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = std::io::BufWriter::new(import.stdin.take().unwrap());
    let mut commit = |n: usize, files: &mut dyn Iterator<Item = (String, String)>| {
        let message = format!("commit {n}");
        write!(
            input,
            "commit refs/heads/main\ncommitter b <b@b> {} +0000\ndata {}\n{message}\n",
            1_700_000_000 + n,
            message.len()
        )
        .unwrap();
        for (path, content) in files {
            write!(
                input,
                "M 100644 inline {path}\ndata {}\n{content}\n",
                content.len()
            )
            .unwrap();
        }
        writeln!(input).unwrap();
    };
    let path = |f: usize| format!("dir{:03}/file{f:05}.txt", f % 500);
    commit(
        0,
        &mut (0..FILES).map(|f| (path(f), format!("file {f}, version 0\n"))),
    );
    for n in 1..COMMITS {
        let f = (n * 7919) % FILES;
        commit(
            n,
            &mut std::iter::once((path(f), format!("file {f}, version {n}\n"))),
        );
    }
    drop(input);
    assert!(import.wait().unwrap().success(), "git fast-import failed");
    git(&work, &["reset", "--quiet", "--hard", "main"]);
    git(&work, &["gc", "--quiet"]);
    work
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / (1 << 20) as f64)
}

fn main() {
    let root = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let work = generate(root.path());
    println!(
        "generated {FILES} files, {COMMITS} commits in {}",
        secs(t.elapsed())
    );
    let git_dir = work.join(".git");
    let mut worktree_t = Vec::new();
    let mut worktree_disk = 0;
    let mut first_t = Vec::new();
    let mut first_disk = 0;
    let mut later_t = Vec::new();
    let mut later_disk = 0;
    let mut ready_t = Vec::new();
    // Nothing is deleted until the end: a checkout right after 50,000 files were deleted
    // runs several times slower on this machine's ext4, which would measure the deletion.
    let mut lanes_made = Vec::new();
    for rep in 0..2 {
        // The anchor.
        let tree = root.path().join(format!("worktree-{rep}"));
        let t = Instant::now();
        git(
            &work,
            &[
                "worktree",
                "add",
                "--quiet",
                "--detach",
                tree.to_str().unwrap(),
            ],
        );
        worktree_t.push(t.elapsed());
        let admin = git_dir.join("worktrees").join(format!("worktree-{rep}"));
        worktree_disk = stet_cli::files::tree_size(&tree, u64::MAX)
            + stet_cli::files::tree_size(&admin, u64::MAX);

        // The first lane, with nothing pooled.
        lanes::clear_pool(&work).unwrap();
        let t = Instant::now();
        let mut lane = lanes::open(&work, "origin", &format!("first-{rep}"), "HEAD", None).unwrap();
        first_t.push(t.elapsed());
        first_disk = stet_cli::files::tree_size(lane.dir.parent().unwrap(), u64::MAX);

        // Later lanes, each made from the last one's pooled copy.
        for n in 0..3 {
            std::fs::write(lane.dir.join(format!("work-{n}.txt")), "the agent's work\n").unwrap();
            lane.commit_all("work").unwrap();
            let base = git(&work, &["rev-parse", "HEAD"]);
            let t = Instant::now();
            lane.retire(1, Some(base.trim()));
            lanes::pool_ready();
            ready_t.push(t.elapsed());
            let t = Instant::now();
            lane = lanes::open(&work, "origin", &format!("later-{rep}-{n}"), "HEAD", None).unwrap();
            later_t.push(t.elapsed());
            later_disk = stet_cli::files::tree_size(lane.dir.parent().unwrap(), u64::MAX);
        }
        lanes_made.push(lane);
    }
    let seeded = seed_restores(&work, lanes_made.last().unwrap());
    let (worktree, first, later) = (median(worktree_t), median(first_t), median(later_t));
    println!("lanes in a {FILES}-file, {COMMITS}-commit repository (medians of 2 / 2 / 6):");
    println!(
        "  git worktree add (anchor)   {:>8}  disk {}",
        secs(worktree),
        mib(worktree_disk)
    );
    println!(
        "  first lane (nothing pooled) {:>8}  disk {}  {:.2}x the anchor",
        secs(first),
        mib(first_disk),
        first.as_secs_f64() / worktree.as_secs_f64()
    );
    println!(
        "  later lane (from the pool)  {:>8}  disk {}",
        secs(later),
        mib(later_disk)
    );
    println!(
        "  a landed lane made ready for the pool (off the drive's path: its item's objects dropped) {:>8}",
        secs(median(ready_t))
    );
    let (bare, with_seed, copy, bytes) = seeded;
    println!(
        "a lane put back to its commit (medians of 3), the seed {}:",
        mib(bytes)
    );
    println!("  without a seed              {:>8}", secs(bare));
    println!(
        "  with its copy of the seed   {:>8}  {:+.2} s over without",
        secs(with_seed),
        with_seed.as_secs_f64() - bare.as_secs_f64()
    );
    println!("  cp -a of the seed (anchor)  {:>8}", secs(copy));
}

/// A seed shaped like a built Rust crate's: many small files and some large ones.
fn seed_like_a_crates(repo: &Path) -> lanes::Lane {
    let made = repo.join("../seed-made");
    for n in 0..4_800 {
        let dir = made.join(format!("target/debug/deps/d{:02}", n % 40));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{n}.rmeta")), vec![b'x'; 8 << 10]).unwrap();
    }
    for n in 0..100 {
        let dir = made.join(".cargo-home/registry/cache");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("c{n}.crate")), vec![b'y'; 3_500 << 10]).unwrap();
    }
    let setup = stet_cli::config::Setup {
        commands: vec!["cargo test --no-run".into()],
        inputs: Vec::new(),
        outputs: vec!["target".into(), ".cargo-home".into()],
        network: Vec::new(),
    };
    let key = stet_cli::seeds::key(repo, &setup, "bench", "HEAD").unwrap();
    let seed = stet_cli::seeds::Seed {
        key,
        base: "HEAD".into(),
        commands: setup.commands.clone(),
        image: "bench".into(),
        outputs: setup.outputs.clone(),
        bytes: 0,
        entries: 0,
        built_unix_ms: 0,
        took_ms: 0,
    };
    let seed = stet_cli::seeds::keep(repo, &made, seed, stet_cli::seeds::Limit::NONE).unwrap();
    let lane = lanes::open(repo, "origin", "seeded", "HEAD", None).unwrap();
    stet_cli::seeds::give(lane.dir.parent().unwrap(), &seed).unwrap();
    lane
}

/// Restores of `plain` (no seed) and of a seeded lane, and `cp -a` of the seed, three
/// interleaved repetitions each: their medians and the seed's size.
fn seed_restores(repo: &Path, plain: &lanes::Lane) -> (Duration, Duration, Duration, u64) {
    let seeded = seed_like_a_crates(repo);
    let seed = stet_cli::seeds::all(repo).pop().unwrap();
    let kept = stet_cli::seeds::seed_dir(repo, &seed.key).join("outputs");
    let (mut bare, mut with_seed, mut copy) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..3 {
        let t = Instant::now();
        plain.restore().unwrap();
        bare.push(t.elapsed());
        let t = Instant::now();
        seeded.restore().unwrap();
        with_seed.push(t.elapsed());
        let to = repo.join(format!("../seed-copy-{rep}"));
        let t = Instant::now();
        let copied = Command::new("cp")
            .arg("-a")
            .arg(&kept)
            .arg(&to)
            .status()
            .unwrap();
        copy.push(t.elapsed());
        assert!(copied.success());
    }
    (median(bare), median(with_seed), median(copy), seed.bytes)
}
