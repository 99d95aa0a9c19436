//! The fingerprint-only PIT of a core router (dissertation §5.4).
//!
//! A `d`-left hash table of 64-byte (cache-line) buckets of eight packed
//! 8-byte entries:
//!
//! ```text
//! bit 0        occupy      entry in use (cleared = lazily deleted)
//! bit 1        collision   more than one Interest hit this fingerprint
//! bits 2..     w-bit fingerprint
//! then         t-bit expiry, in ticks of `tick_ms`, modulo 2^t
//! then         face bit-vector, one bit per face of the segment
//! ```
//!
//! plus a bounded overflow table for Interests whose `d` candidate buckets
//! are full. Bucket index and fingerprint come from one key
//! `x = (bucket0, fp0)` in `[0, B) x [0, 2^w)` hashed from the name,
//! through a bijection per subtable (two Feistel rounds; §5.4.2 asks for
//! permutations after Bonomi et al.), so two names share an entry in some
//! subtable exactly when they share `x`: a fingerprint collision is
//! well-defined, at most one entry matches a name, and an insert that finds
//! none may use any candidate bucket.
//!
//! Algorithm 1 semantics: every Interest is forwarded; a second Interest
//! for a fingerprint (a duplicate or a colliding name) sets the collision
//! bit, adds its face and extends the expiry; Data goes to every face of
//! the matching entry; an entry without the collision bit is deleted by
//! its Data, one with it stays until it expires, so the colliding name's
//! Data is delivered too. Expired entries are reset lazily when an
//! operation visits them, and a sweep that advances with time clears every
//! bucket often enough that the `t`-bit expiry never wraps around unseen.
//!
//! Segregated PIT (§5.4.3): with `segments = s`, faces are split into `s`
//! groups of `ceil(n / s)`; an Interest goes to its face's segment, Data
//! is looked up in all of them.

use std::collections::HashMap;

use super::{check_range, ConfigError, FaceId, Millis};

/// Entries per bucket (`E`): 8 entries of 8 bytes, one cache line.
pub const E: usize = 8;

/// A cache-line bucket.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Bucket([u64; E]);

const _: () = assert!(std::mem::size_of::<Bucket>() == 64);
const _: () = assert!(std::mem::size_of::<Bucket>() / E == 8);

const OCCUPY: u64 = 1;
const COLLISION: u64 = 2;
const FP_SHIFT: u32 = 2;

/// Fingerprint PIT configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FingerprintPitConfig {
    /// Entries the `d`-left table holds (all segments together), rounded
    /// up to whole buckets (`8..=2^34`). Size it as pending Interests /
    /// target load (the dissertation: 75%).
    pub capacity: usize,
    /// Subtables `d` (`1..=8`): an operation reads `d` bucket lines. The
    /// dissertation (§5.6.2, Table 5.4) measures `d = 2` with half the
    /// latency and half the false-match rate of `d = 4`, and an overflow
    /// table holding about 0.8% of the names at 75% load (`d = 4` never
    /// overflowed); 0.77% here at 10^6 (docs/benchmarks.md).
    pub subtables: usize,
    /// Fingerprint bits `w` (`1..=32`; tiny widths force collisions).
    pub fp_bits: u32,
    /// Expiry bits `t` (`4..=30`; the dissertation: 10).
    pub timer_bits: u32,
    /// Timer granularity (`1..=60000` ms; the dissertation: 16).
    pub tick_ms: Millis,
    /// Longest InterestLifetime honoured, clamped above; it must stay
    /// below a quarter of the timer range (`2^t * tick_ms`).
    pub max_lifetime_ms: Millis,
    /// Faces `n` (`1..=64`).
    pub faces: u32,
    /// Segregated PITs `s` (`1..=faces`; 1 = one PIT).
    pub segments: u32,
    /// Most entries in each segment's overflow table: with `d = 2`, size
    /// it to a few percent of `capacity` (the default: 1/32).
    pub overflow_cap: usize,
    /// Hash seed.
    pub seed: u64,
}

impl Default for FingerprintPitConfig {
    fn default() -> FingerprintPitConfig {
        FingerprintPitConfig {
            capacity: 1 << 20,
            subtables: 2,
            fp_bits: 16,
            timer_bits: 12,
            tick_ms: 16,
            max_lifetime_ms: 16_000,
            faces: 16,
            segments: 1,
            overflow_cap: 1 << 15,
            seed: 0x4650_5f50_4954_0001,
        }
    }
}

