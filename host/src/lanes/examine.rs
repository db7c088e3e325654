//! What a sandbox left in a lane's working tree, looked at before any host git runs on it.
//!
//! Git follows what it finds in a working tree: a `.git` file or directory below the top
//! makes it open that repository (whose `HEAD` may be a FIFO that blocks it forever, or a
//! path on the host whose existence then decides what is committed), and it hashes every
//! byte of a file it adds (a sparse file of 20 GiB takes no disk and minutes of git). So
//! before the host's git touches a lane, the tree is walked here with `lstat` alone —
//! nothing is opened, no link followed — and:
//!
//! - special files (FIFOs, sockets, devices) are removed: git cannot commit them, and
//!   whoever opens one may wait forever;
//! - every `.git` below the top (a directory, a file, a link) is removed: the lane's only
//!   repository is its own, and what the agent's nested repositories held is committed as
//!   the plain files they are;
//! - a regular file over the size limit that the call added or changed is named: the
//!   caller refuses it before git hashes it. A file over the limit that is tracked and
//!   unchanged (its length and hash those of the committed blob) is the repository's own.

use std::path::{Path, PathBuf};

use crate::git::{GitError, Inert};

/// What was taken out of a lane, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    /// The path, relative to the working tree.
    pub path: String,
    /// Why, in words.
    pub why: &'static str,
}

impl std::fmt::Display for Removed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.path, self.why)
    }
}

/// A file over the size limit the call added or changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooLarge {
    /// The path, relative to the working tree.
    pub path: String,
    /// Its length in bytes (what a sparse file would make git read).
    pub bytes: u64,
}

/// What [`examine`] found.
#[derive(Debug, Default)]
pub struct Examined {
    /// Taken out of the tree.
    pub removed: Vec<Removed>,
    /// Regular files over the limit (not yet checked against what is committed).
    large: Vec<(PathBuf, String, u64)>,
}

/// Walks `work_tree` (its top `.git`, the mount point of the lane's git directory, aside):
/// removes special files and nested `.git` entries, and notes regular files longer than
/// `max_file` bytes.
pub fn examine(work_tree: &Path, max_file: u64) -> std::io::Result<Examined> {
    let mut examined = Examined::default();
    let mut pending = vec![(work_tree.to_path_buf(), String::new())];
    while let Some((dir, relative)) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if dir == work_tree => return Err(e),
            // A directory the tree's owner cannot read is git's to report.
            Err(_) => continue,
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let path = entry.path();
            let shown = if relative.is_empty() {
                name.to_string_lossy().into_owned()
            } else {
                format!("{relative}/{}", name.to_string_lossy())
            };
            let meta = std::fs::symlink_metadata(&path)?;
            let kind = meta.file_type();
            if name == ".git" {
                if relative.is_empty() {
                    // The lane's own: the read-only mount point, never written by a sandbox.
                    continue;
                }
                if kind.is_dir() {
                    std::fs::remove_dir_all(&path)?;
                } else {
                    std::fs::remove_file(&path)?;
                }
                examined.removed.push(Removed {
                    path: shown,
                    why: "a repository of the agent's own: host git would follow it",
                });
                continue;
            }
            if kind.is_dir() {
                pending.push((path, shown));
            } else if kind.is_file() {
                if meta.len() > max_file {
                    examined.large.push((path, shown, meta.len()));
                }
            } else if !kind.is_symlink() {
                std::fs::remove_file(&path)?;
                examined.removed.push(Removed {
                    path: shown,
                    why: special_kind(&kind),
                });
            }
        }
    }
    examined.removed.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(examined)
}

fn special_kind(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_fifo() {
        "a FIFO: whoever opens it may wait forever"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "a device"
    }
}

impl Examined {
    /// The files over the limit that `git` (the lane's, at its `HEAD`) does not hold as
    /// they are: added, or changed. A tracked file whose length is its blob's is hashed
    /// (streamed by git) to tell; one of another length is changed without a read.
    pub fn too_large(&self, git: &Inert) -> Result<Vec<TooLarge>, GitError> {
        let mut found = Vec::new();
        for (path, shown, bytes) in &self.large {
            if !self.unchanged(git, path, shown, *bytes)? {
                found.push(TooLarge {
                    path: shown.clone(),
                    bytes: *bytes,
                });
            }
        }
        found.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(found)
    }

