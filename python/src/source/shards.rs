//! Token shards named by a source's `paths` and its `dtype` argument: opened and checked
//! the same way for `TokenWindows` and `Documents`, with the errors in Python's words.

use std::path::PathBuf;

use pyo3::prelude::*;

use pinring::source::{ShardProblem, SourceError, TokenShards, TokenType};
use pinring::Dtype;

use crate::errors::classes::{config, new_error, obj, Kind};
use crate::errors::from_core::to_py;
use crate::source::paths::{is_glob, not_a_directory};

/// The `dtype` argument.
pub(crate) fn dtype_arg(py: Python<'_>, dtype: &str) -> PyResult<(TokenType, Dtype)> {
    Ok(match dtype.trim().to_ascii_lowercase().as_str() {
        "uint16" | "u16" => (TokenType::U16, Dtype::U16),
        "int32" | "i32" => (TokenType::I32, Dtype::I32),
        "int64" | "i64" => (TokenType::I64, Dtype::I64),
        _ => {
            return Err(config(
                py,
                "dtype",
                format!("dtype {dtype:?} is not one of \"uint16\", \"int32\", \"int64\""),
            ))
        }
    })
}

/// The shards `paths` name, each pattern expanded in order.
pub(crate) fn open_shards(paths: &[PathBuf]) -> pinring::Result<TokenShards> {
    let mut shards = Vec::new();
    for p in paths {
        if is_glob(p) {
            shards.extend(TokenShards::glob(p)?.shards().iter().cloned());
        } else {
            not_a_directory(p)?;
            shards.extend(TokenShards::open([p])?.shards().iter().cloned());
        }
    }
    TokenShards::from_shards(shards)
}

/// What opening the source can refuse, in Python's words where the core speaks of Rust.
pub(crate) fn open_error(py: Python<'_>, e: pinring::Error, dtype: Dtype) -> PyErr {
    match e {
        pinring::Error::Source(SourceError::File { path, problem })
            if matches!(
                problem.format_problem::<ShardProblem>(),
                Some(ShardProblem::TokenTypeTooNarrow { .. })
            ) =>
        {
            new_error(
                py,
                Kind::Config,
                format!(
                    "dtype=\"{}\" cannot hold the tokens of {}: it is a shard of 32-bit tokens \
                 (llm.c's LLaMA-3 format); use dtype=\"int32\" or \"int64\"",
                    dtype.name(),
                    path.display()
                ),
                &[
                    ("argument", obj(py, "dtype")),
                    ("path", obj(py, path.to_string_lossy().into_owned())),
                ],
            )
        }
        other => to_py(py, other),
    }
}
