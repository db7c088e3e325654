//! `codex exec --json` output read into facts: one JSON object a line (Codex CLI 0.163.0),
//! and for the proof launch the session record (rollout) printed after it.
//!
//! The events: `thread.started`, `turn.started`, `item.started|updated|completed` (items
//! `agent_message`, `reasoning`, `command_execution`, `file_change`, `mcp_tool_call`,
//! `web_search`, `todo_list`, `error`…), `turn.completed` with `usage`, `error` (retries,
//! then the fatal one) and `turn.failed`. Rollout lines carry `timestamp`, `type`
//! (`session_meta`, `turn_context`, `response_item`, `event_msg`…) and `payload`.
//!
//! Everything here comes from the agent's side: it is read as data, bounded, and never
//! panics (issue 18).

#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::arithmetic_side_effects
    )
)]

use serde_json::Value;
use stet_plugin_api::WALL_CANARY;

/// The most error messages kept (a stream that retries prints one per attempt).
const ERRORS_KEPT: usize = 16;

/// The longest message kept, in characters.
const MESSAGE_LIMIT: usize = 4096;

/// Token counts of the call, summed over its turns.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Input tokens, cached ones included (the Responses API's count).
    pub input: u64,
    /// Of those, read from the prompt cache.
    pub cached_input: u64,
    /// Input tokens written to the cache.
    pub cache_write_input: u64,
    /// Output tokens, reasoning included.
    pub output: u64,
    /// Of those, reasoning.
    pub reasoning_output: u64,
}

/// What a call's output said.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Run {
    /// A `thread.started` line came: Codex loaded its configuration and started.
    pub started: bool,
    /// `turn.completed` lines.
    pub turns_completed: u64,
    /// The summed usage of the completed turns (and of a failed turn's, when it says).
    pub usage: Usage,
    /// Whether any turn reported usage.
    pub has_usage: bool,
    /// The last agent message's text.
    pub last_message: Option<String>,
    /// A `turn.failed`'s message (the last).
    pub failed: Option<String>,
    /// The top-level `error` events' messages (the first few).
    pub errors: Vec<String>,
    /// How many `error` events were Codex retrying (`Reconnecting... n/m`).
    pub reconnects: u64,
    /// Tool calls seen completed: shell commands, file changes, MCP calls, searches.
    pub commands: u64,
    /// File changes.
    pub file_changes: u64,
    /// Lines that were not a JSON object.
    pub unreadable_lines: u64,
    /// From the session record (the proof): the approval policy and sandbox policy Codex
    /// ran the turn with, and the provider id.
    pub approval_policy: Option<String>,
    /// The sandbox policy's type.
    pub sandbox_policy: Option<String>,
    /// The model provider's id.
    pub provider: Option<String>,
    /// Call ids of the tool calls whose arguments name the canary.
    pub canary_calls: Vec<String>,
    /// A canary call's output said Codex rejected it with `justification`.
    pub canary_rejected: bool,
    /// A `command_execution` item ran the canary (the policy did not stop it).
    pub canary_ran: bool,
}

/// Reads `output`. `justification` is the rule's words the refusal repeats.
pub fn read(output: &[u8], justification: &str) -> Run {
    let mut run = Run::default();
    let mut canary_outputs: Vec<(String, String)> = Vec::new();
    for line in output.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            run.unreadable_lines = run.unreadable_lines.saturating_add(1);
            continue;
        };
        if !value.is_object() {
            run.unreadable_lines = run.unreadable_lines.saturating_add(1);
            continue;
        }
        if value.get("payload").is_some() && value.get("timestamp").is_some() {
            rollout(&mut run, &value, &mut canary_outputs);
        } else {
            event(&mut run, &value);
        }
    }
    run.canary_rejected = canary_outputs.iter().any(|(id, text)| {
        run.canary_calls.contains(id)
            && text.contains(" rejected: ")
            && text.contains(justification)
    });
    run
}

