//! The paper's integer hash functions (section 4.1) and their batched,
//! vectorised forms (section 4.3.2).
//!
//! Each key gets a pair `(h1, h2)`; a Bloom filter with `k` hashes probes
//! bits `g_i = h1 + i * h2` (double hashing, `h2` forced odd), and the hash
//! table behind it is addressed with `h1` again when the table uses the same
//! hash function (the paper's hash reuse).
//!
//! * [`HashKind::H2`]: Algorithm 3 (xor-shift-multiply by `0x45d9f3b`).
//! * [`HashKind::Murmur3`]: MurmurHash3 specialised to one 32-bit block
//!   (IPv4) or to two 64-bit lanes of the x64 variant (IPv6).
//! * [`HashKind::Knuth`]: multiplicative hashing `x * 2654435761`; kept only
//!   to reproduce the paper's Fig. 1 (it preserves divisibility).
//! * [`HashKind::Mix64`]: not in the paper: one 64-bit finaliser
//!   (MurmurHash3's `fmix64`, two multiplies) of the key folded to 64 bits;
//!   `h1` is its low half, `h2` its high half. Keys of at most 64 bits (all
//!   IPv4 keys, IPv6 groups up to /64) are hashed exactly once, about a
//!   quarter of Murmur3-128's work; longer IPv6 keys fold the high half in
//!   with one more multiply.
//!
//! Batched hashing of 32-bit keys picks AVX-512, AVX2 or scalar code at run
//! time ([`Simd::detect`]); every path computes the same values as the
//! scalar functions (tested on every path the CPU offers).

/// Which hash function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum HashKind {
    /// Algorithm 3 of the paper.
    H2 = 0,
    /// MurmurHash3 specialised to integer keys.
    Murmur3 = 1,
    /// Knuth's multiplicative method (for the Fig. 1 sweep only).
    Knuth = 2,
    /// One 64-bit finaliser over the key folded to 64 bits (not in the
    /// paper; the cheapest of the four for IPv6 keys).
    Mix64 = 3,
}

impl HashKind {
    /// From the persisted code.
    pub fn from_code(c: u8) -> Option<Self> {
        match c {
            0 => Some(HashKind::H2),
            1 => Some(HashKind::Murmur3),
            2 => Some(HashKind::Knuth),
            3 => Some(HashKind::Mix64),
            _ => None,
        }
    }
    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            HashKind::H2 => "h2",
            HashKind::Murmur3 => "murmur3",
            HashKind::Knuth => "knuth",
            HashKind::Mix64 => "mix64",
        }
    }
}

impl std::str::FromStr for HashKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "h2" => Ok(HashKind::H2),
            "murmur3" => Ok(HashKind::Murmur3),
            "knuth" => Ok(HashKind::Knuth),
            "mix64" => Ok(HashKind::Mix64),
            _ => Err(format!("unknown hash {s:?} (h2, murmur3, knuth, mix64)")),
        }
    }
}

const H2_MUL: u32 = 0x045d_9f3b;
const SALT: u32 = 0x9e37_79b9;
const KNUTH_MUL: u32 = 2_654_435_761;
const M3_C1: u32 = 0xcc9e_2d51;
const M3_C2: u32 = 0x1b87_3593;
const M3_SEED2: u32 = 0x7f4a_7c15;

/// Algorithm 3 (H2).
#[inline(always)]
pub fn h2(mut x: u32) -> u32 {
    x = ((x >> 16) ^ x).wrapping_mul(H2_MUL);
    x = ((x >> 16) ^ x).wrapping_mul(H2_MUL);
    (x >> 16) ^ x
}

