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
//! implementation (built from TLV bytes or from generic components).

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
}

/// Append an NDN TLV variable-length number.
pub fn push_var_number(out: &mut Vec<u8>, v: u64) {
    if v < 253 {
        out.push(v as u8);
    } else if v <= u16::MAX as u64 {
        out.push(253);
        out.extend_from_slice(&(v as u16).to_be_bytes());
    } else if v <= u32::MAX as u64 {
        out.push(254);
        out.extend_from_slice(&(v as u32).to_be_bytes());
    } else {
        out.push(255);
        out.extend_from_slice(&v.to_be_bytes());
    }
}

/// Read a TLV variable-length number at `*pos`; `None` when truncated.
fn read_var_number(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let first = *buf.get(*pos)?;
    let width = match first {
        0..=252 => {
            *pos += 1;
            return Some(first as u64);
        }
        253 => 2,
        254 => 4,
        255 => 8,
    };
    let bytes = buf.get(*pos + 1..*pos + 1 + width)?;
    *pos += 1 + width;
    Some(bytes.iter().fold(0u64, |acc, &b| (acc << 8) | b as u64))
}

impl NameBuf {
    /// The empty name `/` (zero components).
    pub fn root() -> NameBuf {
        NameBuf::default()
    }

    /// Parse concatenated component TLVs (the value of a Name TLV).
    ///
    /// Every component must have a type in `1..=65535` and its whole
    /// length present; the sum must be at most [`MAX_NAME_BYTES`].
    pub fn from_tlv(bytes: &[u8]) -> Result<NameBuf, NameError> {
        if bytes.len() > MAX_NAME_BYTES {
            return Err(NameError::TooLong { bytes: bytes.len() });
        }
        let mut ends = Vec::new();
        let mut pos = 0usize;
        while pos < bytes.len() {
            let start = pos;
            let t = read_var_number(bytes, &mut pos).ok_or(NameError::Truncated { offset: start })?;
            if t == 0 || t > u16::MAX as u64 {
                return Err(NameError::BadComponentType { offset: start, tlv_type: t });
            }
            let l = read_var_number(bytes, &mut pos).ok_or(NameError::Truncated { offset: start })?;
            let end = (pos as u64)
                .checked_add(l)
                .filter(|&e| e <= bytes.len() as u64)
                .ok_or(NameError::Truncated { offset: start })?;
            pos = end as usize;
            ends.push(pos as u32);
        }
        Ok(NameBuf { tlv: bytes.to_vec(), ends })
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
            return Err(NameError::BadComponentType { offset: self.tlv.len(), tlv_type });
        }
        let before = self.tlv.len();
        push_var_number(&mut self.tlv, tlv_type);
        push_var_number(&mut self.tlv, value.len() as u64);
        self.tlv.extend_from_slice(value);
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
        NameBuf { tlv: self.tlv[..end].to_vec(), ends: self.ends[..n].to_vec() }
    }

    /// Component `i` as `(type, value)`.
    pub fn component(&self, i: usize) -> Option<(u64, &[u8])> {
        if i >= self.ends.len() {
            return None;
        }
        let mut pos = self.prefix_end(i);
        let t = read_var_number(&self.tlv, &mut pos)?;
        let _len = read_var_number(&self.tlv, &mut pos)?;
        Some((t, &self.tlv[pos..self.ends[i] as usize]))
    }

    /// Iterate over `(type, value)` of every component.
    pub fn components(&self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        (0..self.ends.len()).filter_map(move |i| self.component(i))
    }
}

/// Component byte ranges of a TLV component sequence, as end offsets.
/// Used by the FIB to re-derive a stored string's prefixes.
pub(crate) fn component_ends(tlv: &[u8], out: &mut Vec<u32>) -> Result<(), NameError> {
    out.clear();
    let mut pos = 0usize;
    while pos < tlv.len() {
        let start = pos;
        read_var_number(tlv, &mut pos).ok_or(NameError::Truncated { offset: start })?;
        let l = read_var_number(tlv, &mut pos).ok_or(NameError::Truncated { offset: start })?;
        let end = (pos as u64)
            .checked_add(l)
            .filter(|&e| e <= tlv.len() as u64)
            .ok_or(NameError::Truncated { offset: start })?;
        pos = end as usize;
        out.push(pos as u32);
    }
    Ok(())
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
    fn from_tlv_round_trips_and_rejects_truncation() {
        let n = NameBuf::from_components(["x", &"y".repeat(300)]).unwrap();
        let back = NameBuf::from_tlv(n.tlv()).unwrap();
        assert_eq!(back, n);
        let cut = &n.tlv()[..n.tlv().len() - 1];
        assert!(matches!(NameBuf::from_tlv(cut), Err(NameError::Truncated { .. })));
        assert!(matches!(
            NameBuf::from_tlv(&[0, 0]),
            Err(NameError::BadComponentType { tlv_type: 0, .. })
        ));
    }
}
