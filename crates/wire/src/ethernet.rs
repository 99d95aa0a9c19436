//! Ethernet II frames with up to two VLAN tags (802.1Q, 802.1ad QinQ).
//!
//! ```text
//! 0        6        12           14 (+4 per tag)
//! +--------+--------+------------+-----------+----------------+---------
//! | dst    | src    | TPID | TCI | TPID | TCI| ethertype      | payload
//! +--------+--------+------------+-----------+----------------+---------
//!                   `--- optional VLAN tags --'
//! ```
//!
//! A tag is recognised by its TPID in the ethertype position: `0x8100`
//! (802.1Q C-tag), `0x88a8` (802.1ad S-tag) or `0x9100` (pre-standard QinQ).
//! At most [`MAX_VLAN_TAGS`] tags are parsed; a third TPID is left as the
//! frame's ethertype. Captures carry no FCS, so none is expected. Ethertype
//! values below `0x0600` are IEEE 802.3 length fields; the view keeps them
//! as they are ([`EtherType::is_length`]), since a switch forwards such
//! frames by address like any other.

use std::fmt;

use crate::error::WireError;
use crate::mac::MacAddr;

mod field {
    use std::ops::Range;

    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    /// The ethertype of an untagged frame, or the TPID of the first tag.
    pub const ETHERTYPE: Range<usize> = 12..14;
    /// Header length of an untagged frame.
    pub const HEADER_LEN: usize = ETHERTYPE.end;
    /// Bytes one VLAN tag adds (TPID + TCI).
    pub const TAG_LEN: usize = 4;
    /// The TCI, relative to the tag's TPID.
    pub const TCI: Range<usize> = 2..4;
}

/// Most VLAN tags parsed (an S-tag and a C-tag).
pub const MAX_VLAN_TAGS: usize = 2;

/// An Ethernet type (or, below `0x0600`, an 802.3 length).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EtherType(pub u16);

impl EtherType {
    /// IPv4.
    pub const IPV4: EtherType = EtherType(0x0800);
    /// ARP.
    pub const ARP: EtherType = EtherType(0x0806);
    /// IPv6.
    pub const IPV6: EtherType = EtherType(0x86dd);
    /// 802.1Q customer VLAN tag.
    pub const VLAN: EtherType = EtherType(0x8100);
    /// 802.1ad service VLAN tag (QinQ).
    pub const QINQ: EtherType = EtherType(0x88a8);
    /// Pre-standard QinQ tag.
    pub const QINQ_LEGACY: EtherType = EtherType(0x9100);

    /// Whether this value introduces a VLAN tag.
    #[inline(always)]
    pub fn is_vlan_tpid(self) -> bool {
        matches!(self, Self::VLAN | Self::QINQ | Self::QINQ_LEGACY)
    }

    /// Whether this is an IEEE 802.3 length field (`< 0x0600`) rather than
    /// an Ethernet II type.
    pub fn is_length(self) -> bool {
        self.0 < 0x0600
    }
}

impl fmt::Debug for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EtherType({:#06x})", self.0)
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#06x}", self.0)
    }
}

/// One VLAN tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// The tag protocol identifier (`0x8100`, `0x88a8` or `0x9100`).
    pub tpid: EtherType,
    /// Priority code point, 0..=7.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN id, 0..=4095.
    pub vid: u16,
}

