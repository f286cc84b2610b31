//! Plain data between Python and serde: a `serde_json::Value` as the Python object it
//! stands for (dict, list, int, str, bool, None) and back, so that a Rust record with a
//! serde form crosses into Python as exactly its serde record (the Documents state dict is
//! the core's `DocumentsCheckpoint`'s). Python's own `json` module is not involved: ints
//! keep every bit (u64 and i64), and nothing is text in between.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// `value` as a Python object: objects as dicts (in key order), arrays as lists.
pub(crate) fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// `obj` as a `Value`: a dict of str keys, a list or tuple, an int (in i64 or u64 range), a
/// float, a str, a bool or None; anything else is a ValueError naming where it lies (`at`:
/// the path so far, as `state["schedule"][1]`).
pub(crate) fn from_py(obj: &Bound<'_, PyAny>, at: &str) -> PyResult<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(Value::Number(u.into()));
        }
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::Number(i.into()));
        }
        return Err(PyValueError::new_err(format!(
            "{at} = {} is out of the range of a 64-bit int",
            obj.repr()?
        )));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| PyValueError::new_err(format!("{at} is not a finite number")));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_str()?.to_owned()));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = Map::new();
        for (k, v) in d.iter() {
            let key: String = k.extract().map_err(|_| {
                PyValueError::new_err(format!("{at} has a key that is not a str: {:?}", k))
            })?;
            let value = from_py(&v, &format!("{at}[{key:?}]"))?;
            map.insert(key, value);
        }
        return Ok(Value::Object(map));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let items = obj
            .try_iter()?
            .enumerate()
            .map(|(i, item)| from_py(&item?, &format!("{at}[{i}]")))
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(Value::Array(items));
    }
    Err(PyValueError::new_err(format!(
        "{at} is a {}: a state holds only dicts, lists, ints, strs, bools and None",
        obj.get_type().name()?
    )))
}
