//! `stet doctor`: every precondition of a drive, checked in one pass, a line each.
//!
//! Each check says what it saw and, when it fails, what to do. Nothing here changes the
//! repository, the profile or the remote beyond one probe ref it pushes and deletes again
//! (`refs/stet/doctor/<pid>`, in stet's own namespace) to know the remote takes pushes;
//! no agent runs and no model is asked anything.

use std::path::Path;

use serde::Serialize;
use stet_plugin_api::{wall, ProcessSpec, ROption, Role, RoleRequest};

use crate::harness::OpenHarness;
use crate::sandbox::{OpenRuntime, Plan, Sandbox};
use crate::settings::Settings;

/// One precondition's result.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What was checked (`git`, `remote`, `runtime`, `image`, ...).
    pub name: String,
    /// Whether a drive could rely on it.
    pub ok: bool,
    /// What was seen.
    pub detail: String,
    /// When not ok: what to do (`null` in JSON when there is nothing to say, never `""`).
    #[serde(serialize_with = "crate::printer::empty_as_null")]
    pub remedy: String,
}

impl Check {
    fn ok(name: &str, detail: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            ok: true,
            detail: detail.into(),
            remedy: String::new(),
        }
    }

    /// A failed check from a command's error: its message and causes, its hint.
    fn of_error(name: &str, e: &crate::error::Error) -> Check {
        let mut detail = e.message.clone();
        if !e.causes.is_empty() {
            detail = format!("{detail} ({})", e.causes.join("; "));
        }
        Check::fail(name, detail, e.hint.clone().unwrap_or_default())
    }

    fn fail(name: &str, detail: impl Into<String>, remedy: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            ok: false,
            detail: detail.into(),
            remedy: remedy.into(),
        }
    }
}

/// The repository's `stet.toml`, when there is one: whether its content is trusted (by
/// `stet trust`, or as `stet init` wrote it), and what in it is ignored until it is. Never a
/// failure: a drive starts either way, on the person's own settings where it is not.
pub fn configuration(settings: &Settings) -> Option<Check> {
    let repo = settings.repository_config.as_ref()?;
    let path = repo.path.display();
    Some(Check::ok(
        "config",
        if repo.trusted {
            format!("{path} is trusted as it is: all of it applies")
        } else if repo.ignored.is_empty() {
            format!("{path} is not trusted; nothing in it needs trust")
        } else {
            format!(
                "{path} is not trusted, so ignored: {}; stet trust applies them (after reading it)",
                repo.ignored.join(", ")
            )
        },
    ))
}

/// The least free space a drive starts with where lanes are made: the lane disk limit,
/// and never under a gigabyte.
fn disk_needed(settings: &Settings) -> u64 {
    settings.limits.disk_bytes.max(1 << 30)
}

