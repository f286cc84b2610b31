//! A `.npy` file's header, read and parsed as numpy's format description
//! (`numpy/lib/format.py`) writes it: `\x93NUMPY`, major and minor version bytes, the
//! header's length (little-endian `u16` for version 1.0, `u32` for 2.0 and 3.0), then the
//! header: the `repr` of a dict with the keys `'descr'` (a dtype string), `'fortran_order'`
//! (`True`/`False`) and `'shape'` (a tuple of ints), padded with spaces to a newline.

use super::problem::NpyProblem;
use crate::error::source::SourceError;
use crate::source::files::source_file::SourceFile;

/// numpy's magic.
const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// What the header says of the array.
#[derive(Debug)]
pub(super) struct NpyHeader {
    /// The byte offset of the array's data.
    pub(super) data_at: u64,
    /// The dtype string (`'<u2'`, ...).
    pub(super) descr: String,
    /// The shape.
    pub(super) shape: Vec<u64>,
}

/// Reads and parses the header of `file`.
pub(super) fn read_header(file: &SourceFile) -> Result<NpyHeader, SourceError> {
    let fail = |problem: NpyProblem| SourceError::file(file.path(), problem);
    let len = file.len();
    let mut prelude = [0u8; 12];
    let n = prelude.len().min(len as usize);
    file.read_exact_at(0, &mut prelude[..n])?;
    if n < 8 || prelude[..6] != MAGIC[..] {
        let found = prelude[..n.min(6)].to_vec();
        return Err(fail(NpyProblem::BadMagic { found }));
    }
    let (major, minor) = (prelude[6], prelude[7]);
    let (words, header_len) = match (major, minor) {
        (1, 0) if n >= 10 => (10u64, u64::from(u16::from_le_bytes([prelude[8], prelude[9]]))),
        (2 | 3, 0) if n >= 12 => (12u64, u64::from(u32::from_le_bytes(prelude[8..12].try_into().expect("4")))),
        (1..=3, 0) => return Err(fail(NpyProblem::TruncatedHeader { len, needed: 12 })),
        _ => return Err(fail(NpyProblem::BadVersion { major, minor })),
    };
    let data_at = words + header_len;
    if data_at > len {
        return Err(fail(NpyProblem::TruncatedHeader { len, needed: data_at }));
    }
    let mut text = vec![0u8; header_len as usize];
    file.read_exact_at(words, &mut text)?;
    // 1.0 and 2.0 headers are latin-1, 3.0 UTF-8; a header numpy writes is ASCII in all.
    let text: String = match major {
        3 => String::from_utf8(text).map_err(|_| fail(NpyProblem::BadHeader { why: "not UTF-8".into() }))?,
        _ => text.iter().map(|&b| char::from(b)).collect(),
    };
    let bad = |why: &str| fail(NpyProblem::BadHeader { why: format!("{why}: {:?}", text.trim_end()) });
    if !text.ends_with('\n') {
        return Err(bad("does not end with a newline"));
    }
    let entries = Parser { s: text.trim_end().as_bytes(), at: 0 }.dict().map_err(|why| bad(&why))?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    for (key, value) in entries {
        match (key.as_str(), value) {
            ("descr", Value::Str(s)) => descr = Some(s),
            ("descr", _) => return Err(fail(NpyProblem::StructuredDtype)),
            ("fortran_order", Value::Bool(b)) => fortran = Some(b),
            ("shape", Value::Tuple(t)) => shape = Some(t),
            (key, _) => return Err(bad(&format!("unexpected key or value for {key:?}"))),
        }
    }
    let (Some(descr), Some(_), Some(shape)) = (descr, fortran, shape) else {
        return Err(bad("'descr', 'fortran_order' and 'shape' are each required"));
    };
    Ok(NpyHeader { data_at, descr, shape })
}

/// A header dict's values this reads.
#[derive(Debug)]
enum Value {
    Str(String),
    Bool(bool),
    Tuple(Vec<u64>),
    /// Anything else (a list: a structured dtype's `descr`).
    Other,
}

