//! The entry points a walled agent calls back into: its hooks (`stet hook EVENT`) and its
//! permission-prompt server (`stet approver`). Both run inside the sandbox, started by the
//! agent, with the agent's environment (`STET_ROLE` names the stage).
//!
//! The hook protocol: one JSON object on stdin; exit 0 to go on (stdout may carry JSON
//! for the agent), exit 2 to block with the reason on stderr. The approver is an MCP
//! server on stdio with one tool, `approve`, answering `{"behavior":"allow",
//! "updatedInput":…}` or `{"behavior":"deny","message":…}`.

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

use std::io::{BufRead, Write};
use std::path::Path;

use serde_json::{json, Value};

use crate::walls::guard::{self, Decision};

/// The hook events stet's walled settings register.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HookEvent {
    /// Before each tool call: the guard.
    Guard,
    /// At session start: hands the agent the repository's rules (AGENTS.md, CLAUDE.md).
    Rules,
    /// At session start: recorded for the receipt.
    SessionStart,
    /// At session end: recorded for the receipt.
    SessionEnd,
}

/// The stage this agent works in, from its environment; unknown means no shell at all.
fn role() -> String {
    std::env::var("STET_ROLE").unwrap_or_else(|_| "unknown".to_string())
}

/// Files at the top of the lane whose text is the repository's rules for every agent: the
/// convention agents share (`AGENTS.md`). The drive's prompts name it for every harness; a
/// harness whose agent has a rules file of its own names it to the rules hook
/// (`stet hook rules NAME…`), which hands each that is there — a walled agent loading no
/// instruction file itself.
pub const RULES_FILES: [&str; 1] = ["AGENTS.md"];

/// The most of one rules file handed to the agent.
const MAX_RULES_BYTES: u64 = 64 << 10;

/// The repository's rules in the lane at `cwd`, as the agent's session-start context: each
/// of [`RULES_FILES`] that is a regular file (a FIFO or a device the lane's last agent left
/// is not opened: reading it could block the session), read up to [`MAX_RULES_BYTES`].
fn rules_in(cwd: &Path, own: &[String]) -> Option<String> {
    use std::io::Read as _;
    let mut parts = Vec::new();
    // A harness's own file is a plain name at the top of the lane: nothing else is read.
    let own = own
        .iter()
        .map(String::as_str)
        .filter(|n| !n.is_empty() && !n.contains('/') && *n != "." && *n != "..");
    for name in RULES_FILES.into_iter().chain(own) {
        let path = cwd.join(name);
        if !std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            continue;
        }
        let Ok(file) = std::fs::File::open(&path) else {
            continue;
        };
        let mut bytes = Vec::new();
        if file
            .take(MAX_RULES_BYTES.saturating_add(1))
            .read_to_end(&mut bytes)
            .is_err()
        {
            continue;
        }
        let cut = bytes.len() as u64 > MAX_RULES_BYTES;
        bytes.truncate(MAX_RULES_BYTES as usize);
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if cut {
            text.push_str("\n[stet: the rest of this file is left out]");
        }
        parts.push(format!("The repository's rules ({name}):\n\n{text}"));
    }
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// Runs one hook: reads its JSON from `input`, answers on `out`/`err`, returns the exit code.
pub fn hook(
    event: HookEvent,
    rules: &[String],
    input: &mut dyn std::io::Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    use std::io::Read as _;
    let mut text = String::new();
    // Bounded: the agent writes it. One byte past the bound tells that it was too big.
    let read = <&mut dyn std::io::Read as std::io::Read>::take(
        &mut *input,
        MAX_MESSAGE_BYTES.saturating_add(1),
    )
    .read_to_string(&mut text);
    if read.is_err() {
        let _ = writeln!(
            err,
            "stet hook: cannot read the hook's input (not UTF-8 text?)"
        );
        return 2;
    }
    if text.len() as u64 > MAX_MESSAGE_BYTES {
        // A guard that cannot read all of what it guards refuses.
        let _ = writeln!(
            err,
            "refused by stet guard: the hook input is larger than {} MiB",
            MAX_MESSAGE_BYTES >> 20
        );
        return if event == HookEvent::Guard { 2 } else { 0 };
    }
    let payload: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            // A guard that cannot read what it guards refuses: failing open is no wall.
            let _ = writeln!(
                err,
                "refused by stet guard: the hook input is not JSON ({e})"
            );
            return if event == HookEvent::Guard { 2 } else { 0 };
        }
    };
    match event {
        HookEvent::Guard => {
            let tool = payload["tool_name"].as_str().unwrap_or_default();
            match guard::decide(&role(), tool, &payload["tool_input"]) {
                Decision::Allow => 0,
                Decision::Deny(reason) => {
                    let _ = writeln!(err, "{reason}");
                    2
                }
            }
        }
        HookEvent::Rules => {
            let cwd = payload["cwd"].as_str().unwrap_or(".");
            if let Some(rules) = rules_in(Path::new(cwd), rules) {
                let answer = json!({"hookSpecificOutput": {
                    "hookEventName": "SessionStart",
                    "additionalContext": rules
                }});
                let _ = writeln!(out, "{answer}");
            }
            0
        }
        HookEvent::SessionStart => {
            record_session_event(event, &payload);
            // Announces that stet's walled settings were loaded; the live wall proof looks
            // for this line.
            let answer = json!({"hookSpecificOutput": {
                "hookEventName": "SessionStart",
                "additionalContext": stet_plugin_api::SESSION_HOOK_MARKER
            }});
            let _ = writeln!(out, "{answer}");
            0
        }
        HookEvent::SessionEnd => {
            record_session_event(event, &payload);
            0
        }
    }
}

