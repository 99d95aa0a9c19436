//! The Content Store (dissertation §6.1): a *Content Table* on a `d`-left
//! fingerprint hash table of 64-byte buckets pointing into packet buffers.
//!
//! * Content Table entry (8 bytes): a 32-bit fingerprint of the Data name
//!   and the index + 1 of its packet buffer (0 = empty). A lookup compares
//!   names only on a fingerprint match.
//! * Replacement by *local search* (§6.1.3): when the store is full, the
//!   victim is the worst of the `d x E` entries the insertion visits —
//!   least recently used (a logical timestamp) or least frequently used (a
//!   reference count, ties to the older). The replacement keys live beside
//!   the table, one 64-byte line of 8 keys per bucket, so the search reads
//!   `d` key lines and no packet record. When those buckets are empty (a
//!   byte cap biting), a clock hand over the buffers picks the victim.
//! * Packet buffers out of line: one reused buffer per packet holds the
//!   wire bytes, the name (a range of the wire when the name is where a
//!   Data puts it, else appended) and, once computed, the implicit digest.
//! * Selective caching (§5.4.4): with `admit_after = k > 1`, a Data is
//!   admitted only once its name was requested `k` times: the caller
//!   passes the number of requests the PIT saw, and lookup misses are
//!   counted in a small aging counter array.
//! * Capacity in packets and in bytes (wire bytes of the stored packets).
//! * MustBeFresh: a packet is fresh until arrival + FreshnessPeriod (an
//!   absent FreshnessPeriod means never fresh, NDN packet spec v0.3).
//! * CanBePrefix (edge mode, `prefix_index`): an ordered index of names;
//!   since TLV is self-delimiting, the Data names under a prefix are the
//!   byte strings that start with its TLV bytes, one range of the index.
//!   Its keys hold a name's first 24 bytes inline (the rest boxed), so
//!   most B-tree comparisons read no heap buffer.
//!   The index is built on the first CanBePrefix lookup and kept up to
//!   date from then on; after `capacity_packets` insertions without a
//!   CanBePrefix lookup it is dropped until the next one (so a stream
//!   without CanBePrefix Interests pays nothing for it, and a rebuild's
//!   `O(n log n)` is amortized over at least `n` insertions). Without
//!   `prefix_index` a CanBePrefix Interest matches its exact name only.
//! * Implicit digest: an Interest name ending in a 32-byte
//!   ImplicitSha256DigestComponent matches the Data named by the rest with
//!   that SHA-256 digest (computed on demand, cached per packet).
//!
//! Time is passed in (`now`); one store per forwarding thread, no locks.

use std::collections::BTreeMap;

use crate::name::{mix64, tlv_name_hash, NameView};
use crate::pit::{check_range, split_implicit_digest, ConfigError, Millis};

/// Entries per bucket.
pub const E: usize = 8;

#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Bucket([u64; E]);

const _: () = assert!(std::mem::size_of::<Bucket>() == 64);

/// Index of an entry's high (fingerprint) half among a bucket's 32-bit
/// words.
const FP_WORD: usize = if cfg!(target_endian = "little") { 1 } else { 0 };

impl Bucket {
    /// The entries whose fingerprint is `fp` (the high 32 bits of an
    /// entry; fingerprints are odd, so an empty entry, 0, never matches),
    /// as a bit mask: 32-bit compares of the high halves without a branch,
    /// which the compiler turns into vector compares (a loop that stops at
    /// the match mispredicts once per bucket; 64-bit compares have no
    /// SSE2 instruction).
    #[inline(always)]
    fn matches(&self, fp: u32) -> u32 {
        let w: &[u32; 2 * E] = bytemuck::cast_ref(&self.0);
        let mut m = 0u32;
        for i in 0..E {
            m |= ((w[2 * i + FP_WORD] == fp) as u32) << i;
        }
        m
    }

    /// The occupied entries, as a bit mask.
    #[inline(always)]
    fn occupied(&self) -> u32 {
        let mut m = 0u32;
        for (i, &e) in self.0.iter().enumerate() {
            m |= ((e != 0) as u32) << i;
        }
        m
    }

    /// The occupied entry with the smallest of `keys` and that key (the
    /// lowest index among equal keys; `u64::MAX` when none is occupied,
    /// and occupied keys count as at most `u64::MAX - 1`), as a tree of
    /// compares without a branch.
    #[inline(always)]
    fn min_entry(&self, keys: &Keys) -> (u64, usize) {
        let k: [(u64, usize); E] = std::array::from_fn(|i| {
            let empty = ((self.0[i] == 0) as u64).wrapping_neg();
            (keys.0[i].min(u64::MAX - 1) | empty, i)
        });
        let min = |a: (u64, usize), b: (u64, usize)| if b.0 < a.0 { b } else { a };
        let a = [
            min(k[0], k[1]),
            min(k[2], k[3]),
            min(k[4], k[5]),
            min(k[6], k[7]),
        ];
        min(min(a[0], a[1]), min(a[2], a[3]))
    }
}

/// Most subtables.
const MAX_D: usize = 8;

/// A name's candidate entries: its fingerprint and its bucket in each of
/// the `d` subtables, computed once per operation.
#[derive(Clone, Copy)]
struct Cands {
    /// The high half of the key, made odd (never 0, an empty entry).
    fp: u32,
    at: [usize; MAX_D],
    d: usize,
}

impl Cands {
    #[inline(always)]
    fn buckets(&self) -> &[usize] {
        &self.at[..self.d]
    }
}

/// Replacement keys of a bucket's entries (smaller = evicted first): LRU,
/// the logical time of the last use; LFU, `uses << 40 | last use` (uses
/// saturate at `2^24 - 1`, times count modulo `2^40`).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Keys([u64; E]);

const _: () = assert!(std::mem::size_of::<Keys>() == 64);

const LFU_TIME_BITS: u32 = 40;
const LFU_MAX_USES: u64 = (1 << (64 - LFU_TIME_BITS)) - 1;

/// Replacement policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Least recently used among the local candidates.
    Lru,
    /// Least frequently used among the local candidates.
    Lfu,
}

