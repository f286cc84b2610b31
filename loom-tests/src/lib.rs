//! Loom models of pinring's slot protocol: see `tests/models.rs` and `scripts/loom.sh`.
//!
//! The models are built only with `RUSTFLAGS="--cfg pinring_loom"`; without it this crate
//! is empty.
