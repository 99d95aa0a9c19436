//! Property tests of the NDN codec: encode/decode round trips for every
//! packet type, URI print/parse round trips, and arbitrary or mutated bytes
//! never panic.

use nexthop_wire::ndn::{
    component_type as ct, tlv, Data, Interest, KeyLocator, LpPacket, MetaInfo, Nack, NackReason,
    Name, NameComponent, NameRef, Packet, SignatureInfo,
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

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
        let hashes: Vec<u64> = view.prefix_hashes_with(nexthop_wire::ndn::PREFIX_HASH_SEED).collect();
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
