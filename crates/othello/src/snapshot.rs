//! The data-plane snapshot file format.
//!
//! A snapshot holds exactly what a lookup reads: the seed, the array sizes,
//! the two slot arrays and the stash. All integers are little-endian; every
//! section starts on a 64-byte boundary so a page-aligned mapping of the file
//! can be read in place ([`QueryView`](crate::QueryView)).
//!
//! ```text
//! offset size field
//!      0    8 magic "NHOTHELO"
//!      8    4 format version (1)
//!     12    4 header length (128)
//!     16    8 generation (bumped when seeds or sizes change)
//!     24    8 seed
//!     32    4 ma              36 4 mb
//!     40    1 value bits l    41 1 check bits r
//!     42    1 slot bytes (1, 2, 4 or 8; the smallest holding l + r bits)
//!     43    1 sizing (0 = pow2, 1 = tight)
//!     44    4 stash entries
//!     48    8 offset of array A     56 8 offset of array B
//!     64    8 offset of the stash   72 8 total file length
//!     80    8 payload checksum: XXH3-64 (seed 0) of bytes 128..total
//!     88   32 reserved, zero
//!    120    8 header checksum: XXH3-64 (seed 0) of bytes 0..120
//!    128      A: ma slots of slot-bytes each, then zero padding to 64
//!             B: mb slots, then zero padding to 64
//!             stash: entries of fp_lo:u64 fp_hi:u64 word:u64, sorted by fp
//! ```
//!
//! Loading checks the magic, version, both checksums, every offset and
//! length against the file size, and that slot words fit in `l + r` bits, so
//! a truncated, corrupted or foreign file is refused with a [`FormatError`].

use crate::config::{slot_bytes_for, Sizing};
use crate::error::{try_buffer, AllocError, FormatError};
use crate::query::QueryMeta;
use nexthop_wire::cursor::Reader;

pub(crate) const MAGIC: &[u8; 8] = b"NHOTHELO";
pub(crate) const VERSION: u32 = 1;
pub(crate) const HEADER_LEN: usize = 128;
pub(crate) const STASH_ENTRY: usize = 24;

/// A parsed and validated snapshot header.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    pub meta: QueryMeta,
    pub slot_bytes: usize,
    pub stash_len: usize,
    pub a_off: usize,
    pub b_off: usize,
    pub stash_off: usize,
    pub total: usize,
}

fn align64(x: usize) -> usize {
    x.div_ceil(64) * 64
}

impl Layout {
    pub fn new(meta: QueryMeta, stash_len: usize) -> Layout {
        let slot_bytes = slot_bytes_for(meta.value_bits as u32 + meta.check_bits as u32) as usize;
        let a_off = HEADER_LEN;
        let b_off = align64(a_off + meta.ma as usize * slot_bytes);
        let stash_off = align64(b_off + meta.mb as usize * slot_bytes);
        let total = stash_off + stash_len * STASH_ENTRY;
        Layout {
            meta,
            slot_bytes,
            stash_len,
            a_off,
            b_off,
            stash_off,
            total,
        }
    }
}

