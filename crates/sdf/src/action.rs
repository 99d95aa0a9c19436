//! What a cached decision does to a frame: where it goes, which header
//! bytes it overwrites, and the paper's arithmetic primitives (§4.3.2: TTL
//! or hop-limit decrement with the incremental checksum update), so an IPv4
//! router need not mark the whole header.
//!
//! [`Actions::apply`] applies them to a frame buffer: first the byte
//! rewrites in order, then the primitives in order. The frame keeps its
//! length (encapsulation belongs to tunnel ports).

use smallvec::SmallVec;
use thiserror::Error;

use crate::key::{PortId, KEY_BYTES};
use nexthop_wire::checksum::checksum_update;

/// The most output ports one decision may list.
pub const MAX_PORTS: usize = 1024;

/// Overwrite `bytes` at byte offset `at` of the frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetBytes {
    /// First byte overwritten.
    pub at: u8,
    /// The new bytes (at most [`KEY_BYTES`] − `at`).
    pub bytes: Box<[u8]>,
}

/// An arithmetic primitive applied to specified header bytes; the cache
/// does not know protocols, only offsets (paper §4.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Primitive {
    /// Decrement the byte at `ttl_at` (an IPv4 TTL or an IPv6 hop limit).
    /// A value of 0 or 1 is not decremented: the frame has expired and
    /// [`Actions::apply`] says so ([`Outcome::Expired`]) without touching
    /// it. With `checksum_at`, the 16-bit one's-complement checksum stored
    /// there (big-endian) is updated incrementally for the changed 16-bit
    /// word (RFC 1624 eqn. 3); the word is the one that holds the TTL,
    /// aligned with the checksum field (IPv4: TTL at header + 8, checksum
    /// at header + 10, the word TTL | protocol).
    DecrementTtl {
        /// Byte offset of the TTL / hop limit in the frame.
        ttl_at: u8,
        /// Byte offset of the checksum to keep right, if any.
        checksum_at: Option<u8>,
    },
}

impl Primitive {
    /// The IPv4 TTL decrement with header-checksum update for an IPv4
    /// header that starts at byte `ip_at` of the frame. `None` when the
    /// fields would lie past the header key.
    pub fn ipv4_ttl(ip_at: usize) -> Option<Primitive> {
        let ttl = u8::try_from(ip_at.checked_add(8)?).ok()?;
        let ck = u8::try_from(ip_at.checked_add(11)?).ok()?;
        (usize::from(ck) < KEY_BYTES).then_some(Primitive::DecrementTtl {
            ttl_at: ttl,
            checksum_at: Some(ck - 1),
        })
    }

    /// The IPv6 hop-limit decrement (no header checksum) for an IPv6
    /// header at byte `ip_at`.
    pub fn ipv6_hop_limit(ip_at: usize) -> Option<Primitive> {
        let hl = u8::try_from(ip_at.checked_add(7)?).ok()?;
        (usize::from(hl) < KEY_BYTES).then_some(Primitive::DecrementTtl {
            ttl_at: hl,
            checksum_at: None,
        })
    }

    /// The TTL / hop-limit primitive for `frame`: Ethernet (up to two VLAN
    /// tags, as `nexthop_wire::EthernetFrame` reads them), then IPv4 (with
    /// checksum) or IPv6. `None` for anything else or a header that does
    /// not fit the key.
    pub fn ip_ttl_for(frame: &[u8]) -> Option<Primitive> {
        let eth = nexthop_wire::EthernetFrame::new_checked(frame).ok()?;
        let at = eth.header_len();
        match eth.ethertype() {
            nexthop_wire::EtherType::IPV4 if frame.len() >= at + 20 => Primitive::ipv4_ttl(at),
            nexthop_wire::EtherType::IPV6 if frame.len() >= at + 40 => {
                Primitive::ipv6_hop_limit(at)
            }
            _ => None,
        }
    }

