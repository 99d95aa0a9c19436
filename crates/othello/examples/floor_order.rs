//! Batch orders of the memory floor (two random byte reads per key, as in
//! the compare bench), at one table size: `floor_order N`. Arrays of
//! `next_power_of_two(1.34 N)` bytes each on huge pages, 2e7 random u64
//! keys, three rounds of six orders, ns per key:
//! * `bN`: bursty, hash a group of N keys and prefetch both slots of each,
//!   then read the group;
//! * `pN`: pipelined, hash and prefetch group g + 1, then read group g
//!   (`nexthop_mem::two_stage`, the driver of `Query::lookup_batch`).
//!
//! The sums of all orders are printed (to stderr) so they can be checked
//! equal. Recorded in docs/benchmarks.md ("Othello lookups"); it chose
//! `nexthop_othello::BATCH_GROUP`.
use nexthop_hash::{reduce, KeyBytes};
use nexthop_mem::prefetch;
use std::hint::black_box;
use std::time::Instant;

fn bursty<const G: usize>(a: &[u8], b: &[u8], keys: &[u64], seed: u64) -> u64 {
    let (ma, mb) = (a.len() as u32, b.len() as u32);
    let mut ij = [(0usize, 0usize); G];
    let mut sum = 0u64;
    for kc in keys.chunks(G) {
        for (n, k) in kc.iter().enumerate() {
            let h = k.hash128(seed);
            let (i, j) = (reduce(h.w0(), ma) as usize, reduce(h.w1(), mb) as usize);
            prefetch(&a[i]);
            prefetch(&b[j]);
            ij[n] = (i, j);
        }
        for &(i, j) in &ij[..kc.len()] {
            sum += (a[i] ^ b[j]) as u64;
        }
    }
    sum
}

/// One group's slot pairs (arrays of a generic length have no `Default`).
struct Ij<const G: usize>([(usize, usize); G]);

impl<const G: usize> Default for Ij<G> {
    fn default() -> Self {
        Ij([(0, 0); G])
    }
}

fn piped<const G: usize>(a: &[u8], b: &[u8], keys: &[u64], seed: u64) -> u64 {
    // The driver `Query::lookup_batch` uses.
    let (ma, mb) = (a.len() as u32, b.len() as u32);
    let mut sum = 0u64;
    nexthop_mem::two_stage::<G, _, Ij<G>>(
        keys,
        |kc, ij| {
            for (n, k) in kc.iter().enumerate() {
                let h = k.hash128(seed);
                let (i, j) = (reduce(h.w0(), ma) as usize, reduce(h.w1(), mb) as usize);
                prefetch(&a[i]);
                prefetch(&b[j]);
                ij.0[n] = (i, j);
            }
        },
        |_, kc, ij| {
            for &(i, j) in &ij.0[..kc.len()] {
                sum += (a[i] ^ b[j]) as u64;
            }
        },
    );
    sum
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let ma = ((n as f64 * 1.34) as usize).next_power_of_two();
    let a = nexthop_mem::HugeBox::from_fn(ma, |i| i as u8);
    let b = nexthop_mem::HugeBox::from_fn(ma, |i| (i >> 3) as u8);
    let keys = nexthop_testutil::distinct_u64(3, 20_000_000);
    let seed = 77;
    for round in 0..3 {
        let mut line = format!("round {round}:");
        for v in 0..6 {
            let t = Instant::now();
            let s = match v {
                0 => bursty::<16>(&a, &b, &keys, seed),
                1 => piped::<16>(&a, &b, &keys, seed),
                2 => bursty::<32>(&a, &b, &keys, seed),
                3 => piped::<8>(&a, &b, &keys, seed),
                4 => piped::<32>(&a, &b, &keys, seed),
                _ => bursty::<8>(&a, &b, &keys, seed),
            };
            black_box(s);
            if round == 0 {
                eprint!(" sum{v}={s}");
            }
            let ns = t.elapsed().as_nanos() as f64 / keys.len() as f64;
            let name = ["b16", "p16", "b32", "p8", "p32", "b8"][v];
            line += &format!(" {name} {ns:.2}");
        }
        println!("{line}");
    }
}
