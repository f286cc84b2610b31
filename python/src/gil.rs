//! Work that may block (a batch's conservative fence, a pipeline's teardown, a file
//! write), run with the thread detached from the interpreter wherever it happens.

use std::ffi::c_int;
use std::sync::Mutex;

use pyo3::{ffi, Py, PyAny, Python};

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
    /// out of the limited API the abi3 build sees). Resolved when the module loads, from
    /// the interpreter's own symbols: CPython on Linux, the package's one platform (a
    /// Windows abi3 build, linked against `python3.lib`, would not find it). Its one blind
    /// spot: once a process has made a sub-interpreter, CPython stops tracking and it
    /// answers 1 everywhere, so this falls back to what pyo3 counts.
    fn PyGILState_Check() -> c_int;
}

/// Whether the calling thread holds the GIL now (its Python thread state is current).
fn holds_the_gil() -> bool {
    // SAFETY: `Py_IsInitialized` may be called at any time, before and after the
    // interpreter runs.
    let initialized = unsafe { ffi::Py_IsInitialized() } != 0;
    // SAFETY: `PyGILState_Check` "can be called from any thread at any time" once the
    // interpreter is initialized (checked first), and only reads this thread's state.
    initialized && unsafe { PyGILState_Check() } == 1
}

/// Drops `value` as [`detached`] runs work: with the GIL released. What goes this way may
/// block: a cuda batch dropped unbound synchronizes its context, and a pipeline's drop
/// joins its threads.
pub(crate) fn drop_detached<T: Send>(value: T) {
    detached(move || drop(value));
}

/// Python objects whose last owner went on a thread that did not hold the GIL, kept to be
/// released when a thread that holds it comes by ([`release_pending`]).
static PENDING: Mutex<Vec<Py<PyAny>>> = Mutex::new(Vec::new());

/// Drops the reference `object` now if this thread holds the GIL, else keeps it in
/// [`PENDING`] for the next [`release_pending`]: a DLPack deleter run where C code let the
/// GIL go (pyo3 counts the thread attached then, and would decrement the count without
/// the GIL) must not touch the object.
pub(crate) fn drop_object(object: Py<PyAny>) {
    if holds_the_gil() {
        drop(object);
    } else {
        PENDING
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(object);
    }
}

/// Releases the references [`drop_object`] kept, with the GIL held (`py`).
pub(crate) fn release_pending(_py: Python<'_>) {
    let pending = std::mem::take(&mut *PENDING.lock().unwrap_or_else(|e| e.into_inner()));
    drop(pending);
}
