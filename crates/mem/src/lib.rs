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
//! [`HugeBox`] is the one to use for fixed-size tables: a large one gets
//! its own 2 MiB-aligned mapping, so all of it can be on huge pages (and
//! its clones too). [`reserve_huge`] grows a `Vec` and [`advise_huge`]
//! advises an allocation the caller made; both are best
//! effort twice over: the allocator's block does not start on a 2 MiB
//! boundary, so the partial 2 MiB pages at its two ends stay on 4 KiB
//! pages (up to 4 MiB per array: a quarter of an 8 MiB table).
//!
//! [`prefetch`] is the workspace's one software prefetch, and
//! [`two_stage`] the batch order that hides the latency of those
//! random lines: a group's lines are prefetched while the group before is
//! read.
//!
//! [`affinity`] (Linux) places the threads that read those tables: CPU
//! lists and pinning, for the forwarder's workers and the benchmarks'
//! worker pool alike.

#[cfg(target_os = "linux")]
pub mod affinity;

/// Arrays smaller than this stay on ordinary pages.
pub const HUGE_MIN_BYTES: usize = 2 << 20;
#[cfg_attr(any(not(target_os = "linux"), miri), allow(dead_code))]
const HUGE_PAGE: usize = 2 << 20;

/// Grow `v`'s capacity to at least `n`, moving it to a fresh allocation
/// advised onto huge pages when that is large (for vectors that grow, such
/// as Othello's edge list; fixed-size tables use [`HugeBox`]).
pub fn reserve_huge<T>(v: &mut Vec<T>, n: usize) {
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

/// A fixed-size array on huge pages when large; its clones are too.
///
/// An array of at least [`HUGE_MIN_BYTES`] gets its own anonymous mapping
/// whose start is aligned to 2 MiB and whose length is a whole number of
/// 2 MiB pages, advised `MADV_HUGEPAGE` before the first write: every
/// byte of it can then be on a huge page. (An ordinary heap allocation of
/// that size starts a few bytes into a 4 KiB page, so the 2 MiB pages
/// straddling its two ends stay small: on the 2015 IPv4 Bloomfwd table
/// that left 5.5 of its 28 MiB on 4 KiB pages.) Smaller arrays, other
/// systems and a failed mapping use the heap.
pub struct HugeBox<T> {
    ptr: std::ptr::NonNull<T>,
    len: usize,
    /// Bytes mapped at `ptr` by [`map_huge`]; 0 when `ptr` came from
    /// `Box::<[T]>::into_raw`.
    mapped: usize,
    _owns: std::marker::PhantomData<T>,
}

// SAFETY: a HugeBox owns its elements exactly as a Box<[T]> does (no
// sharing, no interior mutability of its own), so it may cross or be
// shared between threads under the same bounds as Box<[T]>.
unsafe impl<T: Send> Send for HugeBox<T> {}
// SAFETY: as above: `&HugeBox<T>` only hands out `&[T]`.
unsafe impl<T: Sync> Sync for HugeBox<T> {}

/// Drops the elements written so far and unmaps, if filling a mapping
/// panics half way.
struct Filling<T> {
    ptr: *mut T,
    done: usize,
    mapped: usize,
}

impl<T> Drop for Filling<T> {
    fn drop(&mut self) {
        // SAFETY: the first `done` elements at `ptr` were written and are
        // owned by nobody else; `ptr`/`mapped` is the mapping `map_huge`
        // made, not yet unmapped (the HugeBox was never built).
        unsafe {
            std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(self.ptr, self.done));
            unmap(self.ptr as *mut u8, self.mapped);
        }
    }
}

impl<T> HugeBox<T> {
    /// The elements `f(0..n)`.
    pub fn from_fn(n: usize, mut f: impl FnMut(usize) -> T) -> Self {
        let bytes = n.saturating_mul(std::mem::size_of::<T>());
        if let Some((base, mapped)) = map_huge(bytes) {
            let ptr = base as *mut T;
            let mut fill = Filling {
                ptr,
                done: 0,
                mapped,
            };
            for i in 0..n {
                // SAFETY: the mapping holds `bytes = n * size_of::<T>()`
                // bytes from a 2 MiB-aligned start (so aligned for T) and
                // `i < n`; slot `i` is written once, before anything reads it.
                unsafe { ptr.add(i).write(f(i)) };
                fill.done = i + 1;
            }
            std::mem::forget(fill);
            return HugeBox {
                // SAFETY: `map_huge` never returns a null base.
                ptr: unsafe { std::ptr::NonNull::new_unchecked(ptr) },
                len: n,
                mapped,
                _owns: std::marker::PhantomData,
            };
        }
        let b: Box<[T]> = (0..n).map(f).collect();
        let len = b.len();
        // SAFETY: Box::into_raw never returns null (a dangling, non-null,
        // aligned pointer when empty or T is zero-sized).
        let ptr = unsafe { std::ptr::NonNull::new_unchecked(Box::into_raw(b) as *mut T) };
        HugeBox {
            ptr,
            len,
            mapped: 0,
            _owns: std::marker::PhantomData,
        }
    }

