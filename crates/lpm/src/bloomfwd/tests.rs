use hashbrown::HashMap;

use super::control::Fine2;
use super::*;

fn p4(a: u32, l: u8) -> Prefix<u32> {
    Prefix::new(a, l).unwrap()
}

#[test]
fn withdraw_restores_covering_route() {
    let mut t = BloomfwdControl::<u32>::build(
        Config::ipv4(),
        &[
            (p4(0x0A00_0000, 8), 1),
            (p4(0x0A00_0000, 22), 2),
            (p4(0x0A00_0000, 21), 3),
        ],
    )
    .unwrap();
    assert_eq!(t.lookup(0x0A00_0001), Some(2));
    assert_eq!(t.lookup(0x0A00_0401), Some(3));
    assert!(t.withdraw(p4(0x0A00_0000, 22)));
    assert_eq!(t.lookup(0x0A00_0001), Some(3));
    assert!(t.withdraw(p4(0x0A00_0000, 21)));
    assert_eq!(t.lookup(0x0A00_0001), Some(1));
    assert!(!t.withdraw(p4(0x0A00_0000, 21)));
    assert!(t.withdraw(p4(0x0A00_0000, 8)));
    assert_eq!(t.lookup(0x0A00_0001), None);
    assert_eq!(t.group_stats()[0].expanded, 0);
}

#[test]
fn shorter_announce_does_not_overwrite_captured_keys() {
    let mut t = BloomfwdControl::<u32>::build(Config::ipv4(), &[(p4(0xC000_0280, 25), 7)]).unwrap();
    t.announce(p4(0xC000_0200, 24), 5);
    t.announce(p4(0xC000_0000, 22), 4);
    assert_eq!(t.lookup(0xC000_0281), Some(7));
    assert_eq!(t.lookup(0xC000_0201), Some(5));
    assert_eq!(t.lookup(0xC000_0101), Some(4));
    t.announce(p4(0xC000_0200, 24), 6);
    assert_eq!(t.lookup(0xC000_0201), Some(6));
    assert_eq!(t.lookup(0xC000_0281), Some(7));
}

#[test]
fn hash_table_backward_shift_keeps_every_key_reachable() {
    let hash = |k: u32| k & 0xf; // Many collisions on purpose.
    let mut t = HashTable::<u32>::with_capacity(8);
    for k in 0..200u32 {
        t.insert(k, k + 1, hash(k), &hash);
    }
    for k in (0..200u32).step_by(3) {
        assert!(t.remove(k, hash(k), &hash));
    }
    for k in 0..200u32 {
        let want = (k % 3 != 0).then_some(k + 1);
        assert_eq!(t.get(k, hash(k)), want, "key {k}");
    }
    assert!(!t.remove(0, hash(0), &hash));
}

/// Random inserts, replacements and removals against a `HashMap`, with
/// a hash that sends every key to one of a few lines, so lines overflow
/// into long runs and removals move keys back across many lines.
fn hash_table_matches_map<K: GroupKey + std::hash::Hash>(key: impl Fn(u32) -> K) {
    use rand::{Rng, SeedableRng};
    let mut r = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
    for homes in [1u32, 3, 16] {
        let hash = |k: K| {
            let x = k.to_u128();
            ((x as u32 ^ (x >> 64) as u32 ^ (x >> 96) as u32).wrapping_mul(0x9E37_79B9) >> 7)
                % homes
        };
        let mut t = HashTable::<K>::with_capacity(4);
        let mut want = HashMap::new();
        for step in 0..4000 {
            let k = key(r.gen_range(0..300));
            if r.gen_bool(0.4) {
                assert_eq!(t.remove(k, hash(k), &hash), want.remove(&k).is_some());
            } else {
                let nh = r.gen_range(0..1000);
                t.insert(k, nh, hash(k), &hash);
                want.insert(k, nh);
            }
            assert_eq!(t.len, want.len());
            if step % 100 == 0 || step == 3999 {
                for x in 0..300 {
                    let k = key(x);
                    assert_eq!(t.get(k, hash(k)), want.get(&k).copied(), "step {step}");
                    assert_eq!(t.probe_lines(k, hash(k)).0, want.contains_key(&k));
                }
            }
        }
    }
}

#[test]
fn hash_table_lines_match_a_map_v4() {
    hash_table_matches_map(|x| x.wrapping_mul(2_654_435_761));
}

