//! Explores one model with loom, in the calling process: the preemption bound, the branch
//! limit and the `MODEL` line every run prints.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::models::Entry;
use crate::mutation::{set_mutation, Mutation};

/// The preemption bound when `LOOM_MAX_PREEMPTIONS` is not set (`scripts/loom.sh`, which
/// CI runs, sets 2).
const DEFAULT_PREEMPTIONS: usize = 3;

/// loom's limit on the branches of one execution.
const MAX_BRANCHES: usize = 100_000;

/// Explores `model` with `mutation` seeded, at the smaller of `LOOM_MAX_PREEMPTIONS`
/// (else 3) and the model's cap; panics where loom finds an
/// execution that fails (a broken invariant, a deadlock). Prints
/// `MODEL <name> <mutation> <n> interleavings preemption bound <b> <time>` (tab-separated)
/// when every execution passed.
pub fn explore(model: &Entry, mutation: Mutation) {
    set_mutation(mutation);
    let mut builder = loom::model::Builder::new();
    let bound = builder.preemption_bound.unwrap_or(DEFAULT_PREEMPTIONS);
    builder.preemption_bound = Some(model.preemption_cap.map_or(bound, |cap| cap.min(bound)));
    builder.max_branches = MAX_BRANCHES;
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let body = model.body;
    let start = Instant::now();
    builder.check(move || {
        counted.fetch_add(1, Ordering::Relaxed);
        body();
    });
    println!(
        "\nMODEL\t{}\t{mutation:?}\t{} interleavings\tpreemption bound {}\t{:.1?}",
        model.name,
        runs.load(Ordering::Relaxed),
        builder.preemption_bound.unwrap_or(0),
        start.elapsed()
    );
}
