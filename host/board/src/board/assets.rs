//! The style sheet and the script, compiled into stet and served from the board's own
//! origin (the policy allows no other, and no inline script).

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use super::Shared;

/// The one style sheet.
pub const CSS: &str = include_str!("static/board.css");
/// The one script: the live page's events, the drive's controls. The pages work without it
/// (a reload shows the same), it only keeps them current.
pub const JS: &str = include_str!("static/board.js");

pub fn routes() -> Router<Shared> {
    Router::new()
        .route(
            "/static/board.css",
            get(|| async {
                ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS).into_response()
            }),
        )
        .route(
            "/static/board.js",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
                    JS,
                )
                    .into_response()
            }),
        )
}
