//! `stet profile login`: the agent's own login, run on your terminal inside a sandbox with
//! the walled profile mounted, so the login lands in the profile, written by the agent
//! itself. stet forwards keystrokes and output and never reads what is written.

use std::io::{IsTerminal, Read, Write};
use std::os::fd::AsFd;

use nix::sys::termios::{self, SetArg, Termios};
use stet_plugin_api::TerminalSize;

use super::error::{CliError, Exit};
use crate::harness;
use crate::printer::Printer;
use crate::sandbox::Plan;
use crate::settings::Settings;

use super::ProfileLoginArgs;

/// Puts the terminal in raw mode for as long as it lives, so keystrokes reach the agent
/// one by one; restores it on every path out.
struct RawMode(Termios);

impl RawMode {
    fn enter() -> Result<RawMode, CliError> {
        let stdin = std::io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd())
            .map_err(|e| CliError::failure(format!("cannot read the terminal's settings: {e}")))?;
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw)
            .map_err(|e| CliError::failure(format!("cannot set the terminal to raw mode: {e}")))?;
        Ok(RawMode(saved))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, &self.0);
    }
}

fn terminal_size() -> TerminalSize {
    let mut size = nix::libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the pointer given; fd 0 is open.
    let rc = unsafe { nix::libc::ioctl(0, nix::libc::TIOCGWINSZ, &mut size) };
    if rc == 0 && size.ws_row > 0 && size.ws_col > 0 {
        TerminalSize {
            rows: size.ws_row,
            cols: size.ws_col,
        }
    } else {
        TerminalSize { rows: 24, cols: 80 }
    }
}

pub fn login(
    settings: &Settings,
    _args: &ProfileLoginArgs,
    printer: Printer,
) -> Result<Exit, CliError> {
    if !std::io::stdin().is_terminal() {
        return Err(CliError::usage("stet profile login needs a terminal")
            .hint("run it in your own shell, not from a script or a pipe"));
    }
    let (harness, runtime) = harness::open_with_runtime(settings)?;
    // The one profile; with none yet, the one this login creates.
    let profile_dir = match harness.profile_if_any()? {
        Some(profile) => std::path::PathBuf::from(profile.dir.as_str()),
        None => {
            let dir = settings.profiles_root.join(&harness.name);
            std::fs::create_dir_all(&dir)
                .map_err(|e| CliError::failure(format!("cannot create {}: {e}", dir.display())))?;
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
            printer.warn(&format!("created the walled profile {}", dir.display()));
            dir
        }
    };
    let profile_text = profile_dir.display().to_string();
    let launch = harness.login_launch(&profile_text)?;
    let mut plan = Plan::new("login", &format!("login-{}", std::process::id()), "/tmp");
    plan.mounts = launch.mounts.to_vec();
    plan.env = Vec::new();
    // The login talks to the agent's vendor, and only to the hosts its harness declared,
    // through stet's proxy.
    let walled = crate::network::WalledSandbox::make(
        settings,
        &runtime,
        &launch.network,
        Vec::new(),
        &[],
        plan,
    )?;
    let mut process = launch.process.clone();
    process.env.extend(walled.env());
    let terminal = walled.sandbox.spawn_terminal(process, terminal_size())?;
    let status = {
        let _raw = RawMode::enter()?;
        let keys = terminal.clone();
        // Keystrokes are forwarded until the terminal's process ends; the reader thread is
        // left blocked on stdin then, and ends with the process.
        std::thread::spawn(move || {
            let mut buffer = [0u8; 1024];
            let mut stdin = std::io::stdin().lock();
            while let Ok(n) = stdin.read(&mut buffer) {
                if n == 0 || keys.write(&buffer[..n]).is_err() {
                    let _ = keys.close_input();
                    break;
                }
            }
        });
        terminal.wait(&mut |_, bytes| {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(bytes).and_then(|_| out.flush());
        })?
    };
    walled.finish(None);
    let logged_in = harness.profile().map(|p| p.logged_in).unwrap_or(false);
    printer.out("");
    if logged_in {
        printer.out(&format!(
            "{}: the walled profile {} has a login",
            harness.name, profile_text
        ));
        Ok(Exit::Success)
    } else {
        printer.out(&format!(
            "{}: no login was recorded in {} (the login ended with {:?})",
            harness.name, profile_text, status
        ));
        Ok(Exit::Unusable)
    }
}