/// A parser of the Python literal numpy writes: a dict of string keys whose values are
/// strings, `True`/`False`, tuples of integers, or (skipped as [`Value::Other`]) lists.
struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        while self.s.get(self.at).is_some_and(|b| b.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    fn eat(&mut self, b: u8) -> bool {
        self.skip_space();
        if self.s.get(self.at) == Some(&b) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, b: u8) -> Result<(), String> {
        if self.eat(b) { Ok(()) } else { Err(format!("expected {:?} at byte {}", char::from(b), self.at)) }
    }

    fn dict(mut self) -> Result<Vec<(String, Value)>, String> {
        self.expect(b'{')?;
        let mut entries = Vec::new();
        while !self.eat(b'}') {
            let key = self.string()?;
            self.expect(b':')?;
            let value = self.value()?;
            entries.push((key, value));
            if !self.eat(b',') {
                self.expect(b'}')?;
                break;
            }
        }
        self.skip_space();
        if self.at != self.s.len() {
            return Err(format!("text after the dict at byte {}", self.at));
        }
        Ok(entries)
    }

    fn string(&mut self) -> Result<String, String> {
        self.skip_space();
        let quote = match self.s.get(self.at) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(format!("expected a string at byte {}", self.at)),
        };
        let start = self.at + 1;
        let end = self.s[start..]
            .iter()
            .position(|&b| b == quote)
            .ok_or("a string without its closing quote")?;
        self.at = start + end + 1;
        Ok(String::from_utf8_lossy(&self.s[start..start + end]).into_owned())
    }

    fn value(&mut self) -> Result<Value, String> {
        self.skip_space();
        match self.s.get(self.at) {
            Some(b'\'' | b'"') => self.string().map(Value::Str),
            Some(b'(') => self.tuple().map(Value::Tuple),
            Some(b'[') => {
                // A structured dtype's list of fields: skipped whole.
                let mut depth = 0usize;
                while let Some(&b) = self.s.get(self.at) {
                    self.at += 1;
                    match b {
                        b'[' => depth += 1,
                        b']' if depth == 1 => return Ok(Value::Other),
                        b']' => depth -= 1,
                        _ => {}
                    }
                }
                Err("a list without its closing bracket".into())
            }
            _ if self.s[self.at..].starts_with(b"True") => {
                self.at += 4;
                Ok(Value::Bool(true))
            }
            _ if self.s[self.at..].starts_with(b"False") => {
                self.at += 5;
                Ok(Value::Bool(false))
            }
            _ => Err(format!("unexpected value at byte {}", self.at)),
        }
    }

    fn tuple(&mut self) -> Result<Vec<u64>, String> {
        self.expect(b'(')?;
        let mut items = Vec::new();
        while !self.eat(b')') {
            self.skip_space();
            let start = self.at;
            while self.s.get(self.at).is_some_and(u8::is_ascii_digit) {
                self.at += 1;
            }
            let digits = std::str::from_utf8(&self.s[start..self.at]).unwrap_or("");
            items.push(digits.parse::<u64>().map_err(|_| format!("expected a size at byte {start}"))?);
            if !self.eat(b',') {
                self.expect(b')')?;
                break;
            }
        }
        Ok(items)
    }
}

#[cfg(test)]
mod tests {
    use crate::source::npy::header::{Parser, Value};

    #[test]
    fn parses_what_numpy_writes() {
        let text = "{'descr': '<u2', 'fortran_order': False, 'shape': (1000,), }";
        let entries = Parser { s: text.as_bytes(), at: 0 }.dict().unwrap();
        assert!(matches!(&entries[0], (k, Value::Str(s)) if k == "descr" && s == "<u2"));
        assert!(matches!(&entries[1], (k, Value::Bool(false)) if k == "fortran_order"));
        assert!(matches!(&entries[2], (k, Value::Tuple(t)) if k == "shape" && t == &[1000]));
        let text = "{'descr': [('a', '<u2')], 'fortran_order': True, 'shape': (2, 3)}";
        let entries = Parser { s: text.as_bytes(), at: 0 }.dict().unwrap();
        assert!(matches!(&entries[0].1, Value::Other));
        assert!(matches!(&entries[2].1, Value::Tuple(t) if t == &[2, 3]));
        for bad in ["{'descr': '<u2'", "{'shape': (1,)} x", "{descr: 1}", "{'shape': (a,)}"] {
            assert!(Parser { s: bad.as_bytes(), at: 0 }.dict().is_err(), "{bad}");
        }
    }
}
