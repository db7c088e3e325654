//! gvisor against the other runtimes, in one run (`cargo xtask bench`, which builds the
//! release binaries, the bubblewrap example into `target/examples`, and installs runsc).
//! Everything goes through the real release `stet` binary, each runtime installed alone in
//! a plugins directory (and a home) of its own, so that each `stet run` probes only the
//! runtime it measures. A backend that is missing or fails its warm-up is skipped, and the
//! reason is printed in its place.
//!
//! 1. Start-up: `stet run -- true` on gvisor, docker and bubblewrap, and the anchor
//!    `runsc --network=none do true` (runsc's own quickest sandbox: no image, no mounts),
//!    interleaved after warm-ups; each against docker as the median of per-round ratios.
//!    (stet reuses a probe's answer for 30 s, so now and then a run includes its probe, as
//!    a person's would.)
//! 2. The first use of an image: `stet run -- true` on gvisor with an empty image cache (a
//!    fresh home: the image is unpacked from Docker's store) and then warm.
//! 3. 1 GiB of output, `head -c 1G /dev/zero` to /dev/null, gvisor against docker: wall
//!    time, throughput, and the stet process's peak memory.
//! 4. A 3-item drive (the command harness, the example agent, a check) on gvisor and on
//!    docker: wall time, its start-up (to the first item's reservation), and each stage's
//!    time, from the receipts.
//!
//! Environment: `STET_BENCH_RUNS` (start-up rounds, 15), `STET_BENCH_DRIVES` (drives per
//! runtime, 3), `STET_BENCH_BUBBLEWRAP_DIR` (where the bubblewrap example was built,
//! default `target/examples/release`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// stet's lane image, which docker and gvisor start from (bubblewrap runs on the host's).
const IMAGE: &str = "stet-lane:1";
const WARM_UPS: usize = 2;
const MIB: f64 = (1u64 << 20) as f64;

/// Where cargo put this bench and the release build it measures (`target/release`).
fn release_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The plugin called `name` among the plugin crates under `dir` of the repository.
fn plugin(dir: &str, name: &str) -> Result<xtask::PluginCrate, String> {
    xtask::plugin_crates(&xtask::repo_root().join(dir))
        .into_iter()
        .find(|p| p.name == name)
        .ok_or_else(|| format!("there is no plugin {name} under {dir}/"))
}

