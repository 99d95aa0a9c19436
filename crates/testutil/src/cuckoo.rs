//! A bucketed (2,4) cuckoo hash table: the CuckooSwitch baseline.
//!
//! Zhou et al., "Scalable, High Performance Ethernet Forwarding with
//! CuckooSwitch" (CoNEXT 2013), §4, building on MemC3 (NSDI 2013): every key
//! has two candidate buckets, each bucket holds four slots, and a slot stores
//! a 16-bit tag next to the full key and value. Benchmarks compare Othello and
//! Concise against this table on the same keys.
//!
//! # Layout
//!
//! A bucket is `#[repr(C, align(64))]`: four tags, then four keys, then
//! four values. For 6-byte MACs with 2-byte values that is exactly one cache
//! line; 8-byte keys with 8-byte values take two. A lookup reads at most two
//! buckets.
//!
//! # Hashing
//!
//! `h = nexthop_hash::hash128(key bytes, seed)`; the buckets are
//! `reduce(h.w0(), nb)` and `reduce(h.w1(), nb)` (the second is bumped to the
//! next bucket when the two coincide, so every key has two distinct
//! candidates once there are two buckets), and the tag is the top 16 bits of
//! `h.hi()`, with 0 mapped to 1 because tag 0 marks an empty slot.
//!
//! # Invariants
//!
//! * A slot's key and value are initialised exactly when its tag is nonzero.
//! * Every stored key sits in one of its two candidate buckets, with its tag.
//! * No key is stored twice.
//!
//! # Insertion
//!
//! An existing key has its value replaced. Otherwise the key goes to a free
//! slot of either candidate bucket; if both are full, a breadth-first search
//! over displacement paths (each step moves a resident key to its other
//! candidate bucket, never revisiting a bucket) looks for a free slot within
//! [`MAX_BFS_NODES`] buckets. The path is then applied from its free end
//! back, so the table is consistent after every move and unchanged when the
//! search fails with [`CuckooError::TableFull`].
//!
//! # Batch lookup
//!
//! [`CuckooTable::lookup_batch`] works in groups of [`BATCH`]: it hashes every
//! key of a group and prefetches both candidate buckets of each (x86-64
//! `prefetcht0`, a no-op elsewhere) while the group before is probed
//! (`nexthop_mem::two_stage`), so the memory accesses of the groups overlap
//! (CuckooSwitch §4.2, batched lookups with prefetching).
//!
//! # Threading
//!
//! Plain `&self` lookups and `&mut self` updates; no internal synchronisation.

use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::mem::{size_of, MaybeUninit};

use nexthop_hash::{reduce, KeyBytes};

/// Slots per bucket.
pub const SLOTS: usize = 4;
/// Keys hashed and prefetched together by [`CuckooTable::lookup_batch`].
pub const BATCH: usize = 32;
/// The most buckets the insertion search visits before reporting a full table.
pub const MAX_BFS_NODES: usize = 2048;
/// The highest load factor [`CuckooTable::with_capacity`] sizes for.
pub const MAX_LOAD_FACTOR: f64 = 0.9;
/// The hash seed used by [`CuckooTable::with_capacity`].
pub const DEFAULT_SEED: u64 = 0x6375_636B_6F6F_2121;

/// Why an insertion failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CuckooError {
    /// No displacement path to a free slot was found within the search bound;
    /// the table is unchanged.
    TableFull,
}

impl fmt::Display for CuckooError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CuckooError::TableFull => write!(
                f,
                "cuckoo table full: no free slot within {MAX_BFS_NODES} displacement steps"
            ),
        }
    }
}

impl std::error::Error for CuckooError {}

/// One 64-byte-aligned bucket of four slots.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Bucket<K: Copy, V: Copy> {
    tags: [u16; SLOTS],
    keys: [MaybeUninit<K>; SLOTS],
    vals: [MaybeUninit<V>; SLOTS],
}

