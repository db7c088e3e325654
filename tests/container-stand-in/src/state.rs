//! The "API server": one JSON file per container under `<state_dir>/containers/`, the service
//! switch under `<state_dir>/service`, and a lock file that serialises concurrent stand-ins.
//!
//! The real server learns that a container's init process exited from its exit monitor; the
//! stand-in learns it lazily: `reconcile` compares every record that should be running with
//! Docker before a command looks at it.

use std::fs::{self, File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use crate::docker::Docker;
use crate::errors::{cz, CliError, Code};
use crate::model::{Attachment, Record};
use crate::settings::{Service, Settings};

pub struct Store {
    pub dir: PathBuf,
}

pub struct Lock {
    _file: File,
}

impl Store {
    pub fn new(settings: &Settings) -> Store {
        Store {
            dir: settings.state_dir.clone(),
        }
    }

    fn containers_dir(&self) -> PathBuf {
        self.dir.join("containers")
    }

    fn ensure(&self) -> Result<(), CliError> {
        fs::create_dir_all(self.containers_dir()).map_err(|e| {
            cz(
                Code::InternalError,
                format!("stand-in: cannot create {}: {e}", self.dir.display()),
            )
        })
    }

    /// An exclusive lock over the whole state (released on drop).
    pub fn lock(&self) -> Result<Lock, CliError> {
        self.ensure()?;
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir.join(".lock"))
            .map_err(|e| cz(Code::InternalError, format!("stand-in: lock: {e}")))?;
        // SAFETY: flock on a descriptor we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if rc != 0 {
            return Err(cz(Code::InternalError, "stand-in: flock failed"));
        }
        Ok(Lock { _file: file })
    }

    pub fn service(&self, settings: &Settings) -> Service {
        match fs::read_to_string(self.dir.join("service")) {
            Ok(s) if s.trim() == "down" => Service::Down,
            Ok(s) if s.trim() == "running" => Service::Running,
            _ => settings.service,
        }
    }

    pub fn set_service(&self, s: Service) -> Result<(), CliError> {
        self.ensure()?;
        let text = match s {
            Service::Running => "running\n",
            Service::Down => "down\n",
        };
        fs::write(self.dir.join("service"), text)
            .map_err(|e| cz(Code::InternalError, format!("stand-in: {e}")))
    }

    fn path(&self, id: &str) -> PathBuf {
        self.containers_dir().join(format!("{id}.json"))
    }

    pub fn load(&self, id: &str) -> Option<Record> {
        let text = fs::read_to_string(self.path(id)).ok()?;
        serde_json::from_str(&text).ok()
    }

    pub fn save(&self, r: &Record) -> Result<(), CliError> {
        self.ensure()?;
        let tmp = self.containers_dir().join(format!(".{}.tmp", r.id));
        let text = serde_json::to_string_pretty(r).expect("record serialises");
        fs::write(&tmp, text)
            .and_then(|_| fs::rename(&tmp, self.path(&r.id)))
            .map_err(|e| cz(Code::InternalError, format!("stand-in: {e}")))
    }

    pub fn remove(&self, id: &str) {
        let _ = fs::remove_file(self.path(id));
    }

    pub fn all(&self) -> Vec<Record> {
        let mut out: Vec<Record> = Vec::new();
        if let Ok(entries) = fs::read_dir(self.containers_dir()) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') || !name.ends_with(".json") {
                    continue;
                }
                if let Some(r) = fs::read_to_string(e.path())
                    .ok()
                    .and_then(|t| serde_json::from_str::<Record>(&t).ok())
                {
                    out.push(r);
                }
            }
        }
        out.sort_by_key(|r| r.seq);
        out
    }

    pub fn next_seq(&self) -> u64 {
        self.all().iter().map(|r| r.seq).max().unwrap_or(0) + 1
    }

    /// Brings records in line with Docker (the exit monitor of the real server). Call with
    /// the lock held.
    pub fn reconcile(&self, docker: &Docker, records: Vec<Record>) -> Vec<Record> {
        let live: Vec<String> = records
            .iter()
            .filter(|r| r.state != "stopped")
            .map(|r| r.docker_name.clone())
            .collect();
        let info = docker.containers(&live);
        self.reconcile_with(docker, records, |name| info.get(name).cloned())
    }

    fn reconcile_with(
        &self,
        docker: &Docker,
        records: Vec<Record>,
        info: impl Fn(&str) -> Option<serde_json::Value>,
    ) -> Vec<Record> {
        let mut out = Vec::new();
        for mut r in records {
            if r.state != "stopped" {
                let i = info(&r.docker_name);
                let running = i.as_ref().map(Docker::running).unwrap_or(false);
                if running {
                    if r.attachments.is_empty() && !r.networks.is_empty() {
                        if let Some(i) = &i {
                            r.attachments = attachments(&r, i);
                            let _ = self.save(&r);
                        }
                    }
                } else if r.auto_remove {
                    self.remove(&r.id);
                    let _ = docker.output(&["rm".into(), "-f".into(), r.docker_name.clone()]);
                    continue;
                } else {
                    r.state = "stopped".into();
                    r.attachments.clear();
                    let _ = self.save(&r);
                }
            }
            out.push(r);
        }
        out
    }

    pub fn get(&self, docker: &Docker, id: &str) -> Option<Record> {
        self.get_with_info(docker, id).map(|(r, _)| r)
    }

    /// `get`, with what `docker inspect` said about a container that is not stopped.
    pub fn get_with_info(
        &self,
        docker: &Docker,
        id: &str,
    ) -> Option<(Record, Option<serde_json::Value>)> {
        let r = self.load(id)?;
        let info = if r.state != "stopped" {
            docker
                .containers(std::slice::from_ref(&r.docker_name))
                .remove(&r.docker_name)
        } else {
            None
        };
        let r = self
            .reconcile_with(docker, vec![r], |_| info.clone())
            .into_iter()
            .next()?;
        Some((r, info))
    }
}

/// The network attachments of a running container, from `docker inspect`.
pub fn attachments(r: &Record, info: &serde_json::Value) -> Vec<Attachment> {
    let Some(first) = r.networks.first() else {
        return vec![];
    };
    let ns = info.get("NetworkSettings");
    let field = |k: &str| {
        ns.and_then(|n| n.get(k))
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string()
    };
    let mut ip = field("IPAddress");
    let mut prefix = ns
        .and_then(|n| n.get("IPPrefixLen"))
        .and_then(|v| v.as_i64())
        .unwrap_or(0);
    let mut gateway = field("Gateway");
    let mut mac = field("MacAddress");
    if ip.is_empty() {
        if let Some(nets) = ns
            .and_then(|n| n.get("Networks"))
            .and_then(|n| n.as_object())
        {
            for (_, n) in nets {
                let s = |k: &str| n.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
                if !s("IPAddress").is_empty() {
                    ip = s("IPAddress");
                    prefix = n.get("IPPrefixLen").and_then(|v| v.as_i64()).unwrap_or(0);
                    gateway = s("Gateway");
                    mac = s("MacAddress");
                    break;
                }
            }
        }
    }
    if ip.is_empty() {
        return vec![];
    }
    vec![Attachment {
        network: first.network.clone(),
        hostname: first.hostname.clone(),
        ipv4_address: format!("{ip}/{prefix}"),
        ipv4_gateway: gateway,
        mac_address: if mac.is_empty() { None } else { Some(mac) },
        mtu: Some(first.mtu.unwrap_or(1280)),
    }]
}
