//! [`Window`]: a run of units in one file, the sample descriptor the file formats yield,
//! and [`SegmentFile`], the file it lies in.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use super::segmented::{Identified, WindowSpec};
use crate::describe::Describe;
use crate::error::source::SourceError;
use crate::row::Row;

/// A file that is one segment of a source: a run of units (tokens, records) of one size
/// that [`Window`]s are cut from, read by position. [`TokenShard`](crate::source::TokenShard)
/// (any token format's file) and [`RecordFile`](crate::source::RecordFile) are; a
/// [`FileSet`](crate::source::FileSet) of them is a [`Segmented`](crate::source::Segmented)
/// source, and their windows' reads ([`Window::read_into`], ...) are written once over it.
pub trait SegmentFile: Send + Sync + 'static {
    /// Units in the file.
    fn units(&self) -> u64;

    /// The file's path.
    fn path(&self) -> &Path;

    /// Bytes a unit takes in the file: a token's width, a record's size.
    fn unit_bytes(&self) -> usize;

    /// Reads `out.len()` bytes of the file from unit `first`'s first byte on (bytes that lie
    /// inside the file's units: the callers check), then checks that the file did not
    /// change. A file that changed since it was opened, or a read the system failed, is
    /// [`SourceError::Read`].
    fn read_units(&self, first: usize, out: &mut [u8]) -> Result<(), SourceError>;

    /// The file's size in bytes, as opened.
    fn file_bytes(&self) -> u64;

    /// The file's content fingerprint, sampled when it was opened
    /// ([`Fingerprint::contents`](crate::source::Fingerprint::contents)).
    fn content(&self) -> u64;

    /// What a unit is called, plural, for messages: `"tokens"`, `"records"`.
    fn unit_name(&self) -> &'static str;

    /// The file's format as a checkpoint names it, and its record size (0 where units are
    /// not records): `("u16", 0)` for an llm.c shard of `u16` tokens, `("records", 64)`
    /// ([`Fingerprint::format`](crate::source::Fingerprint::format)).
    fn fingerprint_format(&self) -> (&'static str, u64);
}

/// A window of `len` consecutive units from `start` of one file `F`: the sample
/// descriptor the sampler yields for the file formats — `Window<TokenShard>` for
/// [`TokenShards`](crate::source::TokenShards) (units are tokens),
/// `Window<RecordFile>` for [`FixedRecords`](crate::source::FixedRecords) (records).
///
/// Cheap to make and move: a shared handle on the open file, [`start`](Self::start) and
/// [`len`](Self::len) in the file's units, its stable [`id`](Self::id) and the
/// [`epoch`](Self::epoch) it was drawn for. Its reads ([`read_into`](Self::read_into),
/// [`read_bytes`](Self::read_bytes), [`byte_len`](Self::byte_len)) are every format's; a
/// format adds what is its own (`Window<TokenShard>::to_vec`); its decoders read it
/// straight into the batch.
///
/// ```
/// use std::sync::Arc;
/// use pinring::source::{write_shard, TokenShard, Window};
/// # let path = std::env::temp_dir().join(format!("pinring-window-doc-{}.bin", std::process::id()));
/// write_shard(&path, &[1, 2, 3, 4])?;
/// let w = Window::new(Arc::new(TokenShard::open(&path)?), 1, 2).unwrap();
/// assert_eq!((w.start(), w.len(), w.id(), w.epoch()), (1, 2, 0, 0));
/// let w = w.with_id(7).with_epoch(2);
/// assert_eq!((w.id(), w.epoch(), w.to_vec()?), (7, 2, vec![2, 3]));
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
pub struct Window<F> {
    file: Arc<F>,
    start: usize,
    len: usize,
    id: u64,
    epoch: u64,
    step: Option<u64>,
    /// The samples of its step ([`WindowSpec::batch_size`]).
    batch_size: Option<u64>,
}

