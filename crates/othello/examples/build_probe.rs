//! Bulk-build timing for A/B comparisons and profiling:
//! `build_probe N [pow2|tight] REPS` — `Othello::build` from N random u64
//! keys with 8-bit values, then a pre-sized hashbrown map inserting the
//! same pairs, then `Othello::build_columns` with one column (a rebuild's
//! path), REPS times in turn; prints CPU seconds of each and the build's
//! ratio to hashbrown (the build target: Othello <= 3x hashbrown).
use std::hint::black_box;

use nexthop_othello::{Config, Othello, Sizing};
use nexthop_testutil::args::Positional;
use nexthop_testutil::thread_cpu_secs as cpu;

fn main() {
    let a = Positional::from_env("build_probe [N] [pow2|tight] [REPS]");
    let n = a.count(0, 10_000_000);
    let mut cfg = Config::default();
    if a.word(1, &["pow2", "tight"]) == "tight" {
        cfg.sizing = Sizing::Tight;
    }
    let reps = a.count(2, 1);
    let keys = nexthop_testutil::distinct_u64(1, n);
    for _ in 0..reps {
        let t = cpu();
        phase_build(cfg, &keys);
        let ob = cpu() - t;
        let t = cpu();
        phase_hashbrown(&keys);
        let hb = cpu() - t;
        let t = cpu();
        phase_rebuild(cfg, &keys);
        let rb = cpu() - t;
        println!(
            "n {n}: build {ob:.3} s, hashbrown insert {hb:.3} s, ratio {:.2}; build_columns {rb:.3} s",
            ob / hb
        );
    }
}

// One function per phase so a profiler can attribute costs.
#[inline(never)]
fn phase_build(cfg: Config, keys: &[u64]) {
    let o = Othello::build(cfg, keys.iter().map(|&k| (k, k & 0xff))).unwrap();
    black_box(&o);
}

#[inline(never)]
fn phase_rebuild(cfg: Config, keys: &[u64]) {
    let o = Othello::build_columns(cfg, keys.iter().map(|&k| (k, vec![k & 0xff]))).unwrap();
    black_box(&o);
}

#[inline(never)]
fn phase_hashbrown(keys: &[u64]) {
    let mut m = hashbrown::HashMap::with_capacity(keys.len());
    for &k in keys {
        m.insert(k, (k & 0xff) as u8);
    }
    black_box(&m);
}
