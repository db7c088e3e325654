//! Stet's records of the work: the configuration and its trust ([`config`], [`trust`],
//! [`settings`]), the queue and its items ([`queue`], [`handles`], [`queue_actions`]), who
//! holds what on the remote ([`reservations`], [`checkpoints`]), the base a lane starts
//! from ([`base`]), the lanes themselves ([`lanes`]) and the gate everything a sandbox
//! wrote crosses back through ([`gate`]), the receipts of every call ([`receipts`]),
//! landing ([`land`]), an item's story ([`story`]), and what `init` and `clean` do to them.
//!
//! Nothing here starts a sandbox or calls an agent: that is the walled call's crate, above.
//! See ARCHITECTURE.md at the repository root for the map of the host's crates.

#![forbid(unsafe_code)]

pub mod base;
pub mod checkpoints;
pub mod clean;
pub mod config;
pub mod gate;
pub mod handles;
pub mod init;
pub mod land;
pub mod lanes;
pub mod queue;
pub mod queue_actions;
pub mod receipts;
pub mod reservations;
pub mod seeds;
pub mod settings;
pub mod story;
pub mod trust;

use stet_base::{error, files, git, owner, printer, timestamp};
use stet_plugin_host::plugins;
