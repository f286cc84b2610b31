//! [`AnySource`]: the union of the built-in sources, one [`Source`] whatever it holds — what
//! a binding keeps when its user picks the source at run time (the Python package's one
//! `Loader` class holds a `Loader<AnySource, _>`), with its samples, decoder and iterator.

use std::sync::Arc;

use super::contract::{EpochPlace, Source};
use super::documents::{DocStep, Documents, PackDocuments, Steps};
use super::mixture::{
    MixedDecoder, MixedDocStep, MixedSample, MixedSamples, MixedSteps, Mixture, PackMixedDocuments,
};
use super::records::{FixedRecords, RecordBytes, RecordFile};
use super::run::Run;
use super::sampling::sampler::Sampler;
use super::sampling::samples::Samples;
use super::sampling::window::Window;
use super::state::State;
use super::tokens::{TokenShard, TokenShards, Tokens};
use crate::config::ConfigBuilder;
use crate::decode::Decode;
use crate::describe::Describe;
use crate::error::{DecodeError, Result};
use crate::locate::Locate;
use crate::source_tally::SourceTally;

/// Runs `$body` with `$s` bound to what the `$enum` value holds, for each of the six kinds;
/// `$wrap` puts a result back into the enum's variant of the same name (or leaves it).
macro_rules! on_each {
    ($value:expr, $enum:ident, $s:ident => $body:expr) => {
        match $value {
            $enum::TokenWindows($s) => $body,
            $enum::FixedRecords($s) => $body,
            $enum::Documents($s) => $body,
            $enum::TokenMixture($s) => $body,
            $enum::RecordMixture($s) => $body,
            $enum::DocumentMixture($s) => $body,
        }
    };
    ($value:expr, $enum:ident, $s:ident => $body:expr, wrap $out:ident) => {
        match $value {
            $enum::TokenWindows($s) => $out::TokenWindows($body),
            $enum::FixedRecords($s) => $out::FixedRecords($body),
            $enum::Documents($s) => $out::Documents($body),
            $enum::TokenMixture($s) => $out::TokenMixture($body),
            $enum::RecordMixture($s) => $out::RecordMixture($body),
            $enum::DocumentMixture($s) => $out::DocumentMixture($body),
        }
    };
}

