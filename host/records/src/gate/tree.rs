//! A lane's working tree, which sandboxes write: host git on it runs only here, each
//! command after the walk its purpose needs.
//!
//! Which entries a sandbox may have touched is what changed since the tree was last put
//! back to its commit: the lane's `crossed` file (beside its `work/` and `git/`, which no
//! sandbox mounts) holds that time, written when a restore ends. A lane without one (made
//! by an older stet) is walked whole.

use std::path::{Path, PathBuf};

use crate::git::{GitError, Inert, Person};

use super::walk::{self, GateError, Purpose, Removed, Rules, Since};

/// A lane's working tree and its git directory (outside it, never writable by a sandbox).
#[derive(Debug, Clone, Copy)]
pub struct Tree<'a> {
    /// The git directory.
    pub git_dir: &'a Path,
    /// The working tree.
    pub work: &'a Path,
}

/// Why a lane's work was not committed.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// Git failed.
    #[error(transparent)]
    Git(#[from] GitError),
    /// The tree could not be looked at whole: nothing was committed.
    #[error(transparent)]
    Gate(#[from] GateError),
    /// What the call left cannot be committed, in words for the person and the agent's
    /// next round (a repository, a path or file git cannot hold, too much to read).
    #[error("{0}")]
    Refused(String),
}

/// What a commit of a lane did.
#[derive(Debug, Default)]
pub struct Committed {
    /// Whether there was anything to commit.
    pub changed: bool,
    /// What was taken out of the tree before git looked at it.
    pub removed: Vec<Removed>,
}

/// How much one commit may take.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// The largest file it may add or change (`[drive] max_file`).
    pub max_file: u64,
    /// The most bytes git may read to commit what changed, each hard link counted (the
    /// disk limit: what the sandbox was held to).
    pub max_read: u64,
}

fn io_failure(what: &str, path: &Path, e: impl std::fmt::Display) -> GitError {
    GitError {
        args: what.into(),
        dir: path.display().to_string(),
        detail: e.to_string(),
    }
}

