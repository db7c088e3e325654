//! Credentials a sandbox never holds.
//!
//! The agent's sandbox gets a *stand-in*: random, of the real credential's shape, worthless
//! anywhere but at its own sandbox's proxy. The agent's client talks plain HTTP to a
//! [`Gateway`] on the sandbox's loopback (through the bridge); the proxy there puts the real
//! credential in place of the stand-in, on requests to the declared model API only, and sends
//! them on (over TLS beyond loopback). When the sandbox is torn down its stand-ins are
//! [`Revoked`]: a request that carries one afterwards, through any proxy of the process, is
//! refused with that reason.
//!
//! The real value lives in this process's memory only, and no `Debug` or `Display` of these
//! types shows it.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use sha2::{Digest, Sha256};

/// What stet keeps to recognise a secret: its SHA-256, never the secret.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The fingerprint of `secret` (base64 padding aside: `=` also ends a token).
    pub fn of(secret: &str) -> Fingerprint {
        Fingerprint(Sha256::digest(secret.trim_end_matches('=').as_bytes()).into())
    }

    /// As 64 hex digits (how a sandbox reports what it holds, never the value).
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// From [`Fingerprint::hex`]'s form.
    pub fn from_hex(text: &str) -> Option<Fingerprint> {
        if text.len() != 64 || !text.is_ascii() {
            return None;
        }
        let mut bytes = [0u8; 32];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Fingerprint(bytes))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({:02x}{:02x}…)", self.0[0], self.0[1])
    }
}

/// The shortest token [`tokens`] yields: shorter strings are no credential and would only
/// cost hashing.
pub const MIN_TOKEN: usize = 16;

/// The credential-like tokens of `text`, at least [`MIN_TOKEN`] long: maximal runs of
/// letters, digits and `-_.+/~=` (a base64 secret), and, inside each, the runs between
/// `.+/~=` (a base64url secret in a URL path or a query, `t=<secret>`). A secret compared by
/// [`Fingerprint`] is found when it is one of them.
pub fn tokens(text: &str) -> impl Iterator<Item = &str> {
    let fine = |c: char| ".+/~=".contains(c);
    text.split(|c: char| !(c.is_ascii_alphanumeric() || "-_.+/~=".contains(c)))
        .filter(|t| t.len() >= MIN_TOKEN)
        .flat_map(move |coarse| {
            let parts = coarse
                .split(fine)
                .filter(move |p| p.len() >= MIN_TOKEN && p.len() < coarse.len());
            std::iter::once(coarse).chain(parts)
        })
}

/// Stand-ins of sandboxes that are gone, shared by every proxy of a process.
#[derive(Clone, Default)]
pub struct Revoked(Arc<Mutex<HashSet<Fingerprint>>>);

impl Revoked {
    /// From now on `stand_in` is refused as revoked.
    pub fn revoke(&self, stand_in: &str) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(Fingerprint::of(stand_in));
    }

    /// Whether `text` carries a revoked stand-in (as one of its [`tokens`]).
    pub fn carried_by(&self, text: &str) -> bool {
        let revoked = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        !revoked.is_empty() && tokens(text).any(|t| revoked.contains(&Fingerprint::of(t)))
    }
}

impl fmt::Debug for Revoked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.lock().unwrap_or_else(PoisonError::into_inner).len();
        write!(f, "Revoked({n} stand-ins)")
    }
}

/// One credential a [`Gateway`] swaps in: in `header`, a request carrying exactly the
/// stand-in's value gets the real one.
#[derive(Clone)]
pub struct Swap {
    /// The header (`authorization`).
    pub header: String,
    /// The header's whole value with the stand-in (`Bearer <stand-in>`).
    pub stand_in: String,
    /// The header's whole value with the real secret. Never shown.
    pub real: String,
    /// The paths (prefixes, each starting with `/`) it is swapped in on: a credential is
    /// for its own paths, not for every path its gateway serves for other credentials of
    /// the same host. Empty: every path the gateway serves.
    pub paths: Vec<String>,
}

impl Swap {
    /// Whether the credential is swapped in on a request for `path` (its query aside), one
    /// its gateway [serves](Gateway::serves).
    pub fn serves(&self, path: &str) -> bool {
        let path = path.split('?').next().unwrap_or(path);
        self.paths.is_empty() || self.paths.iter().any(|p| path.starts_with(p.as_str()))
    }
}