/// Declares [`AnySource`] with its variants, and `From` each variant's source.
macro_rules! any_source {
    ($($(#[$doc:meta])* $variant:ident($ty:ty)),* $(,)?) => {
        /// One of the built-in sources.
        #[derive(Debug, Clone)]
        pub enum AnySource {
            $($(#[$doc])* $variant($ty),)*
        }

        $(
            impl From<$ty> for AnySource {
                fn from(source: $ty) -> Self {
                    AnySource::$variant(source)
                }
            }
        )*
    };
}

any_source! {
    /// Windows of token shards.
    TokenWindows(Sampler<TokenShards>),
    /// Windows of fixed-size records.
    FixedRecords(Sampler<FixedRecords>),
    /// Packed documents.
    Documents(Documents),
    /// A mixture of token windows.
    TokenMixture(Mixture<TokenShards>),
    /// A mixture of records.
    RecordMixture(Mixture<FixedRecords>),
    /// A mixture of packed documents.
    DocumentMixture(Mixture<Documents>),
}

/// A sample of an [`AnySource`].
///
/// As small as a token window (72 bytes): the pipeline keeps a cell of the sample type for
/// every sample of every host slot, and those cells count in the host budget. The other
/// kinds' samples are boxed (one allocation a sample, on the feeder's thread; a loader of a
/// concrete source, `Loader<Sampler<FixedRecords>>`, has none).
#[derive(Debug)]
pub enum AnySample {
    /// A window of tokens.
    TokenWindows(Window<TokenShard>),
    /// A window of records.
    FixedRecords(Box<Window<RecordFile>>),
    /// A step of packed documents.
    Documents(Box<DocStep>),
    /// A mixed window of tokens.
    TokenMixture(Box<MixedSample<Window<TokenShard>>>),
    /// A mixed window of records.
    RecordMixture(Box<MixedSample<Window<RecordFile>>>),
    /// A step of mixed packed documents.
    DocumentMixture(Box<MixedDocStep>),
}

/// The decoder of an [`AnySource`]: the held source's own.
#[derive(Debug)]
pub enum AnyDecoder {
    /// Token windows' decoder.
    TokenWindows(Tokens),
    /// Records' decoder.
    FixedRecords(RecordBytes),
    /// Packed documents' decoder.
    Documents(PackDocuments),
    /// A token mixture's decoder.
    TokenMixture(MixedDecoder<Tokens>),
    /// A record mixture's decoder.
    RecordMixture(MixedDecoder<RecordBytes>),
    /// A document mixture's decoder.
    DocumentMixture(PackMixedDocuments),
}

/// The samples of an [`AnySource`]'s run.
#[derive(Debug)]
pub enum AnySamples {
    /// Token windows.
    TokenWindows(Samples<TokenShards>),
    /// Records.
    FixedRecords(Samples<FixedRecords>),
    /// Packed steps.
    Documents(Steps),
    /// Mixed token windows.
    TokenMixture(MixedSamples<TokenShards>),
    /// Mixed records.
    RecordMixture(MixedSamples<FixedRecords>),
    /// Mixed packed steps.
    DocumentMixture(MixedSteps),
}

impl Iterator for AnySamples {
    type Item = AnySample;

    fn next(&mut self) -> Option<AnySample> {
        Some(match self {
            AnySamples::TokenWindows(s) => AnySample::TokenWindows(s.next()?),
            AnySamples::FixedRecords(s) => AnySample::FixedRecords(Box::new(s.next()?)),
            AnySamples::Documents(s) => AnySample::Documents(Box::new(s.next()?)),
            AnySamples::TokenMixture(s) => AnySample::TokenMixture(Box::new(s.next()?)),
            AnySamples::RecordMixture(s) => AnySample::RecordMixture(Box::new(s.next()?)),
            AnySamples::DocumentMixture(s) => AnySample::DocumentMixture(Box::new(s.next()?)),
        })
    }
}

impl AnySample {
    /// The kind of source it came from, for errors.
    fn kind(&self) -> &'static str {
        match self {
            AnySample::TokenWindows(_) => "token windows",
            AnySample::FixedRecords(_) => "records",
            AnySample::Documents(_) => "packed documents",
            AnySample::TokenMixture(_) => "a token mixture",
            AnySample::RecordMixture(_) => "a record mixture",
            AnySample::DocumentMixture(_) => "a document mixture",
        }
    }
}

impl Decode for AnyDecoder {
    type Sample = AnySample;

    fn decode(&self, sample: AnySample, out: &mut [u8]) -> Result<(), DecodeError> {
        match (self, sample) {
            (AnyDecoder::TokenWindows(d), AnySample::TokenWindows(s)) => d.decode(s, out),
            (AnyDecoder::FixedRecords(d), AnySample::FixedRecords(s)) => d.decode(*s, out),
            (AnyDecoder::Documents(d), AnySample::Documents(s)) => d.decode(*s, out),
            (AnyDecoder::TokenMixture(d), AnySample::TokenMixture(s)) => d.decode(*s, out),
            (AnyDecoder::RecordMixture(d), AnySample::RecordMixture(s)) => d.decode(*s, out),
            (AnyDecoder::DocumentMixture(d), AnySample::DocumentMixture(s)) => d.decode(*s, out),
            (_, sample) => Err(DecodeError::new(format!(
                "a sample of {} given to another source's decoder",
                sample.kind()
            ))),
        }
    }

    fn identify(sample: &AnySample) -> Option<(u64, u64)> {
        match sample {
            AnySample::TokenWindows(s) => Tokens::identify(s),
            AnySample::FixedRecords(s) => RecordBytes::identify(s),
            AnySample::Documents(s) => PackDocuments::identify(s),
            AnySample::TokenMixture(s) => MixedDecoder::<Tokens>::identify(s),
            AnySample::RecordMixture(s) => MixedDecoder::<RecordBytes>::identify(s),
            AnySample::DocumentMixture(s) => PackMixedDocuments::identify(s),
        }
    }

    fn describe(sample: &AnySample, out: &mut Describe<'_>) {
        match sample {
            AnySample::TokenWindows(s) => Tokens::describe(s, out),
            AnySample::FixedRecords(s) => RecordBytes::describe(s, out),
            AnySample::Documents(s) => PackDocuments::describe(s, out),
            AnySample::TokenMixture(s) => MixedDecoder::<Tokens>::describe(s, out),
            AnySample::RecordMixture(s) => MixedDecoder::<RecordBytes>::describe(s, out),
            AnySample::DocumentMixture(s) => PackMixedDocuments::describe(s, out),
        }
    }

    fn source_tally(&self) -> Option<Arc<SourceTally>> {
        on_each!(self, AnyDecoder, d => d.source_tally())
    }
}

impl Source for AnySource {
    type Sample = AnySample;
    type Decoder = AnyDecoder;
    type Samples = AnySamples;

    fn packs_steps(&self) -> bool {
        on_each!(self, AnySource, s => s.packs_steps())
    }

    fn has_epochs(&self) -> bool {
        on_each!(self, AnySource, s => s.has_epochs())
    }

    fn own_run(&self) -> Run {
        on_each!(self, AnySource, s => s.own_run())
    }

    fn with_run(&self, run: &Run) -> Result<Self> {
        Ok(on_each!(self, AnySource, s => s.with_run(run)?, wrap AnySource))
    }

    fn config(&self) -> ConfigBuilder {
        on_each!(self, AnySource, s => Source::config(s))
    }

    fn decoder(&self) -> AnyDecoder {
        on_each!(self, AnySource, s => Source::decoder(s), wrap AnyDecoder)
    }

    fn samples(&self, from: Option<&State>, epochs: Option<u64>) -> Result<AnySamples> {
        Ok(on_each!(self, AnySource, s => s.samples(from, epochs)?, wrap AnySamples))
    }

    fn state_at(&self, from: Option<&State>, near: Option<&State>, step: u64) -> Result<State> {
        on_each!(self, AnySource, s => s.state_at(from, near, step))
    }

    fn check(&self, state: &State) -> Result<()> {
        on_each!(self, AnySource, s => Source::check(s, state))
    }

    fn epoch_batches(&self) -> Option<u64> {
        on_each!(self, AnySource, s => Source::epoch_batches(s))
    }

    fn epoch_len(&self) -> Option<u64> {
        on_each!(self, AnySource, s => Source::epoch_len(s))
    }

    fn place(&self, from: Option<&State>, step: u64) -> Result<Option<EpochPlace>> {
        on_each!(self, AnySource, s => s.place(from, step))
    }

    fn total_batches(&self, from: Option<&State>, epochs: u64) -> Result<Option<u64>> {
        on_each!(self, AnySource, s => s.total_batches(from, epochs))
    }

    fn end_step(&self, from: Option<&State>, epochs: u64) -> Result<Option<u64>> {
        on_each!(self, AnySource, s => s.end_step(from, epochs))
    }

    fn stop_rule(&self) -> Option<&'static str> {
        on_each!(self, AnySource, s => s.stop_rule())
    }

    fn locator(&self) -> Arc<dyn Locate> {
        on_each!(self, AnySource, s => Source::locator(s))
    }

    fn weights(&self) -> Option<&[f64]> {
        on_each!(self, AnySource, s => Source::weights(s))
    }

    fn reweighted(&self, weights: &[f64], state: &State) -> Result<(Self, State)> {
        on_each!(self, AnySource, s => {
            let (s, state) = s.reweighted(weights, state)?;
            Ok((AnySource::from(s), state))
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::source::any::AnySample;
    use crate::source::sampling::window::Window;
    use crate::source::tokens::TokenShard;

    /// The pipeline keeps a cell of the sample type for every sample of every host slot
    /// (counted in the host budget): an erased sample is no larger than a token window.
    #[test]
    fn an_erased_sample_is_the_size_of_a_token_window() {
        assert_eq!(
            std::mem::size_of::<AnySample>(),
            std::mem::size_of::<Window<TokenShard>>()
        );
    }
}