impl Tree<'_> {
    /// Git on the lane, working tree and all: for this module alone.
    fn git(&self) -> Inert {
        Inert::lane(self.git_dir, self.work)
    }

    /// The file holding when the tree was last put back to its commit.
    fn stamp_file(&self) -> PathBuf {
        self.git_dir.with_file_name("crossed")
    }

    /// Since when what changed may be a sandbox's; `None`: everything may.
    fn since(&self) -> Option<Since> {
        let text = std::fs::read_to_string(self.stamp_file()).ok()?;
        let (secs, nanos) = text.trim().split_once('.')?;
        Some(Since {
            secs: secs.parse().ok()?,
            nanos: nanos.parse().ok()?,
        })
    }

    /// Notes that the tree is its commit's as of now (written whole, then renamed).
    fn stamp(&self) -> Result<(), GitError> {
        let now = Since::before(std::time::SystemTime::now());
        let file = self.stamp_file();
        let partial = file.with_extension("partial");
        std::fs::write(&partial, format!("{}.{}\n", now.secs, now.nanos))
            .and_then(|_| std::fs::rename(&partial, &file))
            .map_err(|e| io_failure("write", &file, e))
    }

    /// The seed the lane was given (`seeds.rs`): laid in at each restore, never walked,
    /// never given to host git.
    fn seed(&self) -> Option<crate::seeds::Given> {
        crate::seeds::given(self.git_dir.parent()?)
    }

    /// The seed's outputs, paths in the tree (none without a seed).
    fn outputs(&self) -> Vec<String> {
        self.seed().map(|s| s.outputs).unwrap_or_default()
    }

    /// Pathspecs for host git: the whole tree but the seed's outputs. (An output the
    /// tree's ignore rules leave out already is not named: git refuses a pathspec that
    /// names an ignored path, even to exclude it. Looked at after the walk.)
    fn pathspecs(&self, outputs: &[String]) -> Vec<String> {
        let git = self.git();
        let mut specs = vec![".".to_string()];
        for output in outputs {
            if git.run(&["check-ignore", "--quiet", "--", output]).is_err() {
                specs.push(format!(":(exclude,literal){output}"));
            }
        }
        specs
    }

    /// Walks the tree for `purpose`, never entering `outputs` (the seed's: a restore passes
    /// none, and removes what was touched in the seed's copy too).
    fn walk(
        &self,
        purpose: Purpose,
        max_file: u64,
        outputs: &[String],
    ) -> Result<walk::Walked, GateError> {
        walk::walk(
            self.work,
            Rules {
                purpose,
                since: self.since(),
                skip_untouched_repositories: false,
                skip: outputs.to_vec(),
            },
            max_file,
        )
    }

    /// Commits whatever the tree holds that its commit does not, authored by `author`
    /// (stet stays the committer), within `bounds`. The tree is walked first: special
    /// files are taken out, what was touched is put right, and a repository, a path git
    /// cannot hold, a file over the limit or too much to read refuses the commit, named,
    /// before git reads anything.
    pub fn commit(
        &self,
        message: &str,
        author: Option<&Person>,
        bounds: Bounds,
    ) -> Result<Committed, CommitError> {
        let outputs = self.outputs();
        let walked = self.walk(Purpose::Commit, bounds.max_file, &outputs)?;
        let git = self.git();
        let large = too_large(&git, &walked.large)?;
        if let Some(words) = refusal_words(&walked, &large, bounds) {
            return Err(CommitError::Refused(words));
        }
        let specs = self.pathspecs(&outputs);
        let mut add = vec!["add", "--all", "--"];
        add.extend(specs.iter().map(String::as_str));
        git.run(&add)?;
        let committed = Committed {
            changed: git.run(&["diff", "--cached", "--quiet"]).is_err(),
            removed: walked.removed,
        };
        if !committed.changed {
            return Ok(committed);
        }
        match author {
            Some(person) => {
                let author = format!("{} <{}>", person.name, person.email);
                git.run(&[
                    "commit",
                    "--quiet",
                    "--no-verify",
                    "--author",
                    &author,
                    "-m",
                    message,
                ])?
            }
            None => git.run(&["commit", "--quiet", "--no-verify", "-m", message])?,
        };
        Ok(committed)
    }

    /// Puts the tree back to the lane's last commit: every entry a sandbox touched that
    /// is not a directory is removed first (git writes back what it tracks), with every
    /// `.git` entry, special file and path too long for git; then what is left beside the
    /// commit — untracked and ignored files too — is cleaned away. The next call sees
    /// only committed work.
    pub fn restore(&self) -> Result<Vec<Removed>, GitError> {
        self.reset("HEAD", crate::git::LANE_GIT_DEADLINE)
    }

    /// [`Tree::restore`], to `commit` (a commit the lane's git directory holds), git
    /// allowed `deadline` (a first checkout of a large repository takes long).
    pub fn reset(
        &self,
        commit: &str,
        deadline: std::time::Duration,
    ) -> Result<Vec<Removed>, GitError> {
        let walked = self
            .walk(Purpose::Restore, u64::MAX, &[])
            .map_err(|e| io_failure("examine", self.work, e))?;
        let git = self.git().with_deadline(deadline);
        git.run(&["reset", "--quiet", "--hard", commit])?;
        // `-ff`: nested repositories go too; `.git` (the mount point) is never touched.
        git.run(&["clean", "--quiet", "-ffdx", "--exclude=/.git"])?;
        // The seed's copy, laid in before the stamp: what a sandbox then changes in it is
        // touched, what it leaves alone is not.
        if let Some(seed) = self.seed() {
            crate::seeds::lay(&seed, self.work)
                .map_err(|e| io_failure("lay the seed into", self.work, e))?;
        }
        self.stamp()?;
        Ok(walked.removed)
    }

    /// What the tree holds that its last commit does not (`git status --short` lines,
    /// ignored files too): a person's edits from `stet shell`. Looked at first.
    pub fn uncommitted(&self) -> Result<Vec<String>, GitError> {
        let outputs = self.outputs();
        self.look(&outputs)?;
        let specs = self.pathspecs(&outputs);
        // Ignored files too: the lane's `.gitignore` is the agent's, and a file a person
        // made in a shell is theirs whatever it says (the seed's copy is stet's).
        let mut status = vec![
            "status",
            "--porcelain",
            "--untracked-files=normal",
            "--ignored=matching",
            "--",
        ];
        status.extend(specs.iter().map(String::as_str));
        // Git still names an ignored output (`!! target/`) that a pathspec excludes: the
        // seed's copy is stet's, never a person's edit.
        let stets = |line: &str| {
            let path = line.get(3..).unwrap_or_default().trim_end_matches('/');
            outputs
                .iter()
                .any(|o| path == o || path.starts_with(&format!("{o}/")))
        };
        Ok(self
            .git()
            .run(&status)?
            .lines()
            .filter(|line| !stets(line))
            .map(str::to_string)
            .collect())
    }

    /// Streams the diff of the tree — new files included, named through `index`, an
    /// index of the host's own (the lane's is never written, nothing is hashed from a
    /// link) — against `base` to `on_line`, a piece of at most `piece` bytes at a time.
    /// Looked at first.
    pub fn diff(
        &self,
        base: &str,
        index: &Path,
        piece: usize,
        on_line: &mut dyn FnMut(&[u8]),
    ) -> Result<(), GitError> {
        let outputs = self.outputs();
        self.look(&outputs)?;
        if std::fs::copy(self.git_dir.join("index"), index).is_err() {
            self.git().with_index(index).run(&["read-tree", "HEAD"])?;
        }
        let git = self.git().with_index(index);
        // A file git cannot index is left out, not the whole diff (git still exits
        // non-zero then: what it could add is added).
        let specs = self.pathspecs(&outputs);
        let mut add = vec!["add", "--intent-to-add", "--ignore-errors", "--"];
        add.extend(specs.iter().map(String::as_str));
        git.output(&add)?;
        git.stream(&["diff", base], piece, on_line)
    }

    /// Before git looks at the tree for a person: what was touched is put right, special
    /// files are removed, repositories made are renamed out of git's sight.
    fn look(&self, outputs: &[String]) -> Result<(), GitError> {
        self.walk(Purpose::Look, u64::MAX, outputs)
            .map(|_| ())
            .map_err(|e| io_failure("examine", self.work, e))
    }
}

