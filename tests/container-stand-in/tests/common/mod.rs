//! A scratch installation of the stand-in: the built binary copied into a temporary
//! directory with its `stand-in.toml` beside it, run with an environment built from scratch
//! (as stet's plugin runs it), and every Docker object it made removed on drop.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const LANE_IMAGE: &str = "stet-lane:1";

pub struct StandIn {
    pub dir: tempfile::TempDir,
    pub exe: PathBuf,
}

fn docker() -> String {
    for c in ["/usr/local/bin/docker", "/usr/bin/docker"] {
        if Path::new(c).is_file() {
            return c.into();
        }
    }
    "docker".into()
}

impl StandIn {
    pub fn new(settings: &str) -> StandIn {
        let dir = tempfile::tempdir().expect("tempdir");
        let exe = dir.path().join("container");
        stet_exec_support::copy_executable(env!("CARGO_BIN_EXE_container").as_ref(), &exe)
            .expect("copy binary");
        std::fs::write(dir.path().join("stand-in.toml"), settings).expect("settings");
        StandIn { dir, exe }
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub fn set_settings(&self, settings: &str) {
        std::fs::write(self.dir.path().join("stand-in.toml"), settings).expect("settings");
    }

    /// The command, with PATH only (what the plugin gives it).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.exe);
        c.args(args)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run stand-in")
    }

    pub fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn stand-in")
    }

    /// `run -d` of the lane image idling, as the plugin does.
    pub fn sandbox(&self, name: &str, extra: &[&str]) -> Output {
        let mut args = vec!["run", "-d", "--name", name, "--progress", "none"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&[LANE_IMAGE, "sleep", "infinity"]);
        self.run(&args)
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let label = format!("label=stet.stand-in.state={}", self.state_dir().display());
        let ids = Command::new(docker())
            .args(["ps", "-aq", "--filter", &label])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let ids: Vec<&str> = ids.split_whitespace().collect();
        if !ids.is_empty() {
            let _ = Command::new(docker())
                .arg("rm")
                .arg("-f")
                .args(&ids)
                .output();
        }
        let vols = Command::new(docker())
            .args(["volume", "ls", "-q", "--filter", &label])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let vols: Vec<&str> = vols.split_whitespace().collect();
        if !vols.is_empty() {
            let _ = Command::new(docker())
                .args(["volume", "rm", "-f"])
                .args(&vols)
                .output();
        }
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
pub fn assert_ok(o: &Output) {
    assert!(
        o.status.success(),
        "expected success, got {:?}\nstdout: {}\nstderr: {}",
        o.status,
        stdout(o),
        stderr(o)
    );
}

/// Waits for a child up to `limit`; `None` if it is still running (then it is killed).
pub fn wait_for(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return Some(s);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
