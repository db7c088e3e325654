//! Reading `claude -p --output-format=stream-json` output: one JSON object per line.
//!
//! Tolerant by design: unknown message types and fields are skipped, lines that are not
//! JSON are counted, and `subtype` is never trusted alone (an authentication failure is a
//! `result` with `subtype: "success"` and `is_error: true`).

// What this module reads comes from parties stet does not trust: nothing here may panic
// on it (issue 18). (`indexing_slicing` is not denied here: the module walks JSON, and
// `value["key"]` on a serde_json `Value` never panics — a missing key or a non-object is
// `Null` —, which the lint cannot tell from indexing a slice; no slice is indexed here.)
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::arithmetic_side_effects
    )
)]

use serde_json::Value;

/// What one agent call's output says, reduced to what stet uses.
#[derive(Debug, Default)]
pub struct Transcript {
    /// The `system/init` line, if any.
    pub init: Option<Init>,
    /// The last `result` line, if any.
    pub result: Option<Value>,
    /// `hook_event` of every `system/hook_started` line.
    pub hooks_started: Vec<String>,
    /// The standard output of every `system/hook_response` line.
    pub hook_outputs: Vec<String>,
    /// Tool calls the model asked for: (id, name, input).
    pub tool_uses: Vec<(String, String, Value)>,
    /// Tool results: (tool_use_id, is_error, text).
    pub tool_results: Vec<(String, bool, String)>,
    /// The `error` of assistant messages that are API error messages (`rate_limit`,
    /// `authentication_failed`, ...).
    pub api_errors: Vec<String>,
    /// `resetsAt` of a `rate_limit_event` whose status is `rejected`.
    pub limit_resets_at: Option<i64>,
    /// Lines that were not JSON objects.
    pub unreadable_lines: usize,
}

/// The facts of the `system/init` line that walls are proved on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Init {
    /// The exact tools the model holds.
    pub tools: Vec<String>,
    /// MCP servers and their status.
    pub mcp_servers: Vec<(String, String)>,
    /// Whether auto-memory paths were reported (they must not be).
    pub memory_paths: bool,
}

/// Reads a whole output.
pub fn read(output: &[u8]) -> Transcript {
    let mut t = Transcript::default();
    for line in String::from_utf8_lossy(output).lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            t.unreadable_lines = t.unreadable_lines.saturating_add(1);
            continue;
        };
        if !v.is_object() {
            t.unreadable_lines = t.unreadable_lines.saturating_add(1);
            continue;
        }
        match (v["type"].as_str(), v["subtype"].as_str()) {
            (Some("system"), Some("init")) => t.init = Some(read_init(&v)),
            (Some("system"), Some("hook_started")) => {
                if let Some(event) = v["hook_event"].as_str() {
                    t.hooks_started.push(event.to_string());
                }
            }
            (Some("system"), Some("hook_response")) => {
                t.hook_outputs.push(text(&v["stdout"]));
            }
            (Some("assistant"), _) => {
                if v["is_api_error_message"] == true {
                    if let Some(e) = v["error"].as_str() {
                        t.api_errors.push(e.to_string());
                    }
                }
                for block in v["message"]["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool_use" {
                        t.tool_uses.push((
                            text(&block["id"]),
                            text(&block["name"]),
                            block["input"].clone(),
                        ));
                    }
                }
            }
            (Some("user"), _) => {
                for block in v["message"]["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool_result" {
                        t.tool_results.push((
                            text(&block["tool_use_id"]),
                            block["is_error"] == true,
                            content_text(&block["content"]),
                        ));
                    }
                }
            }
            (Some("rate_limit_event"), _) => {
                let info = &v["rate_limit_info"];
                if info["status"] == "rejected" {
                    t.limit_resets_at = info["resetsAt"].as_i64().or(t.limit_resets_at);
                }
            }
            (Some("result"), _) => t.result = Some(v),
            _ => {}
        }
    }
    t
}

fn read_init(v: &Value) -> Init {
    Init {
        tools: v["tools"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        mcp_servers: v["mcp_servers"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|s| (text(&s["name"]), text(&s["status"])))
                    .collect()
            })
            .unwrap_or_default(),
        memory_paths: !v["memory_paths"].is_null(),
    }
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// A tool result's content: a string, or a list of text blocks.
fn content_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_init_tools_results_and_skips_the_unknown() {
        let out = br#"{"type":"system","subtype":"hook_started","hook_event":"SessionStart"}
not json at all
{"type":"system","subtype":"init","tools":["Bash","Read"],"mcp_servers":[{"name":"stet","status":"connected"}]}
{"type":"something_new","x":1}
{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]}}
{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":[{"type":"text","text":"no"}]}]}}
{"type":"result","subtype":"success","is_error":false,"result":"ok"}
"#;
        let t = read(out);
        let init = t.init.unwrap();
        assert_eq!(init.tools, ["Bash", "Read"]);
        assert_eq!(
            init.mcp_servers,
            [("stet".to_string(), "connected".to_string())]
        );
        assert!(!init.memory_paths);
        assert_eq!(t.hooks_started, ["SessionStart"]);
        assert_eq!(t.tool_results, [("t1".to_string(), true, "no".to_string())]);
        assert_eq!(t.unreadable_lines, 1);
        assert_eq!(t.result.unwrap()["result"], "ok");
    }
}
