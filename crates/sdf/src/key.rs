//! The header key a frame is looked up by, and the mask of the bits a
//! decision depended on.
//!
//! A [`HeaderKey`] holds the first [`KEY_BYTES`] bytes of a frame (zero
//! beyond its end), how many of them the frame really had, and the ingress
//! port. Bit positions count from the most significant bit of byte 0, the
//! order in which the bytes travel (bit 0 is the first bit of the
//! destination MAC), as the paper's `mark(in_pkt, bit_pos, len)` does.

use thiserror::Error;

/// How many bytes of a frame's headers a key holds: 128, enough for
/// Ethernet with two VLAN tags (22), IPv6 (40) or IPv4 with full options
/// (60), and TCP with options (up to 60 of the rest) or UDP. The paper's
/// prototype matched the first 64 bytes; 128 leaves room for QinQ + IPv6 +
/// ports without a second key width. Masks store only the 8-byte words they
/// mark, so a wide key costs lookups nothing for the bits nobody marks.
pub const KEY_BYTES: usize = 128;
/// [`KEY_BYTES`] in 8-byte words.
pub const KEY_WORDS: usize = KEY_BYTES / 8;
/// [`KEY_BYTES`] in bits: the largest `bit_pos + len` a mark may reach.
pub const KEY_BITS: usize = KEY_BYTES * 8;

/// A switch port number (physical, tunnel or logical).
pub type PortId = u16;

/// The bytes of a frame's headers plus its ingress port: what the cache is
/// looked up by.
///
/// Words hold the bytes in memory order (`u64::from_ne_bytes` of each
/// 8-byte chunk), the same order [`Mask`] uses, so masking is a word-wise
/// AND whatever the host's endianness.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct HeaderKey {
    pub(crate) words: [u64; KEY_WORDS],
    pub(crate) in_port: PortId,
    /// Bytes of the frame present in the key: `min(frame.len(), KEY_BYTES)`.
    pub(crate) len: u8,
}

impl HeaderKey {
    /// The key of `frame` arriving on `in_port`. Any length and content
    /// are accepted: bytes past [`KEY_BYTES`] are not part of the key,
    /// a shorter frame's key is zero past its end and remembers its length
    /// (so an entry that depended on bytes a frame lacks never matches it).
    pub fn from_frame(frame: &[u8], in_port: PortId) -> HeaderKey {
        let mut k = HeaderKey::empty(in_port);
        k.fill(frame);
        k
    }

    /// An all-zero key of length 0 on `in_port` (a buffer for [`Self::fill`]).
    pub fn empty(in_port: PortId) -> HeaderKey {
        HeaderKey {
            words: [0; KEY_WORDS],
            in_port,
            len: 0,
        }
    }

    /// Overwrite this key with `frame`'s headers, keeping the port: no
    /// allocation, for keys reused across batches.
    pub fn fill(&mut self, frame: &[u8]) {
        let n = frame.len().min(KEY_BYTES);
        let b: &mut [u8] = bytemuck::cast_slice_mut(&mut self.words);
        b[..n].copy_from_slice(&frame[..n]);
        b[n..].fill(0);
        self.len = n as u8;
    }

    /// Set the ingress port.
    pub fn set_in_port(&mut self, port: PortId) {
        self.in_port = port;
    }

    /// The ingress port.
    pub fn in_port(&self) -> PortId {
        self.in_port
    }

    /// How many header bytes the frame had (at most [`KEY_BYTES`]).
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Whether the frame was empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The key's header bytes (zero past [`Self::len`]).
    pub fn bytes(&self) -> [u8; KEY_BYTES] {
        let mut out = [0u8; KEY_BYTES];
        out.copy_from_slice(self.as_bytes());
        out
    }

