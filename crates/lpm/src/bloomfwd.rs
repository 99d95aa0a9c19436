//! Bloomfwd: per-length-group Bloom filters in front of hash tables, with
//! controlled prefix expansion (paper sections 3.2, 4.1, 4.2).
//!
//! One generic implementation serves IPv4 and IPv6 ([`Address`]):
//!
//! * a **direct array** of `2^d` slots covers every prefix of length
//!   `<= d` (IPv4: `d = 20`, the paper's DLA; IPv6: `d = 16`,
//!   [`V6_DIRECT_BITS`]). Each slot also holds a *group mask*: the groups
//!   that have at least one key under the slot (kept exact by counts on
//!   the control side), so a lookup probes only those groups and an
//!   address with no longer prefix reads one cache line;
//! * **groups** at increasing levels `L1 < L2 < ...` (IPv4: 24 and 32;
//!   IPv6: chosen by [`crate::dpcpe`]). Group `Lj` holds every prefix whose
//!   length lies in `(L(j-1), Lj]`, expanded to length `Lj`; where two
//!   expanded prefixes collide the longer original wins (prefix capture).
//!   A group is a *blocked* Bloom filter (bits only, all `k` bits of a key
//!   in one 64-byte block, so one cache line per query; the counters live
//!   on the control side) plus an open-addressing hash table of
//!   `(key, next hop)`.
//!
//! A lookup reads its direct slot, then probes the groups of the slot's
//! mask from the longest level down; the first group whose filter passes
//! and whose table holds the key answers, else the slot's next hop does.
//! Filters use double hashing `g_i = h1 + i*h2` inside the block `h1`
//! selects; the table is addressed with `h1` again when it uses the
//! filter's hash kind.
//!
//! Memory reads per lookup (cache lines): 1 for the direct slot (plus 1
//! sub-mask line in a refined slot and 1 more in a refined sub-slot; see
//! the crate README), plus per probed group 1 filter line and, when the
//! filter passes (true match or false positive), 1 table line (a second
//! only when the home line is full). The floor is 1 (no longer prefix
//! under the slot) or 3 (slot, the matching group's filter and line) when
//! only the matching group is in the mask; the last group a mask names is
//! probed without its filter, and IPv4 batches read a 2-bit summary of the
//! slot (L2) first, so a lane whose slot has only /24 keys under it reads
//! the /24 line alone (see [`Bloomfwd::lookup_batch`]).
//!
//! [`Bloomfwd`] is the hot, read-only part; [`BloomfwdControl`] owns it and
//! keeps the RIB, the counting-filter counters, the per-slot group counts
//! and the expansion map needed to announce and withdraw routes at run
//! time.

use std::any::TypeId;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use hashbrown::HashMap;

use crate::addr::{Address, NextHop, Prefix, NO_ROUTE};
use crate::hash::{pair32, pair32_batch, HashKind, KeyHash, Simd};
use crate::rib::Rib;
use nexthop_mem::HugeBox;

#[cfg(target_arch = "x86_64")]
mod wide;

/// Call `$e` with the const `$k` set to the code of the hash kind `$kind`
/// (one match per call instead of one per hashed key).
macro_rules! with_kind {
    ($kind:expr, $k:ident => $e:expr) => {
        match $kind {
            HashKind::H2 => {
                const $k: u8 = HashKind::H2 as u8;
                $e
            }
            HashKind::Murmur3 => {
                const $k: u8 = HashKind::Murmur3 as u8;
                $e
            }
            HashKind::Knuth => {
                const $k: u8 = HashKind::Knuth as u8;
                $e
            }
            HashKind::Mix64 => {
                const $k: u8 = HashKind::Mix64 as u8;
                $e
            }
        }
    };
}

/// The kind of a code that [`with_kind!`] made (folds at compile time).
#[inline(always)]
const fn kind_of(code: u8) -> HashKind {
    match code {
        0 => HashKind::H2,
        1 => HashKind::Murmur3,
        2 => HashKind::Knuth,
        _ => HashKind::Mix64,
    }
}

/// The first `len` (`<= 63`) bits of `hi`, right-aligned: two shifts, so
/// `len == 0` gives 0 without a test.
#[inline(always)]
fn top_of_hi64(hi: u64, len: u8) -> u64 {
    (hi >> 1) >> (63 - len as u32)
}

/// Map a uniform 32-bit word onto `0..m` (multiply-shift).
#[inline(always)]
fn reduce(x: u32, m: u32) -> u32 {
    ((x as u64 * m as u64) >> 32) as u32
}

#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: (1) prefetch is a hint: it never faults, whatever the
        // address, and reads no memory architecturally.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Key types of groups: addresses that can be hashed, also in batches.
pub trait GroupKey: Address + KeyHash {
    /// The hash-table line of this key type.
    type Line: Line<Key = Self>;

    /// Whether [`Bloomfwd::lookup_batch`] hashes a chunk's keys group by
    /// group ([`GroupKey::pair_lanes`], SIMD for IPv4) or looks addresses
    /// up one at a time (IPv6).
    const BATCH_HASH: bool = true;

    /// Hash a batch of keys (the default is one at a time).
    fn pair_batch(kind: HashKind, keys: &[Self], h1: &mut [u32], h2: &mut [u32], simd: Simd) {
        let _ = simd;
        for ((k, a), b) in keys.iter().zip(h1.iter_mut()).zip(h2.iter_mut()) {
            (*a, *b) = k.pair(kind);
        }
    }

    /// Hash at least the keys of the lanes set in `lanes` (bit `i` for
    /// `keys[i]`; lanes beyond the slices are ignored). The default hashes
    /// exactly those lanes, one at a time.
    #[inline]
    fn pair_lanes(
        kind: HashKind,
        keys: &[Self],
        h1: &mut [u32],
        h2: &mut [u32],
        lanes: u64,
        simd: Simd,
    ) {
        let _ = simd;
        let mut p = lanes;
        while p != 0 {
            let i = p.trailing_zeros() as usize;
            p &= p - 1;
            if let (Some(k), Some(a), Some(b)) = (keys.get(i), h1.get_mut(i), h2.get_mut(i)) {
                (*a, *b) = k.pair(kind);
            }
        }
    }
}

impl GroupKey for u32 {
    type Line = Line4;

    fn pair_batch(kind: HashKind, keys: &[u32], h1: &mut [u32], h2: &mut [u32], simd: Simd) {
        pair32_batch(kind, keys, h1, h2, simd);
    }

    /// Few lanes: one at a time; otherwise every lane with SIMD (cheaper
    /// than picking lanes out).
    #[inline]
    fn pair_lanes(
        kind: HashKind,
        keys: &[u32],
        h1: &mut [u32],
        h2: &mut [u32],
        lanes: u64,
        simd: Simd,
    ) {
        if lanes.count_ones() <= 4 || simd == Simd::Scalar {
            let mut p = lanes;
            while p != 0 {
                let i = p.trailing_zeros() as usize;
                p &= p - 1;
                if let (Some(k), Some(a), Some(b)) = (keys.get(i), h1.get_mut(i), h2.get_mut(i)) {
                    (*a, *b) = pair32(kind, *k);
                }
            }
        } else {
            pair32_batch(kind, keys, h1, h2, simd);
        }
    }
}

impl GroupKey for u128 {
    type Line = Line6;

    const BATCH_HASH: bool = false;
}

// ---------------------------------------------------------------- filter

/// Bits per filter block: one 64-byte cache line.
const BLOCK_BITS: u32 = 512;

/// One cache line of filter bits.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Block([u64; 8]);

const _: () = assert!(std::mem::size_of::<Block>() == 64);

/// The bit vector of a (counting) Bloom filter: the part lookups read.
///
/// The filter is *blocked*: `h1` picks one 64-byte block and all `k` bits
/// of a key lie inside it, at `(h1 + i*h2) mod 512` (double hashing within
/// the block; `h2` is odd, so the `k <= 16` positions are distinct). A
/// query therefore reads one cache line whatever `k` is.
#[derive(Clone, Debug)]
pub struct BloomBits {
    blocks: HugeBox<Block>,
    m: u32,
    k: u8,
}

impl BloomBits {
    /// At least `m` bits (rounded up to whole blocks), `k` hashes (1..=16).
    fn new(m: u32, k: u8) -> Self {
        let nb = m.div_ceil(BLOCK_BITS).max(1);
        BloomBits {
            blocks: HugeBox::new(nb as usize, Block::default()),
            m: nb * BLOCK_BITS,
            k: k.clamp(1, 16),
        }
    }

    /// Size for `n` keys at false-positive target `f`:
    /// `m = n lg(1/f) / ln 2`, `k = round((m/n) ln 2) = round(lg(1/f))`.
    fn sized(n: usize, f: f64) -> Self {
        let lg = (1.0 / f).log2();
        let m = ((n.max(1) as f64) * lg / std::f64::consts::LN_2).ceil();
        let k = lg.round().clamp(1.0, 16.0) as u8;
        BloomBits::new(m.min(u32::MAX as f64 / 2.0) as u32, k)
    }

    /// The block of a key.
    #[inline(always)]
    fn block(&self, h1: u32) -> u32 {
        reduce(h1, self.m / BLOCK_BITS)
    }

    /// Global index of bit `i` of a key.
    #[inline(always)]
    fn index(&self, h1: u32, h2: u32, i: u8) -> u32 {
        self.block(h1) * BLOCK_BITS
            + (h1.wrapping_add((i as u32).wrapping_mul(h2)) & (BLOCK_BITS - 1))
    }

    /// Whether all `k` bits of the key are set (reads one cache line).
    #[inline(always)]
    pub fn contains(&self, h1: u32, h2: u32) -> bool {
        let Some(b) = self.blocks.get(self.block(h1) as usize) else {
            return false;
        };
        // Stop at the first clear bit: a key not in the set (most tests:
        // a lookup probes the longer groups of its mask first) reads about
        // two bits instead of `k` (7 at IPv6's 1% target). Bit `p mod 512`
        // is bit `p mod 64` of word `(p / 64) mod 8` (the shift takes its
        // count mod 64, as x86's does).
        let mut p = h1;
        let mut left = self.k;
        while left != 0 {
            if b.0[((p >> 6) & 7) as usize].wrapping_shr(p) & 1 == 0 {
                return false;
            }
            p = p.wrapping_add(h2);
            left -= 1;
        }
        true
    }

    /// [`Self::contains`] with the `k <= 8` bits tested at once, branch
    /// free: the bit positions `h1 + i*h2` in eight 64-bit lanes, each
    /// lane's word of the block picked by a permute and shifted down to
    /// its bit. Same answer as `contains` (tested); `k > 8` is not
    /// handled.
    ///
    /// # Safety
    /// The CPU must support avx512f (its callers are compiled for it, so
    /// this inlines into them).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn contains_avx512(&self, h1: u32, h2: u32) -> bool {
        use std::arch::x86_64::*;
        let Some(b) = self.blocks.get(self.block(h1) as usize) else {
            return false;
        };
        // SAFETY: (1) avx512f: the caller's contract. (2) `b` is a
        // 64-byte-aligned `Block` of 64 bytes (`repr(C, align(64))`), the
        // one read `_mm512_load_si512` does.
        unsafe {
            let words = _mm512_load_si512(b.0.as_ptr() as *const __m512i);
            let i = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
            let pos = _mm512_add_epi64(
                _mm512_set1_epi64(h1 as i64),
                _mm512_mul_epu32(i, _mm512_set1_epi64(h2 as i64)),
            );
            // The permute reads the low 3 bits of each index: (pos / 64) mod 8.
            let w = _mm512_permutexvar_epi64(_mm512_srli_epi64::<6>(pos), words);
            let bit = _mm512_srlv_epi64(w, _mm512_and_si512(pos, _mm512_set1_epi64(63)));
            let set = _mm512_test_epi64_mask(bit, _mm512_set1_epi64(1));
            let want = (1u32 << self.k.min(8)) - 1;
            set as u32 & want == want
        }
    }

    #[inline(always)]
    fn prefetch(&self, h1: u32) {
        prefetch(self.block_addr(h1) as *const u8);
    }

    /// The address of the block of a key.
    #[inline(always)]
    fn block_addr(&self, h1: u32) -> usize {
        self.blocks.as_ptr().wrapping_add(self.block(h1) as usize) as usize
    }

    fn set(&mut self, b: u32, v: bool) {
        let w = &mut self.blocks[(b / BLOCK_BITS) as usize].0[((b % BLOCK_BITS) >> 6) as usize];
        if v {
            *w |= 1 << (b & 63);
        } else {
            *w &= !(1 << (b & 63));
        }
    }

    /// Bits in the vector.
    pub fn bits(&self) -> u32 {
        self.m
    }
    /// Hash functions per key.
    pub fn hashes(&self) -> u8 {
        self.k
    }
    /// Bytes of the vector.
    fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.blocks)
    }
}

// ---------------------------------------------------------------- table

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

/// `if c { a } else { b }` without a branch: `c` depends on the data a
/// lookup reads, so a branch on it would mispredict (a plain `if`, or even
/// an and/or of masks, LLVM may turn into one).
#[inline(always)]
fn select(c: bool, a: u32, b: u32) -> u32 {
    std::hint::select_unpredictable(c, a, b)
}

