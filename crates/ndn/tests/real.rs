//! The FIB against the trie on real-derived name sets (EasyList and
//! EasyPrivacy hosts, TLD-/site-/host-first). Needs the Debian packages
//! `webext-ublock-origin-firefox` and `publicsuffix`; fails naming them
//! when they are missing.

use nexthop_ndn::names::{extend_names, real_names, Scheme};
use nexthop_ndn::oracle::NameTrie;
use nexthop_ndn::{Config, FibControl, NameView, NextHop, Strategy, Trace};

#[test]
fn real_derived_sets_match_the_trie_in_all_three_schemes() {
    for scheme in [Scheme::TldFirst, Scheme::SiteFirst, Scheme::HostFirst] {
        let names = real_names(scheme).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            names.len() > 50_000,
            "{scheme:?}: only {} names",
            names.len()
        );
        let k = names.iter().map(|n| n.component_count()).max().unwrap();
        for strategy in [Strategy::VerifyEach, Strategy::VerifyAtEnd] {
            let cfg = Config {
                max_components: k,
                strategy,
                ..Config::default()
            };
            let mut ctl = FibControl::new(cfg).unwrap();
            let mut o = NameTrie::new();
            for (i, n) in names.iter().enumerate() {
                let h = [NextHop {
                    face: (i % 64) as u32,
                    cost: 0,
                }];
                ctl.insert(n, &h).unwrap();
                o.insert(n, h.to_vec());
            }
            // Delete every seventh rule: markers and inherited hops change.
            for n in names.iter().step_by(7) {
                ctl.remove(n).unwrap();
                o.remove(n);
            }
            let bound = usize::BITS - k.leading_zeros();
            let probes = extend_names(&names, 2, 3);
            for q in probes.iter().chain(&names) {
                let mut tr = Trace::default();
                let got = ctl
                    .fib()
                    .lookup_traced(q, &mut tr)
                    .map(|m| (m.len, ctl.fib().next_hops(m.nh).to_vec()));
                let want = o.lookup(q).map(|(l, h)| (l, h.to_vec()));
                assert_eq!(got, want, "{scheme:?} {strategy:?} {q:?}");
                assert!(tr.probes <= if tr.fallback { 2 * bound } else { bound });
            }
        }
    }
}

#[test]
fn word_names_from_wamerican_huge_match_the_trie() {
    let words = nexthop_ndn::names::load_words().unwrap_or_else(|e| panic!("{e}"));
    assert!(words.len() > 300_000, "only {} words", words.len());
    let rules = nexthop_ndn::names::word_names(&words, 50_000, 6, 4);
    assert_eq!(rules.len(), 50_000);
    let mut ctl = FibControl::new(Config {
        max_components: 6,
        ..Config::default()
    })
    .unwrap();
    let mut o = NameTrie::new();
    for (i, n) in rules.iter().enumerate() {
        let h = [NextHop {
            face: i as u32 % 9,
            cost: 0,
        }];
        ctl.insert(n, &h).unwrap();
        o.insert(n, h.to_vec());
    }
    let prefixes: Vec<_> = rules
        .iter()
        .map(|r| r.prefix(r.component_count() / 2))
        .collect();
    for q in extend_names(&rules, 1, 5).iter().chain(&prefixes) {
        let got = ctl
            .fib()
            .lookup(q)
            .map(|m| (m.len, ctl.fib().next_hops(m.nh).to_vec()));
        assert_eq!(got, o.lookup(q).map(|(l, h)| (l, h.to_vec())), "{q:?}");
    }
}