/// Git and the repository's remote: git runs, `cwd` is in a repository, `remote` exists,
/// answers, and takes a push.
pub fn repository(cwd: &Path, remote: &str) -> (Vec<Check>, Option<std::path::PathBuf>) {
    let mut checks = Vec::new();
    match crate::git::run(cwd, &["--version"]) {
        Ok(version) => checks.push(Check::ok("git", version)),
        Err(e) => {
            checks.push(Check::fail(
                "git",
                format!("git does not run: {}", e.detail),
                "install git",
            ));
            return (checks, None);
        }
    }
    let Some(repo) = crate::config::repository_root(cwd) else {
        checks.push(Check::fail(
            "repository",
            format!("{} is not inside a git repository", cwd.display()),
            "run stet doctor in the repository a drive would work on",
        ));
        return (checks, None);
    };
    checks.push(Check::ok("repository", repo.display().to_string()));
    let url = match crate::git::run(&repo, &["remote", "get-url", remote]) {
        Ok(url) => url,
        Err(_) => {
            checks.push(Check::fail(
                "remote",
                format!("the repository has no remote named {remote}"),
                "lanes land as branches on a remote: git remote add origin URL (or pass --remote)",
            ));
            return (checks, Some(repo));
        }
    };
    if let Err(e) = crate::git::run(&repo, &["ls-remote", "--heads", remote]) {
        checks.push(Check::fail(
            "remote",
            format!("{remote} ({url}) does not answer: {}", e.detail),
            "check the URL and your access to it (git ls-remote must work here)",
        ));
        return (checks, Some(repo));
    }
    // The honest test of a push is a push: a probe ref in stet's own namespace, removed
    // again at once.
    let probe = format!("refs/stet/doctor/{}", std::process::id());
    let pushed = crate::git::run(&repo, &["rev-parse", "--verify", "-q", "HEAD^{commit}"])
        .map_err(|_| "the repository has no commit yet to push".to_string())
        .and_then(|head| {
            crate::git::push(&repo, &[remote, &format!("{head}:{probe}")])
                .map_err(|e| e.to_string())
        });
    match pushed {
        Ok(()) => {
            let _ = crate::git::push(&repo, &[remote, &format!(":{probe}")]);
            checks.push(Check::ok("remote", format!("{remote} ({url}) answers and takes pushes")));
        }
        Err(why) => checks.push(Check::fail(
            "remote",
            format!("{remote} ({url}) answers but a push was refused: {why}"),
            "a drive pushes its reservations and lanes: make sure you may push to it (and commit once if the repository is empty)",
        )),
    }
    (checks, Some(repo))
}

/// With `[drive] land = "github"`: `gh` is there and logged in (`gh auth status`, run as the
/// landing runs it: its environment built from scratch; what it prints is not shown, only
/// whether it succeeded and its last line, which names no token).
pub fn pull_requests(settings: &Settings, repo: &Path) -> Option<Check> {
    if settings.drive_land.as_deref() != Some(crate::land::GITHUB) {
        return None;
    }
    let into = settings
        .drive_pull_request_repo
        .as_deref()
        .map(|r| format!(" (pull requests go to {r})"))
        .unwrap_or_default();
    Some(match crate::land::gh(repo, &["auth", "status"]) {
        Ok(_) => Check::ok(
            "pull requests",
            format!("gh is logged in: a landed lane opens a pull request{into}"),
        ),
        Err(why) if why.starts_with("cannot run gh") => Check::fail(
            "pull requests",
            format!("[drive] land = \"github\" opens pull requests with gh: {why}"),
            "install GitHub's CLI (https://cli.github.com), then gh auth login",
        ),
        Err(why) => Check::fail(
            "pull requests",
            format!("[drive] land = \"github\" opens pull requests with gh, not logged in: {why}"),
            "gh auth login (then stet doctor again)",
        ),
    })
}

/// With `[lane] setup`: whether the seed for the base (as last fetched) is built on this
/// clone, and how a lane gets it. Not built is no failure: a drive builds it first.
pub fn seed(settings: &Settings, repo: &Path, remote: &str) -> Option<Check> {
    settings.setup.as_ref()?;
    let Some(base) = crate::base::known(repo, remote) else {
        return Some(Check::fail(
            "seed",
            "[lane] setup runs on the remote's base, and this clone knows none",
            format!("git fetch {remote}"),
        ));
    };
    let copy = "each lane gets a copy of its own (a plain copy: no agent's write reaches the seed)";
    Some(match crate::setup::key_of(repo, settings, &base.commit) {
        Err(e) => Check::of_error("seed", &e),
        Ok(None) => return None,
        Ok(Some(key)) => match crate::seeds::ready(repo, &key) {
            Some(seed) => Check::ok(
                "seed",
                format!(
                    "ready for {} ({}, {}, built {}); {copy}",
                    base.name,
                    seed.outputs.join(", "),
                    crate::printer::size(seed.bytes),
                    crate::timestamp::utc((seed.built_unix_ms / 1000) as i64)
                ),
            ),
            None => Check::ok(
                "seed",
                format!(
                    "not built for {} yet: a drive runs [lane] setup before its first lane (stet seed runs it now); {copy}",
                    base.name
                ),
            ),
        },
    })
}

