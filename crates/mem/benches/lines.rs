//! The memory floor under every table benchmark: random cache-line reads
//! over a large array, one at a time (each read's address depends on the
//! last: the latency of a miss) and in batches whose lines are all
//! prefetched before any is read (the throughput of overlapped misses),
//! on 4 KiB pages and on huge pages ([`HugeBox`]). Times are the thread's
//! CPU time.
//!
//! ```text
//! cargo bench -p nexthop-mem --bench lines -- [--smoke] [--mib 1024] [--reads 2e7]
//! ```
//!
//! A lookup structure's rate on this machine is bounded by its lines per
//! operation times the batched figure (when its misses are prefetched in
//! time) or the dependent one (when they are not); the NDN forwarding
//! pipeline's and the FIB's sections in docs/benchmarks.md cite both.

use nexthop_mem::{prefetch, HugeBox};
use nexthop_testutil::args::count_or_exit;
use nexthop_testutil::clock::thread_cpu_secs;
use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::hint::black_box;

/// One cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u64; 8]);

struct Opts {
    mib: usize,
    reads: usize,
}

fn opts() -> Opts {
    let mut o = Opts {
        mib: 1024,
        reads: 20_000_000,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--smoke" => {
                o.mib = 64;
                o.reads = 200_000;
                i += 1;
                continue;
            }
            "--bench" => {
                i += 1;
                continue;
            }
            "--mib" => o.mib = count_or_exit(&v).max(1),
            "--reads" => o.reads = count_or_exit(&v).max(64),
            other => panic!("unknown option {other}"),
        }
        i += 2;
    }
    o
}

/// Nanoseconds per line read with each address depending on the last.
fn dependent(a: &[Line], reads: usize) -> f64 {
    let n = a.len();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let mut p = 0u64;
    let t = thread_cpu_secs();
    for _ in 0..reads {
        p = (a[(p ^ rng.next_u64()) as usize % n].0[0] ^ p).wrapping_add(1);
    }
    black_box(p);
    (thread_cpu_secs() - t) * 1e9 / reads as f64
}

/// Million lines per second read in batches of `b`, every line of a batch
/// prefetched before the first is read.
fn batched(a: &[Line], reads: usize, b: usize) -> f64 {
    let n = a.len();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
    let mut idx = vec![0usize; b];
    let mut sum = 0u64;
    let t = thread_cpu_secs();
    let mut done = 0;
    while done < reads {
        for i in idx.iter_mut() {
            *i = rng.next_u64() as usize % n;
            prefetch(&a[*i]);
        }
        for &i in &idx {
            sum = sum.wrapping_add(a[i].0[0]);
        }
        done += b;
    }
    black_box(sum);
    done as f64 / (thread_cpu_secs() - t) / 1e6
}

fn report(what: &str, a: &[Line], o: &Opts) {
    let dep = dependent(a, o.reads / 10);
    let rates: Vec<String> = [1usize, 4, 8, 16, 32, 64]
        .iter()
        .map(|&b| format!("{b}: {:.1}", batched(a, o.reads, b)))
        .collect();
    println!(
        "{what:<28} dependent {dep:>6.1} ns/line | batched, M lines/s by batch size: {}",
        rates.join("  ")
    );
}

fn main() {
    let o = opts();
    let lines = o.mib * (1 << 20) / 64;
    println!(
        "random cache-line reads over {} MiB ({} lines), {} reads per figure; {} ({} cores), load {}",
        o.mib,
        lines,
        o.reads,
        nexthop_testutil::bench::cpu_model(),
        nexthop_testutil::bench::cores(),
        nexthop_testutil::bench::loadavg()
    );
    let fill = |i: usize| Line([i as u64; 8]);
    let small: Vec<Line> = (0..lines).map(fill).collect();
    report("4 KiB pages (heap)", &small, &o);
    drop(small);
    let huge = HugeBox::from_fn(lines, fill);
    let label = if huge.is_mapped() {
        "huge pages (HugeBox, advised)"
    } else {
        "HugeBox (not mapped: heap)"
    };
    report(label, &huge, &o);
}
