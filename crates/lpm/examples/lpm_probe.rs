//! Lookup cost of Bloomfwd for A/B comparisons and profiling:
//! `lpm_probe v4|v6 [inside|uniform|zipf] [REPS] [FPR] [N] [POOL]` builds the
//! default table (with the filters' false-positive target set to FPR when
//! given) from the 2015 RouteViews table of that family
//! (`../shared/data`), makes N addresses (default 100,000; random, random
//! inside random table prefixes, or inside prefixes drawn Zipf; a few
//! thousand stay in cache, to time the work without the misses; with POOL
//! the N addresses are drawn at random from the stream's first POOL, so a
//! small POOL keeps the lines cached while the order stays unpredictable,
//! which tells branch mispredictions from misses) and times
//! REPS passes of `Bloomfwd::lookup` (one address at a time) and of
//! `Bloomfwd::lookup_batch`, in thread CPU time. Each kind runs in its own
//! non-inlined function, so
//! `valgrind --tool=callgrind --toggle-collect='lpm_probe::batch*'`
//! counts exactly the instructions of one path (divide by REPS x 100,000).
use std::path::PathBuf;

use nexthop_lpm::bloomfwd::GroupKey;
use nexthop_lpm::parse::{load_routes, NextHopMode};
use nexthop_lpm::persist::DEFAULT_V6_LEVELS;
use nexthop_lpm::{Address, BloomfwdControl, Config, NextHop, Prefix, Simd};
use rand::{Rng, SeedableRng};

use nexthop_testutil::thread_cpu_secs as cpu;

#[inline(never)]
fn single<A: GroupKey>(t: &BloomfwdControl<A>, addrs: &[A], out: &mut [NextHop]) {
    for (a, o) in addrs.iter().zip(out.iter_mut()) {
        *o = t.table().lookup(*a).unwrap_or(u32::MAX);
    }
}

#[inline(never)]
fn batch<A: GroupKey>(t: &BloomfwdControl<A>, addrs: &[A], out: &mut [NextHop]) {
    t.table().lookup_batch(addrs, out);
}

/// `n` addresses of `stream`: `uniform` (random), `inside` (random inside
/// random table prefixes) or `zipf` (inside prefixes drawn Zipf, s = 1,
/// over the table in a random order, as in the bench).
fn addresses<A: Address>(routes: &[(Prefix<A>, NextHop)], stream: &str, n: usize) -> Vec<A> {
    let mut r = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(2);
    let ranks = if stream == "zipf" {
        let mut order: Vec<usize> = (0..routes.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, r.gen_range(0..=i));
        }
        let z = nexthop_testutil::keys::zipf_indices(3, routes.len(), 1.0, n).expect("routes");
        z.into_iter().map(|k| order[k]).collect()
    } else {
        Vec::new()
    };
    (0..n)
        .map(|i| {
            let x: u128 = r.gen();
            let p = match stream {
                "uniform" => return A::from_u128(x),
                "zipf" => routes[ranks[i]].0,
                _ => routes[r.gen_range(0..routes.len())].0,
            };
            let host = match p.len() {
                0 => x,
                l if l >= A::BITS => 0,
                l => x & ((1u128 << (A::BITS - l)) - 1),
            };
            A::from_u128(p.addr().to_u128() | host)
        })
        .collect()
}

/// `addrs` redrawn at random from its first `pool` (all of them when
/// `pool` is their number).
fn pooled<A: Copy>(mut addrs: Vec<A>, pool: usize) -> Vec<A> {
    if pool < addrs.len() {
        let mut r = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(9);
        let from = addrs[..pool].to_vec();
        for a in addrs.iter_mut() {
            *a = from[r.gen_range(0..pool)];
        }
    }
    addrs
}

