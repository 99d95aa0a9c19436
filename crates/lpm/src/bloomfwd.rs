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

use crate::addr::{Address, NextHop, Prefix, NO_ROUTE};
use crate::hash::{pair32, pair32_batch, HashKind, KeyHash, Simd};
use nexthop_mem::{prefetch, HugeBox};

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

mod batch;
mod config;
mod control;
mod filter;
mod filters_first;
mod rounds;
mod table;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
mod wide;

pub use config::{length_counts, Config, ConfigError, V6_DIRECT_BITS};
pub use control::{BloomfwdControl, GroupStats};
pub use filter::BloomBits;
pub use table::{Line, Line4, Line6};

use batch::Scratch;
use filter::BLOCK_BITS;
use table::HashTable;

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

/// [`Bloomfwd::rounds`] tests a group's filter only when its table has
/// more lines than this (4 MiB; [`Bloomfwd::set_round_filter_min_bytes`]
/// changes it): a smaller table stays cached with the
/// rest of the IPv6 structure, a round's prefetch hides its bucket's
/// latency, and comparing a bucket costs fewer instructions than testing
/// the filter and then comparing the bucket when it passes. On the 2015
/// IPv6 table (no group's table above 4 MiB), `lpm_probe v6 inside|zipf
/// 10 0.01 200000`, five alternating rounds each: 36.1 ns per batched
/// lookup (median) against 38.7 with the filters of every group but the
/// last one named (inside), 41.7 against 43.5 (Zipf), commit `1d62df4`.
const ROUND_FILTER_MIN_LINES: u32 = (4 << 20) / 64;

/// Addresses per share of [`Bloomfwd::lookup_parallel`]: 16,384 (256 KiB
/// of IPv6 addresses; 40–250 µs of lookups at 2.5–15 ns each, against a
/// counter increment and an uncontended lock to claim one).
pub const PARALLEL_SHARE: usize = 1 << 14;

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
    /// 34.8-35.1 ns per batched lookup against 36.3-37.9, commit `2d05b84`).
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
