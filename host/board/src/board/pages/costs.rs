//! Costs and time: what this clone's calls cost and took, from its receipts
//! ([`crate::receipts::read_all`]), and how many items landed or failed, from the queue's
//! snapshot — as charts drawn on the server ([`crate::board::charts`]), each with its
//! numbers in a table.
//!
//! The receipts are read on a blocking thread and kept, boiled down to one small
//! [`Call`] per receipt, until the receipts directory changes (its modification time: a
//! receipt is written by renaming it into place, which changes it). One set is kept, for
//! one directory: the memory follows the number of receipts, not how long the board runs.

use crate::story::ItemState;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use axum::extract::State;
use axum::response::Html;
use axum::Extension;

use super::{render, Chrome, PageError};
use crate::board::auth::Session;
use crate::board::charts::{self, Chart, Series, Svg};
use crate::board::Shared;
use crate::receipts::{Outcome, Receipt};

/// At most this many items are charted one by one (those with the latest calls); the
/// totals count every item.
pub const ITEMS_CHARTED: usize = 30;
/// At most this many days are charted (the latest).
pub const DAYS_CHARTED: usize = 60;

/// One receipt, as the charts need it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The item's id (empty for a call of no item: `ask`, a proof).
    pub item: String,
    /// The role's word: `implement`, `review`, `check`, `proof`…
    pub role: String,
    /// The UTC day it started, `YYYY-MM-DD`.
    pub day: String,
    pub started_unix_ms: u64,
    /// Cost in US dollars, 0 when not reported.
    pub cost_usd: f64,
    /// Tokens, summed over the usage counters named `tokens` or `…_tokens`.
    pub tokens: f64,
    /// How long it took, seconds (0 while it runs).
    pub seconds: f64,
}

impl Call {
    pub fn of(r: &Receipt) -> Call {
        let tokens = r
            .usage
            .iter()
            .filter(|(k, _)| k == "tokens" || k.ends_with("_tokens"))
            .filter_map(|(_, v)| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
            .sum();
        let seconds = if r.outcome == Outcome::Running {
            0.0
        } else {
            r.ended_unix_ms.saturating_sub(r.started_unix_ms) as f64 / 1000.0
        };
        Call {
            item: r.item.clone(),
            role: r.role.word().to_string(),
            day: day_of(r.started_unix_ms),
            started_unix_ms: r.started_unix_ms,
            cost_usd: r
                .cost_usd
                .filter(|c| c.is_finite() && *c >= 0.0)
                .unwrap_or(0.0),
            tokens,
            seconds,
        }
    }
}

/// The UTC day of a time in ms since the epoch.
pub fn day_of(unix_ms: u64) -> String {
    crate::printer::rfc3339_ms(unix_ms)
        .get(..10)
        .unwrap_or_default()
        .to_string()
}

/// The calls as last read, and the directory state they were read at.
struct Cached {
    dir: PathBuf,
    modified: Option<SystemTime>,
    calls: Arc<Vec<Call>>,
    unreadable: usize,
}

static CACHE: Mutex<Option<Cached>> = Mutex::new(None);

/// This clone's calls, read again only when the receipts directory changed (blocking).
pub fn calls(repo: &Path) -> (Arc<Vec<Call>>, usize) {
    let dir = crate::git::git_dir(repo).join("stet/receipts");
    let modified = std::fs::metadata(&dir).and_then(|m| m.modified()).ok();
    if let Ok(cache) = CACHE.lock() {
        if let Some(c) = cache.as_ref() {
            if c.dir == dir && c.modified == modified && modified.is_some() {
                return (c.calls.clone(), c.unreadable);
            }
        }
    }
    let (receipts, unreadable) = crate::receipts::read_all(repo);
    let calls = Arc::new(receipts.iter().map(Call::of).collect::<Vec<_>>());
    // A directory changed within the file system's clock's grain of now may change again
    // with the same time: what was read then is not kept.
    let settled = modified
        .and_then(|m| SystemTime::now().duration_since(m).ok())
        .is_some_and(|age| age > std::time::Duration::from_secs(2));
    if let (true, Ok(mut cache)) = (settled, CACHE.lock()) {
        *cache = Some(Cached {
            dir,
            modified,
            calls: calls.clone(),
            unreadable: unreadable.len(),
        });
    }
    (calls, unreadable.len())
}

/// A chart as the page shows it: the drawing and its numbers.
pub struct Figure {
    /// The anchor of its heading.
    pub id: &'static str,
    pub chart: Chart,
    pub svg: Svg,
    /// What the reader should know of how it was counted.
    pub note: &'static str,
}

impl Figure {
    /// Whether every value is zero: nothing was reported (an agent that reports no cost or
    /// usage), which a chart of flat zeros would only hide.
    pub fn all_zero(&self) -> bool {
        self.chart
            .series
            .iter()
            .all(|s| s.values.iter().all(|v| *v == 0.0))
    }

