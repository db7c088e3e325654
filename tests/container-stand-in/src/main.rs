//! `container`: a stand-in for Apple's `container` CLI (1.2.2) on Linux, for testing stet's
//! `apple-container` runtime plugin. **A test tool**: never installed for users.
//!
//! # What it is
//!
//! A binary named `container` that accepts exactly the command lines the real CLI accepts (for
//! the commands below), fails the same way (texts, usage, exit statuses), prints the same JSON
//! and tables, and really runs the processes: each stand-in container is a Docker container
//! (named `stet-stand-in-<hash of state dir>-<id>`, labelled `stet.stand-in=1`,
//! `stet.stand-in.state=<state dir>`, `stet.stand-in.id=<id>`; user labels are copied as
//! `stet.stand-in.label.<key>`), driven through the `docker` CLI.
//!
//! Implemented: `--version`, `help`, `system status|start|stop|version`, `run`, `create`,
//! `start`, `exec`, `stop`, `kill`, `delete`/`rm`, `list`/`ls`, `inspect`, `logs`,
//! `image list|ls|pull|load|inspect` (`image` alias `i`, `system` alias `s`). Other real
//! subcommands (`cp`, `stats`, `network`, `volume`, `image tag`, `system df`, …) exit 64 with
//! a stand-in message; unknown ones fail as plugin lookups do (exit 64).
//!
//! # Settings
//!
//! Never from the environment (stet runs the CLI with an environment built from scratch):
//! from `stand-in.toml` in the directory of this executable. Every key is optional:
//!
//! ```toml
//! shape = "1.x"            # or "0.x": 0.12-style PrintableContainer JSON, [] for unknown inspect
//! version = "1.2.2"        # what --version and system version report (0.x default 0.12.3)
//! error_form = "message"   # or "code": `Error: notFound: "…"` (≤0.9); default code for 0.x
//! service = "running"      # or "down": initial API-server state; system start/stop flip it
//! hang = ["exec"]          # commands that hang forever once parsed: "exec", "system status",
//!                          # "system" (every system subcommand), "image pull", "--version"…
//!                          # (canonical names, not aliases)
//! state_dir = "state"      # default <exe dir>/state; relative paths are against the exe dir
//! docker = "/usr/bin/docker"   # default: `docker` on PATH, then the usual places
//! start_delay_ms = 0       # added before a container starts (VM boot time)
//! missing_images = ["x:1"] # treated as absent even if Docker has them
//! json_ignores_all = false # ≤0.9 quirk: list --format json ignores the --all filter
//! ```
//!
//! # Not faithful
//!
//! Processes run in Docker containers on this kernel, not in VMs; bind-mounted files keep
//! their real owners (the real CLI shows them as root:root); nothing is pulled (an image is
//! present iff `docker image inspect` finds it); addresses are Docker's bridge addresses; port
//! publishing, DNS settings, sockets, Rosetta, kernels and SSH forwarding are recorded but not
//! applied; CPU limits are capped at the host's CPU count; Docker adds PATH/HOSTNAME/HOME to
//! an environment without them; `--help` text, progress lines, yaml/toml output and `logs`
//! ordering are approximate; the error for a missing executable is modelled on vmexec's
//! message. README.md has the full list.

mod args;
mod docker;
mod errors;
mod image;
mod json;
mod model;
mod ops;
mod parser;
mod process;
mod settings;
mod spec;
mod state;
mod system;

use std::io::Write;

use args::{Outcome, Values};
use errors::{CliError, Code};
use ops::Ctx;
use settings::Settings;

