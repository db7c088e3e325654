//! The records stet keeps on the remote — reservations, checkpoints — which anyone with
//! push access can write and every drive on every clone parses.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = serde_json::from_str::<stet_cli::reservations::Reservation>(text);
    let _ = serde_json::from_str::<stet_cli::checkpoints::Checkpoint>(text);
});
