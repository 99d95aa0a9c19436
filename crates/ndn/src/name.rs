//! The FIB's view of a name: its components as NDN TLV bytes.
//!
//! The FIB never parses URIs. It works on the *value* of a Name TLV — the
//! concatenation of its component TLVs — plus the byte offset where each
//! component ends. Because TLV is self-delimiting, the first `n` components
//! of a name are exactly a byte prefix of that concatenation, so a name
//! prefix entry stores one string and every shorter prefix of it (a marker)
//! is a byte prefix of the same string (dissertation Fig. 3.4).
//!
//! [`NameView`] is what lookups take; [`NameBuf`] is this crate's owned
//! implementation (built from TLV bytes or from generic components);
//! [`NameSlice`] borrows the bytes and a reused offsets buffer, so parsing
//! and looking up a received name allocates nothing.

use nexthop_wire::ndn::{empty_prefix_hash, extend_prefix_hash, prefix_hash_seed, Name, NameRef};

use crate::error::NameError;

/// Generic name component TLV type (NDN packet spec v0.3).
pub const TT_GENERIC_COMPONENT: u64 = 8;

/// Longest encoded name the FIB stores (bytes of component TLVs).
pub const MAX_NAME_BYTES: usize = u16::MAX as usize;

/// A name as a sequence of TLV-encoded components.
pub trait NameView {
    /// The concatenated component TLVs (the value of the Name TLV).
    fn tlv(&self) -> &[u8];
    /// Number of components.
    fn component_count(&self) -> usize;
    /// Byte length of the first `n` components (`n <= component_count()`;
    /// `prefix_end(0) == 0`).
    fn prefix_end(&self, n: usize) -> usize;
    /// The hash of the first `n` components (`n <= component_count()`):
    /// the chain of [`extend_prefix_hash`] under [`prefix_hash_seed`] (the
    /// process's secret seed), the value a wire [`Name`] computes once when
    /// it is decoded and caches (its implementation returns the cached
    /// value; others compute it). The FIB's (with its default key), the
    /// exact PIT's and the Content Store's keys all derive from it, so a
    /// decoded name is hashed once for all three.
    fn prefix_hash(&self, n: usize) -> u64 {
        let tlv = self.tlv();
        let mut h = empty_prefix_hash(prefix_hash_seed());
        for i in 0..n {
            h = extend_prefix_hash(h, &tlv[self.prefix_end(i)..self.prefix_end(i + 1)]);
        }
        h
    }
    /// [`Self::prefix_hash`] of the whole name.
    fn name_hash(&self) -> u64 {
        self.prefix_hash(self.component_count())
    }
}

/// [`NameView::name_hash`] of a name given as its component TLVs (`None`:
/// they do not parse as a name).
pub fn tlv_name_hash(tlv: &[u8]) -> Option<u64> {
    let name = NameRef::from_value(tlv).ok()?;
    name.prefix_hashes_with(prefix_hash_seed()).last()
}

/// A table key from a name hash and a table seed: a bijective 64-bit
/// finalizer (SplitMix64's), so distinct `(hash ^ seed)` stay distinct.
#[inline(always)]
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// An owned name: component TLVs and the end offset of each component.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct NameBuf {
    tlv: Vec<u8>,
    ends: Vec<u32>,
}

impl NameView for NameBuf {
    #[inline]
    fn tlv(&self) -> &[u8] {
        &self.tlv
    }
    #[inline]
    fn component_count(&self) -> usize {
        self.ends.len()
    }
    #[inline]
    fn prefix_end(&self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            self.ends[n - 1] as usize
        }
    }
}

impl<T: NameView + ?Sized> NameView for &T {
    fn tlv(&self) -> &[u8] {
        (**self).tlv()
    }
    fn component_count(&self) -> usize {
        (**self).component_count()
    }
    fn prefix_end(&self, n: usize) -> usize {
        (**self).prefix_end(n)
    }
    fn prefix_hash(&self, n: usize) -> u64 {
        (**self).prefix_hash(n)
    }
}

impl NameBuf {
    /// The empty name `/` (zero components).
    pub fn root() -> NameBuf {
        NameBuf::default()
    }

