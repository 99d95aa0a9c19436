//! The control-plane half of an Othello: keys, the bipartite graph and the
//! value columns. It computes every data-plane change as a list of slot
//! writes ([`Change`]) that [`Delta`]s carry to query structures.
//!
//! Each key `k` is an edge between vertex `ha(k)` of side A and `hb(k)` of
//! side B. The graph is kept acyclic; for each edge, and for each value
//! column `c`, `A_c[ha(k)] ^ B_c[hb(k)]` equals the key's slot word (its
//! `l`-bit value, with the `r`-bit check field above it).
//!
//! * **insert**: if the edge joins two trees, XOR the smaller tree by the
//!   difference (found by a lock-step search from both ends: once one side
//!   is exhausted the other goes on only while it is not larger, so the
//!   cost is about twice the smaller tree; leaves are counted without being
//!   expanded); if one end is isolated only that slot is written. If both ends are
//!   already in one tree the edge would close a cycle: the key goes to the
//!   stash (a small exact table the data plane checks first) instead of
//!   stopping the world for a rebuild.
//! * **remove**: unlink the edge; no data-plane write. A removal may open a
//!   path for stashed keys, which are then moved back into the arrays.
//! * **alter**: split the key's tree at its edge and XOR the smaller half.
//!   Most keys have a leaf end (one write), and most of the rest an end
//!   whose one other edge leads to a leaf (two writes); only the others
//!   search.
//! * **rebuild** (new seed, O(n)): only when the stash overflows or the
//!   key count passes the capacity the arrays were sized for; it produces a
//!   whole snapshot. Sizing with enough capacity up front avoids it.
//!
//! Keys are found by walking the (short, expected < 2 entries) adjacency
//! list of `ha(k)`, so the control plane needs no separate key index.

use std::fmt::Debug;

use nexthop_hash::{Hash128, KeyBytes, SeedSequence};
use nexthop_mem::HugeBox;

use crate::config::{mask, Config};
use crate::delta::{Delta, Op};
use crate::error::{try_buffer, AllocError, UpdateError};
use crate::query::{Query, QueryMeta};
use crate::snapshot;

mod batch;
mod graph;
#[cfg(test)]
mod tests;

use graph::SideWalk;

/// Per-column scratch words, on the stack for up to 8 columns.
type ColWords = smallvec::SmallVec<[u64; 8]>;

/// `cols` copies of `v` (`smallvec![v; cols]` is an out-of-line call of
/// about 30 instructions, a tenth of a batched alter).
#[inline(always)]
fn col_words(cols: usize, v: u64) -> ColWords {
    if cols <= 8 {
        ColWords::from_buf_and_len([v; 8], cols)
    } else {
        smallvec::smallvec![v; cols]
    }
}

const NIL: u32 = u32::MAX;
/// `next_a` of an edge that lives in the stash instead of the graph.
const STASHED: u32 = u32::MAX - 1;
/// Seeds tried by one rebuild before giving up.
const MAX_SEEDS: usize = 64;
/// Removals between two attempts to move stashed keys back into the graph.
const RETRY_EVERY: u32 = 1024;
/// Inserts per [`Othello::apply_batch`] call of [`Othello::build`].
const BUILD_BATCH: usize = 4096;
/// Smallest capacity a structure is sized for.
const MIN_CAPACITY: usize = 16;

/// One key: its edge (end vertices and the links of both vertices'
/// adjacency lists) and the key itself, in one record so finding a key in
/// a list and unlinking it touch one cache line per edge (32-byte aligned:
/// a record with a key of up to 14 bytes never straddles two lines).
/// `key` is `None` (and `a == NIL`) for a free record.
#[derive(Clone, Debug)]
#[repr(C, align(32))]
struct Edge<K> {
    a: u32,
    b: u32,
    next_a: u32,
    next_b: u32,
    key: Option<K>,
}

impl<K> Edge<K> {
    /// A record for `key`, not in the graph yet.
    fn unlinked(key: Option<K>) -> Self {
        Edge {
            a: NIL,
            b: NIL,
            next_a: NIL,
            next_b: NIL,
            key,
        }
    }
}

/// The data-plane writes of one control operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Slot writes, one list per value column.
    Writes(Vec<Vec<Op>>),
    /// Seeds or sizes changed: every query structure needs a new snapshot.
    Rebuilt,
}

impl Change {
    /// The writes for `column` (empty for a rebuild).
    pub fn writes(&self, column: usize) -> &[Op] {
        match self {
            Change::Writes(w) => w.get(column).map_or(&[], |v| v.as_slice()),
            Change::Rebuilt => &[],
        }
    }

    /// Whether the operation rebuilt the structure.
    pub fn is_rebuild(&self) -> bool {
        matches!(self, Change::Rebuilt)
    }
}

/// One operation of [`Othello::apply_batch`] (column 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchOp<K> {
    /// Insert a new key with its value.
    Insert(K, u64),
    /// Remove a key.
    Remove(K),
    /// Change a key's value.
    Alter(K, u64),
}

