//! Memory-lean bulk build of a read-only [`Fib`]: no control map.
//!
//! [`crate::FibControl`] keeps every key in an ordered map (≈ 300 B per
//! rule while building), which is what lets it delete and replace rules.
//! A FIB that is built once and then only looked up (or written to a FIB
//! file) needs none of that: [`FibBuilder`] takes the rules one at a time,
//! in any order, straight into the tables and the entry arena, and
//! [`FibBuilder::finish`] computes what depends on the whole set. Its
//! memory is the FIB itself plus, during `finish`, one bit per bucket slot
//! and the marker values of one level.
//!
//! Phase 1, [`FibBuilder::push`] (rule `R` of `l` components, prefix hashes
//! computed once):
//! * probe every level of `path(l)` (verifying strings); if `R`'s own key
//!   exists (a marker of a longer rule, or `R` again), all of its path
//!   exists: give that key `R`'s value and stop;
//! * else allocate `R`'s entry (one role per level of `path(l)`), insert
//!   the missing keys pointing into it, and move every older entry whose
//!   string is `R`'s prefix of `m` components with `m` on `path(l)` (all of
//!   its keys are then on `R`'s path) into `R`'s entry, freeing it — the
//!   string sharing of `FibControl`. Rules given longest first (as
//!   `names::WorstCase` (feature `test-support`) does) never allocate an entry that is
//!   later freed; in any other order the arena is compacted in place when
//!   a quarter of it is free.
//! * Rule keys get their value `(l, hops)` at once; markers a placeholder;
//!   every leaf bit is clear (a search never stops early, so it is exact
//!   on a partial build).
//!
//! Phase 2, [`FibBuilder::finish`]: every table is sized to
//! `0.9 * bucket_fill` keys per home bucket (one rehash from the stored
//! strings); then level by level from 1 up, each key's longest rule that
//! is a *proper* prefix is found by a (verifying) binary search for its
//! `level - 1` first components — which reads only levels below, already
//! final. A marker takes that as its value; a rule marks that rule's key
//! as extended. Last, a rule key's leaf bit is set unless it was marked
//! (the shortest rule strictly extending a rule `P` has `P` as its
//! longest proper rule prefix, so the marks are exactly "some rule
//! extends it"). The result satisfies every invariant of the crate README
//! that a `FibControl` build does (reference counts = keys per entry).

use crate::error::FibError;
use crate::fib::{entry, Fib, Trace, MAX_LEVELS};
use crate::name::{component_ends, NameSlice, NameView};
use crate::nexthop::{normalize, NextHop, NH_NONE};
use crate::table::{Table, MAX_REF, SLOTS};
use crate::Config;

/// Counts of a bulk build.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BuildStats {
    /// Distinct rules (the default route `/` included).
    pub rules: usize,
    /// Rules given more than once (the last next hops won).
    pub replaced: usize,
    /// Keys in the tables.
    pub keys: usize,
    /// Keys that are not rules.
    pub markers: usize,
    /// Live name prefix entries.
    pub entries: usize,
    /// Entries allocated and later freed (their string moved into a
    /// longer rule's entry).
    pub entries_freed: usize,
    /// In-place arena compactions during the build.
    pub compactions: usize,
}

/// Builds a read-only [`Fib`] from rules pushed one at a time.
#[derive(Debug)]
pub struct FibBuilder {
    fib: Fib,
    /// `paths[l]`: the search path of `l` components.
    paths: Vec<Vec<u8>>,
    /// Words of freed entries (compacted away when they pass a quarter).
    free_words: usize,
    stats: BuildStats,
}

/// Role value of a key that is a marker whose value is not known yet.
const PLACEHOLDER: (usize, u32) = (0, NH_NONE);

impl FibBuilder {
    /// An empty build with configuration `cfg`.
    pub fn new(cfg: Config) -> Result<FibBuilder, FibError> {
        let fib = Fib::new(cfg)?;
        let paths = (0..=cfg.max_components).map(|l| fib.tree.path(l)).collect();
        Ok(FibBuilder {
            fib,
            paths,
            free_words: 0,
            stats: BuildStats::default(),
        })
    }

