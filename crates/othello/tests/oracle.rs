//! Differential tests of the Othello control and query structures against a
//! HashMap oracle, with deltas applied to a live query structure.

use std::collections::HashMap;

use nexthop_othello::{Change, Config, Delta, Othello, Query, Sizing};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Apply a change to a query structure the way a data plane would.
fn follow(q: &mut Query, o: &Othello<u64>, change: &Change, column: usize) {
    match o.delta(change, column) {
        Delta::Snapshot(bytes) => *q = Query::from_snapshot(&bytes).expect("own snapshot loads"),
        d => {
            // Round-trip through the wire form too.
            let d = Delta::decode(&d.encode()).expect("own delta decodes");
            q.apply(&d).expect("own delta applies");
        }
    }
}

fn check_all(q: &Query, o: &Othello<u64>, oracle: &HashMap<u64, u64>) {
    for (k, v) in oracle {
        assert_eq!(o.get(k), Some(*v), "control get {k}");
        assert_eq!(q.lookup(k), Some(*v), "query lookup {k}");
    }
    // The batch too (its paths with and without stashed keys in a group).
    let keys: Vec<u64> = oracle.keys().copied().collect();
    let mut out = vec![0; keys.len()];
    assert_eq!(q.lookup_batch(&keys, &mut out), keys.len());
    for (k, v) in keys.iter().zip(&out) {
        assert_eq!(Some(*v), oracle.get(k).copied(), "query batch lookup {k}");
    }
    assert_eq!(o.len(), oracle.len());
    o.check_invariants().expect("invariants");
}

/// Run `ops` random operations; returns (rebuilds, stash peak).
fn random_run(cfg: Config, capacity: usize, ops: usize, key_space: u64, seed: u64) -> (u64, usize) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut o: Othello<u64> = Othello::with_capacity(cfg, capacity).unwrap();
    let mut q = o.export(0);
    let mut oracle = HashMap::new();
    let vmask = cfg.value_mask();
    let mut peak = 0;
    for step in 0..ops {
        let k = rng.gen_range(0..key_space);
        let v = rng.gen::<u64>() & vmask;
        let change = match rng.gen_range(0..10) {
            0..=4 => match o.insert(k, v) {
                Ok(c) => {
                    assert!(
                        oracle.insert(k, v).is_none(),
                        "insert of present key accepted"
                    );
                    c
                }
                Err(_) => {
                    assert!(oracle.contains_key(&k), "insert of new key refused");
                    continue;
                }
            },
            5..=7 => match o.remove(&k) {
                Ok(c) => {
                    assert!(oracle.remove(&k).is_some());
                    c
                }
                Err(_) => {
                    assert!(!oracle.contains_key(&k));
                    continue;
                }
            },
            _ => match o.alter(&k, v) {
                Ok(c) => {
                    assert!(oracle.insert(k, v).is_some());
                    c
                }
                Err(_) => {
                    assert!(!oracle.contains_key(&k));
                    continue;
                }
            },
        };
        follow(&mut q, &o, &change, 0);
        peak = peak.max(o.stats().stash_len);
        if step % 997 == 0 {
            check_all(&q, &o, &oracle);
            assert_eq!(
                q.to_snapshot(),
                o.snapshot(0),
                "delta-updated != fresh export at step {step}"
            );
        }
    }
    check_all(&q, &o, &oracle);
    assert_eq!(q.to_snapshot(), o.snapshot(0));
    let c = o.stats().counters;
    (c.grow_rebuilds + c.reseed_rebuilds, peak)
}

#[test]
fn random_operations_match_hashmap_pow2() {
    random_run(Config::default(), 0, 60_000, 20_000, 1);
}

#[test]
fn random_operations_match_hashmap_tight_with_check_bits() {
    let cfg = Config {
        sizing: Sizing::Tight,
        value_bits: 5,
        check_bits: 9,
        ..Config::default()
    };
    random_run(cfg, 5_000, 60_000, 8_000, 2);
}

#[test]
fn growth_from_empty_rebuilds_and_stays_exact() {
    let (rebuilds, _) = random_run(Config::with_value_bits(17), 0, 30_000, 1 << 40, 3);
    assert!(
        rebuilds >= 5,
        "growth from 16 to ~15k keys must rebuild, got {rebuilds}"
    );
}

