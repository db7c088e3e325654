//! The proxy and the bridge over real sockets: a unix socket in a temp dir, targets on
//! 127.0.0.0/8 with ephemeral ports. Nothing here sends a byte off the loopback interface.

use std::convert::Infallible;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use stet_egress::bridge;
use stet_egress::credentials::{Gateway, Revoked, Swap};
use stet_egress::policy::{Entry, Rules};
use stet_egress::server::{ConnectTo, Extras, Proxy, Resolver};

const PATIENCE: Duration = Duration::from_secs(10);

/// Names the tests made up, resolved without DNS.
struct Names(Vec<(&'static str, IpAddr)>);

impl Resolver for Names {
    fn resolve(&self, host: &str, _port: u16) -> io::Result<Vec<IpAddr>> {
        Ok(self
            .0
            .iter()
            .filter(|(name, _)| *name == host)
            .map(|(_, ip)| *ip)
            .collect())
    }
}

struct Running {
    proxy: Proxy,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

fn start(allow: &[&str], deny: &[&str], names: &[(&'static str, IpAddr)]) -> Running {
    start_with(allow, deny, names, Extras::default())
}

fn start_with(
    allow: &[&str],
    deny: &[&str],
    names: &[(&'static str, IpAddr)],
    extras: Extras,
) -> Running {
    let parse = |list: &[&str]| list.iter().map(|e| Entry::parse(e).unwrap()).collect();
    let rules = Rules {
        allow: parse(allow),
        deny: parse(deny),
    };
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("egress.sock");
    let proxy = Proxy::start_with(&socket, rules, Arc::new(Names(names.to_vec())), extras).unwrap();
    Running {
        proxy,
        socket,
        _dir: dir,
    }
}

/// An echo server on `ip`, port chosen by the kernel.
fn echo(ip: &str) -> SocketAddr {
    let listener = TcpListener::bind((ip, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut back = stream.try_clone().unwrap();
                let _ = io::copy(&mut stream, &mut back);
            });
        }
    });
    addr
}

/// A tiny hyper HTTP server that answers with what it was sent.
fn http_origin() -> SocketAddr {
    recorded_origin().0
}

/// What an origin received: `connection` for each connection accepted, then each request
/// as its method, target and headers.
type Received = Arc<Mutex<Vec<String>>>;

/// [`http_origin`], also keeping what it received.
fn recorded_origin() -> (SocketAddr, Received) {
    use hyper::{body::Incoming, Request, Response};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    let received = Received::default();
    let log = received.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((stream, _)) = listener.accept().await {
                log.lock().unwrap().push("connection".into());
                let log = log.clone();
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let log = log.clone();
                    async move {
                        log.lock().unwrap().push(format!(
                            "{} {} {:?}",
                            req.method(),
                            req.uri(),
                            req.headers()
                        ));
                        let header = |name| req.headers().get(name).map(|v| v.to_str().unwrap());
                        let mut seen = format!(
                            "{} {} host={:?} proxy-authorization={:?}",
                            req.method(),
                            req.uri(),
                            header("host"),
                            header("proxy-authorization")
                        );
                        if let Some(auth) = header("authorization") {
                            // Said here, where the origin sees it (the echo itself comes back
                            // through the gateway with the stand-in in the real value's place).
                            let real = auth == format!("Bearer {REAL}");
                            seen.push_str(&format!(" authorization={auth:?} real={real}"));
                        }
                        let echo = header("authorization").unwrap_or("").to_string();
                        let mut response =
                            Response::new(http_body_util::Full::new(bytes::Bytes::from(seen)));
                        // An API that reflects a request's header in its answer's.
                        if let Ok(value) = hyper::header::HeaderValue::from_str(&echo) {
                            response.headers_mut().insert("x-echo", value);
                        }
                        Ok::<_, Infallible>(response)
                    }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new().serve_connection(io, service),
                );
            }
        });
    });
    (addr, received)
}

/// Sends `request` on a new connection to the proxy; returns the connection and the answer
/// head.
fn ask(socket: &Path, request: &str) -> (UnixStream, String) {
    let mut stream = UnixStream::connect(socket).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let head = head(&mut stream);
    (stream, head)
}

/// Asks, expects `status`, returns the body (which has a Content-Length).
fn answer(socket: &Path, request: &str, status: u16) -> String {
    answer_and_head(socket, request, status).0
}

