//! The command line: clap definitions (no I/O here), and `main`, which parses, resolves
//! settings, runs one command and reports its error once.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

pub mod error;

use crate::plugins::probe;
use crate::printer::Printer;
use crate::settings;
use error::{CliError, Exit};

mod ask;
mod board;
mod clean;
mod doctor;
mod drive;
mod gc;
mod help;
mod init;
mod item_json;
mod lane;
mod net;
mod plugins_conformance;
mod plugins_install;
mod plugins_list;
mod plugins_probe;
mod profile;
mod queue;
mod receipts;
mod run;
mod seed;
mod trust;
mod walls;

/// Stet drains a queue of small work items on a repository, unattended: each item gets its
/// own branch and working copy, a fresh sandbox with only that copy mounted, and an AI
/// coding agent inside it. Runtimes (where the agent runs) and harnesses (which agent
/// runs) are plugins.
#[derive(Debug, Parser)]
#[command(name = "stet", version = version_text(), max_term_width = 100)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,

    #[command(subcommand)]
    pub command: Command,
}

/// The commit the `stet` binary was built from, as its `main` hands it over: the binary
/// alone carries the stamp, so a new commit rebuilds the binary and nothing under it.
static COMMIT: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// What `stet --version` says: stet's version, the plugin API it speaks, the commit it was
/// built from (`unknown` outside a git checkout, or before `main` named it).
pub fn version_text() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        format!(
            "{} (plugin API {}, commit {})",
            env!("CARGO_PKG_VERSION"),
            stet_plugin_api::API_VERSION,
            COMMIT.get().copied().unwrap_or("unknown")
        )
    })
}

/// Options every command takes.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Look for plugins in DIR first (repeatable; searched in the order given, before
    /// STET_PLUGINS_DIR, the user data directory and the directories beside the executable).
    #[arg(long = "plugins-dir", value_name = "DIR", global = true)]
    pub plugins_dirs: Vec<PathBuf>,

    /// Say more: full layout reports of refused plugins, and what failing probes printed.
    #[arg(short, long, global = true)]
    pub verbose: bool,

    /// Say less: no progress notes, only results, warnings and errors.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,

    /// Run as if started in DIR, as git -C does (paths given are then taken from DIR too).
    #[arg(short = 'C', value_name = "DIR", global = true)]
    pub directory: Vec<PathBuf>,
}

/// The shell's candidates for an item: the handles of the working copy's queue (read from
/// file names and titles only: no remote is asked), each with its title.
fn handle_candidates() -> clap_complete::engine::ArgValueCandidates {
    clap_complete::engine::ArgValueCandidates::new(|| {
        let dir = completion_dir();
        crate::handles::candidates(&dir, "")
            .into_iter()
            .map(|(handle, title)| {
                // The title is whoever-can-commit's: inert, on one line, for the menu.
                let title = crate::text::inert(&title).replace('\t', " ");
                clap_complete::engine::CompletionCandidate::new(handle).help(Some(title.into()))
            })
            .collect()
    })
}

/// Where the command line being completed runs: the shell's directory, moved by each
/// `-C DIR` on the line (the engine hands candidates no parsed arguments).
fn completion_dir() -> PathBuf {
    let mut dir = std::env::current_dir().unwrap_or_default();
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .skip_while(|a| a != "--")
        .collect();
    let mut words = args.iter().skip(1).peekable();
    while let Some(word) = words.next() {
        let given = match word.strip_prefix("-C") {
            Some("") => words.next().cloned(),
            Some(rest) if !word.starts_with("--") => Some(rest.to_string()),
            _ => None,
        };
        if let Some(given) = given {
            dir = dir.join(given);
        }
    }
    dir
}

/// `stet net …`, run by stet inside a sandbox.
#[derive(Debug, Subcommand)]
pub enum NetCommand {
    /// Relay the sandbox's loopback to stet's proxy.
    Bridge {
        /// The proxy's socket, as forwarded into the sandbox.
        #[arg(long)]
        socket: PathBuf,
        /// The loopback port proxy requests come to.
        #[arg(long)]
        listen: u16,
        /// A loopback port relayed as it is: a credential gateway's (repeatable).
        #[arg(long)]
        gateway: Vec<u16>,
        /// PORT=HOST:PORT: a loopback port tunnelled to a listed host (repeatable).
        #[arg(long)]
        forward: Vec<String>,
    },
    /// Print the fingerprint of every credential-like token in this process's environment
    /// and in the files under PATHS (the credential wall's proof: the host compares them
    /// with the real credentials' own, never seeing a value from inside).
    Fingerprints {
        /// Files or directories (searched without following links).
        paths: Vec<PathBuf>,
    },
    /// Try one connection and say in a line what happened.
    Probe {
        /// Through the proxy (a CONNECT) or straight.
        #[arg(value_enum)]
        how: ProbeHow,
        /// HOST:PORT.
        target: String,
    },
}

