//! `stet plugins list`: what is installed, from manifests alone.

use serde::Serialize;

use super::error::{CliError, Exit};
use crate::plugins::discovery::{self, DirSource, Found, SearchDir, Status};
use crate::plugins::version::host_api;
use crate::printer::Printer;
use crate::settings::Settings;

use super::ListArgs;

#[derive(Serialize)]
struct Listing<'a> {
    host_api: String,
    search_path: &'a [SearchDir],
    plugins: Vec<Entry>,
}

#[derive(Serialize)]
struct Entry {
    name: String,
    kind: Option<&'static str>,
    version: Option<String>,
    api: Option<String>,
    status: &'static str,
    detail: Option<String>,
    dir: String,
    found_in: DirSource,
    description: Option<String>,
    capabilities: Vec<String>,
}

pub fn run(settings: &Settings, args: &ListArgs, printer: Printer) -> Result<Exit, CliError> {
    let host = host_api();
    let found = discovery::discover(&settings.plugins.search_path, &host);
    let entries: Vec<Entry> = found.iter().map(|f| entry(f, &host)).collect();
    if args.json {
        let none = entries.is_empty();
        printer.json(&Listing {
            host_api: host.to_string(),
            search_path: &settings.plugins.search_path,
            plugins: entries,
        });
        return Ok(if none { Exit::Unusable } else { Exit::Success });
    }
    if entries.is_empty() {
        return Err(discovery::none_found(&settings.plugins.search_path).into());
    }
    print_table(printer, &entries);
    printer.out("");
    printer.out("searched, in order:");
    for dir in &settings.plugins.search_path {
        printer.out(&format!("  {} ({})", dir.path.display(), dir.source.word()));
    }
    Ok(Exit::Success)
}

fn entry(found: &Found, host: &semver::Version) -> Entry {
    let manifest = found.manifest.as_ref();
    let detail = match &found.status {
        Status::Ok => None,
        Status::ManifestError(e) => Some(e.to_string()),
        Status::WrongPlatform => Some(format!(
            "built for {}; this machine runs {}",
            manifest.map(|m| m.platforms.join(", ")).unwrap_or_default(),
            std::env::consts::OS
        )),
        Status::IncompatibleApi => Some(format!(
            "built for plugin API {}; this stet speaks {host}",
            manifest.map(|m| m.api.to_string()).unwrap_or_default()
        )),
        Status::LibraryMissing => Some(format!(
            "{} does not exist",
            manifest
                .map(|m| m.library.display().to_string())
                .unwrap_or_default()
        )),
        Status::ShadowedBy(winner) => Some(format!("shadowed by {}", winner.display())),
        Status::UnsafePermissions(why) => Some(format!(
            "{why}; a library others can write runs code as you: chmod go-w it, or install it again"
        )),
        Status::Untrusted(why) => Some(format!(
            "{why}; if you trust it: stet plugins trust {}",
            found.display_name()
        )),
        Status::Unreadable(why) => Some(format!("{why}; fix its permissions or remove it")),
    };
    Entry {
        name: found.display_name(),
        kind: manifest.map(|m| m.kind.as_str()),
        version: manifest.map(|m| m.version.to_string()),
        api: manifest.map(|m| m.api.to_string()),
        status: found.status.word(),
        detail,
        dir: found.dir.display().to_string(),
        found_in: found.source,
        description: manifest
            .map(|m| m.description.clone())
            .filter(|d| !d.is_empty()),
        capabilities: manifest.map(|m| m.capabilities.clone()).unwrap_or_default(),
    }
}

/// The table of plugins, through the one table printer; a refused plugin's detail under
/// its row.
fn print_table(printer: Printer, entries: &[Entry]) {
    let mut table =
        crate::printer::Table::new(&["NAME", "KIND", "VERSION", "API", "STATUS", "PATH"]);
    for e in entries {
        table.row(vec![
            e.name.clone(),
            e.kind.unwrap_or("-").to_string(),
            e.version.clone().unwrap_or_else(|| "-".into()),
            e.api.clone().unwrap_or_else(|| "-".into()),
            e.status.to_string(),
            e.dir.clone(),
        ]);
    }
    table.print_with(|i| {
        if let Some(detail) = entries.get(i).and_then(|e| e.detail.as_ref()) {
            printer.out(&format!("  └ {detail}"));
        }
    });
}
