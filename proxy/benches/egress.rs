//! What the egress path costs: throughput through a tunnel against a direct connection, the
//! latency a request gains, and the proxy's memory with 10 and 100 tunnels open.
//!
//! Everything runs on this machine's loopback. The proxy and the bridge each run in a child
//! process (this bench re-executed), as in a drive the bridge is its own process inside the
//! sandbox; the proxy's memory is that child's resident set. The anchor — the same transfer or
//! request over a direct loopback connection — is measured in the same run, interleaved.
//!
//! Run with `cargo xtask bench` (or `cargo bench -p stet-egress`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use stet_egress::credentials::{Gateway, Swap};
use stet_egress::policy::{Entry, Rules};
use stet_egress::server::{Extras, Proxy, SystemResolver};

const GIB: u64 = 1 << 30;
const REPEATS: usize = 3;
const REQUESTS: usize = 300;
const STAND_IN: &str = "stand-in-for-the-bench-0000000000";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // Re-executed as one of the two children.
    if let Some(i) = args.iter().position(|a| a == "--serve-proxy") {
        serve_proxy(Path::new(&args[i + 1]), &args[i + 2..]);
    }
    if let Some(i) = args.iter().position(|a| a == "--serve-bridge") {
        let ports: Vec<u16> = args[i + 2..]
            .iter()
            .map(|p| p.parse().expect("a port"))
            .collect();
        let never = stet_egress::bridge::run(Path::new(&args[i + 1]), &ports, &[]);
        panic!("the bridge stopped: {never:?}");
    }
    if args.iter().any(|a| a == "--list") {
        return; // `cargo bench -- --list` asks what is here; nothing to list one by one.
    }

    let dir = tempfile::tempdir().expect("a scratch directory");
    let source = Source::start();
    let http = HttpServer::start();
    let echo = Echo::start();
    let socket = dir.path().join("egress.sock");
    let gateway_port = free_port();
    let mut allow: Vec<String> = [source.port, http.port, echo.port]
        .map(|p| format!("127.0.0.1:{p}"))
        .to_vec();
    // A credential gateway in front of the HTTP server, as a model API is served.
    allow.push(format!("gateway={gateway_port}:{}", http.port));
    let proxy = Server::proxy(&socket, &allow);
    let bridge_port = free_port();
    let bridge = Server::bridge(&socket, &[bridge_port, gateway_port]);

    println!("egress (stet-egress, loopback, {REPEATS} interleaved repetitions, medians)");

    // Throughput: 1 GiB read from a source, directly and through a CONNECT tunnel, both
    // through the proxy's socket alone and through the bridge (the sandbox's real path).
    let (mut direct, mut tunnel, mut bridged) = (vec![], vec![], vec![]);
    for _ in 0..REPEATS {
        direct.push(rate(|| {
            TcpStream::connect(("127.0.0.1", source.port)).expect("the source")
        }));
        tunnel.push(rate(|| {
            connect_through(
                UnixStream::connect(&socket).expect("the proxy"),
                source.port,
            )
        }));
        bridged.push(rate(|| {
            connect_through(
                TcpStream::connect(("127.0.0.1", bridge_port)).expect("the bridge"),
                source.port,
            )
        }));
    }
    let (direct, tunnel, bridged) = (median(direct), median(tunnel), median(bridged));
    println!("  1 GiB direct:                    {direct:8.0} MiB/s");
    println!(
        "  1 GiB through the proxy's socket: {tunnel:8.0} MiB/s  ({:.2}× direct)",
        tunnel / direct
    );
    println!(
        "  1 GiB through bridge + proxy:    {bridged:8.0} MiB/s  ({:.2}× direct)",
        bridged / direct
    );

    // Latency: one small HTTP request on a fresh connection (connect, request, answer), and
    // one on an open connection — directly, and through the bridge and the proxy (a CONNECT
    // first on a fresh one, as a client of an HTTPS API does before its TLS handshake).
    let (mut fresh_direct, mut fresh_proxied) = (vec![], vec![]);
    for _ in 0..REQUESTS {
        fresh_direct.push(timed(|| {
            let mut s = TcpStream::connect(("127.0.0.1", http.port)).expect("the server");
            request(&mut s);
        }));
        fresh_proxied.push(timed(|| {
            let mut s = connect_through(
                TcpStream::connect(("127.0.0.1", bridge_port)).expect("the bridge"),
                http.port,
            );
            request(&mut s);
        }));
    }
    // Through the credential gateway (plain HTTP to the bridge; the stand-in swapped for the
    // real value on the way), a fresh connection each, against direct.
    let (mut fresh_plain, mut fresh_gateway) = (vec![], vec![]);
    for _ in 0..REQUESTS {
        fresh_plain.push(timed(|| {
            let mut s = TcpStream::connect(("127.0.0.1", http.port)).expect("the server");
            request_with(&mut s, "bench", "");
        }));
        fresh_gateway.push(timed(|| {
            let mut s = TcpStream::connect(("127.0.0.1", gateway_port)).expect("the gateway");
            request_with(
                &mut s,
                &format!("127.0.0.1:{gateway_port}"),
                &format!("Authorization: Bearer {STAND_IN}\r\n"),
            );
        }));
    }
    let mut open_direct = TcpStream::connect(("127.0.0.1", http.port)).expect("the server");
    let mut open_proxied = connect_through(
        TcpStream::connect(("127.0.0.1", bridge_port)).expect("the bridge"),
        http.port,
    );
    let (mut kept_direct, mut kept_proxied) = (vec![], vec![]);
    for _ in 0..REQUESTS {
        kept_direct.push(timed(|| request(&mut open_direct)));
        kept_proxied.push(timed(|| request(&mut open_proxied)));
    }
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let (fd, fp) = (median(fresh_direct), median(fresh_proxied));
    let (kd, kp) = (median(kept_direct), median(kept_proxied));
    println!(
        "  a request on a fresh connection:  direct {:6.0} µs, through bridge + proxy {:6.0} µs (+{:.0} µs)",
        us(fd),
        us(fp),
        us(fp.saturating_sub(fd))
    );
    let (fp2, fg) = (median(fresh_plain), median(fresh_gateway));
    println!(
        "  a request through the credential gateway (fresh connection): direct {:6.0} µs, gateway {:6.0} µs (+{:.0} µs)",
        us(fp2),
        us(fg),
        us(fg.saturating_sub(fp2))
    );
    println!(
        "  a request on an open connection:  direct {:6.0} µs, through bridge + proxy {:6.0} µs (+{:.0} µs)",
        us(kd),
        us(kp),
        us(kp.saturating_sub(kd))
    );

    // Memory: the proxy process's resident set, idle and with 10 and then 100 tunnels open,
    // each having carried 256 KiB each way.
    let idle = proxy.memory();
    let mut tunnels = Vec::new();
    let mut at = Vec::new();
    for n in [10usize, 100] {
        while tunnels.len() < n {
            let mut t =
                connect_through(UnixStream::connect(&socket).expect("the proxy"), echo.port);
            exchange(&mut t, 256 * 1024);
            tunnels.push(t);
        }
        at.push((n, proxy.memory()));
    }
    println!(
        "  proxy resident memory: idle {:.1} MiB; 10 tunnels {:.1} MiB; 100 tunnels {:.1} MiB (peak {:.1} MiB)",
        mib(idle.rss),
        mib(at[0].1.rss),
        mib(at[1].1.rss),
        mib(at[1].1.peak)
    );
    println!(
        "  per open tunnel: {:.1} KiB",
        (at[1].1.rss.saturating_sub(at[0].1.rss)) as f64 / 90.0 / 1024.0
    );
    drop(tunnels);
    drop(bridge);
    drop(proxy);
}

