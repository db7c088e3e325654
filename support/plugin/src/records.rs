//! Sandboxes as records on disk.
//!
//! A runtime with no daemon to ask which sandboxes exist keeps them here: a sandbox is a directory
//! under the state directory: `<state>/<id>/sandbox.json` holds the spec and the labels,
//! `<state>/<id>/procs/<pid>` names each process started in it (so that a `teardown` from
//! another stet process, `stet gc` say, can kill what is left), and the rest of the
//! directory is the sandbox's own scratch space. A backend with its own store of
//! sandboxes (containers, VMs) asks the backend instead and needs none of this.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use stet_plugin_api::{Label, PluginError, SandboxInfo, SandboxSpec};

use crate::process::Shared;

/// The record's file name inside a sandbox directory.
const RECORD: &str = "sandbox.json";
/// The directory naming the processes started in a sandbox.
const PROCS: &str = "procs";

/// A host directory made visible in the sandbox (as `stet_plugin_api::Mount`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountRecord {
    pub source: String,
    pub target: String,
    pub writable: bool,
}

/// What is kept of a sandbox between calls (and between stet processes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub id: String,
    pub image: String,
    pub mounts: Vec<MountRecord>,
    /// The base environment, in order.
    pub env: Vec<(String, String)>,
    pub workdir: String,
    /// `none` or `open`.
    pub network: String,
    /// Who processes run as: `(uid, gid)`.
    pub user: (u32, u32),
    pub labels: Vec<(String, String)>,
    /// Seconds since the Unix epoch.
    pub created: u64,
}

impl Record {
    /// The record of a new sandbox made from `spec`: a fresh id starting with
    /// `id_prefix`, the network as the runtime names it (`none` or `open`), processes run
    /// as `user`, created now.
    pub fn from_spec(
        id_prefix: &str,
        spec: &SandboxSpec,
        network: &str,
        user: (u32, u32),
    ) -> Record {
        Record {
            id: new_id(id_prefix),
            image: spec.image.to_string(),
            mounts: spec
                .mounts
                .iter()
                .map(|m| MountRecord {
                    source: m.source.to_string(),
                    target: m.target.to_string(),
                    writable: m.writable,
                })
                .collect(),
            env: spec
                .env
                .iter()
                .map(|v| (v.name.to_string(), v.value.to_string()))
                .collect(),
            workdir: spec.workdir.to_string(),
            network: network.into(),
            user,
            labels: spec
                .labels
                .iter()
                .map(|l| (l.key.to_string(), l.value.to_string()))
                .collect(),
            created: now_secs(),
        }
    }

    /// Whether the sandbox carries every one of `labels`.
    pub fn has_labels(&self, labels: &[Label]) -> bool {
        labels.iter().all(|wanted| {
            self.labels
                .iter()
                .any(|(k, v)| k == wanted.key.as_str() && v == wanted.value.as_str())
        })
    }

    /// The labels as the API carries them.
    pub fn api_labels(&self) -> Vec<Label> {
        self.labels.iter().map(|(k, v)| Label::new(k, v)).collect()
    }
}

/// The directory holding every sandbox record.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

impl Store {
    /// The store under `configured`, else `$XDG_RUNTIME_DIR/stet-<plugin>`, else
    /// `$XDG_STATE_HOME/stet/<plugin>` (`~/.local/state/stet/<plugin>`).
    pub fn locate(plugin: &str, configured: Option<&Path>) -> Result<Store, PluginError> {
        let env_dir = |name: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        let root = if let Some(dir) = configured {
            dir.to_path_buf()
        } else if let Some(runtime) = env_dir("XDG_RUNTIME_DIR") {
            runtime.join(format!("stet-{plugin}"))
        } else if let Some(state) = env_dir("XDG_STATE_HOME") {
            state.join("stet").join(plugin)
        } else if let Some(home) = env_dir("HOME") {
            home.join(".local/state/stet").join(plugin)
        } else {
            return Err(PluginError::unavailable(
                "there is no directory to keep sandbox records in",
            )
            .with_remedy(format!(
                "set HOME or XDG_RUNTIME_DIR, or `state_dir` in [plugins.{plugin}]"
            )));
        };
        Ok(Store { root })
    }

