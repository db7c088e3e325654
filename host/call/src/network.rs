//! The network wall: a sandbox reaches only the hosts its harness declared, through stet's
//! own proxy.
//!
//! Every sandbox is made with no network interface but loopback. A launch that needs hosts
//! (`Network::AllowHosts`: an agent's model API) gets an [`Egress`]: a host-side HTTP proxy
//! (`stet-egress`) on a unix socket in a private directory, forwarded into the sandbox
//! (`SandboxOption::ForwardSocket`), and a bridge started by stet inside the sandbox (the stet
//! binary, mounted as itself) that listens on the sandbox's `127.0.0.1` and relays to it. The
//! proxy variables point at the bridge, so git, curl, pip, npm, cargo and Claude Code work
//! unchanged; a program that ignores or removes them reaches nothing — there is no
//! interface to reach anything through. `NO_PROXY` keeps the sandbox's own loopback direct.
//!
//! A listed service on the *host's* loopback (a fake model API in the tests) is reached at
//! the same address inside: the bridge listens on that port of the sandbox's loopback too
//! and asks the proxy for a tunnel to it, so a base URL like `http://127.0.0.1:38743` works
//! as configured, through the same policy as everything else.
//!
//! Policy (`stet_egress::policy`): what the harness declares, plus `[network] allow` (the
//! person's files, a trusted repository file), minus `[network] deny` (any file); deny wins;
//! loopback, private, link-local and metadata addresses only when that exact `host:port`
//! is listed. Every refusal is answered 403 with the reason, and counted in the receipt.

use std::path::PathBuf;
use std::sync::OnceLock;

use stet_egress::credentials::{Gateway, Revoked};
use stet_egress::policy::{Entry, Rules};
use stet_egress::server::{Blocked, Extras, GatewayCounts, Proxy, SystemResolver};
use stet_plugin_api::{EnvVar, Network, ProcessSpec, SandboxOption};

use crate::error::{Concept, Error};
use crate::sandbox::{stet_binary, OpenRuntime, Plan, Process, Sandbox};
use crate::settings::{NetworkSettings, Settings};

/// The credential stand-ins (`credentials::Sealed`) of every sandbox of this process that
/// is gone: every proxy of this process refuses a request that carries one.
pub fn revoked() -> &'static Revoked {
    static REVOKED: OnceLock<Revoked> = OnceLock::new();
    REVOKED.get_or_init(Revoked::default)
}

/// Where the proxy's socket is inside a sandbox.
pub const SANDBOX_SOCKET: &str = "/run/stet-egress.sock";

/// The port the bridge listens on inside a sandbox for proxy requests, unless a forwarded
/// port takes it.
const PROXY_PORT: u16 = 3128;

/// What the bridge prints once it listens (see `stet_egress::bridge::run`).
pub const BRIDGE_READY: &str = "stet-bridge: ready";

pub use crate::receipts::BlockedRecord;

/// A host the proxy refused, as the receipt records it.
fn blocked_record(b: Blocked) -> BlockedRecord {
    BlockedRecord {
        target: b.target,
        why: b.why,
        count: b.count,
        first_unix_ms: b.first_unix_ms,
    }
}

/// The egress of one sandbox: its proxy, and what the sandbox must be made with to use it.
pub struct Egress {
    proxy: Proxy,
    /// Holds the socket; private to this process's user.
    _dir: tempfile::TempDir,
    socket: PathBuf,
    port: u16,
    forwards: Vec<(u16, String)>,
    /// The credential gateways' ports inside the sandbox.
    gateway_ports: Vec<u16>,
    /// The allow-list, as the consent screen and the receipt name it.
    pub allowed: Vec<String>,
    /// The deny-list, likewise.
    denied: Vec<String>,
}