/// Content Store configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CsConfig {
    /// Most packets stored (`1..=2^31`).
    pub capacity_packets: usize,
    /// Most wire bytes stored (`1..=2^48`).
    pub capacity_bytes: usize,
    /// Largest packet admitted (`1..=capacity_bytes`; a packet whose wire
    /// and name take 4 GiB or more is never admitted).
    pub max_packet_bytes: usize,
    /// Replacement policy.
    pub policy: Policy,
    /// Admit a Data after this many requests (`0` or `1`: always; up to 255).
    pub admit_after: u32,
    /// Subtables `d` (`1..=8`; default 2: the local search sees 16
    /// candidates, and a lookup reads 2 lines, an insertion 4; 4 kept the
    /// Zipf hit rates within 0.0012 of 2 at twice the lines,
    /// docs/benchmarks.md "NDN PIT and Content Store").
    pub subtables: usize,
    /// Keep the ordered name index for CanBePrefix (edge routers).
    pub prefix_index: bool,
    /// Most stale candidates a CanBePrefix + MustBeFresh lookup skips
    /// before giving up (`1..=65536`), so one Interest cannot scan the
    /// whole store.
    pub prefix_scan_limit: usize,
    /// Hash seed.
    pub seed: u64,
}

impl Default for CsConfig {
    fn default() -> CsConfig {
        CsConfig {
            capacity_packets: 1 << 16,
            capacity_bytes: 1 << 28,
            max_packet_bytes: 1 << 16,
            policy: Policy::Lru,
            admit_after: 0,
            subtables: 2,
            prefix_index: true,
            prefix_scan_limit: 64,
            seed: 0x4353_5f73_6565_6400,
        }
    }
}

impl CsConfig {
    /// Check every field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_range(
            "capacity_packets",
            self.capacity_packets as u64,
            1,
            1 << 31,
            "1..=2^31",
        )?;
        check_range(
            "capacity_bytes",
            self.capacity_bytes as u64,
            1,
            1 << 48,
            "1..=2^48",
        )?;
        check_range(
            "max_packet_bytes",
            self.max_packet_bytes as u64,
            1,
            self.capacity_bytes as u64,
            "1..=capacity_bytes",
        )?;
        check_range("admit_after", self.admit_after as u64, 0, 255, "0..=255")?;
        check_range("subtables", self.subtables as u64, 1, 8, "1..=8")?;
        check_range(
            "prefix_scan_limit",
            self.prefix_scan_limit as u64,
            1,
            65536,
            "1..=65536",
        )
    }
}

/// An Interest as the Content Store matches it.
#[derive(Clone, Copy, Debug)]
pub struct CsQuery<'a, N: NameView + ?Sized> {
    /// Interest name.
    pub name: &'a N,
    /// CanBePrefix.
    pub can_be_prefix: bool,
    /// MustBeFresh.
    pub must_be_fresh: bool,
}

/// What [`ContentStore::insert`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CsInsert {
    /// Stored as a new packet.
    Admitted,
    /// Replaced the stored packet of the same name.
    Replaced,
    /// Not admitted by selective caching (too few requests so far).
    NotAdmitted,
    /// Larger than `max_packet_bytes`: not stored.
    TooLarge,
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CsStats {
    /// Lookups.
    pub lookups: u64,
    /// Lookups answered.
    pub hits: u64,
    /// Lookups that found only stale packets for a MustBeFresh Interest.
    pub stale: u64,
    /// New packets stored.
    pub admitted: u64,
    /// Packets replaced by a newer copy.
    pub replaced: u64,
    /// Packets refused by selective caching.
    pub not_admitted: u64,
    /// Packets refused for size.
    pub too_large: u64,
    /// Packets evicted.
    pub evicted: u64,
    /// CanBePrefix lookups stopped by `prefix_scan_limit`.
    pub scan_limited: u64,
    /// CanBePrefix index (re)builds: the first CanBePrefix lookup, and the
    /// first after the index was dropped for lack of them.
    pub index_builds: u64,
}

/// A stored packet: `buf` holds the wire bytes (`..wire_len`), the name's
/// TLV value at `name_at..name_at + name_len` (inside the wire, or appended
/// after it) and, when `has_digest`, the implicit digest in its last 32
/// bytes. The buffer is reused when the record is. One cache line each
/// (56 bytes unaligned would straddle two lines for 6 records in 8, and
/// an insertion's prefetch of the victim record loads only one).
#[derive(Clone, Debug, Default)]
#[repr(align(64))]
struct Packet {
    buf: Vec<u8>,
    fresh_until: Millis,
    wire_len: u32,
    name_at: u32,
    name_len: u32,
    /// Bucket index * E + entry.
    at: u32,
    live: bool,
    has_digest: bool,
}

impl Packet {
    #[inline]
    fn wire(&self) -> &[u8] {
        &self.buf[..self.wire_len as usize]
    }

    #[inline]
    fn name(&self) -> &[u8] {
        &self.buf[self.name_at as usize..(self.name_at + self.name_len) as usize]
    }

    /// Store `wire` and the name value `name` (found inside the wire where
    /// a Data carries it, else appended).
    fn store(&mut self, name: &[u8], wire: &[u8]) {
        self.buf.clear();
        if self.buf.capacity() < wire.len() {
            // A fresh buffer (not a realloc copying the old bytes), a
            // whole number of lines, so the next packet a few bytes
            // longer fits too.
            self.buf = Vec::with_capacity(wire.len().next_multiple_of(nexthop_mem::CACHE_LINE));
        }
        self.buf.extend_from_slice(wire);
        self.wire_len = wire.len() as u32;
        self.name_len = name.len() as u32;
        self.has_digest = false;
        match name_offset(wire, name) {
            Some(at) => self.name_at = at as u32,
            None => {
                self.name_at = wire.len() as u32;
                self.buf.extend_from_slice(name);
            }
        }
    }
}

/// Whether a packet record can address a buffer holding `wire` bytes, a
/// name of `name` bytes and a digest: its offsets are 32-bit.
fn fits_record(wire: usize, name: usize) -> bool {
    wire.saturating_add(name).saturating_add(32) <= u32::MAX as usize
}

/// Bytes of a name kept inline in its [`IndexKey`].
const INDEX_HEAD: usize = 24;

/// A name in the CanBePrefix index: its first [`INDEX_HEAD`] bytes inline
/// (zero-padded), the rest boxed, and its length. The derived order
/// (head, tail, length) is the byte order of the names (a padded head
/// ties only with a zero-extension of the name, which is longer), so the
/// B-tree keeps names in byte order while most comparisons read only the
/// node's own memory, not a heap buffer per key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct IndexKey {
    head: [u8; INDEX_HEAD],
    tail: Box<[u8]>,
    len: u32,
}

