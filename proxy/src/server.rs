//! The host side: an HTTP/1.1 proxy on a unix socket that a sandbox's bridge relays to.
//!
//! A unix socket rather than a TCP port because a socket file can be bind-mounted into one
//! sandbox and no other, and nothing on the host's network can reach it. Each request is
//! checked with [`policy::decide`] against addresses resolved here, on the host; the proxy
//! then connects to exactly the address that was checked. It runs on its own thread and
//! tokio runtime so the caller (stet's synchronous host) needs no async runtime of its own,
//! and dropping that runtime closes every tunnel at once.
//!
//! Besides proxy requests it serves the [`Gateway`]s it was given: plain-HTTP requests in
//! origin form whose `Host` is the sandbox's loopback at a gateway's port, which it sends on
//! to the model API with the real credential in place of the stand-in.

use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, ToSocketAddrs};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::http::uri::{PathAndQuery, Scheme};
use hyper::{Method, Request, Response, StatusCode, Uri, Version};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::time::timeout;

use crate::credentials::{self, Gateway, Revoked};
use crate::policy::{self, Refusal, Rules, Verdict};

/// An idle client (or one trickling a request head) is dropped after this long.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(10);
/// Client connections served at once (tunnels included). Each may hold two of the host
/// process's descriptors; an agent opening connections without end must not exhaust them.
const MAX_CONNECTIONS: usize = 256;
/// Distinct refusals kept one by one; past this a hostile agent inventing names would only
/// grow the host's memory, so the rest are counted together.
const MAX_BLOCKED: usize = 1000;

/// Resolves host names; tests inject their own. Blocking is fine (called on a blocking thread).
pub trait Resolver: Send + Sync + 'static {
    /// The addresses `host` resolves to (`port` is what the client asked for, for resolvers
    /// that care).
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<IpAddr>>;
}

/// The system's resolver (`std::net::ToSocketAddrs`).
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        Ok((host, port).to_socket_addrs()?.map(|a| a.ip()).collect())
    }
}

/// Refused attempts, one entry per target and reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// `host:port` that was refused (`-` for a request that was not a proxy request).
    pub target: String,
    /// Why, one line.
    pub why: String,
    /// How many times.
    pub count: u64,
    /// When first, in milliseconds since the Unix epoch.
    pub first_unix_ms: u64,
}

/// A running proxy. Serves until [`Proxy::stop`] or drop.
pub struct Proxy {
    state: Arc<State>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    socket: PathBuf,
}

struct State {
    rules: Rules,
    resolver: Arc<dyn Resolver>,
    blocked: Mutex<Vec<Blocked>>,
    gateways: Vec<Gateway>,
    revoked: Revoked,
    tls: Arc<tokio_rustls::rustls::ClientConfig>,
    /// Requests to a gateway, and of them those sent on with a credential swapped in.
    through_gateways: AtomicU64,
    swapped: AtomicU64,
    stubs: Vec<u16>,
    connect_to: Vec<ConnectTo>,
    stubbed: AtomicU64,
}

/// A listed `host:port` dialled at another address, as curl's `--connect-to` does: a relay
/// the person runs, or a test double. The name must still be allowed; the address is the
/// person's own word, so a special one (loopback) is not refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectTo {
    /// The host as clients name it (canonical: lowercase, no trailing dot).
    pub host: String,
    /// Its port.
    pub port: u16,
    /// Where to dial instead.
    pub addr: std::net::SocketAddr,
}

/// Requests to a proxy's gateways.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GatewayCounts {
    /// Every request that came to a gateway.
    pub requests: u64,
    /// Those sent on with the real credential in place of the stand-in.
    pub swapped: u64,
}

/// What a proxy serves beyond its rules.
#[derive(Debug, Default)]
pub struct Extras {
    /// The model APIs it serves with credentials swapped in.
    pub gateways: Vec<Gateway>,
    /// The stand-ins it refuses as revoked (shared with the other proxies of the process).
    pub revoked: Revoked,
    /// The roots a gateway's TLS is verified against; `None`: the Mozilla root store
    /// (webpki-roots). Tests give their own CA.
    pub tls_roots: Option<Arc<tokio_rustls::rustls::RootCertStore>>,
    /// Ports inside the sandbox where the proxy itself answers as a model API that spends
    /// nothing ([`crate::stub`]), for the same origin-form requests a gateway gets.
    pub stubs: Vec<u16>,
    /// Listed targets dialled at another address.
    pub connect_to: Vec<ConnectTo>,
}

