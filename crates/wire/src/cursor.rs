//! A bounds-checked little-endian cursor for nexthop's binary file and
//! message formats (the Othello snapshot, state and delta formats, the LPM
//! table file, the NDN FIB file, the control protocol's messages).
//!
//! [`Reader`] walks untrusted bytes: every read returns a `Result`, never
//! indexes past the end, and reports how many bytes it needed
//! ([`CursorError::Truncated`]); [`Reader::finish`] rejects trailing data;
//! [`Reader::count`] checks a count read from the data against what is
//! left before anyone allocates for it. [`Writer`] is its mirror image.
//! Integers are little-endian; varints are unsigned LEB128 of at most ten
//! bytes, minimally encoded (after rustls' `msgs/codec.rs`).
//!
//! Byte counts in errors are offsets from the start of the buffer given to
//! [`Reader::new`], so a reader over a file reports file offsets.

use thiserror::Error;

/// Why a [`Reader`] could not read what was asked.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CursorError {
    /// The buffer ends before the field does.
    #[error("truncated: needed {needed} bytes, got {got}")]
    Truncated {
        /// Bytes the field needs, from the start of the buffer (saturating).
        needed: usize,
        /// Bytes in the buffer.
        got: usize,
    },
    /// Bytes left after the end of the encoded object.
    #[error("{0} trailing bytes after the end")]
    TrailingData(usize),
    /// A varint that is overlong or does not fit in 64 bits.
    #[error("malformed: {0}")]
    Malformed(&'static str),
}

/// A bounds-checked cursor over untrusted bytes.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    #[inline]
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes read so far (the offset of the next read).
    #[inline]
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not yet read.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Whether every byte has been read.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pos == self.buf.len()
    }

    fn truncated(&self, n: usize) -> CursorError {
        CursorError::Truncated {
            needed: self.pos.saturating_add(n),
            got: self.buf.len(),
        }
    }

    /// The next `n` bytes.
    #[inline]
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], CursorError> {
        match self.pos.checked_add(n) {
            Some(end) if end <= self.buf.len() => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            _ => Err(self.truncated(n)),
        }
    }

    /// Skip `n` bytes.
    #[inline]
    pub fn skip(&mut self, n: usize) -> Result<(), CursorError> {
        self.take(n).map(|_| ())
    }

    /// Every byte not yet read (possibly none).
    #[inline]
    pub fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    /// The next `N` bytes as an array.
    #[inline]
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], CursorError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    /// A byte.
    #[inline]
    pub fn u8(&mut self) -> Result<u8, CursorError> {
        Ok(self.take(1)?[0])
    }

    /// A little-endian `u16`.
    #[inline]
    pub fn u16(&mut self) -> Result<u16, CursorError> {
        self.array().map(u16::from_le_bytes)
    }

    /// A little-endian `u32`.
    #[inline]
    pub fn u32(&mut self) -> Result<u32, CursorError> {
        self.array().map(u32::from_le_bytes)
    }

    /// A little-endian `u64`.
    #[inline]
    pub fn u64(&mut self) -> Result<u64, CursorError> {
        self.array().map(u64::from_le_bytes)
    }

    /// A little-endian `u128`.
    #[inline]
    pub fn u128(&mut self) -> Result<u128, CursorError> {
        self.array().map(u128::from_le_bytes)
    }

    /// A little-endian IEEE 754 `f64`.
    #[inline]
    pub fn f64(&mut self) -> Result<f64, CursorError> {
        self.u64().map(f64::from_bits)
    }

    /// An unsigned LEB128 varint: at most ten bytes, minimally encoded,
    /// within 64 bits.
    pub fn varint(&mut self) -> Result<u64, CursorError> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.u8()?;
            if i == 9 && b > 1 {
                return Err(CursorError::Malformed("varint overflows 64 bits"));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                if b == 0 && i > 0 {
                    return Err(CursorError::Malformed("overlong varint"));
                }
                return Ok(v);
            }
        }
        Err(CursorError::Malformed("varint longer than 10 bytes"))
    }

    /// Check a count `n` of `each`-byte items read from the data against
    /// the bytes left, so that it can size an allocation: `n` as a `usize`
    /// if `n * each` bytes remain, [`CursorError::Truncated`] otherwise.
    pub fn count(&self, n: u64, each: usize) -> Result<usize, CursorError> {
        let bytes = n.checked_mul(each as u64);
        match bytes {
            Some(b) if b <= self.remaining() as u64 => Ok(n as usize),
            _ => Err(CursorError::Truncated {
                needed: bytes
                    .and_then(|b| usize::try_from(b).ok())
                    .map_or(usize::MAX, |b| self.pos.saturating_add(b)),
                got: self.buf.len(),
            }),
        }
    }

    /// End of the object: [`CursorError::TrailingData`] if bytes are left.
    pub fn finish(self) -> Result<(), CursorError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(CursorError::TrailingData(n)),
        }
    }
}

