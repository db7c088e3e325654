//! Test support for the end-to-end tests: a scratch home for each test, plugin
//! directories assembled from the built libraries, and the real `stet` binary run in it.
//!
//! The binaries and libraries come from the workspace build (`cargo build --workspace`,
//! which `cargo xtask test` runs first); a missing one fails the test loudly with what to
//! run, rather than skipping.

pub mod board;
pub mod fake_api;
pub mod fake_responses;
pub mod http;
pub mod oauth_double;

use std::path::{Path, PathBuf};
use std::process::Command;

pub use xtask::{install_plugin, plugin_crates, repo_root, PluginCrate};

/// The cargo profile directory holding the built `stet` and plugin libraries.
pub fn artifacts() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // target/<profile>/deps/<test-binary>
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .to_path_buf();
    let stet = dir.join("stet");
    assert!(
        stet.is_file(),
        "{} is missing: run `cargo build --workspace` first (`cargo xtask test` does)",
        stet.display()
    );
    dir
}

/// The real Claude Code binary installed by `scripts/install-claude.sh`.
pub fn claude_binary() -> PathBuf {
    let path = std::env::var_os("STET_TEST_CLAUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/tools/claude/claude"));
    assert!(
        path.is_file(),
        "the real Claude Code binary is not installed at {}: run scripts/install-claude.sh (`cargo xtask test` does)",
        path.display()
    );
    path
}

/// The real Codex CLI binary installed by `scripts/install-codex.sh` (`bin/codex` of the
/// whole bundled tree: its bubblewrap is found beside it, at `../codex-resources/`).
pub fn codex_binary() -> PathBuf {
    let path = std::env::var_os("STET_TEST_CODEX")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/tools/codex/bin/codex"));
    assert!(
        path.is_file(),
        "the real Codex CLI binary is not installed at {}: run scripts/install-codex.sh (`cargo xtask test` does)",
        path.display()
    );
    path
}

/// The lane image the sandbox tests use; built by `scripts/build-image.sh`.
pub const IMAGE: &str = "stet-lane:1";

/// Fails loudly when the lane image is not loaded in the engine.
/// Whether a sandbox owned by process `pid` runs a process whose command line holds
/// `command` (as the engine's `docker top` lists them).
pub fn runs_in_sandbox_of(pid: u32, command: &str) -> bool {
    sandbox_ids_owned_by(pid).iter().any(|id| {
        let out = Command::new("docker")
            .args(["top", id])
            .output()
            .expect("run the docker CLI");
        String::from_utf8_lossy(&out.stdout).contains(command)
    })
}

/// Returns once the wall clock has moved to the next millisecond: `stet add` names items by
/// the time to the millisecond, so two items added across this keep their order.
pub fn next_millisecond() {
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
    };
    let start = now();
    while now() == start {
        std::thread::yield_now();
    }
}

/// A test that cannot run here fails, saying why and how to leave it out on purpose: a
/// test that passes without running would say something it never checked.
pub fn require(condition: bool, test: &str, why: &str) {
    assert!(
        condition,
        "{test} cannot run here: {why}. Leave it out by name if that is intended: \
         cargo xtask test -- -- --skip {test}"
    );
}

pub fn require_image() {
    let out = Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", IMAGE])
        .output()
        .expect("run the docker CLI");
    assert!(
        out.status.success(),
        "{IMAGE} is not loaded: run scripts/build-image.sh (`cargo xtask test` does)"
    );
}

