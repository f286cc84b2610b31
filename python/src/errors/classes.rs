//! The exception classes of `pinring`, declared once: the table below makes the classes at
//! module initialization and gives the stub generator their bases, docstrings and
//! attributes.
//!
//! The classes are made with `type(name, bases, dict)` so that each can subclass both
//! `pinring.Error` and the builtin that fits (which `create_exception!` cannot do).

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use pyo3::BoundObject;

/// A base of an exception class: a builtin exception, or a class of this table.
#[derive(Debug, Clone, Copy)]
enum Base {
    /// A builtin exception class, by name (`ValueError`).
    Builtin(&'static str),
    /// A class made earlier in the table.
    Own(Kind),
}

/// Declares the classes: for each, its [`Kind`] variant, Python name, bases (a class of
/// this table, written as its `Kind`, or a builtin, written as a string), docstring, and
/// the attributes it carries (name, Python type, what it holds).
macro_rules! exception_classes {
    ($(
        $(#[$meta:meta])*
        $kind:ident => $name:literal ( $($base:tt),+ ) $doc:literal
            { $($attr:literal : $ty:literal = $attr_doc:literal),* $(,)? }
    )+) => {
        /// Which `pinring` exception class.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Kind { $($(#[$meta])* $kind,)+ }

        /// Every kind, in the table's order (a class's bases come before it).
        const KINDS: &[Kind] = &[$(Kind::$kind,)+];

        impl Kind {
            /// The class's Python name.
            pub(crate) fn name(self) -> &'static str {
                match self { $(Kind::$kind => $name,)+ }
            }

            fn doc(self) -> &'static str {
                match self { $(Kind::$kind => $doc,)+ }
            }

            fn bases(self) -> &'static [Base] {
                match self { $(Kind::$kind => &[$(exception_classes!(@base $base)),+],)+ }
            }

            fn attrs(self) -> &'static [&'static str] {
                match self { $(Kind::$kind => &[$($attr),*],)+ }
            }
        }

        /// The stub generator's view of the classes: one marker type per class (the
        /// generator keys classes by type) and its `PyClassInfo`.
        #[cfg(feature = "stubs")]
        mod stubs {
            use pyo3_stub_gen::type_info::{MemberInfo, PyClassInfo};
            use pyo3_stub_gen::TypeInfo;
            $(
                #[allow(non_camel_case_types, dead_code)]
                struct $kind;
                pyo3_stub_gen::inventory::submit! {
                    PyClassInfo {
                        struct_id: std::any::TypeId::of::<$kind>,
                        pyclass_name: $name,
                        module: Some("pinring._pinring"),
                        doc: $doc,
                        getters: &[$(MemberInfo {
                            name: $attr,
                            r#type: || TypeInfo::unqualified($ty),
                            doc: $attr_doc,
                            default: None,
                            deprecated: None,
                        }),*],
                        setters: &[],
                        bases: &[$(exception_classes!(@stub_base $base)),+],
                        has_eq: false,
                        has_ord: false,
                        has_hash: false,
                        has_str: false,
                        subclass: true,
                    }
                }
            )+
        }
    };
    (@base $base:literal) => { Base::Builtin($base) };
    (@base $base:ident) => { Base::Own(Kind::$base) };
    (@stub_base $base:literal) => { || TypeInfo::builtin($base) };
    (@stub_base $base:ident) => {
        || TypeInfo::unqualified(super::Kind::$base.name())
    };
}

