//! `codex exec --json` rendered as a transcript a person reads (`stet log`, the board).
//! Each line stands alone; what cannot be read is shown raw, shortened.

#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::arithmetic_side_effects
    )
)]

use serde_json::Value;
use stet_plugin_api::{render_lines, EntryKind, Fact, Rendered, TranscriptEntry};

/// The most of a tool's output or a raw line shown, in characters and lines.
const SHOWN_CHARS: usize = 2000;
const SHOWN_LINES: usize = 20;

/// Renders a piece of the output (see `HarnessPlugin::render_transcript`).
pub fn render(output: &[u8], end: bool) -> Rendered {
    render_lines(output, end, |line, entries| {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(value) if value.is_object() => entry(&value, line, entries),
            _ => entries.push(shortened(EntryKind::RAW, &String::from_utf8_lossy(line))),
        }
    })
}

fn entry(value: &Value, line: &[u8], entries: &mut Vec<TranscriptEntry>) {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    // The proof prints Codex's session record after its events: its turn's mode is said,
    // the rest (the whole conversation again) left out.
    if value.get("payload").is_some() && value.get("timestamp").is_some() {
        if value["type"] == "turn_context" {
            entries.push(TranscriptEntry::new(
                EntryKind::NOTE,
                format!(
                    "session record: approval policy {}, sandbox policy {}",
                    s(&value["payload"]["approval_policy"]),
                    s(&value["payload"]["sandbox_policy"]["type"])
                ),
            ));
        }
        return;
    }
    match value["type"].as_str().unwrap_or("") {
        "thread.started" => entries.push(TranscriptEntry::new(
            EntryKind::NOTE,
            format!("codex session {}", s(&value["thread_id"])),
        )),
        "turn.started" | "item.started" | "item.updated" => {}
        "turn.completed" => {
            let usage = &value["usage"];
            let n = |k: &str| usage[k].as_u64().unwrap_or(0);
            let mut e = TranscriptEntry::new(
                EntryKind::RESULT,
                format!(
                    "turn completed: {} input tokens ({} cached), {} output",
                    n("input_tokens"),
                    n("cached_input_tokens"),
                    n("output_tokens")
                ),
            );
            let facts: Vec<Fact> = [
                "input_tokens",
                "cached_input_tokens",
                "output_tokens",
                "reasoning_output_tokens",
            ]
            .iter()
            .filter_map(|k| usage[*k].as_u64().map(|n| Fact::new(*k, n.to_string())))
            .chain(std::iter::once(Fact::new("is_error", "false")))
            .collect();
            e.facts = facts.into();
            entries.push(e);
        }
        "turn.failed" => {
            let mut e = TranscriptEntry::new(
                EntryKind::RESULT,
                format!("turn failed: {}", s(&value["error"]["message"])),
            );
            e.facts = vec![Fact::new("is_error", "true")].into();
            entries.push(e);
        }
        "error" => entries.push(TranscriptEntry::new(
            EntryKind::NOTE,
            format!("codex: {}", s(&value["message"])),
        )),
        "item.completed" => item(&value["item"], entries),
        _ => entries.push(shortened(EntryKind::RAW, &String::from_utf8_lossy(line))),
    }
}

