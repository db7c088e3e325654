//! `lane-git-inert`: nothing planted in a lane runs on the host when stet works the lane.
//!
//! Proven live on the runtime the drive uses, in two layers:
//!
//! 1. From inside a sandbox made as an implementing agent's (a scratch lane, laid out as a
//!    drive's), a script tries to plant programs where git would run them: the lane's
//!    `.git/config` (fsmonitor, hooks path, filter, pager, signing), `.git/hooks/`, its
//!    `info/attributes`, and replacing `.git` by a `gitdir:` file. Every one of those writes
//!    must be refused by the mount. What the working tree may hold anyway — a
//!    `.gitattributes` naming a filter, a nested repository with a booby-trapped config —
//!    it plants too.
//! 2. The host then plants the same programs into the lane's git directory itself (as if
//!    the first layer had failed), and runs stet's own lane operations: commit what the
//!    agent left, bring the branch back into a repository, show the diff, restore the
//!    working tree. Each planted program would leave a mark in a host directory no
//!    sandbox sees; the wall holds when no mark appears and every write in 1 was refused.
//!    The nested repository is refused by the gate (`crate::gate`) by name before git
//!    reads anything; the rest is committed without it.

use std::path::Path;

use stet_plugin_api::{Launch, Network, ProcessSpec, ROption};

use crate::error::{Concept, Error};
use crate::harness;
use crate::lanes::{self, Lane};
use crate::sandbox::{LaneAccess, LaneMounts, OpenRuntime, Plan};
use crate::settings::Settings;

use super::Wall;

const BEGIN: &str = "stet-lane-git 1";
const END: &str = "stet-lane-git-end";

/// The name of this wall.
pub const WALL: &str = "lane-git-inert";

/// What the sandbox tries to write in the lane's git directory; each must be refused.
fn sandbox_script(marks: &Path) -> String {
    let mark = |what: &str| format!("touch {}/{what}", marks.display());
    format!(
        r#"echo '{BEGIN}'
try() {{ if ( eval "$2" ) 2>/dev/null; then echo "wrote $1"; else echo "refused $1"; fi; }}
try .git/config "printf '[core]\n\tfsmonitor = \"{fsmonitor}\"\n\thooksPath = .githooks\n[filter \"evil\"]\n\tclean = \"{filter}; cat\"\n' >> .git/config"
try .git/hooks "mkdir -p .git/hooks && printf '#!/bin/sh\n{hook}\n' > .git/hooks/post-commit && chmod +x .git/hooks/post-commit"
try .git/info/attributes "echo '* filter=evil' > .git/info/attributes"
try .git/objects/info/alternates "echo /tmp > .git/objects/info/alternates"
try '.git replaced' "rm -rf .git 2>/dev/null; [ ! -d .git ] && echo 'gitdir: /tmp/elsewhere' > .git"
echo '* filter=evil diff=evil' > .gitattributes
mkdir -p .githooks nested/.git/hooks
printf '#!/bin/sh\n{githooks}\n' > .githooks/post-commit; chmod +x .githooks/post-commit
printf 'ref: refs/heads/main\n' > nested/.git/HEAD; mkdir -p nested/.git/objects nested/.git/refs
printf '[core]\n\tfsmonitor = "{nested}"\n' > nested/.git/config
echo planted > planted.txt
echo '{END}'
"#,
        fsmonitor = mark("fsmonitor-from-sandbox"),
        filter = mark("filter-from-sandbox"),
        hook = mark("hook-from-sandbox"),
        githooks = mark("hooks-path-from-sandbox"),
        nested = mark("nested-fsmonitor"),
    )
}

/// What the host plants in the lane's git directory, as a breach of the first layer would.
fn plant_on_host(lane: &Lane, marks: &Path) -> std::io::Result<()> {
    use std::io::Write;
    let mark = |what: &str| format!("touch {}/{what}", marks.display());
    let hooks = lane.git_dir.join("planted-hooks");
    std::fs::create_dir_all(&hooks)?;
    for hook in [
        "pre-commit",
        "prepare-commit-msg",
        "commit-msg",
        "post-commit",
        "reference-transaction",
        "post-checkout",
        "post-index-change",
        "pre-auto-gc",
    ] {
        let path = hooks.join(hook);
        // Written through a child process: a planted hook that failed to start (ETXTBSY,
        // a fork of this process holding it open) would pass for one git did not run.
        let script = format!("#!/bin/sh\n{}\n", mark(hook));
        stet_exec_support::write_executable(&path, script.as_bytes())?;
    }
    let mut config = std::fs::OpenOptions::new()
        .append(true)
        .open(lane.git_dir.join("config"))?;
    write!(
        config,
        "[core]\n\tfsmonitor = \"{fsmonitor}; false\"\n\thooksPath = {hooks}\n\tpager = \"{pager}\"\n\
         [filter \"evil\"]\n\tclean = \"{filter}; cat\"\n\tsmudge = \"{smudge}; cat\"\n\trequired = true\n\
         [diff \"evil\"]\n\ttextconv = \"{textconv}; cat\"\n\
         [diff]\n\texternal = \"{external}\"\n\
         [gpg]\n\tprogram = \"{gpg}\"\n[commit]\n\tgpgSign = true\n\
         [uploadpack]\n\tpackObjectsHook = \"{pack}\"\n",
        fsmonitor = mark("fsmonitor"),
        hooks = hooks.display(),
        pager = mark("pager"),
        filter = mark("filter"),
        smudge = mark("smudge"),
        textconv = mark("textconv"),
        external = mark("external-diff"),
        gpg = mark("gpg"),
        pack = mark("pack-objects-hook"),
    )?;
    std::fs::write(
        lane.git_dir.join("info/attributes"),
        "* filter=evil diff=evil\n",
    )
}

