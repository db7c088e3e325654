//! A fake OpenAI Responses API on 127.0.0.1, for running the real Codex CLI (0.163.0)
//! through a whole agent turn with no model and no login: a stand-in for OpenAI's service.
//!
//! Codex, with a custom model provider whose `base_url` points here (`wire_api =
//! "responses"`, `requires_openai_auth = true`: the ChatGPT login in `auth.json`), calls:
//! - `GET {base_url}/models?client_version=…` before a turn: answered `{"models": []}`;
//! - `POST {base_url}/responses` once per model call, the whole history in its body: answered
//!   by the test's script, streamed as Server-Sent Events as 0.163.0 accepts them
//!   (`response.created`, `response.output_item.added`/`.done`,
//!   `response.output_text.delta`, `response.completed` with its usage), the connection
//!   closed after `response.completed` (codex ends the stream at EOF);
//! - `POST …/oauth/token` when it renews its login (with `CODEX_REFRESH_TOKEN_URL_OVERRIDE`
//!   pointing here): answered with new dummy tokens, [`REFRESHED_ACCESS_TOKEN`] among them.
//!
//! As OpenAI's service does, a model call that does not carry the dummy login's access
//! token (or the one this fake issued at a refresh) is refused with 401: in a sandbox,
//! only stet's gateway can have put it there. Every request, of any path, is kept for
//! assertions. The facts this follows were measured on the real binary (codex-facts.md).

use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

/// What the fake model answers to one model call.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Finish the turn with text (an assistant `message` item).
    Text(String),
    /// Ask codex to run `cmd` with its shell tool: a `function_call` of `exec_command`
    /// with the arguments `{"cmd": …}`.
    Exec(String),
    /// Like [`Reply::Exec`], with `yield_time_ms`: how long codex waits for the command
    /// before it answers the model with what it has so far (its own default is short).
    ExecWaiting { cmd: String, yield_time_ms: u64 },
    /// Ask codex to apply a patch (`*** Begin Patch …`): a `custom_tool_call` of
    /// `apply_patch`, offered to known models such as `gpt-5.5`.
    Patch(String),
    /// Answer with an HTTP error: status, extra headers, JSON body.
    Error {
        status: u16,
        headers: Vec<(String, String)>,
        body: Value,
    },
}

impl Reply {
    /// The usage limit of a ChatGPT plan, as the service answers it: 429 with a
    /// `usage_limit_reached` body and its reset `resets_in_seconds` from now (and the
    /// `x-codex-primary-*` headers). Codex does not retry it: the turn fails at once.
    pub fn usage_limit(resets_in_seconds: u64) -> Reply {
        let resets_at = unix_now() + resets_in_seconds;
        Reply::Error {
            status: 429,
            headers: vec![
                ("x-codex-primary-used-percent".into(), "100.0".into()),
                ("x-codex-primary-window-minutes".into(), "300".into()),
                (
                    "x-codex-primary-reset-after-seconds".into(),
                    resets_in_seconds.to_string(),
                ),
                ("x-codex-primary-reset-at".into(), resets_at.to_string()),
            ],
            body: json!({"error": {
                "type": "usage_limit_reached",
                "message": "The usage limit has been reached",
                "plan_type": "plus",
                "resets_at": resets_at,
                "resets_in_seconds": resets_in_seconds,
            }}),
        }
    }

    /// A server error (500) with `message`; codex retries it as its provider's
    /// `request_max_retries` and `stream_max_retries` say, then fails the turn.
    pub fn server_error(message: &str) -> Reply {
        Reply::Error {
            status: 500,
            headers: vec![],
            body: json!({"error": {"type": "server_error", "message": message}}),
        }
    }
}

/// The usage the fake reports for every model call (`response.completed`): codex sums a
/// turn's calls in its `turn.completed` event.
pub const INPUT_TOKENS: u64 = 100;
/// Of [`INPUT_TOKENS`], how many were read from the cache (`input_tokens_details`).
pub const CACHED_TOKENS: u64 = 40;
/// The output tokens of every model call.
pub const OUTPUT_TOKENS: u64 = 20;

/// The access token the fake's token endpoint issues at a refresh (a dummy JSON Web Token
/// whose `sub` is `dummy-refreshed`); model calls carrying it are accepted too.
pub const REFRESHED_ACCESS_TOKEN: &str = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjQxMDI0NDQ4MDAsInN1YiI6ImR1bW15LXJlZnJlc2hlZCJ9.ZHVtbXktcmVmcmVzaGVkLXNpZ25hdHVyZS1mb3ItdGhlLWZha2Utb25seQ";
/// The refresh token the fake's token endpoint issues at a refresh.
pub const REFRESHED_REFRESH_TOKEN: &str = "rt_dummyRefreshedByTheFakeResponsesApi0123456789";

