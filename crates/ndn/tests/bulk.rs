//! The bulk-built read-only FIB (`Fib::build`) against the name-trie
//! oracle: random, adversarial and deep sets in any order, both
//! string-matching strategies, binary and linear search, single and
//! batched (names and raw TLV), with the probe bound asserted; and a FIB
//! file round trip.

use nexthop_ndn::names::WorstCase;
use nexthop_ndn::oracle::NameTrie;
use nexthop_ndn::{
    persist, BatchScratch, Config, Fib, FibBuilder, Match, NameBuf, NextHop, Prefetch, Strategy,
    Trace,
};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn hops(f: u32) -> Vec<NextHop> {
    vec![
        NextHop { face: f, cost: 1 },
        NextHop {
            face: f + 1000,
            cost: 5,
        },
    ]
}

fn bound(k: usize) -> u32 {
    usize::BITS - k.leading_zeros()
}

fn check(fib: &Fib, oracle: &NameTrie, names: &[NameBuf]) {
    let want: Vec<_> = names
        .iter()
        .map(|q| oracle.lookup(q).map(|(l, h)| (l, h.to_vec())))
        .collect();
    let as_v = |m: Option<Match>| m.map(|m| (m.len, fib.next_hops(m.nh).to_vec()));
    let b = bound(fib.config().max_components);
    for (q, w) in names.iter().zip(&want) {
        let mut tr = Trace::default();
        assert_eq!(as_v(fib.lookup_traced(q, &mut tr)), *w, "binary {q}");
        assert!(
            tr.probes <= if tr.fallback { 2 * b } else { b },
            "{tr:?} for {q}"
        );
        assert_eq!(as_v(fib.lookup_linear(q)), *w, "linear {q}");
    }
    let tlvs: Vec<&[u8]> = names.iter().map(nexthop_ndn::NameView::tlv).collect();
    let mut scratch = BatchScratch::new();
    for pf in [Prefetch::None, Prefetch::First, Prefetch::All] {
        let mut out = vec![None; names.len()];
        fib.lookup_batch(names, &mut out, pf);
        assert!(
            out.iter().zip(&want).all(|(o, w)| as_v(*o) == *w),
            "batch {pf:?}"
        );
        fib.lookup_linear_batch(names, &mut out, pf);
        assert!(
            out.iter().zip(&want).all(|(o, w)| as_v(*o) == *w),
            "linear batch {pf:?}"
        );
        out.fill(None);
        let r = fib.lookup_batch_tlv(&tlvs, &mut out, pf, &mut scratch);
        assert_eq!(r.invalid, 0);
        assert_eq!(r.hits, want.iter().filter(|w| w.is_some()).count());
        assert!(
            out.iter().zip(&want).all(|(o, w)| as_v(*o) == *w),
            "tlv batch {pf:?}"
        );
    }
}

/// Names over a tiny alphabet, so rules prefix each other a lot.
fn dense(rng: &mut Xoshiro256PlusPlus, n: usize, k: usize) -> Vec<NameBuf> {
    (0..n)
        .map(|_| {
            let l = rng.gen_range(0..=k);
            NameBuf::from_components((0..l).map(|_| ["a", "b", "c"][rng.gen_range(0..3)])).unwrap()
        })
        .collect()
}

fn queries(rng: &mut Xoshiro256PlusPlus, rules: &[NameBuf], k: usize) -> Vec<NameBuf> {
    let mut q = dense(rng, 300, k + 3);
    for r in rules.iter().take(300) {
        q.push(r.clone());
        let mut x = r.clone();
        for _ in 0..rng.gen_range(1..4) {
            x.push(8, b"zz").unwrap();
        }
        q.push(x);
    }
    q
}

#[test]
fn bulk_builds_match_the_trie_in_any_order() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    for k in [1, 3, 7, 15, 31] {
        for strategy in [Strategy::VerifyEach, Strategy::VerifyAtEnd] {
            for shuffle in [false, true] {
                let mut rules = dense(&mut rng, 500, k);
                if shuffle {
                    rules.shuffle(&mut rng);
                } else {
                    rules.sort_by_key(|r| {
                        std::cmp::Reverse(nexthop_ndn::NameView::component_count(r))
                    });
                }
                let mut oracle = NameTrie::new();
                let mut b = FibBuilder::new(Config {
                    max_components: k,
                    strategy,
                    ..Config::default()
                })
                .unwrap();
                for (i, r) in rules.iter().enumerate() {
                    oracle.insert(r, hops(i as u32 % 7 + 1));
                    b.push(r, &hops(i as u32 % 7 + 1)).unwrap();
                }
                let (fib, st) = b.finish();
                assert_eq!(st.rules, oracle.len());
                let q = queries(&mut rng, &rules, k);
                check(&fib, &oracle, &q);
            }
        }
    }
}

