//! What may be reached: the allow-list, the deny-list and the addresses no name may lead to.
//!
//! Everything here is a pure function of its arguments, so the whole policy is tested without
//! a socket. The proxy resolves a name once, hands the addresses to [`decide`], and connects
//! to the one address [`decide`] returns: what was checked is what is reached, which is what
//! takes DNS rebinding (a name that answers a public address to the check and a loopback one
//! to the connect) off the table.

use std::borrow::Cow;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// One allow/deny entry: `host` (ports 443 and 80), `host:port`, `*.domain` (any name
/// strictly below domain, ports 443 and 80), `*.domain:port`. Hosts are DNS names or IP
/// literals (IPv6 in brackets: `[::1]:8080`). Case-insensitive; a trailing dot is dropped.
///
/// Hosts are held in canonical form: lower case, no trailing dot, no brackets, IP literals
/// as the standard library prints them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A host on ports 443 and 80.
    Host(String),
    /// A host on one port. The only form that may reach a special address (see [`decide`]).
    HostPort(String, u16),
    /// Every name strictly below the domain, on one port or (`None`) on 443 and 80.
    Domain(String, Option<u16>),
}

const FORMS: &str =
    "accepted forms: host, host:port, *.domain, *.domain:port (IPv6 in brackets: [::1]:8080)";

impl Entry {
    /// Parses the text form; the error says what is wrong and shows the accepted forms.
    pub fn parse(text: &str) -> Result<Entry, String> {
        let fail = |what: &str| format!("bad egress entry `{text}`: {what}; {FORMS}");
        if text.is_empty() {
            return Err(fail("it is empty"));
        }
        if text.chars().any(char::is_whitespace) {
            return Err(fail("it contains a space"));
        }
        if text.contains('/') {
            return Err(fail("give a host, not a URL (no scheme, no path)"));
        }
        let (wild, rest) = match text.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        if rest.contains('*') {
            return Err(fail("`*` may only open an entry, as in `*.example.com`"));
        }
        let (host, port) = if let Some(inner) = rest.strip_prefix('[') {
            let (ip, tail) = inner
                .split_once(']')
                .ok_or_else(|| fail("`[` is not closed"))?;
            if ip.parse::<Ipv6Addr>().is_err() {
                return Err(fail("brackets hold an IPv6 address"));
            }
            let port = match tail {
                "" => None,
                tail => Some(
                    tail.strip_prefix(':')
                        .ok_or_else(|| fail("junk after `]`"))?,
                ),
            };
            (ip, port)
        } else {
            match rest.rsplit_once(':') {
                Some((host, _)) if host.contains(':') => {
                    return Err(fail("an IPv6 address goes in brackets"))
                }
                Some((host, port)) => (host, Some(port)),
                None => (rest, None),
            }
        };
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(p) if p != 0 => Some(p),
                _ => return Err(fail(&format!("port `{p}` is not a number from 1 to 65535"))),
            },
        };
        let host = canonical(host);
        let is_ip = host.parse::<IpAddr>().is_ok();
        if host.is_empty() {
            return Err(fail(if wild {
                "`*.` needs a domain after it"
            } else {
                "no host"
            }));
        }
        if wild && is_ip {
            return Err(fail("`*.` takes a domain name, not an address"));
        }
        if !is_ip && !valid_name(&host) {
            return Err(fail("the host is not a DNS name or an IP address"));
        }
        Ok(match (wild, port) {
            (true, port) => Entry::Domain(host, port),
            (false, Some(port)) => Entry::HostPort(host, port),
            (false, None) => Entry::Host(host),
        })
    }

    /// Whether the entry covers `host` (canonical) on `port`.
    fn matches(&self, host: &str, port: u16) -> bool {
        let web = port == 80 || port == 443;
        match self {
            Entry::Host(h) => web && canonical(h) == host,
            Entry::HostPort(h, p) => *p == port && canonical(h) == host,
            Entry::Domain(d, p) => {
                p.map_or(web, |p| p == port)
                    && host
                        .strip_suffix(canonical(d).as_str())
                        .is_some_and(|below| below.len() > 1 && below.ends_with('.'))
            }
        }
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entry::Host(h) => f.write_str(&bracketed(h)),
            Entry::HostPort(h, p) => write!(f, "{}:{p}", bracketed(h)),
            Entry::Domain(d, None) => write!(f, "*.{d}"),
            Entry::Domain(d, Some(p)) => write!(f, "*.{d}:{p}"),
        }
    }
}