fn answer_and_head(socket: &Path, request: &str, status: u16) -> (String, String) {
    let (mut stream, head) = ask(socket, request);
    assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{head}");
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .unwrap();
    let mut body = vec![0; length.parse().unwrap()];
    stream.read_exact(&mut body).unwrap();
    (String::from_utf8(body).unwrap(), head)
}

/// Asks for a tunnel, expects 200, returns it.
fn tunnel(socket: &Path, target: &str) -> UnixStream {
    let (stream, head) = ask(socket, &connect(target));
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    stream
}

fn head(stream: &mut impl Read) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

/// Whether the far end closed the connection (rather than the read timing out).
fn closed(stream: &mut impl Read) -> bool {
    match stream.read(&mut [0; 64]) {
        Ok(n) => n == 0,
        Err(e) => e.kind() == io::ErrorKind::ConnectionReset,
    }
}

fn connect(target: &str) -> String {
    format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n")
}

/// Writes `bytes` and reads back as many (the far end echoes).
fn round_trip(stream: &mut (impl Read + Write), bytes: &[u8]) -> Vec<u8> {
    stream.write_all(bytes).unwrap();
    let mut back = vec![0; bytes.len()];
    stream.read_exact(&mut back).unwrap();
    back
}

#[test]
fn connect_to_a_listed_loopback_port_relays_both_ways() {
    let target = echo("127.0.0.1").to_string();
    let running = start(&[&target], &[], &[]);
    let mode = std::fs::metadata(&running.socket)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o666);
    let mut tunnel = tunnel(&running.socket, &target);
    assert_eq!(round_trip(&mut tunnel, b"hello\x00\xff"), b"hello\x00\xff");
    assert!(running.proxy.blocked().is_empty());
}

#[test]
fn connect_inside_a_tunnel_is_only_bytes_to_the_target() {
    let target = echo("127.0.0.1").to_string();
    let running = start(&[&target], &[], &[]);
    let mut tunnel = tunnel(&running.socket, &target);
    let inner = connect("169.254.169.254:80");
    assert_eq!(round_trip(&mut tunnel, inner.as_bytes()), inner.as_bytes());
    assert!(running.proxy.blocked().is_empty());
}

#[test]
fn unlisted_loopback_port_is_refused_and_counted() {
    let (listed, other) = (echo("127.0.0.1").to_string(), echo("127.0.0.1").to_string());
    let running = start(&[&listed], &[], &[]);
    for _ in 0..2 {
        let (body, head) = answer_and_head(&running.socket, &connect(&other), 403);
        assert!(
            head.contains(&format!("\r\nx-stet-blocked: {other}\r\n")),
            "{head}"
        );
        let why = format!("127.0.0.1 is a loopback address and {other} is not listed");
        assert_eq!(body, format!("stet: blocked {other}: {why}\n"));
    }
    let blocked = running.proxy.blocked();
    assert_eq!(blocked.len(), 1, "{blocked:?}");
    assert_eq!((&blocked[0].target, blocked[0].count), (&other, 2));
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!((now - 60_000..=now).contains(&blocked[0].first_unix_ms));
}

#[test]
fn another_loopback_address_is_refused_as_loopback() {
    // Linux routes all of 127/8 to lo, so this listener is real; the proxy must not reach it.
    let target = echo("127.0.0.2");
    let running = start(&["127.0.0.2", "127.0.0.1:1"], &[], &[]);
    for asked in [target.to_string(), "127.0.0.2:443".into()] {
        let why = format!("127.0.0.2 is a loopback address and {asked} is not listed");
        let body = answer(&running.socket, &connect(&asked), 403);
        assert_eq!(body, format!("stet: blocked {asked}: {why}\n"));
    }
    let request = format!("GET http://{target}/ HTTP/1.1\r\nHost: {target}\r\n\r\n");
    answer(&running.socket, &request, 403);
    assert_eq!(running.proxy.blocked().len(), 2);
}

