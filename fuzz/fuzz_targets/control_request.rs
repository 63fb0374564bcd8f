//! A control request as the agent's socket receives it: JSON, then the checks the agent makes before acting.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockstep_proto::protocol::Request;

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = serde_json::from_slice::<Request>(data) {
        match &request {
            Request::Adopt { job, row, .. } | Request::Register { job, row, .. } => {
                let _ = lockstep_proto::names::check_job_name(job);
                let _ = lockstep_core::cosched::rows::check(*row);
            }
            Request::Policy { name, .. } => {
                let _ = name.parse::<lockstep_core::cosched::PolicySpec>();
            }
            Request::Release { job } => {
                let _ = lockstep_proto::names::check_job_name(job);
            }
            Request::SlurmProlog { row, .. } => {
                let _ = lockstep_core::cosched::rows::check(*row);
            }
            Request::Status | Request::SlurmEpilog { .. } => {}
        }
        // What the agent would answer with must always serialise.
        let _ = serde_json::to_vec(&request).unwrap();
    }
});
