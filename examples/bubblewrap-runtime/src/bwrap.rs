//! Everything about the `bwrap` command: finding it, the arguments of one sandboxed
//! process, the network namespace made for it, and bounded runs for the probe.

use std::ffi::CStr;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Mutex, OnceLock};

use crate::images::{self, Image};
use crate::records::Record;

/// Finds `bwrap`: the configured path, else the first `bwrap` on `PATH`.
pub fn find(configured: Option<&Path>) -> Result<PathBuf, String> {
    stet_plugin_support::command::find("bwrap", configured, "[plugins.bubblewrap] bwrap").map_err(
        |why| {
            why.replace(
                "bwrap is not installed",
                "bwrap (bubblewrap) is not installed",
            )
        },
    )
}

pub use stet_plugin_support::command::{run_bounded, Ran};

/// What one sandboxed process is launched with.
pub struct Launch<'a> {
    pub record: &'a Record,
    pub image: &'a Image,
    /// The sandbox's directory bound at `/tmp`; `None`: a fresh tmpfs (for the probe).
    pub tmp: Option<&'a Path>,
    pub argv: &'a [String],
    /// The whole environment (the sandbox's and the process's).
    pub env: &'a [(String, String)],
    pub workdir: &'a str,
    /// The sandbox's network namespace, which every process of the sandbox joins (`None`:
    /// a fresh one for this process alone, as the probe needs).
    pub netns: Option<&'a Netns>,
}

fn push(args: &mut Vec<String>, items: &[&str]) {
    args.extend(items.iter().map(|s| s.to_string()));
}

impl Launch<'_> {
    /// bwrap's arguments, in order (bwrap applies them in order: a mount's parent comes
    /// before the mount, and `/` is made read-only last).
    pub fn args(&self) -> Vec<String> {
        let record = self.record;
        let open = record.network == "open";
        let (uid, gid) = record.user;
        let mut args = Vec::new();
        // New user namespace with exactly the requested ids mapped (to the caller's own
        // ids outside: bwrap is not setuid); new pid, ipc, uts, cgroup namespaces. The
        // network namespace, unless open, is made before bwrap runs (see `enter_netns`).
        push(
            &mut args,
            &[
                "--unshare-user",
                "--uid",
                &uid.to_string(),
                "--gid",
                &gid.to_string(),
                "--unshare-pid",
                "--unshare-ipc",
                "--unshare-uts",
                "--unshare-cgroup-try",
                "--hostname",
                &record.id,
                // The process dies with the stet that started it; it cannot reach the
                // caller's terminal (TIOCSTI); no capabilities, even for uid 0 inside.
                "--die-with-parent",
                "--new-session",
                "--cap-drop",
                "ALL",
                "--clearenv",
            ],
        );
        for (name, value) in self.env {
            push(&mut args, &["--setenv", name, value]);
        }
        args.extend(images::root_args(self.image, open));
        push(
            &mut args,
            &[
                "--proc",
                "/proc",
                "--dev",
                "/dev",
                // With network none, this is a sysfs of the sandbox's own network
                // namespace (only `lo` under /sys/class/net), mounted by `enter_netns`.
                "--ro-bind",
                "/sys",
                "/sys",
            ],
        );
        match self.tmp {
            Some(tmp) => push(&mut args, &["--bind", &tmp.display().to_string(), "/tmp"]),
            None => push(&mut args, &["--tmpfs", "/tmp"]),
        }
        let mut mounts: Vec<_> = record.mounts.iter().collect();
        mounts.sort_by_key(|m| Path::new(&m.target).components().count());
        for m in mounts {
            let how = if m.writable { "--bind" } else { "--ro-bind" };
            push(&mut args, &[how, &m.source, &m.target]);
        }
        push(
            &mut args,
            &["--remount-ro", "/", "--chdir", self.workdir, "--"],
        );
        args.extend(self.argv.iter().cloned());
        args
    }

    /// The `bwrap` command for this launch, with the network namespace prepared for it
    /// when the network is none. Stdio is left to the caller.
    pub fn command(&self, bwrap: &Path) -> Command {
        let mut command = Command::new(bwrap);
        command.args(self.args()).env_clear().current_dir("/");
        if self.record.network != "open" {
            let setup = NetnsSetup::new(self.netns);
            // SAFETY: `enter_netns` makes only async-signal-safe system calls on memory
            // prepared before the fork.
            unsafe {
                command.pre_exec(move || setup.enter());
            }
        }
        command
    }
}

/// A sandbox's network namespace (with the user namespace that owns it), held open by
/// descriptors for as long as the sandbox exists, so that all its processes share one
/// loopback: a bridge one process listens with is reached by the next. It is made by a
/// forked child that enters fresh namespaces, brings up `lo` and waits while this process
/// opens them; then the child exits and the descriptors keep them alive.
pub struct Netns {
    user: std::os::fd::OwnedFd,
    net: std::os::fd::OwnedFd,
}

