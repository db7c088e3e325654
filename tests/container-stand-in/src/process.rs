//! Foreground processes (`run` without `-d`, `start -a`, `exec`): the Docker CLI runs as a
//! child in a process group of its own, its stdout and stderr are relayed through the
//! stand-in's own (so they stay separate, and close when the stand-in dies, as the real CLI's
//! pipes do), and signals sent to the stand-in go to the container process, as
//! `ProcessIO.handleProcess` does without a terminal: SIGINT, SIGTERM, SIGUSR1, SIGUSR2 and
//! SIGWINCH are forwarded, and the third SIGINT/SIGTERM makes the CLI exit 1 at once
//! (`SignalThreshold`). With `-t`, SIGINT/SIGTERM end the CLI with 128+N instead
//! (`Application.restoreCursorAtExit`), and nothing is forwarded.
//!
//! The init process is signalled with `docker kill --signal`. An exec'd process cannot be
//! signalled through Docker, so the stand-in finds it on the host: it is the new child of the
//! container's `containerd-shim` (found by its command line), and gets `kill(2)`.

use std::fs;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::docker::Docker;
use crate::errors::{cz, CliResult, Code};

/// Where forwarded signals go.
pub enum Target {
    /// The container's init process.
    Init {
        docker_bin: std::path::PathBuf,
        name: String,
    },
    /// A process started by `docker exec` in the container whose init has this host PID.
    Exec {
        init_pid: Option<i32>,
        argv: Vec<String>,
    },
}

const FORWARDED: [libc::c_int; 5] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGWINCH,
];

fn sigset(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: plain libc signal-set manipulation on a local.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in signals {
            libc::sigaddset(&mut set, *s);
        }
        set
    }
}

pub fn signal_name(sig: libc::c_int) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGWINCH => "SIGWINCH",
        libc::SIGKILL => "SIGKILL",
        _ => "SIGTERM",
    }
}

fn children_of(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    if let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(s) = fs::read_to_string(t.path().join("children")) {
                out.extend(s.split_whitespace().filter_map(|x| x.parse::<i32>().ok()));
            }
        }
    }
    out
}

fn ppid(pid: i32) -> Option<i32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    after.split_whitespace().nth(1)?.parse().ok()
}

