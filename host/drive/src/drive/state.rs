//! What the lanes of one drive share and how an item's lane ends: the tally under one
//! lock, the outage in progress, the end of one item's work.

use std::collections::HashSet;

/// What became of one item's lane.
pub(in crate::drive) enum ItemEnd {
    Landed,
    /// Landed (its branch pushed and kept, the item marked landed) but its land step
    /// failed, saying why (`pull request not opened: …`): `stet land ID` makes it again.
    LandFailed(String),
    GaveUp(String),
    Stopped(String),
    RateLimited(Option<i64>),
    /// A call could not be made: the sandbox or the harness could not start it, or the
    /// model API did not answer. The lane stays at its checkpoint; the item is taken
    /// again. Three in a row enter the outage schedule.
    RunnerFailed(String),
    /// The model API refused the profile's login (its words). Time does not mend that
    /// — the host already renews a login before a call that would outlive it —, so
    /// the drive stops at once, saying how to log in again, rather than wait as an
    /// outage for hours with every lane failing the same way.
    LoginRefused(String),
    /// The remote did not answer while the lane needed it; the lane stays here.
    RemoteUnreachable(String),
    /// Another drive took the reservation over (it lapsed); this drive leaves the lane.
    Lost(String),
    /// This drive cannot work the lane and leaves it as it is, saying why (its checkpoint
    /// names a move only a newer stet knows).
    Left(String),
    /// The item was cancelled on the remote (`stet rm`): the lane stops at this move.
    Cancelled(String),
}

impl Tally {
    /// Whether the items landed, worked and made ready ahead reach `cap`.
    pub fn at_cap(&self, cap: usize) -> bool {
        self.landed.len() + self.working.len() + self.ahead.len() >= cap
    }
}

/// An outage in progress: when it began and how far along the schedule it is.
pub(in crate::drive) struct Outage {
    pub started_unix: i64,
    pub step: u32,
}

/// What holds every lane of a drive, whichever lane set it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(in crate::drive) enum Hold {
    /// Nothing: each lane moves at its own pace.
    #[default]
    Free,
    /// Every lane waits before its next launch until `until` (seconds since the epoch) —
    /// a usage limit's reset, an outage's next try —, saying `why`.
    Paused { until: i64, why: String },
    /// The drive must end (an outage or an unreachable remote past its limit, a usage
    /// limit that resets too far away, a lane that failed in a way no lane can go on
    /// from): every lane stops at its next move. Nothing lifts it.
    Halted,
}

impl Tally {
    /// Every lane stops at its next move.
    pub fn halt(&mut self) {
        self.hold = Hold::Halted;
    }

    /// Whether the drive must end.
    pub fn halted(&self) -> bool {
        self.hold == Hold::Halted
    }

    /// Every lane waits until `until` before its next launch, unless the drive is ending.
    pub fn pause(&mut self, until: i64, why: String) {
        if !self.halted() {
            self.hold = Hold::Paused { until, why };
        }
    }
}

/// What the lanes of one drive share, under one lock: what became of the items taken,
/// which items a lane works now, and the waits and failures that hold every lane.
#[derive(Default)]
pub(in crate::drive) struct Tally {
    pub landed: Vec<String>,
    /// Landed items whose land step failed (a subset of `landed`).
    pub land_failed: Vec<String>,
    pub gave_up: Vec<String>,
    pub cancelled: Vec<String>,
    /// Items this run is done with (landed, given up, lost, cancelled, malformed): not
    /// taken again.
    pub done: HashSet<String>,
    /// Items a lane of this drive works now: no other lane takes them (they share the
    /// drive's holder, so the remote alone would not keep them apart).
    pub working: HashSet<String>,
    /// Items a lane made ready ahead, to work next: counted toward the cap like the ones
    /// worked, but another lane that comes to want one takes it over (the lane that made it
    /// then lets it go), so that no lane ends idle for an item merely made ready.
    pub ahead: HashSet<String>,
    /// Calls that could not be made, in a row, over all lanes.
    pub runner_failures: u32,
    pub outage: Option<Outage>,
    /// What holds every lane: a wait before the next launch, or the drive's end.
    pub hold: Hold,
    /// A lane said that it stopped (so the closing line need not).
    pub said_stop: bool,
    /// What the agent calls of this drive reported they cost, so far.
    pub cost_usd: f64,
    /// Per item, the usage limits in a row whose reset time could not be read.
    pub unreadable_limits: std::collections::HashMap<String, u32>,
}

pub(in crate::drive) fn duration(secs: i64) -> humantime::FormattedDuration {
    humantime::format_duration(std::time::Duration::from_secs(secs.max(0) as u64))
}
