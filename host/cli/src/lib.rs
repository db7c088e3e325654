//! The `stet` host: loads runtime and harness plugins, selects them, and (in later cuts)
//! drives the queue. `main.rs` is a thin shell over [`cli::main`].
//!
//! See ARCHITECTURE.md at the repository root for the code map.

pub use stet_base::{capture, error, files, git, owner, printer, text, timestamp};
pub use stet_board::board;
pub use stet_call::{
    ask, call, credentials, doctor, harness, network, plugin_report, refresh, sandbox, scan,
    transcript, walls,
};
pub use stet_drive::drive;
pub use stet_plugin_host::plugins;
pub use stet_records::{
    base, checkpoints, clean, config, gate, handles, init, land, lanes, queue, queue_actions,
    receipts, reservations, settings, story, trust,
};

pub mod cli;
