//! Collision-free fingerprint-based hash table (FHT) for speculative
//! forwarding in core routers (dissertation §4.3.4, Fig. 4.6).
//!
//! A 4-left hash table of 8-entry buckets that stores, per name, only a
//! `w`-bit fingerprint and an 8-bit port; names whose fingerprint collides,
//! whose candidate buckets are all full, or whose lookup another entry would
//! shadow go to a small *collision table* (CT) that keeps the full name and
//! is queried first. Every name of the built set is therefore forwarded to
//! its own port; a name outside the set may be forwarded anywhere (a
//! speculative false positive, dropped later by an edge router) or miss.
//!
//! Layout: subtable `j` is `B` buckets of `8 * (w + 8)` bits = `w + 8`
//! bytes; entry `i` of a bucket is the bit field `[i*(w+8), (i+1)*(w+8))`,
//! fingerprint in the low `w` bits, port above. Fingerprint 0 marks an empty
//! entry (a name whose fingerprint would be 0 uses 1), so no occupied bit
//! is stored: 24 bits per entry at `w = 16`.
//!
//! Hashing: XXH3-128 of the name picks the four buckets (one 32-bit word
//! each, Lemire reduction); XXH3-64 with another seed gives the fingerprint.

use std::collections::HashMap;

use crate::error::FibError;

/// Subtables (`d`).
pub const D: usize = 4;
/// Entries per bucket (`E`).
pub const E: usize = 8;

/// FHT configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FhtConfig {
    /// Fingerprint bits, `8..=32`.
    pub fp_bits: u32,
    /// Target load factor of the `d`-left table, `(0, 1]` (paper: 0.93).
    pub load: f64,
    /// Hash seed.
    pub seed: u64,
}

impl Default for FhtConfig {
    fn default() -> FhtConfig {
        FhtConfig {
            fp_bits: 16,
            load: 0.93,
            seed: 0x4648_545f_7365_6564,
        }
    }
}

impl FhtConfig {
    fn validate(&self) -> Result<(), FibError> {
        if !(8..=32).contains(&self.fp_bits) {
            return Err(FibError::Config(format!(
                "fp_bits must be in 8..=32, got {}",
                self.fp_bits
            )));
        }
        if !(self.load > 0.0 && self.load <= 1.0) {
            return Err(FibError::Config(format!(
                "load must be in (0, 1], got {}",
                self.load
            )));
        }
        Ok(())
    }
}

/// Where names ended up and what the table costs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FhtStats {
    /// Names in the set.
    pub names: usize,
    /// Names in the collision table, by cause.
    pub ct_collided: usize,
    /// ... because all four candidate buckets were full.
    pub ct_overflow: usize,
    /// ... because another entry would shadow them.
    pub ct_shadowed: usize,
    /// Bytes of the `d`-left table.
    pub table_bytes: usize,
    /// Bytes of the collision table: names plus a 64-bit fingerprint,
    /// 48-bit pointer and 8-bit port per entry as the dissertation counts
    /// (16 B), at 75% load.
    pub ct_bytes: usize,
}

impl FhtStats {
    /// Total bytes per name.
    pub fn bytes_per_name(&self) -> f64 {
        (self.table_bytes + self.ct_bytes) as f64 / self.names.max(1) as f64
    }
}

/// The fingerprint hash table (lookup side; built once from a name set).
#[derive(Clone, Debug)]
pub struct Fht {
    fp_bits: u32,
    seed: u64,
    buckets: u32,
    /// Bytes per bucket (`fp_bits + 8`).
    bucket_bytes: usize,
    /// `D` subtables back to back, plus 8 bytes of slack for word reads.
    data: Vec<u8>,
    ct: HashMap<Box<[u8]>, u8>,
    stats: FhtStats,
}

#[derive(Clone, Copy)]
struct Hashed {
    idx: [u32; D],
    fp: u64,
}

impl Fht {
    #[inline(always)]
    fn hash(&self, name: &[u8]) -> Hashed {
        hash_with(name, self.seed, self.fp_bits, self.buckets)
    }

    #[inline(always)]
    fn entry_bits(&self) -> u32 {
        self.fp_bits + 8
    }

