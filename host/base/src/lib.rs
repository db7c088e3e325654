//! Stet's floor: what every other host crate stands on and which needs nothing of theirs —
//! errors with a cause and a hint ([`error`]), text from others made inert ([`text`]),
//! all output ([`printer`]), bounded file reads and locks ([`files`]), a process's output
//! captured ([`capture`]), the person's git and the inert git a lane gets ([`git`]), time
//! as stet writes it ([`timestamp`]) and who owns what a process leaves behind ([`owner`]).
//!
//! See ARCHITECTURE.md at the repository root for the map of the host's crates.

#![forbid(unsafe_code)]

pub mod capture;
pub mod error;
pub mod files;
pub mod git;
pub mod owner;
pub mod printer;
pub mod text;
pub mod timestamp;
