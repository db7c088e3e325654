//! Sandboxes as containers (each its own lightweight VM): create, remove, list, and the
//! image check before creating.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use stet_plugin_api::{
    ErrorCode, ImageStatus, Label, Mount, Network, PluginError, SandboxInfo, SandboxSpec,
};

use crate::cli::{self, Cli, Kind};
use crate::json;

/// What every sandbox runs as its main process: nothing, for ever. Work arrives through
/// `container exec`.
const IDLE: [&str; 2] = ["sleep", "infinity"];

/// The smallest memory limit the service accepts (ContainersService.swift).
pub const MIN_MEMORY: u64 = 200 << 20;

const MIB: u64 = 1 << 20;

/// The remedy for an image missing from the local store.
pub fn missing_image(image: &str) -> String {
    format!(
        "image {image} is not in the local image store of Apple's container tool; load it \
         there (`container image load -i <archive.tar>`) or pull it (`container image pull \
         {image}`); stet never pulls images"
    )
}

/// Refuses what the CLI would misread: an id or image that looks like an option.
pub fn check_operand(what: &str, value: &str) -> Result<(), PluginError> {
    if value.is_empty() {
        return Err(PluginError::invalid_input(format!("no {what} given")));
    }
    if value.starts_with('-') {
        return Err(PluginError::invalid_input(format!(
            "{what} `{value}` starts with `-`, which the container CLI would read as an option"
        )));
    }
    Ok(())
}

/// Everything about a spec that can be refused before any command runs.
pub fn check(spec: &SandboxSpec) -> Result<(), PluginError> {
    check_operand("image", &spec.image)?;
    for mount in spec.mounts.iter() {
        check_mount(mount)?;
    }
    for label in spec.labels.iter() {
        check_label(label)?;
    }
    for var in spec.env.iter() {
        check_env_name(&var.name)?;
    }
    let memory = spec.limits.memory_bytes;
    if memory > 0 && memory < MIN_MEMORY {
        return Err(PluginError::invalid_input(format!(
            "a memory limit of {} MiB is below the 200 MiB Apple's container tool accepts",
            memory / MIB
        ))
        .with_remedy("ask for at least 200 MiB, or for no memory limit (1 GiB by default)"));
    }
    if let Network::AllowHosts(_) = spec.network {
        return Err(PluginError::unsupported(
            "the apple-container plugin cannot limit egress to named hosts",
        )
        .with_remedy("ask for no network or the open network"));
    }
    Ok(())
}

fn check_mount(mount: &Mount) -> Result<(), PluginError> {
    // `-v` takes a source without a `/` as the name of a volume, and creates it silently;
    // a relative path would be resolved against wherever the CLI happens to run.
    if !mount.source.starts_with('/') || !mount.target.starts_with('/') {
        return Err(PluginError::invalid_input(format!(
            "mount {} -> {} is not between absolute paths; Apple's container tool would take \
             a source that is not a path as the name of a volume",
            mount.source, mount.target
        )));
    }
    // `-v src:dst:opts` has no quoting.
    if mount.source.contains(':') || mount.target.contains(':') {
        return Err(PluginError::invalid_input(format!(
            "mount {} -> {} has a `:` in a path, which `container run -v` cannot express",
            mount.source, mount.target
        )));
    }
    if !Path::new(mount.source.as_str()).exists() {
        return Err(PluginError::not_found(format!(
            "mount source {} does not exist on the host",
            mount.source
        )));
    }
    Ok(())
}

fn check_label(label: &Label) -> Result<(), PluginError> {
    // The CLI splits `-l key=value` at `=` and refuses a value holding another one; a
    // label is stored as given or not at all, never encoded, so that listing by label
    // compares exactly what was asked for.
    if label.key.is_empty() || label.key.contains('=') || label.value.contains('=') {
        return Err(PluginError::invalid_input(format!(
            "label `{}` = `{}` cannot be given to Apple's container tool: keys must be \
             non-empty, and neither a key nor a value may contain `=`",
            label.key, label.value
        )));
    }
    Ok(())
}

/// An environment variable's name must be a name: `-e NAME` alone would copy the CLI's
/// own variable, and a `=` in it would split differently.
pub fn check_env_name(name: &str) -> Result<(), PluginError> {
    if name.is_empty() || name.contains('=') {
        return Err(PluginError::invalid_input(format!(
            "environment variable name `{name}` is empty or contains `=`"
        )));
    }
    Ok(())
}

