//! Nothing secret leaves in a branch: a lane's change is scanned before any push.
//!
//! Two kinds of finding, both in the lines the change adds: a credential stet itself sealed
//! away this drive (`credentials::known`, compared by fingerprint, never held as text here),
//! and the well-known shapes of secrets (Anthropic, OpenAI, GitHub and AWS keys, private
//! keys, JSON Web Tokens, OAuth tokens under their JSON names). The same shapes are what a
//! call's copy of the profile may hold only where its harness declared a credential
//! (`credentials::seal`, [`shape_of`]). A finding refuses the push; the item is marked failed with the file, the line and
//! the kind. A shape in a path the person lists in `[drive] secrets_allowed` is expected
//! (test fixtures); a credential of stet's own never is.
//!
//! A shape is policy, not a wall: a secret split or encoded passes (every file is read as
//! text, binary ones too).
//! What holds is that the real credentials never enter a sandbox (`credentials.rs`).

use std::sync::OnceLock;

use regex::Regex;
use stet_egress::credentials::{tokens, Fingerprint};

/// One finding, for a person: where, and what kind (never the value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The file, relative to the lane.
    pub file: String,
    /// The line in the new version of the file.
    pub line: usize,
    /// What was found (`an Anthropic API key`, `stet's own credential`).
    pub kind: &'static str,
    /// Whether the person may allow it (shapes yes, stet's own credentials never).
    pub allowable: bool,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{} ({})", self.file, self.line, self.kind)
    }
}

/// Whether `text` holds one of the `known` secrets (fingerprint and length): as a token,
/// or glued to other characters (every window of each known length is compared).
fn holds_known(text: &str, known: &[(Fingerprint, usize)]) -> bool {
    if known.is_empty() {
        return false;
    }
    let fingerprints: Vec<Fingerprint> = known.iter().map(|(f, _)| *f).collect();
    if tokens(text).any(|t| fingerprints.contains(&Fingerprint::of(t))) {
        return true;
    }
    let mut lengths: Vec<usize> = known.iter().map(|(_, n)| *n).collect();
    lengths.sort_unstable();
    lengths.dedup();
    let bytes = text.as_bytes();
    lengths.iter().any(|&n| {
        n > 0
            && bytes.len() >= n
            && bytes.windows(n).any(|w| {
                std::str::from_utf8(w).is_ok_and(|w| fingerprints.contains(&Fingerprint::of(w)))
            })
    })
}

fn shapes() -> &'static [(&'static str, Regex)] {
    static SHAPES: OnceLock<Vec<(&'static str, Regex)>> = OnceLock::new();
    SHAPES.get_or_init(|| {
        [
            (
                "an Anthropic key",
                r"sk-ant-[a-z0-9]{2,8}-[A-Za-z0-9_\-]{20,}",
            ),
            (
                "an OpenAI key",
                r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{32,}",
            ),
            (
                "a GitHub token",
                r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})",
            ),
            ("an AWS access key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
            (
                "a private key",
                r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----",
            ),
            // An OAuth access or ID token (Codex's login holds both), signed claims.
            (
                "a JSON Web Token",
                r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{16,}",
            ),
            // An opaque token is known by the name it is kept under (`"refresh_token":
            // "rt_..."`, `"accessToken": ...`), as JSON writes it.
            (
                "an OAuth token",
                r#""(?:access|refresh|id)_?[Tt]oken"\s*:\s*"[A-Za-z0-9._~+/=\-]{16,}""#,
            ),
        ]
        .into_iter()
        .map(|(kind, pattern)| (kind, Regex::new(pattern).expect("the shapes compile")))
        .collect()
    })
}

/// The kind of the first well-known secret shape `text` holds (`an OpenAI key`), if any.
pub fn shape_of(text: &str) -> Option<&'static str> {
    shapes()
        .iter()
        .find(|(_, re)| re.is_match(text))
        .map(|(kind, _)| *kind)
}

/// The findings in a diff (`git diff --unified=0`), skipping shapes in `allowed` paths (a
/// path, or a directory ending in `/`).
pub fn scan_diff(diff: &str, known: &[(Fingerprint, usize)], allowed: &[String]) -> Vec<Finding> {
    let mut scanner = Scanner::new(known, allowed);
    for line in diff.split_inclusive('\n') {
        scanner.feed(line.as_bytes());
    }
    scanner.finish()
}