const _: () = assert!(std::mem::align_of::<Bucket<u64, u64>>() == 64);
const _: () = assert!(size_of::<Bucket<[u8; 6], u16>>() == 64);
const _: () = assert!(size_of::<Bucket<u64, u64>>() == 128);

impl<K: Copy + Eq, V: Copy> Bucket<K, V> {
    const EMPTY: Self = Bucket {
        tags: [0; SLOTS],
        keys: [MaybeUninit::uninit(); SLOTS],
        vals: [MaybeUninit::uninit(); SLOTS],
    };

    /// The key in slot `s`, if occupied.
    #[inline(always)]
    fn key(&self, s: usize) -> Option<K> {
        if self.tags[s] == 0 {
            return None;
        }
        // SAFETY: (1) the tag is nonzero, and a slot's key is initialised
        // whenever its tag is nonzero (module invariant, upheld by `put`).
        Some(unsafe { self.keys[s].assume_init() })
    }

    /// The value in slot `s`, if occupied.
    #[inline(always)]
    fn val(&self, s: usize) -> Option<V> {
        if self.tags[s] == 0 {
            return None;
        }
        // SAFETY: (1) as in `key`: a nonzero tag means the value is initialised.
        Some(unsafe { self.vals[s].assume_init() })
    }

    /// Fill slot `s` (`tag` must be nonzero).
    #[inline(always)]
    fn put(&mut self, s: usize, tag: u16, k: K, v: V) {
        debug_assert_ne!(tag, 0);
        self.keys[s] = MaybeUninit::new(k);
        self.vals[s] = MaybeUninit::new(v);
        self.tags[s] = tag;
    }

    #[inline(always)]
    fn free_slot(&self) -> Option<usize> {
        self.tags.iter().position(|&t| t == 0)
    }

    /// The slot holding `k` with tag `tag`.
    #[inline(always)]
    fn find(&self, tag: u16, k: &K) -> Option<usize> {
        (0..SLOTS).find(|&s| self.tags[s] == tag && self.key(s).as_ref() == Some(k))
    }
}

/// A key's candidate buckets and tag.
#[derive(Clone, Copy, Debug, Default)]
struct Probe {
    b1: usize,
    b2: usize,
    tag: u16,
}

/// A (2,4) cuckoo hash table from `K` to `V` (see the module docs).
pub struct CuckooTable<K: Copy, V: Copy> {
    buckets: Vec<Bucket<K, V>>,
    len: usize,
    seed: u64,
}

impl<K: Copy, V: Copy> fmt::Debug for CuckooTable<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CuckooTable")
            .field("len", &self.len)
            .field("buckets", &self.buckets.len())
            .field("bucket_bytes", &size_of::<Bucket<K, V>>())
            .field("seed", &self.seed)
            .finish()
    }
}

impl<K: Copy + Eq + KeyBytes, V: Copy> CuckooTable<K, V> {
    /// A table sized for `n` keys at a load factor of at most
    /// [`MAX_LOAD_FACTOR`], hashed with [`DEFAULT_SEED`].
    ///
    /// # Panics
    ///
    /// If `n` needs more than `u32::MAX` buckets.
    pub fn with_capacity(n: usize) -> Self {
        Self::with_capacity_and_seed(n, DEFAULT_SEED)
    }

    /// Like [`Self::with_capacity`], hashing with `seed`.
    ///
    /// # Panics
    ///
    /// If `n` needs more than `u32::MAX` buckets.
    pub fn with_capacity_and_seed(n: usize, seed: u64) -> Self {
        let slots = (n as f64 / MAX_LOAD_FACTOR).ceil() as usize;
        let nb = slots.div_ceil(SLOTS).max(2);
        assert!(
            u32::try_from(nb).is_ok(),
            "cuckoo table: {n} keys need more than 2^32 buckets"
        );
        CuckooTable {
            buckets: vec![Bucket::EMPTY; nb],
            len: 0,
            seed,
        }
    }

