//! A role's output read into an [`Outcome`].

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

use stet_plugin_api::{CallOutcome, ExitStatus, Fact, Outcome, OutcomeCode, OutcomeKind, ROption};

use crate::stream::Transcript;

/// Usage counters copied from the `result` line, when present.
const USAGE_KEYS: [&str; 4] = [
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
];

/// Whether the model API did not answer (a connection refused or reset, a 5xx, an
/// overload), as the CLI's own typed fields say: its API error messages carry `error:
/// "server_error"` (or `"overloaded"`) and its result line `api_error_status`. That is
/// infrastructure, not the agent failing its task.
pub fn model_api_down(t: &Transcript) -> bool {
    let status = t
        .result
        .as_ref()
        .and_then(|r| r["api_error_status"].as_u64());
    t.api_errors.iter().any(|e| {
        matches!(
            e.as_str(),
            "server_error" | "overloaded" | "overloaded_error"
        )
    }) || status.is_some_and(|s| s >= 500)
}

/// A role's output read into a typed outcome: [`outcome`], and a model API that did not
/// answer said as such.
pub fn call(t: &Transcript, exit: ExitStatus) -> CallOutcome {
    let mut call: CallOutcome = outcome(t, exit).into();
    if call.kind == OutcomeCode::FAILED && model_api_down(t) {
        call.kind = OutcomeCode::SERVICE_UNAVAILABLE;
    }
    call
}

pub fn outcome(t: &Transcript, exit: ExitStatus) -> Outcome {
    let mut usage = Vec::new();
    let mut cost = ROption::RNone;
    if let Some(r) = &t.result {
        for key in USAGE_KEYS {
            if let Some(n) = r["usage"][key].as_u64() {
                usage.push(Fact::new(key, n.to_string()));
            }
        }
        for key in ["num_turns", "duration_ms"] {
            if let Some(n) = r[key].as_u64() {
                usage.push(Fact::new(key, n.to_string()));
            }
        }
        if let Some(denials) = r["permission_denials"].as_array() {
            usage.push(Fact::new("permission_denials", denials.len().to_string()));
        }
        if let Some(c) = r["total_cost_usd"].as_f64() {
            cost = ROption::RSome(c);
        }
    }
    let result_text = t
        .result
        .as_ref()
        .and_then(|r| r["result"].as_str())
        .unwrap_or_default()
        .to_string();
    let make = |kind, detail: String, retry_at: Option<i64>| Outcome {
        kind,
        detail: detail.into(),
        retry_at_unix: retry_at.map(ROption::RSome).unwrap_or(ROption::RNone),
        cost_usd: cost,
        usage: usage.clone().into(),
    };
    let status_429 = t
        .result
        .as_ref()
        .is_some_and(|r| r["api_error_status"].as_u64() == Some(429));
    if t.limit_resets_at.is_some() || t.api_errors.iter().any(|e| e == "rate_limit") || status_429 {
        let detail = if result_text.is_empty() {
            "usage limit reached".to_string()
        } else {
            result_text
        };
        return make(OutcomeKind::RateLimited, detail, t.limit_resets_at);
    }
    // The model API refused the login the call was made with (a 401): the profile holds
    // one (the host checks that before any call), which is expired or revoked.
    if t.api_errors.iter().any(|e| e == "authentication_failed") {
        let said = if result_text.is_empty() {
            "authentication failed".to_string()
        } else {
            result_text
        };
        return make(
            OutcomeKind::NotLoggedIn,
            format!("the model API refused the login: {said}"),
            None,
        );
    }
    let Some(result) = &t.result else {
        let how = match (exit.code, exit.signal) {
            (ROption::RSome(code), _) => format!("exit code {code}"),
            (_, ROption::RSome(signal)) => format!("signal {signal}"),
            _ => "no exit status".to_string(),
        };
        return make(
            OutcomeKind::OutOfShape,
            format!(
                "no result line in the output ({how}, {} unreadable lines)",
                t.unreadable_lines
            ),
            None,
        );
    };
    let is_error = result["is_error"] == true;
    let subtype = result["subtype"].as_str().unwrap_or("");
    if result["is_error"].is_boolean() && !is_error && subtype == "success" {
        return make(OutcomeKind::Done, result_text, None);
    }
    if !result["is_error"].is_boolean() {
        return make(
            OutcomeKind::OutOfShape,
            "the result line has no is_error".into(),
            None,
        );
    }
    let reason = result["terminal_reason"].as_str().unwrap_or(subtype);
    make(
        OutcomeKind::Failed,
        format!("{reason}: {result_text}")
            .trim_end_matches(": ")
            .to_string(),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::read;

    fn exit0() -> ExitStatus {
        ExitStatus::exited(0)
    }

    #[test]
    fn done_with_cost_and_usage() {
        let t = read(br#"{"type":"result","subtype":"success","is_error":false,"result":"all done","num_turns":2,"total_cost_usd":0.0012,"usage":{"input_tokens":24,"output_tokens":14}}"#);
        let o = outcome(&t, exit0());
        assert_eq!(o.kind, OutcomeKind::Done);
        assert_eq!(o.detail.as_str(), "all done");
        assert_eq!(o.cost_usd, ROption::RSome(0.0012));
        assert!(o
            .usage
            .iter()
            .any(|f| f.key.as_str() == "num_turns" && f.value.as_str() == "2"));
    }

    #[test]
    fn a_model_api_that_does_not_answer_is_service_unavailable_not_a_failed_task() {
        // As the CLI prints a refused connection (CLAUDE_CODE_MAX_RETRIES=0).
        let t = read(br#"{"type":"assistant","message":{"content":[{"type":"text","text":"API Error: Connection refused"}]},"error":"server_error","is_api_error_message":true}
{"type":"result","subtype":"success","is_error":true,"result":"API Error: Connection refused","terminal_reason":"api_error","api_error_status":null}"#);
        let c = call(&t, ExitStatus::exited(1));
        assert_eq!(c.kind, OutcomeCode::SERVICE_UNAVAILABLE);
        // A 5xx answer is the same; a 400 is the task's own failure.
        let t = read(br#"{"type":"result","subtype":"success","is_error":true,"result":"API Error: 500","terminal_reason":"api_error","api_error_status":500}"#);
        assert_eq!(call(&t, exit0()).kind, OutcomeCode::SERVICE_UNAVAILABLE);
        let t = read(br#"{"type":"result","subtype":"success","is_error":true,"result":"API Error: 400 prompt is too long","terminal_reason":"api_error","api_error_status":400}"#);
        assert_eq!(call(&t, exit0()).kind, OutcomeCode::FAILED);
    }

    #[test]
    fn success_subtype_with_is_error_is_a_failure() {
        let t = read(br#"{"type":"result","subtype":"success","is_error":true,"result":"API Error: 500 boom","terminal_reason":"api_error"}"#);
        let o = outcome(&t, ExitStatus::exited(1));
        assert_eq!(o.kind, OutcomeKind::Failed);
        assert_eq!(o.detail.as_str(), "api_error: API Error: 500 boom");
    }

    #[test]
    fn nothing_at_all_is_out_of_shape() {
        assert_eq!(
            outcome(&read(b"garbage\n"), ExitStatus::signalled(9)).kind,
            OutcomeKind::OutOfShape
        );
    }
}
