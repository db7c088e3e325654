//! The hook input stet's own processes get inside the sandbox: the agent's tool calls.
#![no_main]
use libfuzzer_sys::fuzz_target;
use stet_cli::walls::hooks::{hook, HookEvent};

fuzz_target!(|bytes: &[u8]| {
    for event in [
        HookEvent::Guard,
        HookEvent::Rules,
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
    ] {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let _ = hook(event, &mut &bytes[..], &mut out, &mut err);
    }
});
