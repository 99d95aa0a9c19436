//! The forwarding pipeline (no I/O): NFD's Interest, Data and Nack
//! semantics in edge mode, Algorithm 1's collision semantics in core mode,
//! bad input counted by reason, and a seeded random-sequence check of the
//! invariants.

use nexthop_ndn::control::FibControl;
use nexthop_ndn::fib::{Config, Prefetch};
use nexthop_ndn::fw::{
    Action, ActionKind, Actions, DropReason, Forwarder, FwConfig, PitMode, Strategy,
};
use nexthop_ndn::nexthop::NextHop;
use nexthop_ndn::pit::{ExactPitConfig, FingerprintPitConfig, PitToken};
use nexthop_wire::ndn::{Data, Interest, LpPacket, Nack, NackReason, Name, Packet};

fn name(u: &str) -> Name {
    Name::from_uri(u).unwrap()
}

fn interest(u: &str, nonce: u32) -> Interest {
    let mut i = Interest::new(name(u));
    i.nonce = Some(nonce);
    i.lifetime_ms = Some(4000);
    i
}

fn with_token(wire: Vec<u8>, token: &[u8]) -> Vec<u8> {
    LpPacket {
        pit_token: Some(token.to_vec()),
        ..LpPacket::wrap(wire)
    }
    .to_wire()
}

fn nack_wire(i: &Interest, reason: NackReason) -> Vec<u8> {
    LpPacket::nack(i, Some(reason)).to_wire()
}

fn data(u: &str, fresh: Option<u64>) -> Vec<u8> {
    let mut d = Data::new(name(u), b"payload".to_vec());
    d.meta_info.freshness_period_ms = fresh;
    d.sign_digest_sha256();
    d.to_wire()
}

fn fib(routes: &[(&str, &[(u32, u32)])]) -> FibControl {
    let mut f = FibControl::new(Config::default()).unwrap();
    for (p, hops) in routes {
        let hops: Vec<NextHop> = hops
            .iter()
            .map(|&(face, cost)| NextHop { face, cost })
            .collect();
        f.insert(&name(p), &hops).unwrap();
    }
    f
}

fn tok(b: &[u8]) -> Option<PitToken> {
    PitToken::new(b)
}

fn edge() -> Forwarder {
    Forwarder::new(FwConfig::default()).unwrap()
}

/// The sends of one call as `(face, kind, token)`.
fn sends(out: &Actions) -> Vec<(u32, ActionKind, Option<PitToken>)> {
    out.sends()
        .iter()
        .map(|a| (a.face, a.kind, a.token))
        .collect()
}

fn sent_interest(out: &Actions, a: &Action) -> Interest {
    Interest::decode(out.packet(a)).unwrap()
}

#[test]
fn cs_hit_answers_a_second_consumer_with_its_own_token() {
    let f = fib(&[("/a", &[(2, 10)])]);
    let mut fw = edge();
    let mut out = Actions::new();
    fw.process(
        f.fib(),
        1,
        &with_token(interest("/a/b", 1).to_wire(), b"T1"),
        0,
        &mut out,
    );
    assert_eq!(sends(&out), [(2, ActionKind::Interest, None)]);
    out.clear();
    let d = data("/a/b", Some(10_000));
    fw.process(f.fib(), 2, &d, 5, &mut out);
    assert_eq!(sends(&out), [(1, ActionKind::Data, tok(b"T1"))]);
    assert_eq!(out.packet(&out.sends()[0]), d.as_slice());
    out.clear();
    fw.process(
        f.fib(),
        3,
        &with_token(interest("/a/b", 2).to_wire(), b"T3"),
        10,
        &mut out,
    );
    assert_eq!(sends(&out), [(3, ActionKind::Data, tok(b"T3"))]);
    assert_eq!(out.packet(&out.sends()[0]), d.as_slice());
    assert_eq!(fw.counters().cs_hits, 1);
    assert_eq!(fw.pit_len(), 0, "a CS hit leaves no pending entry");
    // The wire form carries the token in an LpPacket.
    let lp = LpPacket::decode(&out.to_wire(&out.sends()[0])).unwrap();
    assert_eq!(lp.pit_token.as_deref(), Some(&b"T3"[..]));
}