    /// Rules pushed so far (distinct).
    pub fn len(&self) -> usize {
        self.stats.rules
    }

    /// Whether no rule was pushed.
    pub fn is_empty(&self) -> bool {
        self.stats.rules == 0
    }

    /// Add rule `name -> hops` (a repeated name replaces the hops). A
    /// refused rule (`FibError`) changes nothing.
    pub fn push<N: NameView + ?Sized>(
        &mut self,
        name: &N,
        hops: &[NextHop],
    ) -> Result<(), FibError> {
        let l = name.component_count();
        let k = self.fib.cfg.max_components;
        if l > k {
            return Err(FibError::TooManyComponents { got: l, max: k });
        }
        let hops = normalize(hops)?;
        let tlv = name.tlv();
        let path_len = self.paths[l].len();
        let words = entry::words(tlv.len(), path_len);
        if l > 0 && self.fib.entries.len() + words > MAX_REF as usize {
            return Err(FibError::ArenaFull {
                words: self.fib.entries.len() + words,
            });
        }
        let nh = self.fib.nh.acquire(&hops)?;
        if l == 0 {
            if self.fib.default_nh == NH_NONE {
                self.stats.rules += 1;
            } else {
                self.fib.nh.release(self.fib.default_nh);
                self.stats.replaced += 1;
            }
            self.fib.default_nh = nh;
            return Ok(());
        }
        let mut hashes = [0u64; MAX_LEVELS];
        self.fib.hasher.hash_prefixes(name, &mut hashes[..l]);
        let mut found = [None::<u64>; MAX_LEVELS];
        let mut tr = Trace::default();
        for (i, &p) in self.paths[l].iter().enumerate() {
            let p = p as usize;
            let key = &tlv[..name.prefix_end(p)];
            found[i] = self.fib.probe_verified(p, hashes[p - 1], key, &mut tr);
        }
        if let Some(e) = found[path_len - 1] {
            // R's key exists: R again, or a marker of a longer rule (whose
            // path then holds all of R's path).
            match self.fib.e_role(e, l) {
                Some((m, old)) if m == l => {
                    self.fib.nh.release(old);
                    self.stats.replaced += 1;
                }
                _ => self.stats.rules += 1,
            }
            self.fib.e_set_role(e, l, l, nh);
            return Ok(());
        }
        let e = self.fib.entries.len() as u64;
        let need = self.fib.entries.len() + words;
        if need > self.fib.entries.capacity() {
            // Doubling, as a Vec grows, into allocations advised onto
            // huge pages when large (lookups read random entries).
            let cap = need.max(2 * self.fib.entries.capacity());
            nexthop_mem::reserve_huge(&mut self.fib.entries, cap);
        }
        self.fib.entries.resize(need, 0);
        {
            let ents = &mut self.fib.entries[e as usize..e as usize + words];
            ents[entry::HDR] = tlv.len() as u64 | (path_len as u64) << 16 | (l as u64) << 24;
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(ents);
            for r in bytes[entry::ROLES_BYTE..entry::str_byte(path_len)].chunks_exact_mut(4) {
                r.copy_from_slice(&NH_NONE.to_le_bytes());
            }
            let sb = entry::str_byte(path_len);
            bytes[sb..sb + tlv.len()].copy_from_slice(tlv);
        }
        let mut refs = 0u64;
        for (i, f) in found.iter().enumerate().take(path_len) {
            if f.is_some() {
                continue;
            }
            let p = self.paths[l][i] as usize;
            let (m, v) = if p == l { (l, nh) } else { PLACEHOLDER };
            self.fib.e_set_role(e, p, m, v);
            self.fib.tables[p - 1].insert(hashes[p - 1], e, false);
            refs += 1;
            let t = &self.fib.tables[p - 1];
            if t.len() > t.home as usize * self.fib.cfg.bucket_fill as usize {
                let home = t.home as usize;
                self.fib.rehash_table(p, home * 2);
            }
        }
        // Share strings: an older entry that is R's prefix of `m`
        // components, `m` on R's path, moves into R's entry.
        for (i, f) in found.iter().enumerate().take(path_len) {
            let Some(old) = *f else {
                continue;
            };
            if found[..i].contains(&Some(old)) {
                continue;
            }
            let (olen, _, ocomp) = entry::split(self.fib.e_hdr(old));
            if ocomp >= l
                || !self.paths[l].contains(&(ocomp as u8))
                || olen != name.prefix_end(ocomp)
                || self.fib.e_str(old) != &tlv[..olen]
            {
                continue;
            }
            for &q in &self.paths[ocomp] {
                let q = q as usize;
                if self.fib.tables[q - 1].repoint(hashes[q - 1], old, e) {
                    let (m, v) = self.fib.e_role(old, q).unwrap_or(PLACEHOLDER);
                    self.fib.e_set_role(e, q, m, v);
                    refs += 1;
                }
            }
            let (olen, oroles, _) = entry::split(self.fib.e_hdr(old));
            let owords = entry::words(olen, oroles);
            self.fib.entries[old as usize..old as usize + owords].fill(0);
            self.free_words += owords;
            self.stats.entries_freed += 1;
        }
        self.fib.entries[e as usize + entry::HDR] |= refs << 32;
        self.stats.rules += 1;
        if self.free_words >= 1024 && self.free_words * 4 > self.fib.entries.len() {
            self.fib.compact_in_place();
            self.free_words = 0;
            self.stats.compactions += 1;
        }
        Ok(())
    }

