//! Running git, in two ways that must not be confused.
//!
//! - [`run`]/[`output`]: **the person's git**, for their own repository and its remote
//!   (reservations, marks, pushing a landed branch). It keeps the person's environment and
//!   configuration, because reaching the remote may need their credentials; nothing a
//!   sandbox wrote is ever its configuration (a lane's files reach the repository only as
//!   objects fetched by [`Inert`]).
//! - [`Inert`]: **git that obeys nothing a sandbox could have written**, for every command
//!   on a lane (and for fetching a lane's branch into the repository). Its environment is
//!   built from scratch (no credentials, no SSH agent, no `HOME`), it reads no system or
//!   global configuration, and the command-line level of git's configuration — which beats
//!   the repository's own file and is inherited by every git process it starts — turns off
//!   hooks, fsmonitor, pagers, editors, signing, credential helpers, external diff, every
//!   transport but local files, and submodule recursion. Filter, textconv and merge drivers
//!   the lane's configuration defines are emptied per command, and diffs run with
//!   `--no-ext-diff --no-textconv`. (The lane's git directory is also out of the sandbox's
//!   reach for writing — see `lanes.rs`; this is the second layer, which holds even if the
//!   first did not.)
//!
//! Both set stet's identity for the commits stet makes and never let git prompt.
//!
//! Every inert command is **bounded**: it leads its own process group, has a deadline
//! ([`LANE_GIT_DEADLINE`]) after which the group is killed, is hurried to a short one
//! ([`HURRIED`]) by a drive's first stop signal ([`hurry_all`]), and is killed at once by
//! its second ([`kill_all`]). Git must never wait on what a sandbox made — a FIFO it opens
//! blocks it forever — and the lane's files are looked at before git runs on them
//! (the gate's walk); the deadline is the second layer.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// A git command that failed, with what it said.
#[derive(Debug, thiserror::Error)]
#[error("git {args} in {dir}: {detail}")]
pub struct GitError {
    /// The arguments.
    pub args: String,
    /// Where it ran.
    pub dir: String,
    /// What git said.
    pub detail: String,
}

const IDENTITY: [(&str, &str); 4] = [
    ("GIT_AUTHOR_NAME", "stet"),
    ("GIT_AUTHOR_EMAIL", "stet@localhost"),
    ("GIT_COMMITTER_NAME", "stet"),
    ("GIT_COMMITTER_EMAIL", "stet@localhost"),
];

/// Who a commit is by: a name and an email, as git takes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Person {
    /// `user.name`.
    pub name: String,
    /// `user.email`.
    pub email: String,
}

impl Person {
    /// The person's own identity in `repo`, as their git would commit with it
    /// (`user.name`, `user.email`, from any level of their configuration); `None` when
    /// either is unset or holds a control character.
    pub fn of_repository(repo: &Path) -> Option<Person> {
        let get = |key: &str| {
            run(repo, &["config", "--get", key])
                .ok()
                .filter(|v| !v.is_empty() && !v.chars().any(char::is_control))
        };
        Some(Person {
            name: get("user.name")?,
            email: get("user.email")?,
        })
    }
}

/// The repository's git directory (`.git`, or what a `.git` file points to).
pub fn git_dir(repo: &Path) -> PathBuf {
    let dot_git = repo.join(".git");
    if let Ok(text) = std::fs::read_to_string(&dot_git) {
        if let Some(dir) = text.strip_prefix("gitdir:") {
            let dir = PathBuf::from(dir.trim());
            return if dir.is_absolute() {
                dir
            } else {
                repo.join(dir)
            };
        }
    }
    dot_git
}

/// Runs the person's git in `dir` and returns its output whatever its exit status.
pub fn output(dir: &Path, args: &[&str]) -> Result<Output, GitError> {
    let mut command = Command::new("git");
    command
        .args(args)
        .current_dir(dir)
        .envs(IDENTITY)
        .env("GIT_TERMINAL_PROMPT", "0");
    finish(command, dir, args)
}

/// Runs the person's git in `dir`; a failure carries what git said on stderr. Returns
/// stdout, trimmed.
pub fn run(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    checked(output(dir, args)?, dir, args)
}