    /// The store's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A sandbox's directory; `id` must come from [`new_id`] (checked, since it is a path).
    pub fn dir(&self, id: &str) -> Result<PathBuf, PluginError> {
        if id.is_empty()
            || id.len() > 64
            || !id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err(PluginError::invalid_input(format!(
                "{id:?} is not a sandbox id of this runtime"
            )));
        }
        Ok(self.root.join(id))
    }

    /// Writes a new record (and its directory, private to the caller); returns the
    /// directory. The record appears whole or not at all.
    pub fn create(&self, record: &Record) -> Result<PathBuf, PluginError> {
        let dir = self.dir(&record.id)?;
        let io = |what: &str, e: std::io::Error| {
            PluginError::backend(format!("could not {what} {}: {e}", dir.display()))
        };
        create_private_dir(&self.root).map_err(|e| io("create the state directory for", e))?;
        std::fs::create_dir(&dir).map_err(|e| io("create", e))?;
        create_private_dir(&dir.join(PROCS)).map_err(|e| io("create procs in", e))?;
        let json = serde_json::to_vec_pretty(record)
            .map_err(|e| PluginError::internal(format!("could not encode a record: {e}")))?;
        let partial = dir.join(format!(".{RECORD}.partial"));
        std::fs::File::create(&partial)
            .and_then(|mut f| f.write_all(&json).and_then(|_| f.sync_all()))
            .and_then(|_| std::fs::rename(&partial, dir.join(RECORD)))
            .map_err(|e| io("write the record in", e))?;
        Ok(dir)
    }

    /// Reads one record; `None` when the sandbox does not exist (any more).
    pub fn read(&self, id: &str) -> Result<Option<Record>, PluginError> {
        let path = self.dir(id)?.join(RECORD);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                PluginError::backend(format!("the record {} is damaged: {e}", path.display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(PluginError::backend(format!(
                "could not read {}: {e}",
                path.display()
            ))),
        }
    }

    /// The record of an existing sandbox, or NOT_FOUND.
    pub fn record(&self, id: &str) -> Result<Record, PluginError> {
        self.read(id)?.ok_or_else(|| {
            PluginError::not_found(format!("there is no sandbox {id}"))
                .with_remedy("it was torn down, or created by another runtime")
        })
    }

    /// The sandboxes carrying every one of `labels`, as `RuntimePlugin::list_sandboxes`
    /// answers: `running` while a process noted in one still runs, else `idle`.
    pub fn sandboxes(&self, labels: &[Label]) -> Result<Vec<SandboxInfo>, PluginError> {
        Ok(self
            .all()?
            .into_iter()
            .filter(|r| r.has_labels(labels))
            .map(|r| SandboxInfo {
                state: if self.live_processes(&r.id).is_empty() {
                    "idle".into()
                } else {
                    "running".into()
                },
                labels: r.api_labels().into(),
                id: r.id.into(),
            })
            .collect())
    }

    /// Every readable record. Directories without a record (being created or removed)
    /// and damaged records are skipped: listing must not fail because of one of them.
    pub fn all(&self) -> Result<Vec<Record>, PluginError> {
        let entries = match std::fs::read_dir(&self.root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(PluginError::backend(format!(
                    "could not read {}: {e}",
                    self.root.display()
                )))
            }
        };
        let mut records: Vec<Record> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| !name.starts_with('.'))
            .filter_map(|id| self.read(&id).ok().flatten())
            .collect();
        records.sort_by(|a, b| (a.created, &a.id).cmp(&(b.created, &b.id)));
        Ok(records)
    }

    /// Notes that process `pid` runs in sandbox `id` (with its start time, so that a
    /// reused pid is never mistaken for it).
    pub fn add_process(&self, id: &str, pid: i32) -> Result<PathBuf, PluginError> {
        let path = self.dir(id)?.join(PROCS).join(pid.to_string());
        std::fs::write(&path, start_time(pid).unwrap_or_default()).map_err(|e| {
            PluginError::backend(format!("could not write {}: {e}", path.display()))
        })?;
        Ok(path)
    }

    /// The processes noted in a sandbox that still run (same pid, same start time).
    pub fn live_processes(&self, id: &str) -> Vec<i32> {
        let Ok(dir) = self.dir(id) else {
            return Vec::new();
        };
        live_in(&dir.join(PROCS))
    }

    /// Takes a sandbox's directory out of listings and returns where it went, or `None`
    /// when there is no such sandbox. Renaming first means a half-removed sandbox is never
    /// listed, and a second teardown finds nothing to do.
    pub fn detach(&self, id: &str) -> Result<Option<PathBuf>, PluginError> {
        let dir = self.dir(id)?;
        let hidden = self.root.join(format!(".{id}.removing"));
        match std::fs::rename(&dir, &hidden) {
            Ok(()) => Ok(Some(hidden)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(PluginError::backend(format!(
                "could not remove {}: {e}",
                dir.display()
            ))),
        }
    }
}

