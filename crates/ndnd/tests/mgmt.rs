//! Management beyond rib/register: the status datasets (versioned,
//! segmented), strategy-choice set/unset/list, faces/update with NDNLPv2
//! local fields (IncomingFaceId, NextHopFaceId), all through `Core`.

use nexthop_ndnd::dataset::{
    FaceStatus, FibEntry, GeneralStatus, StrategyChoiceEntry, FLAG_LOCAL_FIELDS,
};
use nexthop_ndnd::mgmt::{command_name, decode_response, ControlParameters};
use nexthop_ndnd::{Core, FaceInfo, NdndConfig};
use nexthop_wire::ndn::{Data, Interest, LpPacket, NackReason, Name, NameComponent, Packet};

fn name(u: &str) -> Name {
    Name::from_uri(u).unwrap()
}

fn core_with_faces(faces: &[(u32, bool)]) -> Core {
    let mut c = Core::new(&NdndConfig::default()).unwrap();
    for &(id, local) in faces {
        c.face_opened(
            id,
            FaceInfo {
                uri: format!("udp4://127.0.0.1:{}", 5000 + id),
                local_uri: "udp4://127.0.0.1:6363".into(),
                local,
                mtu: Some(8800),
            },
        );
    }
    c
}

fn rx(c: &mut Core, face: u32, wire: &[u8], now: u64) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    c.receive(face, true, wire, now, &mut out);
    out
}

/// A signed command from `face`; its status code and body.
fn cmd(
    c: &mut Core,
    face: u32,
    module: &str,
    verb: &str,
    p: ControlParameters,
) -> (u64, ControlParameters) {
    let mut i = Interest::new(command_name(module, verb, &p, 1_700_000_000_000, 42));
    i.nonce = Some(7);
    let out = rx(c, face, &i.to_wire(), 0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, face);
    let d = Data::decode(&out[0].1).unwrap();
    let (code, _, body) = decode_response(d.content.as_deref().unwrap()).unwrap();
    (code, body.unwrap_or_default())
}

/// The Data of one wire packet (bare or in an LpPacket) and its LpPacket.
fn data_of(wire: &[u8]) -> (Data, Option<LpPacket>) {
    match Packet::decode(wire).unwrap() {
        Packet::Data(d) => (d, None),
        Packet::Lp(lp) => (
            Data::decode(lp.fragment.as_deref().unwrap()).unwrap(),
            Some(lp),
        ),
        p => panic!("expected Data, got {p:?}"),
    }
}

/// Fetch a dataset the way python-ndn's segment fetcher does.
fn fetch(c: &mut Core, face: u32, dataset: &str) -> Vec<u8> {
    let mut i = Interest::new(name(dataset));
    i.can_be_prefix = true;
    i.must_be_fresh = true;
    let out = rx(c, face, &i.to_wire(), 0);
    assert_eq!(out.len(), 1, "segment 0 of {dataset}");
    let (d, _) = data_of(&out[0].1);
    let k = name(dataset).len();
    assert!(d.name.get(k).unwrap().as_version().is_some());
    assert_eq!(d.name.get(k + 1).unwrap().as_segment(), Some(0));
    let last = d.meta_info.final_block_id.clone().unwrap();
    let mut content = d.content.unwrap();
    let mut seg = 0;
    while NameComponent::segment(seg) != last {
        seg += 1;
        let mut n = d.name.prefix(k + 1);
        n.push(&NameComponent::segment(seg));
        let out = rx(c, face, &Interest::new(n).to_wire(), 0);
        assert_eq!(out.len(), 1, "segment {seg} of {dataset}");
        content.extend(data_of(&out[0].1).0.content.unwrap());
    }
    content
}

fn interest(u: &str, nonce: u32) -> Vec<u8> {
    let mut i = Interest::new(name(u));
    i.nonce = Some(nonce);
    i.lifetime_ms = Some(1000);
    i.to_wire()
}

fn register(c: &mut Core, face: u32, prefix: &str, cost: u64) {
    let p = ControlParameters {
        name: Some(name(prefix)),
        cost: Some(cost),
        ..ControlParameters::default()
    };
    assert_eq!(cmd(c, face, "rib", "register", p).0, 200);
}

