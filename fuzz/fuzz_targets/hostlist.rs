//! A Slurm host list (`n[01-64],login`), as `scontrol` prints job nodes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = lockstep_slurm::hostlist::expand(text);
    }
});