/// [`select`] on addresses.
#[inline(always)]
fn select_addr(c: bool, a: usize, b: usize) -> usize {
    std::hint::select_unpredictable(c, a, b)
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
struct HashTable<K: GroupKey> {
    lines: HugeBox<K::Line>,
    /// Lines minus one (a power of two minus one).
    line_mask: u32,
    len: usize,
}

impl<K: GroupKey> HashTable<K> {
    fn with_capacity(n: usize) -> Self {
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
    fn home(&self, h: u32) -> usize {
        (h & self.line_mask) as usize
    }

    /// Line `b` (`b <= line_mask`).
    #[inline(always)]
    fn line(&self, b: usize) -> &K::Line {
        debug_assert!(b <= self.line_mask as usize);
        // SAFETY: `b <= line_mask` (every caller masks with it), and
        // `lines.len() == line_mask + 1`: both are set together, from one
        // power of two, by `with_capacity`, the only constructor (a grow
        // replaces the whole table with a new `with_capacity` one), and the
        // lines are never resized.
        unsafe { self.lines.get_unchecked(b) }
    }

    #[inline(always)]
    fn get(&self, key: K, h: u32) -> Option<NextHop> {
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
    fn line_addr(&self, h: u32) -> usize {
        self.line_ptr(self.home(h))
    }

    /// The address of line `b` (not read).
    #[inline(always)]
    fn line_ptr(&self, b: usize) -> usize {
        self.lines.as_ptr().wrapping_add(b) as usize
    }

    #[inline(always)]
    fn prefetch(&self, h: u32) {
        prefetch(self.line_addr(h) as *const u8);
    }

    /// Whether `key` is present, and the lines its probe reads.
    fn probe_lines(&self, key: K, h: u32) -> (bool, u32) {
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
    fn find(&self, key: K, h: u32) -> Result<(usize, usize), (usize, usize)> {
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
    fn slots(&self) -> usize {
        self.lines.len() * K::Line::LEN
    }

    /// Insert or replace.
    fn insert(&mut self, key: K, nh: NextHop, h: u32, hash: &impl Fn(K) -> u32) {
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

    fn grow(&mut self, hash: &impl Fn(K) -> u32) {
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

    fn remove(&mut self, key: K, h: u32, hash: &impl Fn(K) -> u32) -> bool {
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

    fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.lines)
    }
}

// ---------------------------------------------------------------- config

/// Direct-array bits of the default IPv6 configuration: `2^16` slots of
/// 8 bytes (512 KiB, cache-resident), prefixes up to /16 and group masks
/// at /16 granularity.
pub const V6_DIRECT_BITS: u8 = 16;

/// Distinct prefixes per length (`counts[len]`).
pub fn length_counts<A: Address>(routes: &[(Prefix<A>, NextHop)]) -> Vec<u64> {
    let mut counts = vec![0u64; A::BITS as usize + 1];
    let mut seen = hashbrown::HashSet::new();
    for &(p, _) in routes {
        if seen.insert(p) {
            counts[p.len() as usize] += 1;
        }
    }
    counts
}

/// Validated Bloomfwd configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Prefixes of length `<= direct_bits` go to a direct array of
    /// `2^direct_bits` next hops (at most 24).
    pub direct_bits: u8,
    /// Group levels, strictly increasing, each in `direct_bits+1 ..= BITS`.
    /// Prefixes longer than the last level get a level of their own.
    pub levels: Vec<u8>,
    /// Target false-positive rate of every filter, in `(0, 1)`; each filter
    /// is sized for its own key count (asymmetric filters).
    pub fpr: f64,
    /// Hash of the filters.
    pub filter_hash: HashKind,
    /// Hash of the tables; when equal to `filter_hash` the filter's `h1`
    /// addresses the table (hash reuse).
    pub table_hash: HashKind,
    /// A prefix whose expansion into its group would exceed `2^this` keys
    /// gets a group (level) of its own instead (and the table is rebuilt).
    pub max_expansion_bits: u8,
}

/// A configuration that cannot work.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `direct_bits` above 24.
    #[error("direct array of 2^{0} entries is too large (at most 2^24)")]
    DirectTooLarge(u8),
    /// Levels not strictly increasing, or outside `direct_bits+1 ..= BITS`.
    #[error("group levels {levels:?} must be strictly increasing and within {lo}..={hi}")]
    BadLevels {
        /// As given.
        levels: Vec<u8>,
        /// Smallest allowed.
        lo: u8,
        /// Largest allowed.
        hi: u8,
    },
    /// FPR outside `(0, 1)`.
    #[error("false-positive target {0} is not in (0, 1)")]
    BadFpr(f64),
    /// `max_expansion_bits` above 24.
    #[error("max expansion 2^{0} is too large (at most 2^24)")]
    ExpansionTooLarge(u8),
}

impl Config {
    /// The paper's IPv4 layout: direct array for `<= /20`, groups at 24 and
    /// 32, H2 in both stages, 30% false-positive target (section 6.2).
    pub fn ipv4() -> Self {
        Config {
            direct_bits: 20,
            levels: vec![24, 32],
            fpr: 0.3,
            filter_hash: HashKind::H2,
            table_hash: HashKind::H2,
            max_expansion_bits: 16,
        }
    }

    /// IPv6 with the given levels (see [`crate::dpcpe`]): a direct array of
    /// `2^V6_DIRECT_BITS` slots for the short prefixes (its group masks
    /// send most addresses nowhere else), Mix64 in both stages (cheaper
    /// than Murmur3, the paper's choice), 1% false-positive target (the
    /// IPv6 structure is small and cache-resident: filters of 9.6 instead
    /// of 2.5 bits per key cost ~40 KB and save the bucket probes of most
    /// false positives; the paper's 30% suits its memory budget). Levels
    /// must lie above [`V6_DIRECT_BITS`].
    pub fn ipv6(levels: Vec<u8>) -> Self {
        Config {
            direct_bits: V6_DIRECT_BITS,
            levels,
            fpr: 0.01,
            filter_hash: HashKind::Mix64,
            table_hash: HashKind::Mix64,
            max_expansion_bits: 16,
        }
    }

    /// IPv6 with levels chosen by DPCPE above the direct array for the
    /// prefix-length counts of `routes` with at most `n` levels
    /// ([`crate::dpcpe::choose_levels`]); the default configuration's
    /// levels when there is nothing to expand.
    pub fn ipv6_dpcpe<A: Address>(routes: &[(Prefix<A>, NextHop)], n: usize) -> Self {
        let levels = crate::dpcpe::choose_levels(&length_counts(routes), V6_DIRECT_BITS, n)
            .map(|p| p.levels)
            .unwrap_or_else(|| vec![32, 48, 64, A::BITS]);
        Config::ipv6(levels)
    }

    /// Check the configuration for addresses of `bits` bits.
    pub fn validate(&self, bits: u8) -> Result<(), ConfigError> {
        if self.direct_bits > 24 || self.direct_bits > bits {
            return Err(ConfigError::DirectTooLarge(self.direct_bits));
        }
        let ok = self.levels.windows(2).all(|w| w[0] < w[1])
            && self
                .levels
                .iter()
                .all(|&l| l > self.direct_bits && l <= bits);
        if !ok {
            return Err(ConfigError::BadLevels {
                levels: self.levels.clone(),
                lo: self.direct_bits + 1,
                hi: bits,
            });
        }
        if !(self.fpr > 0.0 && self.fpr < 1.0) {
            return Err(ConfigError::BadFpr(self.fpr));
        }
        if self.max_expansion_bits > 24 {
            return Err(ConfigError::ExpansionTooLarge(self.max_expansion_bits));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- hot part

/// One group as lookups see it.
#[derive(Clone, Debug)]
struct Group<A: GroupKey> {
    level: u8,
    filter: BloomBits,
    table: HashTable<A>,
}

/// One direct-array slot: the next hop of the longest prefix of length
/// `<= direct_bits` that covers the slot, and the groups that hold at least
/// one key under the slot (bit `min(j, 30)` for group `j`; groups from 30
/// on share bit 30). A lookup probes only the groups of its slot's mask,
/// so an address under which no longer prefix exists reads one line.
///
/// A *refined* slot (bit 31, [`FINE`], set; the slot's keys named at least
/// [`FINE_MIN_GROUPS`] groups when the table was built) holds instead the
/// index `i` of its block of `2^fine_bits` sub-masks in `Bloomfwd::fine`:
/// sub-mask `sub` names the groups with a key under the slot whose next
/// `fine_bits` address bits are `sub` (IPv6: /24 granularity under a /16
/// slot), so dense slots such as 2001::/16 probe few groups. A sub-mask
/// that named at least `FINE_MIN_GROUPS` groups at build time is refined
/// once more (bit 31 set): it holds the index of its block of
/// `2^fine2_bits` sub-sub-masks in `Bloomfwd::fine2` (IPv6: /32
/// granularity under a /24 sub-slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(8))]
struct Direct {
    next_hop: NextHop,
    groups: u32,
}

const _: () = assert!(std::mem::size_of::<Direct>() == 8);

/// The mask bit of group `j`.
#[inline(always)]
fn group_bit(j: usize) -> u32 {
    1 << j.min(30)
}

/// The longest group `j < below` that `mask` names (groups from 30 on
/// share bit 30), so a lookup visits only its mask's groups instead of
/// testing every group's bit.
#[inline(always)]
fn prev_group(mask: u32, below: usize) -> Option<usize> {
    if below > 30 && mask & (1 << 30) != 0 {
        return Some(below - 1);
    }
    let m = mask & ((1u32 << below.min(30)) - 1);
    (m != 0).then(|| 31 - m.leading_zeros() as usize)
}

/// Whether group `j` is the last one `mask` names: the last a lookup
/// probes before its direct slot. Its filter is skipped when the table
/// hash reuses the filter hash: the mask, exact per direct slot, already
/// says a key lies under the slot, so the filter would mostly pass and
/// its test (all `k` bits for a member) and line cost more than the
/// bucket probe it can save; the bucket line is read either way. (Groups
/// from 30 on share a bit, so several of them can count as last; skipping
/// a filter never changes an answer, only which lines are read.)
#[inline(always)]
fn last_named(mask: u32, j: usize) -> bool {
    mask & (group_bit(j) - 1) == 0
}

/// Flag of a refined direct slot (see [`Direct`]).
const FINE: u32 = 1 << 31;

/// Most address bits below the direct slot a refined slot splits on.
const MAX_FINE_BITS: u8 = 8;

/// A slot whose mask names at least this many groups at build time is
/// refined.
const FINE_MIN_GROUPS: u32 = 3;

/// Sub-mask bits of a configuration: `min(MAX_FINE_BITS, L1 - d)`, so
/// every group key lies inside one sub-slot (0: no refinement).
fn fine_bits_for(direct_bits: u8, levels: &[u8]) -> u8 {
    levels
        .first()
        .map_or(0, |&l| l.saturating_sub(direct_bits).min(MAX_FINE_BITS))
}

/// The lookup structure (read-only for lookups; `Sync`, so any number of
/// threads may look up through a shared reference).
#[derive(Clone, Debug)]
pub struct Bloomfwd<A: GroupKey> {
    direct: HugeBox<Direct>,
    direct_bits: u8,
    /// Sub-masks of the refined slots, `2^fine_bits` per slot. A sub-mask
    /// with [`FINE`] set is itself refined: it holds the index of its
    /// block of `2^fine2_bits` sub-sub-masks in `fine2`.
    fine: Box<[u32]>,
    fine_bits: u8,
    /// Sub-sub-masks of the refined sub-slots (IPv6: /32 granularity).
    fine2: Box<[u32]>,
    fine2_bits: u8,
    groups: Vec<Group<A>>,
    /// 2 bits per direct slot ([`SUM_NONE`], [`SUM_FIRST`], [`SUM_MORE`]),
    /// 32 slots per word: 256 KiB for IPv4's 2^20 slots, so it stays in
    /// L2 where the 8 MiB direct array does not. The batch reads it first
    /// to know which line a lane needs: its direct slot, or only the
    /// shortest group's bucket (the direct slot then only on a miss).
    summary: Box<[u64]>,
    filter_hash: HashKind,
    table_hash: HashKind,
    reuse: bool,
    simd: Simd,
    probe: Probe,
    /// [`Self::rounds`] tests the filters of groups whose tables have more
    /// lines than this (see [`Self::set_round_filter_min_bytes`]).
    round_filter_min_lines: u32,
}

/// The order in which [`Bloomfwd::lookup_batch`] reads a lane's memory.
/// Both give the same answers as [`Bloomfwd::lookup`] (tested).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Probe {
    /// Direct slot first; then only the groups its (sub-)mask names,
    /// longest first, each filter then bucket, the last named group's
    /// bucket without its filter (see `last_named`). An address with no
    /// longer prefix under its slot reads one line; a match in its only
    /// named group reads the slot and the bucket.
    Masks,
    /// The paper's order (section 3.2): every group's filter first (all
    /// cached: small), then the buckets of the groups whose filters pass,
    /// longest first; the direct slot only when no table holds the key. A
    /// match in a group reads the filter blocks and the bucket but not the
    /// direct slot, a false positive adds a bucket. Only for tables of at
    /// most [`FILTERS_FIRST_MAX_GROUPS`] groups; more fall back to `Masks`.
    /// Measured slower than `Masks` on IPv4 (see [`Probe::default`]).
    FiltersFirst,
}

/// Most groups [`Probe::FiltersFirst`] handles (IPv4 has 2).
pub const FILTERS_FIRST_MAX_GROUPS: usize = 4;

impl Default for Probe {
    /// [`Probe::Masks`]. On the 2015 IPv4 table filters first reads fewer
    /// memory lines per inside-prefix lookup beyond the cached filters
    /// (0.16 direct + 1.31 table against 1.0 direct + 0.90 table with
    /// masks) yet measured slower on every stream: it hashes and tests both
    /// groups for every address, and a /32 false positive costs a bucket
    /// miss. So it is an option, not the default.
    fn default() -> Probe {
        Probe::Masks
    }
}

/// Memory one lookup reads beyond its direct slot ([`Bloomfwd::probe_cost`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeCost {
    /// Summary lines read (IPv4 batches: 1, the 2-bit summary of the
    /// direct slot, 256 KiB and L2-resident; 0 where it is not used).
    pub summary: u32,
    /// Direct-slot lines read (0 when [`Probe::FiltersFirst`] finds the
    /// key in a table).
    pub direct: u32,
    /// Sub-mask lines read (0 to 2: a refined slot, then a refined
    /// sub-slot).
    pub fine: u32,
    /// Groups probed: their filter tested, or, for the last group the mask
    /// names, their bucket read without it.
    pub groups: u32,
    /// Filter blocks (one cache line each) tested.
    pub filters: u32,
    /// Distinct table cache lines read (filters that passed).
    pub table_lines: u32,
}

impl ProbeCost {
    /// Cache lines in all.
    pub fn lines(&self) -> u32 {
        self.summary + self.direct + self.fine + self.filters + self.table_lines
    }
}

/// Lanes per batch step of [`Bloomfwd::lookup_batch`].
const CHUNK: usize = 32;

/// What [`Bloomfwd::batch_summary`]'s look-ahead computes for one chunk.
/// Lanes past a short chunk keep earlier (valid) values, so the lane loop
/// prefetches without a bound check: at worst a line again.
struct Ahead<A> {
    /// Direct-slot index of each lane.
    slots: [usize; CHUNK],
    /// Summary state of each lane's direct slot.
    states: [u8; CHUNK],
    /// The line each lane needs first: its `g0` line or its direct slot.
    first: [usize; CHUNK],
    /// Shortest-group keys and their table hashes.
    keys: [A; CHUNK],
    hashes: [u32; CHUNK],
}

impl<A: Default + Copy> Ahead<A> {
    fn new() -> Self {
        Ahead {
            slots: [0; CHUNK],
            states: [0; CHUNK],
            first: [0; CHUNK],
            keys: [A::default(); CHUNK],
            hashes: [0; CHUNK],
        }
    }
}

/// Per-chunk scratch of [`Bloomfwd::lookup_batch`]'s group-by-group pass.
struct Scratch<A> {
    keys: [A; CHUNK],
    h1: [u32; CHUNK],
    h2: [u32; CHUNK],
    th: [u32; CHUNK],
    masks: [u32; CHUNK],
    /// Lanes of the chunk per mask bit (all zero between chunks).
    by_bit: [u64; 32],
}

impl<A: Default + Copy> Scratch<A> {
    fn new() -> Self {
        Scratch {
            keys: [A::default(); CHUNK],
            h1: [0; CHUNK],
            h2: [0; CHUNK],
            th: [0; CHUNK],
            masks: [0; CHUNK],
            by_bit: [0; 32],
        }
    }
}

/// Lanes per chunk of [`Bloomfwd::rounds`].
const ROUND_CHUNK: usize = 64;

/// [`Bloomfwd::rounds`] tests a group's filter only when its table has
/// more lines than this (4 MiB; [`Bloomfwd::set_round_filter_min_bytes`]
/// changes it): a smaller table stays cached with the
/// rest of the IPv6 structure, a round's prefetch hides its bucket's
/// latency, and comparing a bucket costs fewer instructions than testing
/// the filter and then comparing the bucket when it passes. On the 2015
/// IPv6 table (no group's table above 4 MiB), `lpm_probe v6 inside|zipf
/// 10 0.01 200000`, five alternating rounds each: 36.1 ns per batched
/// lookup (median) against 38.7 with the filters of every group but the
/// last one named (inside), 41.7 against 43.5 (Zipf), session 16.
const ROUND_FILTER_MIN_LINES: u32 = (4 << 20) / 64;

/// Addresses per share of [`Bloomfwd::lookup_parallel`]: 16,384 (256 KiB
/// of IPv6 addresses; 40–250 µs of lookups at 2.5–15 ns each, against a
/// counter increment and an uncontended lock to claim one).
pub const PARALLEL_SHARE: usize = 1 << 14;

/// Addresses per segment of [`Bloomfwd::rounds`].
const ROUND_SEGMENT: usize = 1024;

/// [`Bloomfwd::rounds`] takes a segment in rounds only if at least 1 in
/// this many addresses of the segment before had a group to probe.
const ROUND_MIN_MASKED: usize = 8;

/// Entries of each per-lane array of [`RoundLanes`]: one per lane of a
/// chunk. Lane indices are taken `& (LANES - 1)` where they are read from
/// a list, so the compiler knows them in bounds (no bounds checks).
const LANES: usize = ROUND_CHUNK;

const _: () = assert!(LANES.is_power_of_two() && LANES <= 256);

/// Per-chunk state of [`Bloomfwd::rounds`]: per lane, and lane lists.
struct RoundLanes<A> {
    /// The chunk's addresses, and their next hops so far.
    addrs: [A; LANES],
    res: [NextHop; LANES],
    /// The key, hashes and group of the lane's current probe.
    keys: [A; LANES],
    h1: [u32; LANES],
    h2: [u32; LANES],
    group: [u8; LANES],
    /// The (sub-)mask word, then the groups left to probe.
    masks: [u32; LANES],
    /// The sub-sub-mask index, then the table line index.
    idx: [u32; LANES],
    /// Lane lists: lanes of this round, of the next round, lanes whose
    /// filter is tested, lanes whose bucket is read, lanes going on to the
    /// next line.
    act: [u8; LANES],
    next: [u8; LANES],
    filter: [u8; LANES],
    bucket: [u8; LANES],
    more: [u8; LANES],
}

impl<A: Default + Copy> RoundLanes<A> {
    fn new() -> Self {
        RoundLanes {
            addrs: [A::default(); LANES],
            res: [NO_ROUTE; LANES],
            keys: [A::default(); LANES],
            h1: [0; LANES],
            h2: [0; LANES],
            group: [0; LANES],
            masks: [0; LANES],
            idx: [0; LANES],
            act: [0; LANES],
            next: [0; LANES],
            filter: [0; LANES],
            bucket: [0; LANES],
            more: [0; LANES],
        }
    }
}

/// Append lane `i` to `list` (length `*n`) when `c`, without a branch:
/// the lane is written either way and the length moves only when `c`.
/// A list never holds more lanes than were offered (at most
/// [`ROUND_CHUNK`]), so the write stays inside it.
#[inline(always)]
fn push_if(list: &mut [u8; LANES], n: &mut usize, i: u8, c: bool) {
    list[*n & (LANES - 1)] = i;
    *n += c as usize;
}

/// What a direct slot's summary (2 bits per slot in
/// `Bloomfwd::summary`) says about the groups under it.
const SUM_NONE: u64 = 0;
/// Only the shortest group holds keys under the slot (mask exactly
/// `group_bit(0)`, not refined).
const SUM_FIRST: u64 = 1;
/// Anything else: the slot's mask (or sub-masks) decide.
const SUM_MORE: u64 = 2;

fn summary_state(groups: u32) -> u64 {
    if groups == 0 {
        SUM_NONE
    } else if groups == group_bit(0) {
        SUM_FIRST
    } else {
        SUM_MORE
    }
}

/// Set direct slot `slot`'s summary state from its group word `groups`.
fn set_summary(summary: &mut [u64], slot: usize, groups: u32) {
    let sh = (slot & 31) * 2;
    let w = &mut summary[slot >> 5];
    *w = (*w & !(3 << sh)) | (summary_state(groups) << sh);
}

/// `x` as IPv4 keys when `A` is `u32`, else `None` (the check is on
/// types, so it folds away once `A` is known).
fn as_u32<A: 'static>(x: &[A]) -> Option<&[u32]> {
    (TypeId::of::<A>() == TypeId::of::<u32>()).then(|| {
        // SAFETY: (1) `A` is `u32` (same `TypeId`), so this is the slice
        // itself, same pointer, length and lifetime.
        unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<u32>(), x.len()) }
    })
}

/// The table, addresses and next hops as IPv6 ones when `A` is `u128`,
/// else `None` (folds away once `A` is known).
#[allow(clippy::type_complexity)]
fn as_v6<'a, A: GroupKey>(
    t: &'a Bloomfwd<A>,
    addrs: &'a [A],
    out: &'a mut [NextHop],
) -> Option<(&'a Bloomfwd<u128>, &'a [u128], &'a mut [NextHop])> {
    (TypeId::of::<A>() == TypeId::of::<u128>()).then(|| {
        // SAFETY: (1) `A` is `u128` (same `TypeId`), so `Bloomfwd<A>` is
        // `Bloomfwd<u128>` and the slice is a `u128` slice: the same
        // pointers, length and lifetimes.
        unsafe {
            (
                &*(t as *const Bloomfwd<A>).cast::<Bloomfwd<u128>>(),
                std::slice::from_raw_parts(addrs.as_ptr().cast::<u128>(), addrs.len()),
                out,
            )
        }
    })
}

/// [`as_u32`] for a chunk array.
fn as_u32_mut<A: 'static>(x: &mut [A; CHUNK]) -> Option<&mut [u32; CHUNK]> {
    (TypeId::of::<A>() == TypeId::of::<u32>()).then(|| {
        // SAFETY: (1) `A` is `u32` (same `TypeId`): the same array, borrowed
        // mutably for the same lifetime.
        unsafe { &mut *(x as *mut [A; CHUNK]).cast::<[u32; CHUNK]>() }
    })
}