/// [`run`] with `input` on git's standard input (`mktree`, `hash-object --stdin`).
pub fn run_input(dir: &Path, args: &[&str], input: &[u8]) -> Result<String, GitError> {
    use std::io::Write;
    let failed = |e: std::io::Error| GitError {
        args: args.join(" "),
        dir: dir.display().to_string(),
        detail: format!("cannot run git: {e}"),
    };
    let mut child = Command::new("git")
        .args(args)
        .current_dir(dir)
        .envs(IDENTITY)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(failed)?;
    let mut stdin = child.stdin.take().expect("piped");
    // Written from a thread of its own, so a large input never waits on unread output.
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().map_err(failed)?;
    let _ = writer.join();
    checked(out, dir, args)
}

/// Why a push of the person's git did not go through.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// The remote answered and refused a ref because someone else wrote it first: a lease
    /// that no longer matched, a branch that is no longer a fast-forward, or an update that
    /// lost the remote's ref lock to a concurrent push (`[remote rejected] (failed to update
    /// ref)`, git's form when two pushes meet at the same instant).
    #[error("the remote refused {refs}: another writer was first ({summary})")]
    Raced {
        /// The refs refused.
        refs: String,
        /// What git said of them.
        summary: String,
    },
    /// The push did not reach the remote, or the remote refused it for a reason of its own
    /// (a hook, a protected ref): nothing a peer did.
    #[error(transparent)]
    Failed(GitError),
}

