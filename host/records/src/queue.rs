//! The work queue: human-editable files under `.stet/queue/` in the repository, one item a
//! file. The file's name (without `.md`) is the item's id; its first line is the title and
//! the whole text is what the agent is asked to do.
//!
//! Ids are safe by construction (lowercase letters, digits and `-`, at most 80 characters,
//! never starting with `-`), so an id can name a branch (`stet/<id>`), a ref and a file
//! without path tricks. A file that is not a valid item is reported and skipped; it never
//! stops a drive. Items are taken in id order; `stet add` starts ids with the time, so that
//! order is the order they were added.
//!
//! Whoever can commit writes the queue, so it is read as data only: an item is a regular
//! file in the real `.stet/queue/` directory. A symbolic link, a FIFO, a device or a
//! directory there is refused by name (never followed, opened or waited on), as is a
//! `.stet` or `.stet/queue` that is itself a link; the drive goes on with the other items.

// What this module reads comes from parties stet does not trust: nothing here may panic
// on it (issue 18).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects
    )
)]

use std::path::{Path, PathBuf};

use serde::Serialize;

/// Where the queue lives, relative to the repository root.
pub const QUEUE_DIR: &str = ".stet/queue";

/// Largest item file read; anything bigger is malformed (an item is a small piece of work).
const MAX_ITEM_BYTES: u64 = 64 * 1024;

/// One work item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Item {
    /// The item's id (its file name without `.md`).
    pub id: String,
    /// What a person types for it: the id without its time ([`handle_of`]).
    pub handle: String,
    /// The first non-empty line.
    pub title: String,
    /// The whole text.
    pub text: String,
    /// The file.
    pub path: PathBuf,
}

/// A file in the queue directory that is not a valid item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Malformed {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub why: String,
}

/// Whether `id` is a safe item id.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 80
        && !id.starts_with('-')
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// An item as its file name shows it: enough to order, reserve and skip items without
/// reading them, so a drive's memory does not grow with the queue's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The id (the file name without `.md`).
    pub id: String,
    /// The file (in a commit's tree: where it is in the repository, for people to read).
    pub path: PathBuf,
    /// Where its text is.
    pub source: Source,
}

/// Where an item's text is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The working copy's file ([`Entry::path`]).
    WorkingCopy,
    /// A blob of a commit's tree (a drive's base, `base.rs`).
    Blob {
        /// The repository whose objects hold it.
        repo: PathBuf,
        /// The blob's id.
        oid: String,
    },
}

impl Entry {
    /// Reads the item; a malformed file says why.
    pub fn load(&self) -> Result<Item, String> {
        match &self.source {
            Source::WorkingCopy => read_item(&self.path, &format!("{}.md", self.id)),
            Source::Blob { repo, oid } => {
                let bytes = read_blob(repo, oid)?;
                parse_item(&self.id, &self.path, bytes)
            }
        }
    }
}

