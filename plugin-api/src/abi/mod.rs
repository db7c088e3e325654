//! The binary interface, one module per API version.
//!
//! [`v1_2`] is current. Older modules are frozen copies of what earlier releases exported;
//! the host falls back to them, newest first, when a plugin's root module does not match
//! the current layout. A new minor version appends methods to a trait or functions to
//! the root module, and freezes a copy of the previous version's changed items here.

pub mod v1_0;
pub mod v1_1;
pub mod v1_2;
