//! A control request as the agent's socket receives it: the JSON envelope (the protocol version and the request;
//! a job name and a policy are checked by their types as they are read), then the checks the agent makes before
//! acting.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockstep_proto::protocol::{Envelope, Request};

fuzz_target!(|data: &[u8]| {
    if let Ok(envelope) = serde_json::from_slice::<Envelope>(data) {
        match &envelope.request {
            Request::Adopt { row, .. } | Request::Register { row, .. } | Request::SlurmProlog { row, .. } => {
                let _ = lockstep_core::cosched::rows::check(*row);
            }
            Request::Policy { slot, .. } => {
                let _ = slot.map(|d| lockstep_core::cosched::slot::check("slot", d));
            }
            Request::Release { .. }
            | Request::Status
            | Request::Progress
            | Request::SlurmEpilog { .. }
            | Request::Timeline { .. } => {}
        }
        // What the agent would answer with must always serialise.
        let _ = serde_json::to_vec(&envelope).unwrap();
    }
});
