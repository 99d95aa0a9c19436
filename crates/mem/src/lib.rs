//! Large lookup-table arrays on transparent huge pages where the kernel
//! offers them (Linux `madvise(MADV_HUGEPAGE)`).
//!
//! Every Othello lookup and update and every Bloomfwd lookup touches
//! random lines of arrays of megabytes to hundreds of megabytes; with
//! 4 KiB pages nearly each touch also misses the TLB, a software prefetch
//! that misses the TLB stalls on the page walk, and in a VM a page walk is
//! itself several memory reads. 2 MiB pages cut that cost (DPDK puts its
//! tables on huge pages for the same reason). The advice is best effort:
//! without THP (or with `transparent_hugepage=never`) the arrays are the
//! same, on ordinary pages.
//!
//! [`huge_vec`] builds a `Vec`, [`HugeBox`] a fixed-size slice whose
//! clones are advised too, [`advise_huge`] advises an allocation the
//! caller made.

/// Arrays smaller than this stay on ordinary pages.
pub const HUGE_MIN_BYTES: usize = 2 << 20;
const HUGE_PAGE: usize = 2 << 20;

/// A vector of `n` elements `f(0..n)`, on huge pages when it is at least
/// [`HUGE_MIN_BYTES`] and the kernel offers them.
pub fn huge_vec<T>(n: usize, f: impl FnMut(usize) -> T) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    advise_huge(
        v.as_ptr() as usize,
        n.saturating_mul(std::mem::size_of::<T>()),
    );
    v.extend((0..n).map(f));
    v
}

/// A fixed-size array on huge pages when large; its clones are too.
#[derive(Debug)]
pub struct HugeBox<T>(Box<[T]>);

impl<T: Clone> HugeBox<T> {
    /// `n` copies of `v`.
    pub fn new(n: usize, v: T) -> Self {
        let mut b: Vec<T> = Vec::with_capacity(n);
        advise_huge(
            b.as_ptr() as usize,
            n.saturating_mul(std::mem::size_of::<T>()),
        );
        b.resize(n, v);
        HugeBox(b.into_boxed_slice())
    }

    /// A copy of `s`.
    pub fn from_slice(s: &[T]) -> Self {
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

/// Advise the whole 2 MiB pages inside `[addr, addr + len)` to be huge
/// pages, if `len` is at least [`HUGE_MIN_BYTES`]. Call it on a fresh
/// allocation before writing it (the pages are then faulted in as huge
/// pages). Never changes the memory's contents; errors are ignored.
#[cfg(target_os = "linux")]
pub fn advise_huge(addr: usize, len: usize) {
    if len < HUGE_MIN_BYTES {
        return;
    }
    let start = addr.div_ceil(HUGE_PAGE) * HUGE_PAGE;
    let end = addr.saturating_add(len) / HUGE_PAGE * HUGE_PAGE;
    if end <= start {
        return;
    }
    // SAFETY: 1. [start, end) lies inside [addr, addr + len) (start rounds
    //    up, end rounds down); madvise on a range the process does not map
    //    fails with ENOMEM and touches nothing.
    // 2. MADV_HUGEPAGE only changes how the kernel backs the range, never
    //    its contents or validity, so no Rust invariant depends on it.
    // 3. The result is ignored: the advice is optional (EINVAL without THP).
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
    }
}

/// Advise the whole 2 MiB pages inside `[addr, addr + len)` (a no-op off
/// Linux).
#[cfg(not(target_os = "linux"))]
pub fn advise_huge(_addr: usize, _len: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_vecs_hold_the_generated_values() {
        let v = huge_vec(3_000_000, |i| i as u32 * 3);
        assert_eq!(v.len(), 3_000_000);
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32 * 3));
        assert_eq!(huge_vec(5, |i| i), vec![0, 1, 2, 3, 4]);
        assert!(huge_vec(0, |i| i).is_empty());
    }

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

    #[test]
    fn advice_on_odd_ranges_is_harmless() {
        let v = vec![1u8; 5 << 20];
        advise_huge(v.as_ptr() as usize + 1, v.len() - 1);
        advise_huge(v.as_ptr() as usize, 0);
        advise_huge(usize::MAX - 10, 100);
        assert!(v.iter().all(|&b| b == 1));
    }
}
