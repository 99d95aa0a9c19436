//! Untrusted bytes never make a view panic, and a view that accepts bytes
//! gives accessors that agree with the bytes.

use nexthop_wire::{
    five_tuple, five_tuple_v6, EthernetFrame, EthernetRepr, Ipv4Packet, Ipv6Packet, TcpSegment,
    UdpDatagram, WireError,
};
use proptest::prelude::*;

/// Touch every accessor of every view that accepts `b`.
fn exercise(b: &[u8]) {
    if let Ok(f) = EthernetFrame::new_checked(b) {
        let _ = (f.dst(), f.src(), f.vlan_ids(), f.ethertype(), f.payload());
        assert_eq!(f.header_len() + f.payload().len(), b.len());
        let r = EthernetRepr::parse(&f);
        let mut out = vec![0u8; r.buffer_len()];
        if r.emit(&mut out).is_ok() {
            assert_eq!(&out[..], &b[..f.header_len()]);
        }
        let _ = five_tuple(&f);
        let _ = five_tuple_v6(&f);
    }
    if let Ok(p) = Ipv4Packet::new_checked(b) {
        let _ = (p.src_addr(), p.dst_addr(), p.protocol(), p.checksum_ok());
        assert!(p.header_len() + p.payload().len() <= b.len());
    }
    if let Ok(p) = Ipv6Packet::new_checked(b) {
        let _ = (p.src_addr(), p.dst_addr(), p.upper_layer(), p.payload());
    }
    if let Ok(t) = TcpSegment::new_checked(b) {
        let _ = (t.src_port(), t.dst_port(), t.seq(), t.ack(), t.payload());
    }
    if let Ok(u) = UdpDatagram::new_checked(b) {
        let _ = (u.src_port(), u.dst_port(), u.payload());
    }
}

proptest! {
    #[test]
    fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..128)) {
        exercise(&b);
    }

    /// Frames that start like real ones (tags, IPv4/IPv6 headers) reach
    /// the deeper layers more often than uniform bytes do.
    #[test]
    fn plausible_frames_never_panic(
        tags in 0usize..3,
        v6 in any::<bool>(),
        proto in prop_oneof![Just(6u8), Just(17), Just(0), Just(44), Just(60), any::<u8>()],
        tail in proptest::collection::vec(any::<u8>(), 0..96),
        cut in 0usize..160,
    ) {
        let mut b = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
        for t in 0..tags {
            b.extend_from_slice(if t == 0 { &[0x88, 0xa8, 0, 7] } else { &[0x81, 0, 0, 9] });
        }
        if v6 {
            b.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
            b.extend_from_slice(&(tail.len() as u16).to_be_bytes());
            b.extend_from_slice(&[proto, 64]);
            b.extend_from_slice(&[0u8; 32]);
        } else {
            b.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
            b.extend_from_slice(&(20 + tail.len() as u16).to_be_bytes());
            b.extend_from_slice(&[0, 0, 0, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        }
        b.extend_from_slice(&tail);
        b.truncate(cut.max(1).min(b.len()));
        exercise(&b);
        if let Ok(f) = EthernetFrame::new_checked(&b[..]) {
            if let Err(WireError::Truncated { needed, got }) = five_tuple(&f) {
                prop_assert!(needed > got && got <= b.len());
            }
        }
    }
}