impl Netns {
    pub fn new() -> std::io::Result<Netns> {
        use std::os::fd::{FromRawFd, OwnedFd};
        let setup = NetnsSetup::new(None);
        let pipe = || -> std::io::Result<(OwnedFd, OwnedFd)> {
            let mut fds = [0; 2];
            // SAFETY: a valid two-element array.
            check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
            // SAFETY: both were just opened and are owned here alone.
            Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
        };
        let (ready_r, ready_w) = pipe()?;
        let (hold_r, hold_w) = pipe()?;
        use std::os::fd::AsRawFd;
        let fds = [
            ready_r.as_raw_fd(),
            ready_w.as_raw_fd(),
            hold_r.as_raw_fd(),
            hold_w.as_raw_fd(),
        ];
        // SAFETY: the child makes only async-signal-safe system calls on memory prepared
        // before the fork, and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: see above; the descriptors are this child's copies.
            unsafe {
                libc::close(fds[0]);
                libc::close(fds[3]);
                let ok: u8 = u8::from(setup.fresh_user_and_net().is_ok());
                libc::write(fds[1], (&ok as *const u8).cast(), 1);
                let mut byte = 0u8;
                // Returns (end of file) once the parent closes its end.
                libc::read(fds[2], (&mut byte as *mut u8).cast(), 1);
                libc::_exit(0);
            }
        }
        drop(ready_w);
        drop(hold_r);
        let opened = (|| {
            let mut ok = 0u8;
            // SAFETY: reading one byte into a valid buffer.
            let n = unsafe { libc::read(ready_r.as_raw_fd(), (&mut ok as *mut u8).cast(), 1) };
            if n != 1 || ok != 1 {
                return Err(std::io::Error::other(
                    "could not make a network namespace (are unprivileged user namespaces allowed?)",
                ));
            }
            let open = |what: &str| {
                std::fs::File::open(format!("/proc/{pid}/ns/{what}")).map(OwnedFd::from)
            };
            Ok(Netns {
                user: open("user")?,
                net: open("net")?,
            })
        })();
        drop(hold_w);
        let mut status = 0;
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        opened
    }
}

/// What the child needs, prepared before `fork` (no allocation after it).
struct NetnsSetup {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    /// The sandbox's namespaces to join (user, net), instead of fresh ones.
    join: Option<(libc::c_int, libc::c_int)>,
}

impl NetnsSetup {
    fn new(join: Option<&Netns>) -> Self {
        use std::os::fd::AsRawFd;
        // SAFETY: plain syscalls without arguments.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        NetnsSetup {
            uid_map: format!("0 {uid} 1\n").into_bytes(),
            gid_map: format!("0 {gid} 1\n").into_bytes(),
            join: join.map(|ns| (ns.user.as_raw_fd(), ns.net.as_raw_fd())),
        }
    }

    /// A new user namespace (the caller mapped to root there, as `unshare -r` does) and a
    /// new network namespace in it, with `lo` up.
    fn fresh_user_and_net(&self) -> std::io::Result<()> {
        // SAFETY: system calls on valid, NUL-terminated paths and prepared buffers.
        unsafe {
            check(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET))?;
            // Needed before an unprivileged gid_map; absent on kernels before 3.19.
            if let Err(e) = write_file(c"/proc/self/setgroups", b"deny") {
                if e.raw_os_error() != Some(libc::ENOENT) {
                    return Err(e);
                }
            }
            write_file(c"/proc/self/uid_map", &self.uid_map)?;
            write_file(c"/proc/self/gid_map", &self.gid_map)?;
            loopback_up()
        }
    }

    /// Runs in the forked child just before it executes bwrap: joins the sandbox's user and
    /// network namespaces (or enters fresh ones, `lo` up), enters a new mount namespace and
    /// mounts a fresh read-only sysfs on `/sys` so that it shows this network namespace.
    /// bwrap then binds that `/sys` into the sandbox and shares the network namespace.
    ///
    /// Why not `bwrap --unshare-net`: bwrap cannot mount sysfs, so a sandbox made that way
    /// either shows the *host's* interfaces under `/sys/class/net` (sysfs shows the network
    /// namespace of whoever mounted it) or no `/sys` at all.
    fn enter(&self) -> std::io::Result<()> {
        // SAFETY: system calls on valid, NUL-terminated paths, prepared buffers and
        // descriptors the parent holds open.
        unsafe {
            match self.join {
                // The sandbox's own namespaces: the user namespace first (it owns the
                // network namespace; its creator's uid holds every capability in it).
                Some((user, net)) => {
                    check(libc::setns(user, libc::CLONE_NEWUSER))?;
                    check(libc::setns(net, libc::CLONE_NEWNET))?;
                }
                None => self.fresh_user_and_net()?,
            }
            check(libc::unshare(libc::CLONE_NEWNS))?;
            // Nothing mounted here may reach the host's mount namespace.
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
            if libc::mount(
                c"sysfs".as_ptr(),
                c"/sys".as_ptr(),
                c"sysfs".as_ptr(),
                flags,
                std::ptr::null(),
            ) != 0
            {
                // The kernel refuses a new sysfs where the host's is partly hidden (in
                // some containers): then an empty /sys rather than the host's interfaces.
                check(libc::mount(
                    c"tmpfs".as_ptr(),
                    c"/sys".as_ptr(),
                    c"tmpfs".as_ptr(),
                    flags,
                    std::ptr::null(),
                ))?;
            }
            Ok(())
        }
    }
}