    /// The key's header bytes, borrowed.
    pub fn as_bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.words)
    }

    /// Hash of the present header bytes, the port and the length (so
    /// frames that differ only in trailing zeros or ports hash apart): the
    /// port and length go into the seed, the bytes are hashed in place.
    /// Equal keys hash equal under one seed; with a secret seed an
    /// attacker cannot aim keys at one hash.
    pub fn hash_exact(&self, seed: u64) -> u64 {
        let extra = (u64::from(self.in_port) << 8 | u64::from(self.len))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        nexthop_hash::hash64(&self.as_bytes()[..self.len()], seed ^ extra)
    }
}

impl std::fmt::Debug for HeaderKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex: String = self.as_bytes()[..self.len()]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        f.debug_struct("HeaderKey")
            .field("in_port", &self.in_port)
            .field("len", &self.len)
            .field("bytes", &hex)
            .finish()
    }
}

/// A mark that cannot be made.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MarkError {
    /// The bits run past the end of the key.
    #[error("mark of bits {bit_pos}..{bit_pos}+{len} runs past the {KEY_BITS}-bit header key")]
    BeyondKey {
        /// First bit asked for.
        bit_pos: usize,
        /// Number of bits asked for.
        len: usize,
    },
}

/// The header bits (and whether the ingress port) a decision depended on:
/// the paper's `mark`, `mark_ingress`, `unmark`, `clear` on an `InPkt`.
///
/// Two decisions built from the same marks have equal masks and share one
/// wildcard subtable.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Mask {
    pub(crate) words: [u64; KEY_WORDS],
    pub(crate) ingress: bool,
    /// Header bytes the decision needed present ([`Mask::require_len`]).
    pub(crate) need: u8,
}

impl Mask {
    /// No bits marked, ingress port not marked.
    pub fn new() -> Mask {
        Mask::default()
    }

    /// Mark `len` bits starting at bit `bit_pos` (bit 0 = the most
    /// significant bit of byte 0). `len == 0` marks nothing.
    pub fn mark(&mut self, bit_pos: usize, len: usize) -> Result<(), MarkError> {
        self.set_bits(bit_pos, len, true)
    }

    /// Unmark `len` bits starting at `bit_pos` (bits not marked stay so).
    pub fn unmark(&mut self, bit_pos: usize, len: usize) -> Result<(), MarkError> {
        self.set_bits(bit_pos, len, false)
    }

    /// Mark whole bytes `start..start + len`.
    pub fn mark_bytes(&mut self, start: usize, len: usize) -> Result<(), MarkError> {
        let bad = MarkError::BeyondKey {
            bit_pos: start.saturating_mul(8),
            len: len.saturating_mul(8),
        };
        let (Some(pos), Some(n)) = (start.checked_mul(8), len.checked_mul(8)) else {
            return Err(bad);
        };
        self.mark(pos, n)
    }

    /// The decision also depended on the frame having at least `len`
    /// header bytes (say, an app that checked a header was complete before
    /// reading it): the entry never matches shorter frames. Marked bits
    /// imply this for the bytes they lie in; this covers a check of the
    /// length itself. A decision that depended on a frame being *short*
    /// cannot be expressed and must not be cached (send it with no marks
    /// and no state).
    pub fn require_len(&mut self, len: usize) -> Result<(), MarkError> {
        if len > KEY_BYTES {
            return Err(MarkError::BeyondKey {
                bit_pos: 0,
                len: len.saturating_mul(8),
            });
        }
        self.need = self.need.max(len as u8);
        Ok(())
    }

    /// Mark the ingress port as used by the decision.
    pub fn mark_ingress(&mut self) {
        self.ingress = true;
    }

    /// Unmark every bit and the ingress port.
    pub fn clear(&mut self) {
        *self = Mask::default();
    }

    /// Whether nothing at all is marked (no bits, no ingress port, no
    /// required length).
    pub fn is_empty(&self) -> bool {
        !self.ingress && self.need == 0 && self.words.iter().all(|&w| w == 0)
    }

