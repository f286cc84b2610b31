//! Data sources: token files and fixed-size records on disk, the sampler that cuts them
//! into windows (sequential, shuffled per epoch or at random offsets; sharded by rank with
//! equal batch counts; resumable, also on another world size), and the decoders that
//! write windows into batches.
//!
//! Token files are read in any [`TokenFileFormat`]: llm.c's `.bin` shards ([`Llmc`], what
//! [`TokenShards::open`] opens), of `u16` tokens (its GPT-2 format) or `u32` tokens (its
//! LLaMA-3 format), [`ShardFormat`] saying which; and raw headerless files of `u16` or
//! `u32` tokens as numpy's `tofile` writes them ([`RawTokens`], through
//! [`TokenShards::open_as`]: llama2.c's and candle's, OLMo's and MaxText's); Megatron-LM's
//! and NeMo's `.bin`/`.idx` ([`Megatron`]); datatrove's `.ds` with its `.ds.index`
//! ([`Datatrove`]); and numpy's `.npy` 1-D token arrays ([`Npy`]). Megatron's and
//! datatrove's files say where their documents end, which [`Documents`] built without a
//! `bos` use instead of a `bos` scan. Every format
//! opens into a [`TokenShard`], and from there everything reads alike: windows,
//! [`Documents`], mixtures, the decoders (to any [`TokenType`]). Token files and files of
//! fixed-size records are [`FileSet`]s, whose sampling and checkpoint fingerprint are
//! written once; their windows, `Window<TokenShard>` and `Window<RecordFile>`, are one
//! generic [`Window`] with its reads ([`read_into`](Window::read_into), ...): its place as
//! [`start`](Window::start) and [`len`](Window::len), in the file's units (tokens,
//! records), its stable [`id`](Window::id) (the same on every rank, world size, seed and
//! epoch) and the [`epoch`](Window::epoch) it was drawn for.
//!
//! For data-parallel training, [`SamplerBuilder::shard`] gives each rank a disjoint share
//! of every epoch and [`SamplerBuilder::batch_size`] makes the shares equal in whole
//! batches. A [`Checkpoint`] records the global position — how many of the epoch's
//! windows all ranks together consumed — and [`Sampler::iter_from_checkpoint`] resumes
//! from it on any number of ranks, so that every window of the epoch is delivered exactly
//! once across the two runs ([`Sampler`] has the details and an example).
//!
//! Sources plug into the pipeline through the sampler's iterator, which yields small
//! descriptors — a shared handle on an open file and an offset — and a decoder, which
//! reads the file and widens its tokens on the decode pool, straight into the pinned slot.
//! Files are read by position (`pread`: nothing is mapped, and no signal handler is
//! installed) and checked after the reads (once per file and work item on the decode pool;
//! see [`with_checks_at_end`]): a file that shrinks, is rewritten or is replaced while a
//! loader reads it is a [`SourceError::Read`] from `pop` (after the batches before it),
//! naming the file, the batch and the sample; never a crash. A read the file system fails
//! is the same error with [`ReadProblem::Io`], which [`SourceError::is_retryable`] tells
//! from a change: a new run over the same source reads the file again.
//!
//! A [`Loader`](crate::Loader) runs any of them: what a run needs of a source is the
//! [`Source`] trait, which token windows and records ([`Sampler`]), packed documents
//! ([`Documents`]) and mixtures ([`Mixture`]) implement. The example below is the layer
//! beneath it: a sampler's iterator and its decoder driven through a
//! [`Pipeline`](crate::Pipeline) by hand.
//!
//! The layout:
//!
//! - `contract.rs`: [`Source`], [`IntoSource`], [`EpochPlace`]; `run.rs`: [`Run`], the
//!   run a loader sets a source up for, and [`StepRanges`]; `state.rs`: [`State`], where a
//!   run of any source stands; `any.rs`: [`AnySource`], the union of the built-in sources;
//! - each format is a folder that owns what is its own — its file type or opener, its
//!   problems, its decoders (`tokens/`, which also holds what every token format shares,
//!   `raw/`, `megatron/`, `datatrove/`, `npy/`, `records/`) — registered by one line of `formats!` below that names
//!   everything it exports. A new token format is its folder (a [`TokenFileFormat`] and
//!   its problem type) and its line;
//! - what every format uses is shared: `sampling/` (the [`Sampler`], its iterator and
//!   arithmetic, [`Order`], [`Checkpoint`], [`Segmented`], [`FileSet`] and [`Window`],
//!   whose reads every format shares, and a sampler as a `Source` for every
//!   [`WindowFormat`]) and `files/` (opening regular files, patterns, positioned reads);
//! - `documents/`: packed documents from token shards, a step a batch; `mixture/`:
//!   sources mixed by weight into one global sequence.
//!
//! Each kind's `Source` implementation is its folder's `as_source.rs`.
//!
//! ```
//! use pinring::source::{write_shard, NextToken, Order, TokenShards, TokenType};
//! use pinring::{Config, Fence, Pipeline};
//!
//! # let dir = std::env::temp_dir().join(format!("pinring-source-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! let tokens: Vec<u16> = (0..4097u16).collect();
//! write_shard(dir.join("train_000.bin"), &tokens)?;
//!
//! const T: u64 = 64;
//! let sampler = TokenShards::glob(dir.join("train_*.bin"))?
//!     .windows(T + 1)
//!     .order(Order::Shuffled { seed: 1337 })
//!     .build()?;
//! let decoder = NextToken::new(TokenType::I32);
//! let config = Config::builder()
//!     .batch_size(8)
//!     .bytes_per_sample(decoder.sample_bytes(T + 1))
//!     .decode_threads(2)
//!     .build()?;
//! // The sampler's iterator is endless (epoch after epoch): take what the run needs.
//! let mut pipeline = Pipeline::new(config, decoder, sampler.iter().take(3 * 8))?;
//! while let Some(batch) = pipeline.pop()? {
//!     for sample in batch.bytes().chunks_exact(decoder.sample_bytes(T + 1)) {
//!         let (inputs, targets) = NextToken::split(sample);
//!         // Here token i is i: each target is its input plus one.
//!         assert_eq!(i32::from_le_bytes(inputs[..4].try_into().unwrap()) + 1,
//!                    i32::from_le_bytes(targets[..4].try_into().unwrap()));
//!     }
//!     batch.release(Fence::Sync).expect("a Sync fence always captures");
//! }
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), pinring::Error>(())
//! ```

