//! Fuzz target `shard`: arbitrary bytes as a token-shard file give the documented error
//! or a shard that reads back exactly, samplers over it stay inside it, and the token
//! decoders write exactly its tokens (`harness/shard.rs`, which also draws the input
//! from the fuzz bytes).
#![no_main]

#[path = "../harness/shard.rs"]
mod shard;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: shard::ShardInput| {
    static FILE: OnceLock<shard::TempFile> = OnceLock::new();
    let file = FILE.get_or_init(|| shard::TempFile::new("shard"));
    if let Err(failure) = shard::check(&input, file) {
        panic!("{failure}\n{input:?}");
    }
});