impl Proxy {
    /// Binds a unix socket at `socket` (removing a stale file first; the socket is made mode
    /// 0666 so a sandbox's non-root user can connect; its parent directory is the caller's),
    /// and serves on its own thread with its own tokio runtime until `stop` or drop.
    pub fn start(socket: &Path, rules: Rules, resolver: Arc<dyn Resolver>) -> io::Result<Proxy> {
        Proxy::start_with(socket, rules, resolver, Extras::default())
    }

    /// [`Proxy::start`], serving `extras` too.
    pub fn start_with(
        socket: &Path,
        rules: Rules,
        resolver: Arc<dyn Resolver>,
        extras: Extras,
    ) -> io::Result<Proxy> {
        match std::fs::remove_file(socket) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let listener = std::os::unix::net::UnixListener::bind(socket)?;
        std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o666))?;
        listener.set_nonblocking(true)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let listener = {
            let _entered = runtime.enter();
            UnixListener::from_std(listener)?
        };
        let state = Arc::new(State {
            rules,
            resolver,
            blocked: Mutex::new(Vec::new()),
            gateways: extras.gateways,
            revoked: extras.revoked,
            tls: match extras.tls_roots {
                Some(roots) => client_config(roots),
                None => tls_config(),
            },
            through_gateways: AtomicU64::new(0),
            swapped: AtomicU64::new(0),
            stubs: extras.stubs,
            connect_to: extras.connect_to,
            stubbed: AtomicU64::new(0),
        });
        let (stop, stopped) = oneshot::channel();
        let served = state.clone();
        let thread = std::thread::Builder::new()
            .name("stet-egress".into())
            .spawn(move || {
                runtime.block_on(serve(listener, served, stopped));
                // Shutting down drops every task, so every tunnel's sockets close; a resolver
                // call still blocking is not waited for long.
                runtime.shutdown_timeout(Duration::from_secs(1));
            })?;
        Ok(Proxy {
            state,
            stop: Some(stop),
            thread: Some(thread),
            socket: socket.to_owned(),
        })
    }

    /// What was refused so far.
    pub fn blocked(&self) -> Vec<Blocked> {
        self.state
            .blocked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many requests came to a gateway, and how many of them it sent on with the real
    /// credential swapped in.
    pub fn gateway_counts(&self) -> GatewayCounts {
        GatewayCounts {
            requests: self.state.through_gateways.load(Ordering::Relaxed),
            swapped: self.state.swapped.load(Ordering::Relaxed),
        }
    }

    /// How many requests the model API stub answered.
    pub fn stubbed(&self) -> u64 {
        self.state.stubbed.load(Ordering::Relaxed)
    }

    /// Stops serving (open tunnels are closed) and removes the socket file.
    pub fn stop(self) {
        drop(self); // Drop does the work, so a proxy that is merely dropped stops too.
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

impl State {
    fn record(&self, refusal: &Refusal) {
        let mut blocked = self.blocked.lock().unwrap_or_else(PoisonError::into_inner);
        let (target, why) = if blocked.len() < MAX_BLOCKED
            || blocked
                .iter()
                .any(|b| b.target == refusal.target && b.why == refusal.why)
        {
            (refusal.target.as_str(), refusal.why.as_str())
        } else {
            ("*", "more distinct refusals than stet lists one by one")
        };
        match blocked
            .iter_mut()
            .find(|b| b.target == target && b.why == why)
        {
            Some(entry) => entry.count += 1,
            None => blocked.push(Blocked {
                target: target.to_owned(),
                why: why.to_owned(),
                count: 1,
                first_unix_ms: SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64),
            }),
        }
    }
}

/// Accepts until the proxy is stopped; then returning drops this future and, with the
/// runtime's shutdown, every connection task.
async fn serve(listener: UnixListener, state: Arc<State>, stopped: oneshot::Receiver<()>) {
    tokio::spawn(async move {
        let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        // Waiting for a permit before accepting leaves further clients in the kernel's
        // backlog, holding none of the host's descriptors.
        while let Ok(permit) = permits.clone().acquire_owned().await {
            match listener.accept().await {
                Ok((stream, _)) => {
                    tokio::spawn(connection(stream, state.clone(), Arc::new(permit)));
                }
                // Out of descriptors, most likely: pause rather than spin; keep serving.
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    });
    // A dropped sender (the Proxy dropped) stops it as surely as a sent one.
    let _ = stopped.await;
}

/// Serves one client connection. `permit` is held until it and any tunnel it opened end.
async fn connection(stream: UnixStream, state: Arc<State>, permit: Permit) {
    let service = hyper::service::service_fn(move |req| handle(req, state.clone(), permit.clone()));
    // A connection's error (a malformed request, a timeout) ends that connection only.
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades()
        .await;
}

type Body = BoxBody<Bytes, hyper::Error>;
type Permit = Arc<OwnedSemaphorePermit>;

async fn handle(
    req: Request<Incoming>,
    state: Arc<State>,
    permit: Permit,
) -> Result<Response<Body>, Infallible> {
    // A stand-in whose sandbox is gone is refused wherever it travels in the head.
    let revoked = state.revoked.carried_by(&req.uri().to_string())
        || req
            .headers()
            .values()
            .filter_map(|v| v.to_str().ok())
            .any(|v| state.revoked.carried_by(v));
    if revoked {
        let target = req
            .uri()
            .authority()
            .map(|a| a.to_string())
            .or_else(|| host_header(&req).map(str::to_owned))
            .unwrap_or_else(|| "-".into());
        let why = "a revoked stand-in credential (its sandbox is gone)";
        let body = format!("stet: blocked {target}: {why}\n");
        return Ok(refuse(
            &state,
            StatusCode::FORBIDDEN,
            refusal(&target, why),
            &body,
        ));
    }
    Ok(if req.method() == Method::CONNECT {
        tunnel(req, &state, permit).await
    } else if req.uri().scheme().is_some() {
        forward(req, &state).await
    } else if let Some(gateway) = gateway_for(&req, &state).cloned() {
        through_gateway(req, &state, &gateway).await
    } else if stub_for(&req, &state) {
        stubbed(req, &state).await
    } else {
        let body = "stet: this is stet's egress proxy; it serves only proxy requests \
                    (CONNECT host:port, or an absolute http:// URL)\n";
        refuse(
            &state,
            StatusCode::BAD_REQUEST,
            refusal("-", "not a proxy request"),
            body,
        )
    })
}

/// `CONNECT host:port`: check, connect, answer 200, then relay opaque bytes. Nothing inside
/// the tunnel is read, so a CONNECT sent through it is only bytes to the target.
async fn tunnel(req: Request<Incoming>, state: &State, permit: Permit) -> Response<Body> {
    let Some((host, port)) = req
        .uri()
        .authority()
        .map(|a| (a.host().to_owned(), a.port_u16()))
    else {
        return malformed(state, "-", "CONNECT without a host:port");
    };
    let Some(port) = port else {
        return malformed(state, &host, "CONNECT needs host:port");
    };
    let mut upstream = match reach(state, &host, port).await {
        Ok(upstream) => upstream,
        Err(response) => return response,
    };
    tokio::spawn(async move {
        if let Ok(upgraded) = hyper::upgrade::on(req).await {
            let _ = tokio::io::copy_bidirectional(&mut TokioIo::new(upgraded), &mut upstream).await;
        }
        drop(permit);
    });
    Response::new(full(String::new()))
}

/// `GET http://host:port/path`: check, connect, send the request on in origin form with
/// the hop-by-hop and `Proxy-*` headers removed, stream the answer back.
async fn forward(req: Request<Incoming>, state: &State) -> Response<Body> {
    let uri = req.uri().clone();
    let Some(host) = uri.host().filter(|_| uri.scheme() == Some(&Scheme::HTTP)) else {
        return malformed(
            state,
            "-",
            "only http:// URLs are forwarded (https goes by CONNECT)",
        );
    };
    let port = uri.port_u16().unwrap_or(80);
    let upstream = match reach(state, host, port).await {
        Ok(upstream) => upstream,
        Err(response) => return response,
    };
    let (mut parts, body) = req.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    // Host names what was checked (RFC 9112 §3.2.2), never a client's other choice of
    // virtual host on the same address.
    let authority = match uri.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    if let Ok(value) = HeaderValue::from_str(&authority) {
        parts.headers.insert(header::HOST, value);
    }
    parts.uri = Uri::from(
        uri.path_and_query()
            .cloned()
            .unwrap_or(PathAndQuery::from_static("/")),
    );
    parts.version = Version::HTTP_11;
    let target = policy::target(&policy::canonical(host), port);
    send(upstream, Request::from_parts(parts, body), &target).await
}

/// Sends `req` on `upstream` (HTTP/1.1) and streams the answer back, hop-by-hop headers
/// removed.
async fn send<T>(upstream: T, req: Request<Incoming>, target: &str) -> Response<Body>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let failed = |e: hyper::Error| bad_gateway(&format!("stet: {target} failed: {e}\n"));
    let (mut sender, connection) =
        match hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await {
            Ok(pair) => pair,
            Err(e) => return failed(e),
        };
    tokio::spawn(connection);
    match sender.send_request(req).await {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Response::from_parts(parts, body.boxed())
        }
        Err(e) => failed(e),
    }
}

fn host_header(req: &Request<Incoming>) -> Option<&str> {
    req.headers().get(header::HOST)?.to_str().ok()
}

/// The gateway a request in origin form is for: its `Host` is the sandbox's loopback at a
/// gateway's port.
fn gateway_for<'s>(req: &Request<Incoming>, state: &'s State) -> Option<&'s Gateway> {
    let authority: hyper::http::uri::Authority = host_header(req)?.parse().ok()?;
    let loopback = matches!(authority.host(), "127.0.0.1" | "localhost" | "[::1]");
    let port = authority.port_u16()?;
    state.gateways.iter().find(|g| loopback && g.port == port)
}

