//! Errors of the pipeline: configuration errors (fatal, at set-up) and
//! per-frame errors (counted, the frame dropped).

use nexthop_othello::fib::KeyType;
use nexthop_wire::WireError;
use thiserror::Error;

use crate::name::NameSource;

/// A pipeline configuration that cannot work with its FIB.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The name source's names do not have the FIB key type's length.
    #[error(
        "name source {name} gives {len}-byte names, but a FIB with key type {key_type} \
         holds {expected}-byte names (use a {expected}-byte name source, e.g. bytes:OFFSET:{expected}{hint})"
    , hint = mac_hint(.key_type))]
    NameLength {
        /// The configured source.
        name: NameSource,
        /// Its name length.
        len: usize,
        /// The FIB's key type.
        key_type: KeyType,
        /// The key type's name length.
        expected: usize,
    },
    /// No frame within the maximum frame length can carry the name.
    #[error(
        "name source {name} needs frames of at least {needed} bytes, \
         but the maximum frame length is {max}"
    )]
    NameBeyondMaxFrame {
        /// The configured source.
        name: NameSource,
        /// Shortest frame that carries the name.
        needed: usize,
        /// The configured maximum frame length.
        max: usize,
    },
}

fn mac_hint(key_type: &KeyType) -> &'static str {
    if *key_type == KeyType::Mac {
        " or dst-mac"
    } else {
        ""
    }
}

/// Why a frame could not be named (it is counted as malformed and dropped).
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FrameError {
    /// Shorter than an Ethernet header (14 bytes).
    #[error("runt frame: {got} bytes, shorter than an Ethernet header (14)")]
    Runt {
        /// Frame length.
        got: usize,
    },
    /// Longer than the configured maximum frame length.
    #[error("oversize frame: {got} bytes, the maximum is {max}")]
    Oversize {
        /// Frame length.
        got: usize,
        /// The configured maximum.
        max: usize,
    },
    /// A header the name depends on is truncated or malformed (a VLAN tag;
    /// for 5-tuples the IPv4, TCP or UDP header). Byte counts are from the
    /// start of the frame.
    #[error("frame header: {0}")]
    Wire(WireError),
    /// The frame ends before the configured name bytes do.
    #[error("frame of {got} bytes is too short for name bytes {offset}..{end}", end = .offset.saturating_add(*.len))]
    ShortForName {
        /// First name byte.
        offset: usize,
        /// Name length.
        len: usize,
        /// Frame length.
        got: usize,
    },
    /// A well-formed frame that carries no name of this source (a non-IPv4
    /// frame under the 5-tuple source).
    #[error("no name: {0}")]
    NoName(&'static str),
    /// IP pipeline: an IPv4 header whose checksum is wrong.
    #[error("IPv4 header checksum is wrong")]
    BadChecksum,
    /// IP pipeline: a frame that is neither IPv4 nor IPv6 (after any VLAN
    /// tags).
    #[error("not an IP frame: EtherType {ethertype:#06x}")]
    NotIp {
        /// The EtherType (or 802.3 length) after the VLAN tags.
        ethertype: u16,
    },
}

/// The counter a [`FrameError`] is counted under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MalformedKind {
    /// [`FrameError::Runt`].
    Runt,
    /// [`FrameError::Wire`] with a truncated header.
    Truncated,
    /// [`FrameError::Wire`] with a malformed header field.
    BadHeader,
    /// [`FrameError::ShortForName`].
    ShortForName,
    /// [`FrameError::NoName`].
    NoName,
    /// [`FrameError::Oversize`].
    Oversize,
    /// [`FrameError::BadChecksum`].
    BadChecksum,
    /// [`FrameError::NotIp`].
    NotIp,
}

impl MalformedKind {
    /// Every kind, in counter order.
    pub const ALL: [MalformedKind; 8] = [
        MalformedKind::Runt,
        MalformedKind::Truncated,
        MalformedKind::BadHeader,
        MalformedKind::ShortForName,
        MalformedKind::NoName,
        MalformedKind::Oversize,
        MalformedKind::BadChecksum,
        MalformedKind::NotIp,
    ];

    /// The counter's name (snake case, as in JSON summaries).
    pub fn name(self) -> &'static str {
        match self {
            MalformedKind::Runt => "runt",
            MalformedKind::Truncated => "truncated",
            MalformedKind::BadHeader => "bad_header",
            MalformedKind::ShortForName => "short_for_name",
            MalformedKind::NoName => "no_name",
            MalformedKind::Oversize => "oversize",
            MalformedKind::BadChecksum => "bad_checksum",
            MalformedKind::NotIp => "not_ip",
        }
    }
}

impl FrameError {
    /// The counter this error is counted under.
    pub fn kind(&self) -> MalformedKind {
        match self {
            FrameError::Runt { .. } => MalformedKind::Runt,
            FrameError::Oversize { .. } => MalformedKind::Oversize,
            FrameError::Wire(WireError::Truncated { .. }) => MalformedKind::Truncated,
            FrameError::Wire(WireError::Unsupported(_)) | FrameError::NoName(_) => {
                MalformedKind::NoName
            }
            FrameError::Wire(_) => MalformedKind::BadHeader,
            FrameError::ShortForName { .. } => MalformedKind::ShortForName,
            FrameError::BadChecksum => MalformedKind::BadChecksum,
            FrameError::NotIp { .. } => MalformedKind::NotIp,
        }
    }
}
