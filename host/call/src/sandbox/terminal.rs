//! The person's own terminal handed to a process on a terminal in a sandbox (`stet shell`,
//! `stet run` on a terminal, `stet profile login`): raw mode for as long as it runs, every
//! keystroke forwarded as it comes, its output written as it comes, size changes passed on.
//!
//! What the process writes goes to the person's terminal as it is: it is what they asked
//! to see (an interactive program draws with escape sequences), on a terminal they drive.

use std::io::{IsTerminal, Read, Write};
use std::os::fd::AsFd;

use nix::sys::termios::{self, SetArg, Termios};
use stet_plugin_api::{ExitStatus, TerminalSize};

use super::Terminal;
use crate::error::{Concept, Error};

/// Whether standard input is a terminal (what every command that hands one over needs).
pub fn on_terminal() -> bool {
    std::io::stdin().is_terminal()
}

/// Whether standard input and output are both a terminal: where `stet run` hands its
/// command one (with output redirected, the command's output and errors stay apart and
/// unconverted, as a script reading them expects).
pub fn interactive() -> bool {
    on_terminal() && std::io::stdout().is_terminal()
}

/// Puts the terminal in raw mode for as long as it lives, so keystrokes reach the process
/// one by one (Ctrl-C included, as a byte); restores it on every path out.
struct RawMode(Termios);

impl RawMode {
    fn enter() -> Result<RawMode, Error> {
        let stdin = std::io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd()).map_err(|e| {
            Concept::Sandbox.failure(format!("cannot read the terminal's settings: {e}"))
        })?;
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw).map_err(|e| {
            Concept::Sandbox.failure(format!("cannot set the terminal to raw mode: {e}"))
        })?;
        Ok(RawMode(saved))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, &self.0);
    }
}

/// The size of the terminal on standard input (80×24 when it says none).
pub fn size() -> TerminalSize {
    match rustix::termios::tcgetwinsize(std::io::stdin()) {
        Ok(size) if size.ws_row > 0 && size.ws_col > 0 => TerminalSize {
            rows: size.ws_row,
            cols: size.ws_col,
        },
        _ => TerminalSize { rows: 24, cols: 80 },
    }
}

/// How a process on the person's terminal ended.
pub struct Ended {
    /// Its exit status (as the runtime reported it).
    pub status: Result<ExitStatus, Error>,
    /// The signal (TERM, HUP) that made stet kill it, if one did.
    pub signal: Option<i32>,
}

/// Hands the person's terminal to `terminal` until its process ends: raw mode, keystrokes
/// forwarded, output written to standard output, the window's size changes passed on. A
/// TERM or HUP to stet (the terminal closed) kills the process, so that the caller removes
/// its sandbox; Ctrl-C is a keystroke like any other.
pub fn attach(terminal: &Terminal) -> Result<Ended, Error> {
    use signal_hook::consts::{SIGHUP, SIGTERM, SIGWINCH};
    let mut signals = signal_hook::iterator::Signals::new([SIGWINCH, SIGTERM, SIGHUP])
        .map_err(|e| Concept::Sandbox.failure(format!("cannot watch for signals: {e}")))?;
    let _raw = RawMode::enter()?;
    let keys = terminal.clone();
    // Keystrokes are forwarded until the terminal's process ends; the reader thread is
    // left blocked on stdin then, and ends with this process.
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
    let handle = signals.handle();
    let watcher = {
        let terminal = terminal.clone();
        std::thread::spawn(move || {
            let mut stopped_by = None;
            for signal in signals.forever() {
                if signal == SIGWINCH {
                    let _ = terminal.resize(size());
                } else {
                    stopped_by = Some(signal);
                    let _ = terminal.kill();
                }
            }
            stopped_by
        })
    };
    let status = terminal.wait(&mut |_, bytes| {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(bytes).and_then(|_| out.flush());
    });
    handle.close();
    let signal = watcher.join().unwrap_or(None);
    Ok(Ended { status, signal })
}