#[test]
fn tiny_stash_forces_reseeds_and_stays_exact() {
    // Tight arrays nearly full with a stash of 0: cycles force reseeding.
    let cfg = Config {
        sizing: Sizing::Tight,
        stash_capacity: 0,
        ..Config::default()
    };
    let mut o: Othello<u64> = Othello::with_capacity(cfg, 2000).unwrap();
    let mut q = o.export(0);
    let mut oracle = HashMap::new();
    for k in 0..2000u64 {
        let c = o.insert(k, k & 0xff).unwrap();
        follow(&mut q, &o, &c, 0);
        oracle.insert(k, k & 0xff);
    }
    check_all(&q, &o, &oracle);
    assert!(
        o.stats().counters.reseed_rebuilds > 0,
        "expected a reseed at full tight load"
    );
}

#[test]
fn stash_absorbs_cycles_without_rebuild() {
    let cfg = Config {
        sizing: Sizing::Tight,
        stash_capacity: 64,
        ..Config::default()
    };
    let mut o: Othello<u64> = Othello::with_capacity(cfg, 50_000).unwrap();
    let gen = o.meta().generation;
    let mut q = o.export(0);
    let mut oracle = HashMap::new();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    while oracle.len() < 50_000 {
        let k: u64 = rng.gen();
        if oracle.contains_key(&k) {
            continue;
        }
        let c = o.insert(k, k & 0xff).unwrap();
        assert!(!c.is_rebuild());
        follow(&mut q, &o, &c, 0);
        oracle.insert(k, k & 0xff);
    }
    assert_eq!(o.meta().generation, gen);
    assert!(o.stats().counters.stashed > 0 || o.stats().stash_len == 0);
    check_all(&q, &o, &oracle);
    // Deleting everything drains the stash.
    let keys: Vec<u64> = oracle.keys().copied().collect();
    for k in keys {
        let c = o.remove(&k).unwrap();
        follow(&mut q, &o, &c, 0);
    }
    assert_eq!(o.stats().stash_len, 0);
    assert_eq!(q.stash_len(), 0);
}

/// The prefetched batch membership check answers as `contains` key by key:
/// present keys (also stashed ones, at a tight full load with a big stash),
/// absent keys, removed keys, keys repeated in the batch, and empty and
/// short batches.
#[test]
fn contains_many_equals_contains() {
    let cfg = Config {
        sizing: Sizing::Tight,
        stash_capacity: 64,
        ..Config::default()
    };
    let mut o: Othello<u64> = Othello::with_capacity(cfg, 20_000).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(17);
    let keys: Vec<u64> = (0..20_000).map(|_| rng.gen()).collect();
    for &k in &keys {
        if !o.contains(&k) {
            o.insert(k, k & 0xff).unwrap();
        }
    }
    for &k in keys.iter().step_by(3) {
        o.remove(&k).unwrap();
    }
    let mut probe: Vec<u64> = keys.clone();
    probe.extend((0..20_000).map(|_| rng.gen::<u64>()));
    probe.extend_from_slice(&keys[..100]);
    let got = o.contains_many(probe.iter());
    assert_eq!(got.len(), probe.len());
    for (k, g) in probe.iter().zip(&got) {
        assert_eq!(*g, o.contains(k), "key {k:#x}");
    }
    assert!(got.iter().any(|&g| g) && got.iter().any(|&g| !g));
    assert!(
        o.stats().stash_len > 0,
        "the test wants stashed keys among the present ones"
    );
    assert!(o.contains_many(std::iter::empty::<&u64>()).is_empty());
    assert_eq!(
        o.contains_many([&keys[1], &keys[0]]),
        vec![o.contains(&keys[1]), false]
    );
}

