//! The command harness's outcome protocol and report lines, written by any agent.
#![no_main]
use libfuzzer_sys::fuzz_target;
use stet_plugin_api::{ExitStatus, Role};

fuzz_target!(|bytes: &[u8]| {
    let exit = ExitStatus::exited(bytes.first().copied().unwrap_or(0) as i32);
    for role in [Role::Implement, Role::Review, Role::Proof] {
        let _ = stet_plugin_command::fuzzing::read(role, bytes, exit);
    }
});
