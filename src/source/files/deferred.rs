//! Runs: a thread's reads of source files checked once per file when the run ends, rather
//! than after every read. The decode pool makes each work item (a part of a batch) a run,
//! so that a batch part of many small windows costs one `fstat` per file, not one per
//! window; [`with_checks_at_end`] makes one for a caller's own loop of decodes.
//!
//! The check after the last read vouches for every read before it (a write moves the
//! file's size or modification time before it lands; see
//! [`SourceFile::read_exact_at`](super::source_file::SourceFile::read_exact_at)), so the
//! run's end is as good a place for it as each read's, as long as nothing read in the run
//! is published before it: the pool marks the item decoded only after the run's checks
//! passed. Each file read is held by the run until it ends (its first read's sample noted,
//! to name it in the error), and the end empties this thread's [chunk](super::chunk).

use std::cell::{Cell, RefCell};

use super::open_file::OpenFile;
use crate::error::source::SourceError;
use crate::sync::native::Arc;

thread_local! {
    /// How many runs this thread is inside (0: reads are checked at once).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// The sample the thread's run decodes now (the pool's index in the batch).
    static SAMPLE: Cell<usize> = const { Cell::new(0) };
    /// The files the run read, each with the sample that first read it, in that order.
    static FILES: RefCell<Vec<(Arc<OpenFile>, usize)>> = const { RefCell::new(Vec::new()) };
}

/// Whether this thread is inside a run.
pub(crate) fn active() -> bool {
    DEPTH.with(Cell::get) > 0
}

/// Inside a run, notes that `file` was read (for the check at the run's end) and returns
/// `true`; outside one returns `false`: the caller checks now.
pub(super) fn defer(file: &Arc<OpenFile>) -> bool {
    if !active() {
        return false;
    }
    FILES.with(|files| {
        let mut files = files.borrow_mut();
        let known = files.iter().rev().any(|(f, _)| Arc::ptr_eq(f, file));
        if !known {
            files.push((file.clone(), SAMPLE.with(Cell::get)));
        }
    });
    true
}

/// A run on this thread while it lives (see the module docs); runs nest, and the
/// outermost one's end forgets the files and empties the chunk.
#[derive(Debug)]
pub(crate) struct Run {
    outermost: bool,
    /// A run belongs to its thread.
    _here: std::marker::PhantomData<*const ()>,
}

/// A run's check found a file changed (or unreadable): the error naming it, and the
/// sample (as [`Run::sample`] set it) that first read it.
#[derive(Debug)]
pub(crate) struct Failed {
    pub(crate) sample: usize,
    pub(crate) error: SourceError,
}

impl Run {
    /// Starts a run on this thread.
    pub(crate) fn begin() -> Self {
        let depth = DEPTH.with(|d| {
            d.set(d.get() + 1);
            d.get()
        });
        Run {
            outermost: depth == 1,
            _here: std::marker::PhantomData,
        }
    }

    /// Notes that the reads from now on are for sample `j` (what a failed check names).
    pub(crate) fn sample(&self, j: usize) {
        SAMPLE.with(|s| s.set(j));
    }

    /// Checks every file read so far in this thread's runs, in the order they were first
    /// read; the first that changed or cannot be looked at is the error, with the sample
    /// that first read it.
    pub(crate) fn finish(self) -> Result<(), Failed> {
        FILES.with(|files| {
            for (file, sample) in files.borrow().iter() {
                if let Err(problem) = file.check() {
                    return Err(Failed {
                        sample: *sample,
                        error: SourceError::Read {
                            path: file.path().to_owned(),
                            problem,
                            at: None,
                        },
                    });
                }
            }
            Ok(())
        })
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
        if self.outermost {
            FILES.with(|f| f.borrow_mut().clear());
            SAMPLE.with(|s| s.set(0));
            super::chunk::clear();
        }
    }
}

/// Runs `f` (say, a loop decoding several samples into buffers of your own) with every
/// source file it reads checked once, when it returns, rather than after each read: one
/// `fstat` per file instead of one per sample, and reads of a sequential walk served from
/// one large read ahead. What `f` read is vouched for only once this returns `Ok`: do not
/// use it before. `Err` is the first file found changed (or that could not be looked at),
/// as [`SourceError::Read`]. Inside another run (a decoder on the pipeline's decode pool,
/// which runs each part of a batch this way) it checks the files of the whole run so far.
///
/// ```
/// use pinring::source::{with_checks_at_end, write_shard, Order, TokenShards, TokenType, Tokens};
/// use pinring::Decode;
/// # let path = std::env::temp_dir().join(format!("pinring-checks-doc-{}.bin", std::process::id()));
/// write_shard(&path, &(0..4097u16).collect::<Vec<_>>())?;
/// let sampler = TokenShards::open([&path])?.windows(65).order(Order::Sequential).build()?;
/// let decoder = Tokens::new(TokenType::I32);
/// let mut out = vec![0u8; 64 * decoder.sample_bytes(65)];
/// let windows = sampler.epoch(0).take(64);
/// with_checks_at_end(|| {
///     for (w, o) in windows.zip(out.chunks_exact_mut(decoder.sample_bytes(65))) {
///         decoder.decode(w, o)?;
///     }
///     Ok::<(), pinring::DecodeError>(())
/// })??;
/// assert_eq!(i32::from_le_bytes(out[4..8].try_into().unwrap()), 1);
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn with_checks_at_end<R>(f: impl FnOnce() -> R) -> Result<R, SourceError> {
    let run = Run::begin();
    let out = f();
    run.finish().map_err(|failed| failed.error)?;
    Ok(out)
}
