//! Flow keys: the canonical byte forms of 5-tuples, used as flat names.
//!
//! | form | bytes | layout (network byte order) |
//! | --- | --- | --- |
//! | [`five_tuple`] | 13 | src IPv4 (4), dst IPv4 (4), src port (2, BE), dst port (2, BE), protocol (1) |
//! | [`five_tuple_v6`] | 37 | src IPv6 (16), dst IPv6 (16), src port (2, BE), dst port (2, BE), protocol (1) |
//!
//! The 13-byte form is the one `nexthop_testutil::keys::FiveTuple::to_bytes`
//! generates. Ports are read for TCP, UDP, UDP-Lite and SCTP (after checking
//! their headers); other protocols, and every fragment of a fragmented
//! packet (first or later, so that all fragments of a datagram get the same
//! key), have ports 0.

use crate::error::WireError;
use crate::ethernet::{EtherType, EthernetFrame};
use crate::ip::{IpProtocol, Ipv4Packet, Ipv6Packet};
use crate::l4::{TcpSegment, UdpDatagram};

/// Bytes of an IPv4 5-tuple key.
pub const FIVE_TUPLE_LEN: usize = 13;
/// Bytes of an IPv6 5-tuple key.
pub const FIVE_TUPLE_V6_LEN: usize = 37;

/// Header bytes needed to read the ports of UDP-Lite (its 8-byte header).
const UDP_LITE_HEADER_LEN: usize = 8;
/// Header bytes needed to read the ports of SCTP (its 12-byte common header).
const SCTP_HEADER_LEN: usize = 12;

/// Source and destination ports of an upper-layer header.
fn ports(proto: IpProtocol, l4: &[u8], fragment: bool) -> Result<(u16, u16), WireError> {
    if fragment {
        return Ok((0, 0));
    }
    let raw = |need: usize| -> Result<(u16, u16), WireError> {
        WireError::need(l4, need)?;
        Ok((
            crate::be16(l4, 0).unwrap_or(0),
            crate::be16(l4, 2).unwrap_or(0),
        ))
    };
    match proto {
        IpProtocol::TCP => {
            let t = TcpSegment::new_checked(l4)?;
            Ok((t.src_port(), t.dst_port()))
        }
        IpProtocol::UDP => {
            let u = UdpDatagram::new_checked(l4)?;
            Ok((u.src_port(), u.dst_port()))
        }
        IpProtocol::UDP_LITE => raw(UDP_LITE_HEADER_LEN),
        IpProtocol::SCTP => raw(SCTP_HEADER_LEN),
        _ => Ok((0, 0)),
    }
}

/// The 13-byte IPv4 5-tuple of a frame.
///
/// # Errors
/// [`WireError::Unsupported`] for a frame that is not IPv4;
/// [`WireError::Truncated`] (byte counts from the start of the frame) or
/// [`WireError::Malformed`] for a bad IPv4, TCP or UDP header.
pub fn five_tuple<T: AsRef<[u8]>>(
    frame: &EthernetFrame<T>,
) -> Result<[u8; FIVE_TUPLE_LEN], WireError> {
    if frame.ethertype() != EtherType::IPV4 {
        return Err(WireError::Unsupported("five_tuple: not an IPv4 frame"));
    }
    let l3 = frame.header_len();
    let ip = Ipv4Packet::new_checked(frame.payload()).map_err(|e| e.shifted(l3))?;
    let l4 = l3 + ip.header_len();
    let (sp, dp) =
        ports(ip.protocol(), ip.payload(), ip.is_fragment()).map_err(|e| e.shifted(l4))?;
    let mut k = [0u8; FIVE_TUPLE_LEN];
    k[0..4].copy_from_slice(ip.src_bytes());
    k[4..8].copy_from_slice(ip.dst_bytes());
    k[8..10].copy_from_slice(&sp.to_be_bytes());
    k[10..12].copy_from_slice(&dp.to_be_bytes());
    k[12] = ip.protocol().0;
    Ok(k)
}

