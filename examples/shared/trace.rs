//! `--trace FILE`: the loader's timeline (per-batch spans of every stage) as Chrome trace
//! JSON, for https://ui.perfetto.dev or chrome://tracing.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use pinring::{Backend, ConfigBuilder, Pipeline};

use crate::say;

/// Spans the trace ring keeps (the latest ones of a longer run): 40 MiB.
pub const TRACE_SPANS: usize = 1 << 20;

/// The file a trace is written into.
#[derive(Debug)]
pub struct TraceFile {
    path: PathBuf,
    file: File,
}

impl TraceFile {
    /// Creates (or empties) `path`; the error names it.
    pub fn create(path: &Path) -> Result<Self, String> {
        let file = File::create(path).map_err(|e| format!("--trace {}: {e}", path.display()))?;
        Ok(TraceFile {
            path: path.to_owned(),
            file,
        })
    }

    /// With `path` given: `builder` recording a trace, and its file created now, so that a
    /// path that cannot be written ends the run before it starts, not after.
    pub fn before_run(
        builder: ConfigBuilder,
        path: Option<&Path>,
    ) -> Result<(ConfigBuilder, Option<Self>), String> {
        match path {
            Some(path) => Ok((builder.trace(TRACE_SPANS), Some(Self::create(path)?))),
            None => Ok((builder, None)),
        }
    }

    /// Writes `pipeline`'s trace into the file, and says where.
    pub fn write<B: Backend>(self, pipeline: &Pipeline<B>) -> Result<(), String> {
        let written = pipeline
            .write_trace(BufWriter::new(self.file))
            .map_err(|e| format!("--trace {}: {e}", self.path.display()))?;
        say!(
            "trace: {written} spans written to {} (open it in https://ui.perfetto.dev or chrome://tracing)",
            self.path.display()
        );
        Ok(())
    }
}