impl Egress {
    /// Starts the proxy for a sandbox whose launch (`whose`, for errors) declared
    /// `declared`, serving `gateways` (the call's credentials, `credentials::Sealed`) and
    /// the model API stub at each of `stubs` (a login's refresh).
    pub fn start(
        whose: &str,
        declared: &[String],
        settings: &NetworkSettings,
        gateways: Vec<Gateway>,
        stubs: &[u16],
    ) -> Result<Egress, Error> {
        let parse = |text: &String, whose: &str| {
            Entry::parse(text).map_err(|why| {
                Concept::Network
                    .failure(format!("{whose} names `{text}` as a host to reach: {why}"))
            })
        };
        let mut allow = Vec::new();
        for host in declared {
            allow.push(parse(host, whose)?);
        }
        for host in &settings.allow {
            allow.push(parse(host, "[network] allow")?);
        }
        // A gateway's model API is the harness's declaration: listed, like its hosts.
        for gateway in &gateways {
            let entry = Entry::HostPort(gateway.host.clone(), gateway.upstream_port);
            if !allow.contains(&entry) {
                allow.push(entry);
            }
        }
        let deny = settings
            .deny
            .iter()
            .map(|h| parse(h, "[network] deny"))
            .collect::<Result<Vec<_>, _>>()?;
        // A listed service on a loopback address is forwarded at its own port, so that a
        // client that bypasses proxies for loopback (NO_PROXY) still reaches it, through
        // the same policy.
        let forwards: Vec<(u16, String)> = allow
            .iter()
            .filter_map(|entry| match entry {
                Entry::HostPort(host, port) if is_loopback_name(host) => {
                    Some((*port, entry.to_string()))
                }
                _ => None,
            })
            .collect();
        let port = (PROXY_PORT..)
            .find(|p| !forwards.iter().any(|(f, _)| f == p))
            .unwrap_or(PROXY_PORT);
        if let Some(gateway) = gateways
            .iter()
            .find(|g| g.port == port || forwards.iter().any(|(f, _)| *f == g.port))
        {
            return Err(Concept::Network.failure(format!(
                "{whose}: the credential gateway's port {} inside the sandbox is taken by a listed service on the host's loopback",
                gateway.port
            ))
            .hint("run that service on another port"));
        }
        if let Some(stub) = stubs
            .iter()
            .find(|s| **s == port || forwards.iter().any(|(f, _)| f == *s))
        {
            return Err(Concept::Network.failure(format!(
                "{whose}: the model API stub's port {stub} inside the sandbox is taken by a listed service on the host's loopback"
            ))
            .hint("run that service on another port"));
        }
        let gateway_ports: Vec<u16> = gateways
            .iter()
            .map(|g| g.port)
            .chain(stubs.iter().copied())
            .collect();
        let allowed: Vec<String> = allow.iter().map(ToString::to_string).collect();
        let denied: Vec<String> = deny.iter().map(ToString::to_string).collect();
        let dir = crate::sandbox::leftovers::temp_dir("stet-egress-").map_err(|e| {
            Concept::Network.failure(format!("cannot make the proxy's directory: {e}"))
        })?;
        let socket = dir.path().join("proxy.sock");
        let proxy = Proxy::start_with(
            &socket,
            Rules { allow, deny },
            std::sync::Arc::new(SystemResolver),
            Extras {
                gateways,
                revoked: revoked().clone(),
                tls_roots: None,
                stubs: stubs.to_vec(),
                connect_to: settings.connect_to.clone(),
            },
        )
        .map_err(|e| Concept::Network.failure(format!("cannot start stet's egress proxy: {e}")))?;
        Ok(Egress {
            proxy,
            _dir: dir,
            socket,
            port,
            forwards,
            gateway_ports,
            allowed,
            denied,
        })
    }

    /// The sandbox option that forwards the proxy's socket into it.
    pub fn option(&self) -> SandboxOption {
        SandboxOption::ForwardSocket(stet_plugin_api::ForwardedSocket {
            host: self.socket.display().to_string().into(),
            sandbox: SANDBOX_SOCKET.into(),
        })
    }

    /// The bridge, run inside the sandbox by the stet binary at `stet` (mounted as itself).
    pub fn bridge(&self, stet: &str) -> ProcessSpec {
        let mut argv = vec![
            stet.to_string(),
            "net".to_string(),
            "bridge".to_string(),
            "--socket".to_string(),
            SANDBOX_SOCKET.to_string(),
            "--listen".to_string(),
            self.port.to_string(),
        ];
        for port in &self.gateway_ports {
            argv.push("--gateway".to_string());
            argv.push(port.to_string());
        }
        for (port, target) in &self.forwards {
            argv.push("--forward".to_string());
            argv.push(format!("{port}={target}"));
        }
        ProcessSpec {
            argv: argv.into_iter().map(Into::into).collect(),
            env: Default::default(),
            workdir: stet_plugin_api::ROption::RNone,
            stdin: Default::default(),
        }
    }

    /// The proxy variables every program in the sandbox sees.
    pub fn env(&self) -> Vec<EnvVar> {
        let proxy = format!("http://127.0.0.1:{}", self.port);
        stet_plugin_api::PROXY_VARIABLES
            .iter()
            .map(|name| {
                let value = if name.eq_ignore_ascii_case("NO_PROXY") {
                    "localhost,127.0.0.1,::1"
                } else {
                    proxy.as_str()
                };
                EnvVar::new(*name, value)
            })
            .collect()
    }

    /// The route in words, for the consent screen and receipts.
    pub fn describe(&self) -> String {
        route(&self.allowed, &self.denied)
    }