/// A home of its own for `stet`, with `plugins` (each built into the directory beside it)
/// installed in its plugins directory and nothing else.
fn home_with(plugins: &[(&xtask::PluginCrate, &Path)]) -> Result<TempDir, String> {
    let home = tempfile::Builder::new()
        .prefix("stet-bench-gvisor-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    std::fs::create_dir_all(home.path().join("work")).map_err(|e| e.to_string())?;
    for (plugin, built) in plugins {
        xtask::install_plugin(plugin, built, &home.path().join("plugins")).map_err(|e| {
            format!(
                "{} is not built in {} ({e}): run `cargo xtask bench`",
                plugin.name,
                built.display()
            )
        })?;
    }
    Ok(home)
}

/// `stet ARGS` in an environment made from scratch whose home is `home`; output dropped.
fn stet(home: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(release_dir().join("stet"));
    command
        .env_clear()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .current_dir(home.join("work"))
        .arg("--plugins-dir")
        .arg(home.join("plugins"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(host) = std::env::var_os("DOCKER_HOST") {
        command.env("DOCKER_HOST", host);
    }
    command
}

/// Runs `command` to its end: its wall time and the peak resident memory of its own
/// process (VmHWM, sampled every 5 ms; the mark only grows, so the last reading is the
/// peak), or why it failed.
fn measure(command: &mut Command) -> Result<(Duration, u64), String> {
    let started = Instant::now();
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot run {command:?}: {e}"))?;
    // A thread drains stderr, so a chatty failure cannot block the child on a full pipe.
    let stderr = child.stderr.take().map(|mut pipe| {
        std::thread::spawn(move || {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut pipe, &mut text).ok();
            text
        })
    });
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0u64;
    let status = loop {
        if let Some(kib) = std::fs::read_to_string(&status_file).ok().and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        }) {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let elapsed = started.elapsed();
    let said = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    if !status.success() {
        let program = command.get_program().to_string_lossy();
        let args: Vec<_> = command.get_args().map(|a| a.to_string_lossy()).collect();
        return Err(format!(
            "`{program} {}` failed ({status}): {}",
            args.join(" "),
            said.trim()
        ));
    }
    Ok((elapsed, peak_kib * 1024))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

fn median(values: &[f64]) -> f64 {
    let v = sorted(values);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The nearest-rank 90th percentile.
fn p90(values: &[f64]) -> f64 {
    let v = sorted(values);
    v[((v.len() as f64 * 0.9).ceil() as usize).clamp(1, v.len()) - 1]
}

/// One way of starting a sandbox that runs `true`, timed round by round.
struct Starter {
    label: String,
    command: Box<dyn Fn() -> Command>,
    /// Milliseconds, one per round (a failed round leaves a NaN, so rounds stay paired).
    times: Vec<f64>,
    _home: Option<TempDir>,
}

/// `stet run --runtime NAME --image IMAGE -- true`, the runtime alone in its home.
fn stet_starter(
    name: &str,
    image: &str,
    plugin: Result<xtask::PluginCrate, String>,
    built: &Path,
) -> Result<Starter, String> {
    let plugin = plugin?;
    let home = home_with(&[(&plugin, built)])?;
    let (path, name, image) = (
        home.path().to_path_buf(),
        name.to_string(),
        image.to_string(),
    );
    Ok(Starter {
        label: format!("stet run, {name}"),
        command: Box::new(move || {
            stet(
                &path,
                &["run", "--runtime", &name, "--image", &image, "--", "true"],
            )
        }),
        times: Vec::new(),
        _home: Some(home),
    })
}

fn startup(bubblewrap_dir: &Path) {
    let runs = env_number("STET_BENCH_RUNS", 15);
    let candidates = [
        stet_starter("gvisor", IMAGE, plugin("plugins", "gvisor"), &release_dir()),
        stet_starter("docker", IMAGE, plugin("plugins", "docker"), &release_dir()),
        stet_starter(
            "bubblewrap",
            "host",
            plugin("examples", "bubblewrap"),
            bubblewrap_dir,
        ),
        Ok(Starter {
            label: "runsc --network=none do true".into(),
            command: Box::new(|| {
                let mut command = Command::new("runsc");
                command
                    .args(["--network=none", "do", "true"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped());
                command
            }),
            times: Vec::new(),
            _home: None,
        }),
    ];
    let names = ["gvisor", "docker", "bubblewrap", "runsc do"];
    let mut starters = Vec::new();
    let mut skipped = Vec::new();
    'candidate: for (name, candidate) in names.iter().zip(candidates) {
        match candidate {
            Ok(s) => {
                // The warm-ups also check that the side works at all.
                for _ in 0..WARM_UPS {
                    if let Err(why) = measure(&mut (s.command)()) {
                        skipped.push(format!("{name} skipped: {why}"));
                        continue 'candidate;
                    }
                }
                starters.push(s);
            }
            Err(why) => skipped.push(format!("{name} skipped: {why}")),
        }
    }
    for _ in 0..runs {
        for s in starters.iter_mut() {
            let took = measure(&mut (s.command)());
            if let Err(why) = &took {
                eprintln!("{}: {why}", s.label);
            }
            s.times.push(took.map_or(f64::NAN, |(t, _)| ms(t)));
        }
    }
    println!(
        "\nstart-up: a sandbox that runs `true`, {runs} interleaved rounds after {WARM_UPS} warm-ups; \
         ratio: the median of the per-round ratios to docker's run"
    );
    println!(
        "{:<32} {:>9} {:>9}  ratio to docker",
        "what", "median", "p90"
    );
    let docker = starters.iter().position(|s| s.label.ends_with("docker"));
    for s in &starters {
        let ok: Vec<f64> = s.times.iter().copied().filter(|t| t.is_finite()).collect();
        if ok.is_empty() {
            println!("{:<32} every round failed", s.label);
            continue;
        }
        let ratio = docker.map(|d| {
            let ratios: Vec<f64> = s
                .times
                .iter()
                .zip(&starters[d].times)
                .map(|(a, b)| a / b)
                .filter(|r| r.is_finite())
                .collect();
            median(&ratios)
        });
        println!(
            "{:<32} {:>6.0} ms {:>6.0} ms  {}",
            s.label,
            median(&ok),
            p90(&ok),
            ratio.map_or("—".into(), |r| format!("{r:.2}"))
        );
    }
    for why in skipped {
        println!("{why}");
    }
}

/// The bytes the cache in `home` says it unpacked (its `<id>/image.json`).
fn unpacked_bytes(home: &Path) -> Option<u64> {
    let cache = home.join(".cache/stet/gvisor");
    std::fs::read_dir(cache).ok()?.flatten().find_map(|entry| {
        let about = std::fs::read_to_string(entry.path().join("image.json")).ok()?;
        let about: serde_json::Value = serde_json::from_str(&about).ok()?;
        about["bytes"].as_u64()
    })
}

fn first_use() {
    let gvisor = match plugin("plugins", "gvisor") {
        Ok(p) => p,
        Err(why) => return println!("\nfirst use skipped: {why}"),
    };
    let (mut cold, mut warm, mut bytes) = (Vec::new(), Vec::new(), None);
    for _ in 0..3 {
        // A fresh home each round: its image cache is empty.
        let home = match home_with(&[(&gvisor, &release_dir())]) {
            Ok(h) => h,
            Err(why) => return println!("\nfirst use skipped: {why}"),
        };
        let run = || {
            measure(&mut stet(
                home.path(),
                &["run", "--runtime", "gvisor", "--image", IMAGE, "--", "true"],
            ))
        };
        match (run(), run()) {
            (Ok((c, _)), Ok((w, _))) => {
                cold.push(ms(c));
                warm.push(ms(w));
                bytes = unpacked_bytes(home.path()).or(bytes);
            }
            (Err(why), _) | (_, Err(why)) => return println!("\nfirst use skipped: {why}"),
        }
    }
    println!(
        "\nfirst use of an image on gvisor: `stet run -- true` with an empty image cache (a \
         fresh home), then again warm; 3 rounds"
    );
    println!("{:<32} {:>9} {:>9}", "what", "median", "max");
    for (what, times) in [("empty cache (unpacks)", &cold), ("warm cache", &warm)] {
        let max = sorted(times).last().copied().unwrap_or(f64::NAN);
        println!("{what:<32} {:>6.0} ms {max:>6.0} ms", median(times));
    }
    let cost = median(&cold) - median(&warm);
    match bytes {
        Some(b) => println!(
            "the unpack: {cost:.0} ms for {:.0} MiB of {IMAGE}'s file system ({:.0} MiB/s)",
            b as f64 / MIB,
            b as f64 / MIB / (cost / 1000.0)
        ),
        None => println!("the unpack: {cost:.0} ms (the cache said no size)"),
    }
}

fn gigabyte() {
    let sides: Vec<(&str, Result<TempDir, String>)> = ["gvisor", "docker"]
        .into_iter()
        .map(|name| {
            (
                name,
                plugin("plugins", name).and_then(|p| home_with(&[(&p, &release_dir())])),
            )
        })
        .collect();
    let mut results: BTreeMap<&str, Vec<(f64, u64)>> = BTreeMap::new();
    let mut skipped = Vec::new();
    for _ in 0..3 {
        for (name, home) in &sides {
            let home = match home {
                Ok(h) => h,
                Err(why) => {
                    skipped.push(format!("{name} skipped: {why}"));
                    continue;
                }
            };
            let args = [
                "run",
                "--runtime",
                name,
                "--image",
                IMAGE,
                "--",
                "head",
                "-c",
                "1G",
                "/dev/zero",
            ];
            match measure(&mut stet(home.path(), &args)) {
                Ok((t, peak)) => results.entry(name).or_default().push((ms(t), peak)),
                Err(why) => skipped.push(format!("{name}: {why}")),
            }
        }
    }
    println!(
        "\n1 GiB of output: `stet run -- head -c 1G /dev/zero` to /dev/null, 3 interleaved rounds; \
         peak memory: the stet process's own"
    );
    println!(
        "{:<12} {:>10} {:>10} {:>14}",
        "runtime", "median", "MiB/s", "stet peak RSS"
    );
    for (name, runs) in &results {
        let times: Vec<f64> = runs.iter().map(|r| r.0).collect();
        let peak = runs.iter().map(|r| r.1).max().unwrap_or(0);
        let t = median(&times);
        println!(
            "{name:<12} {:>7.0} ms {:>10.0} {:>10.1} MiB",
            t,
            1024.0 / (t / 1000.0),
            peak as f64 / MIB
        );
    }
    skipped.sort();
    skipped.dedup();
    for why in skipped {
        println!("{why}");
    }
}

fn git(dir: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// One drive's wall time and each stage's times (milliseconds, by role).
struct Drive {
    wall: f64,
    stages: BTreeMap<String, Vec<f64>>,
}

/// A 3-item drive on `runtime` (alone, beside the command harness) with the example agent
/// and a check, from a clone of a fresh bare remote whose items were added with `stet add`.
/// `cache` is a warm gvisor image cache to share, so the drive does not time an unpack.
fn drive(runtime: &str, cache: &Path) -> Result<Drive, String> {
    let built = release_dir();
    let (runtime_plugin, command) = (plugin("plugins", runtime)?, plugin("plugins", "command")?);
    let home = home_with(&[(&runtime_plugin, &built), (&command, &built)])?;
    let (root, work) = (home.path(), home.path().join("work"));
    let bare = root.join("remote.git");
    git(
        root,
        &["init", "--quiet", "--bare", &bare.to_string_lossy()],
    )?;
    git(&work, &["init", "--quiet", "--initial-branch", "main"])?;
    git(&work, &["remote", "add", "origin", &bare.to_string_lossy()])?;
    std::fs::write(work.join("README"), "bench\n").map_err(|e| e.to_string())?;
    git(&work, &["add", "."])?;
    git(&work, &["commit", "--quiet", "-m", "start"])?;
    git(
        &work,
        &["push", "--quiet", "origin", "HEAD:refs/heads/main"],
    )?;
    for n in 0..3 {
        let text = format!("Item {n}\n\nwrite out-{n}.txt: item {n} was here\n");
        measure(&mut stet(root, &["add", &text]))?;
    }
    git(&work, &["add", "."])?;
    git(&work, &["commit", "--quiet", "-m", "queue"])?;
    git(
        &work,
        &["push", "--quiet", "origin", "HEAD:refs/heads/main"],
    )?;
    // The person's own configuration (trusted as it is, where a repository's stet.toml
    // would need `stet trust`).
    let config = root.join(".config/stet/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).map_err(|e| e.to_string())?;
    std::fs::write(
        &config,
        format!(
            "[harness]\nprefer = [\"command\"]\nprofiles = \"{}\"\n\n[plugins.command]\n\
             implement = [\"{}\"]\n\n[drive]\ncheck = \"ls out-*.txt\"\n",
            root.join("profiles").display(),
            xtask::repo_root().join("examples/agent/agent.sh").display()
        ),
    )
    .map_err(|e| e.to_string())?;
    let mut drive = stet(
        root,
        &["drive", "--yes", "--cap", "3", "--runtime", runtime],
    );
    drive.env("XDG_CACHE_HOME", cache);
    let (wall, start_up) = timed_drive(&mut drive)?;
    let out = stet(root, &["receipts", "--json"])
        .stdout(Stdio::piped())
        .output()
        .map_err(|e| e.to_string())?;
    let receipts: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("stet receipts --json: {e}"))?;
    let mut stages: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in receipts["receipts"].as_array().into_iter().flatten() {
        if let (Some(role), Some(start), Some(end)) = (
            r["role"].as_str(),
            r["started_unix_ms"].as_u64(),
            r["ended_unix_ms"].as_u64(),
        ) {
            stages
                .entry(role.to_string())
                .or_default()
                .push(end.saturating_sub(start) as f64);
        }
    }
    let implemented = stages.get("implement").map_or(0, Vec::len);
    if implemented < 3 {
        return Err(format!(
            "the drive on {runtime} made {implemented} implementing calls, not 3"
        ));
    }
    stages.insert("start-up".into(), vec![ms(start_up)]);
    Ok(Drive {
        wall: ms(wall),
        stages,
    })
}

/// Runs a drive: its wall time, and its start-up (probes, the walls' proof: no receipt
/// records it) to the moment it says the first item's reservation.
fn timed_drive(drive: &mut Command) -> Result<(Duration, Duration), String> {
    use std::io::BufRead;
    let started = Instant::now();
    let mut child = drive.spawn().map_err(|e| e.to_string())?;
    let (mut start_up, mut said) = (None, String::new());
    for line in std::io::BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.map_err(|e| e.to_string())?;
        if start_up.is_none() && line.contains(": reserved; lane ") {
            start_up = Some(started.elapsed());
        }
        said.push_str(&line);
        said.push('\n');
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    let wall = started.elapsed();
    match start_up {
        Some(start_up) if status.success() => Ok((wall, start_up)),
        _ => Err(format!("stet drive failed ({status}):\n{said}")),
    }
}

fn drives() {
    let count = env_number("STET_BENCH_DRIVES", 3);
    // gvisor's image cache, warmed once here: the first use is measured above.
    let cache = match tempfile::tempdir() {
        Ok(c) => c,
        Err(why) => return println!("\ndrives skipped: {why}"),
    };
    let warmed = plugin("plugins", "gvisor")
        .and_then(|p| home_with(&[(&p, &release_dir())]))
        .and_then(|home| {
            let args = ["run", "--runtime", "gvisor", "--image", IMAGE, "--", "true"];
            measure(stet(home.path(), &args).env("XDG_CACHE_HOME", cache.path()))
        });
    if let Err(why) = warmed {
        println!("\n(gvisor's image cache could not be warmed for the drives: {why})");
    }
    let runtimes = ["gvisor", "docker"];
    let mut done: BTreeMap<&str, Vec<Drive>> = BTreeMap::new();
    let mut skipped = Vec::new();
    for _ in 0..count {
        for runtime in runtimes {
            match drive(runtime, cache.path()) {
                Ok(d) => done.entry(runtime).or_default().push(d),
                Err(why) => skipped.push(format!("{runtime}: {why}")),
            }
        }
    }
    println!(
        "\na 3-item drive (`stet drive --yes --cap 3`, the command harness, the example agent, \
         a check), {count} drives each, interleaved; the drive's wall time, and each stage's \
         time from its receipt (start to end; the start-up, probes and the walls' proof, to the \
         first reservation said), medians over every item of every drive"
    );
    println!(
        "{:<24} {:>10} {:>10} {:>8}",
        "what", "gvisor", "docker", "ratio"
    );
    let row = |what: &str, of: &dyn Fn(&[Drive]) -> Vec<f64>| {
        let [g, d] = runtimes.map(|r| {
            let values = done.get(r).map(|v| of(v)).unwrap_or_default();
            (!values.is_empty()).then(|| median(&values))
        });
        let cell = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:.0} ms"));
        let ratio = g
            .zip(d)
            .map_or("—".into(), |(g, d)| format!("{:.2}", g / d));
        println!("{what:<24} {:>10} {:>10} {ratio:>8}", cell(g), cell(d));
    };
    row("whole drive", &|ds| ds.iter().map(|d| d.wall).collect());
    for role in ["start-up", "implement", "check", "review"] {
        let label = match role {
            "start-up" => "start-up to 1st move".to_string(),
            stage => format!("stage: {stage}"),
        };
        row(&label, &|ds| {
            ds.iter()
                .flat_map(|d| d.stages.get(role).cloned().unwrap_or_default())
                .collect()
        });
    }
    for why in skipped {
        println!("{why}");
    }
}

fn main() {
    // `cargo bench` passes `--bench`, and `cargo test --benches` `--list` or a filter;
    // nothing here is a test, and nothing is timed then.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let stet_bin = release_dir().join("stet");
    if !stet_bin.is_file() {
        eprintln!("{} is missing: run `cargo xtask bench`", stet_bin.display());
        std::process::exit(1);
    }
    let bubblewrap_dir = std::env::var_os("STET_BENCH_BUBBLEWRAP_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| xtask::repo_root().join("target/examples/release"));
    println!(
        "gvisor against the other runtimes ({}, {} cores)",
        stet_bin.display(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    startup(&bubblewrap_dir);
    first_use();
    gigabyte();
    drives();
}
