//! A small, fixed random generator: splitmix64, and the derivations the sampler uses.
//!
//! The sampler's orders must be the same for the same `(seed, epoch, rank)` on every
//! build, platform and version of this crate, so it does not use `rand`, whose value
//! streams may change between releases. Everything here is specified exactly:
//!
//! - [`SplitMix64`] is Steele, Lea and Flood's splitmix64: the state advances by
//!   `0x9E3779B97F4A7C15`, and each output is the state passed through [`mix64`].
//! - [`SplitMix64::below`]`(n)` is Lemire's multiply-and-shift with rejection, so it is
//!   unbiased and its result depends only on the stream.
//! - [`epoch_key`]`(seed, epoch)` seeds one epoch's stream.
//!
//! Changing any constant here changes every shuffled order; the golden values in
//! `tests/sources.rs` pin them.

/// The splitmix64 increment (the golden ratio times 2^64, odd).
pub(crate) const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// splitmix64's output function (a variant of MurmurHash3's 64-bit finalizer): a
/// bijection of `u64` that mixes every input bit into every output bit.
///
/// ```
/// assert_eq!(pinring::source::mix64(0), 0);
/// assert_eq!(pinring::source::mix64(0x9E37_79B9_7F4A_7C15), 0xE220_A839_7B1D_CDAF);
/// ```
#[inline]
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The key of epoch `epoch` under `seed`: `mix64(seed ^ mix64(epoch + GAMMA))`, where
/// `GAMMA = 0x9E3779B97F4A7C15` and `+` wraps. A shuffled epoch's permutation comes from
/// `SplitMix64::new(epoch_key(seed, epoch))`.
#[inline]
pub const fn epoch_key(seed: u64, epoch: u64) -> u64 {
    mix64(seed ^ mix64(epoch.wrapping_add(GAMMA)))
}

/// The splitmix64 generator: 64 bits of state, a period of 2^64, and a fully specified
/// output stream.
///
/// ```
/// use pinring::source::SplitMix64;
///
/// // The reference stream for seed 0.
/// let mut rng = SplitMix64::new(0);
/// assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
/// assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
/// let roll = rng.below(6);
/// assert!(roll < 6);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose first output is `mix64(seed + GAMMA)`.
    pub const fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        mix64(self.state)
    }

    /// A uniform value in `0..n` (Lemire's method with rejection); `0` when `n` is 0.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let mut m = u128::from(self.next_u64()) * u128::from(n);
        if (m as u64) < n {
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = u128::from(self.next_u64()) * u128::from(n);
            }
        }
        (m >> 64) as u64
    }
}
