//! Batched lookup timing for A/B comparisons: `batch_probe N ROUNDS`.
use nexthop_othello::{Config, Othello};
use std::time::Instant;
fn main() {
    let a = nexthop_testutil::args::Positional::from_env("batch_probe [N] [ROUNDS]");
    let n = a.count(0, 1_000_000);
    let rounds = a.count(1, 20);
    let keys = nexthop_testutil::distinct_u64(1, n);
    let o = Othello::build(Config::default(), keys.iter().map(|&k| (k, k & 0xff))).unwrap();
    let q = o.export(0);
    let mut out = vec![0u64; 1024];
    let mut acc = 0u64;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..rounds {
            for ch in keys.chunks(1024) {
                q.lookup_batch(ch, &mut out[..ch.len()]);
                acc = acc.wrapping_add(out[3]);
            }
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e9 / (n * rounds) as f64);
    }
    println!("batch best {best:.2} ns/lookup (acc {acc})");
}
