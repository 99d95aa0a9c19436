//! A group's hash table: cache-line buckets ([`Line`], [`Line4`] for IPv4,
//! [`Line6`] for IPv6) under open addressing by lines (`HashTable`).

use nexthop_mem::HugeBox;

use super::{prefetch, select, GroupKey};
use crate::addr::{NextHop, NO_ROUTE};

/// One 64-byte line of a group's hash table: a bucket of [`Line::LEN`]
/// slots, keys and next hops kept apart so a lookup compares every key of
/// the line at once (`NO_ROUTE` as a next hop marks an empty slot; its key
/// is stale and never matches).
pub trait Line: Copy + Send + Sync + std::fmt::Debug {
    /// The key type.
    type Key: Copy + Eq;
    /// Slots per line.
    const LEN: usize;
    /// Highest load (slots in use per slot) before the table grows, as
    /// `(numerator, denominator)`.
    const MAX_LOAD: (usize, usize);
    /// A line of empty slots.
    const EMPTY: Self;
    /// Slot `j`'s key (`j < LEN`).
    fn key(&self, j: usize) -> Self::Key;
    /// Slot `j`'s next hop (`NO_ROUTE`: empty).
    fn hop(&self, j: usize) -> NextHop;
    /// Fill slot `j`.
    fn set(&mut self, j: usize, key: Self::Key, hop: NextHop);
    /// Replace slot `j`'s next hop (`NO_ROUTE` empties it).
    fn set_hop(&mut self, j: usize, hop: NextHop);
    /// The next hop of `key` in this line (`NO_ROUTE` when absent), and,
    /// when absent, whether the line has an empty slot (a lookup that
    /// misses here goes on to the next line only when it has none). The
    /// default goes slot by slot and stops at the key (IPv6: a 16-byte
    /// compare each, and at load <= 1/2 most keys sit in their line's first
    /// slot).
    #[inline(always)]
    fn find(&self, key: Self::Key) -> (NextHop, bool) {
        let mut room = false;
        for j in 0..Self::LEN {
            let hop = self.hop(j);
            if hop == NO_ROUTE {
                room = true;
            } else if self.key(j) == key {
                return (hop, room);
            }
        }
        (NO_ROUTE, room)
    }
}

/// The hash-table line of IPv4 keys: 8 slots.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub struct Line4 {
    keys: [u32; 8],
    hops: [NextHop; 8],
}

const _: () = assert!(std::mem::size_of::<Line4>() == 64);

impl Line for Line4 {
    type Key = u32;
    const LEN: usize = 8;
    const MAX_LOAD: (usize, usize) = (3, 4);
    const EMPTY: Self = Line4 {
        keys: [0; 8],
        hops: [NO_ROUTE; 8],
    };
    #[inline(always)]
    fn key(&self, j: usize) -> u32 {
        self.keys[j]
    }
    #[inline(always)]
    fn hop(&self, j: usize) -> NextHop {
        self.hops[j]
    }
    fn set(&mut self, j: usize, key: u32, hop: NextHop) {
        (self.keys[j], self.hops[j]) = (key, hop);
    }
    fn set_hop(&mut self, j: usize, hop: NextHop) {
        self.hops[j] = hop;
    }
    /// The keys compared four at a time (SSE2, in every x86-64), with the
    /// empty marks, into one bit mask: no branch per slot.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn find(&self, key: u32) -> (NextHop, bool) {
        use std::arch::x86_64::*;
        let p = (self as *const Line4).cast::<__m128i>();
        // SAFETY: `p` points at this 64-byte, 64-aligned line (`repr(C,
        // align(64))`: `keys` in its first 32 bytes, `hops` in the last 32),
        // so `p .. p + 4` are four aligned 16-byte loads inside it; SSE2, the
        // only feature the intrinsics need, is part of the x86-64 baseline.
        let (hit, empty) = unsafe {
            let kv = _mm_set1_epi32(key as i32);
            let ev = _mm_set1_epi32(NO_ROUTE as i32);
            let e0 = _mm_cmpeq_epi32(_mm_load_si128(p.add(2)), ev);
            let e1 = _mm_cmpeq_epi32(_mm_load_si128(p.add(3)), ev);
            let m0 = _mm_andnot_si128(e0, _mm_cmpeq_epi32(_mm_load_si128(p), kv));
            let m1 = _mm_andnot_si128(e1, _mm_cmpeq_epi32(_mm_load_si128(p.add(1)), kv));
            // Two mask bits per slot.
            (
                _mm_movemask_epi8(_mm_packs_epi32(m0, m1)) as u32,
                _mm_movemask_epi8(_mm_packs_epi32(e0, e1)),
            )
        };
        let hop = if hit != 0 {
            self.hops[((hit.trailing_zeros() / 2) & 7) as usize]
        } else {
            NO_ROUTE
        };
        (hop, empty != 0)
    }
}

