//! The git directories under a directory of the person's own (`stet ask`'s), which a
//! sandbox may read but never write: the person's git obeys them afterwards — a
//! `core.fsmonitor` or a hook planted in one runs at their next `git status`, and a shell
//! prompt that shows the branch runs that on every `cd`.
//!
//! Found by a walk that opens nothing and follows no link: every entry named `.git` (a
//! directory, a file pointing elsewhere, a link) and every directory laid out as a git
//! directory (`HEAD`, `objects/`, `refs/`: a bare repository, a worktree's or a
//! submodule's git directory kept elsewhere). What was found before a call is mounted
//! read-only at its own path; what is found after it that was not there before — made, or
//! put in place of one, by the agent — is quarantined: renamed so that no git finds it,
//! and named to the person.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The most git directories one `stet ask` mounts: each is a mount of its own.
pub const MOST: usize = 1000;

/// One git directory (or `.git` entry) found, as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitDir {
    /// Where.
    pub path: PathBuf,
    /// What it is on disk (device and inode, of the entry itself): one put in its place
    /// is another.
    identity: (u64, u64),
    /// A `.git` entry that is a symbolic link: not mounted (a mount would follow it), but
    /// held to its identity after the call all the same.
    pub link: bool,
}

/// Every git directory and `.git` entry under `root`, `root/.git` included, without
/// entering them; at most [`MOST`] + 1 (the caller refuses more).
pub fn find(root: &Path) -> Vec<GitDir> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        if looks_like_git_dir(&dir) && dir != root {
            if let Some(git_dir) = identify(&dir) {
                found.push(git_dir);
            }
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if entry.file_name() == ".git" {
                if let Some(git_dir) = identify(&path) {
                    found.push(git_dir);
                }
            } else if kind.is_dir() {
                pending.push(path);
            }
            if found.len() > MOST {
                return found;
            }
        }
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

fn identify(path: &Path) -> Option<GitDir> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    Some(GitDir {
        path: path.to_path_buf(),
        identity: (meta.dev(), meta.ino()),
        link: meta.file_type().is_symlink(),
    })
}

/// Whether `dir` is laid out as a git directory: git would take it for one.
fn looks_like_git_dir(dir: &Path) -> bool {
    let is = |name: &str, dir_wanted: bool| {
        std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| m.is_dir() == dir_wanted)
    };
    is("HEAD", false) && is("objects", true) && is("refs", true)
}

/// What was quarantined after a call: where it was, and where it is now.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Quarantined {
    /// The git directory or `.git` entry the agent made or replaced.
    pub found: PathBuf,
    /// What it was renamed to.
    pub moved_to: PathBuf,
}

/// After a call: every git directory under `root` that is not one of `before`, as it
/// was, is renamed out of git's sight (a `.git` entry to `.git.stet-quarantined-<n>`, a
/// directory laid out as a git directory by renaming its `HEAD`). Nothing is deleted.
pub fn quarantine_new(root: &Path, before: &[GitDir]) -> std::io::Result<Vec<Quarantined>> {
    let mut moved = Vec::new();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    for now in find(root) {
        if before.contains(&now) {
            continue;
        }
        let (from, to) = if now.path.file_name().is_some_and(|n| n == ".git") {
            let to = now
                .path
                .with_file_name(format!(".git.stet-quarantined-{stamp}"));
            (now.path.clone(), to)
        } else {
            let head = now.path.join("HEAD");
            (
                head.clone(),
                now.path.join(format!("HEAD.stet-quarantined-{stamp}")),
            )
        };
        std::fs::rename(&from, &to)?;
        moved.push(Quarantined {
            found: now.path,
            moved_to: to,
        });
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(at: &Path) {
        std::fs::create_dir_all(at).unwrap();
        crate::git::run(at, &["init", "--quiet"]).unwrap();
    }

    #[test]
    fn every_git_directory_under_a_folder_of_repositories_is_found_without_entering_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        repo(&root.join("a"));
        repo(&root.join("b/vendor/lib"));
        crate::git::run(root, &["init", "--quiet", "--bare", "c.git"]).unwrap();
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::write(root.join("d/.git"), "gitdir: ../c.git\n").unwrap();
        std::os::unix::fs::symlink("/", root.join("e")).unwrap();
        let found: Vec<String> = find(root)
            .iter()
            .map(|g| g.path.strip_prefix(root).unwrap().display().to_string())
            .collect();
        assert_eq!(found, ["a/.git", "b/vendor/lib/.git", "c.git", "d/.git"]);
    }

    #[test]
    fn what_the_agent_makes_or_replaces_is_quarantined_and_what_was_there_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        repo(&root.join("kept"));
        repo(&root.join("replaced"));
        let before = find(root);
        // The agent: a new repository, a `.git` file, one put in place of another.
        repo(&root.join("new"));
        std::fs::create_dir_all(root.join("plain")).unwrap();
        std::fs::write(root.join("plain/.git"), "gitdir: /elsewhere\n").unwrap();
        std::fs::rename(root.join("replaced/.git"), root.join("aside")).unwrap();
        repo(&root.join("replaced"));
        let moved = quarantine_new(root, &before).unwrap();
        let found: Vec<String> = moved
            .iter()
            .map(|q| q.found.strip_prefix(root).unwrap().display().to_string())
            .collect();
        assert_eq!(found, ["aside", "new/.git", "plain/.git", "replaced/.git"]);
        assert!(root.join("kept/.git").is_dir());
        assert!(!root.join("plain/.git").exists());
        assert!(crate::git::Inert::at(&root.join("plain"))
            .run(&["rev-parse", "--git-dir"])
            .is_err_and(|e| !e.detail.contains("elsewhere")));
        // Nothing was deleted.
        assert!(std::fs::read_dir(root.join("plain")).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(".git.stet-quarantined-")));
        assert!(quarantine_new(root, &find(root)).unwrap().is_empty());
    }
}
