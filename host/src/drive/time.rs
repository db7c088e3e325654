//! The drive's time and its stop: what every wait is measured by and woken by.
//!
//! Every "now" and every wait of the loop goes through a [`Clock`], so that the loop's
//! rules (the pace, a usage limit's reset, the outage schedule and its limit, the remote's
//! backoff) are tested in-process against a clock the test moves, never by sleeping. A
//! wait wakes at once when a stop is requested: [`Stop`] is a condition variable, not a
//! flag polled on a timer.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Seconds since the Unix epoch, and waits until such a time.
pub trait Clock: Send + Sync {
    /// Now, in seconds since the Unix epoch.
    fn now(&self) -> i64;

    /// Waits until `wake` (seconds since the epoch) or until `stop` is requested,
    /// whichever comes first. Returns whether the whole wait passed.
    fn sleep_until(&self, wake: i64, stop: &Stop) -> bool;
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
#[derive(Default)]
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
    //! A clock the test moves: a wait passes at once, moving the clock to its end, and is
    //! remembered; a test may ask for a stop at a given wait.

    use std::sync::Mutex;

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
    }

    impl FakeClock {
        /// A clock at the machine's now (so reservations it stamps read sensibly).
        pub fn new() -> FakeClock {
            FakeClock {
                state: Mutex::new(State {
                    now: super::SystemClock.now(),
                    waits: Vec::new(),
                    stop_at_wait: None,
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

        /// Moves the clock on.
        pub fn advance(&self, secs: i64) {
            self.state.lock().unwrap().now += secs;
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

        fn sleep_until(&self, wake: i64, stop: &Stop) -> bool {
            let mut state = self.state.lock().unwrap();
            let n = state.waits.len();
            let length = wake - state.now;
            state.waits.push(length);
            if let Some((at, signal)) = state.stop_at_wait {
                if at == n {
                    stop.request(signal);
                    return false;
                }
            }
            if stop.requested() {
                return false;
            }
            state.now = state.now.max(wake);
            true
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
}