impl IndexKey {
    fn new(name: &[u8]) -> IndexKey {
        let h = name.len().min(INDEX_HEAD);
        let mut head = [0u8; INDEX_HEAD];
        head[..h].copy_from_slice(&name[..h]);
        IndexKey {
            head,
            tail: name[h..].into(),
            len: name.len() as u32,
        }
    }

    /// Whether the name starts with the bytes `p`.
    fn starts_with(&self, p: &[u8]) -> bool {
        if p.len() > self.len as usize {
            return false;
        }
        let h = p.len().min(INDEX_HEAD);
        self.head[..h] == p[..h] && self.tail[..p.len() - h] == p[h..]
    }
}

/// Where a Data's wire encoding holds the name value `name`: after the
/// Data's and the Name's TLV-TYPE and TLV-LENGTH. `None` when it is not
/// there (the caller then stores the name separately).
fn name_offset(wire: &[u8], name: &[u8]) -> Option<usize> {
    use nexthop_wire::ndn::tlv::read_var_number;
    let mut at = 0;
    for _ in 0..4 {
        at += read_var_number(wire, at).ok()?.1;
    }
    (wire.get(at..at.checked_add(name.len())?)? == name).then_some(at)
}

/// A packet record [`ContentStore::prefetch_record`] loaded: what
/// [`ContentStore::prefetch_buffer`] loads next. Only a hint: the record
/// may be reused in between.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CsRecord(u32);

/// The Content Store. See the module docs.
#[derive(Clone, Debug)]
pub struct ContentStore {
    cfg: CsConfig,
    buckets_per_sub: u32,
    /// The table and its keys are on huge pages when large.
    table: nexthop_mem::HugeBox<Bucket>,
    keys: nexthop_mem::HugeBox<Keys>,
    pkts: Vec<Packet>,
    free: Vec<u32>,
    /// The CanBePrefix index, kept while `index_live`.
    index: BTreeMap<IndexKey, u32>,
    index_live: bool,
    /// Insertions since the last CanBePrefix lookup (while `index_live`).
    since_prefix_lookup: usize,
    len: usize,
    bytes: usize,
    clock: u64,
    hand: usize,
    sketch: Vec<u8>,
    sketch_ops: usize,
    stats: CsStats,
}

fn last_start<N: NameView + ?Sized>(n: &N) -> usize {
    match n.component_count() {
        0 => 0,
        c => n.prefix_end(c - 1),
    }
}

