//! `stet init`: a commented `stet.toml` and the queue directory, in the repository at hand;
//! the file is trusted as written (`trust.rs`), so a fresh set-up works the first time.
//! It exits 0 once it wrote them, and says what a drive still lacks (a usable harness or
//! runtime, the image), which `stet doctor` then fails on.

use std::io::Write;
use std::path::Path;

use serde::Serialize;
use stet_plugin_api::PluginKind;

use super::error::{CliError, Exit};
use crate::config::REPO_CONFIG_FILE;
use crate::init::{self, Found, HarnessExample, Setup};
use crate::plugins::{discovery, survey, version::host_api};
use crate::printer::Printer;
use crate::queue::QUEUE_DIR;
use crate::settings::Settings;

/// What `stet init --json` prints.
#[derive(Serialize)]
struct Report<'a> {
    /// The files written (relative to the repository root).
    wrote: Vec<String>,
    /// Whether the written `stet.toml` counts as trusted.
    trusted: bool,
    harness: Option<&'a str>,
    runtime: Option<&'a str>,
    image: &'a str,
    check: Option<&'a str>,
    /// What a drive still lacks here, each with what to do.
    missing: &'a [Missing],
}

/// Something a drive still lacks after `stet init`.
#[derive(Serialize)]
struct Missing {
    what: String,
    why: String,
    remedy: Option<String>,
}

pub fn run(settings: &Settings, json: bool, printer: Printer) -> Result<Exit, CliError> {
    let (root, path) = where_to_write()?;
    let mut chosen = survey::choose_each(
        &settings.plugins,
        &[
            (PluginKind::Harness, &settings.harness),
            (PluginKind::Runtime, &settings.runtime),
        ],
    );
    let runtime_choice = chosen.pop().expect("asked for a runtime");
    let harness_choice = chosen.pop().expect("asked for a harness");
    let found: Vec<Found> = [&harness_choice, &runtime_choice]
        .into_iter()
        .map(found_of)
        .collect();
    let harnesses = harness_examples(settings);
    let check = init::guess_check(&root);
    let toolchain_image = toolchain_image(settings, check.as_ref(), &runtime_choice);
    let image = toolchain_image
        .as_ref()
        .map_or(settings.image.clone(), |(_, tag, _)| tag.clone());
    let image_note = toolchain_image.as_ref().map(|(guess, tag, build)| {
        format!(
            "{tag}: {} with what `{}` runs, made from {} ({}); build it once\non each machine that drives: {build}",
            settings.image,
            guess.command,
            init::CONTAINERFILE,
            guess.toolchain().packages
        )
    });
    let text = init::config_text(&Setup {
        harness: &found[0],
        runtime: &found[1],
        image: &image,
        image_note: image_note.as_deref(),
        check: check.as_ref(),
        harnesses: &harnesses,
    });
    write_new(&path, text.as_bytes())?;
    let mut wrote = vec![REPO_CONFIG_FILE.to_string()];
    // The person's own command chose this content: trusted as written, in this clone, as
    // `stet trust` would record it; any later change is untrusted again.
    let trusted = crate::trust::persons_store().and_then(|store| {
        crate::trust::record(&store, &path, text.as_bytes(), false)
            .map(|_| store.clone())
            .map_err(|e| format!("cannot write {}: {e}", store.display()))
    });
    let queue = make_queue(&root, &mut wrote)?;
    let containerfile_kept = match &toolchain_image {
        Some(toolchain) => write_recipe(&root, settings, toolchain, &mut wrote)?,
        None => false,
    };

    let missing = still_missing(
        settings,
        &harness_choice,
        &runtime_choice,
        &image,
        toolchain_image.as_ref().map(|(_, _, build)| build.as_str()),
    );
    if json {
        let name = |f: &Found| match f {
            Found::Chosen { name, .. } => Some(name.clone()),
            Found::None(_) => None,
        };
        let (harness, runtime) = (name(&found[0]), name(&found[1]));
        let check = check.as_ref().map(|g| g.command.as_str());
        printer.json(&Report {
            wrote,
            trusted: trusted.is_ok(),
            harness: harness.as_deref(),
            runtime: runtime.as_deref(),
            image: &image,
            check,
            missing: &missing,
        });
        return Ok(Exit::Success);
    }
    printer.out(&format!("wrote {}", path.display()));
    match &trusted {
        Ok(store) => printer.out(&format!(
            "  trusted as written (recorded in {}); a change to it is untrusted again until stet trust",
            store.display()
        )),
        Err(why) => printer.warn(&format!(
            "{} is written but not trusted ({why}): its [runtime] and [harness] preferences apply once you run stet trust",
            path.display()
        )),
    }
    say_choices(
        &found,
        &runtime_choice,
        &image,
        check.as_ref(),
        &harnesses,
        &printer,
    );
    printer.out(&format!("made {}/", queue.display()));
    if let Some((_, tag, _)) = &toolchain_image {
        say_recipe(
            &root.join(init::CONTAINERFILE),
            tag,
            containerfile_kept,
            &printer,
        );
    }
    printer.out("");
    say_missing(&missing, &printer);
    printer.out("");
    say_next(&wrote, &printer);
    Ok(Exit::Success)
}

