//! Starting and stopping a drive from the board.
//!
//! `GET /drive` asks the cap, the lanes and the rounds; `POST /drive` starts the very
//! `stet drive` a person would (this binary, the board's `--plugins-dir`s and remote, in
//! the repository), in a process group of its own — the board's Ctrl-C does not reach it,
//! and it outlives the board — with its output in `.git/stet/board/drive-N.log`, and
//! `--consent-via`: after proving the walls it writes its consent (the CLI's own facts,
//! `drive::Consent`) and waits for the answer. `GET /drive/N` shows that consent with
//! Drive / Don't drive (each a POST that answers the drive's FIFO), then the drive's state
//! and its log's end, with Stop (the first SIGINT: it stops after the calls in flight) and
//! then Kill (the second), as the drive's signals do.
//!
//! The drives started are kept in memory, at most [`KEPT`] (the oldest that ended goes
//! first): a board running for days does not grow with each drive it started.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use axum::extract::{Path as UrlPath, State};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use serde::Deserialize;

use super::{render, Chrome, PageError};
use crate::board::auth::{form_token_ok, Session};
use crate::board::Shared;
use crate::drive::Consent;

/// Drives kept on the page.
pub const KEPT: usize = 16;
/// The log's last lines shown.
const LOG_LINES: usize = 30;

/// A drive this board started.
#[derive(Clone)]
pub struct Started {
    /// Its number on the page (when it was started, in milliseconds).
    pub n: String,
    pub pid: u32,
    pub cap: usize,
    pub jobs: usize,
    pub rounds: u32,
    pub started_unix: i64,
    pub consent: PathBuf,
    pub log: PathBuf,
    /// The person's answer, once given.
    pub answered: Option<bool>,
    /// Stop signals sent so far.
    pub stops: u8,
    /// How it ended, once it did: its exit code, or the signal that ended it.
    pub ended: Arc<Mutex<Option<String>>>,
}