    /// Stops the proxy; returns what it refused, and how many requests its gateways sent
    /// on with a real credential swapped in.
    pub fn finish(self) -> (Vec<BlockedRecord>, GatewayCounts) {
        let blocked = self.proxy.blocked();
        let counts = self.proxy.gateway_counts();
        self.proxy.stop();
        (blocked.into_iter().map(blocked_record).collect(), counts)
    }
}

/// The network a launch asking for `asked` gets, in words, before its sandbox is made (the
/// receipt written before a call names it): what [`Egress::describe`] will say.
pub fn describe(asked: &Network, settings: &NetworkSettings) -> String {
    match asked {
        Network::AllowHosts(hosts) => {
            // Canonical, as the proxy's own rules will print them.
            let canonical = |h: &str| Entry::parse(h).map_or(h.to_string(), |e| e.to_string());
            let allowed: Vec<String> = hosts
                .iter()
                .map(|h| canonical(h))
                .chain(settings.allow.iter().map(|h| canonical(h)))
                .collect();
            let denied: Vec<String> = settings.deny.iter().map(|h| canonical(h)).collect();
            route(&allowed, &denied)
        }
        Network::Open => "refused: the open network".to_string(),
        _ => "none".to_string(),
    }
}

fn route(allowed: &[String], denied: &[String]) -> String {
    format!(
        "only {} (through stet's proxy{})",
        if allowed.is_empty() {
            "nothing".to_string()
        } else {
            allowed.join(", ")
        },
        if denied.is_empty() {
            String::new()
        } else {
            format!("; denied: {}", denied.join(", "))
        }
    )
}

/// A sandbox made with its network wall: no interface but loopback, and, when the launch
/// declared hosts, stet's proxy forwarded in and the bridge listening.
pub struct WalledSandbox<'a> {
    /// The sandbox.
    pub sandbox: Sandbox<'a>,
    /// Its network in words (for the consent screen and receipts).
    pub described: String,
    egress: Option<Egress>,
    bridge: Option<Process>,
}

impl<'a> WalledSandbox<'a> {
    /// Makes `plan`'s sandbox on `runtime` with the network `asked` (a launch's): none, or
    /// the hosts it declared, through the proxy, which also serves `gateways` (the call's
    /// credentials) and the model API stub at each of `stubs`. The open network is refused.
    pub fn make(
        settings: &Settings,
        runtime: &'a OpenRuntime,
        asked: &Network,
        gateways: Vec<Gateway>,
        stubs: &[u16],
        mut plan: Plan,
    ) -> Result<WalledSandbox<'a>, Error> {
        // A harness whose credential goes through a gateway needs the proxy even when it
        // declared no host by name.
        let none = stet_plugin_api::RVec::new();
        let asked = match asked {
            Network::None if !gateways.is_empty() || !stubs.is_empty() => {
                &Network::AllowHosts(none)
            }
            asked => asked,
        };
        let egress = match asked {
            // `stet run --network` is the one way to an open network, and it does not come
            // here: a launch (an agent's, a proof's) never gets one.
            Network::Open => {
                return Err(Concept::Network.usage(format!(
                    "the {} launch asks for the open network; an agent gets only the hosts its harness declares",
                    plan.kind
                ))
                .hint("name the hosts the agent needs (for the command harness: allow_hosts = [...]; for any harness: [network] allow)"));
            }
            Network::AllowHosts(hosts) => {
                // Fail closed: without the forwarded socket there is no way out at all,
                // and an open network would be no wall.
                if !runtime
                    .capabilities
                    .iter()
                    .any(|c| c == stet_plugin_api::capability::FORWARD_SOCKET)
                {
                    return Err(Concept::Network.unusable(format!(
                            "runtime {} cannot forward stet's proxy into a sandbox, so an agent that needs the network cannot be walled in",
                            runtime.name
                        ),
                    )
                    .hint("use a runtime whose probe lists forward-socket among its capabilities (stet plugins probe)"));
                }
                let hosts: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
                Some(Egress::start(
                    &format!("the {} launch", plan.kind),
                    &hosts,
                    &settings.network,
                    gateways,
                    stubs,
                )?)
            }
            _ => None,
        };
        let (network, described) = match &egress {
            Some(egress) => (Network::None, egress.describe()),
            None => (Network::None, "none".to_string()),
        };
        plan.network = network;
        // The bridge is the stet binary itself, mounted as itself (a harness's hooks mount
        // it already).
        let stet = stet_binary()?;
        if egress.is_some() && !plan.mounts.iter().any(|m| m.target.as_str() == stet) {
            plan.mounts.push(stet_plugin_api::Mount {
                source: stet.clone().into(),
                target: stet.clone().into(),
                writable: false,
            });
        }
        let options = egress.iter().map(Egress::option).collect();
        let (sandbox, _) = Sandbox::start(runtime, plan.spec(settings), options)?;
        let bridge = match &egress {
            Some(egress) => Some(start_bridge(&sandbox, egress, &stet)?),
            None => None,
        };
        Ok(WalledSandbox {
            sandbox,
            described,
            egress,
            bridge,
        })
    }

    /// What every process in the sandbox is given to find the proxy (nothing without one).
    pub fn env(&self) -> Vec<EnvVar> {
        self.egress.as_ref().map(Egress::env).unwrap_or_default()
    }

    /// Ends the sandbox (stopped, then removed by `reaper`, or torn down here) and stops
    /// its proxy; returns what the proxy refused, and how many requests had a credential
    /// swapped in.
    pub fn finish(
        self,
        reaper: Option<&crate::sandbox::Reaper>,
    ) -> (Vec<BlockedRecord>, GatewayCounts) {
        if let Some(bridge) = &self.bridge {
            let _ = bridge.kill();
        }
        self.sandbox.retire(reaper);
        self.egress.map(Egress::finish).unwrap_or_default()
    }
}

