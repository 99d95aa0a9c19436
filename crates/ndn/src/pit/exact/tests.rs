//! Unit tests of the exact PIT.

use super::*;
use crate::name::NameBuf;

fn nm(c: &[&str]) -> NameBuf {
    NameBuf::from_components(c).unwrap()
}

fn interest(name: &NameBuf, face: FaceId, nonce: u32) -> InterestIn<'_, NameBuf> {
    InterestIn {
        name,
        can_be_prefix: false,
        must_be_fresh: false,
        nonce,
        lifetime_ms: Some(1000),
        face,
        token: PitToken::new(&[face as u8]),
        multi_access: false,
    }
}

fn pit() -> ExactPit {
    ExactPit::new(ExactPitConfig::default()).unwrap()
}

fn data(pit: &mut ExactPit, name: &NameBuf, now: Millis) -> Vec<Downstream> {
    let mut out = Vec::new();
    pit.satisfy(&DataMatch { name, digest: None }, 99, now, &mut out);
    out
}

/// Keys derive from the name hash a wire `Name` caches when decoded
/// (no hashing in the PIT); a `NameBuf` computes the same hash: an
/// entry inserted under one type is found, aggregated and satisfied
/// (exact, CanBePrefix prefix, implicit digest) under the other, and
/// by `find_entry` on the bytes.
#[test]
fn cached_wire_name_hash_and_computed_hash_key_the_same_entries() {
    use nexthop_wire::ndn::{implicit_digest, Data, Name};
    let mut p = pit();
    let wire = |u: &str| Name::from_uri(u).unwrap();
    let buf = |n: &Name| NameBuf::from_name(n).unwrap();
    fn wi(name: &Name, nonce: u32) -> InterestIn<'_, Name> {
        InterestIn {
            name,
            can_be_prefix: false,
            must_be_fresh: false,
            nonce,
            lifetime_ms: Some(1000),
            face: 1,
            token: PitToken::new(&[1]),
            multi_access: false,
        }
    }
    let a = wire("/a/b/c");
    let ia = wi(&a, 1);
    let id = match p.insert(&ia, 0) {
        InsertOutcome::New(id) => id,
        o => panic!("{o:?}"),
    };
    let ab = buf(&a);
    assert_eq!(ab.name_hash(), a.name_hash());
    assert_eq!(tlv_name_hash(ab.tlv()), Some(a.name_hash()));
    assert_eq!(p.find_entry(ab.tlv(), false, false), Some(id));
    assert_eq!(
        p.insert(&interest(&ab, 2, 2), 0),
        InsertOutcome::Aggregated(id)
    );
    let mut out = Vec::new();
    let m = DataMatch {
        name: &ab,
        digest: None,
    };
    assert_eq!(p.satisfy(&m, 9, 1, &mut out), 1);
    // CanBePrefix: entry from a NameBuf, Data as a wire Name.
    let pn = nm(&["p"]);
    let mut i = interest(&pn, 1, 3);
    i.can_be_prefix = true;
    assert!(matches!(p.insert(&i, 1), InsertOutcome::New(_)));
    let long = wire("/p/q/r");
    let m = DataMatch {
        name: &long,
        digest: None,
    };
    assert_eq!(p.satisfy(&m, 9, 2, &mut out), 1);
    // Implicit digest: entry as a wire Name with the digest component.
    let d = Data::new(wire("/d/e"), vec![1, 2, 3]);
    let dw = d.to_wire();
    let dg = implicit_digest(&dw);
    let mut full = wire("/d/e");
    full.push(&nexthop_wire::ndn::NameComponent::implicit_digest(dg));
    let fi = wi(&full, 4);
    assert!(matches!(p.insert(&fi, 2), InsertOutcome::New(_)));
    let dn = buf(&wire("/d/e"));
    let m = DataMatch {
        name: &dn,
        digest: Some(&dg),
    };
    assert_eq!(p.satisfy(&m, 9, 3, &mut out), 1);
    assert!(p.is_empty());
}

