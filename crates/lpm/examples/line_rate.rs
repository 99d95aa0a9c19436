//! The machine's random cache-line read rate on one thread and on two:
//! `line_rate [MIB] [ROUNDS]` fills an array of MIB MiB (default 64, the
//! size of DIR-24-8's `tbl24`; on huge pages like the lookup tables) and
//! has each thread read random lines of it, 32 prefetched ahead, for 50 M
//! lines; it prints million lines per second for one thread, for two at
//! once (summed), and their ratio. A lookup that reads `L` random lines
//! cannot run faster than this rate divided by `L`, on one thread or two:
//! the ceiling behind the lookup benchmark's two-thread ratios.
use std::time::Instant;

use nexthop_mem::{prefetch, HugeBox};

/// Read `n` random lines of `a` (a power-of-two length), 32 prefetched
/// ahead; returns the sum (so the reads happen) and M lines/s.
fn run(a: &[u8], seed: u64, n: usize) -> (u64, f64) {
    let mask = a.len() - 1;
    let mut x = seed | 1;
    let mut idx = [0usize; 32];
    let mut sum = 0u64;
    let t = Instant::now();
    let mut done = 0;
    while done < n {
        for i in idx.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *i = (x as usize) & mask;
            prefetch(a[*i..].as_ptr());
        }
        for &i in &idx {
            sum += a[i] as u64;
        }
        done += idx.len();
    }
    (sum, n as f64 / t.elapsed().as_secs_f64() / 1e6)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mib: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(64);
    let rounds: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    let len = (mib << 20).next_power_of_two();
    let a = HugeBox::from_fn(len, |i| i as u8);
    let n = 50_000_000;
    for round in 0..rounds {
        let (s1, one) = run(&a, 1 + round, n);
        let (s2, two) = std::thread::scope(|s| {
            let h = [11, 23].map(|seed| {
                let a = &a;
                s.spawn(move || run(a, seed + round, n))
            });
            h.into_iter()
                .map(|h| h.join().expect("reader thread"))
                .fold((0, 0.0), |(s, r), (s2, r2)| (s ^ s2, r + r2))
        });
        std::hint::black_box((s1, s2));
        println!(
            "{mib} MiB, round {round}: 1 thread {one:.1} M lines/s, 2 threads {two:.1} M lines/s ({:.2}x)",
            two / one
        );
    }
}
