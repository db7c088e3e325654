//! Plugin-host benchmarks (run with `cargo xtask bench`, which builds the release plugins
//! first). Prints a table; the figures go into the README by hand.
//!
//! 1. `stet plugins list` over 100 manifests, whole process (goal: under 20 ms).
//! 2. Loading one plugin library in-process: dlopen, header, version and layout checks,
//!    identity (each copy at a distinct path, since a path loads once per process).
//! 3. `stet plugins probe` wall time against its slowest single probe (goal: within 10 ms).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use stet_cli::plugins::{loader, manifest};

fn release_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// The plugins this repository ships, by their manifests (no backend is named here).
fn shipped() -> Vec<xtask::PluginCrate> {
    xtask::plugin_crates(&xtask::repo_root().join("plugins"))
}

/// Lays out `plugin`, built in release mode, under `dest`.
fn plugin_dir(plugin: &xtask::PluginCrate, dest: &Path) -> PathBuf {
    xtask::install_plugin(plugin, &release_dir(), dest).unwrap_or_else(|e| {
        panic!(
            "{} is not built in release mode ({e}): run `cargo xtask bench`",
            plugin.name
        )
    })
}

fn stet(home: &Path, plugins: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(release_dir().join("stet"));
    command
        .env_clear()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env(
            "PATH",
            std::env::var_os("BENCH_PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
        )
        .current_dir(home)
        .arg("--plugins-dir")
        .arg(plugins)
        .args(args);
    command
}

fn list_100(scratch: &Path) {
    let plugins = scratch.join("hundred");
    for i in 0..100 {
        let dir = plugins.join(format!("p{i:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("plugin.toml"),
            format!("name = \"p{i:03}\"\nkind = \"runtime\"\nversion = \"1.0.0\"\napi = \"{api}\"\nlibrary = \"libp.so\"\ndescription = \"plugin {i}\"\nplatforms = [\"linux\", \"macos\"]\n", api = stet_plugin_api::API_VERSION),
        )
        .unwrap();
        std::fs::write(dir.join("libp.so"), b"").unwrap();
    }
    let mut samples = Vec::new();
    for _ in 0..60 {
        let started = Instant::now();
        let out = stet(scratch, &plugins, &["plugins", "list"])
            .output()
            .unwrap();
        samples.push(started.elapsed());
        assert!(out.status.success());
    }
    let mut baseline = Vec::new();
    for _ in 0..60 {
        let started = Instant::now();
        let out = Command::new(release_dir().join("stet"))
            .arg("--version")
            .output()
            .unwrap();
        baseline.push(started.elapsed());
        assert!(out.status.success());
    }
    println!(
        "plugins list, 100 manifests (whole process)  median {}  (stet --version alone: {})",
        ms(median(samples)),
        ms(median(baseline))
    );
}

fn load_per_library(scratch: &Path) {
    for plugin in shipped() {
        let name = plugin.name.as_str();
        let mut samples = Vec::new();
        for copy in 0..20 {
            let dir = plugin_dir(&plugin, &scratch.join(format!("load-{name}-{copy}")));
            let manifest = manifest::read(&dir.join("plugin.toml")).unwrap();
            let started = Instant::now();
            let loaded = loader::load(&manifest).expect("load");
            samples.push(started.elapsed());
            assert_eq!(loaded.identity.name, name);
        }
        println!(
            "load {name:<16} in-process, 20 distinct copies  median {}",
            ms(median(samples))
        );
    }
}

fn probe_overhead(scratch: &Path) {
    let plugins = scratch.join("probe");
    for plugin in shipped() {
        plugin_dir(&plugin, &plugins);
    }
    let slow = plugins.join("fixture-slow");
    std::fs::create_dir_all(&slow).unwrap();
    std::fs::copy(
        release_dir().join("libstet_fixture_slow_but_fine.so"),
        slow.join("libstet_fixture_slow_but_fine.so"),
    )
    .expect("fixture-slow is not built in release mode: run `cargo xtask bench`");
    std::fs::write(
        slow.join("plugin.toml"),
        format!(
            "name = \"fixture-slow\"\nkind = \"runtime\"\nversion = \"0.1.0\"\napi = \"{}\"\nlibrary = \"libstet_fixture_slow_but_fine.so\"\n",
            stet_plugin_api::API_VERSION
        ),
    )
    .unwrap();
    let mut overheads = Vec::new();
    let mut walls = Vec::new();
    for _ in 0..15 {
        let started = Instant::now();
        let out = stet(scratch, &plugins, &["plugins", "probe", "--json"])
            .output()
            .unwrap();
        let wall = started.elapsed();
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let slowest = json["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["elapsed_ms"].as_u64())
            .max()
            .unwrap();
        walls.push(wall);
        overheads.push(wall.saturating_sub(Duration::from_millis(slowest)));
    }
    println!(
        "plugins probe, 4 plugins (slowest probe 300 ms)  wall median {}  over the slowest probe: median {}",
        ms(median(walls)),
        ms(median(overheads))
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a list; there is nothing to list.
    }
    let scratch = tempfile::tempdir().unwrap();
    list_100(scratch.path());
    load_per_library(scratch.path());
    probe_overhead(scratch.path());
}