impl<F> Clone for Window<F> {
    fn clone(&self) -> Self {
        Window {
            file: self.file.clone(),
            ..*self
        }
    }
}

impl<F: SegmentFile> fmt::Debug for Window<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Window")
            .field("file", &self.file.path())
            .field("start", &self.start)
            .field("len", &self.len)
            .field("id", &self.id)
            .field("epoch", &self.epoch)
            .field("step", &self.step)
            .field("batch_size", &self.batch_size)
            .finish()
    }
}

impl<F: SegmentFile> Window<F> {
    /// The `len` units from `start` of `file`, or `None` if they do not all lie in it.
    /// Its id and epoch are 0 until set with [`with_id`](Self::with_id) and
    /// [`with_epoch`](Self::with_epoch) (the sampler sets both).
    pub fn new(file: Arc<F>, start: usize, len: usize) -> Option<Self> {
        let end = start.checked_add(len)?;
        (u64::try_from(end).ok()? <= file.units()).then_some(Window {
            file,
            start,
            len,
            id: 0,
            epoch: 0,
            step: None,
            batch_size: None,
        })
    }

    /// The window `spec` places in `file`, clamped into the file: the sampler asks only
    /// for windows inside it, and should a caller ask otherwise, the window is moved and
    /// cut to fit rather than panicking.
    pub(crate) fn placed(file: Arc<F>, spec: WindowSpec) -> Self {
        let n = usize::try_from(file.units()).unwrap_or(usize::MAX);
        let len = usize::try_from(spec.len).unwrap_or(n).min(n);
        let start = usize::try_from(spec.start).unwrap_or(n).min(n - len);
        Window {
            file,
            start,
            len,
            id: spec.id,
            epoch: spec.epoch,
            step: spec.step,
            batch_size: spec.batch_size,
        }
    }
}

impl<F: SegmentFile> Window<F> {
    /// Bytes the window's units take in the file: `len ×` the file's
    /// [`unit_bytes`](SegmentFile::unit_bytes) (a token's width, a record's size).
    pub fn byte_len(&self) -> usize {
        self.len * self.file.unit_bytes()
    }

    /// Reads the window's units as the file's bytes (a token file's little-endian tokens,
    /// a record file's records) into the start of `out`: all of them, or the first
    /// `out.len()` bytes when `out` is shorter. Returns the bytes read. A file that changed
    /// since it was opened is [`SourceError::Read`] (which `?` turns into a
    /// [`DecodeError`](crate::DecodeError) in a decoder of your own).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use pinring::source::{RecordFile, Window};
    /// # let path = std::env::temp_dir().join(format!("pinring-recwindow-doc-{}.bin", std::process::id()));
    /// std::fs::write(&path, b"abcdef").unwrap();
    /// let w = Window::new(Arc::new(RecordFile::open(&path, 2)?), 1, 2).unwrap();
    /// let mut out = [0u8; 3];
    /// assert_eq!((w.byte_len(), w.read_into(&mut out)?, &out), (4, 3, b"cde"));
    /// assert_eq!(w.read_bytes()?, b"cdef");
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn read_into(&self, out: &mut [u8]) -> Result<usize, SourceError> {
        let n = self.byte_len().min(out.len());
        self.file.read_units(self.start, &mut out[..n])?;
        Ok(n)
    }

    /// The window's units as the file's bytes, read into a new vector.
    pub fn read_bytes(&self) -> Result<Vec<u8>, SourceError> {
        let mut bytes = vec![0; self.byte_len()];
        self.read_into(&mut bytes)?;
        Ok(bytes)
    }
}

impl<F> Window<F> {
    /// The window with id `id`.
    pub fn with_id(mut self, id: u64) -> Self {
        self.id = id;
        self
    }

    /// The window with epoch `epoch`.
    pub fn with_epoch(mut self, epoch: u64) -> Self {
        self.epoch = epoch;
        self
    }

