//! The lookup side of the name FIB: binary search of hash tables organised
//! by component count (dissertation §3.3), plus the linear-search baseline
//! (§3.4.2) over the same tables.
//!
//! [`Fib`] holds only what a lookup reads: one [`Table`] per component
//! count, the entry arena, the interned next-hop sets and the hash key.
//! Updates go through [`crate::FibControl`], which owns a `Fib`.

use nexthop_wire::ndn::name::prefix_hash_seed;
use nexthop_wire::ndn::Name;

use crate::error::FibError;
use crate::hasher::{PrefixHasher, Strategy};
use crate::name::{NameSlice, NameView};
use crate::nexthop::{NextHop, NhTable, NH_NONE};
use crate::table::{fingerprint, Table, SLOTS};

/// Most component counts (hash tables) a FIB may have.
pub const MAX_LEVELS: usize = 64;

/// Validated FIB configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Largest number of components of a rule (`k`); `1..=64`. Lookups
    /// take at most `ceil(log2(k + 1))` hash probes (without a fallback).
    pub max_components: usize,
    /// String-matching strategy and hash family.
    pub strategy: Strategy,
    /// Hash seed / SipHash key (keep it secret for `VerifyAtEnd`). The
    /// default is `(prefix_hash_seed(), ..)`: `VerifyEach` then probes on
    /// the chain a decoded wire name caches, under the process's secret
    /// seed, so a FIB file written with the default key is read back by
    /// another process with the same answers, its lookups hashing the
    /// names under the file's key.
    pub key: (u64, u64),
    /// Keys per home bucket before a table grows (1..=9, the slots of a
    /// bucket; the dissertation allocates `n/4` buckets for `n` keys: 4,
    /// with 7 slots of 8 bytes; with 9 slots of 6 bytes the default is 6,
    /// which leaves about 8% of home buckets with an overflow bucket).
    pub bucket_fill: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_components: 16,
            strategy: Strategy::VerifyEach,
            key: (prefix_hash_seed(), 0x2d73_6970_6861_7368),
            bucket_fill: 6,
        }
    }
}

impl Config {
    /// Check the ranges.
    pub fn validate(&self) -> Result<(), FibError> {
        if !(1..=MAX_LEVELS).contains(&self.max_components) {
            return Err(FibError::Config(format!(
                "max_components must be in 1..={MAX_LEVELS}, got {}",
                self.max_components
            )));
        }
        if !(1..=SLOTS as u32).contains(&self.bucket_fill) {
            return Err(FibError::Config(format!(
                "bucket_fill must be in 1..={SLOTS}, got {}",
                self.bucket_fill
            )));
        }
        Ok(())
    }
}

/// Balanced binary search tree over levels `1..=k` (Fig. 3.1): level `m`
/// of range `lo..=hi` is `(lo + hi) / 2`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchTree {
    pub(crate) root: u8,
    /// `left[l]`, `right[l]` for level `l` (0 = none); index 0 unused.
    pub(crate) left: Vec<u8>,
    pub(crate) right: Vec<u8>,
}

impl SearchTree {
    /// The tree over `1..=k`.
    pub fn new(k: usize) -> SearchTree {
        SearchTree::new_range(1, k, k)
    }

    /// The balanced tree over levels `lo..=hi` of a FIB of `k` levels
    /// (level pulling searches `p + 1..=k` below a pulled prefix of `p`).
    pub fn new_range(lo: usize, hi: usize, k: usize) -> SearchTree {
        fn build(lo: usize, hi: usize, l: &mut [u8], r: &mut [u8]) -> u8 {
            if lo > hi {
                return 0;
            }
            let m = (lo + hi) / 2;
            l[m] = if m > lo { build(lo, m - 1, l, r) } else { 0 };
            r[m] = build(m + 1, hi, l, r);
            m as u8
        }
        let mut left = vec![0u8; k + 1];
        let mut right = vec![0u8; k + 1];
        let root = build(lo.max(1), hi.min(k), &mut left, &mut right);
        SearchTree { root, left, right }
    }

    /// Levels visited when searching for a key of exactly `l` components
    /// whose ancestors all match: the marker levels (ancestors `< l`), then
    /// `l` itself last.
    pub fn path(&self, l: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut n = self.root as usize;
        while n != 0 {
            if n == l {
                out.push(n as u8);
                break;
            }
            if n < l {
                out.push(n as u8);
                n = self.right[n] as usize;
            } else {
                n = self.left[n] as usize;
            }
        }
        out
    }

    /// Depth of the tree: `ceil(log2(k + 1))`.
    pub fn depth(&self) -> usize {
        fn d(t: &SearchTree, n: u8) -> usize {
            if n == 0 {
                0
            } else {
                1 + d(t, t.left[n as usize]).max(d(t, t.right[n as usize]))
            }
        }
        d(self, self.root)
    }
}

/// The result of a lookup: how many components of the name matched and
/// the next-hop set of that prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Match {
    /// Components of the longest matching prefix (0 = the default route `/`).
    pub len: usize,
    /// Next-hop set id; resolve with [`Fib::next_hops`].
    pub nh: u32,
}

/// What one lookup cost: hash-table probes, bucket reads (home and
/// overflow), string verifications, and whether a false positive made a
/// `VerifyAtEnd` lookup fall back to verifying every match.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// Hash tables probed (in all passes).
    pub probes: u32,
    /// Buckets read.
    pub bucket_reads: u32,
    /// Stored strings compared.
    pub verifies: u32,
    /// A `VerifyAtEnd` search hit a false positive and ran again.
    pub fallback: bool,
    /// Level pulling: probes of the small pulled-prefix table (kept in
    /// cache; not counted in `probes`).
    pub pull_probes: u32,
    /// Level pulling: components of the pulled prefix the search started
    /// below (0 = none).
    pub pulled: u32,
}

