//! Untrusted NDN packet bytes: decoding never panics; a packet that decodes
//! re-encodes to bytes that decode to the same packet, and re-encoding is
//! stable from then on.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_wire::ndn::{params_digest_ok_wire, verify_digest_sha256_wire, Name, Packet};

fuzz_target!(|data: &[u8]| {
    let _ = Name::from_value(data);
    let _ = verify_digest_sha256_wire(data);
    let _ = params_digest_ok_wire(data);
    let Ok(p) = Packet::decode(data) else {
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
