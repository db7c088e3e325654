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
//!
//! The first stage of the next item is made ahead too ([`NextAhead`]): once a lane's work
//! is past its implementing call, the next item this lane would take is claimed ahead
//! among the drive's lanes, its lane opened and its implementing call made ready, so that
//! when the item lands the next one starts at once. It is only an offer: the item is still
//! taken on the remote as any other; another lane that comes to want it takes it over; and
//! it is let go (the sandbox retired, the claim dropped, the lane kept for whoever takes
//! the item) if the take loses, or as soon as the current item goes round again or ends
//! any way but landed.

use std::cell::RefCell;
use std::thread::{Scope, ScopedJoinHandle};

use crate::error::Error;
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

type Making<'scope, T> = Option<ScopedJoinHandle<'scope, Result<T, Error>>>;

/// What is being made ahead for one lane. Every thread it started is joined, and what it
/// made and no stage took is retired, by [`Ahead::discard`] (or when the scope ends).
pub(super) struct Ahead<'scope, 'env> {
    pub(super) scope: &'scope Scope<'scope, 'env>,
    /// The implementing call made ready before the lane's work began (by [`NextAhead`]).
    pub(super) implement_ready: Option<PreparedCall<'env>>,
    pub(super) implement: Making<'scope, PreparedCall<'env>>,
    pub(super) check: Making<'scope, Sandbox<'env>>,
    pub(super) review: Making<'scope, PreparedCall<'env>>,
}

impl<'scope, 'env> Ahead<'scope, 'env> {
    pub fn new(scope: &'scope Scope<'scope, 'env>) -> Self {
        Ahead {
            scope,
            implement_ready: None,
            implement: None,
            check: None,
            review: None,
        }
    }

    /// The implementing call's, if one was made ahead and came out well. A preparation
    /// that failed is dropped: the call makes its sandbox itself, where a failure is
    /// recorded in its receipt.
    pub fn take_implement(&mut self) -> Option<PreparedCall<'env>> {
        self.implement_ready
            .take()
            .or_else(|| joined(self.implement.take()))
    }

    /// Whether the implementing call is made ahead, or being made.
    pub fn has_implement(&self) -> bool {
        self.implement_ready.is_some() || self.implement.is_some()
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
        while let Some(call) = self.take_implement() {
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

/// The next item's lane, opened while this lane's item was still at work.
pub(super) struct NextLane<'env> {
    /// The item, claimed ahead for this lane in the drive's tally (not yet taken on the
    /// remote). Its lane was made for it ahead (nothing of one was on this clone).
    pub id: String,
    /// Its first implementing call, made ready; `None` when that failed (the call then
    /// makes its own sandbox, where a failure is recorded).
    pub implement: Option<PreparedCall<'env>>,
}

/// How a lane's next item is made ahead and let go (the lane's worker, with the queue).
pub(super) trait MakesNext<'env>: Sync {
    /// Claims the next item this lane would take, opens its lane and makes its first
    /// call ready; `None` when there is none to make ahead. An error leaves nothing
    /// claimed or made.
    fn make_next(&self) -> Result<Option<NextLane<'env>>, Error>;
    /// Lets a next lane go unused: its sandbox retired, its claim dropped (its lane stays,
    /// for whoever takes the item).
    fn let_go(&self, next: NextLane<'env>);
}

/// The next item's lane being made ahead, on a thread of the lane loop's scope; at most
/// one at a time. Used by the lane's own thread alone.
pub(super) struct NextAhead<'scope, 'env> {
    scope: &'scope Scope<'scope, 'env>,
    maker: &'env dyn MakesNext<'env>,
    making: RefCell<Making<'scope, Option<NextLane<'env>>>>,
}

impl<'scope, 'env> NextAhead<'scope, 'env> {
    pub fn new(scope: &'scope Scope<'scope, 'env>, maker: &'env dyn MakesNext<'env>) -> Self {
        NextAhead {
            scope,
            maker,
            making: RefCell::new(None),
        }
    }

    /// Starts making the next lane on a thread of its own, unless one is made or being
    /// made.
    pub fn start(&self) {
        let mut making = self.making.borrow_mut();
        if making.is_none() {
            let maker = self.maker;
            *making = Some(self.scope.spawn(move || maker.make_next()));
        }
    }

    /// What was made, once its making ended; `None` if nothing was started, nothing was
    /// there to make, or the making failed.
    pub fn take(&self) -> Option<NextLane<'env>> {
        let making = self.making.borrow_mut().take();
        joined(making).flatten()
    }

    /// Lets go what is made or being made: the current item goes round again, or the
    /// lane's work ends.
    pub fn cancel(&self) {
        if let Some(next) = self.take() {
            self.maker.let_go(next);
        }
    }

    /// Lets `next`, taken before, go unused.
    pub fn let_go(&self, next: NextLane<'env>) {
        self.maker.let_go(next);
    }
}

fn joined<T>(making: Making<'_, T>) -> Option<T> {
    // A preparation that panicked (a bug) made nothing to use: the stage makes its own.
    making.and_then(|m| m.join().ok()).and_then(Result::ok)
}
