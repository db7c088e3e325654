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

/// How a lane lands after its branch is pushed (`[drive] land`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum How {
    /// A pull request opened with `gh`; into `repo` (`OWNER/REPO`) when the push remote is
    /// a fork of it (`[drive] pull_request_repo`), else into the push remote's repository.
    PullRequest { repo: Option<String> },
    /// The person's command, run by `sh -c` on the host.
    Command(String),
}

impl How {
    /// The way `land` (a `[drive] land` value) says, with the pull request's repository.
    pub fn of(land: &str, pull_request_repo: Option<&str>) -> How {
        if land == GITHUB {
            How::PullRequest {
                repo: pull_request_repo.map(str::to_string),
            }
        } else {
            How::Command(land.to_string())
        }
    }
}

/// One landing to make: the item, its pushed branch, the base it goes into.
pub struct Landing<'a> {
    pub repo: &'a Path,
    pub item: &'a Item,
    /// The lane's branch, pushed to `remote`.
    pub branch: &'a str,
    /// The remote's branch the lane branched from (`main`).
    pub base: &'a str,
    pub remote: &'a str,
    /// Whether a landing of it was made before (cut short, or failed): `STET_LAND_RETRY=1`.
    pub again: bool,
}

/// What the land step did: `Ok(Some)` a pull request (opened or found open), `Ok(None)` a
/// land command that succeeded, `Err(why)` a land step that failed.
pub fn land(
    landing: &Landing<'_>,
    how: &How,
    receipts: &[Receipt],
) -> Result<Option<PullRequest>, String> {
    match how {
        How::PullRequest { repo } => pull_request(landing, repo.as_deref(), receipts).map(Some),
        How::Command(command) => {
            // The land command runs on the host, as the person: it is the one step that may
            // need the person's own credentials.
            let mut land = Command::new("sh");
            land.args(["-c", command])
                .current_dir(landing.repo)
                .env("STET_ITEM", &landing.item.id)
                .env("STET_BRANCH", landing.branch)
                .env("STET_REMOTE", landing.remote);
            if landing.again {
                land.env("STET_LAND_RETRY", "1");
            }
            match land.status() {
                Ok(s) if s.success() => Ok(None),
                Ok(s) => Err(format!("the land command `{command}` failed ({s})")),
                Err(e) => Err(format!("cannot run the land command `{command}`: {e}")),
            }
        }
    }
}

/// What the item's landed record (its entry in the remote's ledger) says of its land step:
/// its first line is where it landed, then `pull request: URL` or `pull request not opened:
/// WHY` (a land command's failure says `land command failed: WHY`).
pub fn record(
    landed: &str,
    outcome: &Result<Option<PullRequest>, String>,
    how: Option<&How>,
) -> String {
    match (outcome, how) {
        (Ok(Some(pr)), _) => format!("{landed}\n{PULL_REQUEST}{}", pr.url),
        (Err(why), Some(How::PullRequest { .. })) => format!("{landed}\n{NOT_OPENED}{why}"),
        (Err(why), _) => format!("{landed}\n{COMMAND_FAILED}{why}"),
        (Ok(None), _) => landed.to_string(),
    }
}

const PULL_REQUEST: &str = "pull request: ";
const NOT_OPENED: &str = "pull request not opened: ";
const COMMAND_FAILED: &str = "land command failed: ";

/// What a landed record says of its land step (see [`record`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recorded {
    /// The pull request's address.
    pub pull_request: Option<String>,
    /// Why the land step failed, as the item shows it: `pull request not opened: WHY`.
    pub failed: Option<String>,
}

/// Reads a landed record (anyone who can push wrote it: only an `https://` address is
/// taken as a pull request's).
pub fn recorded(note: &str) -> Recorded {
    let mut out = Recorded::default();
    for line in note.lines().skip(1) {
        if let Some(url) = line.strip_prefix(PULL_REQUEST) {
            let url = url.trim();
            if url.starts_with("https://") && !url.contains(char::is_whitespace) {
                out.pull_request = Some(url.to_string());
            }
        } else if line.starts_with(NOT_OPENED) || line.starts_with(COMMAND_FAILED) {
            out.failed = Some(line.trim().to_string());
        }
    }
    out
}

