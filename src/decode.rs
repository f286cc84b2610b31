//! The decode step: one sample straight into its byte range of a pinned host slot.

use std::marker::PhantomData;

use crate::describe::Describe;
use crate::error::DecodeError;
use crate::row::Row;
use crate::source_tally::SourceTally;

/// Turns one sample into bytes, written straight into its range of a pinned host slot.
///
/// `decode` runs on the pipeline's rayon pool, many samples at once, so it takes `&self`.
/// `out` is exactly [`Config::bytes_per_sample`](crate::Config::bytes_per_sample) long and holds
/// stale bytes from an earlier batch: write every byte the consumer will read. There is no
/// staging copy: these are the bytes the copy thread sends to the device.
///
/// A returned [`DecodeError`] or a panic stops the pipeline; the consumer's next `pop`
/// after the batches already built reports it with the batch's sequence and sample index
/// (a `DecodeError` that carries a [`SourceError`](crate::source::SourceError), such as a
/// file that changed under the loader, as [`Error::Source`](crate::Error::Source)).
pub trait Decode: Send + Sync + 'static {
    /// What the source iterator yields.
    type Sample: Send + 'static;

    /// Writes `sample` into `out`.
    fn decode(&self, sample: Self::Sample, out: &mut [u8]) -> Result<(), DecodeError>;

    /// The sample's stable id and the epoch it was drawn for, when it carries them: the
    /// feeder records them, so that a [`Batch`](crate::Batch) can say which samples it
    /// holds ([`sample_ids`](crate::Batch::sample_ids)) and which epoch it belongs to
    /// ([`epoch`](crate::Batch::epoch)), and a batch never spans two epochs. The
    /// decoders of [`source`](crate::source) return the ids of their windows
    /// ([`Identified`](crate::source::Identified)); the default (and [`decode_fn`]) returns
    /// `None`: batches then carry no ids. A decoder of your own over sampler windows
    /// implements it as `Some((sample.id(), sample.epoch()))`.
    fn identify(sample: &Self::Sample) -> Option<(u64, u64)>
    where
        Self: Sized,
    {
        let _ = sample;
        None
    }

    /// Writes the sample's part of its batch's description: the rows it adds (where each
    /// came from: [`Batch::sample_ids`](crate::Batch::sample_ids),
    /// [`row_lens`](crate::Batch::row_lens), [`row_sources`](crate::Batch::row_sources)),
    /// and, where the source numbers them, the batch's step and field extents. The feeder
    /// calls it for every sample it gathers, in order, after
    /// [`identify`](Self::identify).
    ///
    /// The default adds one row with `identify`'s id (none without one). A sample that
    /// packs several documents into one batch adds a row for each.
    fn describe(sample: &Self::Sample, out: &mut Describe<'_>)
    where
        Self: Sized,
    {
        if let Some((id, _)) = Self::identify(sample) {
            out.row(Row::id(id));
        }
    }

    /// The per-source counters a decoder of several sources keeps (a mixture's:
    /// [`MixedDecoder`](crate::source::MixedDecoder)), which
    /// [`Pipeline::stats`](crate::Pipeline::stats) reads into
    /// [`Stats::sources`](crate::Stats::sources). The pipeline asks once, when it starts.
    /// The default is `None`: no per-source section.
    fn source_tally(&self) -> Option<std::sync::Arc<SourceTally>> {
        None
    }
}

/// A [`Decode`] made from a closure; see [`decode_fn`].
pub struct DecodeFn<S, F> {
    f: F,
    _sample: PhantomData<fn(S)>,
}

/// Wraps a closure `Fn(sample, out) -> Result<(), DecodeError>` as a [`Decode`].
///
/// ```
/// let widen = pinring::decode_fn(|token: u16, out: &mut [u8]| {
///     out.copy_from_slice(&i32::from(token).to_le_bytes());
///     Ok(())
/// });
/// let mut out = [0u8; 4];
/// pinring::Decode::decode(&widen, 7, &mut out).unwrap();
/// assert_eq!(out, 7i32.to_le_bytes());
/// ```
pub fn decode_fn<S, F>(f: F) -> DecodeFn<S, F>
where
    S: Send + 'static,
    F: Fn(S, &mut [u8]) -> Result<(), DecodeError> + Send + Sync + 'static,
{
    DecodeFn {
        f,
        _sample: PhantomData,
    }
}

impl<S, F> std::fmt::Debug for DecodeFn<S, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DecodeFn")
    }
}

impl<S, F> Decode for DecodeFn<S, F>
where
    S: Send + 'static,
    F: Fn(S, &mut [u8]) -> Result<(), DecodeError> + Send + Sync + 'static,
{
    type Sample = S;

    #[inline]
    fn decode(&self, sample: S, out: &mut [u8]) -> Result<(), DecodeError> {
        (self.f)(sample, out)
    }
}

impl<D: Decode> Decode for std::sync::Arc<D> {
    type Sample = D::Sample;

    #[inline]
    fn decode(&self, sample: Self::Sample, out: &mut [u8]) -> Result<(), DecodeError> {
        (**self).decode(sample, out)
    }

    fn identify(sample: &Self::Sample) -> Option<(u64, u64)> {
        D::identify(sample)
    }

    fn describe(sample: &Self::Sample, out: &mut Describe<'_>) {
        D::describe(sample, out)
    }

    fn source_tally(&self) -> Option<std::sync::Arc<SourceTally>> {
        (**self).source_tally()
    }
}
