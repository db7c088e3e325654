//! `stet walls`: prove the walls around the agent, as a drive does before its first move.

use crate::error::{CliError, Exit};
use crate::harness;
use crate::printer::Printer;
use crate::settings::Settings;

use super::WallsArgs;

pub fn run(settings: &Settings, args: &WallsArgs, printer: Printer) -> Result<Exit, CliError> {
    let harness = harness::open_harness(settings)?;
    for line in harness.selection.lines() {
        printer.detail(&line);
    }
    let mode = if args.keep_settings {
        harness::SettingsMode::AsTheyAre
    } else {
        harness::SettingsMode::Rewrite
    };
    let proof = harness::prove(settings, &harness, mode)?;
    if let Some(log) = &args.log {
        std::fs::write(log, &proof.output)
            .map_err(|e| CliError::failure(format!("cannot write {}: {e}", log.display())))?;
    }
    if args.json {
        printer.json(&proof);
    } else {
        let mut text = Vec::new();
        harness::print(&proof, &mut text);
        printer.out(String::from_utf8_lossy(&text).trim_end());
    }
    Ok(if proof.held() {
        Exit::Success
    } else {
        Exit::Unusable
    })
}
