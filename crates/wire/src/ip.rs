//! IPv4 and IPv6 headers.
//!
//! The views check what a forwarder's lookups need: lengths, versions and
//! (for IPv6) the extension-header chain up to the upper-layer protocol.
//! Checksums are not verified on construction ([`Ipv4Packet::checksum_ok`]
//! does it on request): a switch forwards by name, not by header validity.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::error::WireError;

/// An IP protocol number (IPv4 protocol, IPv6 next header).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpProtocol(pub u8);

impl IpProtocol {
    /// IPv6 hop-by-hop options.
    pub const HOP_BY_HOP: IpProtocol = IpProtocol(0);
    /// ICMP.
    pub const ICMP: IpProtocol = IpProtocol(1);
    /// TCP.
    pub const TCP: IpProtocol = IpProtocol(6);
    /// UDP.
    pub const UDP: IpProtocol = IpProtocol(17);
    /// IPv6 routing header.
    pub const IPV6_ROUTING: IpProtocol = IpProtocol(43);
    /// IPv6 fragment header.
    pub const IPV6_FRAGMENT: IpProtocol = IpProtocol(44);
    /// Authentication header.
    pub const AH: IpProtocol = IpProtocol(51);
    /// ICMPv6.
    pub const ICMPV6: IpProtocol = IpProtocol(58);
    /// IPv6 "no next header".
    pub const IPV6_NO_NEXT: IpProtocol = IpProtocol(59);
    /// IPv6 destination options.
    pub const IPV6_DEST_OPTS: IpProtocol = IpProtocol(60);
    /// SCTP.
    pub const SCTP: IpProtocol = IpProtocol(132);
    /// UDP-Lite.
    pub const UDP_LITE: IpProtocol = IpProtocol(136);
}

impl fmt::Debug for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IpProtocol({})", self.0)
    }
}

mod v4 {
    use std::ops::Range;

    pub const VER_IHL: usize = 0;
    pub const TOTAL_LEN: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLAGS_FRAG: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;
    /// Header length without options.
    pub const MIN_HEADER_LEN: usize = DST.end;
}

/// A checked view of an IPv4 packet.
///
/// [`Ipv4Packet::new_checked`] validates version, IHL and total length
/// against the buffer; [`Ipv4Packet::payload`] then ends at the total
/// length, so Ethernet padding is not part of it.
#[derive(Clone, Copy)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// View `buffer` as an IPv4 packet.
    ///
    /// # Errors
    /// [`WireError::Truncated`] when the buffer ends before the header
    /// (options included) or before the total length;
    /// [`WireError::Malformed`] for a version other than 4, an IHL below 5
    /// or a total length shorter than the header.
    pub fn new_checked(buffer: T) -> Result<Ipv4Packet<T>, WireError> {
        let b = buffer.as_ref();
        WireError::need(b, v4::MIN_HEADER_LEN)?;
        let vi = b[v4::VER_IHL];
        if vi >> 4 != 4 {
            return Err(WireError::Malformed("IPv4: version is not 4"));
        }
        let hl = (vi & 0x0f) as usize * 4;
        if hl < v4::MIN_HEADER_LEN {
            return Err(WireError::Malformed("IPv4: IHL below 5 (20 bytes)"));
        }
        WireError::need(b, hl)?;
        let total = crate::be16(b, v4::TOTAL_LEN.start).unwrap_or(0) as usize;
        if total < hl {
            return Err(WireError::Malformed(
                "IPv4: total length shorter than the header",
            ));
        }
        WireError::need(b, total)?;
        Ok(Ipv4Packet { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    fn u16_at(&self, at: usize) -> u16 {
        let b = self.b();
        u16::from_be_bytes([b[at], b[at + 1]])
    }

    /// Header length in bytes (IHL × 4).
    pub fn header_len(&self) -> usize {
        (self.b()[v4::VER_IHL] & 0x0f) as usize * 4
    }

    /// Total length field (header and payload).
    pub fn total_len(&self) -> usize {
        self.u16_at(v4::TOTAL_LEN.start) as usize
    }

    /// Identification field.
    pub fn ident(&self) -> u16 {
        self.u16_at(v4::IDENT.start)
    }

    /// Don't-fragment flag.
    pub fn dont_frag(&self) -> bool {
        self.u16_at(v4::FLAGS_FRAG.start) & 0x4000 != 0
    }

    /// More-fragments flag.
    pub fn more_frags(&self) -> bool {
        self.u16_at(v4::FLAGS_FRAG.start) & 0x2000 != 0
    }

    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> usize {
        (self.u16_at(v4::FLAGS_FRAG.start) & 0x1fff) as usize * 8
    }

    /// Whether this packet is a fragment (first or later) of a larger one.
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.b()[v4::TTL]
    }

    /// Upper-layer protocol.
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol(self.b()[v4::PROTOCOL])
    }

    /// Header checksum field.
    pub fn checksum(&self) -> u16 {
        self.u16_at(v4::CHECKSUM.start)
    }

    /// Whether the header checksum is correct.
    pub fn checksum_ok(&self) -> bool {
        crate::checksum::ones_complement_sum(&self.b()[..self.header_len()]) == 0xffff
    }

    /// Source address bytes.
    pub fn src_bytes(&self) -> &[u8] {
        &self.b()[v4::SRC]
    }

    /// Destination address bytes.
    pub fn dst_bytes(&self) -> &[u8] {
        &self.b()[v4::DST]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        let s = self.src_bytes();
        Ipv4Addr::new(s[0], s[1], s[2], s[3])
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        let d = self.dst_bytes();
        Ipv4Addr::new(d[0], d[1], d[2], d[3])
    }

    /// Bytes after the header, up to the total length.
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..self.total_len()]
    }
}