/// The free space where lanes are made (the repository's git directory).
pub fn disk(settings: &Settings, repo: &Path) -> Check {
    let git_dir = repo.join(".git");
    let at = if git_dir.is_dir() {
        git_dir
    } else {
        repo.to_path_buf()
    };
    match nix::sys::statvfs::statvfs(&at) {
        Ok(stat) => {
            // The counts are u64 on Linux, u32 on macOS.
            #[allow(clippy::useless_conversion)]
            let free =
                u64::from(stat.blocks_available()).saturating_mul(u64::from(stat.fragment_size()));
            let needed = disk_needed(settings);
            let size = crate::printer::size;
            if free >= needed {
                Check::ok(
                    "disk",
                    format!(
                        "{} free for lanes at {}; the disk and files limits {}",
                        size(free),
                        at.display(),
                        crate::lanes::disk::enforcement(settings.lane_file_systems)
                            .describe(&settings.limits)
                    ),
                )
            } else {
                Check::fail(
                    "disk",
                    format!(
                        "only {} free for lanes at {} (a lane may grow to {})",
                        size(free),
                        at.display(),
                        size(needed)
                    ),
                    "free some space, or lower [sandbox] disk",
                )
            }
        }
        Err(e) => Check::fail(
            "disk",
            format!("cannot read the free space at {}: {e}", at.display()),
            "",
        ),
    }
}

/// The runtime: selected and usable, with its probe's version.
pub fn runtime(runtime: &Result<OpenRuntime, crate::error::Error>) -> Check {
    match runtime {
        Ok(r) => Check::ok(
            "runtime",
            format!(
                "{} {}: {} — {}",
                r.name, r.version, r.backend, r.selection.reason
            ),
        ),
        Err(e) => Check::of_error("runtime", e),
    }
}

/// The other runtimes available here, each with its isolation as its probe states it, and
/// how to choose one: never a failure (the selected one is usable), only what a person may
/// prefer. `None` when there is no other, or none was probed (an explicit `--runtime`
/// probes that one alone).
pub fn other_runtimes(runtime: &Result<OpenRuntime, crate::error::Error>) -> Option<Check> {
    let line = runtime.as_ref().ok()?.selection.alternatives_line()?;
    Some(Check::ok("runtimes", line))
}

/// The program the harness would start for an item, as its launch names it (`None` when
/// the harness cannot say: its profile or launch is what the other checks report).
pub fn agent_program(harness: &OpenHarness) -> Option<String> {
    let profile = harness.profile().ok()?;
    let launch = harness
        .launch(RoleRequest {
            role: Role::Implement,
            prompt: "".into(),
            profile_dir: profile.dir.clone(),
            workdir: "/tmp".into(),
        })
        .ok()?;
    launch.process.argv.first().map(|a| a.to_string())
}

/// The check's program when the setup's outputs hold it (a path inside one, such as
/// `.venv/bin/python`): it comes from the seed, not the image. With the output.
fn from_seed(settings: &Settings, check: &str) -> Option<(String, String)> {
    let program = check.split_whitespace().find(|w| {
        !w.split_once('=')
            .is_some_and(|(name, _)| !name.is_empty() && !name.contains('/'))
    })?;
    let relative = program.strip_prefix("./").unwrap_or(program);
    settings
        .setup
        .as_ref()?
        .outputs
        .iter()
        .find(|output| relative.starts_with(&format!("{output}/")))
        .map(|output| (program.to_string(), output.clone()))
}

/// What the image must hold for `check` (a shell command line) to run: its program, after
/// any leading `NAME=value` words — and for `PYTHON -m MODULE`, the module too (a
/// `python3 -m pytest` check needs pytest as much as python3). How it is said, and the
/// shell test that finds it.
fn check_needs(check: &str) -> Option<(String, String)> {
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let mut words = check.split_whitespace().skip_while(|w| {
        w.split_once('=')
            .is_some_and(|(name, _)| !name.is_empty() && !name.contains('/'))
    });
    let program = words.next()?;
    let found = format!("command -v {} >/dev/null", quote(program));
    let base = program.rsplit('/').next().unwrap_or(program);
    let module = match (words.next(), words.next()) {
        (Some("-m"), Some(module)) if base.starts_with("python") => Some(module),
        _ => None,
    };
    Some(match module {
        Some(module) => (
            format!("{program} with the module {module}"),
            format!(
                "{found} && {} -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)' {} 2>/dev/null",
                quote(program),
                quote(module)
            ),
        ),
        None => (program.to_string(), found),
    })
}

