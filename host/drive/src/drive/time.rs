//! The drive's time and its stop: what every wait is measured by and woken by.
//!
//! Every "now" and every wait of the loop goes through a [`Clock`], so that the loop's
//! rules (the pace, a usage limit's reset, the outage schedule and its limit, the remote's
//! backoff) are tested in-process against a clock the test moves, never by sleeping. A
//! wait wakes at once when a stop is requested: [`Stop`] is a condition variable, not a
//! flag polled on a timer.
//!
//! Two kinds of wait: the loop's own ([`Clock::sleep_until`]: the pace, a reset, the outage
//! schedule), whose end a test clock jumps to, and a wait beside the loop
//! ([`Clock::watch_until`]: the reservation keeper's next look), which follows the time the
//! loop and the test move and never moves it itself. On the machine's clock they are the
//! same wait.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Seconds since the Unix epoch, and waits until such a time.
pub trait Clock: Send + Sync {
    /// Now, in seconds since the Unix epoch.
    fn now(&self) -> i64;

    /// Waits until `wake` (seconds since the epoch) or until `stop` is requested,
    /// whichever comes first. Returns whether the whole wait passed.
    fn sleep_until(&self, wake: i64, stop: &Stop) -> bool;

    /// Now, in milliseconds since the Unix epoch, for the records that say when something
    /// ran (a receipt's start and end). The same time as [`Clock::now`], finer.
    fn now_ms(&self) -> u64 {
        u64::try_from(self.now()).unwrap_or(0) * 1000
    }

    /// A wait beside the loop (the keeper's): until `wake` or until `stop` is requested,
    /// whichever comes first; returns whether the whole wait passed. Unlike
    /// [`Clock::sleep_until`] it never moves a test clock: it ends when the loop's waits or
    /// the test move the clock to `wake`. The clock may hold on to `stop` while it waits
    /// (to wake it when it moves), hence the `Arc`.
    fn watch_until(&self, wake: i64, stop: &Arc<Stop>) -> bool {
        self.sleep_until(wake, stop)
    }
}

/// The machine's clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0)
    }

    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }

    fn sleep_until(&self, wake: i64, stop: &Stop) -> bool {
        loop {
            let left = wake - self.now();
            if left <= 0 {
                return !stop.requested();
            }
            // Woken by a stop at once; the clock is read again after at most a minute, so
            // a suspended machine does not oversleep by more than that.
            if stop.wait(Duration::from_secs(left.min(60) as u64)) {
                return false;
            }
        }
    }
}

/// A stop asked of the drive: by which signal, woken waits included.
#[derive(Default, Debug)]
pub struct Stop {
    signal: Mutex<Option<i32>>,
    woken: Condvar,
}

impl Stop {
    /// Asks for a stop by `signal`; returns whether one was asked before.
    pub fn request(&self, signal: i32) -> bool {
        let mut current = self.signal.lock().unwrap_or_else(|p| p.into_inner());
        let before = current.is_some();
        current.get_or_insert(signal);
        self.woken.notify_all();
        before
    }

    /// Whether a stop was asked.
    pub fn requested(&self) -> bool {
        self.signal().is_some()
    }

    /// The signal of the stop asked, if one was.
    pub fn signal(&self) -> Option<i32> {
        *self.signal.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits up to `at_most` for a stop; returns whether one was asked.
    fn wait(&self, at_most: Duration) -> bool {
        let signal = self.signal.lock().unwrap_or_else(|p| p.into_inner());
        let (signal, _) = self
            .woken
            .wait_timeout_while(signal, at_most, |s| s.is_none())
            .unwrap_or_else(|p| p.into_inner());
        signal.is_some()
    }
}

#[cfg(test)]
pub mod fake {
    //! A clock the test moves: a wait of the loop passes at once, moving the clock to its
    //! end, and is remembered; a test may ask for a stop at a given wait. A wait beside the
    //! loop (the keeper's) is held until the clock is moved to its end, or a stop.

    use std::sync::{Arc, Mutex};

    use super::{Clock, Stop};

    /// A clock whose waits pass at once.
    #[derive(Debug)]
    pub struct FakeClock {
        state: Mutex<State>,
    }

    #[derive(Debug)]
    struct State {
        now: i64,
        waits: Vec<i64>,
        stop_at_wait: Option<(usize, i32)>,
        /// The stops of the waits beside the loop under way: woken when the clock moves.
        watching: Vec<Arc<Stop>>,
        /// The last time read in milliseconds.
        last_ms: u64,
    }

    impl FakeClock {
        /// A clock at the machine's now (so reservations it stamps read sensibly).
        pub fn new() -> FakeClock {
            FakeClock {
                state: Mutex::new(State {
                    now: super::SystemClock.now(),
                    waits: Vec::new(),
                    stop_at_wait: None,
                    watching: Vec::new(),
                    last_ms: 0,
                }),
            }
        }

        /// Every wait so far, in seconds, in order.
        pub fn waits(&self) -> Vec<i64> {
            self.state.lock().unwrap().waits.clone()
        }

        /// Asks for a stop by `signal` when wait number `n` (from 0) starts.
        pub fn stop_at_wait(&self, n: usize, signal: i32) {
            self.state.lock().unwrap().stop_at_wait = Some((n, signal));
        }

