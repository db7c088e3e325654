//! The drive: `stet drive` drains the queue — claims an item, opens its lane, makes its
//! calls through the walled call, checks and lands the result, records a receipt for every
//! call and a checkpoint for every move — as a state machine over the drive's own clock.
//!
//! See ARCHITECTURE.md at the repository root for the map of the host's crates.

#![forbid(unsafe_code)]

pub mod drive;

use stet_base::{capture, error, files, git, printer, text, timestamp};
use stet_call::{
    call, credentials, doctor, harness, network, refresh, sandbox, scan, setup, walls,
};
use stet_plugin_host::plugins;
use stet_records::{
    base, checkpoints, config, gate, land, lanes, queue, receipts, reservations, seeds, settings,
};
