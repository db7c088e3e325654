//! A configuration file (`stet.toml`, plugin tables included): the repository's is
//! written by whoever can commit, a landed agent branch included.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = stet_cli::config::parse(std::path::Path::new("stet.toml"), text);
});