    /// Parse concatenated component TLVs (the value of a Name TLV),
    /// validated by `nexthop_wire::ndn` (types `1..=65535`, lengths inside
    /// the buffer, shortest VAR-NUMBERs); at most [`MAX_NAME_BYTES`].
    pub fn from_tlv(bytes: &[u8]) -> Result<NameBuf, NameError> {
        if bytes.len() > MAX_NAME_BYTES {
            return Err(NameError::TooLong { bytes: bytes.len() });
        }
        let name = Name::from_value(bytes).map_err(NameError::Wire)?;
        Ok(NameBuf {
            tlv: bytes.to_vec(),
            ends: name.component_ends().to_vec(),
        })
    }

    /// The FIB's form of a wire-format [`Name`].
    pub fn from_name(name: &Name) -> Result<NameBuf, NameError> {
        if name.value().len() > MAX_NAME_BYTES {
            return Err(NameError::TooLong {
                bytes: name.value().len(),
            });
        }
        Ok(NameBuf {
            tlv: name.value().to_vec(),
            ends: name.component_ends().to_vec(),
        })
    }

    /// The wire-format [`Name`] (URI printing, typed components).
    pub fn to_name(&self) -> Name {
        // `tlv` was validated or built from valid components.
        Name::from_value(&self.tlv).unwrap_or_default()
    }

    /// A name of generic components with the given values.
    pub fn from_components<I, C>(components: I) -> Result<NameBuf, NameError>
    where
        I: IntoIterator<Item = C>,
        C: AsRef<[u8]>,
    {
        let mut n = NameBuf::default();
        for c in components {
            n.push(TT_GENERIC_COMPONENT, c.as_ref())?;
        }
        Ok(n)
    }

    /// Append a component of type `tlv_type` with value `value`.
    pub fn push(&mut self, tlv_type: u64, value: &[u8]) -> Result<(), NameError> {
        if tlv_type == 0 || tlv_type > u16::MAX as u64 {
            return Err(NameError::BadComponentType {
                offset: self.tlv.len(),
                tlv_type,
            });
        }
        let before = self.tlv.len();
        nexthop_wire::ndn::tlv::write_tlv(&mut self.tlv, tlv_type as u32, value);
        if self.tlv.len() > MAX_NAME_BYTES {
            let bytes = self.tlv.len();
            self.tlv.truncate(before);
            return Err(NameError::TooLong { bytes });
        }
        self.ends.push(self.tlv.len() as u32);
        Ok(())
    }

    /// The first `n` components (all of them when `n` is larger).
    pub fn prefix(&self, n: usize) -> NameBuf {
        let n = n.min(self.ends.len());
        let end = self.prefix_end(n);
        NameBuf {
            tlv: self.tlv[..end].to_vec(),
            ends: self.ends[..n].to_vec(),
        }
    }

    /// Component `i` as `(type, value)`.
    pub fn component(&self, i: usize) -> Option<(u64, &[u8])> {
        if i >= self.ends.len() {
            return None;
        }
        let tlv = &self.tlv[self.prefix_end(i)..self.ends[i] as usize];
        let c = NameRef::from_value(tlv).ok()?.components().next()?;
        let vlen = c.value().len();
        Some((c.typ() as u64, &tlv[tlv.len() - vlen..]))
    }

    /// Iterate over `(type, value)` of every component.
    pub fn components(&self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        (0..self.ends.len()).filter_map(move |i| self.component(i))
    }
}

impl std::fmt::Display for NameBuf {
    /// NDN URI form (via `nexthop_wire::ndn`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.to_name())
    }
}

impl NameView for Name {
    #[inline]
    fn tlv(&self) -> &[u8] {
        self.value()
    }
    #[inline]
    fn component_count(&self) -> usize {
        self.len()
    }
    #[inline]
    fn prefix_end(&self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            self.component_ends()[n - 1] as usize
        }
    }
    #[inline]
    fn prefix_hash(&self, n: usize) -> u64 {
        Name::prefix_hash(self, n)
    }
}

/// Component end offsets of a TLV component sequence (into `out`, no
/// other allocation). Used by the FIB to re-derive a stored string's
/// prefixes.
pub(crate) fn component_ends(tlv: &[u8], out: &mut Vec<u32>) -> Result<(), NameError> {
    nexthop_wire::ndn::component_ends_into(tlv, out).map_err(NameError::Wire)?;
    Ok(())
}

/// A borrowed name: TLV bytes and component end offsets that live
/// elsewhere (a packet buffer and a reused offsets buffer), so looking it
/// up allocates nothing. Make one with [`NameSlice::parse`] or
/// [`NameSlice::new`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NameSlice<'a> {
    tlv: &'a [u8],
    ends: &'a [u32],
}

