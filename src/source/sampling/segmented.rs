//! The source side of sampling: [`Segmented`] sources, the [`WindowSpec`] a sampler asks
//! them for, and the [`Identified`] windows they give back.

use std::path::Path;

use super::checkpoint::Fingerprint;

/// A source the [`Sampler`](crate::source::Sampler) can cut into windows: a list of segments (files), each a run
/// of units (tokens, records). Windows never cross a segment's end.
///
/// [`TokenShards`](crate::source::TokenShards) and
/// [`FixedRecords`](crate::source::FixedRecords) implement it; implement it for your own
/// format to get the same sampling, sharding, ids and resume:
///
/// ```
/// use pinring::source::{Fingerprint, Identified, Order, Sampler, Segmented, WindowSpec};
///
/// /// Lines of a text, as (line, first character, characters, id, epoch).
/// struct Lines(Vec<String>);
///
/// #[derive(Debug, PartialEq)]
/// struct Chars { line: usize, start: u64, len: u64, id: u64, epoch: u64 }
///
/// impl Identified for Chars {
///     fn id(&self) -> u64 { self.id }
///     fn epoch(&self) -> u64 { self.epoch }
/// }
///
/// impl Segmented for Lines {
///     type Window = Chars;
///     fn segments(&self) -> usize { self.0.len() }
///     fn units(&self, segment: usize) -> u64 { self.0[segment].len() as u64 }
///     fn window(&self, spec: WindowSpec) -> Chars {
///         let WindowSpec { segment, start, len, id, epoch, .. } = spec;
///         Chars { line: segment, start, len, id, epoch }
///     }
///     fn fingerprint(&self) -> Fingerprint {
///         let mut print = Fingerprint::new("lines", 0);
///         for (i, line) in self.0.iter().enumerate() {
///             print.files.push(format!("line {i}"));
///             print.sizes.push(line.len() as u64);
///         }
///         print
///     }
/// }
///
/// let text = Lines(vec!["abcdef".into(), "gh".into(), "ijkl".into()]);
/// let sampler = Sampler::builder(text).window(2).order(Order::Shuffled { seed: 1 }).build()?;
/// let mut ids: Vec<u64> = sampler.epoch(0).map(|w| w.id()).collect();
/// ids.sort();
/// assert_eq!(ids, [0, 1, 2, 3, 4, 5]); // 3 + 1 + 2 windows of 2 characters
/// assert_eq!(sampler.by_id(3), Some(Chars { line: 1, start: 0, len: 2, id: 3, epoch: 0 }));
/// assert_eq!(sampler.checkpoint(0, 0).dataset.format, "lines");
/// # Ok::<(), pinring::Error>(())
/// ```
pub trait Segmented: Send + Sync + 'static {
    /// The cheap descriptor of one window that the sampler yields (and a
    /// [`Decode`](crate::Decode) impl turns into bytes).
    type Window: Send + 'static;

    /// How many segments there are.
    fn segments(&self) -> usize;

    /// Units in segment `segment` (`segment < self.segments()`).
    fn units(&self, segment: usize) -> u64;

    /// The descriptor of the window `spec` places: `spec.len` units from `spec.start` of
    /// segment `spec.segment`, carrying its stable id and the epoch it was drawn for
    /// (which [`Window::id`](crate::source::Window::id) and
    /// [`epoch`](crate::source::Window::epoch) give back). The sampler only asks for
    /// windows that lie inside the segment: `spec.start + spec.len <= units(spec.segment)`.
    fn window(&self, spec: WindowSpec) -> Self::Window;

    /// What a unit is called, plural, for messages: `"tokens"`, `"records"`. The default
    /// is `"units"`.
    fn unit_name(&self) -> &'static str {
        "units"
    }

    /// The file segment `segment` is, if the segments are files: messages name it (the
    /// longest file when no window fits, say). The default is `None`.
    fn segment_path(&self, segment: usize) -> Option<&Path> {
        let _ = segment;
        None
    }

    /// What identifies the dataset in a [`Checkpoint`](crate::source::Checkpoint): format,
    /// file names, sizes and content fingerprints (one per file, or none).
    /// The default names segment `i` `"segment i"`, with its units as its size, no content
    /// fingerprints, and the format `"custom"`: override it so that a checkpoint of another
    /// dataset of the same lengths is refused
    /// ([`Fingerprint::push_file_with_content`] takes a hash of each segment's bytes).
    fn fingerprint(&self) -> Fingerprint {
        let mut print = Fingerprint::new("custom", 0);
        for s in 0..self.segments() {
            print.files.push(format!("segment {s}"));
            print.sizes.push(self.units(s));
        }
        print
    }
}

/// One window the [`Sampler`](crate::source::Sampler) asks a [`Segmented`] source for: where it lies, its stable
/// id, and the epoch it is drawn for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WindowSpec {
    /// The segment (file) it lies in.
    pub segment: usize,
    /// Its first unit in the segment.
    pub start: u64,
    /// Units in it.
    pub len: u64,
    /// Its stable id: its index in the dataset's fixed enumeration, the same whatever
    /// the order's seed, the epoch, the rank and the world size. For the grid orders
    /// ([`Order::Sequential`](crate::source::Order::Sequential),
    /// [`Order::Shuffled`](crate::source::Order::Shuffled)) the grid index `g`: window `g`
    /// of the concatenated segments' grids, in segment order. For
    /// [`Order::Random`](crate::source::Order::Random) the index of its start among all
    /// possible starts of all segments, in segment order (so ids then number starts, not
    /// grid windows). See [`Sampler::by_id`](crate::source::Sampler::by_id).
    pub id: u64,
    /// The epoch it was drawn for (0 for [`Sampler::by_id`](crate::source::Sampler::by_id)).
    pub epoch: u64,
    /// The step (this rank's batch of the run) it belongs to, where the sampler numbers
    /// steps (it has a [`batch_size`](crate::source::SamplerBuilder::batch_size)); `None`
    /// otherwise. A window keeps it so that its batch can say which step it is
    /// ([`Batch::step`](crate::Batch::step)).
    pub step: Option<u64>,
    /// The samples of this rank's step, where the sampler numbers steps (its
    /// [`batch_size`](crate::source::SamplerBuilder::batch_size)); `None` otherwise. A
    /// window keeps it so that a pipeline of another batch size refuses the run rather than
    /// mislabel its steps ([`Describe::batch_size`](crate::Describe::batch_size)).
    pub batch_size: Option<u64>,
}

/// A sample that knows its stable id and the epoch it was drawn for: the windows a
/// [`Sampler`](crate::source::Sampler) yields ([`Window`](crate::source::Window)), so that code generic over a decoder's
/// [`Sample`](crate::Decode::Sample) can record which samples a batch holds.
pub trait Identified {
    /// The stable id ([`WindowSpec::id`]).
    fn id(&self) -> u64;
    /// The epoch it was drawn for.
    fn epoch(&self) -> u64;
    /// The step it belongs to, where the sampler numbers steps ([`WindowSpec::step`]);
    /// `None` by default.
    fn step(&self) -> Option<u64> {
        None
    }
}
