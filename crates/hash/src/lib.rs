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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
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

/// `kSecret[16..24] ^ kSecret[24..32]` of XXH3's default secret: the
/// seed-independent half of the 4- to 8-byte path's key (checked against
/// the `xxhash-rust` crate by the tests below).
const XXH3_FLIP_4TO8: u64 = 0xc4f0_2334_4dc9_94ac;
const XXH3_PRIME64_1: u64 = 0x9E37_79B1_85EB_CA87;
const XXH3_PRIME_MX2: u64 = 0x9FB2_1C65_1E98_DF25;

/// A seed prepared once for [`hash128`]: the same hash values, with the
/// seed-only part of XXH3-128's 4- to 8-byte path (a byte swap, a shift,
/// an xor and an add per call) computed at construction. For keys of 4 to
/// 8 bytes (u32, u64, MAC, IPv4) that is a third of the hash's
/// instructions, and it matters where the compiler cannot keep the work
/// out of a loop: a structure read by other threads reloads its seed
/// after each acquire load, so each lookup would redo it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreparedSeed {
    seed: u64,
    flip_4to8: u64,
}

impl PreparedSeed {
    /// Prepare `seed`.
    pub fn new(seed: u64) -> Self {
        let mixed = seed ^ (((seed as u32).swap_bytes() as u64) << 32);
        PreparedSeed {
            seed,
            flip_4to8: XXH3_FLIP_4TO8.wrapping_add(mixed),
        }
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// `hash128(bytes, seed)`.
    #[inline(always)]
    pub fn hash128(&self, bytes: &[u8]) -> Hash128 {
        let len = bytes.len();
        match (bytes.get(..4), bytes.get(len.saturating_sub(4)..)) {
            (Some(lo), Some(hi)) if len <= 8 => {
                let word = |b: &[u8]| b.iter().rev().fold(0u64, |w, &x| w << 8 | x as u64);
                let input = word(lo) | (word(hi) << 32);
                let m = ((input ^ self.flip_4to8) as u128)
                    * (XXH3_PRIME64_1.wrapping_add((len as u64) << 2) as u128);
                let (mut low, mut high) = (m as u64, (m >> 64) as u64);
                high = high.wrapping_add(low << 1);
                low ^= high >> 3;
                low ^= low >> 35;
                low = low.wrapping_mul(XXH3_PRIME_MX2);
                low ^= low >> 28;
                high ^= high >> 37;
                high = high.wrapping_mul(0x1656_6791_9E37_79F9);
                high ^= high >> 32;
                Hash128((high as u128) << 64 | low as u128)
            }
            _ => hash128(bytes, self.seed),
        }
    }
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

    /// [`Self::hash128`] with a [`PreparedSeed`] (same value).
    #[inline(always)]
    fn hash128_prepared(&self, seed: &PreparedSeed) -> Hash128 {
        self.with_bytes(|b| seed.hash128(b))
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

    /// The prepared seed gives XXH3-128's values at every length (the 4- to
    /// 8-byte path is ours, the rest the crate's), for seeds whose halves
    /// differ and the extremes.
    #[test]
    fn prepared_seed_hashes_as_xxh3() {
        let seeds = [0, 1, u64::MAX, 0x8000_0000, 0xdead_beef_0bad_f00d];
        let bytes: Vec<u8> = SeedSequence::new(5)
            .take(4)
            .flat_map(u64::to_le_bytes)
            .collect();
        for seed in seeds.into_iter().chain(SeedSequence::new(9).take(200)) {
            let p = PreparedSeed::new(seed);
            assert_eq!(p.seed(), seed);
            for len in 0..=bytes.len() {
                for start in 0..2 {
                    let b = &bytes[start..(start + len).min(bytes.len())];
                    assert_eq!(
                        p.hash128(b),
                        hash128(b, seed),
                        "seed {seed:#x} len {}",
                        b.len()
                    );
                }
            }
            for k in SeedSequence::new(seed).take(50) {
                assert_eq!(k.hash128_prepared(&p), k.hash128(seed));
                assert_eq!((k as u32).hash128_prepared(&p), (k as u32).hash128(seed));
            }
        }
    }

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