/// Derived geometry.
#[derive(Clone, Copy, Debug)]
struct Geometry {
    buckets: usize,
    faces_per_seg: u32,
    exp_shift: u32,
    face_shift: u32,
    tmask: u64,
    half: u64,
    max_ticks: u64,
    sweep_period: u64,
}

impl FingerprintPitConfig {
    fn geometry(&self) -> Result<Geometry, ConfigError> {
        check_range("capacity", self.capacity as u64, 8, 1 << 34, "8..=2^34")?;
        check_range("subtables", self.subtables as u64, 1, 8, "1..=8")?;
        check_range("fp_bits", self.fp_bits as u64, 1, 32, "1..=32")?;
        check_range("timer_bits", self.timer_bits as u64, 4, 30, "4..=30")?;
        check_range("tick_ms", self.tick_ms, 1, 60_000, "1..=60000 ms")?;
        check_range("faces", self.faces as u64, 1, 64, "1..=64")?;
        check_range(
            "segments",
            self.segments as u64,
            1,
            self.faces as u64,
            "1..=faces",
        )?;
        check_range(
            "max_lifetime_ms",
            self.max_lifetime_ms,
            1,
            u32::MAX as u64,
            "1..=2^32-1 ms",
        )?;
        check_range(
            "overflow_cap",
            self.overflow_cap as u64,
            0,
            1 << 31,
            "0..=2^31",
        )?;
        let faces_per_seg = self.faces.div_ceil(self.segments);
        let bits = FP_SHIFT + self.fp_bits + self.timer_bits + faces_per_seg;
        if bits > 64 {
            return Err(ConfigError::TooLarge {
                what: "an entry's bits (2 + fp_bits + timer_bits + faces per segment)",
                needed: bits as u64,
                limit: 64,
            });
        }
        let per_sub = (self
            .capacity
            .div_ceil(self.segments as usize * self.subtables * E))
        .max(1);
        if per_sub > 1 << 31 {
            return Err(ConfigError::TooLarge {
                what: "buckets per subtable (capacity / segments / subtables / 8)",
                needed: per_sub as u64,
                limit: 1 << 31,
            });
        }
        let buckets = per_sub;
        let half = 1u64 << (self.timer_bits - 1);
        let max_ticks = self.max_lifetime_ms.div_ceil(self.tick_ms) + 1;
        // A live entry expires at most `max_ticks` ahead; an expired one
        // is swept within `sweep_period + 2` ticks; both must stay below
        // half the timer range for the modular comparison to be right.
        let sweep_period = half.saturating_sub(max_ticks + 3);
        if max_ticks > half / 2 || sweep_period == 0 {
            return Err(ConfigError::TooLarge {
                what: "max_lifetime_ms in ticks (must be below a quarter of 2^timer_bits)",
                needed: max_ticks,
                limit: half / 2,
            });
        }
        Ok(Geometry {
            buckets,

            faces_per_seg,
            exp_shift: FP_SHIFT + self.fp_bits,
            face_shift: FP_SHIFT + self.fp_bits + self.timer_bits,
            tmask: (1u64 << self.timer_bits) - 1,
            half,
            max_ticks,
            sweep_period,
        })
    }

    /// Check every field and their combination.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.geometry().map(|_| ())
    }
}

/// A name's hash, computed once ([`FingerprintPit::key`]) and usable for
/// insert and satisfy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FpKey(u64);

impl FpKey {
    /// `bucket * 2^w + fingerprint` in subtable 0 (below `B * 2^w`): two
    /// names share an entry exactly when they share this value.
    pub fn hash(self) -> u64 {
        self.0
    }
}

/// Interests per prefetch group in the batch calls.
const BATCH: usize = 8;

#[inline(always)]
fn prefetch_line(b: &Bucket) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: 1. `_mm_prefetch` needs SSE, part of every x86_64 target.
        // 2. A prefetch is a hint with no architectural memory effect; the
        // pointer comes from a live reference.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(b as *const Bucket as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = b;
}

/// One Interest of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FpInterest {
    /// Its name's key.
    pub key: FpKey,
    /// Incoming face.
    pub face: FaceId,
    /// InterestLifetime (`None`: 4 s).
    pub lifetime_ms: Option<Millis>,
}

/// What an Interest did (it is always forwarded unless refused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FpInsert {
    /// Recorded; forward the Interest.
    Forward {
        /// An entry with this fingerprint was pending (a duplicate or a
        /// colliding name): its collision bit is now set.
        collided: bool,
        /// The entry is in the overflow table.
        overflow: bool,
    },
    /// Candidate buckets and the overflow table are full: dropped.
    Full,
    /// The face is not below `faces`: dropped.
    BadFace,
}

