//! The data-plane query structure: only what a lookup reads.
//!
//! A lookup of key `k` hashes it once (XXH3-128 with the structure's seed),
//! reduces two 32-bit words of the hash onto `0..ma` and `0..mb`, reads
//! `A[i]` and `B[j]` and returns `A[i] ^ B[j]`: two memory reads whatever the
//! key length. Keys whose edge would have closed a cycle in the control
//! plane's graph live in a small stash (at most [`MAX_STASH`] entries, usually
//! none) that is consulted first, and only when it is not empty.
//!
//! # Concurrency
//!
//! Any number of threads may call [`Query::lookup`] and
//! [`Query::lookup_batch`] while one thread calls [`Query::apply`] (writers
//! are serialised by an internal mutex). Readers never block and never see a
//! half-applied delta: slot arrays are guarded by sequence locks, an
//! equivalent of the Concise paper's D1/D2 flip bits (section V.C) that is
//! immune to the flip bits' ABA problem (two updates between a reader's two
//! reads of a flip bit cancel out; a counter does not). A writer sets the
//! whole-structure epoch's writing bit and makes every stripe it touches
//! odd, fences, writes the slots, and makes the stripes even again and
//! advances the epoch (writing bit clear) with release stores. Stripe `p`
//! of array A covers every `A[i]` with `i % STRIPES == p`, likewise for B.
//! A reader first validates against the epoch (acquire load, slot reads,
//! acquire fence, reload: unchanged and the writing bit clear means no
//! write overlapped); only if it moved does the reader fall back to its two
//! stripe counters, retrying while either is odd or changed. A reader
//! therefore returns either the value before or the value after every
//! delta, never a mix.
//!
//! The stash has its own sequence lock. Its length is read with acquire
//! ordering first, so a reader that finds a key gone from the stash also
//! sees the slot writes that moved the key into the arrays (the control
//! plane always orders those writes before the stash removal).

use std::sync::atomic::{fence, AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

use nexthop_hash::{reduce, Hash128, KeyBytes, PreparedSeed};
use nexthop_mem::{prefetch, two_stage, HugeBox};

use crate::config::{mask, slot_bytes_for, Sizing, MAX_STASH};
use crate::delta::{Delta, Op};
use crate::error::{AllocError, FormatError};
use crate::snapshot;

/// Keys per group of [`Query::lookup_batch`]: a group's slots are
/// prefetched while the group before is read. 32 against the bursty order
/// (hash and prefetch a group of 16, then read it) made the memory floor
/// of a batch 3 times faster at 1e7 keys and changed nothing at 1e6
/// (docs/benchmarks.md, "Othello lookups").
pub const BATCH_GROUP: usize = 32;

/// One batch group between its two stages: slot indexes, hashes (kept
/// only with a check field) and the keys whose stash-filter bit is set.
type GroupState = ([(usize, usize); BATCH_GROUP], [Hash128; BATCH_GROUP], u32);

/// Number of sequence-lock stripes per array (a power of two).
pub const STRIPES: usize = 1024;

/// Value written by [`Query::lookup_batch`] for a key the check field rejects.
/// Misses only exist when `check_bits > 0`, and then `value_bits < 64`, so
/// `MISS` is never a stored value; with `value_bits == 64` every lookup hits
/// and `u64::MAX` is an ordinary value.
pub const MISS: u64 = u64::MAX;

/// Everything a lookup needs besides the arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryMeta {
    /// Bumped by the control plane each time seeds or sizes change.
    pub generation: u64,
    /// Hash seed.
    pub seed: u64,
    /// Length of array A.
    pub ma: u32,
    /// Length of array B.
    pub mb: u32,
    /// `l`: value bits.
    pub value_bits: u8,
    /// `r`: alien-key check bits (0: off).
    pub check_bits: u8,
    /// The sizing rule the arrays were made with (informational).
    pub sizing: Sizing,
}

impl QueryMeta {
    /// Bytes per slot (1, 2, 4 or 8).
    pub fn slot_bytes(&self) -> usize {
        slot_bytes_for(self.value_bits as u32 + self.check_bits as u32) as usize
    }

    /// The two slot indexes of a hash.
    #[inline(always)]
    pub fn slots(&self, h: Hash128) -> (usize, usize) {
        (
            reduce(h.w0(), self.ma) as usize,
            reduce(h.w1(), self.mb) as usize,
        )
    }

    /// The `r`-bit check field of a hash (0 when `r == 0`).
    #[inline(always)]
    pub fn check(&self, h: Hash128) -> u64 {
        if self.check_bits == 0 {
            0
        } else {
            h.hi() >> (64 - self.check_bits as u32)
        }
    }

