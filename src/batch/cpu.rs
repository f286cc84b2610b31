//! What a batch of the cpu backend offers beside the generic ones: its bytes, and typed
//! views of them.

use super::view::{view_as, Element};
use super::Batch;
use crate::backend::cpu::Cpu;
use crate::error::view::ViewError;

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

    /// The field named `name` as a slice of its element type, checked against the field's
    /// dtype: `batch.field_as::<i32>("cu_seqlens")?`. The bytes are
    /// [`field_bytes`](Self::field_bytes)' (after the copy), borrowed, not copied (fields
    /// start at multiples of [`FIELD_ALIGN`](crate::FIELD_ALIGN), so every dtype is
    /// aligned). A name the batch has no field of is [`ViewError::NoField`], another
    /// element type [`ViewError::Dtype`]; never a panic.
    ///
    /// ```
    /// use pinring::source::{write_shard, Documents, TokenShards, TokenType};
    /// use pinring::{Fence, Loader, ViewError};
    /// # let dir = std::env::temp_dir().join(format!("pinring-field-as-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let tokens: Vec<u16> = (0..400).map(|i| if i % 40 == 0 { 50256 } else { i }).collect();
    /// write_shard(dir.join("a.bin"), &tokens)?;
    /// let docs = Documents::builder(TokenShards::open([dir.join("a.bin")])?)
    ///     .tokens_per_batch(63).max_seq_len(64).token_type(TokenType::I64).build()?;
    /// let mut loader = Loader::builder(docs).build()?;
    /// let batch = loader.pop()?.expect("a step");
    /// let inputs: &[i64] = batch.field_as("inputs")?;
    /// assert_eq!((inputs.len(), inputs[0], inputs[1]), (63, 50256, 1));
    /// assert_eq!(batch.field_as::<i32>("cu_seqlens")?[..2], [0, 40]);
    /// assert!(matches!(batch.field_as::<i32>("inputs"), Err(ViewError::Dtype { .. })));
    /// batch.release(Fence::Sync)?;
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn field_as<T: Element>(&self, name: &str) -> Result<&[T], ViewError> {
        let no_field = || ViewError::NoField {
            name: name.to_owned(),
        };
        let at = self.field(name).ok_or_else(no_field)?;
        if at.dtype != T::DTYPE {
            return Err(ViewError::Dtype {
                name: name.to_owned(),
                held: at.dtype,
                asked: T::DTYPE,
            });
        }
        view_as(self.field_bytes(name).ok_or_else(no_field)?)
    }

    /// The batch's bytes ([`bytes`](Self::bytes), after the copy) as a slice of `T`:
    /// `batch.bytes_as::<i32>()?` for windows decoded as [`TokenType::I32`](crate::source::TokenType::I32),
    /// borrowed, not copied. A batch does not record its decoder's element type, so this
    /// checks what the bytes can show — a whole number of `T`, aligned (a slot always is)
    /// — and a misfit is [`ViewError::Misfit`]; the element type is the caller's to know
    /// (a batch of fields: [`field_as`](Self::field_as) checks each field's).
    pub fn bytes_as<T: Element>(&self) -> Result<&[T], ViewError> {
        view_as(self.bytes())
    }
}
