//! `cargo xtask dist | install | test | docs | bench | demo | screenshots`.

mod screenshots;

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask")]
struct Args {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Build release binaries and lay out dist/bin/stet and dist/lib/stet/plugins/<name>/.
    Dist {
        /// Where to put the tree.
        #[arg(long, default_value = "dist")]
        out: PathBuf,
    },
    /// Build release binaries and install PREFIX/bin/stet with its plugins under
    /// PREFIX/lib/stet/plugins (where that stet looks for them).
    Install {
        /// Where to install (default: ~/.local).
        #[arg(long, value_name = "DIR")]
        prefix: Option<PathBuf>,
    },
    /// Install what the tests need (the pinned Claude Code and Codex CLI, the lane image),
    /// build everything, run every test.
    Test {
        /// Extra arguments for `cargo test`.
        #[arg(last = true)]
        cargo_args: Vec<String>,
    },
    /// Regenerate docs/cli.md from the CLI definition.
    Docs,
    /// Build the release plugins (and the bubblewrap example), install runsc, and run the
    /// benchmarks: the host's and the proxy's, then gvisor against the other runtimes.
    Bench,
    /// Build the fuzz targets (fuzz/, cargo-fuzz on the nightly toolchain; cargo-fuzz is
    /// installed when missing) and run each for a while: a line per target with its
    /// executions and whether anything crashed. Exits non-zero on a crash.
    Fuzz {
        /// How long each target runs.
        #[arg(long, default_value_t = 60, value_name = "N")]
        seconds: u64,
        /// Each target stops after this many executions, if its time is not up first.
        #[arg(long, value_name = "N")]
        runs: Option<u64>,
        /// Build without AddressSanitizer: the targets are safe Rust, which the sanitizer
        /// checks little in, and run several times faster without it (for the long runs).
        #[arg(long)]
        no_sanitizer: bool,
        /// The targets to run (default: all of them).
        #[arg(value_name = "TARGET")]
        targets: Vec<String>,
    },
    /// Set up this checkout and run the main job: build dist/ and the lane image, make a
    /// scratch demo repository (three seeded items, a bare remote) under target/demo, and
    /// drive it with `dist/bin/stet drive --yes` and the example agent; then show where the
    /// landed branches and the receipts are.
    Demo {
        /// Drive with this harness instead (`claude`: the pinned Claude Code, installed into
        /// target/tools, on your walled profile; stet says how to log in when there is none).
        #[arg(long, value_name = "NAME")]
        harness: Option<String>,
    },
    /// Draw the board's pages into docs/board/*.png: build stet (debug) and the lane image,
    /// drive a demo repository (target/screenshots: three items landed, one failed, one
    /// open), serve it with `stet board` and open each page in headless Chromium, 1280 wide
    /// (the live page while a second drive works an item).
    Screenshots,
}

fn main() -> ExitCode {
    let root = xtask::repo_root();
    let result = match Args::parse().task {
        Task::Dist { out } => dist(&root, &root.join(out)),
        Task::Install { prefix } => install(&root, prefix),
        Task::Test { cargo_args } => test(&root, &cargo_args),
        Task::Docs => run(cargo(&root)
            .args([
                "test",
                "-q",
                "-p",
                "stet-cli",
                "--lib",
                "the_command_reference_is_current",
            ])
            .env("STET_WRITE_DOCS", "1"))
        .map_err(|e| format!("cannot write docs/cli.md: {e}")),
        Task::Demo { harness } => return demo(&root, harness.as_deref()),
        Task::Bench => bench(&root),
        Task::Screenshots => screenshots::screenshots(&root),
        Task::Fuzz {
            seconds,
            runs,
            no_sanitizer,
            targets,
        } => fuzz(
            &root,
            &Fuzzing {
                seconds,
                runs,
                no_sanitizer,
            },
            &targets,
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: &mut Command) -> Result<(), String> {
    let status = command
        .status()
        .map_err(|e| format!("cannot run {command:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{command:?} failed with {status}"))
    }
}

fn cargo(root: &std::path::Path) -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.current_dir(root);
    command
}

fn dist(root: &std::path::Path, out: &std::path::Path) -> Result<(), String> {
    // One build command for all members, so tokio and friends are compiled once with
    // unified features.
    let mut build = cargo(root);
    build.args(["build", "--release", "--package", "stet"]);
    for plugin in xtask::plugin_crates(&root.join("plugins")) {
        build.args(["--package", &package_name(&plugin.dir)?]);
    }
    run(&mut build)?;
    xtask::assemble_dist(&root.join("target/release"), out)
        .map_err(|e| format!("cannot lay out {}: {e}", out.display()))?;
    eprintln!(
        "dist: {}/bin/stet and {}/lib/stet/plugins/",
        out.display(),
        out.display()
    );
    Ok(())
}

