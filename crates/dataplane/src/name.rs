//! Where a frame's flat name comes from, and which FIB key types it fits.

use std::fmt;
use std::str::FromStr;

use nexthop_othello::fib::KeyType;
use nexthop_wire::{five_tuple, EthernetFrame, WireError, FIVE_TUPLE_LEN};
use thiserror::Error;

use crate::error::{ConfigError, FrameError};

/// Bytes of an untagged Ethernet header: the shortest frame any source
/// accepts.
const ETHERNET_HEADER_LEN: usize = 14;

/// Which bytes of a frame are its name.
///
/// Names are looked up as raw bytes, hashed exactly as the FIB hashed the
/// names of its routes file, so a name source fits a FIB whose key type has
/// the same byte length (see [`NameSource::check_key_type`]):
///
/// | key type | name bytes | routes-file name | fits |
/// | --- | --- | --- | --- |
/// | `mac` | 6 | `02:00:00:00:00:01` | `dst-mac`, `bytes:OFFSET:6` |
/// | `ipv4` | 4, network order | `192.0.2.1` | `bytes:OFFSET:4` (e.g. `bytes:30:4`, the destination of untagged IPv4) |
/// | `ipv6` | 16, network order | `2001:db8::1` | `bytes:OFFSET:16` |
/// | `u64` | 8, **little-endian** | `42`, `0x2a` | `bytes:OFFSET:8` |
/// | `str` | any length ≥ 1 | the token's bytes | every source, `5tuple` included |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum NameSource {
    /// The destination MAC address (6 bytes): classic L2 switching.
    #[default]
    DstMac,
    /// The IPv4 5-tuple in its 13-byte form
    /// ([`nexthop_wire::five_tuple`]): src, dst, src port, dst port,
    /// protocol. Frames that are not IPv4 have no such name.
    FiveTuple,
    /// `len` bytes at `offset` from the start of the frame (a custom
    /// flat-name header after the Ethernet header, an IP address, ...).
    Bytes {
        /// First byte of the name, from the start of the frame (before any
        /// VLAN tag).
        offset: usize,
        /// Name length in bytes, at least 1.
        len: usize,
    },
}

impl NameSource {
    /// Length of every name this source produces.
    pub fn name_len(&self) -> usize {
        match *self {
            NameSource::DstMac => 6,
            NameSource::FiveTuple => FIVE_TUPLE_LEN,
            NameSource::Bytes { len, .. } => len,
        }
    }

    /// The shortest frame that can carry a name of this source.
    pub fn min_frame_len(&self) -> usize {
        match *self {
            NameSource::Bytes { offset, len } => {
                offset.saturating_add(len).max(ETHERNET_HEADER_LEN)
            }
            _ => ETHERNET_HEADER_LEN,
        }
    }

    /// Check that names of this source have the byte length of `key_type`'s
    /// names (any length for `str`).
    ///
    /// # Errors
    /// [`ConfigError::NameLength`] naming both lengths.
    pub fn check_key_type(&self, key_type: KeyType) -> Result<(), ConfigError> {
        match key_len(key_type) {
            Some(expected) if expected != self.name_len() => Err(ConfigError::NameLength {
                name: *self,
                len: self.name_len(),
                key_type,
                expected,
            }),
            _ => Ok(()),
        }
    }

