//! Small file-system helpers several concepts share.

use std::path::Path;

/// Takes an exclusive advisory lock (flock) on `path`, creating it and its directory when
/// missing; the lock is held until the returned value is dropped (or the process ends, so a
/// crash never leaves it taken).
pub fn lock_exclusive(path: &Path) -> std::io::Result<nix::fcntl::Flock<std::fs::File>> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| std::io::Error::from(e))
}
