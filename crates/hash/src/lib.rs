//! Seeded hash families for nexthop's tables.
//!
//! Every table in nexthop hashes its keys as bytes with a *seeded* hash, so a
//! control plane can pick new seeds when a structure must be rebuilt (Othello
//! reseeds when its bipartite graph cannot hold a key set). The family used is
//! XXH3 (128-bit output), which is fast on the short keys of forwarding (6-byte
//! MACs, 8-byte integers, 13-byte 5-tuples) and passes SMHasher.
//!
//! The 128-bit output is split into independent words by [`Hash128`]:
//! two 32-bit words address the two arrays of an Othello, the upper 64 bits
//! feed fingerprints and check fields.
//!
//! [`reduce`] maps a uniform 32-bit word onto `0..m` with Lemire's
//! multiply-shift range reduction, which needs no power-of-two `m` and no
//! division.
#![forbid(unsafe_code)]

use std::net::{Ipv4Addr, Ipv6Addr};

/// A 128-bit hash value with named views.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hash128(pub u128);

impl Hash128 {
    /// The low 32 bits.
    #[inline(always)]
    pub fn w0(self) -> u32 {
        self.0 as u32
    }
    /// Bits 32..64.
    #[inline(always)]
    pub fn w1(self) -> u32 {
        (self.0 >> 32) as u32
    }
    /// The low 64 bits.
    #[inline(always)]
    pub fn lo(self) -> u64 {
        self.0 as u64
    }
    /// The upper 64 bits, independent of [`Self::w0`] and [`Self::w1`].
    #[inline(always)]
    pub fn hi(self) -> u64 {
        (self.0 >> 64) as u64
    }
}

/// Hash `bytes` with `seed` (XXH3-128).
#[inline(always)]
pub fn hash128(bytes: &[u8], seed: u64) -> Hash128 {
    Hash128(xxhash_rust::xxh3::xxh3_128_with_seed(bytes, seed))
}

/// Hash `bytes` with `seed` to 64 bits (XXH3-64).
#[inline(always)]
pub fn hash64(bytes: &[u8], seed: u64) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(bytes, seed)
}

/// Map a uniform 32-bit `x` onto `0..m` (Lemire's multiply-shift).
///
/// Unbiased up to `m / 2^32`; `m == 0` maps everything to 0.
#[inline(always)]
pub fn reduce(x: u32, m: u32) -> u32 {
    ((x as u64 * m as u64) >> 32) as u32
}

/// A stream of seeds, derived with SplitMix64 from a starting value, so a
/// rebuild's choice of seeds is reproducible from the first seed.
#[derive(Clone, Debug)]
pub struct SeedSequence(u64);

impl SeedSequence {
    /// A sequence starting from `start`.
    pub fn new(start: u64) -> Self {
        SeedSequence(start)
    }

    /// The current state; `SeedSequence::new(s.state())` continues `s`.
    pub fn state(&self) -> u64 {
        self.0
    }
}

impl Iterator for SeedSequence {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Some(z ^ (z >> 31))
    }
}

/// A key that nexthop tables can hash: anything with a canonical byte form.
///
/// The byte form is the network (wire) form where one exists, so a MAC read
/// from a frame and a MAC parsed from a routes file hash the same.
pub trait KeyBytes {
    /// Call `f` with the canonical bytes of the key.
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R;

    /// Seeded 128-bit hash of the key's bytes.
    #[inline(always)]
    fn hash128(&self, seed: u64) -> Hash128 {
        self.with_bytes(|b| hash128(b, seed))
    }
}

macro_rules! key_bytes_int {
    ($($t:ty),*) => {$(
        impl KeyBytes for $t {
            #[inline(always)]
            fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
                f(&self.to_le_bytes())
            }
        }
    )*};
}
key_bytes_int!(u16, u32, u64, u128);

impl<const N: usize> KeyBytes for [u8; N] {
    #[inline(always)]
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(self)
    }
}

impl KeyBytes for [u8] {
    #[inline(always)]
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(self)
    }
}

impl KeyBytes for Vec<u8> {
    #[inline(always)]
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(self)
    }
}

impl KeyBytes for str {
    #[inline(always)]
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(self.as_bytes())
    }
}

impl KeyBytes for String {
    #[inline(always)]
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(self.as_bytes())
    }
}

impl KeyBytes for Ipv4Addr {
    #[inline(always)]
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&self.octets())
    }
}

impl KeyBytes for Ipv6Addr {
    #[inline(always)]
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&self.octets())
    }
}

impl<T: KeyBytes + ?Sized> KeyBytes for &T {
    #[inline(always)]
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        (**self).with_bytes(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce_stays_in_range_and_covers_it() {
        let m = 1000;
        let mut seen = vec![false; m as usize];
        for x in SeedSequence::new(1).take(100_000) {
            let r = reduce(x as u32, m);
            assert!(r < m);
            seen[r as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(reduce(u32::MAX, 0), 0);
    }

    #[test]
    fn different_seeds_give_different_hashes() {
        let a = 42u64.hash128(1);
        let b = 42u64.hash128(2);
        assert_ne!(a, b);
        assert_eq!(a, 42u64.hash128(1));
    }

    #[test]
    fn ip_and_array_keys_hash_as_their_wire_bytes() {
        let ip = Ipv4Addr::new(192, 0, 2, 1);
        assert_eq!(ip.hash128(7), [192u8, 0, 2, 1].hash128(7));
        assert_eq!("abc".hash128(7), b"abc".to_vec().hash128(7));
    }

    #[test]
    fn seed_sequence_is_reproducible() {
        let a: Vec<u64> = SeedSequence::new(5).take(4).collect();
        let b: Vec<u64> = SeedSequence::new(5).take(4).collect();
        assert_eq!(a, b);
        assert_eq!(a.len(), 4);
        assert_ne!(a[0], a[1]);
    }
}
