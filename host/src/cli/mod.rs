//! The command line: clap definitions (no I/O here), and `main`, which parses, resolves
//! settings, runs one command and reports its error once.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::error::{CliError, Exit};
use crate::plugins::probe;
use crate::printer::Printer;
use crate::settings;

mod plugins_list;
mod plugins_probe;

/// Stet drains a queue of small work items on a repository, unattended: each item gets its
/// own branch and working copy, a fresh sandbox with only that copy mounted, and an AI
/// coding agent inside it. Runtimes (where the agent runs) and harnesses (which agent
/// runs) are plugins.
#[derive(Debug, Parser)]
#[command(name = "stet", version, max_term_width = 100)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,

    #[command(subcommand)]
    pub command: Command,
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
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Inspect, probe and select plugins.
    #[command(subcommand)]
    Plugins(PluginsCommand),

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
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::ProbeWorker { manifest, config } = &cli.command {
        return probe::worker_main(manifest, config);
    }
    let printer = Printer {
        verbose: cli.global.verbose,
    };
    match run(cli, printer) {
        Ok(exit) => exit.into(),
        Err(error) => {
            eprintln!("{error}");
            error.exit.into()
        }
    }
}

fn run(cli: Cli, printer: Printer) -> Result<Exit, CliError> {
    match cli.command {
        Command::Plugins(PluginsCommand::List(args)) => {
            let settings = settings::resolve(&cli.global, &settings::Overrides::default())?;
            plugins_list::run(&settings, &args, printer)
        }
        Command::Plugins(PluginsCommand::Probe(args)) => {
            let overrides = settings::Overrides {
                runtime: args.runtime.clone(),
                harness: args.harness.clone(),
                probe_timeout: args.probe_timeout.clone(),
            };
            let settings = settings::resolve(&cli.global, &overrides)?;
            plugins_probe::run(&settings, &args, printer)
        }
        Command::ProbeWorker { .. } => unreachable!("handled before settings are resolved"),
    }
}
