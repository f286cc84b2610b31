//! The arguments of `pinring.Documents` read from Python objects: `schedule`, `max_docs`,
//! `targets_dtype` and `order`.

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use pinring::source::{DocOrder, TokenType};

use crate::args;
use crate::errors::classes::config;

/// The `schedule` argument: a list (or tuple) of `(from_step, tokens_per_batch,
/// max_seq_len)` triples of ints.
pub(crate) fn schedule_arg(
    py: Python<'_>,
    schedule: &Bound<'_, PyAny>,
) -> PyResult<Vec<(u64, u64, u64)>> {
    let shape = |what: String| {
        config(
            py,
            "schedule",
            format!("schedule must be a list of (from_step, tokens_per_batch, max_seq_len) {what}"),
        )
    };
    if !(schedule.is_instance_of::<PyList>() || schedule.is_instance_of::<PyTuple>()) {
        return Err(shape(format!(
            "entries, got a {}",
            schedule.get_type().name()?
        )));
    }
    let mut out = Vec::new();
    for (index, entry) in schedule.try_iter()?.enumerate() {
        let entry = entry?;
        let triple: (i128, i128, i128) = entry.extract().map_err(|_| {
            shape(format!(
                "entries of ints: schedule[{index}] is {}",
                entry.repr().map(|r| r.to_string()).unwrap_or_default()
            ))
        })?;
        let (from_step, tokens, max_seq_len) = triple;
        let in_range = |v: i128, what: &str| {
            u64::try_from(v).map_err(|_| {
                config(
                    py,
                    "schedule",
                    format!(
                        "schedule[{index}] = ({from_step}, {tokens}, {max_seq_len}): its \
                         {what} must be in 0..2**64"
                    ),
                )
            })
        };
        out.push((
            in_range(from_step, "from_step")?,
            in_range(tokens, "tokens_per_batch")?,
            in_range(max_seq_len, "max_seq_len")?,
        ));
    }
    Ok(out)
}

/// The `max_docs` argument: an int (at least 1), "formula" (modded-nanogpt's formula
/// alone), or None (its rule): `(max_docs, formula)`.
pub(crate) fn max_docs_arg(
    py: Python<'_>,
    max_docs: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Option<u64>, bool)> {
    let Some(m) = max_docs.filter(|m| !m.is_none()) else {
        return Ok((None, false));
    };
    if let Ok(name) = m.extract::<String>() {
        if name == "formula" {
            return Ok((None, true));
        }
        return Err(config(
            py,
            "max_docs",
            format!("max_docs must be an int, \"formula\" or None, got {name:?}"),
        ));
    }
    let n: i128 = m.extract().map_err(|_| {
        config(
            py,
            "max_docs",
            "max_docs must be an int, \"formula\" or None".to_owned(),
        )
    })?;
    Ok((Some(args::at_least_one(py, "max_docs", n)?), false))
}

/// The `targets_dtype` argument: None or "int32" (a view of tokens), or "int64".
pub(crate) fn targets_dtype_arg(py: Python<'_>, ty: Option<&str>) -> PyResult<Option<TokenType>> {
    match ty.map(|t| t.trim().to_ascii_lowercase()).as_deref() {
        None | Some("int32") => Ok(None),
        Some("int64") => Ok(Some(TokenType::I64)),
        Some(other) => Err(config(
            py,
            "targets_dtype",
            format!(
                "targets_dtype {other:?} is not supported: give \"int64\" (an int64 field of \
                 its own, modded-nanogpt's) or None / \"int32\" (a view of tokens)"
            ),
        )),
    }
}

/// The `order` argument.
pub(crate) fn order_arg(py: Python<'_>, order: &str, seed: u64) -> PyResult<DocOrder> {
    let name = order.trim().to_ascii_lowercase();
    DocOrder::from_name(&name, seed).ok_or_else(|| {
        config(
            py,
            "order",
            format!("order {order:?} is not one of \"sequential\", \"shuffled\""),
        )
    })
}