/// Runs a proxy on `socket` allowing `allow` until killed.
fn serve_proxy(socket: &Path, allow: &[String]) -> ! {
    let gateways = allow
        .iter()
        .filter_map(|a| a.strip_prefix("gateway="))
        .map(|g| {
            let (port, upstream) = g.split_once(':').expect("PORT:UPSTREAM");
            Gateway {
                port: port.parse().expect("a port"),
                host: "127.0.0.1".into(),
                upstream_port: upstream.parse().expect("a port"),
                tls: false,
                paths: Vec::new(),
                swaps: vec![Swap {
                    header: "authorization".into(),
                    stand_in: format!("Bearer {STAND_IN}"),
                    real: "Bearer the-real-one-for-the-bench-0000".into(),
                    paths: Vec::new(),
                }],
            }
        })
        .collect();
    let rules = Rules {
        allow: allow
            .iter()
            .filter(|a| !a.starts_with("gateway="))
            .map(|a| Entry::parse(a).expect("an entry"))
            .collect(),
        deny: vec![],
    };
    let extras = Extras {
        gateways,
        ..Extras::default()
    };
    let _proxy = Proxy::start_with(socket, rules, Arc::new(SystemResolver), extras)
        .expect("the proxy starts");
    println!("ready");
    loop {
        thread::park();
    }
}

/// A child process serving the proxy or the bridge; killed on drop.
struct Server(Child);

impl Server {
    fn proxy(socket: &Path, allow: &[String]) -> Server {
        let mut args = vec!["--serve-proxy".to_string(), socket.display().to_string()];
        args.extend(allow.iter().cloned());
        Server::spawn(&args, "ready")
    }

    fn bridge(socket: &Path, ports: &[u16]) -> Server {
        let mut args = vec!["--serve-bridge".to_string(), socket.display().to_string()];
        args.extend(ports.iter().map(u16::to_string));
        Server::spawn(&args, "stet-bridge: ready")
    }

