//! The `stet` host: loads runtime and harness plugins, selects them, and (in later cuts)
//! drives the queue. `main.rs` is a thin shell over [`cli::main`].
//!
//! See ARCHITECTURE.md at the repository root for the code map.

pub use stet_base::{capture, error, files, git, owner, printer, text, timestamp};
pub use stet_plugin_host::plugins;
pub use stet_records::{
    base, checkpoints, clean, config, gate, handles, init, land, lanes, queue, queue_actions,
    receipts, reservations, settings, story, trust,
};

pub mod ask;
pub mod board;
pub mod call;
pub mod cli;
pub mod credentials;
pub mod doctor;
pub mod drive;
pub mod harness;
pub mod network;
pub mod plugin_report;
pub mod refresh;
pub mod sandbox;
pub mod scan;
pub mod transcript;
pub mod walls;
