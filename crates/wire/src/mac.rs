//! 48-bit MAC addresses.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

/// A 48-bit IEEE 802 MAC address, in wire order.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// `ff:ff:ff:ff:ff:ff`.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// The address from the first six bytes of `b`, if there are six.
    pub fn from_slice(b: &[u8]) -> Option<MacAddr> {
        b.get(..6)?.try_into().ok().map(MacAddr)
    }

    /// The six bytes.
    pub fn octets(&self) -> [u8; 6] {
        self.0
    }

    /// Whether the group bit (bit 0 of the first octet) is set: multicast
    /// or broadcast.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }

    /// Whether this is the broadcast address.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Whether the locally administered bit (bit 1 of the first octet) is set.
    pub fn is_local(&self) -> bool {
        self.0[0] & 2 == 2
    }
}

impl From<[u8; 6]> for MacAddr {
    fn from(b: [u8; 6]) -> Self {
        MacAddr(b)
    }
}

impl From<MacAddr> for [u8; 6] {
    fn from(m: MacAddr) -> Self {
        m.0
    }
}

impl AsRef<[u8]> for MacAddr {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MacAddr({self})")
    }
}

/// A MAC address string that is not six two-digit hex groups.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("invalid MAC address '{input}': {}", ParseMacError::EXPECTED)]
pub struct ParseMacError {
    /// The rejected text.
    pub input: String,
}

impl ParseMacError {
    /// What a MAC address must look like, for messages that already quote
    /// the rejected text.
    pub const EXPECTED: &'static str =
        "expected six hex pairs like aa:bb:cc:dd:ee:ff or aa-bb-cc-dd-ee-ff";
}

impl FromStr for MacAddr {
    type Err = ParseMacError;

    /// Parse `aa:bb:cc:dd:ee:ff` or `aa-bb-cc-dd-ee-ff` (either case; one
    /// separator throughout).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseMacError {
            input: s.to_string(),
        };
        let sep = if s.contains(':') { ':' } else { '-' };
        let mut out = [0u8; 6];
        let mut parts = s.split(sep);
        for o in out.iter_mut() {
            let p = parts.next().ok_or_else(err)?;
            if p.len() != 2 || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(err());
            }
            *o = u8::from_str_radix(p, 16).map_err(|_| err())?;
        }
        if parts.next().is_some() {
            return Err(err());
        }
        Ok(MacAddr(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_parse_round_trip() {
        let m = MacAddr([0x02, 0x00, 0x5e, 0x10, 0xab, 0xff]);
        assert_eq!(m.to_string(), "02:00:5e:10:ab:ff");
        assert_eq!("02:00:5e:10:ab:ff".parse::<MacAddr>().unwrap(), m);
        assert_eq!("02-00-5E-10-AB-FF".parse::<MacAddr>().unwrap(), m);
        assert_eq!(format!("{m:?}"), "MacAddr(02:00:5e:10:ab:ff)");
    }

    #[test]
    fn malformed_mac_strings_are_rejected_with_the_input_named() {
        for bad in [
            "",
            "02:00:5e:10:ab",
            "02:00:5e:10:ab:ff:00",
            "02:00:5e:10:ab:f",
            "02:00:5e:10:ab:fg",
            "02:00-5e:10:ab:ff",
            "020:0:5e:10:ab:ff",
            "+2:00:5e:10:ab:ff",
        ] {
            let e = bad.parse::<MacAddr>().unwrap_err();
            assert_eq!(e.input, bad);
        }
    }

    #[test]
    fn group_and_local_bits_are_read_from_the_first_octet() {
        assert!(MacAddr::BROADCAST.is_multicast() && MacAddr::BROADCAST.is_broadcast());
        let m = MacAddr([0x01, 0x00, 0x5e, 0, 0, 1]);
        assert!(m.is_multicast() && !m.is_broadcast() && !m.is_local());
        assert!(MacAddr([0x02, 0, 0, 0, 0, 1]).is_local());
        assert_eq!(MacAddr::from_slice(&[1, 2, 3, 4, 5]), None);
        assert_eq!(
            MacAddr::from_slice(&[1, 2, 3, 4, 5, 6, 7]),
            Some(MacAddr([1, 2, 3, 4, 5, 6]))
        );
    }
}