impl fmt::Debug for Swap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Swap")
            .field("header", &self.header)
            .field("real", &"<never shown>")
            .field("paths", &self.paths)
            .finish_non_exhaustive()
    }
}

/// A model API served to the sandbox in plain HTTP at `127.0.0.1:port`, where the proxy
/// swaps credentials in and sends each request on to `host:upstream_port`, over TLS unless
/// `tls` is false (a service on the host's loopback, as the tests' fake is). The upstream is
/// still subject to the proxy's rules: it must be listed.
#[derive(Clone, Debug)]
pub struct Gateway {
    /// The port inside the sandbox (the bridge relays it to the proxy as it is).
    pub port: u16,
    /// The model API's host name or address.
    pub host: String,
    /// Its port.
    pub upstream_port: u16,
    /// Whether to speak TLS to it.
    pub tls: bool,
    /// The paths it serves (prefixes, each starting with `/`): the credential's power is the
    /// API's, not every endpoint of its host (an OAuth endpoint that mints a key, say).
    /// Empty: every path.
    pub paths: Vec<String>,
    /// What to swap.
    pub swaps: Vec<Swap>,
}

impl Gateway {
    /// Whether a request for `path` (its query aside) is one this gateway serves.
    pub fn serves(&self, path: &str) -> bool {
        // `..` segments would let a prefix be climbed out of by an upstream that folds them.
        let path = path.split('?').next().unwrap_or(path);
        !path
            .split('/')
            .any(|segment| segment == ".." || segment.contains('%'))
            && (self.paths.is_empty() || self.paths.iter().any(|p| path.starts_with(p.as_str())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_split_on_what_a_credential_cannot_hold() {
        let found: Vec<&str> =
            tokens("Bearer sk-ant-oat01-AAAAAAAAAAAAAAAA, x=short; key=\"abcdefghijklmnopq\"")
                .collect();
        assert_eq!(
            found,
            ["sk-ant-oat01-AAAAAAAAAAAAAAAA", "abcdefghijklmnopq"]
        );
        let found: Vec<&str> =
            tokens("GET /x/sk-ant-oat01-BBBBBBBBBBBBBBBB?t=abcdefghijklmnopq==").collect();
        assert_eq!(
            found,
            [
                "/x/sk-ant-oat01-BBBBBBBBBBBBBBBB",
                "sk-ant-oat01-BBBBBBBBBBBBBBBB",
                "t=abcdefghijklmnopq==",
                "abcdefghijklmnopq"
            ]
        );
        assert_eq!(
            Fingerprint::of("abcdefghijklmnopq=="),
            Fingerprint::of("abcdefghijklmnopq")
        );
        let fp = Fingerprint::of("abcdefghijklmnopq");
        assert_eq!(Fingerprint::from_hex(&fp.hex()), Some(fp));
        assert_eq!(Fingerprint::from_hex("zz"), None);
    }

    #[test]
    fn a_revoked_stand_in_is_recognised_inside_any_text_and_nothing_else_is() {
        let revoked = Revoked::default();
        assert!(!revoked.carried_by("Bearer sk-ant-oat01-0123456789abcdef"));
        revoked.revoke("sk-ant-oat01-0123456789abcdef");
        assert!(revoked.carried_by("Bearer sk-ant-oat01-0123456789abcdef"));
        assert!(revoked.carried_by("{\"token\":\"sk-ant-oat01-0123456789abcdef\"}"));
        assert!(!revoked.carried_by("Bearer sk-ant-oat01-0123456789abcdeF"));
        assert!(!format!("{revoked:?}").contains("0123"));
    }

    #[test]
    fn debug_never_shows_the_real_value() {
        let swap = Swap {
            header: "authorization".into(),
            stand_in: "Bearer stand-in-aaaaaaaaaaaaaaaa".into(),
            real: "Bearer the-real-one-bbbbbbbbbbbbbb".into(),
            paths: Vec::new(),
        };
        let shown = format!("{swap:?}");
        assert!(!shown.contains("the-real-one"), "{shown}");
    }
}
