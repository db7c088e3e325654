//! A call's stream-json rendered as a transcript a person can read (`stet log`): the
//! agent's words, each tool call with its arguments (compact), tool results shortened, and
//! how the call ended (turns, time, cost). One line at a time, each on its own (the host
//! passes the output in pieces): memory is bounded by the longest line the host passes.
//!
//! What is not shown: the `system/init` line's lists (tools, commands, skills: kilobytes)
//! are summed up in one note; hook events, usage counters per message and message types
//! this version does not know are left out. A line that is not a JSON object is shown as
//! it is, shortened: the host makes all of it inert.

// What this module reads comes from the agent: nothing here may panic on it (issue 18).
// (`indexing_slicing` is not denied, as in stream.rs: `value["key"]` on a serde_json
// `Value` never panics, which the lint cannot tell from indexing a slice; no slice is
// indexed here.)
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

/// Lines of a tool's result shown; the rest is counted.
const RESULT_LINES: usize = 8;
/// Characters of one shown line (of a result, an argument, a raw line).
const LINE_CHARS: usize = 200;
/// Characters of a tool call's arguments, all together.
const ARGUMENT_CHARS: usize = 300;

/// Renders a piece of a call's output (see `HarnessPlugin::render_transcript`).
pub fn render(output: &[u8], end: bool) -> Rendered {
    render_lines(output, end, render_line)
}

fn render_line(line: &[u8], entries: &mut Vec<TranscriptEntry>) {
    let text = String::from_utf8_lossy(line);
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return;
    }
    let v = match serde_json::from_str::<Value>(trimmed) {
        Ok(v) if v.is_object() => v,
        _ => {
            let (shown, cut_lines, cut_bytes) = shorten(trimmed, 1);
            entries.push(TranscriptEntry {
                cut_lines,
                cut_bytes,
                ..TranscriptEntry::new(EntryKind::RAW, shown)
            });
            return;
        }
    };
    match (v["type"].as_str(), v["subtype"].as_str()) {
        (Some("system"), Some("init")) => {
            entries.push(TranscriptEntry::new(EntryKind::NOTE, init(&v)))
        }
        (Some("assistant"), _) => assistant(&v, entries),
        (Some("user"), _) => tool_results(&v, entries),
        (Some("rate_limit_event"), _) if v["rate_limit_info"]["status"] == "rejected" => {
            let resets = match v["rate_limit_info"]["resetsAt"].as_i64() {
                Some(at) => format!(" (it resets at {at}, seconds since the epoch)"),
                None => String::new(),
            };
            entries.push(TranscriptEntry::new(
                EntryKind::NOTE,
                format!("the usage limit was reached{resets}"),
            ));
        }
        (Some("result"), _) => entries.push(result(&v)),
        _ => {}
    }
}

/// The session's start, summed up: the model, how many tools, the CLI's version.
fn init(v: &Value) -> String {
    let mut parts = vec!["session started".to_string()];
    if let Some(model) = v["model"].as_str() {
        parts.push(format!("model {}", one_line(model)));
    }
    if let Some(tools) = v["tools"].as_array() {
        parts.push(format!("{} tools", tools.len()));
    }
    if let Some(version) = v["claude_code_version"].as_str() {
        parts.push(format!("Claude Code {}", one_line(version)));
    }
    parts.join(" · ")
}

fn assistant(v: &Value, entries: &mut Vec<TranscriptEntry>) {
    if v["is_api_error_message"] == true {
        let error = v["error"].as_str().unwrap_or("an error");
        entries.push(TranscriptEntry::new(
            EntryKind::NOTE,
            format!("the model API answered {}", one_line(error)),
        ));
    }
    for block in v["message"]["content"].as_array().into_iter().flatten() {
        match block["type"].as_str() {
            Some("text") => {
                let text = block["text"].as_str().unwrap_or_default().trim_end();
                if !text.is_empty() {
                    entries.push(TranscriptEntry::new(EntryKind::TEXT, text));
                }
            }
            Some("tool_use") => entries.push(
                TranscriptEntry::new(EntryKind::TOOL_CALL, arguments(&block["input"]))
                    .labelled(one_line(block["name"].as_str().unwrap_or("a tool"))),
            ),
            _ => {}
        }
    }
}

fn tool_results(v: &Value, entries: &mut Vec<TranscriptEntry>) {
    for block in v["message"]["content"].as_array().into_iter().flatten() {
        if block["type"] != "tool_result" {
            continue;
        }
        let text = content_text(&block["content"]);
        let (shown, cut_lines, cut_bytes) = shorten(text.trim_end(), RESULT_LINES);
        let mut entry = TranscriptEntry {
            cut_lines,
            cut_bytes,
            ..TranscriptEntry::new(EntryKind::TOOL_RESULT, shown)
        };
        if block["is_error"] == true {
            entry = entry.labelled("error");
        }
        entries.push(entry);
    }
}

