//! A queue item's file: the repository's, so anyone who can push wrote it.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let _ = stet_cli::queue::parse_item("item", std::path::Path::new("item.md"), bytes.to_vec());
    if let Ok(id) = std::str::from_utf8(bytes) {
        let _ = stet_cli::queue::valid_id(id);
    }
});
