//! Raw bytes on one of the agent's doors: hyper's HTTP/1 server under the doors' caps and deadline, with the
//! control API's routing and request parsing behind it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lockstepd::fuzz::http_exchange(data);
});