/// Hasher for keys that already are uniform 64-bit hashes (the pulled
/// prefix table is keyed by prefix hash): returns the key itself.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PassThrough(u64);

impl std::hash::Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// Level pulling (dissertation §4.1): prefixes with many next-level
/// suffixes sit in a small table consulted first; a name below one of them
/// is searched only over the longer levels, with a tree of its own.
#[derive(Clone, Debug, Default)]
pub(crate) struct Pull {
    /// Prefix hash -> `(level, entry)` of pulled prefixes (they are
    /// permanent keys of the main tables, so their strings and inherited
    /// next hops live there).
    pub(crate) map:
        std::collections::HashMap<u64, Vec<(u8, u64)>, std::hash::BuildHasherDefault<PassThrough>>,
    pub(crate) max_level: usize,
    /// `trees[p]`: the search tree over `p + 1..=k` (for pulled levels `p`).
    pub(crate) trees: Vec<Option<SearchTree>>,
}

/// Names per group of the batched lookups.
pub const BATCH: usize = 16;

/// One group's prefix hashes (`[i][l - 1]`: name `i`, `l` components).
type GroupHashes = [[u64; MAX_LEVELS]; BATCH];

/// Reused buffers of [`Fib::lookup_batch_tlv`]: the component end offsets
/// and prefix hashes of one group of names.
#[derive(Clone, Debug)]
pub struct BatchScratch {
    ends: [Vec<u32>; BATCH],
    hashes: Box<GroupHashes>,
}

impl Default for BatchScratch {
    fn default() -> BatchScratch {
        BatchScratch {
            ends: Default::default(),
            hashes: Box::new([[0; MAX_LEVELS]; BATCH]),
        }
    }
}

impl BatchScratch {
    /// Empty buffers (they grow to the longest names seen, once).
    pub fn new() -> BatchScratch {
        BatchScratch::default()
    }
}

/// What [`Fib::lookup_batch_tlv`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchResult {
    /// Names that matched a rule (the default route included).
    pub hits: usize,
    /// Names that were not valid name TLV (their output is `None`).
    pub invalid: usize,
}

/// Prefetching in [`Fib::lookup_batch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefetch {
    /// No prefetch.
    None,
    /// Prefetch the first-visited (root level) bucket of every name.
    First,
    /// Prefetch the home bucket of every level a name can visit; in
    /// [`Fib::lookup_batch`] and [`Fib::lookup_batch_tlv`] also, once the
    /// group's buckets were asked for, the entries along the path the
    /// home buckets' fingerprints predict (what the string checks read).
    All,
}

/// Entry layout in the arena (8-byte words; an entry reference is the
/// index of its first word):
/// ```text
/// word 0 : str_len:16 | nroles:8 | ncomp:8 | refcnt:32
/// then   : nroles role values, u32 each = bmp_len:8 | nh:24; role `i`
///          belongs to level `path(ncomp)[i]` of the search tree
/// then   : the string (component TLVs), zero-padded to a word
/// ```
/// The role levels are not stored: they are the search-tree path of the
/// entry's component count (`Fib::role_idx` maps a level to its role).
pub(crate) mod entry {
    pub const HDR: usize = 0;
    /// Byte offset of the roles from the entry start.
    pub const ROLES_BYTE: usize = 8;
    /// Words of an entry with a string of `str_len` bytes and `nroles` roles.
    pub fn words(str_len: usize, nroles: usize) -> usize {
        (ROLES_BYTE + 4 * nroles + str_len).div_ceil(8)
    }
    /// Byte offset of the string from the entry start.
    pub fn str_byte(nroles: usize) -> usize {
        ROLES_BYTE + 4 * nroles
    }
    /// `(str_len, nroles, ncomp)` of a header word.
    #[inline(always)]
    pub fn split(hdr: u64) -> (usize, usize, usize) {
        (
            (hdr & 0xFFFF) as usize,
            ((hdr >> 16) & 0xFF) as usize,
            ((hdr >> 24) & 0xFF) as usize,
        )
    }
}

/// `role_idx[ncomp * (k + 1) + level]`: the role index of `level` in an
/// entry of `ncomp` components (its position in `tree.path(ncomp)`), or
/// `NO_ROLE`.
pub(crate) const NO_ROLE: u8 = u8::MAX;

pub(crate) fn role_index_table(tree: &SearchTree, k: usize) -> Vec<u8> {
    let mut t = vec![NO_ROLE; (k + 1) * (k + 1)];
    for ncomp in 1..=k {
        for (i, &l) in tree.path(ncomp).iter().enumerate() {
            t[ncomp * (k + 1) + l as usize] = i as u8;
        }
    }
    t
}

/// The lookup structure.
#[derive(Clone, Debug)]
pub struct Fib {
    pub(crate) cfg: Config,
    pub(crate) hasher: PrefixHasher,
    pub(crate) tree: SearchTree,
    /// `tables[l - 1]` holds keys of `l` components.
    pub(crate) tables: Vec<Table>,
    /// Role index of a level per component count (see [`role_index_table`]).
    pub(crate) role_idx: Vec<u8>,
    pub(crate) entries: Vec<u64>,
    pub(crate) nh: NhTable,
    /// Next-hop set of the root prefix `/` (`NH_NONE` when absent).
    pub(crate) default_nh: u32,
    /// Level pulling state (`None`: off).
    pub(crate) pull: Option<Pull>,
}

