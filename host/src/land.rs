//! What happens after a lane's branch is pushed: the person's land command, or, with
//! `[drive] land = "github"`, a pull request opened with `gh` (reused when one is already
//! open for the branch, so a landing run again after a crash opens no second one).
//!
//! `gh` runs on the host as the person (it is the one step that needs their GitHub login),
//! with arguments stet builds, never through a shell: the item's title and the receipts'
//! figures are data in its argv.

use std::path::Path;
use std::process::Command;

use crate::queue::Item;
use crate::receipts::{CallRole, Outcome, Receipt};

/// The `[drive] land` value that opens a pull request with `gh`.
pub const GITHUB: &str = "github";

/// A pull request `gh` opened, or found open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    /// Its address.
    pub url: String,
    /// Whether it was open already.
    pub reused: bool,
}

/// Opens a pull request for `branch` (pushed to `remote`) into `base` (the remote's branch
/// the lane branched from, `base.rs`), titled by the item, its body made from the item's
/// receipts; reuses an open one.
pub fn pull_request(
    repo: &Path,
    item: &Item,
    branch: &str,
    base: &str,
    receipts: &[Receipt],
) -> Result<PullRequest, String> {
    let gh = |args: &[&str]| -> Result<String, String> {
        let out = Command::new("gh")
            .args(args)
            .current_dir(repo)
            .env("GH_PROMPT_DISABLED", "1")
            .output()
            .map_err(|e| format!("cannot run gh: {e} (install GitHub's CLI and gh auth login)"))?;
        let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() {
            Ok(stdout)
        } else {
            let said = String::from_utf8_lossy(&out.stderr);
            let said = said
                .trim()
                .lines()
                .last()
                .unwrap_or("no message")
                .to_string();
            Err(format!(
                "gh {} failed ({}): {said}",
                args[..2].join(" "),
                out.status
            ))
        }
    };
    let open = gh(&[
        "pr", "list", "--head", branch, "--state", "open", "--json", "url", "--jq", ".[0].url",
    ])?;
    if let Some(url) = open
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && *l != "null")
    {
        return Ok(PullRequest {
            url: url.to_string(),
            reused: true,
        });
    }
    let body = body(item, receipts);
    let args = vec![
        "pr",
        "create",
        "--head",
        branch,
        "--title",
        item.title.as_str(),
        "--body",
        body.as_str(),
        "--base",
        base,
    ];
    let said = gh(&args)?;
    let url = said
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with("http"))
        .unwrap_or(said.trim())
        .to_string();
    Ok(PullRequest { url, reused: false })
}

/// The pull request's body: the item's text after its title, then what stet did — each
/// call and check of the item with its round, outcome, duration and cost, and the totals.
pub fn body(item: &Item, receipts: &[Receipt]) -> String {
    let mut ours: Vec<&Receipt> = receipts.iter().filter(|r| r.item == item.id).collect();
    ours.sort_by_key(|r| r.started_unix_ms);
    let rest = item
        .text
        .trim()
        .strip_prefix(item.title.as_str())
        .unwrap_or(item.text.trim())
        .trim();
    let mut out = String::new();
    if !rest.is_empty() {
        out.push_str(rest);
        out.push_str("\n\n");
    }
    let rounds = ours.iter().filter_map(|r| r.round).max().unwrap_or(1);
    let cost: f64 = ours.iter().filter_map(|r| r.cost_usd).sum();
    let checks = ours.iter().filter(|r| r.role == CallRole::Check).count();
    let passed = ours
        .iter()
        .filter(|r| r.role == CallRole::Check && r.outcome == Outcome::Passed)
        .count();
    let checked = match checks {
        0 => "no check".to_string(),
        n => format!("checks {passed} of {n} passed"),
    };
    out.push_str(&format!(
        "---\nLanded by stet from `.stet/queue/{}.md`: {} round{}, {} call{}, cost ${cost:.4}, {checked}.\n\n",
        item.id,
        rounds,
        if rounds == 1 { "" } else { "s" },
        ours.len() - checks,
        if ours.len() - checks == 1 { "" } else { "s" },
    ));
    out.push_str("| round | stage | outcome | time | cost |\n|---|---|---|---|---|\n");
    for r in &ours {
        let secs = r.ended_unix_ms.saturating_sub(r.started_unix_ms) as f64 / 1000.0;
        out.push_str(&format!(
            "| {} | {} | {} | {secs:.1} s | {} |\n",
            r.round.map(|n| n.to_string()).unwrap_or_default(),
            r.role,
            r.outcome,
            r.cost_usd
                .map(|c| format!("${c:.4}"))
                .unwrap_or_else(|| "–".into()),
        ));
    }
    out.push_str(&format!(
        "\nReceipts: `stet receipts --item {}` on the clone that drove it.\n",
        item.id
    ));
    out
}