impl ContentStore {
    /// An empty store.
    pub fn new(cfg: CsConfig) -> Result<ContentStore, ConfigError> {
        cfg.validate()?;
        // Content Table at most 75% full when the store is.
        let per_sub = (cfg.capacity_packets * 4)
            .div_ceil(3 * cfg.subtables * E)
            .max(1);
        let sketch = if cfg.admit_after > 1 {
            vec![0u8; (cfg.capacity_packets * 4).next_power_of_two().min(1 << 26)]
        } else {
            Vec::new()
        };
        Ok(ContentStore {
            cfg,
            buckets_per_sub: per_sub as u32,
            table: nexthop_mem::HugeBox::new(per_sub * cfg.subtables, Bucket::default()),
            keys: nexthop_mem::HugeBox::new(per_sub * cfg.subtables, Keys::default()),
            pkts: Vec::new(),
            free: Vec::new(),
            index: BTreeMap::new(),
            index_live: false,
            since_prefix_lookup: 0,
            len: 0,
            bytes: 0,
            clock: 0,
            hand: 0,
            sketch,
            sketch_ops: 0,
            stats: CsStats::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &CsConfig {
        &self.cfg
    }

    /// Packets stored.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Wire bytes stored.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Counters.
    pub fn stats(&self) -> CsStats {
        self.stats
    }

    /// Bytes of the Content Table (buckets).
    pub fn table_bytes(&self) -> usize {
        self.table.len() * std::mem::size_of::<Bucket>()
    }

    /// The key of a name from its hash ([`NameView::name_hash`]: cached
    /// by a decoded wire name, so the Content Store does not hash the
    /// bytes again).
    #[inline(always)]
    fn name_key(&self, name_hash: u64) -> u64 {
        mix64(name_hash ^ self.cfg.seed)
    }

    /// The candidates of a name keyed `h`: the fingerprint is `h`'s high
    /// half; the buckets come from one more mix per two subtables (a
    /// 32-bit half each).
    #[inline(always)]
    fn cands(&self, h: u64) -> Cands {
        let n = self.buckets_per_sub;
        let mut at = [0usize; MAX_D];
        for pair in 0..self.cfg.subtables.div_ceil(2) {
            let r = mix64(h ^ (pair as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let (j, k) = (2 * pair, 2 * pair + 1);
            at[j] = j * n as usize + nexthop_hash::reduce(r as u32, n) as usize;
            at[k] = k * n as usize + nexthop_hash::reduce((r >> 32) as u32, n) as usize;
        }
        Cands {
            fp: (h >> 32) as u32 | 1,
            at,
            d: self.cfg.subtables,
        }
    }

    fn find(&self, name: &[u8], c: &Cands) -> Option<u32> {
        for &bi in c.buckets() {
            let b = &self.table[bi];
            let mut m = b.matches(c.fp);
            while m != 0 {
                let e = b.0[m.trailing_zeros() as usize];
                let p = (e as u32) - 1;
                if self.pkts[p as usize].name() == name {
                    return Some(p);
                }
                m &= m - 1;
            }
        }
        None
    }

    fn digest_of(&mut self, p: u32) -> [u8; 32] {
        let pk = &mut self.pkts[p as usize];
        if !pk.has_digest {
            let dg = nexthop_wire::ndn::implicit_digest(pk.wire());
            pk.buf.extend_from_slice(&dg);
            pk.has_digest = true;
        }
        let mut dg = [0u8; 32];
        dg.copy_from_slice(&pk.buf[pk.buf.len() - 32..]);
        dg
    }

    /// The replacement key of a packet used `uses` times, last now.
    #[inline]
    fn key(&self, uses: u64) -> u64 {
        match self.cfg.policy {
            Policy::Lru => self.clock,
            Policy::Lfu => {
                uses.min(LFU_MAX_USES) << LFU_TIME_BITS | (self.clock & ((1 << LFU_TIME_BITS) - 1))
            }
        }
    }

    fn touch(&mut self, p: u32) {
        self.clock += 1;
        let at = self.pkts[p as usize].at as usize;
        let uses = (self.keys[at / E].0[at % E] >> LFU_TIME_BITS) + 1;
        self.keys[at / E].0[at % E] = self.key(uses);
    }

    /// Start keeping the CanBePrefix index (first CanBePrefix lookup, or
    /// the first after it was dropped): index every stored name.
    fn build_index(&mut self) {
        self.index.clear();
        for (i, pk) in self.pkts.iter().enumerate() {
            if pk.live {
                self.index.insert(IndexKey::new(pk.name()), i as u32);
            }
        }
        self.index_live = true;
        self.stats.index_builds += 1;
    }

    fn sketch_slot(&self, h: u64) -> usize {
        (mix64(h) as usize) & (self.sketch.len() - 1)
    }

    fn count_request(&mut self, h: u64) {
        if self.sketch.is_empty() {
            return;
        }
        let i = self.sketch_slot(h);
        self.sketch[i] = self.sketch[i].saturating_add(1);
        self.sketch_ops += 1;
        if self.sketch_ops >= self.sketch.len() {
            // Age: halve every counter once per `len` requests.
            for c in &mut self.sketch {
                *c >>= 1;
            }
            self.sketch_ops = 0;
        }
    }

    /// Hint the CPU to load the candidate buckets of `name` (and their
    /// replacement keys when `insert`: a Data about to be stored). Changes
    /// nothing.
    pub fn prefetch<N: NameView + ?Sized>(&self, name: &N, insert: bool) {
        let c = self.cands(self.name_key(name.name_hash()));
        for &bi in c.buckets() {
            nexthop_mem::prefetch(&self.table[bi]);
            if insert {
                nexthop_mem::prefetch(&self.keys[bi]);
            }
        }
    }

    /// The second prefetch stage of a Data about to be inserted (once
    /// [`Self::prefetch`]'s lines arrived): the record of the packet the
    /// insertion will evict (or the free record it will take), returned
    /// for [`Self::prefetch_buffer`]. Changes nothing.
    #[inline]
    pub fn prefetch_record<N: NameView + ?Sized>(
        &self,
        name: &N,
        wire_len: usize,
    ) -> Option<CsRecord> {
        let c = self.cands(self.name_key(name.name_hash()));
        let p = self.record_for(&c, wire_len)?;
        nexthop_mem::prefetch(&self.pkts[p as usize]);
        Some(CsRecord(p))
    }

    /// The third stage (once [`Self::prefetch_record`]'s line arrived):
    /// the first `wire_len` bytes of the buffer of record `r`, which the
    /// Data will be copied into. A record reused since only loads other
    /// lines. Changes nothing.
    #[inline]
    pub fn prefetch_buffer(&self, r: CsRecord, wire_len: usize) {
        if let Some(pk) = self.pkts.get(r.0 as usize) {
            nexthop_mem::prefetch_range(pk.buf.as_ptr(), wire_len.min(pk.buf.capacity()));
        }
    }

    /// Find a packet for an Interest; returns its wire bytes. A hit
    /// refreshes the packet's LRU/LFU statistics.
    pub fn lookup<N: NameView + ?Sized>(
        &mut self,
        q: &CsQuery<'_, N>,
        now: Millis,
    ) -> Option<&[u8]> {
        self.stats.lookups += 1;
        let tlv = q.name.tlv();
        let fresh_ok = |pk: &Packet| !q.must_be_fresh || now < pk.fresh_until;
        let mut stale = false;
        let found = if let Some((at, dg)) = split_implicit_digest(tlv, last_start(q.name)) {
            let base = &tlv[..at];
            let h = self.name_key(q.name.prefix_hash(q.name.component_count() - 1));
            match self.find(base, &self.cands(h)) {
                Some(p) if self.digest_of(p) == *dg => {
                    if fresh_ok(&self.pkts[p as usize]) {
                        Some(p)
                    } else {
                        stale = true;
                        None
                    }
                }
                _ => None,
            }
        } else if q.can_be_prefix && self.cfg.prefix_index {
            if !self.index_live {
                self.build_index();
            }
            self.since_prefix_lookup = 0;
            let mut seen = 0;
            let mut hit = None;
            for (k, &p) in self.index.range(IndexKey::new(tlv)..) {
                if !k.starts_with(tlv) {
                    break;
                }
                if fresh_ok(&self.pkts[p as usize]) {
                    hit = Some(p);
                    break;
                }
                stale = true;
                seen += 1;
                if seen >= self.cfg.prefix_scan_limit {
                    self.stats.scan_limited += 1;
                    break;
                }
            }
            hit
        } else {
            let h = self.name_key(q.name.name_hash());
            match self.find(tlv, &self.cands(h)) {
                Some(p) if fresh_ok(&self.pkts[p as usize]) => Some(p),
                Some(_) => {
                    stale = true;
                    None
                }
                None => None,
            }
        };
        match found {
            Some(p) => {
                self.stats.hits += 1;
                self.touch(p);
                Some(self.pkts[p as usize].wire())
            }
            None => {
                if stale {
                    self.stats.stale += 1;
                }
                if !self.sketch.is_empty() {
                    let h = self.name_key(q.name.name_hash());
                    self.count_request(h);
                }
                None
            }
        }
    }

    /// Remove packet `p` from the table, index and buffers.
    fn evict(&mut self, p: u32) {
        let pk = &mut self.pkts[p as usize];
        let at = pk.at as usize;
        pk.live = false;
        self.bytes -= pk.wire_len as usize;
        if self.index_live {
            self.index.remove(&IndexKey::new(pk.name()));
        }
        self.table[at / E].0[at % E] = 0;
        self.keys[at / E].0[at % E] = 0;
        self.free.push(p);
        self.len -= 1;
        self.stats.evicted += 1;
    }

    /// The local-search victim among candidates `c`: the smallest
    /// replacement key (the first of equal ones), read from the key lines
    /// of the `d` candidate buckets. Two passes without a branch per entry
    /// (a running minimum with a branch mispredicts about once per
    /// bucket): the smallest key, then the first occupied entry holding it.
    fn local_victim(&self, c: &Cands) -> Option<u32> {
        // One pass: each bucket's least entry, the first bucket's on a tie.
        let (mut key, mut at) = (u64::MAX, 0);
        for &bi in c.buckets() {
            let (k, i) = self.table[bi].min_entry(&self.keys[bi]);
            if k < key {
                (key, at) = (k, bi * E + i);
            }
        }
        (key != u64::MAX).then(|| self.table[at / E].0[at % E] as u32 - 1)
    }

    /// Whether storing `wire_len` more bytes must evict first (the store
    /// is full in packets, or in bytes for it).
    #[inline]
    fn must_evict(&self, wire_len: usize) -> bool {
        self.len >= self.cfg.capacity_packets || self.bytes + wire_len > self.cfg.capacity_bytes
    }

    /// The packet record an insertion of a new name with candidates `c`
    /// writes into: the local victim when the store is full, else the
    /// free record it takes (`None`: a new record, or no victim).
    #[inline]
    fn record_for(&self, c: &Cands, wire_len: usize) -> Option<u32> {
        if self.must_evict(wire_len) {
            self.local_victim(c)
        } else {
            self.free.last().copied()
        }
    }

    fn hand_victim(&mut self) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        loop {
            self.hand = (self.hand + 1) % self.pkts.len();
            if self.pkts[self.hand].live {
                return Some(self.hand as u32);
            }
        }
    }

    /// Store a Data packet: `name` is its name, `wire` the whole encoded
    /// Data, `freshness_ms` its FreshnessPeriod, `requests` how many
    /// Interests the PIT saw for it (for selective caching).
    pub fn insert<N: NameView + ?Sized>(
        &mut self,
        name: &N,
        wire: &[u8],
        freshness_ms: Option<Millis>,
        requests: u32,
        now: Millis,
    ) -> CsInsert {
        let tlv = name.tlv();
        if wire.len() > self.cfg.max_packet_bytes || !fits_record(wire.len(), tlv.len()) {
            self.stats.too_large += 1;
            return CsInsert::TooLarge;
        }
        let h = self.name_key(name.name_hash());
        let fresh_until = now.saturating_add(freshness_ms.unwrap_or(0));
        let c = self.cands(h);
        if let Some(p) = self.find(tlv, &c) {
            let pk = &mut self.pkts[p as usize];
            self.bytes = self.bytes - pk.wire_len as usize + wire.len();
            pk.store(tlv, wire);
            pk.fresh_until = fresh_until;
            self.stats.replaced += 1;
            self.trim_bytes(p);
            return CsInsert::Replaced;
        }
        if self.cfg.admit_after > 1 {
            let seen = self.sketch[self.sketch_slot(h)] as u32;
            if requests.max(seen) < self.cfg.admit_after {
                self.stats.not_admitted += 1;
                return CsInsert::NotAdmitted;
            }
        }
        // Make room: packets, bytes, then a free candidate entry.
        while self.must_evict(wire.len()) {
            let v = match self.local_victim(&c) {
                Some(v) => v,
                None => match self.hand_victim() {
                    Some(v) => v,
                    None => break,
                },
            };
            self.evict(v);
        }
        // The first free entry of the least used candidate bucket.
        let mut best: Option<(usize, usize, u32)> = None;
        for &bi in c.buckets() {
            let occ = self.table[bi].occupied();
            let used = occ.count_ones();
            if used < E as u32 && best.is_none_or(|(_, _, u)| used < u) {
                best = Some((bi, (!occ).trailing_zeros() as usize, used));
            }
        }
        let (bi, i) = match best {
            Some((bi, i, _)) => (bi, i),
            None => {
                // All d x E candidates full: evict the local victim.
                let v = self.local_victim(&c).unwrap_or(0);
                let at = self.pkts[v as usize].at as usize;
                self.evict(v);
                (at / E, at % E)
            }
        };
        let p = match self.free.pop() {
            Some(p) => p,
            None => {
                self.pkts.push(Packet::default());
                (self.pkts.len() - 1) as u32
            }
        };
        self.clock += 1;
        let key = self.key(1);
        let pk = &mut self.pkts[p as usize];
        pk.live = true;
        pk.store(tlv, wire);
        pk.fresh_until = fresh_until;
        pk.at = (bi * E + i) as u32;
        self.table[bi].0[i] = (c.fp as u64) << 32 | (p as u64 + 1);
        self.keys[bi].0[i] = key;
        if self.index_live {
            self.since_prefix_lookup += 1;
            if self.since_prefix_lookup > self.cfg.capacity_packets {
                // No CanBePrefix lookup for a whole store's worth of
                // insertions: stop keeping the index until the next one.
                self.index.clear();
                self.index_live = false;
            } else {
                self.index.insert(IndexKey::new(tlv), p);
            }
        }
        self.len += 1;
        self.bytes += wire.len();
        self.stats.admitted += 1;
        CsInsert::Admitted
    }

    /// After a replacement grew the store past its byte cap, evict others.
    fn trim_bytes(&mut self, keep: u32) {
        while self.bytes > self.cfg.capacity_bytes && self.len > 1 {
            let Some(v) = self.hand_victim() else { break };
            if v != keep {
                self.evict(v);
            }
        }
    }

    /// Check the structure's invariants (tests): every live packet is
    /// pointed to by exactly its table entry, counts and bytes add up, the
    /// index holds exactly the live names, and the caps hold.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut n = 0;
        let mut bytes = 0;
        for (i, pk) in self.pkts.iter().enumerate() {
            if !pk.live {
                continue;
            }
            n += 1;
            bytes += pk.wire_len as usize;
            let e = self.table[pk.at as usize / E].0[pk.at as usize % E];
            let h = tlv_name_hash(pk.name()).map(|nh| self.name_key(nh));
            if e as u32 != i as u32 + 1 || h.map(|h| self.cands(h).fp as u64) != Some(e >> 32) {
                return Err(format!(
                    "packet {i}: table entry {e:#x} does not point back"
                ));
            }
            if self.index_live && self.index.get(&IndexKey::new(pk.name())) != Some(&(i as u32)) {
                return Err(format!("packet {i}: missing from the name index"));
            }
        }
        let entries = self
            .table
            .iter()
            .flat_map(|b| b.0)
            .filter(|&e| e != 0)
            .count();
        if n != self.len || entries != n || bytes != self.bytes {
            return Err(format!(
                "len {} / live {n} / entries {entries}; bytes {} / {bytes}",
                self.len, self.bytes
            ));
        }
        if self.index_live && self.index.len() != n {
            return Err(format!("index holds {} names, {n} live", self.index.len()));
        }
        if n > self.cfg.capacity_packets || bytes > self.cfg.capacity_bytes {
            return Err(format!("over capacity: {n} packets, {bytes} bytes"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::name::NameBuf;

    /// Fingerprints are odd for every key, zero and all-ones halves
    /// included, so an empty entry (0) never matches one.
    #[test]
    fn fingerprints_are_odd_and_never_match_an_empty_entry() {
        let cs = ContentStore::new(CsConfig::default()).unwrap();
        let empty = Bucket::default();
        for h in [0, u64::MAX, 1 << 32, 0xFFFF_FFFF, 0x1234_5678_9abc_def0] {
            let c = cs.cands(h);
            assert_eq!(c.fp & 1, 1, "key {h:#x}");
            assert_eq!(empty.matches(c.fp), 0, "key {h:#x}");
        }
        let mut b = Bucket::default();
        b.0[3] = (cs.cands(7).fp as u64) << 32 | 9;
        assert_eq!(b.matches(cs.cands(7).fp), 1 << 3);
    }

    fn nm(c: &[&str]) -> NameBuf {
        NameBuf::from_components(c).unwrap()
    }

    fn q<N: NameView>(name: &N, cbp: bool, mbf: bool) -> CsQuery<'_, N> {
        CsQuery {
            name,
            can_be_prefix: cbp,
            must_be_fresh: mbf,
        }
    }

    fn cs(cfg: CsConfig) -> ContentStore {
        ContentStore::new(cfg).unwrap()
    }

    #[test]
    fn exact_hit_then_must_be_fresh_miss_after_freshness_period() {
        let mut c = cs(CsConfig::default());
        let a = nm(&["a"]);
        assert_eq!(
            c.insert(&a, b"wire-a", Some(100), 1, 1000),
            CsInsert::Admitted
        );
        assert_eq!(c.lookup(&q(&a, false, true), 1099), Some(&b"wire-a"[..]));
        assert_eq!(c.lookup(&q(&a, false, true), 1100), None);
        assert_eq!(c.lookup(&q(&a, false, false), 5000), Some(&b"wire-a"[..]));
        assert_eq!(c.stats().stale, 1);
        // No FreshnessPeriod: never fresh.
        let b = nm(&["b"]);
        c.insert(&b, b"wire-b", None, 1, 0);
        assert_eq!(c.lookup(&q(&b, false, true), 0), None);
        c.check_invariants().unwrap();
    }

    #[test]
    fn can_be_prefix_finds_data_under_the_prefix_and_only_with_the_flag() {
        let mut c = cs(CsConfig::default());
        let d = nm(&["a", "b", "c"]);
        c.insert(&d, b"abc", Some(1000), 1, 0);
        c.insert(&nm(&["ab"]), b"ab", Some(1000), 1, 0);
        assert_eq!(c.lookup(&q(&nm(&["a"]), true, false), 1), Some(&b"abc"[..]));
        assert_eq!(
            c.lookup(&q(&nm(&["a", "b"]), true, true), 1),
            Some(&b"abc"[..])
        );
        assert_eq!(c.lookup(&q(&nm(&["a"]), false, false), 1), None);
        // Component boundaries are respected: /a is not a prefix of /ab.
        c.insert(&nm(&["x", "ab"]), b"xab", Some(1000), 1, 0);
        assert_eq!(c.lookup(&q(&nm(&["x", "a"]), true, false), 1), None);
        assert!(c.lookup(&q(&NameBuf::root(), true, false), 1).is_some());
    }

    #[test]
    fn can_be_prefix_with_must_be_fresh_skips_stale_packets_within_the_limit() {
        let mut c = cs(CsConfig {
            prefix_scan_limit: 2,
            ..CsConfig::default()
        });
        for i in 0..3 {
            c.insert(
                &nm(&["p", &format!("{i}")]),
                format!("{i}").as_bytes(),
                Some(10),
                1,
                0,
            );
        }
        c.insert(&nm(&["p", "9"]), b"9", Some(1000), 1, 0);
        assert_eq!(c.lookup(&q(&nm(&["p"]), true, true), 5), Some(&b"0"[..]));
        assert_eq!(c.lookup(&q(&nm(&["p"]), true, true), 50), None);
        assert_eq!(c.stats().scan_limited, 1);
        let mut c2 = cs(CsConfig::default());
        c2.insert(&nm(&["p", "0"]), b"0", Some(10), 1, 0);
        c2.insert(&nm(&["p", "9"]), b"9", Some(1000), 1, 0);
        assert_eq!(c2.lookup(&q(&nm(&["p"]), true, true), 50), Some(&b"9"[..]));
    }

    #[test]
    fn implicit_digest_name_matches_only_that_packet() {
        let mut c = cs(CsConfig::default());
        let a = nm(&["a"]);
        let wire = b"the encoded data";
        c.insert(&a, wire, Some(1000), 1, 0);
        let dg = nexthop_wire::ndn::implicit_digest(wire);
        let mut full = a.clone();
        full.push(1, &dg).unwrap();
        assert_eq!(c.lookup(&q(&full, false, false), 1), Some(&wire[..]));
        let mut wrong = a.clone();
        wrong.push(1, &[0; 32]).unwrap();
        assert_eq!(c.lookup(&q(&wrong, false, false), 1), None);
    }

    #[test]
    fn lru_evicts_the_least_recently_used_candidate() {
        // One bucket: the local search sees every packet.
        let mut c = cs(CsConfig {
            capacity_packets: 3,
            subtables: 1,
            ..CsConfig::default()
        });
        let n: Vec<NameBuf> = (0..4).map(|i| nm(&[&format!("{i}")])).collect();
        for x in &n[..3] {
            c.insert(x, b"d", None, 1, 0);
        }
        c.lookup(&q(&n[0], false, false), 1);
        c.insert(&n[3], b"d", None, 1, 2);
        assert!(c.lookup(&q(&n[1], false, false), 3).is_none());
        assert!(c.lookup(&q(&n[0], false, false), 3).is_some());
        assert_eq!(c.stats().evicted, 1);
        c.check_invariants().unwrap();
    }

    #[test]
    fn lfu_evicts_the_least_frequently_used_candidate() {
        let mut c = cs(CsConfig {
            capacity_packets: 3,
            subtables: 1,
            policy: Policy::Lfu,
            ..CsConfig::default()
        });
        let n: Vec<NameBuf> = (0..4).map(|i| nm(&[&format!("{i}")])).collect();
        for x in &n[..3] {
            c.insert(x, b"d", None, 1, 0);
        }
        for _ in 0..3 {
            c.lookup(&q(&n[0], false, false), 1);
            c.lookup(&q(&n[2], false, false), 1);
        }
        c.lookup(&q(&n[1], false, false), 1);
        c.insert(&n[3], b"d", None, 1, 2);
        assert!(c.lookup(&q(&n[1], false, false), 3).is_none());
        assert!(c.lookup(&q(&n[0], false, false), 3).is_some());
        assert!(c.lookup(&q(&n[2], false, false), 3).is_some());
    }

    #[test]
    fn byte_capacity_evicts_until_the_packet_fits() {
        let mut c = cs(CsConfig {
            capacity_bytes: 10,
            max_packet_bytes: 8,
            ..CsConfig::default()
        });
        c.insert(&nm(&["a"]), &[0; 4], None, 1, 0);
        c.insert(&nm(&["b"]), &[0; 4], None, 1, 0);
        assert_eq!(
            c.insert(&nm(&["c"]), &[0; 8], None, 1, 0),
            CsInsert::Admitted
        );
        assert!(c.bytes() <= 10);
        assert_eq!(
            c.insert(&nm(&["d"]), &[0; 9], None, 1, 0),
            CsInsert::TooLarge
        );
        // Replacing with a larger copy keeps the byte cap.
        c.insert(&nm(&["e"]), &[0; 2], None, 1, 0);
        assert_eq!(
            c.insert(&nm(&["e"]), &[0; 8], None, 1, 0),
            CsInsert::Replaced
        );
        assert!(c.bytes() <= 10);
        c.check_invariants().unwrap();
    }

    #[test]
    fn selective_caching_admits_after_k_requests() {
        let mut c = cs(CsConfig {
            admit_after: 2,
            ..CsConfig::default()
        });
        let a = nm(&["a"]);
        assert_eq!(c.insert(&a, b"d", None, 1, 0), CsInsert::NotAdmitted);
        // Two requests reported by the PIT.
        assert_eq!(c.insert(&a, b"d", None, 2, 0), CsInsert::Admitted);
        // Or two lookup misses counted by the store.
        let b = nm(&["b"]);
        assert!(c.lookup(&q(&b, false, false), 0).is_none());
        assert_eq!(c.insert(&b, b"d", None, 1, 0), CsInsert::NotAdmitted);
        assert!(c.lookup(&q(&b, false, false), 0).is_none());
        assert_eq!(c.insert(&b, b"d", None, 1, 0), CsInsert::Admitted);
        assert_eq!(c.stats().not_admitted, 2);
    }

    /// Keys derive from the name hash a wire `Name` caches (no hashing in
    /// the store); a `NameBuf` computes the same: a packet stored under one
    /// type is found under the other, by exact name and by implicit digest,
    /// and the table invariants (which rehash the stored bytes) hold.
    #[test]
    fn cached_wire_name_hash_and_computed_hash_find_the_same_packets() {
        let mut c = cs(CsConfig::default());
        let a = nm(&["a", "b"]);
        let wa = a.to_name();
        assert_eq!(a.name_hash(), wa.name_hash());
        assert_eq!(a.prefix_hash(1), wa.prefix_hash(1));
        let mut d = nexthop_wire::ndn::Data::new(wa.clone(), vec![7; 30]);
        d.sign_digest_sha256();
        let wire = d.to_wire();
        c.insert(&wa, &wire, Some(1000), 1, 0);
        assert_eq!(c.lookup(&q(&a, false, false), 1), Some(&wire[..]));
        let b = nm(&["b"]);
        c.insert(&b, b"opaque", Some(1000), 1, 0);
        assert_eq!(
            c.lookup(&q(&b.to_name(), false, false), 1),
            Some(&b"opaque"[..])
        );
        let mut full = wa.clone();
        full.push(&nexthop_wire::ndn::NameComponent::implicit_digest(
            nexthop_wire::ndn::implicit_digest(&wire),
        ));
        assert_eq!(c.lookup(&q(&full, false, false), 1), Some(&wire[..]));
        c.check_invariants().unwrap();
    }

    #[test]
    fn data_wire_holds_the_name_once_and_other_bytes_get_it_appended() {
        let mut c = cs(CsConfig::default());
        let a = nm(&["a", "b"]);
        let mut d = nexthop_wire::ndn::Data::new(a.to_name(), vec![7; 300]);
        d.meta_info.freshness_period_ms = Some(1000);
        d.sign_digest_sha256();
        let wire = d.to_wire();
        // The name's value sits after the Data's header (TLV-LENGTH in 3
        // bytes for this size) and the Name's.
        assert_eq!(name_offset(&wire, a.tlv()), Some(6));
        assert_eq!(name_offset(&wire, nm(&["a", "c"]).tlv()), None);
        assert_eq!(name_offset(&[6], a.tlv()), None);
        c.insert(&a, &wire, Some(1000), 1, 0);
        let p = c
            .find(a.tlv(), &c.cands(c.name_key(a.name_hash())))
            .unwrap();
        assert_eq!(c.pkts[p as usize].buf.len(), wire.len());
        // Bytes without the name in place: the name is kept after them.
        let b = nm(&["b"]);
        c.insert(&b, b"opaque", Some(1000), 1, 0);
        let p = c
            .find(b.tlv(), &c.cands(c.name_key(b.name_hash())))
            .unwrap();
        assert_eq!(c.pkts[p as usize].buf.len(), 6 + b.tlv().len());
        assert_eq!(c.lookup(&q(&a, false, true), 1), Some(&wire[..]));
        assert_eq!(c.lookup(&q(&b, false, true), 1), Some(&b"opaque"[..]));
        // The digest is cached after the name and does not change either.
        let mut full = a.clone();
        full.push(1, &nexthop_wire::ndn::implicit_digest(&wire))
            .unwrap();
        assert_eq!(c.lookup(&q(&full, false, false), 1), Some(&wire[..]));
        assert_eq!(c.lookup(&q(&full, false, false), 1), Some(&wire[..]));
        assert_eq!(c.lookup(&q(&a, true, false), 1), Some(&wire[..]));
        c.check_invariants().unwrap();
    }

    #[test]
    fn prefix_index_is_built_on_demand_and_dropped_when_unused() {
        let mut c = cs(CsConfig {
            capacity_packets: 16,
            ..CsConfig::default()
        });
        let n = |i: usize| nm(&["p", &format!("{i}")]);
        for i in 0..10 {
            c.insert(&n(i), format!("{i}").as_bytes(), Some(1000), 1, 0);
        }
        assert!(!c.index_live);
        assert_eq!(c.stats().index_builds, 0);
        // The first CanBePrefix lookup indexes what is stored.
        assert_eq!(c.lookup(&q(&n(3), true, false), 1), Some(&b"3"[..]));
        assert_eq!(c.stats().index_builds, 1);
        c.check_invariants().unwrap();
        // Kept up to date while CanBePrefix lookups keep coming.
        for i in 10..40 {
            c.insert(&n(i), format!("{i}").as_bytes(), Some(1000), 1, 0);
            assert_eq!(
                c.lookup(&q(&n(i), true, false), 1),
                Some(format!("{i}").as_bytes())
            );
            c.check_invariants().unwrap();
        }
        assert_eq!(c.stats().index_builds, 1);
        // A store's worth of insertions without one: dropped.
        for i in 40..60 {
            c.insert(&n(i), format!("{i}").as_bytes(), Some(1000), 1, 0);
        }
        assert!(!c.index_live);
        c.check_invariants().unwrap();
        // And rebuilt, complete, by the next.
        assert_eq!(c.lookup(&q(&n(59), true, false), 1), Some(&b"59"[..]));
        assert_eq!(c.stats().index_builds, 2);
        assert_eq!(c.index.len(), c.len());
        c.check_invariants().unwrap();
    }

    #[test]
    fn index_key_order_is_byte_order_and_prefix_test_matches() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(27);
        // Prefixes and extensions of a few bases over a short alphabet with
        // zeros, lengths around the inline head: shared heads, padding
        // ties with zero-extensions and head/tail boundaries are common.
        let bases: Vec<Vec<u8>> = (0..4)
            .map(|_| (0..2 * INDEX_HEAD).map(|_| rng.gen_range(0..3u8)).collect())
            .collect();
        let names: Vec<Vec<u8>> = (0..3000)
            .map(|_| {
                let base = &bases[rng.gen_range(0..bases.len())];
                let mut n = base[..rng.gen_range(0..=base.len())].to_vec();
                for _ in 0..rng.gen_range(0..3) {
                    n.push(if rng.gen_bool(0.5) {
                        0
                    } else {
                        rng.gen_range(0..3u8)
                    });
                }
                n
            })
            .collect();
        for a in &names[..300] {
            let ka = IndexKey::new(a);
            for b in &names {
                let kb = IndexKey::new(b);
                assert_eq!(ka.cmp(&kb), a.cmp(b), "{a:?} {b:?}");
                assert_eq!(kb.starts_with(a), b.starts_with(a), "{b:?} {a:?}");
            }
        }
    }

    #[test]
    fn packets_beyond_32_bit_record_offsets_do_not_fit() {
        let max = u32::MAX as usize;
        assert!(fits_record(9000, 100));
        assert!(fits_record(max - 132, 100));
        assert!(!fits_record(max - 131, 100));
        assert!(!fits_record(usize::MAX, 1));
    }

    #[test]
    fn the_prefetched_record_is_the_one_the_insertion_writes() {
        let mut c = cs(CsConfig {
            capacity_packets: 8,
            ..CsConfig::default()
        });
        let names: Vec<NameBuf> = (0..40).map(|i| nm(&["r", &i.to_string()])).collect();
        for (i, n) in names.iter().enumerate() {
            // Not full: a new record (none to prefetch); full: the victim.
            let r = c.prefetch_record(n, 10);
            assert_eq!(r.is_some(), i >= 8, "{i}");
            c.insert(n, &[i as u8; 10], Some(1000), 1, i as u64);
            if let Some(r) = r {
                let p = c.find(n.tlv(), &c.cands(c.name_key(n.name_hash())));
                assert_eq!(p, Some(r.0), "{i}");
            }
        }
        c.check_invariants().unwrap();
        // Not full, with a free record (a byte cap evicted two packets
        // for one): that record is taken.
        let mut c = cs(CsConfig {
            capacity_packets: 8,
            capacity_bytes: 85,
            max_packet_bytes: 85,
            ..CsConfig::default()
        });
        for n in &names[..8] {
            c.insert(n, &[0u8; 10], Some(1000), 1, 0);
        }
        c.insert(&names[8], &[0u8; 20], Some(1000), 1, 0);
        assert_eq!((c.len(), c.bytes()), (7, 80));
        let r = c.prefetch_record(&names[9], 5);
        assert!(r.is_some());
        c.insert(&names[9], &[0u8; 5], Some(1000), 1, 0);
        let p = c.find(names[9].tlv(), &c.cands(c.name_key(names[9].name_hash())));
        assert_eq!(p, r.map(|r| r.0));
        c.check_invariants().unwrap();
    }

    #[test]
    fn a_record_too_small_for_a_packet_gets_a_whole_number_of_lines() {
        let mut pk = Packet::default();
        pk.store(b"", &[1u8; 100]);
        let cap = pk.buf.capacity();
        assert_eq!(cap % nexthop_mem::CACHE_LINE, 0);
        assert!(cap >= 100);
        // A packet a few bytes longer reuses the buffer.
        pk.store(b"", &[2u8; 101]);
        assert_eq!(pk.buf.capacity(), cap);
        assert_eq!(pk.wire(), &[2u8; 101][..]);
    }

    #[test]
    fn lfu_keys_count_uses_then_age() {
        let mut c = cs(CsConfig {
            policy: Policy::Lfu,
            ..CsConfig::default()
        });
        let a = nm(&["a"]);
        c.insert(&a, b"a", None, 1, 0);
        for _ in 0..5 {
            c.lookup(&q(&a, false, false), 1);
        }
        let at = c.pkts[c
            .find(a.tlv(), &c.cands(c.name_key(a.name_hash())))
            .unwrap() as usize]
            .at as usize;
        let k = c.keys[at / E].0[at % E];
        assert_eq!(k >> LFU_TIME_BITS, 6);
        assert_eq!(k & ((1 << LFU_TIME_BITS) - 1), c.clock);
    }

    #[test]
    fn bad_config_is_refused_with_the_field_named() {
        let e = ContentStore::new(CsConfig {
            max_packet_bytes: 1 << 29,
            ..CsConfig::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("max_packet_bytes"), "{e}");
    }
}