/// Whether a request in origin form is for the model API stub: its `Host` is the sandbox's
/// loopback at a stub's port.
fn stub_for(req: &Request<Incoming>, state: &State) -> bool {
    let Some(authority) =
        host_header(req).and_then(|h| h.parse::<hyper::http::uri::Authority>().ok())
    else {
        return false;
    };
    matches!(authority.host(), "127.0.0.1" | "localhost" | "[::1]")
        && authority
            .port_u16()
            .is_some_and(|p| state.stubs.contains(&p))
}

/// The stub's answer; nothing of the request goes anywhere.
async fn stubbed(req: Request<Incoming>, state: &State) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let body = match http_body_util::Limited::new(req.into_body(), crate::stub::MAX_BODY)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(_) => {
            let body = format!(
                "stet: the model API stub reads at most {} bytes of a request\n",
                crate::stub::MAX_BODY
            );
            return refuse(
                state,
                StatusCode::PAYLOAD_TOO_LARGE,
                refusal("-", "a request too big for the model API stub"),
                &body,
            );
        }
    };
    state.stubbed.fetch_add(1, Ordering::Relaxed);
    let answer = crate::stub::answer(&method, &path, &body);
    let mut response = Response::new(
        Full::new(answer.body)
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = answer.status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(answer.content_type),
    );
    response
}