    /// Whether the fields make sense: the checksummed word around the TTL
    /// starts inside the frame and is not the checksum field itself.
    fn well_formed(&self) -> bool {
        match *self {
            Primitive::DecrementTtl {
                ttl_at,
                checksum_at: Some(c),
            } => {
                let (t, c) = (usize::from(ttl_at), usize::from(c));
                let odd = (t + c) % 2 == 1;
                let w = if odd { t.checked_sub(1) } else { Some(t) };
                w.is_some_and(|w| w != c)
            }
            Primitive::DecrementTtl { .. } => true,
        }
    }

    /// One past the last byte the primitive reads or writes.
    fn end(&self) -> usize {
        match *self {
            Primitive::DecrementTtl {
                ttl_at,
                checksum_at,
            } => {
                let t = usize::from(ttl_at) + 1;
                let c = checksum_at.map_or(0, |c| usize::from(c) + 2);
                // The checksummed word around the TTL.
                let w = match checksum_at {
                    Some(c) if (usize::from(ttl_at) + usize::from(c)) % 2 == 1 => t,
                    Some(_) => t + 1,
                    None => t,
                };
                t.max(c).max(w)
            }
        }
    }
}

/// What [`Actions::apply`] did to a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Rewritten as the decision says; send it.
    Forward,
    /// A TTL / hop limit was 0 or 1: the frame is unchanged and must not
    /// be forwarded (the pipeline drops it or hands it to the app, which
    /// may answer with ICMP Time Exceeded).
    Expired,
    /// The frame is shorter than the actions need: unchanged, not
    /// forwarded. Frames the cache matched never are (an entry only
    /// matches frames at least [`Actions::min_len`] long).
    TooShort,
}

/// A decision's actions that the app wrote nonsense into.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ActionError {
    /// A rewrite reaches past the header key.
    #[error("rewrite of {len} byte(s) at {at} runs past the {KEY_BYTES}-byte header")]
    RewriteBeyondHeader {
        /// First byte.
        at: usize,
        /// Length.
        len: usize,
    },
    /// A primitive's fields reach past the header key.
    #[error("primitive {0:?} reaches past the {KEY_BYTES}-byte header")]
    PrimitiveBeyondHeader(Primitive),
    /// More output ports than [`MAX_PORTS`].
    #[error("{0} output ports (at most {MAX_PORTS})")]
    TooManyPorts(usize),
    /// Two frames of different lengths given to [`Actions::set_bytes_from_diff`].
    #[error("headers before ({before}) and after ({after}) the decision differ in length")]
    LengthChanged {
        /// Length before.
        before: usize,
        /// Length after.
        after: usize,
    },
}

/// Where a frame goes and what is done to it. No ports and no controller
/// is a drop.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Actions {
    ports: SmallVec<[PortId; 4]>,
    controller: bool,
    rewrites: Vec<SetBytes>,
    primitives: SmallVec<[Primitive; 1]>,
}

impl Actions {
    /// Drop the frame (no output).
    pub fn drop() -> Actions {
        Actions::default()
    }

    /// Send to one port.
    pub fn output(port: PortId) -> Actions {
        let mut a = Actions::default();
        a.ports.push(port);
        a
    }

    /// Send to each port of a set (sorted, duplicates removed).
    pub fn output_set(ports: &[PortId]) -> Result<Actions, ActionError> {
        if ports.len() > MAX_PORTS {
            return Err(ActionError::TooManyPorts(ports.len()));
        }
        let mut a = Actions::default();
        a.ports.extend_from_slice(ports);
        a.ports.sort_unstable();
        a.ports.dedup();
        Ok(a)
    }

    /// Send to the control port (the app's control-traffic queue).
    pub fn to_controller() -> Actions {
        Actions {
            controller: true,
            ..Actions::default()
        }
    }

    /// Add an output port (the paper's `add_destination`).
    pub fn add_port(&mut self, port: PortId) -> Result<(), ActionError> {
        if let Err(i) = self.ports.binary_search(&port) {
            if self.ports.len() >= MAX_PORTS {
                return Err(ActionError::TooManyPorts(self.ports.len() + 1));
            }
            self.ports.insert(i, port);
        }
        Ok(())
    }

