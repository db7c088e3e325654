//! A receipt file under `.git/stet/receipts/`, read back by `stet receipts`, `show`, a
//! drive's estimate and its resume.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = serde_json::from_str::<stet_cli::receipts::Receipt>(text);
});