/// The 37-byte IPv6 5-tuple of a frame (extension headers skipped; the
/// protocol byte is the upper-layer protocol).
///
/// # Errors
/// [`WireError::Unsupported`] for a frame that is not IPv6;
/// [`WireError::Truncated`] (byte counts from the start of the frame) or
/// [`WireError::Malformed`] for a bad IPv6 header, extension chain, TCP or
/// UDP header.
pub fn five_tuple_v6<T: AsRef<[u8]>>(
    frame: &EthernetFrame<T>,
) -> Result<[u8; FIVE_TUPLE_V6_LEN], WireError> {
    if frame.ethertype() != EtherType::IPV6 {
        return Err(WireError::Unsupported("five_tuple_v6: not an IPv6 frame"));
    }
    /// The fixed IPv6 header length.
    const V6_HEADER_LEN: usize = 40;
    let l3 = frame.header_len();
    let ip = Ipv6Packet::new_checked(frame.payload()).map_err(|e| e.shifted(l3))?;
    let payload_at = l3 + V6_HEADER_LEN;
    let up = ip.upper_layer().map_err(|e| e.shifted(payload_at))?;
    let l4 = ip.payload().get(up.offset..).unwrap_or(&[]);
    let (sp, dp) =
        ports(up.protocol, l4, up.fragment).map_err(|e| e.shifted(payload_at + up.offset))?;
    let mut k = [0u8; FIVE_TUPLE_V6_LEN];
    k[0..16].copy_from_slice(ip.src_bytes());
    k[16..32].copy_from_slice(ip.dst_bytes());
    k[32..34].copy_from_slice(&sp.to_be_bytes());
    k[34..36].copy_from_slice(&dp.to_be_bytes());
    k[36] = up.protocol.0;
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ethernet (tagged, VLAN 7) + IPv4 10.1.2.3 -> 10.4.5.6 + TCP 40000 -> 443.
    fn tagged_tcp() -> Vec<u8> {
        let mut f = vec![
            0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, // dst, src
            0x81, 0x00, 0x00, 0x07, // VLAN 7
            0x08, 0x00, // IPv4
            0x45, 0x00, 0x00, 0x28, 0, 0, 0x40, 0, 64, 6, 0, 0, // 40 bytes, TCP
            10, 1, 2, 3, 10, 4, 5, 6,
        ];
        f.extend_from_slice(&[0x9c, 0x40, 0x01, 0xbb, 0, 0, 0, 1, 0, 0, 0, 0]);
        f.extend_from_slice(&[0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
        f
    }

    #[test]
    fn ipv4_tcp_five_tuple_is_addresses_ports_then_protocol() {
        let b = tagged_tcp();
        let f = EthernetFrame::new_checked(&b[..]).unwrap();
        assert_eq!(
            five_tuple(&f),
            Ok([10, 1, 2, 3, 10, 4, 5, 6, 0x9c, 0x40, 0x01, 0xbb, 6])
        );
    }

    #[test]
    fn ipv4_udp_and_portless_protocols() {
        let mut b = tagged_tcp();
        b[27] = 17; // UDP
        b.truncate(18 + 20 + 8);
        b[20..22].copy_from_slice(&28u16.to_be_bytes());
        b[42..44].copy_from_slice(&8u16.to_be_bytes());
        let f = EthernetFrame::new_checked(&b[..]).unwrap();
        assert_eq!(
            five_tuple(&f),
            Ok([10, 1, 2, 3, 10, 4, 5, 6, 0x9c, 0x40, 0x01, 0xbb, 17])
        );
        b[27] = 1; // ICMP: ports 0
        let f = EthernetFrame::new_checked(&b[..]).unwrap();
        assert_eq!(
            five_tuple(&f),
            Ok([10, 1, 2, 3, 10, 4, 5, 6, 0, 0, 0, 0, 1])
        );
    }

    #[test]
    fn fragments_have_zero_ports_so_all_pieces_share_a_key() {
        let mut b = tagged_tcp();
        b[24..26].copy_from_slice(&0x2000u16.to_be_bytes()); // MF
        let f = EthernetFrame::new_checked(&b[..]).unwrap();
        assert_eq!(five_tuple(&f).unwrap()[8..12], [0, 0, 0, 0]);
    }

    #[test]
    fn truncated_l4_header_is_reported_from_the_frame_start() {
        let mut b = tagged_tcp();
        b.truncate(18 + 20 + 10);
        b[20..22].copy_from_slice(&30u16.to_be_bytes());
        let f = EthernetFrame::new_checked(&b[..]).unwrap();
        assert_eq!(
            five_tuple(&f),
            Err(WireError::Truncated {
                needed: 58,
                got: 48
            })
        );
        // IPv4 total length beyond the frame.
        let b = &tagged_tcp()[..50];
        let f = EthernetFrame::new_checked(b).unwrap();
        assert_eq!(
            five_tuple(&f),
            Err(WireError::Truncated {
                needed: 58,
                got: 50
            })
        );
    }

    #[test]
    fn non_ip_frames_have_no_five_tuple() {
        let mut b = tagged_tcp();
        b[16..18].copy_from_slice(&[0x08, 0x06]);
        let f = EthernetFrame::new_checked(&b[..]).unwrap();
        assert!(matches!(five_tuple(&f), Err(WireError::Unsupported(_))));
        assert!(matches!(five_tuple_v6(&f), Err(WireError::Unsupported(_))));
    }

    #[test]
    fn ipv6_udp_five_tuple_skips_extension_headers() {
        let mut b = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x86, 0xdd];
        b.extend_from_slice(&[0x60, 0, 0, 0, 0x00, 0x10, 60, 64]); // payload 16, dest opts
        b.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        b.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        b.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]); // dest opts, next UDP
        b.extend_from_slice(&[0x13, 0x88, 0x00, 0x35, 0x00, 0x08, 0x00, 0x00]); // 5000 -> 53
        let f = EthernetFrame::new_checked(&b[..]).unwrap();
        let k = five_tuple_v6(&f).unwrap();
        assert_eq!(&k[0..16], &b[22..38]);
        assert_eq!(&k[16..32], &b[38..54]);
        assert_eq!(&k[32..37], &[0x13, 0x88, 0x00, 0x35, 17]);
        assert!(matches!(five_tuple(&f), Err(WireError::Unsupported(_))));
        // UDP header cut: 4 bytes of it are missing.
        let mut short = b.clone();
        short.truncate(b.len() - 4);
        short[18..20].copy_from_slice(&12u16.to_be_bytes());
        let f = EthernetFrame::new_checked(&short[..]).unwrap();
        assert_eq!(
            five_tuple_v6(&f),
            Err(WireError::Truncated {
                needed: 70,
                got: 66
            })
        );
    }
}