/// The environment `gh` runs in, built from scratch: it runs on the host beside a branch an
/// agent wrote, so nothing of stet's own environment but what `gh` needs to find itself and
/// the person's login (its configuration directory, a token variable the person set for
/// it: passed by name, never read by stet) reaches it.
fn gh_environment() -> Vec<(String, std::ffi::OsString)> {
    const PASSED: &[&str] = &[
        "PATH",
        "HOME",
        "XDG_CONFIG_HOME",
        "XDG_STATE_HOME",
        "XDG_DATA_HOME",
        "GH_CONFIG_DIR",
        "GH_HOST",
        "GH_TOKEN",
        "GITHUB_TOKEN",
        "GH_ENTERPRISE_TOKEN",
        "GITHUB_ENTERPRISE_TOKEN",
        "HTTPS_PROXY",
        "https_proxy",
        "NO_PROXY",
        "no_proxy",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
    ];
    let mut env: Vec<(String, std::ffi::OsString)> = PASSED
        .iter()
        .filter_map(|k| std::env::var_os(k).map(|v| (k.to_string(), v)))
        .collect();
    for (k, v) in [
        ("GH_PROMPT_DISABLED", "1"),
        ("GH_NO_UPDATE_NOTIFIER", "1"),
        ("NO_COLOR", "1"),
        ("GH_PAGER", "cat"),
        ("LANG", "C"),
    ] {
        env.push((k.to_string(), v.into()));
    }
    env
}

/// Runs `gh args…` in `repo` with [`gh_environment`]: its standard output, or why it failed
/// (its last line of standard error: what a person reads of it).
pub fn gh(repo: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("gh")
        .args(args)
        .current_dir(repo)
        .env_clear()
        .envs(gh_environment())
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run gh: {e} (install GitHub's CLI, then gh auth login)"))?;
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
            args.iter().take(2).copied().collect::<Vec<_>>().join(" "),
            out.status
        ))
    }
}

/// `url` without the credentials an address may carry (`https://user:token@host/…`): what
/// may be printed of a remote's address.
pub fn without_credentials(url: &str) -> String {
    let url = url.trim();
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
            let host = authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host);
            if path.is_empty() && !rest.contains('/') {
                format!("{scheme}://{host}")
            } else {
                format!("{scheme}://{host}/{path}")
            }
        }
        None => url.to_string(),
    }
}

/// The owner of the repository `url` (a GitHub remote's address: `git@host:OWNER/REPO.git`,
/// `https://host/OWNER/REPO`, `ssh://git@host/OWNER/REPO`, or a path `…/OWNER/REPO`).
pub fn owner_of(url: &str) -> Option<String> {
    let url = url.trim().trim_end_matches('/');
    let path = match url.split_once("://") {
        Some((_, rest)) => rest.split_once('/')?.1,
        None => url.split_once(':').map_or(url, |(_, path)| path),
    };
    let mut parts = path.trim_end_matches(".git").rsplit('/');
    let _repo = parts.next().filter(|r| !r.is_empty())?;
    let owner = parts.next().filter(|o| !o.is_empty())?;
    owner
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        .then(|| owner.to_string())
}

