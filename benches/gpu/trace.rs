//! The pipelines' timelines, written when `PINRING_BENCH_TRACE` names a folder.

use pinring::{Cuda, Pipeline};

use crate::harness::{s, Res};

/// When set, token pipelines record a trace, written to `$PINRING_BENCH_TRACE/NAME.json`
/// after each run (for scripts/trace-summary.py).
pub const TRACE_DIR: &str = "PINRING_BENCH_TRACE";

pub fn write_trace(p: &Pipeline<Cuda>, name: &str) -> Res {
    let Some(dir) = std::env::var_os(TRACE_DIR) else {
        return Ok(());
    };
    let file: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let path = std::path::Path::new(&dir).join(format!("{file}.json"));
    let out = std::fs::File::create(&path).map_err(s)?;
    p.write_trace(std::io::BufWriter::new(out)).map_err(s)?;
    Ok(())
}