/// Proves `lane-git-inert` on `runtime`.
pub fn prove(settings: &Settings, runtime: &OpenRuntime) -> Result<Wall, Error> {
    let scratch = crate::sandbox::leftovers::temp_dir("stet-lane-git-")
        .map_err(|e| Concept::Walls.failure(format!("cannot make a scratch lane: {e}")))?;
    let root = scratch
        .path()
        .canonicalize()
        .unwrap_or_else(|_| scratch.path().to_path_buf());
    let failure = |e: String| Concept::Walls.failure(format!("the lane-git proof: {e}"));
    let lane = lanes::scratch(&root.join("lane")).map_err(|e| failure(e.to_string()))?;
    let marks = root.join("marks");
    let repo = root.join("repo");
    std::fs::create_dir_all(&marks).map_err(|e| failure(e.to_string()))?;
    crate::git::Inert::at(&root)
        .run(&["init", "--quiet", repo.to_str().unwrap_or_default()])
        .map_err(|e| failure(e.to_string()))?;

    let workdir = lane.dir.display().to_string();
    let probe = Launch {
        process: ProcessSpec {
            argv: vec!["/bin/sh".into(), "-c".into(), sandbox_script(&marks).into()].into(),
            env: vec![stet_plugin_api::EnvVar::new(
                "PATH",
                "/usr/local/bin:/usr/bin:/bin",
            )]
            .into(),
            workdir: ROption::RNone,
            stdin: Default::default(),
        },
        mounts: Default::default(),
        network: Network::None,
    };
    let output = harness::run_launch(
        settings,
        runtime,
        &probe,
        Plan::new("walls", &format!("walls-{}", std::process::id()), &workdir)
            .with_lane(LaneMounts::of_lane(&lane), LaneAccess::ReadWrite),
        harness::Watch {
            time_limit: Some(std::time::Duration::from_secs(120)),
            ..harness::Watch::default()
        },
        None,
    )?;
    let report = String::from_utf8_lossy(&output.stdout);
    let Some(report) = report
        .split_once(BEGIN)
        .and_then(|(_, rest)| rest.split_once(END))
        .map(|(r, _)| r.to_string())
    else {
        return Ok(wall(
            false,
            "the sandbox did not report its attempts on the lane's git directory".into(),
        ));
    };
    let written: Vec<&str> = report
        .lines()
        .filter_map(|l| l.trim().strip_prefix("wrote "))
        .collect();
    let refused = report
        .lines()
        .filter(|l| l.trim().starts_with("refused "))
        .count();

    // The second layer: the same programs planted where the first layer keeps the sandbox
    // out, then stet's own operations on the lane.
    plant_on_host(&lane, &marks).map_err(|e| failure(format!("cannot plant: {e}")))?;
    let operations = operate_on(&lane, &repo);
    let mut ran: Vec<String> = std::fs::read_dir(&marks)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    ran.sort();
    Ok(if !ran.is_empty() {
        wall(
            false,
            format!(
                "stet's git on the lane ran what was planted: {}",
                ran.join(", ")
            ),
        )
    } else if !written.is_empty() {
        wall(
            false,
            format!(
                "the sandbox could write the lane's git directory ({}); nothing of it ran, but the runtime does not hold a read-only mount inside a writable one",
                written.join(", ")
            ),
        )
    } else if let Err(e) = operations {
        wall(false, format!("stet's lane operations failed: {e}"))
    } else if refused == 0 {
        wall(false, "the sandbox reported no attempt".into())
    } else {
        wall(
            true,
            format!(
                "the lane's git directory is read-only in the sandbox ({refused} writes refused); with a hook, an fsmonitor, a filter, a textconv, an external diff, a pager and a signing program planted in it, stet's git on the lane ran none"
            ),
        )
    })
}

/// Stet's own operations on the planted lane, as a drive makes them: a commit the gate
/// refuses (a nested repository, by name), then without it a commit, bringing the branch
/// back, a diff, a log and a restore.
fn operate_on(lane: &Lane, repo: &Path) -> Result<(), crate::git::GitError> {
    let failed = |detail: String| crate::git::GitError {
        args: "commit".into(),
        dir: lane.dir.display().to_string(),
        detail,
    };
    // The nested repository is refused by the gate, by name, before git reads anything.
    match lane.commit_all("the lane-git proof") {
        Err(crate::lanes::CommitError::Refused(why)) if why.contains("nested/.git") => {}
        Err(crate::lanes::CommitError::Git(e)) => return Err(e),
        Err(other) => return Err(failed(other.to_string())),
        Ok(_) => {
            return Err(failed(
                "the gate let a nested repository be committed".to_string(),
            ))
        }
    }
    // Without it (as a round that reads the refusal leaves the lane), the rest is
    // committed by git with every program planted beside it.
    std::fs::remove_dir_all(lane.dir.join("nested")).map_err(|e| failed(e.to_string()))?;
    lane.commit_all("the lane-git proof").map_err(|e| match e {
        crate::lanes::CommitError::Git(e) => e,
        other => failed(other.to_string()),
    })?;
    lane.bring_back(repo)?;
    lane.history().run(&["diff", "HEAD~1", "HEAD", "--stat"])?;
    lane.history().run(&["log", "-p", "-1"])?;
    lane.restore()?;
    Ok(())
}

fn wall(held: bool, detail: String) -> Wall {
    Wall::of_host(
        WALL,
        held,
        detail,
        "do not drive: report this with the runtime's name and version and `git --version`",
    )
}
