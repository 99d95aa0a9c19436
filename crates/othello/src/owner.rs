//! The bit-packed owner map of a cluster ([`cluster`](crate::cluster)):
//! an Othello with `l = ceil(log2 N)` value bits and no check bits whose
//! slots are stored at `l` bits each instead of a byte each.
//!
//! A byte-per-slot owner map costs 8 bits per slot where a 4-node cluster
//! needs 2, which made a cluster node larger than one node holding
//! everything. Packed, a lookup is still two reads: slot `i` of array A
//! is the `l`-bit field at bit `i * l`, read with one little-endian 16-bit
//! load at byte `i * l / 8` (an `l <= 8` bit field starting at bit
//! `0..=7` of that byte fits in 16 bits), and the value is the two fields
//! XORed, as in [`Query`](crate::Query). The stash (keys whose edge closed
//! a cycle, usually none) is consulted first, only when its filter bit is
//! set. The map is read-only: it is rebuilt, not updated in place.
//!
//! # File format (`owner.map`, version 1)
//!
//! ```text
//! offset size field (integers little-endian)
//!      0    8 magic "NHOWNMAP"
//!      8    4 format version (1)
//!     12    1 value bits l (1..=8)
//!     13    1 sizing (0 = pow2, 1 = tight)
//!     14    2 reserved, zero
//!     16    8 generation
//!     24    8 seed
//!     32    4 ma              36 4 mb
//!     40    4 stash entries   44 4 reserved, zero
//!     48      A: ceil(ma * l / 8) bytes, field i at bit i * l
//!             B: ceil(mb * l / 8) bytes
//!             stash: entries of fp:u128 value:u64, sorted by fp
//!    end-8    8 checksum: XXH3-64 (seed 0) of every byte before it
//! ```
//!
//! Loading checks the magic, the version, the exact length, the checksum,
//! the widths and that every stash value fits in `l` bits, so a truncated,
//! corrupted or foreign file is refused with a [`FormatError`].

use std::path::Path;

use nexthop_hash::{Hash128, KeyBytes};
use nexthop_mem::prefetch;
use nexthop_wire::cursor::Reader;

use crate::config::{mask, Sizing, MAX_STASH};
use crate::error::FormatError;
use crate::query::{stash_bit, QueryMeta, BATCH_GROUP};
use crate::snapshot;

/// The owner map file's magic.
pub const OWNER_MAGIC: &[u8; 8] = b"NHOWNMAP";
/// The owner map file version this build reads and writes.
pub const OWNER_VERSION: u32 = 1;
/// The most value bits a packed owner map holds (256 nodes).
pub const MAX_OWNER_BITS: u8 = 8;

const HEADER_LEN: usize = 48;
const STASH_ENTRY: usize = 24;
const CHECKSUM_LEN: usize = 8;

/// `count` fields of `bits` bits, packed.
fn packed_len(count: usize, bits: u8) -> usize {
    (count * usize::from(bits)).div_ceil(8)
}

/// A packed array of `l`-bit fields, one byte of padding at the end so the
/// 16-bit read of the last field stays inside.
#[derive(Clone, PartialEq, Eq)]
struct Fields {
    bytes: Vec<u8>,
}

impl Fields {
    fn pack(count: usize, bits: u8, field: impl Fn(usize) -> u64) -> Fields {
        let mut bytes = vec![0u8; packed_len(count, bits) + 1];
        for i in 0..count {
            let p = i * usize::from(bits);
            let v = (field(i) & mask(u32::from(bits))) as u16;
            let w = v << (p & 7);
            bytes[p >> 3] |= w as u8;
            bytes[(p >> 3) + 1] |= (w >> 8) as u8;
        }
        Fields { bytes }
    }

    /// The packed bytes without the padding.
    fn stored(&self) -> &[u8] {
        &self.bytes[..self.bytes.len() - 1]
    }

    #[inline(always)]
    fn get(&self, i: usize, bits: u8, m: u16) -> u16 {
        let p = i * usize::from(bits);
        let b = &self.bytes[p >> 3..(p >> 3) + 2];
        (u16::from_le_bytes([b[0], b[1]]) >> (p & 7)) & m
    }