    /// The name of `frame`: borrowed from the frame, or (for
    /// [`NameSource::FiveTuple`]) written to `scratch` and borrowed from
    /// there.
    ///
    /// # Errors
    /// A [`FrameError`] for a frame longer than `max_frame_len`, a runt, a
    /// frame cut inside a VLAN tag, one too short for the name bytes, or
    /// (5-tuple) one without a well-formed IPv4 5-tuple.
    #[inline]
    pub fn extract<'a>(
        &self,
        frame: &'a [u8],
        scratch: &'a mut [u8; FIVE_TUPLE_LEN],
        max_frame_len: usize,
    ) -> Result<&'a [u8], FrameError> {
        let got = frame.len();
        if got > max_frame_len {
            return Err(FrameError::Oversize {
                got,
                max: max_frame_len,
            });
        }
        if got < ETHERNET_HEADER_LEN {
            return Err(FrameError::Runt { got });
        }
        let eth = EthernetFrame::new_checked(frame).map_err(FrameError::Wire)?;
        match *self {
            NameSource::DstMac => eth.into_inner().get(..6).ok_or(FrameError::Runt { got }),
            NameSource::Bytes { offset, len } => offset
                .checked_add(len)
                .and_then(|end| frame.get(offset..end))
                .ok_or(FrameError::ShortForName { offset, len, got }),
            NameSource::FiveTuple => match five_tuple(&eth) {
                Ok(k) => {
                    *scratch = k;
                    Ok(&scratch[..])
                }
                Err(WireError::Unsupported(why)) => Err(FrameError::NoName(why)),
                Err(e) => Err(FrameError::Wire(e)),
            },
        }
    }
}

/// Byte length of the names of `key_type`, or `None` for any length (`str`).
pub fn key_len(key_type: KeyType) -> Option<usize> {
    match key_type {
        KeyType::Mac => Some(6),
        KeyType::Ipv4 => Some(4),
        KeyType::Ipv6 => Some(16),
        KeyType::U64 => Some(8),
        KeyType::Str => None,
    }
}

impl fmt::Display for NameSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameSource::DstMac => f.write_str("dst-mac"),
            NameSource::FiveTuple => f.write_str("5tuple"),
            NameSource::Bytes { offset, len } => write!(f, "bytes:{offset}:{len}"),
        }
    }
}