    /// Whether `self` and `other` mark the same bits and the same ingress
    /// dependency (required lengths aside): decisions with such masks
    /// share a wildcard subtable.
    pub fn same_bits(&self, other: &Mask) -> bool {
        self.ingress == other.ingress && self.words == other.words
    }

    /// Whether the ingress port is marked.
    pub fn ingress_marked(&self) -> bool {
        self.ingress
    }

    /// Whether bit `bit_pos` is marked (false past the key).
    pub fn is_marked(&self, bit_pos: usize) -> bool {
        if bit_pos >= KEY_BITS {
            return false;
        }
        self.bytes()[bit_pos / 8] & (0x80 >> (bit_pos % 8)) != 0
    }

    /// Number of header bytes a frame needs for the decision to apply:
    /// one past the last byte with a marked bit, or the required length if
    /// larger (0 when neither).
    pub fn min_len(&self) -> usize {
        self.bits_min_len().max(usize::from(self.need))
    }

    /// One past the last byte with a marked bit (0 when none).
    pub(crate) fn bits_min_len(&self) -> usize {
        let b = self.bytes();
        b.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1)
    }

    /// The mask with its required length dropped: a subtable's identity.
    pub(crate) fn bits_only(&self) -> Mask {
        Mask {
            need: 0,
            ..self.clone()
        }
    }

    /// The mask as bytes (a marked bit is 1).
    pub fn bytes(&self) -> [u8; KEY_BYTES] {
        let mut out = [0u8; KEY_BYTES];
        out.copy_from_slice(bytemuck::cast_slice(&self.words));
        out
    }

    /// Whether `a` and `b` agree on every marked bit (and on the ingress
    /// port where it is marked): the match relation of a wildcard entry.
    pub fn matches(&self, a: &HeaderKey, b: &HeaderKey) -> bool {
        (!self.ingress || a.in_port == b.in_port)
            && self
                .words
                .iter()
                .zip(a.words.iter().zip(b.words.iter()))
                .all(|(m, (x, y))| (x ^ y) & m == 0)
    }

    fn set_bits(&mut self, bit_pos: usize, len: usize, on: bool) -> Result<(), MarkError> {
        let end = bit_pos
            .checked_add(len)
            .filter(|&e| e <= KEY_BITS)
            .ok_or(MarkError::BeyondKey { bit_pos, len })?;
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut self.words);
        // Whole bytes at once (a field is usually whole bytes: an app
        // marks addresses and ports), the ragged ends bit by bit.
        let mut bit = bit_pos;
        while bit < end {
            if bit.is_multiple_of(8) && end - bit >= 8 {
                let (from, to) = (bit / 8, end / 8);
                bytes[from..to].fill(if on { 0xff } else { 0 });
                bit = to * 8;
                continue;
            }
            let m = 0x80u8 >> (bit % 8);
            if on {
                bytes[bit / 8] |= m;
            } else {
                bytes[bit / 8] &= !m;
            }
            bit += 1;
        }
        Ok(())
    }
}