    fn unchanged(
        &self,
        git: &Inert,
        path: &Path,
        shown: &str,
        bytes: u64,
    ) -> Result<bool, GitError> {
        let Some(text) = path.to_str() else {
            return Ok(false);
        };
        // `<mode> blob <oid> <size>\t<path>`, or nothing for a path HEAD does not hold.
        let listed = match git.run(&["ls-tree", "-l", "HEAD", "--", &format!(":(literal){shown}")])
        {
            Ok(listed) => listed,
            // No HEAD yet: nothing is tracked.
            Err(_) => return Ok(false),
        };
        let Some((meta, _)) = listed.split_once('\t') else {
            return Ok(false);
        };
        let fields: Vec<&str> = meta.split_whitespace().collect();
        let (Some(&"blob"), Some(oid), Some(size)) = (fields.get(1), fields.get(2), fields.get(3))
        else {
            return Ok(false);
        };
        if size.parse::<u64>().ok() != Some(bytes) {
            return Ok(false);
        }
        let hashed = git.run(&["hash-object", "--no-filters", "--", text])?;
        Ok(hashed.trim() == *oid)
    }
}

/// Says what a lane's files too large to commit are, for a person: which, how large, the
/// limit and what to do.
pub fn refusal(found: &[TooLarge], max_file: u64) -> String {
    let listed: Vec<String> = found
        .iter()
        .take(10)
        .map(|f| format!("{} ({})", f.path, crate::printer::size(f.bytes)))
        .collect();
    let more = found.len().saturating_sub(listed.len());
    format!(
        "the agent left {} over the {} a lane may commit ([drive] max_file): {}{}; stet does not commit them (raise max_file if the item needs such files)",
        crate::printer::count(found.len(), "file", "files"),
        crate::printer::size(max_file),
        listed.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_files_and_nested_repositories_go_before_git_sees_them() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path();
        std::fs::create_dir_all(tree.join(".git")).unwrap();
        std::fs::create_dir_all(tree.join("fake/objects")).unwrap();
        nix::unistd::mkfifo(&tree.join("fake/HEAD"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        std::fs::create_dir_all(tree.join("probe")).unwrap();
        std::fs::write(tree.join("probe/.git"), "gitdir: /etc\n").unwrap();
        std::fs::create_dir_all(tree.join("vendor/lib/.git/hooks")).unwrap();
        std::fs::write(tree.join("vendor/lib/file"), "kept").unwrap();
        std::os::unix::fs::symlink("/", tree.join("link")).unwrap();
        let examined = examine(tree, 1 << 20).unwrap();
        let removed: Vec<&str> = examined.removed.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(removed, ["fake/HEAD", "probe/.git", "vendor/lib/.git"]);
        assert!(
            tree.join(".git").is_dir(),
            "the lane's own mount point stays"
        );
        assert!(tree.join("vendor/lib/file").is_file());
        assert!(
            tree.join("link").symlink_metadata().is_ok(),
            "links are data"
        );
    }

    #[test]
    fn a_sparse_file_is_too_large_by_its_length_and_a_tracked_one_unchanged_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let (git_dir, work) = (dir.path().join("git"), dir.path().join("work"));
        std::fs::create_dir_all(&work).unwrap();
        crate::git::run(
            dir.path(),
            &["init", "--quiet", "--bare", git_dir.to_str().unwrap()],
        )
        .unwrap();
        let git = Inert::lane(&git_dir, &work);
        git.run(&["config", "core.bare", "false"]).unwrap();
        std::fs::write(work.join("asset.bin"), vec![7u8; 4096]).unwrap();
        git.run(&["add", "asset.bin"]).unwrap();
        git.run(&["commit", "--quiet", "-m", "an asset"]).unwrap();
        std::fs::File::create(work.join("sparse.bin"))
            .unwrap()
            .set_len(20 << 30)
            .unwrap();
        let examined = examine(&work, 1024).unwrap();
        let found = examined.too_large(&git).unwrap();
        assert_eq!(
            found,
            [TooLarge {
                path: "sparse.bin".into(),
                bytes: 20 << 30
            }]
        );
        // The tracked asset, changed in place at the same length, is refused too.
        std::fs::write(work.join("asset.bin"), vec![8u8; 4096]).unwrap();
        let found = examine(&work, 1024).unwrap().too_large(&git).unwrap();
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(refusal(&found, 1024).contains("asset.bin (4 KiB)"));
    }
}
