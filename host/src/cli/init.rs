//! `stet init`: a commented `stet.toml` and the queue directory, in the repository at hand;
//! the file is trusted as written (`trust.rs`), so a fresh set-up works the first time.

use std::io::Write;
use std::path::Path;

use stet_plugin_api::PluginKind;

use super::error::{CliError, Exit};
use crate::config::REPO_CONFIG_FILE;
use crate::init::{self, Found, Setup};
use crate::plugins::survey;
use crate::printer::Printer;
use crate::queue::QUEUE_DIR;
use crate::settings::Settings;

pub fn run(settings: &Settings, printer: Printer) -> Result<Exit, CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::failure(format!("cannot resolve the current directory: {e}")))?;
    let root = crate::config::repository_root(&cwd).ok_or_else(|| {
        CliError::usage(format!("{} is not inside a git repository", cwd.display()))
            .hint("stet works on a git repository with a remote: git init (or clone one) first")
    })?;
    let path = root.join(REPO_CONFIG_FILE);
    if std::fs::symlink_metadata(&path).is_ok() {
        return Err(CliError::usage(format!(
            "{} already exists; stet init writes one only where there is none",
            path.display()
        ))
        .hint("edit it (docs/configuration.md describes every key), or remove it and run stet init again"));
    }
    let chosen = survey::choose_each(
        &settings.plugins,
        &[
            (PluginKind::Harness, &settings.harness),
            (PluginKind::Runtime, &settings.runtime),
        ],
    );
    let found: Vec<Found> = chosen
        .into_iter()
        .map(|answer| match answer {
            Ok((probed, selection)) => Found::Chosen {
                name: probed.manifest.name.clone(),
                version: probed.manifest.version.to_string(),
                why: match probed.available() {
                    Some(probe) if !probe.backend_version.is_empty() => {
                        format!("{}; {}", selection.reason, probe.backend_version)
                    }
                    _ => selection.reason,
                },
            },
            Err(e) => Found::None(e.message.clone()),
        })
        .collect();
    let check = init::guess_check(&root);
    let text = init::config_text(&Setup {
        harness: &found[0],
        runtime: &found[1],
        image: &settings.image,
        check: check.as_ref(),
    });
    write_new(&path, text.as_bytes())?;
    // The person's own command chose this content: trusted as written, in this clone, as
    // `stet trust` would record it; any later change is untrusted again.
    let trusted = crate::trust::persons_store().and_then(|store| {
        crate::trust::record(&store, &path, text.as_bytes(), false)
            .map(|_| store.clone())
            .map_err(|e| format!("cannot write {}: {e}", store.display()))
    });
    let queue = root.join(QUEUE_DIR);
    std::fs::create_dir_all(&queue).map_err(|e| {
        CliError::failure(format!("cannot make {}", queue.display())).caused_by(e.to_string())
    })?;
    // Git keeps no empty directory; the queue must reach the remote for every clone.
    let keep = queue.join(".gitkeep");
    if std::fs::symlink_metadata(&keep).is_err() {
        write_new(&keep, b"")?;
    }

    printer.out(&format!("wrote {}", path.display()));
    match &trusted {
        Ok(store) => printer.out(&format!(
            "  trusted as written (sha256 recorded in {}); a change to it is untrusted again until stet trust",
            store.display()
        )),
        Err(why) => printer.warn(&format!(
            "{} is written but not trusted ({why}): its [runtime] and [harness] preferences apply once you run stet trust",
            path.display()
        )),
    }
    for (kind, found) in [("harness", &found[0]), ("runtime", &found[1])] {
        printer.out(&match found {
            Found::Chosen { name, version, .. } => format!("  {kind}: {name} {version}"),
            Found::None(why) => {
                format!("  {kind}: none usable ({why}); stet plugins probe says why")
            }
        });
    }
    printer.out(&format!("  image: {}", settings.image));
    printer.out(&match &check {
        Some(guess) => format!("  check: {} (guessed from {})", guess.command, guess.from),
        None => "  check: none guessed; set [drive] check to what proves a change here".to_string(),
    });
    printer.out(&format!("made {}/", queue.display()));
    printer.out("");
    printer.out(
        "Commit and push both: the queue lives on the remote, so every clone's drive sees it:",
    );
    printer.out(&format!(
        "  git add {REPO_CONFIG_FILE} {QUEUE_DIR}/.gitkeep && git commit -m \"Set up stet\" && git push"
    ));
    printer
        .out("Then: stet doctor (is everything a drive needs here?), stet add \"...\", stet drive");
    Ok(if found.iter().all(|f| matches!(f, Found::Chosen { .. })) {
        Exit::Success
    } else {
        Exit::Unusable
    })
}

/// Writes a file that must not exist yet (never over one made meanwhile).
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| {
            CliError::failure(format!("cannot write {}", path.display())).caused_by(e.to_string())
        })
}
