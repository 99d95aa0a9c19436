//! The FIB against the name-trie oracle: random, adversarial and deep rule
//! sets, random insert/delete sequences (proptest), both string-matching
//! strategies, binary and linear search and the batched path, with the
//! hash-probe bound asserted on every lookup.

use nexthop_ndn::oracle::NameTrie;
use nexthop_ndn::{
    Config, Fib, FibControl, FibError, Match, NameBuf, NextHop, Prefetch, Strategy, Trace,
};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// `/a/b/c` with generic components (test-only helper; no escapes).
fn n(uri: &str) -> NameBuf {
    NameBuf::from_components(uri.split('/').filter(|c| !c.is_empty())).unwrap()
}

fn hops(faces: &[u32]) -> Vec<NextHop> {
    faces
        .iter()
        .enumerate()
        .map(|(i, &f)| NextHop {
            face: f,
            cost: i as u32 * 10,
        })
        .collect()
}

fn bound(k: usize) -> u32 {
    usize::BITS - k.leading_zeros() // ceil(log2(k + 1))
}

fn cfg(k: usize, strategy: Strategy) -> Config {
    Config {
        max_components: k,
        strategy,
        ..Config::default()
    }
}

/// Compare one name in every lookup mode; assert the probe bound.
fn check(fib: &Fib, oracle: &NameTrie, name: &NameBuf) {
    let want = oracle.lookup(name).map(|(len, h)| (len, h.to_vec()));
    let mut tr = Trace::default();
    let got = fib.lookup_traced(name, &mut tr);
    let got_v = got.map(|m| (m.len, fib.next_hops(m.nh).to_vec()));
    assert_eq!(got_v, want, "binary search, name {name:?}");
    let b = bound(fib.config().max_components);
    if tr.fallback {
        assert!(tr.probes <= 2 * b, "{tr:?} for {name:?}");
    } else {
        assert!(
            tr.probes <= b,
            "{} probes > ceil(log2(k+1)) = {b} for {name:?}",
            tr.probes
        );
    }
    let lin = fib
        .lookup_linear(name)
        .map(|m| (m.len, fib.next_hops(m.nh).to_vec()));
    assert_eq!(lin, want, "linear search, name {name:?}");
}

fn check_all(ctl: &FibControl, oracle: &NameTrie, names: &[NameBuf]) {
    ctl.check_invariants().unwrap();
    for name in names {
        check(ctl.fib(), oracle, name);
    }
    for pf in [Prefetch::None, Prefetch::First, Prefetch::All] {
        let mut out: Vec<Option<Match>> = vec![None; names.len()];
        ctl.fib().lookup_batch(names, &mut out, pf);
        for (name, o) in names.iter().zip(&out) {
            assert_eq!(
                *o,
                ctl.fib().lookup(name),
                "batch ({pf:?}) vs single for {name:?}"
            );
        }
    }
}

#[test]
fn marker_inherits_from_shorter_rule_when_middle_prefix_is_absent() {
    for s in [Strategy::VerifyEach, Strategy::VerifyAtEnd] {
        let mut ctl = FibControl::new(cfg(7, s)).unwrap();
        let mut o = NameTrie::new();
        for (uri, f) in [("/a", 1), ("/a/b/c", 3), ("/a/b/c/d", 4)] {
            ctl.insert(&n(uri), &hops(&[f])).unwrap();
            o.insert(&n(uri), hops(&[f]));
        }
        let probes = [
            "/a/b/random",
            "/a/b",
            "/a/b/c/x",
            "/a/b/c/d/e/f/g/h",
            "/a/x",
            "/b",
            "/",
        ];
        let names: Vec<NameBuf> = probes.iter().map(|u| n(u)).collect();
        check_all(&ctl, &o, &names);
        let m = ctl.fib().lookup(&n("/a/b/random")).unwrap();
        assert_eq!((m.len, ctl.fib().next_hops(m.nh)[0].face), (1, 1));
    }
}

