//! Lists of borrowed frames that keep their allocation from one batch of
//! frames to the next.
//!
//! A forwarding loop gathers slices of the frames in hand (a ring block, a
//! batch read from a file) into `Vec<&[u8]>` lists. The frames of each
//! batch live for a different, shorter borrow, so a plain `Vec<&'a [u8]>`
//! cannot be kept across batches: the borrow checker ties `'a` to one
//! batch. [`FrameBuf`] and [`FrameLists`] park the *empty* vectors between
//! batches and hand them out again with the next batch's lifetime, so the
//! hot path allocates only when a batch is larger than any before it.
//!
//! ```
//! use nexthop_dataplane::FrameBuf;
//!
//! let mut buf = FrameBuf::with_capacity(2);
//! for round in 0..3u8 {
//!     let frames = vec![vec![round; 60], vec![round; 64]]; // this round's frames
//!     let mut list = buf.take();
//!     list.extend(frames.iter().map(|f| &f[..]));
//!     assert_eq!(list.len(), 2);
//!     buf.put(list); // emptied and kept; `frames` may now go
//! }
//! assert!(buf.capacity() >= 2);
//! ```
// The only unsafe code: relabelling the lifetime of an empty vector.
#![allow(unsafe_code)]

use std::mem::ManuallyDrop;

