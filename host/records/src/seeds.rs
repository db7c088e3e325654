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
//! taken in by directory handles alone (`copy_entry`) — directories, regular files with
//! their bytes, times and executable bits, links as links (never followed) — nothing
//! else: no set-id bit, no group or other write, no special file, no extended attribute.
//!
//! A lane is given a seed by a file of the host's beside its `work/` (`seed`, never
//! mounted into a sandbox, naming the seed's key; its directory is found from the lane's): the gate lays the seed's outputs into the working tree each
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
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{self, AtFlags, FileType, Mode, OFlags, Timestamps};

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
/// `seed`: each output copied by `copy_entry` into a directory of its own, then renamed
/// into place whole. An output the setup did not make, or made as something other than a
/// directory, a file or a link, is an error naming it; so is more than `limit` holds.
pub fn keep(repo: &Path, work: &Path, mut seed: Seed, limit: Limit) -> io::Result<Seed> {
    let seeds = seeds_dir(repo);
    std::fs::create_dir_all(&seeds)?;
    std::fs::set_permissions(&seeds, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
    let partial = seeds.join(format!("{}.partial-{}", seed.key, std::process::id()));
    if partial.exists() {
        std::fs::remove_dir_all(&partial)?;
    }
    let outputs = partial.join("outputs");
    std::fs::create_dir_all(&outputs)?;
    let mut budget = Budget::new(limit);
    let taken = open_dir(work).and_then(|work| {
        let kept = open_dir(&outputs)?;
        for output in &seed.outputs {
            take_in(&work, &kept, output, &mut budget)?;
        }
        Ok(())
    });
    if let Err(e) = taken {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(e);
    }
    let (bytes, entries) = (budget.bytes, budget.entries);
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
    let given: Vec<String> = std::fs::read_dir(crate::git::git_dir(repo).join("stet/lanes"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| given(&e.path()))
        .map(|g| g.key)
        .collect();
    let mut removed = Vec::new();
    for seed in all(repo) {
        if Some(seed.key.as_str()) == keep || given.contains(&seed.key) {
            continue;
        }
        if !dry_run {
            std::fs::remove_dir_all(seed_dir(repo, &seed.key))?;
        }
        removed.push(seed);
    }
    Ok(removed)
}

/// What a lane was given: the seed's key and its outputs (the lane's `seed` file), and
/// the seed's directory, found from the lane's own (`.git/stet/lanes/<item>` beside
/// `.git/stet/seeds/`), so a clone moved elsewhere still finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Given {
    /// The seed's key.
    pub key: String,
    /// The seed's directory.
    pub seed: PathBuf,
    /// Its outputs, paths in the working tree.
    pub outputs: Vec<String>,
}

/// The lane's `seed` file.
#[derive(serde::Serialize, serde::Deserialize)]
struct GivenRecord {
    key: String,
    outputs: Vec<String>,
}

/// The file beside a lane's `work/` naming its seed.
fn given_file(lane_root: &Path) -> PathBuf {
    lane_root.join("seed")
}

/// Gives the lane at `lane_root` (the directory holding its `work/` and `git/`) `seed`:
/// laid into its working tree from its next restore on.
pub fn give(lane_root: &Path, seed: &Seed) -> io::Result<()> {
    let record = GivenRecord {
        key: seed.key.clone(),
        outputs: seed.outputs.clone(),
    };
    let text = serde_json::to_vec(&record).map_err(io::Error::other)?;
    crate::files::write_durably(&given_file(lane_root), &text)
}

/// The seed the lane at `lane_root` was given, if any.
pub fn given(lane_root: &Path) -> Option<Given> {
    let text = std::fs::read(given_file(lane_root)).ok()?;
    let record: GivenRecord = serde_json::from_slice(&text).ok()?;
    let stet = lane_root.parent()?.parent()?;
    Some(Given {
        seed: stet.join("seeds").join(&record.key),
        key: record.key,
        outputs: record.outputs,
    })
}

/// Lays `given`'s outputs into `work` (a working tree just put back to its commit, so
/// nothing is at an output's path: anything there is an error naming it).
pub(crate) fn lay(given: &Given, work: &Path) -> io::Result<()> {
    let outputs = given.seed.join("outputs");
    if !outputs.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "the seed {} this lane started from is gone; `stet seed` builds it again while the setup and its inputs are as they were",
                given.seed.display()
            ),
        ));
    }
    let (from, to) = (open_dir(&outputs)?, open_dir(work)?);
    let mut budget = Budget::new(Limit::NONE);
    for output in &given.outputs {
        // The lane's commit is the agent's: a directory on the way that it turned into a
        // link would carry the copy out of the lane. Each part is opened without following
        // a link, or made.
        let (parts, last) = split(output);
        let (src, dst) = (beneath(&from, &parts, false)?, beneath(&to, &parts, true)?);
        if fs::statat(&dst, last, AtFlags::SYMLINK_NOFOLLOW).is_ok() {
            return Err(io::Error::other(format!(
                "`{output}` is in the lane's way of its seed (git cleaned everything else)"
            )));
        }
        copy_entry(&src, last, &dst, last, &mut budget, 0)?;
    }
    Ok(())
}

