//! Seeded key-stream generators of the FIB's key types (feature `keys`):
//! the datasets of `nexthop gen`, `nexthop demo` and `nexthop lab`, and
//! (re-exported by `nexthop-testutil`) of the tests and benchmarks.
//!
//! Every generator here is a pure function of a `u64` seed (through
//! [`Xoshiro256PlusPlus::seed_from_u64`] or a fixed LFSR), so a failing test or a
//! benchmark run can be reproduced from the seed it printed. Nothing reads the
//! clock or the OS entropy pool.
//!
//! * [`Lfsr64`]: the maximal-length 64-bit Galois LFSR that the Othello and
//!   Concise papers use to generate query names round-robin.
//! * [`uniform_u64`], [`distinct_u64`]: plain integer keys.
//! * [`Zipf`], [`zipf_indices`]: skewed popularity (which key a query asks for).
//! * [`macs`], [`ipv4s`], [`ipv6s`], [`five_tuples`], [`strings`]: realistic
//!   flat keys that share prefixes the way real L2/L3 tables and name tables do
//!   (see [`net`] and [`names`] for the models). Each call returns distinct keys.
//! * [`KeyKind`], [`gen_bytes`]: the same keys in their canonical byte form,
//!   chosen by name (`"u64"`, `"mac"`, `"ipv4"`, `"ipv6"`, `"5tuple"`, `"str"`)
//!   for command-line harnesses.

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

pub mod names;
pub mod net;

pub use names::strings;
pub use net::{five_tuples, ipv4s, ipv6s, macs, FiveTuple};

/// The generator behind every seeded function in this module.
pub fn rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

/// A maximal-length 64-bit Galois LFSR (right-shifting).
///
/// Feedback polynomial `x^64 + x^63 + x^61 + x^60 + 1`, toggle mask
/// `0xD800_0000_0000_0000`: from any nonzero state it visits all `2^64 - 1`
/// nonzero values before repeating, so it yields distinct, never-zero query
/// names in a fixed round-robin order (Othello, Concise evaluation setups).
/// Each call to `next` steps once and returns the new state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lfsr64 {
    state: u64,
}

impl Lfsr64 {
    /// The toggle mask for taps 64, 63, 61, 60.
    pub const MASK: u64 = 0xD800_0000_0000_0000;
    /// The state used in place of a zero seed (zero is the LFSR's fixed point).
    pub const ZERO_SEED_REPLACEMENT: u64 = 0x9E37_79B9_7F4A_7C15;

    /// An LFSR starting at `seed`; a zero seed is replaced by
    /// [`Self::ZERO_SEED_REPLACEMENT`].
    pub fn new(seed: u64) -> Self {
        let state = if seed == 0 {
            Self::ZERO_SEED_REPLACEMENT
        } else {
            seed
        };
        Lfsr64 { state }
    }

    /// The current state (the value last returned, or the seed).
    pub fn state(&self) -> u64 {
        self.state
    }
}

impl Iterator for Lfsr64 {
    type Item = u64;

    #[inline]
    fn next(&mut self) -> Option<u64> {
        let lsb = self.state & 1;
        self.state >>= 1;
        // Branch-free: `lsb.wrapping_neg()` is all ones when a one bit fell out.
        self.state ^= lsb.wrapping_neg() & Self::MASK;
        Some(self.state)
    }
}

/// `n` uniformly random `u64`s (duplicates possible, though unlikely).
pub fn uniform_u64(seed: u64, n: usize) -> Vec<u64> {
    let mut r = rng(seed);
    (0..n).map(|_| r.gen::<u64>()).collect()
}

/// `n` distinct uniformly random `u64`s, in generation order.
pub fn distinct_u64(seed: u64, n: usize) -> Vec<u64> {
    let mut r = rng(seed);
    let mut seen = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let x = r.gen::<u64>();
        if seen.insert(x) {
            out.push(x);
        }
    }
    out
}