/// 64-bit words of the summary of `2^d` direct slots.
fn summary_words(d: u8) -> usize {
    (1usize << d).div_ceil(32)
}

impl<A: GroupKey> Bloomfwd<A> {
    #[inline(always)]
    fn table_hash_of(&self, key: A, h1: u32) -> u32 {
        if self.reuse {
            h1
        } else {
            key.pair(self.table_hash).0
        }
    }

    /// Whether [`Self::lookup_batch`] reads group `g`'s bucket without
    /// testing its filter (`last`: no shorter group is named): the last
    /// group a mask names (see `last_named`), and, for keys without batched
    /// hashing (IPv6, [`Self::rounds`]), a group whose table is at most
    /// `round_filter_min_lines` lines. Only where the table hash reuses
    /// the filter's `h1`. No branch (the rounds call it for every probe).
    #[inline(always)]
    fn skips_filter(&self, g: &Group<A>, last: bool) -> bool {
        let small = !A::BATCH_HASH & (g.table.line_mask < self.round_filter_min_lines);
        self.reuse & (last | small)
    }

    /// The direct slot of an address: its first `direct_bits` (<= 24)
    /// bits (IPv6: from the first 64, two 64-bit shifts instead of a
    /// 128-bit one; IPv4's own `top` is one shift).
    #[inline(always)]
    fn slot(&self, a: A) -> usize {
        if A::BITS <= 32 {
            a.top(self.direct_bits).to_u128() as usize
        } else {
            top_of_hi64(a.hi64(), self.direct_bits) as usize
        }
    }

    /// The summary state of direct slot `slot` (`slot < 2^direct_bits`).
    #[inline(always)]
    fn summary_of(&self, slot: usize) -> u64 {
        (self.summary[slot >> 5] >> ((slot & 31) * 2)) & 3
    }

    /// The group mask that applies to `a` given its direct slot's `groups`
    /// word: the word itself, or the sub-mask of a refined slot.
    #[inline(always)]
    fn mask_of(&self, a: A, groups: u32) -> u32 {
        if groups & FINE == 0 {
            return groups;
        }
        self.refined_mask(a, self.fine_index(a, groups))
    }

    /// The mask of `a` under a refined slot, from its sub-mask at index `f`
    /// of `fine` (and its sub-sub-mask when the sub-slot is refined too).
    #[inline(always)]
    fn refined_mask(&self, a: A, f: usize) -> u32 {
        // Always present (built together); every group is a safe answer.
        let m = self.fine.get(f).copied().unwrap_or(!FINE);
        self.sub_mask(a, m)
    }

    /// A sub-mask, or the sub-sub-mask of `a` when it is refined.
    ///
    /// The sub-sub-mask is read whether the sub-slot is refined or not
    /// (the index clamped into `fine2`) and picked by a mask: about 2 in 3
    /// IPv6 inside-prefix lookups need it, a branch on it mispredicted
    /// often (valgrind's branch simulation put 0.4 mispredictions per
    /// lookup on it), and the read is one more line of a small array
    /// (`lpm_probe v6 inside 20 0.01 200000`, three alternating rounds:
    /// 34.8-35.1 ns per batched lookup against 36.3-37.9, session 15).
    #[inline(always)]
    fn sub_mask(&self, a: A, m: u32) -> u32 {
        let f2 = self
            .fine2_index(a, m)
            .min(self.fine2.len().saturating_sub(1));
        // Present for every refined sub-slot (built together); every group
        // is a safe answer.
        let m2 = self.fine2.get(f2).copied().unwrap_or(!FINE);
        select(m & FINE != 0, m2, m)
    }

    /// The index in `fine2` of `a`'s sub-sub-mask under a refined sub-slot
    /// whose word is `m`.
    #[inline(always)]
    fn fine2_index(&self, a: A, m: u32) -> usize {
        let fb2 = self.fine2_bits;
        let depth = self.direct_bits + self.fine_bits + fb2;
        let sub = (top_of_hi64(a.hi64(), depth) as usize) & ((1usize << fb2) - 1);
        (((m & !FINE) as usize) << fb2) | sub
    }

    /// The index in `fine` of `a`'s sub-mask under a refined slot whose
    /// word is `groups`.
    #[inline(always)]
    fn fine_index(&self, a: A, groups: u32) -> usize {
        let fb = self.fine_bits;
        let sub = (top_of_hi64(a.hi64(), self.direct_bits + fb) as usize) & ((1usize << fb) - 1);
        (((groups & !FINE) as usize) << fb) | sub
    }

    /// Longest-prefix match of one address.
    #[inline]
    pub fn lookup(&self, a: A) -> Option<NextHop> {
        let nh = with_kind!(self.filter_hash, K => self.next_hop::<K>(a));
        (nh != NO_ROUTE).then_some(nh)
    }

    /// [`Self::lookup`] as a raw next hop ([`NO_ROUTE`] for none): the
    /// direct slot, then the groups its mask names. `K` is the filter
    /// hash's code ([`HashKind::from_code`]), a constant, so each probe
    /// calls that hash inline instead of dispatching on the kind.
    #[inline(always)]
    fn next_hop<const K: u8>(&self, a: A) -> NextHop {
        self.next_hop_from::<K>(a, self.direct[self.slot(a)])
    }

    /// [`Self::next_hop`] once the direct slot `d` is read.
    #[inline(always)]
    fn next_hop_from<const K: u8>(&self, a: A, d: Direct) -> NextHop {
        let mask = self.mask_of(a, d.groups);
        if mask != 0 {
            if let Some(nh) = self.probe_groups::<K>(a, mask) {
                return nh;
            }
        }
        d.next_hop
    }

    /// The match of `a` in the groups `mask` names, longest first: with at
    /// most 31 groups each has a bit of its own, so the walk takes the
    /// mask's highest set bit and clears it, and the last named group is
    /// the one that leaves no bit set.
    #[inline(always)]
    fn probe_groups<const K: u8>(&self, a: A, mask: u32) -> Option<NextHop> {
        let n = self.groups.len();
        if n > 31 {
            return self.probe_shared_bits::<K>(a, mask);
        }
        self.probe_rest::<K>(a, mask & !(u32::MAX << n))
    }

    /// [`Self::probe_groups`] over a mask that names only existing groups
    /// (at most 31).
    #[inline(always)]
    fn probe_rest<const K: u8>(&self, a: A, mut m: u32) -> Option<NextHop> {
        while m != 0 {
            let j = 31 - m.leading_zeros();
            m ^= 1 << j;
            let g = self.groups.get(j as usize)?;
            let key = a.top(g.level);
            let (h1, h2) = key.pair(kind_of(K));
            if let Some(r) = self.probe_one(g, key, h1, h2, m == 0) {
                return r;
            }
        }
        None
    }

    /// Probe one group for `key` (hashes `h1`, `h2`); `last`: no shorter
    /// group is named. `Some(answer)` ends the lookup (a hit, or a miss in
    /// the last group probed without its filter), `None` goes on to the
    /// next group.
    #[inline(always)]
    fn probe_one(
        &self,
        g: &Group<A>,
        key: A,
        h1: u32,
        h2: u32,
        last: bool,
    ) -> Option<Option<NextHop>> {
        if self.reuse && last {
            return Some(g.table.get(key, h1));
        }
        if g.filter.contains(h1, h2) {
            if let Some(nh) = g.table.get(key, self.table_hash_of(key, h1)) {
                return Some(Some(nh));
            }
        }
        None
    }

    /// [`Self::probe_groups`] for more than 31 groups (from 30 on they
    /// share bit 30).
    #[cold]
    #[inline(never)]
    fn probe_shared_bits<const K: u8>(&self, a: A, mask: u32) -> Option<NextHop> {
        let mut below = self.groups.len();
        while let Some(j) = prev_group(mask, below) {
            below = j;
            let g = self.groups.get(j)?;
            let key = a.top(g.level);
            let (h1, h2) = key.pair(kind_of(K));
            // Several groups can count as last here (they share a bit), so
            // a miss in one goes on to the next.
            if let Some(Some(nh)) = self.probe_one(g, key, h1, h2, last_named(mask, j)) {
                return Some(nh);
            }
        }
        None
    }

    /// Look up `addrs` into `out` (same length; [`NO_ROUTE`] where no route
    /// matches); returns the number of hits.
    ///
    /// Keys with batched hashing (IPv4) go in chunks of 32 addresses, each
    /// chunk's lines prefetched while the chunk before is resolved. Where
    /// the table hash reuses the filter hash (the default) a 2-bit summary
    /// per direct slot says, before any line is read, whether a lane needs
    /// its direct slot, only its shortest-group (/24) line, or more
    /// (`batch_summary`); otherwise every lane reads its direct slot
    /// first (`batch_direct`). Lanes whose mask names longer groups
    /// go group by group, longest first, only while unresolved and only
    /// where their mask names the group: hash (SIMD for IPv4 keys),
    /// prefetch the filter blocks, test them, prefetch the table lines of
    /// the lanes that pass, probe; a lane for which the group is the last
    /// its mask names skips the filter. A hit resolves its lane, so shorter
    /// groups are not probed for it. Keys without batched hashing (IPv6) go
    /// in rounds of lane lists without data-dependent branches instead
    /// (`rounds`; with AVX-512, a Mix64 table of at most 16
    /// groups hashes eight probes per instruction, `rounds_wide`; tables
    /// of more than 31 groups: one address at a time, `lookup_each`).
    pub fn lookup_batch(&self, addrs: &[A], out: &mut [NextHop]) -> usize {
        let n = addrs.len().min(out.len());
        let (addrs, out) = (&addrs[..n], &mut out[..n]);
        if self.probe == Probe::FiltersFirst && self.groups.len() <= FILTERS_FIRST_MAX_GROUPS {
            for (ca, co) in addrs.chunks(CHUNK).zip(out.chunks_mut(CHUNK)) {
                self.filters_first_chunk(ca, co);
            }
            return out.iter().filter(|&&v| v != NO_ROUTE).count();
        }
        if !A::BATCH_HASH {
            if self.groups.len() <= 31 {
                #[cfg(target_arch = "x86_64")]
                if self.simd == Simd::Avx512 {
                    if let Some((me, a, o)) =
                        as_v6(self, addrs, out).filter(|(me, ..)| me.wide_ok())
                    {
                        // SAFETY: (1) `wide_ok` checked the CPU features
                        // `rounds_wide` is compiled for.
                        unsafe { me.rounds_wide(a, o) };
                        return out.iter().filter(|&&v| v != NO_ROUTE).count();
                    }
                }
                #[cfg(target_arch = "x86_64")]
                if self.simd == Simd::Avx512
                    && self.groups.iter().all(|g| g.filter.k <= 8)
                    && std::arch::is_x86_feature_detected!("avx512f")
                {
                    // SAFETY: (1) avx512f was detected just above, the only
                    // precondition of the target_feature function.
                    unsafe {
                        with_kind!(self.filter_hash, K => self.rounds_avx512::<K>(addrs, out))
                    };
                    return out.iter().filter(|&&v| v != NO_ROUTE).count();
                }
                with_kind!(self.filter_hash, K => self.rounds::<K, false>(addrs, out));
                return out.iter().filter(|&&v| v != NO_ROUTE).count();
            }
            return self.lookup_each(addrs, out);
        }
        let mut scratch = Scratch::new();
        match self.groups.first().filter(|_| self.reuse) {
            #[cfg(target_arch = "x86_64")]
            Some(g0) if self.vector_look_ahead(g0) => {
                // SAFETY: (1) `vector_look_ahead` checked avx512f.
                unsafe { self.batch_summary_avx512(g0, addrs, out, &mut scratch) }
            }
            Some(g0) => self.batch_summary::<false>(g0, addrs, out, &mut scratch),
            None => self.batch_direct(addrs, out, &mut scratch),
        }
        out.iter().filter(|&&v| v != NO_ROUTE).count()
    }

    /// [`Self::lookup_batch`] for tables whose table hash is not the filter
    /// hash (or without groups): per chunk, the direct slots (prefetched a
    /// chunk ahead, one lane's prefetch per lane processed), then the lanes
    /// whose slot names groups, group by group ([`Self::resolve_rest`]).
    fn batch_direct(&self, addrs: &[A], out: &mut [NextHop], s: &mut Scratch<A>) {
        let n = addrs.len().min(out.len());
        let (mut cur, mut next) = ([0usize; CHUNK], [0usize; CHUNK]);
        for (d, a) in cur.iter_mut().zip(&addrs[..n.min(CHUNK)]) {
            *d = self.slot(*a);
            prefetch(self.direct.as_ptr().wrapping_add(*d));
        }
        let mut start = 0;
        while start < n {
            let end = (start + CHUNK).min(n);
            for (d, a) in next.iter_mut().zip(&addrs[end..(end + CHUNK).min(n)]) {
                *d = self.slot(*a);
            }
            let len = end - start;
            let (ca, co) = (&addrs[start..end], &mut out[start..end]);
            let mut rest = 0u64;
            #[allow(clippy::needless_range_loop)]
            for i in 0..len {
                prefetch(self.direct.as_ptr().wrapping_add(next[i]));
                let d = self.direct[cur[i]];
                co[i] = d.next_hop;
                rest |= ((d.groups != 0) as u64) << i;
            }
            self.resolve_rest(ca, co, rest, &cur, None, s);
            std::mem::swap(&mut cur, &mut next);
            start = end;
        }
    }