/// The chain heads double as entries come (every live entry stays
/// findable across each re-threading), unlink from the middle and the
/// head of shared chains, and the prefetch hints change nothing.
#[test]
fn chain_heads_grow_and_unlink_keeping_every_entry_findable() {
    let mut p = pit();
    let names: Vec<NameBuf> = (0..5000).map(|k| nm(&["g", &format!("{k}")])).collect();
    let mut ids = Vec::new();
    for (k, n) in names.iter().enumerate() {
        p.prefetch(n, Some((false, false)));
        p.prefetch_slot(n, Some((false, false)));
        match p.insert(&interest(n, 1, k as u32), 0) {
            InsertOutcome::New(id) => ids.push(id),
            o => panic!("{k}: {o:?}"),
        }
    }
    assert!(p.heads.len() > 2 * names.len() && p.heads.len().is_power_of_two());
    // Every chain is short: the heads outnumber the entries twice.
    for (k, n) in names.iter().enumerate() {
        assert_eq!(p.find_entry(n.tlv(), false, false), Some(ids[k]), "{k}");
    }
    // Satisfy every third entry (unlinking wherever it sits in its chain).
    for n in names.iter().step_by(3) {
        p.prefetch(n, None);
        p.prefetch_slot(n, None);
        assert_eq!(data(&mut p, n, 1).len(), 1);
    }
    for (k, n) in names.iter().enumerate() {
        let found = p.find_entry(n.tlv(), false, false);
        assert_eq!(found.is_some(), k % 3 != 0, "{k}");
    }
    assert_eq!(p.len(), names.len() - names.len().div_ceil(3));
    // Freed slots are reused and chained again.
    for (k, n) in names.iter().enumerate().step_by(3) {
        assert!(matches!(
            p.insert(&interest(n, 2, 100_000 + k as u32), 2),
            InsertOutcome::New(_)
        ));
    }
    for n in &names {
        assert!(p.find_entry(n.tlv(), false, false).is_some());
    }
}

#[test]
fn second_face_aggregates_and_both_get_data_with_their_tokens() {
    let mut p = pit();
    let a = nm(&["a", "b"]);
    let id = match p.insert(&interest(&a, 1, 10), 0) {
        InsertOutcome::New(id) => id,
        o => panic!("{o:?}"),
    };
    assert_eq!(
        p.insert(&interest(&a, 2, 11), 1),
        InsertOutcome::Aggregated(id)
    );
    let out = data(&mut p, &a, 2);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].token.unwrap().as_bytes(), &[1]);
    assert_eq!(out[1].token.unwrap().as_bytes(), &[2]);
    assert!(p.is_empty());
    assert!(p.entry(id).is_none());
}

#[test]
fn flags_split_entries_like_nfd() {
    let mut p = pit();
    let a = nm(&["a"]);
    assert!(matches!(
        p.insert(&interest(&a, 1, 1), 0),
        InsertOutcome::New(_)
    ));
    let mut i = interest(&a, 2, 2);
    i.must_be_fresh = true;
    assert!(matches!(p.insert(&i, 0), InsertOutcome::New(_)));
    i.can_be_prefix = true;
    i.nonce = 3;
    assert!(matches!(p.insert(&i, 0), InsertOutcome::New(_)));
    assert_eq!(p.len(), 3);
    // Data /a satisfies all three.
    let out = data(&mut p, &a, 1);
    assert_eq!(out.len(), 2);
    assert!(p.is_empty());
}

#[test]
fn same_face_new_nonce_is_a_retransmission() {
    let mut p = pit();
    let a = nm(&["a"]);
    let InsertOutcome::New(id) = p.insert(&interest(&a, 1, 1), 0) else {
        panic!()
    };
    assert_eq!(
        p.insert(&interest(&a, 1, 2), 500),
        InsertOutcome::Retransmitted(id)
    );
    assert_eq!(p.entry(id).unwrap().expiry(), 1500);
    assert_eq!(p.entry(id).unwrap().in_records().len(), 1);
}

