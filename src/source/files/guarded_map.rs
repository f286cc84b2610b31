//! Reading a file through a memory map without ever dying of SIGBUS (Linux).
//!
//! A positioned read copies a file's bytes through the kernel: about a third slower than
//! reading them straight from a mapping of the page cache, which is what widening tokens
//! wants (the decode pool's throughput on large batches). A mapping has one hazard: when
//! the file shrinks, a read of a page past its new end raises SIGBUS, and by default kills
//! the process. This module makes that recoverable for the reads it guards:
//!
//! - Before reading, a thread notes the range it reads (a thread-local, const-initialized
//!   cell: reading it in a signal handler takes no lock and allocates nothing).
//! - A SIGBUS handler, installed once and chained to whatever was installed before,
//!   looks at the faulting address: inside the current thread's guarded range, it maps a
//!   page of zeros over the lost page (`mmap` with `MAP_FIXED`: a system call, safe in a
//!   handler), marks the thread's read as hit, and returns; the read resumes and sees
//!   zeros. Any other SIGBUS goes to the previous handler (or the default action) as if
//!   this one were not there.
//! - After the read the caller learns whether it was hit, and the file check that follows
//!   every read ([`SourceFile`](super::source_file::SourceFile)) finds the shrunk file: the
//!   read is reported as the file's change, never as data.
//!
//! The map's bytes are never trusted without that check after them: a page replaced by
//! zeros stays so (the map is of a file that changed, and every later read of it fails
//! its check), and writes by others (a rewrite in place) show through the map as through a
//! read, and are caught the same way.

use std::cell::Cell;
use std::fs::File;

use memmap2::Mmap;

use crate::sync::native::OnceLock;

thread_local! {
    /// The byte range of a map this thread is reading now, `[start, end)`; empty (0, 0)
    /// when none. Set and cleared by [`GuardedMap::with_bytes`] only, read by the handler.
    static GUARDED: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    /// Whether the handler replaced a page of the guarded range since it was set.
    static HIT: Cell<bool> = const { Cell::new(false) };
}

/// A read-only shared map of a whole file, read under the SIGBUS guard.
pub(crate) struct GuardedMap {
    map: Mmap,
}

impl std::fmt::Debug for GuardedMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedMap")
            .field("len", &self.map.len())
            .finish()
    }
}

/// A guarded read met a page the file no longer has: it shrank under the map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Vanished;

impl GuardedMap {
    /// Maps `file` (read-only, shared) once the handler is installed; `None` where that
    /// cannot be done (the handler could not be installed, the map failed, an empty file):
    /// the caller reads by position then.
    pub(crate) fn new(file: &File) -> Option<Self> {
        if !handler::installed() {
            return None;
        }
        // SAFETY: the map is read-only and only ever read inside `with_bytes`, under the
        // SIGBUS guard (a page lost to a truncation reads as zeros and the read is
        // reported); its bytes are plain `u8`s, valid whatever they hold.
        let map = unsafe { Mmap::map(file) }.ok()?;
        (!map.is_empty()).then_some(GuardedMap { map })
    }

    /// Bytes in the map (the file's length when mapped).
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Runs `f` over the map's bytes `offset..offset + len` (which must lie in the map),
    /// guarded: `Err(Vanished)` when a page of them had left the file (`f` then saw zeros
    /// there). The caller checks the file after this in every case.
    pub(crate) fn with_bytes<R>(
        &self,
        offset: usize,
        len: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, Vanished> {
        let bytes = &self.map[offset..offset + len];
        let range = (bytes.as_ptr() as usize, bytes.as_ptr() as usize + len);
        let guard = Guard::set(range);
        let out = f(bytes);
        let hit = guard.hit();
        drop(guard);
        if hit {
            Err(Vanished)
        } else {
            Ok(out)
        }
    }
}

/// This thread's guarded range while it lives: set on creation, and put back as it was
/// (empty, outside a guarded read) when dropped, also when the read unwinds, so that a
/// SIGBUS after the read (at an address the map's pages may since have left for another
/// mapping) is never taken for this read's.
struct Guard {
    previous: ((usize, usize), bool),
}

impl Guard {
    fn set(range: (usize, usize)) -> Self {
        let previous = (GUARDED.with(Cell::get), HIT.with(Cell::get));
        HIT.with(|h| h.set(false));
        GUARDED.with(|g| g.set(range));
        Guard { previous }
    }

    /// Whether the handler replaced a page of the range since it was set.
    fn hit(&self) -> bool {
        HIT.with(Cell::get)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        GUARDED.with(|g| g.set(self.previous.0));
        HIT.with(|h| h.set(self.previous.1));
    }
}

#[cfg(target_os = "linux")]
mod handler {
    //! The SIGBUS handler: installed once, chained to the previous disposition.

    use std::cell::UnsafeCell;
    use std::mem::MaybeUninit;

    use super::{OnceLock, GUARDED, HIT};

    /// The disposition before ours, written once before ours is installed and only read
    /// after (the handler runs only once `install` published ours).
    struct Previous(UnsafeCell<MaybeUninit<libc::sigaction>>);

    // SAFETY: written once by `install` (under `INSTALLED`'s initialization, before the
    // handler that reads it can run), then only read.
    unsafe impl Sync for Previous {}

    static PREVIOUS: Previous = Previous(UnsafeCell::new(MaybeUninit::uninit()));
    /// Whether ours is installed, and the page size (0 until installed).
    static INSTALLED: OnceLock<usize> = OnceLock::new();