/// Pushes with the person's git, `--porcelain`, so that every refused ref is reported in
/// git's own per-ref form and a lost race is told apart from a remote that did not answer.
/// `args` are the options, the remote and the refspecs.
pub fn push(dir: &Path, args: &[&str]) -> Result<(), PushError> {
    let mut all = vec!["push", "--porcelain"];
    all.extend_from_slice(args);
    let out = output(dir, &all).map_err(PushError::Failed)?;
    if out.status.success() {
        return Ok(());
    }
    let report = String::from_utf8_lossy(&out.stdout);
    // `!<TAB><from>:<to><TAB><summary>` for each refused ref.
    let refused: Vec<(&str, &str)> = report
        .lines()
        .filter_map(|l| l.strip_prefix("!\t"))
        .filter_map(|l| l.split_once('\t'))
        .collect();
    let raced = |summary: &str| {
        summary.starts_with("[rejected]")
            || (summary.starts_with("[remote rejected]")
                && ["failed to update ref", "failed to lock", "atomic"]
                    .iter()
                    .any(|why| summary.contains(why)))
    };
    if !refused.is_empty() && refused.iter().all(|(_, summary)| raced(summary)) {
        return Err(PushError::Raced {
            refs: refused
                .iter()
                .map(|(spec, _)| spec.rsplit(':').next().unwrap_or(spec))
                .collect::<Vec<_>>()
                .join(", "),
            summary: refused
                .iter()
                .map(|(_, s)| *s)
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let detail = match refused.first() {
        Some((spec, summary)) => format!("{spec}: {summary}; {stderr}"),
        None => stderr,
    };
    Err(PushError::Failed(GitError {
        args: all.join(" "),
        dir: dir.display().to_string(),
        detail,
    }))
}

fn finish(mut command: Command, dir: &Path, args: &[&str]) -> Result<Output, GitError> {
    command.output().map_err(|e| GitError {
        args: args.join(" "),
        dir: dir.display().to_string(),
        detail: format!("cannot run git: {e}"),
    })
}

fn checked(out: Output, dir: &Path, args: &[&str]) -> Result<String, GitError> {
    if !out.status.success() {
        return Err(GitError {
            args: args.join(" "),
            dir: dir.display().to_string(),
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Configuration given on git's command-line level for every inert command. It overrides
/// the repository's own file, and git passes it on to the git processes it starts.
const INERT_CONFIG: [(&str, &str); 31] = [
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", "false"),
    ("sequence.editor", "false"),
    ("core.askPass", ""),
    ("core.sshCommand", "false"),
    ("core.gitProxy", ""),
    ("core.attributesFile", "/dev/null"),
    ("core.excludesFile", "/dev/null"),
    ("core.untrackedCache", "false"),
    ("core.alternateRefsCommand", ""),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("push.gpgSign", "false"),
    ("gpg.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    ("credential.helper", ""),
    ("protocol.allow", "never"),
    ("protocol.file.allow", "always"),
    ("transfer.fsckObjects", "true"),
    ("submodule.recurse", "false"),
    ("diff.ignoreSubmodules", "all"),
    ("status.submoduleSummary", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("gc.auto", "0"),
    // A lane's git directory is readable in its sandbox: no reflog there names a host path
    // (a fetch's source) or an earlier item's commits.
    ("core.logAllRefUpdates", "false"),
    ("maintenance.auto", "false"),
    ("advice.detachedHead", "false"),
    ("init.defaultBranch", "main"),
];

/// The attributes every lane's git directory holds (`info/attributes`, which beats every
/// `.gitattributes` in the working tree): no filter, diff or merge driver, no conversion.
/// Each is left *unspecified* (`!diff`), not unset (`-diff`): both beat a `.gitattributes`
/// line naming a driver, but `-diff` also marks every file binary, and the agent inside the
/// sandbox could then read no diff of its own lane (`git diff` printing "Binary files
/// differ"). Unspecified, git diffs text as text and binary as binary, and runs no driver.
/// (On the host this is the second layer: [`Inert`] also empties the drivers and adds
/// `--no-ext-diff --no-textconv` on the command line.)
pub const INERT_ATTRIBUTES: &str =
    "* !filter !diff !merge !text !eol !ident !working-tree-encoding !export-subst\n";

/// The git binary the person's PATH names, found once; inert commands run it by absolute
/// path with a PATH of their own.
fn git_binary() -> &'static Path {
    static GIT: OnceLock<PathBuf> = OnceLock::new();
    GIT.get_or_init(|| {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|d| d.join("git"))
            .find(|p| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::metadata(p)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
            .unwrap_or_else(|| PathBuf::from("/usr/bin/git"))
    })
}

/// Git on a lane (or on the repository, for what it fetches from a lane), obeying nothing a
/// sandbox could have written.
#[derive(Debug, Clone)]
pub struct Inert {
    /// Where the command runs.
    dir: PathBuf,
    /// `GIT_DIR` and `GIT_WORK_TREE`, for a lane (whose git directory is not inside its
    /// working tree).
    lane: Option<(PathBuf, PathBuf)>,
    /// `GIT_DIR` alone with `core.bare`, for a lane's history: no working tree.
    history: Option<PathBuf>,
    /// When a command is killed.
    deadline: std::time::Duration,
    /// `GIT_INDEX_FILE`: an index of the host's own instead of the lane's (`stet diff`).
    index: Option<PathBuf>,
}

/// How long an inert git command on what a sandbox wrote may take before its process group
/// is killed: long enough for the slowest such step — committing or restoring a large
/// lane's working tree, whose stat walk is a fraction of a first checkout (which the
/// 50,000-file repository of `host/benches/lanes.rs` takes 2 to 18 s for here, as the
/// disk's state goes; it is held to [`HOST_ONLY_DEADLINE`]) — with room to spare, short
/// enough that a git waiting on something a sandbox made does not hold a drive for long.
pub const LANE_GIT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

/// The deadline of an inert command that reads nothing a sandbox wrote — filling a new
/// lane's git directory and its first checkout, making a landed lane ready for the pool —
/// however large the repository: it only keeps a stop's hurry and kill.
pub const HOST_ONLY_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// The deadline a stop leaves a git command already running: an ordinary one ends well
/// within it; one that waits on something never does.
pub const HURRIED: std::time::Duration = std::time::Duration::from_secs(3);

pub use bounded::{hurry_all, kill_all};

impl Inert {
    /// Git on a lane: its git directory and its working tree.
    pub fn lane(git_dir: &Path, work_tree: &Path) -> Inert {
        Inert {
            dir: work_tree.to_path_buf(),
            lane: Some((git_dir.to_path_buf(), work_tree.to_path_buf())),
            history: None,
            deadline: LANE_GIT_DEADLINE,
            index: None,
        }
    }

    /// Git on a lane's history alone: its git directory as a bare repository, so that a
    /// command that would read the working tree a sandbox writes fails instead. (The
    /// working tree is read only through `crate::gate`.)
    pub fn history(git_dir: &Path) -> Inert {
        Inert {
            dir: git_dir.to_path_buf(),
            lane: None,
            history: Some(git_dir.to_path_buf()),
            deadline: LANE_GIT_DEADLINE,
            index: None,
        }
    }

    /// Git in `dir`, found the usual way (the repository, fetching from a lane).
    pub fn at(dir: &Path) -> Inert {
        Inert {
            dir: dir.to_path_buf(),
            lane: None,
            history: None,
            deadline: LANE_GIT_DEADLINE,
            index: None,
        }
    }

    /// The command, ready for arguments.
    fn command(&self, extra_config: &[(String, String)]) -> Command {
        let git = git_binary();
        let mut path: OsString = git.parent().unwrap_or(Path::new("/")).into();
        path.push(":/usr/local/bin:/usr/bin:/bin");
        let mut command = Command::new(git);
        command
            .env_clear()
            .current_dir(&self.dir)
            .env("PATH", path)
            .env("LANG", "C")
            .env("LC_ALL", "C")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_SYSTEM", "/dev/null")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_ATTR_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("GIT_PROTOCOL_FROM_USER", "0")
            .env("GIT_ALLOW_PROTOCOL", "file")
            .envs(IDENTITY);
        if let Some((git_dir, work_tree)) = &self.lane {
            command
                .env("GIT_DIR", git_dir)
                .env("GIT_WORK_TREE", work_tree);
        }
        let bare = [("core.bare".to_string(), "true".to_string())];
        if let Some(git_dir) = &self.history {
            command.env("GIT_DIR", git_dir);
        }
        if let Some(index) = &self.index {
            command.env("GIT_INDEX_FILE", index);
        }
        let config = INERT_CONFIG
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .chain(extra_config.iter().cloned())
            .chain(bare.into_iter().filter(|_| self.history.is_some()));
        let mut count = 0;
        for (i, (key, value)) in config.enumerate() {
            command
                .env(format!("GIT_CONFIG_KEY_{i}"), key)
                .env(format!("GIT_CONFIG_VALUE_{i}"), value);
            count = i + 1;
        }
        command.env("GIT_CONFIG_COUNT", count.to_string());
        command
    }

    /// Filter and merge drivers the repository's configuration defines, emptied: a
    /// `.gitattributes` line naming one then runs nothing of it (a merge driver becomes
    /// `false`, so the file conflicts: stet merges only to compare, in `stet clean`'s
    /// `merge-tree`, and a conflict keeps the branch). Diff drivers and the external diff
    /// are kept off by `--no-ext-diff --no-textconv`, which [`Inert::output`] adds to every
    /// command that shows a diff.
    fn filters_off(&self) -> Vec<(String, String)> {
        let mut command = self.command(&[]);
        command.args([
            "config",
            "--name-only",
            "--get-regexp",
            r"^(filter|merge)\.",
        ]);
        let Ok(out) = bounded::run(command, self.deadline, None) else {
            return Vec::new();
        };
        let mut off = Vec::new();
        let keys = String::from_utf8_lossy(&out.stdout).into_owned();
        // `filter.<name>.<key>` and `merge.<name>.<key>`; `merge.<setting>` names no driver.
        let names = |kind: &str| -> std::collections::BTreeSet<String> {
            keys.lines()
                .filter_map(|key| Some(key.strip_prefix(kind)?.rsplit_once('.')?.0.to_string()))
                .collect()
        };
        for name in names("merge.") {
            off.push((format!("merge.{name}.driver"), "false".to_string()));
        }
        for name in names("filter.") {
            for (k, v) in [
                ("clean", ""),
                ("smudge", ""),
                ("process", ""),
                ("required", "false"),
            ] {
                off.push((format!("filter.{name}.{k}"), v.to_string()));
            }
        }
        off
    }

    /// Runs git and returns its output whatever its exit status.
    pub fn output(&self, args: &[&str]) -> Result<Output, GitError> {
        let command = self.prepared(args);
        bounded::run(command, self.deadline, self.lock_file().as_deref()).map_err(|e| GitError {
            args: args.join(" "),
            dir: self.dir.display().to_string(),
            detail: e.to_string(),
        })
    }

    /// The same git on another index file.
    pub fn with_index(mut self, index: &Path) -> Inert {
        self.index = Some(index.to_path_buf());
        self
    }

    /// The same git with another deadline.
    pub fn with_deadline(mut self, deadline: std::time::Duration) -> Inert {
        self.deadline = deadline;
        self
    }

    /// Runs git, handing each line of its standard output (a line longer than
    /// `max_line` in pieces of at most that) to `on_line` as it comes: what it prints is
    /// never held whole. A failure carries what git said on stderr.
    pub fn stream(
        &self,
        args: &[&str],
        max_line: usize,
        on_line: &mut dyn FnMut(&[u8]),
    ) -> Result<(), GitError> {
        let command = self.prepared(args);
        let fail = |detail: String| GitError {
            args: args.join(" "),
            dir: self.dir.display().to_string(),
            detail,
        };
        let out = bounded::stream(
            command,
            self.deadline,
            self.lock_file().as_deref(),
            max_line,
            on_line,
        )
        .map_err(|e| fail(e.to_string()))?;
        if !out.status.success() {
            return Err(fail(
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ));
        }
        Ok(())
    }

    /// The index lock a killed command may leave behind in a lane's git directory.
    fn lock_file(&self) -> Option<PathBuf> {
        self.lane
            .as_ref()
            .map(|(git_dir, _)| git_dir)
            .or(self.history.as_ref())
            .map(|git_dir| git_dir.join("index.lock"))
    }

    /// The command for `args`, with the lane's filter drivers emptied and diffs without
    /// external programs.
    fn prepared(&self, args: &[&str]) -> Command {
        let mut command = self.command(&self.filters_off());
        match args.split_first() {
            Some((&sub, rest)) if ["diff", "log", "show"].contains(&sub) => {
                command
                    .arg(sub)
                    .args(["--no-ext-diff", "--no-textconv"])
                    .args(rest);
            }
            _ => {
                command.args(args);
            }
        }
        command
    }

    /// Runs git; a failure carries what git said on stderr. Returns stdout, trimmed.
    pub fn run(&self, args: &[&str]) -> Result<String, GitError> {
        checked(self.output(args)?, &self.dir, args)
    }
}

mod bounded {
    //! Child processes with a deadline, in a process group of their own, that a stop can
    //! hurry and a second stop can kill.

    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, ExitStatus, Output, Stdio};
    use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    enum Event {
        Exited(std::io::Result<ExitStatus>),
        Hurry,
    }

    /// The commands running now: an id, the process group, and how to hurry it.
    static RUNNING: Mutex<Vec<(u64, i32, Sender<Event>)>> = Mutex::new(Vec::new());

    /// Gives every bounded command running now at most [`super::HURRIED`] more (a drive's
    /// first stop signal). Commands started later keep their own deadline: the work a stop
    /// lets finish (committing the call in flight) still needs git.
    pub fn hurry_all() {
        hurry_where(|_| true);
    }

    /// Hurries the bounded commands whose process group `which` picks.
    fn hurry_where(which: impl Fn(i32) -> bool) {
        for (_, group, wake) in RUNNING.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            if which(*group) {
                let _ = wake.send(Event::Hurry);
            }
        }
    }

    /// Hurries the bounded commands running in `dir` alone (a test's own, leaving the
    /// other tests' commands of this process alone).
    #[cfg(test)]
    pub fn hurry_in(dir: &std::path::Path) {
        hurry_where(|group| {
            std::fs::read_link(format!("/proc/{group}/cwd")).is_ok_and(|cwd| cwd == dir)
        });
    }

    /// Kills the process group of every bounded command running now (a drive's second stop
    /// signal, before the process exits: nothing it started is left running).
    pub fn kill_all() {
        for (_, group, _) in RUNNING.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(*group),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }

    /// Runs `command` to its end or its deadline, collecting what it prints.
    pub fn run(
        command: Command,
        deadline: Duration,
        lock_file: Option<&std::path::Path>,
    ) -> std::io::Result<Output> {
        let mut stdout = Vec::new();
        let out = stream(command, deadline, lock_file, usize::MAX, &mut |line| {
            stdout.extend_from_slice(line)
        })?;
        Ok(Output { stdout, ..out })
    }

    /// Runs `command` to its end or its deadline, handing its standard output to `on_line`
    /// a line at a time (with its newline; a longer one in pieces of `max_line`); the
    /// returned output holds its status and standard error only. Killed at the deadline,
    /// it is an error saying so; a lock file the kill left is removed.
    pub fn stream(
        mut command: Command,
        deadline: Duration,
        lock_file: Option<&std::path::Path>,
        max_line: usize,
        on_line: &mut dyn FnMut(&[u8]),
    ) -> std::io::Result<Output> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        command
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn()?;
        let group = i32::try_from(child.id()).unwrap_or(i32::MAX);
        let (wake, events) = channel();
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        RUNNING
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((id, group, wake.clone()));
        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let errors = std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(err) = stderr.as_mut() {
                // What git says on stderr is short; an endless stream is cut.
                let _ = err.take(1 << 20).read_to_end(&mut text);
                let _ = std::io::copy(err, &mut std::io::sink());
            }
            text
        });
        std::thread::spawn(move || {
            let _ = wake.send(Event::Exited(child.wait()));
        });
        // Standard output is read here, on the caller's thread, so `on_line` need not be
        // sent anywhere; the deadline is kept by a watcher that kills the group.
        let watcher = std::thread::spawn(move || {
            let mut until = Instant::now() + deadline;
            let mut killed = None;
            loop {
                let left = until.saturating_duration_since(Instant::now());
                match events.recv_timeout(left) {
                    Ok(Event::Exited(status)) => return (status, killed),
                    Ok(Event::Hurry) => until = until.min(Instant::now() + super::HURRIED),
                    Err(RecvTimeoutError::Timeout) => {
                        if killed.is_none() {
                            let _ = nix::sys::signal::killpg(
                                nix::unistd::Pid::from_raw(group),
                                nix::sys::signal::Signal::SIGKILL,
                            );
                            killed = Some(until);
                        }
                        until = Instant::now() + Duration::from_secs(3600);
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        return (Err(std::io::Error::other("lost its child")), killed)
                    }
                }
            }
        });
        let mut pending = Vec::new();
        if let Some(out) = stdout.as_mut() {
            let mut buffer = vec![0u8; 64 * 1024];
            loop {
                let n = match out.read(&mut buffer) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                };
                pending.extend_from_slice(&buffer[..n]);
                let mut start = 0;
                while let Some(end) = pending[start..].iter().position(|b| *b == b'\n') {
                    let mut line = &pending[start..start + end + 1];
                    while line.len() > max_line {
                        on_line(&line[..max_line]);
                        line = &line[max_line..];
                    }
                    on_line(line);
                    start += end + 1;
                }
                pending.drain(..start);
                while pending.len() > max_line {
                    on_line(&pending[..max_line]);
                    pending.drain(..max_line);
                }
            }
        }
        if !pending.is_empty() {
            on_line(&pending);
        }
        let (status, killed) = watcher
            .join()
            .unwrap_or_else(|_| (Err(std::io::Error::other("its watcher panicked")), None));
        RUNNING
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(running, _, _)| *running != id);
        let stderr = errors.join().unwrap_or_default();
        if killed.is_some() {
            if let Some(lock) = lock_file {
                let _ = std::fs::remove_file(lock);
            }
            return Err(std::io::Error::other(format!(
                "killed: it did not finish within {} (git must never wait on what a sandbox made — a FIFO, say — and a stop gives it {} s)",
                humantime::format_duration(deadline),
                super::HURRIED.as_secs()
            )));
        }
        Ok(Output {
            status: status?,
            stdout: Vec::new(),
            stderr,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::OpenOptionsExt;

    /// A repository whose configuration, hooks and attributes each try to run a program
    /// that leaves a mark in `marks`.
    fn booby_trapped(root: &Path) -> (PathBuf, PathBuf) {
        let work = root.join("work");
        let marks = root.join("marks");
        std::fs::create_dir_all(&marks).unwrap();
        run(root, &["init", "--quiet", work.to_str().unwrap()]).unwrap();
        std::fs::write(work.join("f"), "one\n").unwrap();
        run(&work, &["add", "f"]).unwrap();
        run(&work, &["commit", "--quiet", "-m", "start"]).unwrap();
        let mark = |name: &str| format!("touch {}/{name}", marks.display());
        let hooks = root.join("hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        for hook in [
            "pre-commit",
            "prepare-commit-msg",
            "commit-msg",
            "post-commit",
            "reference-transaction",
            "post-checkout",
            "post-index-change",
        ] {
            let path = hooks.join(hook);
            let script = format!("#!/bin/sh\n{}\n", mark(hook));
            stet_exec_support::write_executable(&path, script.as_bytes()).unwrap();
        }
        for (key, value) in [
            ("core.fsmonitor", format!("{}; false", mark("fsmonitor"))),
            ("core.hooksPath", hooks.display().to_string()),
            ("filter.evil.clean", format!("{}; cat", mark("filter"))),
            ("filter.evil.process", mark("filter-process")),
            ("diff.evil.textconv", format!("{}; cat", mark("textconv"))),
            (
                "merge.evil.driver",
                format!("{}; true", mark("merge-driver")),
            ),
            ("diff.external", mark("external-diff")),
            ("core.pager", mark("pager")),
            ("gpg.program", mark("gpg")),
            ("commit.gpgSign", "true".to_string()),
        ] {
            run(&work, &["config", key, &value]).unwrap();
        }
        std::fs::write(
            work.join(".gitattributes"),
            "* filter=evil diff=evil merge=evil\n",
        )
        .unwrap();
        (work, marks)
    }

    #[test]
    fn inert_git_runs_nothing_the_repository_configures() {
        let root = tempfile::tempdir().unwrap();
        let (work, marks) = booby_trapped(root.path());
        let git = Inert::lane(&work.join(".git"), &work);
        std::fs::write(work.join("f"), "two\n").unwrap();
        git.run(&["status", "--short"]).unwrap();
        git.run(&["add", "--all"]).unwrap();
        git.run(&["diff", "--cached"]).unwrap();
        git.run(&["diff", "HEAD", "--stat"]).unwrap();
        git.run(&["commit", "--quiet", "-m", "two"]).unwrap();
        git.run(&["log", "-p", "-1"]).unwrap();
        git.run(&["checkout", "--quiet", "-B", "other"]).unwrap();
        // Two changes of one file from one commit: a merge that needs its driver.
        let from = git.run(&["rev-parse", "HEAD"]).unwrap();
        std::fs::write(work.join("f"), "four\n").unwrap();
        git.run(&["commit", "--quiet", "-am", "four"]).unwrap();
        git.run(&["checkout", "--quiet", "-B", "third", &from])
            .unwrap();
        std::fs::write(work.join("f"), "five\n").unwrap();
        git.run(&["commit", "--quiet", "-am", "five"]).unwrap();
        let merged = git
            .output(&["merge-tree", "--write-tree", "other", "third"])
            .unwrap();
        assert!(
            !merged.status.success(),
            "with its driver emptied, the merge conflicts (a driver that answers would decide it)"
        );
        let ran: Vec<_> = std::fs::read_dir(&marks)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(ran.is_empty(), "inert git ran {ran:?}");
        // The control: the person's git in the same repository obeys it all.
        std::fs::write(work.join("f"), "three\n").unwrap();
        let _ = run(&work, &["add", "--all"]);
        let _ = run(&work, &["commit", "--quiet", "-m", "three"]);
        assert!(marks.join("filter").exists() || marks.join("fsmonitor").exists());
    }

    /// A lane whose working tree holds a `.git` file naming a repository whose `HEAD` is
    /// a FIFO: git listing the untracked files opens it and waits (what the gate's walk
    /// takes away first; here, the deadline's own test).
    fn lane_with_a_fifo_repository(root: &Path) -> Inert {
        let (git_dir, work) = (root.join("git"), root.join("work"));
        std::fs::create_dir_all(&work).unwrap();
        run(
            root,
            &["init", "--quiet", "--bare", git_dir.to_str().unwrap()],
        )
        .unwrap();
        std::fs::create_dir_all(work.join("fake/objects")).unwrap();
        std::fs::create_dir_all(work.join("fake/refs")).unwrap();
        nix::unistd::mkfifo(&work.join("fake/HEAD"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        std::fs::create_dir_all(work.join("probe")).unwrap();
        std::fs::write(
            work.join("probe/.git"),
            format!("gitdir: {}\n", work.join("fake").display()),
        )
        .unwrap();
        let git = Inert::lane(&git_dir, &work);
        git.run(&["config", "core.bare", "false"]).unwrap();
        git
    }

    #[test]
    fn a_git_that_waits_on_a_fifo_is_killed_at_its_deadline_with_its_group() {
        let root = tempfile::tempdir().unwrap();
        let git = lane_with_a_fifo_repository(root.path())
            .with_deadline(std::time::Duration::from_secs(2));
        // A lock as a killed commit would leave one.
        std::fs::write(root.path().join("git/index.lock"), "").unwrap();
        let err = git
            .run(&["ls-files", "--others", "--exclude-standard"])
            .unwrap_err();
        assert!(
            err.detail.contains("killed: it did not finish within 2s"),
            "{err}"
        );
        assert!(!root.path().join("git/index.lock").exists());
    }

    #[test]
    fn a_stop_hurries_a_git_that_waits_to_its_end() {
        let root = tempfile::tempdir().unwrap();
        let git = lane_with_a_fifo_repository(root.path());
        let waiting =
            std::thread::spawn(move || git.run(&["ls-files", "--others", "--exclude-standard"]));
        // Once it is running (the FIFO has a reader), the stop comes.
        let fifo = root.path().join("work/fake/HEAD");
        let mut opened = None;
        while opened.is_none() {
            opened = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
                .open(&fifo)
                .ok();
            std::thread::yield_now();
        }
        // (`hurry_all` would hurry the other tests' git too.)
        bounded::hurry_in(&root.path().join("work"));
        let err = waiting.join().unwrap().unwrap_err();
        assert!(err.detail.contains("killed"), "{err}");
    }

    #[test]
    fn inert_git_starts_from_an_empty_environment() {
        let root = tempfile::tempdir().unwrap();
        // An alias given on the command line shows the environment git hands to what it runs.
        let mut command = Inert::at(root.path()).command(&[]);
        command.args(["-c", "alias.showenv=!env", "showenv"]);
        let out = command.output().unwrap();
        let env = String::from_utf8_lossy(&out.stdout);
        let names: Vec<&str> = env
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(n, _)| n)
            .collect();
        assert!(!names.is_empty(), "{env}");
        for name in names {
            assert!(
                name.starts_with("GIT_")
                    || ["PATH", "LANG", "LC_ALL", "PWD", "SHLVL", "_", "OLDPWD"].contains(&name),
                "{name} reached a process inert git started:\n{env}"
            );
        }
    }
}

#[cfg(any(test, feature = "testing"))]
pub mod testing {
    //! What the host's tests share: a clone of a fresh bare remote, with one commit.

    use std::path::PathBuf;

    /// `<root>/remote.git` (bare) and `<root>/work` (its clone), with one commit holding
    /// `README` pushed.
    pub fn clone_of_fresh_remote() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let bare = root.path().join("remote.git");
        let work = root.path().join("work");
        let (bare_text, work_text) = (bare.to_str().unwrap(), work.to_str().unwrap());
        super::run(root.path(), &["init", "--quiet", "--bare", bare_text]).unwrap();
        super::run(root.path(), &["clone", "--quiet", bare_text, work_text]).unwrap();
        std::fs::write(work.join("README"), "hello\n").unwrap();
        super::run(&work, &["add", "README"]).unwrap();
        super::run(&work, &["commit", "--quiet", "-m", "start"]).unwrap();
        super::run(&work, &["push", "--quiet", "origin", "HEAD"]).unwrap();
        (root, bare, work)
    }
}
