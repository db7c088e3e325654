//! The board's pages: a module each, with its handler and its template struct. Every page
//! extends `board/base.html` (the navigation, the style sheet, the script) and gets its
//! [`Chrome`]: the session's form token and what the navigation says.

pub mod costs;
pub mod drive;
pub mod item;
pub mod live;
pub mod queue;
pub mod walls;

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;

use super::Shared;

/// Every route of every page.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/queue") }))
        .route("/queue", get(queue::page))
        .route("/costs", get(costs::page))
        .route("/walls", get(walls::page).post(walls::probe_again))
        .route("/live", get(live::page))
        .route("/live/events", get(live::events))
        .route("/live/stop", post(live::stop))
        .route("/drive", get(drive::form).post(drive::start))
        .route("/drive/{n}", get(drive::one))
        .route("/drive/{n}/consent", post(drive::consent))
        .route("/drive/{n}/stop", post(drive::stop))
        .route("/add", post(item::add))
        .route("/item/{id}", get(item::page))
        .route("/item/{id}/prompt/{n}", get(item::prompt))
        .route("/item/{id}/call/{receipt}", get(item::call))
        .route("/item/{id}/retry", post(item::retry))
        .route("/item/{id}/cancel", post(item::cancel))
}

/// What every page's frame needs.
pub struct Chrome {
    /// The page's name in the navigation (`queue`, `live`, `costs`, `walls`).
    pub current: &'static str,
    /// The session's form token, for every form that POSTs.
    pub csrf: String,
    /// The repository's directory name, for the title.
    pub repo: String,
    /// Why what the page shows may be stale (the remote did not answer), when it may.
    pub remote_note: Option<String>,
}

impl Chrome {
    /// The frame of page `current` for `session`.
    pub fn of(board: &Shared, session: &super::auth::Session, current: &'static str) -> Chrome {
        Chrome {
            current,
            csrf: session.csrf.clone(),
            repo: board
                .options
                .repo
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            // git's words about the remote: whoever answered wrote them.
            remote_note: board
                .model
                .snapshot()
                .remote_note
                .as_deref()
                .map(|n| crate::text::inert(n).into_owned()),
        }
    }
}

/// A page that could not be made, as the browser gets it: a status and a sentence.
#[derive(Debug)]
pub struct PageError {
    pub status: StatusCode,
    pub message: String,
}

impl PageError {
    pub fn not_found(message: impl Into<String>) -> PageError {
        PageError {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> PageError {
        PageError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }

    pub fn forbidden(message: impl Into<String>) -> PageError {
        PageError {
            status: StatusCode::FORBIDDEN,
            message: message.into(),
        }
    }

    pub fn internal(message: impl Into<String>) -> PageError {
        PageError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.into(),
        }
    }
}

impl From<askama::Error> for PageError {
    fn from(e: askama::Error) -> PageError {
        PageError::internal(format!("the page could not be drawn: {e}"))
    }
}

#[derive(askama::Template)]
#[template(path = "board/error.html")]
struct ErrorPage<'a> {
    status: u16,
    message: &'a str,
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let body = askama::Template::render(&ErrorPage {
            status: self.status.as_u16(),
            message: &self.message,
        })
        .unwrap_or_else(|_| "stet board: the page could not be drawn".to_string());
        (self.status, Html(body)).into_response()
    }
}

/// Renders a page's template.
pub fn render(template: &impl askama::Template) -> Result<Html<String>, PageError> {
    Ok(Html(template.render()?))
}
