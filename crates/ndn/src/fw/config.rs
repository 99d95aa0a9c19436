//! The forwarder's configuration and counters.

use nexthop_wire::ndn::NdnError;

use super::Strategy;
use crate::cs::CsConfig;
use crate::fib::Prefetch;
use crate::pit::{
    check_range, ConfigError, ExactPitConfig, FingerprintPitConfig, Millis, PitToken,
};

/// Which PIT the forwarder runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PitMode {
    /// Edge router: names, aggregation, nonces, tokens (NFD).
    Exact(ExactPitConfig),
    /// Core router: fingerprint-only entries (dissertation §5.4); face ids
    /// must be below its `faces`.
    Fingerprint(FingerprintPitConfig),
}

/// Forwarder configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FwConfig {
    /// The PIT and its configuration.
    pub pit: PitMode,
    /// The Content Store (`None`: no caching).
    pub cs: Option<CsConfig>,
    /// The strategy for `/` until the strategy-choice table says otherwise.
    pub default_strategy: Strategy,
    /// Initial retransmission suppression interval (`0..=60000` ms): a
    /// retransmission or another downstream's Interest sooner than this
    /// after the last upstream send is aggregated without being sent
    /// again. Each retransmission that is forwarded doubles the entry's
    /// interval up to [`Self::retx_suppression_max_ms`] (NFD's
    /// RetxSuppressionExponential: 10 ms, x2, 250 ms); the fingerprint
    /// PIT keeps no entry state and uses the initial interval.
    pub retx_suppression_ms: Millis,
    /// Largest suppression interval (`retx_suppression_ms..=60000` ms;
    /// equal to it: a fixed interval).
    pub retx_suppression_max_ms: Millis,
    /// Faces `0..max_faces` are accepted (`1..=2^20`); per-face counters
    /// are kept for each.
    pub max_faces: u32,
    /// Store unsolicited Data in the Content Store instead of only
    /// dropping them (NFD's default policy drops them).
    pub cache_unsolicited: bool,
    /// The PitToken put on Interests sent upstream (the threads layer puts
    /// its thread id here so Data and Nacks come back to this partition).
    pub upstream_token: Option<PitToken>,
    /// Seed of the generator of Nonces for Interests that carry none.
    pub nonce_seed: u64,
    /// How [`Forwarder::process_batch`](super::Forwarder::process_batch) runs: [`Prefetch::None`]
    /// processes packet by packet; `First`/`All` decode the batch,
    /// prefetch every packet's Content Store and PIT lines and its
    /// Interests' first (`First`) or every (`All`, the default: 1.7x
    /// `process` at 10^6 FIB rules and PIT entries, see the crate README)
    /// FIB bucket, on the prefix hashes the decoder cached, then run the
    /// pipeline packet by packet. Every value is valid; the results are
    /// the same for all three.
    pub batch_prefetch: Prefetch,
}

impl Default for FwConfig {
    fn default() -> FwConfig {
        FwConfig {
            pit: PitMode::Exact(ExactPitConfig::default()),
            cs: Some(CsConfig::default()),
            default_strategy: Strategy::BestRoute,
            retx_suppression_ms: 10,
            retx_suppression_max_ms: 250,
            max_faces: 4096,
            cache_unsolicited: false,
            upstream_token: None,
            nonce_seed: 0x6677_5f6e_6f6e_6365,
            batch_prefetch: Prefetch::All,
        }
    }
}

impl FwConfig {
    /// Check every field (and the PIT's and CS's configurations).
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_range(
            "retx_suppression_ms",
            self.retx_suppression_ms,
            0,
            60_000,
            "0..=60000 ms",
        )?;
        check_range(
            "retx_suppression_max_ms",
            self.retx_suppression_max_ms,
            self.retx_suppression_ms,
            60_000,
            "retx_suppression_ms..=60000 ms",
        )?;
        check_range("max_faces", self.max_faces as u64, 1, 1 << 20, "1..=2^20")?;
        match &self.pit {
            PitMode::Exact(c) => c.validate()?,
            PitMode::Fingerprint(c) => c.validate()?,
        }
        if let Some(c) = &self.cs {
            c.validate()?;
        }
        Ok(())
    }
}

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DropReason {
    /// TLV ends early or a length exceeds the buffer.
    Truncated,
    /// An unknown critical TLV-TYPE.
    UnknownCritical,
    /// Any other decoding error.
    Malformed,
    /// An Interest or Data whose name has no component.
    ZeroComponentName,
    /// A piece of a fragmented LpPacket (the face reassembles) or an
    /// LpPacket without a Fragment (IDLE).
    NotWhole,
    /// A face id at or above `max_faces` (or the fingerprint PIT's faces).
    BadFace,
    /// An Interest that arrived with HopLimit 0.
    HopLimitZero,
    /// An Interest not sent upstream because its HopLimit reached 0.
    HopLimitExhausted,
    /// A looping Interest (duplicate or dead nonce; Nack Duplicate sent).
    DuplicateNonce,
    /// The PIT is full.
    PitFull,
    /// The PIT entry holds its most in-records.
    PitRecordsFull,
    /// No route (Nack NoRoute sent).
    NoRoute,
    /// A Data that matches no PIT entry.
    UnsolicitedData,
    /// A Nack that matches no PIT entry or out-record.
    UnmatchedNack,
    /// The exact PIT's index chain for the new entry holds its most
    /// entries ([`ExactPitConfig::max_chain`]).
    PitChainFull,
}