    /// Starts this bench as the child and waits for its ready line.
    fn spawn(args: &[String], ready: &str) -> Server {
        let mut child = Command::new(std::env::current_exe().expect("this bench"))
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("the child starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("its stdout"))
            .read_line(&mut line)
            .expect("its ready line");
        assert_eq!(line.trim(), ready, "{args:?} did not start");
        Server(child)
    }

    fn memory(&self) -> Memory {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.0.id()))
            .expect("the child's /proc status");
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|kib| kib.parse::<u64>().ok())
                .map(|kib| kib * 1024)
                .unwrap_or_else(|| panic!("no {name} in /proc status"))
        };
        Memory {
            rss: field("VmRSS:"),
            peak: field("VmHWM:"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Memory {
    rss: u64,
    peak: u64,
}

/// Sends CONNECT for 127.0.0.1:`port` and reads the answer head; panics unless it is 200.
fn connect_through<S: Read + Write>(mut stream: S, port: u16) -> S {
    write!(
        stream,
        "CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    )
    .expect("send CONNECT");
    let head = read_head(&mut stream);
    assert!(head.starts_with("HTTP/1.1 200"), "CONNECT refused: {head}");
    stream
}

/// Reads up to and including the blank line, one byte at a time (so nothing after it is
/// consumed).
fn read_head(stream: &mut impl Read) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).expect("an answer head");
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// One `GET /` and its two-byte answer.
fn request(stream: &mut (impl Read + Write)) {
    request_with(stream, "bench", "")
}

/// One `GET /` to `host` with `headers` (each ending in CRLF) and its two-byte answer.
fn request_with(stream: &mut (impl Read + Write), host: &str, headers: &str) {
    let head = format!("GET / HTTP/1.1\r\nHost: {host}\r\n{headers}\r\n");
    stream.write_all(head.as_bytes()).expect("send a request");
    let head = read_head(stream);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut body = [0u8; 2];
    stream.read_exact(&mut body).expect("the body");
}

/// Writes `bytes` to an echo and reads them back.
fn exchange(stream: &mut UnixStream, bytes: usize) {
    let mut reader = stream.try_clone().expect("a second handle");
    let reading = thread::spawn(move || {
        let mut buf = vec![0u8; bytes];
        reader.read_exact(&mut buf).expect("the echo");
    });
    stream.write_all(&vec![7u8; bytes]).expect("send");
    reading.join().expect("the reader");
}

/// MiB/s reading a whole stream to its end.
fn rate<S: Read>(connect: impl FnOnce() -> S) -> f64 {
    let start = Instant::now();
    let mut stream = connect();
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        match stream.read(&mut buf).expect("read") {
            0 => break,
            n => total += n as u64,
        }
    }
    assert_eq!(total, GIB, "the whole GiB arrived");
    (total as f64 / (1 << 20) as f64) / start.elapsed().as_secs_f64()
}

fn timed(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

fn median<T: PartialOrd + Copy>(mut v: Vec<T>) -> T {
    v.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
    v[v.len() / 2]
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

fn free_port() -> u16 {
    // The bridge binds a port it is given; a bench (not a test) may pick one this way.
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Writes 1 GiB to every connection, then closes it.
struct Source {
    port: u16,
}

impl Source {
    fn start() -> Source {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        thread::spawn(move || {
            let chunk = vec![b'x'; 256 * 1024];
            for mut s in listener.incoming().flatten() {
                thread::spawn({
                    let chunk = chunk.clone();
                    move || {
                        for _ in 0..GIB / chunk.len() as u64 {
                            if s.write_all(&chunk).is_err() {
                                return;
                            }
                        }
                        let _ = s.shutdown(Shutdown::Write);
                    }
                });
            }
        });
        Source { port }
    }
}

/// Answers every request on every connection with `200` and `ok`.
struct HttpServer {
    port: u16,
}

impl HttpServer {
    fn start() -> HttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        thread::spawn(move || {
            for s in listener.incoming().flatten() {
                thread::spawn(move || {
                    let _ = s.set_nodelay(true);
                    let mut writer = s.try_clone().expect("a second handle");
                    let mut reader = BufReader::new(s);
                    let mut line = String::new();
                    loop {
                        line.clear();
                        match reader.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) if line == "\r\n" => {
                                if writer
                                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                                    .is_err()
                                {
                                    return;
                                }
                            }
                            Ok(_) => {}
                        }
                    }
                });
            }
        });
        HttpServer { port }
    }
}

/// Echoes every connection's bytes back.
struct Echo {
    port: u16,
}

impl Echo {
    fn start() -> Echo {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        thread::spawn(move || {
            for s in listener.incoming().flatten() {
                thread::spawn(move || {
                    let mut writer = s.try_clone().expect("a second handle");
                    let _ = std::io::copy(&mut &s, &mut writer);
                });
            }
        });
        Echo { port }
    }
}
