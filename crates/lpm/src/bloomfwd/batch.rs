//! Batched lookups of keys with batched hashing (IPv4): per chunk of
//! [`CHUNK`] lanes, the direct slots or the 2-bit summary first, then the
//! lanes whose slot names groups, group by group (see
//! [`Bloomfwd::lookup_batch`]).

use std::any::TypeId;

use super::{
    group_bit, last_named, prefetch, Bloomfwd, Direct, Group, GroupKey, CHUNK, SUM_FIRST, SUM_MORE,
    SUM_NONE,
};
use crate::addr::NextHop;
use crate::hash::{HashKind, Simd};

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
    pub(super) fn new() -> Self {
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
pub(super) struct Scratch<A> {
    keys: [A; CHUNK],
    h1: [u32; CHUNK],
    h2: [u32; CHUNK],
    th: [u32; CHUNK],
    masks: [u32; CHUNK],
    /// Lanes of the chunk per mask bit (all zero between chunks).
    by_bit: [u64; 32],
}

impl<A: Default + Copy> Scratch<A> {
    pub(super) fn new() -> Self {
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

/// `x` as IPv4 keys when `A` is `u32`, else `None` (the check is on
/// types, so it folds away once `A` is known).
fn as_u32<A: 'static>(x: &[A]) -> Option<&[u32]> {
    (TypeId::of::<A>() == TypeId::of::<u32>()).then(|| {
        // SAFETY: (1) `A` is `u32` (same `TypeId`), so this is the slice
        // itself, same pointer, length and lifetime.
        unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<u32>(), x.len()) }
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

impl<A: GroupKey> Bloomfwd<A> {
    /// [`Self::lookup_batch`] for tables whose table hash is not the filter
    /// hash (or without groups): per chunk, the direct slots (prefetched a
    /// chunk ahead, one lane's prefetch per lane processed), then the lanes
    /// whose slot names groups, group by group ([`Self::resolve_rest`]).
    pub(super) fn batch_direct(&self, addrs: &[A], out: &mut [NextHop], s: &mut Scratch<A>) {
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
    pub(super) fn batch_summary<const V: bool>(
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
    pub(super) fn vector_look_ahead(&self, g0: &Group<A>) -> bool {
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
    pub(super) unsafe fn batch_summary_avx512(
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
}