exception_classes! {
    /// `pinring.Error`, the base of all.
    Base => "Error" ("Exception") "Base class of every error pinring raises." {}

    /// `pinring.ConfigError`.
    Config => "ConfigError" (Base, "ValueError")
        "A Loader or source argument was rejected: a size of 0, an unknown dtype, order or \
         device string, a batch that does not fit its memory budget, a dtype too narrow for \
         a shard's tokens; for Documents a schedule not increasing in step, a bos the \
         shards cannot hold, or (from pop(), at the step) a step needing more documents \
         than max_docs allows. `argument` names the argument (None where no single one is \
         at fault). Also a ValueError."
        { "argument": "str | None" = "The Loader or source argument at fault, as you pass it." }

    /// `pinring.SourceError`.
    Source => "SourceError" (Base, "OSError")
        "A data source could not be opened or sampled: a missing file, a directory, bad \
         magic, a truncated shard, a glob matching nothing, a seq_len longer than every \
         shard, a shard that changed under a running loader, a read the file system failed \
         (the message says the file could not be read, and `errno` is the OS error, EIO say: \
         a retry reads the file again; a change has no errno); for Documents a shard with \
         no bos token, an index that does not fit its shard, or no step fitting in a whole \
         epoch. `path` names the file (or the pattern). Also an OSError."
        { "path": "str | None" = "The file (or the glob pattern) the error is about." }

    /// `pinring.SourceFileNotFoundError`.
    SourceNotFound => "SourceFileNotFoundError" (Source, "FileNotFoundError")
        "A source file does not exist, or a glob matched no file: a SourceError that is \
         also a FileNotFoundError. `path` names the file or the pattern."
        { "path": "str" = "The missing file, or the glob pattern that matched nothing." }

    /// `pinring.DecodeError`.
    Decode => "DecodeError" (Base, "ValueError")
        "Decoding a sample failed; `seq` and `sample` name the batch and the sample within \
         it. Also a ValueError."
        {
            "seq": "int" = "The batch's sequence number.",
            "sample": "int" = "The sample's index within the batch.",
        }

    /// `pinring.PopTimeout`.
    PopTimeout => "PopTimeout" (Base, "TimeoutError")
        "pop() waited for its timeout and no batch came; `waited` (seconds) and `behind` \
         (the stage that holds up the next batch: \"source\", \"decode\", \"copy\" or \
         \"consumer\") say more. Also a TimeoutError."
        {
            "waited": "float" = "Seconds pop() waited.",
            "behind": "str" = "The stage that holds up the next batch.",
        }

    /// `pinring.AllSlotsLeased`.
    AllSlotsLeased => "AllSlotsLeased" (PopTimeout)
        "pop() waited `lease_timeout` seconds while you held every device slot: batches \
         popped earlier were never released (or their views are still alive), so no batch \
         can come. `leased` lists the held (slot, seq) pairs. A PopTimeout whose `behind` is \
         \"consumer\"."
        {
            "waited": "float" = "Seconds pop() waited.",
            "behind": "str" = "Always \"consumer\".",
            "leased": "list[tuple[int, int]]" = "The held device slots and the batch (seq) each holds.",
        }

    /// `pinring.StoppedError`.
    Stopped => "StoppedError" (Base, "RuntimeError")
        "The loader delivers nothing more: it was closed, it stopped after an error it \
         reported earlier, or it delivered every epoch of its `epochs`. Also a RuntimeError."
        {}

    /// `pinring.CudaError`.
    Cuda => "CudaError" (Base, "RuntimeError")
        "A CUDA driver call failed, no driver or no such device was found, or a release \
         fence was rejected; `call` and `code` name the driver call and its CUresult. Also a \
         RuntimeError."
        {
            "call": "str" = "The driver call that failed.",
            "code": "int" = "Its CUresult (0 when the failure was not a driver call's).",
        }

    /// `pinring.CheckpointError`.
    Checkpoint => "CheckpointError" (Base, "ValueError")
        "A loader state was refused: it is not a state dict, it is of an older version, it \
         belongs to another dataset (file names, sizes or contents: other bytes under the same \
         names), seq_len, record size, order or seed (Documents: bos, \
         schedule or max_docs) or another kind of source, the ranks it was merged from \
         consumed unequal counts (popped unequal steps), no state was given, or the loader \
         already delivered a batch. Also a ValueError."
        {}

    /// `pinring.RankError`.
    Rank => "RankError" (Base, "RuntimeError")
        "A RankGuard named a rank, on every rank at once, before the collective that would          hang: `rank` runs out of data before the others (`kind` \"runs_out\"), waits for          its data far longer than the rest (\"slow_data\"), or is at another step          (\"steps\"); or the guard's collective failed (\"collective\", `rank` None). `step`          is the step checked at. Also a RuntimeError."
        {
            "rank": "int | None" = "The rank named (in the guard's group).",
            "kind": "str" = "\"runs_out\", \"slow_data\", \"steps\", \"versions\", \"collective\" or \"bad_reduction\".",
            "step": "int | None" = "The step the ranks checked at.",
        }

    /// `pinring.RankWarning`, what a RankGuard(on_problem="warn") warns with.
    RankWarning => "RankWarning" ("RuntimeWarning")
        "What RankGuard(on_problem=\"warn\") warns with instead of raising RankError (a          RuntimeWarning): the message names the rank."
        {}
}

