//! Plugins: finding them (manifests only), loading them (abi_stable), probing them in
//! isolated child processes, and selecting the runtime and harness.
//!
//! The host depends only on `stet-plugin-api`; no module here names a backend.

pub mod discovery;
pub mod install;
pub mod loader;
pub mod manifest;
pub mod probe;
pub mod selection;
pub mod survey;
pub mod trust;
pub mod version;