impl<T: AsRef<[u8]>> fmt::Debug for Ipv4Packet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ipv4Packet")
            .field("src", &self.src_addr())
            .field("dst", &self.dst_addr())
            .field("protocol", &self.protocol())
            .field("total_len", &self.total_len())
            .finish()
    }
}

mod v6 {
    use std::ops::Range;

    pub const VER_TC_FL: usize = 0;
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Range<usize> = 8..24;
    pub const DST: Range<usize> = 24..40;
    pub const HEADER_LEN: usize = DST.end;
    /// Fragment extension header: offset/flags field, relative to its start.
    pub const FRAG_OFF_FLAGS: Range<usize> = 2..4;
    /// Length of the fragment extension header.
    pub const FRAG_HEADER_LEN: usize = 8;
}

/// Most IPv6 extension headers [`Ipv6Packet::upper_layer`] walks.
const MAX_EXTENSION_HEADERS: usize = 8;

/// Where the upper-layer header of an IPv6 packet starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpperLayer {
    /// The upper-layer protocol (the last next-header value).
    pub protocol: IpProtocol,
    /// Offset of its header from the start of the IPv6 payload.
    pub offset: usize,
    /// Whether a fragment header was crossed (the packet is a fragment).
    pub fragment: bool,
}

/// A checked view of an IPv6 packet.
#[derive(Clone, Copy)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// View `buffer` as an IPv6 packet.
    ///
    /// # Errors
    /// [`WireError::Truncated`] when the buffer ends before the 40-byte
    /// header or before the payload length; [`WireError::Malformed`] for a
    /// version other than 6.
    pub fn new_checked(buffer: T) -> Result<Ipv6Packet<T>, WireError> {
        let b = buffer.as_ref();
        WireError::need(b, v6::HEADER_LEN)?;
        if b[v6::VER_TC_FL] >> 4 != 6 {
            return Err(WireError::Malformed("IPv6: version is not 6"));
        }
        let plen = crate::be16(b, v6::PAYLOAD_LEN.start).unwrap_or(0) as usize;
        WireError::need(b, v6::HEADER_LEN + plen)?;
        Ok(Ipv6Packet { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Payload length field.
    pub fn payload_len(&self) -> usize {
        let b = self.b();
        u16::from_be_bytes([b[v6::PAYLOAD_LEN.start], b[v6::PAYLOAD_LEN.start + 1]]) as usize
    }

    /// The next-header field of the fixed header.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.b()[v6::NEXT_HEADER])
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.b()[v6::HOP_LIMIT]
    }

    /// Source address bytes.
    pub fn src_bytes(&self) -> &[u8] {
        &self.b()[v6::SRC]
    }

    /// Destination address bytes.
    pub fn dst_bytes(&self) -> &[u8] {
        &self.b()[v6::DST]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(self.src_bytes());
        Ipv6Addr::from(a)
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(self.dst_bytes());
        Ipv6Addr::from(a)
    }

    /// Bytes after the fixed header, up to the payload length (extension
    /// headers included).
    pub fn payload(&self) -> &[u8] {
        &self.b()[v6::HEADER_LEN..v6::HEADER_LEN + self.payload_len()]
    }

    /// Walk hop-by-hop, routing, fragment, destination-options and AH
    /// extension headers to the upper-layer protocol.
    ///
    /// # Errors
    /// [`WireError::Truncated`] (offsets from the start of the payload) if
    /// an extension header runs past the payload; [`WireError::Malformed`]
    /// after more than eight extension headers.
    pub fn upper_layer(&self) -> Result<UpperLayer, WireError> {
        let p = self.payload();
        let mut proto = self.next_header();
        let mut off = 0usize;
        let mut fragment = false;
        for _ in 0..=MAX_EXTENSION_HEADERS {
            let len = match proto {
                IpProtocol::HOP_BY_HOP | IpProtocol::IPV6_ROUTING | IpProtocol::IPV6_DEST_OPTS => {
                    WireError::need(p, off + 2)?;
                    (p[off + 1] as usize + 1) * 8
                }
                IpProtocol::AH => {
                    WireError::need(p, off + 2)?;
                    (p[off + 1] as usize + 2) * 4
                }
                IpProtocol::IPV6_FRAGMENT => {
                    WireError::need(p, off + v6::FRAG_HEADER_LEN)?;
                    fragment = true;
                    v6::FRAG_HEADER_LEN
                }
                _ => {
                    return Ok(UpperLayer {
                        protocol: proto,
                        offset: off,
                        fragment,
                    })
                }
            };
            WireError::need(p, off + len)?;
            if proto == IpProtocol::IPV6_FRAGMENT {
                let at = off + v6::FRAG_OFF_FLAGS.start;
                // The later fragments carry no upper-layer header at all.
                let offset_units = crate::be16(p, at).unwrap_or(0) >> 3;
                if offset_units != 0 {
                    return Ok(UpperLayer {
                        protocol: IpProtocol(p[off]),
                        offset: off + len,
                        fragment: true,
                    });
                }
            }
            proto = IpProtocol(p[off]);
            off += len;
        }
        Err(WireError::Malformed(
            "IPv6: more than eight extension headers",
        ))
    }
}

impl<T: AsRef<[u8]>> fmt::Debug for Ipv6Packet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ipv6Packet")
            .field("src", &self.src_addr())
            .field("dst", &self.dst_addr())
            .field("next_header", &self.next_header())
            .field("payload_len", &self.payload_len())
            .finish()
    }
}

