//! The `paths` argument of a source: a path, a glob (`*`, `?` in the file name) or a list
//! of either, as `str` or `os.PathLike`.

use std::path::{Path, PathBuf};

use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};

use pinring::source::SourceError;

use crate::errors::classes::config;
use crate::source::taken_arg::{ShownAs, TakenArg};

/// How the stubs show the `paths` argument of a source's constructor ([`PathsArg`]).
pub(crate) enum Paths {}

impl ShownAs for Paths {
    const TYPE: &'static str = "str | os.PathLike[str] | typing.Sequence[str | os.PathLike[str]]";
    const IMPORTS: &'static [&'static str] = &["os", "typing"];
}

/// The `paths` argument of a source's constructor, as given: any object is taken here
/// ([`path_list`] reads and checks it, so its errors come in the constructor's own order).
pub(crate) type PathsArg<'py> = TakenArg<'py, Paths>;

/// The paths and patterns given.
pub(crate) fn path_list(paths: &PathsArg<'_>) -> PyResult<Vec<PathBuf>> {
    let paths = paths.object();
    let py = paths.py();
    let one = |p: &Bound<'_, PyAny>| -> PyResult<PathBuf> {
        p.extract::<PathBuf>().map_err(|_| {
            config(
                py,
                "paths",
                format!(
                    "a path must be a str or os.PathLike, got {}",
                    p.get_type()
                        .name()
                        .map(|n| n.to_string())
                        .unwrap_or_default()
                ),
            )
        })
    };
    if paths.is_instance_of::<PyString>() || paths.hasattr("__fspath__")? {
        return Ok(vec![one(paths)?]);
    }
    if paths.is_instance_of::<PyList>() || paths.is_instance_of::<PyTuple>() {
        return paths.try_iter()?.map(|p| one(&p?)).collect();
    }
    Err(config(
        py,
        "paths",
        format!(
            "paths must be a path, a glob or a list of them, got {}",
            paths.get_type().name()?
        ),
    ))
}

/// The names of `files`, as a source's `files` attribute lists them.
pub(crate) fn file_names<'a>(files: impl IntoIterator<Item = &'a Path>) -> Vec<String> {
    files
        .into_iter()
        .map(|f| f.to_string_lossy().into_owned())
        .collect()
}

/// Whether `p` is a pattern.
pub(crate) fn is_glob(p: &Path) -> bool {
    p.to_string_lossy().contains(['*', '?'])
}

/// A directory given where a file belongs: the error names it, with the glob to use.
pub(crate) fn not_a_directory(p: &Path) -> pinring::Result<()> {
    if p.is_dir() {
        let problem = std::io::Error::new(
            std::io::ErrorKind::IsADirectory,
            format!(
                "is a directory, not a file: give a file, a glob such as \"{}/*.bin\", or a list",
                p.display()
            ),
        );
        return Err(SourceError::File {
            path: p.to_owned(),
            problem: problem.into(),
        }
        .into());
    }
    Ok(())
}