#[test]
fn datasets_list_faces_routes_counters_and_status() {
    let mut c = core_with_faces(&[(1, true), (2, false)]);
    register(&mut c, 1, "/p", 7);
    let out = rx(&mut c, 2, &interest("/p/a", 5), 1);
    assert_eq!(out[0].0, 1);
    let mut d = Data::new(name("/p/a"), b"x".to_vec());
    d.sign_digest_sha256();
    let out = rx(&mut c, 1, &d.to_wire(), 2);
    assert_eq!(out[0].0, 2);

    let faces = FaceStatus::decode_list(&fetch(&mut c, 1, "/localhost/nfd/faces/list")).unwrap();
    assert_eq!(faces.len(), 2);
    let (f1, f2) = (&faces[0], &faces[1]);
    assert_eq!((f1.face_id, f1.scope, f2.face_id, f2.scope), (1, 1, 2, 0));
    assert_eq!(f2.uri, "udp4://127.0.0.1:5002");
    assert_eq!(f2.mtu, Some(8800));
    assert_eq!((f2.in_interests, f2.out_data), (1, 1));
    assert_eq!((f1.out_interests, f1.in_data), (1, 1));
    assert!(f2.in_bytes > 0 && f2.out_bytes > 0);

    let fib = FibEntry::decode_list(&fetch(&mut c, 1, "/localhost/nfd/fib/list")).unwrap();
    assert_eq!(
        fib,
        vec![FibEntry {
            name: name("/p"),
            next_hops: vec![(1, 7)]
        }]
    );

    let g = GeneralStatus::decode(&fetch(&mut c, 1, "/localhost/nfd/status/general")).unwrap();
    assert_eq!(g.fib_entries, 1);
    assert_eq!(
        (g.in_interests, g.out_interests, g.in_data, g.out_data),
        (1, 1, 1, 1)
    );
    assert_eq!(g.satisfied, 1);
    assert!(g.version.starts_with("nexthop "));
    assert!(g.current_ms >= g.start_ms && g.start_ms > 0);

    // A face that closes leaves the list and its routes go.
    c.face_closed(1);
    let faces = FaceStatus::decode_list(&fetch(&mut c, 2, "/localhost/nfd/faces/list")).unwrap();
    assert_eq!(faces.iter().map(|f| f.face_id).collect::<Vec<_>>(), vec![2]);
    assert!(c.fib_entries().is_empty());
}

#[test]
fn a_large_dataset_is_segmented_and_old_versions_are_not_served() {
    let ids: Vec<(u32, bool)> = (1..=200).map(|i| (i, true)).collect();
    let mut c = core_with_faces(&ids);
    let content = fetch(&mut c, 1, "/localhost/nfd/faces/list");
    assert!(content.len() > 2 * nexthop_ndnd::dataset::SEGMENT_CONTENT);
    let faces = FaceStatus::decode_list(&content).unwrap();
    assert_eq!(faces.len(), 200);
    assert_eq!(faces[199].face_id, 200);

    // A version this forwarder never produced: no answer, counted.
    let mut n = name("/localhost/nfd/faces/list");
    n.push(&NameComponent::version(1));
    n.push(&NameComponent::segment(0));
    assert!(rx(&mut c, 1, &Interest::new(n).to_wire(), 0).is_empty());
    assert_eq!(c.counters().dataset_misses, 1);
    // From a non-local face: no answer.
    let mut out = Vec::new();
    c.receive(
        1,
        false,
        &Interest::new(name("/localhost/nfd/faces/list")).to_wire(),
        0,
        &mut out,
    );
    assert!(out.is_empty());
    assert_eq!(c.counters().dataset_misses, 2);

    // Versions are held for segment fetches, the last 8 of them.
    let first = rx(
        &mut c,
        1,
        &Interest::new(name("/localhost/nfd/status/general")).to_wire(),
        0,
    );
    let v1 = data_of(&first[0].1).0.name;
    assert_eq!(
        rx(&mut c, 1, &Interest::new(v1.clone()).to_wire(), 0).len(),
        1
    );
    for _ in 0..8 {
        fetch(&mut c, 1, "/localhost/nfd/status/general");
    }
    assert!(rx(&mut c, 1, &Interest::new(v1).to_wire(), 0).is_empty());
    assert_eq!(c.counters().dataset_misses, 3);
}

