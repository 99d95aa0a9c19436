//! Lookup arrays on transparent huge pages where the kernel offers them
//! (Linux `madvise(MADV_HUGEPAGE)`), as DPDK puts `rte_lpm` on huge pages.
//!
//! A Bloomfwd lookup touches random lines of a direct array (4 MiB for
//! IPv4), a filter and a hash table (16 MiB for the 2015 table's /24
//! group): with 4 KiB pages nearly each of those lines also misses the TLB,
//! and in a VM a page walk is itself several memory reads. The advice is
//! best effort: without THP the arrays are the same, on small pages.

/// Arrays smaller than this stay on ordinary pages.
const HUGE_MIN_BYTES: usize = 2 << 20;
const HUGE_PAGE: usize = 2 << 20;

/// A fixed-size array on huge pages when large; clones are too.
#[derive(Debug)]
pub(crate) struct HugeBox<T>(Box<[T]>);

impl<T: Clone> HugeBox<T> {
    /// `n` copies of `v`.
    pub(crate) fn new(n: usize, v: T) -> Self {
        let mut b: Vec<T> = Vec::with_capacity(n);
        advise_huge(
            b.as_ptr() as usize,
            n.saturating_mul(std::mem::size_of::<T>()),
        );
        b.resize(n, v);
        HugeBox(b.into_boxed_slice())
    }

    /// A copy of `s`.
    pub(crate) fn from_slice(s: &[T]) -> Self {
        let mut b: Vec<T> = Vec::with_capacity(s.len());
        advise_huge(b.as_ptr() as usize, std::mem::size_of_val(s));
        b.extend_from_slice(s);
        HugeBox(b.into_boxed_slice())
    }
}

impl<T: Clone> Clone for HugeBox<T> {
    fn clone(&self) -> Self {
        HugeBox::from_slice(&self.0)
    }
}

impl<T> std::ops::Deref for HugeBox<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.0
    }
}

impl<T> std::ops::DerefMut for HugeBox<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
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
    // 2. MADV_HUGEPAGE only changes how the kernel backs the range, never
    //    its contents or validity, so no Rust invariant depends on it.
    // 3. The result is ignored: the advice is optional (EINVAL without THP).
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_addr: usize, _len: usize) {}

#[cfg(test)]
mod tests {
    use super::HugeBox;

    #[test]
    fn huge_boxes_hold_their_values_and_clone() {
        let mut v = HugeBox::new(3_000_000, 7u32);
        assert_eq!(v.len(), 3_000_000);
        assert!(v.iter().all(|&x| x == 7));
        v[5] = 9;
        let c = v.clone();
        assert_eq!(c.len(), v.len());
        assert_eq!((c[4], c[5]), (7, 9));
        let big: Vec<u64> = (0..1_000_000).collect();
        assert_eq!(&*HugeBox::from_slice(&big), &big[..]);
        assert!(HugeBox::new(0, 1u8).is_empty());
    }
}
