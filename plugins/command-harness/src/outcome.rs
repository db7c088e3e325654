//! A role's standard output and exit status read into an [`Outcome`]; the protocol is
//! documented on the crate.

// What this module reads comes from parties stet does not trust: nothing here may panic
// on it (issue 18).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects
    )
)]

use stet_plugin_api::{ExitStatus, Fact, Outcome, OutcomeKind, ROption, Role};

/// The most of the agent's message an outcome carries (the tail is kept).
pub const DETAIL_LIMIT: usize = 16 * 1024;
/// The most of a line quoted in a failure or out-of-shape detail.
const LINE_LIMIT: usize = 200;
/// The exit code of a usage limit (`EX_TEMPFAIL` from sysexits.h).
pub const EX_TEMPFAIL: i32 = 75;
/// At most this many usage facts are kept.
const USAGE_LIMIT: usize = 32;

const COST: &str = "stet-cost-usd:";
const USAGE: &str = "stet-usage:";
const RETRY_AT: &str = "stet-retry-at:";

/// The report lines of an output, and the rest.
#[derive(Debug, Default, PartialEq)]
struct Report {
    cost_usd: Option<f64>,
    usage: Vec<(String, String)>,
    retry_at: Option<i64>,
    /// Every line that is not a report line, in order.
    message: Vec<String>,
}

fn read_report(output: &str) -> Report {
    let mut report = Report::default();
    for line in output.lines() {
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix(COST) {
            // The last well-formed line counts; a malformed one is dropped.
            if let Ok(cost) = rest.trim().parse::<f64>() {
                if cost.is_finite() && cost >= 0.0 {
                    report.cost_usd = Some(cost);
                }
            }
        } else if let Some(rest) = trimmed.strip_prefix(USAGE) {
            if let Some((key, value)) = rest.trim().split_once('=') {
                let (key, value) = (key.trim(), value.trim());
                let key_ok = !key.is_empty()
                    && key.len() <= 64
                    && key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
                if key_ok
                    && !value.is_empty()
                    && value.len() <= 256
                    && report.usage.len() < USAGE_LIMIT
                {
                    report.usage.push((key.to_string(), value.to_string()));
                }
            }
        } else if let Some(rest) = trimmed.strip_prefix(RETRY_AT) {
            if let Ok(at) = rest.trim().parse::<i64>() {
                if at >= 0 {
                    report.retry_at = Some(at);
                }
            }
        } else {
            report.message.push(line.to_string());
        }
    }
    report
}

/// The largest index `<= i` on a character boundary of `s`.
fn floor_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i = i.saturating_sub(1);
    }
    i
}

/// `text` cut to [`DETAIL_LIMIT`] bytes, keeping the tail; with `keep_first_line` the first
/// line (a review's verdict) is kept too.
fn cap(text: &str, keep_first_line: bool) -> String {
    if text.len() <= DETAIL_LIMIT {
        return text.to_string();
    }
    let head = if keep_first_line {
        let first = text.lines().next().unwrap_or("");
        format!("{}\n", cut_line(first))
    } else {
        String::new()
    };
    let marker = "[… the start of the output was cut …]\n";
    let room = DETAIL_LIMIT.saturating_sub(head.len().saturating_add(marker.len()));
    let start = text.len().saturating_sub(room);
    let start = {
        // Round up to a character boundary.
        let mut i = start;
        while i < text.len() && !text.is_char_boundary(i) {
            i = i.saturating_add(1);
        }
        i
    };
    format!("{head}{marker}{}", &text[start..])
}

/// A line for quoting: at most [`LINE_LIMIT`] bytes.
fn cut_line(line: &str) -> String {
    if line.len() <= LINE_LIMIT {
        line.to_string()
    } else {
        format!("{}…", &line[..floor_boundary(line, LINE_LIMIT)])
    }
}

fn how_it_ended(exit: &ExitStatus) -> String {
    let signal = |s: i32| match s {
        9 => "signal 9 (SIGKILL)".to_string(),
        15 => "signal 15 (SIGTERM)".to_string(),
        2 => "signal 2 (SIGINT)".to_string(),
        6 => "signal 6 (SIGABRT)".to_string(),
        11 => "signal 11 (SIGSEGV)".to_string(),
        other => format!("signal {other}"),
    };
    let base = match (exit.code, exit.signal) {
        (_, ROption::RSome(s)) => format!("killed by {}", signal(s)),
        (ROption::RSome(code), ROption::RNone) => format!("exit code {code}"),
        (ROption::RNone, ROption::RNone) => "no exit status".to_string(),
    };
    if exit.out_of_memory {
        format!("ran out of memory ({base})")
    } else {
        base
    }
}

