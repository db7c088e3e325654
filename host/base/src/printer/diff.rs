//! A diff on standard output as git shows one: coloured by stet (headers bold, hunks cyan,
//! added lines green, removed red) only when standard output is a terminal and `NO_COLOR`
//! is unset, and paged through `$GIT_PAGER`, else `$PAGER`, else `less -FRX`, only on a
//! terminal. Every line is made inert first: a diff is what a sandbox wrote, and the only
//! escape sequences that reach the terminal are stet's own colours.
//!
//! On a terminal the whole diff is written to an unnamed temporary file first and the
//! pager reads that: the git producing it is held to a deadline, which a person reading
//! slowly in the pager must not run out.

use std::io::{IsTerminal, Seek, Write};

use crate::text::inert_bytes;

/// Where a diff's lines go.
pub struct DiffOut {
    colour: bool,
    /// The pager's command, when the diff is paged (it goes to `spool` first).
    pager: Option<String>,
    spool: Option<std::fs::File>,
    /// Bytes of a character cut between two pieces.
    pending: Vec<u8>,
    /// Whether the next piece starts a line (a long line comes in pieces).
    at_start: bool,
    /// The style of the line being written.
    style: anstyle::Style,
    /// Inside a hunk (after `@@`, until the next file's header).
    in_hunk: bool,
    /// Bytes written to the spool, and those left out past [`MAX_SPOOL`].
    spooled: u64,
    cut: u64,
}

/// The most of a diff spooled for the pager (on the disk, in an unnamed file).
const MAX_SPOOL: u64 = 256 * 1024 * 1024;

/// The pager to page through, on a terminal: `$GIT_PAGER`, else `$PAGER`, else
/// `less -FRX`; none when that is empty or `cat`.
fn pager() -> Option<String> {
    let chosen = ["GIT_PAGER", "PAGER"]
        .iter()
        .find_map(|v| std::env::var(v).ok())
        .unwrap_or_else(|| "less -FRX".to_string());
    let trimmed = chosen.trim();
    (!trimmed.is_empty() && trimmed != "cat").then(|| trimmed.to_string())
}

impl DiffOut {
    /// Decides colour and paging by where standard output goes.
    pub fn open() -> DiffOut {
        let terminal = std::io::stdout().is_terminal();
        let colour = terminal && std::env::var_os("NO_COLOR").is_none();
        let pager = if terminal { pager() } else { None };
        // An unnamed file: nothing is left behind, whatever ends this process.
        let spool = pager.as_ref().and_then(|_| tempfile::tempfile().ok());
        DiffOut {
            colour,
            pager: spool.as_ref().and(pager),
            spool,
            pending: Vec::new(),
            at_start: true,
            style: anstyle::Style::new(),
            in_hunk: false,
            spooled: 0,
            cut: 0,
        }
    }

    /// The style of a line that starts with `start`.
    fn style_of(&mut self, start: &[u8]) -> anstyle::Style {
        use anstyle::{AnsiColor, Style};
        let colour = |c: AnsiColor| Style::new().fg_color(Some(c.into()));
        if start.starts_with(b"diff ") {
            self.in_hunk = false;
        }
        if start.starts_with(b"@@") {
            self.in_hunk = true;
            return colour(AnsiColor::Cyan);
        }
        if !self.in_hunk {
            return Style::new().bold();
        }
        match start.first() {
            Some(b'+') => colour(AnsiColor::Green),
            Some(b'-') => colour(AnsiColor::Red),
            _ => Style::new(),
        }
    }