    #[inline(always)]
    fn bucket_off(&self, j: usize, b: u32) -> usize {
        (j * self.buckets as usize + b as usize) * self.bucket_bytes
    }

    /// Entry `i` of the bucket at byte `off`: `(fp, port)`.
    #[inline(always)]
    fn entry(&self, off: usize, i: usize) -> (u64, u8) {
        let bit = i * self.entry_bits() as usize;
        let p = off + bit / 8;
        let mut w = [0u8; 8];
        w.copy_from_slice(&self.data[p..p + 8]);
        let v = u64::from_le_bytes(w) >> (bit % 8);
        let fp = v & ((1u64 << self.fp_bits) - 1);
        (fp, (v >> self.fp_bits) as u8)
    }

    fn set_entry(&mut self, off: usize, i: usize, fp: u64, port: u8) {
        let eb = self.entry_bits() as usize;
        let bit = i * eb;
        let p = off + bit / 8;
        let sh = bit % 8;
        let mut w = [0u8; 8];
        w.copy_from_slice(&self.data[p..p + 8]);
        let mut v = u64::from_le_bytes(w);
        let mask = ((1u64 << eb) - 1) << sh;
        v = (v & !mask) | (((fp | (port as u64) << self.fp_bits) << sh) & mask);
        self.data[p..p + 8].copy_from_slice(&v.to_le_bytes());
    }

    fn used(&self, off: usize) -> usize {
        (0..E).take_while(|&i| self.entry(off, i).0 != 0).count()
    }

    /// First entry with fingerprint `fp` among the candidates, in subtable
    /// then entry order: `(subtable, entry, port)`.
    #[inline(always)]
    fn first_match(&self, h: &Hashed) -> Option<(usize, usize, u8)> {
        for j in 0..D {
            let off = self.bucket_off(j, h.idx[j]);
            for i in 0..E {
                let (fp, port) = self.entry(off, i);
                if fp == h.fp {
                    return Some((j, i, port));
                }
                if fp == 0 {
                    break;
                }
            }
        }
        None
    }

    /// Build from `(name, port)` pairs (a later duplicate wins).
    pub fn build<K, I>(names: I, cfg: FhtConfig) -> Result<Fht, FibError>
    where
        K: AsRef<[u8]>,
        I: IntoIterator<Item = (K, u8)>,
        I::IntoIter: Clone,
    {
        cfg.validate()?;
        let it = names.into_iter();
        let n = it.clone().count();
        let buckets = ((n as f64 / cfg.load / (D * E) as f64).ceil() as u64).max(1);
        if buckets >= 1 << 27 {
            return Err(FibError::Config(format!(
                "{n} names need {buckets} buckets per subtable; at most 2^27 are supported"
            )));
        }
        let buckets = buckets as u32;
        let bucket_bytes = (cfg.fp_bits + 8) as usize;
        let mut t = Fht {
            fp_bits: cfg.fp_bits,
            seed: cfg.seed,
            buckets,
            bucket_bytes,
            data: vec![0u8; D * buckets as usize * bucket_bytes + 8],
            ct: HashMap::new(),
            stats: FhtStats {
                names: n,
                ..Default::default()
            },
        };
        // Placement per name: subtable:2 | entry:3 | bucket:27, or IN_CT.
        const IN_CT: u32 = u32::MAX;
        let mut place = Vec::with_capacity(n);
        for (name, port) in it.clone() {
            let name = name.as_ref();
            let h = t.hash(name);
            if t.first_match(&h).is_some() {
                t.ct.insert(name.into(), port);
                t.stats.ct_collided += 1;
                place.push(IN_CT);
                continue;
            }
            // d-left: least loaded candidate, ties to the left.
            let mut best: Option<(usize, usize)> = None;
            for j in 0..D {
                let u = t.used(t.bucket_off(j, h.idx[j]));
                if u < E && best.is_none_or(|(_, bu)| u < bu) {
                    best = Some((j, u));
                }
            }
            match best {
                Some((j, i)) => {
                    let off = t.bucket_off(j, h.idx[j]);
                    t.set_entry(off, i, h.fp, port);
                    place.push((j as u32) << 30 | (i as u32) << 27 | h.idx[j]);
                }
                None => {
                    t.ct.insert(name.into(), port);
                    t.stats.ct_overflow += 1;
                    place.push(IN_CT);
                }
            }
        }
        // A name placed earlier can be shadowed by a later entry with its
        // fingerprint in one of its buckets: move such names to the CT.
        // Removing an entry never shadows anyone, so one pass suffices.
        for ((name, port), &pl) in it.zip(&place) {
            if pl == IN_CT {
                continue;
            }
            let name = name.as_ref();
            let h = t.hash(name);
            let (j, i) = ((pl >> 30) as usize, (pl >> 27 & 7) as usize);
            match t.first_match(&h) {
                Some((mj, mi, _)) if (mj, mi) == (j, i) => {}
                _ => {
                    // Remove our entry, keeping the bucket's entries packed.
                    let off = t.bucket_off(j, h.idx[j]);
                    let used = t.used(off);
                    for k in i..used - 1 {
                        let (f, p) = t.entry(off, k + 1);
                        t.set_entry(off, k, f, p);
                    }
                    t.set_entry(off, used - 1, 0, 0);
                    t.ct.insert(name.into(), port);
                    t.stats.ct_shadowed += 1;
                }
            }
        }
        t.stats.table_bytes = t.data.len() - 8;
        let ct_keys: usize = t.ct.keys().map(|k| k.len()).sum();
        t.stats.ct_bytes = ct_keys + (t.ct.len() * 16 * 4).div_ceil(3);
        Ok(t)
    }