#[test]
fn must_be_fresh_misses_after_the_freshness_period() {
    let f = fib(&[("/a", &[(2, 10)])]);
    let mut fw = edge();
    let mut out = Actions::new();
    let mut i = interest("/a/f", 1);
    i.must_be_fresh = true;
    fw.process(f.fib(), 1, &i.to_wire(), 0, &mut out);
    fw.process(f.fib(), 2, &data("/a/f", Some(100)), 0, &mut out);
    out.clear();
    i.nonce = Some(2);
    fw.process(f.fib(), 1, &i.to_wire(), 50, &mut out);
    assert_eq!(sends(&out), [(1, ActionKind::Data, None)], "fresh: a hit");
    out.clear();
    i.nonce = Some(3);
    fw.process(f.fib(), 1, &i.to_wire(), 200, &mut out);
    assert_eq!(
        sends(&out),
        [(2, ActionKind::Interest, None)],
        "stale: forwarded"
    );
    // Without MustBeFresh the stale copy still answers.
    out.clear();
    let mut j = interest("/a/f", 4);
    j.must_be_fresh = false;
    fw.process(f.fib(), 3, &j.to_wire(), 200, &mut out);
    assert_eq!(sends(&out), [(3, ActionKind::Data, None)]);
}

#[test]
fn two_consumers_aggregate_into_one_upstream_interest_and_each_gets_its_token() {
    let f = fib(&[("/a", &[(2, 10)])]);
    let mut fw = edge();
    let mut out = Actions::new();
    fw.process(
        f.fib(),
        1,
        &with_token(interest("/a/x", 11).to_wire(), b"c1"),
        0,
        &mut out,
    );
    fw.process(
        f.fib(),
        3,
        &with_token(interest("/a/x", 33).to_wire(), b"c3"),
        1,
        &mut out,
    );
    assert_eq!(sends(&out), [(2, ActionKind::Interest, None)]);
    assert_eq!(fw.counters().suppressed, 1);
    assert_eq!(fw.pit_len(), 1);
    out.clear();
    fw.process(f.fib(), 2, &data("/a/x", None), 3, &mut out);
    let mut got = sends(&out);
    got.sort_by_key(|s| s.0);
    assert_eq!(
        got,
        [
            (1, ActionKind::Data, tok(b"c1")),
            (3, ActionKind::Data, tok(b"c3"))
        ]
    );
    assert_eq!(fw.pit_len(), 0);
    assert_eq!(fw.face_counters(2).out_interests, 1);
    assert_eq!(fw.face_counters(1).out_data, 1);
}

#[test]
fn no_route_is_answered_with_nack_no_route() {
    let f = fib(&[("/other", &[(2, 10)])]);
    let mut fw = edge();
    let mut out = Actions::new();
    fw.process(
        f.fib(),
        1,
        &with_token(interest("/a/b", 7).to_wire(), b"t"),
        0,
        &mut out,
    );
    assert_eq!(
        sends(&out),
        [(1, ActionKind::Nack(NackReason::NoRoute), tok(b"t"))]
    );
    assert_eq!(sent_interest(&out, &out.sends()[0]).nonce, Some(7));
    let lp = LpPacket::decode(&out.to_wire(&out.sends()[0])).unwrap();
    assert_eq!(
        lp.nack,
        Some(Nack {
            reason: Some(NackReason::NoRoute)
        })
    );
    assert_eq!(fw.pit_len(), 0);
    assert_eq!(fw.counters().drops.get(DropReason::NoRoute), 1);
    // Only route back to the consumer itself: no route either.
    let f = fib(&[("/a", &[(1, 10)])]);
    out.clear();
    fw.process(f.fib(), 1, &interest("/a/c", 8).to_wire(), 0, &mut out);
    assert_eq!(
        sends(&out),
        [(1, ActionKind::Nack(NackReason::NoRoute), None)]
    );
}