    /// Installs the handler once; whether it is installed.
    pub(super) fn installed() -> bool {
        *INSTALLED.get_or_init(install) != 0
    }

    /// Installs the handler; the page size, or 0 when it could not.
    fn install() -> usize {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let Ok(page) = usize::try_from(page) else {
            return 0;
        };
        // SAFETY: an all-zero sigaction is a valid value to fill in.
        let mut ours: libc::sigaction = unsafe { std::mem::zeroed() };
        ours.sa_sigaction = on_sigbus as *const () as usize;
        ours.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: `sa_mask` is ours to initialize.
        unsafe { libc::sigemptyset(&mut ours.sa_mask) };
        // SAFETY: `PREVIOUS` is written here only, once (this runs inside the OnceLock's
        // initialization), before the handler that reads it is installed below.
        let previous = unsafe { (*PREVIOUS.0.get()).as_mut_ptr() };
        // The disposition before ours, read first, so that it is in place before a fault
        // can reach our handler.
        // SAFETY: a null new action only reads the current one into `previous`.
        if unsafe { libc::sigaction(libc::SIGBUS, std::ptr::null(), previous) } != 0 {
            return 0;
        }
        // SAFETY: a valid sigaction we own; the old one is already saved.
        if unsafe { libc::sigaction(libc::SIGBUS, &ours, std::ptr::null_mut()) } != 0 {
            return 0;
        }
        page
    }

    /// The handler: a fault inside this thread's guarded range gets a page of zeros and
    /// the read goes on; anything else goes where it would have gone without us.
    extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid siginfo for a SA_SIGINFO handler.
        let info_ref = unsafe { &*info };
        // SAFETY: a SIGBUS from a fault fills si_addr (the union's field it reads).
        let addr = unsafe { info_ref.si_addr() } as usize;
        let (start, end) = GUARDED.with(|g| g.get());
        let page = INSTALLED.get().copied().unwrap_or(0);
        if page != 0 && start <= addr && addr < end {
            let at = addr & !(page - 1);
            // SAFETY: `at` is a page of a read-only file map this thread is reading (the
            // guarded range lies in a live `GuardedMap`, borrowed for the read); replacing
            // it with a private page of zeros changes nothing but what that map reads
            // there, and mmap is a plain system call, safe in a signal handler.
            let zeros = unsafe {
                libc::mmap(
                    at as *mut libc::c_void,
                    page,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if zeros != libc::MAP_FAILED {
                HIT.with(|h| h.set(true));
                return;
            }
        }
        // SAFETY: written before our handler was installed, read-only since.
        let slot = unsafe { &*PREVIOUS.0.get() };
        // SAFETY: as above: initialized by `install` before this handler could run.
        let previous = unsafe { slot.assume_init_ref() };
        chain(previous, sig, info, ctx);
    }

    /// Hands a SIGBUS that is not ours to the disposition before ours.
    fn chain(
        previous: &libc::sigaction,
        sig: libc::c_int,
        info: *mut libc::siginfo_t,
        ctx: *mut libc::c_void,
    ) {
        let handler = previous.sa_sigaction;
        if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
            // The default action: put it back and return; the faulting access runs again
            // and the kernel takes that action (a SIGBUS from a fault cannot be ignored).
            // SAFETY: a valid sigaction, and sigaction is async-signal-safe.
            unsafe { libc::sigaction(sig, previous, std::ptr::null_mut()) };
        } else if previous.sa_flags & libc::SA_SIGINFO != 0 {
            // SAFETY: with SA_SIGINFO the previous handler has this signature.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(handler) };
            f(sig, info, ctx);
        } else {
            // SAFETY: without SA_SIGINFO the previous handler takes the signal number.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
            f(sig);
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod handler {
    //! Elsewhere no handler is installed: files are read by position.

    /// Never installed.
    pub(super) fn installed() -> bool {
        false
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A file of `len` bytes of 7, mapped.
    fn mapped(len: usize) -> (tempfile::NamedTempFile, GuardedMap) {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), vec![7u8; len]).unwrap();
        let map = GuardedMap::new(&File::open(file.path()).unwrap()).expect("mapped");
        (file, map)
    }

    #[test]
    fn a_read_of_pages_the_file_lost_sees_zeros_and_says_so() {
        let (file, map) = mapped(64 << 10);
        assert_eq!(map.with_bytes(0, 16, |b| b.to_vec()), Ok(vec![7; 16]));
        file.as_file().set_len(4096).unwrap();
        // The first page is still the file's; the rest is gone: a guarded read of it ends
        // (no signal reaches the test) and reports the loss.
        let read = map.with_bytes(4000, 8192, |b| (b[0], b[8191]));
        assert_eq!(read, Err(Vanished));
        assert_eq!(
            GUARDED.with(Cell::get),
            (0, 0),
            "the range is cleared after the read"
        );
        assert_eq!(
            map.with_bytes(0, 16, |b| b[0]),
            Ok(7),
            "the page it kept reads as before"
        );
    }

    #[test]
    fn a_read_that_unwinds_clears_its_range() {
        let (_file, map) = mapped(8192);
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            map.with_bytes(0, 8192, |_| panic!("a decoder's bug"))
        }));
        assert!(unwound.is_err());
        assert_eq!(GUARDED.with(Cell::get), (0, 0));
        assert!(!HIT.with(Cell::get));
    }
}