    /// The window's stable id: its index in the dataset's fixed enumeration, the same
    /// whatever the seed, epoch, rank and world size (see [`WindowSpec::id`]). For the
    /// grid orders ([`Order::Sequential`](crate::source::Order::Sequential),
    /// [`Order::Shuffled`](crate::source::Order::Shuffled)) it is the grid index: window
    /// `g` of the files' grids in file order (with records' default window of one, the
    /// record's index over all files). For [`Order::Random`](crate::source::Order::Random)
    /// it numbers window *starts*: the index of its start among every possible start of
    /// every file, in file order. [`Sampler::by_id`](crate::source::Sampler::by_id) maps
    /// an id back to its window.
    ///
    /// ```
    /// use pinring::source::{write_shard, Order, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-id-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// write_shard(dir.join("a.bin"), &[0; 41])?; // windows of 11 at stride 10: 4
    /// write_shard(dir.join("b.bin"), &[0; 21])?; // 2 more: ids 4 and 5
    /// let shards = TokenShards::glob(dir.join("*.bin"))?;
    /// let sampler = shards.clone().windows(11).order(Order::Shuffled { seed: 9 }).build()?;
    /// let mut ids: Vec<u64> = sampler.epoch(5).map(|w| w.id()).collect();
    /// ids.sort();
    /// assert_eq!(ids, [0, 1, 2, 3, 4, 5]);
    /// let w = sampler.by_id(4).unwrap();
    /// assert_eq!((w.file().path().ends_with("b.bin"), w.start()), (true, 0));
    /// // Random order: 31 + 11 possible starts; id 35 is b.bin's start 4.
    /// let random = shards.windows(11).order(Order::Random { seed: 9 }).build()?;
    /// assert_eq!(random.id_count(), 42);
    /// assert_eq!(random.by_id(35).unwrap().start(), 4);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The epoch the sampler drew the window for.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The step (this rank's batch of the run) the window belongs to, where the sampler
    /// numbers steps: with a [`batch_size`](crate::source::SamplerBuilder::batch_size), step
    /// `k` is the `k`-th batch of this rank in an uninterrupted run, across epochs. `None`
    /// without a batch size (and for windows made by [`new`](Self::new) or
    /// [`Sampler::by_id`](crate::source::Sampler::by_id)).
    pub fn step(&self) -> Option<u64> {
        self.step
    }

    /// The window with step `step`.
    pub fn with_step(mut self, step: Option<u64>) -> Self {
        self.step = step;
        self
    }

    /// The samples of this rank's step the window belongs to, where the sampler numbers
    /// steps (its [`batch_size`](crate::source::SamplerBuilder::batch_size)); `None` as for
    /// [`step`](Self::step).
    pub fn batch_size(&self) -> Option<u64> {
        self.batch_size
    }

    /// Writes the window's part of its batch's description: one row with its
    /// [`id`](Self::id), and the batch's step and the sampler's batch size where the window
    /// has them (a pipeline of another batch size refuses the run:
    /// [`Describe::batch_size`]). The decoders of
    /// windows ([`Tokens`](crate::source::Tokens), [`NextToken`](crate::source::NextToken),
    /// [`RecordBytes`](crate::source::RecordBytes)) describe their samples with it; a
    /// decoder of your own over windows can too.
    pub fn describe(&self, out: &mut Describe<'_>) {
        out.row(Row::id(self.id));
        if let Some(step) = self.step {
            out.step(step);
        }
        if let Some(samples) = self.batch_size {
            out.batch_size(samples);
        }
    }

    /// The file the window lies in.
    pub fn file(&self) -> &Arc<F> {
        &self.file
    }

    /// The first unit's index in the file.
    pub fn start(&self) -> usize {
        self.start
    }

    /// Units in the window.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the window has no units.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<F> Identified for Window<F> {
    fn id(&self) -> u64 {
        self.id
    }

    fn epoch(&self) -> u64 {
        self.epoch
    }

    fn step(&self) -> Option<u64> {
        self.step
    }
}