/// How `stet net probe` connects.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ProbeHow {
    /// A CONNECT through the proxy HTTPS_PROXY names.
    Connect,
    /// A TCP connection that ignores every proxy variable.
    Direct,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one command in a fresh sandbox with the current directory mounted read-write.
    ///
    /// Output streams live; the command's exit status is passed through (a signal death
    /// as 128 + the signal); the sandbox is removed afterwards, also on Ctrl-C. The
    /// environment inside is built from scratch; the network is off unless --network. On a
    /// terminal (standard input and output both one) the command gets a terminal, as
    /// `docker run -it` gives one: `stet run -- sh` is interactive, Ctrl-C goes to it.
    Run(RunArgs),

    /// Remove sandboxes that a crashed or killed stet left behind.
    ///
    /// Looks in every available runtime for sandboxes labelled as stet's, and removes those
    /// whose owning stet process on this machine is gone. Sandboxes of running stets, and
    /// of other machines sharing the engine, are kept and named. Exit status: 0 when every
    /// runtime asked was answered; 3 when no runtime could be asked (its engine is down);
    /// 1 when a sandbox could not be removed.
    Gc(GcArgs),

    /// Prove the walls around the agent: profile, settings, key, and one live launch.
    ///
    /// Selects the harness, finds its one walled profile, rewrites the walled settings
    /// (stet's hooks and nothing else; an edited file is replaced and said so), checks the
    /// static walls, then makes one short live launch in a fresh sandbox of the selected
    /// runtime that must show exactly the named tools, stet's approver connected, the hooks
    /// firing and the guard refusing the canary command. Exit status: 0 when every wall
    /// holds, 3 when one does not.
    Walls(WallsArgs),

    /// Make one walled agent call in a fresh sandbox, the current directory mounted.
    ///
    /// Runs the selected harness's walled launch for the role (implement by default) on the
    /// walled profile, after rewriting the walled settings and checking the static walls,
    /// and prints how the call ended: done, failed, out of shape, rate-limited until a
    /// time, or not logged in, with cost and usage when the agent reports them. Exit status:
    /// 0 done; 4 the agent failed its task, answered out of shape or hit a limit; 3 the call
    /// could not be made (rate-limited, not logged in, the model API down, a wall broken).
    Ask(AskArgs),

    /// Drain the queue, unattended: reserve each item on the remote, work it in its own
    /// lane and sandbox (implement, check, review), and land it as a branch on the remote.
    ///
    /// Refuses before reserving anything when a precondition is missing or a wall does not
    /// hold; asks once for consent (--yes for scripts). An item whose agent fails its
    /// task, changes nothing, fails the check or is sent back by the reviewer counts a
    /// round; after --rounds it is given up (marked failed on the remote, with why) and the
    /// drive goes on. Each finished move is checkpointed on the remote with the lane's
    /// branch, so a resumed drive (here or on a peer's clone) makes no finished call again;
    /// a landing cut short runs the land command again with STET_LAND_RETRY=1. The first
    /// Ctrl-C (or TERM, HUP) stops after the agent call in flight, releasing the
    /// reservation; the second kills the call at once. Before the drain begins (the wall
    /// proof, the consent) the first ends the drive at once. A stop leaves no sandbox and
    /// no temporary directory behind.
    ///
    /// Exit status: 0 when every item it took landed (or nothing was eligible); 4 when it
    /// gave some up, or landed some whose land step failed (a pull request not opened: the
    /// work ran and is not done; stet land ID makes it again); 3 when nothing could run (the image lacks the check's program, the
    /// walls do not hold or cannot be proven, the model API refused the login: log in
    /// again, an outage lasted its limit, the remote stayed away, a usage limit resets later than
    /// --outage-limit from now: run stet drive again after the reset it names); 2 bad
    /// input; 128+N after a stop by signal N (130 for Ctrl-C); 1 only for a bug.
    Drive(DriveArgs),

    /// Set this repository up for stet: a commented stet.toml and the queue directory.
    ///
    /// The file names the harness and runtime found (as `stet plugins probe` would select
    /// them), the image, and the check command guessed from the repository's build files
    /// (Cargo.toml, package.json, pyproject.toml, go.mod, a Makefile), saying what it
    /// guessed from, and a commented table for each installed harness. A check that needs a
    /// toolchain the lane image lacks (cargo, npm, python, go, make) gets an image of its
    /// own: .stet/Containerfile, the lane image plus that toolchain, and the command that
    /// builds it. Then what a drive still lacks (a usable harness or runtime, the image:
    /// `stet doctor` fails on each) and what to commit and push (the queue must be on the
    /// remote for every clone). The file is trusted as written, in this clone, as `stet
    /// trust` records it: its harness and runtime preferences apply at once, and any later
    /// change makes it untrusted again. Refuses to overwrite a stet.toml. Exit status: 0
    /// once written, what is still missing said; 2 outside a repository or over an
    /// existing file.
    Init(InitArgs),

    /// Check every precondition of a drive, a line each, with what to do.
    ///
    /// Git and the remote (it answers, and takes a push: a probe ref in stet's namespace,
    /// deleted at once), whether the repository's stet.toml is trusted (and what in it is
    /// ignored until it is), the runtime, the image (present; holding sh, git, the check
    /// command's program, and what the agent needs to start: a script's interpreter, a
    /// binary's loader), the harness a drive would select and its profile (present, alone,
    /// logged in by state), no billing key in the environment, free disk for lanes. No
    /// agent runs and no model is asked. Exit status: 0 when a drive could start; 3 when not.
    Doctor(DoctorArgs),

    /// Build the seed every lane starts from: run [lane] setup on the base, once.
    ///
    /// The setup's commands (a trusted stet.toml's [lane] setup) run in order in a fresh
    /// sandbox on a checkout of the remote's base — never on what an agent wrote — with
    /// the image and stet's proxy for the hosts [lane] setup_network names and nothing else.
    /// What they fill ([lane] setup_outputs) is kept on this clone, keyed by the setup, the
    /// image and the content of [lane] setup_inputs, and every lane gets its own copy of
    /// it; a drive builds a missing seed before its first lane. A seed whose key is
    /// unchanged is reused, not built again. Exit status: 0 when the seed is ready; 2 when
    /// there is no setup or a setup command failed; 3 when the runtime or the remote is
    /// not usable.
    Seed(SeedArgs),

    /// Add a work item to the queue (`.stet/queue/` in the repository).
    ///
    /// The item gets a handle to type in place of its id: its title's key words, at most 24
    /// characters (`Fix the typo in the README` → fix-typo-readme). No item of this working
    /// copy or of the remote's branch has it, and it is claimed on the remote
    /// (refs/stet/handles/), so no other clone gives it to another item: a title whose
    /// handle is taken gets the next (-2, -3, …), and says so. When the remote does not
    /// answer the item is written all the same and its handle is not claimed (said in a
    /// warning, and `"claimed": false` in --json). The file is then to be committed and
    /// pushed: a drive reads the queue from the remote. Exit status: 0; 2 bad input.
    Add(AddArgs),

    /// Show the queue: each item and whether it is open (its lane pushed or not), in a lane
    /// (at which stage, held by whom, until when), lapsed, landed or failed (and why), as the
    /// remote says.
    ///
    /// An item in progress shows the round and move a drive resumes it at, and the last
    /// reason a round did not land. Exit status: 0; 3 when the remote did not answer (the
    /// items are listed, their states unknown).
    Queue(QueueArgs),

    /// Show an item's story: its state, each round's calls, the check's output, its diff.
    ///
    /// The item's text, state and why; each round's calls and checks (role, outcome,
    /// duration, cost, receipt), the check's output tail, the reviewer's words, what the
    /// network wall refused; and the lane's change against its base (--diff: the whole
    /// diff). ID is an item's handle or id, or any unique start of either.
    Show(ShowArgs),

    /// Print the transcript of an item's latest agent call (from its log on this clone).
    ///
    /// The harness that made the call renders it: the agent's words, each tool call with
    /// its arguments, tool results shortened, how the call ended (turns, time, cost). Where
    /// that harness is not installed or renders nothing, the output is shown as it is, with
    /// a note. The call's standard error follows on stderr, labelled. --raw prints the
    /// output as the agent wrote it; --role and --round choose another call; --json prints
    /// the rendered entries. Everything from the agent is made inert for the terminal.
    ///
    /// With -f, keep following: the call's output as it comes, then each later call of the
    /// item, while a drive on this clone works it; it ends when the item's lane is done
    /// here (landed) or the drive is gone. An item with no call yet is waited for while a
    /// drive runs on this clone; with none running, it says so and exits.
    Log(LogArgs),

    /// Open an interactive shell in a fresh sandbox on an item's lane.
    ///
    /// The sandbox is walled in as the agent's: its environment built from scratch, only the
    /// lane's working copy writable (its git directory read-only), no network, running as
    /// you, on the runtime a drive selects. An item whose lane is gone from this clone
    /// (landed, cleaned) gets it opened again from its branch (the local `stet/<id>`, else
    /// the remote's). What you change stays in the lane's working copy, never committed or
    /// pushed by stet: `stet diff ID` shows it. Needs a terminal. Exit status: the shell's.
    Shell(ShellArgs),

    /// Print an item's change alone: its lane against the base it branched from.
    ///
    /// With the lane on this clone, its working copy as it is (uncommitted edits and new
    /// files a shell left included); else its branch, local or the remote's. The diff is
    /// the agent's work, shown by git that runs none of its drivers, every line made inert;
    /// coloured and paged (GIT_PAGER, PAGER, else `less -FRX`) only on a terminal, without
    /// colour when NO_COLOR is set.
    Diff(DiffArgs),

    /// Switch to a local branch of an item's work, named as its lane's branch (`stet/<id>`).
    ///
    /// Made from the remote's branch when there is no local one. Refuses when the working
    /// copy has uncommitted changes, and when a local branch of that name is at another
    /// commit than the remote's.
    Checkout(CheckoutArgs),

    /// Merge an item's branch (local `stet/<id>`, else the remote's) into the current branch.
    ///
    /// Refuses when the working copy has uncommitted changes; a merge that stops on
    /// conflicts names the files and exits 1.
    Merge(MergeArgs),

    /// Cancel an item: a mark on the remote every clone sees; no drive takes it, and a
    /// drive working it stops at its next move (its branch and checkpoint are kept). The
    /// item's file stays in the queue directory until you remove it with git.
    Rm(RmArgs),

    /// Remove what landed, failed and cancelled items left on this clone.
    ///
    /// Their lanes (working copies and git directories) and local `stet/*` branches (a
    /// branch only when the remote has it too); it says what it removed and the space
    /// freed. With --remote, also their `stet/*` branches on the remote once the base the
    /// lanes branch from holds their change — merged, or squashed or rebased by a pull
    /// request (never unmerged work) —, and a landed item's mark once its file is gone from
    /// that base and this working copy. With --archive, landed items' files leave
    /// .stet/queue/ in a commit on the current branch, which you push (the mark goes by a
    /// later clean --remote). A failed or cancelled item's mark is never removed: nothing
    /// but stet retry makes such an item eligible again. --dry-run says all this first.
    Clean(CleanArgs),

    /// Take a failed or cancelled item up again: clears its mark on the remote, so the next
    /// drive works it (resuming its lane when one was pushed).
    ///
    /// Clears a failed mark and a cancelled one alike (it un-cancels). Of an item neither
    /// failed nor cancelled it says so and exits 0, as `stet rm` does of one cancelled
    /// already; a landed item is refused (exit 2).
    Retry(RetryArgs),

    /// Make a landed item's land step again: the pull request (`[drive] land = "github"`)
    /// or land command that failed when its drive landed it.
    ///
    /// The lane's branch stays pushed when its land step fails; the item shows "landed, pull
    /// request not opened: why" until this succeeds. The land command runs with
    /// STET_LAND_RETRY=1; an open pull request for the branch is reused. Of an item whose
    /// pull request is recorded it says so and exits 0. Exit status: 0 when the land step
    /// succeeded (or had already); 4 when it failed again (the item's record says why); 2
    /// for an item not landed or no [drive] land set; 3 when the remote did not answer.
    Land(LandArgs),

    /// Summarise this clone: the queue, lanes kept here, the receipts by outcome, the last
    /// agent call.
    Status(StatusArgs),

    /// Serve a live web view of this repository's queue, lanes, receipts and walls.
    ///
    /// Listens on 127.0.0.1 only (a port of its own, or --port) and prints the URL to open,
    /// which carries a random token: requests without it (or the session cookie it gives)
    /// are refused. The pages read what the CLI reads — the queue, the remote's records
    /// (peers' lanes too), this clone's receipts and logs — and the actions (add, retry,
    /// cancel, a drive after its consent) run the CLI's own code. Ctrl-C stops it. Exit
    /// status: 0 after a stop; 2 outside a repository or when the port is taken.
    Board(BoardArgs),

    /// Trust the repository's stet.toml as it is now.
    ///
    /// The repository's file is written by whoever can commit (a landed agent branch
    /// included), so until you trust its content, the settings in it that act on this
    /// machine, choose the plugins or widen a sandbox are ignored and named: [drive] land,
    /// [runtime] and [harness] prefer, [harness] profiles and every [plugins.*] table;
    /// sandbox limits and [drive] jobs in it apply only where they are lower. Trust is for
    /// the exact content: a changed file is untrusted again. A stet.toml that stet init
    /// wrote is trusted as written. Your own ~/.config/stet/config.toml is always trusted.
    Trust(TrustRepoArgs),

    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to standard
    /// output, e.g. `stet completions bash > ~/.local/share/bash-completion/completions/stet`.
    ///
    /// That script completes commands and options. To complete item handles too (`stet show
    /// fix<TAB>`, read from the working copy's queue, no network), register stet's dynamic
    /// completion instead, which asks stet itself at each TAB: in bash `source <(COMPLETE=bash
    /// stet)` in ~/.bashrc; zsh `source <(COMPLETE=zsh stet)` in ~/.zshrc; fish `COMPLETE=fish
    /// stet | source` in ~/.config/fish/config.fish; elvish `eval (E:COMPLETE=elvish stet |
    /// slurp)`; PowerShell `$env:COMPLETE = "powershell"; stet | Out-String |
    /// Invoke-Expression; Remove-Item Env:\COMPLETE`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },

    /// Show the receipts of this clone, newest first: one per agent call and check (role,
    /// outcome, time, cost, item, plugins), with the path of each call's full output under -v.
    Receipts(ReceiptsArgs),

    /// Inspect, probe and select plugins.
    #[command(subcommand)]
    Plugins(PluginsCommand),

    /// The walled profile the agent runs on.
    #[command(subcommand)]
    Profile(ProfileCommand),

    /// Internal: a hook of a walled agent (called by the agent, inside its sandbox).
    ///
    /// Reads the hook's JSON on stdin. `guard` exits 2 with the reason on stderr to refuse
    /// a tool call; `rules` hands the agent the repository's AGENTS.md; `session-start` and
    /// `session-end` are recorded for the receipt.
    #[command(hide = true)]
    Hook {
        /// Which hook.
        #[arg(value_enum)]
        event: crate::walls::hooks::HookEvent,
        /// For `rules`: the harness's own rules files at the top of the lane, handed after
        /// `AGENTS.md` (plain names).
        #[arg(value_name = "FILE")]
        rules: Vec<String>,
    },

    /// Internal: the permission-prompt server of a walled agent (MCP on stdio).
    #[command(hide = true)]
    Approver,

    /// Internal: the network wall's pieces inside a sandbox (the bridge to stet's proxy,
    /// and the proof's connection probe).
    #[command(subcommand, hide = true)]
    Net(NetCommand),

    /// Internal: probe one plugin in this child process and answer in JSON.
    #[command(name = probe::WORKER_COMMAND, hide = true)]
    ProbeWorker {
        /// The plugin's manifest.
        manifest: PathBuf,
        /// The plugin's settings, as JSON.
        config: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum PluginsCommand {
    /// List installed plugins from their manifests, without loading any library.
    ///
    /// Shows each plugin's name, kind, version, plugin-API version, status and directory.
    /// Statuses: ok, manifest-error, wrong-platform, incompatible-api, library-missing,
    /// shadowed (an earlier directory holds a plugin of the same name).
    List(ListArgs),

    /// Load and probe plugins, each in its own child process, then show which runtime and
    /// harness `stet drive` would select and why.
    ///
    /// Exit status: 0 when a runtime and a harness are usable (or, with NAMEs, when every
    /// named plugin is available); 3 when not; 2 for bad input.
    Probe(ProbeArgs),

    /// Run the runtime conformance kit against an installed runtime plugin.
    ///
    /// Creates sandboxes from the lane image (see `stet run --image`), mounts a scratch git
    /// working copy, and checks running, streaming, exit codes, git inside, the
    /// environment, the network, visibility of host files, kill, teardown and listing by
    /// label. Exit status: 0 when every check passes, 1 when one fails, 3 when the plugin
    /// or the image is unavailable.
    Conformance(ConformanceArgs),

    /// Install a plugin into the user plugins directory, after checking it.
    ///
    /// DIR holds the plugin's plugin.toml and the library it names. The manifest, the
    /// platform, the plugin-API version and the files' permissions are checked, then the
    /// library is loaded and probed in an isolated child; only then are both copied into
    /// the user plugins directory and the library's sha256 recorded in plugins.lock beside
    /// it. A library there that no longer matches its checksum is refused until it is
    /// trusted again (`stet plugins trust NAME`). Exit status: 0 installed; 2 bad input;
    /// 3 built for another platform or API, or it failed its probe.
    Install(InstallArgs),

    /// Trust an installed plugin's library as it is now: record its current sha256 in the
    /// lock (after a rebuild in place, say). Refused when others can write it.
    Trust(TrustArgs),

    /// Remove a plugin that `stet plugins install` put into the user plugins directory,
    /// and its entry in the lock. Plugins anywhere else (beside the executable, in a
    /// --plugins-dir) are not stet's to remove: it names where they are.
    Uninstall(TrustArgs),
}

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// The plugin directory (or its plugin.toml).
    #[arg(value_name = "DIR")]
    pub path: std::path::PathBuf,

    /// Print JSON instead of a line.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The installed plugin's name.
    #[arg(value_name = "NAME")]
    pub name: String,

    /// Print JSON instead of a line.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Use this runtime plugin instead of following preferences and priorities.
    #[arg(long, value_name = "NAME")]
    pub runtime: Option<String>,

    /// Start the sandbox from this image (default: [sandbox] image, else stet-lane:1).
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,

    /// Give the sandbox the runtime's ordinary outbound network.
    #[arg(long)]
    pub network: bool,

    /// CPU limit, in cores (e.g. 1.5).
    #[arg(long, value_name = "CORES")]
    pub cpus: Option<f64>,

    /// Memory limit, in MiB.
    #[arg(long = "memory", value_name = "MIB")]
    pub memory_mib: Option<u64>,

    /// Process limit (default 4096).
    #[arg(long, value_name = "N")]
    pub pids: Option<u32>,

    /// Time limit for each runtime plugin's probe (e.g. `5s`).
    #[arg(long, value_name = "DURATION")]
    pub probe_timeout: Option<String>,

    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct WallsArgs {
    #[command(flatten)]
    pub choice: PluginChoice,

    /// The directory holding the one walled profile (default: [harness] profiles, else
    /// ~/.stet/profiles).
    #[arg(long, value_name = "DIR")]
    pub profiles: Option<std::path::PathBuf>,

    /// Start the live launch's sandbox from this image.
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,

    /// Diagnose the profile as it stands: do not rewrite the walled settings, and make the
    /// live launch even when a static wall is broken.
    #[arg(long)]
    pub keep_settings: bool,

    /// Write the live launch's full output here.
    #[arg(long, value_name = "FILE")]
    pub log: Option<std::path::PathBuf>,

    /// Print JSON instead of lines.
    #[arg(long)]
    pub json: bool,
}

/// Which runtime and harness to use, when not the selected ones.
#[derive(Debug, Args)]
pub struct PluginChoice {
    /// Use this runtime plugin instead of following preferences and priorities.
    #[arg(long, value_name = "NAME")]
    pub runtime: Option<String>,

    /// Use this harness plugin instead of following preferences and priorities.
    #[arg(long, value_name = "NAME")]
    pub harness: Option<String>,
}

#[derive(Debug, Args)]
pub struct DriveArgs {
    /// Land at most this many items.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub cap: usize,

    /// Work this many items at once, each in its own lane (default: [drive] jobs, or 1).
    #[arg(short = 'j', long, value_name = "N")]
    pub jobs: Option<usize>,

    /// Consent given: do not ask.
    #[arg(long)]
    pub yes: bool,

    /// The remote lanes land on and reservations live on.
    #[arg(long, default_value = "origin", value_name = "NAME")]
    pub remote: String,

    /// The repository's check command (default: [drive] check; none: no check stage).
    #[arg(long, value_name = "COMMAND")]
    pub check: Option<String>,

    /// Implement/review rounds before an item is given up.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub rounds: u32,

    /// How long a reservation lasts without renewal (e.g. `30m`).
    #[arg(long, default_value = "30m", value_name = "DURATION")]
    pub lease: String,

    /// The shortest wait a move names (pace, a usage limit's reset, an unreachable remote).
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub wait_floor: String,

    /// Waits after three agent calls in a row that could not be made (the last repeats).
    #[arg(long, default_value = "1m,5m,10m,1h", value_name = "DURATIONS")]
    pub outage_schedule: String,

    /// Stop the drive when an outage (or an unreachable remote) has lasted this long, and at
    /// once when a usage limit resets later than this from now.
    #[arg(long, default_value = "8h", value_name = "DURATION")]
    pub outage_limit: String,

    /// At least this long between two agent launches (`0s`: no pace).
    #[arg(long, default_value = "0s", value_name = "DURATION")]
    pub pace: String,

    /// Kill an agent call (or a check) that has run this long without finishing.
    #[arg(long, default_value = "1h", value_name = "DURATION")]
    pub call_limit: String,

    /// Stream the agent's output to standard error as it comes.
    #[arg(long)]
    pub follow: bool,

    /// Say what the drive would take, in what order, with which runtime and harness, after
    /// the checks that ask no agent (remote, base, plugins, image); reserve nothing, prove
    /// no walls, ask no consent.
    #[arg(long)]
    pub dry_run: bool,

    /// Print JSON on stdout (docs/json.md): with --dry-run the plan; else, once the drive
    /// ends, how it ended and every item as it then is (the drive's lines go to stderr).
    #[arg(long)]
    pub json: bool,

    /// Ask consent through this file and its FIFO (`PATH.answer`) instead of the terminal:
    /// how `stet board` starts a drive. Hidden: not a person's flag.
    #[arg(long, value_name = "PATH", hide = true, conflicts_with = "yes")]
    pub consent_via: Option<std::path::PathBuf>,

    #[command(flatten)]
    pub choice: PluginChoice,
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// Read the item from FILE (`-` for standard input) instead of the command line.
    #[arg(short = 'F', long = "file", value_name = "FILE")]
    pub file: Option<std::path::PathBuf>,

    /// What should be done; the first line is the title.
    #[arg(value_name = "TEXT")]
    pub text: Vec<String>,

    /// The remote the item's handle is claimed on (and whose queue it must not repeat).
    #[arg(long, default_value = "origin", value_name = "NAME")]
    pub remote: String,

    /// Print the new item as JSON (`id`, `handle`, `path`, `title`, `claimed`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The remote lanes would land on.
    #[arg(long, default_value = "origin")]
    pub remote: String,

    /// Print the checks as JSON (`schema`, `ready`, `checks`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Print what was written and what is missing as JSON (`schema`, `wrote`, `trusted`,
    /// `harness`, `runtime`, `image`, `check`, `missing`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct TrustRepoArgs {
    /// Forget the trust instead.
    #[arg(long, conflicts_with = "diff")]
    pub revoke: bool,

    /// Show what changed in stet.toml since it was trusted (a unified diff), trusting
    /// nothing.
    #[arg(long)]
    pub diff: bool,

    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReceiptsArgs {
    /// Only the receipts of this item (its handle or id, or a unique start of either).
    #[arg(long, value_name = "ID", add = handle_candidates())]
    pub item: Option<String>,

    /// Only the N newest.
    #[arg(long, value_name = "N")]
    pub last: Option<usize>,

    /// Print JSON instead of lines.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Print JSON instead of lines.
    #[arg(long)]
    pub json: bool,

    /// The remote whose marks and reservations say what becomes of the lanes here.
    #[arg(long, default_value = "origin", value_name = "NAME")]
    pub remote: String,
}

#[derive(Debug, Args)]
pub struct BoardArgs {
    /// Listen on this port of 127.0.0.1 (default: a free one).
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,

    /// Start your browser at the board's URL.
    #[arg(long)]
    pub open: bool,

    /// The remote that holds reservations.
    #[arg(long, default_value = "origin", value_name = "NAME")]
    pub remote: String,
}

#[derive(Debug, Args)]
pub struct QueueArgs {
    /// The remote that holds reservations.
    #[arg(long, default_value = "origin", value_name = "NAME")]
    pub remote: String,

    /// Print JSON instead of lines.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The item's handle or id, or a unique start of either.
    #[arg(value_name = "ID", add = handle_candidates())]
    pub id: String,

    /// Print the lane's whole diff against its base instead of its stat.
    #[arg(long)]
    pub diff: bool,

    /// Print the prompt the N-th agent call received (1 = the first, as `stet show`
    /// numbers them) instead of the story.
    #[arg(long, value_name = "N", conflicts_with = "diff", value_parser = clap::value_parser!(u32).range(1..))]
    pub prompt: Option<u32>,

    /// The remote that holds reservations and marks.
    #[arg(long, default_value = "origin", value_name = "NAME")]
    pub remote: String,

    /// Print JSON instead of lines.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// The item's handle or id, or a unique start of either.
    #[arg(value_name = "ID", add = handle_candidates())]
    pub id: String,

    /// Follow the item's calls while a drive on this clone works it (waiting for its first).
    #[arg(short = 'f', long)]
    pub follow: bool,

    /// Print the output as the agent wrote it, not rendered.
    #[arg(long, conflicts_with = "json")]
    pub raw: bool,

    /// The latest call of this role.
    #[arg(long, value_enum, value_name = "ROLE")]
    pub role: Option<LogRole>,

    /// The latest call of this round.
    #[arg(long, value_name = "N")]
    pub round: Option<u32>,

    /// Print the rendered entries as JSON (a finished call: not with -f).
    #[arg(long, conflicts_with = "follow")]
    pub json: bool,
}

/// The agent role whose call `stet log` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogRole {
    /// The implementing agent.
    Implement,
    /// The reviewing agent.
    Review,
}

#[derive(Debug, Args)]
pub struct ShellArgs {
    /// The item's id, or a unique start of it.
    #[arg(value_name = "ID")]
    pub id: String,

    /// The remote whose branch a lane gone from this clone is opened again from.
    #[arg(long, default_value = "origin", value_name = "NAME")]
    pub remote: String,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The item's handle or id, or a unique start of either.
    #[arg(value_name = "ID", add = handle_candidates())]
    pub id: String,

    /// The remote whose base the change is against (and whose branch is read when there is
    /// no lane or local branch).
    #[arg(long, default_value = "origin", value_name = "NAME")]
    pub remote: String,

    /// Print the change as JSON (`id`, `handle`, `patch`: the diff as text, at most 8 MiB, `cut_bytes`: what was left out), uncoloured and unpaged.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckoutArgs {
    /// The item's handle or id, or a unique start of either.
    #[arg(value_name = "ID", add = handle_candidates())]
    pub id: String,

    /// The remote whose branch is checked out when there is no local one.
    #[arg(long, default_value = "origin", value_name = "NAME")]
    pub remote: String,

    /// Print what was done as JSON (`id`, `handle`, `branch`, `commit`, `done`: `switched` or `already`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The item's handle or id, or a unique start of either.
    #[arg(value_name = "ID", add = handle_candidates())]
    pub id: String,

    /// The remote whose branch is merged when there is no local one.
    #[arg(long, default_value = "origin", value_name = "NAME")]
    pub remote: String,

    /// Print what was done as JSON (`id`, `handle`, `branch`, `commit`, `done`: `merged` or `already`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LandArgs {
    /// The item's handle or id, or a unique start of either.
    #[arg(value_name = "ID", add = handle_candidates())]
    pub id: String,

    /// The remote the item's branch is pushed to and its marks live on.
    #[arg(long, default_value = "origin", value_name = "NAME")]
    pub remote: String,

    /// Print what the land step did as JSON (`id`, `handle`, `done`, `pull_request`: null or its URL).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RmArgs {
    /// The item's handle or id, or a unique start of either.
    #[arg(value_name = "ID", add = handle_candidates())]
    pub id: String,

    /// The remote that holds the marks.
    #[arg(long, default_value = "origin", value_name = "NAME")]
    pub remote: String,

    /// Print the item as it is afterwards, as JSON (docs/json.md); the lines go to stderr.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CleanArgs {
    /// Also remove their branches on the remote once the base holds their change (merged,
    /// or a pull request squashed or rebased into it), and landed items' spent marks.
    #[arg(long)]
    pub remote: bool,

    /// Also remove landed items' files from .stet/queue/, in one commit on the current
    /// branch (push it yourself); their text stays in git history, the commit naming each.
    #[arg(long)]
    pub archive: bool,

    /// Say what would be removed, and remove nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// The remote that holds reservations, marks and lanes.
    #[arg(long, default_value = "origin", value_name = "NAME")]
    pub remote_name: String,

    /// Print JSON instead of lines.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RetryArgs {
    /// The item's handle or id (as `stet queue` shows them), or a unique start of either.
    #[arg(value_name = "ID", add = handle_candidates())]
    pub id: String,

    /// The remote that holds the marks.
    #[arg(long, default_value = "origin", value_name = "NAME")]
    pub remote: String,

    /// Print the item as it is afterwards, as JSON (docs/json.md); the lines go to stderr.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// Log the agent into the walled profile, on your terminal, inside a sandbox.
    ///
    /// Runs the harness's own login (for Claude Code, `claude auth login`) on a terminal in a
    /// fresh sandbox with only the agent's binary and the profile mounted, so the login
    /// lands in the profile directory, written by the agent itself; stet only forwards your
    /// keystrokes and never reads it. Creates the profile when there is none. Needed where
    /// a host keeps its login elsewhere (a macOS keychain); on Linux, logging in your own
    /// shell with CLAUDE_CONFIG_DIR set to the profile does the same.
    Login(ProfileLoginArgs),
}

#[derive(Debug, Args)]
pub struct ProfileLoginArgs {
    #[command(flatten)]
    pub choice: PluginChoice,

    /// The directory holding the one walled profile.
    #[arg(long, value_name = "DIR")]
    pub profiles: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct AskArgs {
    /// The role to launch.
    #[arg(long, value_enum, default_value = "implement")]
    pub role: AskRole,

    #[command(flatten)]
    pub choice: PluginChoice,

    /// The directory holding the one walled profile.
    #[arg(long, value_name = "DIR")]
    pub profiles: Option<std::path::PathBuf>,

    /// Write the agent's full output here.
    #[arg(long, value_name = "FILE")]
    pub log: Option<std::path::PathBuf>,

    /// Print JSON instead of lines.
    #[arg(long)]
    pub json: bool,

    /// The prompt.
    #[arg(required = true, value_name = "PROMPT")]
    pub prompt: Vec<String>,
}

/// Roles `stet ask` launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AskRole {
    /// Make the change the prompt asks for.
    Implement,
    /// Judge the working copy.
    Review,
}

#[derive(Debug, Args)]
pub struct SeedArgs {
    /// The remote whose base the setup runs on.
    #[arg(long, default_value = "origin", value_name = "NAME")]
    pub remote: String,

    /// How long the setup may take, all its commands together: an hour unless given.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub limit: Option<std::time::Duration>,

    /// Select this runtime plugin by name.
    #[arg(long, value_name = "NAME")]
    pub runtime: Option<String>,

    /// Print JSON instead of lines.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Say what would be removed, and remove nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Print JSON instead of lines.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ConformanceArgs {
    /// The runtime plugin to test.
    pub name: String,

    /// Start sandboxes from this image (default: [sandbox] image, else stet-lane:1).
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,

    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Probe only these plugins (all when none are named); selection is then not shown.
    #[arg(value_name = "NAME")]
    pub names: Vec<String>,

    /// Print JSON instead of a report.
    #[arg(long)]
    pub json: bool,

    /// Select this runtime plugin instead of following preferences and priorities.
    #[arg(long, value_name = "NAME")]
    pub runtime: Option<String>,

    /// Select this harness plugin instead of following preferences and priorities.
    #[arg(long, value_name = "NAME")]
    pub harness: Option<String>,

    /// Time limit for each plugin's probe (e.g. `5s`, `800ms`); overrides [probe] timeout.
    #[arg(long, value_name = "DURATION")]
    pub probe_timeout: Option<String>,
}

/// Parses the command line, runs the command, reports an error once, and returns the exit
/// status.
/// Clap's own refusal, with one addition: `stet run ls` (the command without `--`) is
/// shown how to say it.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let args: Vec<String> = std::env::args().collect();
    let run_at = args.iter().position(|a| a == "run");
    if let (ErrorKind::UnknownArgument, Some(at)) = (e.kind(), run_at) {
        if !args.iter().any(|a| a == "--") {
            if let Some(ContextValue::String(word)) = e.get(ContextKind::InvalidArg) {
                let command = &args[at + 1..];
                let at_word = command.iter().position(|a| a == word).unwrap_or(0);
                let (options, rest) = command.split_at(at_word);
                let mut suggested = vec!["stet".to_string(), "run".to_string()];
                suggested.extend(options.iter().cloned());
                suggested.push("--".to_string());
                suggested.extend(rest.iter().cloned());
                let error = CliError::usage(format!(
                    "`{word}` is not an option of stet run: the command to run goes after `--`"
                ))
                .hint(suggested.join(" "));
                crate::printer::error(&error);
                return error.exit.into();
            }
        }
    }
    let _ = e.print();
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => ExitCode::SUCCESS,
        _ => ExitCode::from(Exit::Usage.code()),
    }
}