/// MurmurHash3 (x86, 32-bit) of one 4-byte block.
#[inline(always)]
pub fn murmur3_32(x: u32, seed: u32) -> u32 {
    let k = x.wrapping_mul(M3_C1).rotate_left(15).wrapping_mul(M3_C2);
    let mut h = (seed ^ k)
        .rotate_left(13)
        .wrapping_mul(5)
        .wrapping_add(0xe654_6b64);
    h ^= 4;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// Knuth's multiplicative hash.
#[inline(always)]
pub fn knuth(x: u32) -> u32 {
    x.wrapping_mul(KNUTH_MUL)
}

/// The `(h1, h2)` pair of a 32-bit key (`h2` odd).
#[inline(always)]
pub fn pair32(kind: HashKind, x: u32) -> (u32, u32) {
    match kind {
        HashKind::H2 => (h2(x), h2(x ^ SALT) | 1),
        HashKind::Murmur3 => (murmur3_32(x, 0), murmur3_32(x, M3_SEED2) | 1),
        HashKind::Knuth => (knuth(x), knuth(x ^ SALT) | 1),
        HashKind::Mix64 => split64(mix64(x as u64)),
    }
}

/// Multiplier folding the high half of a 128-bit key into 64 bits.
const FOLD_MUL: u64 = 0x9e37_79b9_7f4a_7c15;

/// [`HashKind::Mix64`] of a key of at most 64 bits: `fmix64(x ^ seed)`
/// (the seed keeps key 0 from hashing to 0).
#[inline(always)]
pub fn mix64(x: u64) -> u64 {
    fmix64(x ^ 0x2545_f491_4f6c_dd1d)
}

/// `(low half, high half | 1)`.
#[inline(always)]
fn split64(h: u64) -> (u32, u32) {
    (h as u32, (h >> 32) as u32 | 1)
}

#[inline(always)]
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// MurmurHash3 (x64) body over the two 64-bit halves of a 128-bit key,
/// finalised to 64 bits.
#[inline(always)]
pub fn murmur3_128(x: u128) -> u64 {
    const C1: u64 = 0x87c3_7b91_1142_53d5;
    const C2: u64 = 0x4cf5_ad43_2745_937f;
    let lo = x as u64;
    let hi = (x >> 64) as u64;
    let mut h1: u64 = 0;
    let mut h2: u64 = 0;
    h1 ^= lo.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
    h1 = h1.rotate_left(27).wrapping_mul(5).wrapping_add(0x52dc_e729);
    h2 ^= hi.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
    h2 = h2.rotate_left(31).wrapping_mul(5).wrapping_add(0x3849_5ab5);
    h1 ^= 16;
    h2 ^= 16;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    fmix64(h1) ^ fmix64(h2)
}

/// The `(h1, h2)` pair of a 128-bit key (`h2` odd).
#[inline(always)]
pub fn pair128(kind: HashKind, x: u128) -> (u32, u32) {
    match kind {
        HashKind::Murmur3 => {
            let h = murmur3_128(x);
            (h as u32, (h >> 32) as u32 | 1)
        }
        HashKind::H2 => {
            let w = [
                x as u32,
                (x >> 32) as u32,
                (x >> 64) as u32,
                (x >> 96) as u32,
            ];
            let h = h2(w[0] ^ h2(w[1] ^ h2(w[2] ^ h2(w[3]))));
            (h, h2(h ^ SALT) | 1)
        }
        HashKind::Mix64 => {
            let hi = (x >> 64) as u64;
            // A key of <= 64 bits has hi == 0 and hashes like a u64 key.
            split64(mix64(
                (x as u64) ^ hi.wrapping_mul(FOLD_MUL).rotate_left(32),
            ))
        }
        HashKind::Knuth => {
            let f = (x as u64) ^ ((x >> 64) as u64).rotate_left(32);
            let h = f.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            ((h >> 32) as u32, h as u32 | 1)
        }
    }
}

/// Keys a Bloomfwd group hashes: the right-aligned first bits of an address.
pub trait KeyHash: Copy {
    /// The `(h1, h2)` pair.
    fn pair(self, kind: HashKind) -> (u32, u32);
}

impl KeyHash for u32 {
    #[inline(always)]
    fn pair(self, kind: HashKind) -> (u32, u32) {
        pair32(kind, self)
    }
}

impl KeyHash for u128 {
    #[inline(always)]
    fn pair(self, kind: HashKind) -> (u32, u32) {
        pair128(kind, self)
    }
}

/// A batched-hashing code path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Simd {
    /// Plain Rust, one key at a time.
    Scalar,
    /// AVX2, 8 keys per instruction.
    Avx2,
    /// AVX-512F, 16 keys per instruction.
    Avx512,
}

impl Simd {
    /// The widest path this CPU supports.
    pub fn detect() -> Simd {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return Simd::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                return Simd::Avx2;
            }
        }
        Simd::Scalar
    }

    /// Short name (`scalar`, `avx2`, `avx512`), as [`str::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Simd::Scalar => "scalar",
            Simd::Avx2 => "avx2",
            Simd::Avx512 => "avx512",
        }
    }

    /// Every path this CPU supports (scalar first).
    pub fn available() -> Vec<Simd> {
        let mut v = vec![Simd::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                v.push(Simd::Avx2);
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                v.push(Simd::Avx512);
            }
        }
        v
    }
}

impl std::str::FromStr for Simd {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        [Simd::Scalar, Simd::Avx2, Simd::Avx512]
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown SIMD path {s:?} (scalar, avx2, avx512)"))
    }
}