#[test]
fn a_name_rebound_to_loopback_is_refused_unless_listed_exactly() {
    let port = echo("127.0.0.1").port();
    let names = [("rebind.test", IpAddr::V4(Ipv4Addr::LOCALHOST))];
    let asked = format!("rebind.test:{port}");
    let running = start(&[&format!("*.test:{port}")], &[], &names);
    let body = answer(&running.socket, &connect(&asked), 403);
    assert!(body.contains("rebind.test resolves to 127.0.0.1, a loopback address"));
    drop(running);
    let running = start(&[&asked], &[], &names);
    assert_eq!(
        round_trip(&mut tunnel(&running.socket, &asked), b"ping"),
        b"ping"
    );
}

#[test]
fn deny_wins_over_a_listed_entry() {
    let target = echo("127.0.0.1").to_string();
    let running = start(&[&target], &[&target], &[]);
    let body = answer(&running.socket, &connect(&target), 403);
    assert!(body.contains(&format!("{target} is denied")), "{body}");
}

#[test]
fn plain_http_is_forwarded_in_origin_form() {
    let origin = http_origin();
    let running = start(&[&origin.to_string()], &[], &[]);
    let request = format!(
        "GET http://{origin}/x?y=1 HTTP/1.1\r\nHost: elsewhere.example\r\n\
         Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n\r\n"
    );
    let expected = format!("GET /x?y=1 host=Some(\"{origin}\") proxy-authorization=None");
    assert_eq!(answer(&running.socket, &request, 200), expected);
}

#[test]
fn an_origin_form_request_gets_400() {
    let running = start(&[], &[], &[]);
    let body = answer(&running.socket, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 400);
    assert!(
        body.contains("stet's egress proxy") && body.ends_with(")\n"),
        "{body}"
    );
    let blocked = running.proxy.blocked();
    assert_eq!((blocked[0].target.as_str(), blocked[0].count), ("-", 1));
}

const STAND_IN: &str = "sk-ant-oat01-standinstandinstandin";
const REAL: &str = "sk-ant-oat01-therealonetherealone0";

/// A proxy whose gateway at the sandbox's port 3180 serves `origin` (plain HTTP, a service
/// on the host's loopback, as the tests' fake model API is).
fn gateway_to(origin: SocketAddr, revoked: Revoked) -> Running {
    let gateway = Gateway {
        port: 3180,
        host: origin.ip().to_string(),
        upstream_port: origin.port(),
        tls: false,
        paths: vec!["/v1/".into()],
        swaps: vec![Swap {
            header: "authorization".into(),
            stand_in: format!("Bearer {STAND_IN}"),
            real: format!("Bearer {REAL}"),
            paths: Vec::new(),
        }],
    };
    let extras = Extras {
        gateways: vec![gateway],
        revoked,
        tls_roots: None,
        ..Extras::default()
    };
    start_with(&[&origin.to_string()], &[], &[], extras)
}

fn to_gateway(authorization: &str) -> String {
    format!(
        "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:3180\r\n\
         Authorization: {authorization}\r\nContent-Length: 0\r\n\r\n"
    )
}

#[test]
fn a_gateway_swaps_the_stand_in_for_the_real_credential_on_its_way_to_the_model_api() {
    let origin = http_origin();
    let running = gateway_to(origin, Revoked::default());
    let seen = answer(
        &running.socket,
        &to_gateway(&format!("Bearer {STAND_IN}")),
        200,
    );
    // The origin saw the real value (it says so in its answer, which reaches the sandbox
    // with the stand-in in the real value's place).
    assert_eq!(
        seen,
        format!(
            "POST /v1/messages host=Some(\"{origin}\") proxy-authorization=None \
             authorization=\"Bearer {STAND_IN}\" real=true"
        )
    );
    assert_eq!(running.proxy.gateway_counts().swapped, 1);
    // The answer's headers echoed the swapped-in value: they reach the sandbox without it.
    let (_, head) = answer_and_head(
        &running.socket,
        &to_gateway(&format!("Bearer {STAND_IN}")),
        200,
    );
    assert!(!head.contains(REAL), "{head}");
    assert!(!head.contains("x-echo"), "{head}");
    // Anything but the stand-in's exact value is refused.
    answer(&running.socket, &to_gateway("Bearer something-else"), 403);
    assert_eq!(
        running.proxy.gateway_counts(),
        stet_egress::server::GatewayCounts {
            requests: 2,
            swapped: 2
        }
    );
}

