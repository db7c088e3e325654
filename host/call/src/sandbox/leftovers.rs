//! The sandboxes a stet process leaves outside itself while it runs, torn down by their
//! owner label at a stop; the owner tokens and the temporary directories are `owner.rs`'s.

use std::time::{Duration, Instant};

use stet_plugin_api::Label;

pub use crate::owner::{
    close, making, reap_dead_temp_dirs, reap_temp_dirs, remove_own_temp_dirs, temp_dir, Making,
    RemovedTemp,
};

use super::{owner_token, OpenRuntime, MANAGED, OWNER};

/// Tears down every sandbox of `runtime` this process owns (by its owner label); returns
/// how many were torn down. For a stop: [`close`] first, so none is being made meanwhile.
pub fn teardown_own(runtime: &OpenRuntime) -> usize {
    let me = owner_token(std::process::id()).unwrap_or_else(|| format!("{}:", std::process::id()));
    let own = || -> Vec<_> {
        runtime
            .handle
            .list_sandboxes(vec![Label::new(MANAGED.0, MANAGED.1)])
            .map(|listed| {
                listed
                    .into_iter()
                    .filter(|info| {
                        info.labels
                            .iter()
                            .any(|l| l.key.as_str() == OWNER && l.value.as_str() == me)
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    // Until none is left, within a bound: another thread of this process may be tearing
    // one down at the same instant (its teardown then refused as in progress here, and cut
    // short when the process exits), so what is listed is torn down again until gone.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut torn = 0;
    loop {
        let left = own();
        if left.is_empty() || Instant::now() >= deadline {
            return torn;
        }
        torn += left
            .iter()
            .filter(|info| runtime.handle.teardown(&info.id).is_ok())
            .count();
        if !own().is_empty() {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