/// A writable view of the fixed 20 bytes of an IPv4 header, for rewriting
/// a packet in place (TTL, checksum).
///
/// [`Ipv4HeaderMut::new`] checks only that the 20 bytes are there, so that
/// every setter is a plain indexed write that cannot panic; validate the
/// packet first with [`Ipv4Packet::new_checked`].
#[derive(Debug)]
pub struct Ipv4HeaderMut<'a> {
    h: &'a mut [u8; v4::MIN_HEADER_LEN],
}

impl<'a> Ipv4HeaderMut<'a> {
    /// View the first 20 bytes of `buf`.
    ///
    /// # Errors
    /// [`WireError::Truncated`] when `buf` is shorter than 20 bytes.
    #[inline(always)]
    pub fn new(buf: &'a mut [u8]) -> Result<Ipv4HeaderMut<'a>, WireError> {
        let got = buf.len();
        buf.get_mut(..v4::MIN_HEADER_LEN)
            .and_then(|h| h.try_into().ok())
            .map(|h| Ipv4HeaderMut { h })
            .ok_or(WireError::Truncated {
                needed: v4::MIN_HEADER_LEN,
                got,
            })
    }

    /// Time to live.
    #[inline(always)]
    pub fn ttl(&self) -> u8 {
        self.h[v4::TTL]
    }

    /// Set the time to live (the checksum is left as it is).
    #[inline(always)]
    pub fn set_ttl(&mut self, ttl: u8) {
        self.h[v4::TTL] = ttl;
    }

    /// Header checksum field.
    #[inline(always)]
    pub fn checksum(&self) -> u16 {
        u16::from_be_bytes([self.h[v4::CHECKSUM.start], self.h[v4::CHECKSUM.start + 1]])
    }

    /// Set the header checksum field.
    #[inline(always)]
    pub fn set_checksum(&mut self, checksum: u16) {
        self.h[v4::CHECKSUM].copy_from_slice(&checksum.to_be_bytes());
    }

    /// Decrement the TTL by one (wrapping) and update the checksum
    /// incrementally ([`checksum_update`](crate::checksum::checksum_update)),
    /// as a router does; returns the new TTL.
    #[inline(always)]
    pub fn decrement_ttl(&mut self) -> u8 {
        let old = u16::from_be_bytes([self.h[v4::TTL], self.h[v4::PROTOCOL]]);
        let new = old.wrapping_sub(0x100);
        let hc = self.checksum();
        self.h[v4::TTL] = (new >> 8) as u8;
        self.set_checksum(crate::checksum::checksum_update(hc, old, new));
        self.h[v4::TTL]
    }
}

/// A writable view of the fixed 40-byte IPv6 header, for rewriting a
/// packet in place (hop limit).
///
/// [`Ipv6HeaderMut::new`] checks only that the 40 bytes are there, so that
/// every setter is a plain indexed write that cannot panic; validate the
/// packet first with [`Ipv6Packet::new_checked`].
#[derive(Debug)]
pub struct Ipv6HeaderMut<'a> {
    h: &'a mut [u8; v6::HEADER_LEN],
}

