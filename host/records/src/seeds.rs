//! Seeds: what a repository's setup (`[lane] setup`) made, kept per clone and given to
//! every lane, so that no lane starts cold and no agent's writes reach the next lane.
//!
//! A seed lives under `.git/stet/seeds/<key>/`: `outputs/` (the setup's outputs, each at
//! its path) and `seed.json` (what built it). Its key is the sha256 of the setup's
//! commands, outputs and hosts, the image it ran in and the content of its inputs as the
//! base holds them (`key`): a lock file changed, a new seed is built; nothing changed,
//! every lane and every round reuses it.
//!
//! The setup ran in a sandbox (`stet-call`'s `setup.rs`), so what it left is data: it is
//! taken in by [`copy_kept`] — directories, regular files with their bytes, times and
//! executable bits, links as links (never followed) — nothing else: no set-id bit, no
//! group or other write, no special file, no extended attribute.
//!
//! A lane is given a seed by a file of the host's beside its `work/` (`seed`, never
//! mounted into a sandbox): the gate lays the seed's outputs into the working tree each
//! time it puts the tree back to its commit (`gate/tree.rs`), keeps them out of every
//! commit and diff, and never walks them. The lane's copy is its own: whatever an agent or
//! a check writes there is gone at the next restore, and never reaches the seed or another
//! lane. (A copy, not a shared mount: reflinks are not available on ext4, where lanes
//! live here; an overlay per output is the next step where stet may mount.)
//!
//! The setup ran with its working tree at [`ALIAS`]; a seeded lane's sandboxes see the
//! lane there too (`sandbox.rs`), so the absolute paths tools write into what they build (a
//! virtual environment's scripts, a build's dependency files) name the lane's own copy.

use std::io;
use std::path::{Path, PathBuf};

use crate::config::Setup;
use crate::git::{GitError, Inert};

/// Where the setup's working tree is inside its sandbox, and where every seeded lane's
/// sandboxes see their lane too.
pub const ALIAS: &str = "/stet-lane";

/// What the key's text starts with: a new layout of the key is a new seed.
const KEY_VERSION: &str = "stet-seed 1";

/// A seed kept on this clone.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Seed {
    /// Its key.
    pub key: String,
    /// The base commit its setup ran on.
    pub base: String,
    /// The setup's commands.
    pub commands: Vec<String>,
    /// The image it ran in.
    pub image: String,
    /// The outputs kept.
    pub outputs: Vec<String>,
    /// Bytes kept (each file's length).
    pub bytes: u64,
    /// Files, links and directories kept.
    pub entries: u64,
    /// When it was built, in milliseconds since the epoch.
    pub built_unix_ms: u64,
    /// How long the setup took, in milliseconds.
    pub took_ms: u64,
}

/// Where this clone's seeds are.
pub fn seeds_dir(repo: &Path) -> PathBuf {
    crate::git::git_dir(repo).join("stet/seeds")
}

/// The directory of the seed `key`.
pub fn seed_dir(repo: &Path, key: &str) -> PathBuf {
    seeds_dir(repo).join(key)
}

/// The seed's key: the setup (commands, outputs, hosts), the image, and each input's
/// content at `base` (git's object id: a hash of the content; "absent" when the base lacks
/// it). Reads only the repository's objects.
pub fn key(repo: &Path, setup: &Setup, image: &str, base: &str) -> Result<String, GitError> {
    let git = Inert::at(repo);
    let mut text = format!("{KEY_VERSION}\nimage {image}\n");
    for command in &setup.commands {
        text.push_str(&format!("command {}\n", command.replace('\n', "\\n")));
    }
    for output in &setup.outputs {
        text.push_str(&format!("output {output}\n"));
    }
    for host in &setup.network {
        text.push_str(&format!("network {host}\n"));
    }
    for input in &setup.inputs {
        let object = git
            .run(&[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{base}:{input}"),
            ])
            .unwrap_or_else(|_| "absent".to_string());
        text.push_str(&format!("input {input} {object}\n"));
    }
    let mut key = crate::plugins::trust::sha256_bytes(text.as_bytes());
    key.truncate(32);
    Ok(key)
}

