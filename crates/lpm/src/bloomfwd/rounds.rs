//! Batched lookups of keys without batched hashing (IPv6) in rounds of
//! lane lists without data-dependent branches ([`Bloomfwd::rounds`]).

use super::{kind_of, prefetch, select, select_addr, Bloomfwd, GroupKey, Line, FINE};
use crate::addr::{NextHop, NO_ROUTE};

/// Lanes per chunk of [`Bloomfwd::rounds`].
const ROUND_CHUNK: usize = 64;

/// Addresses per segment of [`Bloomfwd::rounds`].
const ROUND_SEGMENT: usize = 1024;

/// [`Bloomfwd::rounds`] takes a segment in rounds only if at least 1 in
/// this many addresses of the segment before had a group to probe.
const ROUND_MIN_MASKED: usize = 8;

/// Entries of each per-lane array of [`RoundLanes`]: one per lane of a
/// chunk. Lane indices are taken `& (LANES - 1)` where they are read from
/// a list, so the compiler knows them in bounds (no bounds checks).
pub(super) const LANES: usize = ROUND_CHUNK;

const _: () = assert!(LANES.is_power_of_two() && LANES <= 256);

/// Per-chunk state of [`Bloomfwd::rounds`]: per lane, and lane lists.
pub(super) struct RoundLanes<A> {
    /// The chunk's addresses, and their next hops so far.
    pub(super) addrs: [A; LANES],
    pub(super) res: [NextHop; LANES],
    /// The key, hashes and group of the lane's current probe.
    pub(super) keys: [A; LANES],
    pub(super) h1: [u32; LANES],
    pub(super) h2: [u32; LANES],
    pub(super) group: [u8; LANES],
    /// The (sub-)mask word, then the groups left to probe.
    pub(super) masks: [u32; LANES],
    /// The sub-sub-mask index, then the table line index.
    pub(super) idx: [u32; LANES],
    /// Lane lists: lanes of this round, of the next round, lanes whose
    /// filter is tested, lanes whose bucket is read, lanes going on to the
    /// next line.
    pub(super) act: [u8; LANES],
    pub(super) next: [u8; LANES],
    pub(super) filter: [u8; LANES],
    pub(super) bucket: [u8; LANES],
    pub(super) more: [u8; LANES],
}

impl<A: Default + Copy> RoundLanes<A> {
    pub(super) fn new() -> Self {
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
pub(super) fn push_if(list: &mut [u8; LANES], n: &mut usize, i: u8, c: bool) {
    list[*n & (LANES - 1)] = i;
    *n += c as usize;
}

impl<A: GroupKey> Bloomfwd<A> {
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
    pub(super) fn rounds<const K: u8, const V: bool>(&self, addrs: &[A], out: &mut [NextHop]) {
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
    pub(super) fn round_segments<const K: u8>(
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
    pub(super) fn round_mask(&self, s: &RoundLanes<A>, i: usize, all: u32) -> u32 {
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
    pub(super) fn round_slots(&self, ca: &[A], next: &[A], s: &mut RoundLanes<A>) {
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
    pub(super) unsafe fn rounds_avx512<const K: u8>(&self, addrs: &[A], out: &mut [NextHop]) {
        self.rounds::<K, true>(addrs, out)
    }
}
