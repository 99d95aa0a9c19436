//! Large arrays backed by transparent huge pages where the kernel offers
//! them (Linux `madvise(MADV_HUGEPAGE)`).
//!
//! Every Othello lookup and update touches random slots of arrays of tens
//! or hundreds of MB; with 4 KiB pages nearly every touch also misses the
//! TLB, and a software prefetch that misses the TLB stalls on the page walk.
//! 2 MiB pages cut the page-walk cost (DPDK uses huge pages for the same
//! reason). The advice is best effort: without THP the arrays work the same.

use nexthop_mem::advise_huge;
pub use nexthop_mem::huge_vec;

/// Grow `v`'s capacity to at least `n`, moving it to huge pages when large.
pub(crate) fn reserve_huge<T>(v: &mut Vec<T>, n: usize) {
    if v.capacity() >= n {
        return;
    }
    let mut new: Vec<T> = Vec::with_capacity(n);
    advise_huge(
        new.as_ptr() as usize,
        n.saturating_mul(std::mem::size_of::<T>()),
    );
    new.append(v);
    *v = new;
}