/// The outputs `base` tracks: a setup may fill only what git leaves alone.
pub fn tracked_outputs(repo: &Path, setup: &Setup, base: &str) -> Result<Vec<String>, GitError> {
    let git = Inert::at(repo);
    let mut tracked = Vec::new();
    for output in &setup.outputs {
        let listed = git.run(&["ls-tree", "--name-only", base, "--", output])?;
        if !listed.trim().is_empty() {
            tracked.push(output.clone());
        }
    }
    Ok(tracked)
}

/// The seed `key`, when it is built and whole on this clone.
pub fn ready(repo: &Path, key: &str) -> Option<Seed> {
    let dir = seed_dir(repo, key);
    let text = std::fs::read(dir.join("seed.json")).ok()?;
    let seed: Seed = serde_json::from_slice(&text).ok()?;
    (seed.key == key && dir.join("outputs").is_dir()).then_some(seed)
}

/// Every seed built on this clone, oldest first.
pub fn all(repo: &Path) -> Vec<Seed> {
    let mut seeds: Vec<Seed> = std::fs::read_dir(seeds_dir(repo))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| ready(repo, &e.file_name().to_string_lossy()))
        .collect();
    seeds.sort_by_key(|s| s.built_unix_ms);
    seeds
}

/// Keeps what a setup left in `work` (its sandbox stopped) as the seed described by
/// `seed`: each output copied by [`copy_kept`] into a directory of its own, then renamed
/// into place whole. An output the setup did not make is an error naming it.
pub fn keep(repo: &Path, work: &Path, mut seed: Seed) -> io::Result<Seed> {
    let seeds = seeds_dir(repo);
    std::fs::create_dir_all(&seeds)?;
    std::fs::set_permissions(&seeds, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
    let partial = seeds.join(format!("{}.partial-{}", seed.key, std::process::id()));
    if partial.exists() {
        std::fs::remove_dir_all(&partial)?;
    }
    let outputs = partial.join("outputs");
    std::fs::create_dir_all(&outputs)?;
    let (mut bytes, mut entries) = (0u64, 0u64);
    for output in &seed.outputs {
        // What a sandbox made: no directory on the way may be a link (one to a host
        // directory would copy the host's files into every lane).
        let from = match parents_in(work, output, false) {
            Ok(parent) => parent.join(last_part(output)),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&partial);
                return Err(e);
            }
        };
        if std::fs::symlink_metadata(&from).is_err() {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("the setup made no `{output}`, which [lane] setup_outputs names"),
            ));
        }
        let copied = copy_kept(&from, &outputs.join(output));
        let (b, e) = match copied {
            Ok(counted) => counted,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&partial);
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot keep `{output}`: {e}"),
                ));
            }
        };
        bytes = bytes.saturating_add(b);
        entries = entries.saturating_add(e);
    }
    seed.bytes = bytes;
    seed.entries = entries;
    let record = serde_json::to_vec_pretty(&seed).map_err(io::Error::other)?;
    crate::files::write_durably(&partial.join("seed.json"), &record)?;
    let dir = seed_dir(repo, &seed.key);
    if dir.exists() {
        // Another stet of this clone built the same seed meanwhile: the same key, the same
        // inputs; its copy stays.
        std::fs::remove_dir_all(&partial)?;
    } else {
        std::fs::rename(&partial, &dir)?;
    }
    Ok(seed)
}

/// Removes the seeds other than `keep` that no lane on this clone was given; returns
/// those removed (or, with `dry_run`, those that would be).
pub fn remove_stale(repo: &Path, keep: Option<&str>, dry_run: bool) -> io::Result<Vec<Seed>> {
    let given: Vec<PathBuf> = std::fs::read_dir(crate::git::git_dir(repo).join("stet/lanes"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| given(&e.path()))
        .map(|g| g.seed)
        .collect();
    let mut removed = Vec::new();
    for seed in all(repo) {
        let dir = seed_dir(repo, &seed.key);
        if Some(seed.key.as_str()) == keep || given.contains(&dir) {
            continue;
        }
        if !dry_run {
            std::fs::remove_dir_all(&dir)?;
        }
        removed.push(seed);
    }
    Ok(removed)
}

/// What a lane was given: the seed's directory and its outputs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Given {
    /// The seed's directory.
    pub seed: PathBuf,
    /// Its outputs, paths in the working tree.
    pub outputs: Vec<String>,
}

