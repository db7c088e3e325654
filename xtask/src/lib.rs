//! Repository automation shared by `cargo xtask` and the end-to-end tests.

pub mod browser;

use std::path::{Path, PathBuf};

/// The repository root (the workspace directory).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// A plugin crate of this repository that ships in the distribution.
#[derive(Debug, Clone)]
pub struct PluginCrate {
    /// The crate's directory.
    pub dir: PathBuf,
    /// The plugin's name (from its manifest).
    pub name: String,
    /// The library's base name (`stet_plugin_docker`).
    pub library_stem: String,
    /// `runtime` or `harness`.
    pub kind: String,
}

pub use stet_plugin_host::plugins::manifest::{Manifest, ManifestError};

/// Reads and checks a `plugin.toml` with the host's own parser, so that what the
/// repository builds and installs is read exactly as stet reads it.
pub fn read_manifest(path: &Path) -> Result<Manifest, ManifestError> {
    stet_plugin_host::plugins::manifest::read(path)
}

/// The plugins under `dir` (`plugins/` or `tests/fixtures/`): every subdirectory with a
/// `plugin.toml`, sorted by name.
///
/// # Panics
///
/// When a `plugin.toml` there is not a valid manifest (naming its file, line and key): a
/// plugin of this repository is never left out silently.
pub fn plugin_crates(dir: &Path) -> Vec<PluginCrate> {
    let mut crates: Vec<PluginCrate> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .path()
                .join(stet_plugin_host::plugins::manifest::MANIFEST_FILE)
                .is_file()
        })
        .map(|entry| {
            let manifest = read_manifest(
                &entry
                    .path()
                    .join(stet_plugin_host::plugins::manifest::MANIFEST_FILE),
            )
            .unwrap_or_else(|e| panic!("{e}"));
            let library = manifest
                .library
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            PluginCrate {
                dir: entry.path(),
                library_stem: library_stem(&library),
                kind: manifest.kind.as_str().to_string(),
                name: manifest.name,
            }
        })
        .collect();
    crates.sort_by(|a, b| a.name.cmp(&b.name));
    crates
}

/// `libstet_plugin_docker.so` → `stet_plugin_docker`.
fn library_stem(file: &str) -> String {
    let file = file.strip_prefix("lib").unwrap_or(file);
    file.split('.').next().unwrap_or(file).to_string()
}

/// This platform's file name for a library stem.
pub fn library_file(stem: &str) -> String {
    format!(
        "{}{stem}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    )
}

/// Installs `plugin`, built into `built` (a cargo profile directory such as
/// `target/release`), into `plugins_dir/<name>/`: the library, and its manifest with
/// `library` set to this platform's file name.
pub fn install_plugin(
    plugin: &PluginCrate,
    built: &Path,
    plugins_dir: &Path,
) -> std::io::Result<PathBuf> {
    let dest = plugins_dir.join(&plugin.name);
    std::fs::create_dir_all(&dest)?;
    let file = library_file(&plugin.library_stem);
    // Copy to a temporary name and rename: a loaded library must never be overwritten in
    // place (a mapped file truncated under a running process dies of SIGBUS).
    let partial = dest.join(format!(".{file}.partial"));
    std::fs::copy(built.join(&file), &partial)?;
    std::fs::rename(&partial, dest.join(&file))?;
    let manifest = std::fs::read_to_string(plugin.dir.join("plugin.toml"))?;
    let manifest: Vec<String> = manifest
        .lines()
        .map(|line| match line.split_once('=') {
            Some((k, _)) if k.trim() == "library" => format!("library = \"{file}\""),
            _ => line.to_string(),
        })
        .collect();
    let written = dest.join("plugin.toml");
    std::fs::write(&written, manifest.join("\n") + "\n")?;
    // What stet will read: the rewritten manifest must still be one, naming the library.
    match read_manifest(&written) {
        Ok(m) if m.library == dest.join(&file) => Ok(dest),
        Ok(m) => Err(std::io::Error::other(format!(
            "{} names {}, not {file}",
            written.display(),
            m.library.display()
        ))),
        Err(e) => Err(std::io::Error::other(e.to_string())),
    }
}

/// Lays out a distribution tree: `out/bin/stet` and `out/lib/stet/plugins/<name>/`, from
/// binaries built into `built`.
pub fn assemble_dist(built: &Path, out: &Path) -> std::io::Result<()> {
    let bin = out.join("bin");
    let lib = out.join("lib/stet");
    std::fs::create_dir_all(&bin)?;
    std::fs::create_dir_all(&lib)?;
    // The plugins are laid out beside the old ones and swapped in, then the binary is
    // renamed over the old one: an interrupted install leaves a working stet (old or new
    // plugins, each whole) and never half a plugin directory.
    let staged = lib.join(".plugins.partial");
    if staged.exists() {
        std::fs::remove_dir_all(&staged)?;
    }
    std::fs::create_dir_all(&staged)?;
    for plugin in plugin_crates(&repo_root().join("plugins")) {
        install_plugin(&plugin, built, &staged)?;
    }
    let plugins = lib.join("plugins");
    let old = lib.join(".plugins.old");
    if old.exists() {
        std::fs::remove_dir_all(&old)?;
    }
    if plugins.exists() {
        std::fs::rename(&plugins, &old)?;
    }
    std::fs::rename(&staged, &plugins)?;
    if old.exists() {
        std::fs::remove_dir_all(&old)?;
    }
    let partial = bin.join(".stet.partial");
    std::fs::copy(built.join("stet"), &partial)?;
    std::fs::rename(&partial, bin.join("stet"))?;
    Ok(())
}
