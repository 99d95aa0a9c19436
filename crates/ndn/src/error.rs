//! Typed errors of the name FIB.

use thiserror::Error;

/// A name that the FIB cannot take.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum NameError {
    /// The component TLVs are not valid NDN TLV.
    #[error("invalid name: {0}")]
    Wire(#[from] nexthop_wire::ndn::NdnError),
    /// A component type outside `1..=65535`.
    #[error("bad name component type {tlv_type} at byte {offset}")]
    BadComponentType {
        /// Byte offset of the component.
        offset: usize,
        /// The type found.
        tlv_type: u64,
    },
    /// The encoded name is longer than the FIB stores.
    #[error("name of {bytes} bytes is longer than the 65535 bytes the FIB stores")]
    TooLong {
        /// Its encoded length.
        bytes: usize,
    },
}

/// Why a FIB configuration or update was refused. The FIB is unchanged
/// when one of these is returned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum FibError {
    /// The configuration is invalid.
    #[error("invalid FIB configuration: {0}")]
    Config(String),
    /// A rule has more components than the FIB's configured maximum.
    #[error("name has {got} components, the FIB holds at most {max}")]
    TooManyComponents {
        /// Components of the rejected name.
        got: usize,
        /// The configured maximum.
        max: usize,
    },
    /// A rule with no next hops.
    #[error("a rule needs at least one next hop")]
    NoNextHops,
    /// The same face twice in one rule.
    #[error("face {0} appears twice in one rule")]
    DuplicateFace(u32),
    /// Too many distinct next-hop sets (they are 24-bit ids).
    #[error("more than {0} distinct next-hop sets")]
    TooManyNextHopSets(u32),
    /// The entry arena would pass the 2^32 words (32 GiB) that 32-bit
    /// entry references address.
    #[error("the FIB's entry arena is full ({words} words)")]
    ArenaFull {
        /// Words the arena would need.
        words: usize,
    },
    /// Deleting a rule that is not in the FIB.
    #[error("no such rule")]
    NotFound,
    /// The name itself is unusable.
    #[error(transparent)]
    Name(#[from] NameError),
}