/// The file beside a lane's `work/` naming its seed.
fn given_file(lane_root: &Path) -> PathBuf {
    lane_root.join("seed")
}

/// Gives the lane at `lane_root` (the directory holding its `work/` and `git/`) `seed`:
/// laid into its working tree from its next restore on.
pub fn give(repo: &Path, lane_root: &Path, seed: &Seed) -> io::Result<()> {
    let given = Given {
        seed: seed_dir(repo, &seed.key),
        outputs: seed.outputs.clone(),
    };
    let text = serde_json::to_vec(&given).map_err(io::Error::other)?;
    crate::files::write_durably(&given_file(lane_root), &text)
}

/// The seed the lane at `lane_root` was given, if any.
pub fn given(lane_root: &Path) -> Option<Given> {
    let text = std::fs::read(given_file(lane_root)).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Lays `given`'s outputs into `work` (a working tree just put back to its commit): each
/// output's copy replaces whatever is at its path.
pub(crate) fn lay(given: &Given, work: &Path) -> io::Result<()> {
    if !given.seed.join("outputs").is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "the lane's seed {} is gone; `stet seed` builds it again",
                given.seed.display()
            ),
        ));
    }
    for output in &given.outputs {
        let from = given.seed.join("outputs").join(output);
        // The lane's commit is the agent's: a directory on the way that it turned into a
        // link would carry the copy out of the lane. Each is a real directory, or made one.
        let to = parents_in(work, output, true)?.join(last_part(output));
        if let Ok(meta) = std::fs::symlink_metadata(&to) {
            if meta.is_dir() {
                std::fs::remove_dir_all(&to)?;
            } else {
                std::fs::remove_file(&to)?;
            }
        }
        copy_kept(&from, &to)?;
    }
    Ok(())
}

/// The directory holding `output` (a relative path) under `top`, each part on the way a
/// real directory — never a link, which would lead out of `top` — made when missing if
/// `make`, else an error naming it.
fn parents_in(top: &Path, output: &str, make: bool) -> io::Result<PathBuf> {
    let mut at = top.to_path_buf();
    let parts: Vec<&str> = output.split('/').collect();
    for part in parts.iter().take(parts.len().saturating_sub(1)) {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.is_dir() => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound && make => std::fs::create_dir(&at)?,
            _ => {
                return Err(io::Error::other(format!(
                    "{} on the way to `{output}` is not a directory (a link is never followed)",
                    at.display()
                )))
            }
        }
    }
    Ok(at)
}

/// The last part of a relative path.
fn last_part(output: &str) -> &str {
    output.rsplit('/').next().unwrap_or(output)
}

/// Copies the tree at `from` to `to` (which must not exist), keeping only what a seed
/// may hold: directories, regular files (bytes, modification time, and of the mode only
/// read, write for the owner and the executable bits), symbolic links as links (never
/// followed). Sockets, FIFOs and devices are left out. Returns the bytes and entries
/// copied.
pub fn copy_kept(from: &Path, to: &Path) -> io::Result<(u64, u64)> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let (mut bytes, mut entries) = (0u64, 0u64);
    // Directories' times are set once their entries are in: adding one changes them.
    let mut directories = Vec::new();
    let mut pending = vec![(from.to_path_buf(), to.to_path_buf())];
    while let Some((source, target)) = pending.pop() {
        let meta = std::fs::symlink_metadata(&source)?;
        let kind = meta.file_type();
        let exec = meta.mode() & 0o111;
        if kind.is_dir() {
            std::fs::create_dir(&target)?;
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755))?;
            for entry in std::fs::read_dir(&source)? {
                let entry = entry?;
                pending.push((entry.path(), target.join(entry.file_name())));
            }
            directories.push((target, meta));
        } else if kind.is_file() {
            let mut input = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
                .open(&source)?;
            let mut output = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644 | exec)
                .open(&target)?;
            bytes = bytes.saturating_add(io::copy(&mut input, &mut output)?);
            output.set_times(times_of(&meta))?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&source)?, &target)?;
        } else {
            continue;
        }
        entries = entries.saturating_add(1);
    }
    for (dir, meta) in directories.into_iter().rev() {
        std::fs::File::open(&dir)?.set_times(times_of(&meta))?;
    }
    Ok((bytes, entries))
}

