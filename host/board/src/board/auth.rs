//! Who may use the board: whoever holds the token printed in its URL.
//!
//! - The printed URL is `http://127.0.0.1:PORT/?token=T`. With the right token, the board
//!   answers with a redirect to its own name, `http://stet-<random>.localhost:PORT/`,
//!   carrying a one-time ticket; there the ticket makes a session: a random id in an
//!   HttpOnly, SameSite=Strict cookie, and a redirect to the queue that drops the ticket from
//!   the address bar. Why a name of its own: browsers keep cookies per host, not per port,
//!   so a cookie of 127.0.0.1 would be sent to every other server on 127.0.0.1 the person's
//!   browser visits (another user's, a hostile dev server); the board's host-only cookie on
//!   a random `.localhost` name (loopback by RFC 6761: Chromium, Firefox and curl resolve it
//!   so) reaches no other port and no other board.
//! - Every other request needs that cookie, on that name: without it 401, with a wrong
//!   token or ticket 403.
//! - A request whose Host is neither the board's name nor 127.0.0.1/localhost with its port
//!   (the token's step alone) is refused with 403 before anything else: a page elsewhere
//!   cannot reach the board through a name it rebinds to 127.0.0.1.
//! - A POST must carry the session's form token ([`Session::csrf`]) in its form, and an
//!   Origin, when the browser sends one, must be the board's: a page elsewhere cannot make
//!   the person's browser act. No GET changes anything.
//! - Every response carries [`headers`]: a Content-Security-Policy that allows no inline
//!   script and nothing from another origin, no caching, no referrer to another origin, no
//!   framing.
//!
//! Sessions and tickets are kept in memory, at most [`MAX_SESSIONS`] each (the oldest goes
//! first): a board running for days does not grow with every browser that opened it.

use std::collections::VecDeque;
use std::sync::Mutex;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::Shared;

/// Sessions kept at once.
pub const MAX_SESSIONS: usize = 64;
/// The cookie's name.
pub const COOKIE: &str = "stet_board";

/// The policy every response carries. `style-src 'self'` and `script-src 'self'`: the one
/// style sheet and the one script are files of this origin; no inline script, no inline
/// event handler, no `javascript:` URL runs; `img-src 'self' data:` for nothing but our own
/// (charts are inline SVG, drawn on the server, with no script in them).
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
     base-uri 'none'";

/// A browser's session, as the guard hands it to handlers (a request extension).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The cookie's value.
    pub id: String,
    /// The form token every POST of this session carries.
    pub csrf: String,
}

/// The token and the sessions it made.
pub struct Auth {
    token: String,
    port: u16,
    /// The board's own host name, `stet-<random>.localhost`.
    name: String,
    sessions: Mutex<VecDeque<Session>>,
    /// One-time tickets from the token's redirect, each good for one session.
    tickets: Mutex<VecDeque<String>>,
}

impl Auth {
    /// A new random token, for a board on `port`.
    pub fn new(port: u16) -> Auth {
        Auth {
            token: random_hex(24),
            port,
            name: format!("stet-{}.localhost", random_hex(8)),
            sessions: Mutex::new(VecDeque::new()),
            tickets: Mutex::new(VecDeque::new()),
        }
    }

    /// The board's own address, `http://stet-<random>.localhost:PORT`, where its pages are.
    pub fn origin(&self) -> String {
        format!("http://{}:{}", self.name, self.port)
    }

    fn new_ticket(&self) -> String {
        let ticket = random_hex(24);
        let mut tickets = self.tickets.lock().unwrap_or_else(|p| p.into_inner());
        if tickets.len() >= MAX_SESSIONS {
            tickets.pop_front();
        }
        tickets.push_back(ticket.clone());
        ticket
    }

    /// Uses up `ticket`: whether it was one of ours, unused.
    fn take_ticket(&self, ticket: &str) -> bool {
        let mut tickets = self.tickets.lock().unwrap_or_else(|p| p.into_inner());
        match tickets.iter().position(|t| same(t, ticket)) {
            Some(at) => {
                tickets.remove(at);
                true
            }
            None => false,
        }
    }

    /// The token (printed in the URL).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The port the board listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    fn new_session(&self) -> Session {
        let session = Session {
            id: random_hex(24),
            csrf: random_hex(24),
        };
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if sessions.len() >= MAX_SESSIONS {
            sessions.pop_front();
        }
        sessions.push_back(session.clone());
        session
    }

    fn session(&self, id: &str) -> Option<Session> {
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions.iter().find(|s| same(&s.id, id)).cloned()
    }

    /// Whether `host` (a Host header) is the board's own name.
    fn our_name(&self, host: &str) -> bool {
        host.eq_ignore_ascii_case(&format!("{}:{}", self.name, self.port))
    }

    /// Whether `host` is the printed address (127.0.0.1 or localhost with the port): the
    /// token's step alone is taken there.
    fn printed_host(&self, host: &str) -> bool {
        host == format!("127.0.0.1:{}", self.port) || host == format!("localhost:{}", self.port)
    }

    /// Whether `origin` (an Origin header) is this board.
    fn our_origin(&self, origin: &str) -> bool {
        origin
            .strip_prefix("http://")
            .is_some_and(|host| self.our_name(host))
    }
}

