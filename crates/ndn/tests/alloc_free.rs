//! Batched lookups allocate nothing: `Fib::lookup_batch` over names and
//! `Fib::lookup_batch_tlv` over raw name TLVs (after its scratch buffers
//! have seen names this long), both strategies, every prefetch mode.
//! A counting global allocator (this test binary only) checks it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use nexthop_ndn::names::WorstCase;
use nexthop_ndn::{BatchScratch, Config, Fib, NameView, NextHop, Prefetch, Strategy};

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

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

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn batched_lookups_do_not_allocate() {
    for strategy in [Strategy::VerifyEach, Strategy::VerifyAtEnd] {
        let ws = WorstCase::new(30_000, 15, 9);
        let (fib, _) = Fib::build(
            Config {
                max_components: 15,
                strategy,
                ..Config::default()
            },
            ws.rules_iter().map(|r| (r, [NextHop { face: 1, cost: 0 }])),
        )
        .unwrap();
        let names = ws.trace(5_000, 2);
        let tlvs: Vec<&[u8]> = names.iter().map(|n| n.tlv()).collect();
        let mut out = vec![None; names.len()];
        let mut scratch = BatchScratch::new();
        // Warm-up: the offset buffers grow to the longest name once.
        fib.lookup_batch_tlv(&tlvs, &mut out, Prefetch::All, &mut scratch);
        for pf in [Prefetch::None, Prefetch::First, Prefetch::All] {
            let before = ALLOCS.load(Ordering::Relaxed);
            let hits = fib.lookup_batch(&names, &mut out, pf);
            let r = fib.lookup_batch_tlv(&tlvs, &mut out, pf, &mut scratch);
            let lin = fib.lookup_linear_batch(&names, &mut out, pf);
            let after = ALLOCS.load(Ordering::Relaxed);
            assert_eq!((hits, r.hits, lin), (names.len(), names.len(), names.len()));
            assert_eq!(
                after - before,
                0,
                "{strategy:?} {pf:?}: allocations in a batch"
            );
        }
    }
}
