//! The validated configuration of a Bloomfwd table ([`Config`]): direct
//! bits, group levels, false-positive target, hash kinds.

use crate::addr::{Address, NextHop, Prefix};
use crate::hash::HashKind;

/// Direct-array bits of the default IPv6 configuration: `2^16` slots of
/// 8 bytes (512 KiB, cache-resident), prefixes up to /16 and group masks
/// at /16 granularity.
pub const V6_DIRECT_BITS: u8 = 16;

/// Distinct prefixes per length (`counts[len]`).
pub fn length_counts<A: Address>(routes: &[(Prefix<A>, NextHop)]) -> Vec<u64> {
    let mut counts = vec![0u64; A::BITS as usize + 1];
    let mut seen = hashbrown::HashSet::new();
    for &(p, _) in routes {
        if seen.insert(p) {
            counts[p.len() as usize] += 1;
        }
    }
    counts
}

/// Validated Bloomfwd configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Prefixes of length `<= direct_bits` go to a direct array of
    /// `2^direct_bits` next hops (at most 24).
    pub direct_bits: u8,
    /// Group levels, strictly increasing, each in `direct_bits+1 ..= BITS`.
    /// Prefixes longer than the last level get a level of their own.
    pub levels: Vec<u8>,
    /// Target false-positive rate of every filter, in `(0, 1)`; each filter
    /// is sized for its own key count (asymmetric filters).
    pub fpr: f64,
    /// Hash of the filters.
    pub filter_hash: HashKind,
    /// Hash of the tables; when equal to `filter_hash` the filter's `h1`
    /// addresses the table (hash reuse).
    pub table_hash: HashKind,
    /// A prefix whose expansion into its group would exceed `2^this` keys
    /// gets a group (level) of its own instead (and the table is rebuilt).
    pub max_expansion_bits: u8,
}

/// A configuration that cannot work.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `direct_bits` above 24.
    #[error("direct array of 2^{0} entries is too large (at most 2^24)")]
    DirectTooLarge(u8),
    /// Levels not strictly increasing, or outside `direct_bits+1 ..= BITS`.
    #[error("group levels {levels:?} must be strictly increasing and within {lo}..={hi}")]
    BadLevels {
        /// As given.
        levels: Vec<u8>,
        /// Smallest allowed.
        lo: u8,
        /// Largest allowed.
        hi: u8,
    },
    /// FPR outside `(0, 1)`.
    #[error("false-positive target {0} is not in (0, 1)")]
    BadFpr(f64),
    /// `max_expansion_bits` above 24.
    #[error("max expansion 2^{0} is too large (at most 2^24)")]
    ExpansionTooLarge(u8),
    /// Building with this configuration would need more memory than allowed.
    #[error(
        "the configuration needs about {bytes} bytes to build, more than the limit of {limit} bytes (raise it with --max-memory)"
    )]
    TooLarge {
        /// Estimated bytes ([`Config::estimate_bytes`]).
        bytes: u128,
        /// The limit.
        limit: u64,
    },
}

impl Config {
    /// The paper's IPv4 layout: direct array for `<= /20`, groups at 24 and
    /// 32, H2 in both stages, 30% false-positive target (section 6.2).
    pub fn ipv4() -> Self {
        Config {
            direct_bits: 20,
            levels: vec![24, 32],
            fpr: 0.3,
            filter_hash: HashKind::H2,
            table_hash: HashKind::H2,
            max_expansion_bits: 16,
        }
    }

    /// IPv6 with the given levels (see [`crate::dpcpe`]): a direct array of
    /// `2^V6_DIRECT_BITS` slots for the short prefixes (its group masks
    /// send most addresses nowhere else), Mix64 in both stages (cheaper
    /// than Murmur3, the paper's choice), 1% false-positive target (the
    /// IPv6 structure is small and cache-resident: filters of 9.6 instead
    /// of 2.5 bits per key cost ~40 KB and save the bucket probes of most
    /// false positives; the paper's 30% suits its memory budget). Levels
    /// must lie above [`V6_DIRECT_BITS`].
    pub fn ipv6(levels: Vec<u8>) -> Self {
        Config {
            direct_bits: V6_DIRECT_BITS,
            levels,
            fpr: 0.01,
            filter_hash: HashKind::Mix64,
            table_hash: HashKind::Mix64,
            max_expansion_bits: 16,
        }
    }