/// A request as the fake saw it.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET` or `POST`.
    pub method: String,
    /// The request path, query included.
    pub path: String,
    /// Header names (lowercase) and values.
    pub headers: Vec<(String, String)>,
    /// The JSON body (`Null` when there is none).
    pub body: Value,
}

impl Request {
    /// The value of header `name` (lowercase), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether this is a model call (`POST …/responses`).
    pub fn is_model_call(&self) -> bool {
        self.method == "POST" && path_only(&self.path).ends_with("/responses")
    }

    /// The tool outputs the request carries back to the model, oldest first: each
    /// `function_call_output` (the shell tool's) and `custom_tool_call_output`
    /// (apply_patch's) item of its input. Codex re-sends the whole history with every call,
    /// so a turn's later calls carry its earlier outputs too.
    pub fn tool_outputs(&self) -> Vec<Value> {
        self.input()
            .into_iter()
            .filter(|item| {
                matches!(
                    item["type"].as_str(),
                    Some("function_call_output" | "custom_tool_call_output")
                )
            })
            .collect()
    }

    /// The `output` text of each of [`Request::tool_outputs`].
    pub fn tool_output_texts(&self) -> Vec<String> {
        self.tool_outputs()
            .iter()
            .map(|o| match &o["output"] {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            })
            .collect()
    }

    /// The text of the user messages in the request's input, oldest first (the prompt
    /// among them, after codex's own environment context).
    pub fn user_texts(&self) -> Vec<String> {
        self.input()
            .iter()
            .filter(|item| item["type"] == "message" && item["role"] == "user")
            .flat_map(|item| match &item["content"] {
                Value::String(text) => vec![text.clone()],
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str().map(str::to_string))
                    .collect(),
                _ => vec![],
            })
            .collect()
    }

    /// The names of the tools offered to the model.
    pub fn tool_names(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().or(t["type"].as_str()))
            .map(str::to_string)
            .collect()
    }

    fn input(&self) -> Vec<Value> {
        self.body["input"].as_array().cloned().unwrap_or_default()
    }
}

type Script = dyn Fn(&Request) -> Reply + Send + Sync;

/// The running fake; stops answering when dropped (its thread then idles on the port).
pub struct FakeResponses {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl FakeResponses {
    /// Starts the fake on a free loopback port; `script` answers each model call carrying
    /// an accepted login.
    pub fn start(script: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> FakeResponses {
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
        FakeResponses { url, requests }
    }

    /// The base URL a provider's `base_url` names (codex appends `/responses`, `/models`).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.url)
    }

    /// The token endpoint's URL (`CODEX_REFRESH_TOKEN_URL_OVERRIDE`).
    pub fn token_url(&self) -> String {
        format!("{}/oauth/token", self.url)
    }

    /// Every request received so far, of any path.
    pub fn all_requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// The model calls (`POST …/responses`) received so far.
    pub fn requests(&self) -> Vec<Request> {
        self.all_requests()
            .into_iter()
            .filter(Request::is_model_call)
            .collect()
    }

    /// The refresh requests (`POST …/oauth/token`) received so far.
    pub fn token_requests(&self) -> Vec<Request> {
        self.all_requests()
            .into_iter()
            .filter(|r| r.method == "POST" && path_only(&r.path).ends_with("/oauth/token"))
            .collect()
    }