fn install(root: &std::path::Path, prefix: Option<PathBuf>) -> Result<(), String> {
    let prefix = match prefix {
        Some(prefix) => prefix,
        None => std::env::var_os("HOME")
            .map(|home| PathBuf::from(home).join(".local"))
            .ok_or("HOME is not set; name where to install with --prefix DIR")?,
    };
    let prefix = if prefix.is_absolute() {
        prefix
    } else {
        std::env::current_dir()
            .map_err(|e| format!("cannot resolve {}: {e}", prefix.display()))?
            .join(prefix)
    };
    dist(root, &prefix)?;
    let bin = prefix.join("bin");
    let on_path = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir == bin));
    eprintln!("installed {}/stet (stet --version to check)", bin.display());
    if !on_path {
        eprintln!(
            "note: {} is not on your PATH; add it, e.g. export PATH=\"{}:$PATH\"",
            bin.display(),
            bin.display()
        );
    }
    Ok(())
}

fn bench(root: &std::path::Path) -> Result<(), String> {
    let mut build = cargo(root);
    build.args([
        "build",
        "--release",
        "--package",
        "stet",
        "--package",
        "stet-fixture-slow-but-fine",
    ]);
    for plugin in xtask::plugin_crates(&root.join("plugins")) {
        build.args(["--package", &package_name(&plugin.dir)?]);
    }
    run(&mut build)?;
    // The gvisor bench measures bubblewrap too: the out-of-tree example, built where
    // `cargo xtask test` builds the examples.
    run(cargo(root)
        .args([
            "build",
            "--release",
            "--manifest-path",
            "examples/bubblewrap-runtime/Cargo.toml",
        ])
        .env("CARGO_TARGET_DIR", root.join("target/examples")))?;
    run(&mut Command::new(root.join("scripts/build-image.sh")))?;
    // Without runsc the gvisor bench still runs, and says what it skipped and why.
    if let Err(why) = run(&mut Command::new(root.join("scripts/install-runsc.sh"))) {
        eprintln!("runsc is not installed ({why}): the gvisor bench skips it");
    }
    let mut bench = cargo(root);
    bench.args(["bench", "--package", "stet", "--package", "stet-egress"]);
    // The plugins bench probes every shipped plugin: each real harness finds its pinned
    // CLI on this PATH.
    let mut bench_path = Vec::new();
    for binary in [install_claude(root), install_codex(root)]
        .into_iter()
        .flatten()
    {
        bench_path.push(binary.parent().unwrap_or(root).display().to_string());
    }
    bench_path.extend(["/usr/bin".to_string(), "/bin".to_string()]);
    bench.env("BENCH_PATH", bench_path.join(":"));
    let others = run(&mut bench);
    // gvisor against the other runtimes runs even when a bench above failed: its figures
    // stand on their own, and the failure is still this command's.
    let gvisor = run(cargo(root).args([
        "bench",
        "--package",
        "stet-plugin-gvisor",
        "--bench",
        "compare",
    ]));
    others.and(gvisor)
}

/// `cargo xtask fuzz`: every target (or the ones named) for `seconds` each, seeded from
/// `fuzz/seeds/<target>` with `fuzz/dict/<target>.dict` where there is one; what they find
/// grows `fuzz/corpus/<target>` (not committed), a crash lands in `fuzz/artifacts/<target>`.
/// How long, and how, each fuzz target runs.
struct Fuzzing {
    seconds: u64,
    runs: Option<u64>,
    no_sanitizer: bool,
}

