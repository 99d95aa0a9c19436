//! Single vs batched lookup probe: `lookup_probe N`.
use nexthop_othello::{Config, Othello};
use std::time::Instant;
fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let keys = nexthop_testutil::distinct_u64(1, n);
    let o = Othello::build(Config::default(), keys.iter().map(|&k| (k, k & 0xff))).unwrap();
    let q = o.export(0);
    let mut stream: Vec<u64> = keys.clone();
    // shuffle deterministically
    let mut x = 0x1234_5678u64;
    for i in (1..stream.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        stream.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let ma = q.meta().ma as usize;
    let mb = q.meta().mb as usize;
    let fa = vec![1u8; ma];
    let fb = vec![2u8; mb];
    let seed = q.meta().seed;
    for round in 0..3 {
        let t = Instant::now();
        let mut acc = 0u64;
        for k in &stream {
            acc = acc.wrapping_add(q.lookup(k).unwrap());
        }
        let single = t.elapsed().as_secs_f64() * 1e9 / n as f64;
        let mut out = vec![0u64; 1024];
        let t = Instant::now();
        for ch in stream.chunks(1024) {
            q.lookup_batch(ch, &mut out[..ch.len()]);
            acc = acc.wrapping_add(out[0]);
        }
        let batch = t.elapsed().as_secs_f64() * 1e9 / n as f64;
        let t = Instant::now();
        for k in &stream {
            let h = nexthop_hash::KeyBytes::hash128(k, seed);
            let i = nexthop_hash::reduce(h.w0(), ma as u32) as usize;
            let j = nexthop_hash::reduce(h.w1(), mb as u32) as usize;
            acc = acc.wrapping_add((fa[i] ^ fb[j]) as u64);
        }
        let floor_single = t.elapsed().as_secs_f64() * 1e9 / n as f64;
        println!("round {round}: single {single:.1} ns, batch {batch:.1} ns, floor single (plain vec) {floor_single:.1} ns, single/batch rate {:.2} (acc {acc})", batch / single);
    }
}
