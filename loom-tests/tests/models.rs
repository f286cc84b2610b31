//! Runs every loom model and each of its seeded-bug twins, each in a process of its own:
//! a test re-runs this binary on the ignored test `child` with the model's name and
//! mutation, so that a deadlock or an abort fails that model alone. Each process prints
//! a `MODEL` line with the interleavings it explored and its time. Run: `scripts/loom.sh`.
#![cfg(pinring_loom)]

#[path = "../../tests/common/own_process.rs"]
mod own_process;

use pinring_loom_tests::{explore, model_named, Mutation};

/// Explores one model in this process (the child side of [`isolated`]): the model named by
/// `PINRING_MODEL`, with the mutation named by `PINRING_MUTATION` (none if unset).
#[test]
#[ignore = "run by the model tests below, one process per model"]
fn child() {
    let name = std::env::var("PINRING_MODEL").expect("PINRING_MODEL names the model");
    let mutation = std::env::var("PINRING_MUTATION").unwrap_or_else(|_| "None".into());
    let model = model_named(&name).unwrap_or_else(|| panic!("no model {name}"));
    let mutation =
        Mutation::named(&mutation).unwrap_or_else(|| panic!("unknown mutation {mutation}"));
    explore(model, mutation);
}

/// Runs model `name` with `mutation` seeded in a process of its own; returns whether it
/// passed, and its output.
fn isolated(name: &str, mutation: &str) -> (bool, String) {
    own_process::run_in_own_process(
        "child",
        "",
        &[
            ("PINRING_MODEL", name),
            ("PINRING_MUTATION", mutation),
            ("RUST_BACKTRACE", "0"),
        ],
        "MODEL\t",
    )
}

/// The model passes.
fn passes(name: &str) {
    let (ok, text) = isolated(name, "None");
    assert!(ok, "model {name} failed:\n{text}");
}

/// The model fails with the seeded bug, with `expected` in its failure.
fn rejects(name: &str, mutation: &str, expected: &str) {
    let (ok, text) = isolated(name, mutation);
    assert!(
        !ok,
        "model {name} accepted the seeded bug {mutation}:\n{text}"
    );
    assert!(
        text.contains(expected),
        "model {name} with {mutation} failed without \"{expected}\":\n{text}"
    );
}

/// Declares one test per row: `name => check;`, the check a `passes` or a `rejects`.
macro_rules! model_tests {
    ($($test:ident => $check:expr;)+) => {$(
        #[test]
        fn $test() {
            $check;
        }
    )+};
}

model_tests! {
    model_1_device_slot_reuse => passes("device_slot_reuse");
    model_1_rejects_publish_before_record =>
        rejects("device_slot_reuse", "PublishBeforeRecord", "invariant 2");
    model_1_rejects_ready_wait_one_early =>
        rejects("device_slot_reuse", "ReadyWaitOneEarly", "finds device slot");
    model_2_release_elsewhere_out_of_order => passes("release_elsewhere_out_of_order");
    model_2_rejects_publish_before_record =>
        rejects("release_elsewhere_out_of_order", "PublishBeforeRecord", "invariant 2");
    model_3_host_slot_reuse_polling => passes("host_slot_reuse");
    model_3_rejects_free_before_copied =>
        rejects("host_slot_reuse", "FreeBeforeCopied", "invariant 1");
    model_4_shutdown => passes("shutdown");
    model_4_rejects_stop_without_wake => rejects("shutdown", "StopWithoutWake", "deadlock");
    model_5_decode_error_two_workers => passes("decode_error");
    model_5_rejects_fail_without_wake => rejects("decode_error", "FailWithoutWake", "deadlock");
    model_6_wraparound => passes("wraparound");
    model_6_rejects_wrong_slot_retire =>
        rejects("wraparound", "WrongSlotRetire", "invariant 1");
    model_6_rejects_free_before_copied =>
        rejects("wraparound", "FreeBeforeCopied", "invariant 1");
    model_7_short_batch_partial => passes("short_batch_partial");
    model_7_short_batch_dropped => passes("short_batch_dropped");
    model_8_all_slots_leased => passes("all_slots_leased");
    model_9_epoch_ends => passes("epoch_ends");
    model_9_rejects_sync_one_early =>
        rejects("epoch_ends", "SyncOneEarly", "before its copy ran");
    model_10_synchronize_parks => passes("synchronize_parks");
    model_10_rejects_sync_one_early =>
        rejects("synchronize_parks", "SyncOneEarly", "before its copy ran");
    model_10_rejects_count_without_wake =>
        rejects("synchronize_parks", "CountWithoutWake", "deadlock");
    model_11_synchronize_device_lost => passes("synchronize_device_lost");
    model_12_multi_field_batches => passes("multi_field_batches");
    model_12_rejects_publish_before_record =>
        rejects("multi_field_batches", "PublishBeforeRecord", "invariant 2");
    model_13_lazy_release_wake => passes("lazy_release_wake");
    model_13_rejects_ask_without_wake =>
        rejects("lazy_release_wake", "AskWithoutWake", "deadlock");
}