    /// [`Self::lookup_batch`] for tables whose table hash reuses the filter
    /// hash (`g0`: the shortest group), in chunks of `CHUNK` lanes. The
    /// look-ahead, one chunk ahead, reads each lane's direct-slot summary
    /// (256 KiB for IPv4, in L2) and hashes its `g0` key (SIMD), and so
    /// knows which line each lane needs before reading any of them:
    /// - `SUM_NONE` (no longer prefix under the slot): the direct slot;
    /// - `SUM_FIRST` (only `g0` keys under it): the `g0` line alone; the
    ///   direct slot is read only when that line misses, prefetched then and
    ///   read a chunk later, so its miss overlaps the next chunk's work;
    /// - `SUM_MORE`: the direct slot, the `g0` line, and the filter block and
    ///   line of the longest group (IPv4: /32), then group by group
    ///   ([`Self::resolve_rest`]) on lines already loaded.
    ///
    /// One prefetch per lane of the current chunk (a burst would stall on the
    /// line-fill buffers). An IPv4 inside-prefix lookup thus reads 1.14
    /// lines besides the L2-resident summary, where the direct slot and the
    /// speculated `g0` line for every lane read 1.91 (2015 table).
    ///
    /// `V`: the look-ahead is [`Self::look_ahead_avx512`] (IPv4 keys, the
    /// batch compiled for avx512f by [`Self::batch_summary_avx512`]).
    #[inline(always)]
    fn batch_summary<const V: bool>(
        &self,
        g0: &Group<A>,
        addrs: &[A],
        out: &mut [NextHop],
        s: &mut Scratch<A>,
    ) {
        let n = addrs.len().min(out.len());
        let (mut cur, mut next) = (Ahead::new(), Ahead::new());
        let first = &addrs[..n.min(CHUNK)];
        self.look_ahead::<V>(first, g0, &mut cur, &mut s.h2);
        for &line in &cur.first[..first.len()] {
            prefetch(line as *const u8);
        }
        // `g0` misses of the last chunk: (output index, direct slot).
        let mut deferred = [(0usize, 0usize); CHUNK];
        let mut nd = 0;
        let mut start = 0;
        while start < n {
            let end = (start + CHUNK).min(n);
            self.look_ahead::<V>(&addrs[end..(end + CHUNK).min(n)], g0, &mut next, &mut s.h2);
            let len = end - start;
            let (ca, co) = (&addrs[start..end], &mut out[start..end]);
            let mut rest = 0u64;
            let mut missed = 0u64;
            // `i < len <= CHUNK` indexes the look-ahead arrays without
            // bounds checks; lanes of `next` past a short last chunk hold
            // earlier, valid lines (at worst a line is fetched again).
            #[allow(clippy::needless_range_loop)]
            for i in 0..len {
                prefetch(next.first[i] as *const u8);
                let st = cur.states[i] as u64;
                if st == SUM_FIRST {
                    match g0.table.get(cur.keys[i], cur.hashes[i]) {
                        Some(nh) => co[i] = nh,
                        None => {
                            prefetch(self.direct.as_ptr().wrapping_add(cur.slots[i]));
                            missed |= 1 << i;
                        }
                    }
                } else {
                    co[i] = self.direct[cur.slots[i]].next_hop;
                    rest |= ((st != SUM_NONE) as u64) << i;
                }
            }
            if rest != 0 {
                self.resolve_rest(ca, co, rest, &cur.slots, Some((&cur.keys, &cur.hashes)), s);
            }
            for &(o, slot) in &deferred[..nd] {
                out[o] = self.direct[slot].next_hop;
            }
            nd = 0;
            while missed != 0 {
                let i = missed.trailing_zeros() as usize;
                missed &= missed - 1;
                deferred[nd] = (start + i, cur.slots[i]);
                nd += 1;
            }
            std::mem::swap(&mut cur, &mut next);
            start = end;
        }
        for &(o, slot) in &deferred[..nd] {
            out[o] = self.direct[slot].next_hop;
        }
    }

    /// [`Self::batch_summary`]'s look-ahead for chunk `ca`: direct slots,
    /// summary states, `g0` keys and table hashes (`h2` is scratch), each
    /// lane's first line (its `g0` line or its direct slot, picked without
    /// a branch), and the extra lines of its `SUM_MORE` lanes, prefetched
    /// here (few lanes).
    #[inline(always)]
    fn look_ahead<const V: bool>(
        &self,
        ca: &[A],
        g0: &Group<A>,
        to: &mut Ahead<A>,
        h2: &mut [u32; CHUNK],
    ) {
        #[cfg(target_arch = "x86_64")]
        if V {
            // SAFETY: (1) `V` is true only inside `batch_summary_avx512`,
            // which runs only where `vector_look_ahead` held.
            if unsafe { self.look_ahead_avx512(ca, g0, to) } {
                return;
            }
        }
        let n = ca.len().min(CHUNK);
        for (i, a) in ca[..n].iter().enumerate() {
            let slot = self.slot(*a);
            to.slots[i] = slot;
            to.states[i] = self.summary_of(slot) as u8;
            to.keys[i] = a.top(g0.level);
        }
        A::pair_batch(
            self.filter_hash,
            &to.keys[..n],
            &mut to.hashes[..n],
            &mut h2[..n],
            self.simd,
        );
        let direct = self.direct.as_ptr() as usize;
        let longest = self.groups.last().filter(|_| self.groups.len() > 1);
        for (i, a) in ca[..n].iter().enumerate() {
            let d = direct + to.slots[i] * std::mem::size_of::<Direct>();
            let b = g0.table.line_addr(to.hashes[i]);
            let st = to.states[i] as u64;
            let pick = ((st == SUM_FIRST) as usize).wrapping_neg();
            to.first[i] = (b & pick) | (d & !pick);
            if st == SUM_MORE {
                g0.table.prefetch(to.hashes[i]);
                if let Some(gl) = longest {
                    let h = a.top(gl.level).pair(self.filter_hash).0;
                    gl.filter.prefetch(h);
                    gl.table.prefetch(h);
                }
            }
        }
    }

    /// Whether IPv4 batches can take [`Self::batch_summary_avx512`]: IPv4
    /// keys, the AVX-512 path chosen and present, a filter hash with a
    /// vector form, and `g0` line offsets that fit 32 bits.
    #[cfg(target_arch = "x86_64")]
    fn vector_look_ahead(&self, g0: &Group<A>) -> bool {
        A::BITS == 32
            && self.simd == Simd::Avx512
            && self.filter_hash != HashKind::Mix64
            && self.direct_bits <= 24
            && (g0.table.line_mask as u64 + 1) * std::mem::size_of::<A::Line>() as u64 <= 1 << 32
            && std::arch::is_x86_feature_detected!("avx512f")
    }