#[test]
fn deleting_a_markers_owner_keeps_the_marker_for_other_rules() {
    for s in [Strategy::VerifyEach, Strategy::VerifyAtEnd] {
        let mut ctl = FibControl::new(cfg(7, s)).unwrap();
        let mut o = NameTrie::new();
        // Both need marker /a/b/c/d at level 4 (on the path of 6 and 7);
        // the first inserted owns the shared string.
        for (uri, f) in [("/a/b/c/d/e/f", 1), ("/a/b/c/d/x/y/z", 2), ("/a", 9)] {
            ctl.insert(&n(uri), &hops(&[f])).unwrap();
            o.insert(&n(uri), hops(&[f]));
        }
        ctl.remove(&n("/a/b/c/d/e/f")).unwrap();
        o.remove(&n("/a/b/c/d/e/f"));
        let names: Vec<NameBuf> = [
            "/a/b/c/d/x/y/z/q",
            "/a/b/c/d/e/f/g",
            "/a/b/c/d",
            "/a/b/c/d/x/y",
        ]
        .iter()
        .map(|u| n(u))
        .collect();
        check_all(&ctl, &o, &names);
        ctl.remove(&n("/a")).unwrap();
        o.remove(&n("/a"));
        check_all(&ctl, &o, &names);
        assert_eq!(ctl.remove(&n("/a")), Err(FibError::NotFound));
        ctl.remove(&n("/a/b/c/d/x/y/z")).unwrap();
        assert_eq!(ctl.stats().keys, 0, "every marker went with the last rule");
        assert_eq!(ctl.stats().entries, 0);
    }
}

#[test]
fn rule_on_an_existing_marker_shares_its_string() {
    let mut ctl = FibControl::new(cfg(7, Strategy::VerifyEach)).unwrap();
    let mut o = NameTrie::new();
    for (uri, f) in [("/a/b/c/d/e/f/g", 1), ("/a/b/c/d", 2), ("/a/b/c/d/e/f", 3)] {
        ctl.insert(&n(uri), &hops(&[f])).unwrap();
        o.insert(&n(uri), hops(&[f]));
    }
    let st = ctl.stats();
    assert_eq!((st.keys, st.markers, st.entries), (3, 0, 1), "{st:?}");
    let names: Vec<NameBuf> = ["/a/b/c/d/e/f/g/h", "/a/b/c/d/e/f/x", "/a/b/c/d/e", "/a/b/c"]
        .iter()
        .map(|u| n(u))
        .collect();
    check_all(&ctl, &o, &names);
}

#[test]
fn default_route_and_multipath_costs() {
    let mut ctl = FibControl::new(cfg(4, Strategy::VerifyAtEnd)).unwrap();
    let mut o = NameTrie::new();
    ctl.insert(&n("/"), &hops(&[7])).unwrap();
    o.insert(&n("/"), hops(&[7]));
    let mh = vec![NextHop { face: 3, cost: 20 }, NextHop { face: 1, cost: 5 }];
    ctl.insert(&n("/x/y"), &mh).unwrap();
    let sorted = vec![NextHop { face: 1, cost: 5 }, NextHop { face: 3, cost: 20 }];
    o.insert(&n("/x/y"), sorted.clone());
    assert_eq!(ctl.get(&n("/x/y")), Some(&sorted[..]));
    check_all(&ctl, &o, &[n("/x/y/z"), n("/x"), n("/q")]);
    assert_eq!(
        ctl.insert(
            &n("/x"),
            &[NextHop { face: 1, cost: 0 }, NextHop { face: 1, cost: 2 }]
        ),
        Err(FibError::DuplicateFace(1))
    );
    assert_eq!(ctl.insert(&n("/x"), &[]), Err(FibError::NoNextHops));
    assert!(matches!(
        ctl.insert(&n("/1/2/3/4/5"), &hops(&[1])),
        Err(FibError::TooManyComponents { got: 5, max: 4 })
    ));
    ctl.check_invariants().unwrap();
}

fn random_name(rng: &mut Xoshiro256PlusPlus, k: usize, alphabet: usize) -> NameBuf {
    let len = rng.gen_range(0..=k);
    NameBuf::from_components((0..len).map(|_| {
        let c = rng.gen_range(0..alphabet);
        format!("c{c}")
    }))
    .unwrap()
}

