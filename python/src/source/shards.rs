//! Token shards named by a source's `paths`, `format`, `token_type` and `dtype`
//! arguments: opened and checked the same way for `TokenWindows` and `Documents`, with the
//! errors in Python's words.

use std::path::PathBuf;

use pyo3::prelude::*;

use pinring::source::{
    Datatrove, Llmc, Megatron, Npy, RawTokens, ShardFormat, ShardProblem, SourceError,
    TokenFileFormat, TokenShards, TokenType,
};
use pinring::Dtype;

use crate::errors::classes::{config, new_error, obj, Kind};
use crate::errors::from_core::to_py;
use crate::source::paths::{is_glob, not_a_directory};

/// The `dtype` argument.
pub(crate) fn dtype_arg(py: Python<'_>, dtype: &str) -> PyResult<(TokenType, Dtype)> {
    Ok(match dtype.trim().to_ascii_lowercase().as_str() {
        "uint16" | "u16" => (TokenType::U16, Dtype::U16),
        "uint32" | "u32" => (TokenType::U32, Dtype::U32),
        "int32" | "i32" => (TokenType::I32, Dtype::I32),
        "int64" | "i64" => (TokenType::I64, Dtype::I64),
        _ => {
            return Err(config(
                py,
                "dtype",
                format!(
                    "dtype {dtype:?} is not one of \"uint16\", \"uint32\", \"int32\", \"int64\""
                ),
            ))
        }
    })
}

/// The `format` and `token_type` arguments: the files' format, and the width of their
/// tokens where said (required for "raw", checked against the files for the others).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FormatArg {
    /// The format's name, as given (lower case).
    pub(crate) name: &'static str,
    format: Format,
    /// The token width said, if any.
    said: Option<ShardFormat>,
}

#[derive(Debug, Clone, Copy)]
enum Format {
    Llmc,
    Megatron,
    Datatrove,
    Npy,
    Raw(RawTokens),
}

/// The names `format` takes.
const FORMATS: &str = "\"llmc\", \"megatron\", \"datatrove\", \"npy\" or \"raw\"";

impl FormatArg {
    pub(crate) fn parse(py: Python<'_>, format: &str, token_type: Option<&str>) -> PyResult<Self> {
        let said = token_type
            .map(|t| match t.trim().to_ascii_lowercase().as_str() {
                "uint16" | "u16" => Ok(ShardFormat::U16),
                // Megatron's int32 and numpy's '<i4' tokens are read as their 4 bytes.
                "uint32" | "u32" | "int32" | "i32" => Ok(ShardFormat::U32),
                _ => Err(config(
                    py,
                    "token_type",
                    format!(
                        "token_type {t:?} is not one of \"uint16\", \"uint32\" (\"int32\" for \
                         4-byte signed tokens), or None"
                    ),
                )),
            })
            .transpose()?;
        let (name, format) = match format.trim().to_ascii_lowercase().as_str() {
            "llmc" | "llm.c" => ("llmc", Format::Llmc),
            "megatron" => ("megatron", Format::Megatron),
            "datatrove" => ("datatrove", Format::Datatrove),
            "npy" => ("npy", Format::Npy),
            "raw" => match said {
                Some(ShardFormat::U16) => ("raw", Format::Raw(RawTokens::U16)),
                Some(ShardFormat::U32) => ("raw", Format::Raw(RawTokens::U32)),
                None => {
                    return Err(config(
                        py,
                        "token_type",
                        "format=\"raw\" files have no header to say their tokens' type: give \
                         token_type=\"uint16\" (llama2.c, candle, nanoGPT) or \"uint32\" (OLMo, \
                         MaxText)",
                    ))
                }
            },
            _ => {
                return Err(config(
                    py,
                    "format",
                    format!("format {format:?} is not one of {FORMATS}"),
                ))
            }
        };
        Ok(FormatArg { name, format, said })
    }

    fn opener(&self) -> &dyn TokenFileFormat {
        match &self.format {
            Format::Llmc => &Llmc,
            Format::Megatron => &Megatron,
            Format::Datatrove => &Datatrove,
            Format::Npy => &Npy,
            Format::Raw(raw) => raw,
        }
    }

    /// The shards `paths` name, each pattern expanded in order, opened as this format; a
    /// file whose tokens are not of the `token_type` said is the ConfigError naming it.
    pub(crate) fn open(
        &self,
        py: Python<'_>,
        paths: &[PathBuf],
    ) -> PyResult<Result<TokenShards, pinring::Error>> {
        let shards = py.detach(|| open_shards(paths, self.opener()));
        if let (Ok(shards), Some(said)) = (&shards, self.said) {
            if let Some(s) = shards.shards().iter().find(|s| s.format() != said) {
                return Err(new_error(
                    py,
                    Kind::Config,
                    format!(
                        "token_type=\"{}\" was said, but {} holds {}-byte tokens (its {} format \
                         says so): leave token_type=None, or name the files it fits",
                        if said == ShardFormat::U16 {
                            "uint16"
                        } else {
                            "uint32"
                        },
                        s.path().display(),
                        s.format().token_bytes(),
                        self.name,
                    ),
                    &[
                        ("argument", obj(py, "token_type")),
                        ("path", obj(py, s.path().to_string_lossy().into_owned())),
                    ],
                ));
            }
        }
        Ok(shards)
    }
}

/// The shards `paths` name, each pattern expanded in order, opened as `format`.
fn open_shards(paths: &[PathBuf], format: &dyn TokenFileFormat) -> pinring::Result<TokenShards> {
    let mut shards = Vec::new();
    for p in paths {
        if is_glob(p) {
            shards.extend(TokenShards::glob_as(p, format)?.shards().iter().cloned());
        } else {
            not_a_directory(p)?;
            shards.extend(TokenShards::open_as([p], format)?.shards().iter().cloned());
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
                    "dtype=\"{}\" cannot hold the tokens of {}: it is a file of 32-bit tokens \
                 (llm.c's LLaMA-3 format, or 4-byte tokens of another format); use \
                 dtype=\"uint32\", \"int32\" or \"int64\"",
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