#[test]
fn hash_table_lines_match_a_map_v6() {
    hash_table_matches_map(|x| (x as u128) << 80 | 0x2001 << 112);
}

#[test]
fn line4_find_sees_every_slot_and_skips_empty_ones() {
    let mut l = Line4::EMPTY;
    assert_eq!(l.find(0), (NO_ROUTE, true));
    for j in 0..8 {
        l.set(j, 100 + j as u32, j as u32);
    }
    for j in 0..8 {
        assert_eq!(l.find(100 + j as u32), (j as u32, false), "slot {j}");
    }
    assert_eq!(l.find(99), (NO_ROUTE, false));
    // An emptied slot keeps its stale key, which must not match.
    l.set_hop(5, NO_ROUTE);
    assert_eq!(l.find(105), (NO_ROUTE, true));
    assert_eq!(l.find(107), (7, true));
}

#[test]
fn summary_follows_announce_and_withdraw() {
    use rand::{Rng, SeedableRng};
    let mut r = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(5);
    let mut t = BloomfwdControl::<u32>::build(Config::ipv4(), &[]).unwrap();
    let mut seen = [0usize; 3];
    let mut check = |t: &BloomfwdControl<u32>| {
        for (slot, d) in t.fwd.direct.iter().enumerate() {
            let st = t.fwd.summary_of(slot);
            assert_eq!(st, summary_state(d.groups), "slot {slot}");
            seen[st as usize] += 1;
        }
    };
    let mut live = Vec::new();
    for step in 0..3000 {
        if r.gen_bool(0.4) && !live.is_empty() {
            let p = live.swap_remove(r.gen_range(0..live.len()));
            t.withdraw(p);
        } else {
            // Crowd 10/8, so slots go from none to /24 to both and back.
            let a = 0x0A00_0000 | r.gen::<u32>() & 0xFF_FFFF;
            let len = if r.gen_bool(0.1) { 25..=32 } else { 17..=24 };
            let p = p4(a, r.gen_range(len));
            t.announce(p, r.gen_range(0..100));
            live.push(p);
        }
        if step % 500 == 0 {
            check(&t);
        }
    }
    check(&t);
    assert!(
        seen[SUM_FIRST as usize] > 100 && seen[SUM_MORE as usize] > 100,
        "{seen:?}"
    );
}

#[test]
fn direct_masks_follow_announce_and_withdraw() {
    let mut t = BloomfwdControl::<u32>::build(
        Config::ipv4(),
        &[(p4(0x0A00_0000, 8), 1), (p4(0x0A00_1000, 24), 2)],
    )
    .unwrap();
    let slot = |a: u32| t.table().slot(a);
    let (s0, s1) = (slot(0x0A00_1001), slot(0x0A10_0001));
    assert_eq!(t.fwd.direct[s0].groups, 0b01);
    assert_eq!(t.fwd.direct[s1].groups, 0);
    t.announce(p4(0x0A00_1080, 25), 3);
    t.announce(p4(0x0A00_1100, 24), 4);
    assert_eq!(t.fwd.direct[s0].groups, 0b11);
    assert_eq!(t.lookup(0x0A00_1081), Some(3));
    assert_eq!(t.lookup(0x0A00_1101), Some(4));
    assert!(t.withdraw(p4(0x0A00_1080, 25)));
    assert_eq!(t.fwd.direct[s0].groups, 0b01);
    assert!(t.withdraw(p4(0x0A00_1000, 24)));
    assert_eq!(
        t.fwd.direct[s0].groups, 0b01,
        "the other /24 is still there"
    );
    assert!(t.withdraw(p4(0x0A00_1100, 24)));
    assert_eq!(t.fwd.direct[s0].groups, 0);
    assert!(t.slot_groups.is_empty());
    assert_eq!(t.lookup(0x0A00_1101), Some(1));
}

fn p6(a: u128, l: u8) -> Prefix<u128> {
    Prefix::new(a, l).unwrap()
}

/// An IPv6 address from its first 64 bits.
fn a6(hi: u64) -> u128 {
    (hi as u128) << 64
}