/// Where a FIB's bytes go ([`Fib::memory`]). `total_bytes` =
/// buckets + entry headers + roles + strings + padding + freed entries +
/// next-hop sets (the sentinel word aside); `heap_bytes` is what the
/// vectors hold allocated (capacity).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// Buckets (home and overflow), 64 bytes each.
    pub bucket_bytes: usize,
    /// Of which occupied slots (6 bytes per key: fingerprint and reference).
    pub used_slot_bytes: usize,
    /// Live name prefix entries.
    pub entries: usize,
    /// Entry header words (8 bytes per entry).
    pub entry_header_bytes: usize,
    /// Role values (4 bytes per level of the entry's search path).
    pub role_bytes: usize,
    /// Stored name strings (component TLVs).
    pub string_bytes: usize,
    /// Zero padding of entries to whole words.
    pub padding_bytes: usize,
    /// Freed entries not yet compacted away.
    pub free_entry_bytes: usize,
    /// Interned next-hop sets (lookup part).
    pub nexthop_bytes: usize,
    /// [`Fib::bytes`].
    pub total_bytes: usize,
    /// Allocated capacity of every vector of the lookup structure.
    pub heap_bytes: usize,
}

/// Where a probe landed.
#[derive(Clone, Copy)]
enum Probe {
    Miss,
    Hit {
        eref: u64,
        leaf: bool,
        verified: bool,
    },
}