#[test]
fn bulk_build_equals_lookups_and_rejects_duplicates() {
    let pairs: Vec<(u64, u64)> = (0..100_000u64).map(|k| (k * 7919, k % 200)).collect();
    let o = Othello::build(Config::default(), pairs.clone()).unwrap();
    let q = o.export(0);
    for (k, v) in &pairs {
        assert_eq!(q.lookup(k), Some(*v));
    }
    let st = o.stats();
    assert_eq!(st.counters.grow_rebuilds + st.counters.reseed_rebuilds, 0);
    // An iterator of unknown length gets the same exact sizing, without
    // growing by rebuilds on the way.
    let filtered =
        Othello::build(Config::default(), pairs.iter().copied().filter(|_| true)).unwrap();
    let fs = filtered.stats();
    assert_eq!(
        (fs.meta.ma, fs.meta.mb, fs.capacity),
        (st.meta.ma, st.meta.mb, st.capacity)
    );
    assert_eq!(fs.counters.grow_rebuilds + fs.counters.reseed_rebuilds, 0);
    let fq = filtered.export(0);
    for (k, v) in &pairs {
        assert_eq!(fq.lookup(k), Some(*v));
    }
    let mut dup = pairs.clone();
    dup.push((7919 * 5, 1));
    match Othello::build(Config::default(), dup) {
        Err(nexthop_othello::UpdateError::DuplicateKey(k)) => assert_eq!(k, "39595"),
        other => panic!("expected duplicate error, got {other:?}"),
    }
    // Sized for more keys than it is built from: inserts up to that many
    // cause no grow rebuild.
    let mut big = Othello::build_with_capacity(Config::default(), 150_000, pairs.clone()).unwrap();
    assert!(big.stats().capacity >= 150_000);
    for k in 0..50_000u64 {
        big.insert(k * 7919 + 1, k % 200).unwrap();
    }
    assert_eq!(big.stats().counters.grow_rebuilds, 0);
    assert_eq!(big.len(), 150_000);
    for (k, v) in &pairs {
        assert_eq!(big.get(k), Some(*v));
    }
    // A value wider than l is refused, naming it.
    let wide = Othello::build(Config::default(), [(1u64, 1), (2, 300)]);
    assert!(
        matches!(
            wide,
            Err(nexthop_othello::UpdateError::ValueTooWide { value: 300, .. })
        ),
        "{wide:?}"
    );
}

#[test]
fn batch_lookup_equals_single_lookup() {
    let cfg = Config {
        value_bits: 12,
        check_bits: 8,
        ..Config::default()
    };
    let pairs: Vec<(u64, u64)> = (0..10_000u64).map(|k| (k, (k * 31) & 0xfff)).collect();
    let o = Othello::build(cfg, pairs).unwrap();
    let q = o.export(0);
    let keys: Vec<u64> = (0..20_000u64).collect();
    let mut out = vec![0; keys.len()];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("snap");
    std::fs::write(&path, o.snapshot(0)).unwrap();
    let o2 = nexthop_othello::MappedQuery::open(&path).unwrap();
    let hits = q.lookup_batch(&keys, &mut out);
    let mut single_hits = 0;
    for (k, &o) in keys.iter().zip(&out) {
        let s = q.lookup(k);
        assert_eq!(s.unwrap_or(nexthop_othello::MISS), o);
        assert_eq!(o2.view().lookup(k), s);
        single_hits += s.is_some() as usize;
    }
    assert_eq!(hits, single_hits);
    let mut vout = vec![0; keys.len()];
    assert_eq!(o2.view().lookup_batch(&keys, &mut vout), hits);
    assert_eq!(vout, out, "zero-copy batch differs from owned batch");
    // Batches of every length around the group size (one group, a partial
    // last group, two groups in flight), from offsets that are not group
    // aligned.
    let g = nexthop_othello::BATCH_GROUP;
    for len in [
        0,
        1,
        g - 1,
        g,
        g + 1,
        2 * g - 1,
        2 * g,
        2 * g + 1,
        3 * g + 5,
        1000,
    ] {
        for start in [0, 3, 9_990] {
            let ks = &keys[start..start + len];
            let mut o1 = vec![7; len];
            let mut o3 = vec![7; len];
            let h1 = q.lookup_batch(ks, &mut o1);
            let h3 = o2.view().lookup_batch(ks, &mut o3);
            assert_eq!(o1, out[start..start + len], "len {len} start {start}");
            assert_eq!(o3, o1, "view, len {len} start {start}");
            let h = o1.iter().filter(|&&v| v != nexthop_othello::MISS).count();
            assert_eq!((h1, h3), (h, h));
        }
    }
}