/// A request to a gateway: sent on to its model API (checked by the rules like any other
/// target) with `Host` naming the API and the real credential in place of the stand-in;
/// refused, before anything is dialled, for a path it does not serve or a credential header
/// that holds anything but its stand-in ([`Gateway::swaps_for`]).
async fn through_gateway(
    req: Request<Incoming>,
    state: &State,
    gateway: &Gateway,
) -> Response<Body> {
    let target = policy::target(&policy::canonical(&gateway.host), gateway.upstream_port);
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let forbidden = |why: String| {
        let body = format!("stet: blocked {target}: {why}\n");
        refuse(state, StatusCode::FORBIDDEN, refusal(&target, &why), &body)
    };
    // TRACE would echo the swapped-in header back to the sandbox.
    if matches!(*req.method(), Method::TRACE | Method::CONNECT) {
        return forbidden(format!(
            "{} is not sent through a credential gateway",
            req.method()
        ));
    }
    let bare = path.split('?').next().unwrap_or(&path);
    if let Some(what) = credentials::unsettled(bare) {
        return forbidden(format!(
            "the credential gateway serves no path with {what}, as {bare} has"
        ));
    }
    if !gateway.serves(&path) {
        let served = gateway.paths.join(", ");
        return forbidden(format!(
            "the credential gateway serves only {served}, not {bare}"
        ));
    }
    // Decided before the upstream is dialled: a refused request reaches nothing.
    let swaps = match gateway.swaps_for(req.headers()) {
        Ok(swaps) => swaps,
        Err(why) => return forbidden(why),
    };
    let upstream = match reach(state, &gateway.host, gateway.upstream_port).await {
        Ok(upstream) => upstream,
        Err(response) => return response,
    };
    let (mut parts, body) = req.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    let host = policy::canonical(&gateway.host);
    let default_port = if gateway.tls { 443 } else { 80 };
    let authority = if gateway.upstream_port == default_port {
        policy::bracketed(&host).to_string()
    } else {
        policy::target(&host, gateway.upstream_port)
    };
    if let Ok(value) = HeaderValue::from_str(&authority) {
        parts.headers.insert(header::HOST, value);
    }
    state.through_gateways.fetch_add(1, Ordering::Relaxed);
    let mut swapped = false;
    for swap in swaps.into_iter().filter(|s| s.serves(&path)) {
        let Ok(name) = HeaderName::from_bytes(swap.header.as_bytes()) else {
            continue;
        };
        if let Ok(mut real) = HeaderValue::from_str(&swap.real) {
            real.set_sensitive(true);
            parts.headers.insert(name, real);
            swapped = true;
        }
    }
    if swapped {
        state.swapped.fetch_add(1, Ordering::Relaxed);
    }
    parts.version = Version::HTTP_11;
    let req = Request::from_parts(parts, body);
    let response = if !gateway.tls {
        send(upstream, req, &target).await
    } else {
        let Ok(server_name) = tokio_rustls::rustls::pki_types::ServerName::try_from(host.clone())
        else {
            return bad_gateway(&format!("stet: {target}: not a name TLS can verify\n"));
        };
        let connector = tokio_rustls::TlsConnector::from(state.tls.clone());
        match timeout(CONNECT_TIMEOUT, connector.connect(server_name, upstream)).await {
            Ok(Ok(tls)) => send(tls, req, &target).await,
            Ok(Err(e)) => bad_gateway(&format!("stet: TLS with {target} failed: {e}\n")),
            Err(_) => bad_gateway(&format!(
                "stet: TLS with {target}: no answer in {CONNECT_TIMEOUT:?}\n"
            )),
        }
    };
    without_real_values(response, gateway)
}