impl<'a> Ipv6HeaderMut<'a> {
    /// View the first 40 bytes of `buf`.
    ///
    /// # Errors
    /// [`WireError::Truncated`] when `buf` is shorter than 40 bytes.
    #[inline(always)]
    pub fn new(buf: &'a mut [u8]) -> Result<Ipv6HeaderMut<'a>, WireError> {
        let got = buf.len();
        buf.get_mut(..v6::HEADER_LEN)
            .and_then(|h| h.try_into().ok())
            .map(|h| Ipv6HeaderMut { h })
            .ok_or(WireError::Truncated {
                needed: v6::HEADER_LEN,
                got,
            })
    }

    /// Hop limit.
    #[inline(always)]
    pub fn hop_limit(&self) -> u8 {
        self.h[v6::HOP_LIMIT]
    }

    /// Set the hop limit.
    #[inline(always)]
    pub fn set_hop_limit(&mut self, hop_limit: u8) {
        self.h[v6::HOP_LIMIT] = hop_limit;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 192.0.2.1 -> 198.51.100.7, UDP, total length 28 (8 payload bytes),
    /// valid checksum, followed by 2 bytes of Ethernet padding.
    const V4_UDP: [u8; 30] = [
        0x45, 0x00, 0x00, 0x1c, // version 4, IHL 5, total length 28
        0x12, 0x34, 0x40, 0x00, // ident, DF
        0x40, 0x11, 0x00, 0x00, // TTL 64, UDP, checksum (filled below)
        192, 0, 2, 1, // src
        198, 51, 100, 7, // dst
        0x30, 0x39, 0x00, 0x35, 0x00, 0x08, 0x00, 0x00, // UDP 12345 -> 53
        0xaa, 0xbb, // padding
    ];

    fn with_checksum(mut b: [u8; 30]) -> [u8; 30] {
        let c = crate::checksum::ipv4_header_checksum(&b[..20]);
        b[10..12].copy_from_slice(&c.to_be_bytes());
        b
    }

    #[test]
    fn ipv4_header_fields_and_payload_without_padding() {
        let b = with_checksum(V4_UDP);
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 28);
        assert_eq!(p.ident(), 0x1234);
        assert!(p.dont_frag() && !p.more_frags() && !p.is_fragment());
        assert_eq!(p.frag_offset(), 0);
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), IpProtocol::UDP);
        assert_eq!(p.src_addr(), Ipv4Addr::new(192, 0, 2, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(198, 51, 100, 7));
        assert_eq!(p.payload().len(), 8);
        assert!(p.checksum_ok());
        let mut bad = b;
        bad[8] = 63;
        assert!(!Ipv4Packet::new_checked(&bad[..]).unwrap().checksum_ok());
    }