    #[inline(always)]
    fn prefetch(&self, i: usize, bits: u8) {
        prefetch(
            self.bytes
                .as_ptr()
                .wrapping_add((i * usize::from(bits)) >> 3),
        );
    }
}

/// A read-only owner map with `l`-bit packed slots (see the module docs).
#[derive(Clone, PartialEq, Eq)]
pub struct PackedOwnerMap {
    meta: QueryMeta,
    a: Fields,
    b: Fields,
    stash: Vec<(u128, u64)>,
    stash_filter: u64,
}

impl std::fmt::Debug for PackedOwnerMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedOwnerMap")
            .field("meta", &self.meta)
            .field("stash_len", &self.stash.len())
            .finish_non_exhaustive()
    }
}

impl PackedOwnerMap {
    /// Pack the slots of an Othello snapshot (the byte-per-slot owner map
    /// of a cluster made before the packed format, or a fresh build's).
    ///
    /// # Errors
    /// A snapshot [`FormatError`], or [`FormatError::Malformed`] when the
    /// snapshot has check bits or more than [`MAX_OWNER_BITS`] value bits.
    pub fn from_snapshot(bytes: &[u8]) -> Result<PackedOwnerMap, FormatError> {
        let lay = snapshot::parse(bytes)?;
        let meta = lay.meta;
        if meta.check_bits != 0 || meta.value_bits == 0 || meta.value_bits > MAX_OWNER_BITS {
            return Err(FormatError::Malformed(
                "an owner map has no check bits and 1 to 8 value bits",
            ));
        }
        let l = meta.value_bits;
        let sb = lay.slot_bytes;
        let a = Fields::pack(meta.ma as usize, l, |i| {
            snapshot::slot(bytes, lay.a_off, sb, i)
        });
        let b = Fields::pack(meta.mb as usize, l, |j| {
            snapshot::slot(bytes, lay.b_off, sb, j)
        });
        let stash: Vec<(u128, u64)> = snapshot::stash_entries(bytes, &lay).collect();
        Ok(Self::from_parts(meta, a, b, stash))
    }

    fn from_parts(meta: QueryMeta, a: Fields, b: Fields, mut stash: Vec<(u128, u64)>) -> Self {
        stash.sort_unstable();
        let stash_filter = stash.iter().fold(0, |f, e| f | stash_bit(e.0));
        PackedOwnerMap {
            meta,
            a,
            b,
            stash,
            stash_filter,
        }
    }

    /// Sizes, seed, value bits (`check_bits` is 0).
    pub fn meta(&self) -> &QueryMeta {
        &self.meta
    }

    /// `l`: bits per slot.
    pub fn value_bits(&self) -> u8 {
        self.meta.value_bits
    }

    /// Bytes held: both packed arrays and the stash.
    pub fn memory_bytes(&self) -> usize {
        self.a.bytes.len() + self.b.bytes.len() + self.stash.len() * STASH_ENTRY
    }

    #[inline(always)]
    fn value_of(&self, h: Hash128) -> u64 {
        if self.stash_filter & stash_bit(h.0) != 0 {
            if let Some(&(_, v)) = self.stash.iter().find(|e| e.0 == h.0) {
                return v;
            }
        }
        let (i, j) = self.meta.slots(h);
        let l = self.meta.value_bits;
        let m = mask(u32::from(l)) as u16;
        u64::from(self.a.get(i, l, m) ^ self.b.get(j, l, m))
    }

    /// The value (the owner's id) of `key`. Every key gets one: a name
    /// the map was not built with gets an arbitrary id below `2^l`.
    #[inline]
    pub fn lookup<K: KeyBytes + ?Sized>(&self, key: &K) -> u64 {
        self.value_of(key.hash128(self.meta.seed))
    }

