//! Zero-copy, read-only query structures over snapshot bytes (for example a
//! memory-mapped file).

use std::path::Path;

use nexthop_hash::{Hash128, KeyBytes};
use nexthop_mem::two_stage;

use crate::error::FormatError;
use crate::query::{QueryMeta, BATCH_GROUP, MISS};
use crate::snapshot::{self, Layout};

enum Arrays<'a> {
    W8(&'a [u8], &'a [u8]),
    W16(&'a [u16], &'a [u16]),
    W32(&'a [u32], &'a [u32]),
    W64(&'a [u64], &'a [u64]),
}

/// A read-only query structure that reads its arrays in place from snapshot
/// bytes. The bytes must be 8-byte aligned (a memory mapping is page
/// aligned); loading checks the whole snapshot (magic, version, checksums,
/// sizes) first.
pub struct QueryView<'a> {
    meta: QueryMeta,
    arrays: Arrays<'a>,
    stash: Vec<(u128, u64)>,
    stash_filter: u64,
}

impl std::fmt::Debug for QueryView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryView")
            .field("meta", &self.meta)
            .field("stash_len", &self.stash.len())
            .finish_non_exhaustive()
    }
}

fn cast<T: bytemuck::Pod>(bytes: &[u8]) -> Result<&[T], FormatError> {
    bytemuck::try_cast_slice(bytes).map_err(|_| FormatError::Misaligned(std::mem::align_of::<T>()))
}

impl<'a> QueryView<'a> {
    /// Validate `bytes` as a snapshot and view it in place.
    pub fn new(bytes: &'a [u8]) -> Result<QueryView<'a>, FormatError> {
        let lay = snapshot::parse(bytes)?;
        Self::from_layout(bytes, &lay)
    }

    fn from_layout(bytes: &'a [u8], lay: &Layout) -> Result<QueryView<'a>, FormatError> {
        if cfg!(target_endian = "big") && lay.slot_bytes > 1 {
            return Err(FormatError::Malformed(
                "zero-copy loading of multi-byte slots needs a little-endian host; use Query::from_snapshot",
            ));
        }
        let (ma, mb, sb) = (lay.meta.ma as usize, lay.meta.mb as usize, lay.slot_bytes);
        let a = &bytes[lay.a_off..lay.a_off + ma * sb];
        let b = &bytes[lay.b_off..lay.b_off + mb * sb];
        let arrays = match sb {
            1 => Arrays::W8(a, b),
            2 => Arrays::W16(cast(a)?, cast(b)?),
            4 => Arrays::W32(cast(a)?, cast(b)?),
            _ => Arrays::W64(cast(a)?, cast(b)?),
        };
        let stash: Vec<(u128, u64)> = snapshot::stash_entries(bytes, lay).collect();
        let stash_filter = stash
            .iter()
            .fold(0, |f, e| f | crate::query::stash_bit(e.0));
        Ok(QueryView {
            meta: lay.meta,
            arrays,
            stash,
            stash_filter,
        })
    }

    /// Sizes, seed, widths and generation.
    pub fn meta(&self) -> &QueryMeta {
        &self.meta
    }

    /// Look up one key (see [`Query::lookup`](crate::Query::lookup)).
    #[inline]
    pub fn lookup<K: KeyBytes + ?Sized>(&self, key: &K) -> Option<u64> {
        let h = key.hash128(self.meta.seed);
        if self.stash_filter & crate::query::stash_bit(h.0) != 0 {
            if let Some(&(_, v)) = self.stash.iter().find(|e| e.0 == h.0) {
                return Some(v);
            }
        }
        let (i, j) = self.meta.slots(h);
        let w = match self.arrays {
            Arrays::W8(a, b) => (a[i] ^ b[j]) as u64,
            Arrays::W16(a, b) => u16::from_le(a[i] ^ b[j]) as u64,
            Arrays::W32(a, b) => u32::from_le(a[i] ^ b[j]) as u64,
            Arrays::W64(a, b) => u64::from_le(a[i] ^ b[j]),
        };
        self.meta.decode(w, h)
    }

    /// Look up many keys; `out[i]` gets the value or [`MISS`]. Returns hits.
    /// As in [`Query::lookup_batch`](crate::Query::lookup_batch), each group
    /// of [`BATCH_GROUP`] keys is hashed and both of its slots prefetched
    /// while the group before is read.
    ///
    /// # Panics
    /// If `out` is shorter than `keys`.
    pub fn lookup_batch<K: KeyBytes>(&self, keys: &[K], out: &mut [u64]) -> usize {
        assert!(out.len() >= keys.len(), "output shorter than keys");
        match self.arrays {
            Arrays::W8(a, b) => self.batch_in(a, b, keys, out, |x| x as u64),
            Arrays::W16(a, b) => self.batch_in(a, b, keys, out, |x| u16::from_le(x) as u64),
            Arrays::W32(a, b) => self.batch_in(a, b, keys, out, |x| u32::from_le(x) as u64),
            Arrays::W64(a, b) => self.batch_in(a, b, keys, out, u64::from_le),
        }
    }

    fn batch_in<W: Copy + std::ops::BitXor<Output = W>, K: KeyBytes>(
        &self,
        a: &[W],
        b: &[W],
        keys: &[K],
        out: &mut [u64],
        widen: impl Fn(W) -> u64,
    ) -> usize {
        let mut hits = 0;
        type State = ([Hash128; BATCH_GROUP], [(usize, usize); BATCH_GROUP]);
        two_stage::<BATCH_GROUP, _, State>(
            keys,
            |kc, (hs, ij)| {
                for (n, k) in kc.iter().enumerate() {
                    let h = k.hash128(self.meta.seed);
                    let (i, j) = self.meta.slots(h);
                    nexthop_mem::prefetch(&a[i]);
                    nexthop_mem::prefetch(&b[j]);
                    hs[n] = h;
                    ij[n] = (i, j);
                }
            },
            |start, kc, (hs, ij)| {
                for n in 0..kc.len() {
                    let h = hs[n];
                    let stashed = if self.stash_filter & crate::query::stash_bit(h.0) == 0 {
                        None
                    } else {
                        self.stash.iter().find(|e| e.0 == h.0).map(|e| e.1)
                    };
                    let (i, j) = ij[n];
                    let r = match stashed {
                        Some(v) => Some(v),
                        None => self.meta.decode(widen(a[i] ^ b[j]), h),
                    };
                    hits += r.is_some() as usize;
                    out[start + n] = r.unwrap_or(MISS);
                }
            },
        );
        hits
    }
}

/// A snapshot file mapped into memory and validated once at open.
pub struct MappedQuery {
    map: memmap2::Mmap,
    layout: Layout,
}

impl std::fmt::Debug for MappedQuery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedQuery")
            .field("meta", &self.layout.meta)
            .finish_non_exhaustive()
    }
}