impl<K> BatchOp<K> {
    /// The key the operation is about.
    pub fn key(&self) -> &K {
        match self {
            BatchOp::Insert(k, _) | BatchOp::Remove(k) | BatchOp::Alter(k, _) => k,
        }
    }
}

/// A batch stopped at operation `index`; the operations before it were
/// applied and `applied` holds their writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchError {
    /// Index of the failing operation in the batch.
    pub index: usize,
    /// Why it failed (the structure is as before it).
    pub error: UpdateError,
    /// The change made by the operations before `index`.
    pub applied: Change,
}

impl std::fmt::Display for BatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "batch operation {}: {}", self.index, self.error)
    }
}

impl std::error::Error for BatchError {}

/// Counters describing the structure's history.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Rebuilds because the key count passed the capacity.
    pub grow_rebuilds: u64,
    /// Rebuilds because the stash overflowed.
    pub reseed_rebuilds: u64,
    /// Keys that went to the stash on insert.
    pub stashed: u64,
    /// Data-plane slot writes emitted (column 0).
    pub slot_writes: u64,
}

/// Summary of an Othello's size and state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    /// Keys stored.
    pub len: usize,
    /// Keys the arrays are sized for before a grow rebuild.
    pub capacity: usize,
    /// Query-side metadata (sizes, seed, widths, generation).
    pub meta: QueryMeta,
    /// Bytes per data-plane slot.
    pub slot_bytes: usize,
    /// Keys in the stash.
    pub stash_len: usize,
    /// Data-plane bytes (arrays and stash) of one column.
    pub query_bytes: usize,
    /// Data-plane bits per key of one column (`None` when empty).
    pub bits_per_key: Option<f64>,
    /// History counters.
    pub counters: Counters,
}

/// An Othello control structure mapping keys of type `K` to `l`-bit values
/// in one or more columns (one per switch, all sharing one graph).
pub struct Othello<K> {
    cfg: Config,
    meta: QueryMeta,
    seeds: SeedSequence,
    capacity: usize,
    len: usize,
    /// Edge records, indexed by edge id (free ids are reused).
    edges: Vec<Edge<K>>,
    /// `words[e * cols + c]`: slot word (value | check << l) of edge `e`.
    words: Vec<u64>,
    /// Adjacency heads; vertices `0..ma` are side A, `ma..ma+mb` side B.
    /// Per vertex, `stride = 1 + columns` words: word 0 holds the adjacency
    /// head (low 32 bits) and the search mark (high 32 bits), words
    /// `1..=columns` the slot words, so a search touches one cache line per
    /// vertex. Vertices `0..ma` are side A, `ma..ma+mb` side B.
    verts: HugeBox<u64>,
    stamp: u32,
    free: Vec<u32>,
    stash: Vec<u32>,
    counters: Counters,
    removes_since_retry: u32,
    /// The two sides of [`Self::split_search`] (kept to reuse their buffers).
    wa: SideWalk,
    wb: SideWalk,
}

impl<K> Debug for Othello<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Othello")
            .field("len", &self.len)
            .field("meta", &self.meta)
            .field("stash", &self.stash.len())
            .finish_non_exhaustive()
    }
}

impl<K: KeyBytes + Eq + Clone + Debug> Othello<K> {
    /// An empty structure (grows by rebuilding as keys arrive).
    pub fn new(cfg: Config) -> Result<Self, UpdateError> {
        Self::with_capacity(cfg, 0)
    }

    /// An empty structure sized for `capacity` keys: no rebuild happens
    /// before that many keys are present, unless the stash overflows.
    pub fn with_capacity(cfg: Config, capacity: usize) -> Result<Self, UpdateError> {
        cfg.validate()?;
        if capacity > 1 << 31 {
            return Err(crate::error::ConfigError::Capacity(capacity).into());
        }
        Self::probe_memory(&cfg, capacity.max(MIN_CAPACITY))?;
        let mut seeds = SeedSequence::new(cfg.seed);
        let seed = seeds.next().unwrap_or(cfg.seed);
        let mut o = Othello {
            cfg,
            meta: QueryMeta {
                generation: 0,
                seed,
                ma: 1,
                mb: 1,
                value_bits: cfg.value_bits,
                check_bits: cfg.check_bits,
                sizing: cfg.sizing,
            },
            seeds,
            capacity: 0,
            len: 0,
            edges: Vec::new(),
            words: Vec::new(),
            verts: HugeBox::from_fn(0, |_| 0),
            stamp: 0,
            free: Vec::new(),
            stash: Vec::new(),
            counters: Counters::default(),
            removes_since_retry: 0,
            wa: SideWalk::default(),
            wb: SideWalk::default(),
        };
        o.resize(capacity.max(MIN_CAPACITY));
        Ok(o)
    }

