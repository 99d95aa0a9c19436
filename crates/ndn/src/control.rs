//! Updates of the name FIB: the control side that keeps markers and their
//! inherited next hops exact (dissertation §3.3.1, "FIB Updates").
//!
//! Every *key* — a rule's name, or a marker that a longer rule needs on its
//! binary-search path — lives once in the table of its component count and
//! in an ordered map here. For each key the control side knows:
//! * `bmp`: the next hops of the longest rule that is a prefix of the key
//!   (the key itself when it is a rule) — what its role in the entry holds;
//! * `refs`: how many rules have it on their path (own level or marker);
//!   it is removed when this drops to zero;
//! * `rules_below`: how many rules strictly extend it; zero sets the
//!   bucket's leaf bit, so a search may stop there.
//!
//! Names in TLV form sort so that all extensions of a prefix follow it
//! contiguously, so "every key below `P`" is one range scan of the map (the
//! dissertation's second update solution: an auxiliary structure in the
//! router controller; worst case linear in the keys below `P`).

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use crate::error::FibError;
use crate::fib::{entry, Config, Fib, MAX_LEVELS};
use crate::name::{component_ends, NameView};
use crate::nexthop::{normalize, NextHop, NH_NONE};
use crate::table::{Table, MAX_REF};

#[derive(Clone, Debug)]
struct KeyInfo {
    level: u8,
    hash: u64,
    eref: u64,
    rule: u32,
    bmp_len: u8,
    bmp: u32,
    refs: u32,
    rules_below: u32,
}

/// Counts describing a FIB's contents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FibStats {
    /// Rules (the default route `/` included).
    pub rules: usize,
    /// Keys in the tables (rules of >= 1 component plus markers).
    pub keys: usize,
    /// Markers (keys that are not rules).
    pub markers: usize,
    /// Name prefix entries (shared strings).
    pub entries: usize,
    /// Keys per component count (`per_level[l - 1]`).
    pub per_level: Vec<usize>,
    /// Overflow buckets in use.
    pub overflow_buckets: usize,
    /// Bytes of the lookup structure.
    pub bytes: usize,
    /// Bytes of buckets.
    pub bucket_bytes: usize,
    /// Bytes of entries (headers, roles and strings).
    pub entry_bytes: usize,
}

/// A FIB with its control state: insert, replace and delete rules.
///
/// Single writer: `&mut self` for updates. Readers use [`Self::fib`]
/// between updates, or a clone published by the caller (e.g. through
/// `arc-swap`) while the writer goes on.
#[derive(Debug)]
pub struct FibControl {
    fib: Fib,
    keys: BTreeMap<Vec<u8>, KeyInfo>,
    /// Freed entries by size in words, for reuse.
    free: HashMap<usize, Vec<u64>>,
    /// Words held by freed entries (the arena is compacted when they pass
    /// a quarter of it).
    free_words: usize,
    live_entries: usize,
    rules: usize,
    /// Level pulling: the pulled prefixes (TLV).
    pulled: std::collections::HashSet<Vec<u8>>,
}

impl FibControl {
    /// An empty FIB.
    pub fn new(cfg: Config) -> Result<FibControl, FibError> {
        Ok(FibControl {
            fib: Fib::new(cfg)?,
            keys: BTreeMap::new(),
            free: HashMap::new(),
            free_words: 0,
            live_entries: 0,
            rules: 0,
            pulled: Default::default(),
        })
    }

    /// The lookup structure.
    pub fn fib(&self) -> &Fib {
        &self.fib
    }

