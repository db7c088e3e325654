//! A container as the API server keeps it (`ContainerConfiguration` + status), stored as
//! one JSON file per container, and its renderings: 1.x `ManagedContainer`, 0.x
//! `PrintableContainer`, and the list table.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::json::{date, render, Keys, J};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ImageDesc {
    pub reference: String,
    pub digest: String,
    pub media_type: String,
    pub size: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Platform {
    pub os: String,
    pub architecture: String,
    pub variant: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum MountType {
    Virtiofs,
    Tmpfs,
    Volume { name: String, format: String },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Mount {
    pub kind: MountType,
    pub source: String,
    pub destination: String,
    pub options: Vec<String>,
    /// For volumes: the Docker volume backing it.
    pub docker_volume: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AttachmentConfig {
    pub network: String,
    pub hostname: String,
    pub mac_address: Option<String>,
    pub mtu: Option<u32>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Attachment {
    pub network: String,
    pub hostname: String,
    pub ipv4_address: String,
    pub ipv4_gateway: String,
    pub mac_address: Option<String>,
    pub mtu: Option<u32>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Dns {
    pub nameservers: Vec<String>,
    pub domain: Option<String>,
    pub search_domains: Vec<String>,
    pub options: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub enum User {
    Raw(String),
    Id(u32, u32),
}

impl User {
    pub fn docker(&self) -> String {
        match self {
            User::Raw(s) => s.clone(),
            User::Id(u, g) => format!("{u}:{g}"),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Rlimit {
    pub limit: String,
    pub soft: u64,
    pub hard: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Process {
    pub executable: String,
    pub arguments: Vec<String>,
    pub environment: Vec<String>,
    pub working_directory: String,
    pub terminal: bool,
    pub user: User,
    pub supplemental_groups: Vec<u32>,
    pub rlimits: Vec<Rlimit>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PublishPort {
    pub host_address: String,
    pub host_port: u16,
    pub container_port: u16,
    pub proto: String,
    pub count: u16,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PublishSocket {
    pub container_path: String,
    pub host_path: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    pub id: String,
    pub docker_name: String,
    pub image: ImageDesc,
    pub platform: Platform,
    pub mounts: Vec<Mount>,
    pub published_ports: Vec<PublishPort>,
    pub published_sockets: Vec<PublishSocket>,
    pub labels: BTreeMap<String, String>,
    pub networks: Vec<AttachmentConfig>,
    pub dns: Option<Dns>,
    pub rosetta: bool,
    pub init_process: Process,
    pub cpus: i64,
    pub memory_in_bytes: u64,
    pub runtime_handler: String,
    pub virtualization: bool,
    pub ssh: bool,
    pub read_only: bool,
    pub use_init: bool,
    pub cap_add: Vec<String>,
    pub cap_drop: Vec<String>,
    pub shm_size: Option<u64>,
    pub stop_signal: Option<String>,
    pub masked_paths: Option<Vec<String>>,
    pub readonly_paths: Option<Vec<String>>,
    /// Unix seconds.
    pub creation_date: f64,
    /// "running", "stopped" or "stopping".
    pub state: String,
    pub started_date: Option<f64>,
    pub attachments: Vec<Attachment>,
    pub auto_remove: bool,
    /// Creation order, for a stable listing.
    pub seq: u64,
}

fn user_json(u: &User) -> J {
    match u {
        User::Raw(s) => J::obj()
            .set("raw", J::obj().set("userString", J::s(s)).done())
            .done(),
        User::Id(uid, gid) => J::obj()
            .set(
                "id",
                J::obj()
                    .set("uid", J::int(*uid))
                    .set("gid", J::int(*gid))
                    .done(),
            )
            .done(),
    }
}

fn mount_type_json(t: &MountType) -> J {
    let empty = || J::obj().done();
    match t {
        MountType::Virtiofs => J::obj().set("virtiofs", empty()).done(),
        MountType::Tmpfs => J::obj().set("tmpfs", empty()).done(),
        MountType::Volume { name, format } => J::obj()
            .set(
                "volume",
                J::obj()
                    .set("name", J::s(name))
                    .set("format", J::s(format))
                    .set("cache", J::obj().set("on", empty()).done())
                    .set("sync", J::obj().set("fsync", empty()).done())
                    .done(),
            )
            .done(),
    }
}

/// `Attachment` (the same keys in 0.12 and 1.x; ≤0.7 used `address`/`gateway`).
fn attachment_json(a: &Attachment) -> J {
    J::obj()
        .set("network", J::s(&a.network))
        .set("hostname", J::s(&a.hostname))
        .set("ipv4Address", J::s(&a.ipv4_address))
        .set("ipv4Gateway", J::s(&a.ipv4_gateway))
        .opt("macAddress", a.mac_address.as_ref().map(J::s))
        .opt("mtu", a.mtu.map(J::int))
        .done()
}

/// `ContainerConfiguration` as encoded by 1.x (`v1`) or 0.12.
pub fn configuration_json(r: &Record, v1: bool, iso_dates: bool) -> J {
    let process = &r.init_process;
    let init = J::obj()
        .set("executable", J::s(&process.executable))
        .set("arguments", J::strs(&process.arguments))
        .set("environment", J::strs(&process.environment))
        .set("workingDirectory", J::s(&process.working_directory))
        .set("terminal", J::Bool(process.terminal))
        .set("user", user_json(&process.user))
        .set(
            "supplementalGroups",
            J::Arr(
                process
                    .supplemental_groups
                    .iter()
                    .map(|g| J::int(*g))
                    .collect(),
            ),
        )
        .set(
            "rlimits",
            J::Arr(
                process
                    .rlimits
                    .iter()
                    .map(|l| {
                        J::obj()
                            .set("limit", J::s(&l.limit))
                            .set("soft", J::int(l.soft))
                            .set("hard", J::int(l.hard))
                            .done()
                    })
                    .collect(),
            ),
        )
        .done();
    let image = J::obj()
        .set("reference", J::s(&r.image.reference))
        .set(
            "descriptor",
            J::obj()
                .set("mediaType", J::s(&r.image.media_type))
                .set("digest", J::s(&r.image.digest))
                .set("size", J::int(r.image.size))
                .done(),
        )
        .done();
    let mounts = J::Arr(
        r.mounts
            .iter()
            .map(|m| {
                J::obj()
                    .set("type", mount_type_json(&m.kind))
                    .set("source", J::s(&m.source))
                    .set("destination", J::s(&m.destination))
                    .set("options", J::strs(&m.options))
                    .done()
            })
            .collect(),
    );
    let ports = J::Arr(
        r.published_ports
            .iter()
            .map(|p| {
                J::obj()
                    .set("hostAddress", J::s(&p.host_address))
                    .set("hostPort", J::int(p.host_port))
                    .set("containerPort", J::int(p.container_port))
                    .set("proto", J::s(&p.proto))
                    .set("count", J::int(p.count))
                    .done()
            })
            .collect(),
    );
    let sockets = J::Arr(
        r.published_sockets
            .iter()
            .map(|s| {
                J::obj()
                    .set("containerPath", J::s(&s.container_path))
                    .set("hostPath", J::s(&s.host_path))
                    .done()
            })
            .collect(),
    );
    let labels = J::Obj(r.labels.iter().map(|(k, v)| (k.clone(), J::s(v))).collect());
    let networks = J::Arr(
        r.networks
            .iter()
            .map(|n| {
                J::obj()
                    .set("network", J::s(&n.network))
                    .set(
                        "options",
                        J::obj()
                            .set("hostname", J::s(&n.hostname))
                            .opt("macAddress", n.mac_address.as_ref().map(J::s))
                            .opt("mtu", n.mtu.map(J::int))
                            .done(),
                    )
                    .done()
            })
            .collect(),
    );
    let dns = r.dns.as_ref().map(|d| {
        J::obj()
            .set("nameservers", J::strs(&d.nameservers))
            .opt("domain", d.domain.as_ref().map(J::s))
            .set("searchDomains", J::strs(&d.search_domains))
            .set("options", J::strs(&d.options))
            .done()
    });
    let platform = J::obj()
        .set("os", J::s(&r.platform.os))
        .set("architecture", J::s(&r.platform.architecture))
        .opt("variant", r.platform.variant.as_ref().map(J::s))
        .done();
    let mut resources = J::obj()
        .set("cpus", J::int(r.cpus))
        .set("memoryInBytes", J::int(r.memory_in_bytes));
    if v1 {
        resources = resources.set("cpuOverhead", J::int(1));
    }
    let mut c = J::obj()
        .set("id", J::s(&r.id))
        .set("image", image)
        .set("mounts", mounts)
        .set("publishedPorts", ports)
        .set("publishedSockets", sockets)
        .set("labels", labels)
        .set("sysctls", J::obj().done())
        .set("networks", networks)
        .opt("dns", dns)
        .set("rosetta", J::Bool(r.rosetta))
        .set("initProcess", init)
        .set("platform", platform)
        .set("resources", resources.done())
        .set("runtimeHandler", J::s(&r.runtime_handler))
        .set("virtualization", J::Bool(r.virtualization))
        .set("ssh", J::Bool(r.ssh))
        .set("readOnly", J::Bool(r.read_only))
        .set("useInit", J::Bool(r.use_init))
        .set("capAdd", J::strs(&r.cap_add))
        .set("capDrop", J::strs(&r.cap_drop));
    if v1 {
        c = c
            .opt("shmSize", r.shm_size.map(J::int))
            .opt("stopSignal", r.stop_signal.as_ref().map(J::s))
            .opt("maskedPaths", r.masked_paths.as_ref().map(J::strs))
            .opt("readonlyPaths", r.readonly_paths.as_ref().map(J::strs))
            .set("creationDate", date(r.creation_date, iso_dates));
    }
    c.done()
}

/// 1.x `ManagedContainer`: `{configuration, id, status: {networks, startedDate?, state}}`.
pub fn managed_json(r: &Record) -> J {
    J::obj()
        .set("id", J::s(&r.id))
        .set("configuration", configuration_json(r, true, true))
        .set(
            "status",
            J::obj()
                .set("state", J::s(&r.state))
                .set(
                    "networks",
                    J::Arr(r.attachments.iter().map(attachment_json).collect()),
                )
                .opt("startedDate", r.started_date.map(|d| date(d, true)))
                .done(),
        )
        .done()
}

/// 0.x `PrintableContainer`: `{status: "running", configuration, networks, startedDate?}`.
pub fn printable_json(r: &Record) -> J {
    J::obj()
        .set("status", J::s(&r.state))
        .set("configuration", configuration_json(r, false, false))
        .set(
            "networks",
            J::Arr(r.attachments.iter().map(attachment_json).collect()),
        )
        .opt("startedDate", r.started_date.map(|d| date(d, false)))
        .done()
}

pub fn list_json(records: &[Record], v1: bool, pretty: bool) -> String {
    if v1 {
        render(
            &J::Arr(records.iter().map(managed_json).collect()),
            pretty,
            Keys::Sorted,
        )
    } else {
        render(
            &J::Arr(records.iter().map(printable_json).collect()),
            pretty,
            Keys::Hashed,
        )
    }
}

/// `TableOutput`: columns padded to the widest cell plus two spaces, the last unpadded.
pub fn table(rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = Vec::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            let n = cell.chars().count();
            if widths.len() <= i {
                widths.push(n);
            } else if widths[i] < n {
                widths[i] = n;
            }
        }
    }
    let mut out = String::new();
    for (ri, row) in rows.iter().enumerate() {
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                out.push_str(cell);
            } else {
                out.push_str(cell);
                for _ in cell.chars().count()..widths[i] + 2 {
                    out.push(' ');
                }
            }
        }
        if ri + 1 != rows.len() {
            out.push('\n');
        }
    }
    out
}

pub fn list_table(records: &[Record], v1: bool) -> String {
    let mut rows = vec![vec![
        "ID".to_string(),
        "IMAGE".into(),
        "OS".into(),
        "ARCH".into(),
        "STATE".into(),
        if v1 { "IP".into() } else { "ADDR".into() },
        "CPUS".into(),
        "MEMORY".into(),
        "STARTED".into(),
    ]];
    for r in records {
        rows.push(vec![
            r.id.clone(),
            r.image.reference.clone(),
            r.platform.os.clone(),
            r.platform.architecture.clone(),
            r.state.clone(),
            r.attachments
                .iter()
                .map(|a| a.ipv4_address.clone())
                .collect::<Vec<_>>()
                .join(","),
            r.cpus.to_string(),
            format!("{} MB", r.memory_in_bytes / (1024 * 1024)),
            r.started_date.map(crate::json::iso8601).unwrap_or_default(),
        ]);
    }
    table(&rows)
}

/// A rough YAML rendering (Yams is not reproduced exactly; use JSON for machines).
pub fn yaml(v: &J) -> String {
    fn scalar(v: &J) -> Option<String> {
        match v {
            J::Bool(b) => Some(b.to_string()),
            J::Num(n) => Some(n.clone()),
            J::Str(s) => {
                let plain = !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_alphanumeric() || "/._-+@".contains(c))
                    && !matches!(s.as_str(), "true" | "false" | "null" | "~")
                    && s.parse::<f64>().is_err();
                Some(if plain {
                    s.clone()
                } else {
                    serde_json::to_string(s).unwrap_or_default()
                })
            }
            J::Arr(a) if a.is_empty() => Some("[]".into()),
            J::Obj(o) if o.is_empty() => Some("{}".into()),
            _ => None,
        }
    }
    fn go(out: &mut String, v: &J, ind: usize) {
        let pad = "  ".repeat(ind);
        match v {
            J::Arr(items) => {
                for item in items {
                    match scalar(item) {
                        Some(s) => out.push_str(&format!("{pad}- {s}\n")),
                        None => {
                            let mut inner = String::new();
                            go(&mut inner, item, ind + 1);
                            let trimmed = inner.trim_start().to_string();
                            out.push_str(&format!("{pad}- {trimmed}"));
                        }
                    }
                }
            }
            J::Obj(fields) => {
                let mut fields: Vec<&(String, J)> = fields.iter().collect();
                fields.sort_by(|a, b| a.0.cmp(&b.0));
                for (k, val) in fields {
                    match scalar(val) {
                        Some(s) => out.push_str(&format!("{pad}{k}: {s}\n")),
                        None => {
                            out.push_str(&format!("{pad}{k}:\n"));
                            go(out, val, ind + 1);
                        }
                    }
                }
            }
            other => out.push_str(&format!("{pad}{}\n", scalar(other).unwrap_or_default())),
        }
    }
    let mut out = String::new();
    match scalar(v) {
        Some(s) => out.push_str(&s),
        None => go(&mut out, v, 0),
    }
    out.trim_end().to_string()
}

fn to_toml_value(v: &J) -> toml::Value {
    match v {
        J::Bool(b) => toml::Value::Boolean(*b),
        J::Num(n) => n
            .parse::<i64>()
            .map(toml::Value::Integer)
            .unwrap_or_else(|_| toml::Value::Float(n.parse().unwrap_or(0.0))),
        J::Str(s) => toml::Value::String(s.clone()),
        J::Arr(a) => toml::Value::Array(a.iter().map(to_toml_value).collect()),
        J::Obj(o) => {
            let mut t = toml::map::Map::new();
            for (k, v) in o {
                t.insert(k.clone(), to_toml_value(v));
            }
            toml::Value::Table(t)
        }
    }
}

/// A rough TOML rendering: arrays are wrapped under `items`, as the real CLI does.
pub fn toml_text(v: &J) -> String {
    let value = match v {
        J::Arr(_) => {
            let mut t = toml::map::Map::new();
            t.insert("items".into(), to_toml_value(v));
            toml::Value::Table(t)
        }
        other => to_toml_value(other),
    };
    toml::to_string(&value)
        .unwrap_or_default()
        .trim_end()
        .to_string()
}
