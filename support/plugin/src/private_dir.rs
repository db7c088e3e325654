//! A directory private to this user (a harness's walled profile): made with mode 0700,
//! refused when it is a link, not a directory, writable by others or someone else's.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;

/// What is wrong with `dir` as a private directory, with the remedy; `None` when it is fit.
pub fn unfit(dir: &Path) -> Option<(String, String)> {
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) => {
            return Some((
                format!("{} cannot be read: {e}", dir.display()),
                format!("create it: mkdir -m 700 {}", dir.display()),
            ))
        }
    };
    if meta.file_type().is_symlink() {
        return Some((
            format!("{} is a symbolic link", dir.display()),
            format!(
                "make it a real directory of its own: rm {d} && mkdir -m 700 {d}",
                d = dir.display()
            ),
        ));
    }
    if !meta.is_dir() {
        return Some((
            format!("{} is not a directory", dir.display()),
            format!(
                "move it away; stet makes the directory: mv {d} {d}.old",
                d = dir.display()
            ),
        ));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o022 != 0 {
        return Some((
            format!(
                "{} is writable by {} (mode {mode:o})",
                dir.display(),
                match (mode & 0o020 != 0, mode & 0o002 != 0) {
                    (true, true) => "its group and others",
                    (true, false) => "its group",
                    _ => "others",
                }
            ),
            format!("chmod go-w {}", dir.display()),
        ));
    }
    let me = current_uid();
    if me.is_some_and(|uid| uid != meta.uid()) {
        return Some((
            format!(
                "{} belongs to uid {}, not to you",
                dir.display(),
                meta.uid()
            ),
            format!(
                "use a profile of your own, or chown it: chown \"$(id -u)\" {}",
                dir.display()
            ),
        ));
    }
    None
}

/// This process's uid, read from `/proc/self` (Linux); `None` elsewhere (no check then).
fn current_uid() -> Option<u32> {
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// Makes `dir` (mode 0700, its parents too) when it is missing, then checks it ([`unfit`]).
/// The error is what is wrong and the remedy, in words.
pub fn ensure(dir: &Path) -> Result<(), (String, String)> {
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| {
                (
                    format!("cannot make the directory {}: {e}", dir.display()),
                    format!("make it yourself: mkdir -m 700 -p {}", dir.display()),
                )
            })?;
    }
    match unfit(dir) {
        Some(unfit) => Err(unfit),
        None => Ok(()),
    }
}