#[test]
fn nonce_from_another_face_or_upstream_is_a_loop() {
    let mut p = pit();
    let a = nm(&["a"]);
    let InsertOutcome::New(id) = p.insert(&interest(&a, 1, 7), 0) else {
        panic!()
    };
    assert_eq!(
        p.insert(&interest(&a, 2, 7), 1),
        InsertOutcome::DuplicateNonce { dead: false }
    );
    // Same face, same nonce: point-to-point, not a loop.
    assert_eq!(
        p.insert(&interest(&a, 1, 7), 1),
        InsertOutcome::Retransmitted(id)
    );
    // Multi-access face: it is.
    let mut i = interest(&a, 1, 7);
    i.multi_access = true;
    assert_eq!(
        p.insert(&i, 1),
        InsertOutcome::DuplicateNonce { dead: false }
    );
    assert!(p.add_out_record(id, 5, 8, Some(1000), 1));
    assert_eq!(
        p.insert(&interest(&a, 3, 8), 2),
        InsertOutcome::DuplicateNonce { dead: false }
    );
    assert_eq!(p.stats().duplicate_nonce, 3);
}

#[test]
fn expired_entry_leaves_its_nonce_in_the_dead_nonce_list() {
    let mut p = pit();
    let a = nm(&["a"]);
    let InsertOutcome::New(id) = p.insert(&interest(&a, 1, 7), 0) else {
        panic!()
    };
    p.add_out_record(id, 5, 7, Some(1000), 0);
    assert_eq!(p.expire(999), 0);
    assert_eq!(p.expire(1000), 1);
    assert!(p.is_empty());
    assert_eq!(
        p.insert(&interest(&a, 2, 7), 1001),
        InsertOutcome::DuplicateNonce { dead: true }
    );
    assert!(matches!(
        p.insert(&interest(&a, 2, 9), 1001),
        InsertOutcome::New(_)
    ));
    assert_eq!(p.stats().expired, 1);
    assert_eq!(p.stats().dead_nonce_hits, 1);
    // After the dead-nonce lifetime the nonce is usable again.
    assert!(data(&mut p, &a, 1002).len() == 1);
    assert!(!matches!(
        p.insert(&interest(&a, 2, 7), 1000 + 6000),
        InsertOutcome::DuplicateNonce { .. }
    ));
}

#[test]
fn data_after_expiry_is_unsolicited() {
    let mut p = pit();
    let a = nm(&["a"]);
    p.insert(&interest(&a, 1, 7), 0);
    assert!(data(&mut p, &a, 1000).is_empty());
    assert_eq!(p.stats().unsolicited, 1);
}

#[test]
fn can_be_prefix_entry_matches_longer_data_only_with_the_flag() {
    let mut p = pit();
    let a = nm(&["a"]);
    let mut i = interest(&a, 1, 1);
    i.can_be_prefix = true;
    p.insert(&i, 0);
    p.insert(&interest(&a, 2, 2), 0);
    let out = data(&mut p, &nm(&["a", "v1", "s0"]), 1);
    assert_eq!(
        out,
        vec![Downstream {
            face: 1,
            token: PitToken::new(&[1])
        }]
    );
    assert_eq!(p.len(), 1);
    assert!(data(&mut p, &nm(&["b"]), 1).is_empty());
    // The root name with CanBePrefix matches anything.
    let root = NameBuf::root();
    let mut i = interest(&root, 3, 3);
    i.can_be_prefix = true;
    p.insert(&i, 1);
    assert_eq!(data(&mut p, &nm(&["z"]), 2).len(), 1);
}

