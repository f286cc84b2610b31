//! [`Mixable`]: the kinds of source a [`Mixture`](super::mix::Mixture) mixes — each names
//! its sources' record in a mixture's state and its [`Member`], what one source of that
//! kind does inside a mixture.

use super::documents_member::DocMember;
use super::member::Member;
use super::state::SourceRecord;
use super::windows_member::WindowMember;
use crate::source::documents::checkpoint::DocumentsCheckpoint;
use crate::source::documents::packed::Documents;
use crate::source::sampling::checkpoint::Checkpoint;
use crate::source::sampling::segmented::Segmented;

/// A kind of source a [`Mixture`](crate::source::Mixture) mixes: the segment sets of
/// samplers ([`Segmented`]: [`TokenShards`](crate::source::TokenShards) for token windows,
/// [`FixedRecords`](crate::source::FixedRecords) for records), mixed sample by sample —
/// `Mixture<TokenShards>` mixes `Sampler<TokenShards>`s — and packed
/// [`Documents`], mixed document by document, then packed into steps
/// (`Mixture<Documents>`). Sealed: only these implement it.
///
/// A mixture's sources are of one kind by construction: windows and documents do not mix
/// (this does not compile).
///
/// ```compile_fail
/// use pinring::source::{Documents, Mixture, TokenShards};
/// # fn mix(shards: TokenShards) -> pinring::Result<()> {
/// let windows = shards.clone().windows(65).build()?;
/// let documents = Documents::builder(shards);
/// let mixed = Mixture::documents([windows, documents]);
/// # Ok(()) }
/// ```
pub trait Mixable: sealed::Sealed + Sized + 'static {
    /// A source's own state inside a mixture's
    /// [`MixtureState`](crate::source::MixtureState), at its count: a sampler's
    /// [`Checkpoint`] at world size 1, or a [`DocumentsCheckpoint`] before the source's
    /// next document.
    type Record: SourceRecord;

    /// What one source of this kind does inside a mixture (not nameable outside the
    /// crate).
    #[doc(hidden)]
    type Member: Member<Record = Self::Record>;
}

impl<S: Segmented> Mixable for S {
    type Record = Checkpoint;
    type Member = WindowMember<S>;
}

impl Mixable for Documents {
    type Record = DocumentsCheckpoint;
    type Member = DocMember;
}

mod sealed {
    use crate::source::documents::packed::Documents;
    use crate::source::sampling::segmented::Segmented;

    /// Keeps [`Mixable`](super::Mixable) to the kinds this crate mixes.
    pub trait Sealed {}

    impl<S: Segmented> Sealed for S {}

    impl Sealed for Documents {}
}