fn text_of(value: &Value) -> Option<String> {
    value
        .as_str()
        .map(|s| s.chars().take(MESSAGE_LIMIT).collect())
}

fn event(run: &mut Run, value: &Value) {
    match value["type"].as_str().unwrap_or("") {
        "thread.started" => run.started = true,
        "turn.completed" => {
            run.turns_completed = run.turns_completed.saturating_add(1);
            add_usage(run, &value["usage"]);
        }
        "turn.failed" => {
            run.failed = Some(text_of(&value["error"]["message"]).unwrap_or_default());
            add_usage(run, &value["usage"]);
        }
        "error" => {
            let message = text_of(&value["message"]).unwrap_or_default();
            if message.starts_with("Reconnecting...") {
                run.reconnects = run.reconnects.saturating_add(1);
            }
            if run.errors.len() < ERRORS_KEPT {
                run.errors.push(message);
            }
        }
        "item.completed" => item(run, &value["item"]),
        _ => {}
    }
}

fn item(run: &mut Run, item: &Value) {
    match item["type"].as_str().unwrap_or("") {
        "agent_message" => run.last_message = text_of(&item["text"]),
        "command_execution" => {
            run.commands = run.commands.saturating_add(1);
            if item["command"]
                .as_str()
                .is_some_and(|c| c.contains(WALL_CANARY))
            {
                run.canary_ran = true;
            }
        }
        "file_change" => {
            run.commands = run.commands.saturating_add(1);
            run.file_changes = run.file_changes.saturating_add(1);
        }
        "mcp_tool_call" | "web_search" => run.commands = run.commands.saturating_add(1),
        _ => {}
    }
}

fn add_usage(run: &mut Run, usage: &Value) {
    if !usage.is_object() {
        return;
    }
    run.has_usage = true;
    let n = |key: &str| usage[key].as_u64().unwrap_or(0);
    let u = &mut run.usage;
    u.input = u.input.saturating_add(n("input_tokens"));
    u.cached_input = u.cached_input.saturating_add(n("cached_input_tokens"));
    u.cache_write_input = u
        .cache_write_input
        .saturating_add(n("cache_write_input_tokens"));
    u.output = u.output.saturating_add(n("output_tokens"));
    u.reasoning_output = u
        .reasoning_output
        .saturating_add(n("reasoning_output_tokens"));
}

