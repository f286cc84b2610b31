//! [`TakenArg`]: an argument a constructor takes as any object and reads itself later, so
//! that its errors come in the constructor's own order, with the type the stubs show for
//! it ([`ShownAs`]). The `paths` and `weights` arguments are taken this way.

use std::marker::PhantomData;

use pyo3::prelude::*;
#[cfg(feature = "stubs")]
use pyo3_stub_gen::{PyStubType, TypeInfo};

/// The type the stubs show for a [`TakenArg`], and the modules it names.
#[cfg_attr(
    not(feature = "stubs"),
    expect(dead_code, reason = "read by the stubs' PyStubType impl only")
)]
pub(crate) trait ShownAs {
    /// The type, as written in the stubs.
    const TYPE: &'static str;
    /// The modules [`TYPE`](Self::TYPE) names.
    const IMPORTS: &'static [&'static str];
}

/// Any object, as given for an argument the stubs show as `A`'s type.
pub(crate) struct TakenArg<'py, A>(Bound<'py, PyAny>, PhantomData<A>);

impl<'py, A> TakenArg<'py, A> {
    /// The object as given.
    pub(crate) fn object(&self) -> &Bound<'py, PyAny> {
        &self.0
    }
}

impl<'a, 'py, A> FromPyObject<'a, 'py> for TakenArg<'py, A> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(TakenArg(obj.to_owned(), PhantomData))
    }
}

#[cfg(feature = "stubs")]
impl<A: ShownAs> PyStubType for TakenArg<'_, A> {
    fn type_output() -> TypeInfo {
        TypeInfo {
            name: A::TYPE.into(),
            source_module: None,
            import: A::IMPORTS.iter().map(|&m| m.into()).collect(),
            type_refs: Default::default(),
        }
    }
}