#[test]
fn dense_slot_sub_masks_follow_announce_and_withdraw() {
    // 2001::/16 gets keys in groups 32, 48 and 64 (three groups: the
    // slot is refined); 2001:0d00::/24 and 2001:0e00::/24 are its
    // sub-slots.
    let a = a6;
    let routes = [
        (p6(a(0x2001_0db8_0000_0000), 32), 1),
        (p6(a(0x2001_0db8_0001_0000), 48), 2),
        (p6(a(0x2001_0db8_0001_0002), 64), 3),
        (p6(a(0x2001_0e00_0000_0000), 32), 4),
    ];
    let mut t = BloomfwdControl::<u128>::build(Config::ipv6(vec![32, 48, 64]), &routes).unwrap();
    assert_eq!(t.table().refined_slots(), 1);
    let s = t.table().slot(a(0x2001_0db8_0000_0000));
    assert_ne!(t.fwd.direct[s].groups & FINE, 0);
    let cost = |t: &BloomfwdControl<u128>, hi: u64| t.table().probe_cost(a(hi));
    // Under 2001:0e00::/24 only the /32 group is probed.
    assert_eq!(cost(&t, 0x2001_0e00_0000_0001).groups, 1);
    assert_eq!(cost(&t, 0x2001_0db8_0005_0000).groups, 3);
    // No key at all under 2001:0f00::/24: the direct slot answers.
    assert_eq!(cost(&t, 0x2001_0f00_0000_0000).groups, 0);
    assert_eq!(t.lookup(a(0x2001_0f00_0000_0000)), None);
    t.announce(p6(a(0x2001_0f00_0000_0000), 64), 5);
    assert_eq!(cost(&t, 0x2001_0f00_0000_0000).groups, 1);
    assert_eq!(t.lookup(a(0x2001_0f00_0000_0000)), Some(5));
    assert!(t.withdraw(p6(a(0x2001_0f00_0000_0000), 64)));
    assert_eq!(cost(&t, 0x2001_0f00_0000_0000).groups, 0);
    assert!(t.withdraw(p6(a(0x2001_0db8_0001_0002), 64)));
    assert!(t.withdraw(p6(a(0x2001_0db8_0001_0000), 48)));
    assert_eq!(cost(&t, 0x2001_0db8_0001_0002).groups, 1);
    assert_eq!(t.lookup(a(0x2001_0db8_0001_0002)), Some(1));
    assert!(t.withdraw(p6(a(0x2001_0db8_0000_0000), 32)));
    assert!(t.withdraw(p6(a(0x2001_0e00_0000_0000), 32)));
    assert!(t.fine_groups.is_empty());
    // A refined sub-slot stays refined (the layout is the build's).
    assert!(t.fwd.fine.iter().all(|&m| m == 0 || m & !FINE == 0));
    assert!(t.fwd.fine2.iter().all(|&m| m == 0));
    assert!(t.fine2_groups.is_empty());
    assert_eq!(t.lookup(a(0x2001_0db8_0001_0002)), None);
}

/// The sub-sub-masks recomputed from the keys of every group (on a
/// zeroed copy with the same layout) and their counts.
fn fine2_from_keys(t: &BloomfwdControl<u128>) -> (Vec<u32>, HashMap<u64, u32>) {
    let mut want = vec![0u32; t.fwd.fine2.len()];
    let mut counts = HashMap::new();
    let geo = Fine2::of(&t.fwd);
    for (gi, c) in t.ctl.iter().enumerate() {
        for &key in c.exp.keys() {
            let k = (key, t.fwd.groups[gi].level, gi);
            geo.touch(&t.fwd.direct, &t.fwd.fine, &mut want, &mut counts, k, true);
        }
    }
    (want, counts)
}