pub use help::{command, reference};

/// The `stet` binary: `commit` is the one it was built from, for `stet --version`.
pub fn main(commit: &'static str) -> ExitCode {
    let _ = COMMIT.set(commit);
    // `COMPLETE=<shell> stet …`: the shell asking for candidates (or for its registration
    // script); answered and exited here, before anything else is written to stdout.
    clap_complete::CompleteEnv::with_factory(command).complete();
    use clap::FromArgMatches;
    let cli = match command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let printer = Printer {
        verbose: cli.global.verbose,
        quiet: cli.global.quiet,
        lines_to_stderr: false,
    };
    for dir in &cli.global.directory {
        if let Err(e) = std::env::set_current_dir(dir) {
            let error = CliError::usage(format!("cannot run in {}: {e}", dir.display()))
                .hint("-C takes a directory that exists (as git's -C does)");
            crate::printer::error(&error);
            return error.exit.into();
        }
    }
    // Commands that read no configuration run before it is resolved, so that a broken
    // stet.toml never stops an agent's hook or the queue from being read.
    let early = match &cli.command {
        Command::Add(args) => Some(queue::add(args, printer)),
        Command::Queue(args) => Some(queue::list(args, printer)),
        Command::Retry(args) => Some(item_json::after(
            args.json,
            &args.id,
            &args.remote,
            printer,
            |printer| queue::retry(args, printer),
        )),
        Command::Show(args) => Some(queue::show(args, printer)),
        Command::Log(args) => Some(queue::log(args, &cli.global.plugins_dirs, printer)),
        Command::Diff(args) => Some(lane::diff(args, printer)),
        Command::Checkout(args) => Some(lane::checkout(args, printer)),
        Command::Merge(args) => Some(lane::merge(args, printer)),
        Command::Rm(args) => Some(item_json::after(
            args.json,
            &args.id,
            &args.remote,
            printer,
            |printer| queue::rm(args, printer),
        )),
        Command::Clean(args) => Some(clean::run(args, printer)),
        Command::Receipts(args) => Some(receipts::run(args, printer)),
        Command::Status(args) => Some(receipts::status(args, printer)),
        Command::Board(args) => Some(board::run(args, &cli.global.plugins_dirs, printer)),
        Command::Trust(args) => Some(trust::run(args, printer)),
        Command::Completions { shell } => {
            clap_complete::generate(*shell, &mut command(), "stet", &mut std::io::stdout());
            Some(Ok(Exit::Success))
        }
        _ => None,
    };
    if let Some(result) = early {
        return match result {
            Ok(exit) => exit.into(),
            Err(error) => {
                crate::printer::error(&error);
                error.exit.into()
            }
        };
    }
    match &cli.command {
        Command::ProbeWorker { manifest, config } => return probe::worker_main(manifest, config),
        Command::Net(command) => return net::main(command),
        Command::Hook { event, rules } => {
            let code = crate::walls::hooks::hook(
                *event,
                rules,
                &mut std::io::stdin().lock(),
                &mut std::io::stdout().lock(),
                &mut std::io::stderr().lock(),
            );
            return ExitCode::from(code);
        }
        Command::Approver => {
            let result = crate::walls::hooks::approver(
                &mut std::io::stdin().lock(),
                &mut std::io::stdout().lock(),
            );
            return if result.is_ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
        _ => {}
    }
    match run(cli, printer) {
        Ok(exit) => exit.into(),
        Err(error) => {
            crate::printer::error(&error);
            error.exit.into()
        }
    }
}

fn run(cli: Cli, printer: Printer) -> Result<Exit, CliError> {
    let settings = settings::resolve(&cli.global.plugins_dirs, &cli.command.overrides())?;
    if let Some(warning) = settings
        .repository_config
        .as_ref()
        .and_then(|r| r.warning())
    {
        printer.warn(&warning);
    }
    match cli.command {
        Command::Run(args) => run::run(&settings, &args, printer),
        Command::Shell(args) => lane::shell(&settings, &args, printer),
        Command::Ask(args) => ask::run(&settings, &args, printer),
        Command::Drive(args) => drive::run(&settings, &args, printer),
        Command::Land(args) => queue::land(&settings, &args, printer),
        Command::Init(args) => init::run(&settings, args.json, printer),
        Command::Doctor(args) => doctor::run(&settings, &args, printer),
        Command::Walls(args) => walls::run(&settings, &args, printer),
        Command::Gc(args) => gc::run(&settings, &args, printer),
        Command::Seed(args) => seed::run(&settings, &args, printer),
        Command::Profile(ProfileCommand::Login(args)) => profile::login(&settings, &args, printer),
        Command::Plugins(PluginsCommand::Conformance(args)) => {
            plugins_conformance::run(&settings, &args, printer)
        }
        Command::Plugins(PluginsCommand::Install(args)) => {
            plugins_install::install(&settings, &args, printer)
        }
        Command::Plugins(PluginsCommand::Trust(args)) => {
            plugins_install::trust(&settings, &args, printer)
        }
        Command::Plugins(PluginsCommand::Uninstall(args)) => {
            plugins_install::uninstall(&settings, &args, printer)
        }
        Command::Plugins(PluginsCommand::List(args)) => {
            plugins_list::run(&settings, &args, printer)
        }
        Command::Plugins(PluginsCommand::Probe(args)) => {
            plugins_probe::run(&settings, &args, printer)
        }
        Command::ProbeWorker { .. }
        | Command::Net(_)
        | Command::Hook { .. }
        | Command::Approver
        | Command::Add(_)
        | Command::Queue(_)
        | Command::Retry(_)
        | Command::Show(_)
        | Command::Log(_)
        | Command::Diff(_)
        | Command::Checkout(_)
        | Command::Merge(_)
        | Command::Rm(_)
        | Command::Clean(_)
        | Command::Receipts(_)
        | Command::Status(_)
        | Command::Board(_)
        | Command::Trust(_)
        | Command::Completions { .. } => unreachable!("handled before settings are resolved"),
    }
}

impl Command {
    /// The flags of this command that override configuration, for the resolve step.
    fn overrides(&self) -> settings::Overrides {
        use settings::Overrides;
        match self {
            Command::Run(a) => Overrides {
                runtime: a.runtime.clone(),
                probe_timeout: a.probe_timeout.clone(),
                image: a.image.clone(),
                ..Default::default()
            },
            Command::Seed(a) => Overrides {
                runtime: a.runtime.clone(),
                ..Default::default()
            },
            Command::Drive(a) => Overrides {
                runtime: a.choice.runtime.clone(),
                harness: a.choice.harness.clone(),
                ..Default::default()
            },
            Command::Ask(a) => Overrides {
                runtime: a.choice.runtime.clone(),
                harness: a.choice.harness.clone(),
                profiles_root: a.profiles.clone(),
                ..Default::default()
            },
            Command::Walls(a) => Overrides {
                runtime: a.choice.runtime.clone(),
                harness: a.choice.harness.clone(),
                image: a.image.clone(),
                profiles_root: a.profiles.clone(),
                ..Default::default()
            },
            Command::Profile(ProfileCommand::Login(a)) => Overrides {
                runtime: a.choice.runtime.clone(),
                harness: a.choice.harness.clone(),
                profiles_root: a.profiles.clone(),
                ..Default::default()
            },
            Command::Plugins(PluginsCommand::Conformance(a)) => Overrides {
                image: a.image.clone(),
                ..Default::default()
            },
            Command::Plugins(PluginsCommand::Probe(a)) => Overrides {
                runtime: a.runtime.clone(),
                harness: a.harness.clone(),
                probe_timeout: a.probe_timeout.clone(),
                ..Default::default()
            },
            _ => Overrides::default(),
        }
    }
}