/// Appends a session event to `$STET_SESSION_LOG` when the launch names one (the receipt's
/// record of the agent's session); nothing otherwise.
fn record_session_event(event: HookEvent, payload: &Value) {
    append_session_log(&json!({
        "event": if event == HookEvent::SessionStart { "session-start" } else { "session-end" },
        "session_id": payload["session_id"],
        "reason": payload["reason"].as_str().or(payload["source"].as_str()),
        "at_unix_ms": now_ms(),
    }));
}

pub use crate::harness::SESSION_LOG_VAR;

fn append_session_log(line: &Value) {
    let Some(path) = std::env::var_os(SESSION_LOG_VAR) else {
        return;
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path);
    if let Ok(mut file) = file {
        let _ = writeln!(file, "{line}");
    }
}

use crate::timestamp::now_ms;

/// The largest hook input or approver message read: a tool call's input (a file the agent
/// writes, say) is in it, so it may be large, but not without bound.
const MAX_MESSAGE_BYTES: u64 = 16 << 20;

/// Serves the approver: newline-delimited JSON-RPC 2.0 (MCP over stdio) until stdin closes.
pub fn approver(input: &mut dyn BufRead, out: &mut dyn Write) -> std::io::Result<()> {
    let role = role();
    loop {
        // One message, bounded: a longer one is answered as an error and skipped whole.
        let mut bytes = Vec::new();
        let read = <&mut dyn BufRead as std::io::Read>::take(
            &mut *input,
            MAX_MESSAGE_BYTES.saturating_add(1),
        )
        .read_until(b'\n', &mut bytes)?;
        if read == 0 {
            return Ok(());
        }
        if bytes.len() as u64 > MAX_MESSAGE_BYTES && bytes.last() != Some(&b'\n') {
            let mut rest = Vec::new();
            while !rest.ends_with(b"\n") {
                rest.clear();
                let mut part = <&mut dyn BufRead as std::io::Read>::take(&mut *input, 1 << 20);
                if part.read_until(b'\n', &mut rest)? == 0 {
                    break;
                }
            }
            write_message(
                out,
                &json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32600, "message": format!(
                    "message larger than {} MiB", MAX_MESSAGE_BYTES >> 20)}}),
            )?;
            continue;
        }
        let Ok(line) = String::from_utf8(bytes) else {
            write_message(
                out,
                &json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32700, "message": "parse error: not UTF-8"}}),
            )?;
            continue;
        };
        if line.trim().is_empty() {
            continue;
        }
        let Ok(request) = serde_json::from_str::<Value>(&line) else {
            write_message(
                out,
                &json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32700, "message": "parse error"}}),
            )?;
            continue;
        };
        let id = request["id"].clone();
        // Notifications (no id) need no answer.
        if id.is_null() {
            continue;
        }
        let result = match request["method"].as_str().unwrap_or_default() {
            "initialize" => json!({
                "protocolVersion": request["params"]["protocolVersion"].as_str().unwrap_or("2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "stet", "version": env!("CARGO_PKG_VERSION")}
            }),
            "ping" => json!({}),
            "tools/list" => json!({"tools": [{
                "name": "approve",
                "description": "Answers the agent's permission prompts by stet's guard policy.",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "tool_name": {"type": "string"},
                        "input": {"type": "object"},
                        "tool_use_id": {"type": "string"}
                    },
                    "required": ["tool_name", "input"]
                }
            }]}),
            "tools/call" => {
                let arguments = &request["params"]["arguments"];
                let tool = arguments["tool_name"].as_str().unwrap_or_default();
                let decision = match guard::decide(&role, tool, &arguments["input"]) {
                    Decision::Allow => {
                        json!({"behavior": "allow", "updatedInput": arguments["input"]})
                    }
                    Decision::Deny(reason) => json!({"behavior": "deny", "message": reason}),
                };
                append_session_log(&json!({
                    "event": "approval",
                    "tool": tool,
                    "behavior": decision["behavior"],
                    "at_unix_ms": now_ms(),
                }));
                json!({"content": [{"type": "text", "text": decision.to_string()}]})
            }
            method => {
                write_message(
                    out,
                    &json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": format!("method not found: {method}")}}),
                )?;
                continue;
            }
        };
        write_message(out, &json!({"jsonrpc": "2.0", "id": id, "result": result}))?;
    }
}

