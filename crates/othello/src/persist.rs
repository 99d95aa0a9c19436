//! Saving and loading the control state of an [`Othello`](crate::Othello).
//!
//! The control state holds what a control plane needs to continue exactly
//! where it stopped: the configuration, seed-sequence position, sizes, every
//! key with its slot words, which keys are stashed, and both slot arrays of
//! every column. Loading re-derives the graph by hashing the keys and checks
//! that it is acyclic and that every key's constraint holds, so a damaged or
//! forged file is refused rather than producing wrong lookups.
//!
//! ```text
//! magic "NHOTHCTL" version:u32(=1)
//! value_bits:u8 check_bits:u8 sizing:u8 0:u8 columns:u32 stash_capacity:u32
//! config_seed:u64 seed_state:u64 generation:u64 seed:u64 ma:u32 mb:u32
//! capacity:u64 len:u64 counters:4*u64
//! len * ( key_len:varint key_bytes stashed:u8 words:columns*u64 )
//! (ma + mb) * columns * u64          ; slot words, vertex-major
//! checksum:u64                        ; XXH3-64 (seed 0) of all bytes before
//! ```

use std::net::{Ipv4Addr, Ipv6Addr};

use nexthop_hash::KeyBytes;

use crate::config::{Config, Sizing};
use crate::error::FormatError;
use nexthop_wire::cursor::{put_varint, Reader};

/// A key that can be written to and read back from a control-state file.
pub trait StoredKey: KeyBytes + Sized {
    /// Rebuild the key from the bytes [`KeyBytes::with_bytes`] gave.
    fn from_stored(bytes: &[u8]) -> Option<Self>;
}

macro_rules! stored_int {
    ($($t:ty),*) => {$(
        impl StoredKey for $t {
            fn from_stored(b: &[u8]) -> Option<Self> {
                Some(<$t>::from_le_bytes(b.try_into().ok()?))
            }
        }
    )*};
}
stored_int!(u16, u32, u64, u128);

impl<const N: usize> StoredKey for [u8; N] {
    fn from_stored(b: &[u8]) -> Option<Self> {
        b.try_into().ok()
    }
}

impl StoredKey for Vec<u8> {
    fn from_stored(b: &[u8]) -> Option<Self> {
        Some(b.to_vec())
    }
}

impl StoredKey for String {
    fn from_stored(b: &[u8]) -> Option<Self> {
        String::from_utf8(b.to_vec()).ok()
    }
}

impl StoredKey for Ipv4Addr {
    fn from_stored(b: &[u8]) -> Option<Self> {
        <[u8; 4]>::try_from(b).ok().map(Ipv4Addr::from)
    }
}

impl StoredKey for Ipv6Addr {
    fn from_stored(b: &[u8]) -> Option<Self> {
        <[u8; 16]>::try_from(b).ok().map(Ipv6Addr::from)
    }
}

pub(crate) const MAGIC: &[u8; 8] = b"NHOTHCTL";
pub(crate) const VERSION: u32 = 1;

/// The fixed-size part of a control-state file (everything but the key
/// count, the keys and the slot words).
pub(crate) struct Header {
    pub cfg: Config,
    pub seed_state: u64,
    pub generation: u64,
    pub seed: u64,
    pub ma: u32,
    pub mb: u32,
    pub capacity: usize,
    pub counters: [u64; 4],
}

/// Everything in a control-state file, decoded and range-checked.
pub(crate) struct Saved<K> {
    pub head: Header,
    /// (key, stashed, words)
    pub keys: Vec<(K, bool, Vec<u64>)>,
    pub arr: Vec<u64>,
}

/// Write the header, with `len` keys to follow.
/// Bytes [`write_header`] writes.
pub(crate) const HEADER_BYTES: usize = 8 + 4 + 4 + 4 + 4 + 4 * 8 + 4 + 4 + 8 + 8 + 4 * 8;

/// Bytes `put_varint` writes for `v`.
pub(crate) fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

pub(crate) fn write_header(out: &mut Vec<u8>, h: &Header, len: usize) {
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.push(h.cfg.value_bits);
    out.push(h.cfg.check_bits);
    out.push(h.cfg.sizing.code());
    out.push(0);
    out.extend_from_slice(&(h.cfg.columns as u32).to_le_bytes());
    out.extend_from_slice(&(h.cfg.stash_capacity as u32).to_le_bytes());
    for v in [h.cfg.seed, h.seed_state, h.generation, h.seed] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&h.ma.to_le_bytes());
    out.extend_from_slice(&h.mb.to_le_bytes());
    out.extend_from_slice(&(h.capacity as u64).to_le_bytes());
    out.extend_from_slice(&(len as u64).to_le_bytes());
    for c in h.counters {
        out.extend_from_slice(&c.to_le_bytes());
    }
}