    /// Look up many keys; `out[i]` gets the value of `keys[i]`. Each group
    /// of [`BATCH_GROUP`] keys is hashed and its fields prefetched, then
    /// read. Returns `keys.len()` (every lookup hits).
    ///
    /// # Panics
    /// If `out` is shorter than `keys`.
    pub fn lookup_batch<K: KeyBytes>(&self, keys: &[K], out: &mut [u64]) -> usize {
        assert!(out.len() >= keys.len(), "output shorter than keys");
        let l = self.meta.value_bits;
        let mut hashes = [Hash128(0); BATCH_GROUP];
        for (group, outs) in keys.chunks(BATCH_GROUP).zip(out.chunks_mut(BATCH_GROUP)) {
            for (h, k) in hashes.iter_mut().zip(group) {
                *h = k.hash128(self.meta.seed);
                let (i, j) = self.meta.slots(*h);
                self.a.prefetch(i, l);
                self.b.prefetch(j, l);
            }
            for (o, h) in outs.iter_mut().zip(&hashes[..group.len()]) {
                *o = self.value_of(*h);
            }
        }
        keys.len()
    }

    /// The owner map file (see the module docs).
    pub fn to_bytes(&self) -> Vec<u8> {
        let (a, b) = (self.a.stored(), self.b.stored());
        let total = HEADER_LEN + a.len() + b.len() + self.stash.len() * STASH_ENTRY + CHECKSUM_LEN;
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(OWNER_MAGIC);
        out.extend_from_slice(&OWNER_VERSION.to_le_bytes());
        out.push(self.meta.value_bits);
        out.push(self.meta.sizing.code());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.meta.generation.to_le_bytes());
        out.extend_from_slice(&self.meta.seed.to_le_bytes());
        out.extend_from_slice(&self.meta.ma.to_le_bytes());
        out.extend_from_slice(&self.meta.mb.to_le_bytes());
        out.extend_from_slice(&(self.stash.len() as u32).to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(a);
        out.extend_from_slice(b);
        for (fp, v) in &self.stash {
            out.extend_from_slice(&fp.to_le_bytes());
            out.extend_from_slice(&v.to_le_bytes());
        }
        let sum = nexthop_hash::hash64(&out, 0);
        out.extend_from_slice(&sum.to_le_bytes());
        debug_assert_eq!(out.len(), total);
        out
    }

    /// Load an owner map file, checking everything (see the module docs).
    ///
    /// # Errors
    /// [`FormatError::BadMagic`], [`FormatError::Version`],
    /// [`FormatError::Truncated`], [`FormatError::TrailingData`],
    /// [`FormatError::Checksum`] or [`FormatError::Malformed`].
    pub fn from_bytes(bytes: &[u8]) -> Result<PackedOwnerMap, FormatError> {
        if bytes.len() >= 8 && &bytes[..8] != OWNER_MAGIC {
            return Err(FormatError::BadMagic("owner map"));
        }
        let mut r = Reader::new(bytes);
        r.skip(8)?;
        let version = r.u32()?;
        if version != OWNER_VERSION {
            return Err(FormatError::Version {
                got: version,
                supported: OWNER_VERSION,
            });
        }
        let l = r.u8()?;
        let sizing = Sizing::from_code(r.u8()?).ok_or(FormatError::Malformed("unknown sizing"))?;
        if r.u16()? != 0 {
            return Err(FormatError::Malformed("reserved header bytes are not zero"));
        }
        let generation = r.u64()?;
        let seed = r.u64()?;
        let (ma, mb) = (r.u32()?, r.u32()?);
        let stash_len = r.u32()? as usize;
        if r.u32()? != 0 {
            return Err(FormatError::Malformed("reserved header bytes are not zero"));
        }
        if l == 0 || l > MAX_OWNER_BITS {
            return Err(FormatError::Malformed(
                "owner map value bits must be 1 to 8",
            ));
        }
        if ma == 0 || mb == 0 {
            return Err(FormatError::Malformed("empty slot array"));
        }
        if stash_len > MAX_STASH {
            return Err(FormatError::Malformed(
                "stash longer than the most a build makes",
            ));
        }
        let (a_len, b_len) = (packed_len(ma as usize, l), packed_len(mb as usize, l));
        let total = HEADER_LEN + a_len + b_len + stash_len * STASH_ENTRY + CHECKSUM_LEN;
        if bytes.len() < total {
            return Err(FormatError::Truncated {
                needed: total,
                got: bytes.len(),
            });
        }
        if bytes.len() > total {
            return Err(FormatError::TrailingData(bytes.len() - total));
        }
        let (body, sum) = bytes.split_at(total - CHECKSUM_LEN);
        let mut s = [0u8; 8];
        s.copy_from_slice(sum);
        if nexthop_hash::hash64(body, 0) != u64::from_le_bytes(s) {
            return Err(FormatError::Checksum("owner map"));
        }
        let field_bytes = |raw: &[u8]| {
            let mut v = Vec::with_capacity(raw.len() + 1);
            v.extend_from_slice(raw);
            v.push(0);
            Fields { bytes: v }
        };
        let a = field_bytes(r.take(a_len)?);
        let b = field_bytes(r.take(b_len)?);
        let mut stash = Vec::with_capacity(stash_len);
        for _ in 0..stash_len {
            let fp = r.u128()?;
            let v = r.u64()?;
            if v > mask(u32::from(l)) {
                return Err(FormatError::Malformed(
                    "stash value wider than the value bits",
                ));
            }
            stash.push((fp, v));
        }
        let meta = QueryMeta {
            generation,
            seed,
            ma,
            mb,
            value_bits: l,
            check_bits: 0,
            sizing,
        };
        Ok(Self::from_parts(meta, a, b, stash))
    }