/// Write a snapshot. `a(i)`, `b(j)` give slot words; `stash` the entries.
/// The buffer is reserved first: where it cannot be allocated the answer
/// is [`AllocError`], not an abort.
pub(crate) fn write(
    meta: QueryMeta,
    a: impl Fn(usize) -> u64,
    b: impl Fn(usize) -> u64,
    stash: &[(u128, u64)],
) -> Result<Vec<u8>, AllocError> {
    let lay = Layout::new(meta, stash.len());
    let mut out = try_buffer("snapshot", lay.total)?;
    out.resize(lay.total, 0);
    out[0..8].copy_from_slice(MAGIC);
    out[8..12].copy_from_slice(&VERSION.to_le_bytes());
    out[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
    out[16..24].copy_from_slice(&meta.generation.to_le_bytes());
    out[24..32].copy_from_slice(&meta.seed.to_le_bytes());
    out[32..36].copy_from_slice(&meta.ma.to_le_bytes());
    out[36..40].copy_from_slice(&meta.mb.to_le_bytes());
    out[40] = meta.value_bits;
    out[41] = meta.check_bits;
    out[42] = lay.slot_bytes as u8;
    out[43] = meta.sizing.code();
    out[44..48].copy_from_slice(&(stash.len() as u32).to_le_bytes());
    out[48..56].copy_from_slice(&(lay.a_off as u64).to_le_bytes());
    out[56..64].copy_from_slice(&(lay.b_off as u64).to_le_bytes());
    out[64..72].copy_from_slice(&(lay.stash_off as u64).to_le_bytes());
    out[72..80].copy_from_slice(&(lay.total as u64).to_le_bytes());
    let sb = lay.slot_bytes;
    for i in 0..meta.ma as usize {
        let at = lay.a_off + i * sb;
        out[at..at + sb].copy_from_slice(&a(i).to_le_bytes()[..sb]);
    }
    for j in 0..meta.mb as usize {
        let at = lay.b_off + j * sb;
        out[at..at + sb].copy_from_slice(&b(j).to_le_bytes()[..sb]);
    }
    let mut entries = stash.to_vec();
    entries.sort_unstable();
    for (k, (fp, word)) in entries.iter().enumerate() {
        let at = lay.stash_off + k * STASH_ENTRY;
        out[at..at + 16].copy_from_slice(&fp.to_le_bytes());
        out[at + 16..at + 24].copy_from_slice(&word.to_le_bytes());
    }
    let payload = nexthop_hash::hash64(&out[HEADER_LEN..], 0);
    out[80..88].copy_from_slice(&payload.to_le_bytes());
    let head = nexthop_hash::hash64(&out[..120], 0);
    out[120..128].copy_from_slice(&head.to_le_bytes());
    Ok(out)
}

/// Validate a snapshot and return its layout. Checks everything that the
/// loaders rely on, so they can then index without further checks.
pub(crate) fn parse(bytes: &[u8]) -> Result<Layout, FormatError> {
    if bytes.len() >= 8 && &bytes[..8] != MAGIC {
        return Err(FormatError::BadMagic("Othello snapshot"));
    }
    let header = bytes.get(..HEADER_LEN).ok_or(FormatError::Truncated {
        needed: HEADER_LEN,
        got: bytes.len(),
    })?;
    let mut h = Reader::new(header);
    h.skip(MAGIC.len())?;
    let version = h.u32()?;
    if version != VERSION {
        return Err(FormatError::Version {
            got: version,
            supported: VERSION,
        });
    }
    let header_len = h.u32()?;
    let generation = h.u64()?;
    let seed = h.u64()?;
    let ma = h.u32()?;
    let mb = h.u32()?;
    let [value_bits, check_bits, slot_bytes, sizing_code] = h.array()?;
    let stash_len = h.u32()? as usize;
    let offsets = [h.u64()?, h.u64()?, h.u64()?, h.u64()?];
    let payload_sum = h.u64()?;
    let reserved = h.take(32)?;
    let header_sum = h.u64()?;
    h.finish()?;
    if nexthop_hash::hash64(&header[..120], 0) != header_sum {
        return Err(FormatError::Checksum("snapshot header"));
    }
    if header_len as usize != HEADER_LEN {
        return Err(FormatError::Malformed("header length"));
    }
    if !(1..=64).contains(&value_bits) || value_bits as u32 + check_bits as u32 > 64 {
        return Err(FormatError::Malformed("value/check bit widths"));
    }
    let sizing = Sizing::from_code(sizing_code).ok_or(FormatError::Malformed("sizing code"))?;
    let meta = QueryMeta {
        generation,
        seed,
        ma,
        mb,
        value_bits,
        check_bits,
        sizing,
    };
    if meta.ma == 0 || meta.mb == 0 {
        return Err(FormatError::Malformed("empty array"));
    }
    if stash_len > crate::config::MAX_STASH {
        return Err(FormatError::Malformed("stash larger than the maximum"));
    }
    let lay = Layout::new(meta, stash_len);
    if slot_bytes as usize != lay.slot_bytes {
        return Err(FormatError::Malformed("slot bytes"));
    }
    if offsets != [lay.a_off, lay.b_off, lay.stash_off, lay.total].map(|o| o as u64) {
        return Err(FormatError::Malformed("section offsets"));
    }
    if bytes.len() < lay.total {
        return Err(FormatError::Truncated {
            needed: lay.total,
            got: bytes.len(),
        });
    }
    if bytes.len() > lay.total {
        return Err(FormatError::TrailingData(bytes.len() - lay.total));
    }
    if nexthop_hash::hash64(&bytes[HEADER_LEN..], 0) != payload_sum {
        return Err(FormatError::Checksum("snapshot payload"));
    }
    let pad_a = lay.a_off + meta.ma as usize * lay.slot_bytes..lay.b_off;
    let pad_b = lay.b_off + meta.mb as usize * lay.slot_bytes..lay.stash_off;
    if bytes[pad_a].iter().chain(&bytes[pad_b]).any(|&b| b != 0) {
        return Err(FormatError::Malformed("nonzero padding"));
    }
    if reserved.iter().any(|&b| b != 0) {
        return Err(FormatError::Malformed("reserved header bytes"));
    }
    let word_bits = value_bits as u32 + check_bits as u32;
    if word_bits < lay.slot_bytes as u32 * 8 {
        let bad = |off: usize, n: usize| {
            (0..n).any(|i| {
                let at = off + i * lay.slot_bytes;
                let mut w = [0u8; 8];
                w[..lay.slot_bytes].copy_from_slice(&bytes[at..at + lay.slot_bytes]);
                u64::from_le_bytes(w) >> word_bits != 0
            })
        };
        if bad(lay.a_off, meta.ma as usize) || bad(lay.b_off, meta.mb as usize) {
            return Err(FormatError::Malformed("slot word wider than l + r bits"));
        }
    }
    let vmask = crate::config::mask(value_bits as u32);
    let mut prev: Option<u128> = None;
    for (fp, word) in stash_entries(bytes, &lay) {
        if word & !vmask != 0 {
            return Err(FormatError::Malformed("stash value wider than l bits"));
        }
        if prev.is_some_and(|p| p >= fp) {
            return Err(FormatError::Malformed(
                "stash entries not sorted and unique",
            ));
        }
        prev = Some(fp);
    }
    Ok(lay)
}

/// The stash entries of a validated snapshot.
pub(crate) fn stash_entries<'a>(
    bytes: &'a [u8],
    lay: &Layout,
) -> impl Iterator<Item = (u128, u64)> + 'a {
    let stash = &bytes[lay.stash_off..lay.stash_off + lay.stash_len * STASH_ENTRY];
    stash.chunks_exact(STASH_ENTRY).map(|e| {
        let (fp, word) = e.split_at(16);
        let mut f = [0u8; 16];
        f.copy_from_slice(fp);
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        (u128::from_le_bytes(f), u64::from_le_bytes(w))
    })
}

/// Slot word `i` of the array starting at `off`.
pub(crate) fn slot(bytes: &[u8], off: usize, slot_bytes: usize, i: usize) -> u64 {
    let at = off + i * slot_bytes;
    let mut w = [0u8; 8];
    w[..slot_bytes].copy_from_slice(&bytes[at..at + slot_bytes]);
    u64::from_le_bytes(w)
}
