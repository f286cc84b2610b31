//! [`Mixable`]: the kinds of source a [`Mixture`](super::mix::Mixture) mixes, and what a
//! mixture of each kind shares with its iterators.

use super::documents::inner::DocMixInner;
use super::inner::MixInner;
use crate::source::documents::packed::Documents;
use crate::source::sampling::segmented::Segmented;

/// A kind of source a [`Mixture`](crate::source::Mixture) mixes: the segment sets of
/// samplers ([`Segmented`]: [`TokenShards`](crate::source::TokenShards) for token windows,
/// [`FixedRecords`](crate::source::FixedRecords) for records), mixed sample by sample —
/// `Mixture<TokenShards>` mixes `Sampler<TokenShards>`s — and packed
/// [`Documents`], mixed document by document, then packed into steps
/// (`Mixture<Documents>`). Sealed: only these implement it.
pub trait Mixable: sealed::Sealed {
    /// What a mixture of this kind shares with its iterators (not nameable outside the
    /// crate).
    #[doc(hidden)]
    type Shared;
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
