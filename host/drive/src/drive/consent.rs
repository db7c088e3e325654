//! The drive's consent: what it will do, said once before anything is reserved, and the
//! person's answer.
//!
//! [`Consent`] holds the facts (made by [`Consent::of`], after the walls are proven); the
//! terminal gets them as lines ([`Consent::lines`]) and asks `drive? [y/N]`. A drive
//! started from `stet board` is given `--consent-via PATH` instead: it writes the same
//! facts as JSON to PATH (a temporary file and a rename) and waits for the answer on the
//! FIFO `PATH.answer` ([`answer_path`]), which the board's page writes `yes` or `no` to
//! — a wait on the FIFO itself, no sleep; with no answer in [`PATIENCE`] it does not drive.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Concept, Error};

/// What the drive says before it asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Consent {
    /// Items the drive means to take: the cap, or fewer when fewer are eligible.
    pub items: usize,
    pub eligible: usize,
    /// Open items held by live reservations of other drives.
    pub held_elsewhere: usize,
    /// Walls proven, all held.
    pub walls: usize,
    /// How long the proof took, as said (`12.3 s`).
    pub proven_in: String,
    /// The cost estimate from past receipts, in words.
    pub estimate: String,
    /// The remote's base the lanes branch from, and its commit.
    pub base: String,
    pub base_commit: String,
    /// Lanes at once.
    pub jobs: usize,
    /// The runtime and why it was selected.
    pub runtime: String,
    pub runtime_why: String,
    /// The runtime's isolation class in its probe's words, when it states one. (Absent
    /// from a consent an older stet wrote.)
    #[serde(default)]
    pub isolation: Option<String>,
    /// The harness and why it was selected.
    pub harness: String,
    pub harness_why: String,
    /// The model API's route, and the sandbox's network.
    pub route: String,
    pub network: String,
    /// What runs after a lane is pushed, in words; none: nothing.
    pub land: Option<String>,
    /// The limits of each sandbox, and what of them the runtime does not enforce.
    pub limits: String,
}

impl Consent {
    /// The runtime's isolation class as the terminal and the board both say it.
    pub fn isolation_said(&self) -> String {
        crate::sandbox::isolation_said(self.isolation.as_deref())
    }

    /// The consent as the terminal shows it, a line each.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "stet drive: {} of {} eligible{}",
            crate::printer::count(self.items, "item", "items"),
            self.eligible,
            if self.held_elsewhere == 0 {
                String::new()
            } else {
                format!(" ({} held by other drives)", self.held_elsewhere)
            }
        )];
        lines.push(format!(
            "  walls:    all {} held, proven in {}",
            self.walls, self.proven_in
        ));
        lines.push(format!("  estimate: {}", self.estimate));
        lines.push(format!(
            "  base:     {} at {}",
            self.base,
            self.base_commit.get(..12).unwrap_or(&self.base_commit)
        ));
        if self.jobs > 1 {
            lines.push(format!(
                "  lanes:    {} at once, each with its own reservation, lane and sandboxes",
                self.jobs
            ));
        }
        lines.push(format!(
            "  runtime:  {} — {}",
            self.runtime, self.runtime_why
        ));
        lines.push(format!("            isolation: {}", self.isolation_said()));
        lines.push(format!(
            "  harness:  {} — {}",
            self.harness, self.harness_why
        ));
        lines.push(format!(
            "  route:    {}; network {}",
            self.route, self.network
        ));
        if let Some(land) = &self.land {
            lines.push(format!("  land:     {land}"));
        }
        lines.push(format!("  limits:   {}", self.limits));
        lines
    }
}

/// How long a drive waits for an answer through `--consent-via`.
pub const PATIENCE: Duration = Duration::from_secs(30 * 60);

/// The FIFO the answer to the consent at `path` is written to.
pub fn answer_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".answer");
    PathBuf::from(name)
}