/// Random rules from a small alphabet (so prefixes nest a lot), random
/// deletes, lookups of random and extended names after every step batch.
fn churn(seed: u64, k: usize, strategy: Strategy, steps: usize) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut ctl = FibControl::new(cfg(k, strategy)).unwrap();
    let mut o = NameTrie::new();
    let mut present: Vec<NameBuf> = Vec::new();
    for step in 0..steps {
        if present.is_empty() || rng.gen_bool(0.65) {
            let name = random_name(&mut rng, k, 3);
            let h = hops(&[rng.gen_range(1..5), rng.gen_range(5..9)]);
            ctl.insert(&name, &h).unwrap();
            o.insert(&name, h);
            present.push(name);
        } else {
            let i = rng.gen_range(0..present.len());
            let name = present.swap_remove(i);
            let was = o.remove(&name);
            assert_eq!(ctl.remove(&name).is_ok(), was);
        }
        if step % 25 == 0 || step + 1 == steps {
            let names: Vec<NameBuf> = (0..60)
                .map(|_| random_name(&mut rng, k + 2, 3))
                .chain(present.iter().cloned())
                .collect();
            check_all(&ctl, &o, &names);
        }
    }
    assert_eq!(ctl.len(), o.len());
}

#[test]
fn random_churn_matches_the_trie_with_both_strategies() {
    for (seed, k) in [(1, 7), (2, 15), (3, 3), (4, 1), (5, 31)] {
        churn(seed, k, Strategy::VerifyEach, 600);
        churn(seed, k, Strategy::VerifyAtEnd, 600);
    }
}

#[test]
fn deep_names_and_long_components() {
    let mut ctl = FibControl::new(cfg(64, Strategy::VerifyAtEnd)).unwrap();
    let mut o = NameTrie::new();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    let base: Vec<String> = (0..64)
        .map(|i| format!("{i}{}", "z".repeat(rng.gen_range(0..300))))
        .collect();
    for l in (1..=64).step_by(5) {
        let name = NameBuf::from_components(&base[..l]).unwrap();
        ctl.insert(&name, &hops(&[l as u32])).unwrap();
        o.insert(&name, hops(&[l as u32]));
    }
    let names: Vec<NameBuf> = (0..=70)
        .map(|l| NameBuf::from_components(base.iter().cycle().take(l)).unwrap())
        .collect();
    check_all(&ctl, &o, &names);
}

#[test]
fn tables_grow_and_overflow_without_losing_keys() {
    // bucket_fill 7 with many keys per level forces overflow chains.
    let c = Config {
        max_components: 3,
        bucket_fill: 7,
        ..Config::default()
    };
    let mut ctl = FibControl::new(c).unwrap();
    let mut o = NameTrie::new();
    let mut names = Vec::new();
    for i in 0..5000u32 {
        let name = NameBuf::from_components([format!("p{}", i % 50), format!("q{i}")]).unwrap();
        ctl.insert(&name, &hops(&[i % 200])).unwrap();
        o.insert(&name, hops(&[i % 200]));
        names.push(name);
    }
    assert!(ctl.stats().overflow_buckets > 0, "{:?}", ctl.stats());
    check_all(&ctl, &o, &names);
    for name in names.iter().step_by(2) {
        ctl.remove(name).unwrap();
        o.remove(name);
    }
    check_all(&ctl, &o, &names);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn insert_delete_sequences_match_the_trie(
        ops in proptest::collection::vec((any::<bool>(), proptest::collection::vec(0u8..3, 0..8), 1u32..6), 1..80),
        verify_at_end in any::<bool>(),
    ) {
        let strategy = if verify_at_end { Strategy::VerifyAtEnd } else { Strategy::VerifyEach };
        let mut ctl = FibControl::new(cfg(7, strategy)).unwrap();
        let mut o = NameTrie::new();
        let mut seen = Vec::new();
        for (ins, comps, face) in ops {
            let name = NameBuf::from_components(comps.iter().map(|c| [b'a' + c])).unwrap();
            if ins {
                ctl.insert(&name, &hops(&[face])).unwrap();
                o.insert(&name, hops(&[face]));
            } else {
                prop_assert_eq!(ctl.remove(&name).is_ok(), o.remove(&name));
            }
            seen.push(name);
        }
        let mut probes = seen.clone();
        probes.extend(seen.iter().map(|s| { let mut s = s.clone(); s.push(8, b"zz").unwrap(); s }));
        check_all(&ctl, &o, &probes);
    }
}