/// An answer whose headers echo a real value (an API reflecting the request's headers)
/// goes back with none of them, and a body frame holding one gets the stand-in in its
/// place (of the same length, so framing holds): the sandbox never sees what was swapped
/// in. A value split across two frames of a body passes — policy, not a wall; the wall is
/// that the gateway serves only the API's declared paths.
fn without_real_values(response: Response<Body>, gateway: &Gateway) -> Response<Body> {
    let secrets: Vec<&str> = gateway
        .swaps
        .iter()
        .map(|s| s.real.rsplit(' ').next().unwrap_or(&s.real))
        .filter(|s| !s.is_empty())
        .collect();
    let pairs: Arc<Vec<(Vec<u8>, Vec<u8>)>> = Arc::new(
        gateway
            .swaps
            .iter()
            .map(|s| {
                let last = |v: &str| v.rsplit(' ').next().unwrap_or(v).as_bytes().to_vec();
                (last(&s.real), last(&s.stand_in))
            })
            .filter(|(real, stand_in)| !real.is_empty() && real.len() == stand_in.len())
            .collect(),
    );
    let response = {
        let (mut parts, body) = response.into_parts();
        // The length stays what it was (a stand-in is as long as its real value); said
        // explicitly, since the mapped body no longer knows it.
        if let Some(exact) = hyper::body::Body::size_hint(&body).exact() {
            parts
                .headers
                .entry(header::CONTENT_LENGTH)
                .or_insert_with(|| HeaderValue::from(exact));
        }
        let body = body
            .map_frame(move |frame| frame.map_data(|data| scrub(data, &pairs)))
            .boxed();
        Response::from_parts(parts, body)
    };
    let mut response = response;
    let echoed: Vec<HeaderName> = response
        .headers()
        .iter()
        .filter(|(_, v)| {
            let v = String::from_utf8_lossy(v.as_bytes());
            secrets.iter().any(|s| v.contains(s))
        })
        .map(|(k, _)| k.clone())
        .collect();
    for name in echoed {
        response.headers_mut().remove(name);
    }
    response
}

/// TLS to model APIs, verified against the Mozilla root store (webpki-roots): a sandbox's
/// model API is a public service, and the roots travel with stet rather than with the host.
fn tls_config() -> Arc<tokio_rustls::rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<tokio_rustls::rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = tokio_rustls::rustls::RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            client_config(Arc::new(roots))
        })
        .clone()
}

