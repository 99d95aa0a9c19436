//! The FIB file: the lookup structure, versioned, checksummed, little-endian.
//!
//! ```text
//! magic "NHNDNFIB" | version:u32 (=3) | strategy:u8 | bucket_fill:u8 | max_components:u16
//! k0:u64 | k1:u64 | default_nh:u32 | rules:u64
//! nh_sets:u32 | offsets:(nh_sets + 1) x u32 | hops:u32 | hops x (face:u32, cost:u32)
//! entry_words:u64 | entry_words x u64      ; the arena, compacted on write
//! per level 1..=max_components: home:u32 | keys:u64 | buckets:u64 | buckets x bucket
//! bucket = hdr:u64 | 9 x fingerprint:u16 | 9 x entry reference:u32   ; 62 bytes
//! checksum:u64   ; XXH3-64 (seed 0) of every byte before it
//! ```
//! [`decode`] checks the checksum first, then every length against the
//! buffer, then the structure a lookup relies on (slot references inside
//! the arena, role counts, next-hop ids, overflow chains acyclic), so a
//! lookup on a loaded FIB cannot index out of bounds or loop. Every array
//! it builds is bounded by the file's length and reserved with
//! `try_reserve`: a file too large for the memory left is
//! [`FormatError::OutOfMemory`] with the bytes needed, not an abort.
//!
//! Version 3 (buckets of 9 slots: 16-bit fingerprints and 32-bit entry
//! references) replaced version 2 (7 slots of `fingerprint:20 | ref:44`),
//! which replaced version 1 (entries with a role-levels word); an older
//! file is refused with [`FormatError::Version`]: rebuild it from its
//! routes file.

use nexthop_wire::cursor::{CursorError, Reader};
use thiserror::Error;

use crate::fib::{entry, role_index_table, Config, Fib, SearchTree, MAX_LEVELS, NO_ROLE};
use crate::hasher::{PrefixHasher, Strategy};
use crate::name::component_ends;
use crate::nexthop::{NextHop, NhTable, NH_NONE};
use crate::table::{Bucket, Table, SLOTS};

/// Bytes of a bucket in the file.
const BUCKET_BYTES: usize = 8 + SLOTS * 6;

const MAGIC: &[u8; 8] = b"NHNDNFIB";
const VERSION: u32 = 3;

/// Why a FIB file was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum FormatError {
    /// Not a FIB file of this kind.
    #[error("not an NDN FIB file (bad magic)")]
    BadMagic,
    /// A version this build does not read.
    #[error("unsupported NDN FIB file version {0} (this build reads {VERSION})")]
    Version(u32),
    /// The file ends early.
    #[error("truncated NDN FIB file: needed {needed} bytes, got {got}")]
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// The checksum does not match (corrupt file).
    #[error("NDN FIB file checksum mismatch (corrupt)")]
    Checksum,
    /// Bytes after the checksummed content.
    #[error("trailing data after the NDN FIB content")]
    TrailingData,
    /// A field is out of range or inconsistent.
    #[error("malformed NDN FIB file: {0}")]
    Malformed(&'static str),
    /// The structure the file describes does not fit in memory.
    #[error(
        "NDN FIB file does not fit in memory: its {what} needs {bytes} bytes, \
         which could not be allocated"
    )]
    OutOfMemory {
        /// The part being loaded (`entry arena`, `buckets` ...).
        what: &'static str,
        /// Bytes it needs.
        bytes: usize,
    },
}

/// An empty vector with room for `n` items, or [`FormatError::OutOfMemory`]
/// naming `what` and the bytes, instead of aborting the process.
fn try_vec<T>(n: usize, what: &'static str) -> Result<Vec<T>, FormatError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| FormatError::OutOfMemory {
            what,
            bytes: n.saturating_mul(std::mem::size_of::<T>()),
        })?;
    // Loaded tables are read at random as built ones are: huge pages when
    // large (advised before the first write).
    nexthop_mem::advise_huge(
        v.as_ptr() as usize,
        n.saturating_mul(std::mem::size_of::<T>()),
    );
    Ok(v)
}