impl MappedQuery {
    /// Map and validate the snapshot file at `path`.
    ///
    /// The file must not be modified while it is mapped; nexthop's own
    /// writers never modify a snapshot in place (they write a new file and
    /// rename it over the old one), so a mapping keeps the old contents.
    pub fn open(path: &Path) -> Result<MappedQuery, FormatError> {
        let file = std::fs::File::open(path)
            .map_err(|e| FormatError::Io(format!("{}: {e}", path.display())))?;
        // SAFETY: 1. The mapping is read-only (Mmap, not MmapMut).
        // 2. Its contents are only changed if another process writes the file in
        //    place, which the contract above forbids; nexthop replaces snapshot
        //    files by rename, which leaves existing mappings intact.
        // 3. Everything read through the mapping is validated by
        //    snapshot::parse before use, and bounds are checked on every slice.
        let map = unsafe { memmap2::Mmap::map(&file) }
            .map_err(|e| FormatError::Io(format!("{}: {e}", path.display())))?;
        let layout = snapshot::parse(&map)?;
        // Check alignment and endianness once here, so view() cannot fail.
        QueryView::from_layout(&map, &layout)?;
        Ok(MappedQuery { map, layout })
    }

    /// A lookup view over the mapping.
    pub fn view(&self) -> QueryView<'_> {
        match QueryView::from_layout(&self.map, &self.layout) {
            Ok(v) => v,
            Err(e) => unreachable!("validated in MappedQuery::open: {e}"),
        }
    }
}
