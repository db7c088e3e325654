//! Reading one HTTP/1.1 request, as the tests' doubles of remote services need it.

use std::io::BufRead;

/// One request: its method, its path, its headers (names lowercase) and its body.
pub struct Head {
    /// The request line's method (`GET`, `POST`).
    pub method: String,
    /// The request line's path, query included.
    pub path: String,
    /// Header names (lowercase) and values.
    pub headers: Vec<(String, String)>,
    /// The body (`Content-Length` bytes).
    pub body: Vec<u8>,
}

/// Reads the next request from `reader`; `None` when the client closed the connection.
pub fn read_request(reader: &mut impl BufRead) -> std::io::Result<Option<Head>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut words = line.split_whitespace();
    let method = words.next().unwrap_or("").to_string();
    let path = words.next().unwrap_or("/").to_string();
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            let name = name.trim().to_ascii_lowercase();
            let value = value.trim().to_string();
            if name == "content-length" {
                length = value.parse().unwrap_or(0);
            }
            headers.push((name, value));
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    Ok(Some(Head {
        method,
        path,
        headers,
        body,
    }))
}

/// A service on 127.0.0.1 standing in for an API: it records each request (path and
/// headers) and answers `200 ok` when `authorized` says so of its `Authorization` header
/// (empty when there is none), else `401`. Returns its port and what it saw.
pub fn recording_service(
    authorized: impl Fn(&str) -> bool + Send + 'static,
) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<Head>>>) {
    use std::io::{BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let Ok(reader) = stream.try_clone() else {
                continue;
            };
            let Ok(Some(head)) = read_request(&mut BufReader::new(reader)) else {
                continue;
            };
            let auth = head
                .headers
                .iter()
                .find(|(name, _)| name == "authorization")
                .map(|(_, value)| value.clone())
                .unwrap_or_default();
            let answer: &[u8] = if authorized(&auth) {
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
            } else {
                b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            };
            kept.lock().unwrap().push(head);
            let mut out = stream;
            let _ = out.write_all(answer);
        }
    });
    (port, seen)
}