    /// Build from `(key, value)` pairs (one column). Duplicate keys are an
    /// error naming the key.
    ///
    /// The structure is sized for the pairs (an iterator of unknown length
    /// is collected first) and filled by [`Self::apply_batch`] inserts of
    /// 4096 pairs at a time: most keys meet an isolated vertex and write
    /// one slot, and the batch prefetches the vertices and edge records of
    /// the keys ahead. A depth-first colouring of the finished
    /// graph (what a rebuild did before) reads each vertex's list after one
    /// dependent miss and was 3–4 times slower at 1e7 keys.
    pub fn build(
        cfg: Config,
        pairs: impl IntoIterator<Item = (K, u64)>,
    ) -> Result<Self, UpdateError> {
        Self::build_with_capacity(cfg, 0, pairs)
    }

    /// [`Self::build`] into arrays sized for at least `capacity` keys, so
    /// inserts up to that many keys cause no grow rebuild.
    pub fn build_with_capacity(
        cfg: Config,
        capacity: usize,
        pairs: impl IntoIterator<Item = (K, u64)>,
    ) -> Result<Self, UpdateError> {
        if cfg.columns != 1 {
            return Err(UpdateError::Columns {
                expected: cfg.columns,
                got: 1,
            });
        }
        let pairs = pairs.into_iter();
        match pairs.size_hint() {
            (lo, Some(hi)) if lo == hi => Self::build_sized(cfg, lo, capacity, pairs),
            // An iterator of unknown length is collected first, so the
            // arrays are sized once for its length, not grown by rebuilds.
            _ => {
                let pairs: Vec<(K, u64)> = pairs.collect();
                Self::build_sized(cfg, pairs.len(), capacity, pairs.into_iter())
            }
        }
    }

    fn build_sized(
        cfg: Config,
        n: usize,
        capacity: usize,
        pairs: impl Iterator<Item = (K, u64)>,
    ) -> Result<Self, UpdateError> {
        // `with_capacity` reserves the edge and word lists too.
        let mut o = Self::with_capacity(cfg, n.max(capacity))?;
        let mut pairs = pairs.peekable();
        while pairs.peek().is_some() {
            let batch = pairs.by_ref().take(BUILD_BATCH);
            let batch = batch.map(|(k, v)| BatchOp::Insert(k, v)).collect();
            o.apply_batch(batch).map_err(|e| e.error)?;
        }
        Ok(o)
    }

    /// Size for the keys `build_columns` pushed, then construct.
    fn finish_build(mut self) -> Result<Self, UpdateError> {
        self.len = self.edges.len();
        let cap = self.len.max(MIN_CAPACITY);
        self.rebuild(cap, true)?;
        Ok(self)
    }

    /// Build from keys with one value per column.
    pub fn build_columns(
        cfg: Config,
        rows: impl IntoIterator<Item = (K, Vec<u64>)>,
    ) -> Result<Self, UpdateError> {
        cfg.validate()?;
        let rows = rows.into_iter();
        let mut o = Self::with_capacity(cfg, 0)?;
        let cols = cfg.columns;
        let (lo, _) = rows.size_hint();
        nexthop_mem::reserve_huge(&mut o.edges, lo);
        nexthop_mem::reserve_huge(&mut o.words, lo * cols);
        for (k, vals) in rows {
            let w = o.encode_words(k.hash128(o.meta.seed), &vals)?;
            o.edges.push(Edge::unlinked(Some(k)));
            o.words.extend_from_slice(&w);
        }
        o.finish_build()
    }

    fn cols(&self) -> usize {
        self.cfg.columns
    }

    #[inline(always)]
    fn stride(&self) -> usize {
        1 + self.cfg.columns
    }

    #[inline(always)]
    fn head(&self, x: u32) -> u32 {
        self.verts[x as usize * self.stride()] as u32
    }

    #[inline(always)]
    fn set_head(&mut self, x: u32, e: u32) {
        let i = x as usize * self.stride();
        self.verts[i] = (self.verts[i] & !0xffff_ffff) | e as u64;
    }

    #[inline(always)]
    fn mark(&self, x: u32) -> u32 {
        (self.verts[x as usize * self.stride()] >> 32) as u32
    }

    #[inline(always)]
    fn set_mark(&mut self, x: u32, m: u32) {
        let i = x as usize * self.stride();
        self.verts[i] = (self.verts[i] & 0xffff_ffff) | (m as u64) << 32;
    }

    #[inline(always)]
    fn slot(&self, x: u32, c: usize) -> u64 {
        self.verts[x as usize * self.stride() + 1 + c]
    }