mod any;
mod contract;
pub(crate) mod files;
mod mixture;
mod run;
mod sampling;
mod state;

/// Declares each format's folder and re-exports the names its line lists: a format is
/// registered by one line here, which names everything it exports (nothing hides behind a
/// glob).
macro_rules! formats {
    ($($folder:ident: {$($name:ident),* $(,)?}),* $(,)?) => {
        $(
            mod $folder;
            pub use $folder::{$($name),*};
        )*
    };
}

formats! {
    documents: {
        modded_max_docs, modded_max_docs_formula, Cursor, DocOrder, DocStep, DocumentProblem, Documents,
        DocumentsBuilder, DocumentsCheckpoint, IndexStats, PackDocuments, Packing, Piece, Schedule,
        StepModes, StepSizes, Steps, DOCUMENTS_CHECKPOINT_VERSION, FILE_INDEX_BOS, GPT2_BOS, LLAMA3_BOS,
        MAX_TOKENS_PER_BATCH,
    },
    datatrove: {Datatrove, DatatroveProblem},
    megatron: {Megatron, MegatronProblem},
    npy: {Npy, NpyProblem},
    raw: {RawProblem, RawTokens},
    records: {FixedRecords, RecordBytes, RecordFile},
    tokens: {
        write_shard, write_shard_u32, Llmc, NextToken, ShardFormat, ShardProblem, ShardToken,
        ShardWriter, TokenFileFormat, TokenShard, TokenShards, TokenType, Tokens,
        SHARD_HEADER_BYTES, SHARD_MAGIC, SHARD_MAGIC_U32, SHARD_VERSION, SHARD_VERSION_U32,
    },
}

pub use any::{AnyDecoder, AnySample, AnySamples, AnySource};
pub use contract::{EpochPlace, IntoSource, Source};
pub use run::{Run, StepRanges};
pub use sampling::window_format::WindowFormat;
pub use state::State;

/// Windows of token shards: the source [`TokenShards::windows`] builds (the Python
/// package's `pinring.TokenWindows`).
pub type TokenWindows = Sampler<TokenShards>;

pub use crate::error::mixture::MixtureProblem;
pub use crate::error::source::{FileProblem, ReadProblem, SampleAt, SourceError};
pub use files::deferred::with_checks_at_end;
pub use mixture::{
    Blend, DocumentMixtureBuilder, Mixable, MixedDecoder, MixedDocStep, MixedPiece, MixedSample,
    MixedSamples, MixedSteps, Mixture, MixtureBuilder, MixtureState, PackMixedDocuments,
    SourceRecord, Stop, WeightSpan, MIXTURE_STATE_VERSION,
};
pub use sampling::checkpoint::{Checkpoint, Fingerprint, CHECKPOINT_VERSION};
pub use sampling::file_set::FileSet;
pub use sampling::order::Order;
pub use sampling::rng::{epoch_key, mix64, SplitMix64};
pub use sampling::sampler::Sampler;
pub use sampling::sampler_builder::SamplerBuilder;
pub use sampling::samples::{Position, Samples};
pub use sampling::segmented::{Identified, Segmented, WindowSpec};
pub use sampling::window::{SegmentFile, Window};
