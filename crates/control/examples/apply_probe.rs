//! Time `Controller::apply_changes` per route change, merged chunks vs one
//! delta per change, with no forwarder connected (the controller's own
//! cost: validation, FIB update, delta encode, queueing).
//!
//! `cargo run --release -p nexthop-control --example apply_probe -- [NAMES] [CHANGES] [CALL] [PER,...]`
//! (defaults 1,000,000 names, 500,000 changes, calls of 200 changes, and
//! the rounds `256,1,256,1` of `changes_per_delta`). Under callgrind,
//! `--toggle-collect='*Controller*apply*'` counts only the apply calls.

use std::time::Instant;

use nexthop_control::{AuthKey, Controller, ControllerConfig};
use nexthop_othello::fib::{Action, ConciseFib, RouteChange};
use nexthop_othello::Config;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn mac(i: u64) -> [u8; 6] {
    let b = i.to_be_bytes();
    [0x02, b[3], b[4], b[5], b[6], b[7]]
}

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .map(|s| s.parse().expect("a number"))
        .unwrap_or(default)
}

fn main() {
    let (names, n_changes, call) = (arg(1, 1_000_000), arg(2, 500_000), arg(3, 200));
    let routes: Vec<_> = (0..names as u64)
        .map(|i| (i as usize + 1, mac(i), Action::Port((i % 4) as u16 + 1)))
        .collect();
    // Over twice the names: adds of absent names, and for present ones a
    // delete (one in three) or an action change.
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let mut present: Vec<bool> = (0..names * 2).map(|i| i < names).collect();
    let mut changes = Vec::with_capacity(n_changes);
    while changes.len() < n_changes {
        let i = rng.gen_range(0..names * 2);
        let a = Action::Port(rng.gen_range(1..=4));
        let ch = match (present[i], rng.gen_range(0..3)) {
            (true, 0) => {
                present[i] = false;
                RouteChange::Delete(mac(i as u64))
            }
            (true, _) => RouteChange::Set(mac(i as u64), a),
            (false, _) => {
                present[i] = true;
                RouteChange::Add(mac(i as u64), a)
            }
        };
        changes.push(ch);
    }
    let key = AuthKey::new(b"apply-probe-secret-0123456789").expect("key");
    let rounds: Vec<usize> = std::env::args()
        .nth(4)
        .unwrap_or_else(|| "256,1,256,1".into())
        .split(',')
        .map(|s| s.parse().expect("changes_per_delta"))
        .collect();
    for per in rounds {
        // Sized for every name that may be added, as `nexthop lab` does: no
        // growth rebuild during the changes.
        let fib =
            ConciseFib::build_with_capacity(Config::default(), 2 * names, &routes).expect("build");
        let cfg = ControllerConfig {
            log: false,
            changes_per_delta: per,
            ..ControllerConfig::default()
        };
        let c = Controller::start(fib, key.clone(), cfg).expect("controller");
        let t = Instant::now();
        let (mut deltas, mut rebuilds) = (0, 0);
        for chunk in changes.chunks(call) {
            let r = c.apply_changes(chunk).expect("apply");
            deltas += r.deltas;
            rebuilds += r.rebuilds;
        }
        let s = t.elapsed().as_secs_f64();
        println!(
            "changes_per_delta {per:>4}: {} changes in calls of {call} -> {deltas} deltas, {rebuilds} rebuilds: {:.0} ns/change ({:.2} M changes/s)",
            changes.len(),
            s * 1e9 / changes.len() as f64,
            changes.len() as f64 / s / 1e6
        );
        c.shutdown();
    }
}