    /// The number of keys stored.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no key is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The number of slots (buckets times [`SLOTS`]).
    pub fn capacity(&self) -> usize {
        self.buckets.len() * SLOTS
    }

    /// The number of buckets.
    pub fn bucket_count(&self) -> usize {
        self.buckets.len()
    }

    /// Bytes of bucket memory (the structure a lookup reads).
    pub fn memory_bytes(&self) -> usize {
        self.buckets.len() * size_of::<Bucket<K, V>>()
    }

    /// The hash seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    #[inline(always)]
    fn probe(&self, k: &K) -> Probe {
        let h = k.hash128(self.seed);
        let nb = self.buckets.len() as u32;
        let b1 = reduce(h.w0(), nb);
        let mut b2 = reduce(h.w1(), nb);
        if b2 == b1 {
            b2 = if b1 + 1 == nb { 0 } else { b1 + 1 };
        }
        let tag = match (h.hi() >> 48) as u16 {
            0 => 1,
            t => t,
        };
        Probe {
            b1: b1 as usize,
            b2: b2 as usize,
            tag,
        }
    }

    #[inline(always)]
    fn get_probed(&self, p: Probe, k: &K) -> Option<V> {
        for b in [p.b1, p.b2] {
            let bucket = &self.buckets[b];
            if let Some(s) = bucket.find(p.tag, k) {
                return bucket.val(s);
            }
        }
        None
    }

    /// The value stored for `k`.
    pub fn get(&self, k: &K) -> Option<V> {
        self.get_probed(self.probe(k), k)
    }

    /// Store `v` for `k`, returning the previous value, or
    /// [`CuckooError::TableFull`] (table unchanged) when no free slot can be
    /// reached.
    pub fn insert(&mut self, k: K, v: V) -> Result<Option<V>, CuckooError> {
        let p = self.probe(&k);
        for b in [p.b1, p.b2] {
            let bucket = &mut self.buckets[b];
            if let Some(s) = bucket.find(p.tag, &k) {
                let old = bucket.val(s);
                bucket.put(s, p.tag, k, v);
                return Ok(old);
            }
        }
        for b in [p.b1, p.b2] {
            if let Some(s) = self.buckets[b].free_slot() {
                self.buckets[b].put(s, p.tag, k, v);
                self.len += 1;
                return Ok(None);
            }
        }
        let (root, s) = self.make_room(p).ok_or(CuckooError::TableFull)?;
        self.buckets[root].put(s, p.tag, k, v);
        self.len += 1;
        Ok(None)
    }

    /// Breadth-first search for a displacement path from `p`'s buckets to a
    /// free slot; applies it and returns the freed (bucket, slot) in one of
    /// `p`'s buckets.
    fn make_room(&mut self, p: Probe) -> Option<(usize, usize)> {
        struct Node {
            bucket: usize,
            /// Index of the parent node and the slot in the parent's bucket
            /// whose key moves into this bucket.
            parent: Option<(usize, usize)>,
        }
        let mut nodes: Vec<Node> = Vec::with_capacity(64);
        let mut visited: HashSet<usize> = HashSet::with_capacity(64);
        let mut queue: VecDeque<usize> = VecDeque::new();
        for b in [p.b1, p.b2] {
            if visited.insert(b) {
                queue.push_back(nodes.len());
                nodes.push(Node {
                    bucket: b,
                    parent: None,
                });
            }
        }
        let (mut node, mut free) = loop {
            let i = queue.pop_front()?;
            let b = nodes[i].bucket;
            if let Some(s) = self.buckets[b].free_slot() {
                break (i, s);
            }
            for s in 0..SLOTS {
                if nodes.len() >= MAX_BFS_NODES {
                    break;
                }
                let Some(resident) = self.buckets[b].key(s) else {
                    continue;
                };
                let rp = self.probe(&resident);
                let alt = if rp.b1 == b { rp.b2 } else { rp.b1 };
                if visited.insert(alt) {
                    queue.push_back(nodes.len());
                    nodes.push(Node {
                        bucket: alt,
                        parent: Some((i, s)),
                    });
                }
            }
        };
        // Walk back to the root, moving each parent's key into the slot just
        // freed below it. Buckets on the path are distinct (visited set).
        while let Some((parent, s)) = nodes[node].parent {
            let (from, to) = (nodes[parent].bucket, nodes[node].bucket);
            let src = self.buckets[from];
            let (Some(k), Some(v)) = (src.key(s), src.val(s)) else {
                unreachable!("a BFS path only goes through occupied slots");
            };
            self.buckets[to].put(free, src.tags[s], k, v);
            self.buckets[from].tags[s] = 0;
            free = s;
            node = parent;
        }
        Some((nodes[node].bucket, free))
    }