impl<'a> NameSlice<'a> {
    /// Validate `tlv` (the value of a Name TLV, at most
    /// [`MAX_NAME_BYTES`]) and write its component ends into `ends` (cleared
    /// first; its capacity is reused).
    pub fn parse(tlv: &'a [u8], ends: &'a mut Vec<u32>) -> Result<NameSlice<'a>, NameError> {
        if tlv.len() > MAX_NAME_BYTES {
            return Err(NameError::TooLong { bytes: tlv.len() });
        }
        component_ends(tlv, ends)?;
        Ok(NameSlice { tlv, ends })
    }

    /// A view over offsets already known to be the component ends of
    /// `tlv` (e.g. from [`nexthop_wire::ndn::component_ends_into`]).
    /// Returns `None` unless `ends` is increasing, within `tlv` and ends at
    /// its last byte (an empty `tlv` has no ends). The offsets are not
    /// re-validated against the TLV structure: a view over wrong offsets
    /// matches nothing it should not, since lookups compare the bytes.
    pub fn new(tlv: &'a [u8], ends: &'a [u32]) -> Option<NameSlice<'a>> {
        let ok = ends.windows(2).all(|w| w[0] < w[1])
            && ends.first().is_none_or(|&e| e > 0)
            && ends
                .last()
                .map_or(tlv.is_empty(), |&e| e as usize == tlv.len());
        ok.then_some(NameSlice { tlv, ends })
    }
}

impl<'a> NameSlice<'a> {
    /// Trusted parts (the offsets come from [`component_ends`]).
    pub(crate) fn from_parts(tlv: &'a [u8], ends: &'a [u32]) -> NameSlice<'a> {
        NameSlice { tlv, ends }
    }
}

impl NameView for NameSlice<'_> {
    #[inline]
    fn tlv(&self) -> &[u8] {
        self.tlv
    }
    #[inline]
    fn component_count(&self) -> usize {
        self.ends.len()
    }
    #[inline]
    fn prefix_end(&self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            self.ends[n - 1] as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_is_a_byte_prefix_of_the_name() {
        let n = NameBuf::from_components(["a", "bb", "ccc"]).unwrap();
        assert_eq!(n.component_count(), 3);
        assert_eq!(n.tlv(), b"\x08\x01a\x08\x02bb\x08\x03ccc");
        let p = n.prefix(2);
        assert_eq!(p.tlv(), &n.tlv()[..n.prefix_end(2)]);
        assert_eq!(p.component(1), Some((8, &b"bb"[..])));
    }

    #[test]
    fn name_slice_borrows_and_agrees_with_name_buf() {
        let n = NameBuf::from_components(["a", "bb", "ccc"]).unwrap();
        let mut ends = Vec::with_capacity(8);
        let cap = ends.capacity();
        let s = NameSlice::parse(n.tlv(), &mut ends).unwrap();
        assert_eq!(s.component_count(), 3);
        for i in 0..=3 {
            assert_eq!(s.prefix_end(i), n.prefix_end(i));
        }
        assert_eq!(ends.capacity(), cap);
        assert!(NameSlice::parse(&n.tlv()[..5], &mut ends).is_err());
        assert!(NameSlice::new(n.tlv(), &[3, 7, 12]).is_some());
        assert!(NameSlice::new(n.tlv(), &[3, 3, 12]).is_none());
        assert!(NameSlice::new(n.tlv(), &[3, 7]).is_none());
        assert!(NameSlice::new(&[], &[]).is_some());
        assert!(NameSlice::new(&[], &[0]).is_none());
    }

    #[test]
    fn from_tlv_round_trips_and_rejects_truncation() {
        let n = NameBuf::from_components(["x", &"y".repeat(300)]).unwrap();
        let back = NameBuf::from_tlv(n.tlv()).unwrap();
        assert_eq!(back, n);
        let cut = &n.tlv()[..n.tlv().len() - 1];
        assert!(matches!(NameBuf::from_tlv(cut), Err(NameError::Wire(_))));
        assert!(matches!(
            NameBuf::from_tlv(&[0, 0]),
            Err(NameError::Wire(_))
        ));
        assert_eq!(back.to_string(), format!("/x/{}", "y".repeat(300)));
    }
}
