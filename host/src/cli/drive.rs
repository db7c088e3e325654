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
        yes: args.yes,
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
        land: settings.drive_land.clone(),
        dry_run: args.dry_run.then_some(if args.json {
            DryRun::Json
        } else {
            DryRun::Lines
        }),
    };
    Ok(drive::run(settings, &options, printer)?.into())
}
