//! Property tests of the slot protocol on the cpu backend (the proptest twin of the
//! `protocol` fuzz target; the script, the reference model and the checks are in
//! `fuzz/harness/protocol.rs`): arbitrary consumer scripts — pops, releases with every
//! fence form on this and other threads, drops, held batches, stream-side reads, stops,
//! pipeline drops — under injected copy delays, copy failures, decode failures and
//! panics, source panics and stalls, deliver the right bytes in order, report the
//! injected failure where it belongs, never hang, and leak no slot.

#[path = "common/fuzz_twin.rs"]
mod fuzz_twin;
#[path = "../fuzz/harness/protocol.rs"]
mod protocol;

use std::sync::mpsc;
use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use fuzz_twin::{seeds, XorShift};
use proptest::prelude::*;

/// A case that has not finished by then hangs: the test fails instead of waiting.
const CASE_BOUND: Duration = Duration::from_secs(60);

/// Runs `script` on its own thread, failing if it does not finish within [`CASE_BOUND`]
/// (the stuck thread is left behind; the test fails anyway).
fn run_bounded(script: protocol::Script) -> Result<(), String> {
    let (tx, rx) = mpsc::channel();
    let shown = format!("{script:?}");
    std::thread::spawn(move || {
        let _ = tx.send(protocol::run(&script));
    });
    match rx.recv_timeout(CASE_BOUND) {
        Ok(result) => result.map(drop).map_err(|e| format!("{e}\n{shown}")),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(format!(
            "the script did not finish in {CASE_BOUND:?}: hang\n{shown}"
        )),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(format!("the script panicked\n{shown}")),
    }
}

/// The script the fuzz target makes of `data` (draws past its end read zeros: never fails).
fn script(data: &[u8]) -> protocol::Script {
    protocol::Script::arbitrary(&mut Unstructured::new(data)).expect("draws never fail")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_consumer_script_gets_the_right_batches_and_errors(
        data in proptest::collection::vec(any::<u8>(), 12..120)
    ) {
        run_bounded(script(&data)).map_err(TestCaseError::fail)?;
    }
}

/// Deterministic pseudo-random scripts reach every outcome the model knows, so the
/// property cannot pass by never getting anywhere: batches, each kind of terminal, held
/// slots, stream-side reads, releases on other threads, batches outliving the pipeline.
#[test]
fn scripts_reach_every_outcome() {
    let mut bytes = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut total = protocol::Summary::default();
    let mut terminals = std::collections::BTreeMap::new();
    for _ in 0..120 {
        let s = run_bounded_summary(script(&bytes.bytes(80)));
        *terminals.entry(s.terminal).or_insert(0) += 1;
        total.batches += s.batches;
        total.held_slot_checks += s.held_slot_checks;
        total.stream_reads += s.stream_reads;
        total.thread_releases += s.thread_releases;
        total.held_past_drop += s.held_past_drop;
    }
    for kind in ["end", "source", "decode", "decode panic", "copy", "stopped"] {
        assert!(terminals.contains_key(kind), "no {kind:?} in {terminals:?}");
    }
    assert!(total.batches >= 200, "{total:?}");
    assert!(total.held_slot_checks >= 10, "{total:?}");
    assert!(total.stream_reads >= 20, "{total:?}");
    assert!(total.thread_releases >= 20, "{total:?}");
    assert!(total.held_past_drop >= 5, "{total:?}");
}

fn run_bounded_summary(script: protocol::Script) -> protocol::Summary {
    let (tx, rx) = mpsc::channel();
    let shown = format!("{script:?}");
    std::thread::spawn(move || {
        let _ = tx.send(protocol::run(&script));
    });
    match rx.recv_timeout(CASE_BOUND) {
        Ok(Ok(summary)) => summary,
        Ok(Err(e)) => panic!("{e}\n{shown}"),
        Err(e) => panic!("{e:?}: hang or panic\n{shown}"),
    }
}

/// The checked-in seeds of the fuzz target pass, each delivering batches.
#[test]
fn the_fuzz_seeds_pass() {
    let mut count = 0;
    for (path, data) in seeds("protocol") {
        let summary = run_bounded_summary(script(&data));
        assert!(summary.batches > 0, "{path:?}: {summary:?}");
        count += 1;
    }
    assert!(count >= 5);
}
