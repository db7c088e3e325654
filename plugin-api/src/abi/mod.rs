//! The binary interface, one module per line of versions.
//!
//! [`v1`] is current: the interface of 1.2 and of every later minor, which only ever grows
//! by appending defaulted methods (see its documentation). [`v1_0`] and [`v1_1`] are frozen
//! copies of what 1.0 and 1.1 plugins export, which moved the end of their prefix and so
//! need modules of their own; [`v1_2`] is the frozen 1.2 layout, the prefix of `v1`, kept
//! so that a plugin exported exactly as 1.2 did can be built for the tests. No later minor
//! adds a module.

pub mod v1;
pub mod v1_0;
pub mod v1_1;
pub mod v1_2;
