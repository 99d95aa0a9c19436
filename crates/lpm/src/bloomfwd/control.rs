//! The control part ([`BloomfwdControl`]): builds a [`Bloomfwd`] from a
//! RIB and keeps what announcing and withdrawing routes at run time needs
//! (the RIB, the counting-filter counters, the per-slot group counts and
//! the expansion map).

use hashbrown::HashMap;

use nexthop_mem::HugeBox;

use super::{
    expansion, fine_bits_for, group_bit, set_summary, summary_words, BloomBits, Bloomfwd, Config,
    ConfigError, Direct, Group, GroupKey, HashTable, Probe, FINE, FINE_MIN_GROUPS, MAX_FINE_BITS,
    ROUND_FILTER_MIN_LINES,
};
use crate::addr::{Address, NextHop, Prefix, NO_ROUTE};
use crate::hash::Simd;
use crate::rib::Rib;

/// Per-group control state.
#[derive(Clone, Debug)]
pub(super) struct GroupCtl<A: GroupKey> {
    /// Shortest original length this group holds (previous level + 1).
    pub(super) lo: u8,
    /// Counting-filter counters, one per filter bit.
    pub(super) counters: Vec<u16>,
    /// Expanded key -> (next hop, original prefix length).
    pub(super) exp: HashMap<A, (NextHop, u8)>,
    /// Key count the filter was sized for.
    pub(super) sized_for: usize,
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
    pub(super) cfg: Config,
    pub(super) rib: Rib<A>,
    pub(super) direct_len: Vec<u8>,
    /// Keys per (direct slot, group mask bit) ([`slot_group_key`]): a
    /// slot's mask bit is cleared when its count drops to zero.
    pub(super) slot_groups: HashMap<u64, u32>,
    /// Keys per (sub-slot, group mask bit) under refined slots
    /// ([`fine_group_key`]): a sub-mask bit is cleared when its count
    /// drops to zero.
    pub(super) fine_groups: HashMap<u64, u32>,
    /// Keys per (sub-sub-slot, group) under the refined sub-slots, as
    /// `fine_groups` (a key shorter than the sub-sub-slots counts in each
    /// one it covers).
    pub(super) fine2_groups: HashMap<u64, u32>,
    pub(super) ctl: Vec<GroupCtl<A>>,
    pub(super) fwd: Bloomfwd<A>,
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

/// The direct slot of a group key of `level` bits (`level > d`): its first
/// `d` bits (none, slot 0, for `d = 0` at `level = 128`, where a plain
/// shift would overflow).
#[inline]
fn slot_of<A: Address>(key: A, level: u8, d: u8) -> usize {
    key.to_u128().checked_shr(u32::from(level - d)).unwrap_or(0) as usize
}

/// The `slot_groups` key of (direct slot, group `gi`'s mask bit).
fn slot_group_key(slot: usize, gi: usize) -> u64 {
    (slot as u64) << 5 | gi.min(30) as u64
}

/// The sub-slot (first `fd` address bits) of a group key of `level >= fd`
/// bits.
#[inline]
fn fine_of<A: Address>(key: A, level: u8, fd: u8) -> usize {
    key.to_u128()
        .checked_shr(u32::from(level - fd))
        .unwrap_or(0) as usize
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
pub(super) struct Fine2 {
    d: u8,
    fine_bits: u8,
    fine2_bits: u8,
}

impl Fine2 {
    pub(super) fn of<A: GroupKey>(t: &Bloomfwd<A>) -> Self {
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
    pub(super) fn touch<A: Address>(
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
