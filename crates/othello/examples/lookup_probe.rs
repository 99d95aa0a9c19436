//! Data-plane lookup timing for A/B comparisons and profiling:
//! `lookup_probe N [pow2|tight] [ROUNDS]` — builds an Othello of N random
//! u64 keys, exports its query structure and times, per round, one pass of
//! single-key `Query::lookup` calls and one pass of `Query::lookup_batch`
//! (blocks of 256) over the keys in a shuffled order, in thread CPU time.
//! Also times the floor's single loop (two random byte reads into arrays
//! of the same sizes, same hash). Prints the medians and the ratios. One non-inlined function per
//! kind, so `valgrind --tool=callgrind --toggle-collect=lookup_probe::single`
//! counts the instructions of the single path exactly.
use nexthop_othello::{Config, Othello, Query, Sizing};

use nexthop_testutil::args::Positional;
use nexthop_testutil::thread_cpu_secs as cpu;

fn main() {
    let a = Positional::from_env("lookup_probe [N] [pow2|tight] [ROUNDS]");
    let n = a.count(0, 10_000_000);
    let mut cfg = Config::default();
    if a.word(1, &["pow2", "tight"]) == "tight" {
        cfg.sizing = Sizing::Tight;
    }
    let rounds = a.count(2, 5);
    let keys = nexthop_testutil::distinct_u64(7, n);
    let o = Othello::build(cfg, keys.iter().map(|&k| (k, k & 0xff))).unwrap();
    let q = o.export(0);
    let mut stream = keys.clone();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..stream.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        stream.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let expect: u64 = stream.iter().map(|&k| k & 0xff).sum();
    // The floor's single loop: two random byte reads into arrays of the
    // same sizes and pages, addressed by the same hash.
    let m = *q.meta();
    let fa = nexthop_othello::HugeBox::from_fn(m.ma as usize, |i| i as u8);
    let fb = nexthop_othello::HugeBox::from_fn(m.mb as usize, |i| (i >> 8) as u8);
    let (mut s_ns, mut b_ns, mut f_ns) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = cpu();
        assert_eq!(single(&q, &stream), expect);
        s_ns.push((cpu() - t) * 1e9 / n as f64);
        let t = cpu();
        assert_eq!(batched(&q, &stream), expect);
        b_ns.push((cpu() - t) * 1e9 / n as f64);
        let t = cpu();
        std::hint::black_box(floor_single(&m, &fa, &fb, &stream));
        f_ns.push((cpu() - t) * 1e9 / n as f64);
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (s, b, f) = (med(&mut s_ns), med(&mut b_ns), med(&mut f_ns));
    println!(
        "n {n} (stash {}): single {s:.1} ns/lookup, batched {b:.1} ns/lookup, floor single {f:.1} ns/lookup; \
         single = {:.2} of batched, {:.2} of floor single",
        q.stash_len(),
        b / s,
        f / s
    );
}

#[inline(never)]
fn floor_single(m: &nexthop_othello::QueryMeta, a: &[u8], b: &[u8], keys: &[u64]) -> u64 {
    use nexthop_hash::KeyBytes;
    let mut sum = 0u64;
    for k in keys {
        let (i, j) = m.slots(k.hash128(m.seed));
        sum += (a[i] ^ b[j]) as u64;
    }
    sum
}

#[inline(never)]
fn single(q: &Query, keys: &[u64]) -> u64 {
    let mut sum = 0u64;
    for k in keys {
        sum += q.lookup(k).unwrap_or(0);
    }
    sum
}

#[inline(never)]
fn batched(q: &Query, keys: &[u64]) -> u64 {
    let mut out = [0u64; 256];
    let mut sum = 0u64;
    for kc in keys.chunks(256) {
        q.lookup_batch(kc, &mut out[..kc.len()]);
        sum += out[..kc.len()].iter().sum::<u64>();
    }
    sum
}
