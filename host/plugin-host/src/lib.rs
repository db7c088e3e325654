//! The plugin host: how stet finds plugins (manifests and the search path), trusts them
//! (`plugins.lock`), loads them (the one `unsafe` block of the host: the library's root
//! module, after its file and layout are checked), probes each in a child process of its
//! own and selects among them. What xtask and the benches need of stet's plugins, alone.
//!
//! See ARCHITECTURE.md at the repository root for the map of the host's crates.

#![deny(unsafe_code)]

pub mod plugins;

use stet_base::{error, files, printer, text, timestamp};
