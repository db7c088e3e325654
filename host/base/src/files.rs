//! Small file-system helpers several concepts share.

use std::path::Path;

/// Takes an exclusive advisory lock (flock) on `path`, creating it and its directory when
/// missing; the lock is held until the returned value is dropped (or the process ends, so a
/// crash never leaves it taken).
pub fn lock_exclusive(path: &Path) -> std::io::Result<nix::fcntl::Flock<std::fs::File>> {
    lock(path, nix::fcntl::FlockArg::LockExclusive)
}

/// Takes a shared advisory lock (flock) on `path`, creating it and its directory when
/// missing: many may hold it at once; [`locked_by_another`] sees it held. Released when the
/// returned value is dropped or the process ends.
pub fn lock_shared(path: &Path) -> std::io::Result<nix::fcntl::Flock<std::fs::File>> {
    lock(path, nix::fcntl::FlockArg::LockShared)
}

fn lock(
    path: &Path,
    how: nix::fcntl::FlockArg,
) -> std::io::Result<nix::fcntl::Flock<std::fs::File>> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    nix::fcntl::Flock::lock(file, how).map_err(|(_, e)| std::io::Error::from(e))
}

/// Whether some process holds a lock on `path` (an exclusive lock cannot be taken at
/// once); a missing file is held by nobody. Takes nothing: a lock it gets is let go.
pub fn locked_by_another(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).is_err()
}

/// Reads a file a sandbox (or whoever can commit) may have written, as data and no more:
/// a symbolic link is not followed, a FIFO or device is not waited on or touched (it is
/// opened non-blocking and refused unless it is a regular file), and more than `limit`
/// bytes is refused by size.
pub fn read_untrusted(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.file_type().is_file() {
        return Err(std::io::Error::other(kind_of(&meta.file_type())));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_flags::NOFOLLOW | libc_flags::NONBLOCK)
        .open(path)?;
    // The file could have been swapped between the look and the open: look again at what
    // was opened.
    let opened = file.metadata()?;
    if !opened.file_type().is_file() {
        return Err(std::io::Error::other(kind_of(&opened.file_type())));
    }
    if opened.len() > limit {
        return Err(std::io::Error::other(format!(
            "it is {} bytes, more than the {limit} read",
            opened.len()
        )));
    }
    let mut bytes = Vec::with_capacity(opened.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::other(format!(
            "it grew past the {limit} bytes read"
        )));
    }
    Ok(bytes)
}

/// What a file that is not a regular one is, in words.
pub fn kind_of(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_symlink() {
        "it is a symbolic link (not followed)"
    } else if kind.is_dir() {
        "it is a directory"
    } else if kind.is_fifo() {
        "it is a FIFO"
    } else if kind.is_socket() {
        "it is a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "it is a device"
    } else {
        "it is not a regular file"
    }
}

/// `open(2)` flags, from nix's re-export of libc.
mod libc_flags {
    pub const NOFOLLOW: i32 = nix::fcntl::OFlag::O_NOFOLLOW.bits();
    pub const NONBLOCK: i32 = nix::fcntl::OFlag::O_NONBLOCK.bits();
}

/// The disk space the files under `root` take or may come to take: each regular file
/// counts the larger of its length and the blocks allocated to it — a sparse file counts
/// its length, since whoever reads it (git hashing it, a scan) reads every byte of it —,
/// each inode once, symbolic links not followed, other file systems not entered. Stops
/// early once it passes `stop_at`. A `root` that is a file is measured as one.
pub fn tree_size(root: &Path, stop_at: u64) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(top) = std::fs::symlink_metadata(root) else {
        return 0;
    };
    if !top.is_dir() {
        return charge(&top);
    }
    let device = top.dev();
    let mut total = 0u64;
    let mut linked = std::collections::HashSet::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.dev() != device {
                continue;
            }
            if meta.nlink() > 1 && !meta.is_dir() && !linked.insert(meta.ino()) {
                continue;
            }
            total = total.saturating_add(charge(&meta));
            if total > stop_at {
                return total;
            }
            if meta.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    total
}

/// What a sandbox wrote under some directories, as its limits count it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Bytes: each regular file the larger of its length and its blocks (a sparse file is
    /// read whole by whoever reads it), each hard link counted.
    pub bytes: u64,
    /// Entries: files, directories, links, every name.
    pub files: u64,
}

/// What the entries under `root` come to (links not followed, other file systems and the
/// directories `skip` names not entered), stopping early once past `stop` in bytes or files.
pub fn footprint(root: &Path, stop: Footprint, skip: &[std::path::PathBuf]) -> Footprint {
    use std::os::unix::fs::MetadataExt;
    let mut seen = Footprint::default();
    let Ok(top) = std::fs::symlink_metadata(root) else {
        return seen;
    };
    if !top.is_dir() {
        return Footprint {
            bytes: charge(&top),
            files: 1,
        };
    }
    let device = top.dev();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let Ok(meta) = path.symlink_metadata() else {
                continue;
            };
            if meta.dev() != device {
                continue;
            }
            if meta.is_dir() && skip.contains(&path) {
                continue;
            }
            seen.bytes = seen.bytes.saturating_add(charge(&meta));
            seen.files += 1;
            if seen.bytes > stop.bytes || seen.files > stop.files {
                return seen;
            }
            if meta.is_dir() {
                pending.push(path);
            }
        }
    }
    seen
}

