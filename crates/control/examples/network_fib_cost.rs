//! Controller cost per route change of a network-wide FIB with N switch
//! columns (Concise, section 5.1): one shared graph (`NetworkFib`, the
//! change applied once, a delta per touched column) against N independent
//! graphs (a `ConciseFib` per switch, the change applied to each switch it
//! touches, a delta each). Both get the same changes, in the same process,
//! alternating rounds; the time covers applying the change and encoding
//! the deltas a controller publishes.
//!
//! ```sh
//! cargo run --release -p nexthop-control --example network_fib_cost -- [NAMES] [CHANGES] [N,N,...] [ROUNDS]
//! ```
//!
//! Defaults: 100 000 MAC names, 30 000 changes, N = 1,4,16, 3 rounds. The
//! changes are a third adds (an action per switch), a third deletes, a
//! third next-hop changes at two switches (one with N = 1). Prints a table
//! and one JSON object per N (medians over the rounds).

use std::time::Instant;

use nexthop_othello::fib::{Action, ConciseFib, RouteChange};
use nexthop_othello::fib_net::{NetworkChange, NetworkFib};
use nexthop_othello::Config;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn mac(i: u64) -> [u8; 6] {
    let b = i.to_be_bytes();
    [0x02, b[3], b[4], b[5], b[6], b[7]]
}

fn hop(r: &mut Xoshiro256PlusPlus) -> Action {
    Action::Port(r.gen_range(1..=24))
}

/// One network change and, per switch, the change of that switch's own
/// FIB (`None`: the switch is not touched).
struct Step {
    net: NetworkChange<[u8; 6]>,
    per: Vec<Option<RouteChange<[u8; 6]>>>,
}

fn steps(names: u64, changes: u64, n: usize, seed: u64) -> (Vec<Vec<Action>>, Vec<Step>) {
    let mut r = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut cur: Vec<Option<Vec<Action>>> = (0..names)
        .map(|_| Some((0..n).map(|_| hop(&mut r)).collect()))
        .collect();
    let base = cur.iter().flatten().cloned().collect();
    let mut out = Vec::with_capacity(changes as usize);
    let mut live: Vec<u64> = (0..names).collect();
    while out.len() < changes as usize {
        match r.gen_range(0..3) {
            0 => {
                let acts: Vec<Action> = (0..n).map(|_| hop(&mut r)).collect();
                let k = cur.len() as u64;
                cur.push(Some(acts.clone()));
                live.push(k);
                out.push(Step {
                    per: acts
                        .iter()
                        .map(|a| Some(RouteChange::Add(mac(k), a.clone())))
                        .collect(),
                    net: NetworkChange::Add(mac(k), acts),
                });
            }
            1 if live.len() > 1 => {
                let k = live.swap_remove(r.gen_range(0..live.len()));
                cur[k as usize] = None;
                out.push(Step {
                    net: NetworkChange::Delete(mac(k)),
                    per: (0..n).map(|_| Some(RouteChange::Delete(mac(k)))).collect(),
                });
            }
            _ => {
                let k = live[r.gen_range(0..live.len())];
                let Some(acts) = cur[k as usize].as_mut() else {
                    continue;
                };
                let mut per = vec![None; n];
                for _ in 0..2.min(n) {
                    let c = r.gen_range(0..n);
                    let a = Action::Port(match &acts[c] {
                        Action::Port(p) => p % 24 + 1,
                        _ => 1,
                    });
                    acts[c] = a.clone();
                    per[c] = Some(RouteChange::Set(mac(k), a));
                }
                out.push(Step {
                    net: NetworkChange::Set(mac(k), acts.clone()),
                    per,
                });
            }
        }
    }
    (base, out)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: u64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let names = arg(0, 100_000);
    let changes = arg(1, 30_000);
    let ns: Vec<usize> = args
        .get(2)
        .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 4, 16]);
    let rounds = arg(3, 3).max(1);
    println!("names {names}, changes {changes}, rounds {rounds} (medians)");
    println!("| switches N | shared graph ns/change | N graphs ns/change | N graphs / shared | deltas per change (shared / N graphs) |");
    println!("| --- | --- | --- | --- | --- |");
    for &n in &ns {
        let (base, steps) = steps(names, changes, n, 42 + n as u64);
        let routes: Vec<_> = base
            .iter()
            .enumerate()
            .map(|(i, a)| (i + 1, mac(i as u64), a.clone()))
            .collect();
        let cfg = Config {
            columns: n,
            ..Config::default()
        };
        let (mut shared_t, mut indep_t) = (Vec::new(), Vec::new());
        let (mut shared_d, mut indep_d) = (0u64, 0u64);
        for _ in 0..rounds {
            // The shared graph: the change once, a delta per touched column.
            let mut fib = NetworkFib::build(cfg, &routes).expect("build");
            let mut bytes = 0usize;
            shared_d = 0;
            let t = Instant::now();
            for s in &steps {
                let m = fib.apply_changes(&[(1, &s.net)]);
                assert!(m.error.is_none(), "{:?}", m.error);
                for c in 0..n {
                    if m.change.is_rebuild() || !m.change.writes(c).is_empty() {
                        bytes += fib.othello().delta(&m.change, c).encode().len();
                        shared_d += 1;
                    }
                }
            }
            shared_t.push(t.elapsed().as_nanos() as f64 / steps.len() as f64);
            std::hint::black_box(bytes);
            // N independent graphs: the change at every switch it touches.
            let mut fibs: Vec<ConciseFib<[u8; 6]>> = (0..n)
                .map(|c| {
                    let r: Vec<_> = routes
                        .iter()
                        .map(|(l, k, a)| (*l, *k, a[c].clone()))
                        .collect();
                    ConciseFib::build(Config::default(), &r).expect("build")
                })
                .collect();
            indep_d = 0;
            let t = Instant::now();
            for s in &steps {
                for (f, ch) in fibs.iter_mut().zip(&s.per) {
                    let Some(ch) = ch else { continue };
                    let m = f.apply_changes_merged(&[(1, ch)]);
                    assert!(m.error.is_none(), "{:?}", m.error);
                    if m.change.is_rebuild() || !m.change.writes(0).is_empty() {
                        bytes += f.othello().delta(&m.change, 0).encode().len();
                        indep_d += 1;
                    }
                }
            }
            indep_t.push(t.elapsed().as_nanos() as f64 / steps.len() as f64);
            std::hint::black_box(bytes);
        }
        let (s, i) = (median(&mut shared_t), median(&mut indep_t));
        let per = |d: u64| d as f64 / steps.len() as f64;
        println!(
            "| {n} | {s:.0} | {i:.0} | {:.2} | {:.2} / {:.2} |",
            i / s,
            per(shared_d),
            per(indep_d)
        );
        eprintln!(
            "{{\"switches\":{n},\"names\":{names},\"changes\":{},\"shared_ns_per_change\":{s:.1},\"independent_ns_per_change\":{i:.1},\"shared_deltas_per_change\":{:.3},\"independent_deltas_per_change\":{:.3}}}",
            steps.len(),
            per(shared_d),
            per(indep_d)
        );
    }
}