#[test]
fn duplicate_nonce_from_another_face_is_answered_with_nack_duplicate() {
    let f = fib(&[("/a", &[(2, 10)])]);
    let mut fw = edge();
    let mut out = Actions::new();
    fw.process(f.fib(), 1, &interest("/a/loop", 99).to_wire(), 0, &mut out);
    out.clear();
    fw.process(
        f.fib(),
        3,
        &with_token(interest("/a/loop", 99).to_wire(), b"L"),
        1,
        &mut out,
    );
    assert_eq!(
        sends(&out),
        [(3, ActionKind::Nack(NackReason::Duplicate), tok(b"L"))]
    );
    assert_eq!(fw.counters().drops.get(DropReason::DuplicateNonce), 1);
    // A satisfied MustBeFresh entry leaves its nonces in the dead-nonce
    // list (NFD): the same nonce later is still a loop.
    let mut i = interest("/a/fresh", 77);
    i.must_be_fresh = true;
    fw.process(f.fib(), 1, &i.to_wire(), 2, &mut out);
    fw.process(f.fib(), 2, &data("/a/fresh", Some(1000)), 3, &mut out);
    out.clear();
    fw.process(f.fib(), 4, &i.to_wire(), 4, &mut out);
    assert_eq!(
        sends(&out),
        [(4, ActionKind::Nack(NackReason::Duplicate), None)]
    );
    // A satisfied entry without MustBeFresh does not: the CS answers.
    fw.process(f.fib(), 2, &data("/a/loop", None), 5, &mut out);
    out.clear();
    fw.process(f.fib(), 4, &interest("/a/loop", 99).to_wire(), 6, &mut out);
    assert_eq!(sends(&out), [(4, ActionKind::Data, None)]);
}

#[test]
fn hop_limit_is_decremented_and_exhaustion_drops() {
    let f = fib(&[("/a", &[(2, 10)])]);
    let mut fw = edge();
    let mut out = Actions::new();
    let mut i = interest("/a/h0", 1);
    i.hop_limit = Some(0);
    fw.process(f.fib(), 1, &i.to_wire(), 0, &mut out);
    assert!(out.sends().is_empty());
    assert_eq!(out.drops(), [(1, DropReason::HopLimitZero)]);
    out.clear();
    let mut i = interest("/a/h1", 2);
    i.hop_limit = Some(1);
    fw.process(f.fib(), 1, &i.to_wire(), 0, &mut out);
    assert!(out.sends().is_empty(), "0 after the decrement: not sent on");
    assert_eq!(out.drops(), [(1, DropReason::HopLimitExhausted)]);
    out.clear();
    let mut i = interest("/a/h5", 3);
    i.hop_limit = Some(5);
    fw.process(f.fib(), 1, &i.to_wire(), 0, &mut out);
    assert_eq!(sent_interest(&out, &out.sends()[0]).hop_limit, Some(4));
    // The received bytes go on with only the HopLimit byte changed.
    i.hop_limit = Some(4);
    assert_eq!(out.packet(&out.sends()[0]), i.to_wire().as_slice());
    assert_eq!(fw.counters().drops.get(DropReason::HopLimitZero), 1);
    assert_eq!(fw.counters().drops.get(DropReason::HopLimitExhausted), 1);
}

#[test]
fn an_interest_without_nonce_is_forwarded_with_one() {
    let f = fib(&[("/a", &[(2, 10)])]);
    let mut fw = edge();
    let mut out = Actions::new();
    let mut i = interest("/a/nn", 0);
    i.nonce = None;
    fw.process(f.fib(), 1, &i.to_wire(), 0, &mut out);
    assert_eq!(out.sends().len(), 1);
    assert!(sent_interest(&out, &out.sends()[0]).nonce.is_some());
    assert_eq!(fw.counters().nonces_assigned, 1);
}

#[test]
fn best_route_suppresses_early_retransmissions_then_tries_the_next_hop() {
    let f = fib(&[("/a", &[(2, 10), (4, 20)])]);
    let mut fw = edge();
    let mut out = Actions::new();
    let faces_sent = |out: &Actions| -> Vec<u32> { out.sends().iter().map(|a| a.face).collect() };
    fw.process(f.fib(), 1, &interest("/a/r", 1).to_wire(), 0, &mut out);
    assert_eq!(faces_sent(&out), [2], "lowest cost first");
    out.clear();
    fw.process(f.fib(), 1, &interest("/a/r", 2).to_wire(), 5, &mut out);
    assert!(out.sends().is_empty(), "inside the suppression interval");
    fw.process(f.fib(), 1, &interest("/a/r", 3).to_wire(), 20, &mut out);
    assert_eq!(faces_sent(&out), [4], "an unused next hop");
    assert_eq!(sent_interest(&out, &out.sends()[0]).nonce, Some(3));
    out.clear();
    fw.process(f.fib(), 1, &interest("/a/r", 4).to_wire(), 40, &mut out);
    assert_eq!(faces_sent(&out), [2], "all used: the one used longest ago");
    assert_eq!(fw.counters().suppressed, 1);
}

