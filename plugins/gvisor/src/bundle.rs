//! A sandbox as an OCI bundle: the `config.json` runsc reads, and the process files
//! `runsc exec --process` reads for each process started in it.
//!
//! What a sandbox is made of:
//! - its root: the image's file system, unpacked once and shared by every sandbox of that
//!   image; the sandbox writes to it as to any root, but its writes go to an overlay in the
//!   sandbox's memory (`--overlay2=root:memory`: its memory limit bounds them, where a file
//!   store on the host's disk would be bounded by nothing), and the shared directory is
//!   only ever read (a test writes everywhere inside and finds the
//!   unpacked image unchanged);
//! - `/proc`, `/dev`, `/sys` (read-only) of gVisor's own; no control group file system
//!   (nothing inside needs one, and root in gVisor could write its limits);
//! - the spec's mounts, as bind mounts, read-only unless asked for writable; a mount inside
//!   another comes after it, so a read-only mount within a writable one stays read-only;
//! - the spec's user, with no capabilities and no new privileges;
//! - memory and CPU limits on the host's control group of the sandbox (what gVisor itself
//!   uses counts too); the pids limit as the sandbox's `RLIMIT_NPROC` (see [`PIDS_AS`]).

use serde_json::{json, Value};
use stet_plugin_api::Limits;
use stet_plugin_support::records::Record;

/// What a sandbox runs as its first process when it is not given one: nothing, for ever.
/// Work arrives through `runsc exec`; gVisor reaps what those leave.
pub const IDLE: [&str; 2] = ["sleep", "infinity"];

/// The pids limit is gVisor's `RLIMIT_NPROC`, hard and soft, not a control group's:
/// - gVisor counts every task (thread or process) of a user in the sandbox against it and
///   refuses a clone beyond it with EAGAIN, for root too unless it holds `CAP_SYS_ADMIN`
///   or `CAP_SYS_RESOURCE` (`pkg/sentry/kernel/kernel.go`, `incRLimitNProc`) — every
///   process here has no capability, and all run as the sandbox's one user (no new
///   privileges, so none becomes another), so it bounds the sandbox as `pids.max` would;
/// - raising a hard limit needs `CAP_SYS_RESOURCE`;
/// - runsc gives every `runsc exec` the first process's limits
///   (`runsc/boot/loader.go`, `createLimitSet(l.root.spec)`), so the one setting holds
///   for every process the host starts;
/// - the host's control group of the sandbox counts gVisor's own hundred-odd threads, not
///   the sandbox's processes: a pids limit there starved gVisor (measured), and
///   gVisor's own `pids.max` inside would need a privileged process to set it (an exec
///   costing ~95 ms, measured) and the cgroup file system taken away again.
pub const PIDS_AS: &str = "RLIMIT_NPROC";

/// The host control group a sandbox's runsc processes are placed in.
pub fn cgroup_path(id: &str) -> String {
    format!("/stet-gvisor/{id}")
}

/// The `config.json` of sandbox `record`, whose root file system is `rootfs`, under
/// `limits`, running `first` as its first process (a [`process`]; else [`IDLE`]).
pub fn config(record: &Record, rootfs: &str, limits: &Limits, first: Option<Value>) -> Value {
    let mut mounts = vec![
        json!({"destination": "/proc", "type": "proc", "source": "proc"}),
        json!({"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
               "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]}),
        json!({"destination": "/sys", "type": "sysfs", "source": "sysfs",
               "options": ["nosuid", "noexec", "nodev", "ro"]}),
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
    let (memory_bytes, millicpus) = (limits.memory_bytes, limits.millicpus);
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
    let mut process = first.unwrap_or_else(|| {
        process(
            record,
            &IDLE.map(String::from),
            &record.env,
            &record.workdir,
        )
    });
    if limits.pids > 0 {
        let pids = u64::from(limits.pids);
        process["rlimits"] = json!([{"type": PIDS_AS, "hard": pids, "soft": pids}]);
    }
    json!({
        "ociVersion": "1.0.2",
        "process": process,
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
    use stet_plugin_support::records::MountRecord;

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
        let limits = Limits {
            memory_bytes: 512 << 20,
            millicpus: 1500,
            pids: 0,
        };
        let config = config(&record(), "/cache/rootfs", &limits, None);
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
        let config = config(&record(), "/r", &Limits::default(), None);
        assert_eq!(config["linux"]["resources"], json!({}));
        assert_eq!(config["process"].get("rlimits"), None);
    }

    #[test]
    fn the_pids_limit_is_the_first_process_s_nproc_limit_and_no_cgroup_files_are_mounted() {
        let limits = Limits {
            pids: 64,
            ..Default::default()
        };
        let first = process(&record(), &["make".into()], &[], "/lane");
        let config = config(&record(), "/r", &limits, Some(first));
        assert_eq!(config["process"]["args"], json!(["make"]));
        assert_eq!(
            config["process"]["rlimits"],
            json!([{"type": "RLIMIT_NPROC", "hard": 64, "soft": 64}])
        );
        let kinds: Vec<&str> = config["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["type"].as_str().unwrap())
            .collect();
        assert!(!kinds.contains(&"cgroup"), "{kinds:?}");
    }
}