/// Hash `keys` into `h1`/`h2` (same lengths) with the chosen path. A path
/// the CPU lacks falls back to scalar, so the call is always safe.
pub fn pair32_batch(kind: HashKind, keys: &[u32], h1: &mut [u32], h2o: &mut [u32], simd: Simd) {
    let n = keys.len().min(h1.len()).min(h2o.len());
    let (keys, h1, h2o) = (&keys[..n], &mut h1[..n], &mut h2o[..n]);
    #[cfg(target_arch = "x86_64")]
    {
        let done = match simd {
            // 64-bit multiplies: scalar (AVX2 has no 64-bit mullo).
            _ if kind == HashKind::Mix64 => 0,
            Simd::Avx512 if std::arch::is_x86_feature_detected!("avx512f") => {
                // SAFETY: (1) avx512f was detected just above, the only
                // precondition of the target_feature function.
                unsafe { x86::pair32_avx512(kind, keys, h1, h2o) }
            }
            Simd::Avx2 | Simd::Avx512 if std::arch::is_x86_feature_detected!("avx2") => {
                // SAFETY: (1) avx2 was detected just above.
                unsafe { x86::pair32_avx2(kind, keys, h1, h2o) }
            }
            _ => 0,
        };
        for i in done..n {
            (h1[i], h2o[i]) = pair32(kind, keys[i]);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = simd;
        for i in 0..n {
            (h1[i], h2o[i]) = pair32(kind, keys[i]);
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::*;
    use std::arch::x86_64::*;

    /// Hashes the first `8 * floor(n / 8)` keys; returns how many.
    #[target_feature(enable = "avx2")]
    pub(super) fn pair32_avx2(
        kind: HashKind,
        keys: &[u32],
        h1: &mut [u32],
        h2o: &mut [u32],
    ) -> usize {
        let n = keys.len() / 8 * 8;
        let salt = _mm256_set1_epi32(SALT as i32);
        let one = _mm256_set1_epi32(1);
        let mut i = 0;
        while i < n {
            // SAFETY: (1) i + 8 <= n <= keys.len(), so the 32-byte unaligned
            // load reads inside `keys`.
            let x = unsafe { _mm256_loadu_si256(keys.as_ptr().add(i) as *const __m256i) };
            let (a, b) = match kind {
                HashKind::H2 => (
                    h2_v8(x),
                    _mm256_or_si256(h2_v8(_mm256_xor_si256(x, salt)), one),
                ),
                HashKind::Murmur3 => (
                    m3_v8(x, _mm256_setzero_si256()),
                    _mm256_or_si256(m3_v8(x, _mm256_set1_epi32(M3_SEED2 as i32)), one),
                ),
                // Routed to scalar by pair32_batch; never reached.
                HashKind::Mix64 => return 0,
                HashKind::Knuth => {
                    let m = _mm256_set1_epi32(KNUTH_MUL as i32);
                    (
                        _mm256_mullo_epi32(x, m),
                        _mm256_or_si256(_mm256_mullo_epi32(_mm256_xor_si256(x, salt), m), one),
                    )
                }
            };
            // SAFETY: (1) h1 and h2o are at least n long (the caller cut all
            // three slices to one length), so both 32-byte stores are inside.
            unsafe {
                _mm256_storeu_si256(h1.as_mut_ptr().add(i) as *mut __m256i, a);
                _mm256_storeu_si256(h2o.as_mut_ptr().add(i) as *mut __m256i, b);
            }
            i += 8;
        }
        n
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn h2_v8(mut x: __m256i) -> __m256i {
        let m = _mm256_set1_epi32(H2_MUL as i32);
        x = _mm256_mullo_epi32(_mm256_xor_si256(_mm256_srli_epi32::<16>(x), x), m);
        x = _mm256_mullo_epi32(_mm256_xor_si256(_mm256_srli_epi32::<16>(x), x), m);
        _mm256_xor_si256(_mm256_srli_epi32::<16>(x), x)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn rotl8<const L: i32, const R: i32>(x: __m256i) -> __m256i {
        _mm256_or_si256(_mm256_slli_epi32::<L>(x), _mm256_srli_epi32::<R>(x))
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn m3_v8(x: __m256i, seed: __m256i) -> __m256i {
        let mut k = _mm256_mullo_epi32(x, _mm256_set1_epi32(M3_C1 as i32));
        k = rotl8::<15, 17>(k);
        k = _mm256_mullo_epi32(k, _mm256_set1_epi32(M3_C2 as i32));
        let mut h = rotl8::<13, 19>(_mm256_xor_si256(seed, k));
        h = _mm256_add_epi32(
            _mm256_mullo_epi32(h, _mm256_set1_epi32(5)),
            _mm256_set1_epi32(0xe654_6b64u32 as i32),
        );
        h = _mm256_xor_si256(h, _mm256_set1_epi32(4));
        h = _mm256_xor_si256(h, _mm256_srli_epi32::<16>(h));
        h = _mm256_mullo_epi32(h, _mm256_set1_epi32(0x85eb_ca6bu32 as i32));
        h = _mm256_xor_si256(h, _mm256_srli_epi32::<13>(h));
        h = _mm256_mullo_epi32(h, _mm256_set1_epi32(0xc2b2_ae35u32 as i32));
        _mm256_xor_si256(h, _mm256_srli_epi32::<16>(h))
    }

    /// Hashes the first `16 * floor(n / 16)` keys; returns how many.
    #[target_feature(enable = "avx512f")]
    pub(super) fn pair32_avx512(
        kind: HashKind,
        keys: &[u32],
        h1: &mut [u32],
        h2o: &mut [u32],
    ) -> usize {
        let n = keys.len() / 16 * 16;
        let salt = _mm512_set1_epi32(SALT as i32);
        let one = _mm512_set1_epi32(1);
        let mut i = 0;
        while i < n {
            // SAFETY: (1) i + 16 <= n <= keys.len(): the 64-byte load is inside.
            let x = unsafe { _mm512_loadu_si512(keys.as_ptr().add(i) as *const __m512i) };
            // SAFETY: (1) avx512f: this function's own target feature.
            // Mix64 is routed to scalar by pair32_batch; never reached.
            let Some(a) = (unsafe { h1_v16(kind, x) }) else {
                return 0;
            };
            let b = _mm512_or_si512(
                match kind {
                    HashKind::Murmur3 => m3_v16(x, _mm512_set1_epi32(M3_SEED2 as i32)),
                    // SAFETY: as above.
                    _ => unsafe { h1_v16(kind, _mm512_xor_si512(x, salt)) }.unwrap_or(a),
                },
                one,
            );
            // SAFETY: (1) h1 and h2o are at least n long, so both 64-byte
            // stores are inside.
            unsafe {
                _mm512_storeu_si512(h1.as_mut_ptr().add(i) as *mut __m512i, a);
                _mm512_storeu_si512(h2o.as_mut_ptr().add(i) as *mut __m512i, b);
            }
            i += 16;
        }
        n
    }

    /// The `h1` of 16 keys ([`pair32`]'s first hash), or `None` for
    /// [`HashKind::Mix64`] (64-bit multiplies: scalar only).
    ///
    /// # Safety
    /// The CPU must support avx512f (callers are compiled for it, so this
    /// inlines into them).
    #[inline(always)]
    pub(crate) unsafe fn h1_v16(kind: HashKind, x: __m512i) -> Option<__m512i> {
        // SAFETY: (1) avx512f: the caller's contract, the only precondition
        // of these target_feature functions.
        unsafe {
            match kind {
                HashKind::H2 => Some(h2_v16(x)),
                HashKind::Murmur3 => Some(m3_v16(x, _mm512_setzero_si512())),
                HashKind::Knuth => Some(_mm512_mullo_epi32(x, _mm512_set1_epi32(KNUTH_MUL as i32))),
                HashKind::Mix64 => None,
            }
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn h2_v16(mut x: __m512i) -> __m512i {
        let m = _mm512_set1_epi32(H2_MUL as i32);
        x = _mm512_mullo_epi32(_mm512_xor_si512(_mm512_srli_epi32::<16>(x), x), m);
        x = _mm512_mullo_epi32(_mm512_xor_si512(_mm512_srli_epi32::<16>(x), x), m);
        _mm512_xor_si512(_mm512_srli_epi32::<16>(x), x)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn m3_v16(x: __m512i, seed: __m512i) -> __m512i {
        let mut k = _mm512_mullo_epi32(x, _mm512_set1_epi32(M3_C1 as i32));
        k = _mm512_rol_epi32::<15>(k);
        k = _mm512_mullo_epi32(k, _mm512_set1_epi32(M3_C2 as i32));
        let mut h = _mm512_rol_epi32::<13>(_mm512_xor_si512(seed, k));
        h = _mm512_add_epi32(
            _mm512_mullo_epi32(h, _mm512_set1_epi32(5)),
            _mm512_set1_epi32(0xe654_6b64u32 as i32),
        );
        h = _mm512_xor_si512(h, _mm512_set1_epi32(4));
        h = _mm512_xor_si512(h, _mm512_srli_epi32::<16>(h));
        h = _mm512_mullo_epi32(h, _mm512_set1_epi32(0x85eb_ca6bu32 as i32));
        h = _mm512_xor_si512(h, _mm512_srli_epi32::<13>(h));
        h = _mm512_mullo_epi32(h, _mm512_set1_epi32(0xc2b2_ae35u32 as i32));
        _mm512_xor_si512(h, _mm512_srli_epi32::<16>(h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_KINDS: [HashKind; 4] = [
        HashKind::H2,
        HashKind::Murmur3,
        HashKind::Knuth,
        HashKind::Mix64,
    ];

    #[test]
    fn mix64_of_a_short_u128_key_equals_its_u64_hash() {
        for x in [0u64, 1, 0xdead_beef, u64::MAX] {
            assert_eq!(pair128(HashKind::Mix64, x as u128), split64(mix64(x)));
            assert_eq!(
                pair32(HashKind::Mix64, x as u32),
                split64(mix64(x as u32 as u64))
            );
        }
        // The high half changes the hash.
        assert_ne!(
            pair128(HashKind::Mix64, 1u128 << 64),
            pair128(HashKind::Mix64, 0)
        );
    }

    #[test]
    fn mix64_spreads_consecutive_keys_over_blocks_and_buckets() {
        // Consecutive keys (what expansion produces) must not cluster: the
        // low 10 bits of h1 (bucket index) and its top 10 bits (block
        // choice by multiply-shift) hit every value about equally.
        for shift in [0u32, 22] {
            let mut hist = vec![0u32; 1024];
            for x in 0..(1u64 << 20) {
                let (h1, _) = pair128(HashKind::Mix64, x as u128);
                hist[((h1 >> shift) & 1023) as usize] += 1;
            }
            let (lo, hi) = (hist.iter().min().unwrap(), hist.iter().max().unwrap());
            assert!(*lo > 850 && *hi < 1200, "shift {shift}: {lo}..{hi}");
        }
    }

    #[test]
    fn hash_names_round_trip() {
        for kind in ALL_KINDS {
            assert_eq!(kind.name().parse::<HashKind>(), Ok(kind));
            assert_eq!(HashKind::from_code(kind as u8), Some(kind));
        }
        assert_eq!(HashKind::from_code(4), None);
        for simd in [Simd::Scalar, Simd::Avx2, Simd::Avx512] {
            assert_eq!(simd.name().parse::<Simd>(), Ok(simd));
        }
        assert!("sse".parse::<Simd>().is_err());
    }

    #[test]
    fn murmur3_32_matches_reference_vectors() {
        // MurmurHash3_x86_32 of the 4 bytes 0x00000000 with seed 0 and of
        // "\x01\x00\x00\x00" (little-endian key 1) with seed 0.
        assert_eq!(murmur3_32(0, 0), 0x2362_f9de);
        assert_eq!(murmur3_32(1, 0), 0xfbf1_402a);
    }

    #[test]
    fn h2_matches_algorithm_3() {
        let x: u32 = 0x0102_0304;
        let mut y = ((x >> 16) ^ x).wrapping_mul(0x45d9f3b);
        y = ((y >> 16) ^ y).wrapping_mul(0x45d9f3b);
        y ^= y >> 16;
        assert_eq!(h2(x), y);
    }

    #[test]
    fn every_simd_path_hashes_like_scalar() {
        let keys: Vec<u32> = (0..1000u32)
            .map(|i| i.wrapping_mul(0x9e37_79b9) ^ (i << 7))
            .collect();
        for kind in ALL_KINDS {
            let want: Vec<(u32, u32)> = keys.iter().map(|&k| pair32(kind, k)).collect();
            for simd in Simd::available() {
                // Odd lengths exercise the scalar tail of each path.
                for n in [0, 1, 7, 8, 15, 16, 17, 999, 1000] {
                    let mut a = vec![0; n];
                    let mut b = vec![0; n];
                    pair32_batch(kind, &keys[..n], &mut a, &mut b, simd);
                    for i in 0..n {
                        assert_eq!((a[i], b[i]), want[i], "{kind:?} {simd:?} n={n} i={i}");
                    }
                }
            }
        }
    }

    #[test]
    fn second_hash_is_odd() {
        for kind in ALL_KINDS {
            for x in [0u32, 1, 2, 0xffff_ffff] {
                assert_eq!(pair32(kind, x).1 & 1, 1);
                assert_eq!(pair128(kind, x as u128 * 3).1 & 1, 1);
            }
        }
    }
}
