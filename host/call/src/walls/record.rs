//! The last wall proof per runtime and harness, kept in the repository's git directory
//! (`.git/stet/walls/<runtime>+<harness>.json`): what `stet board` shows of the walls
//! without proving them again. [`super::prove`] writes it (for `stet walls` and a drive's
//! start-up proof alike), whole or not at all, each time it proves; nothing else writes it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Proof;

/// Where the records live, relative to the git directory.
const WALLS: &str = "stet/walls";
/// A record larger than this is not one stet wrote (a proof has a few dozen walls).
const MAX_RECORD_BYTES: u64 = 1 << 20;
/// At most this many records are read (one per runtime and harness a person has).
const MAX_RECORDS: usize = 64;

/// One wall as the record keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedWall {
    /// The wall's name.
    pub wall: String,
    /// Whether it held.
    pub held: bool,
    /// How it stood: `held`, `broken`, `absent`, `unreachable`, `cannot-run`…
    pub state: String,
    /// What was seen.
    pub detail: String,
    /// What to do when it did not hold (empty when nothing).
    #[serde(default)]
    pub remedy: String,
}

/// The last proof of one runtime and harness.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The runtime the proof was made with.
    pub runtime: String,
    /// The harness.
    pub harness: String,
    /// When it ended, ms since the epoch.
    pub proven_unix_ms: u64,
    /// Whether every wall held.
    pub held: bool,
    /// Whether the live launch ran (it does not when a static wall is broken).
    pub launched: bool,
    /// How the agent is paid for and reaches its model.
    pub route: String,
    /// The network the live launch had, when it ran.
    #[serde(default)]
    pub network: Option<String>,
    /// Every wall, static then live.
    pub walls: Vec<RecordedWall>,
}

impl Record {
    /// The record of `proof`, made with `runtime`, now.
    pub fn of(proof: &Proof, runtime: &str, now_unix_ms: u64) -> Record {
        Record {
            runtime: runtime.to_string(),
            harness: proof.harness.clone(),
            proven_unix_ms: now_unix_ms,
            held: proof.held(),
            launched: proof.runtime.is_some(),
            route: proof.route.clone(),
            network: proof.network.clone(),
            walls: proof
                .walls
                .iter()
                .map(|w| RecordedWall {
                    wall: w.wall.clone(),
                    held: w.held,
                    state: w.state.word().into_owned(),
                    detail: w.detail.clone(),
                    remedy: w.remedy.clone(),
                })
                .collect(),
        }
    }
}

/// A plugin's name as a file name's part: what is not a letter, a digit, `-`, `_` or `.`
/// becomes `_` (plugin names are of those already; a hand-made one is kept in its lane).
fn file_part(name: &str) -> String {
    let part: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    part.trim_start_matches('.').to_string()
}

/// The directory of `repo`'s records.
pub fn dir(repo: &Path) -> PathBuf {
    crate::git::git_dir(repo).join(WALLS)
}

/// Where the record of `runtime` and `harness` is kept.
pub fn path(repo: &Path, runtime: &str, harness: &str) -> PathBuf {
    dir(repo).join(format!(
        "{}+{}.json",
        file_part(runtime),
        file_part(harness)
    ))
}

/// Writes `record` in `repo`, whole (a temporary file renamed into place).
pub fn save(repo: &Path, record: &Record) -> std::io::Result<PathBuf> {
    let path = path(repo, &record.runtime, &record.harness);
    let json = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
    crate::files::write_durably(&path, &json)?;
    Ok(path)
}

/// Every record of `repo`, the latest first, and the files that could not be read as one,
/// each with why.
pub fn read_all(repo: &Path) -> (Vec<Record>, Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir(repo)) else {
        return (Vec::new(), Vec::new());
    };
    let mut records = Vec::new();
    let mut unreadable = Vec::new();
    let mut names: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "json")
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    names.sort();
    for path in names.into_iter().take(MAX_RECORDS) {
        match crate::files::read_untrusted(&path, MAX_RECORD_BYTES)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Record>(&b).map_err(|e| e.to_string()))
        {
            Ok(r) => records.push(r),
            Err(why) => unreadable.push(format!("{}: {why}", path.display())),
        }
    }
    records.sort_by_key(|r| std::cmp::Reverse(r.proven_unix_ms));
    (records, unreadable)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proof() -> Proof {
        Proof {
            harness: "command".into(),
            runtime: Some("docker".into()),
            profile: "/p".into(),
            route: "the agent's own".into(),
            network: Some("none".into()),
            replaced_edited_settings: None,
            walls: vec![
                super::super::Wall::of_host("lane-only", true, "only the lane".into(), ""),
                super::super::Wall::of_host(
                    "no-remote-in-lane",
                    false,
                    "a remote".into(),
                    "remove it",
                ),
            ],
            session: Vec::new(),
            unserved: None,
        }
    }

    #[test]
    fn a_saved_record_reads_back_as_it_was_the_latest_first() {
        let repo = tempfile::tempdir().unwrap();
        std::fs::create_dir(repo.path().join(".git")).unwrap();
        let first = Record::of(&proof(), "docker", 1_000);
        let mut other = Record::of(&proof(), "bwrap/../x", 2_000);
        other.held = true;
        save(repo.path(), &first).unwrap();
        let written = save(repo.path(), &other).unwrap();
        assert_eq!(
            written.file_name().unwrap().to_string_lossy(),
            "bwrap_.._x+command.json",
            "a name cannot leave the directory"
        );
        assert_eq!(written.parent().unwrap(), dir(repo.path()));
        let (records, unreadable) = read_all(repo.path());
        assert!(unreadable.is_empty(), "{unreadable:?}");
        assert_eq!(records, vec![other, first.clone()]);
        assert!(!first.held);
        assert_eq!(first.walls[1].remedy, "remove it");
        // A second proof of the same pair replaces the first.
        let again = Record::of(&proof(), "docker", 3_000);
        save(repo.path(), &again).unwrap();
        let (records, _) = read_all(repo.path());
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].proven_unix_ms, 3_000);
    }

    #[test]
    fn a_record_that_is_not_one_is_named_not_read() {
        let repo = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir(repo.path())).unwrap();
        std::fs::write(dir(repo.path()).join("x+y.json"), "{not json").unwrap();
        let (records, unreadable) = read_all(repo.path());
        assert!(records.is_empty());
        assert_eq!(unreadable.len(), 1);
        assert!(unreadable[0].contains("x+y.json"), "{unreadable:?}");
    }
}