/// Ids of the containers carrying `label` (`key=value`), as the engine lists them.
pub fn containers_with_label(label: &str) -> Vec<String> {
    let out = Command::new("docker")
        .args(["ps", "--all", "--quiet", "--no-trunc", "--filter"])
        .arg(format!("label={label}"))
        .output()
        .expect("run the docker CLI");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// How many of stet's sandboxes (label `stet.managed=true`) the process `pid` owns, by
/// their `stet.owner` label (`<pid>:<start time>`).
pub fn sandboxes_owned_by(pid: u32) -> usize {
    sandbox_ids_owned_by(pid).len()
}

fn sandbox_ids_owned_by(pid: u32) -> Vec<String> {
    containers_with_label("stet.managed=true")
        .into_iter()
        .filter(|id| {
            let out = Command::new("docker")
                .args([
                    "inspect",
                    "--format",
                    "{{index .Config.Labels \"stet.owner\"}}",
                    id,
                ])
                .output()
                .expect("run the docker CLI");
            String::from_utf8_lossy(&out.stdout).starts_with(&format!("{pid}:"))
        })
        .collect()
}

/// Every plugin crate of the repository: the real ones and the test fixtures.
pub fn all_plugin_crates() -> Vec<PluginCrate> {
    let root = repo_root();
    let mut crates = plugin_crates(&root.join("plugins"));
    crates.extend(plugin_crates(&root.join("tests/fixtures")));
    crates
}

/// A scratch world for one test: its own HOME and XDG directories, a working directory,
/// and plugin directories, so nothing of the machine's own configuration leaks in.
pub struct World {
    pub root: tempfile::TempDir,
    /// The directory commands run in.
    pub work: PathBuf,
    /// A plugins directory passed with `--plugins-dir`.
    pub plugins: PathBuf,
    /// Extra directories to put first on PATH.
    pub path_prefix: Vec<PathBuf>,
}

/// Where stet runs as root, each lane is a file system of its own mounted at its `work/`
/// (`lanes/disk.rs` of the host), which a drive leaves mounted: a world lets every mount under
/// its root go before its directory is deleted (else the deletion stops at the first).
impl Drop for World {
    fn drop(&mut self) {
        release_mounts_under(self.root.path());
    }
}

/// Unmounts (lazily) every file system mounted under `root`, deepest first.
pub fn release_mounts_under(root: &Path) {
    let Ok(table) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let mut points: Vec<PathBuf> = table
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        // mountinfo escapes a space, a tab, a newline and a backslash as octal.
        .map(|p| {
            p.replace("\\040", " ")
                .replace("\\011", "\t")
                .replace("\\134", "\\")
        })
        .map(PathBuf::from)
        .filter(|p| p.starts_with(&root))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for point in points {
        let _ = nix::mount::umount2(&point, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// What a command did.
#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Standard output parsed as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout))
    }
}

impl Output {
    /// What a finished process did.
    pub fn of(out: std::process::Output) -> Output {
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Waits for a child started with piped output, and collects what it did.
    pub fn finish(child: std::process::Child) -> Output {
        Output::of(child.wait_with_output().expect("wait for stet"))
    }
}

/// The receipts of a `stet receipts --json` answer (which lists them newest first), oldest
/// first: the order the calls were made in.
pub fn receipts_oldest_first(out: &Output) -> Vec<serde_json::Value> {
    let json = out.json();
    assert_eq!(json["schema"], 1, "{json:#}");
    let mut receipts = json["receipts"].as_array().expect("receipts").clone();
    receipts.sort_by_key(|r| r["started_unix_ms"].as_u64());
    receipts
}

/// The wall named `name` in a `stet walls --json` answer; panics naming it when absent.
pub fn wall<'a>(json: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    json["walls"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|w| w["wall"] == name)
        .unwrap_or_else(|| panic!("no wall {name} in {json:#}"))
}

/// The entry named `name` in a JSON listing of plugins (`plugins list`/`probe --json`, or
/// a bare array).
pub fn plugin_entry<'a>(json: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    json.as_array()
        .or_else(|| json["plugins"].as_array())
        .expect("a listing of plugins")
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{name} missing from {json:#}"))
}

/// Every drive reaps the orphaned sandboxes of this host, so the tests of one binary that
/// drive, or make and count sandboxes, take turns.
pub fn serial_drives() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

impl Default for World {
    fn default() -> Self {
        Self::new()
    }
}

impl World {
    pub fn new() -> Self {
        let root = tempfile::Builder::new()
            .prefix("stet-e2e-")
            .tempdir()
            .expect("temp dir");
        let work = root.path().join("work");
        let plugins = root.path().join("plugins");
        for dir in [&work, &plugins] {
            std::fs::create_dir_all(dir).unwrap();
        }
        World {
            root,
            work,
            plugins,
            path_prefix: Vec::new(),
        }
    }

    /// Installs the plugin called `name` (a real plugin or a fixture) into `dir`.
    pub fn install_into(&self, name: &str, dir: &Path) -> PathBuf {
        let plugin = all_plugin_crates()
            .into_iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("no plugin crate named {name}"));
        install_plugin(&plugin, &artifacts(), dir).expect("install plugin")
    }

    /// Installs the plugin called `name` into the world's plugins directory.
    pub fn install(&self, name: &str) -> PathBuf {
        self.install_into(name, &self.plugins)
    }

    /// Makes the real Claude Code binary available on PATH.
    pub fn with_claude(mut self) -> Self {
        let claude = claude_binary();
        self.path_prefix
            .push(claude.parent().unwrap().to_path_buf());
        self
    }

    /// The real `stet` binary with a scrubbed environment, `--plugins-dir` pointing at the
    /// world's plugins directory, then `args`.
    pub fn stet(&self, args: &[&str]) -> Command {
        self.command(&artifacts().join("stet"), args, true)
    }

    /// Like [`World::stet`], for another copy of the binary and without `--plugins-dir`.
    pub fn command(&self, binary: &Path, args: &[&str], plugins_flag: bool) -> Command {
        let home = self.root.path().join("home");
        let mut path = self.path_prefix.clone();
        path.extend(["/usr/local/bin", "/usr/bin", "/bin"].map(PathBuf::from));
        let mut command = Command::new(binary);
        command
            .env_clear()
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("PATH", std::env::join_paths(path).unwrap())
            .current_dir(&self.work);
        // The engine's address is the one thing the docker plugin needs from outside.
        if let Some(host) = std::env::var_os("DOCKER_HOST") {
            command.env("DOCKER_HOST", host);
        }
        if plugins_flag {
            command.arg("--plugins-dir").arg(&self.plugins);
        }
        command.args(args);
        command
    }

    /// The real `stet` binary run on a pseudo-terminal (util-linux `script`), for commands
    /// that need one; write keystrokes to the child's stdin.
    pub fn stet_on_terminal(&self, args: &[&str]) -> Command {
        let quote = |a: &str| format!("'{}'", a.replace('\'', r"'\''"));
        let mut line = vec![quote(&artifacts().join("stet").display().to_string())];
        line.push("--plugins-dir".into());
        line.push(quote(&self.plugins.display().to_string()));
        line.extend(args.iter().map(|a| quote(a)));
        let mut command = self.command(Path::new("script"), &[], false);
        command.args(["-qec", &line.join(" "), "/dev/null"]);
        command
    }

    /// Runs a command and collects what it did.
    pub fn run(&self, command: &mut Command) -> Output {
        Output::of(command.output().expect("run stet"))
    }

    /// Runs `stet args…` without `--plugins-dir`: only the user plugins directory (and
    /// beside the executable, where the test binaries have none) is searched, so what is
    /// found was installed by `stet plugins install`.
    pub fn run_stet_installed(&self, args: &[&str]) -> Output {
        self.run(&mut self.command(&artifacts().join("stet"), args, false))
    }

    /// Runs `stet args…` in the world.
    pub fn run_stet(&self, args: &[&str]) -> Output {
        self.run(&mut self.stet(args))
    }

    /// `stet add TEXT`, then the queue committed and pushed with everything else the
    /// working copy holds: a drive reads the queue from the remote's branch, never from
    /// the working copy alone.
    pub fn add_pushed(&self, text: &str) -> Output {
        let added = self.run_stet(&["add", text]);
        if added.code == 0 {
            git(&self.work, &["add", "--all"]);
            git(&self.work, &["commit", "--quiet", "-m", "queue an item"]);
            git(&self.work, &["push", "--quiet", "origin", "HEAD"]);
        }
        added
    }

    /// Makes the working directory a clone of a fresh bare remote (`<root>/remote.git`) with
    /// one commit; returns the remote's path.
    pub fn clone_of_fresh_remote(&self) -> PathBuf {
        let bare = self.root.path().join("remote.git");
        git(
            self.root.path(),
            &["init", "--quiet", "--bare", bare.to_str().unwrap()],
        );
        std::fs::remove_dir_all(&self.work).unwrap();
        git(
            self.root.path(),
            &[
                "clone",
                "--quiet",
                bare.to_str().unwrap(),
                self.work.to_str().unwrap(),
            ],
        );
        std::fs::write(self.work.join("README"), "a repository\n").unwrap();
        git(&self.work, &["add", "README"]);
        git(&self.work, &["commit", "--quiet", "-m", "start"]);
        git(&self.work, &["push", "--quiet", "origin", "HEAD"]);
        bare
    }

    /// Trusts the repository configuration in `dir` as it is now (`stet trust`), as the
    /// person does after reading it; a file stet cannot read is left untrusted (the test
    /// then sees stet's error about it).
    pub fn trust_in(&self, dir: &Path) -> Output {
        let mut command = self.stet(&["trust"]);
        command.current_dir(dir);
        self.run(&mut command)
    }

    /// Makes the working directory a git repository (real `git init`) with `stet.toml`
    /// holding `config`, trusted.
    pub fn repo_config(&self, config: &str) {
        if !self.work.join(".git").exists() {
            let status = Command::new("git")
                .args(["init", "--quiet"])
                .current_dir(&self.work)
                .status()
                .expect("run git");
            assert!(status.success(), "git init failed");
        }
        std::fs::write(self.work.join("stet.toml"), config).unwrap();
        self.trust_in(&self.work);
    }

    /// Replaces the world's root path with `[WORLD]` and the cargo target directory with
    /// `[TARGET]` in `text`, for snapshots that must read the same in any checkout.
    pub fn redact(&self, text: &str) -> String {
        let target = artifacts()
            .parent()
            .expect("target dir")
            .display()
            .to_string();
        text.replace(&self.root.path().display().to_string(), "[WORLD]")
            .replace(&target, "[TARGET]")
    }
}

/// The refs a drive writes on the bare remote `remote` (reservations, checkpoints, marks),
/// one a line: every ref under `refs/stet/` but the handle claims `stet add` makes.
pub fn drive_records(remote: &Path) -> String {
    git(
        remote,
        &["for-each-ref", "--format=%(refname)", "refs/stet/"],
    )
    .lines()
    .filter(|r| !r.starts_with("refs/stet/handles/"))
    .map(|r| format!("{r}\n"))
    .collect()
}

/// Runs git in `dir` (with a fixed identity), failing the test on error; returns stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes the stored-login shape Claude Code writes after /login into `profile`, with dummy
/// tokens that only the fake API accepts. Written by the tests, never read by stet.
/// The dummy stored login's access token (made for the fake only): what the fake model API
/// must receive, swapped in by stet's gateway, while the sandbox holds a stand-in.
pub const DUMMY_ACCESS_TOKEN: &str = "sk-ant-oat01-dummy-made-for-the-fake-api-only-0000";
/// Its refresh token, likewise a dummy.
pub const DUMMY_REFRESH_TOKEN: &str = "sk-ant-ort01-dummy-made-for-the-fake-api-only-1111";

pub fn dummy_login(profile: &Path) {
    let expires = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + 365 * 24 * 3600 * 1000;
    let path = profile.join(".credentials.json");
    std::fs::write(
        &path,
        serde_json::json!({"claudeAiOauth": {"accessToken": DUMMY_ACCESS_TOKEN,
            "refreshToken": DUMMY_REFRESH_TOKEN, "expiresAt": expires,
            "scopes": ["user:inference"], "subscriptionType": "max"}})
        .to_string(),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// A dummy login of the shape Codex CLI keeps in `~/.codex/auth.json` (made for the tests'
/// fake APIs only): its access token, a JSON Web Token of dummy claims and signature.
pub const DUMMY_CODEX_ACCESS_TOKEN: &str = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjQxMDI0NDQ4MDAsInN1YiI6ImR1bW15LWFjY2VzcyJ9.ZHVtbXktYWNjZXNzLXNpZ25hdHVyZS1mb3ItdGhlLWZha2UtYXBpLW9ubHktMDAwMA";
/// Its ID token, likewise.
pub const DUMMY_CODEX_ID_TOKEN: &str = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJlbWFpbCI6ImR1bW15QGV4YW1wbGUuaW52YWxpZCIsImV4cCI6NDEwMjQ0NDgwMH0.ZHVtbXktaWQtc2lnbmF0dXJlLWZvci10aGUtZmFrZS1hcGktb25seS0xMTEx";
/// Its refresh token, an opaque dummy.
pub const DUMMY_CODEX_REFRESH_TOKEN: &str = "rt_dummyMadeForTheFakeApiOnly0123456789abcdefABCDEF";

/// Writes a dummy Codex CLI login (`.codex/auth.json`, the shape `codex login` writes) into
/// the command harness's profile `profile`, made private when missing. Written by the tests.
pub fn dummy_codex_login(profile: &Path) {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(profile.join(".codex"))
        .unwrap();
    std::fs::write(
        profile.join(".codex/auth.json"),
        serde_json::json!({"OPENAI_API_KEY": null, "tokens": {
            "id_token": DUMMY_CODEX_ID_TOKEN, "access_token": DUMMY_CODEX_ACCESS_TOKEN,
            "refresh_token": DUMMY_CODEX_REFRESH_TOKEN,
            "account_id": "00000000-0000-4000-8000-000000000000"},
            "last_refresh": "2026-01-01T00:00:00Z"})
        .to_string(),
    )
    .unwrap();
}

/// Installs docker and claude into `world`, makes one walled profile holding a dummy stored
/// login, and returns the `stet.toml` text that points the claude harness (`binary`) at the
/// fake API `api_url` (on the host's loopback: listed, the sandboxes reach it through stet's
/// proxy, the real login swapped in at its gateway).
/// `extra` is appended (e.g. a `[drive]` table).
pub fn walled_claude_setup(world: &World, binary: &str, api_url: &str, extra: &str) -> String {
    require_image();
    world.install("docker");
    world.install("claude");
    let profile = world.root.path().join("profiles/claude");
    std::fs::create_dir_all(&profile).unwrap();
    dummy_login(&profile);
    walled_claude_config(world, binary, api_url, extra)
}

/// The `stet.toml` of [`walled_claude_setup`].
pub fn walled_claude_config(world: &World, binary: &str, api_url: &str, extra: &str) -> String {
    format!(
        "[harness]\nprofiles = \"{profiles}\"\n\n[sandbox]\nimage = \"{IMAGE}\"\n\n\
         [plugins.claude]\nbinary = \"{binary}\"\napi_base_url = \"{api_url}\"\nmodel = \"sonnet\"\n{extra}",
        profiles = world.root.path().join("profiles").display(),
    )
}

/// A dummy JSON Web Token (a made-up signature) with `claims`.
pub fn dummy_jwt(claims: &serde_json::Value) -> String {
    fn base64url(bytes: &[u8]) -> String {
        const ALPHABET: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
            for i in 0..=chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            }
        }
        out
    }
    format!(
        "{}.{}.{}",
        base64url(br#"{"alg":"RS256","typ":"JWT"}"#),
        base64url(claims.to_string().as_bytes()),
        base64url(b"dummy-signature-made-for-the-fake-only")
    )
}

/// Installs docker and codex into `world`, writes a dummy Codex login into the walled
/// profile (`<profiles>/.codex/auth.json`, the hidden `CODEX_HOME` the codex harness keeps
/// beside any other harness's profile), and returns the `stet.toml` text that points the
/// codex harness (`binary`) at the fake Responses API `api` (on the host's loopback: the
/// sandboxes reach it through stet's gateway, the login's real token swapped in there).
/// `extra` is appended (e.g. a `[drive]` table).
pub fn walled_codex_setup(
    world: &World,
    binary: &str,
    api: &fake_responses::FakeResponses,
    extra: &str,
) -> String {
    require_image();
    world.install("docker");
    world.install("codex");
    dummy_codex_login(&world.root.path().join("profiles"));
    walled_codex_config(world, binary, api, extra)
}

/// The `stet.toml` of [`walled_codex_setup`].
pub fn walled_codex_config(
    world: &World,
    binary: &str,
    api: &fake_responses::FakeResponses,
    extra: &str,
) -> String {
    format!(
        "[harness]\nprofiles = \"{profiles}\"\n\n[sandbox]\nimage = \"{IMAGE}\"\n\n\
         [plugins.codex]\nbinary = \"{binary}\"\napi_base_url = \"{api_url}\"\nmodel = \"gpt-5.5\"\n{extra}",
        profiles = world.root.path().join("profiles").display(),
        api_url = api.base_url(),
    )
}

/// Git on a bare remote a test made (whoever owns it: a sandbox may have written it).
fn git_on_remote(remote: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(["-c", "safe.directory=*"])
        .args(args)
        .current_dir(remote)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The items marked landed on the bare `remote`, sorted: the entries of its ledger
/// (`refs/stet/ledger`, a tree of `landed/<item>`) and any mark of the older form (a ref
/// under `refs/stet/landed/`).
pub fn landed_on(remote: &Path) -> Vec<String> {
    let mut items: Vec<String> = git_on_remote(
        remote,
        &["ls-tree", "--name-only", "refs/stet/ledger:landed"],
    )
    .unwrap_or_default()
    .lines()
    .map(str::to_string)
    .collect();
    let old = git_on_remote(
        remote,
        &["for-each-ref", "--format=%(refname)", "refs/stet/landed/"],
    )
    .unwrap_or_default();
    items.extend(
        old.lines()
            .filter_map(|r| r.strip_prefix("refs/stet/landed/"))
            .map(str::to_string),
    );
    items.sort();
    items
}

/// When `item` was marked landed on `remote`: the time of the ledger's commit that added
/// it, in seconds since the epoch.
pub fn landed_at(remote: &Path, item: &str) -> Option<u64> {
    git_on_remote(
        remote,
        &[
            "log",
            "-1",
            "--format=%ct",
            "refs/stet/ledger",
            "--",
            &format!("landed/{item}"),
        ],
    )?
    .trim()
    .parse()
    .ok()
}

/// The uid stet runs as when the tests run as root (the command harness's tests and the
/// command snapshots): a person runs stet unprivileged, and what the walls say depends on it.
pub const UNPRIVILEGED_UID: u32 = 4242;

/// The example agent (`examples/agent/agent.sh`, no model), by absolute path.
pub fn example_agent() -> PathBuf {
    repo_root()
        .join("examples/agent/agent.sh")
        .canonicalize()
        .expect("examples/agent/agent.sh exists")
}

/// Whether the tests run as root.
pub fn running_as_root() -> bool {
    let out = Command::new("id").arg("-u").output().expect("run id");
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// The group that may use the Docker socket (the engine's address is the one thing stet
/// needs from outside).
pub fn docker_group() -> u32 {
    use std::os::unix::fs::MetadataExt;
    let socket = std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|h| h.strip_prefix("unix://").map(str::to_string))
        .unwrap_or_else(|| "/var/run/docker.sock".to_string());
    std::fs::metadata(&socket).map(|m| m.gid()).unwrap_or(0)
}

/// Hands `path` and everything under it to `uid`:`gid` (symbolic links themselves).
pub fn chown_all(path: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid)).unwrap();
    if std::fs::symlink_metadata(path).unwrap().is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_all(&entry.unwrap().path(), uid, gid);
        }
    }
}

