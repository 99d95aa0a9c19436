//! TLV primitives: VAR-NUMBER, a cursor reader that never panics, writers,
//! NonNegativeInteger, and the critical-type rule.
//!
//! ```text
//! NDN-TLV    := TLV-TYPE TLV-LENGTH TLV-VALUE
//! VAR-NUMBER := first octet < 253            -> that octet
//!             | FD + 2 octets (big-endian)   -> 253 ..= 2^16-1
//!             | FE + 4 octets                -> 2^16 ..= 2^32-1
//!             | FF + 8 octets                -> 2^32 ..= 2^64-1
//! ```
//!
//! Decoders here reject VAR-NUMBERs that are not in their shortest form
//! ([`NdnError::NonMinimalVarNumber`]); see the module docs of
//! [`crate::ndn`] for the reasoning.

use super::error::NdnError;

/// The largest TLV-TYPE the spec allows (0 and numbers above this are
/// invalid).
pub const MAX_TYPE: u64 = u32::MAX as u64;

/// Bytes the VAR-NUMBER encoding of `n` takes (1, 3, 5 or 9).
#[inline]
pub const fn var_number_len(n: u64) -> usize {
    if n < 253 {
        1
    } else if n <= 0xFFFF {
        3
    } else if n <= 0xFFFF_FFFF {
        5
    } else {
        9
    }
}

