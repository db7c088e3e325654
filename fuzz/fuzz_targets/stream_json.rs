//! Claude Code's stream-json output, as the claude plugin reads a call's outcome from it:
//! the agent's (and the model's) words.
#![no_main]
use libfuzzer_sys::fuzz_target;
use stet_plugin_api::{ExitStatus, Role};

fuzz_target!(|bytes: &[u8]| {
    let exit = ExitStatus::exited(bytes.first().copied().unwrap_or(0) as i32);
    for role in [Role::Implement, Role::Review, Role::Proof] {
        stet_plugin_claude::fuzzing::read_call(role, bytes, exit);
    }
});