impl Fib {
    /// An empty FIB.
    pub fn new(cfg: Config) -> Result<Fib, FibError> {
        cfg.validate()?;
        let tree = SearchTree::new(cfg.max_components);
        Ok(Fib {
            cfg,
            hasher: PrefixHasher::new(cfg.strategy, cfg.key.0, cfg.key.1),
            role_idx: role_index_table(&tree, cfg.max_components),
            tree,
            tables: (0..cfg.max_components)
                .map(|_| Table::with_home_buckets(1))
                .collect(),
            // Word 0 is a sentinel so no entry has reference 0.
            entries: vec![0],
            nh: NhTable::new(),
            default_nh: NH_NONE,
            pull: None,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The search tree over component counts.
    pub fn search_tree(&self) -> &SearchTree {
        &self.tree
    }

    /// The hops of next-hop set `id`.
    #[inline]
    pub fn next_hops(&self, id: u32) -> &[NextHop] {
        self.nh.get(id)
    }

    /// The per-level tables (`tables()[l - 1]` holds `l`-component keys).
    pub fn tables(&self) -> &[Table] {
        &self.tables
    }

    // ---- entry arena accessors -------------------------------------------

    #[inline(always)]
    pub(crate) fn e_hdr(&self, e: u64) -> u64 {
        self.entries[e as usize + entry::HDR]
    }
    #[inline(always)]
    pub(crate) fn e_str(&self, e: u64) -> &[u8] {
        let (len, nroles, _) = entry::split(self.e_hdr(e));
        let start = e as usize * 8 + entry::str_byte(nroles);
        let bytes: &[u8] = bytemuck_words(&self.entries);
        &bytes[start..start + len]
    }
    #[inline(always)]
    fn e_role_index(&self, e: u64, level: usize) -> Option<usize> {
        let (_, nroles, ncomp) = entry::split(self.e_hdr(e));
        let k = self.cfg.max_components;
        if ncomp > k || level > k {
            return None;
        }
        let i = self.role_idx[ncomp * (k + 1) + level] as usize;
        (i < nroles).then_some(i)
    }
    #[inline(always)]
    fn e_role_byte(e: u64, i: usize) -> usize {
        e as usize * 8 + entry::ROLES_BYTE + 4 * i
    }
    /// Role value `(bmp_len, nh)` of `level` in entry `e`.
    #[inline(always)]
    pub(crate) fn e_role(&self, e: u64, level: usize) -> Option<(usize, u32)> {
        let i = self.e_role_index(e, level)?;
        let at = Self::e_role_byte(e, i);
        let bytes: &[u8] = bytemuck_words(&self.entries);
        let mut v = [0u8; 4];
        v.copy_from_slice(&bytes[at..at + 4]);
        let v = u32::from_le_bytes(v);
        Some(((v >> 24) as usize, v & 0xFF_FFFF))
    }
    pub(crate) fn e_set_role(&mut self, e: u64, level: usize, bmp_len: usize, nh: u32) {
        let Some(i) = self.e_role_index(e, level) else {
            return;
        };
        let v = ((bmp_len as u32) << 24) | (nh & 0xFF_FFFF);
        let at = Self::e_role_byte(e, i);
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut self.entries);
        bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    /// The live entries of the arena in arena order (`olds`, sorted, no
    /// duplicates) and where each lands when the arena is compacted
    /// (`news`, same order; word 0 stays the sentinel), with the compacted
    /// arena's length in words. Live = referenced by a table slot.
    pub(crate) fn compaction_plan(&self) -> (Vec<u64>, Vec<u64>, usize) {
        let mut olds: Vec<u64> = Vec::with_capacity(self.tables.iter().map(Table::len).sum());
        for t in &self.tables {
            for bk in &t.buckets {
                let mut occ = bk.occupied();
                while occ != 0 {
                    let s = occ.trailing_zeros() as usize;
                    occ &= occ - 1;
                    olds.push(bk.refs[s] as u64);
                }
            }
        }
        olds.sort_unstable();
        olds.dedup();
        let mut news = Vec::with_capacity(olds.len());
        let mut at = 1u64;
        for &e in &olds {
            news.push(at);
            let (len, nroles, _) = entry::split(self.e_hdr(e));
            at += entry::words(len, nroles) as u64;
        }
        (olds, news, at as usize)
    }

    /// The words of entry `e`.
    pub(crate) fn e_words(&self, e: u64) -> &[u64] {
        let (len, nroles, _) = entry::split(self.e_hdr(e));
        &self.entries[e as usize..e as usize + entry::words(len, nroles)]
    }

    /// Bytes held by the lookup structure: buckets, entries (strings
    /// included) and next-hop sets.
    pub fn bytes(&self) -> usize {
        self.tables.iter().map(Table::bytes).sum::<usize>()
            + self.entries.len() * 8
            + self.nh.hot_bytes()
    }

    /// Where the bytes of [`Self::bytes`] go, and the heap capacity
    /// behind them.
    pub fn memory(&self) -> Memory {
        let (olds, _, live_words) = self.compaction_plan();
        let mut m = Memory {
            bucket_bytes: self.bucket_bytes(),
            used_slot_bytes: 6 * self.tables.iter().map(Table::len).sum::<usize>(),
            entries: olds.len(),
            nexthop_bytes: self.nh.hot_bytes(),
            free_entry_bytes: 8 * (self.entries.len() - live_words),
            ..Memory::default()
        };
        for &e in &olds {
            let (len, nroles, _) = entry::split(self.e_hdr(e));
            m.entry_header_bytes += 8;
            m.role_bytes += 4 * nroles;
            m.string_bytes += len;
            m.padding_bytes += 8 * entry::words(len, nroles) - entry::str_byte(nroles) - len;
        }
        m.total_bytes = self.bytes();
        m.heap_bytes = self
            .tables
            .iter()
            .map(|t| t.buckets.capacity() * 64)
            .sum::<usize>()
            + self.entries.capacity() * 8
            + self.nh.offsets.capacity() * 4
            + self.nh.hops.capacity() * std::mem::size_of::<NextHop>()
            + self.role_idx.capacity();
        m
    }

    /// Rebuild level `l`'s table with `home` home buckets, rehashing every
    /// key from its stored string (leaf bits kept).
    pub(crate) fn rehash_table(&mut self, l: usize, home: usize) {
        let t = &self.tables[l - 1];
        let mut nt = Table::with_home_buckets(home);
        let mut ends = Vec::new();
        for (slot, leaf) in t.drain_slots() {
            let eref = crate::table::slot_ref(slot);
            let s = self.e_str(eref);
            // Stored strings were validated on insert.
            if crate::name::component_ends(s, &mut ends).is_err() || ends.len() < l {
                continue;
            }
            let h = self.hasher.hash_stored_prefix(s, &ends, l);
            nt.insert(h, eref, leaf);
        }
        self.tables[l - 1] = nt;
    }

    /// Bytes of buckets only.
    pub fn bucket_bytes(&self) -> usize {
        self.tables.iter().map(Table::bytes).sum()
    }

    // ---- lookup ----------------------------------------------------------

    #[inline(always)]
    fn probe(&self, level: usize, h: u64, key: &[u8], verify: bool, tr: &mut Trace) -> Probe {
        let t = &self.tables[level - 1];
        let fp = fingerprint(h) as u16;
        let mut b = t.home_of(h);
        let mut unverified: Option<(u64, bool)> = None;
        loop {
            let bk = &t.buckets[b];
            tr.bucket_reads += 1;
            let mut m = bk.matches(fp);
            while m != 0 {
                let s = m.trailing_zeros() as usize;
                m &= m - 1;
                let eref = bk.refs[s] as u64;
                let leaf = bk.leaf() >> s & 1 == 1;
                if verify || bk.collided() >> s & 1 == 1 {
                    tr.verifies += 1;
                    if self.e_str(eref).get(..key.len()) == Some(key) {
                        return Probe::Hit {
                            eref,
                            leaf,
                            verified: true,
                        };
                    }
                } else {
                    unverified = Some((eref, leaf));
                }
            }
            b = bk.next();
            if b == 0 {
                break;
            }
        }
        match unverified {
            Some((eref, leaf)) => Probe::Hit {
                eref,
                leaf,
                verified: false,
            },
            None => Probe::Miss,
        }
    }

    /// The entry of the key `key` (hash `h`) at `level`, verified.
    pub(crate) fn probe_verified(
        &self,
        level: usize,
        h: u64,
        key: &[u8],
        tr: &mut Trace,
    ) -> Option<u64> {
        match self.probe(level, h, key, true, tr) {
            Probe::Hit { eref, .. } => Some(eref),
            Probe::Miss => None,
        }
    }

    /// The last key a verifying binary search from the root matches:
    /// `(level, entry)`.
    pub(crate) fn search_verified<N: NameView + ?Sized>(
        &self,
        name: &N,
        hashes: &[u64],
        tr: &mut Trace,
    ) -> Option<(usize, u64)> {
        self.binary_search(&self.tree, None, name, hashes, true, tr)
            .map(|(l, e, _)| (l, e))
    }

    /// Move the live entries to the front of the arena in place (arena
    /// order is kept, so every entry moves down and copies never overlap a
    /// later source) and re-point the table slots; no second arena.
    pub(crate) fn compact_in_place(&mut self) {
        let (olds, news, total) = self.compaction_plan();
        for (&o, &n) in olds.iter().zip(&news) {
            let (len, nroles, _) = entry::split(self.e_hdr(o));
            let w = entry::words(len, nroles);
            if o != n {
                self.entries
                    .copy_within(o as usize..o as usize + w, n as usize);
            }
        }
        self.entries.truncate(total);
        self.entries.shrink_to_fit();
        let map = |e: u64| match olds.binary_search(&e) {
            Ok(i) => news[i],
            Err(_) => e,
        };
        for t in &mut self.tables {
            t.remap_refs(map);
        }
        if let Some(pull) = self.pull.as_mut() {
            for v in pull.map.values_mut() {
                for (_, e) in v.iter_mut() {
                    *e = map(*e);
                }
            }
        }
    }

    fn resolve(&self, best: Option<(usize, u64)>) -> Option<Match> {
        if let Some((level, eref)) = best {
            if let Some((len, nh)) = self.e_role(eref, level) {
                if nh != NH_NONE {
                    return Some(Match { len, nh });
                }
            }
        }
        (self.default_nh != NH_NONE).then_some(Match {
            len: 0,
            nh: self.default_nh,
        })
    }

    /// Start point of a search: the longest pulled prefix of the name
    /// (verified), and the tree to search below it.
    #[inline(always)]
    fn pull_start<N: NameView + ?Sized>(
        &self,
        name: &N,
        hashes: &[u64],
        tr: &mut Trace,
    ) -> (&SearchTree, Option<(usize, u64, bool)>) {
        if let Some(pull) = &self.pull {
            let tlv = name.tlv();
            for l in (1..=hashes.len().min(pull.max_level)).rev() {
                tr.pull_probes += 1;
                let Some(cands) = pull.map.get(&hashes[l - 1]) else {
                    continue;
                };
                let key = &tlv[..name.prefix_end(l)];
                for &(level, eref) in cands {
                    if level as usize == l && self.e_str(eref).get(..key.len()) == Some(key) {
                        if let Some(Some(t)) = pull.trees.get(l) {
                            tr.pulled = l as u32;
                            return (t, Some((l, eref, true)));
                        }
                    }
                }
            }
        }
        (&self.tree, None)
    }

    #[inline(always)]
    fn binary_search<N: NameView + ?Sized>(
        &self,
        tree: &SearchTree,
        start: Option<(usize, u64, bool)>,
        name: &N,
        hashes: &[u64],
        verify: bool,
        tr: &mut Trace,
    ) -> Option<(usize, u64, bool)> {
        let e = hashes.len();
        let tlv = name.tlv();
        let mut node = tree.root as usize;
        let mut best = start;
        while node != 0 {
            if node > e {
                node = tree.left[node] as usize;
                continue;
            }
            tr.probes += 1;
            let key = &tlv[..name.prefix_end(node)];
            match self.probe(node, hashes[node - 1], key, verify, tr) {
                Probe::Hit {
                    eref,
                    leaf,
                    verified,
                } => {
                    best = Some((node, eref, verified));
                    if leaf {
                        break;
                    }
                    node = tree.right[node] as usize;
                }
                Probe::Miss => node = tree.left[node] as usize,
            }
        }
        best
    }

    /// Binary search with precomputed prefix hashes (`hashes[i]` for `i + 1`
    /// components, `hashes.len() == min(components, k)`).
    #[inline]
    pub fn lookup_hashed<N: NameView + ?Sized>(
        &self,
        name: &N,
        hashes: &[u64],
        tr: &mut Trace,
    ) -> Option<Match> {
        let verify = self.cfg.strategy == Strategy::VerifyEach;
        let (tree, start) = self.pull_start(name, hashes, tr);
        let best = self.binary_search(tree, start, name, hashes, verify, tr);
        match best {
            Some((level, eref, false)) => {
                tr.verifies += 1;
                let key = &name.tlv()[..name.prefix_end(level)];
                if self.e_str(eref).get(..key.len()) == Some(key) {
                    // A verified final match proves every earlier match:
                    // a key's markers exist at all its right-turn ancestors
                    // (of whichever tree the search used).
                    self.resolve(Some((level, eref)))
                } else {
                    tr.fallback = true;
                    let b = self.binary_search(tree, start, name, hashes, true, tr);
                    self.resolve(b.map(|(l, e, _)| (l, e)))
                }
            }
            Some((level, eref, true)) => self.resolve(Some((level, eref))),
            None => self.resolve(None),
        }
    }

    /// Number of levels a name of `components` components can visit.
    #[inline(always)]
    pub fn effective_len(&self, components: usize) -> usize {
        components.min(self.cfg.max_components)
    }

    /// Longest-prefix match of `name`, with its cost.
    #[inline]
    pub fn lookup_traced<N: NameView + ?Sized>(&self, name: &N, tr: &mut Trace) -> Option<Match> {
        let e = self.effective_len(name.component_count());
        let mut hashes = [0u64; MAX_LEVELS];
        self.hasher.hash_prefixes(name, &mut hashes[..e]);
        self.lookup_hashed(name, &hashes[..e], tr)
    }

    /// Longest-prefix match of a parsed wire-format name, reusing the
    /// prefix hashes it cached when this FIB's hash is that chain
    /// (`VerifyEach` with key [`prefix_hash_seed`], the default).
    #[inline]
    pub fn lookup_name(&self, name: &Name, tr: &mut Trace) -> Option<Match> {
        let e = self.effective_len(name.len());
        if self.cfg.strategy == Strategy::VerifyEach && self.cfg.key.0 == prefix_hash_seed() {
            return self.lookup_hashed(name, &name.prefix_hashes()[1..=e], tr);
        }
        self.lookup_traced(name, tr)
    }

    /// Longest-prefix match of `name`.
    #[inline]
    pub fn lookup<N: NameView + ?Sized>(&self, name: &N) -> Option<Match> {
        self.lookup_traced(name, &mut Trace::default())
    }

    /// Linear search from the longest prefix down (§3.4.2) on the same
    /// tables: the first true match's inherited next hops are the answer.
    pub fn lookup_linear_traced<N: NameView + ?Sized>(
        &self,
        name: &N,
        tr: &mut Trace,
    ) -> Option<Match> {
        let e = self.effective_len(name.component_count());
        let mut hashes = [0u64; MAX_LEVELS];
        self.hasher.hash_prefixes(name, &mut hashes[..e]);
        self.lookup_linear_hashed(name, &hashes[..e], tr)
    }

    /// Linear search with precomputed prefix hashes (as
    /// [`Self::lookup_hashed`]).
    pub fn lookup_linear_hashed<N: NameView + ?Sized>(
        &self,
        name: &N,
        hashes: &[u64],
        tr: &mut Trace,
    ) -> Option<Match> {
        let e = hashes.len();
        let verify = self.cfg.strategy == Strategy::VerifyEach;
        let tlv = name.tlv();
        for level in (1..=e).rev() {
            tr.probes += 1;
            let key = &tlv[..name.prefix_end(level)];
            if let Probe::Hit { eref, verified, .. } =
                self.probe(level, hashes[level - 1], key, verify, tr)
            {
                if !verified {
                    tr.verifies += 1;
                    if self.e_str(eref).get(..key.len()) != Some(key) {
                        continue;
                    }
                }
                return self.resolve(Some((level, eref)));
            }
        }
        self.resolve(None)
    }

    /// Linear-search lookup.
    pub fn lookup_linear<N: NameView + ?Sized>(&self, name: &N) -> Option<Match> {
        self.lookup_linear_traced(name, &mut Trace::default())
    }

    /// Hint the CPU to load the buckets a lookup with these prefix hashes
    /// (`hashes[i]` for `i + 1` components, as [`Self::lookup_hashed`]
    /// takes them) reads first: the first probed level's bucket (`First`)
    /// or every level's (`All`).
    #[inline]
    fn prefetch_hashed(&self, hashes: &[u64], prefetch: Prefetch) {
        let e = hashes.len();
        match prefetch {
            Prefetch::None => {}
            Prefetch::First => {
                let mut node = self.tree.root as usize;
                while node > e {
                    node = self.tree.left[node] as usize;
                }
                if node != 0 {
                    let t = &self.tables[node - 1];
                    nexthop_mem::prefetch(&t.buckets[t.home_of(hashes[node - 1])]);
                }
            }
            Prefetch::All => {
                for l in 1..=e {
                    let t = &self.tables[l - 1];
                    nexthop_mem::prefetch(&t.buckets[t.home_of(hashes[l - 1])]);
                }
            }
        }
    }

    /// The second step after [`Self::prefetch_name`] with
    /// [`Prefetch::All`] (once its bucket lines have had time to arrive):
    /// walk the search's path as the home buckets' fingerprints predict it
    /// and hint the CPU to load the entry of each matching slot (the entry
    /// the search will read for its string check and value), so those
    /// misses overlap too. Overflow buckets are not followed.
    /// Changes nothing; does nothing when this FIB cannot use the cached
    /// hashes (see [`Self::lookup_name`]).
    #[inline]
    pub fn prefetch_name_entries(&self, name: &Name) {
        if self.cfg.strategy != Strategy::VerifyEach || self.cfg.key.0 != prefix_hash_seed() {
            return;
        }
        let e = self.effective_len(name.len());
        self.prefetch_entries_hashed(name, &name.prefix_hashes()[1..=e]);
    }

    /// [`Self::prefetch_name_entries`] on a name's prefix hashes
    /// (`hashes[i]` for `i + 1` components).
    #[inline(always)]
    fn prefetch_entries_hashed<N: NameView + ?Sized>(&self, name: &N, hashes: &[u64]) {
        // Only the entries the search will read are loaded (3 at k = 7),
        // not one per level; of each, the lines up to the end of the
        // string the check compares (header, at most one role per tree
        // level, then `level` components: a deep entry spans two lines).
        // (The tree's depth is ceil(log2(k + 1)), the bit length of k.)
        let depth = (usize::BITS - self.cfg.max_components.leading_zeros()) as usize;
        let roles = entry::ROLES_BYTE + 4 * depth;
        self.walk_fingerprints(hashes, false, |level, eref| {
            if let Some(w) = self.entries.get(eref as usize) {
                let start = (w as *const u64).cast::<u8>();
                nexthop_mem::prefetch_range(start, roles + name.prefix_end(level));
            }
        });
    }

    /// The binary search's path as the fingerprints predict it, every
    /// fingerprint match taken as true (a match turns right, as a verified
    /// one would; no string is compared): `seen` gets the level and entry of each
    /// matching slot of each level visited (the home bucket only, or its
    /// overflow chain too with `chain`). The last level matched and its
    /// first match's entry, if any.
    #[inline(always)]
    fn walk_fingerprints(
        &self,
        hashes: &[u64],
        chain: bool,
        mut seen: impl FnMut(usize, u64),
    ) -> Option<(usize, u64)> {
        let e = hashes.len();
        let mut node = self.tree.root as usize;
        let mut best = None;
        while node != 0 {
            if node > e {
                node = self.tree.left[node] as usize;
                continue;
            }
            let t = &self.tables[node - 1];
            let h = hashes[node - 1];
            let fp = fingerprint(h) as u16;
            let mut b = t.home_of(h);
            let mut hit = None;
            loop {
                let bk = &t.buckets[b];
                let mut m = bk.matches(fp);
                while m != 0 {
                    let s = m.trailing_zeros() as usize;
                    m &= m - 1;
                    let eref = bk.refs[s] as u64;
                    seen(node, eref);
                    hit.get_or_insert((eref, bk.leaf() >> s & 1 == 1));
                }
                b = bk.next();
                if !chain || b == 0 {
                    break;
                }
            }
            node = match hit {
                Some((eref, leaf)) => {
                    best = Some((node, eref));
                    if leaf {
                        break;
                    }
                    self.tree.right[node] as usize
                }
                None => self.tree.left[node] as usize,
            };
        }
        best
    }

    /// Prefetch for a later [`Self::lookup_name`] of `name`, on the prefix
    /// hashes it cached (nothing when this FIB cannot use them, see
    /// [`Self::lookup_name`]). Changes nothing.
    #[inline]
    pub fn prefetch_name(&self, name: &Name, prefetch: Prefetch) {
        if self.cfg.strategy == Strategy::VerifyEach && self.cfg.key.0 == prefix_hash_seed() {
            let e = self.effective_len(name.len());
            self.prefetch_hashed(&name.prefix_hashes()[1..=e], prefetch);
        }
    }

    /// Look up `names` in groups of 16: hash every name of a group, issue
    /// the prefetches, then search. `out.len()` must equal `names.len()`;
    /// returns the number of names that matched. Allocates nothing.
    pub fn lookup_batch<N: NameView>(
        &self,
        names: &[N],
        out: &mut [Option<Match>],
        prefetch: Prefetch,
    ) -> usize {
        assert_eq!(
            names.len(),
            out.len(),
            "lookup_batch: names and out differ in length"
        );
        let mut hits = 0;
        let mut hashes = [[0; MAX_LEVELS]; BATCH];
        for (gn, go) in names.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            hits += self.lookup_group(gn, go, prefetch, &mut hashes);
        }
        hits
    }

    /// [`Self::lookup_batch`] with linear search (§3.4.2): the same
    /// hashing and prefetching per group of 16, then longest-first probes.
    pub fn lookup_linear_batch<N: NameView>(
        &self,
        names: &[N],
        out: &mut [Option<Match>],
        prefetch: Prefetch,
    ) -> usize {
        assert_eq!(
            names.len(),
            out.len(),
            "lookup_linear_batch: names and out differ in length"
        );
        let mut hits = 0;
        let mut hashes = [[0; MAX_LEVELS]; BATCH];
        for (gn, go) in names.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            hits += self.lookup_group_with(gn, go, prefetch, true, &mut hashes);
        }
        hits
    }

    /// [`Self::lookup_batch`] over received names: each item is the value
    /// of a Name TLV (component TLVs), validated and split into components
    /// into `scratch`'s reused offset buffers (a [`crate::NameSlice`] per
    /// name), so after the first call with names this long a batch does no
    /// heap allocation. A name that is not valid TLV (or longer than
    /// [`crate::name::MAX_NAME_BYTES`]) gets `None` and is counted in
    /// [`BatchResult::invalid`].
    pub fn lookup_batch_tlv<T: AsRef<[u8]>>(
        &self,
        names: &[T],
        out: &mut [Option<Match>],
        prefetch: Prefetch,
        scratch: &mut BatchScratch,
    ) -> BatchResult {
        assert_eq!(
            names.len(),
            out.len(),
            "lookup_batch_tlv: names and out differ in length"
        );
        let mut r = BatchResult::default();
        for (g, (gn, go)) in names.chunks(BATCH).zip(out.chunks_mut(BATCH)).enumerate() {
            // The next group's names arrive while this group is searched
            // (a name read straight from a large batch is a miss).
            // (At most two lines of each: the start of a long name is what
            // the parse reads first.)
            for n in names.iter().skip((g + 1) * BATCH).take(BATCH) {
                let n = n.as_ref();
                nexthop_mem::prefetch_range(n.as_ptr(), n.len().min(2 * nexthop_mem::CACHE_LINE));
            }
            let mut ok = [false; BATCH];
            for (i, n) in gn.iter().enumerate() {
                let n = n.as_ref();
                ok[i] = n.len() <= crate::name::MAX_NAME_BYTES
                    && crate::name::component_ends(n, &mut scratch.ends[i]).is_ok();
                if !ok[i] {
                    scratch.ends[i].clear();
                }
            }
            let views: [NameSlice<'_>; BATCH] = std::array::from_fn(|i| match gn.get(i) {
                Some(n) if ok[i] => NameSlice::from_parts(n.as_ref(), &scratch.ends[i]),
                _ => NameSlice::from_parts(&[], &[]),
            });
            self.lookup_group(&views[..gn.len()], go, prefetch, &mut scratch.hashes);
            for (i, o) in go.iter_mut().enumerate() {
                if !ok[i] {
                    *o = None;
                    r.invalid += 1;
                }
                r.hits += o.is_some() as usize;
            }
        }
        r
    }

