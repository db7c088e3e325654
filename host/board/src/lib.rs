//! `stet board`: the web page on 127.0.0.1 that shows the queue, the live drives, an
//! item's story, the walls and the costs, and offers the CLI's own actions behind a token.
//! The only host crate with a web stack (axum, hyper, tokio, askama).
//!
//! See ARCHITECTURE.md at the repository root for the map of the host's crates.

#![forbid(unsafe_code)]

pub mod board;

use stet_base::{error, files, git, printer, text};
use stet_call::{call, plugin_report, transcript, walls};
use stet_drive::drive;
use stet_records::{
    config, handles, lanes, queue, queue_actions, receipts, reservations, settings, story,
};