#[test]
fn wire_names_use_their_cached_hashes_and_agree_with_the_fib_form() {
    use nexthop_wire::ndn::Name;
    let mut ctl = FibControl::new(cfg(7, Strategy::VerifyEach)).unwrap();
    for (uri, f) in [("/a", 1), ("/a/b/c", 3), ("/v=5/seg=3", 4)] {
        let name = NameBuf::from_name(&Name::from_uri(uri).unwrap()).unwrap();
        ctl.insert(&name, &hops(&[f])).unwrap();
    }
    for uri in ["/a/b/c/d", "/a/b", "/v=5/seg=3/x", "/v=5/seg=4", "/z"] {
        let w = Name::from_uri(uri).unwrap();
        let mine = NameBuf::from_name(&w).unwrap();
        assert_eq!(
            ctl.fib().prefix_hashes(&mine),
            w.prefix_hashes()[1..].to_vec(),
            "{uri}"
        );
        let mut tr = Trace::default();
        assert_eq!(
            ctl.fib().lookup_name(&w, &mut tr),
            ctl.fib().lookup(&mine),
            "{uri}"
        );
        assert_eq!(
            ctl.fib().lookup_name(&w, &mut tr),
            ctl.fib().lookup(&w),
            "{uri}"
        );
    }
}

/// Random churn with level pulling on (threshold 2 over a 3-symbol
/// alphabet pulls many prefixes), turned on again mid-way.
#[test]
fn level_pulling_keeps_every_answer_and_the_probe_bound() {
    for strategy in [Strategy::VerifyEach, Strategy::VerifyAtEnd] {
        for (seed, k) in [(11u64, 7usize), (12, 15), (13, 4)] {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            let mut ctl = FibControl::new(cfg(k, strategy)).unwrap();
            let mut o = NameTrie::new();
            let mut present: Vec<NameBuf> = Vec::new();
            for step in 0..500 {
                if step == 100 || step == 300 {
                    let pulled = ctl.enable_level_pulling(2).unwrap();
                    assert!(pulled > 0, "step {step}: nothing pulled");
                    ctl.check_invariants().unwrap();
                }
                if present.is_empty() || rng.gen_bool(0.65) {
                    let name = random_name(&mut rng, k, 3);
                    let h = hops(&[rng.gen_range(1..5)]);
                    ctl.insert(&name, &h).unwrap();
                    o.insert(&name, h);
                    present.push(name);
                } else {
                    let name = present.swap_remove(rng.gen_range(0..present.len()));
                    assert_eq!(ctl.remove(&name).is_ok(), o.remove(&name));
                }
                if step % 50 == 49 {
                    let names: Vec<NameBuf> = (0..60)
                        .map(|_| random_name(&mut rng, k + 2, 3))
                        .chain(present.iter().cloned())
                        .collect();
                    check_all(&ctl, &o, &names);
                }
            }
        }
    }
}

#[test]
fn level_pulling_starts_below_a_popular_prefix_and_saves_probes() {
    // /hot has 200 children, each with a 6-component rule below it.
    let mut ctl = FibControl::new(cfg(7, Strategy::VerifyEach)).unwrap();
    let mut names = Vec::new();
    for i in 0..200 {
        let r = NameBuf::from_components([
            "hot".to_string(),
            format!("s{i}"),
            "a".into(),
            "b".into(),
            "c".into(),
            "d".into(),
        ])
        .unwrap();
        ctl.insert(&r, &hops(&[1])).unwrap();
        let mut q = r.prefix(2);
        q.push(8, b"zz").unwrap();
        names.push(q);
    }
    let probes = |ctl: &FibControl| -> u32 {
        names
            .iter()
            .map(|q| {
                let mut tr = Trace::default();
                ctl.fib().lookup_traced(q, &mut tr);
                tr.probes
            })
            .sum()
    };
    let before = probes(&ctl);
    assert_eq!(ctl.enable_level_pulling(64).unwrap(), 1);
    let after = probes(&ctl);
    assert!(
        after < before,
        "pulling did not save probes: {before} -> {after}"
    );
    let mut tr = Trace::default();
    ctl.fib().lookup_traced(&names[0], &mut tr);
    assert_eq!(tr.pulled, 1);
    ctl.check_invariants().unwrap();
}