/// Appends little-endian fields to a byte vector: the mirror of [`Reader`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Writer::default()
    }

    /// An empty writer with room for `n` bytes.
    pub fn with_capacity(n: usize) -> Self {
        Writer {
            buf: Vec::with_capacity(n),
        }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// What has been written.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf
    }

    /// The written bytes.
    pub fn into_inner(self) -> Vec<u8> {
        self.buf
    }

    /// Append raw bytes.
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self
    }

    /// Append a byte.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }

    /// Append a little-endian `u16`.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    /// Append a little-endian `u32`.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    /// Append a little-endian `u64`.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    /// Append a little-endian `u128`.
    pub fn u128(&mut self, v: u128) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    /// Append a little-endian IEEE 754 `f64`.
    pub fn f64(&mut self, v: f64) -> &mut Self {
        self.u64(v.to_bits())
    }

    /// Append an unsigned LEB128 varint (what [`Reader::varint`] reads).
    pub fn varint(&mut self, v: u64) -> &mut Self {
        put_varint(&mut self.buf, v);
        self
    }
}

/// Append `v` to `out` as an unsigned LEB128 varint (what
/// [`Reader::varint`] reads), for encoders that build a `Vec<u8>` directly.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_little_endian_in_order() {
        let b = [
            0xaa, 0x01, 0x02, 0x01, 0x02, 0x03, 0x04, 1, 2, 3, 4, 5, 6, 7, 8, 0xff,
        ];
        let mut r = Reader::new(&b);
        assert_eq!(r.u8(), Ok(0xaa));
        assert_eq!(r.u16(), Ok(0x0201));
        assert_eq!(r.u32(), Ok(0x0403_0201));
        assert_eq!(r.u64(), Ok(0x0807_0605_0403_0201));
        assert_eq!(r.position(), 15);
        assert_eq!(r.remaining(), 1);
        assert_eq!(r.take(1), Ok(&[0xff][..]));
        assert!(r.is_empty());
        assert_eq!(r.finish(), Ok(()));
    }

    #[test]
    fn truncation_reports_the_offset_needed_and_consumes_nothing() {
        let b = [1u8, 2, 3, 4, 5, 6];
        let mut r = Reader::new(&b);
        r.u16().unwrap();
        assert_eq!(r.u64(), Err(CursorError::Truncated { needed: 10, got: 6 }));
        // The failed read left the cursor where it was.
        assert_eq!(r.position(), 2);
        assert_eq!(r.u32(), Ok(0x0605_0403));
        assert_eq!(r.u8(), Err(CursorError::Truncated { needed: 7, got: 6 }));
        assert_eq!(
            r.take(usize::MAX),
            Err(CursorError::Truncated {
                needed: usize::MAX,
                got: 6
            })
        );
        assert_eq!(
            Reader::new(&[]).u128(),
            Err(CursorError::Truncated { needed: 16, got: 0 })
        );
    }

    #[test]
    fn finish_rejects_trailing_data_with_its_length() {
        let mut r = Reader::new(&[0u8; 7]);
        r.u32().unwrap();
        assert_eq!(r.clone().finish(), Err(CursorError::TrailingData(3)));
        r.skip(3).unwrap();
        assert_eq!(r.finish(), Ok(()));
    }

    #[test]
    fn rest_takes_everything_left() {
        let mut r = Reader::new(b"abcdef");
        r.skip(2).unwrap();
        assert_eq!(r.rest(), b"cdef");
        assert_eq!(r.rest(), b"");
        assert_eq!(r.finish(), Ok(()));
    }

    #[test]
    fn count_refuses_a_count_larger_than_the_bytes_left() {
        let b = [0u8; 20];
        let mut r = Reader::new(&b);
        r.skip(4).unwrap();
        assert_eq!(r.count(4, 4), Ok(4));
        assert_eq!(
            r.count(5, 4),
            Err(CursorError::Truncated {
                needed: 24,
                got: 20
            })
        );
        assert_eq!(
            r.count(u64::MAX, 8),
            Err(CursorError::Truncated {
                needed: usize::MAX,
                got: 20
            })
        );
        assert_eq!(r.count(u64::MAX, 0), Ok(u64::MAX as usize));
    }

    #[test]
    fn writer_output_reads_back() {
        let mut w = Writer::with_capacity(64);
        w.u8(7)
            .u16(0xbeef)
            .u32(0xdead_beef)
            .u64(u64::MAX - 1)
            .u128(1 << 100)
            .f64(0.25)
            .varint(300)
            .bytes(b"xy");
        assert_eq!(w.len(), 1 + 2 + 4 + 8 + 16 + 8 + 2 + 2);
        let b = w.into_inner();
        let mut r = Reader::new(&b);
        assert_eq!(r.u8(), Ok(7));
        assert_eq!(r.u16(), Ok(0xbeef));
        assert_eq!(r.u32(), Ok(0xdead_beef));
        assert_eq!(r.u64(), Ok(u64::MAX - 1));
        assert_eq!(r.u128(), Ok(1 << 100));
        assert_eq!(r.f64(), Ok(0.25));
        assert_eq!(r.varint(), Ok(300));
        assert_eq!(r.array::<2>(), Ok(*b"xy"));
        assert_eq!(r.finish(), Ok(()));
    }

    #[test]
    fn varints_round_trip_at_every_width() {
        for v in [0, 1, 0x7f, 0x80, 0x3fff, 0x4000, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut r = Reader::new(&b);
            assert_eq!(r.varint(), Ok(v), "{v:#x}");
            assert_eq!(r.finish(), Ok(()));
        }
        let mut b = Vec::new();
        put_varint(&mut b, u64::MAX);
        assert_eq!(b.len(), 10);
    }

    #[test]
    fn varints_reject_overlong_oversized_and_truncated_forms() {
        assert_eq!(
            Reader::new(&[0x80, 0x00]).varint(),
            Err(CursorError::Malformed("overlong varint"))
        );
        assert_eq!(
            Reader::new(&[0xff; 11]).varint(),
            Err(CursorError::Malformed("varint overflows 64 bits"))
        );
        let mut too_wide = [0xffu8; 10];
        too_wide[9] = 0x02;
        assert_eq!(
            Reader::new(&too_wide).varint(),
            Err(CursorError::Malformed("varint overflows 64 bits"))
        );
        assert_eq!(
            Reader::new(&[0x80, 0x80]).varint(),
            Err(CursorError::Truncated { needed: 3, got: 2 })
        );
    }

    #[test]
    fn errors_say_what_and_how_much() {
        assert_eq!(
            CursorError::Truncated { needed: 9, got: 4 }.to_string(),
            "truncated: needed 9 bytes, got 4"
        );
        assert_eq!(
            CursorError::TrailingData(2).to_string(),
            "2 trailing bytes after the end"
        );
    }
}
