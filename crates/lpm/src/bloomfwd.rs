//! Bloomfwd: per-length-group Bloom filters in front of hash tables, with
//! controlled prefix expansion (paper sections 3.2, 4.1, 4.2).
//!
//! One generic implementation serves IPv4 and IPv6 ([`Address`]):
//!
//! * a **direct array** of `2^d` next hops covers every prefix of length
//!   `<= d` (IPv4: `d = 20`, the paper's DLA; IPv6: `d = 0`, a single slot
//!   that holds the default route);
//! * **groups** at increasing levels `L1 < L2 < ...` (IPv4: 24 and 32;
//!   IPv6: chosen by [`crate::dpcpe`]). Group `Lj` holds every prefix whose
//!   length lies in `(L(j-1), Lj]`, expanded to length `Lj`; where two
//!   expanded prefixes collide the longer original wins (prefix capture).
//!   A group is a Bloom filter (bits only; the counters live on the control
//!   side) plus an open-addressing hash table of `(key, next hop)`.
//!
//! A lookup probes the groups from the longest level down; the first group
//! whose filter passes and whose table holds the key answers, else the
//! direct array does. Filters use double hashing `g_i = h1 + i*h2`; the
//! table is addressed with `h1` again when it uses the filter's hash kind.
//!
//! [`Bloomfwd`] is the hot, read-only part; [`BloomfwdControl`] owns it and
//! keeps the RIB, the counting-filter counters and the expansion map needed
//! to announce and withdraw routes at run time.

use hashbrown::HashMap;

use crate::addr::{Address, NextHop, Prefix, NO_ROUTE};
use crate::hash::{pair32_batch, HashKind, KeyHash, Simd};
use crate::rib::Rib;

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
    /// Hash a batch of keys (the default is one at a time).
    fn pair_batch(kind: HashKind, keys: &[Self], h1: &mut [u32], h2: &mut [u32], simd: Simd) {
        let _ = simd;
        for ((k, a), b) in keys.iter().zip(h1.iter_mut()).zip(h2.iter_mut()) {
            (*a, *b) = k.pair(kind);
        }
    }
}

impl GroupKey for u32 {
    fn pair_batch(kind: HashKind, keys: &[u32], h1: &mut [u32], h2: &mut [u32], simd: Simd) {
        pair32_batch(kind, keys, h1, h2, simd);
    }
}

impl GroupKey for u128 {}

// ---------------------------------------------------------------- filter

/// The bit vector of a (counting) Bloom filter: the part lookups read.
#[derive(Clone, Debug)]
pub struct BloomBits {
    words: Box<[u64]>,
    m: u32,
    k: u8,
}