/// Starts the egress bridge in `sandbox` and waits until it listens (it says so on its
/// standard output), so that the agent's first request finds it.
fn start_bridge(sandbox: &Sandbox<'_>, egress: &Egress, stet: &str) -> Result<Process, Error> {
    let bridge = sandbox.spawn(egress.bridge(stet))?;
    let (said, heard) = std::sync::mpsc::channel::<Vec<u8>>();
    let waiting = bridge.clone();
    std::thread::spawn(move || {
        let _ = waiting.wait(&mut |_, bytes| {
            let _ = said.send(bytes.to_vec());
        });
    });
    let mut output = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !String::from_utf8_lossy(&output).contains(BRIDGE_READY) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match heard.recv_timeout(left) {
            Ok(bytes) => output.extend(bytes),
            Err(_) => {
                let _ = bridge.kill();
                return Err(Concept::Network.failure(
                    "stet's egress bridge did not start inside the sandbox",
                )
                .caused_by(format!("it said: {}", String::from_utf8_lossy(&output).trim()))
                .hint("check that the stet binary runs in the image (stet run -- <path to stet> --version)"));
            }
        }
    }
    Ok(bridge)
}

/// Whether `host` names this machine's loopback.
pub(crate) fn is_loopback_name(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_service_is_forwarded_at_its_port_and_the_proxy_port_steers_clear() {
        let egress = Egress::start(
            "the implement launch",
            &["127.0.0.1:3128".to_string(), "api.example.com".to_string()],
            &NetworkSettings {
                allow: vec!["*.pypi.org".into()],
                deny: vec!["evil.example.com".into()],
                connect_to: Vec::new(),
            },
            Vec::new(),
            &[],
        )
        .unwrap();
        assert_eq!(egress.forwards, [(3128, "127.0.0.1:3128".to_string())]);
        assert_eq!(egress.port, 3129);
        assert_eq!(
            egress.allowed,
            ["127.0.0.1:3128", "api.example.com", "*.pypi.org"]
        );
        // What the receipt says before the call is what the proxy says it enforces.
        let said = "only 127.0.0.1:3128, api.example.com, *.pypi.org (through stet's proxy; denied: evil.example.com)";
        assert_eq!(egress.describe(), said);
        assert_eq!(
            describe(
                &Network::AllowHosts(
                    vec!["127.0.0.1:3128".into(), "API.example.com".into()].into()
                ),
                &NetworkSettings {
                    allow: vec!["*.pypi.org".into()],
                    deny: vec!["evil.example.com".into()],
                    connect_to: Vec::new(),
                }
            ),
            said
        );
        assert_eq!(describe(&Network::None, &Default::default()), "none");
        let env = egress.env();
        assert!(env.iter().any(
            |v| v.name.as_str() == "HTTPS_PROXY" && v.value.as_str() == "http://127.0.0.1:3129"
        ));
        let bridge = egress.bridge("/usr/bin/stet");
        let argv: Vec<&str> = bridge.argv.iter().map(|a| a.as_str()).collect();
        assert_eq!(
            argv,
            [
                "/usr/bin/stet",
                "net",
                "bridge",
                "--socket",
                SANDBOX_SOCKET,
                "--listen",
                "3129",
                "--forward",
                "3128=127.0.0.1:3128"
            ]
        );
        assert_eq!(egress.finish(), (Vec::new(), GatewayCounts::default()));
    }

    #[test]
    fn a_malformed_declared_host_names_the_harness() {
        let e = Egress::start(
            "the proof launch",
            &["http://x".to_string()],
            &Default::default(),
            Vec::new(),
            &[],
        )
        .err()
        .unwrap();
        assert!(
            e.message.starts_with("the proof launch names `http://x`"),
            "{}",
            e.message
        );
    }
}