        /// Moves the clock on (back, when `secs` is negative).
        pub fn advance(&self, secs: i64) {
            let watching = {
                let mut state = self.state.lock().unwrap();
                state.now += secs;
                state.watching.clone()
            };
            wake_watchers(&watching);
        }
    }

    /// Wakes the waits beside the loop to read the clock again. Each stop's lock is taken
    /// before it is notified: a wait that read the clock before it moved is waiting by then.
    fn wake_watchers(watching: &[Arc<Stop>]) {
        for stop in watching {
            let _signal = stop.signal.lock().unwrap_or_else(|p| p.into_inner());
            stop.woken.notify_all();
        }
    }

    impl Default for FakeClock {
        fn default() -> Self {
            Self::new()
        }
    }

    impl Clock for FakeClock {
        fn now(&self) -> i64 {
            self.state.lock().unwrap().now
        }

        /// The clock's second, and each read a millisecond after the one before: what is
        /// named by it (a receipt's id) stays apart, as on the machine's clock, while the
        /// clock stands still.
        fn now_ms(&self) -> u64 {
            let mut state = self.state.lock().unwrap();
            let ms = (u64::try_from(state.now).unwrap_or(0) * 1000).max(state.last_ms + 1);
            state.last_ms = ms;
            ms
        }

        fn sleep_until(&self, wake: i64, stop: &Stop) -> bool {
            // The clock's lock is never held while a stop's is taken (a wait beside the
            // loop holds its stop's lock while it reads the clock).
            let stop_here = {
                let mut state = self.state.lock().unwrap();
                let n = state.waits.len();
                let length = wake - state.now;
                state.waits.push(length);
                match state.stop_at_wait {
                    Some((at, signal)) if at == n => Some(signal),
                    _ => None,
                }
            };
            if let Some(signal) = stop_here {
                stop.request(signal);
                return false;
            }
            if stop.requested() {
                return false;
            }
            let watching = {
                let mut state = self.state.lock().unwrap();
                state.now = state.now.max(wake);
                state.watching.clone()
            };
            wake_watchers(&watching);
            true
        }

        fn watch_until(&self, wake: i64, stop: &Arc<Stop>) -> bool {
            self.state.lock().unwrap().watching.push(stop.clone());
            // The stop's lock is held while the clock is read, and released only by the
            // wait: a move of the clock (which takes it to notify) cannot fall in between.
            let mut signal = stop.signal.lock().unwrap_or_else(|p| p.into_inner());
            let passed = loop {
                if signal.is_some() {
                    break false;
                }
                if self.now() >= wake {
                    break true;
                }
                signal = stop.woken.wait(signal).unwrap_or_else(|p| p.into_inner());
            };
            drop(signal);
            let mut state = self.state.lock().unwrap();
            if let Some(at) = state.watching.iter().position(|s| Arc::ptr_eq(s, stop)) {
                state.watching.remove(at);
            }
            passed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_wakes_a_wait_at_once_and_keeps_its_first_signal() {
        let stop = std::sync::Arc::new(Stop::default());
        let waiter = {
            let stop = stop.clone();
            std::thread::spawn(move || SystemClock.sleep_until(SystemClock.now() + 3600, &stop))
        };
        assert!(!stop.request(15));
        assert!(!waiter.join().unwrap(), "the wait was cut short");
        assert!(stop.request(2), "a second request says one came before");
        assert_eq!(stop.signal(), Some(15));
    }

    #[test]
    fn a_wait_beside_the_loop_follows_the_test_clock_and_a_stop_ends_it_at_once() {
        use fake::FakeClock;
        let clock = Arc::new(FakeClock::new());
        let start = clock.now();
        let stop = Arc::new(Stop::default());
        let watch = |wake: i64| {
            let (clock, stop) = (clock.clone(), stop.clone());
            std::thread::spawn(move || clock.watch_until(wake, &stop))
        };
        // Passed at once when the clock is there already; the clock is not moved by it.
        assert!(watch(start).join().unwrap());
        assert_eq!(clock.now(), start);
        // Ended by the test moving the clock, or by the loop's own wait moving it.
        let waiter = watch(start + 60);
        clock.advance(60);
        assert!(waiter.join().unwrap());
        let waiter = watch(start + 600);
        assert!(clock.sleep_until(start + 600, &Stop::default()));
        assert!(waiter.join().unwrap());
        // Moved back, then a stop: cut short.
        clock.advance(-3600);
        let waiter = watch(start);
        stop.request(15);
        assert!(!waiter.join().unwrap());
        assert_eq!(clock.waits(), [540], "the one wait of the loop");
    }

    #[test]
    fn the_test_clocks_milliseconds_follow_its_seconds_and_never_repeat() {
        let clock = fake::FakeClock::new();
        let second = clock.now() as u64 * 1000;
        assert_eq!([clock.now_ms(), clock.now_ms()], [second, second + 1]);
        clock.advance(1);
        assert_eq!(clock.now_ms(), second + 1000);
        clock.advance(-60);
        assert_eq!(clock.now_ms(), second + 1001, "never back");
    }

    #[test]
    fn the_machines_clock_in_milliseconds_agrees_with_its_seconds() {
        let (secs, ms) = (SystemClock.now(), SystemClock.now_ms());
        assert!((ms / 1000).abs_diff(secs as u64) <= 1, "{secs} {ms}");
    }
}
