//! The reservation keeper: holds the one reservation a drive works under and renews it
//! while the lane is worked — during a long agent call, a check or a pace wait — so that it
//! lapses only when the drive is gone.
//!
//! One thread renews when a renewal is due; the lane's own pushes — a checkpoint, the
//! landing — carry a renewal or the release in the same atomic push ([`Keeper::renewing`],
//! [`Keeper::releasing`]), so no push is made for bookkeeping alone: a stage change is kept
//! here and reaches the remote with the next of those. Both write the same ref on the
//! remote by compare-and-swap, so they take turns under one mutex: a CAS that raced the
//! other writer would otherwise look like a takeover. A reservation lost to a peer (it
//! lapsed while the remote was unreachable, and the peer took it) is remembered; the drive
//! checks at each stage boundary and stops working that lane.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::checkpoints::SaveError;
use crate::reservations::{Held, Remote, Reservation, ReservationError};

#[derive(Default)]
struct State {
    held: Option<Held>,
    /// The lane's stage now, for the next write of the reservation.
    stage: Option<String>,
    /// Set when the reservation was lost to another drive.
    lost: Option<String>,
    /// The last renewal that could not reach the remote.
    unreachable: Option<String>,
    /// Set when the drive ends: the thread returns.
    done: bool,
}

/// The reservation keeper; clones share it.
#[derive(Clone)]
pub struct Keeper {
    shared: Arc<(Mutex<State>, Condvar)>,
    /// The item held and when it lapses, for a second signal's last words: kept apart from
    /// `shared`, whose lock is held across git pushes, so reading it never waits on one.
    lapse: Arc<Mutex<Option<(String, i64)>>>,
    repo: PathBuf,
    remote: String,
    lease_secs: i64,
}

impl Keeper {
    /// Starts the keeper's thread for reservations on `remote` of `repo`, each lasting
    /// `lease_secs` without renewal; it renews once a third of the lease has passed (two
    /// thirds left), looking every sixth of it.
    pub fn start(repo: PathBuf, remote: String, lease_secs: i64) -> Keeper {
        let keeper = Keeper {
            shared: Arc::new((Mutex::new(State::default()), Condvar::new())),
            lapse: Arc::new(Mutex::new(None)),
            repo,
            remote,
            lease_secs,
        };
        let worker = keeper.clone();
        std::thread::spawn(move || worker.renew_loop());
        keeper
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn publish(&self, held: Option<&Held>) {
        *self.lapse.lock().unwrap_or_else(|p| p.into_inner()) =
            held.map(|h| (h.reservation.item.clone(), h.reservation.expires_at_unix));
    }

    fn remote(&self) -> Remote<'_> {
        Remote {
            repo: &self.repo,
            name: &self.remote,
        }
    }

    /// From now on, keeps `held`.
    pub fn hold(&self, held: Held) {
        let mut state = self.state();
        self.publish(Some(&held));
        state.stage = Some(held.reservation.stage.clone());
        state.held = Some(held);
        state.lost = None;
        state.unreachable = None;
        self.shared.1.notify_all();
    }

    /// The lane moves to `stage`: kept for the next write of the reservation (a renewal, a
    /// checkpoint's push), not pushed by itself. A reservation taken over by another drive
    /// is an error here.
    pub fn set_stage(&self, stage: &str) -> Result<(), String> {
        let mut state = self.state();
        if let Some(why) = &state.lost {
            return Err(why.clone());
        }
        state.stage = Some(stage.to_string());
        Ok(())
    }

    /// The reservation held, renewed for another lease at the lane's stage.
    fn renewed(&self, state: &State, held: &Held) -> Reservation {
        Reservation {
            stage: state
                .stage
                .clone()
                .unwrap_or_else(|| held.reservation.stage.clone()),
            expires_at_unix: now() + self.lease_secs,
            ..held.reservation.clone()
        }
    }

    /// The reservation was taken by a peer (`why`): nothing is held any more.
    fn lose(&self, state: &mut State, why: &str) {
        state.lost = Some(why.to_string());
        state.held = None;
        self.publish(None);
    }

