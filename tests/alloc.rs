//! The steady state allocates nothing per batch: a counting global allocator sees no
//! allocation, in any thread of the process, while thousands of batches flow through
//! pop → check → release after a warm-up.
//!
//! This binary holds one test only, so nothing else allocates while it counts.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::{check_batch, decoder};
use pinring::{Config, Fence, Pipeline};

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn steady_state_allocates_nothing_per_batch() {
    const PER: usize = 8;
    const SAMPLE: usize = 256;
    const WARM_UP: u64 = 500;
    const COUNTED: u64 = 5_000;
    let config = Config::builder()
        .batch_size(PER)
        .bytes_per_sample(SAMPLE)
        .decode_threads(2)
        .build()
        .unwrap();
    let mut p = Pipeline::new(config, decoder(), 0u64..).unwrap();
    for seq in 0..WARM_UP + COUNTED {
        if seq == WARM_UP {
            COUNTING.store(true, Ordering::SeqCst);
        }
        let batch = p.pop().unwrap().unwrap();
        assert_eq!(batch.seq(), seq);
        check_batch(batch.bytes(), seq, PER, SAMPLE, PER);
        batch.release(Fence::Sync).unwrap();
    }
    COUNTING.store(false, Ordering::SeqCst);
    let allocations = ALLOCATIONS.load(Ordering::SeqCst);
    drop(p);
    assert_eq!(
        allocations, 0,
        "{allocations} allocations while {COUNTED} batches flowed"
    );
}
