//! Fuzz target `protocol`: an arbitrary consumer script on the cpu backend, with injected
//! delays, failures and panics, checked against a reference model (`harness/protocol.rs`,
//! which also draws the script from the fuzz bytes; its `run` keeps the injected panics
//! away from libFuzzer's aborting panic hook).
#![no_main]

#[path = "../harness/protocol.rs"]
mod protocol;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|script: protocol::Script| {
    if let Err(failure) = protocol::run(&script) {
        panic!("{failure}\n{script:?}");
    }
});