#[test]
fn alien_keys_miss_at_about_two_to_minus_r() {
    for r in [4u8, 8] {
        let cfg = Config {
            value_bits: 8,
            check_bits: r,
            ..Config::default()
        };
        let n = 50_000u64;
        let o = Othello::build(cfg, (0..n).map(|k| (k, k & 0xff))).unwrap();
        let q = o.export(0);
        let trials = 400_000u64;
        let fp = (n..n + trials).filter(|k| q.lookup(k).is_some()).count() as f64 / trials as f64;
        let expect = 1.0 / (1u64 << r) as f64;
        assert!(
            fp > expect * 0.7 && fp < expect * 1.3,
            "r={r}: fpr {fp} vs {expect}"
        );
        for k in 0..n {
            assert_eq!(q.lookup(&k), Some(k & 0xff));
        }
    }
}

#[test]
fn shared_graph_serves_several_columns() {
    let cfg = Config {
        columns: 3,
        value_bits: 4,
        ..Config::default()
    };
    let rows = (0..5000u64).map(|k| (k, vec![k & 0xf, (k >> 4) & 0xf, (k >> 8) & 0xf]));
    let mut o = Othello::build_columns(cfg, rows).unwrap();
    let mut qs: Vec<Query> = (0..3).map(|c| o.export(c)).collect();
    assert!(qs.iter().all(|q| q.meta().seed == qs[0].meta().seed));
    for k in 5000..6000u64 {
        let c = o.insert_columns(k, &[1, 2, 3]).unwrap();
        for (col, q) in qs.iter_mut().enumerate() {
            match o.delta(&c, col) {
                Delta::Snapshot(b) => *q = Query::from_snapshot(&b).unwrap(),
                d => q.apply(&d).unwrap(),
            }
        }
    }
    let mut want: HashMap<u64, Vec<u64>> = (0..6000u64)
        .map(|k| (k, o.get_columns_for_test(k)))
        .collect();
    // Alters of one column and of all three, each followed through deltas.
    for k in (0..6000u64).step_by(3) {
        let col = (k % 3) as usize;
        let v = (k * 7 + 3) & 0xf;
        let c = o.alter_column(&k, col, v).unwrap();
        want.get_mut(&k).unwrap()[col] = v;
        for (col, q) in qs.iter_mut().enumerate() {
            q.apply(&o.delta(&c, col)).unwrap();
        }
        let vs = [k & 0xf, 0xf - (k & 0xf), 5];
        let c = o.alter_columns(&(k + 1), &vs).unwrap();
        *want.get_mut(&(k + 1)).unwrap() = vs.to_vec();
        for (col, q) in qs.iter_mut().enumerate() {
            q.apply(&o.delta(&c, col)).unwrap();
        }
    }
    o.check_invariants().unwrap();
    for k in 0..6000u64 {
        assert_eq!(o.get_columns_for_test(k), want[&k], "key {k}");
        for (c, q) in qs.iter().enumerate() {
            assert_eq!(q.lookup(&k), Some(want[&k][c]), "key {k} column {c}");
        }
    }
    for (c, q) in qs.iter().enumerate() {
        assert_eq!(q.to_snapshot(), o.snapshot(c));
    }
}

#[test]
fn build_columns_rejects_duplicates_naming_them() {
    let cfg = Config {
        columns: 2,
        value_bits: 4,
        ..Config::default()
    };
    let rows = |dup: Option<u64>| {
        (0..20_000u64)
            .chain(dup)
            .map(|k| (k * 7919, vec![k & 0xf, (k >> 4) & 0xf]))
    };
    let o = Othello::build_columns(cfg, rows(None)).unwrap();
    for k in 0..20_000u64 {
        assert_eq!(o.get_column(&(k * 7919), 1), Some((k >> 4) & 0xf));
    }
    for d in [0, 12_345, 19_999] {
        match Othello::build_columns(cfg, rows(Some(d))) {
            Err(nexthop_othello::UpdateError::DuplicateKey(k)) => {
                assert_eq!(k, format!("{}", d * 7919))
            }
            other => panic!("expected a duplicate error, got {other:?}"),
        }
    }
}

trait ColumnsForTest {
    fn get_columns_for_test(&self, k: u64) -> Vec<u64>;
}
impl ColumnsForTest for Othello<u64> {
    fn get_columns_for_test(&self, k: u64) -> Vec<u64> {
        (0..self.config().columns)
            .map(|c| self.get_column(&k, c).unwrap())
            .collect()
    }
}