/// Where a Data packet goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FpSatisfy {
    /// Faces (bit `f` = face `f`) to send the Data to; 0: unsolicited.
    pub faces: u64,
    /// Some matching entry had its collision bit (it stays until expiry;
    /// §5.5 marks such Data for the downstream core routers).
    pub collided: bool,
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FingerprintPitStats {
    /// Interests recorded in a new entry.
    pub inserted: u64,
    /// Interests that found their fingerprint pending.
    pub collided: u64,
    /// Entries placed in an overflow table.
    pub overflowed: u64,
    /// Interests refused: no room.
    pub full: u64,
    /// Interests refused: face out of range.
    pub bad_face: u64,
    /// Data that matched an entry.
    pub satisfied: u64,
    /// Entries deleted by their Data (no collision).
    pub deleted: u64,
    /// Data that matched nothing.
    pub unsolicited: u64,
    /// Entries reset after expiry (lazily or by the sweep).
    pub expired: u64,
}

#[derive(Clone, Debug)]
struct Segment {
    /// `d` subtables of `B` buckets, back to back.
    /// On huge pages when large (lookups read random buckets).
    buckets: nexthop_mem::HugeBox<Bucket>,
    overflow: HashMap<u64, u64>,
}

/// The fingerprint-only PIT. See the module docs.
#[derive(Clone, Debug)]
pub struct FingerprintPit {
    cfg: FingerprintPitConfig,
    g: Geometry,
    mul: [(u64, u64); 8],
    segs: Vec<Segment>,
    occupied: usize,
    last_tick: u64,
    sweep_debt: u64,
    cursor: usize,
    stats: FingerprintPitStats,
}

