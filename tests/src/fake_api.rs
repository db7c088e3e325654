//! A fake Anthropic Messages API on 127.0.0.1, for running the real Claude Code CLI
//! through a whole agent turn with no model and no login.
//!
//! The CLI (with `ANTHROPIC_BASE_URL` pointing here, `CLAUDE_CODE_MAX_RETRIES=0` and
//! nonessential traffic off) only calls `POST /v1/messages`, streaming. Each request is
//! answered by the test's script: a tool call, a text reply, or an HTTP error. Every
//! request body is kept for assertions.

use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

/// What the fake model answers to one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Ask for a tool call.
    ToolUse { name: String, input: Value },
    /// Finish with text.
    Text(String),
    /// Answer with an HTTP error: status, extra headers, JSON body.
    Error {
        status: u16,
        headers: Vec<(String, String)>,
        body: Value,
    },
}

/// A request as the fake saw it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The request path, query included.
    pub path: String,
    /// Header names (lowercase) and values.
    pub headers: Vec<(String, String)>,
    /// The JSON body.
    pub body: Value,
}

impl Request {
    /// The tool results in the last user message (a second request of a tool turn).
    pub fn tool_results(&self) -> Vec<Value> {
        let messages = self.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let Some(last_user) = messages.iter().rev().find(|m| m["role"] == "user") else {
            return Vec::new();
        };
        last_user["content"]
            .as_array()
            .map(|c| {
                c.iter()
                    .filter(|b| b["type"] == "tool_result")
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }
}

type Script = dyn Fn(&Request) -> Reply + Send + Sync;

/// The running fake; stops when dropped.
pub struct FakeApi {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl FakeApi {
    /// Starts the fake on a free loopback port; `script` answers each messages request.
    pub fn start(script: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Script> = Arc::new(script);
        let seen = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let script = script.clone();
                let seen = seen.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &*script, &seen);
                });
            }
        });
        FakeApi { url, requests }
    }

    /// The messages requests received so far.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(stream: TcpStream, script: &Script, seen: &Mutex<Vec<Request>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    loop {
        let Some(crate::http::Head {
            path,
            headers,
            body,
            ..
        }) = crate::http::read_request(&mut reader)?
        else {
            return Ok(());
        };
        let mut out = stream.try_clone()?;
        if !path.starts_with("/v1/messages") || path.starts_with("/v1/messages/count_tokens") {
            write!(out, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")?;
            continue;
        }
        let request = Request {
            path,
            headers,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        };
        // Recorded before the script answers, so a test can see a request while a slow
        // answer is still being made.
        seen.lock().unwrap().push(request.clone());
        // As the real API does: anything but the (dummy) login is not authenticated. The
        // sandbox holds a stand-in; only stet's gateway can have put this here.
        let expected = format!("Bearer {}", crate::DUMMY_ACCESS_TOKEN);
        let authorized = request
            .headers
            .iter()
            .any(|(name, value)| name == "authorization" && *value == expected);
        let reply = if authorized {
            script(&request)
        } else {
            Reply::Error {
                status: 401,
                headers: vec![],
                body: json!({"type": "error", "error": {"type": "authentication_error",
                    "message": "invalid bearer token (the fake knows only the dummy login)"}}),
            }
        };
        match reply {
            Reply::Error {
                status,
                headers,
                body,
            } => {
                let body = body.to_string();
                write!(
                    out,
                    "HTTP/1.1 {status} Error\r\nContent-Type: application/json\r\n"
                )?;
                for (name, value) in headers {
                    write!(out, "{name}: {value}\r\n")?;
                }
                write!(out, "Content-Length: {}\r\n\r\n{body}", body.len())?;
            }
            reply => {
                let body = sse(&reply);
                write!(
                    out,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nrequest-id: req_fake\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )?;
            }
        }
        out.flush()?;
    }
}

fn sse(reply: &Reply) -> String {
    let mut events = vec![json!({
        "type": "message_start",
        "message": {"id": "msg_fake", "type": "message", "role": "assistant", "model": "claude-fake",
                     "content": [], "stop_reason": null, "stop_sequence": null,
                     "usage": {"input_tokens": 12, "output_tokens": 1}}
    })];
    let stop_reason = match reply {
        Reply::ToolUse { name, input } => {
            events.push(json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "tool_use", "id": "toolu_fake_1", "name": name, "input": {}}}));
            events.push(json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}));
            "tool_use"
        }
        Reply::Text(text) => {
            events.push(json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}));
            events.push(json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": text}}));
            "end_turn"
        }
        Reply::Error { .. } => unreachable!("errors are not streamed"),
    };
    events.push(json!({"type": "content_block_stop", "index": 0}));
    events.push(json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
        "usage": {"output_tokens": 7}}));
    events.push(json!({"type": "message_stop"}));
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {}\n\n", e["type"].as_str().unwrap(), e))
        .collect()
}