/// The classes, made once, in [`KINDS`] order.
static CLASSES: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();

fn make(py: Python<'_>) -> PyResult<Vec<Py<PyType>>> {
    let builtins = py.import("builtins")?;
    let mut made: Vec<Py<PyType>> = Vec::with_capacity(KINDS.len());
    for kind in KINDS {
        let bases = kind
            .bases()
            .iter()
            .map(|base| -> PyResult<Bound<'_, PyAny>> {
                Ok(match base {
                    Base::Builtin(name) => builtins.getattr(*name)?,
                    Base::Own(own) => made[*own as usize].bind(py).clone().into_any(),
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let dict = PyDict::new(py);
        dict.set_item("__doc__", kind.doc())?;
        dict.set_item("__module__", "pinring")?;
        // Each attribute reads None until an error sets it.
        for attr in kind.attrs() {
            dict.set_item(*attr, py.None())?;
        }
        let class = py
            .get_type::<PyType>()
            .call1((kind.name(), PyTuple::new(py, bases)?, dict))?
            .cast_into::<PyType>()?;
        made.push(class.unbind());
    }
    // The table starts with the base of all, a subclass of Exception.
    debug_assert!(made[Kind::Base as usize]
        .bind(py)
        .is_subclass_of::<PyException>()
        .unwrap_or(false));
    Ok(made)
}

/// The class of `kind`.
fn class(py: Python<'_>, kind: Kind) -> PyResult<&Bound<'_, PyType>> {
    let classes = CLASSES.get_or_try_init(py, || make(py))?;
    Ok(classes[kind as usize].bind(py))
}

/// The class of `kind`, for a caller that raises or warns with it itself.
pub(crate) fn class_of(py: Python<'_>, kind: Kind) -> PyResult<Bound<'_, PyType>> {
    class(py, kind).cloned()
}

/// Adds the classes to the module.
pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    for kind in KINDS {
        module.add(kind.name(), class(py, *kind)?)?;
    }
    Ok(())
}

/// An exception of class `kind` with `message` and the attributes in `attrs`.
pub(crate) fn new_error<'py>(
    py: Python<'py>,
    kind: Kind,
    message: impl Into<String>,
    attrs: &[(&str, Bound<'py, PyAny>)],
) -> PyErr {
    let message = message.into();
    let made = (|| -> PyResult<PyErr> {
        let exc = class(py, kind)?.call1((message.as_str(),))?;
        for (name, value) in attrs {
            exc.setattr(*name, value)?;
        }
        Ok(PyErr::from_value(exc))
    })();
    // Making the exception can only fail if Python itself is failing: report that.
    made.unwrap_or_else(|e| e)
}

/// An exception of class `kind` with `message` and no attributes.
pub(crate) fn error(py: Python<'_>, kind: Kind, message: impl Into<String>) -> PyErr {
    new_error(py, kind, message, &[])
}

/// A `pinring.ConfigError` about the argument `argument`.
pub(crate) fn config(py: Python<'_>, argument: &str, message: impl Into<String>) -> PyErr {
    new_error(
        py,
        Kind::Config,
        message,
        &[("argument", obj(py, argument))],
    )
}

/// `value` as a Python object (`None` if the conversion fails, which it does not for the
/// plain values used here).
pub(crate) fn obj<'py, T>(py: Python<'py>, value: T) -> Bound<'py, PyAny>
where
    T: IntoPyObject<'py>,
{
    value
        .into_pyobject(py)
        .map(|v| v.into_any().into_bound())
        .unwrap_or_else(|_| py.None().into_bound(py))
}