fn client_config(
    roots: Arc<tokio_rustls::rustls::RootCertStore>,
) -> Arc<tokio_rustls::rustls::ClientConfig> {
    use tokio_rustls::rustls;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// Resolves (only names the rules could allow), decides, and connects to the checked
/// address. `Err` is the answer to send instead.
async fn reach(state: &State, host: &str, port: u16) -> Result<TcpStream, Response<Body>> {
    let forbidden = |r: Refusal| {
        let body = format!("stet: blocked {}: {}\n", r.target, r.why);
        refuse(state, StatusCode::FORBIDDEN, r, &body)
    };
    let name = policy::canonical(host);
    if let Some(route) = state
        .connect_to
        .iter()
        .find(|r| r.port == port && r.host == name)
    {
        policy::by_name(&state.rules, &name, port).map_err(forbidden)?;
        let target = policy::target(&name, port);
        let addr = route.addr;
        return match timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => Ok(stream),
            Ok(Err(e)) => Err(bad_gateway(&format!(
                "stet: cannot connect to {target} (at {addr}, as [network] connect_to says): {e}\n"
            ))),
            Err(_) => Err(bad_gateway(&format!(
                "stet: cannot connect to {target} (at {addr}): no answer in {CONNECT_TIMEOUT:?}\n"
            ))),
        };
    }
    let resolved = match name.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => {
            policy::by_name(&state.rules, &name, port).map_err(forbidden)?;
            let resolver = state.resolver.clone();
            let lookup = tokio::task::spawn_blocking(move || resolver.resolve(&name, port));
            match timeout(RESOLVE_TIMEOUT, lookup).await {
                Ok(Ok(Ok(ips))) => ips,
                _ => Vec::new(),
            }
        }
    };
    let addr = match policy::decide(&state.rules, host, port, &resolved) {
        Verdict::Allow(addr) => addr,
        Verdict::Deny(refusal) => return Err(forbidden(refusal)),
    };
    let target = policy::target(&policy::canonical(host), port);
    let failure = match timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => return Ok(stream),
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no answer in {CONNECT_TIMEOUT:?}"),
    };
    Err(bad_gateway(&format!(
        "stet: cannot connect to {target} ({addr}): {failure}\n"
    )))
}

/// `data` with each real value in `pairs` replaced by its stand-in (same length).
fn scrub(data: Bytes, pairs: &[(Vec<u8>, Vec<u8>)]) -> Bytes {
    let holds = |real: &[u8]| data.windows(real.len()).any(|w| w == real);
    if !pairs.iter().any(|(real, _)| holds(real)) {
        return data;
    }
    let mut bytes = data.to_vec();
    for (real, stand_in) in pairs {
        let mut at = 0;
        while let Some(i) = bytes[at..]
            .windows(real.len())
            .position(|w| w == real.as_slice())
        {
            let start = at + i;
            bytes[start..start + real.len()].copy_from_slice(stand_in);
            at = start + real.len();
        }
    }
    Bytes::from(bytes)
}

/// A refusal: counted in `blocked()`, answered with `status` and the one-line `body`.
fn refuse(state: &State, status: StatusCode, refusal: Refusal, body: &str) -> Response<Body> {
    state.record(&refusal);
    let mut response = text(status, body);
    if let Ok(value) = HeaderValue::from_str(&refusal.target) {
        response.headers_mut().insert("x-stet-blocked", value);
    }
    response
}

fn malformed(state: &State, target: &str, why: &str) -> Response<Body> {
    refuse(
        state,
        StatusCode::BAD_REQUEST,
        refusal(target, why),
        &format!("stet: {why}\n"),
    )
}

fn refusal(target: &str, why: &str) -> Refusal {
    Refusal {
        target: target.into(),
        why: why.into(),
    }
}

/// Not a refusal (not counted): the target was allowed but did not answer.
fn bad_gateway(body: &str) -> Response<Body> {
    text(StatusCode::BAD_GATEWAY, body)
}

fn full(body: String) -> Body {
    Full::new(Bytes::from(body))
        .map_err(|never| match never {})
        .boxed()
}

fn text(status: StatusCode, body: &str) -> Response<Body> {
    let mut response = Response::new(full(body.to_owned()));
    *response.status_mut() = status;
    let plain = HeaderValue::from_static("text/plain; charset=utf-8");
    response.headers_mut().insert(header::CONTENT_TYPE, plain);
    response
}

/// Headers that concern one hop only (RFC 9110 §7.6.1).
const HOP_BY_HOP: [&str; 6] = [
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Removes the hop-by-hop headers, those the `Connection` header names, and every `Proxy-*`
/// header (credentials meant for this proxy never travel on).
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok());
    let named = named
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase());
    let proxy = headers
        .keys()
        .map(HeaderName::as_str)
        .filter(|k| k.starts_with("proxy-"));
    let doomed: Vec<String> = named.chain(proxy.map(str::to_owned)).collect();
    for name in doomed.iter().map(String::as_str).chain(HOP_BY_HOP) {
        headers.remove(name);
    }
}