/// Encode `fib` (with `rules`, the rule count kept for stats).
pub fn encode(fib: &Fib, rules: u64) -> Vec<u8> {
    let mut o = Vec::with_capacity(fib.bytes() + 256);
    o.extend_from_slice(MAGIC);
    o.extend_from_slice(&VERSION.to_le_bytes());
    o.push(fib.cfg.strategy.code());
    o.push(fib.cfg.bucket_fill as u8);
    o.extend_from_slice(&(fib.cfg.max_components as u16).to_le_bytes());
    o.extend_from_slice(&fib.cfg.key.0.to_le_bytes());
    o.extend_from_slice(&fib.cfg.key.1.to_le_bytes());
    o.extend_from_slice(&fib.default_nh.to_le_bytes());
    o.extend_from_slice(&rules.to_le_bytes());
    o.extend_from_slice(&(fib.nh.len() as u32).to_le_bytes());
    for x in &fib.nh.offsets {
        o.extend_from_slice(&x.to_le_bytes());
    }
    o.extend_from_slice(&(fib.nh.hops.len() as u32).to_le_bytes());
    for h in &fib.nh.hops {
        o.extend_from_slice(&h.face.to_le_bytes());
        o.extend_from_slice(&h.cost.to_le_bytes());
    }
    // Only live entries are written (freed ones are dropped), so slot
    // references are renumbered on the way out.
    let (olds, news, total) = fib.compaction_plan();
    o.extend_from_slice(&(total as u64).to_le_bytes());
    o.extend_from_slice(&0u64.to_le_bytes());
    for &e in &olds {
        for w in fib.e_words(e) {
            o.extend_from_slice(&w.to_le_bytes());
        }
    }
    for t in &fib.tables {
        o.extend_from_slice(&t.home.to_le_bytes());
        o.extend_from_slice(&(t.len as u64).to_le_bytes());
        o.extend_from_slice(&(t.buckets.len() as u64).to_le_bytes());
        for b in &t.buckets {
            o.extend_from_slice(&b.hdr.to_le_bytes());
            for fp in &b.fps {
                o.extend_from_slice(&fp.to_le_bytes());
            }
            for (i, &r) in b.refs.iter().enumerate() {
                let r = if b.occupied() >> i & 1 == 1 {
                    let e = r as u64;
                    olds.binary_search(&e).map_or(e, |j| news[j]) as u32
                } else {
                    r
                };
                o.extend_from_slice(&r.to_le_bytes());
            }
        }
    }
    let sum = nexthop_hash::hash64(&o, 0);
    o.extend_from_slice(&sum.to_le_bytes());
    o
}

impl From<CursorError> for FormatError {
    fn from(e: CursorError) -> Self {
        match e {
            CursorError::Truncated { needed, got } => FormatError::Truncated { needed, got },
            CursorError::TrailingData(_) => FormatError::TrailingData,
            CursorError::Malformed(what) => FormatError::Malformed(what),
            _ => FormatError::Malformed("unreadable field"),
        }
    }
}