    /// IPv6 with levels chosen by DPCPE above the direct array for the
    /// prefix-length counts of `routes` with at most `n` levels
    /// ([`crate::dpcpe::choose_levels`]); the default configuration's
    /// levels when there is nothing to expand.
    pub fn ipv6_dpcpe<A: Address>(routes: &[(Prefix<A>, NextHop)], n: usize) -> Self {
        let levels = crate::dpcpe::choose_levels(&length_counts(routes), V6_DIRECT_BITS, n)
            .map(|p| p.levels)
            .unwrap_or_else(|| vec![32, 48, 64, A::BITS]);
        Config::ipv6(levels)
    }

    /// Check the configuration for addresses of `bits` bits.
    pub fn validate(&self, bits: u8) -> Result<(), ConfigError> {
        if self.direct_bits > 24 || self.direct_bits > bits {
            return Err(ConfigError::DirectTooLarge(self.direct_bits));
        }
        let ok = self.levels.windows(2).all(|w| w[0] < w[1])
            && self
                .levels
                .iter()
                .all(|&l| l > self.direct_bits && l <= bits);
        if !ok {
            return Err(ConfigError::BadLevels {
                levels: self.levels.clone(),
                lo: self.direct_bits + 1,
                hi: bits,
            });
        }
        if !(self.fpr > 0.0 && self.fpr < 1.0) {
            return Err(ConfigError::BadFpr(self.fpr));
        }
        if self.max_expansion_bits > 24 {
            return Err(ConfigError::ExpansionTooLarge(self.max_expansion_bits));
        }
        Ok(())
    }

    /// An upper estimate of the bytes a table of `bits`-bit addresses built
    /// with this configuration from routes with these distinct-prefix
    /// counts per length ([`length_counts`]) allocates, computed without
    /// allocating: the direct array, and for every group its expanded keys
    /// (each prefix counted as `2^(level - len)` keys, with the levels
    /// added for prefixes that expand too far, as the build adds them),
    /// the Bloom filter with its counters, the hash table and the
    /// expansion map the build fills.
    pub fn estimate_bytes(&self, bits: u8, counts: &[u64]) -> u128 {
        let d = self.direct_bits;
        // Direct slot (next hop, group mask) plus its prefix length.
        let mut total: u128 = (1u128 << d.min(24)) * 17;
        let mut keys: std::collections::BTreeMap<u8, u128> = std::collections::BTreeMap::new();
        for (len, &c) in counts.iter().enumerate().take(bits as usize + 1) {
            let len = len as u8;
            if c == 0 || len <= d {
                continue;
            }
            let (level, each) = match self.levels.iter().find(|&&l| l >= len) {
                Some(&l) if l - len <= self.max_expansion_bits => (l, 1u128 << (l - len)),
                _ => (len, 1),
            };
            *keys.entry(level).or_insert(0) += c as u128 * each;
        }
        for &l in &self.levels {
            keys.entry(l).or_insert(0);
        }
        // Table slots (with load and power-of-two rounding) plus the
        // build's expansion map entry, per key.
        let per_key: u128 = if bits > 32 { 160 } else { 48 };
        let lg = if self.fpr > 0.0 && self.fpr < 1.0 {
            (1.0 / self.fpr).log2()
        } else {
            1.0
        };
        for (&level, &n) in &keys {
            let n = n.min(1u128 << level.min(127));
            let sized = n.max(1024) as f64;
            let m = (sized * lg / std::f64::consts::LN_2)
                .ceil()
                .min(u32::MAX as f64 / 2.0) as u128;
            // Filter bits plus a u16 counter per bit.
            total += m / 8 + 2 * m + n * per_key;
        }
        total
    }
}