/// The mounts a sandbox gets: the spec's, plus, for each writable mount that is a git
/// worktree, the repository it belongs to.
///
/// A worktree's `.git` is a file (`gitdir: /abs/main/.git/worktrees/<name>`) pointing out
/// of the mount by absolute path; inside the sandbox git would stop with "not a git
/// repository". So the directory it points into (the main repository's `.git`, its
/// "common dir") is mounted too, writable, at the identical path, as git needs it to
/// commit. Relative `gitdir:` lines (submodules) stay inside their repository and are
/// left alone, as is a common dir some mount already shows at the same path.
pub fn with_git_dirs(mounts: &[Mount]) -> Vec<Mount> {
    let mut all: Vec<Mount> = mounts.to_vec();
    for mount in mounts.iter().filter(|m| m.writable) {
        let Some(common) = git_common_dir(Path::new(mount.source.as_str())) else {
            continue;
        };
        let common_text = common.display().to_string();
        let shown = all.iter().any(|m| {
            m.source == m.target && Path::new(common_text.as_str()).starts_with(m.source.as_str())
        });
        if !shown && !common_text.contains(':') {
            all.push(Mount {
                source: common_text.clone().into(),
                target: common_text.into(),
                writable: true,
            });
        }
    }
    all
}

/// The common git directory a worktree's `.git` file points to, when it points outside
/// by absolute path.
fn git_common_dir(worktree: &Path) -> Option<PathBuf> {
    let dot_git = worktree.join(".git");
    if !dot_git.is_file() {
        return None;
    }
    let text = std::fs::read_to_string(&dot_git).ok()?;
    let gitdir = text
        .lines()
        .find_map(|l| l.strip_prefix("gitdir:"))
        .map(str::trim)?;
    let gitdir = Path::new(gitdir);
    if !gitdir.is_absolute() || gitdir.starts_with(worktree) {
        return None;
    }
    // `<main>/.git/worktrees/<name>/commondir` holds `../..`: the main `.git`. Without
    // it (a separate git dir, `git init --separate-git-dir`) the git dir is all there is.
    let common = match std::fs::read_to_string(gitdir.join("commondir")) {
        Ok(relative) => {
            let relative = Path::new(relative.trim());
            let joined = if relative.is_absolute() {
                relative.to_path_buf()
            } else {
                gitdir.join(relative)
            };
            joined.canonicalize().unwrap_or(joined)
        }
        Err(_) => gitdir.to_path_buf(),
    };
    common.is_dir().then_some(common)
}

