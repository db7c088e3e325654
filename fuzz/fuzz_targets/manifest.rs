//! A plugin manifest (`plugin.toml`): written by whoever ships the plugin.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = stet_cli::plugins::manifest::parse(std::path::Path::new("plugin.toml"), text);
});
