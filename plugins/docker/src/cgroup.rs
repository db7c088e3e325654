//! A container's limit counters read from the host's own view of its control group.
//!
//! Where the engine runs on this kernel, the container's control group is a directory of
//! the host's cgroup filesystem, and the kernel's counters there are the ones the sandbox
//! sees inside — read here without a process in the sandbox (an exec costs tens of
//! milliseconds on the critical path of every call) and out of reach of anything the agent
//! left running. Where the engine runs elsewhere (a VM, a remote host), the container's
//! init is not a process of this host, and nothing is read: the host falls back to reading
//! the counters inside.
//!
//! The process is found by the pid the engine reports, and trusted to be the container's
//! only if every control group path it is in names the container's full id: a pid that
//! means another process here (the engine's pid namespace is not ours, or the pid was
//! reused since) never lends its counters.

use std::path::{Path, PathBuf};

use stet_plugin_api::LimitCounters;

/// Where this host mounts its control groups.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The counters of container `id`, whose init the engine reports as `pid`; `None` when they
/// cannot be read here for certain.
pub fn counters(id: &str, pid: i64) -> Option<LimitCounters> {
    if pid <= 0 || id.len() < 32 {
        return None;
    }
    let membership = read_small(&PathBuf::from(format!("/proc/{pid}/cgroup")))?;
    let (pids, memory) = files_of(&membership, id, Path::new(CGROUP_ROOT))?;
    Some(LimitCounters {
        pids_refused: counter(&read_small(&pids)?, "max")?,
        oom_kills: counter(&read_small(&memory)?, "oom_kill")?,
    })
}

/// From a process's `/proc/PID/cgroup`, the files holding its pids and memory events: v1's
/// `pids/…/pids.events` and `memory/…/memory.oom_control` where those controllers are
/// mounted apart, else the unified hierarchy's `pids.events` and `memory.events`. `None`
/// when a path does not name container `id`.
fn files_of(membership: &str, id: &str, root: &Path) -> Option<(PathBuf, PathBuf)> {
    let (mut pids, mut memory, mut unified) = (None, None, None);
    for line in membership.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(hierarchy), Some(controllers), Some(path)) =
            (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let relative = path.trim_start_matches('/');
        if hierarchy == "0" && controllers.is_empty() {
            unified = Some(relative);
        }
        for controller in controllers.split(',') {
            match controller {
                "pids" => pids = Some(relative),
                "memory" => memory = Some(relative),
                _ => {}
            }
        }
    }
    let names = |path: &str| path.split('/').any(|part| part.contains(id));
    match (pids, memory, unified) {
        (Some(pids), Some(memory), _) if names(pids) && names(memory) => Some((
            root.join("pids").join(pids).join("pids.events"),
            root.join("memory").join(memory).join("memory.oom_control"),
        )),
        (None, None, Some(unified)) if names(unified) => {
            let dir = root.join(unified);
            Some((dir.join("pids.events"), dir.join("memory.events")))
        }
        _ => None,
    }
}

/// The value of the line `key N` of a flat-keyed control group file.
fn counter(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(' ')?;
        (name == key).then(|| value.trim().parse().ok())?
    })
}

/// A control group or proc file: small, and read with a bound all the same.
fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(64 * 1024)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "e4a463a087467d3e66264a4d7a2f31c5e32d42d4ea4c2ae4e289d7458ec5d295";

    #[test]
    fn v1_controllers_mounted_apart_are_read_from_their_own_directories() {
        let membership = format!(
            "9:name=systemd:/docker/{ID}\n8:pids:/docker/{ID}\n4:memory:/docker/{ID}\n1:cpu,cpuacct:/docker/{ID}\n0::/docker/{ID}\n"
        );
        let (pids, memory) = files_of(&membership, ID, Path::new("/cg")).unwrap();
        assert_eq!(
            pids,
            PathBuf::from(format!("/cg/pids/docker/{ID}/pids.events"))
        );
        assert_eq!(
            memory,
            PathBuf::from(format!("/cg/memory/docker/{ID}/memory.oom_control"))
        );
    }

    #[test]
    fn the_unified_hierarchy_alone_is_read_from_one_directory() {
        let membership = format!("0::/system.slice/docker-{ID}.scope\n");
        let (pids, memory) = files_of(&membership, ID, Path::new("/cg")).unwrap();
        assert_eq!(
            pids,
            PathBuf::from(format!("/cg/system.slice/docker-{ID}.scope/pids.events"))
        );
        assert_eq!(
            memory,
            PathBuf::from(format!("/cg/system.slice/docker-{ID}.scope/memory.events"))
        );
    }

    #[test]
    fn a_process_whose_groups_do_not_name_the_container_lends_nothing() {
        // Another container's process, or one of the host's: the pid meant something else.
        let other = "8:pids:/docker/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n4:memory:/docker/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n";
        assert_eq!(files_of(other, ID, Path::new("/cg")), None);
        assert_eq!(
            files_of("0::/user.slice/session-1.scope\n", ID, Path::new("/cg")),
            None
        );
        // One controller naming it and the other not is not enough either.
        let half = format!("8:pids:/docker/{ID}\n4:memory:/\n");
        assert_eq!(files_of(&half, ID, Path::new("/cg")), None);
        assert_eq!(counters(ID, 0), None);
        assert_eq!(counters("short", 1), None);
    }

    #[test]
    fn counters_are_the_named_lines_of_flat_keyed_files() {
        assert_eq!(counter("max 3\n", "max"), Some(3));
        let v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
        assert_eq!(counter(v1, "oom_kill"), Some(2));
        let v2 = "low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(counter(v2, "oom_kill"), Some(1));
        assert_eq!(counter("oom 1\n", "oom_kill"), None);
    }

    #[test]
    fn this_process_is_no_container() {
        // A live reading: this test process's groups name no container id.
        let pid = i64::from(std::process::id());
        assert_eq!(counters(ID, pid), None);
    }
}