    /// Also send to the control port.
    pub fn set_controller(&mut self, on: bool) {
        self.controller = on;
    }

    /// Overwrite `bytes` at byte `at` (within the header key).
    pub fn set_bytes(&mut self, at: usize, bytes: &[u8]) -> Result<(), ActionError> {
        if bytes.is_empty() {
            return Ok(());
        }
        match at.checked_add(bytes.len()) {
            Some(end) if end <= KEY_BYTES => {}
            _ => {
                return Err(ActionError::RewriteBeyondHeader {
                    at,
                    len: bytes.len(),
                })
            }
        }
        self.rewrites.push(SetBytes {
            at: at as u8,
            bytes: bytes.into(),
        });
        Ok(())
    }

    /// The rewrites that turn header `before` into `after` (equal lengths,
    /// both at most [`KEY_BYTES`] long): one [`SetBytes`] per run of changed
    /// bytes. How the API layer infers an app's modifications from the
    /// packet it sends (paper §6.1).
    pub fn set_bytes_from_diff(&mut self, before: &[u8], after: &[u8]) -> Result<(), ActionError> {
        if before.len() != after.len() {
            return Err(ActionError::LengthChanged {
                before: before.len(),
                after: after.len(),
            });
        }
        if before.len() > KEY_BYTES {
            return Err(ActionError::RewriteBeyondHeader {
                at: 0,
                len: before.len(),
            });
        }
        let mut i = 0;
        while i < before.len() {
            if before[i] == after[i] {
                i += 1;
                continue;
            }
            let start = i;
            while i < before.len() && before[i] != after[i] {
                i += 1;
            }
            self.set_bytes(start, &after[start..i])?;
        }
        Ok(())
    }

    /// Add an arithmetic primitive.
    pub fn push_primitive(&mut self, p: Primitive) -> Result<(), ActionError> {
        if p.end() > KEY_BYTES || !p.well_formed() {
            return Err(ActionError::PrimitiveBeyondHeader(p));
        }
        self.primitives.push(p);
        Ok(())
    }

    /// The output ports, sorted.
    pub fn ports(&self) -> &[PortId] {
        &self.ports
    }

    /// Whether the frame also goes to the control port.
    pub fn controller(&self) -> bool {
        self.controller
    }

    /// Whether the frame goes nowhere.
    pub fn is_drop(&self) -> bool {
        self.ports.is_empty() && !self.controller
    }

    /// The byte rewrites, in the order they are applied.
    pub fn rewrites(&self) -> &[SetBytes] {
        &self.rewrites
    }

    /// The primitives, applied after the rewrites.
    pub fn primitives(&self) -> &[Primitive] {
        &self.primitives
    }

    /// The shortest frame the actions can be applied to: one past the last
    /// byte a rewrite or primitive touches.
    pub fn min_len(&self) -> usize {
        let r = self
            .rewrites
            .iter()
            .map(|s| usize::from(s.at) + s.bytes.len())
            .max()
            .unwrap_or(0);
        let p = self.primitives.iter().map(|p| p.end()).max().unwrap_or(0);
        r.max(p)
    }

