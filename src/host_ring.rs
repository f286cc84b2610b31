//! The host ring: one anonymous memory mapping holding every host slot, page aligned.
//!
//! The mapping is made once at start-up, pre-faulted, and never grows; backends register
//! it with the device (CUDA: `cuMemHostRegister`) for the pipeline's lifetime. Who may
//! write a slot's bytes is decided by the slot's stamp (`src/slot/`), not by this type.

use memmap2::{MmapMut, MmapOptions};

use crate::error::{Error, Result};

/// Alignment of each host slot in the ring without huge pages (one page).
pub(crate) const PAGE: usize = 4096;
/// Alignment of each host slot with huge pages (2 MiB).
pub(crate) const HUGE_PAGE: usize = 2 << 20;
/// Alignment of each device slot: a page, as the host ring's slots (without huge pages),
/// so that consecutive slots lie alike on both sides and a run of them copies in one piece.
pub(crate) const DEVICE_ALIGN: usize = PAGE;

/// The pinned-memory ring of host slots (internal: reachable from no public path).
#[derive(Debug)]
pub struct HostRing {
    map: MmapMut,
    /// Base address of the mapping, taken once so that slot pointers never go through a
    /// `&mut MmapMut`.
    base: *mut u8,
    stride: usize,
    slots: usize,
    huge_pages: HugePages,
}

/// Whether the host ring got huge pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HugePages {
    /// Not asked for.
    Off,
    /// Mapped with 2 MiB huge pages.
    On,
    /// Asked for, but the system refused; normal pages are used. The reason says why.
    Fallback(String),
}

// SAFETY: the ring is plain memory; which thread may touch which slot's bytes is decided
// by the slot protocol, and every access goes through `slot_ptr` / `slot_mut` under it.
unsafe impl Send for HostRing {}
// SAFETY: as above.
unsafe impl Sync for HostRing {}

/// `MemAvailable` from `/proc/meminfo`, in bytes (Linux; `None` elsewhere).
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

impl HostRing {
    /// Maps `slots` slots of `stride` bytes each (`stride` a multiple of the page size).
    ///
    /// The mapping is pre-faulted (so that no decode takes a page fault), which for a
    /// large ring takes a while: a ring that, with the `bookkeeping` bytes the pipeline
    /// allocates beside it, is larger than the memory the system has available is refused
    /// up front with [`Error::HostMemory`] instead.
    pub(crate) fn new(slots: usize, stride: usize, huge: bool, bookkeeping: usize) -> Result<Self> {
        let len = slots * stride;
        if let Some(available) = available_memory() {
            let needed = len.saturating_add(bookkeeping);
            if needed as u64 > available {
                return Err(Error::HostMemory {
                    bytes: needed,
                    available,
                });
            }
        }
        let map_with = |huge: bool| {
            let mut options = MmapOptions::new();
            options.len(len).populate();
            if huge {
                options.huge(Some(21));
            }
            options.map_anon()
        };
        let (mut map, huge_pages) = if huge {
            match map_with(true) {
                Ok(map) => (map, HugePages::On),
                Err(e) => {
                    let map =
                        map_with(false).map_err(|source| Error::HostRing { bytes: len, source })?;
                    (
                        map,
                        HugePages::Fallback(format!(
                            "MAP_HUGETLB of {len} bytes refused ({e}); using normal pages"
                        )),
                    )
                }
            }
        } else {
            (
                map_with(false).map_err(|source| Error::HostRing { bytes: len, source })?,
                HugePages::Off,
            )
        };
        debug_assert_eq!(stride % PAGE, 0);
        let base = map.as_mut_ptr();
        Ok(HostRing {
            map,
            base,
            stride,
            slots,
            huge_pages,
        })
    }

    /// Base address of the whole ring (for registration with a device).
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// Length in bytes of the whole ring.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the ring is empty (never: it has at least one slot).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Bytes from one slot's start to the next.
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// Whether huge pages were used.
    pub fn huge_pages(&self) -> &HugePages {
        &self.huge_pages
    }

    /// Start of slot `h`.
    pub fn slot_ptr(&self, h: usize) -> *mut u8 {
        assert!(h < self.slots, "host slot {h} out of range");
        // SAFETY: h < slots, so the offset stays inside the mapping of slots × stride bytes.
        unsafe { self.base.add(h * self.stride) }
    }

    /// `len` bytes of slot `h` starting at `offset`, for writing.
    ///
    /// # Safety
    /// - The caller owns slot `h` under the slot protocol (its stamp says so), so no copy
    ///   out of it may run and nobody else writes these bytes.
    /// - No other live reference overlaps `offset..offset + len` of slot `h`.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn slot_mut(&self, h: usize, offset: usize, len: usize) -> &mut [u8] {
        assert!(
            offset
                .checked_add(len)
                .is_some_and(|end| end <= self.stride),
            "range out of slot"
        );
        // SAFETY: `offset + len <= stride` (asserted), so the pointer stays inside slot h.
        let start = unsafe { self.slot_ptr(h).add(offset) };
        // SAFETY: `start..start + len` lies inside slot h of the live mapping; exclusivity
        // is the caller's contract above.
        unsafe { std::slice::from_raw_parts_mut(start, len) }
    }
}