#[test]
fn the_suppression_interval_doubles_with_each_forwarded_retransmission_up_to_its_cap() {
    // NFD's RetxSuppressionExponential: 10 ms, x2, at most 250 ms.
    let f = fib(&[("/a", &[(2, 10)])]);
    let mut fw = edge();
    let mut out = Actions::new();
    let mut nonce = 0;
    let mut at = |fw: &mut Forwarder, t: u64, out: &mut Actions| -> bool {
        nonce += 1;
        out.clear();
        fw.process(f.fib(), 1, &interest("/a/e", nonce).to_wire(), t, out);
        !out.sends().is_empty()
    };
    assert!(at(&mut fw, 0, &mut out), "the first Interest goes up");
    // Interval 10 after the send at 0; each forwarded retransmission
    // doubles it: 20, 40, 80, 160, then 250 (the cap) twice.
    let mut last = 0;
    for interval in [10, 20, 40, 80, 160, 250, 250] {
        assert!(
            !at(&mut fw, last + interval - 1, &mut out),
            "suppressed 1 ms before {interval} ms after the send at {last}"
        );
        assert!(
            at(&mut fw, last + interval, &mut out),
            "forwarded {interval} ms after the send at {last}"
        );
        last += interval;
    }
    assert_eq!(fw.counters().suppressed, 7);
    // A fixed interval when the maximum equals the initial one.
    let mut fixed = Forwarder::new(FwConfig {
        retx_suppression_max_ms: 10,
        ..FwConfig::default()
    })
    .unwrap();
    assert!(at(&mut fixed, 0, &mut out));
    for t in [10, 20, 30] {
        assert!(!at(&mut fixed, t - 1, &mut out));
        assert!(at(&mut fixed, t, &mut out), "fixed 10 ms: forwarded at {t}");
    }
    let bad = FwConfig {
        retx_suppression_ms: 100,
        retx_suppression_max_ms: 50,
        ..FwConfig::default()
    };
    assert!(
        Forwarder::new(bad).is_err(),
        "a maximum below the initial interval"
    );
}

#[test]
fn multicast_fans_out_to_every_next_hop_but_the_incoming_face() {
    let f = fib(&[("/m", &[(2, 10), (3, 20), (4, 30)])]);
    let mut fw = edge();
    assert!(fw
        .strategy_choice_mut()
        .set(&name("/m"), Strategy::Multicast));
    let mut out = Actions::new();
    fw.process(f.fib(), 3, &interest("/m/x", 1).to_wire(), 0, &mut out);
    let mut faces: Vec<u32> = out.sends().iter().map(|a| a.face).collect();
    faces.sort();
    assert_eq!(faces, [2, 4]);
    assert!(out.sends().iter().all(|a| a.kind == ActionKind::Interest));
    // Data from one upstream satisfies the consumer once.
    out.clear();
    fw.process(f.fib(), 4, &data("/m/x", None), 1, &mut out);
    assert_eq!(sends(&out), [(3, ActionKind::Data, None)]);
}

#[test]
fn best_route_retries_after_a_nack_and_returns_the_least_severe_reason() {
    let f = fib(&[("/a", &[(2, 10), (4, 20)])]);
    let mut fw = edge();
    let mut out = Actions::new();
    let i = interest("/a/n", 5);
    fw.process(f.fib(), 1, &with_token(i.to_wire(), b"k"), 0, &mut out);
    out.clear();
    fw.process(f.fib(), 2, &nack_wire(&i, NackReason::NoRoute), 1, &mut out);
    assert_eq!(sends(&out), [(4, ActionKind::Interest, None)]);
    assert_eq!(fw.counters().nack_retries, 1);
    out.clear();
    fw.process(
        f.fib(),
        4,
        &nack_wire(&i, NackReason::Congestion),
        2,
        &mut out,
    );
    assert_eq!(
        sends(&out),
        [(1, ActionKind::Nack(NackReason::Congestion), tok(b"k"))]
    );
    assert_eq!(fw.pit_len(), 0);
    // A Nack for nothing pending is dropped.
    out.clear();
    fw.process(f.fib(), 4, &nack_wire(&i, NackReason::NoRoute), 3, &mut out);
    assert_eq!(out.drops(), [(4, DropReason::UnmatchedNack)]);
}