impl VlanTag {
    /// A tag from its TPID and tag control information.
    pub fn from_tci(tpid: EtherType, tci: u16) -> VlanTag {
        VlanTag {
            tpid,
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }

    /// The tag control information, or an error for out-of-range fields.
    pub fn tci(&self) -> Result<u16, WireError> {
        if !self.tpid.is_vlan_tpid() {
            return Err(WireError::Malformed(
                "VLAN tag: TPID is not 0x8100, 0x88a8 or 0x9100",
            ));
        }
        if self.pcp > 7 {
            return Err(WireError::Malformed("VLAN tag: PCP above 7"));
        }
        if self.vid > 0x0fff {
            return Err(WireError::Malformed("VLAN tag: VID above 4095"));
        }
        Ok((self.pcp as u16) << 13 | (self.dei as u16) << 12 | self.vid)
    }
}

/// A checked view of an Ethernet II frame.
///
/// [`EthernetFrame::new_checked`] validates the 14-byte header and every
/// VLAN tag it finds; after that no accessor can fail or panic.
#[derive(Clone, Copy)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
    /// VLAN tags found, `0..=MAX_VLAN_TAGS`.
    tags: u8,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// View `buffer` as a frame.
    ///
    /// # Errors
    /// [`WireError::Truncated`] for a runt (fewer than 14 bytes) or a frame
    /// that ends inside a VLAN tag or before the ethertype that follows it.
    pub fn new_checked(buffer: T) -> Result<EthernetFrame<T>, WireError> {
        let b = buffer.as_ref();
        WireError::need(b, field::HEADER_LEN)?;
        let mut tags = 0usize;
        while tags < MAX_VLAN_TAGS {
            let at = field::ETHERTYPE.start + tags * field::TAG_LEN;
            match crate::be16(b, at) {
                Some(t) if EtherType(t).is_vlan_tpid() => {}
                _ => break,
            }
            tags += 1;
            WireError::need(b, field::HEADER_LEN + tags * field::TAG_LEN)?;
        }
        Ok(EthernetFrame {
            buffer,
            tags: tags as u8,
        })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The whole frame.
    #[inline(always)]
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Frame length in bytes.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    /// Always false: a checked frame holds at least a header.
    pub fn is_empty(&self) -> bool {
        self.as_bytes().is_empty()
    }

    /// Destination address.
    #[inline(always)]
    pub fn dst(&self) -> MacAddr {
        let mut m = [0u8; 6];
        m.copy_from_slice(&self.as_bytes()[field::DST]);
        MacAddr(m)
    }

    /// Destination address bytes, borrowed from the frame.
    #[inline(always)]
    pub fn dst_bytes(&self) -> &[u8] {
        &self.as_bytes()[field::DST]
    }

    /// Source address.
    #[inline(always)]
    pub fn src(&self) -> MacAddr {
        let mut m = [0u8; 6];
        m.copy_from_slice(&self.as_bytes()[field::SRC]);
        MacAddr(m)
    }

    /// Number of VLAN tags, `0..=MAX_VLAN_TAGS`.
    #[inline(always)]
    pub fn vlan_count(&self) -> usize {
        self.tags as usize
    }

    /// Tag `i` (0 is the outermost), if present.
    pub fn vlan(&self, i: usize) -> Option<VlanTag> {
        if i >= self.vlan_count() {
            return None;
        }
        let at = field::ETHERTYPE.start + i * field::TAG_LEN;
        let b = self.as_bytes();
        let tpid = crate::be16(b, at)?;
        let tci = crate::be16(b, at + field::TCI.start)?;
        Some(VlanTag::from_tci(EtherType(tpid), tci))
    }

    /// VLAN ids, outermost first (`[outer, inner]`; `None` where absent).
    pub fn vlan_ids(&self) -> [Option<u16>; MAX_VLAN_TAGS] {
        [self.vlan(0).map(|t| t.vid), self.vlan(1).map(|t| t.vid)]
    }

    /// Header length: 14 plus 4 per VLAN tag.
    #[inline(always)]
    pub fn header_len(&self) -> usize {
        field::HEADER_LEN + self.vlan_count() * field::TAG_LEN
    }

    /// The ethertype after the VLAN tags.
    #[inline(always)]
    pub fn ethertype(&self) -> EtherType {
        let at = field::ETHERTYPE.start + self.vlan_count() * field::TAG_LEN;
        let b = self.as_bytes();
        EtherType(u16::from_be_bytes([b[at], b[at + 1]]))
    }

    /// The bytes after the header (and tags).
    #[inline(always)]
    pub fn payload(&self) -> &[u8] {
        &self.as_bytes()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]>> fmt::Debug for EthernetFrame<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EthernetFrame")
            .field("dst", &self.dst())
            .field("src", &self.src())
            .field("vlan_ids", &self.vlan_ids())
            .field("ethertype", &self.ethertype())
            .field("len", &self.len())
            .finish()
    }
}