    #[inline(always)]
    fn slot_mut(&mut self, x: u32, c: usize) -> &mut u64 {
        let i = x as usize * self.stride() + 1 + c;
        &mut self.verts[i]
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Query-side metadata (generation, seed, sizes, widths).
    pub fn meta(&self) -> &QueryMeta {
        &self.meta
    }

    /// Size and history summary.
    pub fn stats(&self) -> Stats {
        let slot_bytes = self.meta.slot_bytes();
        let query_bytes = (self.meta.ma as usize + self.meta.mb as usize) * slot_bytes
            + self.stash.len() * snapshot::STASH_ENTRY;
        Stats {
            len: self.len,
            capacity: self.capacity,
            meta: self.meta,
            slot_bytes,
            stash_len: self.stash.len(),
            query_bytes,
            bits_per_key: (self.len > 0).then(|| query_bytes as f64 * 8.0 / self.len as f64),
            counters: self.counters,
        }
    }

    fn encode_words(&self, h: Hash128, vals: &[u64]) -> Result<ColWords, UpdateError> {
        let mut out = ColWords::new();
        self.encode_into(h, vals, &mut out)?;
        Ok(out)
    }

    /// Slot words (value | check << l) of a key with hash `h`, one per
    /// column, appended to `out`.
    #[inline]
    fn encode_into(&self, h: Hash128, vals: &[u64], out: &mut ColWords) -> Result<(), UpdateError> {
        if vals.len() != self.cols() {
            return Err(UpdateError::Columns {
                expected: self.cols(),
                got: vals.len(),
            });
        }
        let vmask = mask(self.cfg.value_bits as u32);
        let check = self.meta.check_field(h);
        for &v in vals {
            if v & !vmask != 0 {
                return Err(UpdateError::ValueTooWide {
                    value: v,
                    bits: self.cfg.value_bits,
                });
            }
            out.push(v | check);
        }
        Ok(())
    }

    /// The bytes `resize` allocates for `capacity` keys: the slot
    /// arrays with their list heads, the edge records and the key words.
    pub fn bytes_for_capacity(cfg: &Config, capacity: usize) -> u128 {
        let (ma, mb) = cfg.sizing.arrays_for(capacity);
        let cap = cfg.sizing.capacity_of(ma, mb).max(capacity) as u128;
        let nv = ma as u128 + mb as u128;
        let stride = 1 + cfg.columns as u128;
        nv * stride * 8
            + cap * std::mem::size_of::<Edge<K>>() as u128
            + cap * cfg.columns as u128 * 8
    }

    /// Refuse a capacity whose arrays cannot be allocated, naming the
    /// bytes needed, instead of letting the allocation abort the process.
    /// The probe reserves (and at once frees) one block of that size, which
    /// fails where the arrays would: over the address-space limit or past
    /// what the kernel will commit.
    fn probe_memory(cfg: &Config, capacity: usize) -> Result<(), UpdateError> {
        let bytes = Self::bytes_for_capacity(cfg, capacity);
        let fits = usize::try_from(bytes)
            .ok()
            .is_some_and(|n| Vec::<u8>::new().try_reserve_exact(n).is_ok());
        if fits {
            Ok(())
        } else {
            Err(crate::error::ConfigError::OutOfMemory { capacity, bytes }.into())
        }
    }

    /// Refuse to grow to `capacity` keys when that is past 2^31 keys or
    /// its arrays cannot be allocated ([`Self::probe_memory`]), before
    /// anything changes.
    fn check_growth(cfg: &Config, capacity: usize) -> Result<(), UpdateError> {
        if capacity > 1 << 31 {
            return Err(crate::error::ConfigError::Capacity(capacity).into());
        }
        Self::probe_memory(cfg, capacity)
    }

    /// Set up empty arrays for `capacity` keys with the current seed.
    fn resize(&mut self, capacity: usize) {
        let (ma, mb) = self.cfg.sizing.arrays_for(capacity);
        self.meta.ma = ma;
        self.meta.mb = mb;
        self.capacity = self.cfg.sizing.capacity_of(ma, mb).max(capacity);
        let nv = ma as usize + mb as usize;
        let st = self.stride();
        self.verts = HugeBox::from_fn(0, |_| 0);
        self.verts = HugeBox::from_fn(nv * st, |i| if i % st == 0 { NIL as u64 } else { 0 });
        self.stamp = 0;
        let cap = self.capacity;
        nexthop_mem::reserve_huge(&mut self.edges, cap);
        nexthop_mem::reserve_huge(&mut self.words, cap * self.cfg.columns);
    }

    #[inline]
    fn adj_next(&self, e: u32, x: u32) -> (u32, u32) {
        let ed = &self.edges[e as usize];
        if x < self.meta.ma {
            (self.meta.ma + ed.b, ed.next_a)
        } else {
            (ed.a, ed.next_b)
        }
    }

    fn link(&mut self, e: u32) {
        let ma = self.meta.ma;
        let Edge { a, b, .. } = self.edges[e as usize];
        let xb = ma + b;
        self.edges[e as usize].next_a = self.head(a);
        self.set_head(a, e);
        self.edges[e as usize].next_b = self.head(xb);
        self.set_head(xb, e);
    }

    /// Take edge `e` out of the adjacency list of its B end `xb`.
    #[inline]
    fn unlink_b(&mut self, e: u32, xb: u32) {
        let next = self.edges[e as usize].next_b;
        let mut cur = self.head(xb);
        if cur == e {
            self.set_head(xb, next);
            return;
        }
        while cur != NIL {
            let n = self.edges[cur as usize].next_b;
            if n == e {
                self.edges[cur as usize].next_b = next;
                return;
            }
            cur = n;
        }
        debug_assert!(false, "edge not in its vertex's list");
    }

    /// The edge holding `key`, with its slots `(a, b)` under the current seed.
    fn find(&self, key: &K) -> Option<u32> {
        self.find_hashed(key, key.hash128(self.meta.seed))
    }

    /// [`Self::find`] with the key's hash already computed.
    fn find_hashed(&self, key: &K, h: Hash128) -> Option<u32> {
        let (a, b) = self.meta.slots(h);
        let (a, b) = (a as u32, b as u32);
        let mut e = self.head(a);
        while e != NIL {
            let ed = &self.edges[e as usize];
            if ed.b == b && ed.key.as_ref() == Some(key) {
                return Some(e);
            }
            e = ed.next_a;
        }
        self.stash
            .iter()
            .copied()
            .find(|&e| self.edges[e as usize].key.as_ref() == Some(key))
    }

    /// The value of `key` in column 0.
    pub fn get(&self, key: &K) -> Option<u64> {
        self.get_column(key, 0)
    }

    /// The value of `key` in `column`.
    pub fn get_column(&self, key: &K, column: usize) -> Option<u64> {
        if column >= self.cols() {
            return None;
        }
        let e = self.find(key)?;
        Some(self.words[e as usize * self.cols() + column] & mask(self.cfg.value_bits as u32))
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: &K) -> bool {
        self.find(key).is_some()
    }

    /// [`Self::contains`] for many keys, hiding memory latency: every key
    /// is hashed first, then each key's A vertex is prefetched 16 keys
    /// ahead and the first edge record of its list 8 keys ahead (read from
    /// the vertex line fetched before), so the two dependent misses of a
    /// lookup overlap with other keys' instead of following each other.
    pub fn contains_many<'k>(&self, keys: impl IntoIterator<Item = &'k K>) -> Vec<bool>
    where
        K: 'k,
    {
        const VERTEX_AHEAD: usize = 16;
        const EDGE_AHEAD: usize = 8;
        let keys: Vec<&K> = keys.into_iter().collect();
        let at: Vec<(Hash128, u32)> = keys
            .iter()
            .map(|k| {
                let (h, xa, _) = self.locate(k);
                (h, xa)
            })
            .collect();
        let st = self.stride();
        let vertex = |xa: u32| self.verts.as_ptr().wrapping_add(xa as usize * st);
        for &(_, xa) in &at[..at.len().min(VERTEX_AHEAD)] {
            nexthop_mem::prefetch(vertex(xa));
        }
        let mut out = Vec::with_capacity(keys.len());
        for (i, (k, &(h, _))) in keys.iter().zip(&at).enumerate() {
            if let Some(&(_, xa)) = at.get(i + VERTEX_AHEAD) {
                nexthop_mem::prefetch(vertex(xa));
            }
            if let Some(&(_, xa)) = at.get(i + EDGE_AHEAD) {
                // `NIL` (an empty list) is out of range: nothing to fetch.
                let e = self.head(xa);
                if (e as usize) < self.edges.len() {
                    nexthop_mem::prefetch(self.edges.as_ptr().wrapping_add(e as usize));
                }
            }
            out.push(self.find_hashed(k, h).is_some());
        }
        out
    }

