//! Untrusted NDN packet bytes: decoding never panics; a packet that decodes
//! re-encodes to bytes that decode to the same packet, and re-encoding is
//! stable from then on; the borrowed views (`PacketView`, the one decoder
//! walk the owned decoders copy out of) agree with them, fragments
//! included.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_wire::ndn::{
    params_digest_ok_wire, verify_digest_sha256_wire, Name, NetPacketView, Packet, PacketView,
};

fuzz_target!(|data: &[u8]| {
    let _ = Name::from_value(data);
    let _ = verify_digest_sha256_wire(data);
    let _ = params_digest_ok_wire(data);
    let owned = Packet::decode(data);
    assert_eq!(PacketView::parse(data).map(|v| v.to_owned()), owned);
    if let Ok(PacketView::Lp(lp)) = PacketView::parse(data) {
        if let Some(f) = lp.fragment {
            let view = NetPacketView::parse(f).map(|v| v.to_owned());
            assert_eq!(view, nexthop_wire::ndn::NetPacket::decode(f));
        }
    }
    let Ok(p) = owned else {
        return;
    };
    let wire = p.to_wire();
    let again = Packet::decode(&wire).expect("re-encoded packet must decode");
    assert_eq!(again, p);
    assert_eq!(again.to_wire(), wire);
    if let Packet::Lp(lp) = &p {
        let _ = lp.network_packet();
    }
});
