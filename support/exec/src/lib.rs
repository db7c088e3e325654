//! Executables written so that running them never fails with `ETXTBSY`: for the hooks
//! stet's wall proof plants (a hook that failed to start would pass for one git did not
//! run) and for every test that writes a program and runs it.
//!
//! [`write_executable`] and [`copy_executable`] exist because of one race: a process writes
//! an executable (a stand-in agent, a fake CLI, a planted hook) and it is run, while another
//! thread of the same process forks a child. Between that fork and its exec, the child holds a copy of
//! every descriptor the parent had open — the new file's write descriptor included — and
//! `execve` of a file open for writing fails with `ETXTBSY` ("Text file busy"). Closing the
//! file first does not help: the child's copy lives until its exec. So the file is never
//! opened for writing by the test process at all: a child process (`install`, from
//! coreutils) writes it, sets its mode and exits before anyone runs it, and nothing forked
//! from the test process can hold it open.

use std::path::Path;
use std::process::Command;

/// Writes `contents` to `path` as an executable (mode 0755), through a child process, so
/// that running it right after never fails with `ETXTBSY`.
pub fn write_executable(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    // The bytes go to a plain file first (never executed: its write descriptor is harmless),
    // and `install` makes the executable from it.
    let mut staging = path.as_os_str().to_owned();
    staging.push(".staged-for-install");
    let staging = std::path::PathBuf::from(staging);
    std::fs::write(&staging, contents)?;
    let copied = copy_executable(&staging, path);
    let _ = std::fs::remove_file(&staging);
    copied
}

/// Copies the executable `from` to `to` (mode 0755) through a child process; see
/// [`write_executable`].
pub fn copy_executable(from: &Path, to: &Path) -> std::io::Result<()> {
    let status = Command::new("install")
        .arg("-m")
        .arg("755")
        .arg(from)
        .arg(to)
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "install -m 755 {} {} failed: {status}",
            from.display(),
            to.display()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_executable_runs_at_once_while_other_threads_fork() {
        let dir = std::env::temp_dir().join(format!("stet-test-support-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Threads that fork all the time, as a test binary's other tests do.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let forkers: Vec<_> = (0..2)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let _ = Command::new("true").status();
                    }
                })
            })
            .collect();
        for n in 0..50 {
            let path = dir.join(format!("script-{n}"));
            write_executable(&path, b"#!/bin/sh\necho ran\n").unwrap();
            let out = Command::new(&path).output().unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for f in forkers {
            f.join().unwrap();
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
