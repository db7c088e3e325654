//! The approver's JSON-RPC messages (MCP on stdio), from the agent inside the sandbox.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let mut out = Vec::new();
    let _ = stet_cli::walls::hooks::approver(&mut &bytes[..], &mut out);
});
