//! Work that may block (a batch's conservative fence, a pipeline's teardown, a file
//! write), run with the thread detached from the interpreter wherever it happens.

use std::ffi::c_int;

use pyo3::{ffi, Python};

/// Runs `f` with the calling thread detached from the Python interpreter (the GIL
/// released), wherever it is called from: a method, a `tp_dealloc` run by `del` or the
/// garbage collector, or a DLPack deleter that numpy, torch or cupy calls, with the GIL
/// held or not. Other Python threads run meanwhile.
///
/// Whether the thread holds the GIL is asked of the interpreter (`PyGILState_Check`), not
/// of pyo3's count of its own attachments: a deleter may run on a thread that entered a
/// pyo3 method and then released the GIL in C code (torch's C++ under a
/// `gil_scoped_release`, a `ctypes` call), where pyo3 still counts the thread attached but
/// the thread has no current Python state; detaching there again is a fatal error of the
/// interpreter. A thread that does not hold the GIL runs `f` in place (there is nothing to
/// release). So does one where the interpreter cannot be attached to (it is finalizing, or
/// a garbage-collector traversal is running).
pub(crate) fn detached(f: impl FnOnce() + Send) {
    let mut f = Some(f);
    if holds_the_gil() {
        Python::try_attach(|py| {
            py.detach(|| {
                if let Some(f) = f.take() {
                    f();
                }
            })
        });
    }
    if let Some(f) = f {
        f();
    }
}

extern "C" {
    /// CPython's `PyGILState_Check` (every CPython since 3.4 exports it; pyo3-ffi leaves it
    /// out of the limited API the abi3 build sees).
    fn PyGILState_Check() -> c_int;
}

/// Whether the calling thread holds the GIL now (its Python thread state is current).
fn holds_the_gil() -> bool {
    // SAFETY: `Py_IsInitialized` may be called at any time, before and after the
    // interpreter runs.
    let initialized = unsafe { ffi::Py_IsInitialized() } != 0;
    // SAFETY: `PyGILState_Check` "can be called from any thread at any time" once the
    // interpreter is initialized (checked just above), and only reads this thread's state.
    initialized && unsafe { PyGILState_Check() } == 1
}

/// Drops `value` as [`detached`] runs work: with the GIL released. What goes this way may
/// block: a cuda batch dropped unbound synchronizes its context, and a pipeline's drop
/// joins its threads.
pub(crate) fn drop_detached<T: Send>(value: T) {
    detached(move || drop(value));
}