/// Opens a pull request for the landing's branch (pushed to its remote) into its base (the
/// remote's branch the lane branched from, `base.rs`), titled by the item, its body made
/// from the item's receipts; reuses an open one. With `into` (`OWNER/REPO`, the push
/// remote being a fork of it), the pull request is opened there (`--repo`), its head
/// named `owner:branch` by the push remote's owner.
pub fn pull_request(
    landing: &Landing<'_>,
    into: Option<&str>,
    receipts: &[Receipt],
) -> Result<PullRequest, String> {
    let repo = landing.repo;
    let branch = landing.branch;
    let (head, owner) = match into {
        Some(_) => {
            let url = crate::git::run(repo, &["remote", "get-url", "--push", landing.remote])
                .map_err(|e| {
                    format!(
                        "cannot read the address of {}: {}",
                        landing.remote, e.detail
                    )
                })?;
            let owner = owner_of(&url).ok_or_else(|| {
                format!(
                    "cannot tell the owner of {} from its address {} (a fork's head is OWNER:BRANCH)",
                    landing.remote,
                    // The message is kept in the item's record on the remote: never a
                    // token the address carries.
                    without_credentials(&url)
                )
            })?;
            (format!("{owner}:{branch}"), Some(owner))
        }
        None => (branch.to_string(), None),
    };
    let with_repo = |mut args: Vec<String>| {
        if let Some(into) = into {
            args.extend(["--repo".to_string(), into.to_string()]);
        }
        args
    };
    let run = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        gh(repo, &args)
    };
    // `gh pr list --head` takes a branch name alone: a fork's is told apart by its owner.
    let select = match &owner {
        Some(owner) => format!("[.[] | select(.headRepositoryOwner.login == \"{owner}\")][0].url"),
        None => ".[0].url".to_string(),
    };
    let open = run(with_repo(
        [
            "pr",
            "list",
            "--head",
            branch,
            "--state",
            "open",
            "--json",
            "url,headRepositoryOwner",
            "--jq",
            &select,
        ]
        .map(String::from)
        .to_vec(),
    ))?;
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
    let body = body(landing.item, receipts);
    let said = run(with_repo(
        [
            "pr",
            "create",
            "--head",
            &head,
            "--title",
            landing.item.title.as_str(),
            "--body",
            body.as_str(),
            "--base",
            landing.base,
        ]
        .map(String::from)
        .to_vec(),
    ))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_printed_without_its_credentials() {
        assert_eq!(
            without_credentials("https://pat:ghp_secret@github.com/pat/stet.git"),
            "https://github.com/pat/stet.git"
        );
        assert_eq!(
            without_credentials("git@github.com:pat/stet.git"),
            "git@github.com:pat/stet.git"
        );
        assert_eq!(without_credentials("/srv/remote.git"), "/srv/remote.git");
    }

    #[test]
    fn a_remotes_owner_is_read_from_every_address_form() {
        assert_eq!(
            owner_of("git@github.com:pat/stet.git").as_deref(),
            Some("pat")
        );
        assert_eq!(
            owner_of("https://github.com/pat/stet").as_deref(),
            Some("pat")
        );
        assert_eq!(
            owner_of("https://github.com/pat/stet.git/").as_deref(),
            Some("pat")
        );
        assert_eq!(
            owner_of("ssh://git@github.com/pat-2/stet.git").as_deref(),
            Some("pat-2")
        );
        assert_eq!(owner_of("/srv/git/remote.git"), Some("git".into()));
        assert_eq!(owner_of("https://github.com/stet"), None);
        assert_eq!(owner_of("git@github.com:a b/stet"), None);
    }

    #[test]
    fn a_landed_record_keeps_the_pull_request_or_why_it_was_not_opened() {
        let how = How::of(GITHUB, None);
        let opened = record(
            "landed stet/x by run r",
            &Ok(Some(PullRequest {
                url: "https://github.test/o/r/pull/3".into(),
                reused: false,
            })),
            Some(&how),
        );
        assert_eq!(
            recorded(&opened).pull_request.as_deref(),
            Some("https://github.test/o/r/pull/3")
        );
        let failed = record(
            "landed stet/x by run r",
            &Err("gh pr create failed".into()),
            Some(&how),
        );
        assert_eq!(
            recorded(&failed),
            Recorded {
                pull_request: None,
                failed: Some("pull request not opened: gh pr create failed".into())
            }
        );
        // Written by anyone who can push: no address that is not one.
        assert_eq!(
            recorded("landed\npull request: javascript:x").pull_request,
            None
        );
        assert_eq!(recorded("landed stet/x by run r"), Recorded::default());
    }
}
