//! Untrusted management input: signed command Interests with arbitrary
//! ControlParameters for every module and verb the forwarder knows (and
//! some it does not), dataset Interests with arbitrary version and segment
//! components, from local and non-local faces; and the client's decoders
//! (ControlResponse, the four datasets) on arbitrary bytes. Never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_ndnd::dataset::{FaceStatus, FibEntry, GeneralStatus, StrategyChoiceEntry};
use nexthop_ndnd::mgmt::{decode_response, ControlParameters};
use nexthop_ndnd::{Core, FaceInfo, NdndConfig};
use nexthop_wire::ndn::tlv::write_tlv;
use nexthop_wire::ndn::{Interest, LpPacket, Name, NameComponent};

const VERBS: [(&str, &str); 10] = [
    ("rib", "register"),
    ("rib", "unregister"),
    ("strategy-choice", "set"),
    ("strategy-choice", "unset"),
    ("faces", "update"),
    ("status", "general"),
    ("faces", "list"),
    ("fib", "list"),
    ("strategy-choice", "list"),
    ("cs", "config"),
];

fn signed(mut n: Name) -> Name {
    n.push(&NameComponent::generic(1u64.to_be_bytes().to_vec()));
    n.push(&NameComponent::generic(2u64.to_be_bytes().to_vec()));
    let mut si = Vec::new();
    write_tlv(&mut si, 0x16, &[0x1b, 0x01, 0x00]);
    n.push(&NameComponent::generic(si));
    let mut sv = Vec::new();
    write_tlv(&mut sv, 0x17, &[0u8; 32]);
    n.push(&NameComponent::generic(sv));
    n
}

fuzz_target!(|data: &[u8]| {
    let Ok(mut core) = Core::new(&NdndConfig::default()) else {
        return;
    };
    for id in 1..=4u32 {
        core.face_opened(
            id,
            FaceInfo {
                uri: format!("udp4://127.0.0.1:{id}"),
                local_uri: "udp4://127.0.0.1:6363".into(),
                local: id != 4,
                mtu: Some(8800),
            },
        );
    }
    let mut out = Vec::new();
    let mut rest = data;
    let mut now = 0u64;
    // Each item: a header byte (what in the low 2 bits, which verb in the
    // next 4, signed or local in the top 2), a length pair, the bytes.
    while let [h, l0, l1, tail @ ..] = rest {
        let len = (usize::from(*l0) << 8 | usize::from(*l1)).min(tail.len());
        let (bytes, next) = tail.split_at(len);
        rest = next;
        now += 5;
        let (module, verb) = VERBS[usize::from(h >> 2 & 15) % VERBS.len()];
        let face = u32::from(h >> 6) + 1;
        let base = format!("/localhost/nfd/{module}/{verb}");
        let Ok(mut name) = Name::from_uri(&base) else {
            continue;
        };
        out.clear();
        match h & 3 {
            0 => {
                let mut cp = Vec::new();
                write_tlv(&mut cp, 0x68, bytes);
                name.push(&NameComponent::generic(cp));
                let mut i = Interest::new(if h & 0x40 != 0 { signed(name) } else { name });
                i.nonce = Some(u32::from(*l1));
                core.receive(face, true, &i.to_wire(), now, &mut out);
            }
            1 => {
                for c in bytes.chunks(9) {
                    let typ = u16::from(c[0]);
                    if let Ok(c) = NameComponent::new(typ.max(1), c[1..].to_vec()) {
                        name.push(&c);
                    }
                }
                let i = Interest::new(name);
                let lp = LpPacket {
                    pit_token: Some(vec![*l0]),
                    next_hop_face_id: Some(u64::from(*l1)),
                    ..LpPacket::wrap(i.to_wire())
                };
                core.receive(face, h & 0x80 != 0, &lp.to_wire(), now, &mut out);
            }
            2 => core.receive(face, h & 0x80 != 0, bytes, now, &mut out),
            _ => {
                let _ = decode_response(bytes);
                let _ = ControlParameters::decode(bytes);
                let _ = GeneralStatus::decode(bytes);
                let _ = FaceStatus::decode_list(bytes);
                let _ = FibEntry::decode_list(bytes);
                let _ = StrategyChoiceEntry::decode_list(bytes);
            }
        }
        core.tick(now);
    }
});
