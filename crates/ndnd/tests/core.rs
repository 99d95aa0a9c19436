//! The forwarder core without sockets: management commands, routes,
//! forwarding through them, NDNLPv2 reassembly and its bounds, bad input.

use nexthop_ndnd::mgmt::{decode_response, ControlParameters};
use nexthop_ndnd::{Core, NdndConfig};
use nexthop_wire::ndn::tlv::write_tlv;
use nexthop_wire::ndn::{Data, Interest, LpPacket, NackReason, Name, NameComponent, Packet};
use rand::{Rng, SeedableRng};

fn core() -> Core {
    Core::new(&NdndConfig {
        reasm_max_partial: 4,
        reasm_timeout_ms: 500,
        ..NdndConfig::default()
    })
    .unwrap()
}

fn name(u: &str) -> Name {
    Name::from_uri(u).unwrap()
}

/// A command Interest as python-ndn 0.5 builds it (signed, format 0.2).
fn command(scope: &str, verb: &str, prefix: &str, signed: bool) -> Vec<u8> {
    let mut n = name(&format!("/{scope}/nfd/rib/{verb}"));
    let mut cp = Vec::new();
    ControlParameters {
        name: Some(name(prefix)),
        ..Default::default()
    }
    .encode(&mut cp);
    n.push(&NameComponent::generic(cp));
    if signed {
        n.push(&NameComponent::generic(
            1_700_000_000_000u64.to_be_bytes().to_vec(),
        ));
        n.push(&NameComponent::generic(7u64.to_be_bytes().to_vec()));
        let mut si = Vec::new();
        write_tlv(&mut si, 0x16, &[0x1b, 0x01, 0x00]);
        n.push(&NameComponent::generic(si));
        let mut sv = Vec::new();
        write_tlv(&mut sv, 0x17, &[0u8; 32]);
        n.push(&NameComponent::generic(sv));
    }
    let mut i = Interest::new(n);
    i.nonce = Some(1);
    LpPacket {
        pit_token: Some(vec![9, 9]),
        ..LpPacket::wrap(i.to_wire())
    }
    .to_wire()
}

/// Send `wire` from `face`; the packets sent back.
fn rx(c: &mut Core, face: u32, local: bool, wire: &[u8], now: u64) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    c.receive(face, local, wire, now, &mut out);
    out
}

/// The ControlResponse status code in a reply (and its PitToken).
fn status(reply: &[u8]) -> (u64, Option<Vec<u8>>) {
    let lp = LpPacket::decode(reply).unwrap();
    let d = Data::decode(lp.fragment.as_ref().unwrap()).unwrap();
    (
        decode_response(d.content.as_deref().unwrap()).unwrap().0,
        lp.pit_token,
    )
}

fn interest(u: &str, nonce: u32) -> Vec<u8> {
    let mut i = Interest::new(name(u));
    i.nonce = Some(nonce);
    i.lifetime_ms = Some(1000);
    i.to_wire()
}

fn data(u: &str) -> Vec<u8> {
    let mut d = Data::new(name(u), b"x".to_vec());
    d.sign_digest_sha256();
    d.to_wire()
}

#[test]
fn register_routes_interests_to_the_producer_and_unregister_removes_it() {
    let mut c = core();
    let out = rx(
        &mut c,
        1,
        true,
        &command("localhost", "register", "/p", true),
        0,
    );
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 1);
    assert_eq!(status(&out[0].1), (200, Some(vec![9, 9])));
    assert_eq!(c.routes().count(), 1);

    let out = rx(&mut c, 2, true, &interest("/p/a", 5), 1);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 1, "the Interest goes to the registered face");
    let out = rx(&mut c, 1, true, &data("/p/a"), 2);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 2, "the Data goes back to the consumer");

    let out = rx(
        &mut c,
        1,
        true,
        &command("localhost", "unregister", "/p", true),
        3,
    );
    assert_eq!(status(&out[0].1).0, 200);
    assert_eq!(c.routes().count(), 0);
    let out = rx(&mut c, 2, true, &interest("/p/b", 6), 4);
    match Packet::decode(&out[0].1).unwrap() {
        Packet::Lp(lp) => assert_eq!(lp.nack.unwrap().reason, Some(NackReason::NoRoute)),
        p => panic!("expected a Nack, got {p:?}"),
    }
}

