//! stet's egress proxy: the only way out of a sandbox, and the allow-list it enforces.
//!
//! A sandbox has no network interface but loopback. When an agent's harness needs hosts (its
//! model API), the host runs a [`server::Proxy`] on a unix socket, the socket is bind-mounted
//! into the sandbox, and the [`bridge`] (run inside the sandbox by the stet binary) listens on
//! the sandbox's 127.0.0.1 and relays each TCP connection to that socket. `HTTP_PROXY` and
//! `HTTPS_PROXY` point at the bridge. A program that ignores them reaches nothing: there is
//! no interface to reach anything through.
//!
//! # The threat
//!
//! The agent is hostile. Given a proxy, it will try to reach:
//! - hosts it was not given: refused unless the [`policy::Rules`] allow them (deny wins);
//! - the host's loopback services, its private networks, the cloud metadata endpoint
//!   (169.254.169.254): every special address ([`policy::special`]) is refused, whatever name
//!   leads to it, unless that exact `host:port` is listed;
//! - the same through DNS rebinding (a name that resolves to a public address when checked
//!   and to 127.0.0.1 when connected): the proxy resolves once and connects to the address it
//!   checked. Names nobody allowed are not even looked up, so DNS carries nothing out;
//! - other hosts through CONNECT relaying (a CONNECT sent inside an allowed tunnel): a
//!   tunnel is opaque bytes to the proxy, so the inner CONNECT goes to the allowed target,
//!   which sees it as garbage or as its own business.
//! - the host itself, by holding connections: an idle client is dropped after 30 s without
//!   a request head, and connections at once are capped so the host's descriptors last.
//!
//! # What it does not do
//!
//! It does not inspect or terminate TLS: an allowed tunnel's content is the agent's and the
//! target's, and the proxy holds no certificate to forge. It cannot see what an allowed host
//! does with what it receives: an allowed host that is itself an open relay (a proxy, a
//! tunnel service, a paste site, an API that fetches URLs) is outside its reach: allow only
//! hosts that are not. It does not hide or rate-limit traffic to allowed hosts.
//!
//! # Why hyper
//!
//! The proxy reads requests a hostile program wrote. Parsing HTTP by hand invites the
//! mistakes (request smuggling, header confusion, unbounded buffers) that a fuzzed,
//! widely deployed implementation has already had found and fixed, so the protocol is
//! hyper's (HTTP/1 server with upgrades for CONNECT, HTTP/1 client for plain forwarding) and
//! this crate only decides and relays. The bridge parses nothing but the status line of the
//! proxy's answer to its own request.

#![warn(missing_docs)]

pub mod bridge;
pub mod credentials;
pub mod policy;
pub mod server;
pub mod stub;
