//! The walls: the last proof of each runtime and harness made in this repository (by
//! `stet walls` or a drive's start-up proof, kept by [`crate::walls::record`]), each wall's
//! state and when; and the plugins — each probed in its own child process, as `stet
//! plugins probe` does ([`crate::plugin_report`]) — with why each was selected or passed
//! over.
//!
//! The probe runs on a blocking thread the first time the page is opened and is kept (one
//! report, replaced whole); the page's "probe again" form (a POST with the session's form
//! token) runs it again.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{Html, Redirect};
use axum::{Extension, Form};
use serde::Deserialize;

use super::{render, Chrome, PageError};
use crate::board::auth::{form_token_ok, Session};
use crate::board::Shared;
use crate::plugin_report::{PluginReport, Report};
use crate::walls::record::Record;

/// The plugins as last probed.
pub struct Probed {
    /// When, as RFC 3339.
    pub at: String,
    /// The report, or why there is none (settings that cannot be read, a plugin's table
    /// that is wrong).
    pub report: Result<Report, String>,
}

/// The last probe, kept for the process (one board serves one repository).
static PROBED: tokio::sync::Mutex<Option<Arc<Probed>>> = tokio::sync::Mutex::const_new(None);

/// Probes the plugins now (blocking: a child process each).
fn probe(board: &Shared) -> Probed {
    let report = crate::settings::resolve(&board.options.plugins_dirs, &Default::default())
        .and_then(|settings| crate::plugin_report::survey(&settings, &[]))
        .map_err(|e| {
            let mut said = e.message.clone();
            if let Some(hint) = &e.hint {
                said.push_str(&format!(" (hint: {hint})"));
            }
            said
        });
    Probed {
        at: crate::drive::clock(crate::board::model::now_unix()),
        report,
    }
}

/// The plugins as last probed, probing them first when they never were (or `again`).
async fn probed(board: &Shared, again: bool) -> Result<Arc<Probed>, PageError> {
    let mut kept = PROBED.lock().await;
    if let (Some(p), false) = (kept.as_ref(), again) {
        return Ok(p.clone());
    }
    let b = board.clone();
    let fresh = Arc::new(
        tokio::task::spawn_blocking(move || probe(&b))
            .await
            .map_err(|e| PageError::internal(format!("probing the plugins failed: {e}")))?,
    );
    *kept = Some(fresh.clone());
    Ok(fresh)
}

/// One record as the page shows it.
pub struct Proven {
    pub record: Record,
    /// When, as RFC 3339.
    pub when: String,
}

/// A plugin's line: what it is and why it is (not) available.
pub struct PluginLine<'a> {
    pub plugin: &'a PluginReport,
    /// Available, or why not, in a sentence.
    pub said: String,
    /// What to do, when it is not available.
    pub hint: String,
}

impl<'a> PluginLine<'a> {
    fn of(plugin: &'a PluginReport) -> PluginLine<'a> {
        let (said, hint) = match (&plugin.probe, &plugin.failure, &plugin.not_probed) {
            (Some(p), _, _) if p.available => {
                let version = if p.backend_version.is_empty() {
                    "version unknown".to_string()
                } else {
                    p.backend_version.clone()
                };
                (
                    format!("available: {version}, priority {}", p.priority),
                    String::new(),
                )
            }
            (Some(p), _, _) => (p.reason.clone(), p.remedy.clone()),
            (None, Some(f), _) => (f.summary(), f.hint()),
            (None, None, reason) => (reason.clone().unwrap_or_default(), String::new()),
        };
        PluginLine { plugin, said, hint }
    }
}

#[derive(askama::Template)]
#[template(path = "board/walls.html")]
pub struct WallsPage<'a> {
    pub chrome: Chrome,
    pub proven: Vec<Proven>,
    pub unreadable: Vec<String>,
    pub probed_at: &'a str,
    pub plugins: Vec<PluginLine<'a>>,
    /// The selection's lines (the runtime's, then the harness's), as `stet plugins probe`
    /// prints them.
    pub selection: Vec<String>,
    /// Why there is no report, when there is none.
    pub probe_error: Option<&'a str>,
}

pub async fn page(
    State(board): State<Shared>,
    Extension(session): Extension<Session>,
) -> Result<Html<String>, PageError> {
    let repo = board.options.repo.clone();
    let (records, unreadable) =
        tokio::task::spawn_blocking(move || crate::walls::record::read_all(&repo))
            .await
            .map_err(|e| PageError::internal(format!("reading the wall proofs failed: {e}")))?;
    let probed = probed(&board, false).await?;
    let (plugins, selection, probe_error) = match &probed.report {
        Ok(report) => (
            report.plugins.iter().map(PluginLine::of).collect(),
            report
                .selection
                .iter()
                .flat_map(|s| [&s.runtime, &s.harness])
                .flat_map(|s| {
                    // `stet plugins probe`'s lines, and the available ones passed over.
                    let chosen = s.chosen.clone().unwrap_or_default();
                    let passed = s.also_available.iter().map(move |other| {
                        format!(
                            "  {} available, passed over: {chosen} was chosen ({})",
                            other.name, s.reason
                        )
                    });
                    s.lines().into_iter().chain(passed)
                })
                .collect(),
            None,
        ),
        Err(why) => (Vec::new(), Vec::new(), Some(why.as_str())),
    };
    render(&WallsPage {
        chrome: Chrome::of(&board, &session, "walls"),
        proven: records
            .into_iter()
            .map(|record| Proven {
                when: crate::printer::rfc3339_ms(record.proven_unix_ms),
                record,
            })
            .collect(),
        unreadable,
        probed_at: &probed.at,
        plugins,
        selection,
        probe_error,
    })
}

/// The "probe again" form.
#[derive(Debug, Deserialize)]
pub struct ProbeAgain {
    #[serde(default)]
    pub csrf: String,
}

/// Probes the plugins again, then shows the page.
pub async fn probe_again(
    State(board): State<Shared>,
    Extension(session): Extension<Session>,
    Form(form): Form<ProbeAgain>,
) -> Result<Redirect, PageError> {
    if !form_token_ok(&session, &form.csrf) {
        return Err(PageError::forbidden(
            "this form's token is not this session's: reload the walls page and probe again from it",
        ));
    }
    probed(&board, true).await?;
    Ok(Redirect::to("/walls#plugins"))
}