/// A request to the gateway of `gateway_to` for `target`, with `headers` (each ending in
/// CRLF).
fn to_gateway_with(target: &str, headers: &str) -> String {
    format!("POST {target} HTTP/1.1\r\nHost: 127.0.0.1:3180\r\n{headers}Content-Length: 0\r\n\r\n")
}

/// Sends each request in `refused` (expecting a one-line 403 from `origin`'s gateway that
/// says `why` and shows none of `hidden`), then one the gateway serves, and checks that the
/// origin received that one alone, with the real credential: the refused ones reached
/// nothing. A refused request is answered before anything is dialled, so an origin that
/// had been dialled for one would have accepted it before the served request's connection.
fn refused_before_the_api(
    running: &Running,
    received: &Received,
    refused: &[String],
    why: &str,
    hidden: &[&str],
) {
    let origin = received.clone();
    for request in refused {
        let (body, head) = answer_and_head(&running.socket, request, 403);
        assert!(head.contains("\r\nx-stet-blocked: "), "{head}");
        assert!(
            body.starts_with("stet: blocked 127.0.0.1:"),
            "{request}: {body}"
        );
        assert!(body.contains(why), "{request}: {body}");
        assert_eq!(body.lines().count(), 1, "{body}");
        for value in hidden {
            assert!(!body.contains(value), "{body}");
        }
    }
    let seen = answer(
        &running.socket,
        &to_gateway(&format!("Bearer {STAND_IN}")),
        200,
    );
    assert!(seen.ends_with("real=true"), "{seen}");
    let received = origin.lock().unwrap().clone();
    assert_eq!(received.len(), 2, "{received:?}");
    assert_eq!(received[0], "connection");
    assert!(
        received[1].starts_with("POST /v1/messages "),
        "{received:?}"
    );
    assert_eq!(running.proxy.gateway_counts().swapped, 1);
    let blocked: u64 = running.proxy.blocked().iter().map(|b| b.count).sum();
    assert_eq!(blocked, refused.len() as u64);
}

#[test]
fn a_gateway_refuses_a_path_with_dot_segments_however_written_and_its_api_sees_nothing() {
    let (origin, received) = recorded_origin();
    let running = gateway_to(origin, Revoked::default());
    let authorization = format!("Authorization: Bearer {STAND_IN}\r\n");
    let refused: Vec<String> = [
        "/v1/..;/api/oauth/x",
        "/v1/.;x/messages",
        "/v1/..\\api/oauth/x",
        "/v1/..%5capi/oauth/x",
        "/v1/%2e%2e/api/oauth/x",
        "/v1/.%2E/api/oauth/x",
        "/v1/%2E/messages",
        "/v1/..%2fapi/oauth/x",
        "/v1/./messages?beta=true",
    ]
    .iter()
    .map(|path| to_gateway_with(path, &authorization))
    .collect();
    refused_before_the_api(
        &running,
        &received,
        &refused,
        "the credential gateway serves no path with ",
        &[STAND_IN],
    );
}

#[test]
fn a_gateway_refuses_every_credential_but_its_own_stand_in_in_its_own_header() {
    let (origin, received) = recorded_origin();
    let running = gateway_to(origin, Revoked::default());
    // A live stand-in of another call, or of an earlier drive (no proxy of this process
    // revoked it), and someone's own key.
    let another_call = "sk-ant-oat01-anothercallanothercall";
    let own_key = "sk-ant-api03-someoneelsesownkey000";
    let ours = format!("Authorization: Bearer {STAND_IN}\r\n");
    let refused: Vec<String> = [
        format!("Authorization: Bearer {another_call}\r\n"),
        format!("Authorization: Bearer {own_key}\r\n"),
        // This gateway's stand-in, under the other header the API takes a key in.
        format!("X-Api-Key: Bearer {STAND_IN}\r\n"),
        format!("X-Api-Key: {STAND_IN}\r\n"),
        format!("{ours}X-Api-Key: {own_key}\r\n"),
        format!("{ours}{ours}"),
        format!("authorization: bearer {STAND_IN}\r\n"),
    ]
    .iter()
    .map(|headers| to_gateway_with("/v1/messages", headers))
    .collect();
    refused_before_the_api(
        &running,
        &received,
        &refused,
        "the credential header ",
        &[STAND_IN, another_call, own_key, "Bearer"],
    );
}