/// The repository at hand and its `stet.toml`'s path; refused outside a repository, or
/// where the file exists already.
fn where_to_write() -> Result<(std::path::PathBuf, std::path::PathBuf), CliError> {
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
    Ok((root, path))
}

/// The image a guessed check's toolchain needs, its tag and how to build it: a check that
/// needs a toolchain the lane image lacks runs in an image made for it, from the lane
/// image — never an image and a check that cannot run together. An image the person chose
/// themselves is theirs to fill (doctor checks it holds the check): then none.
fn toolchain_image(
    settings: &Settings,
    check: Option<&init::Guess>,
    runtime: &Choice,
) -> Option<(init::Guess, String, String)> {
    let runtime_manifest = runtime.as_ref().ok().map(|(p, _)| &p.manifest);
    check
        .filter(|_| settings.image == crate::settings::DEFAULT_IMAGE)
        .map(|guess| {
            let tag = init::toolchain_tag(&guess.toolchain());
            let build = init::build_command(
                runtime_manifest.map_or("", |m| m.image_build.as_str()),
                &tag,
            );
            (guess.clone(), tag, build)
        })
}

/// Writes the toolchain image's recipe, `.stet/Containerfile`, unless the repository has
/// one already; whether it kept the repository's.
fn write_recipe(
    root: &Path,
    settings: &Settings,
    (guess, _, build): &(init::Guess, String, String),
    wrote: &mut Vec<String>,
) -> Result<bool, CliError> {
    let file = root.join(init::CONTAINERFILE);
    if std::fs::symlink_metadata(&file).is_ok() {
        return Ok(true);
    }
    write_new(
        &file,
        init::containerfile(&settings.image, guess, build).as_bytes(),
    )?;
    wrote.push(init::CONTAINERFILE.to_string());
    Ok(false)
}

/// A plugin chosen for a kind, with why (and its backend's version), or why none is.
fn found_of(answer: &Choice) -> Found {
    match answer {
        Ok((probed, selection)) => Found::Chosen {
            name: probed.manifest.name.clone(),
            version: probed.manifest.version.to_string(),
            why: match probed.available() {
                Some(probe) if !probe.backend_version.is_empty() => {
                    format!("{}; {}", selection.reason, probe.backend_version)
                }
                _ => selection.reason.clone(),
            },
        },
        // The causes say why (each candidate's reason); the message only that none is.
        Err(e) if !e.causes.is_empty() => Found::None(e.causes.join("; ")),
        Err(e) => Found::None(e.message.clone()),
    }
}

/// Every installed harness's starting table, from its manifest: the person uncomments one.
fn harness_examples(settings: &Settings) -> Vec<HarnessExample> {
    let installed = discovery::discover(&settings.plugins.search_path, &host_api());
    installed
        .iter()
        .filter_map(discovery::Found::usable)
        .filter(|m| m.kind == PluginKind::Harness && !m.example.trim().is_empty())
        .map(|m| HarnessExample {
            name: m.name.clone(),
            description: m.description.clone(),
            example: m.example.clone(),
        })
        .collect()
}

/// The queue directory under `root`, made, with a `.gitkeep` (git keeps no empty
/// directory; the queue must reach the remote for every clone), added to `wrote`.
fn make_queue(root: &Path, wrote: &mut Vec<String>) -> Result<std::path::PathBuf, CliError> {
    let queue = root.join(QUEUE_DIR);
    std::fs::create_dir_all(&queue).map_err(|e| {
        CliError::failure(format!("cannot make {}", queue.display())).caused_by(e.to_string())
    })?;
    let keep = queue.join(".gitkeep");
    if std::fs::symlink_metadata(&keep).is_err() {
        write_new(&keep, b"")?;
        wrote.push(format!("{QUEUE_DIR}/.gitkeep"));
    }
    Ok(queue)
}

/// The harness and runtime chosen (and the runtimes passed over, with their isolation),
/// the image, the check guessed, the harnesses whose tables the file holds.
fn say_choices(
    found: &[Found],
    runtime_choice: &Choice,
    image: &str,
    check: Option<&init::Guess>,
    harnesses: &[HarnessExample],
    printer: &Printer,
) {
    for (kind, found) in [("harness", &found[0]), ("runtime", &found[1])] {
        printer.out(&match found {
            Found::Chosen { name, version, .. } => format!("  {kind}: {name} {version}"),
            Found::None(_) => format!("  {kind}: none usable yet"),
        });
    }
    // The runtimes passed over, with their isolation: a person who would rather have
    // another kind of wall sees here that it is at hand and how to choose it.
    if let Some(others) = runtime_choice
        .as_ref()
        .ok()
        .and_then(|(_, selection)| selection.alternatives_line())
    {
        printer.out(&format!("    {others}"));
    }
    printer.out(&format!("  image: {image}"));
    printer.out(&match check {
        Some(guess) => format!("  check: {} (guessed from {})", guess.command, guess.from),
        None => "  check: none guessed; set [drive] check to what proves a change here".to_string(),
    });
    if !harnesses.is_empty() {
        let names: Vec<&str> = harnesses.iter().map(|h| h.name.as_str()).collect();
        printer.out(&format!(
            "  a commented [plugins.*] table for each harness installed: {}",
            names.join(", ")
        ));
    }
}