/// The end of a teardown, once [`Store::detach`] has taken the sandbox's directory `dir`
/// out of listings: kills `ours` (the processes this instance started there, whose
/// handles know whether they were reaped), then whatever another stet process started
/// there (checked by pid and start time), and removes the directory.
pub fn end_detached(dir: &Path, ours: Vec<std::sync::Arc<Shared>>) -> Result<(), PluginError> {
    for process in ours {
        process.kill();
    }
    for pid in live_in(&dir.join(PROCS)) {
        // SAFETY: plain syscall; pid and start time were just checked.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    remove_tree(dir)
        .map_err(|e| PluginError::backend(format!("could not remove {}: {e}", dir.display())))
}

/// The processes noted in a `procs` directory that still run.
pub fn live_in(procs: &Path) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir(procs) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let noted = std::fs::read_to_string(e.path()).ok()?;
            (!noted.is_empty() && start_time(pid).as_deref() == Some(noted.as_str())).then_some(pid)
        })
        .collect()
}

/// Removes a directory tree the sandbox's processes wrote into, also where they took
/// away their own write permission.
pub fn remove_tree(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            make_writable(dir);
            std::fs::remove_dir_all(dir)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

fn make_writable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.filter_map(Result::ok) {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                make_writable(&entry.path());
            }
        }
    }
}

/// Creates a directory (and its parents) readable by the caller alone.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// A fresh sandbox id: `prefix` and 16 hex digits.
pub fn new_id(prefix: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded randomly per process; the clock and a counter make ids of one
    // process differ from each other.
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(now_nanos());
    hasher.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    format!("{prefix}-{:016x}", hasher.finish())
}

fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Seconds since the Unix epoch.
pub fn now_secs() -> u64 {
    now_nanos() / 1_000_000_000
}

/// A process's start time in clock ticks since boot (Linux: field 22 of
/// `/proc/<pid>/stat`), which with the pid names a process for good.
pub fn start_time(pid: i32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    after_name.split_whitespace().nth(19).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_paths_of_the_store_and_nothing_else_is() {
        let store = Store {
            root: PathBuf::from("/state"),
        };
        let id = new_id("ex");
        assert_eq!(store.dir(&id).unwrap(), Path::new("/state").join(&id));
        assert_ne!(new_id("ex"), id);
        for bad in ["", "../etc", "a/b", "UPPER", ".hidden"] {
            assert!(store.dir(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn records_are_created_listed_filtered_and_detached() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store {
            root: tmp.path().join("state"),
        };
        let record = Record {
            id: new_id("ex"),
            image: "host".into(),
            mounts: vec![],
            env: vec![("PATH".into(), "/usr/bin".into())],
            workdir: "/".into(),
            network: "none".into(),
            user: (1, 1),
            labels: vec![("stet.run".into(), "r1".into())],
            created: now_secs(),
        };
        store.create(&record).unwrap();
        assert_eq!(store.all().unwrap(), vec![record.clone()]);
        assert!(record.has_labels(&[Label::new("stet.run", "r1")]));
        assert!(!record.has_labels(&[Label::new("stet.run", "r2")]));
        let me = std::process::id() as i32;
        store.add_process(&record.id, me).unwrap();
        assert_eq!(store.live_processes(&record.id), vec![me]);
        let gone = store.detach(&record.id).unwrap().unwrap();
        assert!(store.all().unwrap().is_empty());
        assert!(store.detach(&record.id).unwrap().is_none());
        remove_tree(&gone).unwrap();
        assert!(!gone.exists());
    }
}
