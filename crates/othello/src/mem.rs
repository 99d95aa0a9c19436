//! Large arrays backed by transparent huge pages where the kernel offers
//! them (Linux `madvise(MADV_HUGEPAGE)`).
//!
//! Every Othello lookup and update touches random slots of arrays of tens
//! or hundreds of MB; with 4 KiB pages nearly every touch also misses the
//! TLB, and a software prefetch that misses the TLB stalls on the page walk.
//! 2 MiB pages cut the page-walk cost (DPDK uses huge pages for the same
//! reason). The advice is best effort: without THP the arrays work the same.

/// Arrays smaller than this are left on ordinary pages.
const HUGE_MIN_BYTES: usize = 4 << 20;
const HUGE_PAGE: usize = 2 << 20;

/// A vector of `n` elements `f(0..n)`, on transparent huge pages when it is
/// at least 4 MiB and the kernel offers them (best effort: the same vector
/// otherwise). The query and control arrays use it; benchmarks use it so
/// their baselines get the same pages.
pub fn huge_vec<T>(n: usize, f: impl FnMut(usize) -> T) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    advise_huge(
        v.as_ptr() as usize,
        n.saturating_mul(std::mem::size_of::<T>()),
    );
    v.extend((0..n).map(f));
    v
}

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

#[cfg(target_os = "linux")]
fn advise_huge(addr: usize, len: usize) {
    if len < HUGE_MIN_BYTES {
        return;
    }
    let start = addr.div_ceil(HUGE_PAGE) * HUGE_PAGE;
    let end = (addr + len) / HUGE_PAGE * HUGE_PAGE;
    if end <= start {
        return;
    }
    // SAFETY: 1. [start, end) lies inside the allocation of `len` bytes at
    //    `addr` that the caller owns (start rounds up, end rounds down).
    // 2. MADV_HUGEPAGE only changes how the kernel backs the range; it never
    //    changes its contents or validity, so no Rust invariant depends on it.
    // 3. The result is ignored: the advice is optional (EINVAL without THP).
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_addr: usize, _len: usize) {}

#[cfg(test)]
mod tests {
    #[test]
    fn huge_vec_holds_the_generated_values() {
        let v = super::huge_vec(3_000_000, |i| i as u32 * 3);
        assert_eq!(v.len(), 3_000_000);
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32 * 3));
        let small = super::huge_vec(5, |i| i);
        assert_eq!(small, vec![0, 1, 2, 3, 4]);
    }
}