/// A file's access and modification times, to set on its copy (build tools compare them).
fn times_of(meta: &std::fs::Metadata) -> std::fs::FileTimes {
    let mut times = std::fs::FileTimes::new();
    if let Ok(t) = meta.modified() {
        times = times.set_modified(t);
    }
    if let Ok(t) = meta.accessed() {
        times = times.set_accessed(t);
    }
    times
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn no_link_on_the_way_to_an_output_is_followed_into_or_out_of_a_lane() {
        let dir = tempfile::tempdir().unwrap();
        let host = dir.path().join("host");
        std::fs::create_dir_all(&host).unwrap();
        std::fs::write(host.join("secret"), "host's").unwrap();
        // What a setup left: its `crates` a link to a host directory.
        let made = dir.path().join("made");
        std::fs::create_dir_all(&made).unwrap();
        std::os::unix::fs::symlink(&host, made.join("crates")).unwrap();
        let err = parents_in(&made, "crates/secret", false).unwrap_err();
        assert!(err.to_string().contains("is not a directory"), "{err}");
        // A lane whose commit made `crates` a link to a host directory: nothing is laid
        // through it.
        let seed = dir.path().join("seed");
        std::fs::create_dir_all(seed.join("outputs/crates/x/target")).unwrap();
        std::fs::write(seed.join("outputs/crates/x/target/out"), "built").unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        std::os::unix::fs::symlink(&host, work.join("crates")).unwrap();
        let given = Given {
            seed: seed.clone(),
            outputs: vec!["crates/x/target".into()],
        };
        assert!(lay(&given, &work).is_err());
        assert!(!host.join("x").exists());
        // Without the link the parents are made and the copy laid.
        std::fs::remove_file(work.join("crates")).unwrap();
        lay(&given, &work).unwrap();
        assert_eq!(
            std::fs::read_to_string(work.join("crates/x/target/out")).unwrap(),
            "built"
        );
    }

    #[test]
    fn a_copy_keeps_bytes_times_links_and_exec_bits_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("from");
        std::fs::create_dir_all(from.join("bin")).unwrap();
        std::fs::write(from.join("bin/tool"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            from.join("bin/tool"),
            std::fs::Permissions::from_mode(0o6777),
        )
        .unwrap();
        std::fs::write(from.join("lib.txt"), "library").unwrap();
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        std::fs::File::options()
            .write(true)
            .open(from.join("lib.txt"))
            .unwrap()
            .set_modified(old)
            .unwrap();
        std::os::unix::fs::symlink("/etc/passwd", from.join("link")).unwrap();
        nix::unistd::mkfifo(&from.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let to = dir.path().join("to");
        let (bytes, entries) = copy_kept(&from, &to).unwrap();
        assert_eq!(bytes, 17);
        assert_eq!(entries, 5, "from, bin, bin/tool, lib.txt, link");
        let mode = std::fs::metadata(to.join("bin/tool"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(
            mode & 0o7777,
            0o755,
            "no set-id, sticky or open write: {mode:o}"
        );
        assert_eq!(
            std::fs::metadata(to.join("lib.txt"))
                .unwrap()
                .modified()
                .unwrap(),
            old
        );
        assert_eq!(
            std::fs::read_link(to.join("link")).unwrap(),
            Path::new("/etc/passwd")
        );
        assert!(std::fs::symlink_metadata(to.join("fifo")).is_err());
    }
}