/// A blob's bytes, bounded by [`MAX_ITEM_BYTES`]; read by git that runs nothing the
/// repository configures (the queue is whoever-can-push's).
fn read_blob(repo: &Path, oid: &str) -> Result<Vec<u8>, String> {
    let git = crate::git::Inert::at(repo);
    let size: u64 = git
        .run(&["cat-file", "-s", oid])
        .map_err(|e| format!("cannot be read: {}", e.detail))?
        .parse()
        .map_err(|_| "cannot be read: git did not say its size".to_string())?;
    if size > MAX_ITEM_BYTES {
        return Err(format!(
            "not an item: it is {size} bytes, more than the {MAX_ITEM_BYTES} read"
        ));
    }
    let out = git
        .output(&["cat-file", "blob", oid])
        .map_err(|e| format!("cannot be read: {}", e.detail))?;
    if !out.status.success() {
        return Err(format!(
            "cannot be read: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out.stdout)
}

/// One entry of `git ls-tree -z`: mode, type, object id, name.
fn tree_entries(
    repo: &Path,
    commit: &str,
    path: &str,
) -> Result<Vec<(String, String, String, String)>, String> {
    let out = crate::git::Inert::at(repo)
        .output(&["ls-tree", "-z", "--full-tree", commit, "--", path])
        .map_err(|e| e.detail)?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .filter_map(|record| {
            let record = String::from_utf8_lossy(record);
            let (meta, name) = record.split_once('\t')?;
            let mut meta = meta.split(' ');
            Some((
                meta.next()?.to_string(),
                meta.next()?.to_string(),
                meta.next()?.to_string(),
                name.to_string(),
            ))
        })
        .collect())
}

/// What a tree entry that is not a regular file is, in words (as [`crate::files::kind_of`]
/// says it of a file).
fn tree_kind(mode: &str) -> &'static str {
    match mode {
        "120000" => "it is a symbolic link (not followed)",
        "040000" => "it is a directory",
        "160000" => "it is a submodule",
        _ => "it is not a regular file",
    }
}

/// The queue's entries in `commit`'s tree (a drive's base), in id order, as [`scan`] finds
/// them in the working copy: from names and modes alone, the same names refused. A `.stet`
/// or `.stet/queue` that is a link there is refused, never followed.
pub fn scan_at(repo: &Path, commit: &str) -> (Vec<Entry>, Vec<Malformed>) {
    let mut malformed = Vec::new();
    // `.stet`, then `.stet/queue`: each a real directory (a tree) of the commit.
    for dir in [".stet", QUEUE_DIR] {
        match tree_entries(repo, commit, dir) {
            Ok(found) => match found.first() {
                None => return (Vec::new(), Vec::new()),
                Some((_, kind, _, _)) if kind == "tree" => {}
                Some((mode, _, _, _)) => {
                    malformed.push(Malformed {
                        path: repo.join(dir),
                        why: format!(
                            "the queue must be a directory of the repository: {}",
                            tree_kind(mode)
                        ),
                    });
                    return (Vec::new(), malformed);
                }
            },
            Err(why) => {
                malformed.push(Malformed {
                    path: repo.join(dir),
                    why: format!("cannot be read: {why}"),
                });
                return (Vec::new(), malformed);
            }
        }
    }
    let listed = match tree_entries(repo, commit, &format!("{QUEUE_DIR}/")) {
        Ok(listed) => listed,
        Err(why) => {
            malformed.push(Malformed {
                path: repo.join(QUEUE_DIR),
                why: format!("cannot be read: {why}"),
            });
            return (Vec::new(), malformed);
        }
    };
    let mut found = Vec::new();
    for (mode, _, oid, full) in listed {
        let name = full.rsplit('/').next().unwrap_or(&full).to_string();
        let path = repo.join(QUEUE_DIR).join(&name);
        if name.starts_with('.') || name.ends_with('~') {
            continue;
        }
        if mode != "100644" && mode != "100755" {
            malformed.push(Malformed {
                path,
                why: format!(
                    "not an item: {}; an item is a regular file",
                    tree_kind(&mode)
                ),
            });
            continue;
        }
        match named(&name) {
            Ok(id) => found.push(Entry {
                id,
                path,
                source: Source::Blob {
                    repo: repo.to_path_buf(),
                    oid,
                },
            }),
            Err(why) => malformed.push(Malformed { path, why }),
        }
    }
    found.sort_by(|a, b| a.id.cmp(&b.id));
    malformed.sort_by(|a, b| a.path.cmp(&b.path));
    (found, malformed)
}

/// A queue file of the working copy that a drive from a base does not take as it is here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotPushed {
    /// The item's id.
    pub id: String,
    /// The file.
    pub path: PathBuf,
    /// Whether the base has the item (with other text): then the base's text is driven.
    pub in_base: bool,
}