    /// One group of at most [`BATCH`] names.
    #[inline(always)]
    fn lookup_group<N: NameView>(
        &self,
        gn: &[N],
        go: &mut [Option<Match>],
        prefetch: Prefetch,
        hashes: &mut GroupHashes,
    ) -> usize {
        self.lookup_group_with(gn, go, prefetch, false, hashes)
    }

    #[inline(always)]
    fn lookup_group_with<N: NameView>(
        &self,
        gn: &[N],
        go: &mut [Option<Match>],
        prefetch: Prefetch,
        linear: bool,
        hashes: &mut GroupHashes,
    ) -> usize {
        let mut hits = 0;
        for (i, n) in gn.iter().enumerate() {
            let e = self.effective_len(n.component_count());
            self.hasher.hash_prefixes(n, &mut hashes[i][..e]);
            self.prefetch_hashed(&hashes[i][..e], prefetch);
        }
        if prefetch == Prefetch::All && !linear {
            // The group's bucket lines have had the group's hashing to
            // arrive: read them and load the entries their fingerprints
            // point at along the path the search will take (the string
            // checks and the answer read those), so the entry misses
            // overlap too instead of coming one search at a time.
            for (i, n) in gn.iter().enumerate() {
                let e = self.effective_len(n.component_count());
                self.prefetch_entries_hashed(n, &hashes[i][..e]);
            }
        }
        for (i, (n, o)) in gn.iter().zip(go.iter_mut()).enumerate() {
            let e = self.effective_len(n.component_count());
            *o = if linear {
                self.lookup_linear_hashed(n, &hashes[i][..e], &mut Trace::default())
            } else {
                self.lookup_hashed(n, &hashes[i][..e], &mut Trace::default())
            };
            hits += o.is_some() as usize;
        }
        hits
    }