#[test]
fn every_value_width_round_trips() {
    for l in [1u8, 3, 7, 8, 9, 16, 17, 31, 32, 33, 63, 64] {
        let cfg = Config::with_value_bits(l);
        let m = cfg.value_mask();
        let pairs: Vec<(u64, u64)> = (0..3000u64)
            .map(|k| (k, k.wrapping_mul(0x9E37_79B9_7F4A_7C15) & m))
            .collect();
        let mut o = Othello::build(cfg, pairs.clone()).unwrap();
        let mut q = o.export(0);
        for (k, v) in &pairs {
            assert_eq!(q.lookup(k), Some(*v), "l={l}");
        }
        let c = o.alter(&5, m).unwrap();
        follow(&mut q, &o, &c, 0);
        assert_eq!(q.lookup(&5u64), Some(m));
        let c = o.insert(1 << 40, m).unwrap();
        follow(&mut q, &o, &c, 0);
        assert_eq!(q.lookup(&(1u64 << 40)), Some(m));
        if l < 64 {
            assert!(
                o.insert(1 << 41, m + 1).is_err(),
                "l={l}: too-wide value accepted"
            );
        }
    }
}

#[test]
fn values_wider_than_l_are_refused_without_change() {
    let mut o: Othello<u64> = Othello::new(Config::with_value_bits(4)).unwrap();
    o.insert(1, 3).unwrap();
    assert!(o.insert(2, 16).is_err());
    assert!(o.alter(&1, 99).is_err());
    assert_eq!(o.get(&1), Some(3));
    assert_eq!(o.len(), 1);
}

#[test]
fn byte_string_and_array_keys_work() {
    let keys: Vec<Vec<u8>> = (0..2000)
        .map(|i| format!("/name/{i}/x").into_bytes())
        .collect();
    let o = Othello::build(
        Config::default(),
        keys.iter().cloned().zip(0..).map(|(k, i)| (k, i % 256)),
    )
    .unwrap();
    let q = o.export(0);
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(q.lookup(k.as_slice()), Some(i as u64 % 256));
    }
    let macs: Vec<[u8; 6]> = (0..2000u32)
        .map(|i| {
            let b = i.to_be_bytes();
            [2, 0, b[0], b[1], b[2], b[3]]
        })
        .collect();
    let o = Othello::build(Config::default(), macs.iter().map(|m| (*m, m[5] as u64))).unwrap();
    let q = o.export(0);
    for m in &macs {
        assert_eq!(q.lookup(m), Some(m[5] as u64));
    }
}

#[test]
fn inserts_write_few_slots_on_average() {
    let cfg = Config {
        sizing: Sizing::Tight,
        ..Config::default()
    };
    let n = 100_000;
    let mut o: Othello<u64> = Othello::with_capacity(cfg, n).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
    for _ in 0..n {
        let _ = o.insert(rng.gen(), rng.gen::<u64>() & 0xff);
    }
    let per = o.stats().counters.slot_writes as f64 / n as f64;
    assert!(per <= 1.5, "{per} slot writes per insert");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn any_operation_sequence_matches_oracle(seed in any::<u64>(), l in 1u8..=40, r in 0u8..=12, tight in any::<bool>()) {
        let cfg = Config {
            value_bits: l,
            check_bits: r,
            sizing: if tight { Sizing::Tight } else { Sizing::PowerOfTwo },
            stash_capacity: (seed % 5) as usize,
            ..Config::default()
        };
        random_run(cfg, (seed % 300) as usize, 3_000, 600, seed);
    }
}

#[test]
fn control_state_round_trips_and_continues_identically() {
    let cfg = Config {
        check_bits: 6,
        stash_capacity: 8,
        sizing: Sizing::Tight,
        ..Config::default()
    };
    let mut o: Othello<u64> = Othello::with_capacity(cfg, 4000).unwrap();
    for k in 0..4000u64 {
        o.insert(k * 3, k & 0xff).unwrap();
    }
    for k in 0..500u64 {
        o.remove(&(k * 6)).unwrap();
    }
    let bytes = o.save();
    let mut l: Othello<u64> = Othello::load(&bytes).unwrap();
    l.check_invariants().unwrap();
    assert_eq!(l.snapshot(0), o.snapshot(0));
    assert_eq!(l.len(), o.len());
    // Both continue with the same deltas.
    for k in (1u64 << 40)..(1u64 << 40) + 500 {
        let a = o.insert(k, 1).unwrap();
        let b = l.insert(k, 1).unwrap();
        let sorted = |c: &Change| {
            let mut w = c.writes(0).to_vec();
            w.sort_by_key(|op| format!("{op:?}"));
            w
        };
        assert_eq!(sorted(&a), sorted(&b));
    }
    assert_eq!(l.snapshot(0), o.snapshot(0));
}

