//! `stet board` under test: the real binary serving a world's repository, its URL read
//! from what it prints, stopped with Ctrl-C (SIGINT) at drop; and a plain HTTP/1.1 client
//! for what a browser would never send (no cookie, a foreign Host, a forged form).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};

pub use xtask::browser::Browser;

use crate::World;

/// A running `stet board`.
pub struct RunningBoard {
    child: Option<Child>,
    /// The URL it printed, with its token.
    pub url: String,
    /// The board's own address, where its pages are: `http://stet-<random>.localhost:PORT`
    /// (the printed URL's token is traded there for a session).
    pub base: String,
    /// The port.
    pub port: u16,
    /// Its standard error, collected as it runs.
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl RunningBoard {
    /// Starts `stet board args…` in `world` and waits for the line naming its URL.
    pub fn start(world: &World, args: &[&str]) -> RunningBoard {
        let mut all = vec!["board"];
        all.extend_from_slice(args);
        let mut child = world
            .stet(&all)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start stet board");
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let err = child.stderr.take().unwrap();
        let collected = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let mut all = collected.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        });
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).expect("read stet board's output");
        let url = match line.trim().strip_prefix("stet board: ") {
            Some(url) => url.to_string(),
            None => {
                let _ = child.kill();
                let status = child.wait();
                panic!(
                    "stet board printed no URL ({line:?}), ended {status:?}; stderr:\n{}",
                    stderr.lock().unwrap()
                );
            }
        };
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = out.read_to_string(&mut rest);
        });
        let printed = url.split("/?").next().unwrap().to_string();
        let port: u16 = printed.rsplit(':').next().unwrap().parse().unwrap();
        // Where the token leads: the board's own name.
        let token = url.split("token=").nth(1).unwrap().to_string();
        let first = request_to(
            &format!("127.0.0.1:{port}"),
            port,
            "GET",
            &format!("/?token={token}"),
            &[],
            None,
        );
        let location = first
            .header("location")
            .unwrap_or_else(|| panic!("the token led nowhere: {first:?}"))
            .to_string();
        let base = location.split("/?").next().unwrap().to_string();
        let name = base.trim_start_matches("http://").to_string();
        NAMES.lock().unwrap().insert(port, name);
        RunningBoard {
            child: Some(child),
            url,
            base,
            port,
            stderr,
        }
    }

    /// The token in its URL.
    pub fn token(&self) -> &str {
        self.url.split("token=").nth(1).unwrap()
    }

    /// What it printed on standard error so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// A browser signed in: it opened the printed URL (which sets the session's cookie).
    pub fn browser(&self) -> Browser {
        let browser = Browser::start(1280, 900).expect("start a headless Chromium");
        browser.goto(&self.url).expect("open the board's URL");
        browser
    }

    /// The board's own host and port (`stet-<random>.localhost:PORT`), the Host its pages
    /// answer to.
    pub fn name(&self) -> String {
        self.base.trim_start_matches("http://").to_string()
    }

    /// A session cookie for `request`, as a browser gets it from the URL: the token traded
    /// for a ticket on the printed address, the ticket for the cookie on the board's name.
    pub fn session_cookie(&self) -> String {
        let printed = format!("127.0.0.1:{}", self.port);
        let path = format!("/?token={}", self.token());
        let first = request_to(&printed, self.port, "GET", &path, &[], None);
        let location = first.header("location").unwrap_or_default().to_string();
        let ticket_path = format!("/?{}", location.split("/?").nth(1).unwrap_or_default());
        let response = request(self.port, "GET", &ticket_path, &[], None);
        response
            .header("set-cookie")
            .and_then(|c| c.split(';').next())
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no cookie from the token URL: {response:?}"))
    }

    /// Stops it as Ctrl-C does and returns its exit status and standard error.
    pub fn stop(mut self) -> (std::process::ExitStatus, String) {
        let child = self.child.take().unwrap();
        let status = interrupt_and_wait(child);
        (status, self.stderr())
    }
}

fn interrupt_and_wait(mut child: Child) -> std::process::ExitStatus {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    );
    child.wait().expect("wait for stet board")
}

impl Drop for RunningBoard {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            interrupt_and_wait(child);
        }
    }
}

/// An HTTP response as read off the socket.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    /// A header's value (the name in lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The board's name on each port a [`RunningBoard`] listens on: the Host [`request`] sends.
static NAMES: std::sync::Mutex<std::collections::BTreeMap<u16, String>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Sends one HTTP/1.1 request to 127.0.0.1:`port` and reads the whole response. Its Host is
/// the board's own name (as a browser sends it) unless `headers` names another; for a port no
/// board of this process listens on, 127.0.0.1:port.
pub fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Response {
    let host = NAMES
        .lock()
        .unwrap()
        .get(&port)
        .cloned()
        .unwrap_or_else(|| format!("127.0.0.1:{port}"));
    request_to(&host, port, method, path, headers, body)
}

/// [`request`] with the Host `host` unless `headers` names another.
pub fn request_to(
    host: &str,
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Response {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the board");
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {host}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        head.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    if let Some(body) = body {
        stream.write_all(body.as_bytes()).unwrap();
    }
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read the response");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Response {
        status,
        headers,
        body: body.to_string(),
    }
}