/// The working copy's queue files that `at_base` (the base's entries, [`scan_at`]) lacks
/// or holds with other bytes: untracked, uncommitted, or committed and not pushed.
pub fn not_pushed(repo: &Path, at_base: &[Entry]) -> Vec<NotPushed> {
    let (here, _) = scan(repo);
    let base: std::collections::HashMap<&str, &str> = at_base
        .iter()
        .filter_map(|e| match &e.source {
            Source::Blob { oid, .. } => Some((e.id.as_str(), oid.as_str())),
            Source::WorkingCopy => None,
        })
        .collect();
    let shared: Vec<&Entry> = here
        .iter()
        .filter(|e| base.contains_key(e.id.as_str()))
        .collect();
    // The working files' blob ids, in one git (`--no-filters`: the bytes as they are, as
    // the base's blobs hold an item's bytes); a file git cannot hash counts as differing.
    let paths: String = shared
        .iter()
        .map(|e| format!("{}\n", e.path.display()))
        .collect();
    let hashed = if shared.is_empty() {
        String::new()
    } else {
        crate::git::run_input(
            repo,
            &["hash-object", "--no-filters", "--stdin-paths"],
            paths.as_bytes(),
        )
        .unwrap_or_default()
    };
    let hashed: std::collections::HashMap<&str, &str> = shared
        .iter()
        .map(|e| e.id.as_str())
        .zip(hashed.lines())
        .collect();
    here.iter()
        .filter_map(|e| {
            let in_base = match base.get(e.id.as_str()) {
                None => false,
                Some(oid) if hashed.get(e.id.as_str()) == Some(oid) => return None,
                Some(_) => true,
            };
            Some(NotPushed {
                id: e.id.clone(),
                path: e.path.clone(),
                in_base,
            })
        })
        .collect()
}

/// The id an item file's name gives, or why it gives none.
fn named(name: &str) -> Result<String, String> {
    match name.strip_suffix(".md") {
        Some(id) if valid_id(id) => Ok(id.to_string()),
        Some(id) => Err(format!(
            "`{id}` is not a valid item id: use lowercase letters, digits and `-` (at most 80)"
        )),
        None => Err("not an item: item files end in .md".to_string()),
    }
}

/// The queue directory, when it is a real directory: `.stet` and `.stet/queue` that are
/// symbolic links (to anywhere on the host) are not followed.
fn queue_dir(repo: &Path) -> Result<Option<PathBuf>, Malformed> {
    let mut dir = repo.to_path_buf();
    for part in QUEUE_DIR.split('/') {
        dir.push(part);
        match std::fs::symlink_metadata(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(Malformed {
                    path: dir,
                    why: format!("cannot be read: {e}"),
                })
            }
            Ok(meta) if !meta.file_type().is_dir() => {
                return Err(Malformed {
                    path: dir,
                    why: format!(
                        "the queue must be a directory of the repository: {}",
                        crate::files::kind_of(&meta.file_type())
                    ),
                })
            }
            Ok(_) => {}
        }
    }
    Ok(Some(dir))
}

/// The queue's entries in id order, from file names and types alone; anything that cannot
/// be an item (a bad name, not a regular file) is reported as malformed. (What is inside a
/// file is read when the item is taken.)
pub fn scan(repo: &Path) -> (Vec<Entry>, Vec<Malformed>) {
    let dir = match queue_dir(repo) {
        Ok(Some(dir)) => dir,
        Ok(None) => return (Vec::new(), Vec::new()),
        Err(m) => return (Vec::new(), vec![m]),
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return (Vec::new(), Vec::new());
    };
    let mut found = Vec::new();
    let mut malformed = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name.ends_with('~') {
            continue;
        }
        // The entry's own type: a link is a link, whatever it points at.
        let kind = match entry.file_type() {
            Ok(kind) => kind,
            Err(e) => {
                malformed.push(Malformed {
                    path,
                    why: format!("cannot be read: {e}"),
                });
                continue;
            }
        };
        if !kind.is_file() {
            malformed.push(Malformed {
                path,
                why: format!(
                    "not an item: {}; an item is a regular file",
                    crate::files::kind_of(&kind)
                ),
            });
            continue;
        }
        match named(&name) {
            Ok(id) => found.push(Entry {
                id,
                path,
                source: Source::WorkingCopy,
            }),
            Err(why) => malformed.push(Malformed { path, why }),
        }
    }
    found.sort_by(|a, b| a.id.cmp(&b.id));
    (found, malformed)
}