/// Decode a FIB file: `(fib, rules)`.
pub fn decode(bytes: &[u8]) -> Result<(Fib, u64), FormatError> {
    if bytes.len() < 8 || &bytes[..8] != MAGIC {
        if bytes.len() < 8 && MAGIC.starts_with(bytes) {
            return Err(FormatError::Truncated {
                needed: 8,
                got: bytes.len(),
            });
        }
        return Err(FormatError::BadMagic);
    }
    let head_min = 8 + 4 + 4 + 16 + 4 + 8 + 8;
    if bytes.len() < head_min {
        return Err(FormatError::Truncated {
            needed: head_min,
            got: bytes.len(),
        });
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if version != VERSION {
        return Err(FormatError::Version(version));
    }
    let (body, sum) = bytes.split_at(bytes.len() - 8);
    let mut sb = [0u8; 8];
    sb.copy_from_slice(sum);
    if nexthop_hash::hash64(body, 0) != u64::from_le_bytes(sb) {
        return Err(FormatError::Checksum);
    }
    let mut c = Reader::new(body);
    c.skip(MAGIC.len() + 4)?;
    let strategy =
        Strategy::from_code(c.u8()?).ok_or(FormatError::Malformed("unknown strategy"))?;
    let bucket_fill = c.u8()? as u32;
    let max_components = c.u16()? as usize;
    let key = (c.u64()?, c.u64()?);
    let cfg = Config {
        max_components,
        strategy,
        key,
        bucket_fill,
    };
    if !(1..=MAX_LEVELS).contains(&max_components) || !(1..=SLOTS as u32).contains(&bucket_fill) {
        return Err(FormatError::Malformed("configuration out of range"));
    }
    let default_nh = c.u32()?;
    let rules = c.u64()?;
    let nsets = c.u32()? as u64;
    let n_off = c.count(nsets + 1, 4)?;
    let mut offsets = try_vec(n_off, "next-hop offsets")?;
    for _ in 0..n_off {
        offsets.push(c.u32()?);
    }
    let nhops = c.u32()? as u64;
    let nhops = c.count(nhops, 8)?;
    let mut hops = try_vec(nhops, "next hops")?;
    for _ in 0..nhops {
        hops.push(NextHop {
            face: c.u32()?,
            cost: c.u32()?,
        });
    }
    if offsets.first() != Some(&0)
        || offsets.windows(2).any(|w| w[0] > w[1])
        || offsets.last().copied() != Some(hops.len() as u32)
    {
        return Err(FormatError::Malformed("next-hop offsets"));
    }
    let nsets = nsets as u32;
    let nh_ok = |nh: u32| nh == NH_NONE || nh < nsets;
    if !nh_ok(default_nh) {
        return Err(FormatError::Malformed("default next-hop id"));
    }
    let nwords = c.u64()?;
    let nwords = c.count(nwords, 8)?;
    let mut entries = try_vec(nwords, "entry arena")?;
    for _ in 0..nwords {
        entries.push(c.u64()?);
    }
    let tree = SearchTree::new(max_components);
    let role_idx = role_index_table(&tree, max_components);
    let mut tables = try_vec(max_components, "tables")?;
    let mut checked = std::collections::HashSet::new();
    let mut ends = Vec::new();
    for level in 1..=max_components {
        let home = c.u32()?;
        let len = c.u64()?;
        let nb = c.u64()?;
        let nb = c.count(nb, BUCKET_BYTES)?;
        if home == 0 || home as usize > nb {
            return Err(FormatError::Malformed("table home bucket count"));
        }
        let mut buckets = try_vec(nb, "buckets")?;
        for _ in 0..nb {
            let mut b = Bucket {
                hdr: c.u64()?,
                ..Bucket::default()
            };
            for fp in &mut b.fps {
                *fp = c.u16()?;
            }
            for r in &mut b.refs {
                *r = c.u32()?;
            }
            buckets.push(b);
        }
        // Chains: every `next` in range, no bucket linked twice, no cycle.
        let mut linked = try_vec(nb, "overflow chain marks")?;
        linked.resize(nb, false);
        let mut occupied = 0u64;
        for b in &buckets {
            let n = b.next();
            if n != 0 {
                if n >= nb || n < home as usize || linked[n] {
                    return Err(FormatError::Malformed("overflow chain"));
                }
                linked[n] = true;
            }
            occupied += b.occupied().count_ones() as u64;
        }
        if occupied != len {
            return Err(FormatError::Malformed("table key count"));
        }
        // At most one entry check per occupied slot (`len`, bounded by the
        // buckets read).
        checked
            .try_reserve(len as usize)
            .map_err(|_| FormatError::OutOfMemory {
                what: "entry check set",
                bytes: (len as usize).saturating_mul(std::mem::size_of::<(u64, usize)>() + 1),
            })?;
        for (i, b) in buckets.iter().enumerate() {
            if i >= home as usize && !linked[i] && b.occupied() != 0 {
                return Err(FormatError::Malformed("unreachable overflow bucket"));
            }
        }
        // Since a bucket has at most one predecessor and home buckets have
        // none, every chain from a home bucket is a simple path.
        for b in &buckets {
            let mut occ = b.occupied();
            while occ != 0 {
                let s = occ.trailing_zeros() as usize;
                occ &= occ - 1;
                let e = b.refs[s] as u64;
                if checked.insert((e, level)) {
                    check_entry(&entries, e, level, &tree, &role_idx, nh_ok, &mut ends)?;
                }
            }
        }
        tables.push(Table::from_parts(buckets, home, len as usize));
    }
    c.finish()?;
    let fib = Fib {
        cfg,
        hasher: PrefixHasher::new(strategy, key.0, key.1),
        tree,
        tables,
        role_idx,
        entries,
        nh: NhTable::from_parts(offsets, hops),
        default_nh,
        // Level pulling is not stored: the main tree's markers are always
        // complete, so a loaded FIB searches from the root.
        pull: None,
    };
    Ok((fib, rules))
}

/// An entry that a level-`level` key references: inside the arena, its
/// role count is that of its component count's search path, which
/// includes `level`, with a valid value; its string holds exactly
/// `ncomp >= level` components of valid TLV.
fn check_entry(
    entries: &[u64],
    e: u64,
    level: usize,
    tree: &SearchTree,
    role_idx: &[u8],
    nh_ok: impl Fn(u32) -> bool,
    ends: &mut Vec<u32>,
) -> Result<(), FormatError> {
    let bad = FormatError::Malformed("entry reference");
    let e = usize::try_from(e).map_err(|_| bad.clone())?;
    if e == 0 || e >= entries.len() {
        return Err(bad);
    }
    let (len, nroles, ncomp) = entry::split(entries[e + entry::HDR]);
    if e + entry::words(len, nroles) > entries.len() {
        return Err(FormatError::Malformed("entry extent"));
    }
    let k = tree.left.len() - 1;
    if ncomp == 0 || ncomp > k || nroles != tree.path(ncomp).len() {
        return Err(FormatError::Malformed("entry role count"));
    }
    let i = role_idx[ncomp * (k + 1) + level.min(k)];
    if i == NO_ROLE || level > k {
        return Err(FormatError::Malformed("entry lacks the role of its key"));
    }
    let bytes: &[u8] = bytemuck::cast_slice(&entries[e..e + entry::words(len, nroles)]);
    let at = entry::ROLES_BYTE + 4 * i as usize;
    let mut vb = [0u8; 4];
    vb.copy_from_slice(&bytes[at..at + 4]);
    let v = u32::from_le_bytes(vb);
    if !nh_ok(v & 0xFF_FFFF) || (v >> 24) as usize > level {
        return Err(FormatError::Malformed("entry role value"));
    }
    let sb = entry::str_byte(nroles);
    component_ends(&bytes[sb..sb + len], ends)
        .map_err(|_| FormatError::Malformed("entry string"))?;
    if ends.len() != ncomp || ncomp < level {
        return Err(FormatError::Malformed("entry component count"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FibControl, NameBuf};

    fn sample() -> (Fib, Vec<u8>) {
        let mut ctl = FibControl::new(Config {
            max_components: 5,
            ..Config::default()
        })
        .unwrap();
        for (i, u) in [
            ["a"].as_slice(),
            &["a", "b", "c"],
            &["x", "y", "z", "w", "v"],
        ]
        .iter()
        .enumerate()
        {
            let n = NameBuf::from_components(u.iter()).unwrap();
            ctl.insert(
                &n,
                &[NextHop {
                    face: i as u32,
                    cost: 1,
                }],
            )
            .unwrap();
        }
        let bytes = encode(ctl.fib(), 3);
        (ctl.into_fib(), bytes)
    }

    #[test]
    fn round_trip_keeps_every_answer() {
        let (fib, bytes) = sample();
        let (back, rules) = decode(&bytes).unwrap();
        assert_eq!(rules, 3);
        for u in [
            ["a", "q"].as_slice(),
            &["a", "b", "c", "d"],
            &["x", "y", "z", "w", "v", "u"],
            &["x"],
        ] {
            let n = NameBuf::from_components(u.iter()).unwrap();
            assert_eq!(back.lookup(&n), fib.lookup(&n));
        }
    }

    #[test]
    fn older_versions_are_refused_with_the_version() {
        let (_, bytes) = sample();
        for v in [1u32, 2, 4] {
            let mut b = bytes.clone();
            b[8..12].copy_from_slice(&v.to_le_bytes());
            let e = decode(&b).unwrap_err();
            assert_eq!(e, FormatError::Version(v));
            assert!(e.to_string().contains("this build reads 3"), "{e}");
        }
    }

    #[test]
    fn every_truncation_and_bit_flip_is_rejected() {
        let (_, bytes) = sample();
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for i in (0..bytes.len()).step_by(7) {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(decode(&b).is_err(), "flip at {i}");
        }
        assert_eq!(
            decode(b"GIF89a...........................................").err(),
            Some(FormatError::BadMagic)
        );
    }
}