fn core(fp_bits: u32) -> Forwarder {
    Forwarder::new(FwConfig {
        pit: PitMode::Fingerprint(FingerprintPitConfig {
            capacity: 64,
            subtables: 1,
            fp_bits,
            faces: 8,
            ..FingerprintPitConfig::default()
        }),
        ..FwConfig::default()
    })
    .unwrap()
}

#[test]
fn core_mode_delivers_both_colliding_names_and_keeps_the_entry_until_expiry() {
    let f = fib(&[("/c", &[(2, 10)])]);
    let mut fw = core(1);
    let pit = fw.fingerprint_pit().unwrap();
    // Two names that share an entry (same bucket and fingerprint).
    let names: Vec<String> = (0..64).map(|k| format!("/c/{k}")).collect();
    let keys: Vec<u64> = names
        .iter()
        .map(|n| pit.key(name(n).value()).hash())
        .collect();
    let (a, b) = (0..64)
        .flat_map(|x| (x + 1..64).map(move |y| (x, y)))
        .find(|&(x, y)| keys[x] == keys[y])
        .expect("1-bit fingerprints in 8 buckets collide");
    let (na, nb) = (&names[a], &names[b]);
    let mut out = Actions::new();
    fw.process(f.fib(), 1, &interest(na, 1).to_wire(), 0, &mut out);
    fw.process(f.fib(), 3, &interest(nb, 2).to_wire(), 0, &mut out);
    assert_eq!(
        sends(&out),
        [
            (2, ActionKind::Interest, None),
            (2, ActionKind::Interest, None)
        ],
        "a colliding Interest is forwarded, never aggregated away"
    );
    out.clear();
    fw.process(f.fib(), 2, &data(na, None), 10, &mut out);
    let mut faces: Vec<u32> = out.sends().iter().map(|a| a.face).collect();
    faces.sort();
    assert_eq!(faces, [1, 3], "the entry's faces get the Data");
    out.clear();
    fw.process(f.fib(), 2, &data(nb, None), 20, &mut out);
    let mut faces: Vec<u32> = out.sends().iter().map(|a| a.face).collect();
    faces.sort();
    assert_eq!(
        faces,
        [1, 3],
        "the collided entry lives: the second Data is delivered too"
    );
    out.clear();
    fw.process(f.fib(), 2, &data(na, None), 5000, &mut out);
    assert!(out.sends().is_empty(), "gone after its expiry");
    assert_eq!(out.drops(), [(2, DropReason::UnsolicitedData)]);
}

#[test]
fn core_mode_without_collision_deletes_the_entry_on_data() {
    let f = fib(&[("/c", &[(2, 10)])]);
    let mut fw = core(16);
    let mut out = Actions::new();
    fw.process(f.fib(), 1, &interest("/c/one", 1).to_wire(), 0, &mut out);
    fw.process(f.fib(), 2, &data("/c/one", None), 1, &mut out);
    assert_eq!(fw.pit_len(), 0);
    out.clear();
    fw.process(f.fib(), 2, &data("/c/one", None), 2, &mut out);
    assert_eq!(out.drops(), [(2, DropReason::UnsolicitedData)]);
    // A face beyond the fingerprint PIT's bit-vector is refused.
    out.clear();
    fw.process(f.fib(), 9, &interest("/c/two", 2).to_wire(), 3, &mut out);
    assert_eq!(out.drops(), [(9, DropReason::BadFace)]);
}