#[test]
fn dense_sub_slot_sub_sub_masks_follow_announce_and_withdraw() {
    // Under 2001:0d00::/24 keys in groups 24, 32 and 48: its slot and
    // its sub-slot are refined, and the sub-sub-masks split it per /32.
    let a = a6;
    let routes = [
        (p6(a(0x2001_0d00_0000_0000), 24), 1),
        (p6(a(0x2001_0db8_0000_0000), 32), 2),
        (p6(a(0x2001_0db8_0001_0000), 48), 3),
        (p6(a(0x2001_0e00_0000_0000), 32), 4),
        (p6(a(0x2001_0f00_0000_0000), 32), 5),
    ];
    let cfg = Config::ipv6(vec![24, 28, 32, 48]);
    let mut t = BloomfwdControl::<u128>::build(cfg, &routes).unwrap();
    assert_eq!(t.table().refined_slots(), 1);
    assert_eq!(t.table().refined_sub_slots(), 1);
    // The groups a lookup of `hi` may probe (bit j: group j).
    let mask = |t: &BloomfwdControl<u128>, hi: u64| {
        let f = t.table();
        f.mask_of(a(hi), f.direct[f.slot(a(hi))].groups)
    };
    let (g24, g28, g32, g48) = (1, 2, 4, 8);
    assert_eq!(mask(&t, 0x2001_0db8_0005_0000), g24 | g32 | g48);
    assert_eq!(t.table().probe_cost(a(0x2001_0db8_0005_0000)).fine, 2);
    // The /24 key covers every /32 under it.
    assert_eq!(mask(&t, 0x2001_0d01_0000_0000), g24);
    assert_eq!(t.lookup(a(0x2001_0d01_0000_0000)), Some(1));
    // A /28 covers 16 sub-sub-slots; a /48 one.
    t.announce(p6(a(0x2001_0d20_0000_0000), 28), 6);
    assert_eq!(mask(&t, 0x2001_0d2f_0000_0000), g24 | g28);
    assert_eq!(mask(&t, 0x2001_0d30_0000_0000), g24);
    assert_eq!(t.lookup(a(0x2001_0d2f_0000_0000)), Some(6));
    t.announce(p6(a(0x2001_0d31_0002_0000), 48), 7);
    assert_eq!(mask(&t, 0x2001_0d31_0000_0000), g24 | g48);
    assert_eq!(t.lookup(a(0x2001_0d31_0002_0000)), Some(7));
    assert_eq!(
        fine2_from_keys(&t),
        (t.fwd.fine2.to_vec(), t.fine2_groups.clone())
    );
    assert!(t.withdraw(p6(a(0x2001_0d20_0000_0000), 28)));
    assert_eq!(mask(&t, 0x2001_0d2f_0000_0000), g24);
    assert!(t.withdraw(p6(a(0x2001_0d31_0002_0000), 48)));
    assert!(t.withdraw(p6(a(0x2001_0d00_0000_0000), 24)));
    assert_eq!(mask(&t, 0x2001_0d01_0000_0000), 0);
    assert_eq!(mask(&t, 0x2001_0db8_0000_0000), g32 | g48);
    assert_eq!(t.lookup(a(0x2001_0d01_0000_0000)), None);
    assert_eq!(
        fine2_from_keys(&t),
        (t.fwd.fine2.to_vec(), t.fine2_groups.clone())
    );
    for (p, _) in routes.iter().skip(1) {
        assert!(t.withdraw(*p));
    }
    assert!(t.fwd.fine2.iter().all(|&m| m == 0));
    assert!(t.fine2_groups.is_empty());
}

#[test]
fn probe_cost_counts_the_lines_a_lookup_reads() {
    let t = BloomfwdControl::<u32>::build(
        Config::ipv4(),
        &[(p4(0x0A00_0000, 8), 1), (p4(0x0A00_1000, 24), 2)],
    )
    .unwrap();
    let mut f = t.table().clone();
    f.set_probe(Probe::Masks);
    // No group key under the slot: the summary and the direct slot.
    let c = f.probe_cost(0x0B00_0000);
    assert_eq!((c.summary, c.direct, c.groups), (1, 1, 0));
    assert_eq!(c.lines(), 2);
    // Inside the /24, the only group under the slot: the summary sends
    // the batch to the /24 line alone.
    let c = f.probe_cost(0x0A00_1001);
    assert_eq!(
        (
            c.summary,
            c.direct,
            c.fine,
            c.groups,
            c.filters,
            c.table_lines
        ),
        (1, 0, 0, 1, 0, 1)
    );
    // Under the same slot but outside the /24: that line misses, then
    // the direct slot.
    let c = f.probe_cost(0x0A00_1201);
    assert_eq!((c.summary, c.direct, c.table_lines), (1, 1, 1));
    // Without the summary (the table hash is not the filter hash): the
    // direct slot, then the /24 group's filter and line.
    let mut cfg = Config::ipv4();
    cfg.table_hash = HashKind::Murmur3;
    let u = BloomfwdControl::<u32>::build(cfg, &[(p4(0x0A00_1000, 24), 2)]).unwrap();
    let c = u.table().probe_cost(0x0A00_1001);
    assert_eq!(
        (c.summary, c.direct, c.groups, c.filters, c.table_lines),
        (0, 1, 1, 1, 1)
    );
    // Filters first: both filters and the bucket, no direct slot.
    f.set_probe(Probe::FiltersFirst);
    let c = f.probe_cost(0x0A00_1001);
    assert_eq!((c.direct, c.filters), (0, 2));
    assert!(c.table_lines >= 1);
    assert_eq!(f.probe_cost(0x0B00_0000).direct, 1);
}

