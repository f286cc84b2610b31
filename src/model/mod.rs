//! Model checking (`cfg(pinring_loom)` only): the model device, the rig that runs the
//! pipeline's own stages on loom threads, and the models.
//!
//! The models live in the crate, not in a separate crate: they drive the stages, the slot
//! protocol and the model device through crate-private items, so no hidden public API
//! exists for them. Run them with `scripts/loom.sh`: each model runs in a process of its
//! own, so a deadlock (or an abort) fails that model alone.

mod device;
mod rig;
#[cfg(test)]
mod tests;
