//! A model API that answers at once and spends nothing: what a sandbox that runs an agent's
//! CLI for its own sake (to refresh a login) is given instead of the real model API.
//!
//! It serves `POST /v1/messages` of the Anthropic Messages API with one short text reply,
//! streamed (server-sent events) when the request asks for a stream, and refuses every other
//! path. It reads a request's credential headers for nothing and sends nothing anywhere: a
//! login that reaches it goes no further.

use bytes::Bytes;
use hyper::StatusCode;
use serde_json::{json, Value};

/// The most of a request body the stub reads (an agent's first request carries its system
/// prompt and tool list; a megabyte or two).
pub const MAX_BODY: usize = 8 << 20;

/// The reply's text.
const TEXT: &str = "ok";

/// What the stub answers: status, content type, body.
pub struct Answer {
    /// The HTTP status.
    pub status: StatusCode,
    /// The `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: Bytes,
}

/// The answer to a request for `path` (query aside) with `body`.
pub fn answer(method: &hyper::Method, path: &str, body: &[u8]) -> Answer {
    let path = path.split('?').next().unwrap_or(path);
    if method != hyper::Method::POST || path != "/v1/messages" {
        return error(
            StatusCode::NOT_FOUND,
            "not_found_error",
            &format!("stet's model API stub serves POST /v1/messages only, not {method} {path}"),
        );
    }
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "the request body is not JSON",
        );
    };
    let model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("stet-stub")
        .chars()
        .take(200)
        .collect::<String>();
    let message = |content: Value, stop: Value, output_tokens: u64| {
        json!({
            "id": "msg_stet_stub",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": null,
            "usage": {"input_tokens": 0, "output_tokens": output_tokens},
        })
    };
    if request.get("stream").and_then(Value::as_bool) != Some(true) {
        let whole = message(
            json!([{"type": "text", "text": TEXT}]),
            json!("end_turn"),
            1,
        );
        return Answer {
            status: StatusCode::OK,
            content_type: "application/json",
            body: Bytes::from(whole.to_string()),
        };
    }
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": message(json!([]), Value::Null, 0)}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": TEXT}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 1}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    let mut stream = String::new();
    for (event, data) in events {
        stream.push_str(&format!("event: {event}\ndata: {data}\n\n"));
    }
    Answer {
        status: StatusCode::OK,
        content_type: "text/event-stream",
        body: Bytes::from(stream),
    }
}

fn error(status: StatusCode, kind: &str, message: &str) -> Answer {
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    Answer {
        status,
        content_type: "application/json",
        body: Bytes::from(body.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_request_gets_a_whole_event_stream_and_a_plain_one_a_message() {
        let streamed = answer(
            &hyper::Method::POST,
            "/v1/messages?beta=true",
            br#"{"model":"claude-x","stream":true,"messages":[]}"#,
        );
        assert_eq!(streamed.status, StatusCode::OK);
        assert_eq!(streamed.content_type, "text/event-stream");
        let text = String::from_utf8(streamed.body.to_vec()).unwrap();
        let kinds: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .collect();
        assert_eq!(
            kinds,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        for data in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
            serde_json::from_str::<Value>(data).unwrap();
        }
        assert!(text.contains("\"model\":\"claude-x\""));
        let plain = answer(&hyper::Method::POST, "/v1/messages", br#"{"model":"m"}"#);
        let message: Value = serde_json::from_slice(&plain.body).unwrap();
        assert_eq!(message["content"][0]["text"], "ok");
        assert_eq!(message["stop_reason"], "end_turn");
    }

    #[test]
    fn other_paths_and_bodies_are_refused_with_an_api_error() {
        let other = answer(&hyper::Method::GET, "/api/oauth/profile", b"");
        assert_eq!(other.status, StatusCode::NOT_FOUND);
        assert!(String::from_utf8_lossy(&other.body).contains("GET /api/oauth/profile"));
        let junk = answer(&hyper::Method::POST, "/v1/messages", b"\xff not json");
        assert_eq!(junk.status, StatusCode::BAD_REQUEST);
    }
}