fn validate(path: &[&'static str], v: &Values) -> Result<(), Result<String, CliError>> {
    let cmd = path.get(1).copied().unwrap_or("");
    match (path.len(), cmd) {
        (2, "run") | (2, "create") => {
            let dns_flags = v.has("dnsNameservers")
                || v.has("dnsDomain")
                || v.has("dnsOptions")
                || v.has("dnsSearch");
            if v.flag("dnsDisabled") && dns_flags {
                return Err(Ok("`--no-dns` cannot be used with DNS configuration flags (`--dns`, `--dns-domain`, `--dns-option`, `--dns-search`)".into()));
            }
        }
        (2, "stop") | (2, "kill") | (2, "delete") => {
            let ids = v.list("containerIds");
            if ids.is_empty() && !v.flag("all") {
                return Err(Err(errors::cz(
                    Code::InvalidArgument,
                    "no containers specified and --all not supplied",
                )));
            }
            if !ids.is_empty() && v.flag("all") {
                let msg = if cmd == "delete" {
                    "explicitly supplied container ID(s) conflict with the --all flag"
                } else {
                    "explicitly supplied container IDs conflict with the --all flag"
                };
                return Err(Err(errors::cz(Code::InvalidArgument, msg)));
            }
        }
        _ => {}
    }
    Ok(())
}

/// An entry names a command ("exec", "system status") or a group of them ("system").
fn hang_if(settings: &Settings, key: &str) {
    let words: Vec<&str> = key.split_whitespace().collect();
    let hit = settings.hang.iter().any(|h| {
        let h: Vec<&str> = h.split_whitespace().collect();
        !h.is_empty() && words.starts_with(&h)
    });
    if hit {
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
}

fn flush_and_exit(code: i32) -> ! {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    std::process::exit(code)
}

fn default_command(ctx: &Ctx, v: &Values) -> Result<i32, CliError> {
    let remaining = v.list("remaining");
    let Some(command) = remaining.first() else {
        ops::stdout_line(&args::help_text(&[&spec::tree()]));
        if !ctx.up() {
            ops::stdout_line("\nPLUGINS: not available, run `container system start`");
        }
        return Ok(0);
    };
    if command.is_empty() {
        return Err(CliError::Validation {
            message: format!("unknown argument '{command}'"),
        });
    }
    if command.starts_with('-') {
        return Err(CliError::Validation {
            message: format!("unknown option '{command}'"),
        });
    }
    let install_root = ctx
        .settings
        .exe_dir
        .parent()
        .unwrap_or(std::path::Path::new("/"))
        .to_path_buf();
    let hints = [
        install_root.join("libexec/container-plugins").join(command),
        install_root.join("libexec/container/plugins").join(command),
    ]
    .iter()
    .map(|p| p.to_string_lossy().into_owned())
    .collect::<Vec<_>>()
    .join("\n  - ");
    let message = if !ctx.up() {
        format!(
            "Plugins are unavailable. Start the container system services and retry:\n\n    container system start\n\nCheck to see that the plugin exists under:\n  - {hints}\n"
        )
    } else {
        format!(
            "Plugin 'container-{command}' not found.\n\n- If system services are not running, start them with: container system start\n- If the plugin isn't installed, ensure it exists under:\n\nCheck to see that the plugin exists under:\n  - {hints}\n"
        )
    };
    Err(CliError::Validation { message })
}

fn help_command(v: &Values) -> Result<i32, CliError> {
    let path = v.list("subcommandPath");
    let tree = spec::tree();
    let mut stack: Vec<&args::CommandSpec> = vec![&tree];
    for name in &path {
        let cur = *stack.last().expect("stack");
        match cur
            .subcommands
            .iter()
            .find(|c| c.name == name.as_str() || c.aliases.contains(&name.as_str()))
        {
            Some(c) if c.name != "help" => stack.push(c),
            _ => {
                return Err(CliError::Validation {
                    message: format!("unknown command '{}'", path.join(" ")),
                })
            }
        }
    }
    ops::stdout_line(&args::help_text(&stack));
    Ok(0)
}

fn dispatch(ctx: &Ctx, path: &[&'static str], v: &Values) -> Result<i32, CliError> {
    let key: Vec<&str> = path[1..].to_vec();
    match key.as_slice() {
        ["<default>"] => default_command(ctx, v),
        ["help"] => help_command(v),
        ["run"] => ops::run_or_create(ctx, v, true),
        ["create"] => ops::run_or_create(ctx, v, false),
        ["start"] => ops::start(ctx, v),
        ["exec"] => ops::exec(ctx, v),
        ["stop"] => ops::stop(ctx, v),
        ["kill"] => ops::kill(ctx, v),
        ["delete"] => ops::delete(ctx, v),
        ["list"] => ops::list(ctx, v),
        ["inspect"] => ops::inspect(ctx, v),
        ["logs"] => ops::logs(ctx, v),
        ["image", "list"] => system::image_list(ctx, v),
        ["image", "inspect"] => system::image_inspect(ctx, v),
        ["image", "pull"] => system::image_pull(ctx, v),
        ["image", "load"] => system::image_load(ctx, v),
        ["system", "status"] => system::status(ctx, v),
        ["system", "start"] => system::start(ctx, v),
        ["system", "stop"] => system::stop(ctx, v),
        ["system", "version"] => system::version(ctx, v),
        // A command group given without a subcommand prints its help.
        _ => {
            let tree = spec::tree();
            let mut stack: Vec<&args::CommandSpec> = vec![&tree];
            for name in &key {
                let cur = *stack.last().expect("stack");
                if let Some(c) = cur.subcommands.iter().find(|c| c.name == *name) {
                    stack.push(c);
                }
            }
            ops::stdout_line(&args::help_text(&stack));
            Ok(0)
        }
    }
}

fn main() {
    let settings = match Settings::load() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("Error: container stand-in: bad settings: {e}");
            flush_and_exit(70);
        }
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let tree = spec::tree();
    let outcome = args::parse(&tree, &argv, validate);
    let form = settings.error_form;
    match outcome {
        Outcome::Help(text) => {
            ops::stdout_line(&text);
            flush_and_exit(0);
        }
        Outcome::Version => {
            hang_if(&settings, "--version");
            ops::stdout_line(&system::version_line("container CLI", &settings.version));
            flush_and_exit(0);
        }
        Outcome::Usage(text) => {
            eprintln!("{text}");
            flush_and_exit(64);
        }
        Outcome::Failed(e) => {
            eprintln!("Error: {}", e.describe(form));
            flush_and_exit(1);
        }
        Outcome::Unimplemented(path) => {
            eprintln!(
                "Error: container stand-in: `{path}` is a real command that this stand-in does not implement"
            );
            flush_and_exit(64);
        }
        Outcome::Run { path, values } => {
            let key = path[1..].join(" ");
            hang_if(&settings, &key);
            let ctx = Ctx {
                store: state::Store::new(&settings),
                docker: docker::Docker {
                    bin: settings.docker.clone(),
                },
                debug: values.flag("debug") || std::env::var_os("CONTAINER_DEBUG").is_some(),
                settings,
            };
            match dispatch(&ctx, &path, &values) {
                Ok(code) => flush_and_exit(code),
                Err(CliError::Exit(code)) => flush_and_exit(code),
                Err(CliError::Validation { message }) => {
                    let root_usage = args::usage_block(&[&tree]);
                    eprintln!("Error: {message}\n{root_usage}");
                    flush_and_exit(64);
                }
                Err(e) => {
                    let e = e.with_xpc_hint();
                    let _ = std::io::stdout().flush();
                    eprintln!("Error: {}", e.describe(form));
                    flush_and_exit(1);
                }
            }
        }
    }
}
