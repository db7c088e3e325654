//! `stet plugins install` and `stet plugins trust`: thin glue over
//! [`crate::plugins::install`].

use serde::Serialize;

use super::error::{CliError, Exit};
use crate::plugins::install;
use crate::printer::Printer;
use crate::settings::Settings;

use super::{InstallArgs, TrustArgs};

#[derive(Serialize)]
struct Report<'a> {
    name: &'a str,
    kind: &'a str,
    version: String,
    dir: String,
    library_sha256: &'a str,
    probe: &'a str,
}

pub fn install(
    settings: &Settings,
    args: &InstallArgs,
    printer: Printer,
) -> Result<Exit, CliError> {
    let installed = install::install(&settings.plugins, &args.path)?;
    let m = &installed.manifest;
    if args.json {
        printer.json(&Report {
            name: &m.name,
            kind: m.kind.as_str(),
            version: m.version.to_string(),
            dir: installed.dir.display().to_string(),
            library_sha256: &installed.sha256,
            probe: &installed.probe,
        });
    } else {
        printer.out(&format!(
            "installed {} {} ({}) into {}",
            m.name,
            m.version,
            m.kind.as_str(),
            installed.dir.display()
        ));
        printer.out(&format!("  sha256 {}", installed.sha256));
        printer.out(&format!("  probe: {}", installed.probe));
    }
    Ok(Exit::Success)
}

pub fn trust(settings: &Settings, args: &TrustArgs, printer: Printer) -> Result<Exit, CliError> {
    let entry = install::trust(&settings.plugins, &args.name)?;
    if args.json {
        #[derive(serde::Serialize)]
        struct Trusted<'a> {
            name: &'a str,
            version: String,
            library_sha256: &'a str,
        }
        printer.json(&Trusted {
            name: &entry.name,
            version: entry.version.to_string(),
            library_sha256: &entry.sha256,
        });
        return Ok(Exit::Success);
    }
    printer.out(&format!(
        "trusted {} {} as it is now: sha256 {}",
        entry.name, entry.version, entry.sha256
    ));
    Ok(Exit::Success)
}

pub fn uninstall(
    settings: &Settings,
    args: &TrustArgs,
    printer: Printer,
) -> Result<Exit, CliError> {
    let removed = install::uninstall(&settings.plugins, &args.name)?;
    if args.json {
        #[derive(serde::Serialize)]
        struct Removed<'a> {
            name: &'a str,
            version: String,
            dir: String,
        }
        printer.json(&Removed {
            name: &removed.name,
            version: removed.version.to_string(),
            dir: removed.dir.display().to_string(),
        });
        return Ok(Exit::Success);
    }
    printer.out(&format!(
        "removed {} {} from {} (and its entry in the lock)",
        removed.name,
        removed.version,
        removed.dir.display()
    ));
    Ok(Exit::Success)
}