    /// [`Self::batch_summary`] compiled for avx512f, with the look-ahead in
    /// 16-lane vectors ([`Self::look_ahead_avx512`]).
    ///
    /// # Safety
    /// [`Self::vector_look_ahead`] must hold (it checks avx512f).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn batch_summary_avx512(
        &self,
        g0: &Group<A>,
        addrs: &[A],
        out: &mut [NextHop],
        s: &mut Scratch<A>,
    ) {
        self.batch_summary::<true>(g0, addrs, out, s)
    }

    /// [`Self::look_ahead`] for IPv4 keys, 16 lanes a vector: the slots
    /// (one shift), the summary states (one gather of 32-bit summary words,
    /// a variable shift), the `g0` keys (a shift) and their `h1`, and each
    /// lane's first line picked by a mask blend; scalar work is left only
    /// for the `SUM_MORE` lanes' extra prefetches. The same values as the
    /// scalar look-ahead (the differential tests run both). Returns `false`,
    /// having written nothing, where `A` is not `u32` or the hash has no
    /// vector form.
    ///
    /// # Safety
    /// [`Self::vector_look_ahead`] must hold (it checks avx512f and that
    /// `g0`'s line offsets fit 32 bits).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn look_ahead_avx512(&self, ca: &[A], g0: &Group<A>, to: &mut Ahead<A>) -> bool {
        use std::arch::x86_64::*;
        let (Some(ca), Some(keys)) = (as_u32(ca), as_u32_mut(&mut to.keys)) else {
            return false;
        };
        let n = ca.len().min(CHUNK);
        let kind = self.filter_hash;
        // SAFETY: (1) avx512f: the caller's contract. (2) `i` is 0 or 16, so
        // every 16-lane store at `i` ends inside its `CHUNK`-lane (32)
        // `Ahead` array; lanes `n..` hold values computed from address 0
        // (a valid slot and line; the lane loop may prefetch them). (3) The
        // load reads lanes `i .. n` of `ca` (`n <= ca.len()`): whole when 16
        // are left, else masked (masked-off lanes are not read, and are 0).
        // (4) The gather reads 32-bit word `slot >> 4` of the summary, whose
        // `summary_words(direct_bits)` 64-bit words hold
        // `2 * ceil(2^d / 32) >= 2^d / 16` such words, and
        // `slot < 2^direct_bits` (also for the zero lanes). (5) Little-endian
        // x86: 32-bit word `w` of the summary holds slots `16w .. 16w + 15`
        // at bits `2 * (slot & 15)`, as `summary_of` reads them from 64-bit
        // words.
        unsafe {
            let slot_shift = _mm_cvtsi32_si128(32 - self.direct_bits as i32);
            let key_shift = _mm_cvtsi32_si128(32 - g0.level.min(32) as i32);
            let line_mask = _mm512_set1_epi32(g0.table.line_mask as i32);
            let direct = _mm512_set1_epi64(self.direct.as_ptr() as i64);
            let lines = _mm512_set1_epi64(g0.table.lines.as_ptr() as i64);
            let summary = self.summary.as_ptr() as *const i32;
            let mut more = 0u64;
            let mut i = 0;
            while i < n {
                let left = n - i;
                let (a, k) = if left >= 16 {
                    let p = ca.as_ptr().add(i) as *const __m512i;
                    (_mm512_loadu_si512(p), u16::MAX)
                } else {
                    let k = (1u16 << left) - 1;
                    (
                        _mm512_maskz_loadu_epi32(k, ca.as_ptr().add(i) as *const i32),
                        k,
                    )
                };
                let slot = _mm512_srl_epi32(a, slot_shift);
                let words = _mm512_i32gather_epi32::<4>(_mm512_srli_epi32::<4>(slot), summary);
                let at = _mm512_slli_epi32::<1>(_mm512_and_si512(slot, _mm512_set1_epi32(15)));
                let st = _mm512_and_si512(_mm512_srlv_epi32(words, at), _mm512_set1_epi32(3));
                let key = _mm512_srl_epi32(a, key_shift);
                let Some(h) = crate::hash::x86::h1_v16(kind, key) else {
                    return false;
                };
                let f = _mm512_cmpeq_epi32_mask(st, _mm512_set1_epi32(SUM_FIRST as i32));
                let m = _mm512_cmpeq_epi32_mask(st, _mm512_set1_epi32(SUM_MORE as i32)) & k;
                more |= (m as u64) << i;
                // A "/24 only" lane's first line is its `g0` line, any other
                // lane's its direct slot: offsets in 32 bits, bases in 64.
                let off = _mm512_mask_blend_epi32(
                    f,
                    _mm512_slli_epi32::<3>(slot),
                    _mm512_slli_epi32::<6>(_mm512_and_si512(h, line_mask)),
                );
                let first_lo = _mm512_add_epi64(
                    _mm512_mask_blend_epi64(f as u8, direct, lines),
                    _mm512_cvtepu32_epi64(_mm512_castsi512_si256(off)),
                );
                let first_hi = _mm512_add_epi64(
                    _mm512_mask_blend_epi64((f >> 8) as u8, direct, lines),
                    _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64::<1>(off)),
                );
                _mm512_storeu_si512(keys.as_mut_ptr().add(i) as *mut __m512i, key);
                _mm512_storeu_si512(to.hashes.as_mut_ptr().add(i) as *mut __m512i, h);
                _mm_storeu_si128(
                    to.states.as_mut_ptr().add(i) as *mut __m128i,
                    _mm512_cvtepi32_epi8(st),
                );
                let slots = to.slots.as_mut_ptr().add(i) as *mut __m512i;
                _mm512_storeu_si512(slots, _mm512_cvtepu32_epi64(_mm512_castsi512_si256(slot)));
                _mm512_storeu_si512(
                    slots.add(1),
                    _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64::<1>(slot)),
                );
                let first = to.first.as_mut_ptr().add(i) as *mut __m512i;
                _mm512_storeu_si512(first, first_lo);
                _mm512_storeu_si512(first.add(1), first_hi);
                i += 16;
            }
            let longest = self.groups.last().filter(|_| self.groups.len() > 1);
            while more != 0 {
                let i = more.trailing_zeros() as usize;
                more &= more - 1;
                g0.table.prefetch(to.hashes[i]);
                if let Some(gl) = longest {
                    let h = A::from_u128(ca[i] as u128)
                        .top(gl.level)
                        .pair(self.filter_hash)
                        .0;
                    gl.filter.prefetch(h);
                    gl.table.prefetch(h);
                }
            }
        }
        true
    }

    /// The lanes `rest` of a chunk (`ca`, `co`; direct slots `slots`) whose
    /// direct slot names groups (in the summary batch: more than the
    /// shortest), group by group, longest first, only while unresolved and
    /// only where the lane's mask names the group (see
    /// [`Self::lookup_batch`]).
    /// `g0`: the chunk's shortest-group keys and table hashes, when the
    /// look-ahead computed them.
    #[inline(always)]
    fn resolve_rest(
        &self,
        ca: &[A],
        co: &mut [NextHop],
        rest: u64,
        slots: &[usize; CHUNK],
        g0: Option<(&[A; CHUNK], &[u32; CHUNK])>,
        s: &mut Scratch<A>,
    ) {
        let mut pending: u64 = 0;
        let mut used = 0u32;
        let mut p = rest;
        while p != 0 {
            let i = p.trailing_zeros() as usize;
            p &= p - 1;
            let m = self.mask_of(ca[i], self.direct[slots[i]].groups);
            s.masks[i] = m;
            pending |= ((m != 0) as u64) << i;
            used |= m;
            let mut b = m;
            while b != 0 {
                s.by_bit[b.trailing_zeros() as usize] |= 1 << i;
                b &= b - 1;
            }
        }
        for (j, g) in self.groups.iter().enumerate().rev() {
            if pending == 0 {
                break;
            }
            let bit = group_bit(j);
            let lanes = s.by_bit[bit.trailing_zeros() as usize] & pending;
            if lanes == 0 {
                continue;
            }
            if let (0, Some((g0_keys, g0_hashes))) = (j, g0) {
                // The look-ahead hashed these keys already; the shortest
                // group is always the last one a mask names, so only
                // its table hash (`h1`, reused) is needed.
                let mut p = lanes;
                while p != 0 {
                    let i = p.trailing_zeros() as usize;
                    p &= p - 1;
                    s.keys[i] = g0_keys[i];
                    s.h1[i] = g0_hashes[i];
                }
            } else {
                let mut p = lanes;
                while p != 0 {
                    let i = p.trailing_zeros() as usize;
                    p &= p - 1;
                    s.keys[i] = ca[i].top(g.level);
                }
                A::pair_lanes(
                    self.filter_hash,
                    &s.keys,
                    &mut s.h1,
                    &mut s.h2,
                    lanes,
                    self.simd,
                );
            }
            // The lane's last group (none shorter in its mask) usually
            // holds its match: its bucket is fetched straight away and
            // probed without the filter (see `last_named`).
            let mut last = 0u64;
            let mut p = lanes;
            while p != 0 {
                let i = p.trailing_zeros() as usize;
                p &= p - 1;
                if self.skips_filter(g, last_named(s.masks[i], j)) {
                    g.table.prefetch(s.h1[i]);
                    s.th[i] = s.h1[i];
                    last |= 1 << i;
                } else {
                    g.filter.prefetch(s.h1[i]);
                }
            }
            let mut cand = last;
            let mut p = lanes & !last;
            while p != 0 {
                let i = p.trailing_zeros() as usize;
                p &= p - 1;
                if g.filter.contains(s.h1[i], s.h2[i]) {
                    cand |= 1 << i;
                    s.th[i] = self.table_hash_of(s.keys[i], s.h1[i]);
                    g.table.prefetch(s.th[i]);
                }
            }
            while cand != 0 {
                let i = cand.trailing_zeros() as usize;
                cand &= cand - 1;
                if let Some(nh) = g.table.get(s.keys[i], s.th[i]) {
                    co[i] = nh;
                    pending &= !(1 << i);
                }
            }
        }
        while used != 0 {
            s.by_bit[used.trailing_zeros() as usize] = 0;
            used &= used - 1;
        }
    }

    /// [`Self::lookup_batch`] one address at a time (keys without batched
    /// hashing in tables of more than 31 groups). The IPv6 structure is
    /// cache-resident (3.9 MB on the 2015 table, its direct array 512 KiB),
    /// so the group-by-group passes, whose point is to overlap misses, cost
    /// more instructions than the latency they hide: 593 against 354 per
    /// inside-prefix lookup and 55 against 34 per uniform one (callgrind,
    /// `examples/lpm_probe.rs`); [`Self::rounds`] goes by lane lists
    /// instead, without a branch on a lane's data.
    fn lookup_each(&self, addrs: &[A], out: &mut [NextHop]) -> usize {
        with_kind!(self.filter_hash, K => self.each::<K>(addrs, out));
        out.iter().filter(|&&v| v != NO_ROUTE).count()
    }

    fn each<const K: u8>(&self, addrs: &[A], out: &mut [NextHop]) {
        for (a, o) in addrs.iter().zip(out.iter_mut()) {
            *o = self.next_hop::<K>(*a);
        }
    }

    /// One address at a time; returns how many direct slots named a group.
    #[inline(always)]
    fn each_masked<const K: u8>(&self, addrs: &[A], out: &mut [NextHop]) -> usize {
        let mut masked = 0;
        for (&a, o) in addrs.iter().zip(out.iter_mut()) {
            let d = self.direct[self.slot(a)];
            masked += (d.groups != 0) as usize;
            *o = self.next_hop_from::<K>(a, d);
        }
        masked
    }

    /// Batched lookups for keys without batched hashing (IPv6), in chunks
    /// of [`ROUND_CHUNK`] lanes, each step a pass over a list of lanes in
    /// which no branch depends on a lane's data: lanes join the next list
    /// by [`push_if`], and picks are [`select`]s. The branch predictor thus
    /// sees loop counts instead of each lookup's path (inside-prefix IPv6
    /// lookups differ in all of: refined slot or not, one to several
    /// groups, filter pass, hit). Each pass prefetches what the next one
    /// reads:
    /// 1. every lane: its direct slot (prefetched one chunk ahead), the
    ///    next hop so far, a refined slot's sub-mask (256 words per refined
    ///    slot: cached), a refined sub-slot's sub-sub-mask prefetched;
    /// 2. every lane: its mask; lanes with groups to probe form the first
    ///    round;
    /// 3. rounds while lanes have groups left: hash each lane's longest
    ///    group left and prefetch its filter block, or its bucket when the
    ///    filter is skipped (the last group the mask names, or a table of
    ///    at most 4 MiB: `skips_filter`); test the filters, prefetch the
    ///    buckets of those
    ///    that pass; compare the buckets (a full line without the key:
    ///    the next line, in a pass of its own). A hit ends the lane.
    ///
    /// A uniform stream, where most addresses read only their direct slot,
    /// pays for the passes without gaining, so the batch goes in segments
    /// of `ROUND_SEGMENT` addresses, and a segment after one in which
    /// fewer than 1 in `ROUND_MIN_MASKED` addresses had a group to probe
    /// is looked up one address at a time (counting again, to switch
    /// back). A call's first segment is one chunk, so a call that starts
    /// with such addresses takes only one chunk in rounds. At most 31
    /// groups (each a mask bit of its own).
    #[inline(always)]
    fn rounds<const K: u8, const V: bool>(&self, addrs: &[A], out: &mut [NextHop]) {
        let all = !(u32::MAX << self.groups.len().min(31));
        let mut s = RoundLanes::<A>::new();
        self.round_segments::<K>(addrs, out, |ca, co, next| {
            self.round_chunk::<K, V>(ca, co, next, &mut s, all)
        });
    }

    /// The segments and chunks of [`Self::rounds`] (and of `rounds_wide`):
    /// `chunk(ca, co, next)` looks up the chunk `ca` into `co` (at most
    /// [`ROUND_CHUNK`] lanes; `next`: the next chunk's addresses, whose
    /// direct slots it prefetches) and returns how many of its lanes had a
    /// group to probe; a segment after one in which fewer than 1 in
    /// `ROUND_MIN_MASKED` did is looked up one address at a time. The
    /// first segment is one chunk, the others [`ROUND_SEGMENT`] addresses.
    #[inline(always)]
    fn round_segments<const K: u8>(
        &self,
        addrs: &[A],
        out: &mut [NextHop],
        mut chunk: impl FnMut(&[A], &mut [NextHop], &[A]) -> usize,
    ) {
        let n = addrs.len().min(out.len());
        let (addrs, out) = (&addrs[..n], &mut out[..n]);
        let first = n.min(ROUND_CHUNK);
        let ((a0, an), (o0, on)) = (addrs.split_at(first), out.split_at_mut(first));
        let mut rounds = true;
        for (sa, so) in std::iter::once((a0, o0))
            .chain(an.chunks(ROUND_SEGMENT).zip(on.chunks_mut(ROUND_SEGMENT)))
        {
            let masked = if rounds {
                for &a in &sa[..sa.len().min(ROUND_CHUNK)] {
                    prefetch(self.direct.as_ptr().wrapping_add(self.slot(a)));
                }
                let mut masked = 0;
                for (c, (ca, co)) in sa
                    .chunks(ROUND_CHUNK)
                    .zip(so.chunks_mut(ROUND_CHUNK))
                    .enumerate()
                {
                    let from = ((c + 1) * ROUND_CHUNK).min(sa.len());
                    let next = &sa[from..(from + ROUND_CHUNK).min(sa.len())];
                    masked += chunk(ca, co, next);
                }
                masked
            } else {
                self.each_masked::<K>(sa, so)
            };
            rounds = masked * ROUND_MIN_MASKED >= sa.len();
        }
    }

    /// Step 2 of [`Self::rounds`] for lane `i`: its mask (the sub-sub-mask
    /// of a refined sub-slot, else the word step 1 left), groups in `all`.
    #[inline(always)]
    fn round_mask(&self, s: &RoundLanes<A>, i: usize, all: u32) -> u32 {
        let i = i & (LANES - 1);
        let w = s.masks[i];
        // Present for every refined sub-slot (built together); every group
        // is a safe answer.
        let m2 = self.fine2.get(s.idx[i] as usize).copied().unwrap_or(!FINE);
        select(w & FINE != 0, m2, w) & all
    }

    /// Step 1 of [`Self::rounds`] on one chunk (`ca`, at most
    /// [`ROUND_CHUNK`] lanes): every lane's address, direct slot next hop,
    /// and (sub-)mask word into `s` (`s.idx`: the sub-sub-mask index,
    /// prefetched); the direct slots of `next` are prefetched.
    #[inline(always)]
    fn round_slots(&self, ca: &[A], next: &[A], s: &mut RoundLanes<A>) {
        let fine_last = self.fine.len().saturating_sub(1);
        let fine2_last = self.fine2.len().saturating_sub(1);
        // Never prefetch at an empty array's dangling pointer (unmapped: a
        // page walk).
        let fine2_base = if self.fine2.is_empty() {
            self.direct.as_ptr() as usize
        } else {
            self.fine2.as_ptr() as usize
        };
        // 1. Direct slots (prefetched a chunk ahead) and sub-masks (a small
        // array, 256 per refined slot: cached).
        for (i, &a) in ca.iter().take(ROUND_CHUNK).enumerate() {
            if let Some(&b) = next.get(i) {
                prefetch(self.direct.as_ptr().wrapping_add(self.slot(b)));
            }
            let i = i & (LANES - 1);
            s.addrs[i] = a;
            let d = self.direct[self.slot(a)];
            s.res[i] = d.next_hop;
            let refined = d.groups & FINE != 0;
            let f = select_addr(refined, self.fine_index(a, d.groups).min(fine_last), 0);
            // Present for every refined slot (built together); every group
            // is a safe answer.
            let m1 = self.fine.get(f).copied().unwrap_or(!FINE);
            let w = select(refined, m1, d.groups);
            s.masks[i] = w;
            let f2 = select_addr(w & FINE != 0, self.fine2_index(a, w).min(fine2_last), 0);
            s.idx[i] = f2 as u32;
            prefetch((fine2_base as *const u32).wrapping_add(f2));
        }
    }

    /// [`Self::rounds`] on one chunk (`next`: the next chunk's addresses,
    /// whose direct slots are prefetched); returns how many lanes had a
    /// group to probe.
    #[inline(always)]
    fn round_chunk<const K: u8, const V: bool>(
        &self,
        ca: &[A],
        co: &mut [NextHop],
        next: &[A],
        s: &mut RoundLanes<A>,
        all: u32,
    ) -> usize {
        let len = ca.len().min(co.len()).min(ROUND_CHUNK);
        self.round_slots(&ca[..len], next, s);
        // 2. Sub-sub-masks: the mask of every lane.
        let mut na = 0;
        for i in 0..len {
            let i = i & (LANES - 1);
            let m = self.round_mask(s, i, all);
            s.masks[i] = m;
            push_if(&mut s.act, &mut na, i as u8, m != 0);
        }
        let masked = na;
        // 3. Rounds.
        while na > 0 {
            let (mut nf, mut nb, mut nn) = (0, 0, 0);
            for &i in &s.act[..na] {
                let u = i as usize & (LANES - 1);
                let m = s.masks[u];
                let j = 31 - m.leading_zeros();
                let Some(g) = self.groups.get(j as usize) else {
                    continue;
                };
                let key = s.addrs[u].top(g.level);
                let (h1, h2) = key.pair(kind_of(K));
                let rest = m ^ (1 << j);
                let direct = self.skips_filter(g, rest == 0);
                (s.keys[u], s.h1[u], s.h2[u]) = (key, h1, h2);
                s.group[u] = j as u8;
                s.masks[u] = rest;
                s.idx[u] = g.table.home(h1) as u32;
                let at = select_addr(direct, g.table.line_addr(h1), g.filter.block_addr(h1));
                prefetch(at as *const u8);
                push_if(&mut s.bucket, &mut nb, i, direct);
                push_if(&mut s.filter, &mut nf, i, !direct);
            }
            for &i in &s.filter[..nf] {
                let u = i as usize & (LANES - 1);
                let Some(g) = self.groups.get(s.group[u] as usize) else {
                    continue;
                };
                let (h1, h2) = (s.h1[u], s.h2[u]);
                let pass = if V {
                    // SAFETY: (1) `V` is true only inside `rounds_avx512`,
                    // which runs only where avx512f was detected.
                    unsafe { g.filter.contains_avx512(h1, h2) }
                } else {
                    g.filter.contains(h1, h2)
                };
                let th = self.table_hash_of(s.keys[u], h1);
                s.idx[u] = g.table.home(th) as u32;
                let at = select_addr(pass, g.table.line_addr(th), g.filter.block_addr(h1));
                prefetch(at as *const u8);
                push_if(&mut s.bucket, &mut nb, i, pass);
                push_if(&mut s.next, &mut nn, i, !pass & (s.masks[u] != 0));
            }
            let mut nm = 0;
            for &i in &s.bucket[..nb] {
                let u = i as usize & (LANES - 1);
                let Some(g) = self.groups.get(s.group[u] as usize) else {
                    continue;
                };
                let b = s.idx[u] as usize & g.table.line_mask as usize;
                let (hop, room) = g.table.line(b).find(s.keys[u]);
                let hit = hop != NO_ROUTE;
                s.res[u] = select(hit, hop, s.res[u]);
                let on = !hit & !room;
                let b2 = (b + 1) & g.table.line_mask as usize;
                s.idx[u] = b2 as u32;
                // Never an unmapped address: a prefetch of one can cost a
                // page walk.
                prefetch(select_addr(on, g.table.line_ptr(b2), g.table.line_ptr(b)) as *const u8);
                push_if(&mut s.more, &mut nm, i, on);
                push_if(&mut s.next, &mut nn, i, !hit & room & (s.masks[u] != 0));
            }
            // Full lines without the key (rare): the lines after them.
            while nm > 0 {
                let mut k = 0;
                for t in 0..nm {
                    let i = s.more[t & (LANES - 1)];
                    let u = i as usize & (LANES - 1);
                    let Some(g) = self.groups.get(s.group[u] as usize) else {
                        continue;
                    };
                    let b = s.idx[u] as usize & g.table.line_mask as usize;
                    let (hop, room) = g.table.line(b).find(s.keys[u]);
                    let hit = hop != NO_ROUTE;
                    s.res[u] = select(hit, hop, s.res[u]);
                    s.idx[u] = ((b + 1) & g.table.line_mask as usize) as u32;
                    // In place: `k <= t`.
                    push_if(&mut s.more, &mut k, i, !hit & !room);
                    push_if(&mut s.next, &mut nn, i, !hit & room & (s.masks[u] != 0));
                }
                nm = k;
            }
            std::mem::swap(&mut s.act, &mut s.next);
            na = nn;
        }
        co[..len].copy_from_slice(&s.res[..len]);
        masked
    }

    /// [`Self::rounds`] compiled for AVX-512, with the filters tested by
    /// [`BloomBits::contains_avx512`] (every filter has `k <= 8`).
    ///
    /// # Safety
    /// The CPU must support avx512f.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn rounds_avx512<const K: u8>(&self, addrs: &[A], out: &mut [NextHop]) {
        self.rounds::<K, true>(addrs, out)
    }

    /// [`Probe::FiltersFirst`] on one chunk of at most [`CHUNK`] lanes (at
    /// most [`FILTERS_FIRST_MAX_GROUPS`] groups).
    fn filters_first_chunk(&self, ca: &[A], co: &mut [NextHop]) {
        const G: usize = FILTERS_FIRST_MAX_GROUPS;
        let n = ca.len().min(co.len()).min(CHUNK);
        let all: u64 = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        let mut keys = [[A::default(); CHUNK]; G];
        let mut h1 = [[0u32; CHUNK]; G];
        let mut h2 = [[0u32; CHUNK]; G];
        let mut th = [[0u32; CHUNK]; G];
        // Lanes whose filter passes, per group.
        let mut cand = [0u64; G];
        let groups = &self.groups[..self.groups.len().min(G)];
        for (j, g) in groups.iter().enumerate() {
            for (k, a) in keys[j].iter_mut().zip(&ca[..n]) {
                *k = a.top(g.level);
            }
            A::pair_batch(
                self.filter_hash,
                &keys[j][..n],
                &mut h1[j][..n],
                &mut h2[j][..n],
                self.simd,
            );
            for &h in &h1[j][..n] {
                g.filter.prefetch(h);
            }
        }
        let mut any = 0u64;
        for (j, g) in groups.iter().enumerate() {
            for i in 0..n {
                if g.filter.contains(h1[j][i], h2[j][i]) {
                    cand[j] |= 1 << i;
                    th[j][i] = self.table_hash_of(keys[j][i], h1[j][i]);
                    g.table.prefetch(th[j][i]);
                }
            }
            any |= cand[j];
        }
        // Lanes no filter passes go to their direct slot now.
        let mut p = all & !any;
        while p != 0 {
            let i = p.trailing_zeros() as usize;
            p &= p - 1;
            prefetch(self.direct.as_ptr().wrapping_add(self.slot(ca[i])));
        }
        // Probe the passing groups longest first; a miss everywhere falls
        // back to the direct slot too.
        let mut unresolved = all;
        for (j, g) in groups.iter().enumerate().rev() {
            let mut p = cand[j] & unresolved;
            while p != 0 {
                let i = p.trailing_zeros() as usize;
                p &= p - 1;
                if let Some(nh) = g.table.get(keys[j][i], th[j][i]) {
                    co[i] = nh;
                    unresolved &= !(1 << i);
                }
            }
        }
        let mut p = unresolved & any;
        while p != 0 {
            let i = p.trailing_zeros() as usize;
            p &= p - 1;
            prefetch(self.direct.as_ptr().wrapping_add(self.slot(ca[i])));
        }
        let mut p = unresolved;
        while p != 0 {
            let i = p.trailing_zeros() as usize;
            p &= p - 1;
            co[i] = self.direct[self.slot(ca[i])].next_hop;
        }
    }

    /// [`Self::lookup_batch`] over `threads` scoped threads that share this
    /// table read-only. Each thread claims shares of [`PARALLEL_SHARE`]
    /// addresses from a shared counter until none is left, so a thread on
    /// a slower or busier core takes fewer shares instead of holding up
    /// the call with a fixed part. Returns how many addresses had a route.
    ///
    /// The threads are spawned for the call and joined before it returns
    /// (one spawn and join per extra thread), so this suits large batches.
    /// A forwarder keeps long-lived, pinned workers instead, each calling
    /// [`Self::lookup_batch`] on its own bursts: the table is `Sync` and
    /// lookups take `&self` (the dataplane's `IpPipeline` does that).
    pub fn lookup_parallel(&self, addrs: &[A], out: &mut [NextHop], threads: usize) -> usize {
        let n = addrs.len().min(out.len());
        let shares: Vec<Mutex<(&[A], &mut [NextHop])>> = addrs[..n]
            .chunks(PARALLEL_SHARE)
            .zip(out[..n].chunks_mut(PARALLEL_SHARE))
            .map(Mutex::new)
            .collect();
        let next = AtomicUsize::new(0);
        let work = || {
            let mut hits = 0;
            while let Some(p) = shares.get(next.fetch_add(1, Ordering::Relaxed)) {
                let mut g = p.lock().unwrap_or_else(PoisonError::into_inner);
                let (a, o) = &mut *g;
                hits += self.lookup_batch(a, o);
            }
            hits
        };
        std::thread::scope(|s| {
            let handles: Vec<_> = (1..threads.clamp(1, shares.len().max(1)))
                .map(|_| s.spawn(work))
                .collect();
            let mine = work();
            mine + handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .sum::<usize>()
        })
    }

    /// What [`Self::lookup_batch`] reads for `a` in its probe order: the
    /// memory behind the lookup floor (cache lines per address; see the
    /// crate README).
    pub fn probe_cost(&self, a: A) -> ProbeCost {
        if self.probe == Probe::FiltersFirst && self.groups.len() <= FILTERS_FIRST_MAX_GROUPS {
            let mut c = ProbeCost {
                groups: self.groups.len() as u32,
                filters: self.groups.len() as u32,
                ..ProbeCost::default()
            };
            for g in self.groups.iter().rev() {
                let key = a.top(g.level);
                let (h1, h2) = key.pair(self.filter_hash);
                if g.filter.contains(h1, h2) {
                    let (hit, lines) = g.table.probe_lines(key, self.table_hash_of(key, h1));
                    c.table_lines += lines;
                    if hit {
                        return c;
                    }
                }
            }
            c.direct = 1;
            return c;
        }
        let slot = self.slot(a);
        let summary = A::BATCH_HASH && self.reuse && !self.groups.is_empty();
        let state = self.summary_of(slot);
        if summary && state == SUM_FIRST {
            // `batch_summary`: the shortest group's line(s) alone, the direct
            // slot after a miss.
            let g = &self.groups[0];
            let key = a.top(g.level);
            let (hit, lines) = g.table.probe_lines(key, key.pair(self.filter_hash).0);
            return ProbeCost {
                summary: 1,
                direct: !hit as u32,
                groups: 1,
                table_lines: lines,
                ..ProbeCost::default()
            };
        }
        let d = self.direct[slot];
        let sub_refined = d.groups & FINE != 0
            && self
                .fine
                .get(self.fine_index(a, d.groups))
                .is_some_and(|m| m & FINE != 0);
        let mut c = ProbeCost {
            summary: summary as u32,
            direct: 1,
            fine: (d.groups & FINE != 0) as u32 + sub_refined as u32,
            ..ProbeCost::default()
        };
        let mask = self.mask_of(a, d.groups);
        for (j, g) in self.groups.iter().enumerate().rev() {
            if mask & group_bit(j) == 0 {
                continue;
            }
            c.groups += 1;
            let key = a.top(g.level);
            let (h1, h2) = key.pair(self.filter_hash);
            if !self.skips_filter(g, last_named(mask, j)) {
                c.filters += 1;
                if !g.filter.contains(h1, h2) {
                    continue;
                }
            }
            let (hit, lines) = g.table.probe_lines(key, self.table_hash_of(key, h1));
            c.table_lines += lines;
            if hit {
                break;
            }
        }
        if summary && state == SUM_MORE && self.groups.len() > 1 {
            // `batch_summary`'s look-ahead fetched the longest group's filter
            // block and line and the shortest group's line, used or not.
            c.filters = c.filters.max(1);
            c.table_lines = c.table_lines.max(2);
        }
        c
    }

    /// Direct slots refined into sub-masks (see the crate README).
    pub fn refined_slots(&self) -> usize {
        if self.fine_bits == 0 {
            0
        } else {
            self.fine.len() >> self.fine_bits
        }
    }

    /// Bytes of the sub-masks and sub-sub-masks.
    pub fn sub_mask_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.fine) + std::mem::size_of_val(&*self.fine2)
    }

    /// Sub-slots refined into sub-sub-masks (see the crate README).
    pub fn refined_sub_slots(&self) -> usize {
        if self.fine2_bits == 0 {
            0
        } else {
            self.fine2.len() >> self.fine2_bits
        }
    }

    /// The batched-hashing path in use.
    pub fn simd(&self) -> Simd {
        self.simd
    }

    /// Choose the batched-hashing path (a path the CPU lacks runs scalar).
    pub fn set_simd(&mut self, simd: Simd) {
        self.simd = simd;
    }

    /// The probe order of [`Self::lookup_batch`].
    pub fn probe(&self) -> Probe {
        self.probe
    }

    /// Choose the probe order of [`Self::lookup_batch`] (answers are the
    /// same either way).
    pub fn set_probe(&mut self, probe: Probe) {
        self.probe = probe;
    }

    /// Batched IPv6 lookups ([`Self::lookup_batch`] for keys without
    /// batched hashing) test a group's filter before its bucket only when
    /// the group's table is larger than `bytes` (default 4 MiB: a smaller
    /// table stays cached, and its bucket compare costs less than the
    /// filter test; 0: every group's filter, as single lookups do, but the
    /// last one its mask names). Answers are the same either way.
    pub fn set_round_filter_min_bytes(&mut self, bytes: usize) {
        self.round_filter_min_lines = (bytes / 64).min(u32::MAX as usize) as u32;
    }

    /// Bytes read by lookups: direct array, filters and tables.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.direct)
            + self.sub_mask_bytes()
            + self
                .groups
                .iter()
                .map(|g| g.filter.bytes() + g.table.bytes())
                .sum::<usize>()
    }
}

