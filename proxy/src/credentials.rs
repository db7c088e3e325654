//! Credentials a sandbox never holds.
//!
//! The agent's sandbox gets a *stand-in*: random, of the real credential's shape, worthless
//! anywhere but at its own sandbox's proxy. The agent's client talks plain HTTP to a
//! [`Gateway`] on the sandbox's loopback (through the bridge); the proxy there puts the real
//! credential in place of the stand-in, on requests to the declared model API only, and sends
//! them on (over TLS beyond loopback). A credential header that holds anything else (a
//! stand-in of another call, one under another header, a key of the agent's own) is
//! refused: a gateway with a credential to swap sends on no other. When the sandbox is torn
//! down its stand-ins are [`Revoked`]: a request that carries one afterwards, through any
//! proxy of the process, is refused with that reason.
//!
//! The real value lives in this process's memory only, and no `Debug` or `Display` of these
//! types shows it.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use hyper::header::HeaderMap;
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
    /// Whether a request for `path` (its query aside) is one this gateway serves: a path
    /// no upstream could read as another ([`unsettled`]) under one of its prefixes.
    pub fn serves(&self, path: &str) -> bool {
        let path = path.split('?').next().unwrap_or(path);
        unsettled(path).is_none()
            && (self.paths.is_empty() || self.paths.iter().any(|p| path.starts_with(p.as_str())))
    }

    /// The headers that carry a credential to this gateway's API, lowercase: every header a
    /// swap is declared for, and both of Anthropic's (`authorization`, `x-api-key`) when
    /// either is, since its API takes a key in either.
    pub fn credential_headers(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .swaps
            .iter()
            .map(|s| s.header.to_ascii_lowercase())
            .collect();
        if names
            .iter()
            .any(|n| ANTHROPIC_KEY_HEADERS.contains(&n.as_str()))
        {
            names.extend(ANTHROPIC_KEY_HEADERS.map(str::to_owned));
        }
        names.sort();
        names.dedup();
        names
    }

    /// The swaps a request with `headers` gets, or why it is refused (one line, never a
    /// value). Each credential header ([`Gateway::credential_headers`]) is absent or sent
    /// once, holding exactly a stand-in this gateway issued for that very header: anything
    /// else (a stand-in of another call or drive, one under another header, any other key)
    /// would reach the API as the agent's own credential, which the sandbox must not have.
    pub fn swaps_for(&self, headers: &HeaderMap) -> Result<Vec<&Swap>, String> {
        let mut swaps = Vec::new();
        for name in self.credential_headers() {
            let mut values = headers.get_all(name.as_str()).iter();
            let Some(value) = values.next() else {
                continue;
            };
            if values.next().is_some() {
                return Err(format!("the credential header {name} sent more than once"));
            }
            let issued = self.swaps.iter().find(|s| {
                s.header.eq_ignore_ascii_case(&name)
                    && !s.stand_in.is_empty()
                    && s.stand_in.as_bytes() == value.as_bytes()
            });
            match issued {
                Some(swap) => swaps.push(swap),
                None => {
                    return Err(format!(
                        "the credential header {name} holds no stand-in this gateway issued for it"
                    ))
                }
            }
        }
        Ok(swaps)
    }
}

/// The headers Anthropic's API takes a key in.
const ANTHROPIC_KEY_HEADERS: [&str; 2] = ["authorization", "x-api-key"];

/// Why `path` (no query) could name another path to an upstream that normalises it, so a
/// prefix it is checked against could be climbed out of; `None` when it could not. Refused:
/// `.` and `..` segments however written (percent-encoded in any case, or with `;`
/// parameters, which some servers drop before resolving), backslashes (a separator to
/// some), every percent-escape (an encoded slash splits a segment once decoded, and an
/// escaped `%` is a dot to a server that decodes twice; a model API's paths need none), and
/// any character beyond ASCII.
pub fn unsettled(path: &str) -> Option<&'static str> {
    let lower = path.to_ascii_lowercase();
    if lower.split('/').any(is_dot_segment) {
        return Some("a dot segment");
    }
    if lower.contains('\\') || lower.contains("%5c") {
        return Some("a backslash");
    }
    if lower.contains("%2f") {
        return Some("an encoded slash");
    }
    if lower.contains('%') {
        return Some("a percent-escape");
    }
    // Some servers fold a full-width dot (U+FF0E) into a dot.
    if !lower.is_ascii() {
        return Some("a character beyond ASCII");
    }
    None
}

