//! A `lockstep stat -e` / agent `--events` list: generic names, tracepoints, `pmu/event/`, libpfm4 names.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = lockstep_telemetry::events::parse_list(text);
    }
});