/// Build the table of `routes` (filter target `fpr` when given) and time it.
fn probe<A: GroupKey>(
    mut cfg: Config,
    fpr: Option<f64>,
    routes: &[(Prefix<A>, NextHop)],
    addrs: &[A],
    reps: usize,
) {
    if let Some(f) = fpr {
        cfg.fpr = f;
    }
    let mut t = BloomfwdControl::build(cfg, routes).expect("valid");
    run(&mut t, addrs, reps);
}

fn run<A: GroupKey>(t: &mut BloomfwdControl<A>, addrs: &[A], reps: usize) {
    // `LPM_SIMD=scalar|avx2|avx512` picks the batch's hashing path (default:
    // the best the CPU has).
    if let Ok(v) = std::env::var("LPM_SIMD") {
        let simd: Simd = v.parse().unwrap_or_else(|e| panic!("LPM_SIMD: {e}"));
        t.table_mut().set_simd(simd);
    }
    let mut out = vec![0; addrs.len()];
    let mut ns = [0.0; 2];
    let mut sums = [0u64; 2];
    for (k, f) in [single::<A>, batch::<A>].into_iter().enumerate() {
        let s = cpu();
        for _ in 0..reps {
            f(t, addrs, &mut out);
            sums[k] = sums[k].wrapping_add(out.iter().map(|&x| x as u64).sum::<u64>());
        }
        ns[k] = (cpu() - s) * 1e9 / (reps * addrs.len()) as f64;
    }
    println!(
        "single {:.1} ns/lookup, batch {:.1} ns/lookup (checksums {} {})",
        ns[0], ns[1], sums[0], sums[1]
    );
    // What the lookups read, per address (`Bloomfwd::probe_cost`).
    let mut c = [0u64; 6];
    for &a in addrs {
        let p = t.table().probe_cost(a);
        for (s, v) in c.iter_mut().zip([
            p.direct,
            p.fine,
            p.groups,
            p.filters,
            p.table_lines,
            p.summary,
        ]) {
            *s += v as u64;
        }
    }
    let per = |i: usize| c[i] as f64 / addrs.len().max(1) as f64;
    println!(
        "lookup structure {} bytes, {} refined slots, {} refined sub-slots",
        t.table().memory_bytes(),
        t.table().refined_slots(),
        t.table().refined_sub_slots()
    );
    println!(
        "per lookup: summary {:.2}, direct {:.2}, fine {:.2}, groups {:.2}, filter blocks {:.2}, table lines {:.2}",
        per(5),
        per(0),
        per(1),
        per(2),
        per(3),
        per(4)
    );
}

fn main() {
    let a = nexthop_testutil::args::Positional::from_env(
        "lpm_probe [v6|v4] [inside|uniform|zipf] [REPS] [FPR] [N] [POOL]",
    );
    let fam = a.word(0, &["v6", "v4"]);
    let stream = a.word(1, &["inside", "uniform", "zipf"]);
    let reps = a.count(2, 20);
    let fpr = a.number(3);
    let n = a.count(4, 100_000);
    let pool = a.count(5, n).clamp(1, n.max(1));
    let data = |f: &str| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/data")
            .join(f)
    };
    if fam == "v4" {
        let r = load_routes(&data("routeviews-20151101-ipv4.txt.gz"), NextHopMode::Asn)
            .expect("IPv4 table")
            .v4;
        probe(
            Config::ipv4(),
            fpr,
            &r,
            &pooled(addresses(&r, stream, n), pool),
            reps,
        );
    } else {
        let r = load_routes(&data("routeviews-20151101-ipv6.txt.gz"), NextHopMode::Asn)
            .expect("IPv6 table")
            .v6;
        // `LPM_V6_LEVELS=N` picks the number of DPCPE levels.
        let levels = std::env::var("LPM_V6_LEVELS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_V6_LEVELS);
        let cfg = Config::ipv6_dpcpe(&r, levels);
        eprintln!("levels {:?}", cfg.levels);
        probe(cfg, fpr, &r, &pooled(addresses(&r, stream, n), pool), reps);
    }
}