/// Empty `v` and return its allocation as a vector for frames of any
/// other lifetime.
fn relabel<'a, 'b>(v: Vec<&'a [u8]>) -> Vec<&'b [u8]> {
    let mut v = ManuallyDrop::new(v);
    v.clear();
    let cap = v.capacity();
    if cap == 0 {
        // Nothing allocated: `from_raw_parts` is not needed (and a dangling
        // pointer is not handed to it).
        return Vec::new();
    }
    let ptr = v.as_mut_ptr().cast::<&'b [u8]>();
    // SAFETY: (1) `ptr` was allocated by the global allocator for `cap`
    // elements of `&'a [u8]` (a `Vec` with nonzero capacity owns such an
    // allocation); `&'a [u8]` and `&'b [u8]` differ only in a lifetime,
    // which does not take part in layout, so size and alignment are the
    // same and the allocation fits `cap` elements of `&'b [u8]` exactly.
    // Length 0: no element is reinterpreted, so no reference outlives its
    // borrow. `v` is in `ManuallyDrop` and not used again, so the
    // allocation has exactly one owner, the returned vector.
    unsafe { Vec::from_raw_parts(ptr, 0, cap) }
}

/// Empty every list of `v` and return the lists (their number and
/// allocations kept) as lists for frames of any other lifetime.
fn relabel_lists<'a, 'b>(v: Vec<Vec<&'a [u8]>>) -> Vec<Vec<&'b [u8]>> {
    let mut v = ManuallyDrop::new(v);
    for list in v.iter_mut() {
        list.clear();
    }
    let (len, cap) = (v.len(), v.capacity());
    if cap == 0 {
        return Vec::new();
    }
    let ptr = v.as_mut_ptr().cast::<Vec<&'b [u8]>>();
    // SAFETY: (2) as in (1), `ptr` is a global-allocator allocation for
    // `cap` elements of `Vec<&'a [u8]>`, a type with the same layout as
    // `Vec<&'b [u8]>` (they differ only in a lifetime). The first `len`
    // elements are initialised, and each is an *empty* vector (cleared
    // just above): it holds no reference, only its own allocation for
    // elements of the same layout, so it is a valid `Vec<&'b [u8]>`. `v`
    // is in `ManuallyDrop` and not used again, so the outer and inner
    // allocations each keep exactly one owner.
    unsafe { Vec::from_raw_parts(ptr, len, cap) }
}

/// One reusable list of frame slices (see the [module docs](self)).
#[derive(Debug, Default)]
pub struct FrameBuf {
    /// Always empty: it is only an allocation.
    spare: Vec<&'static [u8]>,
}

impl FrameBuf {
    /// An empty buffer with room for `n` frames.
    pub fn with_capacity(n: usize) -> FrameBuf {
        FrameBuf {
            spare: Vec::with_capacity(n),
        }
    }

    /// An empty list using this buffer's allocation, for frames that live
    /// for `'a`. Give it back with [`FrameBuf::put`] to keep the
    /// allocation (a list not given back is simply freed).
    pub fn take<'a>(&mut self) -> Vec<&'a [u8]> {
        relabel(std::mem::take(&mut self.spare))
    }

    /// Empty `list` and keep its allocation for the next
    /// [`FrameBuf::take`].
    pub fn put(&mut self, list: Vec<&[u8]>) {
        self.spare = relabel(list);
    }

    /// Frames the next list can hold without allocating.
    pub fn capacity(&self) -> usize {
        self.spare.capacity()
    }
}

/// A reusable set of frame lists, one per output port, say (see the
/// [module docs](self)).
#[derive(Debug, Default)]
pub struct FrameLists {
    /// Every list always empty: only allocations.
    spare: Vec<Vec<&'static [u8]>>,
}

impl FrameLists {
    /// `n` empty lists, using the parked allocations (lists are added
    /// when `n` is larger than before, and freed when it is smaller).
    pub fn take<'a>(&mut self, n: usize) -> Vec<Vec<&'a [u8]>> {
        self.spare.resize_with(n, Vec::new);
        relabel_lists(std::mem::take(&mut self.spare))
    }

    /// Empty every list of `lists` and keep them (and their allocations)
    /// for the next [`FrameLists::take`].
    pub fn put(&mut self, lists: Vec<Vec<&[u8]>>) {
        self.spare = relabel_lists(lists);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_keeps_its_allocation_across_borrows() {
        let mut buf = FrameBuf::with_capacity(4);
        let mut addr = None;
        for round in 0..5u8 {
            let frames: Vec<Vec<u8>> = (0..4).map(|i| vec![round, i]).collect();
            let mut list = buf.take();
            assert!(list.is_empty());
            list.extend(frames.iter().map(|f| &f[..]));
            assert_eq!(list[3], &[round, 3][..]);
            let p = list.as_ptr() as usize;
            assert_eq!(*addr.get_or_insert(p), p, "round {round} reallocated");
            buf.put(list);
            drop(frames);
        }
        assert_eq!(buf.capacity(), 4);
    }

    #[test]
    fn a_list_grows_once_and_then_stays() {
        let mut buf = FrameBuf::default();
        assert_eq!(buf.capacity(), 0);
        let frame = [1u8; 60];
        let mut list = buf.take();
        list.extend_from_slice(&[&frame[..]; 100]);
        buf.put(list);
        let cap = buf.capacity();
        assert!(cap >= 100);
        let list = buf.take();
        assert!(list.is_empty() && list.capacity() == cap);
        // Not given back: the next list starts empty again.
        drop(list);
        assert_eq!(buf.capacity(), 0);
    }

    #[test]
    fn lists_come_back_empty_with_their_allocations() {
        let mut lists = FrameLists::default();
        let mut addrs = Vec::new();
        for round in 0..4u8 {
            let frames: Vec<Vec<u8>> = (0..8).map(|i| vec![round, i]).collect();
            let mut ls = lists.take(3);
            assert_eq!(ls.len(), 3);
            assert!(ls.iter().all(|l| l.is_empty()));
            for (i, f) in frames.iter().enumerate() {
                ls[i % 3].push(&f[..]);
            }
            assert_eq!(
                ls[1],
                vec![&[round, 1][..], &[round, 4][..], &[round, 7][..]]
            );
            let now: Vec<usize> = ls.iter().map(|l| l.as_ptr() as usize).collect();
            if round == 0 {
                addrs = now;
            } else {
                assert_eq!(addrs, now, "round {round} reallocated a list");
            }
            lists.put(ls);
        }
        // Fewer lists, then more: the kept ones are handed out again.
        let ls = lists.take(2);
        let now: Vec<usize> = ls.iter().map(|l| l.as_ptr() as usize).collect();
        assert_eq!(now, addrs[..2]);
        lists.put(ls);
        let ls = lists.take(5);
        assert_eq!(ls.len(), 5);
        assert_eq!(ls.iter().filter(|l| l.capacity() >= 3).count(), 2);
        lists.put(ls);
        assert_eq!(lists.take(0).len(), 0);
    }
}
