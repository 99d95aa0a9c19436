//! Readers running while deltas are applied see every key's old or new
//! value, never a third (striped sequence locks, see query.rs).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nexthop_othello::{Config, Othello, Sizing};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const CHURN_BASE: u64 = 1 << 40;

fn stable_value(k: u64) -> u64 {
    (k * 37) & 0xff
}

/// Toggled keys flip between `k & 0x7f` and `(k & 0x7f) | 0x80`.
fn toggled_values(k: u64) -> (u64, u64) {
    (k & 0x7f, (k & 0x7f) | 0x80)
}

#[test]
fn readers_never_see_a_third_value_during_updates() {
    let stats = stress(20_000, 2_000, 3_500, 3);
    assert!(stats.0 > 10_000, "only {} updates", stats.0);
    assert!(stats.1 > 1_000, "updates wrote only {} slots", stats.1);
}

#[test]
fn readers_stay_consistent_while_keys_move_through_the_stash() {
    // A tiny, full structure: cycles are frequent, so keys keep entering the
    // stash and moving back into the arrays while readers run.
    let stats = stress(24, 8, 28, 2);
    assert!(stats.2 > 50, "only {} keys were stashed", stats.2);
}

/// Returns (updates, slot writes, keys stashed).
fn stress(stable: u64, toggled: u64, churn_max: usize, secs: u64) -> (u64, u64, u64) {
    let cfg = Config {
        sizing: Sizing::Tight,
        stash_capacity: 64,
        ..Config::default()
    };
    let mut o: Othello<u64> =
        Othello::with_capacity(cfg, (stable + toggled) as usize + churn_max).unwrap();
    let (stable_n, toggled_n) = (stable, toggled);
    for k in 0..stable_n {
        o.insert(k, stable_value(k)).unwrap();
    }
    for k in stable_n..stable_n + toggled_n {
        o.insert(k, toggled_values(k).0).unwrap();
    }
    let q = Arc::new(o.export(0));
    let stop = Arc::new(AtomicBool::new(false));
    let lookups = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let (q, stop, lookups) = (q.clone(), stop.clone(), lookups.clone());
            std::thread::spawn(move || {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(100 + t);
                let mut keys = vec![0u64; 64];
                let mut out = vec![0u64; 64];
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for k in keys.iter_mut() {
                        *k = rng.gen_range(0..stable_n + toggled_n);
                    }
                    q.lookup_batch(&keys, &mut out);
                    for (&k, &v) in keys.iter().zip(&out) {
                        if k < stable_n {
                            assert_eq!(v, stable_value(k), "stable key {k} read {v:#x}");
                        } else {
                            let (a, b) = toggled_values(k);
                            assert!(v == a || v == b, "toggled key {k} read third value {v:#x}");
                        }
                        // The single-key path, toggled keys included.
                        let s = q.lookup(&k).unwrap();
                        if k < stable_n {
                            assert_eq!(s, stable_value(k), "single: stable key {k} read {s:#x}");
                        } else {
                            let (a, b) = toggled_values(k);
                            assert!(s == a || s == b, "single: toggled key {k} read {s:#x}");
                        }
                    }
                    n += 64;
                }
                lookups.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();

    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let mut state: Vec<bool> = vec![false; toggled_n as usize];
    let mut churn: Vec<u64> = Vec::new();
    let mut next_churn = CHURN_BASE;
    let (mut updates, mut writes) = (0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        let change = match rng.gen_range(0..3) {
            _ if toggled_n == 0 => continue,
            0 => {
                let i = rng.gen_range(0..toggled_n) as usize;
                let k = stable_n + i as u64;
                state[i] = !state[i];
                let (a, b) = toggled_values(k);
                o.alter(&k, if state[i] { b } else { a }).unwrap()
            }
            1 if churn.len() < churn_max => {
                next_churn += 1;
                churn.push(next_churn);
                o.insert(next_churn, rng.gen::<u64>() & 0xff).unwrap()
            }
            _ if !churn.is_empty() => {
                let k = churn.swap_remove(rng.gen_range(0..churn.len()));
                o.remove(&k).unwrap()
            }
            _ => continue,
        };
        assert!(!change.is_rebuild(), "capacity was sized to avoid rebuilds");
        let d = o.delta(&change, 0);
        writes += d.write_count() as u64;
        q.apply(&d).unwrap();
        updates += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().expect("reader saw an inconsistent value");
    }
    assert!(lookups.load(Ordering::Relaxed) > 100_000);
    assert_eq!(q.to_snapshot(), o.snapshot(0));
    (updates, writes, o.stats().counters.stashed)
}
