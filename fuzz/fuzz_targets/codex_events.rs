//! The Codex CLI's `codex exec --json` events (and the proof's session record), as the
//! codex plugin reads a call's outcome, its proof and its transcript from them: the
//! agent's (and the model's) words.
#![no_main]
use libfuzzer_sys::fuzz_target;
use stet_plugin_api::ExitStatus;

fuzz_target!(|bytes: &[u8]| {
    let exit = ExitStatus::exited(bytes.first().copied().unwrap_or(0) as i32);
    stet_plugin_codex::fuzzing::read_call(bytes, exit);
});
