//! A call's events read into a typed outcome and the receipt's figures.

#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::arithmetic_side_effects
    )
)]

use stet_plugin_api::{CallOutcome, ExitStatus, Fact, OutcomeCode, ROption};

use crate::events::Run;

/// A call's outcome. `now_unix` is when it is read (a usage limit's reset time is said as a
/// time of day); `model` the configured model, for the cost estimate.
pub fn call(run: &Run, exit: ExitStatus, model: Option<&str>, now_unix: i64) -> CallOutcome {
    let usage = figures(run);
    let cost = estimate(run, model);
    let make = |kind: OutcomeCode, detail: String, retry_at: Option<i64>| CallOutcome {
        kind,
        detail: detail.into(),
        retry_at_unix: retry_at.map_or(ROption::RNone, ROption::RSome),
        cost_usd: cost.map_or(ROption::RNone, ROption::RSome),
        usage: usage.clone().into(),
    };
    if let Some(failed) = &run.failed {
        // POLICY, not a wall: a usage limit is known only by the words of Codex's own
        // message. 0.163.0 turns the model API's 429 `usage_limit_reached` (whose body has
        // `resets_at`) into text alone — `error` and `turn.failed` say "You've hit your
        // usage limit. … try again at 2:29 PM." — with no code in `--json`. The reset time
        // is Codex's rendering of `resets_at` in the sandbox's local time, which the launch
        // sets to UTC (`TZ=UTC0`). When the words change, a usage limit reads as the
        // item's failed round, which costs a round, not a wall.
        if is_usage_limit(failed) {
            return make(
                OutcomeCode::RATE_LIMITED,
                failed.clone(),
                reset_time(failed, now_unix),
            );
        }
        // The model API refused the login (401): Codex then tries to renew it, which in an
        // agent's sandbox cannot work (its OAuth host is out of reach by design, and it
        // holds a stand-in refresh token), and fails the turn naming the token endpoint it
        // could not reach. The login is expired or revoked: the person logs in again, as
        // Claude's refused login says. (Policy: read from the endpoint's path in Codex's
        // message.)
        if failed.contains(TOKEN_ENDPOINT_PATH) {
            return make(
                OutcomeCode::NOT_LOGGED_IN,
                format!("the model API refused the login, and it cannot be renewed during a call: {failed}"),
                None,
            );
        }
        // The model API did not answer: Codex retried ("Reconnecting... n/m") or could not
        // connect at all. Infrastructure, not the agent failing its task.
        if run.reconnects > 0 || failed.starts_with("Connection failed") {
            return make(
                OutcomeCode::SERVICE_UNAVAILABLE,
                format!("the model API did not answer: {failed}"),
                None,
            );
        }
        return make(OutcomeCode::FAILED, failed.clone(), None);
    }
    if run.turns_completed > 0 && exit.success() {
        return make(
            OutcomeCode::DONE,
            run.last_message.clone().unwrap_or_default(),
            None,
        );
    }
    let how = match (exit.code, exit.signal) {
        (ROption::RSome(code), _) => format!("exit code {code}"),
        (_, ROption::RSome(signal)) => format!("signal {signal}"),
        _ => "no exit status".to_string(),
    };
    let said = if run.started {
        "no completed turn"
    } else {
        "no thread.started line (Codex did not start: a configuration it refused, or a binary that cannot run)"
    };
    make(
        OutcomeCode::OUT_OF_SHAPE,
        format!(
            "{said} in the output ({how}, {} unreadable lines)",
            run.unreadable_lines
        ),
        None,
    )
}

/// The path of the OAuth token endpoint (Codex's default and any override), which Codex
/// names when it could not renew a refused login.
const TOKEN_ENDPOINT_PATH: &str = "/oauth/token";

/// Whether a failure is Codex's usage-limit message (see [`call`]: policy, matched on
/// Codex's words, with either apostrophe).
pub fn is_usage_limit(message: &str) -> bool {
    message.contains("hit your usage limit")
}

