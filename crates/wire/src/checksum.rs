//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! One home for the one's-complement arithmetic:
//! [`Ipv4Packet::checksum_ok`](crate::Ipv4Packet::checksum_ok) verifies
//! with it, [`Ipv4HeaderMut::decrement_ttl`](crate::Ipv4HeaderMut::decrement_ttl)
//! updates the checksum after a TTL decrement with [`checksum_update`], and
//! frame generators fill headers with [`ipv4_header_checksum`].

/// Offset of the checksum field in an IPv4 header.
const IPV4_CHECKSUM: usize = 10;

/// Fold a sum of 16-bit words into 16 bits with end-around carries.
#[inline(always)]
fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Sum of `data` as big-endian 16-bit words, not folded (an odd last byte
/// is the high byte of a word whose low byte is zero, RFC 1071 §4.1).
#[inline(always)]
fn word_sum(data: &[u8]) -> u64 {
    let mut pairs = data.chunks_exact(2);
    let mut sum: u64 = pairs
        .by_ref()
        .map(|p| u64::from(u16::from_be_bytes([p[0], p[1]])))
        .sum();
    if let [last] = pairs.remainder() {
        sum += u64::from(*last) << 8;
    }
    sum
}

/// The 16-bit one's-complement sum of `data` (RFC 1071), not complemented.
/// A header with a correct checksum sums to `0xFFFF`.
#[inline]
pub fn ones_complement_sum(data: &[u8]) -> u16 {
    fold(word_sum(data))
}

/// The Internet checksum of `data` (RFC 1071): the complement of its
/// one's-complement sum. Over a header that holds its correct checksum it
/// is zero.
#[inline]
pub fn internet_checksum(data: &[u8]) -> u16 {
    !ones_complement_sum(data)
}

/// The IPv4 header checksum of `header` (options included) computed from
/// scratch, the checksum field (bytes 10..12) counted as zero: the value to
/// store in that field.
#[inline]
pub fn ipv4_header_checksum(header: &[u8]) -> u16 {
    let field = match header.get(IPV4_CHECKSUM..IPV4_CHECKSUM + 2) {
        Some(f) => u64::from(u16::from_be_bytes([f[0], f[1]])),
        None => 0,
    };
    // Subtracting the field's word from the sum leaves the sum without it;
    // the field is one of the words summed, so this cannot underflow.
    !fold(word_sum(header) - field)
}

/// RFC 1624 eqn. 3: the checksum `hc` of a header after one of its 16-bit
/// words changed from `old` to `new`, `HC' = ~(~HC + ~m + m')` in
/// one's-complement arithmetic. Gives the same value as recomputing the
/// checksum over the changed header (eqn. 3 never turns a checksum into
/// `0xFFFF`, the case RFC 1141's form got wrong).
#[inline(always)]
pub fn checksum_update(hc: u16, old: u16, new: u16) -> u16 {
    !fold(u64::from(!hc) + u64::from(!old) + u64::from(new))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1071 §3's worked example: the one's-complement sum of
    /// 00 01 f2 03 f4 f5 f6 f7 is ddf2, so the checksum is 220d.
    #[test]
    fn rfc1071_example_sum_and_checksum() {
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(ones_complement_sum(&data), 0xddf2);
        assert_eq!(internet_checksum(&data), 0x220d);
        // Byte-order independence (RFC 1071 §2(B)): swapped bytes give the
        // swapped sum.
        let swapped: Vec<u8> = data.chunks(2).flat_map(|p| [p[1], p[0]]).collect();
        assert_eq!(ones_complement_sum(&swapped), 0xf2dd);
    }

    /// A textbook IPv4 header (192.168.0.1 -> 192.168.0.199, UDP, TTL 64)
    /// whose checksum field holds b861.
    const HEADER: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    #[test]
    fn ipv4_header_checksum_ignores_the_field_and_matches_the_known_value() {
        assert_eq!(ipv4_header_checksum(&HEADER), 0xb861);
        let mut zeroed = HEADER;
        zeroed[10..12].fill(0);
        assert_eq!(ipv4_header_checksum(&zeroed), 0xb861);
        assert_eq!(internet_checksum(&zeroed), 0xb861);
        // Verification: a header holding its checksum sums to ffff.
        assert_eq!(ones_complement_sum(&HEADER), 0xffff);
        assert_eq!(internet_checksum(&HEADER), 0);
    }

    #[test]
    fn odd_length_pads_the_last_byte_with_zero() {
        assert_eq!(ones_complement_sum(&[0x12]), 0x1200);
        assert_eq!(ones_complement_sum(&[0xab, 0xcd, 0x12]), 0xbdcd);
        assert_eq!(ones_complement_sum(&[]), 0);
    }

    #[test]
    fn carries_wrap_around() {
        // ffff + 0001 = 1_0000 -> 0001 after the end-around carry.
        assert_eq!(ones_complement_sum(&[0xff, 0xff, 0x00, 0x01]), 0x0001);
        // Long inputs do not overflow the accumulator.
        assert_eq!(ones_complement_sum(&vec![0xff; 1 << 20]), 0xffff);
    }

    /// xorshift64: seeded, dependency-free randomness for the tests.
    fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut x = seed;
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// An IPv4 header of `ihl` words with random fields, TTL `ttl` and a
    /// valid checksum.
    fn header(next: &mut impl FnMut() -> u64, ihl: u8, ttl: u8) -> Vec<u8> {
        let len = usize::from(ihl) * 4;
        let mut h: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        h[0] = 0x40 | ihl;
        h[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        h[8] = ttl;
        let c = ipv4_header_checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h
    }

    #[test]
    fn incremental_update_equals_full_recomputation_on_random_headers() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        for i in 0..100_000u32 {
            let ihl = 5 + (i % 11) as u8;
            let ttl = 2 + (next() % 254) as u8;
            let mut h = header(&mut next, ihl, ttl);
            // Any 16-bit word but the checksum changes (TTL|protocol most
            // often, the word a router changes).
            let w = if i % 2 == 0 {
                4
            } else {
                match (next() % (u64::from(ihl) * 2)) as usize {
                    5 => 0,
                    w => w,
                }
            };
            let old = u16::from_be_bytes([h[2 * w], h[2 * w + 1]]);
            let new = if w == 4 { old - 0x100 } else { next() as u16 };
            let hc = u16::from_be_bytes([h[10], h[11]]);
            h[2 * w..2 * w + 2].copy_from_slice(&new.to_be_bytes());
            let inc = checksum_update(hc, old, new);
            assert_eq!(inc, ipv4_header_checksum(&h), "header {h:02x?} word {w}");
            h[10..12].copy_from_slice(&inc.to_be_bytes());
            // Verifies: the words, checksum included, sum to 0xFFFF.
            assert_eq!(ones_complement_sum(&h), 0xffff);
        }
    }

    /// A header with TTL `ttl` whose identification field is chosen so that
    /// the one's-complement sum of its words with `ttl_in_sum` as TTL (and
    /// the checksum field zero) is 0xFFFF: its checksum at that TTL is
    /// 0x0000.
    fn header_with_zero_checksum_at(ttl: u8, ttl_in_sum: u8) -> Vec<u8> {
        let mut h = header(&mut xorshift(u64::from(ttl) + 1), 5, ttl);
        h[4..6].copy_from_slice(&[0, 0]);
        h[8] = ttl_in_sum;
        // checksum = !fold(S + ident) = 0  <=>  fold(S + ident) = 0xFFFF.
        let s = !ipv4_header_checksum(&h);
        h[4..6].copy_from_slice(&(!s).to_be_bytes());
        h[8] = ttl;
        let c = ipv4_header_checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h
    }

    #[test]
    fn checksum_corners_0000_and_ffff_match_full_recomputation() {
        // The checksum after the decrement is 0x0000.
        let mut h = header_with_zero_checksum_at(64, 63);
        let hc = u16::from_be_bytes([h[10], h[11]]);
        let old = u16::from_be_bytes([h[8], h[9]]);
        h[8] = 63;
        let new = u16::from_be_bytes([h[8], h[9]]);
        assert_eq!(ipv4_header_checksum(&h), 0x0000);
        assert_eq!(checksum_update(hc, old, new), 0x0000);
        // The checksum before the decrement is 0x0000 (its complement, the
        // sum, is 0xFFFF).
        let mut h = header_with_zero_checksum_at(64, 64);
        assert_eq!(u16::from_be_bytes([h[10], h[11]]), 0x0000);
        let old = u16::from_be_bytes([h[8], h[9]]);
        h[8] = 63;
        let new = u16::from_be_bytes([h[8], h[9]]);
        assert_eq!(checksum_update(0, old, new), ipv4_header_checksum(&h));
        // Eqn. 3 never yields 0xFFFF for a nonzero header (RFC 1624 §3).
        for hc in [0x0000, 0x0001, 0xfffe, 0xffff] {
            for (old, new) in [(0x4011, 0x3f11), (0x0111, 0x0011), (0x0100, 0x0000)] {
                assert_ne!(checksum_update(hc, old, new), 0xffff, "{hc:04x}");
            }
        }
    }

    #[test]
    fn ttl_decrement_update_matches_the_textbook_header() {
        let mut h = HEADER;
        let old = u16::from_be_bytes([h[8], h[9]]);
        let new = old - 0x100;
        h[8] -= 1;
        assert_eq!(checksum_update(0xb861, old, new), ipv4_header_checksum(&h));
        assert_eq!(checksum_update(0xb861, old, new), 0xb961);
    }
}