#[test]
fn bad_input_is_counted_by_reason_and_dropped() {
    let f = fib(&[("/a", &[(2, 10)])]);
    let mut fw = Forwarder::new(FwConfig {
        pit: PitMode::Exact(ExactPitConfig {
            max_entries: 4,
            ..ExactPitConfig::default()
        }),
        max_faces: 16,
        ..FwConfig::default()
    })
    .unwrap();
    let mut out = Actions::new();
    let good = interest("/a/b", 1).to_wire();
    fw.process(f.fib(), 1, &good[..good.len() - 2], 0, &mut out);
    fw.process(f.fib(), 1, &[0x05, 0x03, 0x07, 0x01, 0x08], 0, &mut out);
    // An unknown critical element (type 201: odd) in an Interest.
    let mut v = Vec::new();
    name("/a/u").encode(&mut v);
    v.extend_from_slice(&[0x0a, 4, 1, 2, 3, 4, 0xc9, 0x00]);
    let mut w = vec![0x05, v.len() as u8];
    w.extend_from_slice(&v);
    fw.process(f.fib(), 1, &w, 0, &mut out);
    // Zero-component names.
    fw.process(f.fib(), 1, &interest("/", 2).to_wire(), 0, &mut out);
    fw.process(f.fib(), 2, &data("/", None), 0, &mut out);
    // A fragment of a larger packet.
    let frag = LpPacket {
        frag_index: Some(0),
        frag_count: Some(2),
        ..LpPacket::wrap(good[..8].to_vec())
    };
    fw.process(f.fib(), 1, &frag.to_wire(), 0, &mut out);
    // Data for no PIT entry, a face out of range.
    fw.process(f.fib(), 2, &data("/a/none", None), 0, &mut out);
    fw.process(f.fib(), 99, &good, 0, &mut out);
    // A flood of unique Interests against the PIT cap of 4.
    for k in 0..10u32 {
        fw.process(
            f.fib(),
            1,
            &interest(&format!("/a/f{k}"), 100 + k).to_wire(),
            0,
            &mut out,
        );
    }
    let d = fw.counters().drops;
    assert_eq!(d.get(DropReason::Truncated), 2);
    assert_eq!(d.get(DropReason::UnknownCritical), 1);
    assert_eq!(d.get(DropReason::ZeroComponentName), 2);
    assert_eq!(d.get(DropReason::NotWhole), 1);
    assert_eq!(d.get(DropReason::UnsolicitedData), 1);
    assert_eq!(d.get(DropReason::BadFace), 1);
    assert_eq!(d.get(DropReason::PitFull), 6);
    assert_eq!(fw.pit_len(), 4);
    assert_eq!(out.drops().len() as u64, d.total());
    assert_eq!(fw.face_counters(1).dropped, 2 + 1 + 1 + 1 + 6);
}

#[test]
fn interests_beyond_the_pit_chain_cap_are_dropped_and_counted() {
    let f = fib(&[("/a", &[(2, 10)])]);
    // One entry per chain: of 40 unique names some share a chain (16 to 64
    // heads; a collision-free spread has probability below 1e-6).
    let mut fw = Forwarder::new(FwConfig {
        pit: PitMode::Exact(ExactPitConfig {
            max_chain: 1,
            ..ExactPitConfig::default()
        }),
        ..FwConfig::default()
    })
    .unwrap();
    let mut out = Actions::new();
    for k in 0..40u32 {
        fw.process(
            f.fib(),
            1,
            &interest(&format!("/a/f{k}"), 100 + k).to_wire(),
            0,
            &mut out,
        );
    }
    let d = fw.counters().drops;
    let refused = d.get(DropReason::PitChainFull);
    assert!(refused > 0);
    assert_eq!(refused + fw.pit_len() as u64, 40);
    assert_eq!(d.total(), refused);
    assert_eq!(out.sends().len(), fw.pit_len());
    assert_eq!(fw.face_counters(1).dropped, refused);
    assert_eq!(DropReason::PitChainFull.as_str(), "pit_chain_full");
    assert!(DropReason::ALL.contains(&DropReason::PitChainFull));
}

#[test]
fn fib_prefetch_passes_change_no_answer_for_any_name_length() {
    let f = fib(&[("/a", &[(2, 10)]), ("/a/b/c", &[(3, 1)])]);
    let long = format!("/a/b/c{}", "/x".repeat(40));
    let mut other_key = FibControl::new(Config {
        key: (1, 2),
        ..Config::default()
    })
    .unwrap();
    other_key
        .insert(&name("/a"), &[NextHop { face: 2, cost: 10 }])
        .unwrap();
    for fib in [f.fib(), other_key.fib()] {
        for u in ["/a", "/a/b", "/a/b/c/d", long.as_str(), "/z"] {
            let n = name(u);
            let before = fib.lookup(&n);
            fib.prefetch_name(&n, Prefetch::All);
            fib.prefetch_name_entries(&n);
            assert_eq!(fib.lookup(&n), before, "{u}");
        }
    }
    assert_eq!(f.fib().lookup(&name(&long)).map(|m| m.len), Some(3));
}