    /// Runs `push` — a push that carries the renewal of the held reservation (from the
    /// first `Held` to the second) with refs of its own — under the keeper's lock; the
    /// renewal is kept when it succeeds, the reservation counted lost when a peer refused
    /// it. With nothing held, `push` gets `None`.
    pub fn renewing<T>(
        &self,
        push: impl FnOnce(Option<(&Held, &Held)>) -> Result<T, SaveError>,
    ) -> Result<T, SaveError> {
        let mut state = self.state();
        if let Some(why) = &state.lost {
            return Err(SaveError::TakenByPeer(why.clone()));
        }
        let Some(held) = state.held.clone() else {
            return push(None);
        };
        let next = self
            .remote()
            .record(&self.renewed(&state, &held))
            .map_err(SaveError::Remote)?;
        let pushed = push(Some((&held, &next)));
        match &pushed {
            Ok(_) => {
                self.publish(Some(&next));
                state.held = Some(next);
                state.unreachable = None;
            }
            Err(SaveError::TakenByPeer(why)) => self.lose(&mut state, why),
            Err(_) => {}
        }
        pushed
    }

    /// Runs `push` — a push that carries the release of the held reservation — under the
    /// keeper's lock; once it succeeds nothing is held (and nothing is left to release).
    pub fn releasing<T>(
        &self,
        push: impl FnOnce(Option<&Held>) -> Result<T, SaveError>,
    ) -> Result<T, SaveError> {
        let mut state = self.state();
        if let Some(why) = &state.lost {
            return Err(SaveError::TakenByPeer(why.clone()));
        }
        let held = state.held.clone();
        let pushed = push(held.as_ref());
        match &pushed {
            Ok(_) => {
                state.held = None;
                state.stage = None;
                self.publish(None);
            }
            Err(SaveError::TakenByPeer(why)) => self.lose(&mut state, why),
            Err(_) => {}
        }
        pushed
    }

    /// Renews the held reservation for another lease (at the lane's stage), under the
    /// state's lock: renewed, the remote unreachable (tried again later), or lost.
    fn renew(&self, state: &mut State) {
        let Some(held) = state.held.clone() else {
            return;
        };
        match self.remote().renew(&held, self.renewed(state, &held)) {
            Ok(renewed) => {
                self.publish(Some(&renewed));
                state.held = Some(renewed);
                state.unreachable = None;
            }
            Err(ReservationError::Remote { detail, .. }) => state.unreachable = Some(detail),
            Err(e) => self.lose(state, &e.to_string()),
        }
    }

    /// Why the last renewal could not reach the remote, if it could not.
    pub fn unreachable(&self) -> Option<String> {
        self.state().unreachable.clone()
    }

    /// Why the reservation was lost to another drive, if it was (no remote call).
    pub fn lost(&self) -> Option<String> {
        self.state().lost.clone()
    }

    /// The item held now and when its reservation lapses.
    pub fn lapse(&self) -> Option<(String, i64)> {
        self.lapse.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Stops keeping the reservation and releases it on the remote, if it is still ours.
    pub fn release(&self) -> Result<(), ReservationError> {
        let mut state = self.state();
        state.stage = None;
        let Some(held) = state.held.take() else {
            return Ok(());
        };
        self.publish(None);
        // Release what the remote holds now, if it is still ours (a renewal may have
        // happened since `held` was read).
        match self.remote().release(&held) {
            Err(ReservationError::Raced { .. }) => {
                match self.remote().get(&held.reservation.item) {
                    Ok(Some(now)) if now.reservation.holder == held.reservation.holder => {
                        self.remote().release(&now)
                    }
                    Ok(_) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            other => other,
        }
    }

    /// Ends the keeper's thread (the drive is over).
    pub fn finish(&self) {
        self.state().done = true;
        self.shared.1.notify_all();
    }

    fn renew_loop(&self) {
        // Renew once two thirds of the lease are left, looking every sixth of it (at least
        // every second, at most every minute), so a short lease (in tests) is kept too.
        let tick = Duration::from_secs((self.lease_secs / 6).clamp(1, 60) as u64);
        let mut state = self.state();
        loop {
            if state.done {
                return;
            }
            let due = state
                .held
                .as_ref()
                .is_some_and(|h| h.reservation.expires_at_unix - now() <= self.lease_secs * 2 / 3);
            if due && state.lost.is_none() {
                self.renew(&mut state);
            }
            state = self
                .shared
                .1
                .wait_timeout(state, tick)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}