/// Why a [`Zipf`] distribution could not be built.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum ZipfError {
    /// `n_items` was zero: there is nothing to sample.
    NoItems,
    /// The exponent was negative, NaN or infinite.
    BadExponent(f64),
}

impl fmt::Display for ZipfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZipfError::NoItems => write!(f, "Zipf distribution needs at least one item"),
            ZipfError::BadExponent(s) => {
                write!(f, "Zipf exponent must be finite and >= 0, got {s}")
            }
        }
    }
}

impl std::error::Error for ZipfError {}

/// A Zipf distribution over ranks `0..n_items`: `P(rank i) ∝ 1 / (i + 1)^s`.
///
/// Built once as a cumulative distribution (8 bytes per item); each sample is
/// a uniform draw and a binary search, `O(log n)`. Exponent 0 is uniform.
#[derive(Clone)]
pub struct Zipf {
    cdf: Vec<f64>,
    exponent: f64,
}

impl fmt::Debug for Zipf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Zipf")
            .field("n_items", &self.cdf.len())
            .field("exponent", &self.exponent)
            .finish()
    }
}

impl Zipf {
    /// A Zipf distribution over `n_items` ranks with exponent `exponent`.
    pub fn new(n_items: usize, exponent: f64) -> Result<Zipf, ZipfError> {
        if n_items == 0 {
            return Err(ZipfError::NoItems);
        }
        if !exponent.is_finite() || exponent < 0.0 {
            return Err(ZipfError::BadExponent(exponent));
        }
        let mut cdf = Vec::with_capacity(n_items);
        let mut total = 0.0f64;
        for i in 0..n_items {
            total += ((i + 1) as f64).powf(-exponent);
            cdf.push(total);
        }
        for c in &mut cdf {
            *c /= total;
        }
        // Guard against rounding: the last bucket must catch every u < 1.
        if let Some(last) = cdf.last_mut() {
            *last = 1.0;
        }
        Ok(Zipf { cdf, exponent })
    }

    /// The number of ranks.
    pub fn n_items(&self) -> usize {
        self.cdf.len()
    }

    /// The exponent `s`.
    pub fn exponent(&self) -> f64 {
        self.exponent
    }

    /// Draw a rank in `0..n_items`; rank 0 is the most popular.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        let u: f64 = rng.gen();
        let i = self.cdf.partition_point(|&c| c <= u);
        i.min(self.cdf.len() - 1)
    }
}

/// `count` ranks drawn from `Zipf::new(n_items, exponent)` with a seeded
/// generator.
pub fn zipf_indices(
    seed: u64,
    n_items: usize,
    exponent: f64,
    count: usize,
) -> Result<Vec<usize>, ZipfError> {
    let z = Zipf::new(n_items, exponent)?;
    let mut r = rng(seed);
    Ok((0..count).map(|_| z.sample(&mut r)).collect())
}

/// The key types the generators can produce, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// 64-bit integers, 8 bytes little-endian.
    U64,
    /// Ethernet MAC addresses, 6 bytes.
    Mac,
    /// IPv4 addresses, 4 bytes network order.
    Ipv4,
    /// IPv6 addresses, 16 bytes network order.
    Ipv6,
    /// IPv4 5-tuples, 13 bytes ([`FiveTuple::to_bytes`]).
    FiveTuple,
    /// Variable-length printable names ([`strings`], 8 to 64 bytes).
    Str,
}

impl KeyKind {
    /// Every kind, in declaration order.
    pub const ALL: [KeyKind; 6] = [
        KeyKind::U64,
        KeyKind::Mac,
        KeyKind::Ipv4,
        KeyKind::Ipv6,
        KeyKind::FiveTuple,
        KeyKind::Str,
    ];