/// The image: present for the runtime, and holding sh, git, what `check` (the check
/// command a drive runs) needs and what the harness's agent needs to start (a script's
/// interpreter, a binary's loader). `stet doctor` prints these; a drive refuses before
/// consent when one fails.
pub fn image(
    settings: &Settings,
    runtime: &OpenRuntime,
    check: Option<&str>,
    agent: Option<&str>,
) -> Vec<Check> {
    let image = settings.image.as_str();
    match runtime.handle.image_status(image) {
        Ok(status) if status.present => {}
        Ok(status) => {
            // The recipe `stet init` wrote beside the repository's stet.toml, when there is one.
            let recipe = settings
                .repository_config
                .as_ref()
                .and_then(|r| r.path.parent())
                .map(|root| root.join(crate::init::CONTAINERFILE))
                .filter(|file| file.is_file());
            let remedy = if image == crate::settings::DEFAULT_IMAGE {
                "build it: scripts/build-image.sh (no registry needed)".to_string()
            } else if let Some(recipe) = recipe {
                format!(
                    "build it from {} (its first lines say how), or name another with [sandbox] image",
                    recipe.display()
                )
            } else {
                format!(
                    "build or load {image} for {} ({}), or name another with [sandbox] image",
                    runtime.name, status.remedy
                )
            };
            return vec![Check::fail(
                "image",
                format!("{image} is not available to {}", runtime.name),
                remedy,
            )];
        }
        Err(e) => {
            return vec![Check::fail(
                "image",
                format!("{} could not look {image} up: {}", runtime.name, e.message),
                e.remedy.to_string(),
            )]
        }
    }
    let mut checks = vec![Check::ok(
        "image",
        format!("{image} is available to {}", runtime.name),
    )];
    // What to look for inside: each a name, what it is, and a shell test that succeeds
    // when the image has it.
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let found = |probe: &str| {
        if probe.starts_with('/') {
            format!("test -e {}", quote(probe))
        } else {
            format!("command -v {} >/dev/null", quote(probe))
        }
    };
    let mut wanted: Vec<(String, String, String)> = vec![
        ("image-sh".into(), "sh".into(), found("/bin/sh")),
        ("image-git".into(), "git".into(), found("git")),
    ];
    let seeded = check.and_then(|c| from_seed(settings, c));
    if let Some((program, output)) = &seeded {
        checks.push(Check::ok(
            "image-check",
            format!(
                "the check's {program} comes from the seed ({output}, [lane] setup), not the image"
            ),
        ));
    } else if let Some((what, test)) = check.and_then(check_needs) {
        wanted.push(("image-check".into(), what, test));
    }
    if let Some((needed, why)) = agent.and_then(needs_to_start) {
        wanted.push(("image-agent".into(), why, found(&needed)));
    }
    let script: String = wanted
        .iter()
        .enumerate()
        .map(|(i, (_, _, test))| {
            format!("if {test}; then echo 'has {i}'; else echo 'lacks {i}'; fi\n")
        })
        .collect();
    let seen = run_in_image(settings, runtime, &script);
    for (i, (name, what, _)) in wanted.iter().enumerate() {
        let has = seen
            .as_ref()
            .map(|out| out.lines().any(|l| l == format!("has {i}")));
        checks.push(match (has, name.as_str()) {
            (Ok(true), _) => Check::ok(name, format!("{image} has {what}")),
            (Ok(false), "image-check") => Check::fail(
                name,
                format!("{image} lacks {what}, which the check `{}` runs", check.unwrap_or_default()),
                format!("use an image with {what} in it ([sandbox] image; see \"Your own image\" in docs/configuration.md)"),
            ),
            (Ok(false), "image-agent") => Check::fail(
                name,
                format!("{image} lacks {what}, so the agent cannot start inside it"),
                "install it in the image (or use a build of the agent that needs none)".to_string(),
            ),
            (Ok(false), _) => Check::fail(
                name,
                format!("{image} lacks {what}"),
                format!("every sandbox needs {what}: use an image with it ([sandbox] image)"),
            ),
            (Err(why), _) => Check::fail(name, format!("cannot look inside {image}: {why}"), ""),
        });
    }
    checks
}