/// The disk blocks the files under `root` take (each inode once, links not followed,
/// other file systems not entered): what removing it frees. A sparse file counts what it
/// holds, not its length.
pub fn disk_usage(root: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(top) = std::fs::symlink_metadata(root) else {
        return 0;
    };
    let device = top.dev();
    let mut total = top.blocks().saturating_mul(512);
    let mut linked = std::collections::HashSet::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.dev() != device || (meta.nlink() > 1 && !linked.insert(meta.ino())) {
                continue;
            }
            total = total.saturating_add(meta.blocks().saturating_mul(512));
            if meta.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    total
}

/// What one entry counts toward a tree's size: its allocated blocks, or its length when
/// that is more (a sparse regular file).
fn charge(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let allocated = meta.blocks().saturating_mul(512);
    if meta.is_file() {
        allocated.max(meta.len())
    } else {
        allocated
    }
}

/// Copies the tree at `from` to `to` (which must not exist): directories and regular files
/// with their permissions, symbolic links as links (never followed); sockets, FIFOs and
/// devices are left out.
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut pending = vec![(from.to_path_buf(), to.to_path_buf())];
    while let Some((source, target)) = pending.pop() {
        let meta = std::fs::symlink_metadata(&source)?;
        let kind = meta.file_type();
        if kind.is_dir() {
            std::fs::create_dir(&target)?;
            // Private to this user, whatever the original allowed.
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o700))?;
            for entry in std::fs::read_dir(&source)? {
                let entry = entry?;
                pending.push((entry.path(), target.join(entry.file_name())));
            }
        } else if kind.is_file() {
            std::fs::copy(&source, &target)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&source)?, &target)?;
        }
    }
    Ok(())
}

/// Writes `bytes` to `path` durably: temporary file, flush, rename, flush the directory.
pub fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().expect("a file in a directory");
    std::fs::create_dir_all(dir)?;
    // A name of its own per writer, so two writers of the same file never write into one
    // temporary file; the rename makes the last one win whole.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let partial = dir.join(format!(
        ".{}.{}-{}.partial",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id(),
        WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let mut file = std::fs::File::create(&partial)?;
    std::io::Write::write_all(&mut file, bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&partial, path)?;
    std::fs::File::open(dir)?.sync_all()
}

/// At most the last `limit` bytes of the regular file `path` (a log a sandbox wrote into) (a link is not followed, a
/// FIFO not waited on), from the first whole line in them.
pub fn tail_untrusted(path: &Path, limit: u64) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(std::io::Error::other("not a file"));
    }
    let start = meta.len().saturating_sub(limit);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes)?;
    if start > 0 {
        // The first line is cut: it starts after the first newline.
        let cut = bytes
            .iter()
            .position(|b| *b == b'\n')
            .map_or(bytes.len(), |i| i + 1);
        bytes.drain(..cut);
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untrusted_files_are_read_as_data_only() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "host secret").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        let err = read_untrusted(&link, 100).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = read_untrusted(&fifo, 100).unwrap_err();
        assert!(err.to_string().contains("FIFO"), "{err}");
        assert!(read_untrusted(&secret, 5).is_err(), "too big");
        assert_eq!(read_untrusted(&secret, 100).unwrap(), b"host secret");
    }

    #[test]
    fn a_tree_is_copied_with_links_as_links() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("from");
        std::fs::create_dir_all(from.join("sub")).unwrap();
        std::fs::write(from.join("sub/file"), "x").unwrap();
        std::os::unix::fs::symlink("/etc/hostname", from.join("link")).unwrap();
        nix::unistd::mkfifo(&from.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let to = dir.path().join("to");
        copy_tree(&from, &to).unwrap();
        assert_eq!(std::fs::read_to_string(to.join("sub/file")).unwrap(), "x");
        assert_eq!(
            std::fs::read_link(to.join("link")).unwrap(),
            Path::new("/etc/hostname")
        );
        assert!(!to.join("fifo").exists());
    }

    #[test]
    fn a_tree_is_measured_without_following_links() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), vec![1u8; 64 * 1024]).unwrap();
        std::fs::hard_link(dir.path().join("a"), dir.path().join("b")).unwrap();
        std::os::unix::fs::symlink("/", dir.path().join("root")).unwrap();
        let size = tree_size(dir.path(), u64::MAX);
        assert!((64 * 1024..128 * 1024).contains(&size), "{size}");
    }

    #[test]
    fn a_sparse_file_counts_its_length_not_its_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let sparse = std::fs::File::create(dir.path().join("sparse")).unwrap();
        sparse.set_len(20 << 30).unwrap();
        assert!(tree_size(dir.path(), u64::MAX) >= 20 << 30);
        assert!(tree_size(&dir.path().join("sparse"), u64::MAX) >= 20 << 30);
        // Stops early all the same.
        assert!(tree_size(dir.path(), 1 << 20) > 1 << 20);
    }
}
