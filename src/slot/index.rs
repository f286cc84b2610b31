//! Slot indices: a host slot's and a device slot's, as types of their own.

/// Index of a host slot (`seq % H`). A type of its own so that it cannot be swapped with a
/// device slot's index, and one only this crate can make: the backend operations take
/// slot indices of these types, so no code outside the crate can call them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HostIdx(pub(crate) usize);

/// Index of a device slot (`seq % D`); see [`HostIdx`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceIdx(pub(crate) usize);