/// The hash-table line of IPv6 keys: 3 slots (a 16-byte key each).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub struct Line6 {
    keys: [u128; 3],
    hops: [NextHop; 3],
}

const _: () = assert!(std::mem::size_of::<Line6>() == 64);

impl Line for Line6 {
    type Key = u128;
    const LEN: usize = 3;
    const MAX_LOAD: (usize, usize) = (1, 2);
    const EMPTY: Self = Line6 {
        keys: [0; 3],
        hops: [NO_ROUTE; 3],
    };
    #[inline(always)]
    fn key(&self, j: usize) -> u128 {
        self.keys[j]
    }
    #[inline(always)]
    fn hop(&self, j: usize) -> NextHop {
        self.hops[j]
    }
    fn set(&mut self, j: usize, key: u128, hop: NextHop) {
        (self.keys[j], self.hops[j]) = (key, hop);
    }
    fn set_hop(&mut self, j: usize, hop: NextHop) {
        self.hops[j] = hop;
    }
    /// Every slot compared, without a branch: whether a lookup finds its
    /// key here, and in which slot, depends on its data.
    #[inline(always)]
    fn find(&self, key: u128) -> (NextHop, bool) {
        let mut hop = NO_ROUTE;
        let mut room = false;
        for j in 0..3 {
            let empty = self.hops[j] == NO_ROUTE;
            room |= empty;
            hop = select(!empty & (self.keys[j] == key), self.hops[j], hop);
        }
        (hop, room)
    }
}

/// Open addressing over cache-line buckets ([`Line`]): a key lives in its
/// home line (`h & line_mask`) or, when that line is full, in the next
/// line with room (linear probing by lines). A lookup compares its home
/// line whole and goes on only while the lines it reads are full, so a
/// present key costs one line unless its home line overflowed (0.6% of
/// IPv4 inside-prefix lookups on the 2015 table; linear probing by slots
/// crossed into a second line for 5.2%, a dependent miss each). Deletion
/// keeps the invariant (every line from a key's home to the line before its
/// own is full) by moving keys back, line by line. Power-of-two line count;
/// the load stays at most [`Line::MAX_LOAD`].
#[derive(Clone, Debug)]
pub(super) struct HashTable<K: GroupKey> {
    pub(super) lines: HugeBox<K::Line>,
    /// Lines minus one (a power of two minus one).
    pub(super) line_mask: u32,
    pub(super) len: usize,
}

impl<K: GroupKey> HashTable<K> {
    pub(super) fn with_capacity(n: usize) -> Self {
        // The fewest lines (a power of two) that hold `n` keys within the
        // maximum load: IPv4 (8 slots a line, load <= 3/4), the 2015 table's
        // /24 group of 941k keys takes 16 MiB (load 0.45), its /32 group of
        // 284k keys 4 MiB; IPv6 (3 slots a line, load <= 1/2) few lines
        // overflow.
        let (num, den) = K::Line::MAX_LOAD;
        let slots = (n.max(1) * den).div_ceil(num);
        let lines = slots.div_ceil(K::Line::LEN).next_power_of_two();
        HashTable {
            lines: HugeBox::new(lines, K::Line::EMPTY),
            line_mask: (lines - 1) as u32,
            len: 0,
        }
    }

    /// The home line of hash `h`.
    #[inline(always)]
    pub(super) fn home(&self, h: u32) -> usize {
        (h & self.line_mask) as usize
    }

    /// Line `b` (`b <= line_mask`).
    #[inline(always)]
    pub(super) fn line(&self, b: usize) -> &K::Line {
        debug_assert!(b <= self.line_mask as usize);
        // SAFETY: `b <= line_mask` (every caller masks with it), and
        // `lines.len() == line_mask + 1`: both are set together, from one
        // power of two, by `with_capacity`, the only constructor (a grow
        // replaces the whole table with a new `with_capacity` one), and the
        // lines are never resized.
        unsafe { self.lines.get_unchecked(b) }
    }

    #[inline(always)]
    pub(super) fn get(&self, key: K, h: u32) -> Option<NextHop> {
        let mut b = self.home(h);
        loop {
            let (hop, room) = self.line(b).find(key);
            if hop != NO_ROUTE {
                return Some(hop);
            }
            if room {
                return None;
            }
            b = (b + 1) & self.line_mask as usize;
        }
    }