/// With `l = 64` there is no room for a check field (`r = 0`): saving and
/// loading must not place one (a shift by 64 overflows; the fuzz target
/// `control_load` found this in `load`).
#[test]
fn control_state_with_64_value_bits_round_trips() {
    let cfg = Config {
        value_bits: 64,
        check_bits: 0,
        ..Config::default()
    };
    let vals = |k: u64| k.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1 << 63;
    let o: Othello<u64> = Othello::build(cfg, (0..500u64).map(|k| (k, vals(k)))).unwrap();
    let l: Othello<u64> = Othello::load(&o.save()).unwrap();
    l.check_invariants().unwrap();
    assert_eq!(l.snapshot(0), o.snapshot(0));
    for k in 0..500u64 {
        assert_eq!(l.get(&k), Some(vals(k)));
    }
    let o: Othello<Vec<u8>> = Othello::build(
        cfg,
        (0..500u64).map(|k| (k.to_le_bytes().to_vec(), vals(k))),
    )
    .unwrap();
    let l: Othello<Vec<u8>> = Othello::load(&o.save()).unwrap();
    l.check_invariants().unwrap();
    assert_eq!(l.snapshot(0), o.snapshot(0));
}

#[test]
fn damaged_control_state_is_refused() {
    let o = Othello::build(Config::default(), (0..300u64).map(|k| (k, k & 0xff))).unwrap();
    let bytes = o.save();
    for n in [0, 7, 8, 20, bytes.len() / 2, bytes.len() - 1] {
        assert!(
            Othello::<u64>::load(&bytes[..n]).is_err(),
            "prefix {n} accepted"
        );
    }
    for i in (0..bytes.len()).step_by(13) {
        let mut b = bytes.clone();
        b[i] ^= 0x10;
        assert!(Othello::<u64>::load(&b).is_err(), "flip at {i} accepted");
    }
    // Wrong key type: u64 keys are 8 bytes, not 6.
    assert!(Othello::<[u8; 6]>::load(&bytes).is_err());
}

#[test]
fn removed_keys_read_as_misses_with_a_check_field() {
    let cfg = Config {
        check_bits: 8,
        ..Config::default()
    };
    let n = 20_000u64;
    let mut o = Othello::build(cfg, (0..n).map(|k| (k, k & 0xff))).unwrap();
    let mut q = o.export(0);
    for k in (0..n).step_by(2) {
        let c = o.remove(&k).unwrap();
        follow(&mut q, &o, &c, 0);
        assert_eq!(
            q.lookup(&k),
            None,
            "key {k} still found right after its removal"
        );
    }
    o.check_invariants().unwrap();
    // Later updates may flip a removed key's slots back by chance (2^-r).
    let still = (0..n).step_by(2).filter(|k| q.lookup(k).is_some()).count();
    assert!(
        still < (n as usize / 2) / 64,
        "{still} removed keys still hit"
    );
    for k in (1..n).step_by(2) {
        assert_eq!(q.lookup(&k), Some(k & 0xff));
    }
    assert_eq!(q.to_snapshot(), o.snapshot(0));
}

