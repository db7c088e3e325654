//! `stet net …`: the network wall's pieces that run inside a sandbox (the stet binary is
//! mounted there as itself). `bridge` relays the sandbox's loopback to stet's proxy (see
//! `network.rs`); `probe` is how the wall proof tries a connection from inside, through the
//! proxy or straight, and reports what happened in one line the host reads as data.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use super::{NetCommand, ProbeHow};

pub fn main(command: &NetCommand) -> ExitCode {
    match command {
        NetCommand::Bridge {
            socket,
            listen,
            gateway,
            forward,
        } => {
            let mut forwards = Vec::new();
            for f in forward {
                let Some((port, target)) = f.split_once('=') else {
                    eprintln!("stet net bridge: --forward {f}: expected PORT=HOST:PORT");
                    return ExitCode::from(2);
                };
                let Ok(port) = port.parse::<u16>() else {
                    eprintln!("stet net bridge: --forward {f}: `{port}` is not a port");
                    return ExitCode::from(2);
                };
                forwards.push((port, target.to_string()));
            }
            let raw: Vec<u16> = std::iter::once(*listen)
                .chain(gateway.iter().copied())
                .collect();
            match stet_egress::bridge::run(Path::new(socket), &raw, &forwards) {
                Ok(never) => match never {},
                Err(e) => {
                    eprintln!("stet net bridge: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        NetCommand::Fingerprints { paths } => {
            for fp in fingerprints(paths) {
                println!("fp {fp}");
            }
            ExitCode::SUCCESS
        }
        NetCommand::Probe { how, target } => {
            let line = match how {
                ProbeHow::Connect => through_proxy(target),
                ProbeHow::Direct => direct(target),
            };
            println!("{line}");
            ExitCode::SUCCESS
        }
    }
}

/// Files larger than this are not read (a credential file is small; the agent's binary is
/// not one).
const FINGERPRINT_FILE_LIMIT: u64 = 8 << 20;
/// Nor more than this in all.
const FINGERPRINT_TOTAL_LIMIT: u64 = 256 << 20;

/// The distinct fingerprints of the tokens in the environment and under `paths`.
fn fingerprints(paths: &[std::path::PathBuf]) -> std::collections::BTreeSet<String> {
    use stet_egress::credentials::{tokens, Fingerprint};
    let mut seen = std::collections::BTreeSet::new();
    let mut add = |text: &str| {
        for token in tokens(text) {
            seen.insert(Fingerprint::of(token).hex());
        }
    };
    for (_, value) in std::env::vars_os() {
        add(&value.to_string_lossy());
    }
    let mut total = 0u64;
    let mut stack: Vec<std::path::PathBuf> = paths.to_vec();
    while let Some(path) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                stack.extend(entries.flatten().map(|e| e.path()));
            }
        } else if meta.is_file()
            && meta.len() <= FINGERPRINT_FILE_LIMIT
            && total + meta.len() <= FINGERPRINT_TOTAL_LIMIT
        {
            total += meta.len();
            if let Ok(bytes) = std::fs::read(&path) {
                add(&String::from_utf8_lossy(&bytes));
            }
        }
    }
    seen
}

/// A CONNECT to `target` through the proxy the environment names (`HTTPS_PROXY`).
fn through_proxy(target: &str) -> String {
    let proxy = std::env::var("HTTPS_PROXY").or_else(|_| std::env::var("https_proxy"));
    let Ok(proxy) = proxy else {
        return format!("unreachable {target}: no HTTPS_PROXY in the environment");
    };
    let address = proxy
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let Some(address) = resolve(&address) else {
        return format!("unreachable {target}: the proxy {proxy} is not an address");
    };
    let mut stream = match TcpStream::connect_timeout(&address, Duration::from_secs(5)) {
        Ok(stream) => stream,
        Err(e) => return format!("unreachable {target}: the proxy {proxy}: {e}"),
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    if let Err(e) = write!(
        stream,
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"
    ) {
        return format!("unreachable {target}: {e}");
    }
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    if reader.read_line(&mut status).is_err() || status.is_empty() {
        return format!("unreachable {target}: the proxy did not answer");
    }
    // The rest of the answer's head, then (on 200) the tunnel, else the refusal's body.
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        line.clear();
    }
    let mut said = [0u8; 256];
    let n = reader.read(&mut said).unwrap_or(0);
    let said = String::from_utf8_lossy(&said[..n]).trim().to_string();
    if status.split_whitespace().nth(1) == Some("200") {
        format!("reached {target}: {said}")
    } else {
        format!("refused {target}: {said}")
    }
}

/// A connection to `target` that ignores every proxy variable.
fn direct(target: &str) -> String {
    let Some(address) = resolve(target) else {
        return format!("unreachable {target}: not an address");
    };
    match TcpStream::connect_timeout(&address, Duration::from_secs(5)) {
        Ok(_) => format!("reached {target}"),
        // No route at all (no interface to send through): nothing left the sandbox.
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NetworkUnreachable | std::io::ErrorKind::HostUnreachable
            ) =>
        {
            format!("no-route {target}: {e}")
        }
        // Refused at once: nothing listens at that address here (inside a sandbox its own
        // loopback, not the host's).
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            format!("not-there {target}: {e}")
        }
        Err(e) => format!("unreachable {target}: {e}"),
    }
}

fn resolve(address: &str) -> Option<SocketAddr> {
    address.to_socket_addrs().ok()?.next()
}
