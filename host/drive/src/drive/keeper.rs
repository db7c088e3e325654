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
//!
//! Every stamp and every look is on the drive's [`Clock`]: a reservation is stamped, found
//! due and renewed on the same time the drive took it on, and a test moves that time. A
//! renewal never shortens a reservation: after the clock went back it keeps the expiry it
//! renews (peers read that expiry on their own clocks).

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};

use super::time::{Clock, Stop};
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
}

/// What the keeper knows, for a test to wait on.
#[cfg(test)]
#[derive(Debug)]
pub(super) struct Seen {
    /// When the reservation held lapses.
    pub expires: Option<i64>,
    /// Why it was lost to a peer.
    pub lost: Option<String>,
    /// Why its last renewal did not reach the remote.
    pub unreachable: Option<String>,
}

/// The reservation keeper; clones share it.
#[derive(Clone)]
pub struct Keeper {
    shared: Arc<Mutex<State>>,
    /// Notified whenever a renewal, a loss or an unreachable remote changed the state.
    changed: Arc<Condvar>,
    /// Asked when the drive ends: the thread's wait wakes at once and it returns. (Not the
    /// drive's stop: after a first signal the calls in flight finish, renewed.)
    done: Arc<Stop>,
    clock: Arc<dyn Clock>,
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
    /// thirds left), looking every sixth of it, on `clock`.
    pub fn start(repo: PathBuf, remote: String, lease_secs: i64, clock: Arc<dyn Clock>) -> Keeper {
        let keeper = Keeper::new(repo, remote, lease_secs, clock);
        keeper.clone().spawn();
        keeper
    }

    /// A keeper without its thread (it renews only when asked to [`Keeper::look`]).
    fn new(repo: PathBuf, remote: String, lease_secs: i64, clock: Arc<dyn Clock>) -> Keeper {
        Keeper {
            shared: Arc::new(Mutex::new(State::default())),
            changed: Arc::new(Condvar::new()),
            done: Arc::new(Stop::default()),
            clock,
            lapse: Arc::new(Mutex::new(None)),
            repo,
            remote,
            lease_secs,
        }
    }