/// The header of an Ethernet frame as plain values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Destination address.
    pub dst: MacAddr,
    /// Source address.
    pub src: MacAddr,
    /// The outer (first) VLAN tag.
    pub outer_vlan: Option<VlanTag>,
    /// The inner (second) VLAN tag; needs an outer one.
    pub inner_vlan: Option<VlanTag>,
    /// The ethertype after the tags.
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// The header of a checked frame.
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> EthernetRepr {
        EthernetRepr {
            dst: frame.dst(),
            src: frame.src(),
            outer_vlan: frame.vlan(0),
            inner_vlan: frame.vlan(1),
            ethertype: frame.ethertype(),
        }
    }

    /// Bytes [`Self::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        field::HEADER_LEN
            + field::TAG_LEN
                * (self.outer_vlan.is_some() as usize + self.inner_vlan.is_some() as usize)
    }

    /// Write the header at the start of `buf`; returns its length.
    ///
    /// # Errors
    /// [`WireError::Truncated`] if `buf` is shorter than
    /// [`Self::buffer_len`]; [`WireError::Malformed`] for an inner tag
    /// without an outer one, a tag with out-of-range fields, or an
    /// ethertype that is itself a VLAN TPID (it would read back as a tag).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let len = self.buffer_len();
        WireError::need(buf, len)?;
        if self.inner_vlan.is_some() && self.outer_vlan.is_none() {
            return Err(WireError::Malformed(
                "Ethernet: inner VLAN tag without an outer one",
            ));
        }
        if self.ethertype.is_vlan_tpid() {
            return Err(WireError::Malformed(
                "Ethernet: ethertype is a VLAN TPID; add a tag instead",
            ));
        }
        let out = &mut buf[..len];
        out[field::DST].copy_from_slice(&self.dst.0);
        out[field::SRC].copy_from_slice(&self.src.0);
        let mut at = field::ETHERTYPE.start;
        for tag in [self.outer_vlan, self.inner_vlan].into_iter().flatten() {
            let tci = tag.tci()?;
            out[at..at + 2].copy_from_slice(&tag.tpid.0.to_be_bytes());
            out[at + 2..at + 4].copy_from_slice(&tci.to_be_bytes());
            at += field::TAG_LEN;
        }
        out[at..at + 2].copy_from_slice(&self.ethertype.0.to_be_bytes());
        Ok(len)
    }
}

/// A writable view of the two addresses of an Ethernet header, for
/// rewriting a frame in place.
///
/// [`EthernetMut::new`] checks only that the 14-byte header is there, so
/// that every setter is a plain indexed write that cannot panic; parse the
/// frame first with [`EthernetFrame::new_checked`].
#[derive(Debug)]
pub struct EthernetMut<'a> {
    h: &'a mut [u8; field::HEADER_LEN],
}