fn fuzz(root: &std::path::Path, how: &Fuzzing, wanted: &[String]) -> Result<(), String> {
    let dir = root.join("fuzz");
    let nightly = |args: &[&str]| {
        let mut command = Command::new("rustup");
        command
            .args(["run", "nightly", "cargo"])
            .args(args)
            .current_dir(&dir)
            // The outer cargo's choice of toolchain is not the fuzzers'.
            .env_remove("RUSTUP_TOOLCHAIN")
            .env_remove("CARGO")
            .env_remove("RUSTC");
        command
    };
    let has_fuzz = nightly(&["fuzz", "--version"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_fuzz {
        eprintln!("installing cargo-fuzz (crates.io)");
        run(nightly(&["install", "--locked", "cargo-fuzz"]).current_dir(root))?;
    }
    let all = fuzz_targets(&dir)?;
    let targets: Vec<String> = if wanted.is_empty() {
        all.clone()
    } else {
        for t in wanted {
            if !all.contains(t) {
                return Err(format!(
                    "no fuzz target {t}: the targets are {}",
                    all.join(", ")
                ));
            }
        }
        wanted.to_vec()
    };
    // `fuzz run` builds what it runs (a separate `fuzz build` would build with other flags,
    // and everything twice).
    let mut crashed = Vec::new();
    for target in &targets {
        let corpus = dir.join("corpus").join(target);
        std::fs::create_dir_all(&corpus)
            .map_err(|e| format!("cannot make {}: {e}", corpus.display()))?;
        let args = fuzz_run_args(&dir, how, target, &corpus);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = nightly(&args)
            .stdout(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("cannot run cargo fuzz: {e}"))?;
        let said = String::from_utf8_lossy(&out.stderr);
        let stat = |name: &str| {
            said.lines()
                .find_map(|l| l.strip_prefix(&format!("stat::{name}:")))
                .map(|v| v.trim().to_string())
                .unwrap_or_else(|| "?".into())
        };
        let executions = stat("number_of_executed_units");
        let artifact = said
            .lines()
            .find_map(|l| l.split("Test unit written to ").nth(1))
            .map(|a| a.trim().to_string());
        if out.status.success() {
            println!(
                "{target:<16} {executions:>12} executions ({}/s)   no crash",
                stat("average_exec_per_sec")
            );
        } else if artifact.is_none() {
            // Not a crash: the fuzzer could not run (a bad dictionary, a build failure).
            let why = said
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty() && !l.starts_with(' '))
                .unwrap_or("no reason given");
            return Err(format!(
                "the fuzz target {target} could not run: {why}\n{said}"
            ));
        } else {
            let artifact = artifact.unwrap_or_default();
            println!("{target:<16} {executions:>12} executions   CRASH: {artifact}");
            eprintln!(
                "{}",
                said.lines()
                    .filter(|l| !l.starts_with('#') && !l.starts_with("INFO"))
                    .take(40)
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            crashed.push(target.clone());
        }
    }
    if crashed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} crashed: {} (reproduce with `cd fuzz && cargo +nightly fuzz run TARGET ARTIFACT`)",
            crashed.len(),
            crashed.join(", ")
        ))
    }
}

/// `cargo fuzz run`'s arguments for `target` in the fuzz directory `dir`: its corpus, its
/// seeds and dictionary where it has them, `how`'s bounds.
fn fuzz_run_args(
    dir: &std::path::Path,
    how: &Fuzzing,
    target: &str,
    corpus: &std::path::Path,
) -> Vec<String> {
    let seeds = dir.join("seeds").join(target);
    let dict = dir.join("dict").join(format!("{target}.dict"));
    let mut args: Vec<String> = vec!["fuzz".into(), "run".into(), "-O".into()];
    if how.no_sanitizer {
        args.extend(["--sanitizer".into(), "none".into()]);
    }
    args.extend([target.to_string(), corpus.display().to_string()]);
    if seeds.is_dir() {
        args.push(seeds.display().to_string());
    }
    args.push("--".into());
    args.push(format!("-max_total_time={}", how.seconds));
    if let Some(runs) = how.runs {
        args.push(format!("-runs={runs}"));
    }
    args.push("-print_final_stats=1".into());
    // Inputs as large as what stet reads: a queue item, a config file, a record.
    args.push("-max_len=65536".into());
    if dict.is_file() {
        args.push(format!("-dict={}", dict.display()));
    }
    args
}

/// `dir/Cargo.toml`, read as TOML.
fn cargo_manifest(dir: &std::path::Path) -> Result<toml::Table, String> {
    let path = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    toml::from_str(&text).map_err(|e| format!("{} is not TOML: {e}", path.display()))
}

/// The fuzz targets: the `[[bin]]`s of fuzz/Cargo.toml.
fn fuzz_targets(dir: &std::path::Path) -> Result<Vec<String>, String> {
    let manifest = cargo_manifest(dir)?;
    let bins = manifest.get("bin").and_then(toml::Value::as_array);
    Ok(bins
        .into_iter()
        .flatten()
        .filter_map(|bin| bin.get("name")?.as_str().map(str::to_string))
        .collect())
}