/// A fresh sandbox name: `stet-<pid>-<time>-<n>`, valid for the CLI
/// (`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`, at most 63 characters) and unique among this host's.
pub fn fresh_name() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    format!(
        "stet-{:x}-{:x}-{}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// The arguments of the `container run` that creates and starts a sandbox.
///
/// `container run -d --name <name> --progress none -l k=v… [--cpus N] [--memory NM]
/// -v /src:/dst[:ro]… [-w dir] -e K=V… -u 0:0 [--network none] <image> sleep infinity`.
pub fn run_args(name: &str, spec: &SandboxSpec, mounts: &[Mount]) -> Vec<String> {
    let mut args: Vec<String> = ["run", "-d", "--name", name, "--progress", "none"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for label in spec.labels.iter() {
        args.push("-l".into());
        args.push(format!("{}={}", label.key, label.value));
    }
    let limits = spec.limits;
    if limits.millicpus > 0 {
        // Whole CPUs only: a fraction is rounded up.
        args.push("--cpus".into());
        args.push(limits.millicpus.div_ceil(1000).to_string());
    }
    if limits.memory_bytes > 0 {
        // 1 MiB granularity: rounded up.
        args.push("--memory".into());
        args.push(format!("{}M", limits.memory_bytes.div_ceil(MIB)));
    }
    for mount in mounts {
        args.push("-v".into());
        let mut volume = format!("{}:{}", mount.source, mount.target);
        if !mount.writable {
            volume.push_str(":ro");
        }
        args.push(volume);
    }
    if !spec.workdir.is_empty() {
        args.push("-w".into());
        args.push(spec.workdir.to_string());
    }
    for var in spec.env.iter() {
        args.push("-e".into());
        args.push(format!("{}={}", var.name, var.value));
    }
    // Root inside: bind mounts have no uid mapping, so any other user could not write
    // the lane (see the crate docs); `spec.user` is not used.
    args.push("-u".into());
    args.push("0:0".into());
    if spec.network == Network::None {
        args.push("--network".into());
        args.push("none".into());
    }
    args.push(spec.image.to_string());
    args.extend(IDLE.iter().map(|s| s.to_string()));
    args
}

/// Whether `image` is in the local store: `container image inspect` exits 0.
pub fn image_status(cli: &Cli, image: &str) -> Result<ImageStatus, PluginError> {
    check_operand("image", image)?;
    let args = ["image", "inspect", image];
    let out = cli.run(&args, cli.limits.command)?;
    if out.success() {
        return Ok(ImageStatus {
            present: true,
            remedy: Default::default(),
        });
    }
    let error = cli::failure(&args, &out);
    if error.code == ErrorCode::UNAVAILABLE {
        return Err(error);
    }
    Ok(ImageStatus {
        present: false,
        remedy: missing_image(image).into(),
    })
}

/// Creates and starts a sandbox.
pub fn create(cli: &Cli, spec: SandboxSpec) -> Result<SandboxInfo, PluginError> {
    check(&spec)?;
    let status = image_status(cli, &spec.image)?;
    if !status.present {
        return Err(
            PluginError::not_found(format!("image {} is not available", spec.image))
                .with_remedy(status.remedy.as_str()),
        );
    }
    let mounts = with_git_dirs(&spec.mounts);
    let name = fresh_name();
    let args = run_args(&name, &spec, &mounts);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let failed = |error: PluginError| {
        // `run` removes what it made when it fails by itself; a run killed at its limit
        // may have left the container behind.
        let _ = remove(cli, &name);
        Err(error)
    };
    let out = match cli.run(&args, cli.limits.start) {
        Ok(out) => out,
        Err(e) => return failed(e),
    };
    if !out.success() {
        let mut error = cli::failure(&args, &out);
        error.message = format!(
            "could not start a sandbox from {}: {}",
            spec.image, error.message
        )
        .into();
        // The image was there a moment ago; a registry error means `run` went to fetch it.
        if error.message.contains("HTTP request to") || error.code == ErrorCode::NOT_FOUND {
            error.code = ErrorCode::NOT_FOUND;
            error.remedy = missing_image(&spec.image).into();
        }
        return failed(error);
    }
    // `run -d` prints the id, which is the name given.
    let id = out
        .stdout
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or(&name)
        .to_string();
    Ok(SandboxInfo {
        id: id.into(),
        state: "running".into(),
        labels: spec.labels,
    })
}

/// How often a delete caught between states (the delete-right-after-stop race) is tried.
const BUSY_TRIES: u32 = 5;

/// Stops and removes a sandbox; one already gone is success.
///
/// `container delete --force <id>`. A delete that hangs (apple/container#754, #1884) is
/// killed at its limit, the container stopped (`container stop -t 1 <id>`) and the
/// delete tried once more. A container caught between states is retried after a pause.
pub fn remove(cli: &Cli, id: &str) -> Result<(), PluginError> {
    check_operand("sandbox id", id)?;
    let delete = ["delete", "--force", id];
    let mut hung = false;
    let mut busy = 0;
    loop {
        match cli.run(&delete, cli.limits.command) {
            Ok(out) if out.success() => return Ok(()),
            Ok(out) => {
                let text = cli::error_text(&out.stderr);
                match cli::classify(&text, out.code) {
                    Kind::NotFound => return Ok(()),
                    Kind::Busy if busy + 1 < BUSY_TRIES => {
                        busy += 1;
                        std::thread::sleep(Duration::from_millis(250 * u64::from(busy)));
                    }
                    _ => {
                        let mut e = cli::failure(&delete, &out);
                        e.message = format!("could not remove sandbox {id}: {}", e.message).into();
                        return Err(e);
                    }
                }
            }
            Err(e) if e.code == ErrorCode::TIMEOUT && !hung => {
                hung = true;
                let _ = cli.run(&["stop", "-t", "1", id], cli.limits.command);
            }
            Err(mut e) => {
                e.message = format!("could not remove sandbox {id}: {}", e.message).into();
                if e.code == ErrorCode::TIMEOUT {
                    e.remedy = format!(
                        "{}; the sandbox may be left behind, and `stet gc` removes it later",
                        cli::RESTART_REMEDY
                    )
                    .into();
                }
                return Err(e);
            }
        }
    }
}

/// Lists the sandboxes that carry every one of `labels`. The CLI has no filter, so every
/// container is listed and the labels compared here.
pub fn list(cli: &Cli, labels: &[Label]) -> Result<Vec<SandboxInfo>, PluginError> {
    if labels.is_empty() {
        return Err(PluginError::invalid_input(
            "listing sandboxes needs at least one label, so that only stet's are touched",
        ));
    }
    let out = cli.run_ok(&["list", "--all", "--format", "json"], cli.limits.command)?;
    let listed = json::parse_list(&out.stdout).map_err(|why| {
        PluginError::backend(format!("could not read `container list` output: {why}"))
            .with_remedy("install a container version this plugin reads (0.8 or later)")
    })?;
    Ok(select(listed, labels))
}

/// The listed containers carrying every one of `labels`.
pub fn select(listed: Vec<json::Listed>, labels: &[Label]) -> Vec<SandboxInfo> {
    listed
        .into_iter()
        .filter(|c| {
            labels.iter().all(|want| {
                c.labels
                    .iter()
                    .any(|(k, v)| k == want.key.as_str() && v == want.value.as_str())
            })
        })
        .map(|c| SandboxInfo {
            id: c.id.into(),
            state: c.state.into(),
            labels: c
                .labels
                .into_iter()
                .map(|(k, v)| Label::new(k, v))
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use stet_plugin_api::{EnvVar, Limits, ROption, UserIds};

    fn spec(mounts: Vec<Mount>) -> SandboxSpec {
        SandboxSpec {
            image: "stet-lane:1".into(),
            mounts: mounts.into(),
            env: vec![
                EnvVar::new("PATH", "/usr/bin:/bin"),
                EnvVar::new("GIT_CONFIG_VALUE_0", "a=b c"),
            ]
            .into(),
            workdir: "/lane".into(),
            network: Network::None,
            limits: Limits {
                millicpus: 1500,
                memory_bytes: 512 << 20,
                pids: 256,
            },
            labels: vec![
                Label::new("stet.managed", "true"),
                Label::new("stet.owner", "12:34"),
            ]
            .into(),
            user: ROption::RSome(UserIds {
                uid: 1000,
                gid: 1000,
            }),
        }
    }

    fn mount(source: &str, target: &str, writable: bool) -> Mount {
        Mount {
            source: source.into(),
            target: target.into(),
            writable,
        }
    }

    #[test]
    fn the_exact_run_command() {
        let mounts = [
            mount("/work/lane", "/lane", true),
            mount("/opt/tool", "/opt/tool", false),
        ];
        let args = run_args("stet-1-2-0", &spec(mounts.to_vec()), &mounts);
        assert_eq!(
            args,
            [
                "run",
                "-d",
                "--name",
                "stet-1-2-0",
                "--progress",
                "none",
                "-l",
                "stet.managed=true",
                "-l",
                "stet.owner=12:34",
                "--cpus",
                "2",
                "--memory",
                "512M",
                "-v",
                "/work/lane:/lane",
                "-v",
                "/opt/tool:/opt/tool:ro",
                "-w",
                "/lane",
                "-e",
                "PATH=/usr/bin:/bin",
                "-e",
                "GIT_CONFIG_VALUE_0=a=b c",
                "-u",
                "0:0",
                "--network",
                "none",
                "stet-lane:1",
                "sleep",
                "infinity"
            ]
        );
    }

    #[test]
    fn defaults_leave_their_flags_out_and_the_open_network_is_the_default_one() {
        let mut s = spec(vec![]);
        s.limits = Limits::default();
        s.network = Network::Open;
        s.workdir = "".into();
        s.labels = vec![Label::new("stet.managed", "true")].into();
        s.env = Default::default();
        let args = run_args("n1", &s, &[]);
        assert_eq!(
            args,
            [
                "run",
                "-d",
                "--name",
                "n1",
                "--progress",
                "none",
                "-l",
                "stet.managed=true",
                "-u",
                "0:0",
                "stet-lane:1",
                "sleep",
                "infinity"
            ]
        );
    }

    #[test]
    fn cpus_and_memory_round_up() {
        let mut s = spec(vec![]);
        s.limits.millicpus = 1;
        s.limits.memory_bytes = MIN_MEMORY + 1;
        let args = run_args("n1", &s, &[]);
        let at = |flag: &str| args[args.iter().position(|a| a == flag).unwrap() + 1].clone();
        assert_eq!(at("--cpus"), "1");
        assert_eq!(at("--memory"), "201M");
    }

    #[test]
    fn memory_below_200_mib_is_refused() {
        let mut s = spec(vec![]);
        s.limits.memory_bytes = 32 << 20;
        let e = check(&s).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_INPUT);
        assert!(
            e.message.contains("32 MiB is below the 200 MiB"),
            "{}",
            e.message
        );
        s.limits.memory_bytes = MIN_MEMORY;
        check(&s).unwrap();
        s.limits.memory_bytes = 0;
        check(&s).unwrap();
    }

    #[test]
    fn relative_and_named_sources_are_refused() {
        for source in ["lane", "./lane", "volume-name", ""] {
            let e = check(&spec(vec![mount(source, "/lane", true)])).unwrap_err();
            assert_eq!(e.code, ErrorCode::INVALID_INPUT, "{source}");
            assert!(
                e.message.contains("not between absolute paths"),
                "{}",
                e.message
            );
        }
        let e = check(&spec(vec![mount("/tmp", "lane", true)])).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_INPUT);
    }

    #[test]
    fn colons_in_paths_and_missing_sources_are_refused() {
        let e = check(&spec(vec![mount("/tmp/a:b", "/lane", true)])).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_INPUT);
        let e = check(&spec(vec![mount("/no/such/dir/here", "/lane", true)])).unwrap_err();
        assert_eq!(e.code, ErrorCode::NOT_FOUND);
    }

    #[test]
    fn labels_with_an_equals_sign_are_refused() {
        let mut s = spec(vec![]);
        s.labels = vec![Label::new("stet.x", "a=b")].into();
        let e = check(&s).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_INPUT);
        assert!(e.message.contains("may contain `=`"), "{}", e.message);
        s.labels = vec![Label::new("", "v")].into();
        assert!(check(&s).is_err());
        s.labels = vec![Label::new("k=x", "v")].into();
        assert!(check(&s).is_err());
    }

    #[test]
    fn bad_env_names_an_allow_list_and_option_like_images_are_refused() {
        let mut s = spec(vec![]);
        s.env = vec![EnvVar::new("A=B", "c")].into();
        assert_eq!(check(&s).unwrap_err().code, ErrorCode::INVALID_INPUT);
        let mut s = spec(vec![]);
        s.network = Network::AllowHosts(vec!["api.example.com".into()].into());
        assert_eq!(check(&s).unwrap_err().code, ErrorCode::UNSUPPORTED);
        let mut s = spec(vec![]);
        s.image = "--privileged".into();
        assert_eq!(check(&s).unwrap_err().code, ErrorCode::INVALID_INPUT);
    }

    #[test]
    fn fresh_names_are_valid_container_ids() {
        let a = fresh_name();
        let b = fresh_name();
        assert_ne!(a, b);
        for name in [a, b] {
            assert!(name.len() <= 63, "{name}");
            assert!(name.starts_with("stet-"));
            assert!(name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)));
        }
    }

    fn git(dir: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
    }

    #[test]
    fn a_worktree_gets_its_repository_mounted_at_the_same_path() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().canonicalize().unwrap();
        let main = root.join("main");
        std::fs::create_dir(&main).unwrap();
        git(&main, &["init", "--quiet"]);
        git(
            &main,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "--quiet",
                "--allow-empty",
                "-m",
                "start",
            ],
        );
        git(&main, &["worktree", "add", "--quiet", "../wt"]);
        let wt = root.join("wt").display().to_string();
        let common = main.join(".git").display().to_string();

        let mounts = with_git_dirs(&[mount(&wt, "/lane", true)]);
        assert_eq!(
            mounts,
            [mount(&wt, "/lane", true), mount(&common, &common, true)]
        );
        // Read-only mounts are not followed; a plain repository needs nothing more.
        assert_eq!(with_git_dirs(&[mount(&wt, "/lane", false)]).len(), 1);
        let plain = main.display().to_string();
        assert_eq!(with_git_dirs(&[mount(&plain, "/lane", true)]).len(), 1);
        // Already shown at the identical path: not mounted twice.
        let root_text = root.display().to_string();
        let both = [
            mount(&wt, "/lane", true),
            mount(&root_text, &root_text, true),
        ];
        assert_eq!(with_git_dirs(&both).len(), 2);
    }

    #[test]
    fn listing_selects_by_every_label() {
        let listed = json::parse_list(
            r#"[{"id":"a","status":{"state":"running"},"configuration":{"labels":{"stet.managed":"true","stet.run":"1"}}},
                {"id":"b","status":"stopped","configuration":{"labels":{"stet.managed":"true","stet.run":"2"}}},
                {"id":"c","status":{"state":"running"},"configuration":{"labels":{}}}]"#,
        )
        .unwrap();
        let found = select(listed.clone(), &[Label::new("stet.managed", "true")]);
        let ids: Vec<&str> = found.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        let found = select(
            listed,
            &[
                Label::new("stet.managed", "true"),
                Label::new("stet.run", "2"),
            ],
        );
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].id.as_str(), "b");
        assert_eq!(found[0].state.as_str(), "stopped");
        assert_eq!(found[0].labels.len(), 2);
    }
}