/// The files over the limit that git (the lane's, at its `HEAD`) does not hold as they
/// are: added, or changed. A tracked file whose length is its blob's is hashed (streamed by
/// git) to tell; one of another length is changed without a read.
fn too_large(git: &Inert, large: &[(String, u64)]) -> Result<Vec<(String, u64)>, GitError> {
    let mut found = Vec::new();
    for (path, bytes) in large {
        if !unchanged(git, path, *bytes)? {
            found.push((path.clone(), *bytes));
        }
    }
    Ok(found)
}

fn unchanged(git: &Inert, path: &str, bytes: u64) -> Result<bool, GitError> {
    // `<mode> blob <oid> <size>\t<path>`, or nothing for a path HEAD does not hold.
    let listed = match git.run(&["ls-tree", "-l", "HEAD", "--", &format!(":(literal){path}")]) {
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
    let hashed = git.run(&["hash-object", "--no-filters", "--", path])?;
    Ok(hashed.trim() == *oid)
}

/// Why what a call left cannot be committed, in words for a person and for the agent's
/// next round: every reason, each with what to do; `None` when it can be.
pub fn refusal_words(
    walked: &walk::Walked,
    large: &[(String, u64)],
    bounds: Bounds,
) -> Option<String> {
    let mut reasons = Vec::new();
    if !walked.repositories.is_empty() {
        reasons.push(format!(
            "it left {} in the lane: {}; stet never commits a repository (git would take it for one wherever it is checked out): keep the files, not the repository (no .git, no HEAD beside objects or refs)",
            crate::printer::count(walked.repositories.len(), "git repository", "git repositories"),
            listed(walked.repositories.iter().map(|r| format!("{} ({})", r.path, r.shape.words())))
        ));
    }
    if !walked.too_long.is_empty() {
        reasons.push(format!(
            "it left {} longer than git can hold ({} bytes): {}; shorten them",
            crate::printer::count(walked.too_long.len(), "path", "paths"),
            walk::GIT_PATH_LIMIT,
            listed(walked.too_long.iter().map(|p| shortened(p)))
        ));
    }
    if !large.is_empty() {
        reasons.push(format!(
            "it left {} over the {} a lane may commit ([drive] max_file): {}; raise max_file if the item needs such files",
            crate::printer::count(large.len(), "file", "files"),
            crate::printer::size(bounds.max_file),
            listed(large.iter().map(|(p, b)| format!("{p} ({})", crate::printer::size(*b))))
        ));
    }
    if walked.bytes_to_read > bounds.max_read {
        reasons.push(format!(
            "what it changed comes to {} for git to read (each hard link counted), over the {} disk limit ([sandbox] disk)",
            crate::printer::size(walked.bytes_to_read),
            crate::printer::size(bounds.max_read)
        ));
    }
    (!reasons.is_empty()).then(|| {
        format!(
            "stet did not commit the agent's work: {}",
            reasons.join("; ")
        )
    })
}

/// At most ten, then how many more.
fn listed(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    let shown: Vec<&str> = items.iter().take(10).map(String::as_str).collect();
    let more = items.len() - shown.len();
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// A path as a person can read it in a line: its first and last 60 characters.
fn shortened(path: &str) -> String {
    let chars: Vec<char> = path.chars().collect();
    if chars.len() <= 130 {
        return path.to_string();
    }
    let head: String = chars[..60].iter().collect();
    let tail: String = chars[chars.len() - 60..].iter().collect();
    format!("{head}…{tail} ({} bytes)", path.len())
}
