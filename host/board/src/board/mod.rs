//! `stet board`: a local web view of the queue, the lanes, the receipts and the walls.
//!
//! One process serves one repository on 127.0.0.1, behind a random token printed in its URL
//! ([`auth`]). Pages read what the CLI reads — the queue, the records on the remote, this
//! clone's receipts and logs — from a [`model::Model`] refreshed in the background, so a
//! request never waits on the remote; actions write only through the functions the CLI
//! uses. Everything a page shows that a sandbox, an item or a plugin wrote is data: the
//! templates escape it, and the Content-Security-Policy allows no inline script and no other
//! origin (see [`auth::headers`]).
//!
//! Map: [`auth`] (token, session cookie, form tokens, host check, headers), [`model`] (the
//! snapshot the pages read), [`pages`] (a module per page, each a handler and a template
//! struct; templates in `host/templates/board/`), [`assets`] (the style sheet and the one
//! script, served from this origin).

pub mod assets;
pub mod auth;
pub mod charts;
pub mod model;
pub mod pages;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;

use crate::error::{Concept, Error};
use crate::printer::Printer;

/// What `stet board` was asked.
#[derive(Debug, Clone)]
pub struct Options {
    /// The repository's root.
    pub repo: PathBuf,
    /// The remote that holds reservations and records.
    pub remote: String,
    /// The port to listen on; 0 for one of the system's choosing.
    pub port: u16,
    /// Start the person's browser at the URL.
    pub open: bool,
    /// The plugin directories given on the command line (a drive started from the page gets
    /// them too).
    pub plugins_dirs: Vec<PathBuf>,
}

/// What every handler shares.
pub struct Board {
    pub options: Options,
    pub auth: auth::Auth,
    pub model: model::Model,
    /// Ends when the board stops: long-lived responses (the live page's events) end with it,
    /// so a stop does not wait for a browser to close them.
    pub stopping: tokio::sync::watch::Receiver<bool>,
}

/// The handlers' view of the board.
pub type Shared = Arc<Board>;

/// Serves the board until Ctrl-C (or TERM); returns once every connection is closed.
pub fn serve(options: Options, printer: Printer) -> Result<(), Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Concept::Drive.unusable(format!("cannot start the board's runtime: {e}")))?;
    runtime.block_on(serve_async(options, printer))
}

async fn serve_async(options: Options, printer: Printer) -> Result<(), Error> {
    let listener =
        tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, options.port)))
            .await
            .map_err(|e| {
                Concept::Drive
                    .usage(format!("cannot listen on 127.0.0.1:{}: {e}", options.port))
                    .hint("pass another --port, or none for a free one")
            })?;
    let port = listener
        .local_addr()
        .map_err(|e| Concept::Drive.unusable(format!("cannot read the board's address: {e}")))?
        .port();
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let first = {
        let (repo, remote) = (options.repo.clone(), options.remote.clone());
        tokio::task::spawn_blocking(move || model::read(&repo, &remote))
            .await
            .map_err(|e| Concept::Drive.unusable(format!("reading the queue failed: {e}")))?
    };
    let model = model::Model::start(&options.repo, &options.remote, first, stopping.clone());
    let board = Arc::new(Board {
        auth: auth::Auth::new(port),
        model,
        stopping,
        options,
    });
    let url = format!("http://127.0.0.1:{port}/?token={}", board.auth.token());
    // The URL is the one thing printed on standard output: a script (or a test) reads it.
    printer.out(&format!("stet board: {url}"));
    printer.note(&format!(
        "serving {} on 127.0.0.1:{port} until Ctrl-C; the token in the URL is the key: \
         anyone who has it can act on the queue as you",
        board.options.repo.display()
    ));
    // Kept until the board stops: the page the browser is started at.
    let _opened = if board.options.open {
        open_browser(&url, printer)
    } else {
        None
    };
    let app = router(board.clone());
    serve_connections(listener, app, stop).await;
    printer.note("stet board stopped");
    Ok(())
}

/// Connections open at once; more wait to be accepted.
pub const MAX_CONNECTIONS: usize = 256;
/// How long a connection may take to send a request's head.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stop waits for requests in flight (the live page's events end at once).
const DRAIN: Duration = Duration::from_secs(5);

/// Accepts and serves connections until Ctrl-C (TERM, HUP), then tells `stop` and lets the
/// requests in flight finish, for at most [`DRAIN`]. Each connection is HTTP/1 with a
/// header-read timeout, and at most [`MAX_CONNECTIONS`] are open: whoever can reach
/// 127.0.0.1 cannot hold the board up by opening connections and sending half a request.
async fn serve_connections(
    listener: tokio::net::TcpListener,
    app: Router,
    stop: tokio::sync::watch::Sender<bool>,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let open = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let stopped = wait_for_stop();
    tokio::pin!(stopped);
    loop {
        let permit = tokio::select! {
            permit = open.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            _ = &mut stopped => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of descriptors, say: the connections open end in their time.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut stopped => break,
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
            drop(permit);
        });
    }
    let _ = stop.send(true);
    let _ = tokio::time::timeout(DRAIN, graceful.shutdown()).await;
}

/// The routes; every one behind [`auth::guard`].
pub fn router(board: Shared) -> Router {
    pages::routes()
        .merge(assets::routes())
        .layer(axum::middleware::from_fn_with_state(
            board.clone(),
            auth::guard,
        ))
        .with_state(board)
}

/// Ctrl-C, TERM or HUP.
async fn wait_for_stop() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut hup = signal(SignalKind::hangup()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => {}
        _ = async { match hup.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => {}
    }
}

/// Starts the person's browser at `url` (`xdg-open` on Linux, `open` on macOS), saying so
/// when it cannot: the URL is printed either way. The browser is given a page of the
/// person's own (a temporary file only they can read) that leads to the URL, never the URL
/// itself: a command line is readable by every user of the machine, and the browser keeps
/// its own for its life. Returns that file, to be kept until the board stops.
fn open_browser(url: &str, printer: Printer) -> Option<tempfile::NamedTempFile> {
    let page = tempfile::Builder::new()
        .prefix("stet-board-")
        .suffix(".html")
        .tempfile()
        .and_then(|mut file| {
            use std::io::Write;
            // The URL is the board's own: digits, hex and punctuation, nothing to escape.
            writeln!(
                file,
                "<!doctype html><meta charset=utf-8><meta http-equiv=refresh content=\"0;url={url}\">\
                 <title>stet board</title><a href=\"{url}\">stet board</a>"
            )?;
            file.flush()?;
            Ok(file)
        });
    let page = match page {
        Ok(page) => page,
        Err(e) => {
            printer.warn(&format!(
                "could not write the page to open the board with ({e}): open the URL above yourself"
            ));
            return None;
        }
    };
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    match std::process::Command::new(opener)
        .arg(page.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        Ok(mut child) => {
            // Reaped when the opener returns (at once: it hands the URL to the browser).
            std::thread::spawn(move || child.wait());
            printer.note(&format!("opened the board with {opener}"));
            Some(page)
        }
        Err(e) => {
            printer.warn(&format!(
                "could not start a browser with {opener} ({e}): open the URL above yourself"
            ));
            None
        }
    }
}