#[test]
fn implicit_digest_entry_matches_only_the_data_with_that_digest() {
    let mut p = pit();
    let a = nm(&["a"]);
    let dg = [5u8; 32];
    let mut full = a.clone();
    full.push(1, &dg).unwrap();
    p.insert(&interest(&full, 1, 1), 0);
    assert!(p.needs_digest());
    let mut out = Vec::new();
    let other = [6u8; 32];
    assert_eq!(
        p.satisfy(
            &DataMatch {
                name: &a,
                digest: Some(&other)
            },
            9,
            1,
            &mut out
        ),
        0
    );
    assert_eq!(
        p.satisfy(
            &DataMatch {
                name: &a,
                digest: None
            },
            9,
            1,
            &mut out
        ),
        0
    );
    assert_eq!(
        p.satisfy(
            &DataMatch {
                name: &a,
                digest: Some(&dg)
            },
            9,
            1,
            &mut out
        ),
        1
    );
    assert_eq!(out.len(), 1);
    assert!(!p.needs_digest());
}

#[test]
fn data_is_not_returned_to_its_ingress_face() {
    let mut p = pit();
    let a = nm(&["a"]);
    p.insert(&interest(&a, 1, 1), 0);
    let mut out = Vec::new();
    assert_eq!(
        p.satisfy(
            &DataMatch {
                name: &a,
                digest: None
            },
            1,
            1,
            &mut out
        ),
        1
    );
    assert!(out.is_empty());
}

#[test]
fn caps_bite_and_are_counted() {
    let cfg = ExactPitConfig {
        max_entries: 2,
        max_records: 2,
        ..ExactPitConfig::default()
    };
    let mut p = ExactPit::new(cfg).unwrap();
    let (a, b, c) = (nm(&["a"]), nm(&["b"]), nm(&["c"]));
    p.insert(&interest(&a, 1, 1), 0);
    p.insert(&interest(&b, 1, 2), 0);
    assert_eq!(p.insert(&interest(&c, 1, 3), 0), InsertOutcome::Full);
    p.insert(&interest(&a, 2, 4), 0);
    assert_eq!(p.insert(&interest(&a, 3, 5), 0), InsertOutcome::RecordsFull);
    let s = p.stats();
    assert_eq!((s.full, s.records_full), (1, 1));
    // Expiry frees room.
    assert!(matches!(
        p.insert(&interest(&c, 1, 6), 1000),
        InsertOutcome::New(_)
    ));
}

#[test]
fn lifetime_is_clamped_and_defaulted() {
    let cfg = ExactPitConfig {
        max_lifetime_ms: 100,
        ..ExactPitConfig::default()
    };
    let mut p = ExactPit::new(cfg).unwrap();
    let a = nm(&["a"]);
    let mut i = interest(&a, 1, 1);
    i.lifetime_ms = Some(u64::MAX);
    let InsertOutcome::New(id) = p.insert(&i, 0) else {
        panic!()
    };
    assert_eq!(p.entry(id).unwrap().expiry(), 100);
    let mut p = pit();
    i.lifetime_ms = None;
    let InsertOutcome::New(id) = p.insert(&i, 0) else {
        panic!()
    };
    assert_eq!(p.entry(id).unwrap().expiry(), DEFAULT_INTEREST_LIFETIME_MS);
}

#[test]
fn nack_marks_out_records_and_remove_finalizes() {
    let mut p = pit();
    let a = nm(&["a"]);
    let InsertOutcome::New(id) = p.insert(&interest(&a, 1, 1), 0) else {
        panic!()
    };
    p.add_out_record(id, 5, 1, None, 0);
    p.add_out_record(id, 6, 1, None, 0);
    assert_eq!(p.nack(id, 5, 2, 1), None);
    assert_eq!(p.nack(id, 5, 1, 1), Some(true));
    assert_eq!(p.nack(id, 6, 1, 1), Some(false));
    assert!(p.remove(id, 1));
    assert!(!p.remove(id, 1));
    assert_eq!(
        p.insert(&interest(&a, 1, 1), 2),
        InsertOutcome::DuplicateNonce { dead: true }
    );
}