    /// All `(key, value of column 0)` pairs, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, u64)> + '_ {
        let (cols, vmask) = (self.cols(), mask(self.cfg.value_bits as u32));
        self.edges
            .iter()
            .enumerate()
            .filter_map(move |(e, ed)| ed.key.as_ref().map(|k| (k, self.words[e * cols] & vmask)))
    }

    /// All keys with their values in every column.
    pub fn iter_columns(&self) -> impl Iterator<Item = (&K, Vec<u64>)> + '_ {
        let (cols, vmask) = (self.cols(), mask(self.cfg.value_bits as u32));
        self.edges.iter().enumerate().filter_map(move |(e, ed)| {
            ed.key.as_ref().map(|k| {
                (
                    k,
                    self.words[e * cols..(e + 1) * cols]
                        .iter()
                        .map(|w| w & vmask)
                        .collect(),
                )
            })
        })
    }

    /// Insert a new key with its column-0 value (single-column structures).
    pub fn insert(&mut self, key: K, value: u64) -> Result<Change, UpdateError> {
        self.insert_columns(key, &[value])
    }

    /// Insert a new key with one value per column.
    pub fn insert_columns(&mut self, key: K, values: &[u64]) -> Result<Change, UpdateError> {
        let mut ops = self.new_ops();
        let h = key.hash128(self.meta.seed);
        let rebuilt = self.insert_hashed(key, h, values, &mut ops)?;
        Ok(Self::finish_change(ops, rebuilt))
    }

    /// Remove `key`.
    pub fn remove(&mut self, key: &K) -> Result<Change, UpdateError> {
        let mut ops = self.new_ops();
        let h = key.hash128(self.meta.seed);
        self.remove_hashed(key, h, &mut ops)?;
        Ok(Change::Writes(ops))
    }

    /// Change the column-0 value of `key` (the paper's alter).
    pub fn alter(&mut self, key: &K, value: u64) -> Result<Change, UpdateError> {
        self.alter_one(key, Some(0), &[value])
    }

    /// Change the value of `key` in one column.
    pub fn alter_column(
        &mut self,
        key: &K,
        column: usize,
        value: u64,
    ) -> Result<Change, UpdateError> {
        if column >= self.cols() {
            return Err(UpdateError::Columns {
                expected: self.cols(),
                got: column,
            });
        }
        self.alter_one(key, Some(column), &[value])
    }

    /// Change the values of `key` in every column.
    pub fn alter_columns(&mut self, key: &K, values: &[u64]) -> Result<Change, UpdateError> {
        self.alter_one(key, None, values)
    }

    /// Recompute everything for `capacity` keys with fresh seeds. With
    /// `check_dups`, duplicate keys are reported instead of stashed.
    fn rebuild(&mut self, capacity: usize, check_dups: bool) -> Result<(), UpdateError> {
        if capacity > self.capacity {
            Self::check_growth(&self.cfg, capacity)?;
        }
        let cols = self.cols();
        let live: Vec<u32> = (0..self.edges.len() as u32)
            .filter(|&e| self.edges[e as usize].key.is_some())
            .collect();
        for _attempt in 0..MAX_SEEDS {
            let seed = self.seeds.next().unwrap_or(0);
            self.meta.seed = seed;
            self.resize(capacity);
            // Pass 1 (sequential): hash each key once, re-encode its check
            // field (it depends on the seed) and record its slots.
            let vmask = mask(self.cfg.value_bits as u32);
            for &e in &live {
                let Some(k) = self.edges[e as usize].key.as_ref() else {
                    continue;
                };
                let h = k.hash128(seed);
                if self.cfg.check_bits != 0 {
                    let chk = self.meta.check_field(h);
                    for w in &mut self.words[e as usize * cols..(e as usize + 1) * cols] {
                        *w = (*w & vmask) | chk;
                    }
                }
                let (a, b) = self.meta.slots(h);
                let ed = &mut self.edges[e as usize];
                (ed.a, ed.b, ed.next_a, ed.next_b) = (a as u32, b as u32, NIL, NIL);
            }
            // Pass 2: insert each key as an insert does (`attach`: write
            // the slot of an isolated end, or flip the smaller of the two
            // trees its edge joins), with the vertices of keys ahead
            // prefetched. A key whose edge would close a cycle goes to the
            // stash. Only keys with equal hashes can be equal, so a
            // duplicate shows as an earlier key on the same edge.
            const AHEAD: usize = 16;
            let st = self.stride();
            let mut cycles: Vec<u32> = Vec::new();
            // The writes `attach` reports are not needed (a rebuild ships
            // a snapshot): a scratch list, emptied as it fills.
            let mut scratch = self.new_ops();
            let mut fits = true;
            for (i, &e) in live.iter().enumerate() {
                if let Some(&f) = live.get(i + AHEAD) {
                    let Edge { a, b, .. } = self.edges[f as usize];
                    nexthop_mem::prefetch(self.verts.as_ptr().wrapping_add(a as usize * st));
                    let xb = (self.meta.ma + b) as usize;
                    nexthop_mem::prefetch(self.verts.as_ptr().wrapping_add(xb * st));
                }
                if check_dups {
                    self.check_duplicate(e, &cycles)?;
                }
                if !self.attach(e, &mut scratch) {
                    cycles.push(e);
                    if cycles.len() > self.cfg.stash_capacity {
                        fits = false;
                        break;
                    }
                }
                if scratch[0].len() >= 4096 {
                    scratch.iter_mut().for_each(Vec::clear);
                }
            }
            if fits {
                self.stash.clear();
                for e in cycles {
                    self.edges[e as usize].next_a = STASHED;
                    self.edges[e as usize].next_b = STASHED;
                    self.stash.push(e);
                }
                self.meta.generation += 1;
                return Ok(());
            }
        }
        Err(UpdateError::NoSeedWorks(MAX_SEEDS))
    }

    /// A duplicate of edge `e`'s key among the edges already placed (in
    /// its A end's list, on the same B end, or among the cycle-closing
    /// edges set aside so far): an error naming the key.
    fn check_duplicate(&self, e: u32, aside: &[u32]) -> Result<(), UpdateError> {
        let Edge { a, b, .. } = self.edges[e as usize];
        let key = &self.edges[e as usize].key;
        let mut f = self.head(a);
        let mut dup = aside.iter().any(|&c| self.edges[c as usize].key == *key);
        while f != NIL && !dup {
            dup = self.edges[f as usize].b == b && self.edges[f as usize].key == *key;
            f = self.edges[f as usize].next_a;
        }
        if dup {
            return Err(UpdateError::DuplicateKey(match key {
                Some(k) => format!("{k:?}"),
                None => String::new(),
            }));
        }
        Ok(())
    }

    /// Build the data-plane structure of `column`.
    ///
    /// # Panics
    /// If `column >= config().columns`.
    pub fn export(&self, column: usize) -> Query {
        assert!(column < self.cols(), "column out of range");
        let ma = self.meta.ma as usize;
        Query::from_parts(
            self.meta,
            |i| self.slot(i as u32, column),
            |j| self.slot((ma + j) as u32, column),
            &self.stash_entries(column),
        )
    }

    /// The snapshot bytes of `column` (what [`Self::export`] holds).
    ///
    /// # Panics
    /// If `column >= config().columns`, or if the buffer cannot be
    /// allocated ([`Self::try_snapshot`] says so instead).
    pub fn snapshot(&self, column: usize) -> Vec<u8> {
        self.try_snapshot(column).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Self::snapshot`], or [`AllocError`] where its buffer cannot be
    /// allocated (a server answers that rather than aborting).
    ///
    /// # Panics
    /// If `column >= config().columns`.
    pub fn try_snapshot(&self, column: usize) -> Result<Vec<u8>, AllocError> {
        assert!(column < self.cols(), "column out of range");
        let ma = self.meta.ma as usize;
        snapshot::write(
            self.meta,
            |i| self.slot(i as u32, column),
            |j| self.slot((ma + j) as u32, column),
            &self.stash_entries(column),
        )
    }

    fn stash_entries(&self, column: usize) -> Vec<(u128, u64)> {
        let vmask = mask(self.cfg.value_bits as u32);
        self.stash
            .iter()
            .filter_map(|&e| {
                let k = self.edges[e as usize].key.as_ref()?;
                Some((
                    k.hash128(self.meta.seed).0,
                    self.words[e as usize * self.cols() + column] & vmask,
                ))
            })
            .collect()
    }

    /// The delta that brings a query structure of `column` from the state
    /// before the operation that returned `change` to the current state.
    /// Call it before the next operation.
    pub fn delta(&self, change: &Change, column: usize) -> Delta {
        match change {
            Change::Writes(w) => Delta::Ops {
                generation: self.meta.generation,
                ops: w.get(column).cloned().unwrap_or_default(),
            },
            Change::Rebuilt => Delta::Snapshot(self.snapshot(column)),
        }
    }

    /// Check every invariant (for tests): acyclic graph, each edge's
    /// constraint in each column, stash contents, lengths.
    pub fn check_invariants(&self) -> Result<(), String> {
        let cols = self.cols();
        let mut live = 0;
        for (e, ed) in self.edges.iter().enumerate() {
            let Some(k) = &ed.key else { continue };
            live += 1;
            let h = k.hash128(self.meta.seed);
            let (a, b) = self.meta.slots(h);
            if (a as u32, b as u32) != (ed.a, ed.b) {
                return Err(format!("edge {e} has stale slots"));
            }
            if ed.next_a == STASHED {
                if !self.stash.contains(&(e as u32)) {
                    return Err(format!("edge {e} marked stashed but not in stash"));
                }
                continue;
            }
            for c in 0..cols {
                let w = self.slot(a as u32, c) ^ self.slot(self.meta.ma + b as u32, c);
                if w != self.words[e * cols + c] {
                    return Err(format!(
                        "edge {e} column {c}: {w:#x} != {:#x}",
                        self.words[e * cols + c]
                    ));
                }
            }
        }
        if live != self.len {
            return Err(format!("len {} but {live} live keys", self.len));
        }
        if self.stash.len() > self.cfg.stash_capacity {
            return Err("stash over capacity".into());
        }
        Ok(())
    }
}

impl<K: crate::persist::StoredKey + Eq + Clone + Debug> Othello<K> {
    /// Bytes [`Self::save`] writes.
    pub fn saved_len(&self) -> usize {
        use crate::persist::{varint_len, HEADER_BYTES};
        let keys: usize = self
            .edges
            .iter()
            .filter_map(|ed| ed.key.as_ref())
            .map(|k| k.with_bytes(|b| varint_len(b.len() as u64) + b.len()))
            .sum();
        let nv = (self.meta.ma + self.meta.mb) as usize;
        HEADER_BYTES + keys + self.len * (1 + 8 * self.cols()) + nv * self.cols() * 8 + 8
    }

    /// Serialise the whole control state (see [`crate::persist`]).
    ///
    /// # Panics
    /// If the buffer cannot be allocated ([`Self::try_save`] says so
    /// instead).
    pub fn save(&self) -> Vec<u8> {
        self.try_save().unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Self::save`], or [`AllocError`] where its buffer cannot be
    /// allocated: the whole size is reserved before anything is written.
    pub fn try_save(&self) -> Result<Vec<u8>, AllocError> {
        use crate::persist::{finish, write_header, write_key, Header};
        let cols = self.cols();
        let bytes = self.saved_len();
        let mut out = try_buffer("control state", bytes)?;
        let c = self.counters;
        write_header(
            &mut out,
            &Header {
                cfg: self.cfg,
                seed_state: self.seeds.state(),
                generation: self.meta.generation,
                seed: self.meta.seed,
                ma: self.meta.ma,
                mb: self.meta.mb,
                capacity: self.capacity,
                counters: [c.grow_rebuilds, c.reseed_rebuilds, c.stashed, c.slot_writes],
            },
            self.len,
        );
        for (e, ed) in self.edges.iter().enumerate() {
            if let Some(k) = &ed.key {
                let stashed = ed.next_a == STASHED;
                write_key(&mut out, k, stashed, &self.words[e * cols..(e + 1) * cols]);
            }
        }
        for x in 0..self.meta.ma + self.meta.mb {
            for c in 0..cols {
                out.extend_from_slice(&self.slot(x, c).to_le_bytes());
            }
        }
        finish(&mut out);
        debug_assert_eq!(out.len(), bytes, "saved_len is what save writes");
        Ok(out)
    }

    /// Load a control state written by [`Self::save`]. The graph is rebuilt
    /// from the keys and checked (acyclic, every constraint holds, widths,
    /// stash size), so a damaged or forged file is an error, never a
    /// structure that answers wrongly.
    pub fn load(bytes: &[u8]) -> Result<Self, crate::error::FormatError> {
        use crate::error::FormatError as E;
        let saved = crate::persist::read::<K>(bytes)?;
        let mut o =
            Self::with_capacity(saved.head.cfg, 0).map_err(|_| E::Malformed("configuration"))?;
        let cols = o.cols();
        o.seeds = SeedSequence::new(saved.head.seed_state);
        o.meta.generation = saved.head.generation;
        o.meta.seed = saved.head.seed;
        o.meta.ma = saved.head.ma;
        o.meta.mb = saved.head.mb;
        o.capacity = saved.head.capacity;
        let nv = saved.head.ma as usize + saved.head.mb as usize;
        let word_mask = mask(o.cfg.word_bits());
        if saved.arr.iter().any(|&w| w & !word_mask != 0) {
            return Err(E::Malformed("slot word wider than l + r bits"));
        }
        o.verts = HugeBox::from_fn(nv * (1 + cols), |_| 0);
        for x in 0..nv {
            o.verts[x * (1 + cols)] = NIL as u64;
            for c in 0..cols {
                o.verts[x * (1 + cols) + 1 + c] = saved.arr[x * cols + c];
            }
        }
        let [g, r, s, w] = saved.head.counters;
        o.counters = Counters {
            grow_rebuilds: g,
            reseed_rebuilds: r,
            stashed: s,
            slot_writes: w,
        };
        // Union-find over vertices proves the graph acyclic.
        let mut parent: Vec<u32> = (0..nv as u32).collect();
        fn root(p: &mut [u32], mut x: u32) -> u32 {
            while p[x as usize] != x {
                p[x as usize] = p[p[x as usize] as usize];
                x = p[x as usize];
            }
            x
        }
        for (k, stashed, words) in saved.keys {
            let h = k.hash128(o.meta.seed);
            let check = o.meta.check_field(h);
            let vmask = mask(o.cfg.value_bits as u32);
            if words
                .iter()
                .any(|&w| w & !word_mask != 0 || w & !vmask != check)
            {
                return Err(E::Malformed("key word does not match the configuration"));
            }
            if o.find(&k).is_some() {
                return Err(E::Malformed("duplicate key"));
            }
            let (a, b) = o.meta.slots(h);
            let e = o.alloc_edge(k, &words, a as u32, b as u32);
            o.len += 1;
            if stashed {
                if o.stash.len() >= o.cfg.stash_capacity {
                    return Err(E::Malformed("stash over capacity"));
                }
                o.edges[e as usize].next_a = STASHED;
                o.edges[e as usize].next_b = STASHED;
                o.stash.push(e);
                continue;
            }
            let (xa, xb) = (a as u32, o.meta.ma + b as u32);
            let (ra, rb) = (root(&mut parent, xa), root(&mut parent, xb));
            if ra == rb {
                return Err(E::Malformed("graph has a cycle"));
            }
            parent[ra as usize] = rb;
            for (c, &w) in words.iter().enumerate() {
                if o.slot(xa, c) ^ o.slot(xb, c) != w {
                    return Err(E::Malformed("slot words do not encode a key's value"));
                }
            }
            o.link(e);
        }
        // `resize` never records a capacity beyond the B array's length
        // (`arrays_for(c)` gives `mb >= c`), and the arrays were bounded by
        // the file's length above: a larger capacity is forged and would
        // make the next growth allocate for it.
        if o.capacity < o.len || o.capacity > saved.head.mb as usize || o.capacity > 1 << 31 {
            return Err(E::Malformed(
                "capacity outside the key count and the slot arrays' size",
            ));
        }
        Ok(o)
    }
}