/// What `program` needs in the image to start, and how to say it: a script's interpreter
/// (`#!/usr/bin/env node` needs node), a dynamically linked binary's loader.
fn needs_to_start(program: &str) -> Option<(String, String)> {
    use std::io::Read;
    let mut head = vec![0u8; 4096];
    let read = std::fs::File::open(program)
        .and_then(|mut f| f.read(&mut head))
        .ok()?;
    head.truncate(read);
    if let Some(line) = head.strip_prefix(b"#!") {
        let line = String::from_utf8_lossy(line);
        let line = line.lines().next().unwrap_or("").trim().to_string();
        let mut words = line.split_whitespace().filter(|w| !w.starts_with('-'));
        let first = words.next()?.to_string();
        let needed = if first.ends_with("/env") {
            words.next()?.to_string()
        } else {
            first
        };
        let name = needed.rsplit('/').next().unwrap_or(&needed).to_string();
        return Some((needed, format!("{name}, which runs {program} (`#!{line}`)")));
    }
    let interpreter = elf_interpreter(program)?;
    Some((
        interpreter.clone(),
        format!("{interpreter}, the loader {program} is linked against"),
    ))
}

/// The `PT_INTERP` of a 64-bit little-endian ELF file, if it has one.
fn elf_interpreter(path: &str) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path).ok()?;
    let mut header = [0u8; 64];
    file.read_exact(&mut header).ok()?;
    if &header[..4] != b"\x7fELF" || header[4] != 2 || header[5] != 1 {
        return None;
    }
    let u16_at = |b: &[u8], o: usize| Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |b: &[u8], o: usize| Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |b: &[u8], o: usize| Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?));
    let phoff = u64_at(&header, 0x20)?;
    let (size, count) = (
        u64::from(u16_at(&header, 0x36)?),
        u64::from(u16_at(&header, 0x38)?),
    );
    if size < 56 || count > 256 {
        return None;
    }
    let mut table = vec![0u8; usize::try_from(size * count).ok()?];
    file.seek(SeekFrom::Start(phoff)).ok()?;
    file.read_exact(&mut table).ok()?;
    for entry in table.chunks(usize::try_from(size).ok()?) {
        if u32_at(entry, 0)? == 3 {
            let (offset, length) = (u64_at(entry, 8)?, u64_at(entry, 32)?);
            if length == 0 || length > 4096 {
                return None;
            }
            let mut interp = vec![0u8; usize::try_from(length).ok()?];
            file.seek(SeekFrom::Start(offset)).ok()?;
            file.read_exact(&mut interp).ok()?;
            let text = String::from_utf8_lossy(&interp)
                .trim_end_matches('\0')
                .to_string();
            return Some(text);
        }
    }
    None
}

/// Runs `script` with sh in a fresh sandbox of the image (no lane, no network); its output.
fn run_in_image(
    settings: &Settings,
    runtime: &OpenRuntime,
    script: &str,
) -> Result<String, String> {
    let run = format!("doctor-{}", std::process::id());
    let plan = Plan::new("doctor", &run, "/tmp");
    let env = plan.env.clone();
    let (sandbox, _) =
        Sandbox::start(runtime, plan.spec(settings), Vec::new()).map_err(|e| e.message.clone())?;
    let process = sandbox
        .spawn(ProcessSpec {
            argv: vec!["/bin/sh".into(), "-c".into(), script.into()].into(),
            env: env.into(),
            workdir: ROption::RSome("/tmp".into()),
            stdin: Default::default(),
        })
        .map_err(|e| e.message.clone())?;
    let out = std::sync::Mutex::new(Vec::new());
    let status = process
        .wait(&mut |_, bytes| {
            out.lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(bytes)
        })
        .map_err(|e| e.message.clone())?;
    let out =
        String::from_utf8_lossy(&out.into_inner().unwrap_or_else(|p| p.into_inner())).into_owned();
    if status.code.into_option() == Some(127) && out.is_empty() {
        return Err("the image has no /bin/sh".into());
    }
    Ok(out)
}