fn package_name(dir: &std::path::Path) -> Result<String, String> {
    cargo_manifest(dir)?
        .get("package")
        .and_then(|package| package.get("name")?.as_str().map(str::to_string))
        .ok_or_else(|| format!("{}/Cargo.toml has no package name", dir.display()))
}

/// Runs scripts/install-claude.sh and returns the installed binary's path.
fn install_claude(root: &std::path::Path) -> Result<PathBuf, String> {
    install_tool(root, "scripts/install-claude.sh")
}

/// Runs scripts/install-codex.sh (the pinned Codex CLI, its whole bundled tree) and returns
/// the installed binary's path.
fn install_codex(root: &std::path::Path) -> Result<PathBuf, String> {
    install_tool(root, "scripts/install-codex.sh")
}

/// Runs an install script that prints the installed binary's path on its last line.
fn install_tool(root: &std::path::Path, script: &str) -> Result<PathBuf, String> {
    let install = Command::new(root.join(script))
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {script}: {e}"))?;
    if !install.status.success() {
        return Err(format!("{script} failed (see above)"));
    }
    let path = String::from_utf8_lossy(&install.stdout)
        .lines()
        .last()
        .unwrap_or("")
        .trim()
        .to_string();
    Ok(PathBuf::from(path))
}

fn demo(root: &std::path::Path, harness: Option<&str>) -> ExitCode {
    match demo_drive(root, harness) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The three items of the demo, in the example agent's instruction language.
const DEMO_ITEMS: [&str; 3] = [
    "Add a greeting\n\nwrite GREETING.md: Hello from a lane stet drove.",
    "Start a changelog\n\nwrite CHANGELOG.md: # Changelog\nappend CHANGELOG.md: - The demo drive landed this.",
    "Say in the README who drove it\n\nappend README.md: This repository was driven by stet.",
];

fn demo_drive(root: &std::path::Path, harness: Option<&str>) -> Result<ExitCode, String> {
    dist(root, &root.join("dist"))?;
    run(&mut Command::new(root.join("scripts/build-image.sh")))?;
    let mut path: Vec<PathBuf> =
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).collect();
    if harness == Some("claude") {
        let claude = install_claude(root)?;
        path.insert(0, claude.parent().unwrap_or(root).to_path_buf());
    }
    let path = std::env::join_paths(path).map_err(|e| e.to_string())?;
    let stet = root.join("dist/bin/stet");
    let repo = demo_repository(root, &stet, &root.join("target/demo"), harness, &DEMO_ITEMS)?;
    let remote = root.join("target/demo/remote.git");

    let mut drive = Command::new(&stet);
    drive
        .args(["drive", "--yes"])
        .current_dir(&repo)
        .env("PATH", &path);
    if let Some(harness) = harness {
        drive.args(["--harness", harness]);
    }
    eprintln!(
        "\nrunning: stet drive --yes{} (in {})",
        harness
            .map(|h| format!(" --harness {h}"))
            .unwrap_or_default(),
        repo.display()
    );
    let status = drive
        .status()
        .map_err(|e| format!("cannot run {}: {e}", stet.display()))?;
    eprintln!();
    let _ = Command::new(&stet).arg("queue").current_dir(&repo).status();
    let _ = Command::new(&stet)
        .arg("receipts")
        .current_dir(&repo)
        .status();
    eprintln!(
        "\nthe remote:   {}  (git -C {} branch --list 'stet/*')\n\
         the receipts: {}  (stet receipts --json, in {})",
        remote.display(),
        remote.display(),
        repo.join(".git/stet/receipts").display(),
        repo.display()
    );
    Ok(ExitCode::from(status.code().unwrap_or(1) as u8))
}

/// Git in `dir` as the demo's person.
pub(crate) fn demo_git(dir: &std::path::Path, args: &[&str]) -> Result<(), String> {
    run(Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "stet demo")
        .env("GIT_AUTHOR_EMAIL", "demo@stet.localhost")
        .env("GIT_COMMITTER_NAME", "stet demo")
        .env("GIT_COMMITTER_EMAIL", "demo@stet.localhost"))
}