    /// Size the tables, compute the markers' values and the leaf bits, and
    /// return the FIB with the build's counts.
    pub fn finish(mut self) -> (Fib, BuildStats) {
        let fib = &mut self.fib;
        let k = fib.cfg.max_components;
        if self.free_words > 0 {
            fib.compact_in_place();
        }
        // (The allocator shrinks a large block in place: it stays on the
        // huge pages it was advised onto.)
        fib.entries.shrink_to_fit();
        let fill = fib.cfg.bucket_fill as f64 * 0.9;
        for l in 1..=k {
            let len = fib.tables[l - 1].len();
            let home = ((len as f64 / fill).ceil() as usize).max(1);
            fib.rehash_table(l, home);
            fib.tables[l - 1].buckets.shrink_to_fit();
        }
        // Bit per slot: "a rule strictly extends this rule key".
        let mut extended: Vec<Vec<u64>> = fib
            .tables
            .iter()
            .map(|t| vec![0u64; (t.buckets.len() * SLOTS).div_ceil(64)])
            .collect();
        let mut ends = Vec::new();
        let mut hashes = [0u64; MAX_LEVELS];
        let mut markers = 0usize;
        for level in 1..=k {
            let mut values: Vec<(u64, usize, u32)> = Vec::new();
            let t = &fib.tables[level - 1];
            for bk in &t.buckets {
                let mut occ = bk.occupied();
                while occ != 0 {
                    let s = occ.trailing_zeros() as usize;
                    occ &= occ - 1;
                    let e = bk.refs[s] as u64;
                    let is_rule = fib.e_role(e, level).is_some_and(|(m, _)| m == level);
                    let below = fib.best_proper_prefix(e, level, &mut ends, &mut hashes);
                    if is_rule {
                        if let Some((m, pe)) = below {
                            if let Some((b, ps)) = fib.tables[m - 1].find(hashes[m - 1], pe) {
                                let bit = b * SLOTS + ps;
                                extended[m - 1][bit / 64] |= 1 << (bit % 64);
                            }
                        }
                    } else {
                        markers += 1;
                        let v = below
                            .and_then(|(m, pe)| fib.e_role(pe, m))
                            .unwrap_or(PLACEHOLDER);
                        values.push((e, v.0, v.1));
                    }
                }
            }
            for (e, m, v) in values {
                fib.e_set_role(e, level, m, v);
            }
        }
        for level in 1..=k {
            let ext = &extended[level - 1];
            let mut sets = Vec::new();
            let t = &fib.tables[level - 1];
            for (b, bk) in t.buckets.iter().enumerate() {
                let mut occ = bk.occupied();
                while occ != 0 {
                    let s = occ.trailing_zeros() as usize;
                    occ &= occ - 1;
                    let bit = b * SLOTS + s;
                    let is_rule = fib
                        .e_role(bk.refs[s] as u64, level)
                        .is_some_and(|(m, _)| m == level);
                    if is_rule && ext[bit / 64] >> (bit % 64) & 1 == 0 {
                        sets.push((b, s));
                    }
                }
            }
            let t = &mut fib.tables[level - 1];
            for (b, s) in sets {
                t.buckets[b].set_bit(2, s, true);
            }
        }
        self.stats.keys = fib.tables.iter().map(Table::len).sum();
        self.stats.markers = markers;
        self.stats.entries = fib.compaction_plan().0.len();
        (self.fib, self.stats)
    }
}