/// Reads every item, in id order, and every file that is not one.
pub fn read(repo: &Path) -> (Vec<Item>, Vec<Malformed>) {
    let (entries, mut malformed) = scan(repo);
    let mut items = Vec::new();
    for entry in entries {
        match entry.load() {
            Ok(item) => items.push(item),
            Err(why) => malformed.push(Malformed {
                path: entry.path,
                why,
            }),
        }
    }
    malformed.sort_by(|a, b| a.path.cmp(&b.path));
    (items, malformed)
}

fn read_item(path: &Path, name: &str) -> Result<Item, String> {
    let Some(id) = name.strip_suffix(".md") else {
        return Err("not an item: item files end in .md".to_string());
    };
    if !valid_id(id) {
        return Err(format!(
            "`{id}` is not a valid item id: use lowercase letters, digits and `-` (at most 80)"
        ));
    }
    // Not followed if it is a link, not waited on if it is a FIFO, not read past the limit.
    let bytes = crate::files::read_untrusted(path, MAX_ITEM_BYTES).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!("cannot be read: {e}")
        } else {
            format!("not an item: {e}")
        }
    })?;
    parse_item(id, path, bytes)
}

/// An item from its file's bytes (already bounded by [`MAX_ITEM_BYTES`]): UTF-8 text whose
/// first non-empty line is its title. The repository's, so anyone who can push wrote it.
pub fn parse_item(id: &str, path: &Path, bytes: Vec<u8>) -> Result<Item, String> {
    let text = String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    let title = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .ok_or("empty: write what should be done")?
        .trim_start_matches('#')
        .trim()
        .to_string();
    Ok(Item {
        id: id.to_string(),
        handle: handle_of(id).to_string(),
        title,
        text,
        path: path.to_path_buf(),
    })
}

/// An item's text checked before it is written: not empty, not too large. Returns its
/// title (the first non-empty line).
pub fn title_of(text: &str) -> Result<&str, String> {
    let title = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .ok_or("the item is empty: say what should be done")?;
    if text.len() as u64 > MAX_ITEM_BYTES {
        return Err(format!("the item is larger than {MAX_ITEM_BYTES} bytes"));
    }
    Ok(title)
}