    /// Runs the renewals on a thread of their own until [`Keeper::finish`].
    fn spawn(self) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || self.renew_loop())
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn publish(&self, held: Option<&Held>) {
        *self.lapse.lock().unwrap_or_else(|p| p.into_inner()) =
            held.map(|h| (h.reservation.item.clone(), h.reservation.expires_at_unix));
        self.changed.notify_all();
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

    /// The reservation held, renewed for another lease from now at the lane's stage — or
    /// kept to its expiry, if the clock went back so far that a lease from now ends sooner.
    fn renewed(&self, state: &State, held: &Held) -> Reservation {
        Reservation {
            stage: state
                .stage
                .clone()
                .unwrap_or_else(|| held.reservation.stage.clone()),
            expires_at_unix: (self.clock.now() + self.lease_secs)
                .max(held.reservation.expires_at_unix),
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
            Err(ReservationError::Remote { detail, .. }) => {
                state.unreachable = Some(detail);
                self.changed.notify_all();
            }
            Err(e) => self.lose(state, &e.to_string()),
        }
    }

    /// Waits until what the keeper knows passes `done` (a renewal, a loss, an unreachable
    /// remote, on its thread); returns it. The limit only ends a test that would hang.
    #[cfg(test)]
    pub(super) fn wait_until(&self, done: impl Fn(&Seen) -> bool) -> Seen {
        let seen = |state: &State| Seen {
            expires: state.held.as_ref().map(|h| h.reservation.expires_at_unix),
            lost: state.lost.clone(),
            unreachable: state.unreachable.clone(),
        };
        let (state, limit) = self
            .changed
            .wait_timeout_while(self.state(), std::time::Duration::from_secs(120), |s| {
                !done(&seen(s))
            })
            .unwrap_or_else(|p| p.into_inner());
        assert!(
            !limit.timed_out(),
            "the keeper never got there: {:?}",
            seen(&state)
        );
        seen(&state)
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

    /// Ends the keeper's thread (the drive is over); its wait ends at once.
    pub fn finish(&self) {
        self.done.request(0);
    }

    /// Whether the held reservation is due for renewal now: two thirds of its lease or
    /// less are left (none, when the clock passed its expiry).
    fn due(&self, state: &State) -> bool {
        state.lost.is_none()
            && state.held.as_ref().is_some_and(|h| {
                h.reservation.expires_at_unix - self.clock.now() <= self.lease_secs * 2 / 3
            })
    }

    /// One look: renews the held reservation if it is due.
    fn look(&self) {
        let mut state = self.state();
        if self.due(&state) {
            self.renew(&mut state);
        }
    }

    fn renew_loop(&self) {
        // Renew once two thirds of the lease are left, looking every sixth of it (at least
        // every second, at most every minute), so a short lease (in tests) is kept too.
        // The lock is not held between looks: the lane's own pushes take it.
        let tick = (self.lease_secs / 6).clamp(1, 60);
        // The next look is a tick from the clock read before this one: a move of the clock
        // that this look did not see still ends the wait (when it is a tick or more).
        while !self.done.requested() {
            let at = self.clock.now();
            self.look();
            if !self.clock.watch_until(at + tick, &self.done) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::time::fake::FakeClock;
    use super::super::time::SystemClock;
    use super::*;

    /// Ten minutes: renewed once 400 s or less are left, looked at every 100 s.
    const LEASE: i64 = 600;
    const ITEM: &str = "20261203-item";

    /// A clone of a bare remote, a test clock, and a keeper (without its thread) on them.
    struct World {
        _root: tempfile::TempDir,
        remote_dir: PathBuf,
        repo: PathBuf,
        clock: Arc<FakeClock>,
        keeper: Keeper,
    }

    impl World {
        fn new() -> World {
            let (root, remote_dir, repo) = crate::git::testing::clone_of_fresh_remote();
            let clock = Arc::new(FakeClock::new());
            let keeper = Keeper::new(repo.clone(), "origin".into(), LEASE, clock.clone());
            World {
                _root: root,
                remote_dir,
                repo,
                clock,
                keeper,
            }
        }

        fn remote(&self) -> Remote<'_> {
            Remote {
                repo: &self.repo,
                name: "origin",
            }
        }

        fn reservation(&self, holder: &str) -> Reservation {
            Reservation {
                item: ITEM.into(),
                holder: holder.into(),
                lane: format!("stet/{ITEM}"),
                stage: "implement".into(),
                expires_at_unix: self.clock.now() + LEASE,
            }
        }

        /// Takes the item for `holder` on the remote, at the clock's now.
        fn take(&self, holder: &str) -> Result<Held, ReservationError> {
            self.remote()
                .take(self.reservation(holder), self.clock.now(), |_| false)
        }

        /// The reservation on the remote now.
        fn on_remote(&self) -> Option<Reservation> {
            self.remote().get(ITEM).unwrap().map(|h| h.reservation)
        }
    }

    fn move_aside(dir: &Path) {
        std::fs::rename(dir, dir.with_extension("gone")).unwrap();
    }

    fn move_back(dir: &Path) {
        std::fs::rename(dir.with_extension("gone"), dir).unwrap();
    }

    #[test]
    fn a_reservation_is_renewed_once_a_third_of_its_lease_has_passed_and_not_before() {
        let world = World::new();
        let taken_at = world.clock.now();
        world.keeper.hold(world.take("me").unwrap());
        world.keeper.set_stage("review").unwrap();
        world.clock.advance(LEASE / 3 - 1);
        world.keeper.look();
        let before = world.on_remote().unwrap();
        assert_eq!(before.expires_at_unix, taken_at + LEASE, "not due yet");
        assert_eq!(before.stage, "implement", "a stage alone is not pushed");
        world.clock.advance(1);
        world.keeper.look();
        let after = world.on_remote().unwrap();
        assert_eq!(after.expires_at_unix, world.clock.now() + LEASE);
        assert_eq!(after.stage, "review", "the renewal carries the stage");
        assert_eq!(
            world.keeper.lapse(),
            Some((ITEM.to_string(), world.clock.now() + LEASE))
        );
        assert_eq!(world.keeper.lost(), None);
        assert_eq!(world.keeper.unreachable(), None);
    }

    #[test]
    fn a_clock_that_jumps_past_the_expiry_renews_a_reservation_no_peer_took() {
        let world = World::new();
        world.keeper.hold(world.take("me").unwrap());
        world.clock.advance(LEASE * 5);
        world.keeper.look();
        assert_eq!(
            world.on_remote().unwrap().expires_at_unix,
            world.clock.now() + LEASE,
            "ours again, for a lease from now"
        );
        assert_eq!(world.keeper.lost(), None);
    }

    #[test]
    fn a_clock_that_went_back_renews_nothing_and_a_renewal_never_shortens_the_reservation() {
        let world = World::new();
        let expiry = world.clock.now() + LEASE;
        world.keeper.hold(world.take("me").unwrap());
        world.clock.advance(-2 * LEASE);
        world.keeper.look();
        assert_eq!(world.on_remote().unwrap().expires_at_unix, expiry);
        // A lane's push carries a renewal all the same: it keeps the expiry.
        let renewed = world
            .keeper
            .renewing(|renewal| {
                let (held, next) = renewal.expect("a reservation is held");
                assert_eq!(held.reservation.expires_at_unix, expiry);
                Ok(next.reservation.expires_at_unix)
            })
            .unwrap();
        assert_eq!(renewed, expiry);
        assert_eq!(world.keeper.lapse(), Some((ITEM.to_string(), expiry)));
    }

    #[test]
    fn a_lapsed_reservation_a_peer_took_over_is_lost_and_every_later_write_says_so() {
        let world = World::new();
        world.keeper.hold(world.take("me").unwrap());
        world.clock.advance(LEASE + 1);
        let theirs = world
            .take("a-peer")
            .expect("a lapsed reservation is taken over");
        world.keeper.look();
        let why = world.keeper.lost().expect("the renewal lost to the peer");
        assert!(
            why.contains("another drive changed the reservation first"),
            "{why}"
        );
        assert_eq!(world.keeper.lapse(), None, "nothing is held");
        assert_eq!(world.keeper.set_stage("check"), Err(why.clone()));
        assert!(matches!(
            world.keeper.renewing(|_| Ok(())),
            Err(SaveError::TakenByPeer(_))
        ));
        assert!(matches!(
            world.keeper.releasing(|_| Ok(())),
            Err(SaveError::TakenByPeer(_))
        ));
        // Nothing of ours to release; the peer's reservation stands.
        world.keeper.release().unwrap();
        assert_eq!(world.on_remote(), Some(theirs.reservation));
    }

    #[test]
    fn a_remote_that_does_not_answer_leaves_the_reservation_held_and_is_tried_again() {
        let world = World::new();
        let expiry = world.clock.now() + LEASE;
        world.keeper.hold(world.take("me").unwrap());
        world.clock.advance(LEASE / 3);
        move_aside(&world.remote_dir);
        world.keeper.look();
        assert!(world.keeper.unreachable().is_some());
        assert_eq!(world.keeper.lost(), None, "an outage is no loss");
        assert_eq!(world.keeper.lapse(), Some((ITEM.to_string(), expiry)));
        move_back(&world.remote_dir);
        world.keeper.look();
        assert_eq!(world.keeper.unreachable(), None);
        assert_eq!(
            world.on_remote().unwrap().expires_at_unix,
            world.clock.now() + LEASE
        );
    }

    #[test]
    fn the_thread_renews_as_the_clock_passes_the_renewal_point() {
        let world = World::new();
        let thread = world.keeper.clone().spawn();
        world.keeper.hold(world.take("me").unwrap());
        world.clock.advance(LEASE / 3);
        let renewed_to = world.clock.now() + LEASE;
        let seen = world
            .keeper
            .wait_until(|seen| seen.expires == Some(renewed_to));
        assert_eq!((seen.lost, seen.unreachable), (None, None));
        assert_eq!(world.on_remote().unwrap().expires_at_unix, renewed_to);
        world.keeper.finish();
        thread.join().unwrap();
    }

    #[test]
    fn finishing_ends_the_thread_at_once_on_the_machines_clock() {
        let (_root, _remote, repo) = crate::git::testing::clone_of_fresh_remote();
        // A look every minute: only the finish ends the wait before the test's end.
        let keeper = Keeper::new(repo, "origin".into(), 3600, Arc::new(SystemClock));
        let thread = keeper.clone().spawn();
        keeper.finish();
        // Joined on a thread of its own, so that a keeper still waiting out its minute
        // fails the test instead of holding it.
        let (joined, ended) = std::sync::mpsc::channel();
        std::thread::spawn(move || joined.send(thread.join().is_ok()));
        assert_eq!(
            ended.recv_timeout(std::time::Duration::from_secs(30)),
            Ok(true),
            "the keeper's thread did not end when it was finished"
        );
    }
}