/// Reads a role's output and exit status into an outcome.
pub fn read(role: Role, output: &[u8], exit: ExitStatus) -> Outcome {
    let text = String::from_utf8_lossy(output);
    let report = read_report(&text);
    let message = report.message.join("\n");
    let message = message.trim();
    let make = |kind, detail: String, retry_at: Option<i64>| Outcome {
        kind,
        detail: detail.into(),
        retry_at_unix: retry_at.map(ROption::RSome).unwrap_or(ROption::RNone),
        cost_usd: report
            .cost_usd
            .map(ROption::RSome)
            .unwrap_or(ROption::RNone),
        usage: report
            .usage
            .iter()
            .map(|(k, v)| Fact::new(k.as_str(), v.as_str()))
            .collect(),
    };
    let last_line = message
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| cut_line(l.trim()));
    let clean_exit = exit.success() && !exit.out_of_memory && exit.signal.is_none();
    if clean_exit {
        if role == Role::Review {
            let first = message.lines().next().unwrap_or("").trim();
            let upper = first.to_ascii_uppercase();
            if !(upper.starts_with("LAND") || upper.starts_with("REVISE")) {
                let seen = if first.is_empty() {
                    "the review printed nothing".to_string()
                } else {
                    format!("the review's first line was `{}`", cut_line(first))
                };
                return make(
                    OutcomeKind::OutOfShape,
                    format!(
                        "{seen}; expected LAND, or REVISE followed by what must change, on the first line"
                    ),
                    None,
                );
            }
        }
        return make(OutcomeKind::Done, cap(message, role == Role::Review), None);
    }
    if exit.code == ROption::RSome(EX_TEMPFAIL) && exit.signal.is_none() && !exit.out_of_memory {
        let detail = match &last_line {
            Some(line) => format!("the agent reported a usage limit (exit code 75): {line}"),
            None => "the agent reported a usage limit (exit code 75)".to_string(),
        };
        return make(OutcomeKind::RateLimited, detail, report.retry_at);
    }
    let detail = match &last_line {
        Some(line) => format!("{}; its last line: {line}", how_it_ended(&exit)),
        None => format!("{}; it printed nothing", how_it_ended(&exit)),
    };
    make(OutcomeKind::Failed, detail, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(o: &Outcome) -> Vec<(String, String)> {
        o.usage
            .iter()
            .map(|f| (f.key.to_string(), f.value.to_string()))
            .collect()
    }

    #[test]
    fn exit_0_is_done_with_report_lines_taken_out() {
        let out = b"wrote hello.txt\nstet-cost-usd: 0.25\nstet-usage: input_tokens=120\n  stet-usage: turns = 3\nall done\n\n";
        let o = read(Role::Implement, out, ExitStatus::exited(0));
        assert_eq!(o.kind, OutcomeKind::Done);
        assert_eq!(o.detail.as_str(), "wrote hello.txt\nall done");
        assert_eq!(o.cost_usd, ROption::RSome(0.25));
        assert_eq!(
            usage(&o),
            [("input_tokens", "120"), ("turns", "3")].map(|(a, b)| (a.into(), b.into()))
        );
        assert_eq!(o.retry_at_unix, ROption::RNone);
    }

    #[test]
    fn malformed_report_lines_are_dropped_and_never_crash() {
        let out = "stet-cost-usd: lots\nstet-cost-usd: -1\nstet-cost-usd: NaN\nstet-usage: nokey\nstet-usage: =5\nstet-usage: k=\nstet-usage: bad key=1\nstet-retry-at: soon\nstet-retry-at:\nstet-usage: ok=1\n\u{0}\u{fffd}done";
        let o = read(Role::Implement, out.as_bytes(), ExitStatus::exited(0));
        assert_eq!(o.kind, OutcomeKind::Done);
        assert_eq!(o.cost_usd, ROption::RNone);
        assert_eq!(usage(&o), [("ok".to_string(), "1".to_string())]);
        assert!(o.detail.ends_with("done"), "{}", o.detail);
        assert!(!o.detail.contains("stet-"), "{}", o.detail);
        // Invalid UTF-8 is read lossily.
        let o = read(Role::Implement, b"\xff\xfe ok", ExitStatus::exited(0));
        assert_eq!(o.kind, OutcomeKind::Done);
    }

    #[test]
    fn a_review_in_shape_is_done() {
        for verdict in [
            "LAND\nlooks right",
            "revise\nthe test is missing",
            "\n\n  Land it",
        ] {
            let o = read(Role::Review, verdict.as_bytes(), ExitStatus::exited(0));
            assert_eq!(o.kind, OutcomeKind::Done, "{verdict}");
            assert!(
                o.detail.to_ascii_uppercase().starts_with("LAND")
                    || o.detail.to_ascii_uppercase().starts_with("REVISE")
            );
        }
    }

    #[test]
    fn a_review_out_of_shape_says_what_was_seen_and_expected() {
        let o = read(
            Role::Review,
            b"I think it is fine\nLAND",
            ExitStatus::exited(0),
        );
        assert_eq!(o.kind, OutcomeKind::OutOfShape);
        assert!(o.detail.contains("`I think it is fine`"), "{}", o.detail);
        assert!(
            o.detail.contains("expected LAND, or REVISE"),
            "{}",
            o.detail
        );
        let o = read(Role::Review, b"stet-cost-usd: 1\n", ExitStatus::exited(0));
        assert_eq!(o.kind, OutcomeKind::OutOfShape);
        assert!(o.detail.contains("printed nothing"), "{}", o.detail);
        let long = "x".repeat(5000);
        let o = read(Role::Review, long.as_bytes(), ExitStatus::exited(0));
        assert!(o.detail.len() < 400, "{}", o.detail.len());
        // The same output is fine for implement.
        let o = read(
            Role::Implement,
            b"I think it is fine",
            ExitStatus::exited(0),
        );
        assert_eq!(o.kind, OutcomeKind::Done);
    }

    #[test]
    fn exit_75_is_a_usage_limit_with_or_without_a_retry_time() {
        let o = read(
            Role::Implement,
            b"limit reached\nstet-retry-at: 1893456000\n",
            ExitStatus::exited(75),
        );
        assert_eq!(o.kind, OutcomeKind::RateLimited);
        assert_eq!(o.retry_at_unix, ROption::RSome(1893456000));
        assert!(o.detail.contains("limit reached"), "{}", o.detail);
        let o = read(Role::Review, b"", ExitStatus::exited(75));
        assert_eq!(o.kind, OutcomeKind::RateLimited);
        assert_eq!(o.retry_at_unix, ROption::RNone);
        // A retry line on a success means nothing.
        let o = read(
            Role::Implement,
            b"ok\nstet-retry-at: 5",
            ExitStatus::exited(0),
        );
        assert_eq!(o.retry_at_unix, ROption::RNone);
    }

    #[test]
    fn other_exits_are_failures_naming_the_code_or_signal_and_the_last_line() {
        let o = read(
            Role::Implement,
            b"working\nno instruction I understand\n\nstet-cost-usd: 0.5\n",
            ExitStatus::exited(1),
        );
        assert_eq!(o.kind, OutcomeKind::Failed);
        assert_eq!(
            o.detail.as_str(),
            "exit code 1; its last line: no instruction I understand"
        );
        assert_eq!(o.cost_usd, ROption::RSome(0.5));
        let o = read(Role::Review, b"", ExitStatus::signalled(9));
        assert_eq!(o.kind, OutcomeKind::Failed);
        assert_eq!(
            o.detail.as_str(),
            "killed by signal 9 (SIGKILL); it printed nothing"
        );
        let mut oom = ExitStatus::signalled(9);
        oom.out_of_memory = true;
        let o = read(Role::Implement, b"big", oom);
        assert_eq!(o.kind, OutcomeKind::Failed);
        assert!(o.detail.starts_with("ran out of memory"), "{}", o.detail);
        // Out of memory even with exit code 0 is no success.
        let mut oom0 = ExitStatus::exited(0);
        oom0.out_of_memory = true;
        assert_eq!(read(Role::Implement, b"x", oom0).kind, OutcomeKind::Failed);
        let none = ExitStatus {
            code: ROption::RNone,
            signal: ROption::RNone,
            out_of_memory: false,
        };
        assert!(read(Role::Implement, b"", none)
            .detail
            .contains("no exit status"));
    }

    #[test]
    fn a_long_detail_keeps_its_tail_and_a_reviews_verdict() {
        let mut text = String::from("REVISE\n");
        for i in 0..5000 {
            text.push_str(&format!("line {i} é\n"));
        }
        let o = read(Role::Review, text.as_bytes(), ExitStatus::exited(0));
        assert_eq!(o.kind, OutcomeKind::Done);
        assert!(o.detail.len() <= DETAIL_LIMIT, "{}", o.detail.len());
        assert!(
            o.detail.starts_with("REVISE\n[… the start"),
            "{}",
            &o.detail[..60]
        );
        assert!(o.detail.ends_with("line 4999 é"));
        let o = read(Role::Implement, text.as_bytes(), ExitStatus::exited(0));
        assert!(o.detail.len() <= DETAIL_LIMIT);
        assert!(o.detail.starts_with("[… the start"));
        assert!(o.detail.ends_with("line 4999 é"));
    }
}