impl<'a> EthernetMut<'a> {
    /// View the first 14 bytes of `buf`.
    ///
    /// # Errors
    /// [`WireError::Truncated`] when `buf` is shorter than 14 bytes.
    #[inline(always)]
    pub fn new(buf: &'a mut [u8]) -> Result<EthernetMut<'a>, WireError> {
        let got = buf.len();
        buf.get_mut(..field::HEADER_LEN)
            .and_then(|h| h.try_into().ok())
            .map(|h| EthernetMut { h })
            .ok_or(WireError::Truncated {
                needed: field::HEADER_LEN,
                got,
            })
    }

    /// Destination address.
    #[inline(always)]
    pub fn dst(&self) -> MacAddr {
        MacAddr::from_slice(&self.h[field::DST]).unwrap_or_default()
    }

    /// Source address.
    #[inline(always)]
    pub fn src(&self) -> MacAddr {
        MacAddr::from_slice(&self.h[field::SRC]).unwrap_or_default()
    }

    /// Set the destination address.
    #[inline(always)]
    pub fn set_dst(&mut self, mac: MacAddr) {
        self.h[field::DST].copy_from_slice(&mac.0);
    }

    /// Set the source address.
    #[inline(always)]
    pub fn set_src(&mut self, mac: MacAddr) {
        self.h[field::SRC].copy_from_slice(&mac.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// dst 02:00:00:00:00:01, src 02:00:00:00:00:02, IPv4, 4 payload bytes.
    const UNTAGGED: [u8; 18] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // dst
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // src
        0x08, 0x00, // IPv4
        0xde, 0xad, 0xbe, 0xef,
    ];

    /// QinQ: S-tag 0x88a8 vid 100 pcp 5, C-tag 0x8100 vid 42 dei, then IPv6.
    const DOUBLE_TAGGED: [u8; 24] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // dst
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // src
        0x88, 0xa8, 0xa0, 0x64, // S-tag: pcp 5, vid 100
        0x81, 0x00, 0x10, 0x2a, // C-tag: dei, vid 42
        0x86, 0xdd, // IPv6
        0x01, 0x02,
    ];

    #[test]
    fn untagged_frame_exposes_addresses_type_and_payload() {
        let f = EthernetFrame::new_checked(&UNTAGGED[..]).unwrap();
        assert_eq!(f.dst(), MacAddr([2, 0, 0, 0, 0, 1]));
        assert_eq!(f.dst_bytes(), &[2, 0, 0, 0, 0, 1]);
        assert_eq!(f.src(), MacAddr([2, 0, 0, 0, 0, 2]));
        assert_eq!(f.ethertype(), EtherType::IPV4);
        assert_eq!(f.vlan_count(), 0);
        assert_eq!(f.vlan_ids(), [None, None]);
        assert_eq!(f.header_len(), 14);
        assert_eq!(f.payload(), &[0xde, 0xad, 0xbe, 0xef]);
    }

    #[test]
    fn double_tagged_frame_reports_both_tags_and_the_inner_ethertype() {
        let f = EthernetFrame::new_checked(&DOUBLE_TAGGED[..]).unwrap();
        assert_eq!(f.vlan_count(), 2);
        assert_eq!(
            f.vlan(0),
            Some(VlanTag {
                tpid: EtherType::QINQ,
                pcp: 5,
                dei: false,
                vid: 100
            })
        );
        assert_eq!(
            f.vlan(1),
            Some(VlanTag {
                tpid: EtherType::VLAN,
                pcp: 0,
                dei: true,
                vid: 42
            })
        );
        assert_eq!(f.vlan(2), None);
        assert_eq!(f.vlan_ids(), [Some(100), Some(42)]);
        assert_eq!(f.ethertype(), EtherType::IPV6);
        assert_eq!(f.header_len(), 22);
        assert_eq!(f.payload(), &[0x01, 0x02]);
        assert!(f.dst().is_broadcast());
    }

    #[test]
    fn runt_shorter_than_fourteen_bytes_is_truncated() {
        for n in 0..14 {
            assert_eq!(
                EthernetFrame::new_checked(&UNTAGGED[..n]).unwrap_err(),
                WireError::Truncated { needed: 14, got: n }
            );
        }
        // Exactly a header is a frame with an empty payload.
        let f = EthernetFrame::new_checked(&UNTAGGED[..14]).unwrap();
        assert!(f.payload().is_empty());
    }

    #[test]
    fn frame_ending_inside_a_vlan_tag_is_truncated() {
        // The S-tag TPID is there but its TCI and the next type are not.
        for n in 14..18 {
            assert_eq!(
                EthernetFrame::new_checked(&DOUBLE_TAGGED[..n]).unwrap_err(),
                WireError::Truncated { needed: 18, got: n }
            );
        }
        for n in 18..22 {
            assert_eq!(
                EthernetFrame::new_checked(&DOUBLE_TAGGED[..n]).unwrap_err(),
                WireError::Truncated { needed: 22, got: n }
            );
        }
        assert!(EthernetFrame::new_checked(&DOUBLE_TAGGED[..22]).is_ok());
    }

    #[test]
    fn third_tpid_is_left_as_the_ethertype() {
        let mut b = DOUBLE_TAGGED.to_vec();
        b[20..22].copy_from_slice(&[0x81, 0x00]);
        let f = EthernetFrame::new_checked(&b[..]).unwrap();
        assert_eq!(f.vlan_count(), 2);
        assert_eq!(f.ethertype(), EtherType::VLAN);
    }

    #[test]
    fn length_field_frames_are_kept_as_802_3() {
        let mut b = UNTAGGED;
        b[12..14].copy_from_slice(&[0x00, 0x26]);
        let f = EthernetFrame::new_checked(&b[..]).unwrap();
        assert!(f.ethertype().is_length());
        assert_eq!(f.payload().len(), 4);
    }

    #[test]
    fn repr_parse_and_emit_round_trip_the_header() {
        for bytes in [&UNTAGGED[..], &DOUBLE_TAGGED[..]] {
            let f = EthernetFrame::new_checked(bytes).unwrap();
            let r = EthernetRepr::parse(&f);
            assert_eq!(r.buffer_len(), f.header_len());
            let mut out = vec![0u8; r.buffer_len()];
            assert_eq!(r.emit(&mut out), Ok(f.header_len()));
            assert_eq!(&out[..], &bytes[..f.header_len()]);
        }
    }

    #[test]
    fn repr_emit_rejects_short_buffers_and_bad_tags() {
        let f = EthernetFrame::new_checked(&DOUBLE_TAGGED[..]).unwrap();
        let r = EthernetRepr::parse(&f);
        assert_eq!(
            r.emit(&mut [0u8; 21]),
            Err(WireError::Truncated {
                needed: 22,
                got: 21
            })
        );
        let mut bad = r;
        bad.outer_vlan = None;
        assert!(matches!(
            bad.emit(&mut [0u8; 64]),
            Err(WireError::Malformed(_))
        ));
        let mut bad = r;
        bad.inner_vlan = Some(VlanTag {
            vid: 4096,
            ..r.inner_vlan.unwrap()
        });
        assert!(matches!(
            bad.emit(&mut [0u8; 64]),
            Err(WireError::Malformed(_))
        ));
        let mut bad = r;
        bad.ethertype = EtherType::VLAN;
        assert!(matches!(
            bad.emit(&mut [0u8; 64]),
            Err(WireError::Malformed(_))
        ));
    }

    #[test]
    fn address_setters_write_only_the_addresses() {
        let mut f = [0u8; 18];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14..].copy_from_slice(&[1, 2, 3, 4]);
        let dst = MacAddr([0x02, 0, 0, 0, 0, 0x0b]);
        let src = MacAddr([0x02, 0, 0, 0, 0, 0x0a]);
        let mut e = EthernetMut::new(&mut f).unwrap();
        e.set_dst(dst);
        e.set_src(src);
        assert_eq!((e.dst(), e.src()), (dst, src));
        let v = EthernetFrame::new_checked(&f[..]).unwrap();
        assert_eq!((v.dst(), v.src()), (dst, src));
        assert_eq!(v.ethertype(), EtherType::IPV4);
        assert_eq!(v.payload(), &[1, 2, 3, 4]);
    }

    #[test]
    fn address_view_refuses_a_runt() {
        assert_eq!(
            EthernetMut::new(&mut [0u8; 13]).unwrap_err(),
            WireError::Truncated {
                needed: 14,
                got: 13
            }
        );
    }
}