    /// The port of `name`: exact for names of the built set; for others a
    /// speculative port or `None`.
    #[inline]
    pub fn lookup(&self, name: &[u8]) -> Option<u8> {
        if !self.ct.is_empty() {
            if let Some(&p) = self.ct.get(name) {
                return Some(p);
            }
        }
        self.first_match(&self.hash(name)).map(|(_, _, p)| p)
    }

    /// Like [`Self::lookup`] but skipping the collision table (the
    /// dissertation's "w/o CT", as when the CT sits in on-chip SRAM).
    #[inline]
    pub fn lookup_table_only(&self, name: &[u8]) -> Option<u8> {
        self.first_match(&self.hash(name)).map(|(_, _, p)| p)
    }

    /// Build statistics and memory.
    pub fn stats(&self) -> &FhtStats {
        &self.stats
    }

    /// Names in the collision table.
    pub fn ct_len(&self) -> usize {
        self.ct.len()
    }
}

#[inline(always)]
fn hash_with(name: &[u8], seed: u64, fp_bits: u32, buckets: u32) -> Hashed {
    let h = nexthop_hash::hash128(name, seed);
    let idx = [
        nexthop_hash::reduce(h.0 as u32, buckets),
        nexthop_hash::reduce((h.0 >> 32) as u32, buckets),
        nexthop_hash::reduce((h.0 >> 64) as u32, buckets),
        nexthop_hash::reduce((h.0 >> 96) as u32, buckets),
    ];
    let f = nexthop_hash::hash64(name, seed ^ 0x9E37_79B9_7F4A_7C15) >> (64 - fp_bits);
    Hashed { idx, fp: f.max(1) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_entries_round_trip_at_every_width() {
        for w in 8..=32 {
            let names: Vec<Vec<u8>> = (0..500u32).map(|i| format!("n{i}").into_bytes()).collect();
            let cfg = FhtConfig {
                fp_bits: w,
                ..FhtConfig::default()
            };
            let t = Fht::build(
                names.iter().enumerate().map(|(i, n)| (&n[..], i as u8)),
                cfg,
            )
            .unwrap();
            for (i, n) in names.iter().enumerate() {
                assert_eq!(t.lookup(n), Some(i as u8), "w = {w}");
            }
        }
    }

    #[test]
    fn rejects_bad_config() {
        let none: Vec<(&[u8], u8)> = Vec::new();
        assert!(Fht::build(
            none.clone(),
            FhtConfig {
                fp_bits: 7,
                ..FhtConfig::default()
            }
        )
        .is_err());
        assert!(Fht::build(
            none,
            FhtConfig {
                load: 0.0,
                ..FhtConfig::default()
            }
        )
        .is_err());
    }
}
