//! Property tests of the token-shard reader (the proptest twin of the `shard` fuzz
//! target; the property is in `fuzz/harness/shard.rs`): arbitrary bytes as a shard file
//! give the documented error or a shard that reads back exactly; samplers over it stay
//! inside it; the token decoders write exactly its tokens.

#[path = "common/fuzz_twin.rs"]
mod fuzz_twin;
#[path = "../fuzz/harness/shard.rs"]
mod shard;

use arbitrary::{Arbitrary, Unstructured};
use fuzz_twin::{assert_each_reached, seeds};
use proptest::prelude::*;

/// The input the fuzz target makes of `data` (draws past its end read zeros: never fails).
fn input(data: &[u8]) -> shard::ShardInput {
    shard::ShardInput::arbitrary(&mut Unstructured::new(data)).expect("draws never fail")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_shard_file_opens_exactly_or_is_rejected_with_its_problem(
        data in proptest::collection::vec(any::<u8>(), 0..300)
    ) {
        let file = shard::TempFile::new("prop-shard");
        let input = input(&data);
        shard::check(&input, &file)
            .map_err(|e| TestCaseError::fail(format!("{e}\n{input:?}")))?;
    }
}

/// Deterministic pseudo-random inputs reach every outcome (rejected files of several
/// kinds, opened shards, checked sampler windows), so the property cannot pass by
/// rejecting everything.
#[test]
fn shard_inputs_reach_every_outcome() {
    let file = shard::TempFile::new("prop-shard-reach");
    assert_each_reached(
        0x0123_4567_89ab_cdef,
        400,
        |bytes| {
            // Up to 300 bytes: a u32 shard needs twice the bytes for the tokens a window
            // takes.
            let len = 3 + (bytes.0 % 300) as usize;
            let input = input(&bytes.bytes(len));
            shard::check(&input, &file).unwrap_or_else(|e| panic!("{e}\n{input:?}"))
        },
        &[
            (shard::Reached::Rejected, 40),
            (shard::Reached::Opened, 10),
            (shard::Reached::Sampled, 40),
        ],
    );
}

/// The checked-in seeds of the fuzz target pass, and reach both a rejected file and a
/// sampled shard.
#[test]
fn the_fuzz_seeds_pass() {
    let file = shard::TempFile::new("prop-shard-seeds");
    let mut reached = std::collections::BTreeSet::new();
    for (path, data) in seeds("shard") {
        let input = input(&data);
        let r = shard::check(&input, &file).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        reached.insert(r);
    }
    assert!(reached.contains(&shard::Reached::Rejected), "{reached:?}");
    assert!(reached.contains(&shard::Reached::Sampled), "{reached:?}");
}
