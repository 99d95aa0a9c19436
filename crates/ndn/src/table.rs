//! One hash table of the FIB: cache-line buckets of fingerprints and entry
//! references with overflow chaining (dissertation Fig. 3.3).
//!
//! ```text
//! Bucket (64 B, 64-aligned)
//!   bytes  0..8 : occupied:9 | collided:9 | leaf:9 | next:32 | reserved:5
//!   bytes  8..26: 9 fingerprints, 16 bits each
//!   bytes 26..28: padding
//!   bytes 28..64: 9 entry references, 32 bits each (arena word index)
//! ```
//! `next` is the index of the chained overflow bucket (0 = none; bucket 0
//! is always a home bucket, so it is never an overflow target). A key's
//! 64-bit hash picks its home bucket from the low 32 bits (Lemire range
//! reduction) and its fingerprint from the top 16 bits. `collided` marks a
//! slot whose fingerprint another slot of the same chain shares; `leaf`
//! marks a key that no longer rule extends (the search may stop there).

/// Slots per bucket.
pub const SLOTS: usize = 9;
/// Fingerprint bits per slot.
pub const FP_BITS: u32 = 16;
/// Entry reference bits per slot (a word index into the arena, so the
/// arena holds at most 2^32 words = 32 GiB).
pub const REF_BITS: u32 = 32;
/// Largest entry reference a slot holds.
pub const MAX_REF: u64 = (1 << REF_BITS) - 1;
const REF_MASK: u64 = MAX_REF;
const NEXT_SHIFT: u32 = 3 * SLOTS as u32;
const NEXT_MASK: u64 = (1 << 32) - 1;
const OCC_MASK: u64 = (1 << SLOTS) - 1;

/// One cache-line bucket: a header word, then the 16-bit fingerprints of
/// the 9 slots, then their 32-bit entry references.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct Bucket {
    pub(crate) hdr: u64,
    pub(crate) fps: [u16; SLOTS],
    pub(crate) refs: [u32; SLOTS],
}
const _: () = assert!(std::mem::size_of::<Bucket>() == 64);
const _: () = assert!(NEXT_SHIFT + 32 <= 64);

impl Bucket {
    #[inline(always)]
    pub(crate) fn occupied(&self) -> u64 {
        self.hdr & OCC_MASK
    }
    /// The occupied slots whose fingerprint is `fp`, as a bit mask (bit
    /// `s` for slot `s`): the nine compares are made without a branch (a
    /// loop that stops at the match mispredicts once per bucket).
    #[inline(always)]
    pub(crate) fn matches(&self, fp: u16) -> u64 {
        let mut m = 0u64;
        for (s, &f) in self.fps.iter().enumerate() {
            m |= ((f == fp) as u64) << s;
        }
        m & self.occupied()
    }
    #[inline(always)]
    pub(crate) fn collided(&self) -> u64 {
        (self.hdr >> SLOTS) & OCC_MASK
    }
    #[inline(always)]
    pub(crate) fn leaf(&self) -> u64 {
        (self.hdr >> (2 * SLOTS)) & OCC_MASK
    }
    #[inline(always)]
    pub(crate) fn next(&self) -> usize {
        ((self.hdr >> NEXT_SHIFT) & NEXT_MASK) as usize
    }
    /// Slot `s` as one word `fingerprint << 32 | entry reference` (see
    /// [`slot_fp`], [`slot_ref`]).
    #[inline(always)]
    pub(crate) fn slot(&self, s: usize) -> u64 {
        (self.fps[s] as u64) << REF_BITS | self.refs[s] as u64
    }
    #[inline(always)]
    pub(crate) fn set_slot(&mut self, s: usize, word: u64) {
        self.fps[s] = slot_fp(word) as u16;
        self.refs[s] = slot_ref(word) as u32;
    }
    fn set_next(&mut self, n: usize) {
        self.hdr = (self.hdr & !(NEXT_MASK << NEXT_SHIFT)) | ((n as u64 & NEXT_MASK) << NEXT_SHIFT);
    }
    pub(crate) fn set_bit(&mut self, group: usize, slot: usize, on: bool) {
        let bit = 1u64 << (group * SLOTS + slot);
        if on {
            self.hdr |= bit;
        } else {
            self.hdr &= !bit;
        }
    }
}

/// Fingerprint of a hash (its top 16 bits).
#[inline(always)]
pub fn fingerprint(h: u64) -> u64 {
    h >> (64 - FP_BITS)
}

#[inline(always)]
pub(crate) fn slot_fp(s: u64) -> u64 {
    s >> REF_BITS
}
#[inline(always)]
pub(crate) fn slot_ref(s: u64) -> u64 {
    s & REF_MASK
}