/// How much a copy may take: bytes (each file by the larger of its length and what it
/// occupies, each hard link again) and entries.
#[derive(Debug, Clone, Copy)]
pub struct Limit {
    /// Bytes.
    pub bytes: u64,
    /// Files, links and directories.
    pub entries: u64,
}

impl Limit {
    /// No limit (laying a seed that was held to one when it was kept).
    pub const NONE: Limit = Limit {
        bytes: u64::MAX,
        entries: u64::MAX,
    };
}

/// What a copy has taken, against its limit.
struct Budget {
    limit: Limit,
    /// Each file's length, for what a person reads.
    bytes: u64,
    /// Each file's length or what it occupies, whichever is larger: what the limit holds.
    charged: u64,
    entries: u64,
}

impl Budget {
    fn new(limit: Limit) -> Budget {
        Budget {
            limit,
            bytes: 0,
            charged: 0,
            entries: 0,
        }
    }

    /// Counts an entry of `length` bytes occupying `held`; an error once the limit is
    /// passed.
    fn take(&mut self, length: u64, held: u64) -> io::Result<()> {
        self.bytes = self.bytes.saturating_add(length);
        self.charged = self.charged.saturating_add(length.max(held));
        self.entries = self.entries.saturating_add(1);
        if self.charged > self.limit.bytes || self.entries > self.limit.entries {
            return Err(io::Error::other(format!(
                "it holds more than the disk and files limits allow ({} bytes, {} entries)",
                self.limit.bytes, self.limit.entries
            )));
        }
        Ok(())
    }
}

/// How deep a copy goes: each level holds two directory handles open.
const MOST_DEPTH: usize = 256;

const DIRECTORY: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Opens the directory at `path` (stet's own: a lane's `work/`, a seed's `outputs/`).
fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    fs::open(path, DIRECTORY, Mode::empty()).map_err(io::Error::from)
}

/// An output's directories on the way and its last part.
fn split(output: &str) -> (Vec<&str>, &str) {
    let mut parts: Vec<&str> = output.split('/').collect();
    let last = parts.pop().unwrap_or(output);
    (parts, last)
}

/// The directory `parts` down from `top`, each part opened without following a link (a
/// link or anything not a directory on the way is an error naming it); with `make`, a
/// missing part is made.
fn beneath(top: &OwnedFd, parts: &[&str], make: bool) -> io::Result<OwnedFd> {
    let mut at = fs::openat(top, c".", DIRECTORY, Mode::empty())?;
    for part in parts {
        let opened = match fs::openat(&at, *part, DIRECTORY, Mode::empty()) {
            Err(rustix::io::Errno::NOENT) if make => {
                fs::mkdirat(&at, *part, Mode::from_raw_mode(0o755))?;
                fs::openat(&at, *part, DIRECTORY, Mode::empty())
            }
            other => other,
        };
        at = opened.map_err(|e| {
            io::Error::other(format!(
                "`{part}` on the way is not a directory (a link is never followed): {e}"
            ))
        })?;
    }
    Ok(at)
}