impl Started {
    fn ended(&self) -> Option<String> {
        self.ended.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The drives started by this board process.
static STARTED: Mutex<VecDeque<Started>> = Mutex::new(VecDeque::new());

fn kept() -> std::sync::MutexGuard<'static, VecDeque<Started>> {
    STARTED.lock().unwrap_or_else(|p| p.into_inner())
}

fn find(n: &str) -> Result<Started, PageError> {
    kept().iter().find(|s| s.n == n).cloned().ok_or_else(|| {
        PageError::not_found(format!(
            "this board started no drive {n:?} (or no longer keeps it): see /drive"
        ))
    })
}

fn update(n: &str, f: impl FnOnce(&mut Started)) {
    if let Some(s) = kept().iter_mut().find(|s| s.n == n) {
        f(s)
    }
}

/// Where the board keeps what its drives write.
fn board_dir(repo: &Path) -> PathBuf {
    crate::receipts::git_dir(repo).join("stet/board")
}

#[derive(askama::Template)]
#[template(path = "board/drive.html")]
pub struct DrivePage {
    pub chrome: Chrome,
    pub drives: Vec<(Started, Option<String>)>,
    pub jobs_max: usize,
}

/// `GET /drive`: the form, and the drives started from here.
pub async fn form(
    State(board): State<Shared>,
    Extension(session): Extension<Session>,
) -> Result<Html<String>, PageError> {
    let drives = kept()
        .iter()
        .rev()
        .map(|s| (s.clone(), s.ended()))
        .collect();
    render(&DrivePage {
        chrome: Chrome::of(&board, &session, "live"),
        drives,
        jobs_max: crate::config::MAX_JOBS,
    })
}

#[derive(Debug, Deserialize)]
pub struct StartForm {
    #[serde(default)]
    pub csrf: String,
    #[serde(default)]
    pub cap: String,
    #[serde(default)]
    pub jobs: String,
    #[serde(default)]
    pub rounds: String,
}

fn number<T: std::str::FromStr + PartialOrd + std::fmt::Display>(
    name: &str,
    given: &str,
    least: T,
    most: T,
) -> Result<T, PageError> {
    match given.trim().parse::<T>() {
        Ok(n) if n >= least && n <= most => Ok(n),
        _ => Err(PageError::bad_request(format!(
            "{name} must be a whole number from {least} to {most} (it was {given:?}): go back and correct it"
        ))),
    }
}

/// `POST /drive`: starts `stet drive … --consent-via`, and leads to its page.
pub async fn start(
    State(board): State<Shared>,
    Extension(session): Extension<Session>,
    Form(form): Form<StartForm>,
) -> Result<Response, PageError> {
    if !form_token_ok(&session, &form.csrf) {
        return Err(PageError::forbidden(
            "the form's token is not this session's: reload the page and try again",
        ));
    }
    let cap = number("the cap", &form.cap, 1usize, 100_000)?;
    let jobs = number("the lanes", &form.jobs, 1usize, crate::config::MAX_JOBS)?;
    let rounds = number("the rounds", &form.rounds, 1u32, 100)?;
    let board2 = board.clone();
    let spawned = tokio::task::spawn_blocking(move || spawn(&board2, cap, jobs, rounds))
        .await
        .map_err(|e| PageError::internal(format!("the drive could not be started: {e}")))?
        .map_err(|e| match e {
            NotStarted::Pending(n) => PageError::bad_request(format!(
                "a drive started here is still proving its walls or waiting for your answer: \
                 answer it first at /drive/{n}"
            )),
            NotStarted::Failed(e) => {
                PageError::internal(format!("the drive could not be started: {e}"))
            }
        })?;
    Ok(Redirect::to(&format!("/drive/{}", spawned.n)).into_response())
}

/// Why a drive was not started.
enum NotStarted {
    /// One this board started is still proving its walls or waiting for its answer: a
    /// second form sent (a double click) would only start a second drive to ask.
    Pending(String),
    Failed(std::io::Error),
}

impl From<std::io::Error> for NotStarted {
    fn from(e: std::io::Error) -> NotStarted {
        NotStarted::Failed(e)
    }
}

/// Starts the drive (blocking) and keeps it; refuses while one started here is unanswered.
fn spawn(board: &Shared, cap: usize, jobs: usize, rounds: u32) -> Result<Started, NotStarted> {
    use std::os::unix::process::CommandExt;
    // Held from the look to the keeping: two forms sent at once start one drive.
    let mut all = kept();
    if let Some(pending) = all
        .iter()
        .find(|s| s.answered.is_none() && s.ended().is_none())
    {
        return Err(NotStarted::Pending(pending.n.clone()));
    }
    let repo = &board.options.repo;
    let dir = board_dir(repo);
    std::fs::create_dir_all(&dir)?;
    // Unique within this board however fast forms come (and across boards, by the time).
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = format!(
        "{}-{}",
        crate::call::now_ms(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    );
    let consent = dir.join(format!("drive-{n}.consent.json"));
    let log = dir.join(format!("drive-{n}.log"));
    let out = std::fs::File::create(&log)?;
    let exe = std::env::current_exe()?;
    let mut command = std::process::Command::new(exe);
    for plugins in &board.options.plugins_dirs {
        command.arg("--plugins-dir").arg(plugins);
    }
    command
        .args(["drive", "--cap", &cap.to_string()])
        .args(["--jobs", &jobs.to_string()])
        .args(["--rounds", &rounds.to_string()])
        .args(["--remote", &board.options.remote])
        .arg("--consent-via")
        .arg(&consent)
        .current_dir(repo)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        // A group of its own: the Ctrl-C that stops the board is not the drive's.
        .process_group(0);
    let mut child = command.spawn()?;
    let ended = Arc::new(Mutex::new(None));
    let started = Started {
        n,
        pid: child.id(),
        cap,
        jobs,
        rounds,
        started_unix: crate::board::model::now_unix(),
        consent,
        log,
        answered: None,
        stops: 0,
        ended: ended.clone(),
    };
    // Reaped when it ends (else it would stay a zombie, alive to a signal).
    std::thread::spawn(move || {
        let said = match child.wait() {
            Ok(status) => match (
                status.code(),
                std::os::unix::process::ExitStatusExt::signal(&status),
            ) {
                (Some(code), _) => format!("exit code {code}"),
                (None, Some(signal)) => {
                    format!("ended by {}", crate::receipts::signal_name(signal))
                }
                _ => status.to_string(),
            },
            Err(e) => format!("could not be waited for: {e}"),
        };
        *ended.lock().unwrap_or_else(|p| p.into_inner()) = Some(said);
    });
    if all.len() >= KEPT {
        if let Some(at) = all.iter().position(|s| s.ended().is_some()) {
            all.remove(at);
        } else {
            all.pop_front();
        }
    }
    all.push_back(started.clone());
    Ok(started)
}

/// What a drive's page shows of it now.
pub enum Now {
    /// Proving the walls: no consent written yet.
    Starting,
    /// Its consent, waiting for the answer.
    Asking(Box<Consent>),
    /// Driving (or told not to, and ending).
    Running,
    /// Ended: how.
    Ended(String),
}

#[derive(askama::Template)]
#[template(path = "board/drive_one.html")]
pub struct OnePage {
    pub chrome: Chrome,
    pub drive: Started,
    pub now: Now,
    pub log: Vec<String>,
    pub plugins_dirs: Vec<String>,
}

impl OnePage {
    /// Seconds between reloads while it changes by itself; none when it waits for the
    /// person or is over.
    pub fn reload(&self) -> Option<u32> {
        match self.now {
            Now::Starting => Some(1),
            Now::Running => Some(2),
            _ => None,
        }
    }
}

/// `GET /drive/N`.
pub async fn one(
    State(board): State<Shared>,
    Extension(session): Extension<Session>,
    UrlPath(n): UrlPath<String>,
) -> Result<Html<String>, PageError> {
    let drive = find(&n)?;
    let (now, log) = {
        let drive = drive.clone();
        tokio::task::spawn_blocking(move || {
            let log = log_tail(&drive.log);
            let now = match drive.ended() {
                Some(how) => Now::Ended(how),
                None if drive.answered.is_some() => Now::Running,
                None => match read_consent(&drive.consent) {
                    Some(consent) => Now::Asking(Box::new(consent)),
                    None => Now::Starting,
                },
            };
            (now, log)
        })
        .await
        .map_err(|e| PageError::internal(format!("the drive's page could not be read: {e}")))?
    };
    render(&OnePage {
        chrome: Chrome::of(&board, &session, "live"),
        drive,
        now,
        log,
        plugins_dirs: board
            .options
            .plugins_dirs
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
    })
}

fn read_consent(path: &Path) -> Option<Consent> {
    let bytes = crate::files::read_untrusted(path, 64 * 1024).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn log_tail(path: &Path) -> Vec<String> {
    // Its end, however long it grew.
    let text = crate::files::tail_untrusted(path, 256 * 1024).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_LINES)..]
        .iter()
        .map(|l| crate::text::inert(l).into_owned())
        .collect()
}

#[derive(Debug, Deserialize)]
pub struct AnswerForm {
    #[serde(default)]
    pub csrf: String,
    #[serde(default)]
    pub answer: String,
}

/// `POST /drive/N/consent`: the person's answer, to the drive's FIFO.
pub async fn consent(
    Extension(session): Extension<Session>,
    UrlPath(n): UrlPath<String>,
    Form(form): Form<AnswerForm>,
) -> Result<Response, PageError> {
    if !form_token_ok(&session, &form.csrf) {
        return Err(PageError::forbidden(
            "the form's token is not this session's: reload the page and try again",
        ));
    }
    let yes = match form.answer.as_str() {
        "drive" => true,
        "no" => false,
        other => {
            return Err(PageError::bad_request(format!(
                "the answer is `drive` or `no`, not {other:?}"
            )))
        }
    };
    let drive = find(&n)?;
    if drive.answered.is_some() {
        return Err(PageError::bad_request(
            "this drive was answered already: its page says what it does",
        ));
    }
    let path = drive.consent.clone();
    tokio::task::spawn_blocking(move || crate::drive::consent::answer(&path, yes))
        .await
        .map_err(|e| PageError::internal(format!("the answer could not be given: {e}")))?
        .map_err(|e| {
            PageError::bad_request(format!(
                "the drive no longer waits for an answer ({e}): its page says how it ended"
            ))
        })?;
    update(&n, |s| s.answered = Some(yes));
    Ok(Redirect::to(&format!("/drive/{n}")).into_response())
}

#[derive(Debug, Deserialize)]
pub struct StopForm {
    #[serde(default)]
    pub csrf: String,
}

/// `POST /drive/N/stop`: the first a stop after the calls in flight, the next a kill — a
/// SIGINT each, as the person's Ctrl-C.
pub async fn stop(
    Extension(session): Extension<Session>,
    UrlPath(n): UrlPath<String>,
    Form(form): Form<StopForm>,
) -> Result<Response, PageError> {
    if !form_token_ok(&session, &form.csrf) {
        return Err(PageError::forbidden(
            "the form's token is not this session's: reload the page and try again",
        ));
    }
    let drive = find(&n)?;
    if drive.ended().is_some() {
        return Ok(Redirect::to(&format!("/drive/{n}")).into_response());
    }
    // Not yet reaped (ended is set only after the wait): the pid is still this drive's.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(drive.pid as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .map_err(|e| PageError::internal(format!("the drive could not be signalled: {e}")))?;
    update(&n, |s| s.stops = s.stops.saturating_add(1));
    Ok(Redirect::to(&format!("/drive/{n}")).into_response())
}