fn valid_name(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// The form hosts are compared in: lower case, no trailing dot, no brackets, IP literals as
/// the standard library prints them (so `[0::1]` and `::1` are one host).
pub fn canonical(host: &str) -> String {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let bare = bare.strip_suffix('.').unwrap_or(bare);
    match bare.parse::<IpAddr>() {
        Ok(ip) => ip.to_string(),
        Err(_) => bare.to_ascii_lowercase(),
    }
}

pub(crate) fn bracketed(host: &str) -> Cow<'_, str> {
    if host.contains(':') {
        format!("[{host}]").into()
    } else {
        host.into()
    }
}

/// `host:port` as people and the `X-Stet-Blocked` header see it (`[::1]:80` for IPv6).
pub(crate) fn target(host: &str, port: u16) -> String {
    format!("{}:{port}", bracketed(host))
}

/// The allow-list and the deny-list. Deny wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// What may be reached.
    pub allow: Vec<Entry>,
    /// What may not, even when `allow` covers it.
    pub deny: Vec<Entry>,
}

/// Why a target was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `host:port`, as asked for (canonical form).
    pub target: String,
    /// One line, for a person.
    pub why: String,
}

/// What [`decide`] concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Connect to exactly this address (the one that was checked).
    Allow(SocketAddr),
    /// Refuse.
    Deny(Refusal),
}

/// The half of [`decide`] that needs no address: deny-list, then allow-list. The proxy asks
/// this before resolving, so a name nobody allowed is never looked up: a DNS query for an
/// arbitrary name would carry data out by itself. `host` is canonical.
pub(crate) fn by_name(rules: &Rules, host: &str, port: u16) -> Result<(), Refusal> {
    match name_refusal(rules, host, port) {
        Some((_, why)) => Err(Refusal {
            target: target(host, port),
            why,
        }),
        None => Ok(()),
    }
}

/// Why `host:port` is refused by name, if it is, and whether by the deny-list.
fn name_refusal(rules: &Rules, host: &str, port: u16) -> Option<(bool, String)> {
    let target = target(host, port);
    if let Some(entry) = rules.deny.iter().find(|e| e.matches(host, port)) {
        Some((true, format!("{target} is denied (`{entry}`)")))
    } else if !rules.allow.iter().any(|e| e.matches(host, port)) {
        Some((false, format!("{target} is not on the allow-list")))
    } else {
        None
    }
}

/// A pure function of the request and the rules. `resolved` are the addresses the host name
/// resolved to (for an IP literal: that address). Deny wins. A target not allowed is refused.
/// Special addresses (see [`special`]) are refused even when the host is allowed by name or
/// wildcard, unless that exact `host:port` is listed as a [`Entry::HostPort`] (how tests
/// reach a fake service on the host's 127.0.0.1). If any resolved address is special (and
/// not exactly listed), the target is refused: a name must not smuggle a special address.
/// A deny entry that is an IP literal also refuses a name resolving to it. Allow returns the
/// one checked address to connect to (the first), so DNS rebinding gains nothing. An empty
/// `resolved` is refused ("does not resolve").
pub fn decide(rules: &Rules, host: &str, port: u16, resolved: &[IpAddr]) -> Verdict {
    let host = canonical(host);
    let target = target(&host, port);
    let refuse = |why: String| {
        Verdict::Deny(Refusal {
            target: target.clone(),
            why,
        })
    };
    let exact = rules
        .allow
        .iter()
        .any(|e| matches!(e, Entry::HostPort(h, p) if *p == port && canonical(h) == host));
    // Why a special address is refused, for `ip` reached by `host`.
    let special_why = |ip: IpAddr| {
        let kind = special(ip).filter(|_| !exact)?;
        let what = format!(
            "{} {kind} address",
            if kind == "unspecified" { "an" } else { "a" }
        );
        Some(if ip.to_string() == host {
            format!("{ip} is {what} and {target} is not listed")
        } else {
            format!("{host} resolves to {ip}, {what}, and {target} is not listed")
        })
    };
    if let Some((denied, why)) = name_refusal(rules, &host, port) {
        // An address literal that is special says so: more useful than "not allowed".
        let special = host.parse().ok().filter(|_| !denied).and_then(special_why);
        return refuse(special.unwrap_or(why));
    }
    let Some(&first) = resolved.first() else {
        return refuse(format!("{host} does not resolve"));
    };
    for &ip in resolved {
        if let Some(entry) = rules.deny.iter().find(|e| e.matches(&ip.to_string(), port)) {
            return refuse(format!(
                "{host} resolves to {ip}, which is denied (`{entry}`)"
            ));
        }
        if let Some(why) = special_why(ip) {
            return refuse(why);
        }
    }
    Verdict::Allow(SocketAddr::new(first, port))
}

/// The cloud metadata services' addresses (AWS, GCP, Azure and others use the IPv4 one).
const METADATA_V4: Ipv4Addr = Ipv4Addr::new(169, 254, 169, 254);
const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);