/// Takes the setup's `output` from `work` into `kept` (both directory handles): it must
/// be a directory, a regular file or a link.
fn take_in(work: &OwnedFd, kept: &OwnedFd, output: &str, budget: &mut Budget) -> io::Result<()> {
    let (parts, last) = split(output);
    let src = beneath(work, &parts, false)
        .map_err(|e| io::Error::other(format!("cannot keep `{output}`: {e}")))?;
    let st = fs::statat(&src, last, AtFlags::SYMLINK_NOFOLLOW).map_err(|_| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("the setup made no `{output}`, which [lane] setup_outputs names"),
        )
    })?;
    if !matches!(
        FileType::from_raw_mode(st.st_mode as _),
        FileType::Directory | FileType::RegularFile | FileType::Symlink
    ) {
        return Err(io::Error::other(format!(
            "the setup made `{output}` a FIFO, socket or device; a seed keeps directories, files and links"
        )));
    }
    let dst = beneath(kept, &parts, true)?;
    copy_entry(&src, last, &dst, last, budget, 0)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot keep `{output}`: {e}")))
}

/// Copies the tree at `from` to `to` (which must not exist), as [`copy_entry`] does: the
/// unit tests' way in. Returns the bytes and entries copied.
#[cfg(test)]
fn copy_kept(from: &Path, to: &Path) -> io::Result<(u64, u64)> {
    let place = |path: &Path| match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => Ok((open_dir(dir)?, name.to_os_string())),
        _ => Err(io::Error::other(format!(
            "{} names no entry",
            path.display()
        ))),
    };
    let ((src, name), (dst, to_name)) = (place(from)?, place(to)?);
    let mut budget = Budget::new(Limit::NONE);
    copy_entry(
        &src,
        name.as_os_str(),
        &dst,
        to_name.as_os_str(),
        &mut budget,
        0,
    )?;
    Ok((budget.bytes, budget.entries))
}

/// Copies the entry `name` of the directory `src` to `to_name` in `dst` (which must not
/// exist), keeping only what a seed may hold: directories, regular files (bytes,
/// modification time, and of the mode only read, write for the owner and the executable
/// bits), symbolic links as links; sockets, FIFOs and devices are left out. By directory
/// handles alone: nothing on the way is looked up by path, no link is followed, each entry
/// is judged by what was opened (a writer still at work can swap nothing in).
fn copy_entry<P: rustix::path::Arg + Copy, Q: rustix::path::Arg + Copy>(
    src: &OwnedFd,
    name: P,
    dst: &OwnedFd,
    to_name: Q,
    budget: &mut Budget,
    depth: usize,
) -> io::Result<()> {
    let st = fs::statat(src, name, AtFlags::SYMLINK_NOFOLLOW)?;
    match FileType::from_raw_mode(st.st_mode as _) {
        FileType::Directory => {
            if depth >= MOST_DEPTH {
                return Err(io::Error::other(format!(
                    "it is more than {MOST_DEPTH} directories deep"
                )));
            }
            let from = fs::openat(src, name, DIRECTORY, Mode::empty())?;
            let st = fs::fstat(&from)?;
            budget.take(0, 0)?;
            fs::mkdirat(dst, to_name, Mode::from_raw_mode(0o755))?;
            let to = fs::openat(dst, to_name, DIRECTORY, Mode::empty())?;
            fs::fchmod(&to, Mode::from_raw_mode(0o755))?;
            let mut entries = fs::Dir::read_from(&from)?;
            while let Some(entry) = entries.read() {
                let entry = entry?;
                let child = entry.file_name();
                if child.to_bytes() == b"." || child.to_bytes() == b".." {
                    continue;
                }
                copy_entry(&from, child, &to, child, budget, depth.saturating_add(1))?;
            }
            // Adding entries changed the copy's times: set last.
            fs::futimens(&to, &stamps_of(&st))?;
        }
        FileType::RegularFile => {
            let from = fs::openat(
                src,
                name,
                OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            let st = fs::fstat(&from)?;
            if FileType::from_raw_mode(st.st_mode as _) != FileType::RegularFile {
                return Ok(());
            }
            let length = u64::try_from(st.st_size).unwrap_or(0);
            let held = u64::try_from(st.st_blocks).unwrap_or(0).saturating_mul(512);
            budget.take(length, held)?;
            let exec = (st.st_mode as u32) & 0o111;
            let to = fs::openat(
                dst,
                to_name,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o644 | exec),
            )?;
            let mut reader = io::Read::take(std::fs::File::from(from), length);
            let mut writer = std::fs::File::from(to);
            io::copy(&mut reader, &mut writer)?;
            fs::futimens(&writer, &stamps_of(&st))?;
        }
        FileType::Symlink => {
            budget.take(0, 0)?;
            let target = fs::readlinkat(src, name, Vec::new())?;
            fs::symlinkat(target.as_c_str(), dst, to_name)?;
        }
        _ => {}
    }
    Ok(())
}

