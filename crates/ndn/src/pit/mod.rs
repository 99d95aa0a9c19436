//! Pending Interest Tables (dissertation chapter 5), no I/O.
//!
//! * [`ExactPit`] (edge router): full names, Interest aggregation, in- and
//!   out-records with nonces and PIT tokens, a dead-nonce list, Data
//!   matching by exact name, CanBePrefix and implicit digest.
//! * [`FingerprintPit`] (core router, §5.4): a `d`-left table of 64-byte
//!   buckets of packed 8-byte entries (occupy bit, collision bit, `w`-bit
//!   fingerprint, `t`-bit expiry, face bit-vector), a bounded overflow
//!   table, lazy expiry and Algorithm 1's collision semantics; optionally
//!   segregated by incoming face (§5.4.3).
//!
//! Time is always passed in (`now`, milliseconds on the caller's monotonic
//! clock); no table reads a clock. Each table is owned by one forwarding
//! thread (one partition per thread) and has no internal locking.

mod dead_nonce;
pub mod exact;
pub mod fingerprint;

use std::hash::{BuildHasherDefault, Hasher};

use thiserror::Error;

pub use dead_nonce::DeadNonceList;
pub use exact::{
    DataMatch, Downstream, ExactPit, ExactPitConfig, ExactPitStats, InRecord, InsertOutcome,
    InterestIn, OutRecord, PitEntry, PitId,
};
pub use fingerprint::{
    FingerprintPit, FingerprintPitConfig, FingerprintPitStats, FpInsert, FpInterest, FpKey,
    FpSatisfy,
};

/// Milliseconds on the caller's monotonic clock.
pub type Millis = u64;

/// A face (NFD FaceId); the tables never interpret it.
pub type FaceId = u32;

/// InterestLifetime when an Interest carries none (NDN packet spec v0.3).
pub const DEFAULT_INTEREST_LIFETIME_MS: Millis = 4000;

/// TLV-TYPE of an ImplicitSha256DigestComponent.
pub const TT_IMPLICIT_DIGEST: u8 = 1;

/// Longest NDNLPv2 PitToken the tables store.
pub const MAX_TOKEN_LEN: usize = 32;

/// An NDNLPv2 PitToken (1 to [`MAX_TOKEN_LEN`] octets), stored inline.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PitToken {
    len: u8,
    bytes: [u8; MAX_TOKEN_LEN],
}

impl PitToken {
    /// A token with the given octets; `None` when empty or longer than
    /// [`MAX_TOKEN_LEN`].
    pub fn new(bytes: &[u8]) -> Option<PitToken> {
        if bytes.is_empty() || bytes.len() > MAX_TOKEN_LEN {
            return None;
        }
        let mut b = [0u8; MAX_TOKEN_LEN];
        b[..bytes.len()].copy_from_slice(bytes);
        Some(PitToken {
            len: bytes.len() as u8,
            bytes: b,
        })
    }

    /// The token's octets.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

impl std::fmt::Debug for PitToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PitToken(")?;
        for b in self.as_bytes() {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

/// A configuration value the PIT or Content Store refuses.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `field` is `value`, which is outside `expected`.
    #[error("{field} = {value} is out of range: expected {expected}")]
    OutOfRange {
        /// The configuration field.
        field: &'static str,
        /// The value given.
        value: u64,
        /// What the field accepts.
        expected: &'static str,
    },
    /// Fields that fit separately do not fit together.
    #[error("{what} needs {needed}, at most {limit} is possible")]
    TooLarge {
        /// Which combination.
        what: &'static str,
        /// What the fields ask for.
        needed: u64,
        /// The bound.
        limit: u64,
    },
}

pub(crate) fn check_range(
    field: &'static str,
    value: u64,
    min: u64,
    max: u64,
    expected: &'static str,
) -> Result<(), ConfigError> {
    if value < min || value > max {
        return Err(ConfigError::OutOfRange {
            field,
            value,
            expected,
        });
    }
    Ok(())
}

/// Whether the last component of a name's TLV value is an implicit SHA-256
/// digest; returns the byte offset where it starts and the digest.
pub(crate) fn split_implicit_digest(tlv: &[u8], last_start: usize) -> Option<(usize, &[u8; 32])> {
    let last = tlv.get(last_start..)?;
    if last.len() == 34 && last[0] == TT_IMPLICIT_DIGEST && last[1] == 32 {
        let d: &[u8; 32] = last[2..].try_into().ok()?;
        Some((last_start, d))
    } else {
        None
    }
}

/// A `Hasher` for keys that are already uniformly mixed 64-bit hashes.
#[derive(Default, Clone, Copy, Debug)]
pub(crate) struct PreHashed(u64);

impl Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

pub(crate) type PreHashedMap<V> = std::collections::HashMap<u64, V, BuildHasherDefault<PreHashed>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_can_move_to_their_forwarding_thread() {
        fn send<T: Send>() {}
        send::<ExactPit>();
        send::<FingerprintPit>();
        send::<crate::cs::ContentStore>();
    }

    #[test]
    fn pit_token_holds_one_to_32_octets() {
        assert!(PitToken::new(&[]).is_none());
        assert!(PitToken::new(&[0; 33]).is_none());
        let t = PitToken::new(&[1, 2, 3]).unwrap();
        assert_eq!(t.as_bytes(), &[1, 2, 3]);
        assert_eq!(format!("{t:?}"), "PitToken(010203)");
    }

    #[test]
    fn implicit_digest_component_is_recognised_only_with_type_1_and_32_octets() {
        let mut tlv = vec![8, 1, b'a', 1, 32];
        tlv.extend_from_slice(&[7; 32]);
        let (at, d) = split_implicit_digest(&tlv, 3).unwrap();
        assert_eq!(at, 3);
        assert_eq!(d, &[7; 32]);
        tlv[3] = 8;
        assert!(split_implicit_digest(&tlv, 3).is_none());
        assert!(split_implicit_digest(&tlv, 99).is_none());
    }
}
