//! Runs the fake Messages API by hand, for experiments: prints its URL, asks for one Bash
//! call of the command given as the first argument, then ends the turn.
use stet_e2e::fake_api::{FakeApi, Reply};

fn main() {
    let command = std::env::args().nth(1).unwrap_or_else(|| "echo hi".into());
    let mode = std::env::args().nth(2).unwrap_or_default();
    let api = FakeApi::start(move |request| {
        if mode == "429" {
            return Reply::Error {
                status: 429,
                headers: vec![
                    (
                        "anthropic-ratelimit-unified-status".into(),
                        "rejected".into(),
                    ),
                    (
                        "anthropic-ratelimit-unified-reset".into(),
                        "1893456000".into(),
                    ),
                    ("retry-after".into(), "3600".into()),
                ],
                body: serde_json::json!({"type":"error","error":{"type":"rate_limit_error","message":"usage limit reached"}}),
            };
        }
        if mode == "500" {
            return Reply::Error {
                status: 500,
                headers: vec![],
                body: serde_json::json!({"type":"error","error":{"type":"api_error","message":"boom"}}),
            };
        }
        if request.tool_results().is_empty() {
            Reply::ToolUse {
                name: "Bash".into(),
                input: serde_json::json!({"command": command, "description": "run it"}),
            }
        } else {
            Reply::Text("done".into())
        }
    });
    println!("{}", api.url);
    std::thread::sleep(std::time::Duration::from_secs(3600));
}
