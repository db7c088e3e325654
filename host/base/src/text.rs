//! Text from others made inert for a terminal.
//!
//! Item texts, agents' output, checks' output, plugins' messages and whatever a sandbox
//! wrote may hold control characters: an escape sequence printed raw can retitle the
//! window, rewrite what is on screen, or (on some terminals) answer back as typed input.
//! Everything stet shows on a terminal passes through [`inert`] (the printer does it for
//! every line), which writes such characters out as visible escapes (`\x1b`, `\u{202e}`);
//! newlines and tabs stay. `--json` output keeps text exact (JSON escapes control
//! characters itself).

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` must not reach a terminal as itself: C0 and C1 controls (but newline and
/// tab), DEL, and the bidirectional overrides and isolates that reorder what is shown.
fn dangerous(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
}

/// `text` with every character that could drive a terminal written out as an escape.
pub fn inert(text: &str) -> Cow<'_, str> {
    if !text.chars().any(dangerous) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !dangerous(c) {
            out.push(c);
        } else if (c as u32) < 0x100 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// Bytes from a stream (an agent's output, followed live), made inert: invalid UTF-8 is
/// replaced, control characters escaped. A chunk may end inside a character; the caller
/// keeps `pending` between chunks so no character is cut in two.
pub fn inert_bytes(pending: &mut Vec<u8>, bytes: &[u8]) -> String {
    pending.extend_from_slice(bytes);
    let valid_up_to = match std::str::from_utf8(pending) {
        Ok(_) => pending.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => pending.len(),
    };
    let rest = pending.split_off(valid_up_to);
    let text = String::from_utf8_lossy(pending).into_owned();
    *pending = rest;
    inert(&text).into_owned()
}

/// What another party said, as one short line: its first line, trimmed, cut to at most
/// `max_chars` characters (an ellipsis says where). For words a plugin or a sandbox chose
/// that stet puts in a line of its own (a wall's detail, a probe's fact): a line break in
/// them would start a line stet did not write, and a page of them would bury the line they
/// stand in. (Control characters are kept: the printer makes every line inert, and JSON
/// keeps text exact.)
pub fn one_short_line(text: &str, max_chars: usize) -> String {
    let line = text.trim().lines().next().unwrap_or("").trim().to_string();
    if line.chars().count() <= max_chars {
        return line;
    }
    let mut cut: String = line.chars().take(max_chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// What a caught panic said, for an error that names it.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_reach_the_terminal_as_visible_text() {
        assert_eq!(inert("plain\ttext\n"), "plain\ttext\n");
        assert_eq!(inert("\x1b]0;pwned\x07title"), "\\x1b]0;pwned\\x07title");
        assert_eq!(inert("a\rb\x7f\u{9b}c"), "a\\x0db\\x7f\\x9bc");
        assert_eq!(inert("evil\u{202e}txt"), "evil\\u{202e}txt");
    }

    #[test]
    fn another_partys_words_become_one_short_line() {
        assert_eq!(
            one_short_line("  Linux version 6.1 \n", 40),
            "Linux version 6.1"
        );
        assert_eq!(one_short_line("first\nsecond", 40), "first");
        assert_eq!(one_short_line("abcdef", 4), "abc…");
        assert_eq!(one_short_line("", 4), "");
    }

    #[test]
    fn a_character_cut_between_chunks_is_kept_whole() {
        let mut pending = Vec::new();
        let bytes = "é\x1b".as_bytes();
        assert_eq!(inert_bytes(&mut pending, &bytes[..1]), "");
        assert_eq!(inert_bytes(&mut pending, &bytes[1..]), "é\\x1b");
        assert!(pending.is_empty());
        assert_eq!(inert_bytes(&mut pending, b"\xff!"), "\u{fffd}!");
    }
}
