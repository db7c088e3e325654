//! The gate: **everything a sandbox wrote crosses back to the host, or reaches the
//! person, through here** — a lane's working tree before host git commits, restores,
//! resets or diffs it (the drive's calls and checks, `stet shell`, a kept lane, a pooled
//! one, `stet diff`, `show` and the board), the person's own directory after `stet ask`,
//! and a branch before stet lands it or a person takes it.
//!
//! What crosses is judged by shape, the way git, the kernel and a person judge it, never
//! by name alone:
//!
//! - only regular files, directories and symbolic links cross; a special file (FIFO,
//!   socket, device) is removed; a link is never followed;
//! - of a file only its bytes and its executable bit are work: set-user-id, set-group-id
//!   and sticky bits, group and other write, extended attributes (notes, ACLs) and the
//!   times it was given are put right on whatever a sandbox touched (`walk.rs`);
//! - a repository is whatever git's discovery would take for one, under any name
//!   (`shape.rs`): a lane's commit refuses it by name, a restore removes it, `stet ask`
//!   renames it out of git's sight, a landed branch never holds one (`landing.rs`);
//! - a path longer than git can hold, a file over `[drive] max_file`, or more bytes than
//!   the disk limit for git to read (hard links counted once per link) is refused before
//!   git reads anything.
//!
//! The walk holds directory handles (`openat`), so no path is too long for it; an entry it
//! cannot examine fails the crossing closed. Host git on a lane's working tree runs only
//! here (`tree.rs`): elsewhere a lane's git is its history alone
//! (`invariants.rs::host_git_reads_a_lanes_working_tree_only_through_the_gate`).

mod landing;
mod shape;
mod tree;
mod walk;

pub use landing::{carried_words, check_branch, Carried};
pub use shape::Shape;
pub use tree::{Bounds, CommitError, Committed, Tree};
pub use walk::{GateError, Removed, Repository, Since, GIT_PATH_LIMIT, QUARANTINED};

use std::path::Path;

/// The repositories under `dir` (its own `.git` aside), none entered: what `stet ask`
/// mounts read-only before its call. Never stops early: a tree it cannot walk whole is an
/// error.
pub fn survey(dir: &Path) -> Result<Vec<Repository>, GateError> {
    let rules = walk::Rules {
        purpose: walk::Purpose::Survey,
        since: None,
        skip_untouched_repositories: true,
        skip: Vec::new(),
    };
    Ok(walk::walk(dir, rules, u64::MAX)?.repositories)
}

/// What the gate did to the person's directory after a `stet ask` call.
#[derive(Debug, Default)]
pub struct Looked {
    /// Repositories the call made or changed, each renamed out of git's sight.
    pub repositories: Vec<Repository>,
    /// Special files the call made, removed.
    pub removed: Vec<Removed>,
}

/// After a call that could write `dir` (the person's own, for `stet ask`), started at
/// `started`: what it touched is put right, special files it made are removed, and every
/// repository it made or changed is renamed out of git's sight, however many. Nothing the
/// call did not touch is changed.
pub fn after_ask(dir: &Path, started: std::time::SystemTime) -> Result<Looked, GateError> {
    let rules = walk::Rules {
        purpose: walk::Purpose::Look,
        since: Some(Since::before(started)),
        skip_untouched_repositories: true,
        skip: Vec::new(),
    };
    let walked = walk::walk(dir, rules, u64::MAX)?;
    Ok(Looked {
        repositories: walked.repositories,
        removed: walked.removed,
    })
}