#[test]
fn batches_prefetch_every_table_line_by_default() {
    assert_eq!(FwConfig::default().batch_prefetch, Prefetch::All);
    assert!(FwConfig::default().validate().is_ok());
}

#[test]
fn a_batch_gives_the_same_actions_as_one_call_per_packet() {
    let f = fib(&[("/a", &[(2, 10), (4, 20)]), ("/b", &[(3, 1)])]);
    let mut pkts: Vec<(u32, Vec<u8>)> = Vec::new();
    for k in 0..40u32 {
        let n = format!("/{}/{}", if k % 3 == 0 { "b" } else { "a" }, k % 7);
        pkts.push((
            1 + k % 2,
            with_token(interest(&n, k).to_wire(), &k.to_be_bytes()),
        ));
        if k % 5 == 4 {
            pkts.push((2, data(&n, Some(1000))));
        }
    }
    pkts.push((1, vec![0xff, 0x00]));
    let batch: Vec<(u32, &[u8])> = pkts.iter().map(|(f, w)| (*f, w.as_slice())).collect();
    // Edge mode, and core mode (with fingerprints narrow enough to collide).
    for core_mode in [false, true] {
        let mk = |prefetch| {
            let mut fw = if core_mode { core(4) } else { edge() };
            let mut cfg = *fw.config();
            cfg.batch_prefetch = prefetch;
            fw = Forwarder::new(cfg).unwrap();
            fw
        };
        let mut one = mk(Prefetch::None);
        let mut o1 = Actions::new();
        for (face, w) in &pkts {
            one.process(f.fib(), *face, w, 7, &mut o1);
        }
        for prefetch in [Prefetch::None, Prefetch::First, Prefetch::All] {
            let mut batched = mk(prefetch);
            let mut o2 = Actions::new();
            batched.process_batch(f.fib(), &batch, 7, &mut o2);
            assert_eq!(o1.sends(), o2.sends());
            assert_eq!(o1.drops(), o2.drops());
            for a in o1.sends() {
                assert_eq!(o1.packet(a), o2.packet(a));
            }
            assert_eq!(one.counters(), batched.counters());
            assert_eq!(one.pit_len(), batched.pit_len());
        }
    }
}

/// A tiny deterministic generator (the test needs no distribution).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn random_sequences_only_send_data_that_answers_a_pending_interest_and_never_panic() {
    use std::collections::HashMap;
    const CONSUMERS: [u32; 2] = [1, 3];
    const PRODUCER: u32 = 2;
    const LIFETIME: u64 = 500;
    for seed in 0..300u64 {
        let mut rng = Lcg(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let f = fib(&[("/p", &[(PRODUCER, 10)])]);
        let core_mode = seed % 3 == 2;
        // Core mode: wide fingerprints (no false matches), and a duplicate
        // Interest sets the collision bit so its entry answers until expiry.
        let mut fw = if core_mode { core(32) } else { edge() };
        let slack = if core_mode { 32 } else { 0 };
        if seed % 2 == 1 {
            fw.strategy_choice_mut()
                .set(&name("/p/1"), Strategy::Multicast);
        }
        // (face, name) -> last Interest arrival.
        let mut pending: HashMap<(u32, Vec<u8>), u64> = HashMap::new();
        // name -> last Interest arrival from any face.
        let mut latest: HashMap<Vec<u8>, u64> = HashMap::new();
        let mut now = 0u64;
        let mut out = Actions::new();
        for _ in 0..200 {
            now += rng.below(60);
            out.clear();
            let n = format!("/p/{}/{}", rng.below(2), rng.below(4));
            match rng.below(6) {
                0..=2 => {
                    let face = CONSUMERS[rng.below(2) as usize];
                    let mut i = interest(&n, rng.below(8) as u32);
                    i.lifetime_ms = Some(LIFETIME);
                    let t = rng.next().to_be_bytes();
                    fw.process(f.fib(), face, &with_token(i.to_wire(), &t), now, &mut out);
                    pending.insert((face, name(&n).value().to_vec()), now);
                    latest.insert(name(&n).value().to_vec(), now);
                }
                3 => fw.process(
                    f.fib(),
                    PRODUCER,
                    &data(&n, Some(rng.below(300))),
                    now,
                    &mut out,
                ),
                4 => {
                    let i = interest(&n, rng.below(8) as u32);
                    fw.process(
                        f.fib(),
                        PRODUCER,
                        &nack_wire(&i, NackReason::Congestion),
                        now,
                        &mut out,
                    );
                }
                _ => {
                    let len = rng.below(40) as usize;
                    let mut junk: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                    if let Some(b) = junk.first_mut() {
                        *b = [5u8, 6, 100, 0xfd][rng.below(4) as usize];
                    }
                    let face = rng.below(8) as u32;
                    fw.process(f.fib(), face, &junk, now, &mut out);
                }
            }
            for a in out.sends() {
                match a.kind {
                    ActionKind::Data => {
                        let d = Data::decode(out.packet(a)).unwrap();
                        let key = (a.face, d.name.value().to_vec());
                        // Core mode: one entry per name holds a face
                        // bit-vector and the latest expiry, so a face stays
                        // listed while any face renews the name.
                        let t = if core_mode {
                            pending.get(&key).and(latest.get(&key.1)).copied()
                        } else {
                            pending.get(&key).copied()
                        };
                        assert!(
                            t.is_some_and(|t| now < t + LIFETIME + slack),
                            "seed {seed}: Data {} to face {} at {now} answers no pending Interest (last {t:?})",
                            d.name,
                            a.face
                        );
                        if !core_mode {
                            pending.remove(&key);
                        }
                    }
                    ActionKind::Interest => assert_eq!(a.face, PRODUCER),
                    ActionKind::Nack(_) => assert!(CONSUMERS.contains(&a.face)),
                }
                assert!(matches!(
                    Packet::decode(&out.to_wire(a)),
                    Ok(Packet::Lp(_) | Packet::Interest(_) | Packet::Data(_))
                ));
            }
            assert!(fw.pit_len() <= 1 << 20);
        }
    }
}