/// `apply_batch` against the oracle: random batches of inserts, removals
/// and alters (valid ones, so batches run to the end) from an empty
/// structure, so growth rebuilds and reseeds happen in the middle of
/// batches; the batch's change applied to a query structure must give the
/// fresh export.
fn batch_run(cfg: Config, batches: usize, seed: u64) -> u64 {
    use nexthop_othello::BatchOp;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut o: Othello<u64> = Othello::new(cfg).unwrap();
    let mut q = o.export(0);
    let mut oracle: HashMap<u64, u64> = HashMap::new();
    let vmask = cfg.value_mask();
    for round in 0..batches {
        let len = rng.gen_range(1..600);
        let mut batch = Vec::with_capacity(len);
        // Keys touched in this batch, so every operation is valid when it
        // runs (the oracle is updated as the batch is written).
        for _ in 0..len {
            let v = rng.gen::<u64>() & vmask;
            let present: Vec<u64> = if oracle.is_empty() || rng.gen_range(0..10) < 5 {
                vec![]
            } else {
                // A present key: pick one by probing random keys of the oracle.
                oracle
                    .keys()
                    .take(1 + rng.gen_range(0..8))
                    .copied()
                    .collect()
            };
            match present.last() {
                None => {
                    let k = rng.gen::<u64>();
                    if oracle.insert(k, v).is_none() {
                        batch.push(BatchOp::Insert(k, v));
                    }
                }
                Some(&k) if rng.gen_bool(0.5) => {
                    oracle.remove(&k);
                    batch.push(BatchOp::Remove(k));
                }
                Some(&k) => {
                    oracle.insert(k, v);
                    batch.push(BatchOp::Alter(k, v));
                }
            }
        }
        let change = o.apply_batch(batch).expect("valid batch applies");
        follow(&mut q, &o, &change, 0);
        if round % 16 == 0 {
            check_all(&q, &o, &oracle);
        }
        assert_eq!(q.to_snapshot(), o.snapshot(0), "batch {round}");
    }
    check_all(&q, &o, &oracle);
    let c = o.stats().counters;
    c.grow_rebuilds + c.reseed_rebuilds
}

#[test]
fn batches_match_hashmap_and_deltas_through_rebuilds() {
    let rebuilds = batch_run(Config::default(), 200, 11);
    assert!(
        rebuilds >= 5,
        "growth from empty must rebuild mid-batch, got {rebuilds}"
    );
}

#[test]
fn batches_match_hashmap_tight_with_check_bits_and_tiny_stash() {
    let cfg = Config {
        sizing: Sizing::Tight,
        value_bits: 6,
        check_bits: 7,
        stash_capacity: 1,
        ..Config::default()
    };
    batch_run(cfg, 200, 12);
}

#[test]
fn failing_batch_operation_reports_index_and_keeps_earlier_ones() {
    use nexthop_othello::BatchOp;
    let mut o: Othello<u64> = Othello::with_capacity(Config::default(), 1000).unwrap();
    let mut q = o.export(0);
    o.insert(7, 1).unwrap();
    follow(&mut q, &o, &Change::Writes(vec![]), 0);
    q = o.export(0);
    let batch = vec![
        BatchOp::Insert(1, 10),
        BatchOp::Alter(7, 3),
        BatchOp::Insert(7, 5), // duplicate: fails here
        BatchOp::Insert(2, 20),
    ];
    let err = o.apply_batch(batch).unwrap_err();
    assert_eq!(err.index, 2);
    assert!(err.to_string().contains("batch operation 2"), "{err}");
    follow(&mut q, &o, &err.applied, 0);
    let oracle = HashMap::from([(1, 10), (7, 3)]);
    check_all(&q, &o, &oracle);
    assert_eq!(
        o.get(&2),
        None,
        "operations after the failing one do not run"
    );
    assert_eq!(q.to_snapshot(), o.snapshot(0));
    let err = o.apply_batch(vec![BatchOp::Remove(99)]).unwrap_err();
    assert_eq!(err.index, 0);
    assert_eq!(o.len(), 2);
}

#[test]
fn saved_len_is_exactly_what_save_writes() {
    // Keys of 0 to 300 bytes: varint lengths of one and two bytes.
    // Distinct keys: the index, then filler.
    let keys = (0..600usize).map(|i| {
        let mut k = (i as u16).to_le_bytes().to_vec();
        k.resize(2 + i / 2, 0xab);
        (k, vec![(i & 0x3f) as u64, 1, 2])
    });
    let cfg = Config {
        columns: 3,
        ..Config::default()
    };
    let o: Othello<Vec<u8>> = Othello::build_columns(cfg, keys).unwrap();
    let bytes = o.try_save().unwrap();
    assert_eq!(bytes.len(), o.saved_len());
    assert_eq!(bytes, o.save());
    let u: Othello<u64> = Othello::build(Config::default(), (0..1000u64).map(|k| (k, 1))).unwrap();
    assert_eq!(u.save().len(), u.saved_len());
}