    #[test]
    fn ipv4_rejects_wrong_version_short_ihl_and_short_total_length() {
        let mut b = V4_UDP;
        b[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).unwrap_err(),
            WireError::Malformed("IPv4: version is not 4")
        );
        let mut b = V4_UDP;
        b[0] = 0x44;
        assert!(matches!(
            Ipv4Packet::new_checked(&b[..]),
            Err(WireError::Malformed(_))
        ));
        let mut b = V4_UDP;
        b[2..4].copy_from_slice(&19u16.to_be_bytes());
        assert!(matches!(
            Ipv4Packet::new_checked(&b[..]),
            Err(WireError::Malformed(_))
        ));
    }

    #[test]
    fn ipv4_truncated_header_options_or_payload_say_how_much_was_needed() {
        assert_eq!(
            Ipv4Packet::new_checked(&V4_UDP[..19]).unwrap_err(),
            WireError::Truncated {
                needed: 20,
                got: 19
            }
        );
        let mut b = V4_UDP;
        b[0] = 0x46; // 24-byte header with options
        assert_eq!(
            Ipv4Packet::new_checked(&b[..22]).unwrap_err(),
            WireError::Truncated {
                needed: 24,
                got: 22
            }
        );
        assert_eq!(
            Ipv4Packet::new_checked(&V4_UDP[..27]).unwrap_err(),
            WireError::Truncated {
                needed: 28,
                got: 27
            }
        );
    }

    #[test]
    fn ipv4_fragments_are_recognised() {
        let mut b = V4_UDP;
        b[6..8].copy_from_slice(&0x2000u16.to_be_bytes()); // MF, offset 0
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert!(p.more_frags() && p.is_fragment() && p.frag_offset() == 0);
        b[6..8].copy_from_slice(&0x0003u16.to_be_bytes()); // offset 24
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert!(!p.more_frags() && p.is_fragment());
        assert_eq!(p.frag_offset(), 24);
    }

    /// 2001:db8::1 -> 2001:db8::2, hop-by-hop (8 bytes) then TCP header start.
    fn v6_with_hop_by_hop() -> Vec<u8> {
        let mut b = vec![0x60, 0, 0, 0, 0x00, 0x0c, 0x00, 64];
        b.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        b.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        b.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]); // HBH: next TCP, len 0 (8 bytes), PadN
        b.extend_from_slice(&[0x01, 0xbb, 0xc0, 0x01]); // first 4 bytes of TCP
        b
    }

    #[test]
    fn ipv6_walks_extension_headers_to_the_upper_layer() {
        let b = v6_with_hop_by_hop();
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload_len(), 12);
        assert_eq!(p.next_header(), IpProtocol::HOP_BY_HOP);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr(), "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.dst_addr(), "2001:db8::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(
            p.upper_layer(),
            Ok(UpperLayer {
                protocol: IpProtocol::TCP,
                offset: 8,
                fragment: false
            })
        );
    }

    #[test]
    fn ipv6_later_fragments_have_no_upper_layer_header() {
        let mut b = v6_with_hop_by_hop();
        b[6] = IpProtocol::IPV6_FRAGMENT.0;
        // Fragment header: next TCP, offset 1 (8 bytes), no M flag.
        b[40..48].copy_from_slice(&[6, 0, 0x00, 0x08, 0, 0, 0, 1]);
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        let u = p.upper_layer().unwrap();
        assert!(u.fragment);
        assert_eq!(u.protocol, IpProtocol::TCP);
    }

    #[test]
    fn ipv6_rejects_wrong_version_truncation_and_runaway_chains() {
        let mut b = v6_with_hop_by_hop();
        b[0] = 0x40;
        assert_eq!(
            Ipv6Packet::new_checked(&b[..]).unwrap_err(),
            WireError::Malformed("IPv6: version is not 6")
        );
        let b = v6_with_hop_by_hop();
        assert_eq!(
            Ipv6Packet::new_checked(&b[..39]).unwrap_err(),
            WireError::Truncated {
                needed: 40,
                got: 39
            }
        );
        assert_eq!(
            Ipv6Packet::new_checked(&b[..51]).unwrap_err(),
            WireError::Truncated {
                needed: 52,
                got: 51
            }
        );
        // Extension header longer than the payload.
        let mut b = v6_with_hop_by_hop();
        b[41] = 1; // 16 bytes, payload has 12
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(
            p.upper_layer(),
            Err(WireError::Truncated {
                needed: 16,
                got: 12
            })
        );
        // Nine destination-option headers.
        let mut b = vec![0x60, 0, 0, 0, 0, 72, 60, 64];
        b.extend_from_slice(&[0u8; 32]);
        for _ in 0..9 {
            b.extend_from_slice(&[60, 0, 1, 4, 0, 0, 0, 0]);
        }
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert!(matches!(p.upper_layer(), Err(WireError::Malformed(_))));
    }

    #[test]
    fn ipv4_setters_write_the_fields_and_decrement_keeps_the_checksum_valid() {
        let mut b = with_checksum(V4_UDP);
        {
            let mut h = Ipv4HeaderMut::new(&mut b[..]).unwrap();
            assert_eq!(h.ttl(), 64);
            assert_eq!(h.decrement_ttl(), 63);
            assert_eq!(h.ttl(), 63);
        }
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.ttl(), 63);
        assert!(p.checksum_ok());
        let want = crate::checksum::ipv4_header_checksum(&b[..20]);
        assert_eq!(u16::from_be_bytes([b[10], b[11]]), want);

        let mut h = Ipv4HeaderMut::new(&mut b[..]).unwrap();
        h.set_ttl(9);
        h.set_checksum(0xbeef);
        assert_eq!((h.ttl(), h.checksum()), (9, 0xbeef));
        assert_eq!(b[8], 9);
        assert_eq!(b[10..12], [0xbe, 0xef]);
        // Nothing but the TTL and the checksum changed.
        let orig = with_checksum(V4_UDP);
        for i in (0..30).filter(|i| ![8, 10, 11].contains(i)) {
            assert_eq!(b[i], orig[i], "byte {i}");
        }
    }

    #[test]
    fn ipv4_ttl_zero_wraps_like_the_checksum_arithmetic() {
        let mut b = V4_UDP;
        b[8] = 0;
        let mut b = with_checksum(b);
        let mut h = Ipv4HeaderMut::new(&mut b[..20]).unwrap();
        assert_eq!(h.decrement_ttl(), 255);
        assert!(Ipv4Packet::new_checked(&b[..28]).unwrap().checksum_ok());
    }

    #[test]
    fn mutable_views_refuse_short_buffers() {
        let mut b = [0u8; 39];
        assert_eq!(
            Ipv4HeaderMut::new(&mut b[..19]).unwrap_err(),
            WireError::Truncated {
                needed: 20,
                got: 19
            }
        );
        assert_eq!(
            Ipv6HeaderMut::new(&mut b).unwrap_err(),
            WireError::Truncated {
                needed: 40,
                got: 39
            }
        );
    }

    #[test]
    fn ipv6_hop_limit_setter_writes_byte_seven_only() {
        let mut b = v6_with_hop_by_hop();
        let before = b.clone();
        let mut h = Ipv6HeaderMut::new(&mut b).unwrap();
        let hl = h.hop_limit();
        h.set_hop_limit(hl - 1);
        assert_eq!(h.hop_limit(), hl - 1);
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.hop_limit(), hl - 1);
        for i in (0..b.len()).filter(|&i| i != 7) {
            assert_eq!(b[i], before[i], "byte {i}");
        }
    }
}
