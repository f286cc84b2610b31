//! Fuzz target `config`: arbitrary builder inputs give `Ok` or a justified `ConfigError`,
//! never a panic or an overflow; `Ok` sizes respect the budgets; starting a small `Ok`
//! config allocates nothing larger than them. The property, and how an input is drawn
//! from the fuzz bytes (`Arbitrary for ConfigInput`), are in `harness/config.rs`.
#![no_main]

#[path = "../harness/config.rs"]
mod config;

use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: config::Tracking = config::Tracking;

fuzz_target!(|input: config::ConfigInput| {
    if let Err(failure) = config::check(&input) {
        panic!("{failure}");
    }
});