/// How much of an added line cut in pieces is carried into the next piece: more than any
/// credential is long, so one that straddles the cut is still seen whole.
const OVERLAP: usize = 1024;

/// A diff scanned as it streams from git, a line — or a piece of a long one — at a time:
/// what it holds is never in memory whole.
pub struct Scanner<'a> {
    known: &'a [(Fingerprint, usize)],
    allowed: &'a [String],
    file: String,
    line: usize,
    /// Between `diff --git` and the first hunk: header lines. An added line that reads
    /// `++ x` shows as `+++ x` in a hunk, and is content there.
    in_header: bool,
    /// The end of an added line whose rest is still to come (its last [`OVERLAP`] bytes).
    partial: Option<Vec<u8>>,
    findings: Vec<Finding>,
}

impl<'a> Scanner<'a> {
    /// A scanner for the `known` credentials, shapes in `allowed` paths expected.
    pub fn new(known: &'a [(Fingerprint, usize)], allowed: &'a [String]) -> Scanner<'a> {
        Scanner {
            known,
            allowed,
            file: String::new(),
            line: 0,
            in_header: false,
            partial: None,
            findings: Vec::new(),
        }
    }

    /// Takes the next line of the diff with its newline, or a piece of a line (a piece
    /// without a newline at its end is continued by the next).
    pub fn feed(&mut self, piece: &[u8]) {
        let ends = piece.ends_with(b"\n");
        let body = piece.strip_suffix(b"\n").unwrap_or(piece);
        let body = body.strip_suffix(b"\r").unwrap_or(body);
        if let Some(mut carried) = self.partial.take() {
            carried.extend_from_slice(body);
            self.added(&String::from_utf8_lossy(&carried));
            self.end_added(carried, ends);
            return;
        }
        let text = String::from_utf8_lossy(body);
        if text.starts_with("diff --git ") {
            self.in_header = true;
            return;
        }
        if self.in_header {
            if let Some(path) = text.strip_prefix("+++ ") {
                self.file = path.strip_prefix("b/").unwrap_or(path).to_string();
                return;
            }
            if !text.starts_with("@@ ") {
                return;
            }
            self.in_header = false;
        }
        if let Some(hunk) = text.strip_prefix("@@ ") {
            // `@@ -a,b +c,d @@`: the new lines start at c.
            self.line = hunk
                .split_whitespace()
                .find_map(|part| part.strip_prefix('+'))
                .and_then(|c| c.split(',').next())
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            return;
        }
        if let Some(added) = text.strip_prefix('+') {
            self.added(added);
            self.end_added(body.get(1..).unwrap_or_default().to_vec(), ends);
        }
    }

    /// After an added line or piece: the line counts once it has ended, else its end is
    /// carried into the next piece.
    fn end_added(&mut self, mut text: Vec<u8>, ended: bool) {
        if ended {
            self.line += 1;
        } else {
            let cut = text.len().saturating_sub(OVERLAP);
            text.drain(..cut);
            self.partial = Some(text);
        }
    }

    /// Looks at (part of) an added line.
    fn added(&mut self, added: &str) {
        let found = if holds_known(added, self.known) {
            Some(Finding {
                file: self.file.clone(),
                line: self.line,
                kind: "stet's own credential, sealed away from the agent",
                allowable: false,
            })
        } else if let Some(kind) = shape_of(added) {
            let file = &self.file;
            let expected = self
                .allowed
                .iter()
                .any(|a| a == file || (a.ends_with('/') && file.starts_with(a.as_str())));
            (!expected).then(|| Finding {
                file: file.clone(),
                line: self.line,
                kind,
                allowable: true,
            })
        } else {
            None
        };
        if let Some(finding) = found {
            // A long line's pieces overlap: one finding a line and kind.
            if !self.findings.contains(&finding) {
                self.findings.push(finding);
            }
        }
    }

    /// The findings.
    pub fn finish(self) -> Vec<Finding> {
        self.findings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diff(file: &str, added: &[&str]) -> String {
        // (as git prints it: each file's header after its `diff --git` line)
        let mut text = format!(
            "diff --git a/{file} b/{file}\n--- a/{file}\n+++ b/{file}\n@@ -0,0 +3,{} @@\n",
            added.len()
        );
        for line in added {
            text.push_str(&format!("+{line}\n"));
        }
        text
    }

    #[test]
    fn each_shape_is_found_with_its_file_and_line() {
        let cases = [
            (
                "sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                "an Anthropic key",
            ),
            (
                "key = sk-proj-BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB",
                "an OpenAI key",
            ),
            ("ghp_CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC", "a GitHub token"),
            (
                "aws_access_key_id=AKIAIOSFODNN7EXAMPLE",
                "an AWS access key",
            ),
            ("-----BEGIN OPENSSH PRIVATE KEY-----", "a private key"),
            (
                "Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJkdW1teSJ9.c2lnbmF0dXJlLWR1bW15LXNpZw",
                "a JSON Web Token",
            ),
            (
                r#"{"refresh_token": "rt_dummyDUMMYdummy0123456789"}"#,
                "an OAuth token",
            ),
            (r#""accessToken":"opaque.dummy-value~0123""#, "an OAuth token"),
        ];
        for (line, kind) in cases {
            let found = scan_diff(&diff("src/x.rs", &["fine", line]), &[], &[]);
            assert_eq!(
                found,
                [Finding {
                    file: "src/x.rs".into(),
                    line: 4,
                    kind,
                    allowable: true
                }],
                "{line}"
            );
        }
        for fine in [
            "nothing secret here: sk-short",
            // A name, a variable, a short or empty value: no token.
            r#"let refresh_token = "${REFRESH_TOKEN}";"#,
            r#"{"access_token": "", "id_token": null}"#,
            r#"{"refresh_token": "short"}"#,
            "eyJhbGciOi is where a token starts",
        ] {
            assert!(
                scan_diff(&diff("a", &[fine]), &[], &[]).is_empty(),
                "{fine}"
            );
        }
    }

    #[test]
    fn a_sealed_credential_is_found_by_fingerprint_and_never_allowed() {
        let real = "dummy-but-long-enough-credential";
        let known = [(Fingerprint::of(real), real.len())];
        let found = scan_diff(
            &diff("fixtures/a.json", &[&format!("{{\"t\":\"{real}\"}}")]),
            &known,
            &["fixtures/".into()],
        );
        assert_eq!(found.len(), 1);
        assert!(!found[0].allowable);
        assert!(!found[0].to_string().contains(real));
        // Glued to other characters, it is still found.
        let glued = scan_diff(&diff("a", &[&format!("X_{real}a")]), &known, &[]);
        assert_eq!(glued.len(), 1, "{glued:?}");
    }

    #[test]
    fn an_added_line_that_looks_like_a_file_header_is_content() {
        let text = "diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -0,0 +1,2 @@\n\
                    +++ sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAA\n+fine\n";
        let found = scan_diff(text, &[], &[]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].file.as_str(), found[0].line), ("a", 1));
    }

    #[test]
    fn shapes_in_allowed_paths_are_expected() {
        let line = "-----BEGIN RSA PRIVATE KEY-----";
        let allowed = ["tests/fixtures/".to_string(), "key.pem".to_string()];
        assert!(scan_diff(&diff("tests/fixtures/k.pem", &[line]), &[], &allowed).is_empty());
        assert!(scan_diff(&diff("key.pem", &[line]), &[], &allowed).is_empty());
        assert_eq!(
            scan_diff(&diff("other.pem", &[line]), &[], &allowed).len(),
            1
        );
    }

    #[test]
    fn a_secret_across_the_cut_of_a_long_line_is_found_once() {
        let real = "dummy-but-long-enough-credential";
        let known = [(Fingerprint::of(real), real.len())];
        let line = format!("+{}{real}{}\n", "x".repeat(70_000), "y".repeat(70_000));
        for cut in [1000, 65_536, 70_010] {
            let mut scanner = Scanner::new(&known, &[]);
            for header in ["diff --git a/f b/f\n", "+++ b/f\n", "@@ -0,0 +7 @@\n"] {
                scanner.feed(header.as_bytes());
            }
            for piece in line.as_bytes().chunks(cut) {
                scanner.feed(piece);
            }
            scanner.feed(b"+fine\n");
            let found = scanner.finish();
            assert_eq!(found.len(), 1, "cut at {cut}: {found:?}");
            assert_eq!(found[0].line, 7);
        }
    }

    #[test]
    fn removed_lines_are_not_findings() {
        let text = "+++ b/a\n@@ -1 +0,0 @@\n-sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAA\n";
        assert!(scan_diff(text, &[], &[]).is_empty());
    }
}
