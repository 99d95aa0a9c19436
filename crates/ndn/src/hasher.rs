//! Per-prefix hashes of a name, all computed in one pass over its bytes.
//!
//! * [`Strategy::VerifyEach`] ("CityA" in the dissertation, §3.3.2): a fast
//!   non-cryptographic hash, chained per component —
//!   `h_i = XXH3-64(component_i, seed = h_{i-1})`, `h_0 = XXH3-64("", seed)`,
//!   the chain `nexthop_wire::ndn::Name` caches (with its seed, a FIB
//!   reuses a parsed name's hashes and hashes nothing). Every
//!   fingerprint match is verified against the stored string at once.
//! * [`Strategy::VerifyAtEnd`] ("SipE"): a keyed hash (SipHash-1-3 with a
//!   secret 128-bit key) of each prefix's bytes, streamed: the hasher state
//!   is cloned and finished at every component boundary. Only the final
//!   match is verified; a false positive triggers a fallback search that
//!   verifies every match. The key makes false positives unforgeable.

use std::hash::Hasher;

use nexthop_wire::ndn::name::{empty_prefix_hash, extend_prefix_hash};
use siphasher::sip::SipHasher13;

use crate::name::NameView;

/// String-matching strategy (§3.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Verify the string at every fingerprint match (fast hash).
    VerifyEach,
    /// Verify once at the end (keyed hash), fall back on a false positive.
    VerifyAtEnd,
}

impl Strategy {
    pub(crate) fn code(self) -> u8 {
        match self {
            Strategy::VerifyEach => 0,
            Strategy::VerifyAtEnd => 1,
        }
    }
    pub(crate) fn from_code(c: u8) -> Option<Strategy> {
        match c {
            0 => Some(Strategy::VerifyEach),
            1 => Some(Strategy::VerifyAtEnd),
            _ => None,
        }
    }
}

/// The hash family of one FIB: strategy plus its seed/key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefixHasher {
    pub(crate) strategy: Strategy,
    pub(crate) k0: u64,
    pub(crate) k1: u64,
}

impl PrefixHasher {
    /// A hasher for `strategy` keyed by `(k0, k1)` (`k1` unused by the fast hash).
    pub fn new(strategy: Strategy, k0: u64, k1: u64) -> PrefixHasher {
        PrefixHasher { strategy, k0, k1 }
    }

    /// Hashes of the prefixes of 1..=`out.len()` components of `name`
    /// (`out.len() <= name.component_count()`), written to `out[i - 1]`.
    #[inline]
    pub fn hash_prefixes<N: NameView + ?Sized>(&self, name: &N, out: &mut [u64]) {
        let tlv = name.tlv();
        match self.strategy {
            Strategy::VerifyEach => {
                let mut h = empty_prefix_hash(self.k0);
                let mut start = 0;
                for (i, o) in out.iter_mut().enumerate() {
                    let end = name.prefix_end(i + 1);
                    h = extend_prefix_hash(h, &tlv[start..end]);
                    *o = h;
                    start = end;
                }
            }
            Strategy::VerifyAtEnd => {
                let mut s = SipHasher13::new_with_keys(self.k0, self.k1);
                let mut start = 0;
                for (i, o) in out.iter_mut().enumerate() {
                    let end = name.prefix_end(i + 1);
                    s.write(&tlv[start..end]);
                    *o = s.clone().finish();
                    start = end;
                }
            }
        }
    }

    /// Hash of the first `n` components of a stored string whose component
    /// end offsets are `ends` (`1 <= n <= ends.len()`).
    pub(crate) fn hash_stored_prefix(&self, tlv: &[u8], ends: &[u32], n: usize) -> u64 {
        struct Stored<'a>(&'a [u8], &'a [u32]);
        impl NameView for Stored<'_> {
            fn tlv(&self) -> &[u8] {
                self.0
            }
            fn component_count(&self) -> usize {
                self.1.len()
            }
            fn prefix_end(&self, n: usize) -> usize {
                if n == 0 {
                    0
                } else {
                    self.1[n - 1] as usize
                }
            }
        }
        let mut buf = [0u64; crate::fib::MAX_LEVELS];
        let n = n.clamp(1, buf.len());
        self.hash_prefixes(&Stored(tlv, ends), &mut buf[..n]);
        buf[n - 1]
    }
}
