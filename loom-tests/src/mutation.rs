//! The seeded protocol bugs: each model's twins run it with one of these, and must fail
//! with the invariant the bug breaks.

use std::cell::Cell;

/// A protocol bug a model can seed, to show that the model rejects it. Each is seeded in
/// model-only code: the model device, the model's decoder, or (through
/// `pinring::model_hooks::suppress_wakes`) the sync shim's unpark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// The protocol as written.
    None,
    /// A release publishes its fence before the fence is recorded (invariant 2): the model
    /// device's capture puts the record off (it is made later, on the releasing thread),
    /// so the slot is marked released while its fence is not yet recorded.
    PublishBeforeRecord,
    /// The copy thread frees a host slot before its copy has completed (invariant 1): the
    /// model device reports every enqueued copy complete.
    FreeBeforeCopied,
    /// The copy thread retires a host slot on the next batch's completion (invariant 1):
    /// the model device reports one batch more complete than it ran.
    WrongSlotRetire,
    /// Stopping the pipeline wakes none of the parked threads (invariant 4).
    StopWithoutWake,
    /// A failed decode publishes FAILED but wakes nobody (invariant 4).
    FailWithoutWake,
    /// `Batch::synchronize` returns once the copy count reaches its batch instead of
    /// passing it, that is once the batch before it was copied (a host read of the batch
    /// may then find its slot not yet written).
    SyncOneEarly,
    /// `Batch::wait_on` enqueues no wait for READY once the copy count reaches its batch
    /// instead of passing it (a kernel on the stream may then read the slot before the
    /// batch's copy ran).
    ReadyWaitOneEarly,
    /// A pop that finds nothing asks the copy thread for a refill but wakes nobody (the
    /// model's consumer suppresses its wake-ups before that pop): a copy thread parked one
    /// released slot short of its threshold never wakes (invariant 4).
    AskWithoutWake,
    /// The device stores the copy count but wakes none of the `synchronize` waiters
    /// (invariant 4: a parked synchronize never returns).
    CountWithoutWake,
}

impl Mutation {
    /// The mutation of this name (as the variant is spelled), if any.
    pub fn named(name: &str) -> Option<Mutation> {
        Some(match name {
            "None" => Mutation::None,
            "PublishBeforeRecord" => Mutation::PublishBeforeRecord,
            "FreeBeforeCopied" => Mutation::FreeBeforeCopied,
            "WrongSlotRetire" => Mutation::WrongSlotRetire,
            "StopWithoutWake" => Mutation::StopWithoutWake,
            "FailWithoutWake" => Mutation::FailWithoutWake,
            "SyncOneEarly" => Mutation::SyncOneEarly,
            "CountWithoutWake" => Mutation::CountWithoutWake,
            "ReadyWaitOneEarly" => Mutation::ReadyWaitOneEarly,
            "AskWithoutWake" => Mutation::AskWithoutWake,
            _ => return None,
        })
    }
}

std::thread_local! {
    // std's thread-local on purpose: loom runs every thread of a model on the OS thread
    // that called `loom::model`, so the model's process sets it there once for the whole
    // model.
    static MUTATION: Cell<Mutation> = const { Cell::new(Mutation::None) };
}

/// Seeds `mutation` into the models run on this thread.
pub fn set_mutation(mutation: Mutation) {
    MUTATION.with(|m| m.set(mutation));
}

/// The mutation seeded for the running model.
pub(crate) fn mutation() -> Mutation {
    MUTATION.with(Cell::get)
}