// ---------------------------------------------------------------- control

/// Per-group control state.
#[derive(Clone, Debug)]
struct GroupCtl<A: GroupKey> {
    /// Shortest original length this group holds (previous level + 1).
    lo: u8,
    /// Counting-filter counters, one per filter bit.
    counters: Vec<u16>,
    /// Expanded key -> (next hop, original prefix length).
    exp: HashMap<A, (NextHop, u8)>,
    /// Key count the filter was sized for.
    sized_for: usize,
}

const NO_LEN: u8 = u8::MAX;

/// Statistics of one group (for `stats` and the paper's Table 4).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupStats {
    /// Expansion level.
    pub level: u8,
    /// Original prefix lengths held: `lo..=level`.
    pub lo: u8,
    /// Original prefixes in the group.
    pub prefixes: usize,
    /// Keys after expansion (after prefix capture).
    pub expanded: usize,
    /// Filter bits.
    pub filter_bits: u32,
    /// Filter hashes.
    pub hashes: u8,
    /// Filter bytes.
    pub filter_bytes: usize,
    /// Table bytes.
    pub table_bytes: usize,
}

/// A Bloomfwd table with its control plane: RIB, counting-filter counters
/// and the expansion map. Updates take `&mut self`; lookups go through
/// [`BloomfwdControl::table`] (or the forwarding `lookup*` methods here).
#[derive(Clone, Debug)]
pub struct BloomfwdControl<A: GroupKey> {
    cfg: Config,
    rib: Rib<A>,
    direct_len: Vec<u8>,
    /// Keys per (direct slot, group mask bit) ([`slot_group_key`]): a
    /// slot's mask bit is cleared when its count drops to zero.
    slot_groups: HashMap<u64, u32>,
    /// Keys per (sub-slot, group mask bit) under refined slots
    /// ([`fine_group_key`]): a sub-mask bit is cleared when its count
    /// drops to zero.
    fine_groups: HashMap<u64, u32>,
    /// Keys per (sub-sub-slot, group) under the refined sub-slots, as
    /// `fine_groups` (a key shorter than the sub-sub-slots counts in each
    /// one it covers).
    fine2_groups: HashMap<u64, u32>,
    ctl: Vec<GroupCtl<A>>,
    fwd: Bloomfwd<A>,
}

impl<A: GroupKey> BloomfwdControl<A> {
    /// Build from routes (a later route for the same prefix replaces an
    /// earlier one).
    pub fn build(cfg: Config, routes: &[(Prefix<A>, NextHop)]) -> Result<Self, ConfigError> {
        cfg.validate(A::BITS)?;
        let mut rib = Rib::new();
        for &(p, nh) in routes {
            rib.insert(p, nh);
        }
        Ok(Self::from_rib(cfg, rib))
    }

    /// Build from a RIB (the configuration must be valid).
    fn from_rib(mut cfg: Config, rib: Rib<A>) -> Self {
        // Prefixes longer than the last level, or expanding too far, get
        // levels of their own.
        let counts = rib.length_counts();
        let mut levels = cfg.levels.clone();
        for (len, &c) in counts.iter().enumerate() {
            let len = len as u8;
            if c == 0 || len <= cfg.direct_bits {
                continue;
            }
            match levels.iter().find(|&&l| l >= len) {
                Some(&l) if l - len <= cfg.max_expansion_bits => {}
                _ => {
                    levels.push(len);
                    levels.sort_unstable();
                }
            }
        }
        cfg.levels = levels;
        let d = cfg.direct_bits;
        let mut direct = vec![
            Direct {
                next_hop: NO_ROUTE,
                groups: 0
            };
            1usize << d
        ];
        let mut direct_len = vec![NO_LEN; 1usize << d];
        let mut exps: Vec<HashMap<A, (NextHop, u8)>> =
            cfg.levels.iter().map(|_| HashMap::new()).collect();
        for (p, nh) in rib.sorted() {
            if p.len() <= d {
                let base = (p.bits().to_u128() as usize) << (d - p.len());
                for s in base..base + (1usize << (d - p.len())) {
                    direct[s].next_hop = nh;
                    direct_len[s] = p.len();
                }
            } else {
                let gi = cfg.levels.iter().position(|&l| l >= p.len()).unwrap_or(0);
                let level = cfg.levels[gi];
                for key in expansion(p, level) {
                    // Sorted by length: a later (longer) prefix captures.
                    exps[gi].insert(key, (nh, p.len()));
                }
            }
        }
        let mut groups = Vec::new();
        let mut ctl = Vec::new();
        let mut slot_groups = HashMap::new();
        let reuse = cfg.filter_hash == cfg.table_hash;
        for (gi, exp) in exps.into_iter().enumerate() {
            let level = cfg.levels[gi];
            let lo = if gi == 0 {
                d + 1
            } else {
                cfg.levels[gi - 1] + 1
            };
            let sized_for = exp.len().max(1024);
            let mut filter = BloomBits::sized(sized_for, cfg.fpr);
            let mut counters = vec![0u16; filter.m as usize];
            let mut table = HashTable::with_capacity(exp.len());
            let th = |k: A| {
                if reuse {
                    k.pair(cfg.filter_hash).0
                } else {
                    k.pair(cfg.table_hash).0
                }
            };
            for (&key, &(nh, _)) in &exp {
                let slot = slot_of(key, level, d);
                *slot_groups.entry(slot_group_key(slot, gi)).or_insert(0) += 1;
                direct[slot].groups |= group_bit(gi);
                let (h1, h2) = key.pair(cfg.filter_hash);
                for i in 0..filter.k {
                    let b = filter.index(h1, h2, i);
                    counters[b as usize] = counters[b as usize].saturating_add(1);
                    filter.set(b, true);
                }
                table.insert(key, nh, th(key), &th);
            }
            groups.push(Group {
                level,
                filter,
                table,
            });
            ctl.push(GroupCtl {
                lo,
                counters,
                exp,
                sized_for,
            });
        }
        // Refine the dense slots: sub-masks from the keys under them.
        let fine_bits = fine_bits_for(d, &cfg.levels);
        let mut fine: Vec<u32> = Vec::new();
        let mut fine_groups = HashMap::new();
        if fine_bits > 0 {
            for dslot in direct.iter_mut() {
                if dslot.groups.count_ones() >= FINE_MIN_GROUPS {
                    dslot.groups = FINE | (fine.len() >> fine_bits) as u32;
                    fine.resize(fine.len() + (1 << fine_bits), 0);
                }
            }
            for (gi, c) in ctl.iter().enumerate() {
                let level = groups[gi].level;
                for &key in c.exp.keys() {
                    let slot = slot_of(key, level, d);
                    let dg = direct[slot].groups;
                    if dg & FINE != 0 {
                        let f = fine_of(key, level, d + fine_bits);
                        *fine_groups.entry(fine_group_key(f, gi)).or_insert(0) += 1;
                        let sub = f & ((1 << fine_bits) - 1);
                        fine[(((dg & !FINE) as usize) << fine_bits) | sub] |= group_bit(gi);
                    }
                }
            }
        }
        // Refine the dense sub-slots the same way, one level down.
        let fine2_bits = fine2_bits_for(d, fine_bits);
        let mut fine2: Vec<u32> = Vec::new();
        let mut fine2_groups = HashMap::new();
        if fine2_bits > 0 {
            for m in fine.iter_mut() {
                if m.count_ones() >= FINE_MIN_GROUPS {
                    *m = FINE | (fine2.len() >> fine2_bits) as u32;
                    fine2.resize(fine2.len() + (1 << fine2_bits), 0);
                }
            }
            let geo = Fine2 {
                d,
                fine_bits,
                fine2_bits,
            };
            for (gi, c) in ctl.iter().enumerate() {
                let level = groups[gi].level;
                for &key in c.exp.keys() {
                    geo.touch(
                        &direct,
                        &fine,
                        &mut fine2,
                        &mut fine2_groups,
                        (key, level, gi),
                        true,
                    );
                }
            }
        }
        let mut summary = vec![0u64; summary_words(d)];
        for (slot, ds) in direct.iter().enumerate() {
            set_summary(&mut summary, slot, ds.groups);
        }
        let fwd = Bloomfwd {
            summary: summary.into_boxed_slice(),
            direct: HugeBox::from_slice(&direct),
            direct_bits: d,
            fine: fine.into_boxed_slice(),
            fine_bits,
            fine2: fine2.into_boxed_slice(),
            fine2_bits,
            groups,
            filter_hash: cfg.filter_hash,
            table_hash: cfg.table_hash,
            reuse,
            simd: Simd::detect(),
            probe: Probe::default(),
            round_filter_min_lines: ROUND_FILTER_MIN_LINES,
        };
        BloomfwdControl {
            cfg,
            rib,
            direct_len,
            slot_groups,
            fine_groups,
            fine2_groups,
            ctl,
            fwd,
        }
    }

    /// The lookup structure.
    pub fn table(&self) -> &Bloomfwd<A> {
        &self.fwd
    }

    /// Mutable access to the lookup structure's settings (SIMD path).
    pub fn table_mut(&mut self) -> &mut Bloomfwd<A> {
        &mut self.fwd
    }

    /// Longest-prefix match (see [`Bloomfwd::lookup`]).
    pub fn lookup(&self, a: A) -> Option<NextHop> {
        self.fwd.lookup(a)
    }

    /// The configuration in force (levels include any added at run time).
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The routes.
    pub fn rib(&self) -> &Rib<A> {
        &self.rib
    }

    fn table_hash_fn(&self) -> impl Fn(A) -> u32 {
        let kind = if self.fwd.reuse {
            self.cfg.filter_hash
        } else {
            self.cfg.table_hash
        };
        move |k: A| k.pair(kind).0
    }

    /// Announce (insert or replace) a route. `nh` must not be [`NO_ROUTE`]
    /// (returns `false` and changes nothing if it is).
    pub fn announce(&mut self, p: Prefix<A>, nh: NextHop) -> bool {
        if nh == NO_ROUTE {
            return false;
        }
        self.rib.insert(p, nh);
        let len = p.len();
        let d = self.cfg.direct_bits;
        if len <= d {
            let base = (p.bits().to_u128() as usize) << (d - len);
            for s in base..base + (1usize << (d - len)) {
                let dl = self.direct_len[s];
                if dl == NO_LEN || dl <= len {
                    self.fwd.direct[s].next_hop = nh;
                    self.direct_len[s] = len;
                }
            }
            return true;
        }
        let gi = match self.cfg.levels.iter().position(|&l| l >= len) {
            Some(gi) if self.cfg.levels[gi] - len <= self.cfg.max_expansion_bits => gi,
            _ => {
                // A new level: rebuild from the RIB (rare; keeps every
                // group's length range contiguous).
                // The lookup settings carry over.
                let (simd, probe) = (self.fwd.simd, self.fwd.probe);
                let filter_min = self.fwd.round_filter_min_lines;
                let cfg = self.cfg.clone();
                let rib = std::mem::take(&mut self.rib);
                *self = Self::from_rib(cfg, rib);
                self.fwd.simd = simd;
                self.fwd.probe = probe;
                self.fwd.round_filter_min_lines = filter_min;
                return true;
            }
        };
        let level = self.fwd.groups[gi].level;
        let th = self.table_hash_fn();
        let fk = self.cfg.filter_hash;
        let geo = Fine2::of(&self.fwd);
        let mut added = 0;
        for key in expansion(p, level) {
            let g = &mut self.fwd.groups[gi];
            let c = &mut self.ctl[gi];
            match c.exp.get_mut(&key) {
                Some(e) => {
                    if e.1 <= len {
                        *e = (nh, len);
                        g.table.insert(key, nh, th(key), &th);
                    }
                }
                None => {
                    c.exp.insert(key, (nh, len));
                    let slot = slot_of(key, level, d);
                    *self
                        .slot_groups
                        .entry(slot_group_key(slot, gi))
                        .or_insert(0) += 1;
                    let dg = self.fwd.direct[slot].groups;
                    if dg & FINE == 0 {
                        self.fwd.direct[slot].groups |= group_bit(gi);
                        set_summary(&mut self.fwd.summary, slot, dg | group_bit(gi));
                    } else {
                        let fb = self.fwd.fine_bits;
                        let f = fine_of(key, level, d + fb);
                        *self.fine_groups.entry(fine_group_key(f, gi)).or_insert(0) += 1;
                        let i = (((dg & !FINE) as usize) << fb) | (f & ((1 << fb) - 1));
                        if let Some(m) = self.fwd.fine.get_mut(i).filter(|m| **m & FINE == 0) {
                            *m |= group_bit(gi);
                        }
                        geo.touch(
                            &self.fwd.direct,
                            &self.fwd.fine,
                            &mut self.fwd.fine2,
                            &mut self.fine2_groups,
                            (key, level, gi),
                            true,
                        );
                    }
                    let (h1, h2) = key.pair(fk);
                    for i in 0..g.filter.k {
                        let b = g.filter.index(h1, h2, i);
                        c.counters[b as usize] = c.counters[b as usize].saturating_add(1);
                        g.filter.set(b, true);
                    }
                    g.table.insert(key, nh, th(key), &th);
                    added += 1;
                }
            }
        }
        if added > 0 && self.ctl[gi].exp.len() > 2 * self.ctl[gi].sized_for {
            self.resize_filter(gi);
        }
        true
    }