    /// The address of hash `h`'s home line.
    #[inline(always)]
    pub(super) fn line_addr(&self, h: u32) -> usize {
        self.line_ptr(self.home(h))
    }

    /// The address of line `b` (not read).
    #[inline(always)]
    pub(super) fn line_ptr(&self, b: usize) -> usize {
        self.lines.as_ptr().wrapping_add(b) as usize
    }

    #[inline(always)]
    pub(super) fn prefetch(&self, h: u32) {
        prefetch(self.line_addr(h) as *const u8);
    }

    /// Whether `key` is present, and the lines its probe reads.
    pub(super) fn probe_lines(&self, key: K, h: u32) -> (bool, u32) {
        let mut b = self.home(h);
        let mut lines = 1;
        loop {
            let (hop, room) = self.line(b).find(key);
            if hop != NO_ROUTE {
                return (true, lines);
            }
            if room {
                return (false, lines);
            }
            b = (b + 1) & self.line_mask as usize;
            lines += 1;
        }
    }

    /// `Ok((line, slot))` of `key`, or `Err((line, slot))`: the first empty
    /// slot of the line where its probe ends, where an insert puts it.
    #[allow(clippy::type_complexity)]
    pub(super) fn find(&self, key: K, h: u32) -> Result<(usize, usize), (usize, usize)> {
        let mut b = self.home(h);
        loop {
            let l = self.line(b);
            let mut room = None;
            for j in 0..K::Line::LEN {
                if l.hop(j) == NO_ROUTE {
                    room = room.or(Some(j));
                } else if l.key(j) == key {
                    return Ok((b, j));
                }
            }
            if let Some(j) = room {
                return Err((b, j));
            }
            b = (b + 1) & self.line_mask as usize;
        }
    }

    /// Slots in all.
    pub(super) fn slots(&self) -> usize {
        self.lines.len() * K::Line::LEN
    }

    /// Insert or replace.
    pub(super) fn insert(&mut self, key: K, nh: NextHop, h: u32, hash: &impl Fn(K) -> u32) {
        debug_assert_ne!(nh, NO_ROUTE);
        match self.find(key, h) {
            Ok((b, j)) => self.lines[b].set_hop(j, nh),
            Err((b, j)) => {
                self.lines[b].set(j, key, nh);
                self.len += 1;
                let (num, den) = K::Line::MAX_LOAD;
                if self.len * den > self.slots() * num {
                    self.grow(hash);
                }
            }
        }
    }

    pub(super) fn grow(&mut self, hash: &impl Fn(K) -> u32) {
        let mut bigger =
            HashTable::with_capacity(self.slots() * 2 * K::Line::MAX_LOAD.0 / K::Line::MAX_LOAD.1);
        for l in self.lines.iter() {
            for j in 0..K::Line::LEN {
                if l.hop(j) != NO_ROUTE {
                    let key = l.key(j);
                    if let Err((b, k)) = bigger.find(key, hash(key)) {
                        bigger.lines[b].set(k, key, l.hop(j));
                        bigger.len += 1;
                    }
                }
            }
        }
        *self = bigger;
    }

    pub(super) fn remove(&mut self, key: K, h: u32, hash: &impl Fn(K) -> u32) -> bool {
        let Ok((mut hb, mut hj)) = self.find(key, h) else {
            return false;
        };
        self.len -= 1;
        self.lines[hb].set_hop(hj, NO_ROUTE);
        // A key whose probe passed the hole's line (its home before that
        // line, its own line after it) needs that line full: move one such
        // key into the hole, which moves the hole to its line; stop at a line
        // that had room, since no probe passes it.
        let lm = self.line_mask as usize;
        let mut b = hb;
        loop {
            b = (b + 1) & lm;
            if b == hb {
                return true;
            }
            let l = *self.line(b);
            let mut had_room = false;
            let mut mover = None;
            for j in 0..K::Line::LEN {
                if l.hop(j) == NO_ROUTE {
                    had_room = true;
                } else if mover.is_none() {
                    // Home cyclically in (hb, b]: its probe never read hb.
                    let home = self.home(hash(l.key(j)));
                    if b.wrapping_sub(home) & lm >= b.wrapping_sub(hb) & lm {
                        mover = Some(j);
                    }
                }
            }
            if let Some(j) = mover {
                self.lines[hb].set(hj, l.key(j), l.hop(j));
                self.lines[b].set_hop(j, NO_ROUTE);
                (hb, hj) = (b, j);
            }
            if had_room {
                return true;
            }
        }
    }

    pub(super) fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.lines)
    }
}