    /// The check field of a hash in its place in a slot word, above the
    /// `l` value bits (0 when `r == 0`, which covers `l == 64`, where a
    /// shift by `l` would overflow).
    #[inline(always)]
    pub fn check_field(&self, h: Hash128) -> u64 {
        if self.check_bits == 0 {
            0
        } else {
            self.check(h) << self.value_bits
        }
    }

    /// Turn a slot word into a lookup result (`None`: the check field says
    /// the key is alien).
    #[inline(always)]
    pub(crate) fn decode(&self, w: u64, h: Hash128) -> Option<u64> {
        if self.check_bits != 0 && (w >> self.value_bits) != self.check(h) {
            None
        } else {
            Some(w & mask(self.value_bits as u32))
        }
    }
}

trait Word: Copy + Send + Sync + 'static {
    type Atomic: Send + Sync;
    fn atomic(v: u64) -> Self::Atomic;
    fn load(a: &Self::Atomic) -> u64;
    fn store(a: &Self::Atomic, v: u64);
}

macro_rules! word {
    ($t:ty, $a:ty) => {
        impl Word for $t {
            type Atomic = $a;
            #[inline(always)]
            fn atomic(v: u64) -> $a {
                <$a>::new(v as $t)
            }
            #[inline(always)]
            fn load(a: &$a) -> u64 {
                a.load(Ordering::Relaxed) as u64
            }
            #[inline(always)]
            fn store(a: &$a, v: u64) {
                a.store(v as $t, Ordering::Relaxed)
            }
        }
    };
}
word!(u8, AtomicU8);
word!(u16, AtomicU16);
word!(u32, AtomicU32);
word!(u64, AtomicU64);

struct Slots<W: Word> {
    a: HugeBox<W::Atomic>,
    b: HugeBox<W::Atomic>,
}

impl<W: Word> Slots<W> {
    #[inline(always)]
    fn xor(&self, i: usize, j: usize) -> u64 {
        W::load(&self.a[i]) ^ W::load(&self.b[j])
    }

    /// [`Slots::xor`] without bounds checks, for the single-key lookup: a
    /// compare-and-branch per array is a quarter of what that path issues
    /// besides the hash, and fewer instructions per lookup let the core
    /// keep more lookups' misses in flight.
    ///
    /// # Safety
    /// `i < self.a.len()` and `j < self.b.len()`.
    #[inline(always)]
    unsafe fn xor_unchecked(&self, i: usize, j: usize) -> u64 {
        debug_assert!(i < self.a.len() && j < self.b.len());
        // SAFETY: the caller guarantees both indexes are in bounds.
        unsafe { W::load(self.a.get_unchecked(i)) ^ W::load(self.b.get_unchecked(j)) }
    }

    fn load_a(&self, i: usize) -> u64 {
        W::load(&self.a[i])
    }

    fn load_b(&self, j: usize) -> u64 {
        W::load(&self.b[j])
    }

    fn from_fn(ma: usize, mb: usize, a: impl Fn(usize) -> u64, b: impl Fn(usize) -> u64) -> Self {
        Slots {
            a: HugeBox::from_fn(ma, |i| W::atomic(a(i))),
            b: HugeBox::from_fn(mb, |j| W::atomic(b(j))),
        }
    }
}

enum Storage {
    W8(Slots<u8>),
    W16(Slots<u16>),
    W32(Slots<u32>),
    W64(Slots<u64>),
}

macro_rules! with_slots {
    ($st:expr, $s:ident => $body:expr) => {
        match $st {
            Storage::W8($s) => $body,
            Storage::W16($s) => $body,
            Storage::W32($s) => $body,
            Storage::W64($s) => $body,
        }
    };
}

struct StashEntry {
    lo: AtomicU64,
    hi: AtomicU64,
    word: AtomicU64,
}

struct Stash {
    seq: AtomicU32,
    len: AtomicU32,
    /// One bit per stashed key (bit [`stash_bit`] of its hash): a lookup
    /// scans the stash only when its bit is set, so a non-empty stash costs
    /// the other keys one L1 load.
    filter: AtomicU64,
    entries: Box<[StashEntry]>,
}

/// The stash-filter bit of a key's 128-bit hash: bits 0..6 of the low
/// word, which the slot indexes already need, so x86 tests it with one `bt`
/// straight from the hash register (bits 26..32 cost a copy and a shift per
/// lookup). Taking it from the upper 64 bits made every lookup compute the
/// upper half of XXH3-128 (about ten more instructions); without check bits
/// a lookup needs only the lower half, and the upper half only when the
/// filter bit is set. The bit is a pre-check, never an answer (a hit
/// compares the whole 128 bits), so its overlap with the A index's hash
/// word costs nothing; it is recomputed from the stashed fingerprints on
/// every load, so no stored format depends on it.
#[inline(always)]
pub(crate) fn stash_bit(fp: u128) -> u64 {
    1u64 << (fp as u64 & 63)
}

