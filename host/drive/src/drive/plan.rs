//! `stet drive --dry-run`: what a drive would take, in what order, with which runtime and
//! harness — after the preconditions a drive checks without asking an agent anything (the
//! remote and its base, the plugins, the image holding what the drive runs). No wall proof
//! (it is an agent call), no reservation, no consent, nothing reaped or settled.

use serde::Serialize;

use super::{holder, ours_to_take_over, remote_error, DriveOptions};
use crate::error::Error;
use crate::harness::OpenHarness;
use crate::printer::Printer;
use crate::reservations::Remote;
use crate::sandbox::OpenRuntime;
use crate::settings::Settings;

/// A plugin a drive would use, and why it was chosen.
#[derive(Serialize)]
struct Chosen<'a> {
    name: &'a str,
    version: &'a str,
    why: &'a str,
}

/// One item the drive would take, in the order it would.
#[derive(Serialize)]
struct Taken {
    order: usize,
    id: String,
    title: Option<String>,
    state: &'static str,
    why: Option<String>,
    remedy: Option<String>,
}

/// The plan, as `--json` prints it.
#[derive(Serialize)]
struct Plan<'a> {
    dry_run: bool,
    base: &'a str,
    base_commit: &'a str,
    runtime: Chosen<'a>,
    harness: Chosen<'a>,
    image: &'a str,
    check: Option<&'a str>,
    jobs: usize,
    cap: usize,
    rounds: u32,
    eligible: usize,
    /// Items open but held by another drive's live reservation.
    held_elsewhere: Vec<String>,
    items: Vec<Taken>,
}

/// Says what a drive with `options` would take on `repo` from `base`, and returns.
#[allow(clippy::too_many_arguments)]
pub(super) fn show(
    settings: &Settings,
    options: &DriveOptions,
    repo: &std::path::Path,
    base: &crate::base::Base,
    harness: &OpenHarness,
    runtime: &OpenRuntime,
    now: i64,
    json: bool,
    printer: Printer,
) -> Result<(), Error> {
    let (items, malformed) = crate::queue::scan_at(repo, &base.commit);
    for m in &malformed {
        printer.warn(&format!("skipped {}: {}", m.path.display(), m.why));
    }
    let remote = Remote {
        repo,
        name: &options.remote,
    };
    let marks = remote.marks().map_err(remote_error)?;
    let held_elsewhere = held_elsewhere(&remote, repo, now)?;
    let eligible: Vec<&crate::queue::Entry> = items
        .iter()
        .filter(|i| marks.open(&i.id) && !held_elsewhere.contains(&i.id))
        .collect();
    let taken: Vec<Taken> = eligible
        .iter()
        .take(options.cap)
        .enumerate()
        .map(|(n, entry)| Taken {
            order: n + 1,
            id: entry.id.clone(),
            title: entry.load().ok().map(|item| item.title),
            state: "open",
            why: None,
            remedy: None,
        })
        .collect();
    let plan = Plan {
        dry_run: true,
        base: &base.name,
        base_commit: &base.commit,
        runtime: Chosen {
            name: &runtime.name,
            version: &runtime.version,
            why: &runtime.selection.reason,
        },
        harness: Chosen {
            name: &harness.name,
            version: &harness.version,
            why: &harness.selection.reason,
        },
        image: &settings.image,
        check: options.check.as_deref(),
        jobs: options.jobs,
        cap: options.cap,
        rounds: options.max_rounds,
        eligible: eligible.len(),
        held_elsewhere,
        items: taken,
    };
    if json {
        printer.json(&plan);
        return Ok(());
    }
    printer.out(&format!(
        "stet drive would take {} of {} eligible, in this order:",
        crate::printer::count(plan.items.len(), "item", "items"),
        plan.eligible
    ));
    for item in &plan.items {
        printer.out(&format!(
            "  {}. {}  {}",
            item.order,
            item.id,
            item.title.as_deref().unwrap_or("(its text cannot be read)")
        ));
    }
    if !plan.held_elsewhere.is_empty() {
        printer.out(&format!(
            "  not taken, held by other drives: {}",
            plan.held_elsewhere.join(", ")
        ));
    }
    printer.out(&format!(
        "  base:     {} at {}",
        plan.base,
        base.commit.get(..12).unwrap_or(&base.commit)
    ));
    printer.out(&format!(
        "  lanes:    {} at once, up to {} per item",
        plan.jobs,
        crate::printer::count(plan.rounds as usize, "round", "rounds")
    ));
    printer.out(&format!(
        "  runtime:  {} — {}",
        runtime.name, runtime.selection.reason
    ));
    // As the consent says it, so that what a drive will ask is what its dry run showed.
    printer.out(&format!(
        "            isolation: {}",
        crate::sandbox::isolation_said(runtime.isolation.as_deref())
    ));
    printer.out(&format!(
        "  harness:  {} — {}",
        harness.name, harness.selection.reason
    ));
    printer.out(&format!("  image:    {}", plan.image));
    printer.out(&format!(
        "  check:    {}",
        plan.check.unwrap_or("none (no check stage)")
    ));
    printer.out(
        "dry run: nothing was reserved and no agent was asked (a drive first proves the walls with a short walled agent call)",
    );
    Ok(())
}

/// The items other drives hold at `now`: reserved on `remote`, unexpired, and not this
/// clone's to take over.
fn held_elsewhere(
    remote: &Remote<'_>,
    repo: &std::path::Path,
    now: i64,
) -> Result<Vec<String>, Error> {
    let mine = holder(repo);
    Ok(remote
        .list()
        .map_err(remote_error)?
        .into_iter()
        .filter(|h| {
            h.reservation.expires_at_unix > now && !ours_to_take_over(&mine, &h.reservation.holder)
        })
        .map(|h| h.reservation.item)
        .collect())
}
