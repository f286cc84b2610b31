//! Work that may block (a batch's conservative fence, a pipeline's teardown, a file
//! write), run with the thread detached from the interpreter wherever it happens.

use pyo3::Python;

/// Runs `f` with the calling thread detached from the Python interpreter (the GIL
/// released), wherever it is called from: a method, a `tp_dealloc` run by `del` or the
/// garbage collector, or a DLPack deleter that numpy, torch or cupy calls, with the GIL
/// held or not (a thread without it attaches first, then detaches for `f`). Other Python
/// threads run meanwhile.
///
/// Where the interpreter cannot be attached to (it is finalizing, or a garbage-collector
/// traversal is running), `f` runs in place.
pub(crate) fn detached(f: impl FnOnce() + Send) {
    let mut f = Some(f);
    Python::try_attach(|py| {
        py.detach(|| {
            if let Some(f) = f.take() {
                f();
            }
        })
    });
    if let Some(f) = f {
        f();
    }
}

/// Drops `value` as [`detached`] runs work: with the GIL released. What goes this way may
/// block: a cuda batch dropped unbound synchronizes its context, and a pipeline's drop
/// joins its threads.
pub(crate) fn drop_detached<T: Send>(value: T) {
    detached(move || drop(value));
}