    /// Time-split helper for benchmarks: the binary search with
    /// precomputed hashes taking every fingerprint match as true (no
    /// string is compared; the answer may be wrong after a false
    /// positive), i.e. the bucket reads of a lookup alone.
    #[doc(hidden)]
    pub fn search_fingerprints_only(&self, hashes: &[u64]) -> usize {
        self.walk_fingerprints(hashes, true, |_, _| {})
            .map_or(0, |(_, eref)| eref as usize)
    }

    /// Time-split helper for benchmarks: only parse-and-hash `name`,
    /// returning a value that depends on every hash.
    pub fn hash_only<N: NameView + ?Sized>(&self, name: &N) -> u64 {
        let e = self.effective_len(name.component_count());
        let mut hashes = [0u64; MAX_LEVELS];
        self.hasher.hash_prefixes(name, &mut hashes[..e]);
        hashes[..e].iter().fold(0, |a, &h| a ^ h)
    }

    /// Hashes of the prefixes of `name` as this FIB computes them.
    pub fn prefix_hashes<N: NameView + ?Sized>(&self, name: &N) -> Vec<u64> {
        let e = self.effective_len(name.component_count());
        let mut v = vec![0u64; e];
        self.hasher.hash_prefixes(name, &mut v);
        v
    }
}

