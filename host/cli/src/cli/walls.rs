//! `stet walls`: prove the walls around the agent, as a drive does before its first move.

use super::error::{CliError, Exit};
use crate::harness;
use crate::printer::Printer;
use crate::settings::Settings;
use crate::walls;

use super::WallsArgs;

pub fn run(settings: &Settings, args: &WallsArgs, printer: Printer) -> Result<Exit, CliError> {
    let (harness, runtime) = harness::open_with_runtime(settings)?;
    for line in harness.selection.lines() {
        printer.detail(&line);
    }
    let mode = if args.keep_settings {
        walls::SettingsMode::AsTheyAre
    } else {
        walls::SettingsMode::Rewrite
    };
    // Kept in the repository it is run in, when it is run in one (`stet board` shows it).
    let repo = super::queue::repo().ok();
    let proof = walls::prove(
        settings,
        &harness,
        &runtime,
        mode,
        args.log.as_deref(),
        repo.as_deref(),
    )?;
    if args.json {
        printer.json(&proof);
    } else {
        let mut text = Vec::new();
        walls::print(&proof, &mut text);
        printer.out(String::from_utf8_lossy(&text).trim_end());
    }
    Ok(if proof.held() {
        Exit::Success
    } else {
        Exit::Unusable
    })
}