impl Stash {
    fn new(entries: &[(u128, u64)]) -> Stash {
        let e: Box<[StashEntry]> = (0..MAX_STASH)
            .map(|k| {
                let (fp, w) = entries.get(k).copied().unwrap_or((0, 0));
                StashEntry {
                    lo: AtomicU64::new(fp as u64),
                    hi: AtomicU64::new((fp >> 64) as u64),
                    word: AtomicU64::new(w),
                }
            })
            .collect();
        let filter = entries.iter().fold(0, |f, e| f | stash_bit(e.0));
        Stash {
            seq: AtomicU32::new(0),
            len: AtomicU32::new(entries.len().min(MAX_STASH) as u32),
            filter: AtomicU64::new(filter),
            entries: e,
        }
    }

    /// Whether `fp` may be stashed (acquire: a reader that finds its bit
    /// clear after a removal also sees the slot writes made before it).
    #[inline(always)]
    fn may_contain(&self, fp: u128) -> bool {
        self.filter.load(Ordering::Acquire) & stash_bit(fp) != 0
    }

    /// Reader: the stashed word for `fp`, if present.
    fn get(&self, fp: u128) -> Option<u64> {
        let (lo, hi) = (fp as u64, (fp >> 64) as u64);
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 0 {
                let n = (self.len.load(Ordering::Relaxed) as usize).min(MAX_STASH);
                let mut found = None;
                for e in &self.entries[..n] {
                    if e.lo.load(Ordering::Relaxed) == lo && e.hi.load(Ordering::Relaxed) == hi {
                        found = Some(e.word.load(Ordering::Relaxed));
                        break;
                    }
                }
                fence(Ordering::Acquire);
                if self.seq.load(Ordering::Relaxed) == s1 {
                    return found;
                }
            }
            std::hint::spin_loop();
        }
    }

    fn find(&self, fp: u128) -> Option<usize> {
        let n = self.len.load(Ordering::Relaxed) as usize;
        (0..n).find(|&k| {
            let e = &self.entries[k];
            e.lo.load(Ordering::Relaxed) == fp as u64
                && e.hi.load(Ordering::Relaxed) == (fp >> 64) as u64
        })
    }

    /// Writer only (under the writer lock).
    fn put(&self, fp: u128, word: u64) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let n = self.len.load(Ordering::Relaxed) as usize;
        match self.find(fp) {
            Some(k) => self.entries[k].word.store(word, Ordering::Relaxed),
            None => {
                let e = &self.entries[n];
                e.lo.store(fp as u64, Ordering::Relaxed);
                e.hi.store((fp >> 64) as u64, Ordering::Relaxed);
                e.word.store(word, Ordering::Relaxed);
                self.len.store(n as u32 + 1, Ordering::Release);
                let f = self.filter.load(Ordering::Relaxed) | stash_bit(fp);
                self.filter.store(f, Ordering::Release);
            }
        }
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// Writer only (under the writer lock).
    fn del(&self, fp: u128) {
        let Some(k) = self.find(fp) else { return };
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let n = self.len.load(Ordering::Relaxed) as usize;
        let last = &self.entries[n - 1];
        let (lo, hi, w) = (
            last.lo.load(Ordering::Relaxed),
            last.hi.load(Ordering::Relaxed),
            last.word.load(Ordering::Relaxed),
        );
        let e = &self.entries[k];
        e.lo.store(lo, Ordering::Relaxed);
        e.hi.store(hi, Ordering::Relaxed);
        e.word.store(w, Ordering::Relaxed);
        self.len.store(n as u32 - 1, Ordering::Release);
        let f = self.entries[..n - 1].iter().fold(0, |f, e| {
            let fp =
                (e.hi.load(Ordering::Relaxed) as u128) << 64 | e.lo.load(Ordering::Relaxed) as u128;
            f | stash_bit(fp)
        });
        self.filter.store(f, Ordering::Release);
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    fn entries(&self) -> Vec<(u128, u64)> {
        let n = self.len.load(Ordering::Acquire) as usize;
        self.entries[..n]
            .iter()
            .map(|e| {
                let fp = (e.hi.load(Ordering::Relaxed) as u128) << 64
                    | e.lo.load(Ordering::Relaxed) as u128;
                (fp, e.word.load(Ordering::Relaxed))
            })
            .collect()
    }
}