/// View `u64` words as bytes (little-endian arena).
#[inline(always)]
fn bytemuck_words(w: &[u64]) -> &[u8] {
    bytemuck::cast_slice(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_walk_follows_the_verified_search_to_its_level() {
        // Dense random rules over three components: matches end at every
        // depth, so the search turns both ways. The walk (every
        // fingerprint match taken as true) ends where the verifying search
        // does unless a fingerprint collides in a bucket (about 9 slots in
        // 2^16 per probe).
        use rand::{Rng, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(29);
        let name = |rng: &mut rand_xoshiro::Xoshiro256PlusPlus| {
            let l = rng.gen_range(1..=7);
            crate::NameBuf::from_components((0..l).map(|_| ["a", "b", "c"][rng.gen_range(0..3)]))
                .unwrap()
        };
        let rules: Vec<crate::NameBuf> = (0..400).map(|_| name(&mut rng)).collect();
        let hop = [NextHop { face: 1, cost: 0 }];
        let (fib, _) = Fib::build(
            Config {
                max_components: 7,
                ..Config::default()
            },
            rules.iter().map(|r| (r, hop)),
        )
        .unwrap();
        let (mut same, mut total) = (0, 0);
        let mut levels = std::collections::BTreeSet::new();
        for _ in 0..3000 {
            let q = name(&mut rng);
            let hashes = fib.prefix_hashes(&q);
            let verified = fib.search_verified(&q, &hashes, &mut Trace::default());
            let walked = fib.walk_fingerprints(&hashes, true, |_, _| {});
            if let Some((l, _)) = verified {
                levels.insert(l);
            }
            total += 1;
            same += usize::from(walked.map(|w| w.0) == verified.map(|v| v.0));
        }
        assert!(levels.len() >= 5, "matches at too few depths: {levels:?}");
        assert!(
            same * 100 >= total * 99,
            "{same} of {total} walks ended where the verified search did"
        );
    }

    #[test]
    fn search_tree_of_seven_levels_is_figure_3_1() {
        let t = SearchTree::new(7);
        assert_eq!(t.root, 4);
        assert_eq!((t.left[4], t.right[4]), (2, 6));
        assert_eq!((t.left[2], t.right[2]), (1, 3));
        assert_eq!((t.left[6], t.right[6]), (5, 7));
        assert_eq!(t.path(7), vec![4, 6, 7]);
        assert_eq!(t.path(3), vec![2, 3]);
        assert_eq!(t.path(1), vec![1]);
        assert_eq!(t.depth(), 3);
    }

    #[test]
    fn search_tree_depth_is_ceil_log2_k_plus_1() {
        for k in 1..=MAX_LEVELS {
            let t = SearchTree::new(k);
            let want = (usize::BITS - k.leading_zeros()) as usize; // ceil(log2(k+1))
            assert_eq!(t.depth(), want, "k = {k}");
            for l in 1..=k {
                assert_eq!(*t.path(l).last().unwrap() as usize, l, "k = {k}, l = {l}");
            }
        }
    }
}