impl Fib {
    /// Build a read-only FIB from `rules` (any order; longest first within
    /// a family of prefixes avoids freed entries) without the control map.
    pub fn build<I, N, H>(cfg: Config, rules: I) -> Result<(Fib, BuildStats), FibError>
    where
        I: IntoIterator<Item = (N, H)>,
        N: NameView,
        H: AsRef<[NextHop]>,
    {
        let mut b = FibBuilder::new(cfg)?;
        for (n, h) in rules {
            b.push(&n, h.as_ref())?;
        }
        Ok(b.finish())
    }

    /// The longest rule that is a proper prefix of the level-`level` key
    /// stored in entry `e`: `(components, entry of its key)`, by a
    /// verifying binary search for the key's first `level - 1` components.
    /// `hashes[..level - 1]` holds that prefix's hashes afterwards.
    fn best_proper_prefix(
        &self,
        e: u64,
        level: usize,
        ends: &mut Vec<u32>,
        hashes: &mut [u64; MAX_LEVELS],
    ) -> Option<(usize, u64)> {
        if level <= 1 {
            return None;
        }
        let s = self.e_str(e);
        if component_ends(s, ends).is_err() || ends.len() < level {
            return None;
        }
        let q = level - 1;
        let end = ends[q - 1] as usize;
        let name = NameSlice::new(&s[..end], &ends[..q])?;
        self.hasher.hash_prefixes(&name, &mut hashes[..q]);
        let mut tr = Trace::default();
        let best = self.search_verified(&name, &hashes[..q], &mut tr)?;
        let (m, _) = self.e_role(best.1, best.0)?;
        if m == 0 {
            return None;
        }
        if m == best.0 {
            return Some(best);
        }
        // The best match is a marker: its value names a shorter rule,
        // found by its own key (a rule always has one).
        let key = &s[..ends[m - 1] as usize];
        self.probe_verified(m, hashes[m - 1], key, &mut tr)
            .map(|pe| (m, pe))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    use super::*;
    use crate::{FibControl, NameBuf, Strategy};

    type KeyMap = BTreeMap<(usize, Vec<u8>), (bool, usize, Vec<NextHop>)>;

    /// Every key of every table: (level, key bytes) -> (leaf, best-match
    /// components, hops).
    fn key_map(fib: &Fib) -> KeyMap {
        let mut m = BTreeMap::new();
        let mut ends = Vec::new();
        for (li, t) in fib.tables.iter().enumerate() {
            let level = li + 1;
            for bk in &t.buckets {
                let mut occ = bk.occupied();
                while occ != 0 {
                    let s = occ.trailing_zeros() as usize;
                    occ &= occ - 1;
                    let e = bk.refs[s] as u64;
                    let st = fib.e_str(e);
                    component_ends(st, &mut ends).unwrap();
                    let key = st[..ends[level - 1] as usize].to_vec();
                    let (bm, nh) = fib.e_role(e, level).unwrap();
                    let leaf = bk.leaf() >> s & 1 == 1;
                    let prev = m.insert((level, key), (leaf, bm, fib.next_hops(nh).to_vec()));
                    assert!(prev.is_none(), "a key twice at level {level}");
                }
            }
        }
        m
    }

    fn random_rules(rng: &mut Xoshiro256PlusPlus, n: usize, k: usize) -> Vec<(NameBuf, u32)> {
        (0..n)
            .map(|_| {
                let l = rng.gen_range(0..=k);
                let name =
                    NameBuf::from_components((0..l).map(|_| ["a", "b", "c"][rng.gen_range(0..3)]))
                        .unwrap();
                (name, rng.gen_range(1..6))
            })
            .collect()
    }

    fn hop(f: u32) -> [NextHop; 1] {
        [NextHop { face: f, cost: 0 }]
    }

    #[test]
    fn bulk_build_has_the_keys_values_and_leaf_bits_of_a_control_build() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        for k in [1, 2, 3, 5, 7, 8, 15] {
            for strategy in [Strategy::VerifyEach, Strategy::VerifyAtEnd] {
                for round in 0..6 {
                    let n = [5, 20, 60, 200, 400, 800][round];
                    let mut rules = random_rules(&mut rng, n, k);
                    let cfg = Config {
                        max_components: k,
                        strategy,
                        bucket_fill: 1 + round as u32,
                        ..Config::default()
                    };
                    let mut ctl = FibControl::new(cfg).unwrap();
                    for (r, f) in &rules {
                        ctl.insert(r, &hop(*f)).unwrap();
                    }
                    if round % 2 == 1 {
                        rules.shuffle(&mut rng);
                    } else {
                        // Longest first, the order that frees no entry.
                        rules.sort_by_key(|(r, _)| std::cmp::Reverse(r.component_count()));
                    }
                    // The last insert of a name wins in both builds.
                    let mut last: BTreeMap<NameBuf, u32> = BTreeMap::new();
                    let mut ctl2 = FibControl::new(cfg).unwrap();
                    for (r, f) in &rules {
                        last.insert(r.clone(), *f);
                        ctl2.insert(r, &hop(*f)).unwrap();
                    }
                    let _ = ctl;
                    let (fib, st) =
                        Fib::build(cfg, rules.iter().map(|(r, f)| (r, hop(*f)))).unwrap();
                    assert_eq!(st.rules, last.len(), "k={k}");
                    assert_eq!(st.rules, ctl2.len());
                    assert_eq!(key_map(&fib), key_map(ctl2.fib()), "k={k} round={round}");
                    assert_eq!(st.keys, ctl2.stats().keys);
                    assert_eq!(st.markers, ctl2.stats().markers);
                    if round % 2 == 0 {
                        assert_eq!(st.entries_freed, 0);
                    }
                    assert_eq!(fib.memory().free_entry_bytes, 0, "the build ends compacted");
                }
            }
        }
    }