fn cmdline(pid: i32) -> Vec<String> {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Finds the exec'd process: a child of the shim that was not there before.
struct ExecFinder {
    shim: Option<i32>,
    init_pid: Option<i32>,
    before: Vec<i32>,
    argv: Vec<String>,
    found: Mutex<Option<i32>>,
}

impl ExecFinder {
    fn new(init_pid: Option<i32>, argv: Vec<String>) -> ExecFinder {
        let shim = init_pid.and_then(ppid);
        let before = shim.map(children_of).unwrap_or_default();
        ExecFinder {
            shim,
            init_pid,
            before,
            argv,
            found: Mutex::new(None),
        }
    }

    fn candidates(&self) -> Vec<i32> {
        let Some(shim) = self.shim else {
            return vec![];
        };
        children_of(shim)
            .into_iter()
            .filter(|p| !self.before.contains(p) && Some(*p) != self.init_pid)
            .collect()
    }

    fn probe(&self) -> Option<i32> {
        if let Some(p) = *self.found.lock().expect("lock") {
            return Some(p);
        }
        let cands = self.candidates();
        let exact = cands.iter().copied().find(|p| cmdline(*p) == self.argv);
        let pick = exact.or_else(|| {
            let others: Vec<i32> = cands
                .iter()
                .copied()
                .filter(|p| {
                    let c = cmdline(*p);
                    !c.is_empty() && !c[0].contains("runc")
                })
                .collect();
            (others.len() == 1).then(|| others[0])
        });
        if let Some(p) = pick {
            *self.found.lock().expect("lock") = Some(p);
        }
        pick
    }

    fn wait_for(&self, limit: Duration) -> Option<i32> {
        let start = Instant::now();
        loop {
            if let Some(p) = self.probe() {
                return Some(p);
            }
            if start.elapsed() > limit || self.shim.is_none() {
                return None;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    fn signal(&self, sig: libc::c_int) {
        if let Some(pid) = self.wait_for(Duration::from_secs(2)) {
            if Some(pid).and_then(ppid) == self.shim {
                // SAFETY: sending a signal to a process we identified.
                unsafe {
                    libc::kill(pid, sig);
                }
            }
        }
    }
}

fn write_fd(fd: i32, mut data: &[u8]) {
    while !data.is_empty() {
        // SAFETY: writing our own standard descriptors.
        let w = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        if w <= 0 {
            return;
        }
        data = &data[w as usize..];
    }
}

const DOCKER_ERROR_PREFIXES: [&str; 2] = ["OCI runtime ", "Error response from daemon: "];

/// Relays one output stream to our descriptor `fd`, holding back what could still be a
/// Docker error message (Docker prints "OCI runtime exec failed: …" on stdout), so a missing
/// executable can be reported the way `container` reports it, not the way Docker does.
fn relay(mut from: impl Read, fd: i32, held_out: Arc<Mutex<Vec<u8>>>) {
    let mut held: Vec<u8> = Vec::new();
    let mut holding = true;
    let mut buf = [0u8; 8192];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if holding {
            held.extend_from_slice(&buf[..n]);
            let could_be = DOCKER_ERROR_PREFIXES.iter().any(|p| {
                let p = p.as_bytes();
                let k = p.len().min(held.len());
                held[..k] == p[..k]
            });
            if !could_be {
                holding = false;
                write_fd(fd, &held);
                held.clear();
            }
        } else {
            write_fd(fd, &buf[..n]);
        }
    }
    *held_out.lock().expect("lock") = held;
}

/// Runs a foreground Docker CLI command (`docker exec …`, `docker start -a …`) the way
/// `container` runs a process, and returns the exit status to pass through.
pub fn foreground(
    mut cmd: Command,
    target: Target,
    tty: bool,
    interactive: bool,
    executable: &str,
) -> CliResult<i32> {
    let blocked: Vec<libc::c_int> = if tty {
        vec![libc::SIGINT, libc::SIGTERM]
    } else {
        FORWARDED.to_vec()
    };
    let set = sigset(&blocked);
    // SAFETY: block the signals in this thread before any helper thread exists, so only the
    // dedicated signal thread receives them.
    unsafe {
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    let child_set = set;
    // SAFETY: pre_exec only calls async-signal-safe sigprocmask.
    unsafe {
        cmd.pre_exec(move || {
            libc::sigprocmask(libc::SIG_UNBLOCK, &child_set, std::ptr::null_mut());
            Ok(())
        });
    }
    if !tty {
        // Out of our process group: a Ctrl-C meant for us is ours to forward. With a
        // terminal, Docker must stay in the foreground group to read it.
        cmd.process_group(0);
    }
    cmd.stdin(if interactive {
        Stdio::inherit()
    } else {
        Stdio::null()
    });
    cmd.stdout(Stdio::piped());
    cmd.stderr(Stdio::piped());

    let finder = match &target {
        Target::Exec { init_pid, argv } if !tty => {
            Some(Arc::new(ExecFinder::new(*init_pid, argv.clone())))
        }
        _ => None,
    };

    let mut child = cmd.spawn().map_err(|e| {
        cz(
            Code::InternalError,
            format!("stand-in: cannot run docker: {e}"),
        )
    })?;
    let out = child.stdout.take().expect("stdout");
    let err = child.stderr.take().expect("stderr");
    let held_out = Arc::new(Mutex::new(Vec::new()));
    let held_err = Arc::new(Mutex::new(Vec::new()));
    let (h1, h2) = (held_out.clone(), held_err.clone());
    let t_out = thread::spawn(move || relay(out, 1, h1));
    let t_err = thread::spawn(move || relay(err, 2, h2));

    if let Some(f) = &finder {
        let f = f.clone();
        thread::spawn(move || {
            f.wait_for(Duration::from_secs(3));
        });
    }

    let init_target = match &target {
        Target::Init { docker_bin, name } => Some((docker_bin.clone(), name.clone())),
        _ => None,
    };
    let finder2 = finder.clone();
    thread::spawn(move || {
        let mut count = 0;
        loop {
            let mut sig: libc::c_int = 0;
            // SAFETY: waiting for signals blocked in every thread.
            let rc = unsafe { libc::sigwait(&set, &mut sig) };
            if rc != 0 {
                continue;
            }
            if tty {
                // The CLI's own SIGINT/SIGTERM handler: exit(128+N).
                // SAFETY: immediate process exit.
                unsafe { libc::_exit(128 + sig) };
            }
            if let Some((bin, name)) = &init_target {
                let _ = Docker { bin: bin.clone() }.output(&[
                    "kill".into(),
                    "--signal".into(),
                    signal_name(sig).into(),
                    name.clone(),
                ]);
            } else if let Some(f) = &finder2 {
                f.signal(sig);
            }
            if sig == libc::SIGINT || sig == libc::SIGTERM {
                count += 1;
                if count == 3 {
                    eprintln!("Received 3 SIGINT/SIGTERM's, forcefully exiting.");
                    // SAFETY: immediate process exit, as `Darwin.exit(1)`.
                    unsafe { libc::_exit(1) };
                }
            }
        }
    });

    let status = child
        .wait()
        .map_err(|e| cz(Code::InternalError, format!("stand-in: wait: {e}")))?;
    let _ = t_out.join();
    let _ = t_err.join();
    let held_out = held_out.lock().expect("lock").clone();
    let held_err = held_err.lock().expect("lock").clone();
    let code = match status.code() {
        Some(c) => c,
        None => {
            use std::os::unix::process::ExitStatusExt;
            128 + status.signal().unwrap_or(0)
        }
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&held_out),
        String::from_utf8_lossy(&held_err)
    );
    let missing = text.contains("executable file not found")
        || (text.contains("exec:") && text.contains("no such file or directory"));
    if missing && code != 0 {
        return Err(cz(
            Code::InternalError,
            format!("failed to find target executable {executable}"),
        ));
    }
    write_fd(1, &held_out);
    write_fd(2, &held_err);
    Ok(code)
}