impl std::fmt::Debug for Mask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = self.bytes();
        let marked: Vec<String> = b
            .iter()
            .enumerate()
            .filter(|(_, &x)| x != 0)
            .map(|(i, x)| format!("{i}:{x:02x}"))
            .collect();
        f.debug_struct("Mask")
            .field("ingress", &self.ingress)
            .field("need", &self.need)
            .field("bytes", &marked)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_zero_is_the_top_bit_of_byte_zero() {
        let mut m = Mask::new();
        m.mark(0, 1).unwrap();
        m.mark(15, 2).unwrap();
        let b = m.bytes();
        assert_eq!(&b[..3], &[0x80, 0x01, 0x80]);
        assert_eq!(m.min_len(), 3);
        assert!(m.is_marked(0) && m.is_marked(15) && m.is_marked(16) && !m.is_marked(17));
    }

    #[test]
    fn marks_of_any_position_and_length_set_exactly_their_bits() {
        // Against a bit-by-bit reference: every start bit of the first
        // three bytes and every length up to five bytes, marked over a
        // mask that already holds other bits, then unmarked.
        let reference = |m: &Mask, on: &[(usize, usize, bool)]| {
            let mut want = [false; KEY_BITS];
            for &(p, l, set) in on {
                for b in &mut want[p..p + l] {
                    *b = set;
                }
            }
            let bytes: &[u8] = bytemuck::cast_slice(&m.words);
            (0..KEY_BITS).all(|i| ((bytes[i / 8] >> (7 - i % 8)) & 1 == 1) == want[i])
        };
        for pos in 0..24 {
            for len in 0..=40 {
                let mut m = Mask::new();
                m.mark(3, 9).unwrap();
                m.mark(pos, len).unwrap();
                assert!(
                    reference(&m, &[(3, 9, true), (pos, len, true)]),
                    "{pos} {len}"
                );
                m.unmark(pos, len).unwrap();
                assert!(
                    reference(&m, &[(3, 9, true), (pos, len, false)]),
                    "unmark {pos} {len}"
                );
            }
        }
    }

    #[test]
    fn mark_past_the_key_is_refused_and_changes_nothing() {
        let mut m = Mask::new();
        assert!(m.mark(KEY_BITS - 4, 5).is_err());
        assert!(m.mark(usize::MAX, 2).is_err());
        assert!(m.mark_bytes(usize::MAX / 4, 1).is_err());
        assert!(m.is_empty());
        m.mark(KEY_BITS - 4, 4).unwrap();
        assert_eq!(m.min_len(), KEY_BYTES);
    }

    #[test]
    fn unmark_and_clear_undo_marks() {
        let mut m = Mask::new();
        m.mark_bytes(12, 2).unwrap();
        m.unmark(12 * 8, 8).unwrap();
        assert_eq!(m.min_len(), 14);
        assert!(!m.is_marked(96) && m.is_marked(104));
        m.mark_ingress();
        m.clear();
        assert!(m.is_empty());
    }

    #[test]
    fn required_length_counts_as_a_mark_but_not_as_bits() {
        let mut m = Mask::new();
        m.mark_bytes(2, 1).unwrap();
        m.require_len(24).unwrap();
        assert_eq!(m.min_len(), 24);
        assert_eq!(m.bits_min_len(), 3);
        assert!(m.require_len(KEY_BYTES + 1).is_err());
        let mut n = Mask::new();
        n.mark_bytes(2, 1).unwrap();
        assert!(m.same_bits(&n) && m != n);
        let mut only = Mask::new();
        only.require_len(1).unwrap();
        assert!(!only.is_empty());
    }

    #[test]
    fn short_frame_key_is_zero_padded_and_keeps_its_length() {
        let k = HeaderKey::from_frame(&[1, 2, 3], 7);
        assert_eq!(k.len(), 3);
        assert_eq!(&k.bytes()[..4], &[1, 2, 3, 0]);
        let long = vec![0xAB; 1000];
        let k = HeaderKey::from_frame(&long, 1);
        assert_eq!(k.len(), KEY_BYTES);
        assert_ne!(
            HeaderKey::from_frame(&[1, 2], 0).hash_exact(1),
            HeaderKey::from_frame(&[1, 2, 0], 0).hash_exact(1)
        );
    }

    #[test]
    fn matches_compares_only_marked_bits_and_marked_ingress() {
        let a = HeaderKey::from_frame(&[0xF0, 0x0F], 1);
        let b = HeaderKey::from_frame(&[0xF1, 0xFF], 2);
        let mut m = Mask::new();
        m.mark(0, 7).unwrap();
        assert!(m.matches(&a, &b));
        m.mark(7, 1).unwrap();
        assert!(!m.matches(&a, &b));
        let mut m = Mask::new();
        m.mark_ingress();
        assert!(!m.matches(&a, &b));
    }
}