/// Makes the demo's scratch repository afresh in `demo` (`demo/repo`, its bare remote
/// `demo/remote.git`, `demo/profiles` for the example agent): `stet.toml` naming the example
/// agent (or only the check, for another harness), trusted, and `items` queued, committed and
/// pushed. Returns the repository's path. `cargo xtask demo` and `cargo xtask screenshots`
/// both drive one.
pub(crate) fn demo_repository(
    root: &std::path::Path,
    stet: &std::path::Path,
    demo: &std::path::Path,
    harness: Option<&str>,
    items: &[&str],
) -> Result<PathBuf, String> {
    // A scratch repository and its bare remote, made afresh each time.
    if demo.exists() {
        std::fs::remove_dir_all(demo)
            .map_err(|e| format!("cannot clear {}: {e}", demo.display()))?;
    }
    let (remote, repo) = (demo.join("remote.git"), demo.join("repo"));
    std::fs::create_dir_all(demo).map_err(|e| e.to_string())?;
    let git = demo_git;
    git(demo, &["init", "--quiet", "--bare", "remote.git"])?;
    std::fs::create_dir_all(&repo).map_err(|e| e.to_string())?;
    git(&repo, &["init", "--quiet"])?;
    git(
        &repo,
        &["remote", "add", "origin", &remote.display().to_string()],
    )?;
    std::fs::write(repo.join("README.md"), "# A demo repository\n").map_err(|e| e.to_string())?;
    // The example agent drives by default, with its profile (its HOME) kept in the demo;
    // another harness runs on your own walled profile.
    let config = match harness {
        None | Some("command") => format!(
            "[harness]\nprefer = [\"command\"]\nprofiles = \"{profiles}\"\n\n\
             [plugins.command]\nimplement = [\"{agent}\"]\n\n\
             [drive]\ncheck = \"git diff --check HEAD~1\"\n",
            profiles = demo.join("profiles").display(),
            agent = root.join("examples/agent/agent.sh").display(),
        ),
        Some(_) => "[drive]\ncheck = \"git diff --check HEAD~1\"\n".to_string(),
    };
    std::fs::write(repo.join("stet.toml"), config).map_err(|e| e.to_string())?;
    // The repository's file names the agent to run: stet applies that only once the person
    // trusts the file's content, as they would after reading it.
    run(Command::new(stet).arg("trust").current_dir(&repo))?;
    for item in items {
        run(Command::new(stet).args(["add", item]).current_dir(&repo))?;
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    git(&repo, &["add", "."])?;
    git(
        &repo,
        &[
            "commit",
            "--quiet",
            "-m",
            "a demo repository with its items",
        ],
    )?;
    git(
        &repo,
        &["push", "--quiet", "--set-upstream", "origin", "HEAD"],
    )?;

    Ok(repo)
}

fn test(root: &std::path::Path, cargo_args: &[String]) -> Result<(), String> {
    let claude = install_claude(root)?;
    let codex = install_codex(root)?;
    // The lane image the sandbox tests run in; the script returns at once when it is loaded.
    run(&mut Command::new(root.join("scripts/build-image.sh")))?;
    // The bubblewrap runtime (an out-of-tree plugin in examples/) runs on bwrap.
    run(&mut Command::new(root.join("scripts/install-bwrap.sh")))?;
    // The gvisor runtime runs on runsc (pinned, from Debian's bookworm-backports).
    run(&mut Command::new(root.join("scripts/install-runsc.sh")))?;
    // The board's tests drive a real headless Chromium over WebDriver.
    run(&mut Command::new(root.join("scripts/install-chromium.sh")))?;
    run(cargo(root).args(["build", "--workspace", "--all-targets"]))?;
    let mut failed = Vec::new();
    // The guards that cost little: formatting and lints, for the workspace and the
    // out-of-tree examples. A failure is listed at the end; the tests still run.
    if run(cargo(root).args(["fmt", "--all", "--check"])).is_err() {
        failed.push("cargo fmt --check (run cargo fmt --all)".to_string());
    }
    if run(cargo(root).args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))
    .is_err()
    {
        failed.push("cargo clippy --workspace --all-targets -- -D warnings".to_string());
    }
    // The workspace, then the out-of-tree examples' own tests (their conformance kits run
    // in process there), sharing one target directory of their own.
    let mut totals = Totals::default();
    let mut workspace = cargo(root);
    workspace
        .args(["test", "--workspace", "--no-fail-fast"])
        .args(cargo_args)
        .env("STET_TEST_CLAUDE", &claude)
        .env("STET_TEST_CODEX", &codex);
    if !counted(&mut workspace, &mut totals)? {
        failed.push("the workspace's tests (every failing test is listed above)".to_string());
    }
    for example in ["examples/runtime-plugin", "examples/bubblewrap-runtime"] {
        let manifest = format!("{example}/Cargo.toml");
        if run(cargo(root).args(["fmt", "--check", "--manifest-path", &manifest])).is_err() {
            failed.push(format!("cargo fmt --check of {example}"));
        }
        if run(cargo(root)
            .args([
                "clippy",
                "--all-targets",
                "--manifest-path",
                &manifest,
                "--",
                "-D",
                "warnings",
            ])
            .env("CARGO_TARGET_DIR", root.join("target/examples")))
        .is_err()
        {
            failed.push(format!("cargo clippy of {example}"));
        }
        let mut tests = cargo(root);
        tests
            .args(["test", "--manifest-path", &format!("{example}/Cargo.toml")])
            .env("CARGO_TARGET_DIR", root.join("target/examples"));
        if !counted(&mut tests, &mut totals)? {
            failed.push(format!("the tests of {example}"));
        }
    }
    for ignored in &totals.ignored_names {
        println!("skipped: {ignored}");
    }
    println!(
        "tests: {} passed, {} failed, {} skipped ({} ignored, {} left out by name)",
        totals.passed,
        totals.failed,
        totals.ignored + totals.filtered_out,
        totals.ignored,
        totals.filtered_out
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("failed: {}", failed.join("; ")))
    }
}

