//! Vectors a stage reuses instead of allocating per miss: the copies of
//! frames it hands to the app or keeps while their flow's decision is in
//! flight, and the lists those waiting frames sit in. A frame's buffer
//! goes to the app thread in a request and usually comes back in its
//! answer (the decision sends the frame itself), so the stage's copies
//! cost no allocation once the pool is warm.

/// At most `max_count` empty vectors, each of capacity at most
/// `max_capacity` (a larger one is freed, not kept: one jumbo frame must
/// not pin its buffer for good). The pool never holds more than
/// `max_count * max_capacity` elements' room.
pub(super) struct Spares<E> {
    vecs: Vec<Vec<E>>,
    max_count: usize,
    max_capacity: usize,
}

impl<E> Spares<E> {
    pub(super) fn new(max_count: usize, max_capacity: usize) -> Spares<E> {
        Spares {
            vecs: Vec::new(),
            max_count,
            max_capacity,
        }
    }

    /// An empty vector: a kept one when there is one.
    pub(super) fn take(&mut self) -> Vec<E> {
        self.vecs.pop().unwrap_or_default()
    }

    /// Keep `v` (emptied) for a later [`Self::take`], if the pool has room
    /// and `v` is not too large; otherwise free it.
    pub(super) fn give(&mut self, mut v: Vec<E>) {
        if self.vecs.len() < self.max_count && v.capacity() > 0 && v.capacity() <= self.max_capacity
        {
            v.clear();
            self.vecs.push(v);
        }
    }

    /// Vectors kept now.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.vecs.len()
    }

    /// Room kept now, in elements.
    #[cfg(test)]
    pub(super) fn room(&self) -> usize {
        self.vecs.iter().map(Vec::capacity).sum()
    }
}

impl Spares<u8> {
    /// A copy of `bytes` in a kept buffer when there is one.
    pub(super) fn copy(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut v = self.take();
        v.extend_from_slice(bytes);
        v
    }
}

/// Frame buffers a stage keeps: enough for a batch's misses with room to
/// spare, each up to a standard jumbo frame.
pub(super) const SPARE_FRAMES: usize = 256;
pub(super) const SPARE_FRAME_BYTES: usize = 9216;
/// Waiting-frame lists a stage keeps (one per flow with frames waiting).
pub(super) const SPARE_LISTS: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_keeps_at_most_its_count_and_never_an_oversized_buffer() {
        let mut s: Spares<u8> = Spares::new(4, 100);
        // Nothing kept yet: a fresh vector.
        assert_eq!(s.take().capacity(), 0);
        for _ in 0..10 {
            s.give(vec![7u8; 60]);
        }
        assert_eq!(s.len(), 4);
        assert!(s.room() <= 4 * 100);
        // Too large, or never allocated: freed, not kept.
        s.take();
        s.give(vec![0u8; 101]);
        s.give(Vec::new());
        assert_eq!(s.len(), 3);
        // A kept buffer comes back empty, with its room.
        let c = s.copy(&[1, 2, 3]);
        assert_eq!(c, [1, 2, 3]);
        assert!(c.capacity() >= 60);
        assert_eq!(s.len(), 2);
    }
}