/// Writes `consent` to `path` and waits for the answer on its FIFO: whether it is yes.
pub fn ask_via(path: &Path, consent: &Consent) -> Result<bool, Error> {
    use std::io::Read;
    use std::os::fd::AsFd;
    let failed = |what: &str, e: &dyn std::fmt::Display| {
        Concept::Drive.failure(format!("cannot {what} for --consent-via: {e}"))
    };
    let fifo = answer_path(path);
    let _ = std::fs::remove_file(&fifo);
    nix::unistd::mkfifo(
        &fifo,
        nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
    )
    .map_err(|e| failed(&format!("make the FIFO {}", fifo.display()), &e))?;
    // Opened for reading and writing: the open does not wait for a writer, and the
    // answerer's open (non-blocking, for writing) finds a reader at once.
    let mut answer = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .map_err(|e| failed("open the answer's FIFO", &e))?;
    let json = serde_json::to_vec_pretty(consent).map_err(|e| failed("write the consent", &e))?;
    crate::files::write_durably(path, &json).map_err(|e| failed("write the consent", &e))?;
    let mut fds = [nix::poll::PollFd::new(
        answer.as_fd(),
        nix::poll::PollFlags::POLLIN,
    )];
    let timeout = nix::poll::PollTimeout::try_from(PATIENCE.as_millis() as i32)
        .unwrap_or(nix::poll::PollTimeout::MAX);
    let ready = loop {
        match nix::poll::poll(&mut fds, timeout) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => break other.map_err(|e| failed("wait for the answer", &e))?,
        }
    };
    let mut said = [0u8; 16];
    let n = if ready > 0 {
        answer.read(&mut said).unwrap_or(0)
    } else {
        0
    };
    let _ = std::fs::remove_file(&fifo);
    // The first line alone: two answers written at once (two pages) read as one yes.
    Ok(matches!(
        String::from_utf8_lossy(&said[..n])
            .lines()
            .next()
            .unwrap_or_default()
            .trim(),
        "y" | "yes"
    ))
}

/// Answers the drive waiting on the consent at `path`: false when none waits (it ended,
/// or never asked).
pub fn answer(path: &Path, yes: bool) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let fifo = answer_path(path);
    let meta = std::fs::symlink_metadata(&fifo)?;
    if !std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()) {
        return Err(std::io::Error::other("no drive waits for an answer"));
    }
    // Non-blocking: with no reader (the drive is gone) the open fails at once (ENXIO).
    let mut to = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(&fifo)?;
    to.write_all(if yes { b"yes\n" } else { b"no\n" })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn consent() -> Consent {
        Consent {
            items: 2,
            eligible: 3,
            held_elsewhere: 1,
            walls: 9,
            proven_in: "1.5 s".into(),
            estimate: "2 items; no past receipts to estimate cost from".into(),
            base: "origin/main".into(),
            base_commit: "0123456789abcdef".into(),
            jobs: 2,
            runtime: "docker".into(),
            runtime_why: "preferred".into(),
            isolation: Some("a virtual machine per sandbox".into()),
            harness: "command".into(),
            harness_why: "preferred".into(),
            route: "direct".into(),
            network: "none".into(),
            land: None,
            limits: "256 processes".into(),
        }
    }

    #[test]
    fn the_consent_reads_as_the_terminal_shows_it() {
        let lines = consent().lines();
        assert_eq!(
            lines[0],
            "stet drive: 2 items of 3 eligible (1 held by other drives)"
        );
        assert_eq!(lines[3], "  base:     origin/main at 0123456789ab");
        assert_eq!(
            lines[6],
            "            isolation: a virtual machine per sandbox (the runtime's own words)"
        );
        assert_eq!(lines.last().unwrap(), "  limits:   256 processes");
        let unsaid = Consent {
            isolation: None,
            ..consent()
        };
        assert_eq!(
            unsaid.lines()[6],
            "            isolation: not stated by the runtime's probe"
        );
    }

    #[test]
    fn an_answer_through_the_fifo_is_heard_and_none_waiting_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("consent.json");
        assert!(answer(&path, true).is_err(), "nobody asked");
        let asking = {
            let path = path.clone();
            std::thread::spawn(move || ask_via(&path, &consent()).unwrap())
        };
        // The consent is written once the FIFO has its reader: wait for it (an event the
        // asker makes), then answer.
        let answered = loop {
            if path.exists() {
                break answer(&path, true);
            }
            std::thread::yield_now();
        };
        answered.unwrap();
        assert!(asking.join().unwrap());
        let written: Consent = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(written, consent());
        assert!(!answer_path(&path).exists());
        assert!(answer(&path, true).is_err(), "nobody waits any more");
    }
}