/// What became of the toolchain image's recipe `file`: written, or the repository's kept
/// (and what that means).
fn say_recipe(file: &Path, tag: &str, kept: bool, printer: &Printer) {
    printer.out(&if kept {
        format!(
            "kept {} as it was: it is the repository's, not stet's nor yours (whoever can commit wrote it, an agent's landed branch included): read it before you build {tag} from it; its image shapes this repository's sandboxes, never one that holds your login",
            file.display()
        )
    } else {
        format!(
            "wrote {}: the recipe of {tag}, the lane image with the check's toolchain",
            file.display()
        )
    });
}

/// What a drive still lacks here, each with what to do; or that nothing is missing.
fn say_missing(missing: &[Missing], printer: &Printer) {
    if missing.is_empty() {
        printer.out("Nothing is missing for a drive here.");
        return;
    }
    printer.out(&format!(
        "Still missing before a drive can start ({}):",
        crate::printer::count(missing.len(), "thing", "things")
    ));
    for m in missing {
        printer.out(&format!("  {}: {}", m.what, m.why));
        if let Some(remedy) = &m.remedy {
            printer.out(&format!("    → {remedy}"));
        }
    }
}

/// What to do next: commit and push what was written, then doctor, add, drive.
fn say_next(wrote: &[String], printer: &Printer) {
    printer.out(
        "Commit and push the set-up: the queue lives on the remote, so every clone's drive sees it:",
    );
    let containerfile = if wrote.iter().any(|w| w == init::CONTAINERFILE) {
        format!(" {}", init::CONTAINERFILE)
    } else {
        String::new()
    };
    printer.out(&format!(
        "  git add {REPO_CONFIG_FILE} {QUEUE_DIR}/.gitkeep{containerfile} && git commit -m \"Set up stet\" && git push"
    ));
    printer
        .out("Then: stet doctor (is everything a drive needs here?), stet add \"...\", stet drive");
}

/// A plugin chosen for a kind, or why none.
type Choice = Result<
    (
        crate::plugins::probe::Probed,
        crate::plugins::selection::Selection,
    ),
    crate::error::Error,
>;

/// What a drive still lacks: a usable harness and runtime, and the image present for the
/// runtime (`build`: how to make the one init wrote the recipe of).
fn still_missing(
    settings: &Settings,
    harness: &Choice,
    runtime: &Choice,
    image: &str,
    build: Option<&str>,
) -> Vec<Missing> {
    let mut missing = Vec::new();
    let plugin = |kind: &str, e: &crate::error::Error| Missing {
        what: kind.to_string(),
        why: if e.causes.is_empty() {
            e.message.clone()
        } else {
            format!("{} ({})", e.message, e.causes.join("; "))
        },
        remedy: e.hint.clone().filter(|h| !h.is_empty()),
    };
    if let Err(e) = harness {
        missing.push(plugin("harness", e));
    }
    match runtime {
        Err(e) => missing.push(plugin("runtime", e)),
        Ok((probed, selection)) => {
            let status = crate::sandbox::open_probed(settings, probed, selection.clone())
                .map_err(|e| e.message)
                .and_then(|r| {
                    r.handle
                        .image_status(image)
                        .map_err(|e| e.message.to_string())
                });
            match status {
                Ok(s) if s.present => {}
                Ok(s) => missing.push(Missing {
                    what: "image".to_string(),
                    why: format!("{image} is not built yet"),
                    remedy: Some(match build {
                        Some(build) => format!(
                            "{build} (from {}; it needs {} first)",
                            init::CONTAINERFILE,
                            settings.image
                        ),
                        None if image == crate::settings::DEFAULT_IMAGE => {
                            "build it: scripts/build-image.sh (no registry needed)".to_string()
                        }
                        None => s.remedy.to_string(),
                    }),
                }),
                Err(why) => missing.push(Missing {
                    what: "image".to_string(),
                    why: format!("cannot look {image} up: {why}"),
                    remedy: None,
                }),
            }
        }
    }
    missing
}

/// Writes a file that must not exist yet (never over one made meanwhile), making its
/// directory.
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| {
            CliError::failure(format!("cannot write {}", path.display())).caused_by(e.to_string())
        })
}