    #[test]
    fn in_place_compaction_keeps_every_key() {
        // Shortest first: every rule's entry is freed by the next longer
        // one, so the arena compacts in place during the build.
        let k = 15;
        let cfg = Config {
            max_components: k,
            ..Config::default()
        };
        let mut b = FibBuilder::new(cfg).unwrap();
        let mut ctl = FibControl::new(cfg).unwrap();
        for base in 0..400u32 {
            let full: Vec<String> = (0..k).map(|i| format!("{base}-{i}-xxxxxxxx")).collect();
            for &l in &b.paths[k].clone() {
                let r = NameBuf::from_components(full[..l as usize].iter()).unwrap();
                b.push(&r, &hop(l as u32)).unwrap();
                ctl.insert(&r, &hop(l as u32)).unwrap();
            }
        }
        let (fib, st) = b.finish();
        assert!(st.compactions > 0, "{st:?}");
        assert_eq!(st.entries, 400);
        assert_eq!(key_map(&fib), key_map(ctl.fib()));
    }

    #[test]
    fn refused_rules_change_nothing() {
        let cfg = Config {
            max_components: 3,
            ..Config::default()
        };
        let mut b = FibBuilder::new(cfg).unwrap();
        let ok = NameBuf::from_components(["a", "b"]).unwrap();
        b.push(&ok, &hop(1)).unwrap();
        let long = NameBuf::from_components(["a", "b", "c", "d"]).unwrap();
        assert!(matches!(
            b.push(&long, &hop(1)),
            Err(FibError::TooManyComponents { got: 4, max: 3 })
        ));
        assert_eq!(b.push(&ok, &[]), Err(FibError::NoNextHops));
        assert_eq!(b.len(), 1);
        let (fib, _) = b.finish();
        assert_eq!(fib.lookup(&long).map(|m| m.len), Some(2));
    }
}