#[test]
fn strategy_choice_set_list_unset_and_multicast_forwarding() {
    let mut c = core_with_faces(&[(1, true), (2, true), (3, true)]);
    register(&mut c, 1, "/m", 1);
    register(&mut c, 2, "/m", 2);
    // best-route (the default): one upstream.
    let out = rx(&mut c, 3, &interest("/m/a", 1), 1);
    assert_eq!(out.iter().map(|o| o.0).collect::<Vec<_>>(), vec![1]);

    let set = ControlParameters {
        name: Some(name("/m")),
        strategy: Some(name("/localhost/nfd/strategy/multicast")),
        ..ControlParameters::default()
    };
    let (code, body) = cmd(&mut c, 3, "strategy-choice", "set", set);
    assert_eq!(code, 200);
    assert_eq!(
        body.strategy.unwrap().to_string(),
        "/localhost/nfd/strategy/multicast/v=4"
    );
    let out = rx(&mut c, 3, &interest("/m/b", 2), 2);
    let mut to: Vec<u32> = out.iter().map(|o| o.0).collect();
    to.sort_unstable();
    assert_eq!(to, vec![1, 2], "multicast: every next hop");

    let list =
        StrategyChoiceEntry::decode_list(&fetch(&mut c, 3, "/localhost/nfd/strategy-choice/list"))
            .unwrap();
    let shown: Vec<(String, String)> = list
        .iter()
        .map(|e| (e.name.to_string(), e.strategy.to_string()))
        .collect();
    assert_eq!(
        shown,
        vec![
            ("/".into(), "/localhost/nfd/strategy/best-route/v=5".into()),
            ("/m".into(), "/localhost/nfd/strategy/multicast/v=4".into()),
        ]
    );

    let unknown = ControlParameters {
        name: Some(name("/m")),
        strategy: Some(name("/localhost/nfd/strategy/random")),
        ..ControlParameters::default()
    };
    assert_eq!(cmd(&mut c, 3, "strategy-choice", "set", unknown).0, 404);
    let root = ControlParameters {
        name: Some(Name::new()),
        ..ControlParameters::default()
    };
    assert_eq!(cmd(&mut c, 3, "strategy-choice", "unset", root).0, 400);
    let unset = ControlParameters {
        name: Some(name("/m")),
        ..ControlParameters::default()
    };
    assert_eq!(cmd(&mut c, 3, "strategy-choice", "unset", unset).0, 200);
    assert_eq!(c.strategy_choices().len(), 1);
    let out = rx(&mut c, 3, &interest("/m/c", 3), 3);
    assert_eq!(out.len(), 1, "best-route again");
}

fn enable_local_fields(c: &mut Core, face: u32) -> u64 {
    let p = ControlParameters {
        flags: Some(FLAG_LOCAL_FIELDS),
        mask: Some(FLAG_LOCAL_FIELDS),
        ..ControlParameters::default()
    };
    cmd(c, face, "faces", "update", p).0
}