/// A name source string that is not `dst-mac`, `5tuple` or
/// `bytes:OFFSET:LEN`.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("invalid name source '{input}': {reason} (expected dst-mac, 5tuple or bytes:OFFSET:LEN)")]
pub struct ParseNameSourceError {
    /// The rejected text.
    pub input: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl FromStr for NameSource {
    type Err = ParseNameSourceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason| ParseNameSourceError {
            input: s.to_string(),
            reason,
        };
        match s {
            "dst-mac" => return Ok(NameSource::DstMac),
            "5tuple" => return Ok(NameSource::FiveTuple),
            _ => {}
        }
        let Some(rest) = s.strip_prefix("bytes:") else {
            return Err(err("unknown name source"));
        };
        let Some((off, len)) = rest.split_once(':') else {
            return Err(err("bytes needs OFFSET:LEN"));
        };
        let num = |t: &str| -> Option<usize> {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            t.parse().ok()
        };
        let offset = num(off).ok_or_else(|| err("OFFSET is not a decimal byte offset"))?;
        let len = num(len).ok_or_else(|| err("LEN is not a decimal byte count"))?;
        if len == 0 {
            return Err(err("LEN must be at least 1"));
        }
        if offset.checked_add(len).is_none() {
            return Err(err("OFFSET + LEN overflows"));
        }
        Ok(NameSource::Bytes { offset, len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Untagged IPv4/UDP frame: dst 02:..:01, 10.0.0.1:1000 -> 10.0.0.2:53.
    const UDP_FRAME: [u8; 42] = [
        0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02, 0x08, 0x00, // Ethernet
        0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, // IPv4
        0x03, 0xe8, 0x00, 0x35, 0, 8, 0, 0, // UDP
    ];

    #[test]
    fn parses_and_prints_every_source() {
        for (text, src) in [
            ("dst-mac", NameSource::DstMac),
            ("5tuple", NameSource::FiveTuple),
            ("bytes:14:8", NameSource::Bytes { offset: 14, len: 8 }),
        ] {
            assert_eq!(text.parse::<NameSource>().unwrap(), src);
            assert_eq!(src.to_string(), text);
        }
    }

    #[test]
    fn rejects_malformed_source_strings_with_a_reason() {
        for (bad, why) in [
            ("dstmac", "unknown"),
            ("bytes:14", "OFFSET:LEN"),
            ("bytes:x:4", "OFFSET"),
            ("bytes:14:", "LEN"),
            ("bytes:14:-1", "LEN"),
            ("bytes:14:0", "at least 1"),
            ("bytes:18446744073709551615:2", "overflows"),
        ] {
            let e = bad.parse::<NameSource>().unwrap_err();
            assert_eq!(e.input, bad);
            assert!(e.to_string().contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn name_length_must_match_fixed_width_key_types() {
        let mac = NameSource::DstMac;
        assert!(mac.check_key_type(KeyType::Mac).is_ok());
        assert!(mac.check_key_type(KeyType::Str).is_ok());
        let e = mac.check_key_type(KeyType::U64).unwrap_err();
        assert_eq!(
            e,
            ConfigError::NameLength {
                name: mac,
                len: 6,
                key_type: KeyType::U64,
                expected: 8
            }
        );
        assert!(e.to_string().contains("6-byte names"), "{e}");
        assert!(NameSource::FiveTuple.check_key_type(KeyType::Str).is_ok());
        assert!(NameSource::FiveTuple.check_key_type(KeyType::Ipv6).is_err());
        let ip = NameSource::Bytes { offset: 30, len: 4 };
        assert!(ip.check_key_type(KeyType::Ipv4).is_ok());
        assert!(ip.check_key_type(KeyType::Mac).is_err());
        let id = NameSource::Bytes { offset: 14, len: 8 };
        assert!(id.check_key_type(KeyType::U64).is_ok());
        assert!(NameSource::Bytes { offset: 0, len: 16 }
            .check_key_type(KeyType::Ipv6)
            .is_ok());
    }

    #[test]
    fn extracts_each_source_from_a_frame() {
        let mut s = [0u8; FIVE_TUPLE_LEN];
        assert_eq!(
            NameSource::DstMac.extract(&UDP_FRAME, &mut s, 1514),
            Ok(&UDP_FRAME[0..6])
        );
        let dst_ip = NameSource::Bytes { offset: 30, len: 4 };
        assert_eq!(
            dst_ip.extract(&UDP_FRAME, &mut s, 1514),
            Ok(&[10u8, 0, 0, 2][..])
        );
        assert_eq!(
            NameSource::FiveTuple.extract(&UDP_FRAME, &mut s, 1514),
            Ok(&[10u8, 0, 0, 1, 10, 0, 0, 2, 0x03, 0xe8, 0x00, 0x35, 17][..])
        );
    }

    #[test]
    fn unnameable_frames_get_a_typed_reason() {
        let mut s = [0u8; FIVE_TUPLE_LEN];
        let src = NameSource::DstMac;
        assert_eq!(
            src.extract(&UDP_FRAME[..13], &mut s, 1514),
            Err(FrameError::Runt { got: 13 })
        );
        assert_eq!(
            src.extract(&UDP_FRAME, &mut s, 40),
            Err(FrameError::Oversize { got: 42, max: 40 })
        );
        let mut tagged = UDP_FRAME;
        tagged[12..14].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(
            src.extract(&tagged[..16], &mut s, 1514),
            Err(FrameError::Wire(WireError::Truncated {
                needed: 18,
                got: 16
            }))
        );
        let far = NameSource::Bytes { offset: 40, len: 4 };
        assert_eq!(
            far.extract(&UDP_FRAME, &mut s, 1514),
            Err(FrameError::ShortForName {
                offset: 40,
                len: 4,
                got: 42
            })
        );
        let mut arp = UDP_FRAME;
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(matches!(
            NameSource::FiveTuple.extract(&arp, &mut s, 1514),
            Err(FrameError::NoName(_))
        ));
        assert!(matches!(
            NameSource::FiveTuple.extract(&UDP_FRAME[..40], &mut s, 1514),
            Err(FrameError::Wire(WireError::Truncated { .. }))
        ));
    }
}
