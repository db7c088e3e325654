//! A lane's own file system: the disk and files limits, enforced by the kernel at write
//! time.
//!
//! Where stet may mount file systems (it runs as root, with loop devices, `mkfs.ext4` and
//! `mount`), each lane's working tree is an ext4 file system of its own, held in a sparse
//! image beside it (`<lane>/disk.img`, outside everything a sandbox mounts) and mounted at
//! `work/` with `nosuid,nodev`. It is sized for the lane's checkout plus `[sandbox] disk`
//! and holds the checkout's entries plus `[sandbox] files` inodes: a write past either
//! fails in the sandbox (`ENOSPC`) whatever the agent does — no look of stet's to outrun,
//! hard links and empty files counted by the file system itself — and the host's own disk
//! and inodes are never the lane's to fill. A set-user-id program in it runs as no one
//! else (`nosuid`).
//!
//! Chosen over the alternatives measured here: Docker's own storage limit needs overlay2
//! on XFS with project quotas (this machine's engine runs fuse-overlayfs on ext4); project
//! quotas need the host's file system mounted with them; a copy-on-write layer over the
//! lane per call would bound the same but copy the agent's work back at every call. An
//! image costs about 30 ms to make and mount, and only the blocks written on disk.
//!
//! Where stet may not mount (a person's own account, macOS), the lane is a plain
//! directory and the limits are watched (`crate::sandbox::DiskWatch`), which the consent
//! names.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The image file beside a lane's `work/`.
pub(super) const IMAGE: &str = "disk.img";

/// What a new lane's own file system holds beyond its checkout: the disk and files limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// `[sandbox] disk`.
    pub bytes: u64,
    /// `[sandbox] files`.
    pub files: u64,
}

/// The bounds new lanes are made with under `settings`: `None` when the limits are
/// watched here instead.
pub fn bounds(settings: &crate::settings::Settings) -> Option<Bounds> {
    (enforcement(settings.lane_file_systems) == Enforcement::FileSystem).then_some(Bounds {
        bytes: settings.limits.disk_bytes,
        files: settings.limits.files,
    })
}

/// ext4's own room beside the data: bitmaps and group descriptors (under 2%), and a little
/// more; inode tables come on top, at 256 bytes an inode.
fn overhead(bytes: u64) -> u64 {
    bytes / 50 + (8 << 20)
}

/// How a lane file system for `bytes` and `files` is laid out: its block size, its inodes
/// and its size. ext4 holds at most one inode per block, so a file system holds `files`
/// inodes only where it has that many blocks: 4 KiB blocks where the bytes allow, else
/// 1 KiB, and a small disk limit with a large files limit holds fewer files than asked
/// (what `files_held` says).
pub fn layout(bytes: u64, files: u64) -> (u64, u64, u64) {
    let data = bytes.saturating_add(overhead(bytes));
    let (block, inodes) = if files <= data / (4096 - 256) {
        (4096, files)
    } else {
        (1024, files.min(data / (1024 - 256)))
    };
    (
        block,
        inodes,
        data.saturating_add(inodes.saturating_mul(256)),
    )
}

/// How a lane's disk and files limits hold on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enforcement {
    /// Each lane a file system of its own: the kernel refuses a write past the limits.
    FileSystem,
    /// Looked at while a sandbox runs, its overshoot bounded by a look's time; why the
    /// kernel cannot here.
    Watched(String),
}

impl Enforcement {
    /// In a line, for the consent and `stet doctor`, under `limits`.
    pub fn describe(&self, limits: &crate::settings::SandboxLimits) -> String {
        match self {
            Enforcement::FileSystem => {
                let (_, held, _) = layout(limits.disk_bytes, limits.files);
                format!(
                    "enforced by the kernel: each lane is a file system of its own{}",
                    if held < limits.files {
                        format!(" (holding {held} files: ext4 keeps an inode a block, and the disk limit allows no more)")
                    } else {
                        String::new()
                    }
                )
            }
            Enforcement::Watched(why) => format!(
                "watched, not enforced by the kernel ({why}): looked at every second, an agent may pass it by what it writes in one look"
            ),
        }
    }
}

/// The programs a lane's file system needs, found once.
struct Tools {
    mkfs: PathBuf,
    mount: PathBuf,
}

