//! Each thread's read chunk: a small buffer (128 KiB, in a core's L2 cache) that file bytes are
//! read into by position when they are widened on their way to the slot, or when a
//! sequential walk reads ahead (one large read serving the windows that follow).
//!
//! The chunk remembers which bytes of which file it holds, so that the next read of them
//! is served from it. That memory lasts only as long as the reads it serves are checked
//! together: inside a [run](super::deferred) until the run ends (the run holds every file
//! it read, so no other file can take one's place meanwhile), and outside one until the
//! read that filled it returns. Nothing a failed read brought in is ever held: the chunk is
//! emptied before each fill and marked full only once the read succeeded, and every run's
//! end empties it, so a later run reads the file's bytes again.
//!
//! Reads land where the chunk's address agrees with the file offset modulo 64 and lies half
//! a page from it modulo 4096. The kernel copies from the page cache with `rep movsb`,
//! which on AMD's cores slows down when the destination is a few bytes ahead of the source
//! modulo 64 (a 64 KiB `pread` 15–20% slower on the development VM's EPYC; up to ten times
//! on another), and several times over when the two alias modulo 4096 while the source is
//! in cache (a 64 KiB `pread` 5.4 µs against 1.2 µs).

use std::cell::RefCell;

use super::open_file::OpenFile;
use crate::error::source::ReadProblem;

/// Bytes a chunk holds: small enough to stay in a core's cache beside what the widening
/// writes, large enough that the system call of each read (about 1 µs on the development
/// VM) stays a small part of it. On the 1-thread `i32` rows of `benches/decode.rs` there,
/// 32 KiB gave 41–62% of the mapped path, 128 KiB 46–66%, 256 KiB 46–70% (one comparison).
pub(crate) const CHUNK_BYTES: usize = 128 << 10;

/// The page whose offsets a read into the chunk keeps half a page away from its source's.
const PAGE: usize = 4096;

/// How far past the bytes it holds a read may start and still count as following them
/// (a sequential walk's gap: the rest of a document cut at `max_seq_len`).
const NEAR: u64 = (CHUNK_BYTES / 2) as u64;

/// A thread's chunk and the bytes it holds.
pub(super) struct Chunk {
    buf: Box<[u8]>,
    /// The file (its shared state's address) whose bytes it holds, with the first one's
    /// offset in the file and in `buf`, and how many; `None` when it holds none.
    held: Option<Held>,
    /// Where the file's last read through the chunk ended, to tell a sequential walk.
    last: Option<(usize, u64)>,
}

#[derive(Debug, Clone, Copy)]
struct Held {
    file: usize,
    offset: u64,
    at: usize,
    len: usize,
}

impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chunk").field("held", &self.held).finish()
    }
}

/// The identity of a file while a read or a run holds it.
fn id(file: &OpenFile) -> usize {
    file as *const OpenFile as usize
}

impl Chunk {
    fn new() -> Self {
        Chunk {
            buf: vec![0u8; CHUNK_BYTES + 2 * PAGE].into_boxed_slice(),
            held: None,
            last: None,
        }
    }

    /// The bytes it holds of `file` from `offset` on, if it holds that byte.
    pub(super) fn held(&self, file: &OpenFile, offset: u64) -> Option<&[u8]> {
        let h = self.held?;
        let skip = usize::try_from(offset.checked_sub(h.offset)?).ok()?;
        (h.file == id(file) && skip < h.len).then(|| &self.buf[h.at + skip..h.at + h.len])
    }

    /// Whether a read of `file` from `offset` follows the last read through the chunk (it
    /// starts inside or shortly after it): a sequential walk, for which reading ahead pays.
    pub(super) fn follows(&self, file: &OpenFile, offset: u64) -> bool {
        match self.last {
            Some((f, end)) => f == id(file) && offset + NEAR >= end && offset <= end + NEAR,
            None => false,
        }
    }

    /// Reads `len` bytes (at most [`CHUNK_BYTES`]) of `file` from `offset` into the chunk,
    /// which then holds them; on error it holds nothing.
    pub(super) fn fill(
        &mut self,
        file: &OpenFile,
        offset: u64,
        len: usize,
    ) -> Result<(), ReadProblem> {
        self.held = None;
        let len = len.min(CHUNK_BYTES);
        // The place whose address is the file offset plus half a page, modulo a page.
        let base = self.buf.as_ptr() as usize;
        let want = (offset as usize).wrapping_add(PAGE / 2) % PAGE;
        let at = (want + PAGE - base % PAGE) % PAGE;
        file.fill(offset, &mut self.buf[at..at + len])?;
        self.held = Some(Held {
            file: id(file),
            offset,
            at,
            len,
        });
        self.last = Some((id(file), offset + len as u64));
        Ok(())
    }

    /// Notes a read of `file` that ended at `end` without the chunk (straight into the
    /// caller's buffer), so that the next one can tell whether it follows.
    pub(super) fn note(&mut self, file: &OpenFile, end: u64) {
        self.last = Some((id(file), end));
    }

    /// Forgets what it holds.
    fn clear(&mut self) {
        self.held = None;
        self.last = None;
    }
}

thread_local! {
    /// This thread's chunk, allocated at its first read through one.
    static CHUNK: RefCell<Option<Chunk>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's chunk; unless `keep` (inside a run of deferred checks, whose
/// end clears it) it forgets what it holds after `f`.
pub(super) fn with<R>(keep: bool, f: impl FnOnce(&mut Chunk) -> R) -> R {
    CHUNK.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => {
            let chunk = slot.get_or_insert_with(Chunk::new);
            let out = f(chunk);
            if !keep {
                chunk.clear();
            }
            out
        }
        // Re-entered (a read inside a read's callback): a chunk of its own, for this read.
        Err(_) => f(&mut Chunk::new()),
    })
}

/// Forgets what this thread's chunk holds (a run ended).
pub(super) fn clear() {
    CHUNK.with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut()
            && let Some(chunk) = slot.as_mut()
        {
            chunk.clear();
        }
    });
}