    /// Writes one piece of the diff (a line, or part of a long one).
    pub fn piece(&mut self, piece: &[u8]) -> std::io::Result<()> {
        if self.at_start {
            self.style = if self.colour {
                self.style_of(piece)
            } else {
                anstyle::Style::new()
            };
        }
        let ends_line = piece.ends_with(b"\n");
        let body = if ends_line {
            &piece[..piece.len() - 1]
        } else {
            piece
        };
        let mut text = inert_bytes(&mut self.pending, body);
        if ends_line {
            // A character cut at the line's end is shown as what it is: not one.
            if !self.pending.is_empty() {
                text.push_str(&crate::text::inert(&String::from_utf8_lossy(
                    &std::mem::take(&mut self.pending),
                )));
            }
        }
        let style = self.style;
        let rendered = format!(
            "{style}{text}{style:#}{}",
            if ends_line { "\n" } else { "" }
        );
        self.at_start = ends_line;
        match &mut self.spool {
            // The spool holds what a pager shows, bounded: the rest of an agent's huge
            // change is said, not written to the disk.
            Some(_) if self.spooled >= MAX_SPOOL => {
                self.cut += rendered.len() as u64;
                Ok(())
            }
            Some(file) => {
                self.spooled += rendered.len() as u64;
                file.write_all(rendered.as_bytes())
            }
            None => std::io::stdout().lock().write_all(rendered.as_bytes()),
        }
    }

    /// Ends the diff: on a terminal, the pager shows it (and this waits for the person
    /// to leave it).
    pub fn finish(mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            let rest = crate::text::inert(&String::from_utf8_lossy(&self.pending)).into_owned();
            self.pending.clear();
            match &mut self.spool {
                Some(file) => file.write_all(rest.as_bytes())?,
                None => std::io::stdout().lock().write_all(rest.as_bytes())?,
            }
        }
        if self.cut > 0 {
            if let Some(file) = &mut self.spool {
                writeln!(
                    file,
                    "\n[stet: {} more of this diff not shown here; stet diff ID | less shows all of it]",
                    crate::printer::size(self.cut)
                )?;
            }
        }
        let (Some(mut spool), Some(pager)) = (self.spool.take(), self.pager.take()) else {
            return std::io::stdout().lock().flush();
        };
        spool.flush()?;
        spool.rewind()?;
        let mut command = std::process::Command::new("sh");
        command.args(["-c", &pager]);
        // As git does: less keeps colours, quits when it all fits, leaves the screen.
        if std::env::var_os("LESS").is_none() {
            command.env("LESS", "FRX");
        }
        let fallback = spool.try_clone();
        command.stdin(spool);
        if command.status().is_ok() {
            return Ok(());
        }
        // No pager could start: the diff is written as it is.
        let mut file = fallback?;
        file.rewind()?;
        let mut stdout = std::io::stdout().lock();
        std::io::copy(&mut file, &mut stdout)?;
        stdout.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    /// The diff as written with colour into a file (the spool), read back.
    fn coloured(diff: &str) -> String {
        let mut out = DiffOut {
            colour: true,
            pager: None,
            spool: Some(tempfile::tempfile().unwrap()),
            pending: Vec::new(),
            at_start: true,
            style: anstyle::Style::new(),
            in_hunk: false,
            spooled: 0,
            cut: 0,
        };
        for line in diff.split_inclusive('\n') {
            // A long line comes in pieces: the second half keeps the first's colour.
            let (a, b) = line.split_at(line.len() / 2);
            out.piece(a.as_bytes()).unwrap();
            out.piece(b.as_bytes()).unwrap();
        }
        let mut file = out.spool.take().unwrap();
        file.rewind().unwrap();
        let mut text = String::new();
        file.read_to_string(&mut text).unwrap();
        text
    }

    #[test]
    fn headers_hunks_and_lines_are_coloured_by_where_they_are_and_nothing_of_the_text_escapes() {
        let text = coloured(
            "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n--- a removed line\n+++ an added line\n context \x1b[2J\n",
        );
        let (bold, reset) = ("\x1b[1m", "\x1b[0m");
        let (red, green, cyan) = ("\x1b[31m", "\x1b[32m", "\x1b[36m");
        let expected = [
            format!("{bold}diff --gi{reset}{bold}t a/x b/x{reset}\n"),
            format!("{bold}--- {reset}{bold}a/x{reset}\n"),
            format!("{bold}+++ {reset}{bold}b/x{reset}\n"),
            format!("{cyan}@@ -1,2 {reset}{cyan}+1,2 @@{reset}\n"),
            format!("{red}--- a rem{reset}{red}oved line{reset}\n"),
            format!("{green}+++ an ad{reset}{green}ded line{reset}\n"),
            " context \\x1b[2J\n".to_string(),
        ]
        .concat();
        assert_eq!(text, expected);
    }
}