/// The data-plane half of an Othello: seeds, sizes, two slot arrays and
/// the stash. Lookups are lock-free; deltas are applied in place.
pub struct Query {
    meta: QueryMeta,
    /// `mask(l)`, precomputed for the single-key lookup.
    vmask: u64,
    /// `meta.seed`, prepared for the single-key lookup.
    hseed: PreparedSeed,
    storage: Storage,
    /// Whole-structure sequence counter ([`EPOCH_STEP`] per write section),
    /// with [`WRITING`] set while a writer is inside a slot-write section
    /// and [`SLOW`] when single-key lookups must decode a check field.
    /// Readers validate against it first (two loads of one cache line per
    /// lookup or per group of `BATCH_GROUP` keys) and fall back to the
    /// stripes only when a write overlapped them.
    epoch: CacheLine<AtomicU64>,
    seq_a: Box<[AtomicU32]>,
    seq_b: Box<[AtomicU32]>,
    stash: Stash,
    writer: CacheLine<Mutex<()>>,
}

impl std::fmt::Debug for Query {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Query")
            .field("meta", &self.meta)
            .field("stash_len", &self.stash.len.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

const STRIPE_MASK: usize = STRIPES - 1;

/// Epoch bit: a writer is inside a slot-write section.
const WRITING: u64 = 1;
/// Epoch bit, set for the structure's life when it has a check field: a
/// single-key lookup then needs more than `A[i] ^ B[j] & mask`, and the one
/// epoch test of its common path sends it to the general one.
const SLOW: u64 = 2;
/// What a closed write section adds to the epoch.
const EPOCH_STEP: u64 = 4;

/// Keeps a field that writers store to on its own cache line, so a write
/// does not evict the read-mostly fields (sizes, array pointers, stash
/// filter) from the readers' caches.
#[repr(align(64))]
struct CacheLine<T>(T);

impl<T> std::ops::Deref for CacheLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Phase 1 of a batch: hash the keys of `kc`, put their slot indexes in
/// `ij` and prefetch both slots; with `KEEP`, the hashes go to `hs` too
/// (only a check field needs them later); with `STASH`, returns the keys
/// whose bit is set in the stash `filter` (bit `n` for `kc[n]`), found
/// without a branch.
#[inline(always)]
fn hash_group<W: Word, K: KeyBytes, const KEEP: bool, const STASH: bool>(
    meta: &QueryMeta,
    s: &Slots<W>,
    kc: &[K],
    ij: &mut [(usize, usize)],
    hs: &mut [Hash128],
    filter: u64,
) -> u32 {
    let mut maybe = 0u32;
    for (n, (k, ij)) in kc.iter().zip(ij.iter_mut()).enumerate() {
        let h = k.hash128(meta.seed);
        let (i, j) = meta.slots(h);
        prefetch(s.a.as_ptr().wrapping_add(i));
        prefetch(s.b.as_ptr().wrapping_add(j));
        *ij = (i, j);
        if KEEP {
            if let Some(x) = hs.get_mut(n) {
                *x = h;
            }
        }
        if STASH {
            maybe |= ((filter & stash_bit(h.0) != 0) as u32) << n;
        }
    }
    maybe
}

impl Query {
    /// Build from slot-word functions (used by the control plane's export).
    pub(crate) fn from_parts(
        meta: QueryMeta,
        a: impl Fn(usize) -> u64,
        b: impl Fn(usize) -> u64,
        stash: &[(u128, u64)],
    ) -> Query {
        let (ma, mb) = (meta.ma as usize, meta.mb as usize);
        let storage = match meta.slot_bytes() {
            1 => Storage::W8(Slots::from_fn(ma, mb, a, b)),
            2 => Storage::W16(Slots::from_fn(ma, mb, a, b)),
            4 => Storage::W32(Slots::from_fn(ma, mb, a, b)),
            _ => Storage::W64(Slots::from_fn(ma, mb, a, b)),
        };
        Query {
            meta,
            vmask: mask(meta.value_bits as u32),
            hseed: PreparedSeed::new(meta.seed),
            storage,
            epoch: CacheLine(AtomicU64::new(if meta.check_bits != 0 { SLOW } else { 0 })),
            seq_a: (0..STRIPES).map(|_| AtomicU32::new(0)).collect(),
            seq_b: (0..STRIPES).map(|_| AtomicU32::new(0)).collect(),
            stash: Stash::new(stash),
            writer: CacheLine(Mutex::new(())),
        }
    }

    /// Load (copy) a snapshot produced by [`Query::to_snapshot`] or
    /// [`Othello::snapshot`](crate::Othello::snapshot).
    pub fn from_snapshot(bytes: &[u8]) -> Result<Query, FormatError> {
        let lay = snapshot::parse(bytes)?;
        let sb = lay.slot_bytes;
        let stash: Vec<(u128, u64)> = snapshot::stash_entries(bytes, &lay).collect();
        Ok(Query::from_parts(
            lay.meta,
            |i| snapshot::slot(bytes, lay.a_off, sb, i),
            |j| snapshot::slot(bytes, lay.b_off, sb, j),
            &stash,
        ))
    }

    /// Serialise to the snapshot format. Consistent if no writer runs
    /// concurrently (the writer lock is taken).
    ///
    /// # Panics
    /// If the buffer cannot be allocated ([`Self::try_to_snapshot`] says so
    /// instead).
    pub fn to_snapshot(&self) -> Vec<u8> {
        self.try_to_snapshot().unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Self::to_snapshot`], or [`AllocError`] where its buffer cannot be
    /// allocated.
    pub fn try_to_snapshot(&self) -> Result<Vec<u8>, AllocError> {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        with_slots!(&self.storage, s => snapshot::write(
            self.meta,
            |i| s.load_a(i),
            |j| s.load_b(j),
            &self.stash.entries(),
        ))
    }

    /// Sizes, seed, widths and generation.
    pub fn meta(&self) -> &QueryMeta {
        &self.meta
    }

    /// Entries currently in the stash.
    pub fn stash_len(&self) -> usize {
        self.stash.len.load(Ordering::Relaxed) as usize
    }

    /// Bytes a lookup may touch: both arrays plus the stash.
    pub fn memory_bytes(&self) -> usize {
        (self.meta.ma as usize + self.meta.mb as usize) * self.meta.slot_bytes()
            + self.stash_len() * snapshot::STASH_ENTRY
    }

    /// Look up one key: its value, or `None` when the check field (if any)
    /// says the key is alien. Without a check field an alien key gets an
    /// arbitrary value (the paper's behaviour).
    ///
    /// The common case (no check field, the key's stash-filter bit clear,
    /// no write overlapping the read) costs one epoch test: the epoch word
    /// carries `SLOW` when the structure has a check field, so its width
    /// is not read; everything else goes out of line.
    #[inline]
    pub fn lookup<K: KeyBytes + ?Sized>(&self, key: &K) -> Option<u64> {
        // Only the lower half of the hash is used on this path (the slot
        // indexes and the stash-filter bit); `lookup_slow` hashes again
        // when it needs more.
        let h = key.hash128_prepared(&self.hseed);
        if self.stash.may_contain(h.0) {
            return self.lookup_slow(key);
        }
        let (i, j) = self.meta.slots(h);
        // The same read section as `lookup_hash`'s, written out: a shared
        // `#[inline(always)]` helper for both compiled to 3 more
        // instructions a lookup (callgrind, `lookup_probe 100000 pow2 1`).
        let fast = with_slots!(&self.storage, s => {
            let e1 = self.epoch.load(Ordering::Acquire);
            // SAFETY: as in `lookup_hash`: `slots` reduces into `0..ma` and
            // `0..mb`, the arrays' lengths, fixed by the only constructor.
            let w = unsafe { s.xor_unchecked(i, j) };
            fence(Ordering::Acquire);
            (e1 & (WRITING | SLOW) == 0 && self.epoch.load(Ordering::Relaxed) == e1).then_some(w)
        });
        if let Some(w) = fast {
            return Some(w & self.vmask);
        }
        self.lookup_slow(key)
    }

    /// [`Query::lookup`] when the key may be stashed, a write overlapped or
    /// a check field must be decoded.
    #[cold]
    #[inline(never)]
    fn lookup_slow<K: KeyBytes + ?Sized>(&self, key: &K) -> Option<u64> {
        let h = key.hash128(self.meta.seed);
        if self.stash.may_contain(h.0) {
            if let Some(v) = self.stash.get(h.0) {
                return Some(v);
            }
        }
        self.lookup_hash(h)
    }

    #[inline(always)]
    fn lookup_hash(&self, h: Hash128) -> Option<u64> {
        let (i, j) = self.meta.slots(h);
        let w = with_slots!(&self.storage, s => {
            let e1 = self.epoch.load(Ordering::Acquire);
            // SAFETY: `slots` reduces into `0..ma` and `0..mb` (multiply-shift
            // of a 32-bit word by the length: `(x * m) >> 32 < m`), and
            // `from_parts`, the only constructor, sizes the arrays `ma` and
            // `mb` from the same `meta`, which never changes afterwards.
            let w = unsafe { s.xor_unchecked(i, j) };
            fence(Ordering::Acquire);
            if e1 & WRITING == 0 && self.epoch.load(Ordering::Relaxed) == e1 {
                w
            } else {
                self.read_pair(s, i, j)
            }
        });
        if self.meta.check_bits == 0 {
            Some(w & self.vmask)
        } else {
            self.meta.decode(w, h)
        }
    }

    #[inline(always)]
    fn read_pair<W: Word>(&self, s: &Slots<W>, i: usize, j: usize) -> u64 {
        let sa = &self.seq_a[i & STRIPE_MASK];
        let sb = &self.seq_b[j & STRIPE_MASK];
        loop {
            let s1a = sa.load(Ordering::Acquire);
            let s1b = sb.load(Ordering::Acquire);
            if (s1a | s1b) & 1 == 0 {
                let w = W::load(&s.a[i]) ^ W::load(&s.b[j]);
                fence(Ordering::Acquire);
                if sa.load(Ordering::Relaxed) == s1a && sb.load(Ordering::Relaxed) == s1b {
                    return w;
                }
            }
            std::hint::spin_loop();
        }
    }

    /// Look up many keys, hiding memory latency: the keys go in groups of
    /// [`BATCH_GROUP`], and each group's keys are hashed and both of their
    /// slots prefetched one group before they are read, while the group
    /// before is read, so each read has a whole group's hashing to arrive.
    /// `out[i]` receives the value of `keys[i]`, or [`MISS`] when the check
    /// field rejects it. Returns the number of hits.
    ///
    /// # Panics
    /// If `out` is shorter than `keys`.
    pub fn lookup_batch<K: KeyBytes>(&self, keys: &[K], out: &mut [u64]) -> usize {
        assert!(out.len() >= keys.len(), "output shorter than keys");
        with_slots!(&self.storage, s => self.batch_in(s, keys, out))
    }

    fn batch_in<W: Word, K: KeyBytes>(&self, s: &Slots<W>, keys: &[K], out: &mut [u64]) -> usize {
        // `Query` holds atomics, so the compiler must assume its plain fields
        // may change across atomic loads: keep what the loop reads in locals.
        let meta = self.meta;
        let mut hits = 0;
        two_stage::<BATCH_GROUP, _, GroupState>(
            keys,
            |kc, (ij, hs, maybe)| *maybe = self.hash_stage(&meta, s, kc, ij, hs),
            |start, kc, (ij, hs, maybe)| {
                let oc = &mut out[start..start + kc.len()];
                hits += self.read_stage(&meta, s, kc, oc, ij, hs, *maybe)
            },
        );
        hits
    }

    /// A batch group's first stage: hash, prefetch both slots, and note the
    /// keys whose stash-filter bit is set (bit `n` for `kc[n]`; the filter
    /// is read here, before any of the group's slots is read, see the
    /// module docs).
    #[inline(always)]
    fn hash_stage<W: Word, K: KeyBytes>(
        &self,
        meta: &QueryMeta,
        s: &Slots<W>,
        kc: &[K],
        ij: &mut [(usize, usize)],
        hs: &mut [Hash128],
    ) -> u32 {
        // One acquire load of the stash filter per group.
        let filter = self.stash.filter.load(Ordering::Acquire);
        // Without a check field no later step reads the hashes (`decode`
        // ignores them), so they are not kept: 66 -> 47 instructions a key
        // (callgrind, 1e5 keys). The keys whose stash-filter bit is set are
        // collected without a branch and looked up in the read stage
        // (rare); with an empty stash (the usual case) the bit is not even
        // tested.
        match (meta.check_bits != 0, filter != 0) {
            (false, false) => hash_group::<_, _, false, false>(meta, s, kc, ij, hs, 0),
            (false, true) => hash_group::<_, _, false, true>(meta, s, kc, ij, hs, filter),
            (true, false) => hash_group::<_, _, true, false>(meta, s, kc, ij, hs, 0),
            (true, true) => hash_group::<_, _, true, true>(meta, s, kc, ij, hs, filter),
        }
    }

    /// A batch group's second stage: look up the keys `maybe` marks in the
    /// stash, then read and decode the others' slots in one sequence-lock
    /// read section; returns the group's hits.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn read_stage<W: Word, K: KeyBytes>(
        &self,
        meta: &QueryMeta,
        s: &Slots<W>,
        kc: &[K],
        oc: &mut [u64],
        ij: &[(usize, usize)],
        hs: &[Hash128],
        mut maybe: u32,
    ) -> usize {
        let keep = meta.check_bits != 0;
        let mut words = [0u64; BATCH_GROUP];
        // Keys found in the stash (bit n of the group).
        let mut stashed = 0u32;
        while maybe != 0 {
            let n = maybe.trailing_zeros() as usize;
            maybe &= maybe - 1;
            if let (Some(k), Some(w)) = (kc.get(n), words.get_mut(n)) {
                // The kept hash when there is one, else hashed again.
                let fp = if keep {
                    hs[n].0
                } else {
                    k.hash128(meta.seed).0
                };
                if let Some(v) = self.stash.get(fp) {
                    *w = v;
                    stashed |= 1 << n;
                }
            }
        }
        // One sequence-lock read section for the whole group against the
        // structure's epoch. Common case first (nothing stashed in the
        // group): decode straight into `out`, then validate; the general
        // path below rewrites `out` if a write overlapped.
        if stashed == 0 {
            let e1 = self.epoch.load(Ordering::Acquire);
            if e1 & WRITING == 0 {
                let mut h = 0;
                if !keep {
                    let vmask = mask(meta.value_bits as u32);
                    for (o, &(i, j)) in oc.iter_mut().zip(&ij[..kc.len()]) {
                        // SAFETY: `meta.slots` reduced `i` into `0..ma`
                        // and `j` into `0..mb`, the arrays' lengths (see
                        // `lookup_hash`).
                        *o = unsafe { s.xor_unchecked(i, j) } & vmask;
                    }
                    h = kc.len();
                } else {
                    for n in 0..kc.len() {
                        let r = meta.decode(s.xor(ij[n].0, ij[n].1), hs[n]);
                        h += r.is_some() as usize;
                        oc[n] = r.unwrap_or(MISS);
                    }
                }
                fence(Ordering::Acquire);
                if self.epoch.load(Ordering::Relaxed) == e1 {
                    return h;
                }
            }
        }
        // General path: a try that overlapped a write is repeated (its
        // lines are cached by then) before falling back to the stripes.
        let mut clean = false;
        for _ in 0..3 {
            let e1 = self.epoch.load(Ordering::Acquire);
            if e1 & WRITING == 0 {
                for n in 0..kc.len() {
                    if stashed & (1 << n) == 0 {
                        let (i, j) = ij[n];
                        words[n] = s.xor(i, j);
                    }
                }
                fence(Ordering::Acquire);
                if self.epoch.load(Ordering::Relaxed) == e1 {
                    clean = true;
                    break;
                }
            }
            std::hint::spin_loop();
        }
        let mut hits = 0;
        for n in 0..kc.len() {
            let r = if stashed & (1 << n) != 0 {
                Some(words[n])
            } else {
                let w = if clean {
                    words[n]
                } else {
                    self.read_pair(s, ij[n].0, ij[n].1)
                };
                meta.decode(w, hs[n])
            };
            hits += r.is_some() as usize;
            oc[n] = r.unwrap_or(MISS);
        }
        hits
    }

    /// Apply a delta. `Delta::Ops` must be for this structure's generation;
    /// every op is validated before anything is written, so a bad delta
    /// leaves the structure unchanged. A `Delta::Snapshot` cannot be applied
    /// in place (the arrays change size): load it with
    /// [`Query::from_snapshot`] and swap the structure.
    pub fn apply(&self, delta: &Delta) -> Result<(), FormatError> {
        match delta {
            Delta::Ops { generation, ops } => self.apply_ops(*generation, ops),
            Delta::Snapshot(_) => Err(FormatError::Malformed(
                "a snapshot delta replaces the structure; load it with Query::from_snapshot",
            )),
        }
    }

    /// Apply slot writes for `generation` (see [`Query::apply`]).
    pub fn apply_ops(&self, generation: u64, ops: &[Op]) -> Result<(), FormatError> {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if generation != self.meta.generation {
            return Err(FormatError::Generation {
                delta: generation,
                current: self.meta.generation,
            });
        }
        self.validate(ops)?;
        with_slots!(&self.storage, s => self.write_ops(s, ops));
        Ok(())
    }

    fn validate(&self, ops: &[Op]) -> Result<(), FormatError> {
        let word_mask = mask(self.meta.value_bits as u32 + self.meta.check_bits as u32);
        let vmask = mask(self.meta.value_bits as u32);
        let mut stash: Vec<u128> = self.stash.entries().into_iter().map(|e| e.0).collect();
        for op in ops {
            match *op {
                Op::SetA { index, word } | Op::SetB { index, word } => {
                    let len = if matches!(op, Op::SetA { .. }) {
                        self.meta.ma
                    } else {
                        self.meta.mb
                    };
                    if index >= len {
                        return Err(FormatError::IndexOutOfRange {
                            index: index as u64,
                            len,
                        });
                    }
                    if word & !word_mask != 0 {
                        return Err(FormatError::Malformed("slot word wider than l + r bits"));
                    }
                }
                Op::StashPut { fp, word } => {
                    if word & !vmask != 0 {
                        return Err(FormatError::Malformed("stash value wider than l bits"));
                    }
                    if !stash.contains(&fp) {
                        if stash.len() == MAX_STASH {
                            return Err(FormatError::StashFull(MAX_STASH));
                        }
                        stash.push(fp);
                    }
                }
                Op::StashDel { fp } => stash.retain(|&x| x != fp),
            }
        }
        Ok(())
    }

    fn write_ops<W: Word>(&self, s: &Slots<W>, ops: &[Op]) {
        let mut start = 0;
        while start < ops.len() {
            let end = ops[start..]
                .iter()
                .position(|o| matches!(o, Op::StashPut { .. } | Op::StashDel { .. }))
                .map_or(ops.len(), |p| start + p);
            if end > start {
                self.write_slots(s, &ops[start..end]);
            }
            if let Some(op) = ops.get(end) {
                match *op {
                    Op::StashPut { fp, word } => self.stash.put(fp, word),
                    Op::StashDel { fp } => self.stash.del(fp),
                    _ => unreachable!("segment ends at a stash op"),
                }
            }
            start = end + 1;
        }
    }

    /// Write a run of slot ops under the stripe sequence locks.
    fn write_slots<W: Word>(&self, s: &Slots<W>, ops: &[Op]) {
        let mut touched_a = [0u64; STRIPES / 64];
        let mut touched_b = [0u64; STRIPES / 64];
        for op in ops {
            if let Op::SetA { index, .. } | Op::SetB { index, .. } = *op {
                let p = index as usize & STRIPE_MASK;
                let t = if matches!(op, Op::SetA { .. }) {
                    &mut touched_a
                } else {
                    &mut touched_b
                };
                t[p / 64] |= 1 << (p % 64);
            }
        }
        let stripes = |t: &[u64; STRIPES / 64], seq: &'_ [AtomicU32], f: &dyn Fn(&AtomicU32)| {
            for (wi, &word) in t.iter().enumerate() {
                let mut bits = word;
                while bits != 0 {
                    let p = wi * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    f(&seq[p]);
                }
            }
        };
        let e = self.epoch.load(Ordering::Relaxed);
        self.epoch.store(e | WRITING, Ordering::Relaxed);
        let open =
            |c: &AtomicU32| c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        stripes(&touched_a, &self.seq_a, &open);
        stripes(&touched_b, &self.seq_b, &open);
        fence(Ordering::Release);
        for op in ops {
            match *op {
                Op::SetA { index, word } => W::store(&s.a[index as usize], word),
                Op::SetB { index, word } => W::store(&s.b[index as usize], word),
                _ => {}
            }
        }
        let close =
            |c: &AtomicU32| c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Release);
        stripes(&touched_a, &self.seq_a, &close);
        stripes(&touched_b, &self.seq_b, &close);
        self.epoch
            .store(e.wrapping_add(EPOCH_STEP), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Sizing;

    fn meta(ma: u32, mb: u32, value_bits: u8, check_bits: u8) -> QueryMeta {
        QueryMeta {
            generation: 0,
            seed: 7,
            ma,
            mb,
            value_bits,
            check_bits,
            sizing: Sizing::Tight,
        }
    }

    /// `lookup` and `lookup_batch` read exactly `A[ha(k)] ^ B[hb(k)]` for
    /// array sizes down to one slot and sizes that are not powers of two,
    /// for every slot width.
    #[test]
    fn lookups_read_the_slots_of_the_key_at_any_size() {
        for (ma, mb) in [(1, 1), (1, 7), (3, 1), (5, 3), (1000, 777)] {
            for (l, r) in [(6, 0), (8, 4), (20, 6), (40, 0), (64, 0)] {
                let m = meta(ma, mb, l, r);
                let wmask = mask(l as u32 + r as u32);
                let fa = |i: usize| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) & wmask;
                let fb = |j: usize| (j as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F) & wmask;
                let q = Query::from_parts(m, fa, fb, &[]);
                // Under Miri 40 keys: a full batch group and a partial one.
                let keys: Vec<u64> = (0..if cfg!(miri) { 40 } else { 500 }).collect();
                let mut out = vec![0; keys.len()];
                q.lookup_batch(&keys, &mut out);
                for (k, &o) in keys.iter().zip(&out) {
                    let h = k.hash128(m.seed);
                    let (i, j) = m.slots(h);
                    assert!(i < ma as usize && j < mb as usize);
                    let want = m.decode(fa(i) ^ fb(j), h);
                    assert_eq!(q.lookup(k), want, "ma {ma} mb {mb} l {l} r {r} key {k}");
                    assert_eq!(o, want.unwrap_or(MISS), "batch: ma {ma} mb {mb} key {k}");
                }
            }
        }
    }
}