fn write_message(out: &mut dyn Write, message: &Value) -> std::io::Result<()> {
    writeln!(out, "{message}")?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_hook(event: HookEvent, input: &str) -> (u8, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = hook(
            event,
            &["CLAUDE.md".to_string()],
            &mut input.as_bytes(),
            &mut out,
            &mut err,
        );
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    #[test]
    fn the_rules_hook_hands_every_rules_file_bounded_and_opens_no_fifo() {
        let lane = tempfile::tempdir().unwrap();
        let input = json!({"cwd": lane.path()}).to_string();
        // No rules file: nothing to hand, the session goes on.
        assert_eq!(
            run_hook(HookEvent::Rules, &input),
            (0, String::new(), String::new())
        );
        std::fs::write(lane.path().join("AGENTS.md"), "Use tabs.\n").unwrap();
        std::fs::write(
            lane.path().join("CLAUDE.md"),
            "x".repeat(MAX_RULES_BYTES as usize + 10),
        )
        .unwrap();
        let (code, out, _) = run_hook(HookEvent::Rules, &input);
        assert_eq!(code, 0);
        let answer: Value = serde_json::from_str(&out).unwrap();
        let context = answer["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap();
        assert!(context.starts_with("The repository's rules (AGENTS.md):\n\nUse tabs.\n"));
        assert!(context.contains("The repository's rules (CLAUDE.md):\n\nxxx"));
        assert!(context.ends_with("[stet: the rest of this file is left out]"));
        assert!(context.len() < MAX_RULES_BYTES as usize + 200);
        // A FIFO where a rules file was (the last agent's doing) is passed over, not opened.
        std::fs::remove_file(lane.path().join("AGENTS.md")).unwrap();
        nix::unistd::mkfifo(
            &lane.path().join("AGENTS.md"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let (code, out, _) = run_hook(HookEvent::Rules, &input);
        assert_eq!(code, 0);
        assert!(
            !out.contains("AGENTS.md") && out.contains("CLAUDE.md"),
            "{out}"
        );
    }

    #[test]
    fn guard_blocks_with_exit_2_and_a_reason() {
        let (code, _, err) = run_hook(
            HookEvent::Guard,
            r#"{"tool_name":"Bash","tool_input":{"command":"stet-wall-canary"}}"#,
        );
        assert_eq!(code, 2);
        assert!(err.starts_with("refused by stet guard"), "{err}");
        let (code, _, _) = run_hook(HookEvent::Guard, "not json");
        assert_eq!(code, 2, "a guard that cannot read fails closed");
    }

    #[test]
    fn approver_answers_mcp() {
        let requests = [
            json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}),
            json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
            json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
            json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"approve",
                "arguments":{"tool_name":"Bash","input":{"command":"git push"}}}}),
            json!({"jsonrpc":"2.0","id":"x","method":"server/discover"}),
        ];
        let input: String = requests.iter().map(|r| format!("{r}\n")).collect();
        let mut out = Vec::new();
        approver(&mut input.as_bytes(), &mut out).unwrap();
        let answers: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(answers.len(), 4);
        assert_eq!(answers[0]["result"]["protocolVersion"], "2025-11-25");
        assert_eq!(answers[1]["result"]["tools"][0]["name"], "approve");
        let decision: Value =
            serde_json::from_str(answers[2]["result"]["content"][0]["text"].as_str().unwrap())
                .unwrap();
        assert_eq!(decision["behavior"], "deny");
        assert_eq!(answers[3]["error"]["code"], -32601);
    }

    #[test]
    fn a_hook_input_past_the_bound_is_refused_by_the_guard_naming_the_bound() {
        let big = format!(
            r#"{{"tool_name":"Write","tool_input":{{"content":"{}"}}}}"#,
            "x".repeat(MAX_MESSAGE_BYTES as usize)
        );
        let (code, _, err) = run_hook(HookEvent::Guard, &big);
        assert_eq!(code, 2);
        assert!(err.contains("larger than 16 MiB"), "{err}");
    }

    #[test]
    fn an_approver_message_past_the_bound_is_an_error_and_the_next_is_answered() {
        let big = format!("{}\n", "x".repeat(MAX_MESSAGE_BYTES as usize + 10));
        let next = json!({"jsonrpc":"2.0","id":7,"method":"ping"});
        let mut input = big.into_bytes();
        input.extend_from_slice(b"\xff\n");
        input.extend_from_slice(format!("{next}\n").as_bytes());
        let mut out = Vec::new();
        approver(&mut input.as_slice(), &mut out).unwrap();
        let answers: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(answers.len(), 3, "{answers:?}");
        assert!(answers[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("larger than 16 MiB"));
        assert_eq!(answers[2]["id"], 7);
    }
}