/// The call's end: its words, and its figures as facts.
fn result(v: &Value) -> TranscriptEntry {
    let is_error = v["is_error"] == true;
    let mut words = vec![match (v["subtype"].as_str(), is_error) {
        (_, true) => "ended with an error".to_string(),
        (Some("success"), false) | (None, false) => "finished".to_string(),
        (Some(other), false) => format!("ended: {}", one_line(other)),
    }];
    let mut facts = vec![Fact::new("is_error", is_error.to_string())];
    if let Some(turns) = v["num_turns"].as_u64() {
        words.push(format!("{turns} turn{}", if turns == 1 { "" } else { "s" }));
        facts.push(Fact::new("turns", turns.to_string()));
    }
    if let Some(ms) = v["duration_ms"].as_u64() {
        words.push(format!("{:.1} s", ms as f64 / 1000.0));
        facts.push(Fact::new("duration_ms", ms.to_string()));
    }
    if let Some(cost) = v["total_cost_usd"].as_f64() {
        words.push(format!("${cost:.4}"));
        facts.push(Fact::new("cost_usd", cost.to_string()));
    }
    let mut text = words.join(" · ");
    if is_error {
        if let Some(said) = v["result"].as_str() {
            let (said, _, _) = shorten(said, 1);
            text = format!("{text}: {said}");
        }
    }
    TranscriptEntry {
        facts: facts.into(),
        ..TranscriptEntry::new(EntryKind::RESULT, text)
    }
}

/// A tool call's arguments on one line: a lone command as it is, else `key: value`
/// pairs (strings as they are, the rest as JSON), each and all shortened.
fn arguments(input: &Value) -> String {
    let whole = match input {
        Value::Object(map) => match map.get("command").and_then(Value::as_str) {
            Some(command) if map.keys().all(|k| k == "command" || k == "description") => {
                first_chars(&one_line(command), ARGUMENT_CHARS)
            }
            _ => map
                .iter()
                .map(|(key, value)| {
                    let value = match value {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    format!(
                        "{}: {}",
                        one_line(key),
                        first_chars(&one_line(&value), LINE_CHARS / 2)
                    )
                })
                .collect::<Vec<_>>()
                .join(", "),
        },
        Value::Null => String::new(),
        other => other.to_string(),
    };
    first_chars(&whole, ARGUMENT_CHARS)
}

/// A tool result's content: a string, or a list of blocks (their text; others named).
fn content_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b["text"].as_str() {
                Some(text) => text.to_string(),
                None => format!("[{}]", b["type"].as_str().unwrap_or("a block")),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The first `lines` lines of `text`, each at most [`LINE_CHARS`] characters; and the lines
/// and bytes left out.
fn shorten(text: &str, lines: usize) -> (String, u64, u64) {
    let mut shown = Vec::new();
    let mut cut_lines = 0u64;
    let mut cut_bytes = 0u64;
    for (n, line) in text.lines().enumerate() {
        if n < lines {
            if let Some((at, _)) = line.char_indices().nth(LINE_CHARS) {
                cut_bytes = cut_bytes.saturating_add(line.len().saturating_sub(at) as u64);
            }
            shown.push(first_chars(line, LINE_CHARS));
        } else {
            cut_lines = cut_lines.saturating_add(1);
            cut_bytes = cut_bytes.saturating_add(line.len().saturating_add(1) as u64);
        }
    }
    (shown.join("\n"), cut_lines, cut_bytes)
}

/// At most `max` characters of `text`, with `…` where it was cut.
fn first_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", text.get(..at).unwrap_or_default()),
        None => text.to_string(),
    }
}

