//! What a batch of the cpu backend offers beside the generic ones: its bytes.

use super::Batch;
use crate::backend::cpu::Cpu;

impl Batch<Cpu> {
    /// The batch's bytes. Waits (host-side) until its copy has completed.
    pub fn bytes(&self) -> &[u8] {
        let backend = self.backend();
        backend.wait_copied(self.seq());
        let ptr = self.device_ptr().as_ptr();
        // SAFETY: the copy count passed this batch, so its copy into the slot is done; the slot
        // is not written again until this batch is released, which consumes it and so
        // ends this borrow. `len` bytes lie inside the slot.
        unsafe { std::slice::from_raw_parts(ptr, self.len()) }
    }

    /// The bytes of the field named `name` (see [`Batch::field`]) in this batch, after the
    /// batch's copy has completed (as [`bytes`](Self::bytes)); `None` without such a field.
    pub fn field_bytes(&self, name: &str) -> Option<&[u8]> {
        let at = self.field(name)?;
        self.bytes().get(at.offset..at.offset + at.bytes())
    }
}