    /// Withdraw a route; `false` when it was not present (nothing changes).
    pub fn withdraw(&mut self, p: Prefix<A>) -> bool {
        if self.rib.remove(p).is_none() {
            return false;
        }
        let len = p.len();
        let d = self.cfg.direct_bits;
        if len <= d {
            let cover = self.rib.covering(p, 0, len);
            let base = (p.bits().to_u128() as usize) << (d - len);
            for s in base..base + (1usize << (d - len)) {
                if self.direct_len[s] == len {
                    let (nh, l) = cover.unwrap_or((NO_ROUTE, NO_LEN));
                    self.fwd.direct[s].next_hop = nh;
                    self.direct_len[s] = l;
                }
            }
            return true;
        }
        let Some(gi) = self.cfg.levels.iter().position(|&l| l >= len) else {
            return true;
        };
        let level = self.fwd.groups[gi].level;
        let cover = self.rib.covering(p, self.ctl[gi].lo, len);
        let th = self.table_hash_fn();
        let fk = self.cfg.filter_hash;
        let geo = Fine2::of(&self.fwd);
        for key in expansion(p, level) {
            let g = &mut self.fwd.groups[gi];
            let c = &mut self.ctl[gi];
            let Some(e) = c.exp.get_mut(&key) else {
                continue;
            };
            if e.1 != len {
                continue;
            }
            match cover {
                Some((nh, l)) => {
                    *e = (nh, l);
                    g.table.insert(key, nh, th(key), &th);
                }
                None => {
                    c.exp.remove(&key);
                    let slot = slot_of(key, level, d);
                    let sk = slot_group_key(slot, gi);
                    let dg = self.fwd.direct[slot].groups;
                    if let Some(n) = self.slot_groups.get_mut(&sk) {
                        *n -= 1;
                        if *n == 0 {
                            self.slot_groups.remove(&sk);
                            if dg & FINE == 0 {
                                self.fwd.direct[slot].groups &= !group_bit(gi);
                                set_summary(&mut self.fwd.summary, slot, dg & !group_bit(gi));
                            }
                        }
                    }
                    if dg & FINE != 0 {
                        let fb = self.fwd.fine_bits;
                        let f = fine_of(key, level, d + fb);
                        let fgk = fine_group_key(f, gi);
                        if let Some(n) = self.fine_groups.get_mut(&fgk) {
                            *n -= 1;
                            if *n == 0 {
                                self.fine_groups.remove(&fgk);
                                let i = (((dg & !FINE) as usize) << fb) | (f & ((1 << fb) - 1));
                                if let Some(m) =
                                    self.fwd.fine.get_mut(i).filter(|m| **m & FINE == 0)
                                {
                                    *m &= !group_bit(gi);
                                }
                            }
                        }
                        geo.touch(
                            &self.fwd.direct,
                            &self.fwd.fine,
                            &mut self.fwd.fine2,
                            &mut self.fine2_groups,
                            (key, level, gi),
                            false,
                        );
                    }
                    let (h1, h2) = key.pair(fk);
                    for i in 0..g.filter.k {
                        let b = g.filter.index(h1, h2, i) as usize;
                        // A saturated counter stays (the bit stays set: a
                        // false positive, never a false negative).
                        if c.counters[b] != u16::MAX {
                            c.counters[b] -= 1;
                            if c.counters[b] == 0 {
                                g.filter.set(b as u32, false);
                            }
                        }
                    }
                    g.table.remove(key, th(key), &th);
                }
            }
        }
        true
    }

    /// Re-size group `gi`'s filter for its current key count.
    fn resize_filter(&mut self, gi: usize) {
        let c = &mut self.ctl[gi];
        let g = &mut self.fwd.groups[gi];
        c.sized_for = c.exp.len().max(1024);
        g.filter = BloomBits::sized(c.sized_for, self.cfg.fpr);
        c.counters = vec![0; g.filter.m as usize];
        for &key in c.exp.keys() {
            let (h1, h2) = key.pair(self.cfg.filter_hash);
            for i in 0..g.filter.k {
                let b = g.filter.index(h1, h2, i);
                c.counters[b as usize] = c.counters[b as usize].saturating_add(1);
                g.filter.set(b, true);
            }
        }
    }

    /// Per-group statistics.
    pub fn group_stats(&self) -> Vec<GroupStats> {
        let counts = self.rib.length_counts();
        self.fwd
            .groups
            .iter()
            .zip(&self.ctl)
            .map(|(g, c)| GroupStats {
                level: g.level,
                lo: c.lo,
                prefixes: (c.lo..=g.level).map(|l| counts[l as usize] as usize).sum(),
                expanded: c.exp.len(),
                filter_bits: g.filter.m,
                hashes: g.filter.k,
                filter_bytes: g.filter.bytes(),
                table_bytes: g.table.bytes(),
            })
            .collect()
    }

    /// Prefixes in the direct array (lengths `0..=direct_bits`).
    pub fn direct_prefixes(&self) -> usize {
        let counts = self.rib.length_counts();
        counts[..=self.cfg.direct_bits as usize].iter().sum::<u64>() as usize
    }

    /// Bytes of the direct array.
    pub fn direct_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.fwd.direct)
    }

    /// Measured false-positive rate of each group's filter: the share of
    /// `samples` random keys absent from the group that the filter passes.
    pub fn measure_fpr(&self, samples: usize, seed: u64) -> Vec<f64> {
        let mut x = seed | 1;
        self.fwd
            .groups
            .iter()
            .zip(&self.ctl)
            .map(|(g, c)| {
                let (mut neg, mut pos) = (0usize, 0usize);
                for _ in 0..samples {
                    // xorshift64*: reproducible sample keys.
                    x ^= x >> 12;
                    x ^= x << 25;
                    x ^= x >> 27;
                    let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d) as u128;
                    let r =
                        r << 64 | (x.rotate_left(17).wrapping_mul(0x9e37_79b9_7f4a_7c15) as u128);
                    let key = A::from_u128(r & mask_bits(g.level));
                    if c.exp.contains_key(&key) {
                        continue;
                    }
                    neg += 1;
                    let (h1, h2) = key.pair(self.cfg.filter_hash);
                    pos += g.filter.contains(h1, h2) as usize;
                }
                if neg == 0 {
                    0.0
                } else {
                    pos as f64 / neg as f64
                }
            })
            .collect()
    }
}

/// The direct slot of a group key of `level` bits (`level > d`).
#[inline]
fn slot_of<A: Address>(key: A, level: u8, d: u8) -> usize {
    (key.to_u128() >> (level - d)) as usize
}

/// The `slot_groups` key of (direct slot, group `gi`'s mask bit).
fn slot_group_key(slot: usize, gi: usize) -> u64 {
    (slot as u64) << 5 | gi.min(30) as u64
}

/// The sub-slot (first `fd` address bits) of a group key of `level >= fd`
/// bits.
#[inline]
fn fine_of<A: Address>(key: A, level: u8, fd: u8) -> usize {
    (key.to_u128() >> (level - fd)) as usize
}

/// The `fine_groups` key of (sub-slot, group `gi`'s mask bit).
fn fine_group_key(f: usize, gi: usize) -> u64 {
    (f as u64) << 5 | gi.min(30) as u64
}

/// Sub-sub-mask bits of a configuration: the sub-sub-slots lie
/// [`MAX_FINE_BITS`] address bits below the sub-slots (IPv6: /32 under
/// /24), within the first 63 bits (`top_of_hi64`'s range; 0: no second
/// level).
fn fine2_bits_for(direct_bits: u8, fine_bits: u8) -> u8 {
    if fine_bits == 0 {
        return 0;
    }
    MAX_FINE_BITS.min(63u8.saturating_sub(direct_bits + fine_bits))
}

/// The geometry of the second refinement level, to count keys in and out
/// of the sub-sub-masks.
struct Fine2 {
    d: u8,
    fine_bits: u8,
    fine2_bits: u8,
}

impl Fine2 {
    fn of<A: GroupKey>(t: &Bloomfwd<A>) -> Self {
        Fine2 {
            d: t.direct_bits,
            fine_bits: t.fine_bits,
            fine2_bits: t.fine2_bits,
        }
    }

    /// Add (or remove) group `gi`'s bit for `key` (at `level`) in the
    /// sub-sub-masks it covers, when its slot and sub-slot are refined: a
    /// key at least as long as the sub-sub-slots lies in one, a shorter
    /// one (level >= the sub-slots', so within one sub-slot) covers
    /// `2^(depth - level)`. Per-(sub-sub-slot, group) counts keep each bit
    /// exact under announce and withdraw.
    fn touch<A: Address>(
        &self,
        direct: &[Direct],
        fine: &[u32],
        fine2: &mut [u32],
        counts: &mut HashMap<u64, u32>,
        (key, level, gi): (A, u8, usize),
        add: bool,
    ) {
        let (d, fb, fb2) = (self.d, self.fine_bits, self.fine2_bits);
        let Some(dg) = direct.get(slot_of(key, level, d)).map(|s| s.groups) else {
            return;
        };
        if dg & FINE == 0 {
            return;
        }
        let f = fine_of(key, level, d + fb);
        let i1 = (((dg & !FINE) as usize) << fb) | (f & ((1 << fb) - 1));
        let Some(&m1) = fine.get(i1) else {
            return;
        };
        if m1 & FINE == 0 {
            return;
        }
        let depth = d + fb + fb2;
        let (first, n) = if level >= depth {
            (fine_of(key, level, depth), 1usize)
        } else {
            let up = depth - level;
            ((key.to_u128() as usize) << up, 1usize << up)
        };
        for f2 in first..first + n {
            let i2 = (((m1 & !FINE) as usize) << fb2) | (f2 & ((1 << fb2) - 1));
            let k = fine_group_key(f2, gi);
            let Some(w) = fine2.get_mut(i2) else {
                continue;
            };
            if add {
                *counts.entry(k).or_insert(0) += 1;
                *w |= group_bit(gi);
            } else if let Some(c) = counts.get_mut(&k) {
                *c -= 1;
                if *c == 0 {
                    counts.remove(&k);
                    *w &= !group_bit(gi);
                }
            }
        }
    }
}

fn mask_bits(level: u8) -> u128 {
    if level >= 128 {
        u128::MAX
    } else {
        (1u128 << level) - 1
    }
}