    /// Remove `k`, returning its value.
    pub fn remove(&mut self, k: &K) -> Option<V> {
        let p = self.probe(k);
        for b in [p.b1, p.b2] {
            let bucket = &mut self.buckets[b];
            if let Some(s) = bucket.find(p.tag, k) {
                let old = bucket.val(s);
                bucket.tags[s] = 0;
                self.len -= 1;
                return old;
            }
        }
        None
    }

    /// Look up every key of `keys` into the same position of `out`; returns
    /// the number of hits. Keys go in groups of [`BATCH`]: a group is hashed
    /// and its buckets prefetched while the group before is probed (the
    /// order of `nexthop_othello::Query::lookup_batch`, so a comparison of
    /// the two compares tables, not batch orders).
    ///
    /// # Panics
    ///
    /// If `keys` and `out` differ in length.
    pub fn lookup_batch(&self, keys: &[K], out: &mut [Option<V>]) -> usize {
        assert_eq!(
            keys.len(),
            out.len(),
            "lookup_batch: {} keys but {} output slots",
            keys.len(),
            out.len()
        );
        let mut hits = 0;
        nexthop_mem::two_stage::<BATCH, _, [Probe; BATCH]>(
            keys,
            |kc, probes| {
                for (p, k) in probes.iter_mut().zip(kc) {
                    *p = self.probe(k);
                    nexthop_mem::prefetch_lines(&self.buckets[p.b1]);
                    nexthop_mem::prefetch_lines(&self.buckets[p.b2]);
                }
            },
            |start, kc, probes| {
                for (n, (p, k)) in probes.iter().zip(kc).enumerate() {
                    let o = self.get_probed(*p, k);
                    hits += usize::from(o.is_some());
                    out[start + n] = o;
                }
            },
        );
        hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{five_tuples, macs, rng, FiveTuple};
    use rand::Rng;
    use std::collections::HashMap;

    #[test]
    fn buckets_are_cache_line_aligned_in_memory() {
        let t: CuckooTable<u64, u32> = CuckooTable::with_capacity(1000);
        for b in &t.buckets {
            assert_eq!((b as *const Bucket<u64, u32>) as usize % 64, 0);
        }
        assert_eq!(size_of::<Bucket<u64, u32>>() % 64, 0);
        assert!(t.capacity() as f64 * MAX_LOAD_FACTOR >= 1000.0);
    }

    #[test]
    fn insert_get_remove_round_trip_and_replace_returns_old_value() {
        let mut t = CuckooTable::with_capacity(10);
        assert_eq!(t.insert(5u64, 50u32), Ok(None));
        assert_eq!(t.insert(5, 51), Ok(Some(50)));
        assert_eq!(t.get(&5), Some(51));
        assert_eq!(t.len(), 1);
        assert_eq!(t.remove(&5), Some(51));
        assert_eq!(t.remove(&5), None);
        assert_eq!(t.get(&5), None);
        assert!(t.is_empty());
    }

    #[test]
    fn table_matches_hashmap_over_200k_random_operations() {
        let universe = 40_000u64;
        let mut t: CuckooTable<u64, u64> = CuckooTable::with_capacity(universe as usize);
        let mut oracle: HashMap<u64, u64> = HashMap::new();
        let mut r = rng(2024);
        for op in 0..200_000u32 {
            // Insert-heavy first half drives the load towards 0.9.
            let insert_p = if op < 100_000 { 0.75 } else { 0.45 };
            let k = r.gen_range(0..universe);
            let x: f64 = r.gen();
            if x < insert_p {
                let v = r.gen();
                assert_eq!(t.insert(k, v), Ok(oracle.insert(k, v)), "op {op}");
            } else if x < insert_p + 0.2 {
                assert_eq!(t.remove(&k), oracle.remove(&k), "op {op}");
            } else {
                assert_eq!(t.get(&k), oracle.get(&k).copied(), "op {op}");
            }
            assert_eq!(t.len(), oracle.len());
        }
        for k in 0..universe {
            assert_eq!(t.get(&k), oracle.get(&k).copied());
        }
    }

    #[test]
    fn filling_to_capacity_succeeds_at_load_factor_point_nine() {
        let n = 50_000;
        let keys = macs(7, n);
        let mut t: CuckooTable<[u8; 6], u16> = CuckooTable::with_capacity(n);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(t.insert(*k, i as u16), Ok(None));
        }
        assert!(t.len() as f64 / t.capacity() as f64 > 0.89);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(t.get(k), Some(i as u16));
        }
    }

    #[test]
    fn overfilling_reports_table_full_and_keeps_every_stored_key() {
        let mut t: CuckooTable<u64, u64> = CuckooTable::with_capacity(1_000);
        let mut stored = Vec::new();
        let mut full_seen = false;
        for k in 0..(t.capacity() as u64 + 100) {
            match t.insert(k, !k) {
                Ok(None) => stored.push(k),
                Ok(Some(_)) => unreachable!("keys are distinct"),
                Err(CuckooError::TableFull) => {
                    full_seen = true;
                    assert_eq!(t.get(&k), None, "a failed insert must not store the key");
                }
            }
        }
        assert!(full_seen);
        assert_eq!(t.len(), stored.len());
        assert!(stored.len() as f64 / t.capacity() as f64 > 0.95);
        for k in stored {
            assert_eq!(t.get(&k), Some(!k));
        }
    }

    #[test]
    fn batch_lookup_equals_single_lookup_for_hits_and_misses() {
        let tuples = five_tuples(3, 10_000);
        let (present, absent) = tuples.split_at(6_000);
        let mut t: CuckooTable<FiveTuple, u32> = CuckooTable::with_capacity(present.len());
        for (i, k) in present.iter().enumerate() {
            assert_eq!(t.insert(*k, i as u32), Ok(None));
        }
        // Interleave hits and misses, with a length that is not a multiple
        // of the batch size.
        let queries: Vec<FiveTuple> = present
            .iter()
            .zip(absent)
            .flat_map(|(a, b)| [*a, *b])
            .take(7_999)
            .collect();
        let mut out = vec![None; queries.len()];
        let hits = t.lookup_batch(&queries, &mut out);
        let single: Vec<Option<u32>> = queries.iter().map(|k| t.get(k)).collect();
        assert_eq!(out, single);
        assert_eq!(hits, single.iter().filter(|v| v.is_some()).count());
        assert_eq!(hits, 4_000);
    }

    #[test]
    #[should_panic(expected = "output slots")]
    fn batch_lookup_rejects_mismatched_lengths() {
        let t: CuckooTable<u64, u64> = CuckooTable::with_capacity(4);
        t.lookup_batch(&[1, 2], &mut [None]);
    }

    #[test]
    fn tiny_tables_still_hold_their_capacity() {
        for n in 1..40u64 {
            let mut t: CuckooTable<u64, u64> = CuckooTable::with_capacity(n as usize);
            for k in 0..n {
                assert_eq!(t.insert(k, k), Ok(None), "n = {n}");
            }
            assert_eq!(t.len(), n as usize);
        }
    }
}