fn check(result: libc::c_int) -> std::io::Result<()> {
    if result == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Writes `bytes` to `path` with raw system calls (async-signal-safe).
unsafe fn write_file(path: &CStr, bytes: &[u8]) -> std::io::Result<()> {
    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
    let result = if written == bytes.len() as isize {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    };
    libc::close(fd);
    result
}

/// Brings up `lo` in the current network namespace (a new one has it down).
unsafe fn loopback_up() -> std::io::Result<()> {
    let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut request: libc::ifreq = std::mem::zeroed();
    request.ifr_name[0] = b'l' as libc::c_char;
    request.ifr_name[1] = b'o' as libc::c_char;
    let mut result = check(libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut request));
    if result.is_ok() {
        request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        result = check(libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &request));
    }
    libc::close(fd);
    result
}

type SpawnRequest = (Command, SyncSender<std::io::Result<Child>>);

/// Starts `command` on a thread that lives as long as the process.
///
/// `--die-with-parent` is the parent-death signal, and Linux sends it when the *thread*
/// that forked the child ends, not the process. The host calls `spawn` from threads that
/// may end while the sandboxed process still runs; forking from this one thread means the
/// signal comes only when stet itself is gone.
pub fn spawn_from_keeper(command: Command) -> std::io::Result<Child> {
    static KEEPER: OnceLock<Mutex<SyncSender<SpawnRequest>>> = OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (tx, rx) = sync_channel::<SpawnRequest>(0);
        std::thread::Builder::new()
            .name("stet-bwrap-spawner".into())
            .spawn(move || {
                for (mut command, answer) in rx {
                    let _ = answer.send(command.spawn());
                }
            })
            .expect("start the bwrap spawner thread");
        Mutex::new(tx)
    });
    let (answer, child) = sync_channel(1);
    keeper
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send((command, answer))
        .map_err(|_| std::io::Error::other("the bwrap spawner thread is gone"))?;
    child
        .recv()
        .map_err(|_| std::io::Error::other("the bwrap spawner thread is gone"))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::MountRecord;

    fn record(network: &str) -> Record {
        Record {
            id: "bw-0123456789abcdef".into(),
            image: "host".into(),
            mounts: vec![
                MountRecord {
                    source: "/src/tools".into(),
                    target: "/lane/tools".into(),
                    writable: false,
                },
                MountRecord {
                    source: "/src/lane".into(),
                    target: "/lane".into(),
                    writable: true,
                },
            ],
            env: vec![],
            workdir: "/lane".into(),
            network: network.into(),
            user: (1000, 1001),
            labels: vec![],
            created: 0,
        }
    }

    #[test]
    fn arguments_drop_everything_and_mount_parents_first() {
        let record = record("none");
        let env = vec![("PATH".to_string(), "/usr/bin".to_string())];
        let argv = vec!["sh".to_string(), "-c".to_string(), "echo hi".to_string()];
        let launch = Launch {
            record: &record,
            image: &Image::Host,
            tmp: Some(Path::new("/state/bw-1/tmp")),
            argv: &argv,
            env: &env,
            workdir: "/lane",
            netns: None,
        };
        let args = launch.args().join(" ");
        for needed in [
            "--unshare-user --uid 1000 --gid 1001 --unshare-pid",
            "--die-with-parent --new-session --cap-drop ALL --clearenv --setenv PATH /usr/bin",
            "--bind /state/bw-1/tmp /tmp --bind /src/lane /lane --ro-bind /src/tools /lane/tools",
            "--remount-ro / --chdir /lane -- sh -c echo hi",
        ] {
            assert!(args.contains(needed), "{needed:?} missing from {args}");
        }
        assert!(!args.contains("--unshare-net"), "{args}");
        assert!(args.ends_with("-- sh -c echo hi"), "{args}");
    }

    #[test]
    fn bwrap_is_found_on_path_or_where_configured() {
        let missing = find(Some(Path::new("/nonexistent/bwrap"))).unwrap_err();
        assert!(missing.contains("not an executable"), "{missing}");
    }
}
