//! An experiment spec of any kind (`lockstep experiment run SPEC`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = lockstep_lab::parse(std::path::Path::new("fuzz.toml"), text);
    }
});