    /// The name accepted by `FromStr` and printed by `Display`.
    pub fn name(self) -> &'static str {
        match self {
            KeyKind::U64 => "u64",
            KeyKind::Mac => "mac",
            KeyKind::Ipv4 => "ipv4",
            KeyKind::Ipv6 => "ipv6",
            KeyKind::FiveTuple => "5tuple",
            KeyKind::Str => "str",
        }
    }

    /// The byte length of every key of this kind, or `None` for [`KeyKind::Str`].
    pub fn fixed_len(self) -> Option<usize> {
        match self {
            KeyKind::U64 => Some(8),
            KeyKind::Mac => Some(6),
            KeyKind::Ipv4 => Some(4),
            KeyKind::Ipv6 => Some(16),
            KeyKind::FiveTuple => Some(13),
            KeyKind::Str => None,
        }
    }
}

impl fmt::Display for KeyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A key-kind name that is not one of `u64`, `mac`, `ipv4`, `ipv6`, `5tuple`, `str`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseKeyKindError {
    /// The rejected input.
    pub got: String,
}

impl fmt::Display for ParseKeyKindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown key kind {:?} (expected one of u64, mac, ipv4, ipv6, 5tuple, str)",
            self.got
        )
    }
}

impl std::error::Error for ParseKeyKindError {}

impl FromStr for KeyKind {
    type Err = ParseKeyKindError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KeyKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| ParseKeyKindError { got: s.to_owned() })
    }
}

