//! The `stet` host: loads runtime and harness plugins, selects them, and (in later cuts)
//! drives the queue. `main.rs` is a thin shell over [`cli::main`].
//!
//! See ARCHITECTURE.md at the repository root for the code map.

pub use stet_base::{capture, error, files, git, owner, printer, text, timestamp};
pub use stet_plugin_host::plugins;

pub mod ask;
pub mod base;
pub mod board;
pub mod call;
pub mod checkpoints;
pub mod clean;
pub mod cli;
pub mod config;
pub mod credentials;
pub mod doctor;
pub mod drive;
pub mod gate;
pub mod handles;
pub mod harness;
pub mod init;
pub mod land;
pub mod lanes;
pub mod network;
pub mod plugin_report;
pub mod queue;
pub mod queue_actions;
pub mod receipts;
pub mod refresh;
pub mod reservations;
pub mod sandbox;
pub mod scan;
pub mod settings;
pub mod story;
pub mod transcript;
pub mod trust;
pub mod walls;