/// A table of buckets: `home` buckets first, overflow buckets after.
#[derive(Clone, Debug)]
pub struct Table {
    pub(crate) buckets: Vec<Bucket>,
    pub(crate) home: u32,
    free: Vec<u32>,
    pub(crate) len: usize,
}

impl Table {
    /// A table with `home` home buckets (at least 1).
    pub fn with_home_buckets(home: usize) -> Table {
        let home = home.clamp(1, u32::MAX as usize);
        // Room for overflow buckets (about 8% of home buckets at the
        // default fill of 6 keys per 9 slots), so the first overflow push
        // does not double the allocation.
        // On huge pages when large: lookups read random buckets.
        let mut buckets = Vec::new();
        nexthop_mem::reserve_huge(&mut buckets, home + home / 8 + 1);
        buckets.resize(home, Bucket::default());
        Table {
            buckets,
            home: home as u32,
            free: Vec::new(),
            len: 0,
        }
    }

    pub(crate) fn from_parts(buckets: Vec<Bucket>, home: u32, len: usize) -> Table {
        let mut free = Vec::new();
        // Overflow buckets not linked from any chain are free.
        let mut linked = vec![false; buckets.len()];
        for b in &buckets {
            if b.next() != 0 && b.next() < linked.len() {
                linked[b.next()] = true;
            }
        }
        for (i, l) in linked.iter().enumerate().skip(home as usize) {
            if !l {
                free.push(i as u32);
            }
        }
        Table {
            buckets,
            home,
            free,
            len,
        }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table holds no key.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Home bucket of hash `h`.
    #[inline(always)]
    pub fn home_of(&self, h: u64) -> usize {
        nexthop_hash::reduce(h as u32, self.home) as usize
    }

    /// Bytes used by buckets.
    pub fn bytes(&self) -> usize {
        self.buckets.len() * 64
    }

    /// Insert a key with hash `h` referring to entry word `eref`.
    pub fn insert(&mut self, h: u64, eref: u64, leaf: bool) {
        debug_assert!(eref <= REF_MASK);
        let fp = fingerprint(h);
        let mut b = self.home_of(h);
        loop {
            let occ = self.buckets[b].occupied();
            if occ != OCC_MASK {
                let s = (!occ).trailing_zeros() as usize;
                let bk = &mut self.buckets[b];
                bk.set_slot(s, (fp << REF_BITS) | eref);
                bk.set_bit(0, s, true);
                bk.set_bit(2, s, leaf);
                break;
            }
            let n = self.buckets[b].next();
            if n != 0 {
                b = n;
                continue;
            }
            let nb = match self.free.pop() {
                Some(i) => i as usize,
                None => {
                    self.buckets.push(Bucket::default());
                    self.buckets.len() - 1
                }
            };
            self.buckets[nb] = Bucket::default();
            self.buckets[b].set_next(nb);
            b = nb;
        }
        self.len += 1;
        self.refresh_collided(h, fp);
    }

    /// Find the slot holding `(fp(h), eref)`: `(bucket, slot)`.
    pub(crate) fn find(&self, h: u64, eref: u64) -> Option<(usize, usize)> {
        let fp = fingerprint(h) as u16;
        let mut b = self.home_of(h);
        loop {
            let bk = &self.buckets[b];
            let mut m = bk.matches(fp);
            while m != 0 {
                let s = m.trailing_zeros() as usize;
                m &= m - 1;
                if bk.refs[s] as u64 == eref {
                    return Some((b, s));
                }
            }
            b = bk.next();
            if b == 0 {
                return None;
            }
        }
    }

    /// Remove the key `(h, eref)`; returns whether it was there.
    pub fn remove(&mut self, h: u64, eref: u64) -> bool {
        let Some((b, s)) = self.find(h, eref) else {
            return false;
        };
        let bk = &mut self.buckets[b];
        bk.set_bit(0, s, false);
        bk.set_bit(1, s, false);
        bk.set_bit(2, s, false);
        bk.set_slot(s, 0);
        self.len -= 1;
        self.refresh_collided(h, fingerprint(h));
        self.unlink_empty_overflow(h);
        true
    }

    /// Set the leaf bit of key `(h, eref)`.
    pub fn set_leaf(&mut self, h: u64, eref: u64, leaf: bool) {
        if let Some((b, s)) = self.find(h, eref) {
            self.buckets[b].set_bit(2, s, leaf);
        }
    }

    /// Re-point key `(h, old)` at entry `new` (entries move when rebuilt).
    pub fn repoint(&mut self, h: u64, old: u64, new: u64) -> bool {
        if let Some((b, s)) = self.find(h, old) {
            self.buckets[b].set_slot(s, (fingerprint(h) << REF_BITS) | new);
            true
        } else {
            false
        }
    }

    /// Rewrite every slot's entry reference through `map` (arena
    /// compaction; fingerprints and bits are unchanged).
    pub(crate) fn remap_refs(&mut self, map: impl Fn(u64) -> u64) {
        for bk in &mut self.buckets {
            let mut occ = bk.occupied();
            while occ != 0 {
                let s = occ.trailing_zeros() as usize;
                occ &= occ - 1;
                let new = map(slot_ref(bk.slot(s)));
                debug_assert!(new <= REF_MASK);
                bk.refs[s] = new as u32;
            }
        }
    }

    /// Recompute the collided bits of fingerprint `fp` in `h`'s chain.
    fn refresh_collided(&mut self, h: u64, fp: u64) {
        let home = self.home_of(h);
        let mut count = 0;
        let mut b = home;
        loop {
            let bk = &self.buckets[b];
            count += bk.matches(fp as u16).count_ones() as usize;
            b = bk.next();
            if b == 0 {
                break;
            }
        }
        let mut b = home;
        loop {
            let bk = &mut self.buckets[b];
            let mut m = bk.matches(fp as u16);
            while m != 0 {
                let s = m.trailing_zeros() as usize;
                m &= m - 1;
                bk.set_bit(1, s, count > 1);
            }
            b = bk.next();
            if b == 0 {
                break;
            }
        }
    }

    /// Unlink and free empty overflow buckets of `h`'s chain.
    fn unlink_empty_overflow(&mut self, h: u64) {
        let mut prev = self.home_of(h);
        loop {
            let cur = self.buckets[prev].next();
            if cur == 0 {
                return;
            }
            if self.buckets[cur].occupied() == 0 {
                let after = self.buckets[cur].next();
                self.buckets[prev].set_next(after);
                self.buckets[cur] = Bucket::default();
                self.free.push(cur as u32);
            } else {
                prev = cur;
            }
        }
    }

    /// Every occupied slot as `(slot word, leaf)`, for rehashing.
    pub(crate) fn drain_slots(&self) -> Vec<(u64, bool)> {
        let mut v = Vec::with_capacity(self.len);
        for bk in &self.buckets {
            let mut occ = bk.occupied();
            while occ != 0 {
                let s = occ.trailing_zeros() as usize;
                occ &= occ - 1;
                v.push((bk.slot(s), bk.leaf() >> s & 1 == 1));
            }
        }
        v
    }

    /// Number of overflow buckets in use.
    pub fn overflow_buckets(&self) -> usize {
        self.buckets.len() - self.home as usize - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_are_the_occupied_slots_with_the_fingerprint() {
        // Slots 0, 2, 4, 6, 7 and 8 hold 5; 3 and 7 are free.
        let mut bk = Bucket {
            fps: [5, 9, 5, 0, 5, 7, 5, 5, 5],
            hdr: OCC_MASK & !(1 << 3 | 1 << 7),
            ..Default::default()
        };
        assert_eq!(bk.matches(5), 1 | 1 << 2 | 1 << 4 | 1 << 6 | 1 << 8);
        assert_eq!(bk.matches(9), 1 << 1);
        // A free slot's stale fingerprint never matches.
        assert_eq!(bk.matches(0), 0);
        assert_eq!(bk.matches(6), 0);
        bk.hdr = 0;
        assert_eq!(bk.matches(5), 0);
    }

    #[test]
    fn overflow_chain_holds_more_than_seven_keys_and_unlinks_when_emptied() {
        let mut t = Table::with_home_buckets(1);
        let hs: Vec<u64> = (0..20u64).map(|i| (i << 50) | 7).collect();
        for (i, &h) in hs.iter().enumerate() {
            t.insert(h, i as u64 + 1, false);
        }
        assert_eq!(t.len(), 20);
        assert_eq!(t.overflow_buckets(), 2);
        for (i, &h) in hs.iter().enumerate() {
            assert!(t.find(h, i as u64 + 1).is_some());
        }
        for (i, &h) in hs.iter().enumerate().skip(5) {
            assert!(t.remove(h, i as u64 + 1));
        }
        assert_eq!(t.overflow_buckets(), 0);
        assert!(!t.remove(hs[6], 7));
    }

    #[test]
    fn collided_bits_follow_equal_fingerprints() {
        let mut t = Table::with_home_buckets(1);
        let h = 0xABCDE << 44;
        t.insert(h, 1, false);
        assert_eq!(t.buckets[0].collided(), 0);
        t.insert(h | 1, 2, true);
        assert_eq!(t.buckets[0].collided(), 0b11);
        assert_eq!(t.buckets[0].leaf(), 0b10);
        t.remove(h, 1);
        assert_eq!(t.buckets[0].collided(), 0);
    }
}