#[test]
fn commands_refused_with_nfd_status_codes() {
    let mut c = core();
    let out = rx(
        &mut c,
        1,
        true,
        &command("localhost", "register", "/p", false),
        0,
    );
    assert_eq!(status(&out[0].1).0, 401, "unsigned");
    let out = rx(
        &mut c,
        1,
        false,
        &command("localhost", "register", "/p", true),
        0,
    );
    assert_eq!(status(&out[0].1).0, 403, "/localhost from a non-local face");
    let out = rx(
        &mut c,
        1,
        false,
        &command("localhop", "register", "/p", true),
        0,
    );
    assert_eq!(status(&out[0].1).0, 200, "/localhop from a non-local face");
    let out = rx(
        &mut c,
        1,
        true,
        &command("localhost", "frobnicate", "/p", true),
        0,
    );
    assert_eq!(status(&out[0].1).0, 501);
    // Malformed ControlParameters.
    let mut n = name("/localhost/nfd/rib/register");
    n.push(&NameComponent::generic(vec![0x68, 0x05, 0x07]));
    for _ in 0..4 {
        n.push(&NameComponent::generic(vec![0x16, 0x00]));
    }
    let out = rx(&mut c, 1, true, &Interest::new(n).to_wire(), 0);
    let d = Data::decode(&out[0].1).unwrap();
    assert_eq!(
        decode_response(d.content.as_deref().unwrap()).unwrap().0,
        401
    );
    assert_eq!(c.counters().commands, 5);
    assert_eq!(c.counters().commands_refused, 4);
}

#[test]
fn closing_a_face_removes_its_routes() {
    let mut c = core();
    rx(
        &mut c,
        1,
        true,
        &command("localhost", "register", "/p", true),
        0,
    );
    rx(
        &mut c,
        3,
        true,
        &command("localhost", "register", "/p", true),
        0,
    );
    c.face_closed(1);
    let routes: Vec<_> = c.routes().map(|(n, h)| (n.clone(), h.to_vec())).collect();
    assert_eq!(routes.len(), 1);
    assert_eq!(routes[0].1.len(), 1);
    assert_eq!(routes[0].1[0].face, 3);
    c.face_closed(3);
    assert_eq!(c.routes().count(), 0);
}

fn fragments(whole: &[u8], token: &[u8], pieces: usize, seq: u64) -> Vec<Vec<u8>> {
    let step = whole.len().div_ceil(pieces);
    whole
        .chunks(step)
        .enumerate()
        .map(|(i, ch)| {
            LpPacket {
                sequence: Some(seq + i as u64),
                frag_index: Some(i as u64),
                frag_count: Some(pieces as u64),
                pit_token: (i == 0).then(|| token.to_vec()),
                ..LpPacket::wrap(ch.to_vec())
            }
            .to_wire()
        })
        .collect()
}

#[test]
fn fragments_are_reassembled_in_any_order_and_keep_the_pit_token() {
    let mut c = core();
    rx(
        &mut c,
        1,
        true,
        &command("localhost", "register", "/p", true),
        0,
    );
    let mut frags = fragments(&interest("/p/frag", 11), &[4, 2], 3, 100);
    frags.swap(0, 2);
    let mut out = Vec::new();
    for f in &frags {
        out = rx(&mut c, 2, true, f, 1);
    }
    assert_eq!(out.len(), 1, "forwarded once whole");
    assert_eq!(c.reasm_counters().completed, 1);
    let out = rx(&mut c, 1, true, &data("/p/frag"), 2);
    let lp = LpPacket::decode(&out[0].1).unwrap();
    assert_eq!(
        lp.pit_token,
        Some(vec![4, 2]),
        "the consumer's token came through"
    );
}