/// Writes a new item `id` with `text` in the working copy's queue; `None` when a file of
/// that id is there already (never overwritten: two `stet add`s at the same instant each
/// keep their own).
pub fn create(repo: &Path, id: &str, text: &str) -> Result<Option<Item>, String> {
    title_of(text)?;
    if !valid_id(id) {
        return Err(format!("`{id}` is not a valid item id"));
    }
    if let Err(m) = queue_dir(repo) {
        return Err(format!("{}: {}", m.path.display(), m.why));
    }
    let dir = repo.join(QUEUE_DIR);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join(format!("{id}.md"));
    let mut body = text.trim_end().to_string();
    body.push('\n');
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
    {
        Ok(mut file) => {
            use std::io::Write;
            file.write_all(body.as_bytes())
                .and_then(|_| file.sync_all())
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            read_item(&path, &format!("{id}.md")).map(Some)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(format!("cannot write {}: {e}", path.display())),
    }
}

/// Adds an item with `text` without asking the remote: its id is the current time (to the
/// millisecond) and the first handle of its title no item of the working copy has
/// (`handles::add` also asks the remote, and claims the handle there).
pub fn add(repo: &Path, text: &str) -> Result<Item, String> {
    let wanted = handle_from_title(title_of(text)?);
    let stamp = stamp_now();
    let (here, _) = scan(repo);
    for n in 1..1000 {
        let handle = numbered(&wanted, n);
        if here.iter().any(|e| handle_of(&e.id) == handle) {
            continue;
        }
        if let Some(item) = create(repo, &format!("{stamp}-{handle}"), text)? {
            return Ok(item);
        }
    }
    Err(format!(
        "every handle from {wanted} to {wanted}-999 is taken"
    ))
}

/// The longest handle `stet add` gives (an older item's may be longer, see [`handle_of`]).
pub const MAX_HANDLE: usize = 24;

/// Words a handle leaves out: they carry little of what an item is about.
const STOP_WORDS: &[&str] = &[
    "a", "an", "the", "to", "of", "in", "on", "for", "and", "with", "is", "are", "be", "at", "by",
    "from", "as", "or", "into", "that", "this", "it", "its", "so",
];

/// An item's handle, from its title: its key words (stop words left out, unless there is
/// nothing else), lowercase, joined by `-`, cut at a word boundary to at most
/// [`MAX_HANDLE`] characters (`Fix the typo in the README` → `fix-typo-readme`).
///
/// A slug and not a number: it says what the item is (a person recognises
/// `fix-typo-readme` in a list where `#41` says nothing), the shell completes it from its
/// first letters, and it needs no counter: a counter is state that two clones adding at
/// once would race on and that one of them would have to renumber, while two slugs only
/// clash when two titles say the same thing — then the later takes `-2` (see [`numbered`]).
pub fn handle_from_title(title: &str) -> String {
    let words: Vec<String> = title
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let key: Vec<&str> = words
        .iter()
        .map(String::as_str)
        .filter(|w| !STOP_WORDS.contains(w))
        .collect();
    let chosen = if key.is_empty() {
        words.iter().map(String::as_str).collect()
    } else {
        key
    };
    let handle = cut_at_word(&chosen, MAX_HANDLE);
    if handle.is_empty() {
        "item".to_string()
    } else {
        handle
    }
}

/// `words` joined by `-`, as many whole words as fit in `max` characters (the first word
/// cut when it alone is longer).
fn cut_at_word(words: &[&str], max: usize) -> String {
    let mut out = String::new();
    for word in words {
        let grown = if out.is_empty() {
            word.len()
        } else {
            out.len().saturating_add(1).saturating_add(word.len())
        };
        if grown > max {
            if out.is_empty() {
                out = word.chars().take(max).collect();
            }
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(word);
    }
    out
}

/// The `n`-th choice of a handle `wanted` (1: itself; then `-2`, `-3`, …), still at most
/// [`MAX_HANDLE`] characters: the words that no longer fit before the number are left
/// out.
pub fn numbered(wanted: &str, n: u32) -> String {
    if n <= 1 {
        return wanted.to_string();
    }
    let suffix = format!("-{n}");
    let room = MAX_HANDLE.saturating_sub(suffix.len());
    let words: Vec<&str> = wanted.split('-').filter(|w| !w.is_empty()).collect();
    format!("{}{suffix}", cut_at_word(&words, room))
}

/// The handle of item `id`: the id without the time `stet add` starts it with
/// (`20261130-053012-123-fix-typo-readme` → `fix-typo-readme`); a file named by hand,
/// without that time, is its own handle. Derived from the id alone, so any clone knows an
/// item's handle without asking anyone. Items added before handles keep their ids, so
/// theirs is the longer slug of up to six words after the time (up to 48 characters).
pub fn handle_of(id: &str) -> &str {
    let bytes = id.as_bytes();
    let stamped = bytes.len() > STAMP_LEN.saturating_add(1)
        && bytes
            .iter()
            .take(STAMP_LEN.saturating_add(1))
            .enumerate()
            .all(|(i, b)| match i {
                8 | 15 | 19 => *b == b'-',
                _ => b.is_ascii_digit(),
            });
    if stamped {
        id.get(STAMP_LEN.saturating_add(1)..).unwrap_or(id)
    } else {
        id
    }
}

/// The length of [`utc_stamp`]'s `20261130-053012-123`.
const STAMP_LEN: usize = 19;

/// The stamp of now, as new ids start.
pub fn stamp_now() -> String {
    utc_stamp(std::time::SystemTime::now())
}

/// `20261130-053012-123` (milliseconds last), in UTC: items added one after the other sort
/// in that order. The digits of humantime's RFC 3339 form (`2026-11-30T05:30:12.123Z`),
/// which covers 1970 to 9999: a clock outside those years is held at their ends.
fn utc_stamp(t: std::time::SystemTime) -> String {
    use std::time::{Duration, UNIX_EPOCH};
    let last = UNIX_EPOCH.checked_add(Duration::from_secs(253_402_300_799));
    let t = last.map_or(t, |last| t.min(last)).max(UNIX_EPOCH);
    let rfc3339 = humantime::format_rfc3339_millis(t).to_string();
    let mut stamp = String::with_capacity(19);
    for (n, digit) in rfc3339.chars().filter(char::is_ascii_digit).enumerate() {
        if n == 8 || n == 14 {
            stamp.push('-');
        }
        stamp.push(digit);
    }
    stamp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_safe() {
        assert!(valid_id("20261130-053012-fix-typo"));
        for bad in ["", "../x", "a/b", "UPPER", "-x", "a b", &"a".repeat(81)] {
            assert!(!valid_id(bad), "{bad}");
        }
    }

    #[test]
    fn add_then_read_in_order_and_report_malformed() {
        let repo = tempfile::tempdir().unwrap();
        let first = add(repo.path(), "Fix the typo in README\n\nIt says teh.").unwrap();
        let second = add(repo.path(), "Fix the typo in README").unwrap();
        assert!(first.id.ends_with("-fix-typo-readme"), "{}", first.id);
        assert_eq!(first.handle, "fix-typo-readme");
        // The same title again: the next handle, not the same one.
        assert_eq!(second.handle, "fix-typo-readme-2");
        assert!(second.id > first.id, "{} then {}", first.id, second.id);
        let dir = repo.path().join(QUEUE_DIR);
        std::fs::write(dir.join("Bad Name.md"), "x").unwrap();
        std::fs::write(dir.join("empty.md"), "\n\n").unwrap();
        std::fs::write(dir.join("notes.txt"), "x").unwrap();
        std::fs::write(dir.join(".hidden.md"), "x").unwrap();
        let (items, malformed) = read(repo.path());
        assert_eq!(
            items.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
            [first.id.as_str(), second.id.as_str()]
        );
        assert_eq!(items[0].title, "Fix the typo in README");
        assert_eq!(malformed.len(), 3, "{malformed:?}");
        assert!(add(repo.path(), "  \n ").is_err());
    }

    #[test]
    fn scan_reads_names_only_and_load_reports_what_is_inside() {
        let repo = tempfile::tempdir().unwrap();
        let item = add(repo.path(), "Fix the typo").unwrap();
        let dir = repo.path().join(QUEUE_DIR);
        std::fs::write(dir.join("Bad Name.md"), "x").unwrap();
        std::fs::write(dir.join("empty.md"), "\n\n").unwrap();
        let (entries, malformed) = scan(repo.path());
        // The empty file has a good name: it is found by the scan, refused by the load.
        let ids: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, [item.id.as_str(), "empty"]);
        assert_eq!(malformed.len(), 1, "{malformed:?}");
        assert_eq!(entries[0].load().unwrap(), item);
        assert!(entries[1].load().unwrap_err().starts_with("empty"));
    }

    #[test]
    fn only_regular_files_are_items() {
        let repo = tempfile::tempdir().unwrap();
        let good = add(repo.path(), "A real item").unwrap();
        let dir = repo.path().join(QUEUE_DIR);
        let secret = repo.path().join("secret.txt");
        std::fs::write(&secret, "the host's secret").unwrap();
        std::os::unix::fs::symlink(&secret, dir.join("link.md")).unwrap();
        nix::unistd::mkfifo(&dir.join("fifo.md"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        std::fs::create_dir(dir.join("dir.md")).unwrap();
        let (items, malformed) = read(repo.path());
        assert_eq!(items, [good]);
        let whys: Vec<String> = malformed
            .iter()
            .map(|m| {
                format!(
                    "{}: {}",
                    m.path.file_name().unwrap().to_string_lossy(),
                    m.why
                )
            })
            .collect();
        assert_eq!(
            whys,
            [
                "dir.md: not an item: it is a directory; an item is a regular file",
                "fifo.md: not an item: it is a FIFO; an item is a regular file",
                "link.md: not an item: it is a symbolic link (not followed); an item is a regular file",
            ]
        );
        assert!(!format!("{items:?}{malformed:?}").contains("the host's secret"));
    }

    #[test]
    fn a_queue_directory_that_is_a_link_is_not_followed() {
        let repo = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        add(elsewhere.path(), "Somewhere else").unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join(".stet"), repo.path().join(".stet"))
            .unwrap();
        let (items, malformed) = read(repo.path());
        assert!(items.is_empty());
        assert_eq!(malformed.len(), 1);
        assert!(malformed[0].why.contains("symbolic link"), "{malformed:?}");
    }

    #[test]
    fn a_commits_queue_is_read_from_its_tree_and_the_working_copys_extra_files_are_named() {
        let (_root, _bare, work) = crate::git::testing::clone_of_fresh_remote();
        let git = |args: &[&str]| crate::git::run(&work, args).unwrap();
        let pushed = add(&work, "Pushed\n\nas it is").unwrap();
        let changed = add(&work, "Changed later").unwrap();
        let dir = work.join(QUEUE_DIR);
        std::os::unix::fs::symlink("/etc/passwd", dir.join("link.md")).unwrap();
        std::fs::create_dir(dir.join("dir.md")).unwrap();
        std::fs::write(dir.join("dir.md/x"), "x").unwrap();
        std::fs::write(dir.join("Bad Name.md"), "x").unwrap();
        git(&["add", "--all"]);
        git(&["commit", "--quiet", "-m", "queue"]);
        let base = git(&["rev-parse", "HEAD"]);
        // After the commit: one more item, one changed, one committed on top.
        let untracked = add(&work, "Only here").unwrap();
        std::fs::write(&changed.path, "Changed later\n\nand more\n").unwrap();
        let (entries, malformed) = scan_at(&work, &base);
        // In id order (two items added in one millisecond are ordered by their handles).
        let ids: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
        let mut expected = [pushed.id.as_str(), changed.id.as_str()];
        expected.sort_unstable();
        assert_eq!(ids, expected);
        // The commit's text, not the working copy's.
        let changed_entry = entries.iter().find(|e| e.id == changed.id).unwrap();
        assert_eq!(changed_entry.load().unwrap().text, "Changed later\n");
        assert_eq!(changed_entry.load().unwrap().path, changed.path);
        let whys: Vec<String> = malformed
            .iter()
            .map(|m| {
                format!(
                    "{}: {}",
                    m.path.file_name().unwrap().to_string_lossy(),
                    m.why
                )
            })
            .collect();
        assert_eq!(
            whys,
            [
                "Bad Name.md: `Bad Name` is not a valid item id: use lowercase letters, digits and `-` (at most 80)",
                "dir.md: not an item: it is a directory; an item is a regular file",
                "link.md: not an item: it is a symbolic link (not followed); an item is a regular file",
            ]
        );
        let named: Vec<(String, bool)> = not_pushed(&work, &entries)
            .into_iter()
            .map(|n| (n.id, n.in_base))
            .collect();
        assert_eq!(
            named,
            [(changed.id.clone(), true), (untracked.id.clone(), false)]
        );
        // A `.stet` that is a link in the commit is not followed.
        let other = tempfile::tempdir().unwrap();
        crate::git::run(other.path(), &["init", "--quiet"]).unwrap();
        std::os::unix::fs::symlink(dir.parent().unwrap(), other.path().join(".stet")).unwrap();
        crate::git::run(other.path(), &["add", "--all"]).unwrap();
        crate::git::run(other.path(), &["commit", "--quiet", "-m", "link"]).unwrap();
        let (entries, malformed) = scan_at(other.path(), "HEAD");
        assert!(entries.is_empty());
        assert!(malformed[0].why.contains("symbolic link"), "{malformed:?}");
        // No queue in the commit: nothing, and nothing wrong.
        assert_eq!(scan_at(&work, "HEAD~1"), (Vec::new(), Vec::new()));
    }

    #[test]
    fn handles_are_the_key_words_of_the_title_cut_at_a_word() {
        for (title, handle) in [
            ("Fix the typo in the README", "fix-typo-readme"),
            ("Add a CHANGELOG", "add-changelog"),
            (
                "write hello.txt: hi from the drive",
                "write-hello-txt-hi-drive",
            ),
            // Cut at a word boundary, never inside a word, at most 24 characters.
            (
                "Refactor the configuration loader and its tests",
                "refactor-configuration",
            ),
            // One word longer than a handle: cut inside it, there being no boundary.
            (
                "Supercalifragilisticexpialidocious",
                "supercalifragilisticexpi",
            ),
            // Nothing but stop words: they are kept rather than nothing.
            ("To be, or to be", "to-be-or-to-be"),
            ("  ### Émigré ", "migr"),
            ("¿?", "item"),
            ("UPPER case 42", "upper-case-42"),
        ] {
            let got = handle_from_title(title);
            assert_eq!(got, handle, "{title}");
            assert!(got.len() <= MAX_HANDLE && valid_id(&got), "{got}");
        }
        assert_eq!(numbered("fix-typo-readme", 1), "fix-typo-readme");
        assert_eq!(numbered("fix-typo-readme", 2), "fix-typo-readme-2");
        // The number fits in 24 characters: the words that no longer fit are left out.
        assert_eq!(numbered("refactor-configuration", 12), "refactor-12");
        assert_eq!(
            numbered("supercalifragilisticexpi", 3),
            "supercalifragilisticex-3"
        );
    }

    #[test]
    fn the_handle_of_an_id_is_the_id_without_its_time() {
        assert_eq!(
            handle_of("20261130-053012-123-fix-typo-readme"),
            "fix-typo-readme"
        );
        // An item added before handles: its longer slug, as it is.
        assert_eq!(
            handle_of("20261130-053012-123-fix-the-typo-in-readme"),
            "fix-the-typo-in-readme"
        );
        // Named by hand: its own handle.
        for id in [
            "fix-typo",
            "20261130-fix-typo",
            "20261130-053012-123",
            "2026113x-053012-123-a",
        ] {
            assert_eq!(handle_of(id), id);
        }
    }

    #[test]
    fn utc_stamps() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_796_016_000);
        assert_eq!(utc_stamp(t), "20261130-052000-000");
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(951_782_400_123);
        assert_eq!(utc_stamp(t), "20000229-000000-123");
        assert_eq!(utc_stamp(std::time::UNIX_EPOCH), "19700101-000000-000");
        let before = std::time::UNIX_EPOCH - std::time::Duration::from_secs(1);
        assert_eq!(utc_stamp(before), "19700101-000000-000");
        let far = std::time::UNIX_EPOCH + std::time::Duration::from_secs(400_000_000_000);
        assert_eq!(utc_stamp(far), "99991231-235959-000");
    }
}