pub(crate) fn write_key<K: KeyBytes>(out: &mut Vec<u8>, key: &K, stashed: bool, words: &[u64]) {
    key.with_bytes(|b| {
        put_varint(out, b.len() as u64);
        out.extend_from_slice(b);
    });
    out.push(stashed as u8);
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
}

pub(crate) fn finish(out: &mut Vec<u8>) {
    let sum = nexthop_hash::hash64(out, 0);
    out.extend_from_slice(&sum.to_le_bytes());
}

pub(crate) fn read<K: StoredKey>(bytes: &[u8]) -> Result<Saved<K>, FormatError> {
    if bytes.len() < 8 + 8 {
        return Err(FormatError::Truncated {
            needed: 16,
            got: bytes.len(),
        });
    }
    if &bytes[..8] != MAGIC {
        return Err(FormatError::BadMagic("Othello control state"));
    }
    let (body, sum) = bytes.split_at(bytes.len() - 8);
    let mut r = Reader::new(body);
    r.take(8)?;
    let version = r.u32()?;
    if version != VERSION {
        return Err(FormatError::Version {
            got: version,
            supported: VERSION,
        });
    }
    let mut s = [0u8; 8];
    s.copy_from_slice(sum);
    if nexthop_hash::hash64(body, 0) != u64::from_le_bytes(s) {
        return Err(FormatError::Checksum("control state"));
    }
    let value_bits = r.u8()?;
    let check_bits = r.u8()?;
    let sizing = Sizing::from_code(r.u8()?).ok_or(FormatError::Malformed("sizing code"))?;
    r.u8()?;
    let columns = r.u32()? as usize;
    let stash_capacity = r.u32()? as usize;
    let cfg = Config {
        value_bits,
        check_bits,
        sizing,
        columns,
        seed: r.u64()?,
        stash_capacity,
    };
    cfg.validate()
        .map_err(|_| FormatError::Malformed("configuration out of range"))?;
    let seed_state = r.u64()?;
    let generation = r.u64()?;
    let seed = r.u64()?;
    let ma = r.u32()?;
    let mb = r.u32()?;
    let capacity = r.u64()? as usize;
    let len = r.u64()? as usize;
    let mut counters = [0u64; 4];
    for c in &mut counters {
        *c = r.u64()?;
    }
    if ma == 0 || mb == 0 || ma as u64 + mb as u64 > u32::MAX as u64 {
        return Err(FormatError::Malformed("array sizes"));
    }
    // Every key takes at least 2 + 8*columns bytes: bound allocations by the input.
    if len > r.remaining() / (2 + 8 * columns) {
        return Err(FormatError::Malformed("key count larger than the data"));
    }
    let mut keys = Vec::with_capacity(len);
    for _ in 0..len {
        let kl = r.varint()?;
        let kl = r.count(kl, 1)?;
        let k = K::from_stored(r.take(kl)?).ok_or(FormatError::Malformed(
            "key bytes of the wrong form for the key type",
        ))?;
        let stashed = match r.u8()? {
            0 => false,
            1 => true,
            _ => return Err(FormatError::Malformed("stash flag")),
        };
        let mut words = Vec::with_capacity(columns);
        for _ in 0..columns {
            words.push(r.u64()?);
        }
        keys.push((k, stashed, words));
    }
    let nv = (ma as usize + mb as usize) * columns;
    if r.remaining() != nv * 8 {
        return Err(if r.remaining() < nv * 8 {
            FormatError::Truncated {
                needed: nv * 8,
                got: r.remaining(),
            }
        } else {
            FormatError::TrailingData(r.remaining() - nv * 8)
        });
    }
    let mut arr = Vec::with_capacity(nv);
    for _ in 0..nv {
        arr.push(r.u64()?);
    }
    Ok(Saved {
        head: Header {
            cfg,
            seed_state,
            generation,
            seed,
            ma,
            mb,
            capacity,
            counters,
        },
        keys,
        arr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_len_is_what_put_varint_writes() {
        for v in [0, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(varint_len(v), out.len(), "{v}");
        }
    }
}