impl BloomBits {
    /// `m` bits (at least 64), `k` hashes (at least 1).
    fn new(m: u32, k: u8) -> Self {
        let m = m.max(64);
        BloomBits {
            words: vec![0u64; m.div_ceil(64) as usize].into_boxed_slice(),
            m,
            k: k.max(1),
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

    #[inline(always)]
    fn index(&self, h1: u32, h2: u32, i: u8) -> u32 {
        reduce(h1.wrapping_add((i as u32).wrapping_mul(h2)), self.m)
    }

    /// Whether all `k` bits of the key are set.
    #[inline(always)]
    pub fn contains(&self, h1: u32, h2: u32) -> bool {
        (0..self.k).all(|i| {
            let b = self.index(h1, h2, i);
            self.words[(b >> 6) as usize] >> (b & 63) & 1 == 1
        })
    }

    #[inline(always)]
    fn prefetch(&self, h1: u32) {
        let b = reduce(h1, self.m);
        prefetch(&self.words[(b >> 6) as usize]);
    }

    fn set(&mut self, b: u32, v: bool) {
        let w = &mut self.words[(b >> 6) as usize];
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
}

// ---------------------------------------------------------------- table

/// One hash-table slot; `next_hop == NO_ROUTE` marks it empty.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Slot<K> {
    key: K,
    next_hop: NextHop,
}

const _: () = assert!(std::mem::size_of::<Slot<u32>>() == 8);

/// Open addressing with linear probing and backward-shift deletion;
/// power-of-two capacity, load at most 3/4.
#[derive(Clone, Debug)]
struct HashTable<K> {
    slots: Box<[Slot<K>]>,
    mask: u32,
    len: usize,
}

impl<K: GroupKey> HashTable<K> {
    fn with_capacity(n: usize) -> Self {
        // Load at most 1/2 after a build, so runs of probes stay short.
        let cap = (n.max(4) * 2).next_power_of_two();
        HashTable {
            slots: vec![
                Slot {
                    key: K::default(),
                    next_hop: NO_ROUTE
                };
                cap
            ]
            .into_boxed_slice(),
            mask: (cap - 1) as u32,
            len: 0,
        }
    }

    #[inline(always)]
    fn get(&self, key: K, h: u32) -> Option<NextHop> {
        let mut i = h & self.mask;
        loop {
            let s = &self.slots[i as usize];
            if s.next_hop == NO_ROUTE {
                return None;
            }
            if s.key == key {
                return Some(s.next_hop);
            }
            i = (i + 1) & self.mask;
        }
    }

    #[inline(always)]
    fn prefetch(&self, h: u32) {
        prefetch(&self.slots[(h & self.mask) as usize]);
    }

    fn find(&self, key: K, h: u32) -> Result<usize, usize> {
        let mut i = h & self.mask;
        loop {
            let s = &self.slots[i as usize];
            if s.next_hop == NO_ROUTE {
                return Err(i as usize);
            }
            if s.key == key {
                return Ok(i as usize);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Insert or replace.
    fn insert(&mut self, key: K, nh: NextHop, h: u32, hash: &impl Fn(K) -> u32) {
        debug_assert_ne!(nh, NO_ROUTE);
        match self.find(key, h) {
            Ok(i) => self.slots[i].next_hop = nh,
            Err(i) => {
                self.slots[i] = Slot { key, next_hop: nh };
                self.len += 1;
                if self.len * 4 > self.slots.len() * 3 {
                    self.grow(hash);
                }
            }
        }
    }

    fn grow(&mut self, hash: &impl Fn(K) -> u32) {
        let mut bigger = HashTable::with_capacity(self.slots.len());
        for s in self.slots.iter().filter(|s| s.next_hop != NO_ROUTE) {
            if let Err(i) = bigger.find(s.key, hash(s.key)) {
                bigger.slots[i] = *s;
                bigger.len += 1;
            }
        }
        *self = bigger;
    }

    fn remove(&mut self, key: K, h: u32, hash: &impl Fn(K) -> u32) -> bool {
        let Ok(mut hole) = self.find(key, h) else {
            return false;
        };
        self.len -= 1;
        let mask = self.mask as usize;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let s = self.slots[j];
            if s.next_hop == NO_ROUTE {
                break;
            }
            let home = (hash(s.key) & self.mask) as usize;
            // Move s into the hole when its home is not cyclically in (hole, j].
            let dist_home = j.wrapping_sub(home) & mask;
            let dist_hole = j.wrapping_sub(hole) & mask;
            if dist_home >= dist_hole {
                self.slots[hole] = s;
                hole = j;
            }
        }
        self.slots[hole].next_hop = NO_ROUTE;
        true
    }

    fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.slots)
    }
}

// ---------------------------------------------------------------- config

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

    /// IPv6 with the given levels (see [`crate::dpcpe`]): default route in a
    /// one-slot direct array, Murmur3 in both stages, 30% target.
    pub fn ipv6(levels: Vec<u8>) -> Self {
        Config {
            direct_bits: 0,
            levels,
            fpr: 0.3,
            filter_hash: HashKind::Murmur3,
            table_hash: HashKind::Murmur3,
            max_expansion_bits: 16,
        }
    }

    /// IPv6 with levels chosen by DPCPE for the prefix-length counts of
    /// `routes` with at most `n` levels ([`crate::dpcpe::choose_levels`]);
    /// the default configuration's levels when there is nothing to expand.
    pub fn ipv6_dpcpe<A: Address>(routes: &[(Prefix<A>, NextHop)], n: usize) -> Self {
        let mut counts = vec![0u64; A::BITS as usize + 1];
        let mut seen = hashbrown::HashSet::new();
        for &(p, _) in routes {
            if seen.insert(p) {
                counts[p.len() as usize] += 1;
            }
        }
        let levels = crate::dpcpe::choose_levels(&counts, 0, n)
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
struct Group<A> {
    level: u8,
    filter: BloomBits,
    table: HashTable<A>,
}

/// The lookup structure (read-only for lookups; `Sync`, so any number of
/// threads may look up through a shared reference).
#[derive(Clone, Debug)]
pub struct Bloomfwd<A> {
    direct: Box<[NextHop]>,
    direct_bits: u8,
    groups: Vec<Group<A>>,
    filter_hash: HashKind,
    table_hash: HashKind,
    reuse: bool,
    simd: Simd,
}

/// Lanes per batch step of [`Bloomfwd::lookup_batch`].
const CHUNK: usize = 32;

impl<A: GroupKey> Bloomfwd<A> {
    #[inline(always)]
    fn table_hash_of(&self, key: A, h1: u32) -> u32 {
        if self.reuse {
            h1
        } else {
            key.pair(self.table_hash).0
        }
    }

    /// Longest-prefix match of one address.
    #[inline]
    pub fn lookup(&self, a: A) -> Option<NextHop> {
        for g in self.groups.iter().rev() {
            let key = a.top(g.level);
            let (h1, h2) = key.pair(self.filter_hash);
            if g.filter.contains(h1, h2) {
                if let Some(nh) = g.table.get(key, self.table_hash_of(key, h1)) {
                    return Some(nh);
                }
            }
        }
        let v = self.direct[a.top(self.direct_bits).to_u128() as usize];
        (v != NO_ROUTE).then_some(v)
    }

    /// Look up `addrs` into `out` (same length; [`NO_ROUTE`] where no route
    /// matches); returns the number of hits. Hashing is batched (SIMD for
    /// IPv4 keys) and filter words and table buckets are prefetched.
    pub fn lookup_batch(&self, addrs: &[A], out: &mut [NextHop]) -> usize {
        let n = addrs.len().min(out.len());
        let mut hits = 0;
        let mut keys = [A::default(); CHUNK];
        let mut h1 = [0u32; CHUNK];
        let mut h2 = [0u32; CHUNK];
        let mut th = [0u32; CHUNK];
        for (addrs, out) in addrs[..n].chunks(CHUNK).zip(out[..n].chunks_mut(CHUNK)) {
            let c = addrs.len();
            for a in addrs {
                prefetch(&self.direct[a.top(self.direct_bits).to_u128() as usize]);
            }
            let mut pending: u64 = if c == 64 { u64::MAX } else { (1u64 << c) - 1 };
            for g in self.groups.iter().rev() {
                if pending == 0 {
                    break;
                }
                for (k, a) in keys.iter_mut().zip(addrs) {
                    *k = a.top(g.level);
                }
                A::pair_batch(
                    self.filter_hash,
                    &keys[..c],
                    &mut h1[..c],
                    &mut h2[..c],
                    self.simd,
                );
                let mut p = pending;
                while p != 0 {
                    let i = p.trailing_zeros() as usize;
                    p &= p - 1;
                    g.filter.prefetch(h1[i]);
                }
                let mut cand = 0u64;
                let mut p = pending;
                while p != 0 {
                    let i = p.trailing_zeros() as usize;
                    p &= p - 1;
                    if g.filter.contains(h1[i], h2[i]) {
                        cand |= 1 << i;
                        th[i] = self.table_hash_of(keys[i], h1[i]);
                        g.table.prefetch(th[i]);
                    }
                }
                while cand != 0 {
                    let i = cand.trailing_zeros() as usize;
                    cand &= cand - 1;
                    if let Some(nh) = g.table.get(keys[i], th[i]) {
                        out[i] = nh;
                        pending &= !(1 << i);
                        hits += 1;
                    }
                }
            }
            while pending != 0 {
                let i = pending.trailing_zeros() as usize;
                pending &= pending - 1;
                let v = self.direct[addrs[i].top(self.direct_bits).to_u128() as usize];
                out[i] = v;
                hits += (v != NO_ROUTE) as usize;
            }
        }
        hits
    }

    /// [`Self::lookup_batch`] split over `threads` scoped threads that share
    /// this table read-only (each takes a contiguous slice of `addrs`).
    pub fn lookup_parallel(&self, addrs: &[A], out: &mut [NextHop], threads: usize) -> usize {
        let n = addrs.len().min(out.len());
        let per = n.div_ceil(threads.max(1)).max(1);
        std::thread::scope(|s| {
            let handles: Vec<_> = addrs[..n]
                .chunks(per)
                .zip(out[..n].chunks_mut(per))
                .map(|(a, o)| s.spawn(move || self.lookup_batch(a, o)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
        })
    }

    /// The batched-hashing path in use.
    pub fn simd(&self) -> Simd {
        self.simd
    }

    /// Choose the batched-hashing path (a path the CPU lacks runs scalar).
    pub fn set_simd(&mut self, simd: Simd) {
        self.simd = simd;
    }

    /// Bytes read by lookups: direct array, filters and tables.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.direct)
            + self
                .groups
                .iter()
                .map(|g| std::mem::size_of_val(&*g.filter.words) + g.table.bytes())
                .sum::<usize>()
    }
}

// ---------------------------------------------------------------- control

/// Per-group control state.
#[derive(Clone, Debug)]
struct GroupCtl<A> {
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
pub struct BloomfwdControl<A> {
    cfg: Config,
    rib: Rib<A>,
    direct_len: Vec<u8>,
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
        let mut direct = vec![NO_ROUTE; 1usize << d];
        let mut direct_len = vec![NO_LEN; 1usize << d];
        let mut exps: Vec<HashMap<A, (NextHop, u8)>> =
            cfg.levels.iter().map(|_| HashMap::new()).collect();
        for (p, nh) in rib.sorted() {
            if p.len() <= d {
                let base = (p.bits().to_u128() as usize) << (d - p.len());
                for s in base..base + (1usize << (d - p.len())) {
                    direct[s] = nh;
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
        let fwd = Bloomfwd {
            direct: direct.into_boxed_slice(),
            direct_bits: d,
            groups,
            filter_hash: cfg.filter_hash,
            table_hash: cfg.table_hash,
            reuse,
            simd: Simd::detect(),
        };
        BloomfwdControl {
            cfg,
            rib,
            direct_len,
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
                    self.fwd.direct[s] = nh;
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
                let simd = self.fwd.simd;
                let cfg = self.cfg.clone();
                let rib = std::mem::take(&mut self.rib);
                *self = Self::from_rib(cfg, rib);
                self.fwd.simd = simd;
                return true;
            }
        };
        let level = self.fwd.groups[gi].level;
        let th = self.table_hash_fn();
        let fk = self.cfg.filter_hash;
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
                    self.fwd.direct[s] = nh;
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
                filter_bytes: std::mem::size_of_val(&*g.filter.words),
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
        // m = n lg(100) / ln 2 = 95851 bits, k = round(6.64) = 7.
        assert_eq!(f.bits(), 95_851);
        assert_eq!(f.hashes(), 7);
        let f = BloomBits::sized(10_000, 0.3);
        assert_eq!(f.hashes(), 2);
    }
}