/// An entry's access and modification times, to set on its copy (build tools compare them).
#[allow(clippy::unnecessary_cast)]
fn stamps_of(st: &rustix::fs::Stat) -> Timestamps {
    Timestamps {
        last_access: rustix::fs::Timespec {
            tv_sec: st.st_atime as _,
            tv_nsec: st.st_atime_nsec as _,
        },
        last_modification: rustix::fs::Timespec {
            tv_sec: st.st_mtime as _,
            tv_nsec: st.st_mtime_nsec as _,
        },
    }
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
        let err = beneath(&open_dir(&made).unwrap(), &["crates"], false).unwrap_err();
        assert!(err.to_string().contains("is not a directory"), "{err}");
        let seed = |outputs: &[&str]| Seed {
            key: "k".into(),
            base: "b".into(),
            commands: Vec::new(),
            image: "i".into(),
            outputs: outputs.iter().map(|o| o.to_string()).collect(),
            bytes: 0,
            entries: 0,
            built_unix_ms: 0,
            took_ms: 0,
        };
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        let err = keep(&repo, &made, seed(&["crates/secret"]), Limit::NONE).unwrap_err();
        assert!(err.to_string().contains("is not a directory"), "{err}");
        // A FIFO where an output should be, or more than the limits hold, keeps nothing.
        nix::unistd::mkfifo(&made.join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = keep(&repo, &made, seed(&["pipe"]), Limit::NONE).unwrap_err();
        assert!(err.to_string().contains("FIFO, socket or device"), "{err}");
        std::fs::create_dir_all(made.join("big")).unwrap();
        let sparse = std::fs::File::create(made.join("big/sparse")).unwrap();
        sparse.set_len(1 << 40).unwrap();
        let small = Limit {
            bytes: 1 << 30,
            entries: 100,
        };
        let err = keep(&repo, &made, seed(&["big"]), small).unwrap_err();
        assert!(
            err.to_string()
                .contains("more than the disk and files limits"),
            "{err}"
        );
        assert!(all(&repo).is_empty());
        // A nested output is kept at its path.
        std::fs::create_dir_all(made.join("nested/x/target")).unwrap();
        std::fs::write(made.join("nested/x/target/out"), "built").unwrap();
        let kept = keep(&repo, &made, seed(&["nested/x/target"]), Limit::NONE).unwrap();
        assert_eq!(
            std::fs::read_to_string(seed_dir(&repo, &kept.key).join("outputs/nested/x/target/out"))
                .unwrap(),
            "built"
        );
        // A lane whose commit made `crates` a link to a host directory: nothing is laid
        // through it.
        let seed = dir.path().join("seed");
        std::fs::create_dir_all(seed.join("outputs/crates/x/target")).unwrap();
        std::fs::write(seed.join("outputs/crates/x/target/out"), "built").unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        std::os::unix::fs::symlink(&host, work.join("crates")).unwrap();
        let given = Given {
            key: "k".into(),
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
