//! Property tests of the NDN codec: encode/decode round trips for every
//! packet type, URI print/parse round trips, and arbitrary or mutated bytes
//! never panic; the borrowed views (`PacketView` and the rest) against the
//! owned decoders on valid, mutated and random bytes.

use nexthop_wire::ndn::{
    component_type as ct, tlv, Data, Interest, KeyLocator, LpPacket, MetaInfo, Nack, NackReason,
    Name, NameComponent, NameRef, NetPacket, NetPacketView, Packet, PacketView, SignatureInfo,
};
use proptest::prelude::*;

fn component() -> impl Strategy<Value = NameComponent> {
    prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..12).prop_map(NameComponent::generic),
        1 => any::<u64>().prop_map(NameComponent::segment),
        1 => any::<u64>().prop_map(NameComponent::version),
        1 => any::<u64>().prop_map(NameComponent::timestamp),
        1 => any::<u64>().prop_map(NameComponent::sequence_num),
        1 => any::<u64>().prop_map(NameComponent::byte_offset),
        1 => any::<[u8; 32]>().prop_map(NameComponent::implicit_digest),
        1 => (1u16..=0xFFFF, proptest::collection::vec(any::<u8>(), 0..6))
            .prop_filter_map("digest types need 32 bytes", |(t, v)| NameComponent::new(t, v).ok()),
        1 => proptest::collection::vec(Just(b'.'), 0..5).prop_map(NameComponent::generic),
        1 => proptest::collection::vec(any::<u8>(), 0..3).prop_map(|v| NameComponent::new(ct::SEGMENT, v).unwrap()),
    ]
}

fn name() -> impl Strategy<Value = Name> {
    proptest::collection::vec(component(), 0..7).prop_map(Name::from_components)
}

fn plain_name() -> impl Strategy<Value = Name> {
    name().prop_map(|n| {
        Name::from_components(
            n.components()
                .filter(|c| c.typ() != ct::PARAMETERS_SHA256_DIGEST)
                .map(|c| c.to_owned()),
        )
    })
}

prop_compose! {
    fn interest()(
        name in plain_name(),
        can_be_prefix in any::<bool>(),
        must_be_fresh in any::<bool>(),
        forwarding_hint in proptest::collection::vec(name(), 0..3),
        nonce in any::<Option<u32>>(),
        lifetime_ms in any::<Option<u64>>(),
        hop_limit in any::<Option<u8>>(),
        params in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
        sig in proptest::option::of((proptest::collection::vec(any::<u8>(), 0..8), proptest::collection::vec(any::<u8>(), 0..8))),
    ) -> Interest {
        let mut i = Interest::new(name);
        i.can_be_prefix = can_be_prefix;
        i.must_be_fresh = must_be_fresh;
        i.forwarding_hint = forwarding_hint;
        i.nonce = nonce;
        i.lifetime_ms = lifetime_ms;
        i.hop_limit = hop_limit;
        if let Some(p) = params {
            if let Some((si, sv)) = sig {
                i.signature_info = Some(si);
                i.signature_value = Some(sv);
            }
            i.set_app_parameters(p);
        }
        i
    }
}

prop_compose! {
    fn data()(
        name in name(),
        content_type in any::<Option<u64>>(),
        freshness in any::<Option<u64>>(),
        final_block in proptest::option::of(component()),
        keep_empty in any::<bool>(),
        content in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
        key in proptest::option::of(prop_oneof![
            name().prop_map(KeyLocator::Name),
            proptest::collection::vec(any::<u8>(), 0..32).prop_map(KeyLocator::KeyDigest),
        ]),
        sig_type in any::<u64>(),
        sig_value in proptest::collection::vec(any::<u8>(), 0..64),
        sign in any::<bool>(),
    ) -> Data {
        let mut d = Data {
            name,
            meta_info: MetaInfo {
                keep_empty: keep_empty && content_type.is_none() && freshness.is_none() && final_block.is_none(),
                content_type, freshness_period_ms: freshness, final_block_id: final_block,
            },
            content,
            signature_info: SignatureInfo { signature_type: sig_type, key_locator: key, other: vec![] },
            signature_value: sig_value,
        };
        if sign {
            d.sign_digest_sha256();
        }
        d
    }
}