/// Why an address is special, if it is ("loopback", "private", "link-local", ...): the
/// addresses that lead to the host itself, its networks, or the cloud's metadata service,
/// rather than to the internet.
pub fn special(ip: IpAddr) -> Option<&'static str> {
    let v6 = match ip {
        IpAddr::V4(v4) => return special_v4(v4),
        IpAddr::V6(v6) => v6,
    };
    let s = v6.segments();
    if v6.is_unspecified() {
        Some("unspecified")
    } else if v6.is_loopback() {
        Some("loopback")
    } else if let Some(v4) = v6.to_ipv4() {
        // IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d) forms.
        special_v4(v4)
    } else if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        // NAT64's well-known prefix: a NAT64 gateway would carry it to the embedded address.
        special_v4(Ipv4Addr::from(((s[6] as u32) << 16) | s[7] as u32))
    } else if v6 == METADATA_V6 {
        Some("metadata")
    } else if s[0] & 0xfe00 == 0xfc00 {
        Some("unique-local")
    } else if s[0] & 0xffc0 == 0xfe80 {
        Some("link-local")
    } else if v6.is_multicast() {
        Some("multicast")
    } else {
        None
    }
}

fn special_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_unspecified() {
        Some("unspecified")
    } else if a == 0 {
        Some("this-network")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if ip == METADATA_V4 {
        Some("metadata")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if a == 100 && b & 0xc0 == 64 {
        Some("CGNAT")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if ip.is_broadcast() {
        Some("broadcast")
    } else if a >= 240 {
        Some("reserved")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn rules(allow: &[&str], deny: &[&str]) -> Rules {
        let parse = |list: &[&str]| list.iter().map(|e| Entry::parse(e).unwrap()).collect();
        Rules {
            allow: parse(allow),
            deny: parse(deny),
        }
    }

    fn why(verdict: Verdict) -> String {
        match verdict {
            Verdict::Deny(refusal) => refusal.why,
            Verdict::Allow(addr) => panic!("allowed {addr}"),
        }
    }

    /// `table` is `address kind` pairs, comma-separated; kind `-` means not special.
    fn check_special(table: &str) {
        for (text, kind) in table.split(',').map(|p| p.trim().split_once(' ').unwrap()) {
            assert_eq!(
                special(ip(text)),
                Some(kind).filter(|k| *k != "-"),
                "{text}"
            );
        }
    }

    #[test]
    fn special_ranges_ipv4() {
        check_special(
            "127.0.0.1 loopback, 127.255.1.2 loopback, 10.0.0.1 private, 172.16.0.1 private, \
             172.31.255.255 private, 192.168.1.1 private, 169.254.1.1 link-local, \
             169.254.169.254 metadata, 100.64.0.1 CGNAT, 100.127.255.255 CGNAT, \
             224.0.0.1 multicast, 239.255.255.250 multicast, 0.0.0.0 unspecified, \
             0.1.2.3 this-network, 255.255.255.255 broadcast, 240.0.0.1 reserved, \
             8.8.8.8 -, 172.32.0.1 -, 172.15.255.255 -, 100.128.0.1 -, 1.1.1.1 -",
        );
    }

    #[test]
    fn special_ranges_ipv6_and_embedded_ipv4() {
        check_special(
            "::1 loopback, :: unspecified, fe80::1 link-local, febf::1 link-local, \
             fc00::1 unique-local, fd12:3456::1 unique-local, fd00:ec2::254 metadata, \
             ff02::1 multicast, ::ffff:127.0.0.1 loopback, ::ffff:10.1.2.3 private, \
             ::ffff:169.254.169.254 metadata, ::ffff:0.0.0.0 unspecified, \
             ::127.0.0.1 loopback, ::192.168.0.1 private, 64:ff9b::127.0.0.1 loopback, \
             2606:4700::1111 -, ::ffff:8.8.8.8 -, fec0::1 -, 2001:db8::1 -",
        );
    }

    #[test]
    fn wildcards_match_names_strictly_below() {
        let r = rules(&["*.example.com"], &[]);
        let public = [ip("93.184.216.34")];
        for host in ["a.example.com", "a.b.example.com", "A.Example.COM."] {
            let verdict = decide(&r, host, 443, &public);
            assert!(matches!(verdict, Verdict::Allow(_)), "{host}");
        }
        for host in ["example.com", "badexample.com", "example.com.evil"] {
            assert!(why(decide(&r, host, 443, &public)).contains("not on the allow-list"));
        }
    }

    #[test]
    fn ports_host_means_80_and_443() {
        let r = rules(
            &["api.example.com", "*.cdn.example:8443", "[2606:4700::1]:99"],
            &[],
        );
        let public = [ip("93.184.216.34")];
        let allowed = |host, port| matches!(decide(&r, host, port, &public), Verdict::Allow(_));
        assert!(allowed("api.example.com", 443) && allowed("api.example.com", 80));
        assert!(!allowed("api.example.com", 22) && !allowed("api.example.com", 8443));
        assert!(allowed("x.cdn.example", 8443) && !allowed("x.cdn.example", 443));
        assert!(allowed("[2606:4700::1]", 99) && !allowed("2606:4700::1", 80));
    }

    #[test]
    fn deny_wins_including_a_denied_wildcard() {
        let r = rules(&["*.example.com"], &["*.internal.example.com"]);
        let public = [ip("93.184.216.34")];
        assert!(why(decide(&r, "x.internal.example.com", 443, &public)).contains("denied"));
        let r = rules(&["127.0.0.1:9000"], &["127.0.0.1:9000"]);
        assert!(why(decide(&r, "127.0.0.1", 9000, &[ip("127.0.0.1")])).contains("denied"));
        // A denied address is refused behind an allowed name too.
        let r = rules(&["api.example.com"], &["93.184.216.34"]);
        assert!(why(decide(&r, "api.example.com", 443, &public)).contains("denied"));
    }

    #[test]
    fn allowed_name_resolving_to_a_special_address_is_refused() {
        let r = rules(&["api.example.com", "*.example.org"], &[]);
        let w = why(decide(&r, "api.example.com", 443, &[ip("10.0.0.5")]));
        let expected = "api.example.com resolves to 10.0.0.5, a private address, \
                        and api.example.com:443 is not listed";
        assert_eq!(w, expected);
        // One special address among public ones is enough.
        let mixed = [ip("93.184.216.34"), ip("::ffff:127.0.0.1")];
        assert!(why(decide(&r, "a.example.org", 443, &mixed)).contains("loopback"));
        assert!(why(decide(&r, "api.example.com", 443, &[])).contains("does not resolve"));
    }

    #[test]
    fn exactly_listed_loopback_ports() {
        let r = rules(&["127.0.0.1:8080", "localhost:9090"], &[]);
        let lo = [ip("127.0.0.1")];
        let at = |port| Verdict::Allow(SocketAddr::new(lo[0], port));
        assert_eq!(decide(&r, "127.0.0.1", 8080, &lo), at(8080));
        assert_eq!(decide(&r, "LocalHost", 9090, &lo), at(9090));
        let w = why(decide(&r, "127.0.0.1", 8081, &lo));
        assert_eq!(
            w,
            "127.0.0.1 is a loopback address and 127.0.0.1:8081 is not listed"
        );
        assert!(why(decide(&r, "localhost", 8081, &lo)).contains("not on the allow-list"));
        // Listed as a bare host (web ports) is not listed exactly: still refused.
        let w = why(decide(&rules(&["127.0.0.1"], &[]), "127.0.0.1", 80, &lo));
        assert_eq!(
            w,
            "127.0.0.1 is a loopback address and 127.0.0.1:80 is not listed"
        );
    }

    #[test]
    fn parse_and_display_round_trip() {
        for pair in "Example.COM. example.com, example.com:8443 example.com:8443, \
                     *.example.com *.example.com, *.example.com:22 *.example.com:22, \
                     [::1]:8080 [::1]:8080, [0::1] [::1], 10.0.0.1:53 10.0.0.1:53"
            .split(", ")
        {
            let (text, shown) = pair.split_once(' ').unwrap();
            let entry = Entry::parse(text).unwrap();
            assert_eq!(entry.to_string(), shown);
            assert_eq!(Entry::parse(shown).unwrap(), entry);
        }
        assert_eq!(Entry::parse("a.b:1"), Ok(Entry::HostPort("a.b".into(), 1)));
    }

    #[test]
    fn parse_errors() {
        // One per `|`, the first empty.
        for text in "|example.com:0|example.com:65536|example.com:http|example.com:\
                     |http://example.com|example.com/path|exa mple.com| example.com|*|*.\
                     |*.*.example.com|a.*.example.com|::1|[::1|[127.0.0.1]:80|*.10.0.0.1\
                     |exa$mple.com|a..b"
            .split('|')
        {
            let error = Entry::parse(text).unwrap_err();
            assert!(error.contains("accepted forms"), "{text}: {error}");
        }
        assert!(Entry::parse("").unwrap_err().contains("empty"));
        assert!(Entry::parse("a:99999").unwrap_err().contains("port"));
        assert!(Entry::parse("a b").unwrap_err().contains("space"));
    }
}