#[test]
fn a_gateway_serves_only_its_paths_and_never_trace() {
    let origin = http_origin();
    let running = gateway_to(origin, Revoked::default());
    let mint = format!(
        "POST /api/oauth/claude_cli/create_api_key HTTP/1.1\r\nHost: 127.0.0.1:3180\r\n\
         Authorization: Bearer {STAND_IN}\r\nContent-Length: 0\r\n\r\n"
    );
    let body = answer(&running.socket, &mint, 403);
    assert_eq!(
        body,
        format!(
            "stet: blocked {origin}: the credential gateway serves only /v1/, not /api/oauth/claude_cli/create_api_key\n"
        )
    );
    for sneaky in ["/v1/../api/oauth/x", "/v1/%2e%2e/api/oauth/x"] {
        let request = format!(
            "POST {sneaky} HTTP/1.1\r\nHost: 127.0.0.1:3180\r\nAuthorization: Bearer {STAND_IN}\r\n\r\n"
        );
        answer(&running.socket, &request, 403);
    }
    let trace = format!(
        "TRACE /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:3180\r\nAuthorization: Bearer {STAND_IN}\r\n\r\n"
    );
    let body = answer(&running.socket, &trace, 403);
    assert!(
        body.ends_with("TRACE is not sent through a credential gateway\n"),
        "{body}"
    );
    assert_eq!(running.proxy.gateway_counts().swapped, 0);
}

#[test]
fn a_credential_is_swapped_in_only_on_its_own_paths_of_a_shared_gateway() {
    let origin = http_origin();
    // Two credentials of one host: this one is for /backend-api/codex only; the gateway
    // also serves /v1/ for another.
    let gateway = Gateway {
        port: 3180,
        host: origin.ip().to_string(),
        upstream_port: origin.port(),
        tls: false,
        paths: vec!["/v1/".into(), "/backend-api/codex".into()],
        swaps: vec![Swap {
            header: "authorization".into(),
            stand_in: format!("Bearer {STAND_IN}"),
            real: format!("Bearer {REAL}"),
            paths: vec!["/backend-api/codex".into()],
        }],
    };
    let extras = Extras {
        gateways: vec![gateway],
        tls_roots: None,
        ..Extras::default()
    };
    let running = start_with(&[&origin.to_string()], &[], &[], extras);
    let to = |path: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:3180\r\n\
             Authorization: Bearer {STAND_IN}\r\nContent-Length: 0\r\n\r\n"
        )
    };
    let seen = answer(&running.socket, &to("/backend-api/codex/responses"), 200);
    assert!(seen.ends_with("real=true"), "{seen}");
    let seen = answer(&running.socket, &to("/v1/messages"), 200);
    assert!(seen.ends_with("real=false"), "{seen}");
    assert_eq!(running.proxy.gateway_counts().swapped, 1);
}

#[test]
fn a_gateway_to_an_unlisted_host_is_refused_like_any_target() {
    let origin = http_origin();
    let gateway = Gateway {
        port: 3180,
        host: origin.ip().to_string(),
        upstream_port: origin.port(),
        tls: false,
        paths: Vec::new(),
        swaps: Vec::new(),
    };
    let extras = Extras {
        gateways: vec![gateway],
        revoked: Revoked::default(),
        tls_roots: None,
        ..Extras::default()
    };
    let running = start_with(&[], &[], &[], extras);
    let body = answer(&running.socket, &to_gateway("Bearer x"), 403);
    assert_eq!(
        body,
        format!(
            "stet: blocked {origin}: 127.0.0.1 is a loopback address and {origin} is not listed\n"
        )
    );
}

#[test]
fn a_revoked_stand_in_is_refused_with_the_reason_by_every_proxy_that_shares_the_list() {
    let origin = http_origin();
    let revoked = Revoked::default();
    let first = gateway_to(origin, revoked.clone());
    let second = gateway_to(origin, revoked.clone());
    answer(
        &first.socket,
        &to_gateway(&format!("Bearer {STAND_IN}")),
        200,
    );
    // The first sandbox is torn down: its stand-in is revoked, for the other proxies too.
    first.proxy.stop();
    revoked.revoke(STAND_IN);
    let body = answer(
        &second.socket,
        &to_gateway(&format!("Bearer {STAND_IN}")),
        403,
    );
    assert_eq!(
        body,
        "stet: blocked 127.0.0.1:3180: a revoked stand-in credential (its sandbox is gone)\n"
    );
    // Also in a plain proxy request, wherever it travels in the head.
    let request = format!("GET http://{origin}/?t={STAND_IN} HTTP/1.1\r\nHost: {origin}\r\n\r\n");
    answer(&second.socket, &request, 403);
    assert_eq!(second.proxy.gateway_counts().swapped, 0);
}