/// What the `cargo test` runs of `cargo xtask test` counted, added up over every test
/// binary. A test that did not run is counted as skipped, never as passed: `#[ignore]`d
/// (listed by name, with its reason) or left out by name (`--skip`, a filter).
#[derive(Debug, Default, PartialEq)]
struct Totals {
    passed: u64,
    failed: u64,
    ignored: u64,
    filtered_out: u64,
    /// `NAME` or `NAME (why)` of each ignored test.
    ignored_names: Vec<String>,
}

impl Totals {
    /// Adds what one line of `cargo test`'s output says: a `test result:` line's counts,
    /// or a `test NAME ... ignored[, why]` line's name.
    fn add_line(&mut self, line: &str) {
        if let Some(rest) = line.strip_prefix("test result: ") {
            for part in rest.split(';') {
                let part = part.trim();
                let part = part.strip_suffix(" out").unwrap_or(part);
                let mut words = part.split_whitespace().rev();
                let (Some(kind), Some(count)) = (words.next(), words.next()) else {
                    continue;
                };
                let count: u64 = count.parse().unwrap_or(0);
                match kind {
                    "passed" => self.passed += count,
                    "failed" => self.failed += count,
                    "ignored" => self.ignored += count,
                    "filtered" => self.filtered_out += count,
                    _ => {}
                }
            }
        } else if let Some((name, after)) = line
            .strip_prefix("test ")
            .and_then(|rest| rest.split_once(" ... ignored"))
        {
            self.ignored_names.push(match after.strip_prefix(", ") {
                Some(why) => format!("{name} ({why})"),
                None => name.to_string(),
            });
        }
    }
}

/// Runs `cargo test`, passing its output through and adding its per-binary `test result:`
/// lines to `totals` (see [`Totals`]), so a run ends on one line that counts every test.
/// Returns whether it succeeded.
fn counted(command: &mut Command, totals: &mut Totals) -> Result<bool, String> {
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run cargo test: {e}"))?;
    let stdout = child.stdout.take().expect("piped");
    for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
        let line = line.map_err(|e| format!("reading cargo test output: {e}"))?;
        println!("{line}");
        totals.add_line(&line);
    }
    let status = child.wait().map_err(|e| format!("cargo test: {e}"))?;
    Ok(status.success())
}

#[cfg(test)]
mod tests {
    use super::Totals;

    #[test]
    fn a_test_that_did_not_run_is_counted_skipped_never_passed() {
        let mut totals = Totals::default();
        for line in [
            "test fine ... ok",
            "test apple::only_on_a_mac ... ignored, needs macOS 26 on Apple silicon",
            "test slow ... ignored",
            "test result: ok. 5 passed; 0 failed; 2 ignored; 0 measured; 3 filtered out; finished in 0.51s",
            "test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 2.00s",
            "test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 7 filtered out; finished in 0.00s",
        ] {
            totals.add_line(line);
        }
        assert_eq!(
            totals,
            Totals {
                passed: 6,
                failed: 1,
                ignored: 2,
                filtered_out: 10,
                ignored_names: vec![
                    "apple::only_on_a_mac (needs macOS 26 on Apple silicon)".to_string(),
                    "slow".to_string(),
                ],
            }
        );
    }
}