#[test]
fn local_fields_carry_incoming_face_id_and_honour_next_hop_face_id() {
    let mut c = core_with_faces(&[(1, true), (2, true), (3, true), (4, false)]);
    assert_eq!(
        enable_local_fields(&mut c, 4),
        409,
        "not on a non-local face"
    );
    assert_eq!(enable_local_fields(&mut c, 1), 200);
    assert_eq!(c.face_statuses()[0].flags, FLAG_LOCAL_FIELDS);
    register(&mut c, 1, "/p", 0);

    // The producer (local fields on) learns where the Interest came from.
    let out = rx(&mut c, 2, &interest("/p/a", 1), 1);
    let lp = LpPacket::decode(&out[0].1).unwrap();
    assert_eq!(lp.incoming_face_id, Some(2));
    // The consumer (local fields off) gets no header.
    let mut d = Data::new(name("/p/a"), b"x".to_vec());
    d.sign_digest_sha256();
    let out = rx(&mut c, 1, &d.to_wire(), 2);
    assert_eq!(out[0].0, 2);
    assert!(data_of(&out[0].1).1.is_none());

    // NextHopFaceId from face 1 overrides the FIB (no route for /q).
    let nh = |n: &str, target: u64, nonce: u32| {
        let mut i = Interest::new(name(n));
        i.nonce = Some(nonce);
        LpPacket {
            next_hop_face_id: Some(target),
            ..LpPacket::wrap(i.to_wire())
        }
        .to_wire()
    };
    let out = rx(&mut c, 1, &nh("/q/x", 3, 10), 3);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 3);
    assert_eq!(c.counters().next_hop_face_id, 1);
    // To a face that is not open: Nack NoRoute.
    let out = rx(&mut c, 1, &nh("/q/y", 99, 11), 3);
    let lp = LpPacket::decode(&out[0].1).unwrap();
    assert_eq!(lp.nack.unwrap().reason, Some(NackReason::NoRoute));
    // From a face without local fields, NextHopFaceId is ignored: FIB.
    let out = rx(&mut c, 2, &nh("/q/z", 3, 12), 3);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 2, "no route for /q: Nack back to face 2");

    // Turning local fields off again.
    let p = ControlParameters {
        flags: Some(0),
        mask: Some(FLAG_LOCAL_FIELDS),
        ..ControlParameters::default()
    };
    assert_eq!(cmd(&mut c, 1, "faces", "update", p).1.flags, Some(0));
}

#[test]
fn random_management_input_never_panics() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(27);
    let mut c = core_with_faces(&[(1, true), (2, false)]);
    let verbs = [
        "rib/register",
        "rib/unregister",
        "strategy-choice/set",
        "strategy-choice/unset",
        "faces/update",
        "status/general",
        "faces/list",
        "fib/list",
        "strategy-choice/list",
    ];
    for k in 0..5000u32 {
        let v = verbs[rng.gen_range(0..verbs.len())];
        let mut n = name(&format!("/localhost/nfd/{v}"));
        let len = rng.gen_range(0..40);
        let mut junk: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        if rng.gen_bool(0.5) {
            // Well-formed TLVs of management types with random values.
            junk.clear();
            for _ in 0..rng.gen_range(0..5) {
                let t = [7u8, 0x69, 0x6a, 0x6b, 0x6c, 0x70, 0x6d, 0x85][rng.gen_range(0..8)];
                let vl = rng.gen_range(0..10);
                junk.push(t);
                junk.push(vl);
                junk.extend((0..vl).map(|_| rng.gen::<u8>()));
            }
            let mut cp = vec![0x68, junk.len() as u8];
            cp.extend(&junk);
            junk = cp;
        }
        n.push(&NameComponent::generic(junk.clone()));
        let wire = if rng.gen_bool(0.5) {
            Interest::new(command_name_from(n)).to_wire()
        } else {
            Interest::new(n).to_wire()
        };
        let mut out = Vec::new();
        c.receive(1 + k % 2, k % 3 != 0, &wire, u64::from(k), &mut out);
        let _ = FaceStatus::decode_list(&junk);
        let _ = FibEntry::decode_list(&junk);
        let _ = StrategyChoiceEntry::decode_list(&junk);
        let _ = GeneralStatus::decode(&junk);
        let _ = decode_response(&junk);
    }
    // Still forwarding and answering.
    register(&mut c, 1, "/after", 0);
    assert!(c.fib_entries().iter().any(|e| e.name == name("/after")));
}

/// `n` with the four components of a format 0.2 signature appended.
fn command_name_from(mut n: Name) -> Name {
    let full = command_name("x", "y", &ControlParameters::default(), 1, 2);
    for k in 5..9 {
        n.push(&full.get(k).unwrap().to_owned());
    }
    n
}