/// Append the shortest VAR-NUMBER encoding of `n`.
#[inline]
pub fn write_var_number(out: &mut Vec<u8>, n: u64) {
    if n < 253 {
        out.push(n as u8);
    } else if n <= 0xFFFF {
        out.push(253);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else if n <= 0xFFFF_FFFF {
        out.push(254);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(255);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Read the VAR-NUMBER at `buf[at..]`: its value and its encoded size.
///
/// Fails with [`NdnError::Truncated`] when the buffer ends inside it and
/// with [`NdnError::NonMinimalVarNumber`] when a shorter encoding exists.
#[inline]
pub fn read_var_number(buf: &[u8], at: usize) -> Result<(u64, usize), NdnError> {
    let first = *buf.get(at).ok_or(NdnError::Truncated {
        needed: at.saturating_add(1),
        got: buf.len(),
    })?;
    let size = match first {
        0..=252 => return Ok((first as u64, 1)),
        253 => 3,
        254 => 5,
        255 => 9,
    };
    let bytes = buf
        .get(at + 1..at.saturating_add(size))
        .filter(|b| b.len() == size - 1)
        .ok_or(NdnError::Truncated {
            needed: at.saturating_add(size),
            got: buf.len(),
        })?;
    let mut n = 0u64;
    for &b in bytes {
        n = (n << 8) | b as u64;
    }
    if var_number_len(n) != size {
        return Err(NdnError::NonMinimalVarNumber { at });
    }
    Ok((n, size))
}

/// Bytes a whole TLV element takes given its TLV-TYPE and value length.
#[inline]
pub const fn tlv_len(typ: u32, value_len: usize) -> usize {
    var_number_len(typ as u64) + var_number_len(value_len as u64) + value_len
}

/// Append TLV-TYPE and TLV-LENGTH.
#[inline]
pub fn write_type_length(out: &mut Vec<u8>, typ: u32, len: usize) {
    write_var_number(out, typ as u64);
    write_var_number(out, len as u64);
}

/// Append a whole element with `value` as its TLV-VALUE.
#[inline]
pub fn write_tlv(out: &mut Vec<u8>, typ: u32, value: &[u8]) {
    write_type_length(out, typ, value.len());
    out.extend_from_slice(value);
}

/// Bytes of the shortest NonNegativeInteger encoding of `n` (1, 2, 4 or 8).
#[inline]
pub const fn nni_len(n: u64) -> usize {
    if n <= 0xFF {
        1
    } else if n <= 0xFFFF {
        2
    } else if n <= 0xFFFF_FFFF {
        4
    } else {
        8
    }
}

/// Append the shortest NonNegativeInteger encoding of `n` (value only).
#[inline]
pub fn write_nni(out: &mut Vec<u8>, n: u64) {
    let bytes = n.to_be_bytes();
    out.extend_from_slice(&bytes[8 - nni_len(n)..]);
}

/// Append an element whose value is the NonNegativeInteger `n`.
#[inline]
pub fn write_nni_tlv(out: &mut Vec<u8>, typ: u32, n: u64) {
    write_type_length(out, typ, nni_len(n));
    write_nni(out, n);
}

/// Decode a NonNegativeInteger TLV-VALUE: 1, 2, 4 or 8 big-endian bytes.
///
/// Any of the four lengths is accepted (the spec allows a longer one than
/// needed); other lengths are [`NdnError::Malformed`].
#[inline]
pub fn read_nni(value: &[u8]) -> Result<u64, NdnError> {
    match value.len() {
        1 | 2 | 4 | 8 => Ok(value.iter().fold(0u64, |n, &b| (n << 8) | b as u64)),
        _ => Err(NdnError::Malformed(
            "NonNegativeInteger length is not 1, 2, 4 or 8",
        )),
    }
}

/// Whether an unknown element of this TLV-TYPE must make the decoder fail
/// (the spec's evolvability rule: types 0..=31 are "grandfathered"
/// critical, above that odd types are critical and even ones may be
/// ignored).
#[inline]
pub const fn is_critical(typ: u32) -> bool {
    typ <= 31 || typ & 1 == 1
}

/// One TLV element read from a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Element<'a> {
    /// TLV-TYPE, in `1..=u32::MAX`.
    pub typ: u32,
    /// TLV-VALUE.
    pub value: &'a [u8],
    /// The whole element: TLV-TYPE, TLV-LENGTH and TLV-VALUE.
    pub tlv: &'a [u8],
    /// Offset of the element's first byte (see [`TlvReader::with_base`]).
    pub at: usize,
    /// Offset of the TLV-VALUE's first byte.
    pub value_at: usize,
}

impl<'a> Element<'a> {
    /// A reader over this element's TLV-VALUE whose offsets continue those
    /// of the reader that produced the element.
    #[inline]
    pub fn reader(&self) -> TlvReader<'a> {
        TlvReader::with_base(self.value, self.value_at)
    }

    /// The TLV-VALUE as a NonNegativeInteger.
    #[inline]
    pub fn nni(&self) -> Result<u64, NdnError> {
        read_nni(self.value)
    }
}

/// A cursor over a sequence of TLV elements.
///
/// Every method returns an error rather than reading past the end; after an
/// error the cursor does not move.
#[derive(Debug, Clone)]
pub struct TlvReader<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> TlvReader<'a> {
    /// A reader over `buf`, reporting offsets from its start.
    #[inline]
    pub fn new(buf: &'a [u8]) -> Self {
        Self::with_base(buf, 0)
    }

    /// A reader over `buf`, reporting offsets as `base +` the offset in `buf`
    /// (for a buffer that is the TLV-VALUE of an outer element).
    #[inline]
    pub fn with_base(buf: &'a [u8], base: usize) -> Self {
        TlvReader { buf, pos: 0, base }
    }

    /// Whether every byte has been read.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// Bytes not read yet.
    #[inline]
    pub fn remaining(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or(&[])
    }

    /// Offset of the next byte (with the base added).
    #[inline]
    pub fn position(&self) -> usize {
        self.base + self.pos
    }

    fn shift(&self, e: NdnError) -> NdnError {
        match e {
            NdnError::Truncated { needed, got } => NdnError::Truncated {
                needed: needed.saturating_add(self.base),
                got: got.saturating_add(self.base),
            },
            NdnError::NonMinimalVarNumber { at } => NdnError::NonMinimalVarNumber {
                at: at.saturating_add(self.base),
            },
            other => other,
        }
    }

    /// The TLV-TYPE of the next element, without consuming it; `None` at
    /// the end.
    #[inline]
    pub fn peek_type(&self) -> Result<Option<u32>, NdnError> {
        // A one-byte TLV-TYPE inline, as in `read`; the rest out of line.
        match self.buf.get(self.pos) {
            None => Ok(None),
            Some(&t) if t != 0 && t < 253 => Ok(Some(t as u32)),
            Some(_) => self.peek_type_general(),
        }
    }

    /// [`Self::peek_type`] for any TLV-TYPE encoding, and errors.
    #[inline(never)]
    fn peek_type_general(&self) -> Result<Option<u32>, NdnError> {
        if self.is_empty() {
            return Ok(None);
        }
        let (typ, _) = read_var_number(self.buf, self.pos).map_err(|e| self.shift(e))?;
        if typ == 0 || typ > MAX_TYPE {
            return Err(NdnError::InvalidType {
                at: self.position(),
                typ,
            });
        }
        Ok(Some(typ as u32))
    }

    /// Read the next element.
    #[inline]
    pub fn read(&mut self) -> Result<Element<'a>, NdnError> {
        // Most elements have a one-byte TLV-TYPE and TLV-LENGTH (both
        // below 253, the type not 0): read those inline; everything else
        // (and every error) takes the general path.
        let start = self.pos;
        if let Some(&[typ, len]) = self.buf.get(start..start.wrapping_add(2)) {
            if typ != 0 && typ < 253 && len < 253 {
                let value_start = start + 2;
                let end = value_start + len as usize;
                if let (Some(value), Some(tlv)) =
                    (self.buf.get(value_start..end), self.buf.get(start..end))
                {
                    self.pos = end;
                    return Ok(Element {
                        typ: typ as u32,
                        value,
                        tlv,
                        at: self.base + start,
                        value_at: self.base + value_start,
                    });
                }
            }
        }
        self.read_general()
    }

    /// [`Self::read`] for any TLV-TYPE and TLV-LENGTH encoding, and errors.
    #[inline(never)]
    fn read_general(&mut self) -> Result<Element<'a>, NdnError> {
        let start = self.pos;
        let (typ, tsize) = read_var_number(self.buf, start).map_err(|e| self.shift(e))?;
        if typ == 0 || typ > MAX_TYPE {
            return Err(NdnError::InvalidType {
                at: self.base + start,
                typ,
            });
        }
        let (len, lsize) = read_var_number(self.buf, start + tsize).map_err(|e| self.shift(e))?;
        let value_start = start + tsize + lsize;
        let available = self.buf.len() - value_start;
        if len > available as u64 {
            return Err(NdnError::LengthExceedsBuffer {
                at: self.base + start,
                length: len,
                available,
            });
        }
        let end = value_start + len as usize;
        let (Some(value), Some(tlv)) = (self.buf.get(value_start..end), self.buf.get(start..end))
        else {
            // Unreachable: `end <= buf.len()` was checked above.
            return Err(NdnError::Malformed("TLV bounds"));
        };
        self.pos = end;
        Ok(Element {
            typ: typ as u32,
            value,
            tlv,
            at: self.base + start,
            value_at: self.base + value_start,
        })
    }

    /// Read the next element if there is one and it has TLV-TYPE `typ`.
    #[inline]
    pub fn read_if(&mut self, typ: u32) -> Result<Option<Element<'a>>, NdnError> {
        if self.peek_type()? == Some(typ) {
            self.read().map(Some)
        } else {
            Ok(None)
        }
    }

    /// Fail with [`NdnError::TrailingData`] unless every byte was read.
    #[inline]
    pub fn finish(&self) -> Result<(), NdnError> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(NdnError::TrailingData {
                at: self.position(),
                extra: self.buf.len() - self.pos,
            })
        }
    }
}