/// The keys of `p` expanded to `level >= p.len()` (right-aligned first
/// `level` bits).
fn expansion<A: Address>(p: Prefix<A>, level: u8) -> impl Iterator<Item = A> {
    let extra = (level - p.len()) as u32;
    let base = if p.is_empty() {
        0
    } else {
        p.bits().to_u128() << extra
    };
    (0..1u128 << extra).map(move |i| A::from_u128(base + i))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p4(a: u32, l: u8) -> Prefix<u32> {
        Prefix::new(a, l).unwrap()
    }

    #[test]
    fn withdraw_restores_covering_route() {
        let mut t = BloomfwdControl::<u32>::build(
            Config::ipv4(),
            &[
                (p4(0x0A00_0000, 8), 1),
                (p4(0x0A00_0000, 22), 2),
                (p4(0x0A00_0000, 21), 3),
            ],
        )
        .unwrap();
        assert_eq!(t.lookup(0x0A00_0001), Some(2));
        assert_eq!(t.lookup(0x0A00_0401), Some(3));
        assert!(t.withdraw(p4(0x0A00_0000, 22)));
        assert_eq!(t.lookup(0x0A00_0001), Some(3));
        assert!(t.withdraw(p4(0x0A00_0000, 21)));
        assert_eq!(t.lookup(0x0A00_0001), Some(1));
        assert!(!t.withdraw(p4(0x0A00_0000, 21)));
        assert!(t.withdraw(p4(0x0A00_0000, 8)));
        assert_eq!(t.lookup(0x0A00_0001), None);
        assert_eq!(t.group_stats()[0].expanded, 0);
    }

    #[test]
    fn shorter_announce_does_not_overwrite_captured_keys() {
        let mut t =
            BloomfwdControl::<u32>::build(Config::ipv4(), &[(p4(0xC000_0280, 25), 7)]).unwrap();
        t.announce(p4(0xC000_0200, 24), 5);
        t.announce(p4(0xC000_0000, 22), 4);
        assert_eq!(t.lookup(0xC000_0281), Some(7));
        assert_eq!(t.lookup(0xC000_0201), Some(5));
        assert_eq!(t.lookup(0xC000_0101), Some(4));
        t.announce(p4(0xC000_0200, 24), 6);
        assert_eq!(t.lookup(0xC000_0201), Some(6));
        assert_eq!(t.lookup(0xC000_0281), Some(7));
    }

    #[test]
    fn hash_table_backward_shift_keeps_every_key_reachable() {
        let hash = |k: u32| k & 0xf; // Many collisions on purpose.
        let mut t = HashTable::<u32>::with_capacity(8);
        for k in 0..200u32 {
            t.insert(k, k + 1, hash(k), &hash);
        }
        for k in (0..200u32).step_by(3) {
            assert!(t.remove(k, hash(k), &hash));
        }
        for k in 0..200u32 {
            let want = (k % 3 != 0).then_some(k + 1);
            assert_eq!(t.get(k, hash(k)), want, "key {k}");
        }
        assert!(!t.remove(0, hash(0), &hash));
    }

    /// Random inserts, replacements and removals against a `HashMap`, with
    /// a hash that sends every key to one of a few lines, so lines overflow
    /// into long runs and removals move keys back across many lines.
    fn hash_table_matches_map<K: GroupKey + std::hash::Hash>(key: impl Fn(u32) -> K) {
        use rand::{Rng, SeedableRng};
        let mut r = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        for homes in [1u32, 3, 16] {
            let hash = |k: K| {
                let x = k.to_u128();
                ((x as u32 ^ (x >> 64) as u32 ^ (x >> 96) as u32).wrapping_mul(0x9E37_79B9) >> 7)
                    % homes
            };
            let mut t = HashTable::<K>::with_capacity(4);
            let mut want = HashMap::new();
            for step in 0..4000 {
                let k = key(r.gen_range(0..300));
                if r.gen_bool(0.4) {
                    assert_eq!(t.remove(k, hash(k), &hash), want.remove(&k).is_some());
                } else {
                    let nh = r.gen_range(0..1000);
                    t.insert(k, nh, hash(k), &hash);
                    want.insert(k, nh);
                }
                assert_eq!(t.len, want.len());
                if step % 100 == 0 || step == 3999 {
                    for x in 0..300 {
                        let k = key(x);
                        assert_eq!(t.get(k, hash(k)), want.get(&k).copied(), "step {step}");
                        assert_eq!(t.probe_lines(k, hash(k)).0, want.contains_key(&k));
                    }
                }
            }
        }
    }

    #[test]
    fn hash_table_lines_match_a_map_v4() {
        hash_table_matches_map(|x| x.wrapping_mul(2_654_435_761));
    }

    #[test]
    fn hash_table_lines_match_a_map_v6() {
        hash_table_matches_map(|x| (x as u128) << 80 | 0x2001 << 112);
    }

    #[test]
    fn line4_find_sees_every_slot_and_skips_empty_ones() {
        let mut l = Line4::EMPTY;
        assert_eq!(l.find(0), (NO_ROUTE, true));
        for j in 0..8 {
            l.set(j, 100 + j as u32, j as u32);
        }
        for j in 0..8 {
            assert_eq!(l.find(100 + j as u32), (j as u32, false), "slot {j}");
        }
        assert_eq!(l.find(99), (NO_ROUTE, false));
        // An emptied slot keeps its stale key, which must not match.
        l.set_hop(5, NO_ROUTE);
        assert_eq!(l.find(105), (NO_ROUTE, true));
        assert_eq!(l.find(107), (7, true));
    }

    #[test]
    fn summary_follows_announce_and_withdraw() {
        use rand::{Rng, SeedableRng};
        let mut r = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(5);
        let mut t = BloomfwdControl::<u32>::build(Config::ipv4(), &[]).unwrap();
        let mut seen = [0usize; 3];
        let mut check = |t: &BloomfwdControl<u32>| {
            for (slot, d) in t.fwd.direct.iter().enumerate() {
                let st = t.fwd.summary_of(slot);
                assert_eq!(st, summary_state(d.groups), "slot {slot}");
                seen[st as usize] += 1;
            }
        };
        let mut live = Vec::new();
        for step in 0..3000 {
            if r.gen_bool(0.4) && !live.is_empty() {
                let p = live.swap_remove(r.gen_range(0..live.len()));
                t.withdraw(p);
            } else {
                // Crowd 10/8, so slots go from none to /24 to both and back.
                let a = 0x0A00_0000 | r.gen::<u32>() & 0xFF_FFFF;
                let len = if r.gen_bool(0.1) { 25..=32 } else { 17..=24 };
                let p = p4(a, r.gen_range(len));
                t.announce(p, r.gen_range(0..100));
                live.push(p);
            }
            if step % 500 == 0 {
                check(&t);
            }
        }
        check(&t);
        assert!(
            seen[SUM_FIRST as usize] > 100 && seen[SUM_MORE as usize] > 100,
            "{seen:?}"
        );
    }

    #[test]
    fn direct_masks_follow_announce_and_withdraw() {
        let mut t = BloomfwdControl::<u32>::build(
            Config::ipv4(),
            &[(p4(0x0A00_0000, 8), 1), (p4(0x0A00_1000, 24), 2)],
        )
        .unwrap();
        let slot = |a: u32| t.table().slot(a);
        let (s0, s1) = (slot(0x0A00_1001), slot(0x0A10_0001));
        assert_eq!(t.fwd.direct[s0].groups, 0b01);
        assert_eq!(t.fwd.direct[s1].groups, 0);
        t.announce(p4(0x0A00_1080, 25), 3);
        t.announce(p4(0x0A00_1100, 24), 4);
        assert_eq!(t.fwd.direct[s0].groups, 0b11);
        assert_eq!(t.lookup(0x0A00_1081), Some(3));
        assert_eq!(t.lookup(0x0A00_1101), Some(4));
        assert!(t.withdraw(p4(0x0A00_1080, 25)));
        assert_eq!(t.fwd.direct[s0].groups, 0b01);
        assert!(t.withdraw(p4(0x0A00_1000, 24)));
        assert_eq!(
            t.fwd.direct[s0].groups, 0b01,
            "the other /24 is still there"
        );
        assert!(t.withdraw(p4(0x0A00_1100, 24)));
        assert_eq!(t.fwd.direct[s0].groups, 0);
        assert!(t.slot_groups.is_empty());
        assert_eq!(t.lookup(0x0A00_1101), Some(1));
    }

    fn p6(a: u128, l: u8) -> Prefix<u128> {
        Prefix::new(a, l).unwrap()
    }

    /// An IPv6 address from its first 64 bits.
    fn a6(hi: u64) -> u128 {
        (hi as u128) << 64
    }

    #[test]
    fn dense_slot_sub_masks_follow_announce_and_withdraw() {
        // 2001::/16 gets keys in groups 32, 48 and 64 (three groups: the
        // slot is refined); 2001:0d00::/24 and 2001:0e00::/24 are its
        // sub-slots.
        let a = a6;
        let routes = [
            (p6(a(0x2001_0db8_0000_0000), 32), 1),
            (p6(a(0x2001_0db8_0001_0000), 48), 2),
            (p6(a(0x2001_0db8_0001_0002), 64), 3),
            (p6(a(0x2001_0e00_0000_0000), 32), 4),
        ];
        let mut t =
            BloomfwdControl::<u128>::build(Config::ipv6(vec![32, 48, 64]), &routes).unwrap();
        assert_eq!(t.table().refined_slots(), 1);
        let s = t.table().slot(a(0x2001_0db8_0000_0000));
        assert_ne!(t.fwd.direct[s].groups & FINE, 0);
        let cost = |t: &BloomfwdControl<u128>, hi: u64| t.table().probe_cost(a(hi));
        // Under 2001:0e00::/24 only the /32 group is probed.
        assert_eq!(cost(&t, 0x2001_0e00_0000_0001).groups, 1);
        assert_eq!(cost(&t, 0x2001_0db8_0005_0000).groups, 3);
        // No key at all under 2001:0f00::/24: the direct slot answers.
        assert_eq!(cost(&t, 0x2001_0f00_0000_0000).groups, 0);
        assert_eq!(t.lookup(a(0x2001_0f00_0000_0000)), None);
        t.announce(p6(a(0x2001_0f00_0000_0000), 64), 5);
        assert_eq!(cost(&t, 0x2001_0f00_0000_0000).groups, 1);
        assert_eq!(t.lookup(a(0x2001_0f00_0000_0000)), Some(5));
        assert!(t.withdraw(p6(a(0x2001_0f00_0000_0000), 64)));
        assert_eq!(cost(&t, 0x2001_0f00_0000_0000).groups, 0);
        assert!(t.withdraw(p6(a(0x2001_0db8_0001_0002), 64)));
        assert!(t.withdraw(p6(a(0x2001_0db8_0001_0000), 48)));
        assert_eq!(cost(&t, 0x2001_0db8_0001_0002).groups, 1);
        assert_eq!(t.lookup(a(0x2001_0db8_0001_0002)), Some(1));
        assert!(t.withdraw(p6(a(0x2001_0db8_0000_0000), 32)));
        assert!(t.withdraw(p6(a(0x2001_0e00_0000_0000), 32)));
        assert!(t.fine_groups.is_empty());
        // A refined sub-slot stays refined (the layout is the build's).
        assert!(t.fwd.fine.iter().all(|&m| m == 0 || m & !FINE == 0));
        assert!(t.fwd.fine2.iter().all(|&m| m == 0));
        assert!(t.fine2_groups.is_empty());
        assert_eq!(t.lookup(a(0x2001_0db8_0001_0002)), None);
    }

    /// The sub-sub-masks recomputed from the keys of every group (on a
    /// zeroed copy with the same layout) and their counts.
    fn fine2_from_keys(t: &BloomfwdControl<u128>) -> (Vec<u32>, HashMap<u64, u32>) {
        let mut want = vec![0u32; t.fwd.fine2.len()];
        let mut counts = HashMap::new();
        let geo = Fine2::of(&t.fwd);
        for (gi, c) in t.ctl.iter().enumerate() {
            for &key in c.exp.keys() {
                let k = (key, t.fwd.groups[gi].level, gi);
                geo.touch(&t.fwd.direct, &t.fwd.fine, &mut want, &mut counts, k, true);
            }
        }
        (want, counts)
    }

    #[test]
    fn dense_sub_slot_sub_sub_masks_follow_announce_and_withdraw() {
        // Under 2001:0d00::/24 keys in groups 24, 32 and 48: its slot and
        // its sub-slot are refined, and the sub-sub-masks split it per /32.
        let a = a6;
        let routes = [
            (p6(a(0x2001_0d00_0000_0000), 24), 1),
            (p6(a(0x2001_0db8_0000_0000), 32), 2),
            (p6(a(0x2001_0db8_0001_0000), 48), 3),
            (p6(a(0x2001_0e00_0000_0000), 32), 4),
            (p6(a(0x2001_0f00_0000_0000), 32), 5),
        ];
        let cfg = Config::ipv6(vec![24, 28, 32, 48]);
        let mut t = BloomfwdControl::<u128>::build(cfg, &routes).unwrap();
        assert_eq!(t.table().refined_slots(), 1);
        assert_eq!(t.table().refined_sub_slots(), 1);
        // The groups a lookup of `hi` may probe (bit j: group j).
        let mask = |t: &BloomfwdControl<u128>, hi: u64| {
            let f = t.table();
            f.mask_of(a(hi), f.direct[f.slot(a(hi))].groups)
        };
        let (g24, g28, g32, g48) = (1, 2, 4, 8);
        assert_eq!(mask(&t, 0x2001_0db8_0005_0000), g24 | g32 | g48);
        assert_eq!(t.table().probe_cost(a(0x2001_0db8_0005_0000)).fine, 2);
        // The /24 key covers every /32 under it.
        assert_eq!(mask(&t, 0x2001_0d01_0000_0000), g24);
        assert_eq!(t.lookup(a(0x2001_0d01_0000_0000)), Some(1));
        // A /28 covers 16 sub-sub-slots; a /48 one.
        t.announce(p6(a(0x2001_0d20_0000_0000), 28), 6);
        assert_eq!(mask(&t, 0x2001_0d2f_0000_0000), g24 | g28);
        assert_eq!(mask(&t, 0x2001_0d30_0000_0000), g24);
        assert_eq!(t.lookup(a(0x2001_0d2f_0000_0000)), Some(6));
        t.announce(p6(a(0x2001_0d31_0002_0000), 48), 7);
        assert_eq!(mask(&t, 0x2001_0d31_0000_0000), g24 | g48);
        assert_eq!(t.lookup(a(0x2001_0d31_0002_0000)), Some(7));
        assert_eq!(
            fine2_from_keys(&t),
            (t.fwd.fine2.to_vec(), t.fine2_groups.clone())
        );
        assert!(t.withdraw(p6(a(0x2001_0d20_0000_0000), 28)));
        assert_eq!(mask(&t, 0x2001_0d2f_0000_0000), g24);
        assert!(t.withdraw(p6(a(0x2001_0d31_0002_0000), 48)));
        assert!(t.withdraw(p6(a(0x2001_0d00_0000_0000), 24)));
        assert_eq!(mask(&t, 0x2001_0d01_0000_0000), 0);
        assert_eq!(mask(&t, 0x2001_0db8_0000_0000), g32 | g48);
        assert_eq!(t.lookup(a(0x2001_0d01_0000_0000)), None);
        assert_eq!(
            fine2_from_keys(&t),
            (t.fwd.fine2.to_vec(), t.fine2_groups.clone())
        );
        for (p, _) in routes.iter().skip(1) {
            assert!(t.withdraw(*p));
        }
        assert!(t.fwd.fine2.iter().all(|&m| m == 0));
        assert!(t.fine2_groups.is_empty());
    }

    #[test]
    fn probe_cost_counts_the_lines_a_lookup_reads() {
        let t = BloomfwdControl::<u32>::build(
            Config::ipv4(),
            &[(p4(0x0A00_0000, 8), 1), (p4(0x0A00_1000, 24), 2)],
        )
        .unwrap();
        let mut f = t.table().clone();
        f.set_probe(Probe::Masks);
        // No group key under the slot: the summary and the direct slot.
        let c = f.probe_cost(0x0B00_0000);
        assert_eq!((c.summary, c.direct, c.groups), (1, 1, 0));
        assert_eq!(c.lines(), 2);
        // Inside the /24, the only group under the slot: the summary sends
        // the batch to the /24 line alone.
        let c = f.probe_cost(0x0A00_1001);
        assert_eq!(
            (
                c.summary,
                c.direct,
                c.fine,
                c.groups,
                c.filters,
                c.table_lines
            ),
            (1, 0, 0, 1, 0, 1)
        );
        // Under the same slot but outside the /24: that line misses, then
        // the direct slot.
        let c = f.probe_cost(0x0A00_1201);
        assert_eq!((c.summary, c.direct, c.table_lines), (1, 1, 1));
        // Without the summary (the table hash is not the filter hash): the
        // direct slot, then the /24 group's filter and line.
        let mut cfg = Config::ipv4();
        cfg.table_hash = HashKind::Murmur3;
        let u = BloomfwdControl::<u32>::build(cfg, &[(p4(0x0A00_1000, 24), 2)]).unwrap();
        let c = u.table().probe_cost(0x0A00_1001);
        assert_eq!(
            (c.summary, c.direct, c.groups, c.filters, c.table_lines),
            (0, 1, 1, 1, 1)
        );
        // Filters first: both filters and the bucket, no direct slot.
        f.set_probe(Probe::FiltersFirst);
        let c = f.probe_cost(0x0A00_1001);
        assert_eq!((c.direct, c.filters), (0, 2));
        assert!(c.table_lines >= 1);
        assert_eq!(f.probe_cost(0x0B00_0000).direct, 1);
    }

    /// IPv6 batches skip the filters of small tables (`skips_filter`), and
    /// `probe_cost` says so.
    #[test]
    fn probe_cost_follows_the_ipv6_filter_rule() {
        let base = 0x2001_0db8u128 << 96;
        let routes = [(p6(base, 32), 1), (p6(base | 7u128 << 80, 48), 2)];
        let t = BloomfwdControl::<u128>::build(Config::ipv6(vec![32, 48]), &routes).unwrap();
        let mut f = t.table().clone();
        // Inside the /48: its group first, a hit (the /32 group is also
        // named, so the /48 group is not the last one).
        let a = base | 7u128 << 80 | 1;
        assert_eq!(f.lookup(a), Some(2));
        let c = f.probe_cost(a);
        assert_eq!((c.groups, c.filters, c.table_lines), (1, 0, 1));
        f.set_round_filter_min_bytes(0);
        let c = f.probe_cost(a);
        assert_eq!((c.groups, c.filters, c.table_lines), (1, 1, 1));
    }

    #[test]
    fn vector_filter_test_matches_the_scalar_one() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("no avx512f on this CPU: the vector test is not reachable here");
            return;
        }
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for k in 1..=8u8 {
            // Each bit set with probability 2^(-1/k), so a test passes
            // about half the time and both answers come up often.
            let mut f = BloomBits::new(4 * BLOCK_BITS, k);
            let q = (0.5f64.powf(1.0 / k as f64) * u32::MAX as f64) as u32;
            for b in 0..f.m {
                rng = crate::hash::mix64(rng);
                f.set(b, (rng as u32) < q);
            }
            let (mut yes, mut no) = (0, 0);
            for _ in 0..20_000 {
                rng = crate::hash::mix64(rng);
                let (h1, h2) = (rng as u32, (rng >> 32) as u32 | 1);
                let want = f.contains(h1, h2);
                // SAFETY: (1) avx512f was detected above.
                let got = unsafe { f.contains_avx512(h1, h2) };
                assert_eq!(got, want, "k {k}, {h1:#x} {h2:#x}");
                if want {
                    yes += 1;
                } else {
                    no += 1;
                }
            }
            assert!(yes > 100 && no > 100, "k {k}: {yes} in, {no} out");
        }
    }

    #[test]
    fn blocked_filter_keeps_every_key_in_one_block() {
        let f = BloomBits::sized(5_000, 0.01);
        for x in 0..2_000u32 {
            let (h1, h2) = pair32(HashKind::Murmur3, x);
            let b0 = f.index(h1, h2, 0) / BLOCK_BITS;
            let bits: Vec<u32> = (0..f.k).map(|i| f.index(h1, h2, i)).collect();
            assert!(bits.iter().all(|b| b / BLOCK_BITS == b0), "key {x}");
            let mut d = bits.clone();
            d.sort_unstable();
            d.dedup();
            assert_eq!(d.len(), bits.len(), "key {x}: positions must be distinct");
        }
    }

    #[test]
    fn invalid_configs_are_rejected() {
        let mut c = Config::ipv4();
        c.levels = vec![32, 24];
        assert!(matches!(c.validate(32), Err(ConfigError::BadLevels { .. })));
        c.levels = vec![20, 32];
        assert!(c.validate(32).is_err());
        c = Config::ipv4();
        c.fpr = 1.0;
        assert_eq!(c.validate(32), Err(ConfigError::BadFpr(1.0)));
        c = Config::ipv4();
        c.direct_bits = 25;
        assert!(c.validate(32).is_err());
    }

    #[test]
    fn filter_sizing_follows_the_paper_formula() {
        let f = BloomBits::sized(10_000, 0.01);
        // m = n lg(100) / ln 2 = 95851 bits, rounded up to whole 512-bit
        // blocks (188 blocks), k = round(6.64) = 7.
        assert_eq!(f.bits(), 188 * 512);
        assert_eq!(f.hashes(), 7);
        let f = BloomBits::sized(10_000, 0.3);
        assert_eq!(f.hashes(), 2);
    }
}
