//! [`feeding`] and [`feeder_stopped`]: whether the pipeline whose feeder thread runs this
//! code has stopped, seen from inside the source iterator's `next` — so that a walk of many
//! steps there (a [`Documents`](crate::source::Documents) run or a mixture walking over
//! skipped steps) ends when its pipeline stops instead of running on in a thread nobody
//! waits for.

use std::cell::OnceCell;

use crate::control::Control;
use crate::sync::{native, Arc};

native::thread_local! {
    /// The control of the pipeline this thread feeds; unset on every other thread.
    static FEEDING: OnceCell<Arc<Control>> = const { OnceCell::new() };
}

/// Runs `body` (the feeder's loop) on this thread as the feeder of the pipeline `control`
/// stops. Called once, first thing, on the feeder thread `Pipeline::new` spawns.
pub(crate) fn feeding<R>(control: Arc<Control>, body: impl FnOnce() -> R) -> R {
    FEEDING.with(|cell| {
        let _ = cell.set(control);
    });
    body()
}

/// Whether this thread feeds a pipeline that has stopped: a source's walk checks it
/// between steps and ends when it says so. False on a thread that feeds no pipeline (a
/// source iterated by hand never stops this way).
pub(crate) fn feeder_stopped() -> bool {
    FEEDING.with(|cell| cell.get().is_some_and(|control| control.stopped()))
}