/// The stand-in agent (`agents/stand-in.sh`): told by its prompt what to do, waits on files
/// a test creates.
pub fn stand_in() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("agents/stand-in.sh")
}

/// A world whose working directory is a clone of a fresh bare remote, configured for the
/// Docker runtime and the command harness running the stand-in, with `items` queued,
/// committed and pushed (so that other clones see the same queue).
pub fn stand_in_world(items: &[&str]) -> World {
    require_image();
    let world = World::new();
    world.install("docker");
    world.install("command");
    world.clone_of_fresh_remote();
    std::fs::write(
        world.work.join("stet.toml"),
        format!(
            "[harness]\nprefer = [\"command\"]\n\n[plugins.command]\nimplement = [\"{}\"]\n",
            stand_in().display()
        ),
    )
    .unwrap();
    for item in items {
        let added = world.run_stet(&["add", item]);
        assert_eq!(added.code, 0, "{}", added.stderr);
        // Ids are time-ordered to the millisecond: keep the queue's order the given one.
        next_millisecond();
    }
    let trusted = world.trust_in(&world.work);
    assert_eq!(trusted.code, 0, "{}", trusted.stderr);
    git(&world.work, &["add", "stet.toml", ".stet"]);
    git(
        &world.work,
        &["commit", "--quiet", "-m", "configure stet, queue items"],
    );
    git(&world.work, &["push", "--quiet", "origin", "HEAD"]);
    world
}