#[test]
fn an_allowed_target_that_does_not_answer_is_502_and_not_counted() {
    // Port 1 (tcpmux): nothing listens there, and binding it needs privileges no test uses.
    let closed = "127.0.0.1:1";
    let running = start(&[closed], &[], &[]);
    assert!(answer(&running.socket, &connect(closed), 502).contains("cannot connect"));
    assert!(running.proxy.blocked().is_empty());
}

#[test]
fn stop_closes_tunnels_and_removes_the_socket() {
    let target = echo("127.0.0.1").to_string();
    let running = start(&[&target], &[], &[]);
    let mut tunnel = tunnel(&running.socket, &target);
    assert_eq!(round_trip(&mut tunnel, b"up"), b"up");
    running.proxy.stop();
    assert!(!running.socket.exists());
    assert!(closed(&mut tunnel));
}

#[test]
fn the_system_resolver_resolves_localhost_to_loopback() {
    let ips = stet_egress::server::SystemResolver
        .resolve("localhost", 80)
        .unwrap();
    assert!(
        !ips.is_empty() && ips.iter().all(IpAddr::is_loopback),
        "{ips:?}"
    );
}

/// Three consecutive ports below Linux's ephemeral range (32768-60999), so no `bind(:0)` in
/// this process can take one between the choice and the bridge's bind.
fn unlikely_ports(attempt: u32) -> [u16; 3] {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let base = 20_000 + ((nanos ^ std::process::id() ^ attempt) % 12_000) as u16;
    [base, base + 1, base + 2]
}

#[test]
fn bridge_relays_the_listen_port_and_forward_ports() {
    let (target, unlisted) = (echo("127.0.0.1").to_string(), echo("127.0.0.1").to_string());
    let running = start(&[&target], &[], &[]);
    // Ports are fixed numbers in `run`'s contract: retry with others if one is taken.
    let [listen, forward, refused] = (0..20)
        .find_map(|attempt| {
            let ports @ [listen, forward, refused] = unlikely_ports(attempt);
            let forwards = vec![(forward, target.clone()), (refused, unlisted.clone())];
            let socket = running.socket.clone();
            let bridge = std::thread::spawn(move || bridge::run(&socket, &[listen], &forwards));
            // Bounded polling: the bridge is ready once all three ports accept.
            for _ in 0..500 {
                if bridge.is_finished() {
                    let error = bridge.join().unwrap().unwrap_err();
                    assert_eq!(error.kind(), io::ErrorKind::AddrInUse, "{error}");
                    return None;
                }
                if ports
                    .iter()
                    .all(|p| TcpStream::connect(("127.0.0.1", *p)).is_ok())
                {
                    return Some(ports);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            panic!("the bridge never listened");
        })
        .expect("no free ports");
    let through = |port| {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        stream
    };
    let mut proxied = through(listen);
    proxied.write_all(connect(&target).as_bytes()).unwrap();
    assert!(head(&mut proxied).starts_with("HTTP/1.1 200 "));
    assert_eq!(round_trip(&mut proxied, b"via proxy"), b"via proxy");
    assert_eq!(
        round_trip(&mut through(forward), b"no request"),
        b"no request"
    );
    assert!(closed(&mut through(refused)));
    assert!(running.proxy.blocked().iter().any(|b| b.target == unlisted));
}

/// An HTTPS origin on 127.0.0.1 with a certificate of a CA made for the test: answers
/// with the `Authorization` header it got. Returns its address and the CA's roots.
fn https_origin() -> (SocketAddr, Arc<tokio_rustls::rustls::RootCertStore>) {
    use hyper::{body::Incoming, Request, Response};
    use tokio_rustls::rustls;
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(|req: Request<Incoming>| async move {
                        let auth = req
                            .headers()
                            .get("authorization")
                            .map(|v| v.to_str().unwrap().to_string());
                        let host = req
                            .headers()
                            .get("host")
                            .map(|v| v.to_str().unwrap().to_string());
                        let real = auth.as_deref() == Some(format!("Bearer {REAL}").as_str());
                        Ok::<_, Infallible>(Response::new(http_body_util::Full::new(
                            bytes::Bytes::from(format!(
                                "tls host={host:?} authorization={auth:?} real={real}"
                            )),
                        )))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .await;
                });
            }
        });
    });
    (addr, Arc::new(roots))
}

