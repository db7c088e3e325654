//! `stet clean [--remote] [--archive] [--dry-run]`: what finished items left behind
//! (`crate::clean`).

use super::error::{CliError, Exit};
use super::CleanArgs;
use crate::clean::{Action, Options};
use crate::printer::Printer;
use crate::reservations::Remote;

pub fn run(args: &CleanArgs, printer: Printer) -> Result<Exit, CliError> {
    let repo = super::queue::repo()?;
    let remote = Remote {
        repo: &repo,
        name: &args.remote_name,
    };
    let options = Options {
        remote: args.remote,
        archive: args.archive,
        dry_run: args.dry_run,
    };
    let report = crate::clean::clean(&repo, &remote, options).map_err(|e| {
        CliError::new(
            Exit::Unusable,
            "the remote cannot be reached, and it says which items are finished",
        )
        .caused_by(e.to_string())
        .hint("check the network and the remote, then run stet clean again")
    })?;
    let entries = &report.entries;
    let seeds = stale_seeds(&repo, &args.remote_name, args.dry_run)?;
    let freed: u64 = entries
        .iter()
        .filter(|e| e.action != Action::Kept)
        .map(|e| e.bytes)
        .sum::<u64>()
        .saturating_add(seeds.iter().map(|s| s.bytes).sum::<u64>());
    if args.json {
        #[derive(serde::Serialize)]
        struct Json<'a> {
            dry_run: bool,
            entries: &'a [crate::clean::Entry],
            /// Bytes freed on this clone (or that would be, on a dry run).
            freed_bytes: u64,
            archive: &'a Option<crate::clean::Archive>,
            archivable: usize,
            /// Seeds of an older base or setup, removed (no lane was given them).
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            seeds: &'a [crate::seeds::Seed],
        }
        printer.json(&Json {
            dry_run: args.dry_run,
            entries,
            freed_bytes: freed,
            archive: &report.archive,
            archivable: report.archivable,
            seeds: &seeds,
        });
        return Ok(Exit::Success);
    }
    if entries.is_empty() && seeds.is_empty() {
        printer.out("nothing to clean: no landed, failed or cancelled item left anything here");
    }
    for seed in &seeds {
        printer.out(&format!(
            "{:<width$} seed {} ({}) — built for an older base or setup — {}",
            if args.dry_run {
                "would remove"
            } else {
                "removed"
            },
            seed.key,
            seed.outputs.join(", "),
            crate::printer::size(seed.bytes),
            width = if args.dry_run { 12 } else { 8 },
        ));
    }
    // The column of what was done: as wide as its longest word here.
    let width = if args.dry_run { 12 } else { 8 };
    for e in entries {
        let size = if e.bytes > 0 {
            format!(" — {}", crate::printer::size(e.bytes))
        } else {
            String::new()
        };
        printer.out(&format!("{:<width$} {}{size}", e.action.word(), e.line()));
    }
    if !entries.is_empty() || !seeds.is_empty() {
        printer.out(&if args.dry_run {
            format!(
                "would free {} on this clone; nothing was removed (run it again without --dry-run)",
                crate::printer::size(freed)
            )
        } else {
            format!("freed {} on this clone", crate::printer::size(freed))
        });
    }
    if let Some(archive) = &report.archive {
        match &archive.commit {
            Some(commit) => printer.out(&format!(
                "committed {} on {}: {} removed from {}; push it (git push) so every clone's queue shrinks, then stet clean --remote spends their marks",
                &commit[..commit.len().min(12)],
                archive.branch,
                crate::printer::count(archive.items, "landed item's file", "landed items' files"),
                crate::queue::QUEUE_DIR
            )),
            None if args.dry_run && archive.items > 0 => printer.out(&format!(
                "would commit on {} the removal of {} from {} (their text stays in git history)",
                archive.branch,
                crate::printer::count(archive.items, "landed item's file", "landed items' files"),
                crate::queue::QUEUE_DIR
            )),
            None => {}
        }
    }
    if report.archivable > 0 {
        printer.note(&format!(
            "{} still in {}: stet clean --archive --dry-run says what a commit taking {} out would do",
            crate::printer::count(report.archivable, "landed item's file is", "landed items' files are"),
            crate::queue::QUEUE_DIR,
            if report.archivable == 1 { "it" } else { "them" }
        ));
    }
    if !args.remote {
        printer.detail(
            "stet clean --remote also removes their merged branches and spent marks on the remote",
        );
    }
    Ok(Exit::Success)
}

/// The seeds on this clone that no lane was given and that are not the base's (as last
/// fetched) under the setup as it is now: removed, or with `dry_run` named.
fn stale_seeds(
    repo: &std::path::Path,
    remote: &str,
    dry_run: bool,
) -> Result<Vec<crate::seeds::Seed>, CliError> {
    // A drive here may be giving a seed to its next lane: seeds wait until it ends.
    if crate::seeds::all(repo).is_empty() || crate::drive::driving_here(repo) {
        return Ok(Vec::new());
    }
    // The current seed is kept: its key needs the settings (the setup, the image).
    let settings = crate::settings::resolve(&[], &Default::default())?;
    let current = match crate::base::known(repo, remote) {
        Some(base) => crate::setup::key_of(repo, &settings, &base.commit)
            .ok()
            .flatten(),
        None => None,
    };
    crate::seeds::remove_stale(repo, current.as_deref(), dry_run).map_err(|e| {
        CliError::failure(format!("cannot remove a stale seed: {e}"))
            .hint("remove .git/stet/seeds/ by hand; a drive builds what it needs again")
    })
}