#[test]
fn bad_config_is_refused_with_the_field_named() {
    let cfg = ExactPitConfig {
        max_entries: 0,
        ..ExactPitConfig::default()
    };
    let e = ExactPit::new(cfg).unwrap_err();
    assert!(e.to_string().contains("max_entries"), "{e}");
}

#[test]
fn stale_expiry_items_are_compacted_and_expiry_still_fires() {
    let mut p = pit();
    let a = nm(&["a"]);
    for t in 0..5000u64 {
        // Each retransmission moves the expiry and pushes a heap item.
        let r = p.insert(&interest(&a, 1, t as u32), t);
        assert!(matches!(
            r,
            InsertOutcome::New(_) | InsertOutcome::Retransmitted(_)
        ));
    }
    assert!(
        p.heap.len() <= 2 * p.len() + 1024 + 1,
        "heap {}",
        p.heap.len()
    );
    assert_eq!(p.expire(4999 + 999), 0);
    assert_eq!(p.expire(4999 + 1000), 1);
    assert!(p.is_empty());
}

#[test]
fn slots_are_recycled_without_growth() {
    let mut p = pit();
    let names: Vec<NameBuf> = (0..100).map(|i| nm(&[&format!("n{i}")])).collect();
    for round in 0..10u64 {
        for (k, n) in names.iter().enumerate() {
            p.insert(
                &interest(n, 1, (round * 1000 + k as u64) as u32),
                round * 10,
            );
        }
        for n in &names {
            assert_eq!(data(&mut p, n, round * 10 + 1).len(), 1);
        }
    }
    assert_eq!(p.slots.len(), 100);
    assert!(p.is_empty());
}

/// Names longer than the inline bytes and entries with more than one in-
/// or out-record spill to the heap: they match, aggregate and satisfy as
/// inline ones do, `memory_bytes` counts the spilled blocks, and a slot
/// reused by a short name after them keeps working.
#[test]
fn long_names_and_several_records_spill_and_still_match() {
    let mut p = pit();
    let long = "x".repeat(2 * NAME_INLINE);
    let a = nm(&["long", &long]);
    assert!(a.tlv().len() > NAME_INLINE);
    let before = p.memory_bytes();
    let id = match p.insert(&interest(&a, 1, 10), 0) {
        InsertOutcome::New(id) => id,
        o => panic!("{o:?}"),
    };
    assert_eq!(p.entry(id).unwrap().name(), a.tlv());
    for (face, nonce) in [(2, 11), (3, 12)] {
        assert_eq!(
            p.insert(&interest(&a, face, nonce), 1),
            InsertOutcome::Aggregated(id)
        );
    }
    p.add_out_record(id, 7, 20, Some(1000), 1);
    p.add_out_record(id, 8, 21, Some(1000), 1);
    let e = p.entry(id).unwrap();
    assert_eq!((e.in_records().len(), e.out_records().len()), (3, 2));
    let grown = p.memory_bytes() - before;
    assert!(
        grown >= std::mem::size_of::<Slot>() + a.tlv().len() + 3 * std::mem::size_of::<InRecord>(),
        "spilled blocks counted: {grown}"
    );
    let faces: Vec<FaceId> = data(&mut p, &a, 2).iter().map(|d| d.face).collect();
    assert_eq!(faces, [1, 2, 3]);
    assert!(p.is_empty());
    // The freed slot (its spilled buffers kept) serves a short name.
    let b = nm(&["b"]);
    let id = match p.insert(&interest(&b, 1, 30), 3) {
        InsertOutcome::New(id) => id,
        o => panic!("{o:?}"),
    };
    assert_eq!(p.entry(id).unwrap().name(), b.tlv());
    assert_eq!(p.entry(id).unwrap().in_records().len(), 1);
    assert_eq!(data(&mut p, &b, 4).len(), 1);
}
