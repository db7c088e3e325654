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

/// Hands the person's terminal to `terminal` until its process ends: raw mode, keystrokes
/// forwarded, output written to standard output, the window's size changes passed on.
/// Returns how the process ended.
pub fn attach(terminal: &Terminal) -> Result<ExitStatus, Error> {
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
    let resizes = signal_hook::iterator::Signals::new([signal_hook::consts::SIGWINCH]).ok();
    let resizer = resizes.as_ref().map(|s| s.handle());
    let watcher = resizes.map(|mut signals| {
        let terminal = terminal.clone();
        std::thread::spawn(move || {
            for _ in signals.forever() {
                let _ = terminal.resize(size());
            }
        })
    });
    let status = terminal.wait(&mut |_, bytes| {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(bytes).and_then(|_| out.flush());
    });
    if let Some(handle) = resizer {
        handle.close();
    }
    if let Some(watcher) = watcher {
        let _ = watcher.join();
    }
    status
}
