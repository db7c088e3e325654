//! A sandbox as an OCI bundle: the `config.json` runsc reads, and the process files
//! `runsc exec --process` reads for each process started in it.
//!
//! What a sandbox is made of:
//! - its root: the image's file system, unpacked once and shared by every sandbox of that
//!   image; the sandbox writes to it as to any root, but its writes go to a file store of
//!   its own that runsc layers over it (see [`crate::runsc::RunFlags::upper`]), and the
//!   shared directory is only ever read (a test writes everywhere inside and finds the
//!   unpacked image unchanged);
//! - `/proc`, `/dev`, `/sys` (read-only) of gVisor's own, and the control group file
//!   system, which the set-up takes away again after setting the pids limit;
//! - the spec's mounts, as bind mounts, read-only unless asked for writable; a mount inside
//!   another comes after it, so a read-only mount within a writable one stays read-only;
//! - the spec's user, with no capabilities and no new privileges;
//! - memory and CPU limits on the host's control group of the sandbox (what gVisor itself
//!   uses counts too); the pids limit is set inside (see
//!   [`crate::runsc::Runsc::set_pids_limit`]).

use serde_json::{json, Value};
use stet_runtime_support::records::Record;

/// What every sandbox runs as its first process: nothing, for ever. Work arrives through
/// `runsc exec`; gVisor reaps what those leave.
pub const IDLE: [&str; 2] = ["sleep", "infinity"];

/// The host control group a sandbox's runsc processes are placed in.
pub fn cgroup_path(id: &str) -> String {
    format!("/stet-gvisor/{id}")
}

/// The `config.json` of sandbox `record`, whose root file system is `rootfs`.
pub fn config(record: &Record, rootfs: &str, memory_bytes: u64, millicpus: u32) -> Value {
    let mut mounts = vec![
        json!({"destination": "/proc", "type": "proc", "source": "proc"}),
        json!({"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
               "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]}),
        json!({"destination": "/sys", "type": "sysfs", "source": "sysfs",
               "options": ["nosuid", "noexec", "nodev", "ro"]}),
        json!({"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
               "options": ["nosuid", "noexec", "nodev"]}),
    ];
    // Outer mounts before the ones inside them, whatever order the spec gave.
    let mut binds: Vec<_> = record.mounts.iter().collect();
    binds.sort_by_key(|m| m.target.matches('/').count());
    for m in binds {
        mounts.push(json!({
            "destination": m.target,
            "type": "bind",
            "source": m.source,
            "options": ["rbind", if m.writable { "rw" } else { "ro" }],
        }));
    }
    let mut resources = serde_json::Map::new();
    if memory_bytes > 0 {
        // No swap beyond the limit, so that the limit is one.
        resources.insert(
            "memory".into(),
            json!({"limit": memory_bytes, "swap": memory_bytes}),
        );
    }
    if millicpus > 0 {
        const PERIOD: u64 = 100_000;
        resources.insert(
            "cpu".into(),
            json!({"quota": millicpus as u64 * PERIOD / 1000, "period": PERIOD}),
        );
    }
    json!({
        "ociVersion": "1.0.2",
        "process": process(record, &IDLE.map(String::from), &record.env, &record.workdir),
        // Not read-only to the sandbox: runsc layers the sandbox's own file store over it
        // (`--overlay2`), so the shared directory itself is only ever read.
        "root": {"path": rootfs, "readonly": false},
        "hostname": "stet",
        "mounts": mounts,
        "annotations": {"dev.stet.sandbox": record.id},
        "linux": {
            "namespaces": [
                {"type": "pid"}, {"type": "network"}, {"type": "ipc"},
                {"type": "uts"}, {"type": "mount"}
            ],
            "cgroupsPath": cgroup_path(&record.id),
            "resources": Value::Object(resources),
        },
    })
}

/// One process of sandbox `record`: `argv` in `workdir` with exactly `env`, as the
/// sandbox's user, with no capabilities.
pub fn process(record: &Record, argv: &[String], env: &[(String, String)], workdir: &str) -> Value {
    json!({
        "terminal": false,
        "user": {"uid": record.user.0, "gid": record.user.1},
        "args": argv,
        "env": env.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
        "cwd": if workdir.is_empty() { "/" } else { workdir },
        "capabilities": {
            "bounding": [], "effective": [], "inheritable": [], "permitted": [], "ambient": []
        },
        "noNewPrivileges": true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use stet_runtime_support::records::MountRecord;

    fn record() -> Record {
        Record {
            id: "gv-0123456789abcdef".into(),
            image: "stet-lane:1".into(),
            mounts: vec![
                MountRecord {
                    source: "/host/lane/.git".into(),
                    target: "/lane/.git".into(),
                    writable: false,
                },
                MountRecord {
                    source: "/host/lane".into(),
                    target: "/lane".into(),
                    writable: true,
                },
            ],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            workdir: "/lane".into(),
            network: "none".into(),
            user: (1000, 1000),
            labels: vec![],
            created: 0,
        }
    }

    #[test]
    fn the_bundle_roots_in_the_shared_image_mounts_outer_first_and_grants_no_capabilities() {
        let config = config(&record(), "/cache/rootfs", 512 << 20, 1500);
        // Writable to the sandbox: its writes go to runsc's overlay, never to the image.
        assert_eq!(
            config["root"],
            json!({"path": "/cache/rootfs", "readonly": false})
        );
        let binds: Vec<(String, String)> = config["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["type"] == "bind")
            .map(|m| {
                (
                    m["destination"].as_str().unwrap().to_string(),
                    m["options"][1].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            binds,
            [
                ("/lane".into(), "rw".into()),
                ("/lane/.git".into(), "ro".into())
            ]
        );
        assert_eq!(config["process"]["args"], json!(["sleep", "infinity"]));
        assert_eq!(config["process"]["user"], json!({"uid": 1000, "gid": 1000}));
        assert_eq!(config["process"]["capabilities"]["effective"], json!([]));
        assert_eq!(config["process"]["noNewPrivileges"], json!(true));
        assert_eq!(
            config["linux"]["resources"],
            json!({"memory": {"limit": 512u64 << 20, "swap": 512u64 << 20},
                   "cpu": {"quota": 150_000, "period": 100_000}})
        );
        assert_eq!(
            config["linux"]["cgroupsPath"],
            "/stet-gvisor/gv-0123456789abcdef"
        );
    }

    #[test]
    fn no_limits_asked_means_none_set() {
        let config = config(&record(), "/r", 0, 0);
        assert_eq!(config["linux"]["resources"], json!({}));
    }
}