    fn bars(id: &'static str, chart: Chart, note: &'static str) -> Figure {
        Figure {
            id,
            svg: charts::bars(&chart),
            chart,
            note,
        }
    }

    /// The value of series `k` at category `i`, as the table says it.
    pub fn cell(&self, k: &usize, i: &usize) -> String {
        charts::number(
            self.chart
                .series
                .get(*k)
                .and_then(|s| s.values.get(*i))
                .copied()
                .unwrap_or(0.0),
        )
    }

    /// The total of category `i`.
    pub fn total(&self, i: &usize) -> String {
        charts::number(
            self.chart
                .series
                .iter()
                .filter_map(|s| s.values.get(*i))
                .sum(),
        )
    }
}

/// The roles in the order a lane meets them, then any other.
fn role_order(role: &str) -> (usize, String) {
    let rank = ["implement", "check", "review", "land", "proof"]
        .iter()
        .position(|r| *r == role)
        .unwrap_or(9);
    (rank, role.to_string())
}

/// A chart of `measure` summed per (category, role), categories in `order`.
fn by_role(
    title: &str,
    unit: &str,
    calls: &[&Call],
    category: impl Fn(&Call) -> Option<String>,
    order: &[String],
    labels: &BTreeMap<String, String>,
    measure: impl Fn(&Call) -> f64,
) -> Chart {
    let mut roles: Vec<String> = calls.iter().map(|c| c.role.clone()).collect();
    roles.sort_by_key(|r| role_order(r));
    roles.dedup();
    let index: BTreeMap<&String, usize> = order.iter().enumerate().map(|(i, c)| (c, i)).collect();
    let mut series: Vec<Series> = roles
        .iter()
        .map(|r| Series {
            name: r.clone(),
            values: vec![0.0; order.len()],
        })
        .collect();
    for c in calls {
        let Some(cat) = category(c) else { continue };
        let (Some(&i), Some(k)) = (index.get(&cat), roles.iter().position(|r| *r == c.role)) else {
            continue;
        };
        if let Some(v) = series.get_mut(k).and_then(|s| s.values.get_mut(i)) {
            *v += measure(c);
        }
    }
    // A role with nothing to show is left out of this chart.
    series.retain(|s| s.values.iter().any(|v| *v > 0.0));
    Chart {
        title: title.to_string(),
        unit: unit.to_string(),
        categories: order
            .iter()
            .map(|c| labels.get(c).cloned().unwrap_or_else(|| c.clone()))
            .collect(),
        series,
    }
}

/// Everything the page draws.
pub struct Costs {
    pub figures: Vec<Figure>,
    pub calls: usize,
    pub total_cost: String,
    pub total_tokens: String,
    pub total_seconds: String,
    pub unreadable: usize,
}

/// The page's figures from `calls` and the queue's `rows`.
pub fn figures(calls: &[Call], rows: &[crate::story::Row]) -> Vec<Figure> {
    let all: Vec<&Call> = calls.iter().collect();
    let mut days: Vec<String> = calls.iter().map(|c| c.day.clone()).collect();
    days.sort();
    days.dedup();
    let days: Vec<String> = days.split_off(days.len().saturating_sub(DAYS_CHARTED));
    let no_labels = BTreeMap::new();
    // Items by their latest call, the latest last; labelled by their handle.
    let mut latest: BTreeMap<&str, u64> = BTreeMap::new();
    for c in calls.iter().filter(|c| !c.item.is_empty()) {
        let t = latest.entry(&c.item).or_default();
        *t = (*t).max(c.started_unix_ms);
    }
    let mut items: Vec<(&str, u64)> = latest.into_iter().collect();
    items.sort_by_key(|(id, t)| (*t, *id));
    let items: Vec<String> = items
        .iter()
        .skip(items.len().saturating_sub(ITEMS_CHARTED))
        .map(|(id, _)| id.to_string())
        .collect();
    let handles: BTreeMap<String, String> = rows
        .iter()
        .map(|r| (r.id.clone(), r.handle.clone()))
        .collect();
    let day = |c: &Call| Some(c.day.clone());
    let item = |c: &Call| Some(c.item.clone());
    let mut figures = vec![
        Figure::bars(
            "cost-per-day",
            by_role("Cost per day", "USD", &all, day, &days, &no_labels, |c| {
                c.cost_usd
            }),
            "the calls' reported cost, by the UTC day each call started, split by role",
        ),
        Figure::bars(
            "tokens-per-day",
            by_role(
                "Tokens per day",
                "tokens",
                &all,
                day,
                &days,
                &no_labels,
                |c| c.tokens,
            ),
            "the usage counters named tokens or …_tokens, summed",
        ),
        Figure::bars(
            "cost-per-item",
            by_role("Cost per item", "USD", &all, item, &items, &handles, |c| {
                c.cost_usd
            }),
            "the items with the latest calls, by handle",
        ),
        Figure::bars(
            "tokens-per-item",
            by_role(
                "Tokens per item",
                "tokens",
                &all,
                item,
                &items,
                &handles,
                |c| c.tokens,
            ),
            "the items with the latest calls, by handle",
        ),
    ];
    // Time per stage, overall: one bar per role.
    let mut roles: Vec<String> = calls.iter().map(|c| c.role.clone()).collect();
    roles.sort_by_key(|r| role_order(r));
    roles.dedup();
    let mut seconds = vec![0.0; roles.len()];
    let mut counts = vec![0.0; roles.len()];
    for c in calls {
        if let Some(k) = roles.iter().position(|r| *r == c.role) {
            if let (Some(s), Some(n)) = (seconds.get_mut(k), counts.get_mut(k)) {
                *s += c.seconds;
                *n += 1.0;
            }
        }
    }
    figures.push(Figure::bars(
        "time-per-stage",
        Chart {
            title: "Time per stage".into(),
            unit: "s".into(),
            categories: roles.clone(),
            series: vec![Series {
                name: "seconds".into(),
                values: seconds,
            }],
        },
        "every call's time from its start to its end, summed by role (implement, check, review; proof for the walls' live launch)",
    ));
    figures.push(Figure::bars(
        "time-per-item",
        by_role(
            "Time per stage, per item",
            "s",
            &all,
            item,
            &items,
            &handles,
            |c| c.seconds,
        ),
        "each item's calls' time, split by role",
    ));
    figures.push(landed_and_failed(calls, rows));
    figures
}

/// Landed and failed items so far, by day: an item counts on the day of its last call on
/// this clone (the landing or the failure follows it), by the state the remote gives it.
fn landed_and_failed(calls: &[Call], rows: &[crate::story::Row]) -> Figure {
    let mut last: BTreeMap<&str, u64> = BTreeMap::new();
    for c in calls.iter().filter(|c| !c.item.is_empty()) {
        let t = last.entry(&c.item).or_default();
        *t = (*t).max(c.started_unix_ms);
    }
    let mut ended: Vec<(String, &str)> = rows
        .iter()
        .filter(|r| matches!(r.state, ItemState::Landed | ItemState::Failed))
        .filter_map(|r| {
            last.get(r.id.as_str())
                .map(|t| (day_of(*t), r.state.word()))
        })
        .collect();
    ended.sort();
    let mut days: Vec<String> = ended.iter().map(|(d, _)| d.clone()).collect();
    days.dedup();
    let days: Vec<String> = days.split_off(days.len().saturating_sub(DAYS_CHARTED));
    let so_far = |state: &str| -> Vec<f64> {
        days.iter()
            .map(|d| ended.iter().filter(|(e, s)| e <= d && *s == state).count() as f64)
            .collect()
    };
    let chart = Chart {
        title: "Landed and failed so far".into(),
        unit: "items".into(),
        categories: days.clone(),
        series: vec![
            Series {
                name: "landed".into(),
                values: so_far("landed"),
            },
            Series {
                name: "failed".into(),
                values: so_far("failed"),
            },
        ],
    };
    Figure {
        id: "landed-failed",
        svg: charts::steps(&chart),
        chart,
        note: "items landed or failed as the remote says, each on the UTC day of its last call on this clone, counted up to each day",
    }
}

#[derive(askama::Template)]
#[template(path = "board/costs.html")]
pub struct CostsPage {
    pub chrome: Chrome,
    pub costs: Costs,
}

pub async fn page(
    State(board): State<Shared>,
    Extension(session): Extension<Session>,
) -> Result<Html<String>, PageError> {
    let repo = board.options.repo.clone();
    let (calls, unreadable) = tokio::task::spawn_blocking(move || calls(&repo))
        .await
        .map_err(|e| PageError::internal(format!("reading the receipts failed: {e}")))?;
    let snapshot = board.model.snapshot();
    let figures = figures(&calls, &snapshot.rows);
    let costs = Costs {
        figures,
        calls: calls.len(),
        total_cost: charts::number(calls.iter().map(|c| c.cost_usd).sum()),
        total_tokens: charts::number(calls.iter().map(|c| c.tokens).sum()),
        total_seconds: charts::number(calls.iter().map(|c| c.seconds).sum()),
        unreadable,
    };
    render(&CostsPage {
        chrome: Chrome::of(&board, &session, "costs"),
        costs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(item: &str, role: &str, day: u64, cost: f64, tokens: f64, seconds: f64) -> Call {
        let started = 1_764_806_400_000 + day * 86_400_000; // 2025-12-04
        Call {
            item: item.into(),
            role: role.into(),
            day: day_of(started),
            started_unix_ms: started,
            cost_usd: cost,
            tokens,
            seconds,
        }
    }

    fn row(id: &str, handle: &str, state: &str) -> crate::story::Row {
        crate::story::Row {
            id: id.into(),
            handle: handle.into(),
            state: crate::story::ItemState::from_word(state).unwrap(),
            ..Default::default()
        }
    }

    #[test]
    fn the_figures_sum_the_calls_by_day_item_and_role() {
        let calls = vec![
            call("a1", "implement", 0, 0.5, 100.0, 10.0),
            call("a1", "review", 0, 0.25, 50.0, 4.0),
            call("b2", "implement", 1, 1.0, 200.0, 20.0),
            call("b2", "check", 1, 0.0, 0.0, 2.5),
        ];
        let rows = vec![row("a1", "fix-<b>", "landed"), row("b2", "other", "failed")];
        let figures = figures(&calls, &rows);
        let cost = &figures[0].chart;
        assert_eq!(cost.categories, vec!["2025-12-04", "2025-12-05"]);
        assert_eq!(cost.series[0].name, "implement");
        assert_eq!(cost.series[0].values, vec![0.5, 1.0]);
        assert_eq!(cost.series[1].name, "review");
        // The check reported no cost: it is no series of the cost chart.
        assert_eq!(cost.series.len(), 2);
        let per_item = &figures[2];
        assert_eq!(per_item.chart.categories, vec!["fix-<b>", "other"]);
        assert_eq!(per_item.total(&0), "0.75");
        let stages = &figures[4].chart;
        assert_eq!(stages.categories, vec!["implement", "check", "review"]);
        assert_eq!(stages.series[0].values, vec![30.0, 2.5, 4.0]);
        let ended = &figures[6].chart;
        assert_eq!(ended.series[0].values, vec![1.0, 1.0], "landed so far");
        assert_eq!(ended.series[1].values, vec![0.0, 1.0], "failed so far");
        assert!(figures[2].svg.0.contains("fix-&lt;b&gt;"));
    }

    #[test]
    fn tokens_are_the_usage_counters_named_tokens() {
        let mut r: Receipt = serde_json::from_value(serde_json::json!({
            "id": "r", "run": "drive-1", "item": "a1", "lane": "stet/a1", "role": "implement",
            "runtime": {"name": "docker", "version": "1", "library_sha256": ""},
            "runtime_reason": "", "harness": {"name": "command", "version": "1", "library_sha256": ""},
            "image": "", "network": "", "started_unix_ms": 1000, "ended_unix_ms": 3500,
            "exit_code": 0, "exit_signal": null, "outcome": "done", "detail": "",
            "retry_at_unix": null, "cost_usd": 0.0125,
            "usage": [["input_tokens", "1000"], ["output_tokens", "234"], ["turns", "3"], ["tokens", "x"]],
            "commit_before": "", "commit_after": "", "log": "/x", "session": []
        }))
        .unwrap();
        let c = Call::of(&r);
        assert_eq!(c.tokens, 1234.0);
        assert_eq!(c.cost_usd, 0.0125);
        assert_eq!(c.seconds, 2.5);
        r.outcome = Outcome::Running;
        assert_eq!(Call::of(&r).seconds, 0.0, "a running call has no time yet");
    }
}