/// The figures a receipt keeps, named as Claude's are where they mean the same:
/// `input_tokens` uncached input, `cache_read_input_tokens`, `cache_creation_input_tokens`,
/// `output_tokens` (reasoning included), so that the costs page's sum of `…_tokens` counts
/// each token once; `reasoning_output` and `tool_calls` are counts beside them.
pub fn figures(run: &Run) -> Vec<Fact> {
    let mut facts = Vec::new();
    if run.has_usage {
        let u = run.usage;
        facts.push(Fact::new(
            "input_tokens",
            u.input.saturating_sub(u.cached_input).to_string(),
        ));
        facts.push(Fact::new(
            "cache_read_input_tokens",
            u.cached_input.to_string(),
        ));
        facts.push(Fact::new(
            "cache_creation_input_tokens",
            u.cache_write_input.to_string(),
        ));
        facts.push(Fact::new("output_tokens", u.output.to_string()));
        facts.push(Fact::new(
            "reasoning_output",
            u.reasoning_output.to_string(),
        ));
    }
    facts.push(Fact::new("num_turns", run.turns_completed.to_string()));
    facts.push(Fact::new("tool_calls", run.commands.to_string()));
    facts
}

/// Public list prices, US dollars per million tokens: input, cached input, output. An
/// estimate (a ChatGPT login is paid by its plan, not per token): the receipt's cost is
/// what these tokens would cost at these prices, and `None` for a model not listed (or
/// none configured: Codex's own default is not known here).
const PRICES: [(&str, f64, f64, f64); 6] = [
    ("gpt-5", 1.25, 0.125, 10.0),
    ("gpt-5-codex", 1.25, 0.125, 10.0),
    ("gpt-5.1", 1.25, 0.125, 10.0),
    ("gpt-5.1-codex", 1.25, 0.125, 10.0),
    ("gpt-5-mini", 0.25, 0.025, 2.0),
    ("gpt-5.1-codex-mini", 0.25, 0.025, 2.0),
];

/// The call's cost at [`PRICES`], when its model is listed and it reported usage.
pub fn estimate(run: &Run, model: Option<&str>) -> Option<f64> {
    let model = model?;
    let (_, input, cached, output) = PRICES.iter().find(|(name, ..)| *name == model)?;
    if !run.has_usage {
        return None;
    }
    let u = run.usage;
    let per_million = |tokens: u64, price: f64| tokens as f64 / 1_000_000.0 * price;
    Some(
        per_million(u.input.saturating_sub(u.cached_input), *input)
            + per_million(u.cached_input, *cached)
            + per_million(u.output, *output),
    )
}

/// When a usage limit resets, from Codex's words: "try again at 2:29 PM" (today, in the
/// sandbox's local time, UTC) or "try again at Dec 5th, 2026 2:29 PM". Codex says the
/// reset to the minute, cutting its seconds: the reset lies within the minute named, so
/// the answer is that minute's end (waiting past it is never too early). A time of day is
/// today's unless its minute ended more than [`JUST_PASSED`] ago: a reset seconds away,
/// within the current minute, is this minute's, and one that passed while Codex said it is
/// over (the drive tries again at once), never tomorrow's. `None` when it says no time
/// ("Try again later").
pub fn reset_time(message: &str, now_unix: i64) -> Option<i64> {
    let lower = message.to_ascii_lowercase();
    let at = lower
        .rfind("try again at ")?
        .checked_add("try again at ".len())?;
    let rest = lower.get(at..)?.trim_end_matches(['.', ' ', '\n']);
    let words: Vec<&str> = rest.split_whitespace().collect();
    let (clock, date) = match words.as_slice() {
        [time, meridiem, ..] if time.contains(':') => ((*time, *meridiem), None),
        [month, day, year, time, meridiem, ..] => ((*time, *meridiem), Some((*month, *day, *year))),
        _ => return None,
    };
    let seconds = clock_seconds(clock.0, clock.1.trim_end_matches('.'))?;
    match date {
        None => {
            let midnight = now_unix.checked_sub(now_unix.rem_euclid(86_400))?;
            let today = midnight.checked_add(seconds)?.checked_add(60)?;
            if today.checked_add(JUST_PASSED)? > now_unix {
                Some(today)
            } else {
                today.checked_add(86_400)
            }
        }
        Some((month, day, year)) => {
            let month = MONTHS.iter().position(|m| month.starts_with(m))?;
            let day: u32 = day
                .trim_end_matches(',')
                .trim_end_matches(|c: char| c.is_ascii_alphabetic())
                .parse()
                .ok()?;
            let year: i64 = year.trim_end_matches(',').parse().ok()?;
            let days = days_from_civil(year, u32::try_from(month).ok()?.checked_add(1)?, day)?;
            days.checked_mul(86_400)?
                .checked_add(seconds)?
                .checked_add(60)
        }
    }
}

