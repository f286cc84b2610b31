//! The tools' number parsers (clap's `value_parser`s) and the options several tools take
//! alike: `--dtype` and `--schedule`.

use clap::ValueEnum;
use pinring::source::TokenType;

/// A whole number of at least 1.
pub fn at_least_one(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("it must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!(
            "{e} (a whole number from 1 to {} is expected)",
            u64::MAX
        )),
    }
}

/// A whole number of at least 1 that this machine can count (a `usize`).
pub fn at_least_one_usize(s: &str) -> Result<usize, String> {
    let n = at_least_one(s)?;
    usize::try_from(n).map_err(|_| format!("{n} is more than this machine can count"))
}

/// `--dtype`: the integer type tokens are written as, by the names Python uses.
// The variants carry no doc comment: clap would show it beside each value in --help.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Dtype {
    #[value(name = "uint16")]
    U16,
    #[value(name = "int32")]
    I32,
    #[value(name = "int64")]
    I64,
}

impl From<Dtype> for TokenType {
    fn from(d: Dtype) -> Self {
        match d {
            Dtype::U16 => TokenType::U16,
            Dtype::I32 => TokenType::I32,
            Dtype::I64 => TokenType::I64,
        }
    }
}

/// A parsed `--schedule`: its `(from, tokens_per_batch, max_seq_len)` entries.
#[derive(Debug, Clone, Default)]
pub struct Schedule(pub Vec<(u64, u64, u64)>);

/// `--schedule`: FROM:N:L entries, comma separated.
pub fn schedule(s: &str) -> Result<Schedule, String> {
    s.split(',')
        .map(|entry| {
            let parts: Vec<&str> = entry.trim().split(':').collect();
            let [from, n, l] = parts[..] else {
                return Err(format!(
                    "`{entry}` is not FROM:N:L (three whole numbers, such as 500:32768:2048)"
                ));
            };
            let num = |what: &str, v: &str| {
                v.parse::<u64>()
                    .map_err(|e| format!("`{entry}`: {what} `{v}`: {e}"))
            };
            Ok((num("FROM", from)?, num("N", n)?, num("L", l)?))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Schedule)
}
