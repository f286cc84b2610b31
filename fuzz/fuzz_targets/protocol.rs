//! Fuzz target `protocol`: an arbitrary consumer script on the cpu backend, with injected
//! delays, failures and panics, checked against a reference model (`harness/protocol.rs`;
//! its `run` keeps the injected panics away from libFuzzer's aborting panic hook).
#![no_main]

#[path = "../harness/bytes.rs"]
mod bytes;
#[path = "../harness/protocol.rs"]
mod protocol;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let script = protocol::Script::decode(&mut bytes::Bytes::new(data), true);
    if let Err(failure) = protocol::run(&script) {
        panic!("{failure}\n{script:?}");
    }
});
