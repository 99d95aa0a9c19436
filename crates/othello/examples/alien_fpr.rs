//! Measures the alien-key false-positive rate of the check field:
//! `cargo run --release -p nexthop-othello --example alien_fpr -- [N] [ALIENS]`.
//! Builds N known u64 keys with l = 8 and r in {0, 4, 8, 12, 16}, looks up
//! ALIENS keys that are not in the set, and prints the fraction reported as
//! hits next to 2^-r.
use nexthop_othello::{Config, Othello};

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(1_000_000);
    let aliens = args.get(1).copied().unwrap_or(10_000_000);
    let keys = nexthop_testutil::distinct_u64(1, n + aliens);
    let (known, alien) = keys.split_at(n);
    println!("n = {n} known keys, {aliens} alien keys, l = 8");
    println!(
        "{:>3} {:>12} {:>12} {:>10}",
        "r", "measured", "2^-r", "bits/key"
    );
    for r in [0u8, 4, 8, 12, 16] {
        let cfg = Config {
            value_bits: 8,
            check_bits: r,
            ..Config::default()
        };
        let o = match Othello::build(cfg, known.iter().map(|&k| (k, k & 0xff))) {
            Ok(o) => o,
            Err(e) => {
                eprintln!("build failed: {e}");
                std::process::exit(1);
            }
        };
        let q = o.export(0);
        let mut out = vec![0u64; 4096];
        let mut hits = 0usize;
        for ch in alien.chunks(4096) {
            hits += q.lookup_batch(ch, &mut out[..ch.len()]);
        }
        let known_ok = known.iter().all(|k| q.lookup(k) == Some(k & 0xff));
        assert!(known_ok, "a known key lost its value");
        println!(
            "{r:>3} {:>12.3e} {:>12.3e} {:>10.2}",
            hits as f64 / aliens as f64,
            1.0 / (1u64 << r) as f64,
            q.memory_bytes() as f64 * 8.0 / n as f64
        );
    }
}