prop_compose! {
    fn lp()(
        sequence in any::<Option<u64>>(),
        frag in proptest::option::of((0u64..4, 1u64..5)),
        pit_token in proptest::option::of(proptest::collection::vec(any::<u8>(), 1..33)),
        nack in proptest::option::of(proptest::option::of(any::<u64>())),
        congestion_mark in any::<Option<u64>>(),
        next_hop in any::<Option<u64>>(),
        acks in proptest::collection::vec(any::<u64>(), 0..3),
        non_discovery in any::<bool>(),
        inner in prop_oneof![interest().prop_map(|i| i.to_wire()), data().prop_map(|d| d.to_wire())],
        has_fragment in any::<bool>(),
    ) -> LpPacket {
        let (frag_index, frag_count) = match frag {
            Some((i, c)) if i < c => (Some(i), Some(c)),
            _ => (None, None),
        };
        LpPacket {
            sequence,
            frag_index,
            frag_count,
            pit_token,
            nack: nack.map(|r| Nack { reason: r.map(NackReason::from_code) }),
            congestion_mark,
            next_hop_face_id: next_hop,
            acks,
            non_discovery,
            fragment: has_fragment.then_some(inner),
            ..Default::default()
        }
    }
}

/// The borrowed views accept and reject exactly what the owned decoders
/// do, with the same error, and convert to the same packets; a scratch
/// Interest and Name refilled from the views equal fresh decodes.
fn views_match_owned(bytes: &[u8], scratch: &mut Interest, name: &mut Name) {
    let owned = Packet::decode(bytes);
    let view = PacketView::parse(bytes);
    assert_eq!(view.map(|v| v.to_owned()), owned.clone(), "{bytes:02x?}");
    assert_eq!(
        NetPacketView::parse(bytes).map(|v| v.to_owned()),
        NetPacket::decode(bytes),
        "{bytes:02x?}"
    );
    match (PacketView::parse(bytes), owned) {
        (Ok(PacketView::Interest(v)), Ok(Packet::Interest(i))) => {
            v.write_into(scratch);
            assert_eq!(scratch, &i);
            assert_eq!(scratch.name.prefix_hashes(), i.name.prefix_hashes());
            assert_eq!(scratch.name.component_ends(), i.name.component_ends());
            let fh: Vec<Name> = v.forwarding_hint().map(|n| n.to_name()).collect();
            assert_eq!(fh, i.forwarding_hint);
            if let Some(at) = v.hop_limit_at {
                assert_eq!(Some(bytes[at]), i.hop_limit);
            }
        }
        (Ok(PacketView::Data(v)), Ok(Packet::Data(d))) => {
            name.assign(v.name);
            assert_eq!(name, &d.name);
            assert_eq!(name.prefix_hashes(), d.name.prefix_hashes());
            // The view's signed portion is the received bytes; the owned
            // packet's is re-encoded (unknown non-critical elements gone).
            if d.to_wire() == bytes {
                assert_eq!(v.signed_portion, d.signed_portion().as_slice());
            }
        }
        (Ok(PacketView::Lp(v)), Ok(Packet::Lp(l))) => {
            assert_eq!(v.is_whole(), l.is_whole());
            if let Some(f) = v.fragment {
                views_match_owned(f, scratch, name);
            }
        }
        (Err(_), Err(_)) => {}
        (v, o) => panic!("view {v:?} but owned {o:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn views_decode_like_owned_on_valid_packets(
        p in prop_oneof![interest().prop_map(|i| i.to_wire()), data().prop_map(|d| d.to_wire()), lp().prop_map(|l| l.to_wire())],
        q in prop_oneof![interest().prop_map(|i| i.to_wire()), data().prop_map(|d| d.to_wire())],
    ) {
        // One scratch pair across packets, as the forwarder keeps them.
        let (mut scratch, mut name) = (Interest::default(), Name::new());
        views_match_owned(&p, &mut scratch, &mut name);
        views_match_owned(&q, &mut scratch, &mut name);
        views_match_owned(&p, &mut scratch, &mut name);
    }

    #[test]
    fn views_decode_like_owned_on_mutated_and_random_bytes(
        p in prop_oneof![interest().prop_map(|i| i.to_wire()), data().prop_map(|d| d.to_wire()), lp().prop_map(|l| l.to_wire())],
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
        random in proptest::collection::vec(any::<u8>(), 0..128),
    ) {
        let mut w = p.clone();
        for (at, b) in flips {
            let i = at.index(w.len());
            w[i] = b;
        }
        let (mut scratch, mut name) = (Interest::default(), Name::new());
        for bytes in [&w[..], &p[..cut.index(p.len())], &random[..]] {
            views_match_owned(bytes, &mut scratch, &mut name);
        }
    }

    #[test]
    fn var_number_round_trips(n in any::<u64>()) {
        let mut v = Vec::new();
        tlv::write_var_number(&mut v, n);
        prop_assert_eq!(v.len(), tlv::var_number_len(n));
        prop_assert_eq!(tlv::read_var_number(&v, 0), Ok((n, v.len())));
        // Any strict prefix is a truncation error, never a panic or a value.
        for cut in 0..v.len() {
            let r = tlv::read_var_number(&v[..cut], 0);
            prop_assert!(r.is_err(), "prefix accepted");
        }
    }

    #[test]
    fn name_wire_and_uri_round_trip(n in name()) {
        let wire = n.to_wire();
        let back = Name::from_wire(&wire).unwrap();
        prop_assert_eq!(&back, &n);
        prop_assert_eq!(back.prefix_hashes(), n.prefix_hashes());
        prop_assert_eq!(back.component_ends(), n.component_ends());
        let uri = n.to_string();
        let parsed = Name::from_uri(&uri).unwrap();
        prop_assert_eq!(&parsed, &n, "uri {}", uri);
        prop_assert_eq!(parsed.to_string(), uri);
        let view = NameRef::from_wire(&wire).unwrap();
        prop_assert_eq!(view.len(), n.len());
        let hashes: Vec<u64> = view.prefix_hashes_with(nexthop_wire::ndn::prefix_hash_seed()).collect();
        prop_assert_eq!(hashes.as_slice(), n.prefix_hashes());
    }

    #[test]
    fn prefixes_share_hashes_and_bytes(n in name()) {
        for i in 0..=n.len() {
            let p = n.prefix(i);
            prop_assert_eq!(p.len(), i);
            prop_assert!(p.is_prefix_of(&n));
            prop_assert_eq!(p.value(), n.prefix_value(i));
            prop_assert_eq!(p.prefix_hash(i), n.prefix_hash(i));
            prop_assert_eq!(Name::from_value(n.prefix_value(i)).unwrap().prefix_hash(i), n.prefix_hash(i));
        }
    }

    #[test]
    fn name_order_matches_component_order(a in name(), b in name()) {
        let ca: Vec<_> = a.components().collect();
        let cb: Vec<_> = b.components().collect();
        prop_assert_eq!(a.cmp(&b), ca.cmp(&cb));
        prop_assert_eq!(a == b, a.to_wire() == b.to_wire());
    }

    #[test]
    fn interest_round_trips(i in interest()) {
        let w = i.to_wire();
        let back = Interest::decode(&w).unwrap();
        prop_assert_eq!(&back, &i);
        prop_assert_eq!(back.to_wire(), w.clone());
        prop_assert!(back.params_digest_ok());
        prop_assert_eq!(nexthop_wire::ndn::params_digest_ok_wire(&w), Ok(true));
    }

    #[test]
    fn data_round_trips(d in data()) {
        let w = d.to_wire();
        let back = Data::decode(&w).unwrap();
        prop_assert_eq!(&back, &d);
        prop_assert_eq!(back.to_wire(), w.clone());
        prop_assert_eq!(back.verify_digest_sha256(), nexthop_wire::ndn::verify_digest_sha256_wire(&w).unwrap());
    }

    #[test]
    fn lp_packet_round_trips(p in lp()) {
        let w = p.to_wire();
        let back = LpPacket::decode(&w).unwrap();
        prop_assert_eq!(&back, &p);
        prop_assert_eq!(back.to_wire(), w);
        if p.fragment.is_some() && p.frag_count.unwrap_or(1) == 1 {
            prop_assert!(back.network_packet().unwrap().is_some());
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(p) = Packet::decode(&bytes) {
            let again = Packet::decode(&p.to_wire()).unwrap();
            prop_assert_eq!(again, p);
        }
        let _ = Name::from_value(&bytes);
        let _ = LpPacket::decode(&bytes);
        let _ = nexthop_wire::ndn::verify_digest_sha256_wire(&bytes);
        let _ = nexthop_wire::ndn::params_digest_ok_wire(&bytes);
    }

    #[test]
    fn mutated_packets_never_panic_and_reencode_stably(
        p in prop_oneof![interest().prop_map(|i| i.to_wire()), data().prop_map(|d| d.to_wire()), lp().prop_map(|l| l.to_wire())],
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut w = p.clone();
        for (at, b) in flips {
            let i = at.index(w.len());
            w[i] = b;
        }
        let truncated = &p[..cut.index(p.len())];
        for bytes in [&w[..], truncated] {
            if let Ok(pkt) = Packet::decode(bytes) {
                let again = Packet::decode(&pkt.to_wire()).unwrap();
                prop_assert_eq!(again, pkt);
            }
        }
        // A strict prefix of a packet never decodes.
        prop_assert!(Packet::decode(truncated).is_err());
    }

    #[test]
    fn arbitrary_uris_never_panic_and_reparse(s in "[a-z0-9%=./:~+ -]{0,40}") {
        if let Ok(n) = Name::from_uri(&s) {
            let printed = n.to_string();
            prop_assert_eq!(Name::from_uri(&printed).unwrap(), n);
        }
    }
}

#[test]
fn trailing_data_after_a_packet_is_rejected() {
    let mut w = Interest::new(Name::from_uri("/a").unwrap()).to_wire();
    w.push(0);
    assert!(matches!(
        Packet::decode(&w),
        Err(nexthop_wire::ndn::NdnError::TrailingData { .. })
    ));
}

#[test]
fn views_match_owned_on_static_vectors() {
    let (mut scratch, mut name) = (Interest::default(), Name::new());
    let cases: &[&[u8]] = &[
        // Interest /a with Nonce and HopLimit 3.
        &[5, 14, 7, 3, 8, 1, b'a', 10, 4, 1, 2, 3, 4, 34, 1, 3],
        // HopLimit of 2 bytes: Malformed in both.
        &[5, 10, 7, 3, 8, 1, b'a', 34, 2, 0, 1],
        // Data /a, empty MetaInfo kept, empty Content, DigestSha256.
        &[
            6, 16, 7, 3, 8, 1, b'a', 20, 0, 21, 0, 22, 3, 27, 1, 0, 23, 0,
        ],
        // Data without SignatureValue: Missing in both.
        &[6, 10, 7, 3, 8, 1, b'a', 22, 3, 27, 1, 0],
        // LpPacket with PitToken and a Fragment holding Interest /a.
        &[100, 13, 98, 2, 0xd7, 1, 80, 7, 5, 5, 7, 3, 8, 1, b'a'],
        // LpPacket with an unknown critical header.
        &[100, 5, 0xfd, 0x03, 0x21, 0, 80, 0],
        // Zero-component Interest name (valid TLV).
        &[5, 2, 7, 0],
        &[],
        &[0xff],
    ];
    for c in cases {
        views_match_owned(c, &mut scratch, &mut name);
    }
    let v = nexthop_wire::ndn::InterestView::parse(cases[0]).unwrap();
    assert_eq!(v.hop_limit_at, Some(15));
    assert_eq!(v.nonce, Some(0x0102_0304));
    let Ok(PacketView::Lp(lp)) = PacketView::parse(cases[4]) else {
        panic!("LpPacket expected");
    };
    assert_eq!(lp.pit_token, Some(&[0xd7, 1][..]));
}

#[test]
fn assign_reuses_a_name_of_any_previous_length() {
    let mut n = Name::from_uri("/a/b/c/d/e/f").unwrap();
    for uri in ["/x", "/", "/p/q/r/s/t/u/v/w", "/a"] {
        let want = Name::from_uri(uri).unwrap();
        n.assign(want.as_name_ref());
        assert_eq!(n, want);
        assert_eq!(n.prefix_hashes(), want.prefix_hashes());
        assert_eq!(n.component_ends(), want.component_ends());
        assert_eq!(n.to_wire(), want.to_wire());
    }
}

/// Each process draws its own name hash seed: run this test's binary twice
/// more (it prints its seed when asked) and compare the three.
#[test]
fn the_name_hash_seed_is_a_secret_of_each_process() {
    const ASK: &str = "NEXTHOP_TEST_PRINT_NAME_HASH_SEED";
    let own = nexthop_wire::ndn::prefix_hash_seed();
    if std::env::var_os(ASK).is_some() {
        println!("name-hash-seed={own:x}");
        return;
    }
    let other = || {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "the_name_hash_seed_is_a_secret_of_each_process",
                "--nocapture",
            ])
            .env(ASK, "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("name-hash-seed="))
            .unwrap_or_else(|| panic!("no seed printed: {text}"));
        u64::from_str_radix(line.trim(), 16).unwrap()
    };
    let (a, b) = (other(), other());
    assert!(own != a && own != b && a != b, "{own:x} {a:x} {b:x}");
    assert_eq!(own, nexthop_wire::ndn::prefix_hash_seed());
}
