//! The walled call: a sandbox from a runtime plugin ([`sandbox`]), its network behind
//! stet's proxy ([`network`]) and its credentials as stand-ins ([`credentials`]), an agent
//! from a harness plugin ([`harness`]) with its login kept fresh ([`refresh`]), one call
//! made and recorded ([`call`]), the walls proven live before the first move ([`walls`]),
//! and what stands on them alone: `stet ask` ([`ask`]), `stet doctor` ([`doctor`]), a
//! call's transcript ([`transcript`]), the plugins' survey ([`plugin_report`]) and the scan
//! of a lane's added lines before a push ([`scan`]).
//!
//! See ARCHITECTURE.md at the repository root for the map of the host's crates.

#![forbid(unsafe_code)]

pub mod ask;
pub mod call;
pub mod credentials;
pub mod doctor;
pub mod harness;
pub mod network;
pub mod plugin_report;
pub mod refresh;
pub mod sandbox;
pub mod scan;
pub mod setup;
pub mod transcript;
pub mod walls;

use stet_base::{capture, error, files, git, owner, printer, text, timestamp};
use stet_plugin_host::plugins;
use stet_records::{base, config, gate, init, land, lanes, receipts, seeds, settings};