    /// Give up the control state and keep the lookup structure.
    pub fn into_fib(self) -> Fib {
        self.fib
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules
    }

    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.rules == 0
    }

    /// Counts and bytes.
    pub fn stats(&self) -> FibStats {
        let k = self.fib.cfg.max_components;
        let mut per_level = vec![0; k];
        let mut markers = 0;
        for ki in self.keys.values() {
            per_level[ki.level as usize - 1] += 1;
            markers += (ki.rule == NH_NONE) as usize;
        }
        FibStats {
            rules: self.rules,
            keys: self.keys.len(),
            markers,
            entries: self.live_entries,
            per_level,
            overflow_buckets: self.fib.tables.iter().map(Table::overflow_buckets).sum(),
            bytes: self.fib.bytes(),
            bucket_bytes: self.fib.bucket_bytes(),
            entry_bytes: self.fib.entries.len() * 8,
        }
    }

    /// The next hops of rule `name`, if it is a rule.
    pub fn get<N: NameView + ?Sized>(&self, name: &N) -> Option<&[NextHop]> {
        if name.component_count() == 0 {
            return (self.fib.default_nh != NH_NONE)
                .then(|| self.fib.next_hops(self.fib.default_nh));
        }
        let k = self.keys.get(name.tlv())?;
        (k.rule != NH_NONE).then(|| self.fib.next_hops(k.rule))
    }

    fn check_name<N: NameView + ?Sized>(&self, name: &N) -> Result<usize, FibError> {
        let l = name.component_count();
        if l > self.fib.cfg.max_components {
            return Err(FibError::TooManyComponents {
                got: l,
                max: self.fib.cfg.max_components,
            });
        }
        Ok(l)
    }

    /// Longest rule that is a proper prefix of the first `l` components.
    fn inherited<N: NameView + ?Sized>(&self, name: &N, l: usize) -> (usize, u32) {
        let tlv = name.tlv();
        for i in (1..l).rev() {
            if let Some(k) = self.keys.get(&tlv[..name.prefix_end(i)]) {
                if k.rule != NH_NONE {
                    return (i, k.rule);
                }
            }
        }
        (0, NH_NONE)
    }

    /// Rules strictly below `prefix`.
    fn count_rules_below(&self, prefix: &[u8]) -> u32 {
        self.keys
            .range::<[u8], _>((Bound::Excluded(prefix), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .filter(|(_, v)| v.rule != NH_NONE)
            .count() as u32
    }

    /// A new entry for string `s` of `ncomp` components, with one role
    /// per level of `path(ncomp)` (all `NH_NONE`) and reference count 0.
    fn alloc_entry(&mut self, s: &[u8], ncomp: usize) -> u64 {
        let nroles = self.fib.tree.path(ncomp).len();
        let words = entry::words(s.len(), nroles);
        let e = match self.free.get_mut(&words).and_then(Vec::pop) {
            Some(e) => {
                self.free_words -= words;
                e
            }
            None => {
                let e = self.fib.entries.len() as u64;
                self.fib.entries.resize(self.fib.entries.len() + words, 0);
                e
            }
        };
        let base = e as usize;
        let ents = &mut self.fib.entries[base..base + words];
        ents.fill(0);
        ents[entry::HDR] = s.len() as u64 | (nroles as u64) << 16 | (ncomp as u64) << 24;
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(ents);
        for r in bytes[entry::ROLES_BYTE..entry::str_byte(nroles)].chunks_exact_mut(4) {
            r.copy_from_slice(&NH_NONE.to_le_bytes());
        }
        let sb = entry::str_byte(nroles);
        bytes[sb..sb + s.len()].copy_from_slice(s);
        self.live_entries += 1;
        e
    }

    fn entry_refs(&self, e: u64) -> u32 {
        (self.fib.entries[e as usize + entry::HDR] >> 32) as u32
    }

    fn entry_ref_add(&mut self, e: u64, delta: i64) {
        let hdr = &mut self.fib.entries[e as usize + entry::HDR];
        let rc = (*hdr >> 32) as i64 + delta;
        *hdr = (*hdr & 0xFFFF_FFFF) | ((rc as u64) << 32);
        if rc == 0 {
            let (len, nroles, _) = entry::split(*hdr);
            let words = entry::words(len, nroles);
            self.fib.entries[e as usize..e as usize + words].fill(0);
            self.free.entry(words).or_default().push(e);
            self.free_words += words;
            self.live_entries -= 1;
        }
    }

    /// Compact the entry arena when freed entries hold more than a quarter
    /// of it (amortised: each compaction follows as many freed words as a
    /// third of what it keeps).
    fn maybe_compact(&mut self) {
        if self.free_words >= 1024 && self.free_words * 4 > self.fib.entries.len() {
            self.compact();
        }
    }

    /// Move every live entry to the front of the arena, in arena order,
    /// and drop the freed ones (re-pointing table slots, keys and the
    /// pulled-prefix table). Updates call it when a quarter of the arena
    /// is free; call it after a bulk build to release the rest.
    pub fn compact(&mut self) {
        let (olds, news, total) = self.fib.compaction_plan();
        let mut arena = Vec::with_capacity(total);
        arena.push(0u64);
        for &e in &olds {
            arena.extend_from_slice(self.fib.e_words(e));
        }
        debug_assert_eq!(arena.len(), total);
        let map = |e: u64| match olds.binary_search(&e) {
            Ok(i) => news[i],
            Err(_) => e,
        };
        for t in &mut self.fib.tables {
            t.remap_refs(map);
            t.buckets.shrink_to_fit();
        }
        for k in self.keys.values_mut() {
            k.eref = map(k.eref);
        }
        if let Some(pull) = self.fib.pull.as_mut() {
            for v in pull.map.values_mut() {
                for (_, e) in v.iter_mut() {
                    *e = map(*e);
                }
            }
        }
        arena.shrink_to_fit();
        self.fib.entries = arena;
        self.free.clear();
        self.free_words = 0;
    }

    /// Words of the arena held by freed entries.
    pub fn free_entry_words(&self) -> usize {
        self.free_words
    }

    /// Share strings (Fig. 3.4, for rules too): rule `name` (`l`
    /// components) got the new entry `e_new`, whose roles cover every level
    /// of its main search path. A key of that path that lives in an older
    /// entry moves into `e_new` when every key of the older entry is on the
    /// path (the older entry, a shorter string, is then freed).
    fn share_into<N: NameView + ?Sized>(&mut self, name: &N, l: usize, e_new: u64) {
        let tlv = name.tlv();
        let mut olds: Vec<(u64, usize)> = Vec::new();
        for p in self.fib.tree.path(l) {
            let p = p as usize;
            if p == l {
                continue;
            }
            if let Some(k) = self.keys.get(&tlv[..name.prefix_end(p)]) {
                if k.eref != e_new {
                    olds.push((k.eref, p));
                }
            }
        }
        while let Some(&(e_old, _)) = olds.first() {
            let (moving, rest): (Vec<_>, Vec<_>) = olds.iter().partition(|x| x.0 == e_old);
            olds = rest;
            if moving.len() as u32 != self.entry_refs(e_old) {
                continue;
            }
            for (_, p) in moving {
                let key = &tlv[..name.prefix_end(p)];
                let Some(k) = self.keys.get_mut(key) else {
                    continue;
                };
                k.eref = e_new;
                let (h, bl, b) = (k.hash, k.bmp_len as usize, k.bmp);
                self.fib.e_set_role(e_new, p, bl, b);
                self.fib.tables[p - 1].repoint(h, e_old, e_new);
                self.entry_ref_add(e_new, 1);
                self.entry_ref_add(e_old, -1);
            }
        }
    }

    /// Grow the home buckets of level `l`'s table by a quarter when it
    /// holds more than `bucket_fill` keys per home bucket, rehashing every
    /// key from its stored string. (A quarter, not a doubling: the table
    /// then stays between 0.8 and 1 of `bucket_fill` keys per home bucket,
    /// where doubling left it between 0.5 and 1; the price is 5 rehashes
    /// per key over the table's growth instead of 2.)
    fn maybe_grow(&mut self, l: usize) {
        let fill = self.fib.cfg.bucket_fill as usize;
        let t = &self.fib.tables[l - 1];
        if t.len() <= t.home as usize * fill {
            return;
        }
        let home = t.home as usize;
        self.fib.rehash_table(l, home + home.div_ceil(4));
    }

    /// Levels whose keys rule `name` (of `l` components) needs: its path
    /// in the main tree (own level last), then marker levels of the tree
    /// below every pulled proper prefix, each once. `true` marks levels of
    /// the main path (their keys share the rule's entry).
    fn rule_path<N: NameView + ?Sized>(&self, name: &N, l: usize) -> Vec<(u8, bool)> {
        let mut v: Vec<(u8, bool)> = self
            .fib
            .tree
            .path(l)
            .into_iter()
            .map(|p| (p, true))
            .collect();
        if let Some(pull) = &self.fib.pull {
            let tlv = name.tlv();
            for p in 1..l.min(pull.max_level + 1) {
                if !self.pulled.contains(&tlv[..name.prefix_end(p)]) {
                    continue;
                }
                if let Some(Some(t)) = pull.trees.get(p) {
                    for q in t.path(l) {
                        if !v.iter().any(|&(x, _)| x == q) {
                            v.push((q, false));
                        }
                    }
                }
            }
        }
        v
    }

    /// Turn on level pulling (§4.1): every prefix with more than
    /// `threshold` distinct next components among the rules (and fewer than
    /// `k` components) is pulled; the FIB is rebuilt with the extra markers
    /// the trees below pulled prefixes need. Returns how many prefixes were
    /// pulled. The pulled set is fixed until the next call; updates keep
    /// every marker exact for it.
    pub fn enable_level_pulling(&mut self, threshold: usize) -> Result<usize, FibError> {
        let k = self.fib.cfg.max_components;
        let rules: Vec<(Vec<u8>, Vec<NextHop>)> = self
            .keys
            .iter()
            .filter(|(_, v)| v.rule != NH_NONE)
            .map(|(key, v)| (key.clone(), self.fib.next_hops(v.rule).to_vec()))
            .collect();
        let default = (self.fib.default_nh != NH_NONE)
            .then(|| self.fib.next_hops(self.fib.default_nh).to_vec());
        let mut children: HashMap<&[u8], std::collections::HashSet<&[u8]>> = HashMap::new();
        let mut ends = Vec::new();
        for (key, _) in &rules {
            component_ends(key, &mut ends)?;
            for i in 1..ends.len() {
                let (p, c) = (ends[i - 1] as usize, ends[i] as usize);
                children.entry(&key[..p]).or_default().insert(&key[p..c]);
            }
        }
        let mut pulled: Vec<Vec<u8>> = children
            .iter()
            .filter(|(_, c)| c.len() > threshold)
            .map(|(p, _)| p.to_vec())
            .collect();
        pulled.sort();
        let mut fresh = FibControl::new(self.fib.cfg)?;
        let mut pull = crate::fib::Pull {
            trees: vec![None; k + 1],
            ..Default::default()
        };
        let mut names = Vec::with_capacity(pulled.len());
        for p in &pulled {
            let n = crate::name::NameBuf::from_tlv(p)?;
            let l = n.component_count();
            if l == 0 || l >= k {
                continue;
            }
            pull.max_level = pull.max_level.max(l);
            pull.trees[l] = Some(crate::fib::SearchTree::new_range(l + 1, k, k));
            names.push(n);
        }
        fresh.fib.pull = Some(pull);
        for n in &names {
            fresh.pulled.insert(n.tlv().to_vec());
        }
        // Pin every pulled prefix as a key of the main tables.
        for n in &names {
            let l = n.component_count();
            let h = fresh.fib.prefix_hashes(n)[l - 1];
            let key = n.tlv();
            let eref = match fresh.keys.get_mut(key) {
                Some(ki) => {
                    ki.refs += 1;
                    ki.eref
                }
                None => {
                    let e = fresh.alloc_entry(key, l);
                    fresh.entry_ref_add(e, 1);
                    let rules_below = 0;
                    fresh.keys.insert(
                        key.to_vec(),
                        KeyInfo {
                            level: l as u8,
                            hash: h,
                            eref: e,
                            rule: NH_NONE,
                            bmp_len: 0,
                            bmp: NH_NONE,
                            refs: 1,
                            rules_below,
                        },
                    );
                    fresh.fib.tables[l - 1].insert(h, e, true);
                    fresh.maybe_grow(l);
                    e
                }
            };
            if let Some(pl) = fresh.fib.pull.as_mut() {
                pl.map.entry(h).or_default().push((l as u8, eref));
            }
        }
        if let Some(d) = default {
            fresh.insert(&crate::name::NameBuf::root(), &d)?;
        }
        for (key, hops) in &rules {
            fresh.insert(&crate::name::NameBuf::from_tlv(key)?, hops)?;
        }
        let count = names.len();
        *self = fresh;
        Ok(count)
    }

    /// Insert rule `name -> hops`, or replace its next hops.
    pub fn insert<N: NameView + ?Sized>(
        &mut self,
        name: &N,
        hops: &[NextHop],
    ) -> Result<(), FibError> {
        let l = self.check_name(name)?;
        let hops = normalize(hops)?;
        let nh = self.fib.nh.acquire(&hops)?;
        if l == 0 {
            if self.fib.default_nh == NH_NONE {
                self.rules += 1;
            } else {
                self.fib.nh.release(self.fib.default_nh);
            }
            self.fib.default_nh = nh;
            return Ok(());
        }
        let tlv = name.tlv();
        let full_path = self.rule_path(name, l);
        let existing = self.keys.get(tlv).map(|k| k.rule);
        match existing {
            Some(old) if old != NH_NONE => {
                self.fib.nh.release(old);
                if let Some(k) = self.keys.get_mut(tlv) {
                    k.rule = nh;
                }
            }
            _ => {
                // Room for every entry the new keys may need (refused
                // before any change: slots address 2^32 arena words).
                let need =
                    self.fib.entries.len() + full_path.len() * entry::words(tlv.len(), MAX_LEVELS);
                if need > MAX_REF as usize {
                    self.fib.nh.release(nh);
                    return Err(FibError::ArenaFull { words: need });
                }
                // A new rule: make the keys on its path exist.
                let hashes = self.fib.prefix_hashes(name);
                let mut created: Vec<Vec<u8>> = Vec::new();
                let mut own_entry: Option<u64> = None;
                for &(p, main) in &full_path {
                    let p = p as usize;
                    let key = &tlv[..name.prefix_end(p)];
                    if let Some(k) = self.keys.get_mut(key) {
                        k.refs += 1;
                        continue;
                    }
                    let e = match (main, own_entry) {
                        (true, Some(e)) => e,
                        (true, None) => {
                            let e = self.alloc_entry(tlv, l);
                            own_entry = Some(e);
                            e
                        }
                        // A marker only a pulled prefix's tree needs: its
                        // own entry (the rule's entry has no role for it).
                        (false, _) => self.alloc_entry(key, p),
                    };
                    self.entry_ref_add(e, 1);
                    let (bmp_len, bmp) = self.inherited(name, p);
                    let rules_below = self.count_rules_below(key);
                    self.keys.insert(
                        key.to_vec(),
                        KeyInfo {
                            level: p as u8,
                            hash: hashes[p - 1],
                            eref: e,
                            rule: NH_NONE,
                            bmp_len: bmp_len as u8,
                            bmp,
                            refs: 1,
                            rules_below,
                        },
                    );
                    created.push(key.to_vec());
                }
                if let Some(k) = self.keys.get_mut(tlv) {
                    k.rule = nh;
                }
                // The new rule lies below every key that is a proper prefix.
                for i in 1..l {
                    let key = &tlv[..name.prefix_end(i)];
                    if let Some(k) = self.keys.get_mut(key) {
                        k.rules_below += 1;
                        if k.rules_below == 1 && !created.iter().any(|c| c.as_slice() == key) {
                            let (lv, h, e) = (k.level as usize, k.hash, k.eref);
                            self.fib.tables[lv - 1].set_leaf(h, e, false);
                        }
                    }
                }
                for key in &created {
                    let k = &self.keys[key];
                    let (lv, h, e, leaf) = (k.level as usize, k.hash, k.eref, k.rules_below == 0);
                    let (bl, b) = (k.bmp_len as usize, k.bmp);
                    self.fib.e_set_role(e, lv, bl, b);
                    self.fib.tables[lv - 1].insert(h, e, leaf);
                    self.maybe_grow(lv);
                }
                if let Some(e) = own_entry {
                    self.share_into(name, l, e);
                }
                self.rules += 1;
            }
        }
        // The rule and every key below it whose best match is not longer.
        let mut updates = Vec::new();
        for (key, k) in self
            .keys
            .range_mut::<[u8], _>((Bound::Included(tlv), Bound::Unbounded))
            .take_while(|(key, _)| key.starts_with(tlv))
        {
            if k.bmp_len as usize <= l {
                k.bmp_len = l as u8;
                k.bmp = nh;
                updates.push((k.eref, k.level as usize));
            }
            let _ = key;
        }
        for (e, lv) in updates {
            self.fib.e_set_role(e, lv, l, nh);
        }
        self.maybe_compact();
        Ok(())
    }

    /// Delete rule `name`. Markers it alone needed go too; keys below it
    /// inherit from the next shorter rule.
    pub fn remove<N: NameView + ?Sized>(&mut self, name: &N) -> Result<(), FibError> {
        let l = self.check_name(name)?;
        if l == 0 {
            if self.fib.default_nh == NH_NONE {
                return Err(FibError::NotFound);
            }
            self.fib.nh.release(self.fib.default_nh);
            self.fib.default_nh = NH_NONE;
            self.rules -= 1;
            return Ok(());
        }
        let tlv = name.tlv();
        let old = match self.keys.get(tlv) {
            Some(k) if k.rule != NH_NONE => k.rule,
            _ => return Err(FibError::NotFound),
        };
        let (blen, bnh) = self.inherited(name, l);
        let mut updates = Vec::new();
        for (_, k) in self
            .keys
            .range_mut::<[u8], _>((Bound::Included(tlv), Bound::Unbounded))
            .take_while(|(key, _)| key.starts_with(tlv))
        {
            if k.bmp_len as usize == l {
                k.bmp_len = blen as u8;
                k.bmp = bnh;
                updates.push((k.eref, k.level as usize));
            }
        }
        for (e, lv) in updates {
            self.fib.e_set_role(e, lv, blen, bnh);
        }
        if let Some(k) = self.keys.get_mut(tlv) {
            k.rule = NH_NONE;
        }
        for i in 1..l {
            let key = &tlv[..name.prefix_end(i)];
            if let Some(k) = self.keys.get_mut(key) {
                k.rules_below -= 1;
                if k.rules_below == 0 {
                    let (lv, h, e) = (k.level as usize, k.hash, k.eref);
                    self.fib.tables[lv - 1].set_leaf(h, e, true);
                }
            }
        }
        for (p, _) in self.rule_path(name, l) {
            let key = &tlv[..name.prefix_end(p as usize)];
            let Some(k) = self.keys.get_mut(key) else {
                continue;
            };
            k.refs -= 1;
            if k.refs == 0 {
                let (lv, h, e) = (k.level as usize, k.hash, k.eref);
                self.keys.remove(key);
                self.fib.tables[lv - 1].remove(h, e);
                self.entry_ref_add(e, -1);
            }
        }
        self.fib.nh.release(old);
        self.rules -= 1;
        self.maybe_compact();
        Ok(())
    }

    /// Check the invariants against the map (tests): every key is in its
    /// table with the right leaf bit and role value, and refs match.
    #[doc(hidden)]
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut refs: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
        let mut ends = Vec::new();
        for (key, k) in &self.keys {
            if k.rule != NH_NONE {
                component_ends(key, &mut ends).map_err(|e| e.to_string())?;
                let n = crate::name::NameBuf::from_tlv(key).map_err(|e| e.to_string())?;
                for (p, _) in self.rule_path(&n, k.level as usize) {
                    *refs
                        .entry(key[..ends[p as usize - 1] as usize].to_vec())
                        .or_default() += 1;
                }
            }
            if self.pulled.contains(key) {
                *refs.entry(key.clone()).or_default() += 1;
            }
            let role = self.fib.e_role(k.eref, k.level as usize);
            if role != Some((k.bmp_len as usize, k.bmp)) {
                return Err(format!(
                    "key {key:?}: role {role:?}, map ({}, {})",
                    k.bmp_len, k.bmp
                ));
            }
            if self.fib.e_str(k.eref).get(..key.len()) != Some(key.as_slice()) {
                return Err(format!(
                    "key {key:?} points at an entry with another string"
                ));
            }
            if k.rules_below != self.count_rules_below(key) {
                return Err(format!(
                    "key {key:?}: rules_below {} is stale",
                    k.rules_below
                ));
            }
        }
        for (key, k) in &self.keys {
            if refs.get(key).copied().unwrap_or(0) != k.refs {
                return Err(format!(
                    "key {key:?}: refs {} vs {:?}",
                    k.refs,
                    refs.get(key)
                ));
            }
        }
        if refs.len() != self.keys.len() {
            return Err("a key that no rule needs is still present (or one is missing)".into());
        }
        let total: usize = self.fib.tables.iter().map(Table::len).sum();
        if total != self.keys.len() {
            return Err(format!("tables hold {total} keys, map {}", self.keys.len()));
        }
        let mut per_entry: HashMap<u64, u32> = HashMap::new();
        for k in self.keys.values() {
            *per_entry.entry(k.eref).or_default() += 1;
        }
        for (&e, &n) in &per_entry {
            if self.entry_refs(e) != n {
                return Err(format!(
                    "entry {e}: reference count {} but {n} keys point at it",
                    self.entry_refs(e)
                ));
            }
        }
        if per_entry.len() != self.live_entries {
            return Err(format!(
                "{} live entries counted, {} referenced",
                self.live_entries,
                per_entry.len()
            ));
        }
        let (_, _, compact_words) = self.fib.compaction_plan();
        if compact_words + self.free_words != self.fib.entries.len() {
            return Err(format!(
                "arena of {} words: {compact_words} live + {} free do not add up",
                self.fib.entries.len(),
                self.free_words
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::name::NameBuf;

    fn name(c: &[&str]) -> NameBuf {
        NameBuf::from_components(c.iter()).unwrap()
    }

    fn hop(face: u32) -> [NextHop; 1] {
        [NextHop { face, cost: 0 }]
    }

    #[test]
    fn rules_on_a_longer_rules_path_share_its_string() {
        // k = 7: path(7) = [4, 6, 7], so /a../d and /a../f are roles of
        // /a../g's entry once it exists; inserted shortest first, their own
        // entries move into it and are freed.
        let mut ctl = FibControl::new(Config {
            max_components: 7,
            ..Config::default()
        })
        .unwrap();
        let full = ["a", "b", "c", "d", "e", "f", "g"];
        for (i, l) in [4, 6, 7].into_iter().enumerate() {
            ctl.insert(&name(&full[..l]), &hop(i as u32)).unwrap();
            ctl.check_invariants().unwrap();
        }
        assert_eq!(ctl.stats().entries, 1, "one shared string");
        assert!(
            ctl.free_entry_words() > 0,
            "the two shorter strings were freed"
        );
        let fib = ctl.fib();
        for (q, len, face) in [(&full[..], 7, 2), (&full[..6], 6, 1), (&full[..5], 4, 0)] {
            let m = fib.lookup(&name(q)).unwrap();
            assert_eq!((m.len, fib.next_hops(m.nh)[0].face), (len, face), "{q:?}");
        }
        // Deleting the owner keeps its string for the two remaining keys.
        ctl.remove(&name(&full)).unwrap();
        ctl.check_invariants().unwrap();
        assert_eq!(ctl.stats().entries, 1);
        let m = ctl.fib().lookup(&name(&full)).unwrap();
        assert_eq!(m.len, 6);
        ctl.compact();
        ctl.check_invariants().unwrap();
        assert_eq!(ctl.free_entry_words(), 0);
        assert_eq!(ctl.fib().lookup(&name(&full)), Some(m));
    }

    #[test]
    fn a_shorter_string_still_used_elsewhere_is_not_moved() {
        // /a/b/c/d lives in /a/b/c/d/x/y's entry (a marker of it at 4);
        // the new rule /a/b/c/d/e/f/g must not take that key away, or the
        // entry of /a/b/c/d/x/y would lose a key it still holds.
        let mut ctl = FibControl::new(Config {
            max_components: 7,
            ..Config::default()
        })
        .unwrap();
        ctl.insert(&name(&["a", "b", "c", "d", "x", "y"]), &hop(1))
            .unwrap();
        ctl.insert(&name(&["a", "b", "c", "d", "e", "f", "g"]), &hop(2))
            .unwrap();
        ctl.check_invariants().unwrap();
        assert_eq!(ctl.stats().entries, 2);
        assert_eq!(ctl.free_entry_words(), 0);
    }

    #[test]
    fn churn_compacts_the_arena_and_keeps_answers() {
        let mut ctl = FibControl::new(Config {
            max_components: 7,
            ..Config::default()
        })
        .unwrap();
        let names: Vec<NameBuf> = (0..3000)
            .map(|i| {
                let c: Vec<String> = (0..(i % 7 + 1))
                    .map(|j| format!("c{}", (i >> j) % 5))
                    .collect();
                NameBuf::from_components(c.iter()).unwrap()
            })
            .collect();
        let mut oracle = crate::oracle::NameTrie::new();
        for (i, n) in names.iter().enumerate() {
            if ctl.get(n).is_none() {
                ctl.insert(n, &hop(i as u32)).unwrap();
                oracle.insert(n, hop(i as u32).to_vec());
            }
        }
        let peak = ctl.fib().entries.len();
        for n in names.iter().step_by(2) {
            if ctl.remove(n).is_ok() {
                oracle.remove(n);
            }
        }
        ctl.check_invariants().unwrap();
        assert!(
            ctl.free_entry_words() * 4 <= ctl.fib().entries.len(),
            "at most a quarter of the arena is free"
        );
        assert!(ctl.fib().entries.len() < peak, "the arena shrank");
        for n in &names {
            let mut q = n.clone();
            q.push(8, b"zz").unwrap();
            let got = ctl
                .fib()
                .lookup(&q)
                .map(|m| (m.len, ctl.fib().next_hops(m.nh).to_vec()));
            let want = oracle.lookup(&q).map(|(l, h)| (l, h.to_vec()));
            assert_eq!(got, want, "{n}");
        }
    }
}