    /// Apply the rewrites, then the primitives, to `frame`. A frame shorter
    /// than [`Self::min_len`] or with an expired TTL is left unchanged.
    /// Never panics.
    pub fn apply(&self, frame: &mut [u8]) -> Outcome {
        if frame.len() < self.min_len() {
            return Outcome::TooShort;
        }
        // Expiry is decided before anything is written, so an expired
        // frame is left as it came.
        for p in &self.primitives {
            let Primitive::DecrementTtl { ttl_at, .. } = *p;
            if frame[usize::from(ttl_at)] <= 1 {
                return Outcome::Expired;
            }
        }
        for s in &self.rewrites {
            let at = usize::from(s.at);
            frame[at..at + s.bytes.len()].copy_from_slice(&s.bytes);
        }
        for p in &self.primitives {
            let Primitive::DecrementTtl {
                ttl_at,
                checksum_at,
            } = *p;
            let t = usize::from(ttl_at);
            // A rewrite may have set the TTL; re-check before decrementing.
            if frame[t] <= 1 {
                return Outcome::Expired;
            }
            let Some(c) = checksum_at.map(usize::from) else {
                frame[t] -= 1;
                continue;
            };
            let w = if (t + c) % 2 == 0 { t } else { t - 1 };
            let old = u16::from_be_bytes([frame[w], frame[w + 1]]);
            frame[t] -= 1;
            let new = u16::from_be_bytes([frame[w], frame[w + 1]]);
            let hc = u16::from_be_bytes([frame[c], frame[c + 1]]);
            frame[c..c + 2].copy_from_slice(&checksum_update(hc, old, new).to_be_bytes());
        }
        Outcome::Forward
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_ttl_primitive_covers_ttl_and_checksum() {
        let p = Primitive::ipv4_ttl(14).unwrap();
        assert_eq!(
            p,
            Primitive::DecrementTtl {
                ttl_at: 22,
                checksum_at: Some(24)
            }
        );
        assert_eq!(p.end(), 26);
        assert!(Primitive::ipv4_ttl(KEY_BYTES).is_none());
        assert!(Primitive::ipv4_ttl(usize::MAX).is_none());
        assert!(Primitive::ipv6_hop_limit(usize::MAX - 3).is_none());
        assert_eq!(Primitive::ipv6_hop_limit(14).unwrap().end(), 22);
    }

    #[test]
    fn primitive_past_the_header_is_refused() {
        let mut a = Actions::output(1);
        let p = Primitive::DecrementTtl {
            ttl_at: 127,
            checksum_at: Some(127),
        };
        assert_eq!(
            a.push_primitive(p),
            Err(ActionError::PrimitiveBeyondHeader(p))
        );
        for bad in [
            Primitive::DecrementTtl {
                ttl_at: 0,
                checksum_at: Some(3),
            },
            Primitive::DecrementTtl {
                ttl_at: 10,
                checksum_at: Some(10),
            },
            Primitive::DecrementTtl {
                ttl_at: 11,
                checksum_at: Some(10),
            },
        ] {
            assert!(a.push_primitive(bad).is_err(), "{bad:?}");
        }
        assert!(a.primitives().is_empty());
        assert!(a.set_bytes(120, &[0; 9]).is_err());
        assert!(a.set_bytes(usize::MAX, &[1]).is_err());
        assert!(a.set_bytes(3, &[]).is_ok());
        assert!(a.rewrites().is_empty());
    }

    #[test]
    fn diff_rewrites_reproduce_the_after_header() {
        let before = [1u8, 2, 3, 4, 5, 6, 7, 8];
        let after = [1u8, 9, 9, 4, 5, 0, 7, 1];
        let mut a = Actions::drop();
        a.set_bytes_from_diff(&before, &after).unwrap();
        assert_eq!(a.rewrites().len(), 3);
        let mut f = before;
        assert_eq!(a.apply(&mut f), Outcome::Forward);
        assert_eq!(f, after);
        assert!(a.set_bytes_from_diff(&before, &after[..7]).is_err());
    }

    #[test]
    fn output_set_is_sorted_and_deduplicated() {
        let mut a = Actions::output_set(&[5, 1, 5, 3]).unwrap();
        assert_eq!(a.ports(), &[1, 3, 5]);
        a.add_port(2).unwrap();
        a.add_port(3).unwrap();
        assert_eq!(a.ports(), &[1, 2, 3, 5]);
        assert!(Actions::drop().is_drop());
        assert!(!Actions::to_controller().is_drop());
        assert!(Actions::output_set(&[0; MAX_PORTS + 1]).is_err());
    }

    #[test]
    fn short_frame_is_left_alone() {
        let mut a = Actions::output(1);
        a.push_primitive(Primitive::ipv4_ttl(14).unwrap()).unwrap();
        let mut f = [64u8; 25];
        assert_eq!(a.apply(&mut f), Outcome::TooShort);
        assert_eq!(f, [64u8; 25]);
    }
}