#[test]
fn adversarial_bulk_sets() {
    // Chains of every length (each a prefix of the next), rules only at
    // marker levels, rules only off the search path, the default route,
    // overflow chains (bucket_fill 9, many keys at one level), deep names.
    let k = 15;
    let chain: Vec<String> = (0..k).map(|i| format!("c{i}")).collect();
    let mut sets: Vec<Vec<NameBuf>> = Vec::new();
    sets.push(
        (0..=k)
            .map(|l| NameBuf::from_components(chain[..l].iter()).unwrap())
            .collect(),
    );
    sets.push(
        [8usize, 12, 14]
            .iter()
            .map(|&l| NameBuf::from_components(chain[..l].iter()).unwrap())
            .collect(),
    );
    sets.push(
        [1usize, 3, 5, 7, 9, 11, 13, 15]
            .iter()
            .map(|&l| NameBuf::from_components(chain[..l].iter()).unwrap())
            .collect(),
    );
    sets.push(
        (0..3000)
            .map(|i| NameBuf::from_components(["x".to_string(), format!("{i}")]).unwrap())
            .collect(),
    );
    for set in &sets {
        for strategy in [Strategy::VerifyEach, Strategy::VerifyAtEnd] {
            for fill in [1, 6, 9] {
                for rev in [false, true] {
                    let mut rules = set.clone();
                    if rev {
                        rules.reverse();
                    }
                    let mut oracle = NameTrie::new();
                    for (i, r) in rules.iter().enumerate() {
                        oracle.insert(r, hops(i as u32 + 1));
                    }
                    let (fib, _) = Fib::build(
                        Config {
                            max_components: k,
                            strategy,
                            bucket_fill: fill,
                            ..Config::default()
                        },
                        rules
                            .iter()
                            .enumerate()
                            .map(|(i, r)| (r, hops(i as u32 + 1))),
                    )
                    .unwrap();
                    let mut q: Vec<NameBuf> = (0..=k + 2)
                        .map(|l| {
                            NameBuf::from_components(
                                (0..l).map(|i| chain.get(i).cloned().unwrap_or("t".into())),
                            )
                            .unwrap()
                        })
                        .collect();
                    q.extend(rules.iter().take(200).cloned());
                    check(&fib, &oracle, &q);
                }
            }
        }
    }
}

#[test]
fn invalid_tlv_in_a_batch_is_a_miss_not_a_panic() {
    let r = NameBuf::from_components(["a"]).unwrap();
    let (fib, _) = Fib::build(
        Config::default(),
        [(NameBuf::root(), hops(1)), (r.clone(), hops(2))],
    )
    .unwrap();
    let good = nexthop_ndn::NameView::tlv(&r).to_vec();
    let names: Vec<Vec<u8>> = vec![
        good.clone(),
        vec![8, 5, b'a'],
        vec![],
        vec![0xFF; 3],
        vec![8; 70_000],
        good,
    ];
    let mut out = vec![None; names.len()];
    let res = fib.lookup_batch_tlv(&names, &mut out, Prefetch::All, &mut BatchScratch::new());
    assert_eq!(res.invalid, 3);
    assert_eq!(res.hits, 3);
    assert_eq!(
        out.iter().map(|o| o.map(|m| m.len)).collect::<Vec<_>>(),
        [Some(1), None, Some(0), None, None, Some(1)]
    );
}

#[test]
fn worst_case_stream_builds_and_round_trips_through_the_file() {
    for k in [7, 15] {
        let ws = WorstCase::new(20_000, k, 3);
        let (fib, st) = Fib::build(
            Config {
                max_components: k,
                ..Config::default()
            },
            ws.rules_iter().map(|r| (r, hops(4))),
        )
        .unwrap();
        assert_eq!(st.rules, ws.rules());
        assert_eq!(st.entries, ws.bases());
        assert_eq!(st.entries_freed, 0);
        assert_eq!(st.markers, 0);
        let trace = ws.trace(2_000, 1);
        let bytes = persist::encode(&fib, st.rules as u64);
        let (back, rules) = persist::decode(&bytes).unwrap();
        assert_eq!(rules as usize, st.rules);
        for q in &trace {
            let mut tr = Trace::default();
            let m = fib.lookup_traced(q, &mut tr).unwrap();
            assert_eq!(m.len, k);
            assert_eq!(tr.probes, bound(k));
            assert_eq!(back.lookup(q), Some(m));
        }
    }
}