/// The harness: selected, its profile present and alone, logged in by state, no billing
/// key in the environment. (The settings are rewritten by a drive, so not checked.)
pub fn harness(harness: &Result<OpenHarness, crate::error::Error>) -> Vec<Check> {
    let h = match harness {
        Ok(h) => h,
        Err(e) => return vec![Check::of_error("harness", e)],
    };
    let mut checks = vec![Check::ok(
        "harness",
        format!("{} {} — {}", h.name, h.version, h.selection.reason),
    )];
    let profile = match h.profile() {
        Ok(p) => p,
        Err(e) => {
            checks.push(Check::of_error("profile", &e));
            return checks;
        }
    };
    match h.check_walls(&profile) {
        Ok(walls) => {
            for w in walls {
                let name = match w.wall.as_str() {
                    wall::PROFILE_ALONE => "profile",
                    wall::LOGIN_PRESENT => "login",
                    wall::NO_BILLING_KEY => "billing-key",
                    _ => continue,
                };
                checks.push(if w.held() {
                    Check::ok(name, w.detail.to_string())
                } else {
                    Check::fail(name, w.detail.to_string(), w.remedy.to_string())
                });
            }
        }
        Err(e) => checks.push(Check::of_error("profile", &e)),
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_check_needs_is_its_program_after_assignments_and_a_pythons_module() {
        let what = |check: &str| check_needs(check).map(|(what, _)| what);
        assert_eq!(what("cargo test").as_deref(), Some("cargo"));
        assert_eq!(
            what("RUST_LOG=1 CI=true cargo test").as_deref(),
            Some("cargo")
        );
        assert_eq!(
            what("python3 -m pytest -q").as_deref(),
            Some("python3 with the module pytest")
        );
        assert_eq!(
            what("/usr/bin/python3.11 -m unittest").as_deref(),
            Some("/usr/bin/python3.11 with the module unittest")
        );
        // A -m that is not a python's is the program's own option.
        assert_eq!(what("make -m x").as_deref(), Some("make"));
        assert_eq!(what("  ").as_deref(), None);
        let (_, test) = check_needs("python3 -m pytest").unwrap();
        assert!(
            test.starts_with("command -v 'python3' >/dev/null && 'python3' -c ")
                && test.ends_with(" 'pytest' 2>/dev/null"),
            "{test}"
        );
    }

    #[test]
    fn what_an_agent_needs_to_start_is_read_from_its_first_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join("cli.js");
        std::fs::write(&node, "#!/usr/bin/env node\nconsole.log(1)\n").unwrap();
        let (needed, why) = needs_to_start(node.to_str().unwrap()).unwrap();
        assert_eq!(needed, "node");
        assert!(why.starts_with("node, which runs "), "{why}");
        let sh = dir.path().join("agent.sh");
        std::fs::write(&sh, "#!/bin/sh -e\necho\n").unwrap();
        assert_eq!(needs_to_start(sh.to_str().unwrap()).unwrap().0, "/bin/sh");
        // This very test binary is a dynamically linked ELF: its loader.
        let me = std::env::current_exe().unwrap();
        let (loader, _) = needs_to_start(me.to_str().unwrap()).unwrap();
        assert!(loader.starts_with('/') && loader.contains("ld"), "{loader}");
        let data = dir.path().join("data");
        std::fs::write(&data, "plain text").unwrap();
        assert_eq!(needs_to_start(data.to_str().unwrap()), None);
    }
}
