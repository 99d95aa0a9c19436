//! A counting global allocator for tests that check a path allocates
//! nothing (or a stated number of times): the test binary installs it
//! with
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: nexthop_testutil::alloc::Counting = nexthop_testutil::alloc::Counting;
//! ```
//!
//! and reads [`allocations`] around the code it measures. The count is
//! process-wide: tests of one binary that measure take turns on
//! [`SERIAL`].

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

/// Tests that measure allocations hold this lock while they do.
pub static SERIAL: Mutex<()> = Mutex::new(());

/// Allocations and reallocations made so far by this process (with
/// [`Counting`] installed; 0 otherwise).
pub fn allocations() -> u64 {
    ALLOCS.load(Ordering::Relaxed)
}

/// The system allocator, counting every `alloc` and `realloc`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counting;

// SAFETY: 1. Every method forwards to the system allocator with the
// caller's arguments unchanged. 2. The counter is a relaxed atomic, which
// neither allocates nor re-enters the allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `alloc`'s contract for `l`.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from this allocator with layout `l`.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `p` came from this allocator with layout `l`; the caller
        // upholds `realloc`'s contract for `n`.
        unsafe { System.realloc(p, l, n) }
    }
}