fn item(item: &Value, entries: &mut Vec<TranscriptEntry>) {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    match item["type"].as_str().unwrap_or("") {
        "agent_message" => entries.push(TranscriptEntry::new(EntryKind::TEXT, s(&item["text"]))),
        "reasoning" => entries.push(TranscriptEntry::new(
            EntryKind::NOTE,
            format!("reasoning: {}", s(&item["text"])),
        )),
        "command_execution" => {
            entries.push(
                TranscriptEntry::new(EntryKind::TOOL_CALL, s(&item["command"])).labelled("shell"),
            );
            let failed =
                item["status"] != "completed" || item["exit_code"].as_i64().is_some_and(|c| c != 0);
            let mut result = shortened(EntryKind::TOOL_RESULT, &s(&item["aggregated_output"]));
            if failed {
                result.label = "error".into();
            }
            entries.push(result);
        }
        "file_change" => {
            let changes: Vec<String> = item["changes"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .take(SHOWN_LINES)
                        .map(|c| format!("{} {}", s(&c["kind"]), s(&c["path"])))
                        .collect()
                })
                .unwrap_or_default();
            entries.push(
                TranscriptEntry::new(EntryKind::TOOL_CALL, changes.join("\n"))
                    .labelled("apply_patch"),
            );
            if item["status"] != "completed" {
                entries.push(
                    TranscriptEntry::new(EntryKind::TOOL_RESULT, s(&item["status"]))
                        .labelled("error"),
                );
            }
        }
        "mcp_tool_call" => {
            let name = format!("{}.{}", s(&item["server"]), s(&item["tool"]));
            entries.push(
                shortened(EntryKind::TOOL_CALL, &item["arguments"].to_string()).labelled(name),
            );
        }
        "web_search" => entries.push(
            TranscriptEntry::new(EntryKind::TOOL_CALL, s(&item["query"])).labelled("web_search"),
        ),
        "todo_list" => {
            let items: Vec<String> = item["items"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .take(SHOWN_LINES)
                        .map(|t| {
                            let done = if t["completed"] == true { "x" } else { " " };
                            format!("[{done}] {}", s(&t["text"]))
                        })
                        .collect()
                })
                .unwrap_or_default();
            entries.push(TranscriptEntry::new(EntryKind::NOTE, items.join("\n")));
        }
        "error" => entries.push(TranscriptEntry::new(
            EntryKind::NOTE,
            format!("codex: {}", s(&item["message"])),
        )),
        other => entries.push(TranscriptEntry::new(
            EntryKind::NOTE,
            format!("codex item {}", other.chars().take(64).collect::<String>()),
        )),
    }
}

/// An entry of `text` shortened to [`SHOWN_LINES`] lines and [`SHOWN_CHARS`] characters,
/// saying what was cut.
fn shortened(kind: EntryKind, text: &str) -> TranscriptEntry {
    let total_lines = text.lines().count();
    let mut kept = String::new();
    for line in text.lines().take(SHOWN_LINES) {
        if !kept.is_empty() {
            kept.push('\n');
        }
        kept.push_str(line);
    }
    if kept.chars().count() > SHOWN_CHARS {
        kept = kept.chars().take(SHOWN_CHARS).collect();
    }
    let mut e = TranscriptEntry::new(kind, kept.clone());
    e.cut_lines = total_lines.saturating_sub(SHOWN_LINES) as u64;
    e.cut_bytes = text.len().saturating_sub(kept.len()) as u64;
    e
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
    fn a_shell_call_renders_as_call_result_words_and_the_end() {
        let r = render(&fixture("exec-shell.jsonl"), true);
        let kinds: Vec<Option<&str>> = r.entries.iter().map(|e| e.kind.name()).collect();
        assert_eq!(
            kinds,
            [
                Some("note"),
                Some("note"),
                Some("tool-call"),
                Some("tool-result"),
                Some("text"),
                Some("result")
            ]
        );
        assert_eq!(r.entries[2].label.as_str(), "shell");
        assert_eq!(
            r.entries[2].text.as_str(),
            "/bin/bash -lc 'echo hello > out.txt'"
        );
        assert_eq!(r.consumed, fixture("exec-shell.jsonl").len() as u64);
    }

    #[test]
    fn a_patch_and_a_failure_render() {
        let r = render(&fixture("exec-patch55.jsonl"), true);
        assert!(r
            .entries
            .iter()
            .any(|e| e.label.as_str() == "apply_patch" && e.text.contains("add ")));
        let r = render(&fixture("exec-429.jsonl"), true);
        let last = r.entries.last().unwrap();
        assert_eq!(last.kind, EntryKind::RESULT);
        assert!(last.text.contains("usage limit"));
    }

    #[test]
    fn an_unfinished_line_waits_and_junk_is_raw_and_short() {
        let r = render(b"{\"type\":\"turn.started\"}\n{\"type\":", false);
        assert_eq!(r.consumed, 24);
        let long = "x".repeat(10_000);
        let r = render(long.as_bytes(), true);
        assert_eq!(r.entries[0].kind, EntryKind::RAW);
        assert_eq!(r.entries[0].cut_bytes, 8000);
        for junk in [
            &b"\xff\xfe\n"[..],
            b"{\"type\":\"item.completed\",\"item\":{\"type\":\"file_change\",\"changes\":7}}",
            b"{\"type\":\"item.completed\",\"item\":[]}",
        ] {
            let _ = render(junk, true);
        }
    }
}
