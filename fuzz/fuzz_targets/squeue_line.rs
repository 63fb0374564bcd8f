//! A line of `squeue -O` output as lockstep asks for it (ID, state, node list, restart count, array job ID, array
//! task ID, heterogeneous job ID, AdminComment):
//! whatever it holds, it parses to one job or none, the node list is expanded within its cap, and a row is read
//! only from the AdminComment.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockstep_slurm::JobInfo;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for line in text.lines() {
        if let Some(job) = JobInfo::parse(line) {
            // The comment is all that follows the seventh separator: a row comes from nowhere else.
            let comment = line.splitn(8, '|').nth(7).map(str::trim).unwrap_or_default();
            assert!(comment == job.admin_comment || comment == "(null)");
            let _ = job.row();
        }
    }
});
