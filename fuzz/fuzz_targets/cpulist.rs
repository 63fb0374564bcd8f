//! A Linux cpulist (`0-11,16`), as cpusets, `--cpus` lists and hwloc give them; parsed, printed, parsed again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockstep_core::cpulist::CpuList;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(list) = CpuList::parse(text) {
            assert_eq!(CpuList::parse(&list.to_string()).ok(), Some(list));
        }
    }
});