/// IPv6 batches skip the filters of small tables (`skips_filter`), and
/// `probe_cost` says so.
#[test]
fn probe_cost_follows_the_ipv6_filter_rule() {
    let base = 0x2001_0db8u128 << 96;
    let routes = [(p6(base, 32), 1), (p6(base | 7u128 << 80, 48), 2)];
    let t = BloomfwdControl::<u128>::build(Config::ipv6(vec![32, 48]), &routes).unwrap();
    let mut f = t.table().clone();
    // Inside the /48: its group first, a hit (the /32 group is also
    // named, so the /48 group is not the last one).
    let a = base | 7u128 << 80 | 1;
    assert_eq!(f.lookup(a), Some(2));
    let c = f.probe_cost(a);
    assert_eq!((c.groups, c.filters, c.table_lines), (1, 0, 1));
    f.set_round_filter_min_bytes(0);
    let c = f.probe_cost(a);
    assert_eq!((c.groups, c.filters, c.table_lines), (1, 1, 1));
}

#[test]
fn vector_filter_test_matches_the_scalar_one() {
    if !std::arch::is_x86_feature_detected!("avx512f") {
        eprintln!("no avx512f on this CPU: the vector test is not reachable here");
        return;
    }
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for k in 1..=8u8 {
        // Each bit set with probability 2^(-1/k), so a test passes
        // about half the time and both answers come up often.
        let mut f = BloomBits::new(4 * BLOCK_BITS, k);
        let q = (0.5f64.powf(1.0 / k as f64) * u32::MAX as f64) as u32;
        for b in 0..f.m {
            rng = crate::hash::mix64(rng);
            f.set(b, (rng as u32) < q);
        }
        let (mut yes, mut no) = (0, 0);
        for _ in 0..20_000 {
            rng = crate::hash::mix64(rng);
            let (h1, h2) = (rng as u32, (rng >> 32) as u32 | 1);
            let want = f.contains(h1, h2);
            // SAFETY: (1) avx512f was detected above.
            let got = unsafe { f.contains_avx512(h1, h2) };
            assert_eq!(got, want, "k {k}, {h1:#x} {h2:#x}");
            if want {
                yes += 1;
            } else {
                no += 1;
            }
        }
        assert!(yes > 100 && no > 100, "k {k}: {yes} in, {no} out");
    }
}

#[test]
fn blocked_filter_keeps_every_key_in_one_block() {
    let f = BloomBits::sized(5_000, 0.01);
    for x in 0..2_000u32 {
        let (h1, h2) = pair32(HashKind::Murmur3, x);
        let b0 = f.index(h1, h2, 0) / BLOCK_BITS;
        let bits: Vec<u32> = (0..f.k).map(|i| f.index(h1, h2, i)).collect();
        assert!(bits.iter().all(|b| b / BLOCK_BITS == b0), "key {x}");
        let mut d = bits.clone();
        d.sort_unstable();
        d.dedup();
        assert_eq!(d.len(), bits.len(), "key {x}: positions must be distinct");
    }
}

#[test]
fn invalid_configs_are_rejected() {
    let mut c = Config::ipv4();
    c.levels = vec![32, 24];
    assert!(matches!(c.validate(32), Err(ConfigError::BadLevels { .. })));
    c.levels = vec![20, 32];
    assert!(c.validate(32).is_err());
    c = Config::ipv4();
    c.fpr = 1.0;
    assert_eq!(c.validate(32), Err(ConfigError::BadFpr(1.0)));
    c = Config::ipv4();
    c.direct_bits = 25;
    assert!(c.validate(32).is_err());
}

#[test]
fn filter_sizing_follows_the_paper_formula() {
    let f = BloomBits::sized(10_000, 0.01);
    // m = n lg(100) / ln 2 = 95851 bits, rounded up to whole 512-bit
    // blocks (188 blocks), k = round(6.64) = 7.
    assert_eq!(f.bits(), 188 * 512);
    assert_eq!(f.hashes(), 7);
    let f = BloomBits::sized(10_000, 0.3);
    assert_eq!(f.hashes(), 2);
}