/// Line ends as `⏎`, so that one entry's field stays on one line.
fn one_line(text: &str) -> String {
    text.replace("\r\n", "⏎").replace(['\n', '\r'], "⏎")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(r: &Rendered) -> Vec<&'static str> {
        r.entries.iter().map(|e| e.kind.name().unwrap()).collect()
    }

    /// A call shaped as the real CLI writes it: init, text, a tool call, its result, the
    /// model's last words, the result.
    const CALL: &str = r#"{"type":"system","subtype":"init","cwd":"/work","session_id":"s","tools":["Bash","Read","Edit"],"mcp_servers":[{"name":"stet","status":"connected"}],"model":"claude-test","permissionMode":"default","slash_commands":["a","b"],"claude_code_version":"2.1.332","uuid":"u"}
{"type":"assistant","message":{"id":"m1","model":"claude-test","role":"assistant","content":[{"type":"text","text":"I will fix it."},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"printf 'fixed\\n' > FIXED.txt","description":"fix it"}}],"stop_reason":"tool_use","usage":{"input_tokens":3}},"parent_tool_use_id":null,"session_id":"s"}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":"line 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline 8\nline 9\nline 10","is_error":false}]},"parent_tool_use_id":null,"session_id":"s"}
{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t2","name":"Edit","input":{"file_path":"a.txt","old_string":"x","new_string":"y\nz"}}]}}
{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t2","is_error":true,"content":[{"type":"text","text":"refused by stet's guard"}]}]}}
{"type":"assistant","message":{"content":[{"type":"text","text":"implemented"}]}}
{"type":"result","subtype":"success","is_error":false,"result":"implemented","num_turns":3,"duration_ms":4200,"duration_api_ms":900,"total_cost_usd":0.0123,"usage":{"input_tokens":10}}
"#;

    #[test]
    fn a_call_reads_as_words_tool_calls_shortened_results_and_its_end() {
        let r = render(CALL.as_bytes(), true);
        assert_eq!(r.consumed, CALL.len() as u64);
        assert_eq!(
            kinds(&r),
            [
                "note",
                "text",
                "tool-call",
                "tool-result",
                "tool-call",
                "tool-result",
                "text",
                "result"
            ]
        );
        let e = &r.entries;
        assert_eq!(
            e[0].text.as_str(),
            "session started · model claude-test · 3 tools · Claude Code 2.1.332"
        );
        assert_eq!(e[1].text.as_str(), "I will fix it.");
        assert_eq!(e[2].label.as_str(), "Bash");
        assert_eq!(e[2].text.as_str(), "printf 'fixed\\n' > FIXED.txt");
        assert_eq!(
            e[3].text.as_str(),
            "line 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline 8"
        );
        assert_eq!(
            (e[3].cut_lines, e[3].cut_bytes),
            (2, "line 9\nline 10\n".len() as u64)
        );
        assert_eq!(e[3].label.as_str(), "");
        assert_eq!(e[4].label.as_str(), "Edit");
        assert_eq!(
            e[4].text.as_str(),
            "file_path: a.txt, new_string: y⏎z, old_string: x"
        );
        assert_eq!(e[5].label.as_str(), "error");
        assert_eq!(e[5].text.as_str(), "refused by stet's guard");
        assert_eq!(e[7].text.as_str(), "finished · 3 turns · 4.2 s · $0.0123");
        let facts: Vec<(String, String)> = e[7]
            .facts
            .iter()
            .map(|f| (f.key.to_string(), f.value.to_string()))
            .collect();
        assert!(
            facts.contains(&("cost_usd".into(), "0.0123".into())),
            "{facts:?}"
        );
        assert!(facts.contains(&("turns".into(), "3".into())), "{facts:?}");
        assert!(
            facts.contains(&("duration_ms".into(), "4200".into())),
            "{facts:?}"
        );
    }

    #[test]
    fn an_unfinished_last_line_waits_for_the_rest_and_pieces_add_up_to_the_whole() {
        let whole = render(CALL.as_bytes(), true);
        // Cut the output anywhere: what each piece consumed, fed again with what follows,
        // renders the same entries as the whole at once.
        for cut in [1, 50, 600, 777, CALL.len() - 3] {
            let mut entries = Vec::new();
            let mut held = CALL.as_bytes()[..cut].to_vec();
            let first = render(&held, false);
            assert!(first.consumed as usize <= cut);
            assert!(first.consumed == 0 || held[first.consumed as usize - 1] == b'\n');
            entries.extend(first.entries.iter().cloned());
            held.drain(..first.consumed as usize);
            held.extend_from_slice(&CALL.as_bytes()[cut..]);
            let rest = render(&held, true);
            assert_eq!(rest.consumed as usize, held.len());
            entries.extend(rest.entries.iter().cloned());
            assert_eq!(entries, whole.entries.to_vec(), "cut at {cut}");
        }
    }

    #[test]
    fn malformed_lines_are_raw_and_shortened_and_unknown_messages_are_left_out() {
        let huge = "x".repeat(5 << 20);
        let out = format!(
            "not json at all\n[1,2]\n{{\"type\":\"assistant\",\"message\":{{\"content\":\"oops\"}}}}\n{{\"type\":\"something_new\"}}\n{{\"type\":\"assistant\"\n{huge}\n\u{1b}[31mred\n\u{ff}\u{fe}"
        );
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(&[0xff, 0xfe, b'\n']);
        let r = render(&bytes, true);
        assert_eq!(kinds(&r), ["raw", "raw", "raw", "raw", "raw", "raw"]);
        assert_eq!(r.entries[0].text.as_str(), "not json at all");
        let long = &r.entries[3];
        assert_eq!(long.text.chars().count(), LINE_CHARS + 1);
        assert_eq!(long.cut_bytes, (5 << 20) - LINE_CHARS as u64);
        // The escape reaches the host as it is: the host makes it inert, not the plugin.
        assert!(r.entries[4].text.contains('\u{1b}'));
    }

    #[test]
    fn an_authentication_failure_and_a_usage_limit_are_said() {
        let out = r#"{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"Not logged in"}]},"error":"authentication_failed","is_api_error_message":true}
{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1700000000}}
{"type":"result","subtype":"success","is_error":true,"result":"Not logged in · Please run /login","num_turns":1,"duration_ms":83,"total_cost_usd":0}
"#;
        let r = render(out.as_bytes(), true);
        assert_eq!(kinds(&r), ["note", "text", "note", "result"]);
        assert_eq!(
            r.entries[0].text.as_str(),
            "the model API answered authentication_failed"
        );
        assert!(r.entries[2].text.contains("1700000000"));
        assert_eq!(
            r.entries[3].text.as_str(),
            "ended with an error · 1 turn · 0.1 s · $0.0000: Not logged in · Please run /login"
        );
    }
}