/// Decode `buf` as exactly one element of TLV-TYPE `expected`.
pub fn read_single(buf: &[u8], expected: u32) -> Result<Element<'_>, NdnError> {
    let mut r = TlvReader::new(buf);
    let e = r.read()?;
    if e.typ != expected {
        return Err(NdnError::UnexpectedType {
            expected,
            found: e.typ,
        });
    }
    r.finish()?;
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TLV bytes rich in the edge cases of VAR-NUMBER: 0, small numbers and
    /// the 253-255 prefixes.
    fn tlv_bytes() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            proptest::prop_oneof![0u8..8, 250u8..=255, proptest::num::u8::ANY],
            0..24,
        )
    }

    proptest::proptest! {
        /// The inline one-byte path of `read` gives exactly what the
        /// general path gives (element or error, and the cursor after),
        /// for any bytes at any position and base.
        #[test]
        fn read_fast_path_agrees_with_the_general_path(
            buf in tlv_bytes(),
            skip in 0usize..4,
            base in 0usize..1000,
        ) {
            let mut a = TlvReader::with_base(&buf, base);
            let mut b = a.clone();
            for _ in 0..skip {
                let _ = a.read();
                let _ = b.read_general();
            }
            loop {
                let (ra, rb) = (a.read(), b.read_general());
                proptest::prop_assert_eq!(&ra, &rb);
                proptest::prop_assert_eq!(a.position(), b.position());
                if ra.is_err() || a.is_empty() {
                    break;
                }
            }
        }

        /// The inline one-byte path of `peek_type` gives what the general
        /// path gives, at any position.
        #[test]
        fn peek_fast_path_agrees_with_the_general_path(
            buf in tlv_bytes(),
            skip in 0usize..4,
            base in 0usize..1000,
        ) {
            let mut r = TlvReader::with_base(&buf, base);
            for _ in 0..skip {
                let _ = r.read();
            }
            proptest::prop_assert_eq!(r.peek_type(), r.peek_type_general());
        }
    }

    fn enc(n: u64) -> Vec<u8> {
        let mut v = Vec::new();
        write_var_number(&mut v, n);
        v
    }

    #[test]
    fn var_number_uses_each_width_at_its_boundaries() {
        assert_eq!(enc(0), [0]);
        assert_eq!(enc(252), [252]);
        assert_eq!(enc(253), [253, 0, 253]);
        assert_eq!(enc(0xFFFF), [253, 0xFF, 0xFF]);
        assert_eq!(enc(0x1_0000), [254, 0, 1, 0, 0]);
        assert_eq!(enc(0xFFFF_FFFF), [254, 0xFF, 0xFF, 0xFF, 0xFF]);
        assert_eq!(enc(0x1_0000_0000), [255, 0, 0, 0, 1, 0, 0, 0, 0]);
        assert_eq!(enc(u64::MAX), [255; 9]);
        for n in [
            0,
            252,
            253,
            0xFFFF,
            0x1_0000,
            0xFFFF_FFFF,
            0x1_0000_0000,
            u64::MAX,
        ] {
            let v = enc(n);
            assert_eq!(v.len(), var_number_len(n));
            assert_eq!(read_var_number(&v, 0), Ok((n, v.len())));
        }
    }

    #[test]
    fn var_number_rejects_longer_encodings_than_needed() {
        assert_eq!(
            read_var_number(&[253, 0, 5], 0),
            Err(NdnError::NonMinimalVarNumber { at: 0 })
        );
        assert_eq!(
            read_var_number(&[254, 0, 0, 0xFF, 0xFF], 0),
            Err(NdnError::NonMinimalVarNumber { at: 0 })
        );
        assert_eq!(
            read_var_number(&[255, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF], 0),
            Err(NdnError::NonMinimalVarNumber { at: 0 })
        );
    }

    #[test]
    fn var_number_truncation_says_how_much_was_needed() {
        assert_eq!(
            read_var_number(&[], 0),
            Err(NdnError::Truncated { needed: 1, got: 0 })
        );
        assert_eq!(
            read_var_number(&[7, 254, 1, 2], 1),
            Err(NdnError::Truncated { needed: 6, got: 4 })
        );
    }

    #[test]
    fn reader_walks_elements_and_reports_offsets() {
        let buf = [0x07, 0x03, 0x08, 0x01, b'a', 0x0A, 0x00];
        let mut r = TlvReader::new(&buf);
        let name = r.read().unwrap();
        assert_eq!(
            (name.typ, name.value, name.at, name.value_at),
            (7, &buf[2..5], 0, 2)
        );
        let mut inner = name.reader();
        let c = inner.read().unwrap();
        assert_eq!((c.typ, c.value, c.at, c.value_at), (8, &b"a"[..], 2, 4));
        assert!(inner.finish().is_ok());
        let nonce = r.read().unwrap();
        assert_eq!((nonce.typ, nonce.value.len(), nonce.at), (10, 0, 5));
        assert!(r.is_empty());
    }

    #[test]
    fn reader_rejects_overlong_length_and_keeps_its_place() {
        let buf = [0x08, 0x05, 1, 2];
        let mut r = TlvReader::new(&buf);
        assert_eq!(
            r.read(),
            Err(NdnError::LengthExceedsBuffer {
                at: 0,
                length: 5,
                available: 2
            })
        );
        assert_eq!(r.position(), 0);
        let huge = [0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF];
        assert!(matches!(
            TlvReader::new(&huge).read(),
            Err(NdnError::LengthExceedsBuffer { .. })
        ));
    }

    #[test]
    fn reader_rejects_type_zero_and_types_above_u32() {
        assert_eq!(
            TlvReader::new(&[0, 0]).read(),
            Err(NdnError::InvalidType { at: 0, typ: 0 })
        );
        let big = [255, 0, 0, 0, 1, 0, 0, 0, 0, 0];
        assert!(matches!(
            TlvReader::new(&big).read(),
            Err(NdnError::InvalidType {
                typ: 0x1_0000_0000,
                ..
            })
        ));
    }

    #[test]
    fn read_single_rejects_trailing_bytes_and_wrong_type() {
        assert_eq!(
            read_single(&[6, 0, 0xAA], 6),
            Err(NdnError::TrailingData { at: 2, extra: 1 })
        );
        assert_eq!(
            read_single(&[5, 0], 6),
            Err(NdnError::UnexpectedType {
                expected: 6,
                found: 5
            })
        );
    }

    #[test]
    fn nni_round_trips_and_rejects_odd_lengths() {
        for (n, len) in [
            (0u64, 1),
            (255, 1),
            (256, 2),
            (65535, 2),
            (65536, 4),
            (1 << 32, 8),
        ] {
            let mut v = Vec::new();
            write_nni(&mut v, n);
            assert_eq!(v.len(), len);
            assert_eq!(read_nni(&v), Ok(n));
        }
        assert_eq!(read_nni(&[0, 1]), Ok(1));
        assert!(read_nni(&[]).is_err());
        assert!(read_nni(&[1, 2, 3]).is_err());
    }

    #[test]
    fn critical_rule_matches_the_spec() {
        for t in 0..=31 {
            assert!(is_critical(t));
        }
        assert!(is_critical(33));
        assert!(!is_critical(32));
        assert!(!is_critical(200));
        assert!(is_critical(201));
    }
}
