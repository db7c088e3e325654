//! The sandboxes of a lane's later stages, made while its earlier ones run.
//!
//! A sandbox costs the engine a few hundred milliseconds to make, which a lane used to
//! wait for at every stage. Now, as a stage begins, its own sandbox and the next stage's
//! (the check's, or the review call's) are made on threads of their own, and the stage
//! that comes to need one takes it ready. Nothing is shared: each sandbox is made fresh
//! for one stage and used once, by that stage alone; nothing of the agent's runs in it
//! before its stage does (stet's own egress bridge starts with it). A call's sandbox is taken only if the call's launch, made
//! again when the call begins, asks for exactly what it was made with (mounts, network,
//! environment), and its profile copy
//! is of the profile as it is now (the same login, nothing carried back since); otherwise — and for every sandbox no stage came to need — it is
//! retired unused.

use std::thread::{Scope, ScopedJoinHandle};

use crate::error::CliError;
use crate::harness::{CallProfile, Ready};
use crate::sandbox::{Reaper, Sandbox};

/// An agent call made ready ahead: its own profile copy, and its sandbox made from the
/// launch the harness gave for that copy.
pub(super) struct PreparedCall<'a> {
    pub profile: CallProfile,
    pub ready: Ready<'a>,
    /// The stored login's expiry when the copy was made (a renewal since makes the copy
    /// stale).
    pub login_expiry: u64,
    /// How many settles had carried something back into the profile when the copy was
    /// made (one since makes the copy stale).
    pub settled: u64,
}

impl PreparedCall<'_> {
    /// Ends it unused (its profile copy goes with it).
    pub fn discard(self, reaper: Option<&Reaper>) {
        self.ready.discard(reaper);
    }
}

type Making<'scope, T> = Option<ScopedJoinHandle<'scope, Result<T, CliError>>>;

/// What is being made ahead for one lane. Every thread it started is joined, and what it
/// made and no stage took is retired, by [`Ahead::discard`] (or when the scope ends).
pub(super) struct Ahead<'scope, 'env> {
    pub(super) scope: &'scope Scope<'scope, 'env>,
    pub(super) implement: Making<'scope, PreparedCall<'env>>,
    pub(super) check: Making<'scope, Sandbox<'env>>,
    pub(super) review: Making<'scope, PreparedCall<'env>>,
}

impl<'scope, 'env> Ahead<'scope, 'env> {
    pub fn new(scope: &'scope Scope<'scope, 'env>) -> Self {
        Ahead {
            scope,
            implement: None,
            check: None,
            review: None,
        }
    }

    /// The implementing call's, if one was made ahead and came out well. A preparation
    /// that failed is dropped: the call makes its sandbox itself, where a failure is
    /// recorded in its receipt.
    pub fn take_implement(&mut self) -> Option<PreparedCall<'env>> {
        joined(self.implement.take())
    }

    /// The review call's, as [`Ahead::take_implement`].
    pub fn take_review(&mut self) -> Option<PreparedCall<'env>> {
        joined(self.review.take())
    }

    /// The check's sandbox, if one was made ahead.
    pub fn take_check(&mut self) -> Option<Sandbox<'env>> {
        joined(self.check.take())
    }

    /// Retires everything made ahead that no stage took.
    pub fn discard(mut self, reaper: Option<&Reaper>) {
        if let Some(call) = self.take_implement() {
            call.discard(reaper);
        }
        if let Some(sandbox) = self.take_check() {
            sandbox.retire(reaper);
        }
        if let Some(call) = self.take_review() {
            call.discard(reaper);
        }
    }
}

fn joined<T>(making: Making<'_, T>) -> Option<T> {
    // A preparation that panicked (a bug) made nothing to use: the stage makes its own.
    making.and_then(|m| m.join().ok()).and_then(Result::ok)
}