#[test]
fn reassembly_is_bounded_in_count_and_time() {
    let mut c = core();
    // Five packets whose last fragment never comes: the fifth hits the cap.
    for k in 0..5u64 {
        let frags = fragments(&interest(&format!("/q/{k}"), k as u32), &[1], 2, k * 10);
        rx(&mut c, 2, true, &frags[0], 0);
    }
    assert_eq!(c.reasm_counters().cap_drops, 1);
    // After the timeout they are gone and new ones fit.
    let frags = fragments(&interest("/q/late", 99), &[1], 2, 1000);
    rx(&mut c, 2, true, &frags[0], 600);
    assert_eq!(c.reasm_counters().timeouts, 4);
    assert_eq!(c.reasm_counters().cap_drops, 1);
    // Fragments without a Sequence, or one piece sent twice, are bad.
    let bad = LpPacket {
        frag_index: Some(0),
        frag_count: Some(2),
        ..LpPacket::wrap(vec![1, 2, 3])
    };
    rx(&mut c, 2, true, &bad.to_wire(), 600);
    assert_eq!(c.reasm_counters().bad, 1);
    rx(&mut c, 2, true, &frags[0], 600);
    assert_eq!(c.reasm_counters().bad, 2);
    assert_eq!(c.reasm_counters().completed, 0);
}

#[test]
fn random_and_mutated_input_never_panics() {
    let mut c = core();
    rx(
        &mut c,
        1,
        true,
        &command("localhost", "register", "/p", true),
        0,
    );
    let seeds: Vec<Vec<u8>> = vec![
        interest("/p/a", 1),
        data("/p/a"),
        command("localhost", "register", "/p", true),
        fragments(&interest("/p/f", 3), &[1], 2, 0)[0].clone(),
    ];
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(27);
    for n in 0..20_000u64 {
        let mut p = seeds[n as usize % seeds.len()].clone();
        match rng.gen_range(0..3) {
            0 => {
                for _ in 0..rng.gen_range(1..4) {
                    let i = rng.gen_range(0..p.len());
                    p[i] = rng.gen();
                }
            }
            1 => p.truncate(rng.gen_range(0..p.len())),
            _ => p = (0..rng.gen_range(0..64)).map(|_| rng.gen()).collect(),
        }
        rx(&mut c, rng.gen_range(0..8), rng.gen(), &p, n);
    }
    let drops = c.fw_counters().drops.total() + c.counters().bad_lp + c.reasm_counters().bad;
    assert!(drops > 0, "bad packets are counted");
}

#[test]
fn config_file_keys_and_ranges() {
    let c =
        NdndConfig::from_toml("udp = \"127.0.0.1:6363\"\nunix = \"/tmp/x.sock\"\ncs_packets = 0\n")
            .unwrap();
    assert_eq!(c.udp.unwrap().port(), 6363);
    assert_eq!(c.cs_packets, 0);
    assert!(c.validate().is_ok());
    assert!(Core::new(&c).is_ok(), "no Content Store is allowed");
    assert!(
        NdndConfig::from_toml("udpp = \"127.0.0.1:1\"").is_err(),
        "unknown key"
    );
    assert!(NdndConfig::default().validate().is_err(), "no listener");
    let m = NdndConfig::from_toml(
        "udp = \"127.0.0.1:1\"\nudp_mtu = 1400\nmetrics = \"127.0.0.1:9464\"\n",
    )
    .unwrap();
    assert_eq!((m.udp_mtu, m.metrics.unwrap().port()), (1400, 9464));
    assert!(m.validate().is_ok());
    for bad in [255, 65508] {
        let e = NdndConfig {
            udp_mtu: bad,
            ..m.clone()
        }
        .validate();
        assert!(e.unwrap_err().contains("udp_mtu"), "{bad}");
    }
    let k = NdndConfig::from_toml("udp = \"127.0.0.1:1\"\nudp_input_threads = 4\n").unwrap();
    assert_eq!(k.udp_input_threads, 4);
    assert!(k.validate().is_ok());
    for bad in [0, 65] {
        let e = NdndConfig {
            udp_input_threads: bad,
            ..k.clone()
        }
        .validate();
        assert!(e.unwrap_err().contains("udp_input_threads"), "{bad}");
    }
    let c = NdndConfig { max_faces: 1, ..c };
    assert!(c.validate().is_err());
}