fn tools() -> Result<&'static Tools, String> {
    static TOOLS: std::sync::OnceLock<Result<Tools, String>> = std::sync::OnceLock::new();
    TOOLS
        .get_or_init(|| {
            let find = |name: &str| {
                ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
                    .iter()
                    .map(|d| Path::new(d).join(name))
                    .find(|p| p.is_file())
                    .ok_or_else(|| format!("no {name} on this machine"))
            };
            Ok(Tools {
                mkfs: find("mkfs.ext4")?,
                mount: find("mount")?,
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// How the limits hold here: by a file system per lane when stet may mount one, else
/// watched (with why).
pub fn enforcement(wanted: bool) -> Enforcement {
    if !wanted {
        return Enforcement::Watched("[sandbox] lane_file_systems = false".to_string());
    }
    if !cfg!(target_os = "linux") {
        return Enforcement::Watched("this system has no loop devices".to_string());
    }
    if !nix::unistd::geteuid().is_root() {
        return Enforcement::Watched(
            "stet runs without the right to mount file systems".to_string(),
        );
    }
    if !Path::new("/dev/loop-control").exists() {
        return Enforcement::Watched("this machine has no loop devices".to_string());
    }
    match tools() {
        Ok(_) => Enforcement::FileSystem,
        Err(why) => Enforcement::Watched(why),
    }
}

/// What a new lane's file system must hold besides the limits: the bytes and entries of
/// the checkout of `source` (a commit the repository holds), as ext4 would lay them out.
pub fn checkout_size(repo: &Path, source: &str) -> Result<(u64, u64), crate::git::GitError> {
    let listing = crate::git::Inert::at(repo)
        .with_deadline(crate::git::HOST_ONLY_DEADLINE)
        .output(&["ls-tree", "-r", "-t", "-l", "-z", "--full-tree", source])?
        .stdout;
    let (mut bytes, mut entries) = (0u64, 0u64);
    for entry in listing.split(|b| *b == 0).filter(|e| !e.is_empty()) {
        let entry = String::from_utf8_lossy(entry);
        let size = entry
            .split('\t')
            .next()
            .and_then(|meta| meta.split_whitespace().nth(3))
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0);
        // A block at least per entry, rounded up to blocks.
        bytes = bytes.saturating_add(size.div_ceil(4096).max(1) * 4096);
        entries += 1;
    }
    Ok((bytes, entries))
}

fn failed(what: &str, detail: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("{what}: {detail}"))
}

fn run(command: &mut Command, what: &str) -> std::io::Result<()> {
    let out = command
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::null())
        .output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(failed(what, String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// Makes the file system of the lane whose root is `root` — room for `bytes` and `files`
/// — and mounts it at `work` (an empty directory).
pub fn make(root: &Path, work: &Path, bytes: u64, files: u64) -> std::io::Result<()> {
    let tools = tools().map_err(std::io::Error::other)?;
    let image = root.join(IMAGE);
    let (block, inodes, size) = layout(bytes, files);
    std::fs::File::create_new(&image)?.set_len(size)?;
    run(
        Command::new(&tools.mkfs)
            .args(["-q", "-F", "-m", "0", "-O", "^has_journal"])
            .args(["-b", &block.to_string(), "-N", &inodes.to_string()])
            .args(["-E", "lazy_itable_init=1,nodiscard", "-T", "default"])
            .arg(&image),
        "mkfs.ext4",
    )?;
    mount(root, work)
}

fn mount(root: &Path, work: &Path) -> std::io::Result<()> {
    let tools = tools().map_err(std::io::Error::other)?;
    run(
        Command::new(&tools.mount)
            .args(["-o", "loop,nosuid,nodev,noinit_itable"])
            .arg(root.join(IMAGE))
            .arg(work),
        "mount",
    )?;
    // The file system's top is the owner's alone, like the lane around it.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(work, std::fs::Permissions::from_mode(0o700))?;
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    nix::unistd::chown(work, Some(uid), Some(gid)).map_err(std::io::Error::from)?;
    Ok(())
}

/// Whether `work` is a file system of its own (mounted over its directory).
pub fn mounted(work: &Path) -> bool {
    let (Ok(inner), Some(Ok(outer))) = (
        std::fs::symlink_metadata(work),
        work.parent().map(std::fs::symlink_metadata),
    ) else {
        return false;
    };
    inner.dev() != outer.dev()
}

/// Mounts the lane's file system at `work` again if it has one and it is not mounted (the
/// machine restarted since); whether the lane has one.
pub fn ensure_mounted(root: &Path, work: &Path) -> std::io::Result<bool> {
    if !root.join(IMAGE).is_file() {
        return Ok(false);
    }
    if !mounted(work) {
        mount(root, work)?;
    }
    Ok(true)
}

/// Unmounts the lane's file system under `root`, if mounted (lazily: a shell still in it
/// keeps it until it leaves), so that the lane can be moved to the trash and deleted.
pub fn release(root: &Path) {
    let work = root.join("work");
    if mounted(&work) {
        #[cfg(target_os = "linux")]
        let _ = nix::mount::umount2(&work, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// What is left in a lane's file system, and what it holds in all, for the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    pub bytes: u64,
    pub files: u64,
    pub total_bytes: u64,
    pub total_files: u64,
}

impl Room {
    /// Whether a limit was met: what is left is less than the kernel refuses a write at
    /// (ext4 keeps room for a write's metadata, so a write past the limit fails with some
    /// megabytes free): under 1/64 of the bytes (at least 4 MiB), or 1/1000 of the files.
    pub fn met(&self) -> Option<Met> {
        if self.files < (self.total_files / 1000).max(16) {
            Some(Met::Files)
        } else if self.bytes < (self.total_bytes / 64).max(4 << 20) {
            Some(Met::Bytes)
        } else {
            None
        }
    }
}

/// Which limit a lane's file system met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Met {
    Bytes,
    Files,
}

/// The room left in the lane file system at `work`; `None` when it has none of its own.
pub fn room(work: &Path) -> Option<Room> {
    if !mounted(work) {
        return None;
    }
    let stat = nix::sys::statvfs::statvfs(work).ok()?;
    // The counts are u64 on Linux, u32 on macOS.
    #[allow(clippy::useless_conversion)]
    let (block, available, blocks, files_available, files) = (
        u64::from(stat.fragment_size()),
        u64::from(stat.blocks_available()),
        u64::from(stat.blocks()),
        u64::from(stat.files_available()),
        u64::from(stat.files()),
    );
    Some(Room {
        bytes: available.saturating_mul(block),
        files: files_available,
        total_bytes: blocks.saturating_mul(block),
        total_files: files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layout_holds_the_files_asked_where_the_bytes_allow_and_never_more_bytes() {
        // The defaults: 4 KiB blocks, every file asked.
        let (block, inodes, size) = layout(10 << 30, 1_000_000);
        assert_eq!((block, inodes), (4096, 1_000_000));
        assert!(size < (10 << 30) + (600 << 20), "{size}");
        // A small disk limit with many files: 1 KiB blocks, as many files as fit.
        let (block, inodes, size) = layout(50 << 20, 1_000_000);
        assert_eq!(block, 1024);
        assert!(inodes < 1_000_000 && inodes > 60_000, "{inodes}");
        assert!(inodes <= size / 1024, "one inode a block at most");
        assert!(
            size - inodes * 256 < (60 << 20),
            "the bytes stay near the limit: {size}"
        );
    }

    #[test]
    fn a_lane_file_system_refuses_a_write_past_its_bytes_and_its_files() {
        if enforcement(true) != Enforcement::FileSystem {
            // Not root here: the watched path's tests cover this machine.
            eprintln!(
                "skipped: {}",
                enforcement(true).describe(&crate::settings::SandboxLimits::defaults())
            );
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (root, work) = (dir.path().to_path_buf(), dir.path().join("work"));
        std::fs::create_dir(&work).unwrap();
        /// Lets the file system go however the test ends, before the directory is deleted.
        struct Released(PathBuf);
        impl Drop for Released {
            fn drop(&mut self) {
                release(&self.0);
            }
        }
        let _released = Released(root.clone());
        make(&root, &work, 8 << 20, 2000).unwrap();
        assert!(mounted(&work));
        let before = room(&work).unwrap();
        assert!(before.met().is_none(), "{before:?}");
        // Bytes: a write past the room fails at the kernel.
        let big = std::fs::write(work.join("big"), vec![7u8; 200 << 20]);
        assert!(big.is_err(), "200 MiB fit in an 8 MiB lane");
        let after = room(&work).unwrap();
        assert_eq!(
            after.met(),
            Some(Met::Bytes),
            "{before:?} {after:?} {:?}",
            std::fs::metadata(work.join("big")).map(|m| m.len())
        );
        std::fs::remove_file(work.join("big")).unwrap();
        // Files: empty files run out too.
        let made = (0..100_000)
            .take_while(|n| std::fs::write(work.join(format!("f{n}")), "").is_ok())
            .count();
        assert!(made < 100_000 && made > 1000, "{made}");
        assert_eq!(room(&work).unwrap().met(), Some(Met::Files));
        release(&root);
        assert!(!mounted(&work));
        // After a restart, mounted again with what it held.
        assert!(ensure_mounted(&root, &work).unwrap());
        assert!(work.join("f0").is_file());
        release(&root);
    }
}