/// How long ago a reset said as a time of day may have passed and still be today's: the
/// time between Codex reading its clock and the plugin reading its words.
const JUST_PASSED: i64 = 5 * 60;

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// Seconds after midnight of "2:29" "pm".
// Bounded: the hour and minute are range-checked first.
#[allow(clippy::arithmetic_side_effects)]
fn clock_seconds(time: &str, meridiem: &str) -> Option<i64> {
    let (h, m) = time.split_once(':')?;
    let (h, m): (i64, i64) = (h.parse().ok()?, m.get(..2)?.parse().ok()?);
    if !(1..=12).contains(&h) || !(0..60).contains(&m) {
        return None;
    }
    let h = match meridiem {
        "am" => h % 12,
        "pm" => h % 12 + 12,
        _ => return None,
    };
    Some(h * 3600 + m * 60)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
// Bounded: the year, month and day are range-checked first.
#[allow(clippy::arithmetic_side_effects)]
fn days_from_civil(year: i64, month: u32, day: u32) -> Option<i64> {
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || !(1970..=9999).contains(&year) {
        return None;
    }
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::read;

    fn fixture(name: &str) -> Run {
        let bytes = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(name),
        )
        .unwrap();
        read(&bytes, "x")
    }

    /// 2026-12-04 13:29:00 UTC.
    const NOW: i64 = 1_796_390_940;

    #[test]
    fn a_finished_call_is_done_with_its_figures_and_an_estimate() {
        let run = fixture("exec-text.jsonl");
        let c = call(&run, ExitStatus::exited(0), Some("gpt-5.1-codex"), NOW);
        assert_eq!(c.kind, OutcomeCode::DONE);
        assert_eq!(c.detail.as_str(), "Hello from the fake Responses API.");
        let fact = |k: &str| {
            c.usage
                .iter()
                .find(|f| f.key.as_str() == k)
                .map(|f| f.value.to_string())
        };
        assert_eq!(fact("input_tokens").as_deref(), Some("60"));
        assert_eq!(fact("cache_read_input_tokens").as_deref(), Some("40"));
        assert_eq!(fact("output_tokens").as_deref(), Some("20"));
        assert_eq!(fact("num_turns").as_deref(), Some("1"));
        let cost = c.cost_usd.into_option().unwrap();
        assert!((cost - (60.0 * 1.25 + 40.0 * 0.125 + 20.0 * 10.0) / 1e6).abs() < 1e-12);
        // A model the table does not list: no estimate rather than a guess.
        let c = call(&run, ExitStatus::exited(0), Some("gpt-5.5"), NOW);
        assert_eq!(c.cost_usd, ROption::RNone);
    }

    #[test]
    fn the_usage_limit_waits_until_codexs_reset_time() {
        let run = fixture("exec-429.jsonl");
        let c = call(&run, ExitStatus::exited(1), None, NOW);
        assert_eq!(c.kind, OutcomeCode::RATE_LIMITED);
        assert!(c.detail.contains("usage limit"), "{}", c.detail);
        // "try again at 2:29 PM", read at 13:29 UTC: by the end of 14:29.
        assert_eq!(c.retry_at_unix, ROption::RSome(NOW + 3600 + 60));
    }

    #[test]
    fn reset_times_are_read_in_both_of_codexs_forms() {
        assert_eq!(
            reset_time("… or try again at 2:29 PM.", NOW),
            Some(NOW + 3600 + 60)
        );
        // A minute over for more than a moment today is tomorrow's.
        assert_eq!(
            reset_time("Try again at 1:00 PM.", NOW),
            Some(NOW - 29 * 60 + 60 + 86_400)
        );
        assert_eq!(
            reset_time("Try again at 1:23 PM.", NOW),
            Some(NOW - 6 * 60 + 60 + 86_400)
        );
        assert_eq!(
            reset_time("Try again at 12:05 AM.", NOW),
            Some(NOW - NOW % 86_400 + 86_400 + 300 + 60)
        );
        // The current minute, begun but not over (Codex cut a reset seconds away to it):
        // this minute's end, not tomorrow's.
        assert_eq!(
            reset_time("Try again at 1:29 PM.", NOW + 20),
            Some(NOW + 60)
        );
        // Said as the minute just over, read a moment later: over, not tomorrow's.
        assert_eq!(
            reset_time("Try again at 1:29 PM.", NOW + 61),
            Some(NOW + 60)
        );
        assert_eq!(reset_time("Try again at 1:25 PM.", NOW), Some(NOW - 3 * 60));
        // 2026-12-05 14:29 UTC.
        assert_eq!(
            reset_time(
                "You’ve hit your usage limit. Try again at Dec 5th, 2026 2:29 PM.",
                NOW
            ),
            Some(1_796_480_940 + 60)
        );
        assert_eq!(reset_time("Try again later.", NOW), None);
        for junk in [
            "try again at ",
            "try again at 99:99 PM",
            "try again at 2:29",
            "try again at Foo 99th, 2026 2:29 PM",
            "try again at Dec 5th, 99999999999999999999 2:29 PM",
            "try again at 🦀:🦀 PM",
        ] {
            let _ = reset_time(junk, NOW);
        }
    }

    #[test]
    fn a_model_api_that_does_not_answer_is_infrastructure() {
        for name in [
            "exec-500.jsonl",
            "exec-badstream.jsonl",
            "exec-failed.jsonl",
            "exec-closed-port-bounded.jsonl",
        ] {
            let c = call(&fixture(name), ExitStatus::exited(1), None, NOW);
            assert_eq!(
                c.kind,
                OutcomeCode::SERVICE_UNAVAILABLE,
                "{name}: {}",
                c.detail
            );
        }
    }

    #[test]
    fn a_login_the_model_api_refused_is_not_logged_in_not_an_outage() {
        let c = call(
            &fixture("exec-401-refresh-unreachable.jsonl"),
            ExitStatus::exited(1),
            None,
            NOW,
        );
        assert_eq!(c.kind, OutcomeCode::NOT_LOGGED_IN, "{}", c.detail);
    }

    #[test]
    fn a_failure_without_retries_is_the_tasks_and_no_turn_is_out_of_shape() {
        let c = call(
            &fixture("exec-chatgpt-401.jsonl"),
            ExitStatus::exited(1),
            None,
            NOW,
        );
        assert_eq!(c.kind, OutcomeCode::FAILED);
        let c = call(
            &read(b"garbage\n", "x"),
            ExitStatus::signalled(9),
            None,
            NOW,
        );
        assert_eq!(c.kind, OutcomeCode::OUT_OF_SHAPE);
        assert!(c.detail.contains("signal 9"), "{}", c.detail);
        // Started, yet ended without a turn (killed mid-way).
        let c = call(
            &read(br#"{"type":"thread.started","thread_id":"x"}"#, "x"),
            ExitStatus::exited(0),
            None,
            NOW,
        );
        assert_eq!(c.kind, OutcomeCode::OUT_OF_SHAPE);
    }
}