/// Whether a lowercase `segment` is `.` or `..` once its `;` parameters are dropped and its
/// escaped dots decoded.
fn is_dot_segment(segment: &str) -> bool {
    let name = segment.split(';').next().unwrap_or(segment);
    matches!(name.replace("%2e", ".").as_str(), "." | "..")
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

    fn gateway(paths: &[&str], swaps: &[(&str, &str)]) -> Gateway {
        Gateway {
            port: 3180,
            host: "api.example".into(),
            upstream_port: 443,
            tls: true,
            paths: paths.iter().map(|p| p.to_string()).collect(),
            swaps: swaps
                .iter()
                .map(|(header, stand_in)| Swap {
                    header: header.to_string(),
                    stand_in: stand_in.to_string(),
                    real: "Bearer the-real-one-bbbbbbbbbbbbbb".into(),
                    paths: Vec::new(),
                })
                .collect(),
        }
    }

    /// Paths an upstream that normalises them could read as outside `/v1/`.
    const CLIMBING: [&str; 31] = [
        "/v1/..",
        "/v1/../admin",
        "/v1/./messages",
        "/v1/.",
        "/v1/messages/../../admin",
        "/v1/..;/admin",
        "/v1/..;x=1/admin",
        "/v1/.;x/messages",
        "/v1/%2e%2e;/admin",
        "/v1/..\\admin",
        "/v1\\..\\admin",
        "/v1/..%5cadmin",
        "/v1/..%5Cadmin",
        "/v1/%2e%2e/admin",
        "/v1/%2E%2E/admin",
        "/v1/%2e%2E/admin",
        "/v1/.%2e/admin",
        "/v1/.%2E/admin",
        "/v1/%2e./admin",
        "/v1/%2e/messages",
        "/v1/%2E/messages",
        "/v1/..%2fadmin",
        "/v1/..%2Fadmin",
        "/v1/%2f..%2fadmin",
        "/v1/%252e%252e/admin",
        "/v1/..?beta=true",
        "/v1/..;/admin?beta=true",
        "/v1/..\\admin?beta=true",
        "/..",
        "/v1/%c0%ae%c0%ae/admin",
        "/v1/\u{ff0e}\u{ff0e}/admin",
    ];

    /// Paths the model APIs' clients send.
    const ORDINARY: [&str; 8] = [
        "/v1/messages",
        "/v1/messages?beta=true",
        "/v1/models/claude-x",
        "/api/oauth/usage",
        "/v1/file.json",
        "/v1/.well-known/x",
        "/v1/a..b/messages",
        "/v1/messages?next=%2Fv1%2F..%2F..&x=..\\y",
    ];

    #[test]
    fn a_path_that_could_climb_out_of_a_prefix_is_never_served() {
        let declared = gateway(&["/v1/", "/api/oauth/usage"], &[]);
        let everything = gateway(&[], &[]);
        for path in CLIMBING {
            assert!(!declared.serves(path), "{path}");
            assert!(!everything.serves(path), "{path}");
            let bare = path.split('?').next().unwrap_or(path);
            assert!(unsettled(bare).is_some(), "{path}");
        }
        for path in ORDINARY {
            assert!(declared.serves(path), "{path}");
            assert!(everything.serves(path), "{path}");
        }
        assert_eq!(unsettled("/v1/..;/admin"), Some("a dot segment"));
        assert_eq!(unsettled("/v1/..\\admin"), Some("a backslash"));
        assert_eq!(unsettled("/v1/a%2Fb"), Some("an encoded slash"));
        assert_eq!(unsettled("/v1/a%20b"), Some("a percent-escape"));
        assert!(!declared.serves("/admin"));
    }

    const STAND_IN: &str = "Bearer sk-ant-oat01-standinstandinstandin";
    const OTHER_CALLS: &str = "Bearer sk-ant-oat01-anothercallanothercall";

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                hyper::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        map
    }

    #[test]
    fn both_of_anthropics_key_headers_carry_a_credential_when_either_is_declared() {
        let both = ["authorization".to_string(), "x-api-key".to_string()];
        assert_eq!(
            gateway(&[], &[("Authorization", STAND_IN)]).credential_headers(),
            both
        );
        assert_eq!(
            gateway(&[], &[("X-Api-Key", "k")]).credential_headers(),
            both
        );
        assert_eq!(
            gateway(&[], &[("x-goog-api-key", "k")]).credential_headers(),
            ["x-goog-api-key".to_string()]
        );
        assert!(gateway(&[], &[]).credential_headers().is_empty());
    }

    #[test]
    fn only_this_gateways_own_stand_in_in_its_own_header_passes_and_is_swapped() {
        let one = gateway(&[], &[("Authorization", STAND_IN)]);
        let swapped = one.swaps_for(&headers(&[("authorization", STAND_IN)]));
        assert_eq!(swapped.map(|s| s.len()), Ok(1));
        // No credential at all goes on without one.
        let none = one.swaps_for(&headers(&[("content-type", "application/json")]));
        assert_eq!(none.map(|s| s.len()), Ok(0));
        let foreign: [&[(&str, &str)]; 8] = [
            &[("authorization", OTHER_CALLS)],
            &[("authorization", "Bearer sk-ant-api03-someoneelseskey")],
            &[("authorization", "bearer sk-ant-oat01-standinstandinstandin")],
            &[("authorization", "")],
            &[("x-api-key", STAND_IN)],
            &[("x-api-key", "sk-ant-oat01-standinstandinstandin")],
            &[("authorization", STAND_IN), ("x-api-key", OTHER_CALLS)],
            &[("authorization", STAND_IN), ("authorization", STAND_IN)],
        ];
        for pairs in foreign {
            let refused = one.swaps_for(&headers(pairs)).map(|s| s.len());
            let why = refused.expect_err(&format!("{pairs:?}"));
            assert!(
                !why.contains("standin") && !why.contains("anothercall"),
                "{why}"
            );
            assert!(!why.contains('\n'), "{why}");
        }
    }

    #[test]
    fn a_stand_in_under_another_declared_header_is_refused_not_swapped() {
        let two = gateway(
            &[],
            &[("authorization", STAND_IN), ("x-api-key", OTHER_CALLS)],
        );
        let both = headers(&[("authorization", STAND_IN), ("x-api-key", OTHER_CALLS)]);
        assert_eq!(two.swaps_for(&both).map(|s| s.len()), Ok(2));
        for crossed in [
            headers(&[("authorization", OTHER_CALLS)]),
            headers(&[("x-api-key", STAND_IN)]),
        ] {
            assert!(two.swaps_for(&crossed).is_err(), "{crossed:?}");
        }
        // A swap with no stand-in (nothing sealed) matches no value, not even an empty one.
        let empty = gateway(&[], &[("authorization", "")]);
        assert!(empty.swaps_for(&headers(&[("authorization", "")])).is_err());
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