/// `n` distinct keys of `kind` in canonical byte form: u64 little-endian
/// (8 bytes), MAC (6), IPv4 (4), IPv6 (16), 5-tuple (13, network order),
/// or raw name bytes (8 to 64).
pub fn gen_bytes(kind: KeyKind, seed: u64, n: usize) -> Vec<Vec<u8>> {
    match kind {
        KeyKind::U64 => distinct_u64(seed, n)
            .into_iter()
            .map(|x| x.to_le_bytes().to_vec())
            .collect(),
        KeyKind::Mac => macs(seed, n).into_iter().map(|m| m.to_vec()).collect(),
        KeyKind::Ipv4 => ipv4s(seed, n)
            .into_iter()
            .map(|a| a.octets().to_vec())
            .collect(),
        KeyKind::Ipv6 => ipv6s(seed, n)
            .into_iter()
            .map(|a| a.octets().to_vec())
            .collect(),
        KeyKind::FiveTuple => five_tuples(seed, n)
            .into_iter()
            .map(|t| t.to_bytes().to_vec())
            .collect(),
        KeyKind::Str => strings(seed, n, 8, 64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lfsr_first_steps_match_the_galois_recurrence() {
        let got: Vec<u64> = Lfsr64::new(1).take(3).collect();
        // 1 -> shift out a one bit, toggle the mask in.
        assert_eq!(got[0], Lfsr64::MASK);
        assert_eq!(got[1], Lfsr64::MASK >> 1);
        assert_eq!(got[2], Lfsr64::MASK >> 2);
    }

    #[test]
    fn lfsr_never_yields_zero_and_does_not_repeat_in_a_million_steps() {
        let mut seen: Vec<u64> = Lfsr64::new(0xDEAD_BEEF).take(1_000_000).collect();
        assert!(seen.iter().all(|&x| x != 0));
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 1_000_000);
    }

    #[test]
    fn lfsr_is_deterministic_and_zero_seed_is_replaced() {
        let a: Vec<u64> = Lfsr64::new(7).take(100).collect();
        let b: Vec<u64> = Lfsr64::new(7).take(100).collect();
        assert_eq!(a, b);
        assert_eq!(Lfsr64::new(0), Lfsr64::new(Lfsr64::ZERO_SEED_REPLACEMENT));
        assert_ne!(Lfsr64::new(0).next(), Some(0));
    }

    #[test]
    fn uniform_u64_is_reproducible_and_seed_dependent() {
        assert_eq!(uniform_u64(3, 1000), uniform_u64(3, 1000));
        assert_ne!(uniform_u64(3, 1000), uniform_u64(4, 1000));
        assert_eq!(uniform_u64(3, 0).len(), 0);
    }

    #[test]
    fn distinct_u64_has_no_duplicates() {
        let v = distinct_u64(11, 50_000);
        assert_eq!(v.len(), 50_000);
        let set: HashSet<u64> = v.iter().copied().collect();
        assert_eq!(set.len(), v.len());
        assert_eq!(v, distinct_u64(11, 50_000));
    }

    #[test]
    fn zipf_rejects_empty_negative_and_nan() {
        assert_eq!(Zipf::new(0, 1.0).err(), Some(ZipfError::NoItems));
        assert!(matches!(
            Zipf::new(10, -0.5),
            Err(ZipfError::BadExponent(_))
        ));
        assert!(matches!(
            Zipf::new(10, f64::NAN),
            Err(ZipfError::BadExponent(_))
        ));
        assert!(matches!(
            Zipf::new(10, f64::INFINITY),
            Err(ZipfError::BadExponent(_))
        ));
        assert!(zipf_indices(1, 0, 1.0, 10).is_err());
    }

    #[test]
    fn zipf_rank_zero_is_most_frequent_and_frequencies_follow_one_over_rank() {
        let n = 100;
        let draws = 400_000;
        let idx = zipf_indices(5, n, 1.0, draws).expect("valid parameters");
        let mut counts = vec![0usize; n];
        for &i in &idx {
            assert!(i < n);
            counts[i] += 1;
        }
        let max_rank = (0..n).max_by_key(|&i| counts[i]);
        assert_eq!(max_rank, Some(0));
        // With s = 1, count(rank r) / count(rank 0) ≈ 1 / (r + 1).
        for r in [1usize, 2, 4, 9] {
            let ratio = counts[r] as f64 / counts[0] as f64;
            let want = 1.0 / (r + 1) as f64;
            assert!(
                (ratio - want).abs() < 0.1 * want,
                "rank {r}: ratio {ratio}, want {want}"
            );
        }
    }

    #[test]
    fn zipf_with_exponent_zero_is_uniform_and_single_item_always_zero() {
        let z = Zipf::new(4, 0.0).expect("valid parameters");
        let mut r = rng(9);
        let mut counts = [0usize; 4];
        for _ in 0..40_000 {
            counts[z.sample(&mut r)] += 1;
        }
        assert!(counts.iter().all(|&c| (9_000..11_000).contains(&c)));
        let one = Zipf::new(1, 2.0).expect("valid parameters");
        assert!((0..100).all(|_| one.sample(&mut r) == 0));
    }

    #[test]
    fn key_kind_names_round_trip() {
        for k in KeyKind::ALL {
            assert_eq!(k.to_string().parse::<KeyKind>(), Ok(k));
        }
        assert_eq!("5tuple".parse::<KeyKind>(), Ok(KeyKind::FiveTuple));
        let err = "ipv5".parse::<KeyKind>();
        assert_eq!(
            err,
            Err(ParseKeyKindError {
                got: "ipv5".to_owned()
            })
        );
    }

    #[test]
    fn gen_bytes_gives_distinct_keys_of_the_canonical_length() {
        for k in KeyKind::ALL {
            let keys = gen_bytes(k, 42, 5_000);
            assert_eq!(keys.len(), 5_000, "{k}");
            let set: HashSet<&Vec<u8>> = keys.iter().collect();
            assert_eq!(set.len(), keys.len(), "{k} keys are not distinct");
            match k.fixed_len() {
                Some(len) => assert!(keys.iter().all(|b| b.len() == len), "{k}"),
                None => assert!(keys.iter().all(|b| (8..=64).contains(&b.len()))),
            }
            assert_eq!(keys, gen_bytes(k, 42, 5_000), "{k} is not deterministic");
        }
    }

    #[test]
    fn gen_bytes_u64_is_little_endian() {
        let ints = distinct_u64(3, 10);
        let bytes = gen_bytes(KeyKind::U64, 3, 10);
        for (x, b) in ints.iter().zip(&bytes) {
            assert_eq!(b.as_slice(), x.to_le_bytes());
        }
    }
}