/// A line of the session record (the proof prints it after the events).
fn rollout(run: &mut Run, value: &Value, canary_outputs: &mut Vec<(String, String)>) {
    let payload = &value["payload"];
    match value["type"].as_str().unwrap_or("") {
        "turn_context" => {
            run.approval_policy = text_of(&payload["approval_policy"]);
            run.sandbox_policy = text_of(&payload["sandbox_policy"]["type"]);
        }
        "event_msg" if payload["type"] == "thread_settings_applied" => {
            run.provider = text_of(&payload["thread_settings"]["model_provider_id"]);
        }
        "session_meta" => {
            if let Some(provider) = text_of(&payload["model_provider"]) {
                run.provider = Some(provider);
            }
        }
        "response_item" => match payload["type"].as_str().unwrap_or("") {
            "function_call" | "custom_tool_call" | "local_shell_call" => {
                let asked = [&payload["arguments"], &payload["input"], &payload["action"]]
                    .iter()
                    .any(|v| v.to_string().contains(WALL_CANARY));
                if let (true, Some(id)) = (asked, text_of(&payload["call_id"])) {
                    if run.canary_calls.len() < ERRORS_KEPT {
                        run.canary_calls.push(id);
                    }
                }
            }
            "function_call_output" | "custom_tool_call_output" => {
                if let (Some(id), Some(output)) = (
                    text_of(&payload["call_id"]),
                    text_of(&payload["output"]).or_else(|| text_of(&payload["output"]["content"])),
                ) {
                    if canary_outputs.len() < ERRORS_KEPT {
                        canary_outputs.push((id, output));
                    }
                }
            }
            _ => {}
        },
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(name),
        )
        .unwrap()
    }

    #[test]
    fn a_text_answer_is_one_completed_turn_with_its_usage() {
        let run = read(&fixture("exec-text.jsonl"), "x");
        assert!(run.started);
        assert_eq!(run.turns_completed, 1);
        assert_eq!(
            run.last_message.as_deref(),
            Some("Hello from the fake Responses API.")
        );
        assert_eq!(
            run.usage,
            Usage {
                input: 100,
                cached_input: 40,
                cache_write_input: 0,
                output: 20,
                reasoning_output: 0
            }
        );
        assert_eq!(run.failed, None);
        assert_eq!(run.unreadable_lines, 0);
    }

    #[test]
    fn tools_are_counted_once_when_completed() {
        let shell = read(&fixture("exec-shell.jsonl"), "x");
        assert_eq!((shell.commands, shell.file_changes), (1, 0));
        assert_eq!(shell.usage.input, 200);
        let patch = read(&fixture("exec-patch55.jsonl"), "x");
        assert_eq!((patch.commands, patch.file_changes), (1, 1));
    }

    #[test]
    fn retries_and_the_failure_are_read() {
        let run = read(&fixture("exec-500.jsonl"), "x");
        assert_eq!(run.reconnects, 5);
        assert!(run.failed.as_deref().unwrap().contains("high demand"));
        assert_eq!(run.turns_completed, 0);
        let run = read(&fixture("exec-429.jsonl"), "x");
        assert_eq!(run.reconnects, 0);
        assert!(run.failed.as_deref().unwrap().contains("usage limit"));
    }

    #[test]
    fn the_session_record_shows_the_mode_and_the_canarys_refusal() {
        let record = [
            r#"{"timestamp":"t","type":"turn_context","payload":{"approval_policy":"never","sandbox_policy":{"type":"danger-full-access"}}}"#,
            r#"{"timestamp":"t","type":"event_msg","payload":{"type":"thread_settings_applied","thread_settings":{"model_provider_id":"stet"}}}"#,
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\": \"stet-wall-canary\"}","call_id":"call_1"}}"#,
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"call_1","output":"exec_command failed: CreateProcess { message: \"Rejected(\\\"`/bin/bash -lc 'stet-wall-canary'` rejected: stet canary: refused\\\")\" }"}}"#,
        ]
        .join("\n");
        let run = read(record.as_bytes(), "stet canary: refused");
        assert_eq!(run.approval_policy.as_deref(), Some("never"));
        assert_eq!(run.sandbox_policy.as_deref(), Some("danger-full-access"));
        assert_eq!(run.provider.as_deref(), Some("stet"));
        assert_eq!(run.canary_calls, ["call_1"]);
        assert!(run.canary_rejected);
        assert!(!run.canary_ran);
        // Another rule's words, or the output of another call, are not the refusal.
        assert!(!read(record.as_bytes(), "someone else's rule").canary_rejected);
        let other = record.replace(
            r#""call_id":"call_1","output""#,
            r#""call_id":"call_2","output""#,
        );
        assert!(!read(other.as_bytes(), "stet canary: refused").canary_rejected);
    }

    #[test]
    fn hostile_lines_are_counted_never_a_panic() {
        let junk: &[&[u8]] = &[
            b"\xff\xfe",
            b"[]",
            b"42",
            b"{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":18446744073709551615,\"output_tokens\":-1}}\n{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":18446744073709551615}}",
            b"{\"type\":\"item.completed\",\"item\":null}",
            b"{\"type\":\"turn.failed\"}",
            b"{\"timestamp\":1,\"payload\":[],\"type\":\"response_item\"}",
            b"{\"type\":\"error\",\"message\":{\"nested\":true}}",
        ];
        for bytes in junk {
            let _ = read(bytes, "x");
        }
        let run = read(junk[3], "x");
        assert_eq!(run.usage.input, u64::MAX, "saturated, not wrapped");
        assert_eq!(read(b"[]\n\xff\n", "x").unreadable_lines, 2);
    }
}