    /// Read and check an owner map file.
    ///
    /// # Errors
    /// [`FormatError::Io`] when the file cannot be read, else as
    /// [`Self::from_bytes`].
    pub fn read(path: &Path) -> Result<PackedOwnerMap, FormatError> {
        let bytes =
            std::fs::read(path).map_err(|e| FormatError::Io(format!("{}: {e}", path.display())))?;
        Self::from_bytes(&bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{node_of, owner_value_bits};
    use crate::config::Config;
    use crate::fib::{Action, ConciseFib};
    use crate::view::QueryView;

    /// An owner map of `names` names over `nodes` nodes as the cluster
    /// builds it: its byte-per-slot snapshot and the names.
    fn owner_snapshot(names: u64, nodes: usize) -> (Vec<u8>, Vec<u64>) {
        let keys: Vec<u64> = (0..names)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect();
        let routes: Vec<(usize, u64, Action)> = keys
            .iter()
            .enumerate()
            .map(|(i, &k)| (i + 1, k, Action::Port(node_of(&k, nodes) as u16)))
            .collect();
        let cfg = Config {
            value_bits: owner_value_bits(nodes),
            check_bits: 0,
            ..Config::default()
        };
        let fib = ConciseFib::build(cfg, &routes).unwrap();
        (fib.othello().snapshot(0), keys)
    }

    /// A copy in 8-byte aligned memory (what a mapping gives).
    fn aligned(bytes: &[u8]) -> Vec<u64> {
        let mut v = vec![0u64; bytes.len().div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut v)[..bytes.len()].copy_from_slice(bytes);
        v
    }

    #[test]
    fn packed_and_byte_slots_give_the_same_owner_for_every_name() {
        for nodes in [2usize, 3, 4, 5, 8, 16, 256] {
            let (snap, keys) = owner_snapshot(3000, nodes);
            let words = aligned(&snap);
            let view = QueryView::new(&bytemuck::cast_slice(&words)[..snap.len()]).unwrap();
            let packed = PackedOwnerMap::from_snapshot(&snap).unwrap();
            assert_eq!(packed.value_bits(), owner_value_bits(nodes));
            let mut got = vec![0u64; keys.len()];
            assert_eq!(packed.lookup_batch(&keys, &mut got), keys.len());
            for (k, g) in keys.iter().zip(&got) {
                let want = view.lookup(k).unwrap();
                assert_eq!(packed.lookup(k), want, "nodes {nodes} key {k}");
                assert_eq!(*g, want, "batch, nodes {nodes} key {k}");
            }
            let back = PackedOwnerMap::from_bytes(&packed.to_bytes()).unwrap();
            assert_eq!(back, packed);
            // Every slot of both arrays is packed and read back.
            let m = packed.meta;
            let lay = snapshot::parse(&snap).unwrap();
            let ml = mask(u32::from(m.value_bits)) as u16;
            for i in 0..m.ma as usize {
                let want = snapshot::slot(&snap, lay.a_off, lay.slot_bytes, i);
                assert_eq!(u64::from(packed.a.get(i, m.value_bits, ml)), want);
            }
            for j in 0..m.mb as usize {
                let want = snapshot::slot(&snap, lay.b_off, lay.slot_bytes, j);
                assert_eq!(u64::from(packed.b.get(j, m.value_bits, ml)), want);
            }
        }
    }

    #[test]
    fn packing_shrinks_the_slots_to_the_value_bits() {
        let (snap, _) = owner_snapshot(20_000, 4);
        let packed = PackedOwnerMap::from_snapshot(&snap).unwrap();
        let slots = (packed.meta.ma + packed.meta.mb) as usize;
        assert!(packed.to_bytes().len() <= slots / 4 + 128);
        assert!(snap.len() >= slots);
    }

    #[test]
    fn a_stash_entry_wins_over_the_arrays() {
        let (snap, keys) = owner_snapshot(500, 4);
        let mut packed = PackedOwnerMap::from_snapshot(&snap).unwrap();
        let h = keys[7].hash128(packed.meta.seed);
        let other = (packed.lookup(&keys[7]) + 1) & 3;
        packed = PackedOwnerMap::from_parts(packed.meta, packed.a, packed.b, vec![(h.0, other)]);
        assert_eq!(packed.lookup(&keys[7]), other);
        let back = PackedOwnerMap::from_bytes(&packed.to_bytes()).unwrap();
        assert_eq!(back.lookup(&keys[7]), other);
    }

    #[test]
    fn corrupt_truncated_and_foreign_files_are_refused() {
        let (snap, _) = owner_snapshot(300, 5);
        let good = PackedOwnerMap::from_snapshot(&snap).unwrap().to_bytes();
        for n in 0..good.len() {
            assert!(
                PackedOwnerMap::from_bytes(&good[..n]).is_err(),
                "prefix {n}"
            );
        }
        let mut long = good.clone();
        long.push(0);
        assert_eq!(
            PackedOwnerMap::from_bytes(&long),
            Err(FormatError::TrailingData(1))
        );
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            assert!(
                PackedOwnerMap::from_bytes(&bad).is_err(),
                "byte {at} flipped"
            );
        }
        let mut v2 = good.clone();
        v2[8] = 2;
        assert_eq!(
            PackedOwnerMap::from_bytes(&v2),
            Err(FormatError::Version {
                got: 2,
                supported: OWNER_VERSION
            })
        );
        assert_eq!(
            PackedOwnerMap::from_bytes(&snap),
            Err(FormatError::BadMagic("owner map"))
        );
        assert!(matches!(
            PackedOwnerMap::from_snapshot(&good),
            Err(FormatError::BadMagic(_))
        ));
    }

    #[test]
    fn a_snapshot_with_check_bits_or_wide_values_is_not_an_owner_map() {
        let routes: Vec<(usize, u64, Action)> = (0..100u64)
            .map(|i| (i as usize + 1, i, Action::Port(1)))
            .collect();
        for (value_bits, check_bits) in [(4, 4), (12, 0)] {
            let cfg = Config {
                value_bits,
                check_bits,
                ..Config::default()
            };
            let fib = ConciseFib::build(cfg, &routes).unwrap();
            assert!(matches!(
                PackedOwnerMap::from_snapshot(&fib.othello().snapshot(0)),
                Err(FormatError::Malformed(_))
            ));
        }
    }
}