/// Whether a form's token is the session's: what every POST handler asks first.
pub fn form_token_ok(session: &Session, given: &str) -> bool {
    same(&session.csrf, given)
}

/// Compares in time that does not depend on where two strings first differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    // The operating system's random source; a board without one cannot make a key.
    getrandom::fill(&mut buf).expect("the operating system's random source answers");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// The headers every response carries.
pub fn headers(headers: &mut HeaderMap) {
    let set = |headers: &mut HeaderMap, name: header::HeaderName, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(headers, header::CONTENT_SECURITY_POLICY, CSP);
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    // `same-origin`, not `no-referrer`: under `no-referrer` a browser sends `Origin: null`
    // with the board's own forms (the Fetch standard serializes the origin of a request
    // whose policy is no-referrer as null), and the guard refuses a form from elsewhere.
    set(headers, header::REFERRER_POLICY, "same-origin");
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    set(headers, header::CACHE_CONTROL, "no-store");
    set(
        headers,
        header::HeaderName::from_static("cross-origin-opener-policy"),
        "same-origin",
    );
    set(
        headers,
        header::HeaderName::from_static("cross-origin-resource-policy"),
        "same-origin",
    );
}

/// A refusal: `why` is one of this module's own sentences (never anything a request
/// carried), so it goes into the page as it is.
fn refuse(status: StatusCode, why: &'static str) -> Response {
    let body = format!("<!doctype html><meta charset=utf-8><title>stet board</title><p>{why}</p>");
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

fn cookie_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
}

/// The value of `key` in a query string.
fn query_value(query: Option<&str>, key: &str) -> Option<String> {
    query?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.to_string())
}

/// A 303 to `location`, setting `cookie` when given.
fn see_other(location: &str, cookie: Option<&Session>) -> Response {
    let mut response = Response::new(axum::body::Body::empty());
    *response.status_mut() = StatusCode::SEE_OTHER;
    if let Ok(location) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    if let Some(session) = cookie {
        // Host-only (no Domain): sent to the board's own name alone.
        if let Ok(cookie) = HeaderValue::from_str(&format!(
            "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict",
            session.id
        )) {
            response.headers_mut().insert(header::SET_COOKIE, cookie);
        }
    }
    response
}

/// The middleware in front of every route.
pub async fn guard(State(board): State<Shared>, mut request: Request, next: Next) -> Response {
    let mut response = match admit(&board, &request) {
        Ok(session) => {
            request.extensions_mut().insert(session);
            next.run(request).await
        }
        Err(refused) => refused,
    };
    headers(response.headers_mut());
    response
}

/// Decides on a request: `Ok` with its session to run the handler, `Err` with the refusal
/// (or the redirect that makes a session).
#[allow(clippy::result_large_err)] // one per request, moved once
fn admit(board: &Shared, request: &Request) -> Result<Session, Response> {
    let auth = &board.auth;
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let query = request.uri().query();
    if auth.printed_host(host) {
        // The printed URL: the token's step, and nothing else.
        return Err(match query_value(query, "token") {
            Some(token) if request.method() == Method::GET && same(&token, auth.token()) => {
                see_other(
                    &format!("{}/?ticket={}", auth.origin(), auth.new_ticket()),
                    None,
                )
            }
            Some(_) => refuse(
                StatusCode::FORBIDDEN,
                "that token is not this board's: open the URL stet board printed",
            ),
            None => refuse(
                StatusCode::UNAUTHORIZED,
                "no session: open the URL stet board printed (it carries the token)",
            ),
        });
    }
    if !auth.our_name(host) {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            "this board answers only to its own address (the URL stet board printed)",
        ));
    }
    if request.method() == Method::GET {
        let given = query_value(query, "ticket")
            .map(|t| auth.take_ticket(&t))
            .or_else(|| query_value(query, "token").map(|t| same(&t, auth.token())));
        match given {
            Some(true) => return Err(see_other("/queue", Some(&auth.new_session()))),
            Some(false) => {
                return Err(refuse(
                    StatusCode::FORBIDDEN,
                    "that ticket or token is not this board's (a ticket is good once): \
                     open the URL stet board printed",
                ))
            }
            None => {}
        }
    }
    let Some(session) = cookie_of(request.headers()).and_then(|id| auth.session(&id)) else {
        return Err(refuse(
            StatusCode::UNAUTHORIZED,
            "no session: open the URL stet board printed (it carries the token)",
        ));
    };
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let origin = request
            .headers()
            .get(header::ORIGIN)
            .and_then(|o| o.to_str().ok());
        if let Some(origin) = origin {
            if !auth.our_origin(origin) {
                return Err(refuse(
                    StatusCode::FORBIDDEN,
                    "a form from another page cannot act on this board",
                ));
            }
        }
    }
    Ok(session)
}