#[test]
fn a_gateway_speaks_verified_tls_to_its_api_and_refuses_a_certificate_it_cannot_verify() {
    let (origin, roots) = https_origin();
    let gateway = || Gateway {
        port: 3180,
        host: "127.0.0.1".into(),
        upstream_port: origin.port(),
        tls: true,
        paths: Vec::new(),
        swaps: vec![Swap {
            header: "authorization".into(),
            stand_in: format!("Bearer {STAND_IN}"),
            real: format!("Bearer {REAL}"),
            paths: Vec::new(),
        }],
    };
    let start = |tls_roots| {
        let extras = Extras {
            gateways: vec![gateway()],
            revoked: Revoked::default(),
            tls_roots,
            ..Extras::default()
        };
        start_with(&[&origin.to_string()], &[], &[], extras)
    };
    let trusting = start(Some(roots));
    let seen = answer(
        &trusting.socket,
        &to_gateway(&format!("Bearer {STAND_IN}")),
        200,
    );
    assert_eq!(
        seen,
        // (the origin's echo of the real value comes back as the stand-in)
        format!("tls host=Some(\"{origin}\") authorization=Some(\"Bearer {STAND_IN}\") real=true")
    );
    // With the public roots only, the test's CA is no one's: the request never leaves.
    let public = start(None);
    let body = answer(
        &public.socket,
        &to_gateway(&format!("Bearer {STAND_IN}")),
        502,
    );
    assert!(
        body.starts_with(&format!("stet: TLS with {origin} failed:")),
        "{body}"
    );
}

#[test]
fn the_model_api_stub_answers_itself_and_sends_nothing_on() {
    let extras = Extras {
        stubs: vec![3180],
        ..Extras::default()
    };
    // Nothing is allowed: whatever the stub did with a request, it could not send it on.
    let running = start_with(&[], &[], &[], extras);
    let body = r#"{"model":"claude-x","stream":true,"messages":[]}"#;
    let request = format!(
        "POST /v1/messages?beta=true HTTP/1.1\r\nHost: 127.0.0.1:3180\r\n\
         Authorization: Bearer sk-ant-oat01-real-login-aaaaaaaa\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let (events, head) = answer_and_head(&running.socket, &request, 200);
    assert!(head.contains("text/event-stream"), "{head}");
    assert!(events.contains("event: message_stop"), "{events}");
    let other = "GET /api/oauth/profile HTTP/1.1\r\nHost: 127.0.0.1:3180\r\n\r\n";
    let refused = answer(&running.socket, other, 404);
    assert!(refused.contains("POST /v1/messages only"), "{refused}");
    // A port that is no stub's is no model API.
    let elsewhere =
        "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:3181\r\nContent-Length: 0\r\n\r\n";
    answer(&running.socket, elsewhere, 400);
    assert_eq!(running.proxy.stubbed(), 2);
}

#[test]
fn connect_to_dials_a_listed_name_at_the_given_address_and_only_a_listed_one() {
    let origin = echo("127.0.0.1");
    let extras = Extras {
        connect_to: vec![
            ConnectTo {
                host: "oauth.example".into(),
                port: 443,
                addr: origin,
            },
            ConnectTo {
                host: "unlisted.example".into(),
                port: 443,
                addr: origin,
            },
        ],
        ..Extras::default()
    };
    // No name resolves: a route that looked the name up would fail.
    let running = start_with(&["oauth.example:443"], &[], &[], extras);
    let mut stream = tunnel(&running.socket, "oauth.example:443");
    assert_eq!(round_trip(&mut stream, b"ping"), b"ping");
    // A route does not list its name.
    let refused = answer(&running.socket, &connect("unlisted.example:443"), 403);
    assert!(refused.contains("not on the allow-list"), "{refused}");
}