/// `process` parses with the borrowed views into scratch buffers;
/// `process_batch` with prefetch copies each packet's Interest or Data
/// name out of the same views (for its prefetch). On valid and
/// mutated Interests, Data and Nacks (with and without LpPacket and
/// PitToken) both give the same sends, drops, counters and PIT.
#[test]
fn view_decode_path_matches_owned_decode_path_on_mutated_packets() {
    let f = fib(&[("/a", &[(2, 10)]), ("/b", &[(3, 1), (4, 2)])]);
    let mut rng = Lcg(0x5eed);
    for core_mode in [false, true] {
        let mk = |prefetch| {
            let mut fw = if core_mode { core(8) } else { edge() };
            let mut cfg = *fw.config();
            cfg.batch_prefetch = prefetch;
            fw = Forwarder::new(cfg).unwrap();
            fw
        };
        let (mut views, mut owned) = (mk(Prefetch::None), mk(Prefetch::First));
        let (mut o1, mut o2) = (Actions::new(), Actions::new());
        for k in 0..4000u32 {
            let n = format!("/{}/{}", if k % 3 == 0 { "b" } else { "a" }, rng.below(9));
            let mut w = match rng.below(5) {
                0 => interest(&n, k).to_wire(),
                1 => with_token(interest(&n, k).to_wire(), &k.to_be_bytes()),
                2 => data(&n, Some(rng.below(3) * 500)),
                3 => with_token(data(&n, None), &[7]),
                _ => LpPacket {
                    pit_token: Some(vec![0xd7, 0]),
                    ..LpPacket::nack(&interest(&n, k), Some(NackReason::NoRoute))
                }
                .to_wire(),
            };
            // Half the packets get up to three random bytes changed.
            if rng.below(2) == 0 {
                for _ in 0..=rng.below(3) {
                    let at = rng.below(w.len() as u64) as usize;
                    w[at] = rng.below(256) as u8;
                }
            }
            let face = 1 + rng.below(4) as u32;
            let now = u64::from(k) * 3;
            o1.clear();
            o2.clear();
            views.process(f.fib(), face, &w, now, &mut o1);
            owned.process_batch(f.fib(), &[(face, &w)], now, &mut o2);
            assert_eq!(o1.sends(), o2.sends(), "packet {k}: {w:02x?}");
            assert_eq!(o1.drops(), o2.drops(), "packet {k}: {w:02x?}");
            for a in o1.sends() {
                assert_eq!(o1.packet(a), o2.packet(a));
            }
        }
        assert_eq!(views.counters(), owned.counters());
        assert_eq!(views.pit_len(), owned.pit_len());
        assert!(views.counters().satisfied > 0);
    }
}
