//! `stet run -- true` on bubblewrap against Docker, through the real `stet` binary: the
//! whole command each time (probe in a child process, load, create, spawn, wait,
//! teardown), 15 runs each after 2 warm-ups, interleaved so both see the same machine.
//!
//! ```text
//! cargo build --release --workspace        # in stet's repository: stet and the docker plugin
//! scripts/build-image.sh                   # docker's side runs on stet's lane image
//! cd examples/bubblewrap-runtime && cargo bench --bench startup
//! ```
//!
//! Environment: `STET_BIN` (default `<repo>/target/release/stet`), `STET_DOCKER_PLUGIN`
//! (default `<repo>/target/release/libstet_plugin_docker.so`), `STET_BENCH_RUNS` (15),
//! `STET_BENCH_DOCKER_IMAGE` (`stet-lane:1`). Each runtime is installed alone in its own
//! plugins directory, so that each `stet run` probes only the runtime it measures.
//! Docker is skipped (with the reason) when its plugin, engine or image is missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where cargo put this bench's own build of the plugin (`target/release`).
fn own_release_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

fn env_path(name: &str, default: PathBuf) -> PathBuf {
    std::env::var_os(name).map(PathBuf::from).unwrap_or(default)
}

/// Lays out a plugin directory: the manifest with `library` set to the file's name.
fn lay_out(plugins: &Path, name: &str, manifest: &Path, library: &Path) -> Result<(), String> {
    let dir = plugins.join(name);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let file = library.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::copy(library, dir.join(&file))
        .map_err(|e| format!("{} is missing ({e})", library.display()))?;
    let text = std::fs::read_to_string(manifest).map_err(|e| e.to_string())?;
    let text: Vec<String> = text
        .lines()
        .map(|l| match l.split_once('=') {
            Some((k, _)) if k.trim() == "library" => format!("library = \"{file}\""),
            _ => l.to_string(),
        })
        .collect();
    std::fs::write(dir.join("plugin.toml"), text.join("\n") + "\n").map_err(|e| e.to_string())
}

struct Side {
    name: &'static str,
    home: tempfile::TempDir,
    image: String,
    times: Vec<Duration>,
}

impl Side {
    fn command(&self, stet: &Path) -> Command {
        let home = self.home.path();
        let mut command = Command::new(stet);
        command
            .env_clear()
            .env("HOME", home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .current_dir(home.join("work"))
            .arg("--plugins-dir")
            .arg(home.join("plugins"))
            .args([
                "run",
                "--runtime",
                self.name,
                "--image",
                &self.image,
                "--",
                "true",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(host) = std::env::var_os("DOCKER_HOST") {
            command.env("DOCKER_HOST", host);
        }
        command
    }

    fn once(&self, stet: &Path) -> Result<Duration, String> {
        let started = Instant::now();
        let out = self
            .command(stet)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", stet.display()))?;
        let elapsed = started.elapsed();
        if !out.status.success() {
            return Err(format!(
                "stet run --runtime {} -- true failed ({}): {}",
                self.name,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(elapsed)
    }
}

fn side(name: &'static str, image: &str, manifest: &Path, library: &Path) -> Result<Side, String> {
    let home = tempfile::Builder::new()
        .prefix("stet-bench-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    std::fs::create_dir_all(home.path().join("work")).map_err(|e| e.to_string())?;
    lay_out(&home.path().join("plugins"), name, manifest, library)?;
    Ok(Side {
        name,
        home,
        image: image.to_string(),
        times: Vec::new(),
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2
    }
}

fn main() {
    // `cargo bench` passes `--bench`; there is nothing to filter.
    let runs: usize = std::env::var("STET_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(15);
    let stet = env_path("STET_BIN", repo().join("target/release/stet"));
    if !stet.is_file() {
        eprintln!(
            "{} is missing: run `cargo build --release --workspace` in stet's repository, or set STET_BIN",
            stet.display()
        );
        std::process::exit(1);
    }
    // `cargo bench` builds the library only as an rlib; the cdylib stet loads comes from
    // the release build.
    let built = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "--lib", "--manifest-path"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .status();
    if !built.is_ok_and(|s| s.success()) {
        eprintln!("cannot build the plugin (`cargo build --release`)");
        std::process::exit(1);
    }
    let bwrap_lib = own_release_dir().join("libstet_runtime_bubblewrap.so");
    let mut sides = Vec::new();
    match side(
        "bubblewrap",
        "host",
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin.toml"),
        &bwrap_lib,
    ) {
        Ok(s) => sides.push(s),
        Err(why) => {
            eprintln!("bubblewrap: {why}");
            std::process::exit(1);
        }
    }
    let docker_image =
        std::env::var("STET_BENCH_DOCKER_IMAGE").unwrap_or_else(|_| "stet-lane:1".into());
    match side(
        "docker",
        &docker_image,
        &repo().join("plugins/docker/plugin.toml"),
        &env_path(
            "STET_DOCKER_PLUGIN",
            repo().join("target/release/libstet_plugin_docker.so"),
        ),
    ) {
        Ok(s) => sides.push(s),
        Err(why) => eprintln!("docker skipped: {why}"),
    }
    // Warm-up, which also checks that each side works at all.
    sides.retain(|s| {
        for _ in 0..2 {
            if let Err(why) = s.once(&stet) {
                eprintln!("{} skipped: {why}", s.name);
                return false;
            }
        }
        true
    });
    for _ in 0..runs {
        for s in sides.iter_mut() {
            match s.once(&stet) {
                Ok(t) => s.times.push(t),
                Err(why) => eprintln!("{}: {why}", s.name),
            }
        }
    }
    println!(
        "`stet run --runtime R -- true`, {runs} runs each, interleaved ({})",
        stet.display()
    );
    println!(
        "{:<11} {:>10} {:>10} {:>10}  image",
        "runtime", "median", "min", "max"
    );
    for s in &sides {
        if s.times.is_empty() {
            continue;
        }
        println!(
            "{:<11} {:>7.1} ms {:>7.1} ms {:>7.1} ms  {}",
            s.name,
            ms(median(&s.times)),
            ms(*s.times.iter().min().unwrap()),
            ms(*s.times.iter().max().unwrap()),
            s.image
        );
    }
    if let [bw, docker] = &sides[..] {
        if !bw.times.is_empty() && !docker.times.is_empty() {
            println!(
                "docker / bubblewrap (medians): {:.1}x",
                ms(median(&docker.times)) / ms(median(&bw.times))
            );
        }
    }
}
