//! Stet's command line: every `stet` command, parsed by clap and run on the crates below
//! (`stet-base` … `stet-board`), its output through the printer and its exit code from the
//! error's kind. `host/src/main.rs` (the `stet` binary) is a thin shell over [`cli::main`].
//!
//! The host's concepts are re-exported here by their module names, so the fuzz targets and
//! the benches reach every parser through one crate.
//!
//! See ARCHITECTURE.md at the repository root for the map of the host's crates.

#![forbid(unsafe_code)]

pub use stet_base::{capture, error, files, git, owner, printer, text, timestamp};
pub use stet_board::board;
pub use stet_call::{
    ask, call, credentials, doctor, harness, network, plugin_report, refresh, sandbox, scan, setup,
    transcript, walls,
};
pub use stet_drive::drive;
pub use stet_plugin_host::plugins;
pub use stet_records::{
    base, checkpoints, clean, config, gate, handles, init, land, lanes, queue, queue_actions,
    receipts, reservations, seeds, settings, story, trust,
};

pub mod cli;