impl DropReason {
    /// Every reason, in [`DropCounters`] order.
    pub const ALL: [DropReason; 15] = [
        DropReason::Truncated,
        DropReason::UnknownCritical,
        DropReason::Malformed,
        DropReason::ZeroComponentName,
        DropReason::NotWhole,
        DropReason::BadFace,
        DropReason::HopLimitZero,
        DropReason::HopLimitExhausted,
        DropReason::DuplicateNonce,
        DropReason::PitFull,
        DropReason::PitRecordsFull,
        DropReason::NoRoute,
        DropReason::UnsolicitedData,
        DropReason::UnmatchedNack,
        DropReason::PitChainFull,
    ];

    /// A stable snake_case name (metric labels).
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::UnknownCritical => "unknown_critical",
            DropReason::Malformed => "malformed",
            DropReason::ZeroComponentName => "zero_component_name",
            DropReason::NotWhole => "not_whole",
            DropReason::BadFace => "bad_face",
            DropReason::HopLimitZero => "hop_limit_zero",
            DropReason::HopLimitExhausted => "hop_limit_exhausted",
            DropReason::DuplicateNonce => "duplicate_nonce",
            DropReason::PitFull => "pit_full",
            DropReason::PitRecordsFull => "pit_records_full",
            DropReason::NoRoute => "no_route",
            DropReason::UnsolicitedData => "unsolicited_data",
            DropReason::UnmatchedNack => "unmatched_nack",
            DropReason::PitChainFull => "pit_chain_full",
        }
    }

    pub(super) fn of(e: &NdnError) -> DropReason {
        match e {
            NdnError::Truncated { .. } | NdnError::LengthExceedsBuffer { .. } => {
                DropReason::Truncated
            }
            NdnError::UnknownCritical { .. } => DropReason::UnknownCritical,
            _ => DropReason::Malformed,
        }
    }
}

/// Drops per reason (indexed like [`DropReason::ALL`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DropCounters(pub [u64; 15]);

impl DropCounters {
    /// The count for `r`.
    pub fn get(&self, r: DropReason) -> u64 {
        self.0[r as usize]
    }
    /// All drops.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

/// Per-face counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaceCounters {
    /// Interests received.
    pub in_interests: u64,
    /// Data received.
    pub in_data: u64,
    /// Nacks received.
    pub in_nacks: u64,
    /// Interests sent.
    pub out_interests: u64,
    /// Data sent.
    pub out_data: u64,
    /// Nacks sent.
    pub out_nacks: u64,
    /// Packets from this face that were dropped.
    pub dropped: u64,
}

/// Forwarder-wide counters (plain integers; the caller exports them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FwCounters {
    /// Drops by reason.
    pub drops: DropCounters,
    /// Interests answered from the Content Store.
    pub cs_hits: u64,
    /// Interests that missed the Content Store.
    pub cs_misses: u64,
    /// Data that satisfied at least one PIT entry.
    pub satisfied: u64,
    /// Interests aggregated into a pending entry and not sent again.
    pub suppressed: u64,
    /// Interests sent again to another next hop after a Nack.
    pub nack_retries: u64,
    /// Nonces assigned to Interests that carried none.
    pub nonces_assigned: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fw::Forwarder;

    #[test]
    fn config_refuses_out_of_range_fields() {
        let c = FwConfig {
            max_faces: 0,
            ..FwConfig::default()
        };
        assert!(Forwarder::new(c).is_err());
        let c = FwConfig {
            retx_suppression_ms: 60_001,
            ..FwConfig::default()
        };
        assert!(Forwarder::new(c).is_err());
        assert!(Forwarder::new(FwConfig::default()).is_ok());
    }

    #[test]
    fn drop_reasons_index_their_counters() {
        for (k, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, k);
        }
        let mut c = DropCounters::default();
        c.0[DropReason::PitFull as usize] = 3;
        assert_eq!(c.get(DropReason::PitFull), 3);
        assert_eq!(c.total(), 3);
    }
}
