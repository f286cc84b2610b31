//! [`Mixable`]: the kinds of source a [`Mixture`](super::mix::Mixture) mixes, and what a
//! mixture of each kind shares with its iterators.

use super::documents::inner::DocMixInner;
use super::inner::MixInner;
use super::settings::MixShared;
use crate::source::documents::packed::Documents;
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
pub trait Mixable: sealed::Sealed {
    /// What a mixture of this kind shares with its iterators (not nameable outside the
    /// crate).
    #[doc(hidden)]
    type Shared: MixShared;
}

impl<S: Segmented> Mixable for S {
    type Shared = MixInner<S>;
}

impl Mixable for Documents {
    type Shared = DocMixInner;
}

mod sealed {
    use crate::source::documents::packed::Documents;
    use crate::source::sampling::segmented::Segmented;

    /// Keeps [`Mixable`](super::Mixable) to the kinds this crate mixes.
    pub trait Sealed {}

    impl<S: Segmented> Sealed for S {}

    impl Sealed for Documents {}
}