    /// Whether the array has its own huge-page-aligned mapping (false for
    /// small arrays, off Linux, or when the mapping failed).
    pub fn is_mapped(&self) -> bool {
        self.mapped != 0
    }
}

impl<T: Clone> HugeBox<T> {
    /// `n` copies of `v`.
    pub fn new(n: usize, v: T) -> Self {
        HugeBox::from_fn(n, |_| v.clone())
    }

    /// A copy of `s`.
    pub fn from_slice(s: &[T]) -> Self {
        HugeBox::from_fn(s.len(), |i| s[i].clone())
    }
}

impl<T: Clone> Clone for HugeBox<T> {
    fn clone(&self) -> Self {
        HugeBox::from_slice(self)
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for HugeBox<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T> std::ops::Deref for HugeBox<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` points at `len` initialised elements owned by self
        // (written in `from_fn`), valid until drop; `&self` forbids writes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> std::ops::DerefMut for HugeBox<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Drop for HugeBox<T> {
    fn drop(&mut self) {
        let elems = std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len);
        if self.mapped == 0 {
            // SAFETY: `ptr`/`len` came from `Box::<[T]>::into_raw` of a
            // slice of exactly `len` elements and were never freed.
            drop(unsafe { Box::from_raw(elems) });
        } else {
            // SAFETY: the `len` elements are initialised and owned by self;
            // after dropping them the mapping `map_huge` made (`mapped`
            // bytes at `ptr`) is released once.
            unsafe {
                std::ptr::drop_in_place(elems);
                unmap(self.ptr.as_ptr() as *mut u8, self.mapped);
            }
        }
    }
}

/// A fresh anonymous mapping for `bytes` (>= [`HUGE_MIN_BYTES`]) whose
/// start is 2 MiB-aligned and whose length (returned) is `bytes` rounded
/// up to 2 MiB, advised `MADV_HUGEPAGE`; `None` for small sizes, off
/// Linux, or when the kernel refuses. Under Miri, which cannot unmap part
/// of a mapping or advise one, every array takes the heap path, so Miri
/// checks the unsafe code that reads and drops the elements.
#[cfg(all(target_os = "linux", not(miri)))]
fn map_huge(bytes: usize) -> Option<(usize, usize)> {
    if bytes < HUGE_MIN_BYTES {
        return None;
    }
    let len = bytes.checked_next_multiple_of(HUGE_PAGE)?;
    let over = len.checked_add(HUGE_PAGE)?;
    // SAFETY: a fresh private anonymous mapping at an address the kernel
    // chooses: it aliases no Rust object.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            over,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return None;
    }
    let base = base as usize;
    let start = base.next_multiple_of(HUGE_PAGE);
    // SAFETY: [base, start) and [start + len, base + over) lie inside the
    // mapping just made (start - base < HUGE_PAGE, so start + len <= base +
    // over) and nothing refers to them; unmapping them leaves exactly
    // [start, start + len). madvise only changes how that range is backed.
    unsafe {
        if start > base {
            libc::munmap(base as *mut libc::c_void, start - base);
        }
        let tail = base + over - (start + len);
        if tail > 0 {
            libc::munmap((start + len) as *mut libc::c_void, tail);
        }
        libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
    Some((start, len))
}

#[cfg(any(not(target_os = "linux"), miri))]
fn map_huge(_bytes: usize) -> Option<(usize, usize)> {
    None
}

/// Release a mapping made by [`map_huge`].
///
/// # Safety
/// `ptr`/`len` is such a mapping, unmapped once, with nothing referring to
/// it afterwards.
#[cfg(all(target_os = "linux", not(miri)))]
unsafe fn unmap(ptr: *mut u8, len: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        libc::munmap(ptr as *mut libc::c_void, len);
    }
}

#[cfg(any(not(target_os = "linux"), miri))]
unsafe fn unmap(_ptr: *mut u8, _len: usize) {}

/// Advise the whole 2 MiB pages inside `[addr, addr + len)` to be huge
/// pages, if `len` is at least [`HUGE_MIN_BYTES`]. Call it on a fresh
/// allocation before writing it (the pages are then faulted in as huge
/// pages). Never changes the memory's contents; errors are ignored.
#[cfg(all(target_os = "linux", not(miri)))]
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
/// Linux and under Miri).
#[cfg(any(not(target_os = "linux"), miri))]
pub fn advise_huge(_addr: usize, _len: usize) {}

/// Bytes per cache line (x86-64; the stride of [`prefetch_lines`]).
pub const CACHE_LINE: usize = 64;

/// Prefetch the cache line holding `p` into all cache levels
/// (`prefetcht0`): a hint, so any address is allowed, a dangling or null
/// one included, and nothing is read that the program can observe. The
/// one prefetch of the workspace: batch lookups call it a group ahead
/// (see [`two_stage`]). A no-op off x86-64.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: (1) `_mm_prefetch` needs SSE, which is in the x86-64 baseline;
    // (2) a prefetch never faults, whatever the address, and reads nothing
    // the program can observe, so `p` need not be valid or aligned.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// [`prefetch`] every cache line of `*t` (for values that span several
/// lines, such as a cuckoo bucket).
#[inline(always)]
pub fn prefetch_lines<T>(t: &T) {
    prefetch_range((t as *const T).cast::<u8>(), std::mem::size_of::<T>());
}

/// [`prefetch`] every cache line that bytes `[p, p + len)` touch (a
/// record whose length is known before it is read, such as a name or the
/// prefix of a table entry a compare will read). A hint: `p` need not be
/// valid.
#[inline(always)]
pub fn prefetch_range(p: *const u8, len: usize) {
    for line in line_span(p as usize, len) {
        prefetch((line * CACHE_LINE) as *const u8);
    }
}

/// The cache lines (address / [`CACHE_LINE`]) that bytes `[addr, addr +
/// len)` touch; empty when `len` is 0.
fn line_span(addr: usize, len: usize) -> std::ops::Range<usize> {
    if len == 0 {
        return 0..0;
    }
    addr / CACHE_LINE..addr.wrapping_add(len - 1) / CACHE_LINE + 1
}

/// Run a batch in two stages over groups of `G` keys: `first` (hash and
/// prefetch) on group g + 1, then `second` (read) on group g, so a group's
/// reads come a whole group's work after its prefetches. At 1e7 Othello
/// keys, groups of 32 in this order read the memory floor 3 times faster
/// than prefetching a group of 16 and reading it straight away
/// (docs/benchmarks.md, "Othello lookups"). `S` carries one group from `first` to
/// `second` (two are in flight); `second` also gets the group's offset in
/// `keys`.
#[inline(always)]
pub fn two_stage<const G: usize, K, S: Default>(
    keys: &[K],
    mut first: impl FnMut(&[K], &mut S),
    mut second: impl FnMut(usize, &[K], &S),
) {
    let mut st = [S::default(), S::default()];
    let mut groups = keys.chunks(G);
    let Some(mut cur) = groups.next() else {
        return;
    };
    first(cur, &mut st[0]);
    for g in 0.. {
        let next = groups.next();
        if let Some(kn) = next {
            first(kn, &mut st[(g + 1) & 1]);
        }
        second(g * G, cur, &st[g & 1]);
        match next {
            Some(n) => cur = n,
            None => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_touches_every_line_from_its_first_byte_to_its_last() {
        assert_eq!(line_span(128, 0), 0..0);
        assert_eq!(line_span(128, 1), 2..3);
        assert_eq!(line_span(128, 64), 2..3);
        assert_eq!(line_span(128, 65), 2..4);
        // 8 bytes before a boundary, 130 long: three lines, not the two a
        // stride of 64 from the start would visit.
        assert_eq!(line_span(184, 130), 2..5);
        assert_eq!(line_span(191, 2), 2..4);
    }

    /// Every group goes through both stages once, in order, with its own
    /// state; group g + 1's first stage runs before group g's second.
    #[test]
    fn two_stage_prefetches_a_group_ahead() {
        for n in [0usize, 1, 3, 4, 5, 8, 11] {
            let keys: Vec<usize> = (0..n).collect();
            let mut log = Vec::new();
            let mut seen = vec![0u8; n];
            {
                let log = std::cell::RefCell::new(&mut log);
                two_stage::<4, usize, Vec<usize>>(
                    &keys,
                    |kc, st| {
                        log.borrow_mut().push(format!("first {}", kc[0] / 4));
                        *st = kc.to_vec();
                    },
                    |start, kc, st| {
                        log.borrow_mut().push(format!("second {}", start / 4));
                        assert_eq!(&keys[start..start + kc.len()], kc);
                        assert_eq!(st.as_slice(), kc, "state of another group");
                        for &k in kc {
                            seen[k] += 1;
                        }
                    },
                );
            }
            assert!(seen.iter().all(|&c| c == 1), "n {n}: {seen:?}");
            let groups = n.div_ceil(4);
            let mut want = Vec::new();
            if groups > 0 {
                want.push("first 0".to_string());
            }
            for g in 0..groups {
                if g + 1 < groups {
                    want.push(format!("first {}", g + 1));
                }
                want.push(format!("second {g}"));
            }
            assert_eq!(log, want, "n {n}");
        }
    }

    #[test]
    fn reserve_huge_keeps_the_elements_and_grows_only_when_short() {
        let mut v: Vec<u32> = (0..1000).collect();
        reserve_huge(&mut v, 3_000_000);
        assert!(v.capacity() >= 3_000_000);
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
        let p = v.as_ptr();
        reserve_huge(&mut v, 10);
        assert_eq!(v.as_ptr(), p, "no move when the capacity suffices");
        assert_eq!(v.len(), 1000);
    }

    #[test]
    #[cfg_attr(miri, ignore = "3e6 elements take minutes in Miri")]
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
    #[cfg_attr(miri, ignore = "a mapping Miri cannot make")]
    fn large_boxes_get_an_aligned_mapping_and_small_ones_the_heap() {
        let big = HugeBox::from_fn(HUGE_MIN_BYTES / 4 + 3, |i| i as u32);
        assert_eq!(big.is_mapped(), cfg!(target_os = "linux"));
        if big.is_mapped() {
            assert_eq!(big.as_ptr() as usize % HUGE_PAGE, 0);
        }
        assert!(big.iter().enumerate().all(|(i, &x)| x == i as u32));
        let small = HugeBox::from_fn(1000, |i| i as u64);
        assert!(!small.is_mapped());
        assert_eq!(small[999], 999);
        let empty: HugeBox<u64> = HugeBox::from_fn(0, |_| 0);
        assert!(empty.is_empty() && !empty.is_mapped());
        let zst: HugeBox<()> = HugeBox::from_fn(HUGE_MIN_BYTES * 2, |_| ());
        assert!(zst.len() == HUGE_MIN_BYTES * 2 && !zst.is_mapped());
    }

    #[test]
    fn elements_are_dropped_once_also_after_a_panic_while_filling() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let drops = Arc::new(AtomicUsize::new(0));
        // 4 KiB apiece, so 1000 of them take a mapping.
        struct D(Arc<AtomicUsize>, #[allow(dead_code)] [u8; 4096]);
        impl Drop for D {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let n = 1000; // 4 MB: a mapping
        let b = HugeBox::from_fn(n, |_| D(drops.clone(), [0; 4096]));
        assert_eq!(b.is_mapped(), cfg!(all(target_os = "linux", not(miri))));
        drop(b);
        assert_eq!(drops.load(Ordering::Relaxed), n);
        drops.store(0, Ordering::Relaxed);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            HugeBox::from_fn(n, |i| {
                assert!(i < 700, "stop");
                D(drops.clone(), [0; 4096])
            })
        }));
        assert!(r.is_err());
        assert_eq!(drops.load(Ordering::Relaxed), 700);
    }

    #[test]
    fn prefetch_takes_any_address_and_changes_nothing() {
        let v = [7u8; 3 * CACHE_LINE + 5];
        for b in &v {
            prefetch(b);
        }
        prefetch_lines(&v);
        let big = [1u64; 40];
        prefetch_lines(&big);
        prefetch_lines(&());
        prefetch(std::ptr::null::<u64>());
        prefetch(usize::MAX as *const u8);
        prefetch(v.as_ptr().wrapping_add(1 << 40));
        assert!(v.iter().all(|&b| b == 7));
        assert!(big.iter().all(|&w| w == 1));
    }

    #[test]
    #[cfg_attr(miri, ignore = "a no-op in Miri; 5 MiB take minutes")]
    fn advice_on_odd_ranges_is_harmless() {
        let v = vec![1u8; 5 << 20];
        advise_huge(v.as_ptr() as usize + 1, v.len() - 1);
        advise_huge(v.as_ptr() as usize, 0);
        advise_huge(usize::MAX - 10, 100);
        assert!(v.iter().all(|&b| b == 1));
    }
}