fn splitmix(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl FingerprintPit {
    /// An empty PIT.
    pub fn new(cfg: FingerprintPitConfig) -> Result<FingerprintPit, ConfigError> {
        let g = cfg.geometry()?;
        let mut s = cfg.seed;
        let mut mul = [(1u64, 1u64); 8];
        for m in &mut mul {
            *m = (splitmix(&mut s) | 1, splitmix(&mut s) | 1);
        }
        let segs = (0..cfg.segments)
            .map(|_| Segment {
                buckets: nexthop_mem::HugeBox::new(cfg.subtables * g.buckets, Bucket::default()),
                overflow: HashMap::new(),
            })
            .collect();
        Ok(FingerprintPit {
            cfg,
            g,
            mul,
            segs,
            occupied: 0,
            last_tick: 0,
            sweep_debt: 0,
            cursor: 0,
            stats: FingerprintPitStats::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &FingerprintPitConfig {
        &self.cfg
    }

    /// Entries the table holds (all segments), without overflow.
    pub fn capacity(&self) -> usize {
        self.segs.len() * self.cfg.subtables * self.g.buckets * E
    }

    /// Occupied entries (expired ones not yet reset included).
    pub fn len(&self) -> usize {
        self.occupied
    }

    /// Whether no entry is occupied.
    pub fn is_empty(&self) -> bool {
        self.occupied == 0
    }

    /// Entries in the overflow tables.
    pub fn overflow_len(&self) -> usize {
        self.segs.iter().map(|s| s.overflow.len()).sum()
    }

    /// Bytes of the bucket arrays.
    pub fn table_bytes(&self) -> usize {
        self.segs.len() * self.cfg.subtables * self.g.buckets * std::mem::size_of::<Bucket>()
    }

    /// Bytes of the bucket arrays per entry slot (8).
    pub fn bytes_per_entry(&self) -> f64 {
        self.table_bytes() as f64 / self.capacity() as f64
    }

    /// Counters.
    pub fn stats(&self) -> FingerprintPitStats {
        self.stats
    }

    /// The hash of a name (its concatenated component TLVs).
    #[inline]
    pub fn key(&self, name: &[u8]) -> FpKey {
        let h = nexthop_hash::hash64(name, self.cfg.seed);
        let b0 = nexthop_hash::reduce((h >> 32) as u32, self.g.buckets as u32) as u64;
        FpKey(b0 << self.cfg.fp_bits | (h & self.fp_mask()))
    }

    /// `(bucket, fingerprint)` of `x` in subtable `j`.
    #[inline(always)]
    fn place(&self, j: usize, x: u64) -> (usize, u64) {
        // Two Feistel rounds on (bucket, fingerprint): a bijection for
        // any round functions, so distinct keys never share an entry.
        let w = self.cfg.fp_bits;
        let nb = self.g.buckets as u64;
        let (m1, m2) = self.mul[j];
        let (b0, f0) = (x >> w, x & self.fp_mask());
        let f = (f0 + ((b0 ^ m2).wrapping_mul(m1) >> (64 - w))) & self.fp_mask();
        let r = (((f ^ m1).wrapping_mul(m2) >> 32) * nb) >> 32;
        let b = b0 + r;
        let b = if b >= nb { b - nb } else { b };
        (j * self.g.buckets + b as usize, f)
    }

    #[inline(always)]
    fn fp_mask(&self) -> u64 {
        (1u64 << self.cfg.fp_bits) - 1
    }

    #[inline(always)]
    fn fp_of(&self, e: u64) -> u64 {
        (e >> FP_SHIFT) & ((1u64 << self.cfg.fp_bits) - 1)
    }

    #[inline(always)]
    fn exp_of(&self, e: u64) -> u64 {
        (e >> self.g.exp_shift) & self.g.tmask
    }

    #[inline(always)]
    fn with_exp(&self, e: u64, exp: u64) -> u64 {
        (e & !(self.g.tmask << self.g.exp_shift)) | ((exp & self.g.tmask) << self.g.exp_shift)
    }

    /// Whether expiry `exp` (mod 2^t) is before tick `now`.
    #[inline(always)]
    fn expired(&self, e: u64, now: u64) -> bool {
        let d = now.wrapping_sub(self.exp_of(e)) & self.g.tmask;
        d != 0 && d < self.g.half
    }

    /// The later of two expiries (mod 2^t).
    #[inline(always)]
    fn later(&self, a: u64, b: u64) -> u64 {
        let d = b.wrapping_sub(a) & self.g.tmask;
        if d != 0 && d < self.g.half {
            b
        } else {
            a
        }
    }

    /// Advance the expiry sweep to tick `now`: every bucket is visited at
    /// least once per `sweep_period` ticks.
    fn advance(&mut self, now: u64) {
        let elapsed = now.saturating_sub(self.last_tick);
        if elapsed == 0 {
            return;
        }
        self.last_tick = now;
        if elapsed > self.g.max_ticks {
            // Every entry was recorded at or before the previous tick, so
            // every entry has expired by now: clear all (comparing `t`-bit
            // expiries this far apart would wrap).
            self.clear_all();
            return;
        }
        let total = self.segs.len() * self.segs[0].buckets.len();
        let n = if elapsed >= self.g.sweep_period {
            self.sweep_debt = 0;
            total
        } else {
            self.sweep_debt += total as u64 * elapsed;
            let n = self.sweep_debt / self.g.sweep_period;
            self.sweep_debt %= self.g.sweep_period;
            (n as usize).min(total)
        };
        let per_seg = self.segs[0].buckets.len();
        for _ in 0..n {
            let (si, bi) = (self.cursor / per_seg, self.cursor % per_seg);
            let mut b = self.segs[si].buckets[bi];
            let mut dirty = false;
            for e in &mut b.0 {
                if *e & OCCUPY != 0 && self.expired(*e, now) {
                    *e = 0;
                    dirty = true;
                    self.occupied -= 1;
                    self.stats.expired += 1;
                }
            }
            if dirty {
                self.segs[si].buckets[bi] = b;
            }
            self.cursor += 1;
            if self.cursor == total {
                self.cursor = 0;
                self.sweep_overflow(now);
            }
        }
    }

    fn clear_all(&mut self) {
        if self.occupied == 0 {
            return;
        }
        for s in &mut self.segs {
            s.buckets.fill(Bucket::default());
            s.overflow.clear();
        }
        self.stats.expired += self.occupied as u64;
        self.occupied = 0;
        self.sweep_debt = 0;
    }

    fn sweep_overflow(&mut self, now: u64) {
        let (tmask, half, shift) = (self.g.tmask, self.g.half, self.g.exp_shift);
        let mut gone = 0;
        for s in &mut self.segs {
            s.overflow.retain(|_, e| {
                let d = now.wrapping_sub((*e >> shift) & tmask) & tmask;
                let keep = !(d != 0 && d < half);
                gone += !keep as usize;
                keep
            });
        }
        self.occupied -= gone;
        self.stats.expired += gone as u64;
    }

    /// Run the expiry sweep up to `now` (operations do this themselves;
    /// call it while idle to keep the sweep on schedule cheaply).
    pub fn maintain(&mut self, now: Millis) {
        self.advance(now / self.cfg.tick_ms);
    }

    /// Record an Interest for `name` from `face` (Algorithm 1).
    pub fn insert(
        &mut self,
        name: &[u8],
        face: FaceId,
        lifetime_ms: Option<Millis>,
        now: Millis,
    ) -> FpInsert {
        let k = self.key(name);
        self.insert_key(k, face, lifetime_ms, now)
    }

    /// [`Self::insert`] with a precomputed key.
    pub fn insert_key(
        &mut self,
        key: FpKey,
        face: FaceId,
        lifetime_ms: Option<Millis>,
        now: Millis,
    ) -> FpInsert {
        if face >= self.cfg.faces {
            self.stats.bad_face += 1;
            return FpInsert::BadFace;
        }
        let tnow = now / self.cfg.tick_ms;
        self.advance(tnow);
        let seg = (face / self.g.faces_per_seg) as usize;
        let bit = 1u64 << (self.g.face_shift + face % self.g.faces_per_seg);
        let lifetime = lifetime_ms
            .unwrap_or(super::DEFAULT_INTEREST_LIFETIME_MS)
            .min(self.cfg.max_lifetime_ms);
        let exp = now.saturating_add(lifetime).div_ceil(self.cfg.tick_ms) & self.g.tmask;
        let x = key.0;
        let mut best: Option<(usize, usize, usize)> = None; // (bucket, slot, used)
        for j in 0..self.cfg.subtables {
            let (bi, fp) = self.place(j, x);
            let mut b = self.segs[seg].buckets[bi];
            let mut used = 0;
            let mut free = None;
            let mut dirty = false;
            for i in 0..E {
                let e = b.0[i];
                if e & OCCUPY != 0 && self.expired(e, tnow) {
                    b.0[i] = 0;
                    dirty = true;
                    self.occupied -= 1;
                    self.stats.expired += 1;
                }
                let e = b.0[i];
                if e & OCCUPY == 0 {
                    free.get_or_insert(i);
                    continue;
                }
                used += 1;
                if self.fp_of(e) == fp {
                    let ne = self.with_exp(e | COLLISION | bit, self.later(self.exp_of(e), exp));
                    b.0[i] = ne;
                    self.segs[seg].buckets[bi] = b;
                    self.stats.collided += 1;
                    return FpInsert::Forward {
                        collided: true,
                        overflow: false,
                    };
                }
            }
            if dirty {
                self.segs[seg].buckets[bi] = b;
            }
            if let Some(i) = free {
                if best.is_none_or(|(_, _, u)| used < u) {
                    best = Some((bi, i, used));
                }
            }
        }
        if !self.segs[seg].overflow.is_empty() {
            if let Some(&e) = self.segs[seg].overflow.get(&x) {
                if self.expired(e, tnow) {
                    self.segs[seg].overflow.remove(&x);
                    self.occupied -= 1;
                    self.stats.expired += 1;
                } else {
                    let ne = self.with_exp(e | COLLISION | bit, self.later(self.exp_of(e), exp));
                    self.segs[seg].overflow.insert(x, ne);
                    self.stats.collided += 1;
                    return FpInsert::Forward {
                        collided: true,
                        overflow: true,
                    };
                }
            }
        }
        match best {
            Some((bi, i, _)) => {
                let j = bi / self.g.buckets;
                let (_, fp) = self.place(j, x);
                self.segs[seg].buckets[bi].0[i] = self.with_exp(OCCUPY | fp << FP_SHIFT | bit, exp);
                self.occupied += 1;
                self.stats.inserted += 1;
                FpInsert::Forward {
                    collided: false,
                    overflow: false,
                }
            }
            None if self.segs[seg].overflow.len() < self.cfg.overflow_cap => {
                let e = self.with_exp(OCCUPY | bit, exp);
                self.segs[seg].overflow.insert(x, e);
                self.occupied += 1;
                self.stats.inserted += 1;
                self.stats.overflowed += 1;
                FpInsert::Forward {
                    collided: false,
                    overflow: true,
                }
            }
            None => {
                self.stats.full += 1;
                FpInsert::Full
            }
        }
    }

    /// Match a Data packet named `name`: the faces to deliver it to. An
    /// entry without the collision bit is deleted; one with it stays until
    /// it expires.
    pub fn satisfy(&mut self, name: &[u8], now: Millis) -> FpSatisfy {
        let k = self.key(name);
        self.satisfy_key(k, now)
    }

    /// [`Self::satisfy`] with a precomputed key.
    pub fn satisfy_key(&mut self, key: FpKey, now: Millis) -> FpSatisfy {
        let tnow = now / self.cfg.tick_ms;
        self.advance(tnow);
        let x = key.0;
        let mut r = FpSatisfy::default();
        let fmask = if self.g.faces_per_seg == 64 {
            u64::MAX
        } else {
            (1u64 << self.g.faces_per_seg) - 1
        };
        for seg in 0..self.segs.len() {
            let shift = seg as u32 * self.g.faces_per_seg;
            let mut found = None;
            'sub: for j in 0..self.cfg.subtables {
                let (bi, fp) = self.place(j, x);
                let b = &self.segs[seg].buckets[bi];
                for i in 0..E {
                    let e = b.0[i];
                    if e & OCCUPY != 0 && self.fp_of(e) == fp {
                        found = Some((bi, i, e));
                        break 'sub;
                    }
                }
            }
            let e = match found {
                Some((bi, i, e)) => {
                    if self.expired(e, tnow) {
                        self.segs[seg].buckets[bi].0[i] = 0;
                        self.occupied -= 1;
                        self.stats.expired += 1;
                        continue;
                    }
                    if e & COLLISION == 0 {
                        self.segs[seg].buckets[bi].0[i] = 0;
                        self.occupied -= 1;
                        self.stats.deleted += 1;
                    }
                    e
                }
                None => {
                    let Some(&e) = self.segs[seg].overflow.get(&x) else {
                        continue;
                    };
                    if self.expired(e, tnow) {
                        self.segs[seg].overflow.remove(&x);
                        self.occupied -= 1;
                        self.stats.expired += 1;
                        continue;
                    }
                    if e & COLLISION == 0 {
                        self.segs[seg].overflow.remove(&x);
                        self.occupied -= 1;
                        self.stats.deleted += 1;
                    }
                    e
                }
            };
            r.faces |= ((e >> self.g.face_shift) & fmask) << shift;
            r.collided |= e & COLLISION != 0;
        }
        if r.faces == 0 {
            self.stats.unsolicited += 1;
        } else {
            self.stats.satisfied += 1;
        }
        r
    }

    /// Hint the CPU to load the candidate buckets of `x` in segment `seg`.
    #[inline(always)]
    fn prefetch(&self, seg: usize, x: u64) {
        for j in 0..self.cfg.subtables {
            let (bi, _) = self.place(j, x);
            prefetch_line(&self.segs[seg].buckets[bi]);
        }
    }

    /// Hint the CPU to load the candidate buckets `name` will visit: those
    /// of `face`'s segment for an Interest (`Some(face)`), those of every
    /// segment for a Data or Nack (`None`). Changes nothing.
    pub fn prefetch_name(&self, name: &[u8], face: Option<FaceId>) {
        let x = self.key(name).0;
        match face {
            Some(f) if f < self.cfg.faces => self.prefetch((f / self.g.faces_per_seg) as usize, x),
            Some(_) => {}
            None => {
                for seg in 0..self.segs.len() {
                    self.prefetch(seg, x);
                }
            }
        }
    }

    /// [`Self::insert_key`] over a batch: the candidate buckets of a group
    /// of Interests are prefetched together, then each is inserted in
    /// order (results identical to one call per Interest).
    /// `out.len()` must equal `items.len()`; extra slots are left alone.
    pub fn insert_batch(&mut self, items: &[FpInterest], now: Millis, out: &mut [FpInsert]) {
        for (g, o) in items.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            for it in g {
                if it.face < self.cfg.faces {
                    self.prefetch((it.face / self.g.faces_per_seg) as usize, it.key.0);
                }
            }
            for (it, r) in g.iter().zip(o.iter_mut()) {
                *r = self.insert_key(it.key, it.face, it.lifetime_ms, now);
            }
        }
    }

    /// [`Self::satisfy_key`] over a batch, prefetching like
    /// [`Self::insert_batch`].
    pub fn satisfy_batch(&mut self, keys: &[FpKey], now: Millis, out: &mut [FpSatisfy]) {
        for (g, o) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            for k in g {
                for seg in 0..self.segs.len() {
                    self.prefetch(seg, k.0);
                }
            }
            for (k, r) in g.iter().zip(o.iter_mut()) {
                *r = self.satisfy_key(*k, now);
            }
        }
    }

    /// Longest lifetime honoured, in ticks (rounded up, plus one).
    pub fn max_lifetime_ticks(&self) -> u64 {
        self.g.max_ticks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> FingerprintPitConfig {
        FingerprintPitConfig {
            capacity: 16,
            subtables: 2,
            fp_bits: 2,
            timer_bits: 10,
            tick_ms: 1,
            max_lifetime_ms: 100,
            faces: 8,
            segments: 1,
            overflow_cap: 64,
            seed: 7,
        }
    }

    /// Two names with the same hash `x` (a forced collision).
    fn colliding(p: &FingerprintPit) -> (Vec<u8>, Vec<u8>) {
        let names: Vec<Vec<u8>> = (0..64u32).map(|i| format!("n{i}").into_bytes()).collect();
        for a in &names {
            for b in &names {
                if a != b && p.key(a) == p.key(b) {
                    return (a.clone(), b.clone());
                }
            }
        }
        panic!("no collision among 64 names at 2 bits");
    }

    #[test]
    fn entry_and_bucket_sizes_meet_the_target() {
        let p = FingerprintPit::new(FingerprintPitConfig::default()).unwrap();
        assert_eq!(p.bytes_per_entry(), 8.0);
        assert!(p.capacity() >= 1 << 20);
    }

    #[test]
    fn an_expired_entry_is_cleared_not_matched_by_a_new_interest() {
        let mut p = FingerprintPit::new(tiny()).unwrap();
        assert!(matches!(
            p.insert(b"a", 3, Some(10), 0),
            FpInsert::Forward {
                collided: false,
                ..
            }
        ));
        // Past its expiry, before the sweep reaches its bucket (13 ticks
        // of a 408-tick sweep over 2 buckets) and before the whole table
        // would be cleared (101 ticks), the same name is new again.
        let later = 10 + 3 * p.cfg.tick_ms;
        assert_eq!(
            p.insert(b"a", 5, Some(10_000), later),
            FpInsert::Forward {
                collided: false,
                overflow: false
            }
        );
        assert_eq!(p.len(), 1);
        assert_eq!(p.satisfy(b"a", later).faces, 1 << 5);
    }

    #[test]
    fn unique_name_is_deleted_by_its_data() {
        let mut p = FingerprintPit::new(tiny()).unwrap();
        assert_eq!(
            p.insert(b"a", 3, Some(50), 0),
            FpInsert::Forward {
                collided: false,
                overflow: false
            }
        );
        assert_eq!(
            p.satisfy(b"a", 1),
            FpSatisfy {
                faces: 1 << 3,
                collided: false
            }
        );
        assert_eq!(p.satisfy(b"a", 2).faces, 0);
        assert!(p.is_empty());
    }

    #[test]
    fn colliding_names_are_both_forwarded_both_delivered_and_live_to_expiry() {
        let mut p = FingerprintPit::new(tiny()).unwrap();
        let (a, c) = colliding(&p);
        assert_eq!(
            p.insert(&a, 1, Some(50), 0),
            FpInsert::Forward {
                collided: false,
                overflow: false
            }
        );
        // The colliding Interest is forwarded, not aggregated away.
        assert_eq!(
            p.insert(&c, 2, Some(50), 10),
            FpInsert::Forward {
                collided: true,
                overflow: false
            }
        );
        let both = FpSatisfy {
            faces: 0b110,
            collided: true,
        };
        assert_eq!(p.satisfy(&a, 20), both);
        // The entry survives the first Data, so C's Data is delivered.
        assert_eq!(p.satisfy(&c, 30), both);
        assert_eq!(p.satisfy(&a, 60), both);
        // Expiry is the later of the two (10 + 50).
        assert_eq!(p.satisfy(&a, 61).faces, 0);
        assert!(p.is_empty());
    }

    #[test]
    fn duplicate_interest_sets_the_collision_bit_too() {
        let mut p = FingerprintPit::new(tiny()).unwrap();
        p.insert(b"a", 1, Some(50), 0);
        assert_eq!(
            p.insert(b"a", 4, Some(50), 0),
            FpInsert::Forward {
                collided: true,
                overflow: false
            }
        );
        assert_eq!(p.satisfy(b"a", 1).faces, 0b10010);
        assert_eq!(p.satisfy(b"a", 2).faces, 0b10010);
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn full_candidates_spill_to_overflow_then_refuse() {
        let cfg = FingerprintPitConfig {
            capacity: 8,
            subtables: 1,
            fp_bits: 32,
            overflow_cap: 2,
            ..tiny()
        };
        let mut p = FingerprintPit::new(cfg).unwrap();
        for i in 0..8u32 {
            assert!(matches!(
                p.insert(&i.to_le_bytes(), 0, None, 0),
                FpInsert::Forward {
                    overflow: false,
                    ..
                }
            ));
        }
        assert_eq!(
            p.insert(b"o1", 0, None, 0),
            FpInsert::Forward {
                collided: false,
                overflow: true
            }
        );
        p.insert(b"o2", 0, None, 0);
        assert_eq!(p.insert(b"o3", 0, None, 0), FpInsert::Full);
        assert_eq!(p.stats().full, 1);
        assert_eq!(p.satisfy(b"o1", 1).faces, 1);
        assert_eq!(p.overflow_len(), 1);
    }

    #[test]
    fn expiry_survives_timer_wraparound() {
        let cfg = FingerprintPitConfig {
            timer_bits: 6,
            max_lifetime_ms: 10,
            ..tiny()
        };
        let mut p = FingerprintPit::new(cfg).unwrap();
        p.insert(b"a", 0, Some(10), 0);
        // Many timer periods later, with no operation in between.
        assert_eq!(p.satisfy(b"a", 64 * 7 + 3).faces, 0);
        p.insert(b"b", 0, Some(10), 1000);
        for t in 1001..1200 {
            p.maintain(t);
        }
        assert_eq!(p.satisfy(b"b", 1200 + 64).faces, 0);
        assert!(p.is_empty());
    }

    #[test]
    fn segregated_pit_files_interests_by_face_and_data_finds_all() {
        let cfg = FingerprintPitConfig {
            segments: 4,
            faces: 16,
            fp_bits: 16,
            capacity: 256,
            ..tiny()
        };
        let mut p = FingerprintPit::new(cfg).unwrap();
        p.insert(b"a", 1, None, 0);
        // Same name from another segment: separate entry, no collision.
        assert_eq!(
            p.insert(b"a", 13, None, 0),
            FpInsert::Forward {
                collided: false,
                overflow: false
            }
        );
        assert_eq!(
            p.satisfy(b"a", 1),
            FpSatisfy {
                faces: 1 << 1 | 1 << 13,
                collided: false
            }
        );
        assert!(p.is_empty());
        assert_eq!(p.insert(b"a", 16, None, 0), FpInsert::BadFace);
    }

    #[test]
    fn batch_calls_give_the_same_results_as_single_calls() {
        let cfg = FingerprintPitConfig {
            fp_bits: 4,
            capacity: 64,
            segments: 2,
            ..tiny()
        };
        let (mut a, mut b) = (
            FingerprintPit::new(cfg).unwrap(),
            FingerprintPit::new(cfg).unwrap(),
        );
        let names: Vec<Vec<u8>> = (0..40u32).map(|i| format!("b{i}").into_bytes()).collect();
        for round in 0..20u64 {
            let items: Vec<FpInterest> = (0..13)
                .map(|i| {
                    let n = &names[((round * 7 + i * 3) % 40) as usize];
                    FpInterest {
                        key: a.key(n),
                        face: ((round + i) % 9) as u32,
                        lifetime_ms: Some(30 + i * 5),
                    }
                })
                .collect();
            let now = round * 20;
            let mut got = vec![FpInsert::Full; items.len()];
            a.insert_batch(&items, now, &mut got);
            let want: Vec<FpInsert> = items
                .iter()
                .map(|it| b.insert_key(it.key, it.face, it.lifetime_ms, now))
                .collect();
            assert_eq!(got, want);
            let keys: Vec<FpKey> = (0..11)
                .map(|i| a.key(&names[((round * 5 + i * 7) % 40) as usize]))
                .collect();
            let mut got = vec![FpSatisfy::default(); keys.len()];
            a.satisfy_batch(&keys, now + 5, &mut got);
            let want: Vec<FpSatisfy> = keys.iter().map(|k| b.satisfy_key(*k, now + 5)).collect();
            assert_eq!(got, want);
        }
        assert_eq!(a.stats(), b.stats());
    }

    #[test]
    fn config_errors_name_the_problem() {
        let e = FingerprintPit::new(FingerprintPitConfig {
            fp_bits: 0,
            ..tiny()
        })
        .unwrap_err();
        assert!(e.to_string().contains("fp_bits"));
        let e = FingerprintPit::new(FingerprintPitConfig {
            fp_bits: 32,
            timer_bits: 30,
            faces: 64,
            ..tiny()
        })
        .unwrap_err();
        assert!(e.to_string().contains("entry's bits"), "{e}");
        let e = FingerprintPit::new(FingerprintPitConfig {
            timer_bits: 4,
            max_lifetime_ms: 100,
            ..tiny()
        })
        .unwrap_err();
        assert!(e.to_string().contains("max_lifetime_ms"), "{e}");
    }
}