/// What changes from run to run in what stet prints, and what stands in for it in a snapshot
/// (insta's filters, applied in order): the command snapshots', the board's and the plugins'.
pub const SNAPSHOT_FILTERS: &[(&str, &str)] = &[
    // `stet gc --json` lists every stet sandbox on the engine, of other stets (other tests,
    // other people's) too: redacted first, before what is in them is (a `[SHA256]` or
    // `[RUN]` would end the list early).
    (
        r#""(removed|kept)": \[[^\]]*\]"#,
        r#""$1": "[SANDBOXES ON THE ENGINE]""#,
    ),
    // Item ids: the time they were added, to the millisecond, then a slug of the title.
    (r"\b\d{8}-\d{6}-\d{3}-", "[ITEM]-"),
    // Drive runs (`drive-<pid>-<ms>`: digits only, so an item's handle ending in "drive"
    // followed by `-implement` is left as it is).
    (r"\bdrive-\d+-\d+\b", "drive-[RUN]"),
    // Times of day and dates.
    (
        r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?( ?(Z|UTC|[+-]\d{2}:?\d{2}))?",
        "[TIME]",
    ),
    (r"\b\d{2}:\d{2}:\d{2}\b", "[TIME]"),
    // Times since the epoch, in seconds or milliseconds.
    (r"\b1[6-9]\d{8}(\d{3})?\b", "[EPOCH]"),
    // Hashes: sha256 and git object ids, and a sandbox's short id.
    (r"\b[0-9a-f]{64}\b", "[SHA256]"),
    (r"\b[0-9a-f]{40}\b", "[GIT-OID]"),
    (r"sandbox [0-9a-f]{12}\b", "sandbox [SANDBOX]"),
    // Durations and sizes.
    (r"\b\d+(\.\d+)?( ?(ms|µs|s|min|m|h))\b", "[DURATION]"),
    (
        r"\b\d+(\.\d+)? ?(B|KiB|MiB|GiB|TiB|kB|MB|GB|TB)\b",
        "[SIZE]",
    ),
    (r#""seconds": [0-9.]+"#, r#""seconds": "[SECONDS]""#),
    // What a lane takes on disk depends on the file system's blocks.
    (r#""(bytes|freed_bytes)": \d+"#, r#""$1": "[BYTES]""#),
    // The commit stet was built from.
    (r"commit [0-9a-f]{7,40}(-dirty)?", "commit [COMMIT]"),
    // What depends on the machine: its cores, the user stet runs as, git's version.
    (r"\b\d+ cpus?\b", "[N] cpu"),
    (r"\buid \d+", "uid [UID]"),
    (r"git version [0-9][0-9a-z.]*", "git version [VERSION]"),
    // Temporary directories and files named by a process.
    // Each names its owning stet (`<pid>.<start time>`) before its random part.
    (
        r"/tmp/(stet-[a-z-]+)-\d+\.\d*-[A-Za-z0-9]{6}\b",
        "/tmp/$1-[TEMP]",
    ),
    (r"-ask-\d+\.json", "-ask-[PID].json"),
    // Columns padded to a duration's width.
    (r" +\[DURATION\]", "  [DURATION]"),
    (r"\[DURATION\]  +", "[DURATION]  "),
    // How long something took, in JSON.
    (
        r#""(elapsed_ms|duration_ms|took_ms)": \d+"#,
        r#""$1": "[MS]""#,
    ),
    // The engine: its version and API, and the machine's architecture.
    (
        r"Docker Engine [0-9][0-9A-Za-z.+~-]*",
        "Docker Engine [VERSION]",
    ),
    (r"api-version:? [0-9.]+", "api-version [VERSION]"),
    (
        r#"("key": "api-version",\s*"value": )"[0-9.]+""#,
        r#"$1"[VERSION]""#,
    ),
    (r"linux/(amd64|arm64|aarch64|x86_64)", "linux/[ARCH]"),
    // `stet gc` looks at every stet sandbox on the engine, of other stets (other tests,
    // other people's) too: what it removed and kept, and how many, are not this test's.
    (
        r"(?m)^(removed|would remove|kept) docker sandbox [^\n]*\n",
        "",
    ),
    // A drive reaps the sandboxes any crashed stet on this machine left behind.
    (
        r"(?m)^reaped \d+ sandbox(es)? a crashed stet left behind\n",
        "",
    ),
    (
        r"(removed|would remove) \d+ sandbox(es)?, kept \d+",
        "$1 [N] sandboxes, kept [N]",
    ),
    // The commit a drive's base was at (its time is in it).
    (r"(base: +\S+) at [0-9a-f]{12}", "$1 at [COMMIT]"),
    // Ports on the host's loopback.
    (r"(127\.0\.0\.1|localhost):\d+", "$1:[PORT]"),
    // Processes: owners (pid:start time, in clock ticks since boot: few digits on a
    // machine just booted).
    (r#""owner": "\d+:\d+""#, r#""owner": "[PID:START]""#),
];
