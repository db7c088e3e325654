//! `stet drive`: thin glue over [`crate::drive`].

use super::error::{CliError, Exit};
use crate::config::parse_duration;
use crate::drive::{self, DriveOptions, DryRun};
use crate::printer::Printer;
use crate::settings::Settings;

use super::DriveArgs;

pub fn run(settings: &Settings, args: &DriveArgs, printer: Printer) -> Result<Exit, CliError> {
    let lease =
        parse_duration(&args.lease).map_err(|why| CliError::usage(format!("--lease: {why}")))?;
    if args.rounds == 0 {
        return Err(CliError::usage("--rounds must be at least 1"));
    }
    let jobs = args
        .jobs
        .or(settings.drive_jobs)
        .unwrap_or(crate::config::DEFAULT_JOBS);
    if !(1..=crate::config::MAX_JOBS).contains(&jobs) {
        return Err(CliError::usage(format!(
            "--jobs {jobs}: a drive works between 1 and {} items at once",
            crate::config::MAX_JOBS
        ))
        .hint("pass --jobs 1 for one lane at a time, more to work items side by side"));
    }
    let options = DriveOptions {
        cap: args.cap,
        jobs,
        remote: args.remote.clone(),
        lease_secs: lease.as_secs().max(1) as i64,
        max_rounds: args.rounds,
        check: args.check.clone().or_else(|| settings.drive_check.clone()),
        wait_floor_secs: parse_duration(&args.wait_floor)
            .map_err(|why| CliError::usage(format!("--wait-floor: {why}")))?
            .as_secs()
            .max(1) as i64,
        outage_schedule_secs: args
            .outage_schedule
            .split(',')
            .map(|d| parse_duration(d.trim()).map(|d| d.as_secs().max(1) as i64))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|why| CliError::usage(format!("--outage-schedule: {why}")))?,
        outage_limit_secs: parse_duration(&args.outage_limit)
            .map_err(|why| CliError::usage(format!("--outage-limit: {why}")))?
            .as_secs() as i64,
        pace_secs: match args.pace.trim() {
            "0" | "0s" => 0,
            pace => parse_duration(pace)
                .map_err(|why| CliError::usage(format!("--pace: {why}")))?
                .as_secs() as i64,
        },
        call_limit_secs: parse_duration(&args.call_limit)
            .map_err(|why| CliError::usage(format!("--call-limit: {why}")))?
            .as_secs()
            .max(1),
        follow: args.follow,
        land: settings
            .drive_land
            .as_deref()
            .map(|land| crate::land::How::of(land, settings.drive_pull_request_repo.as_deref())),
        dry_run: args.dry_run.then_some(if args.json {
            DryRun::Json
        } else {
            DryRun::Lines
        }),
    };
    let ask = |consent: &drive::Consent| ask_consent(args, consent);
    if !args.json || args.dry_run {
        return Ok(drive::run(settings, &options, &ask, printer)?.into());
    }
    // --json: the drive as it runs without it (its lines on stderr), then how it ended and
    // every item as it now is, in the one item shape.
    let ended = drive::run(settings, &options, &ask, printer.lines_as_notes())?;
    outcome_json(&ended, &args.remote, printer)?;
    Ok(ended.into())
}

/// The person's consent to `consent` (whose lines the drive has printed): through the
/// board's file when the board started the drive (`--consent-via`), given by `--yes`, or
/// asked on the terminal — refused, naming what to do, when there is none.
fn ask_consent(args: &DriveArgs, consent: &drive::Consent) -> Result<bool, crate::error::Error> {
    use std::io::{IsTerminal, Write};
    if let Some(via) = &args.consent_via {
        return drive::consent::ask_via(via, consent);
    }
    if args.yes {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        return Err(crate::error::Concept::Drive
            .usage("no consent: there is no terminal to ask, and no --yes")
            .hint("pass --yes to drive from a script"));
    }
    eprint!("drive? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().read_line(&mut answer);
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// How a drive ended, and the queue's items as the remote now says they are.
fn outcome_json(ended: &drive::Ended, remote: &str, printer: Printer) -> Result<(), CliError> {
    #[derive(serde::Serialize)]
    struct Outcome<'a> {
        /// `done`, `gave-up`, `unusable` or `stopped`.
        ended: &'static str,
        /// The signal that stopped it, when one did.
        signal: Option<i32>,
        items: &'a [crate::story::Row],
    }
    let (word, signal) = match ended {
        drive::Ended::Done => ("done", None),
        drive::Ended::GaveUp => ("gave-up", None),
        drive::Ended::Unusable => ("unusable", None),
        drive::Ended::Stopped(n) => ("stopped", Some(*n)),
    };
    let repo = super::queue::repo()?;
    let (items, _) = crate::queue::read(&repo);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (rows, note) = crate::story::states(&repo, &items, remote, now)?;
    if let Some(note) = note {
        printer.warn(&note);
    }
    printer.json(&Outcome {
        ended: word,
        signal,
        items: &rows,
    });
    Ok(())
}