    /// The text of every tool output any model call carried, one a line.
    pub fn tool_output_text(&self) -> String {
        self.requests()
            .iter()
            .flat_map(Request::tool_output_texts)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn path_only(path: &str) -> &str {
    path.split('?').next().unwrap_or(path)
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn serve(stream: TcpStream, script: &Script, seen: &Mutex<Vec<Request>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let Some(crate::http::Head {
        method,
        path,
        headers,
        body,
    }) = crate::http::read_request(&mut reader)?
    else {
        return Ok(());
    };
    let request = Request {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    // Recorded before the script answers, so a test can see a request while a slow answer
    // is still being made.
    seen.lock().unwrap().push(request.clone());
    let mut out = stream;
    let route = path_only(&request.path).to_string();
    if request.method == "GET" && route.ends_with("/models") {
        return write_json(&mut out, 200, &[], &json!({"models": []}));
    }
    if request.method == "POST" && route.ends_with("/oauth/token") {
        return write_json(&mut out, 200, &[], &refreshed_tokens());
    }
    if !request.is_model_call() {
        let body = json!({"error": {"message": format!("not found: {}", request.path)}});
        return write_json(&mut out, 404, &[], &body);
    }
    let accepted = [crate::DUMMY_CODEX_ACCESS_TOKEN, REFRESHED_ACCESS_TOKEN]
        .iter()
        .any(|token| request.header("authorization") == Some(format!("Bearer {token}").as_str()));
    let reply = if accepted {
        script(&request)
    } else {
        Reply::Error {
            status: 401,
            headers: vec![],
            body: json!({"error": {"type": "invalid_request_error", "code": "invalid_api_key",
                "message": "invalid bearer token (the fake knows only the dummy login)"}}),
        }
    };
    match reply {
        Reply::Error {
            status,
            headers,
            body,
        } => write_json(&mut out, status, &headers, &body),
        reply => {
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
                 Connection: close\r\n\r\n"
            )?;
            for event in events(&reply) {
                write!(
                    out,
                    "event: {}\ndata: {event}\n\n",
                    event["type"].as_str().unwrap()
                )?;
                out.flush()?;
            }
            // Codex ends the stream at EOF, after `response.completed`.
            out.shutdown(std::net::Shutdown::Both)
        }
    }
}

fn write_json(
    out: &mut TcpStream,
    status: u16,
    headers: &[(String, String)],
    body: &Value,
) -> std::io::Result<()> {
    let body = body.to_string();
    write!(
        out,
        "HTTP/1.1 {status} Fake\r\nContent-Type: application/json\r\nConnection: close\r\n"
    )?;
    for (name, value) in headers {
        write!(out, "{name}: {value}\r\n")?;
    }
    write!(out, "Content-Length: {}\r\n\r\n{body}", body.len())?;
    out.flush()
}

/// What the dummy token endpoint answers a refresh with: new dummy tokens, never real ones.
fn refreshed_tokens() -> Value {
    json!({
        "id_token": crate::DUMMY_CODEX_ID_TOKEN,
        "access_token": REFRESHED_ACCESS_TOKEN,
        "refresh_token": REFRESHED_REFRESH_TOKEN,
        "expires_in": 864000,
        "token_type": "Bearer",
    })
}

/// A short id for the stream's items, unique enough within one test run.
fn fresh_id(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "{prefix}_fake{:06}{:x}",
        NEXT.fetch_add(1, Ordering::SeqCst),
        std::process::id()
    )
}

/// The Server-Sent Events of one streamed answer, `response.completed` last.
fn events(reply: &Reply) -> Vec<Value> {
    let response_id = fresh_id("resp");
    let mut events = vec![json!({"type": "response.created",
        "response": {"id": response_id, "status": "in_progress"}})];
    let item = match reply {
        Reply::Text(text) => {
            let id = fresh_id("msg");
            let added = json!({"type": "message", "id": id, "role": "assistant",
                "status": "in_progress", "content": []});
            events.push(
                json!({"type": "response.output_item.added", "output_index": 0,
                "item": added}),
            );
            events.push(json!({"type": "response.output_text.delta", "item_id": id,
                "output_index": 0, "content_index": 0, "delta": text}));
            json!({"type": "message", "id": id, "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]})
        }
        Reply::Exec(_) | Reply::ExecWaiting { .. } => {
            let arguments = match reply {
                Reply::ExecWaiting { cmd, yield_time_ms } => {
                    json!({"cmd": cmd, "yield_time_ms": yield_time_ms})
                }
                Reply::Exec(cmd) => json!({"cmd": cmd}),
                _ => unreachable!(),
            };
            let call = fresh_id("call");
            let item = json!({"type": "function_call", "id": format!("fc_{call}"),
                "call_id": call, "name": "exec_command",
                "arguments": arguments.to_string()});
            events.push(
                json!({"type": "response.output_item.added", "output_index": 0,
                "item": item}),
            );
            item
        }
        Reply::Patch(patch) => {
            let call = fresh_id("call");
            let item = json!({"type": "custom_tool_call", "id": format!("ctc_{call}"),
                "call_id": call, "name": "apply_patch", "input": patch,
                "status": "completed"});
            events.push(
                json!({"type": "response.output_item.added", "output_index": 0,
                "item": item}),
            );
            item
        }
        Reply::Error { .. } => unreachable!("errors are not streamed"),
    };
    events.push(json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
    events.push(json!({"type": "response.completed", "response": {
    "id": response_id, "status": "completed",
    "usage": {
        "input_tokens": INPUT_TOKENS,
        "input_tokens_details": {"cached_tokens": CACHED_TOKENS},
        "output_tokens": OUTPUT_TOKENS,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
    }}}));
    events
}
