//! Bloomfwd against its baselines in one process on the real tables of
//! DATA.md, same address streams, structures alternating within each
//! repetition; medians of the repetitions.
//!
//! `cargo bench -p nexthop-lpm --bench lpm` (full) or `-- --smoke` (tiny
//! sizes, seconds); `-- --lookups` stops after the two lookup sections. Sections: IPv4 and IPv6 lookup rates (uniform random,
//! inside random prefixes, Zipf over prefixes; 1 thread, and 2 on a pool of
//! long-lived workers pinned to their own cores), memory per
//! prefix, measured false-positive rates, the paper's Fig. 1 sweep (FPR
//! target x hash choice), the DPCPE levels sweep (Table 4 / Fig. 7) and the
//! LINX update replay with oracle checks after every batch. A JSON copy of
//! every figure goes to `$TMPDIR/nexthop-lpm-bench.json`.
//!
//! With `--features dpdk` (needs libdpdk-dev) the lookup sections also run
//! DPDK 22.11's `rte_lpm` (IPv4) and `rte_lpm6` (IPv6) bulk lookups on the
//! same streams, alternating with the others, and print the ratios
//! batched Bloomfwd / rte_lpm and Bloomfwd-v6 / rte_lpm6. Every run prints
//! batched Bloomfwd / MIHT per family, against the target of 3.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use nexthop_lpm::bloomfwd::{GroupKey, Probe, PARALLEL_SHARE, V6_DIRECT_BITS};
use nexthop_lpm::dir248::Dir248;
use nexthop_lpm::miht::{Miht4, Miht6};
use nexthop_lpm::parse::{load_routes, load_updates, AnyPrefix, NextHopMode, UpdateKind};
use nexthop_lpm::persist::DEFAULT_V6_LEVELS;
use nexthop_lpm::{Address, BinaryTrie, BloomfwdControl, Config, HashKind, NextHop, Prefix};
use nexthop_testutil::bench::median;
use nexthop_testutil::Pool;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde_json::{json, Value};

fn data(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(name);
    assert!(p.exists(), "data file {name} not found at {}", p.display());
    p
}

/// Million lookups per second of `f` over `n` addresses.
fn rate(n: usize, f: impl FnOnce() -> u64) -> (f64, u64) {
    let s = Instant::now();
    let sum = f();
    (n as f64 / s.elapsed().as_secs_f64() / 1e6, sum)
}

/// `f` over `a` and `o` on every worker of `pool` at once, in shares of
/// [`PARALLEL_SHARE`] addresses that each worker claims from a shared
/// counter until none is left (as `Bloomfwd::lookup_parallel` does), and
/// sums each share's next hops as it goes (the checksum every runner
/// returns, so no serial pass follows the lookups); returns the sum. The
/// pool's workers are long-lived, pinned and polling, like a forwarder's:
/// spawning threads for every timed call measured the VM's thread wake-up,
/// not the lookups (see `nexthop_testutil::pool`). Shares rather than one
/// contiguous half per worker: on this VM one vCPU ran the same half of
/// the IPv6 uniform stream in 4.3–5.2 ms where the other took 2.4–2.6
/// (which vCPU changed between processes), and halves made the two-thread
/// time that of the slower core (docs/benchmarks.md, "LPM on two cores").
fn on_pool<A: Sync>(
    pool: &Pool,
    a: &[A],
    o: &mut [NextHop],
    f: impl Fn(&[A], &mut [NextHop]) + Sync,
) -> u64 {
    let parts: Vec<Mutex<(&[A], &mut [NextHop])>> = a
        .chunks(PARALLEL_SHARE)
        .zip(o.chunks_mut(PARALLEL_SHARE))
        .map(Mutex::new)
        .collect();
    let (next, sum) = (AtomicUsize::new(0), AtomicU64::new(0));
    pool.run(&|_| {
        let mut mine = 0u64;
        while let Some(p) = parts.get(next.fetch_add(1, Ordering::Relaxed)) {
            let mut g = p.lock().unwrap_or_else(PoisonError::into_inner);
            let (x, y) = &mut *g;
            f(x, y);
            mine = mine.wrapping_add(checksum(y));
        }
        sum.fetch_add(mine, Ordering::Relaxed);
    });
    sum.load(Ordering::Relaxed)
}

/// `f` over `a` and `o` on worker `w` of `pool` alone (the other workers
/// poll meanwhile, as they do while the calling thread, worker 0, runs a
/// one-thread runner).
fn on_worker<A: Sync>(
    pool: &Pool,
    w: usize,
    a: &[A],
    o: &mut [NextHop],
    f: &(dyn Fn(&[A], &mut [NextHop]) -> u64 + Sync + '_),
) -> u64 {
    let o = Mutex::new(o);
    let sum = AtomicU64::new(0);
    pool.run(&|me| {
        if me == w {
            let mut g = o.lock().unwrap_or_else(PoisonError::into_inner);
            sum.store(f(a, &mut g), Ordering::Relaxed);
        }
    });
    sum.load(Ordering::Relaxed)
}

fn inside<A: Address>(r: &mut impl Rng, p: Prefix<A>) -> A {
    let host: u128 = r.gen();
    let host = match p.len() {
        0 => host,
        l if l >= A::BITS => 0,
        l => host & ((1u128 << (A::BITS - l)) - 1),
    };
    A::from_u128(p.addr().to_u128() | host)
}

/// The three address streams.
fn streams<A: Address>(
    seed: u64,
    routes: &[(Prefix<A>, NextHop)],
    n: usize,
) -> Vec<(&'static str, Vec<A>)> {
    let mut r = Xoshiro256PlusPlus::seed_from_u64(seed);
    let uniform = (0..n).map(|_| A::from_u128(r.gen())).collect();
    let inside_v = (0..n)
        .map(|_| {
            let i = r.gen_range(0..routes.len());
            inside(&mut r, routes[i].0)
        })
        .collect();
    // Zipf (s = 1) over prefixes in a random order.
    let mut order: Vec<usize> = (0..routes.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, r.gen_range(0..=i));
    }
    let mut cdf = Vec::with_capacity(routes.len());
    let mut acc = 0.0;
    for k in 1..=routes.len() {
        acc += 1.0 / k as f64;
        cdf.push(acc);
    }
    let zipf = (0..n)
        .map(|_| {
            let u = r.gen::<f64>() * acc;
            let k = cdf.partition_point(|&c| c < u).min(routes.len() - 1);
            inside(&mut r, routes[order[k]].0)
        })
        .collect();
    vec![("uniform", uniform), ("inside", inside_v), ("zipf", zipf)]
}

type Runner<'a, A> = (
    &'static str,
    Box<dyn Fn(&[A], &mut [NextHop]) -> u64 + Sync + 'a>,
);

/// Run every structure on every stream, alternating, `reps` times; print a
/// table of median Mlps and ratios to the first runner.
fn compare<A: Address>(
    title: &str,
    streams: &[(&'static str, Vec<A>)],
    runners: &[Runner<'_, A>],
    reps: usize,
) -> Value {
    let mut out = Vec::new();
    println!("\n### {title}\n");
    print!("| stream |");
    for (name, _) in runners {
        print!(" {name} Mlps |");
    }
    println!();
    print!("| --- |");
    for _ in runners {
        print!(" ---: |");
    }
    println!();
    for (sname, addrs) in streams {
        let mut res = vec![Vec::new(); runners.len()];
        let mut buf = vec![0; addrs.len()];
        let mut sums = vec![0u64; runners.len()];
        for _ in 0..reps {
            for (i, (_, f)) in runners.iter().enumerate() {
                let (mlps, s) = rate(addrs.len(), || f(addrs, &mut buf));
                res[i].push(mlps);
                sums[i] = s;
            }
        }
        // Every structure must give the same answers.
        for (i, s) in sums.iter().enumerate() {
            assert_eq!(
                *s, sums[0],
                "{} disagrees with {} on {sname}",
                runners[i].0, runners[0].0
            );
        }
        let med: Vec<f64> = res.into_iter().map(median).collect();
        print!("| {sname} |");
        for m in &med {
            print!(" {:.1} ({:.2}x) |", m, m / med[0]);
        }
        println!();
        out.push(json!({ "stream": sname, "mlps": runners.iter().zip(&med).map(|((n, _), m)| json!({"name": n, "median": m})).collect::<Vec<_>>() }));
    }
    json!({ "title": title, "rows": out })
}

/// Print and return batched Bloomfwd on both cores / on one core (issue
/// target >= 1.8), measured in triples: per stream, `rounds` times the
/// one-thread runner alone on each of the pool's workers (each pinned to
/// its own core) and the two-thread runner, back to back in turn, one
/// ratio per triple: the two-thread rate over the mean of the one-core
/// rates, and the median of those ratios. The mean, not worker 0's rate:
/// this VM's two vCPUs ran the same lookups up to 2x apart, which of the
/// two was slower changing between processes, so "one core" is the
/// average core and a slow worker 0 would flatter the ratio as a fast one
/// would spoil it. The per-worker medians are printed beside the ratio.
/// Medians taken apart, across the other structures' runs, moved with the
/// VM's phases (one run in four read 1.36 where the next read 2.0).
fn report_two_threads<A: Sync>(
    pool: &Pool,
    streams: &[(&'static str, Vec<A>)],
    runners: &[Runner<'_, A>],
    rounds: usize,
) -> Value {
    let find = |name: &str| {
        runners
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| f)
            .unwrap_or_else(|| panic!("no runner {name}"))
    };
    let (one, two) = (find("bloomfwd-batch"), find("bloomfwd-batch-2t"));
    let workers = pool.threads();
    println!(
        "\nbloomfwd-batch-2t / bloomfwd-batch on one core (mean of the {workers} workers alone), \
         {rounds} rounds (issue target >= 1.8):"
    );
    let mut out = Vec::new();
    for (sname, addrs) in streams {
        let mut buf = vec![0; addrs.len()];
        let mut r = Vec::with_capacity(rounds);
        let mut solo = vec![Vec::with_capacity(rounds); workers];
        for k in 0..rounds {
            // Steps 0..workers: one worker alone; step `workers`: all.
            let mut both = 0.0;
            for step in (0..=workers).map(|i| (i + k) % (workers + 1)) {
                if step == workers {
                    both = rate(addrs.len(), || two(addrs, &mut buf)).0;
                } else {
                    let x = rate(addrs.len(), || {
                        on_worker(pool, step, addrs, &mut buf, &**one)
                    });
                    solo[step].push(x.0);
                }
            }
            let mean = solo.iter().map(|s| s[k]).sum::<f64>() / workers as f64;
            r.push(both / mean);
        }
        let (lo, hi) = r
            .iter()
            .fold((f64::MAX, 0f64), |(l, h), &x| (l.min(x), h.max(x)));
        let m = median(r);
        let solo: Vec<f64> = solo.into_iter().map(median).collect();
        let each: Vec<String> = solo.iter().map(|x| format!("{x:.1}")).collect();
        println!(
            "  {sname} {m:.2} ({lo:.2}-{hi:.2}); one core alone, per worker: {} Mlps",
            each.join(" / ")
        );
        out.push(json!({"stream": sname, "ratio": m, "min": lo, "max": hi, "rounds": rounds, "solo_mlps": solo}));
    }
    json!(out)
}

/// Per stream, median Mlps of runner `num` over runner `den` in a
/// `compare` result.
fn ratios(section: &Value, num: &str, den: &str) -> Vec<(String, f64)> {
    let rows = section["rows"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    rows.iter()
        .filter_map(|row| {
            let get = |name: &str| {
                row["mlps"].as_array()?.iter().find(|m| m["name"] == name)?["median"].as_f64()
            };
            Some((row["stream"].as_str()?.to_owned(), get(num)? / get(den)?))
        })
        .collect()
}

/// Print and return the ratios of two runners of one section (Bloomfwd
/// over DPDK or over MIHT) against an issue target.
fn report_ratios(section: &Value, num: &str, den: &str, target: f64) -> Value {
    let r = ratios(section, num, den);
    print!("\n{num} / {den} (issue target >= {target}):");
    for (stream, x) in &r {
        print!(
            " {stream} {x:.2}{}",
            if *x >= target { "" } else { " (below)" }
        );
    }
    println!();
    json!({"num": num, "den": den, "target": target,
           "ratios": r.iter().map(|(s, x)| json!({"stream": s, "ratio": x})).collect::<Vec<_>>()})
}

/// The lookup floor per stream: mean cache lines `Bloomfwd::probe_cost`
/// counts (summary, direct slot, sub-mask, filter blocks, table lines; and the
/// groups probed, one hash each) over the first 200,000 addresses of each
/// stream.
fn floor<A: GroupKey>(
    title: &str,
    t: &BloomfwdControl<A>,
    streams: &[(&'static str, Vec<A>)],
) -> Value {
    println!("\n### Lookup floor, {title} (mean cache lines per lookup)\n");
    println!("| stream | probe order | groups probed (= hashes) | summary (L2) | direct | sub-mask | filter blocks | table lines | total lines |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut rows = Vec::new();
    for probe in [Probe::Masks, Probe::FiltersFirst] {
        let mut tt = t.table().clone();
        tt.set_probe(probe);
        for (sname, addrs) in streams {
            let n = addrs.len().min(200_000);
            let (mut grp, mut dir, mut fine, mut filt, mut tab) = (0u64, 0u64, 0u64, 0u64, 0u64);
            let mut sum = 0u64;
            for &a in &addrs[..n] {
                let c = tt.probe_cost(a);
                sum += c.summary as u64;
                grp += c.groups as u64;
                dir += c.direct as u64;
                fine += c.fine as u64;
                filt += c.filters as u64;
                tab += c.table_lines as u64;
            }
            let m = |x: u64| x as f64 / n.max(1) as f64;
            let total = m(sum) + m(dir) + m(fine) + m(filt) + m(tab);
            println!(
                "| {sname} | {probe:?} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
                m(grp),
                m(sum),
                m(dir),
                m(fine),
                m(filt),
                m(tab),
                total
            );
            rows.push(json!({"stream": sname, "probe": format!("{probe:?}"), "groups": m(grp), "summary": m(sum), "direct": m(dir), "fine": m(fine), "filters": m(filt), "table_lines": m(tab), "total": total}));
        }
    }
    json!({"title": title, "rows": rows})
}

/// Batched lookups of one stream for `secs` seconds; prints the rate.
fn spin<A: GroupKey>(
    t: &BloomfwdControl<A>,
    streams: &[(&'static str, Vec<A>)],
    stream: &str,
    secs: f64,
) {
    let Some((_, addrs)) = streams.iter().find(|(s, _)| *s == stream) else {
        panic!("no stream {stream} (uniform, inside, zipf)");
    };
    let mut out = vec![0; addrs.len()];
    // This thread's CPU time in ns (Linux schedstat; 0 elsewhere): on a
    // loaded machine the rate per CPU second is steadier than per wall
    // second.
    let cpu_ns = || {
        std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|x| x.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let (s, c0, mut done, mut sum) = (Instant::now(), cpu_ns(), 0usize, 0u64);
    while s.elapsed().as_secs_f64() < secs {
        t.table().lookup_batch(addrs, &mut out);
        sum = sum.wrapping_add(checksum(&out));
        done += addrs.len();
    }
    let cpu = (cpu_ns() - c0) as f64;
    println!(
        "{stream}: {:.1} Mlps wall, {:.1} Mlps per CPU second ({:.1} ns CPU/lookup; checksum {sum})",
        done as f64 / s.elapsed().as_secs_f64() / 1e6,
        done as f64 / cpu * 1e3,
        cpu / done as f64
    );
}

/// [`report_two_threads`] alone, on a pool of its own.
fn two_threads_only<A: GroupKey>(
    t: &BloomfwdControl<A>,
    streams: &[(&'static str, Vec<A>)],
    rounds: usize,
) {
    let pool = Pool::new(2);
    let mut runners = bloom_runners(t);
    runners.push(bloom_on_pool(&pool, t));
    report_two_threads(&pool, streams, &runners, rounds);
}

/// The `bloomfwd-batch-2t` runner: batched lookups of `t` on every worker
/// of `pool` ([`on_pool`]).
fn bloom_on_pool<'a, A: GroupKey>(pool: &'a Pool, t: &'a BloomfwdControl<A>) -> Runner<'a, A> {
    (
        "bloomfwd-batch-2t",
        Box::new(move |a: &[A], o: &mut [NextHop]| {
            on_pool(pool, a, o, |x, y| {
                t.table().lookup_batch(x, y);
            })
        }),
    )
}

fn checksum(out: &[NextHop]) -> u64 {
    out.iter().map(|&x| x as u64).sum()
}

fn bloom_runners<'a, A: GroupKey>(t: &'a BloomfwdControl<A>) -> Vec<Runner<'a, A>> {
    vec![
        (
            "bloomfwd-batch",
            Box::new(move |a: &[A], o: &mut [NextHop]| {
                t.table().lookup_batch(a, o);
                checksum(o)
            }),
        ),
        (
            "bloomfwd-single",
            Box::new(move |a: &[A], o: &mut [NextHop]| {
                for (x, y) in a.iter().zip(o.iter_mut()) {
                    *y = t.lookup(*x).unwrap_or(u32::MAX);
                }
                checksum(o)
            }),
        ),
    ]
}

fn main() {
    let smoke = std::env::args().any(|a| a == "--smoke");
    let lookups_only = std::env::args().any(|a| a == "--lookups");
    let (n, reps) = if smoke { (20_000, 1) } else { (2_000_000, 5) };
    let mut report = serde_json::Map::new();
    let v4 = load_routes(&data("routeviews-20151101-ipv4.txt.gz"), NextHopMode::Asn)
        .unwrap_or_else(|e| panic!("{e}"));
    let v6 = load_routes(&data("routeviews-20151101-ipv6.txt.gz"), NextHopMode::Asn)
        .unwrap_or_else(|e| panic!("{e}"));
    let (r4, r6) = (v4.v4, v6.v6);
    // `--spin v4|v6 STREAM SECONDS [FPR [HASH]]`: batched Bloomfwd lookups
    // of one stream in a loop, nothing else (for `perf record` and quick
    // A/B runs).
    let args: Vec<String> = std::env::args().collect();
    // `--pair v4|v6 [ROUNDS]`: only the two-thread rounds of the lookup
    // section (bloomfwd-batch alone on each worker against
    // bloomfwd-batch-2t, every stream), for quick A/B runs of the scaling.
    if let Some(i) = args.iter().position(|a| a == "--pair") {
        let fam = args.get(i + 1).map_or("v4", String::as_str);
        let rounds: usize = args.get(i + 2).and_then(|x| x.parse().ok()).unwrap_or(15);
        if fam == "v6" {
            let c = Config::ipv6_dpcpe(&r6, DEFAULT_V6_LEVELS);
            let t = BloomfwdControl::build(c, &r6).expect("valid");
            two_threads_only(&t, &streams(2, &r6, n), rounds);
        } else {
            let t = BloomfwdControl::build(Config::ipv4(), &r4).expect("valid");
            two_threads_only(&t, &streams(1, &r4, n), rounds);
        }
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--spin") {
        let fam = args.get(i + 1).map_or("v4", String::as_str);
        let stream = args.get(i + 2).map_or("inside", String::as_str);
        let secs: f64 = args.get(i + 3).and_then(|x| x.parse().ok()).unwrap_or(10.0);
        // Optional FPR target and hash (both stages) instead of the defaults.
        let fpr: Option<f64> = args.get(i + 4).and_then(|x| x.parse().ok());
        let hash: Option<HashKind> = args.get(i + 5).and_then(|x| x.parse().ok());
        let adjust = |mut c: Config| {
            c.fpr = fpr.unwrap_or(c.fpr);
            c.filter_hash = hash.unwrap_or(c.filter_hash);
            c.table_hash = hash.unwrap_or(c.table_hash);
            c
        };
        if fam == "v6" {
            let c = adjust(Config::ipv6_dpcpe(&r6, DEFAULT_V6_LEVELS));
            let t = BloomfwdControl::build(c, &r6).expect("valid");
            spin(&t, &streams(2, &r6, n), stream, secs);
        } else {
            let t = BloomfwdControl::build(adjust(Config::ipv4()), &r4).expect("valid");
            spin(&t, &streams(1, &r4, n), stream, secs);
        }
        return;
    }
    println!(
        "tables: {} IPv4, {} IPv6 prefixes; {n} addresses per stream, {reps} repetitions",
        r4.len(),
        r6.len()
    );

    // ---------------- IPv4
    let s = Instant::now();
    let bf4 = BloomfwdControl::build(Config::ipv4(), &r4).expect("valid");
    let t_bf = s.elapsed().as_secs_f64();
    let d = Dir248::build(&r4).expect("asn next hops fit");
    let m4 = Miht4::build(&r4);
    let mut trie4 = BinaryTrie::new();
    for &(p, nh) in &r4 {
        trie4.insert(p, nh);
    }
    let st4 = streams(1, &r4, n);
    #[cfg(feature = "dpdk")]
    let dpdk4 = {
        let s = Instant::now();
        let t = nexthop_lpm::dpdk::DpdkLpm4::from_routes(&r4).unwrap_or_else(|e| panic!("{e}"));
        println!(
            "DPDK rte_lpm build: {:.2} s (Bloomfwd: {t_bf:.2} s)",
            s.elapsed().as_secs_f64()
        );
        t
    };
    report.insert("floor_ipv4".into(), floor("IPv4", &bf4, &st4));
    let bf4m = {
        let mut c = Config::ipv4();
        c.filter_hash = HashKind::Mix64;
        c.table_hash = HashKind::Mix64;
        BloomfwdControl::build(c, &r4).expect("valid")
    };
    // The other batch probe order (the default is masks).
    let mut bf4_ff = bf4.table().clone();
    bf4_ff.set_probe(Probe::FiltersFirst);
    let pool = Pool::new(2);
    let mut runners = bloom_runners(&bf4);
    runners.push(bloom_on_pool(&pool, &bf4));
    runners.push((
        "bloomfwd-batch mix64",
        Box::new(|a: &[u32], o: &mut [NextHop]| {
            bf4m.table().lookup_batch(a, o);
            checksum(o)
        }),
    ));
    runners.push((
        "bloomfwd-batch filters-first",
        Box::new(|a: &[u32], o: &mut [NextHop]| {
            bf4_ff.lookup_batch(a, o);
            checksum(o)
        }),
    ));
    runners.push((
        "dir-24-8",
        Box::new(|a: &[u32], o: &mut [NextHop]| {
            d.lookup_batch(a, o);
            checksum(o)
        }),
    ));
    runners.push((
        "dir-24-8-2t",
        Box::new(|a: &[u32], o: &mut [NextHop]| {
            on_pool(&pool, a, o, |x, y| {
                d.lookup_batch(x, y);
            })
        }),
    ));
    runners.push((
        "miht",
        Box::new(|a: &[u32], o: &mut [NextHop]| {
            m4.lookup_batch(a, o);
            checksum(o)
        }),
    ));
    #[cfg(feature = "dpdk")]
    runners.push((
        "dpdk rte_lpm",
        Box::new(|a: &[u32], o: &mut [NextHop]| {
            dpdk4.lookup_bulk(a, o);
            checksum(o)
        }),
    ));
    runners.push((
        "trie",
        Box::new(|a: &[u32], o: &mut [NextHop]| {
            for (x, y) in a.iter().zip(o.iter_mut()) {
                *y = trie4.lookup(*x).unwrap_or(u32::MAX);
            }
            checksum(o)
        }),
    ));
    let sec4 = compare("IPv4 lookups (2015 RouteViews table)", &st4, &runners, reps);
    #[cfg(feature = "dpdk")]
    report.insert(
        "dpdk_ipv4_ratio".into(),
        report_ratios(&sec4, "bloomfwd-batch", "dpdk rte_lpm", 0.65),
    );
    report.insert(
        "miht_ipv4_ratio".into(),
        report_ratios(&sec4, "bloomfwd-batch", "miht", 3.0),
    );
    report.insert(
        "ipv4_two_threads".into(),
        report_two_threads(&pool, &st4, &runners, 3 * reps),
    );
    report.insert("ipv4".into(), sec4);
    drop(runners);
    drop(pool);
    // Memory of the DPDK tables, printed with the others below.
    #[allow(unused_mut)]
    let mut dpdk_mem: Vec<(&str, usize, usize)> = Vec::new();
    #[cfg(feature = "dpdk")]
    dpdk_mem.push(("dpdk rte_lpm (DPDK heap)", dpdk4.memory_bytes(), r4.len()));
    #[cfg(feature = "dpdk")]
    drop(dpdk4);

    // ---------------- IPv6
    let bf6 =
        BloomfwdControl::build(Config::ipv6_dpcpe(&r6, DEFAULT_V6_LEVELS), &r6).expect("valid");
    let m6 = Miht6::build(&r6);
    let mut trie6 = BinaryTrie::new();
    for &(p, nh) in &r6 {
        trie6.insert(p, nh);
    }
    let st6 = streams(2, &r6, n);
    #[cfg(feature = "dpdk")]
    let dpdk6 = {
        let s = Instant::now();
        let t = nexthop_lpm::dpdk::DpdkLpm6::from_routes(&r6).unwrap_or_else(|e| panic!("{e}"));
        println!("DPDK rte_lpm6 build: {:.2} s", s.elapsed().as_secs_f64());
        t
    };
    report.insert("floor_ipv6".into(), floor("IPv6", &bf6, &st6));
    // The other hash choices, same levels (identical answers, checked).
    let bf6_with = |h: HashKind| {
        let mut c = bf6.config().clone();
        c.filter_hash = h;
        c.table_hash = h;
        BloomfwdControl::build(c, &r6).expect("valid")
    };
    let (bf6m, bf6u) = (bf6_with(HashKind::Mix64), bf6_with(HashKind::Murmur3));
    let pool = Pool::new(2);
    let mut runners = bloom_runners(&bf6);
    runners.push(bloom_on_pool(&pool, &bf6));
    runners.push((
        "bloomfwd-batch mix64",
        Box::new(|a: &[u128], o: &mut [NextHop]| {
            bf6m.table().lookup_batch(a, o);
            checksum(o)
        }),
    ));
    runners.push((
        "bloomfwd-batch murmur3",
        Box::new(|a: &[u128], o: &mut [NextHop]| {
            bf6u.table().lookup_batch(a, o);
            checksum(o)
        }),
    ));
    runners.push((
        "miht6",
        Box::new(|a: &[u128], o: &mut [NextHop]| {
            m6.lookup_batch(a, o);
            checksum(o)
        }),
    ));
    #[cfg(feature = "dpdk")]
    runners.push((
        "dpdk rte_lpm6",
        Box::new(|a: &[u128], o: &mut [NextHop]| {
            dpdk6.lookup_bulk(a, o);
            checksum(o)
        }),
    ));
    runners.push((
        "trie",
        Box::new(|a: &[u128], o: &mut [NextHop]| {
            for (x, y) in a.iter().zip(o.iter_mut()) {
                *y = trie6.lookup(*x).unwrap_or(u32::MAX);
            }
            checksum(o)
        }),
    ));
    let sec6 = compare(
        &format!(
            "IPv6 lookups (DPCPE {DEFAULT_V6_LEVELS} levels {:?}, direct /{})",
            bf6.config().levels,
            bf6.config().direct_bits
        ),
        &st6,
        &runners,
        reps,
    );
    #[cfg(feature = "dpdk")]
    report.insert(
        "dpdk_ipv6_ratio".into(),
        report_ratios(&sec6, "bloomfwd-batch", "dpdk rte_lpm6", 1.0),
    );
    report.insert(
        "miht_ipv6_ratio".into(),
        report_ratios(&sec6, "bloomfwd-batch", "miht6", 3.0),
    );
    report.insert(
        "ipv6_two_threads".into(),
        report_two_threads(&pool, &st6, &runners, 3 * reps),
    );
    report.insert("ipv6".into(), sec6);
    drop(runners);
    drop(pool);
    #[cfg(feature = "dpdk")]
    dpdk_mem.push(("dpdk rte_lpm6 (DPDK heap)", dpdk6.memory_bytes(), r6.len()));
    #[cfg(feature = "dpdk")]
    drop(dpdk6);
    if lookups_only {
        write_report(report);
        return;
    }

    // ---------------- memory and FPR
    println!("\n### Memory per prefix and measured false-positive rate\n");
    println!("| structure | bytes | bytes/prefix |");
    println!("| --- | ---: | ---: |");
    let mut mem = vec![
        (
            "bloomfwd v4 (lookup part)",
            bf4.table().memory_bytes(),
            r4.len(),
        ),
        ("dir-24-8", d.memory_bytes(), r4.len()),
        ("miht v4", m4.memory_bytes(), r4.len()),
        ("binary trie v4", trie4.memory_bytes(), r4.len()),
        (
            "bloomfwd v6 (lookup part)",
            bf6.table().memory_bytes(),
            r6.len(),
        ),
        ("miht v6", m6.memory_bytes(), r6.len()),
        ("binary trie v6", trie6.memory_bytes(), r6.len()),
    ];
    mem.extend(dpdk_mem);
    for &(name, b, p) in &mem {
        println!("| {name} | {b} | {:.1} |", b as f64 / p as f64);
    }
    report.insert(
        "memory".into(),
        json!(mem
            .iter()
            .map(|(n, b, p)| json!({"name": n, "bytes": b, "prefixes": p}))
            .collect::<Vec<_>>()),
    );
    let samples = if smoke { 20_000 } else { 1_000_000 };
    println!(
        "\n| table | group | prefixes | expanded | filter bits | k | measured FPR (target 0.30) |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: |");
    let f4 = bf4.measure_fpr(samples, 7);
    for (g, f) in bf4.group_stats().iter().zip(&f4) {
        println!(
            "| v4 | /{}../{} | {} | {} | {} | {} | {:.4} |",
            g.lo, g.level, g.prefixes, g.expanded, g.filter_bits, g.hashes, f
        );
    }
    let f6 = bf6.measure_fpr(samples, 7);
    for (g, f) in bf6.group_stats().iter().zip(&f6) {
        println!(
            "| v6 | /{}../{} | {} | {} | {} | {} | {:.4} |",
            g.lo, g.level, g.prefixes, g.expanded, g.filter_bits, g.hashes, f
        );
    }
    println!("\nIPv4 Bloomfwd build: {t_bf:.2} s");

    // ---------------- Fig. 1: FPR target x hash choice (uniform stream)
    let fprs: &[f64] = if smoke {
        &[0.01, 0.3, 0.9]
    } else {
        &[0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 0.9]
    };
    let hashes = [
        ("H2+H2", HashKind::H2, HashKind::H2),
        ("Murmur+Murmur", HashKind::Murmur3, HashKind::Murmur3),
        ("Murmur+H2", HashKind::Murmur3, HashKind::H2),
        ("H2+Murmur", HashKind::H2, HashKind::Murmur3),
        ("Knuth+Knuth", HashKind::Knuth, HashKind::Knuth),
    ];
    println!(
        "\n### Fig. 1 sweep: IPv4 batched Mlps, uniform / inside-prefix streams (measured /32-group FPR)\n"
    );
    print!("| FPR target |");
    for (h, _, _) in &hashes {
        print!(" {h} |");
    }
    println!();
    print!("| ---: |");
    for _ in &hashes {
        print!(" ---: |");
    }
    println!();
    let (uni, ins) = (&st4[0].1, &st4[1].1);
    let mut fig1 = Vec::new();
    let mut buf = vec![0; uni.len().max(ins.len())];
    for &f in fprs {
        print!("| {f} |");
        for &(h, fh, th) in &hashes {
            let mut cfg = Config::ipv4();
            cfg.fpr = f;
            cfg.filter_hash = fh;
            cfg.table_hash = th;
            let t = BloomfwdControl::build(cfg, &r4).expect("valid");
            let mlps = |st: &[u32], buf: &mut [NextHop]| {
                median(
                    (0..reps)
                        .map(|_| rate(st.len(), || t.table().lookup_batch(st, buf) as u64).0)
                        .collect::<Vec<_>>(),
                )
            };
            let (m, mi) = (mlps(uni, &mut buf), mlps(ins, &mut buf));
            let fpr = t.measure_fpr(samples / 4, 3);
            print!(" {m:.1} / {mi:.1} ({:.3}) |", fpr[1]);
            fig1.push(json!({"fpr_target": f, "hash": h, "mlps": m, "inside_mlps": mi, "measured_fpr": fpr}));
        }
        println!();
    }
    report.insert("fig1".into(), json!(fig1));

    // ---------------- DPCPE levels sweep (Table 4 / Fig. 7)
    println!("\n### DPCPE levels sweep: IPv6 (estimated vs actual prefixes after expansion, batched Mlps)\n");
    println!(
        "| levels | chosen | estimated | actual | lookup bytes | uniform Mlps | inside Mlps |"
    );
    println!("| ---: | --- | ---: | ---: | ---: | ---: | ---: |");
    let mut counts = vec![0u64; 129];
    for (p, _) in &r6 {
        counts[p.len() as usize] += 1;
    }
    let mut sweep = Vec::new();
    let distinct = counts.iter().skip(1).filter(|&&c| c > 0).count();
    let mut ns: Vec<usize> = if smoke {
        vec![3, 5]
    } else {
        (2..=12).collect()
    };
    ns.push(distinct);
    for nl in ns {
        let Some(plan) = nexthop_lpm::dpcpe::choose_levels(&counts, V6_DIRECT_BITS, nl) else {
            continue;
        };
        let est = plan.estimated;
        if est > 50_000_000 {
            println!("| {nl} | {:?} | {est} | (not built) | | | |", plan.levels);
            continue;
        }
        let t = BloomfwdControl::build(Config::ipv6(plan.levels.clone()), &r6).expect("valid");
        let actual: usize =
            t.group_stats().iter().map(|g| g.expanded).sum::<usize>() + t.direct_prefixes();
        let mut buf = vec![0; n];
        let mu = median(
            (0..reps)
                .map(|_| rate(n, || t.table().lookup_batch(&st6[0].1, &mut buf) as u64).0)
                .collect::<Vec<_>>(),
        );
        let mi = median(
            (0..reps)
                .map(|_| rate(n, || t.table().lookup_batch(&st6[1].1, &mut buf) as u64).0)
                .collect::<Vec<_>>(),
        );
        let label = if nl == distinct {
            format!("{nl} (no CPE)")
        } else {
            nl.to_string()
        };
        println!(
            "| {label} | {:?} | {est} | {actual} | {} | {mu:.1} | {mi:.1} |",
            plan.levels,
            t.table().memory_bytes()
        );
        sweep.push(json!({"levels": nl, "chosen": plan.levels, "estimated": est as f64, "actual": actual, "uniform_mlps": mu, "inside_mlps": mi}));
    }
    report.insert("dpcpe".into(), json!(sweep));

    // ---------------- LINX replay
    let updates = load_updates(&data("linx-bgp-updates-20141217-ipv4.txt.gz"))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut t = BloomfwdControl::build(Config::ipv4(), &r4).expect("valid");
    let mut oracle = trie4.clone();
    let mut r = Xoshiro256PlusPlus::seed_from_u64(5);
    let (mut applied, mut secs, mut checked) = (0usize, 0.0f64, 0usize);
    let batch = 1000;
    for chunk in updates.chunks(batch) {
        let ops: Vec<_> = chunk
            .iter()
            .filter_map(|u| match u.prefix {
                AnyPrefix::V4(p) => Some((p, u.kind)),
                AnyPrefix::V6(_) => None,
            })
            .collect();
        let s = Instant::now();
        for &(p, k) in &ops {
            match k {
                UpdateKind::Announce(nh) => {
                    t.announce(p, nh);
                }
                UpdateKind::Withdraw => {
                    t.withdraw(p);
                }
            }
        }
        secs += s.elapsed().as_secs_f64();
        applied += ops.len();
        for &(p, k) in &ops {
            match k {
                UpdateKind::Announce(nh) => {
                    oracle.insert(p, nh);
                }
                UpdateKind::Withdraw => {
                    oracle.remove(p);
                }
            }
        }
        // Oracle check after every batch: the updated prefixes and random
        // addresses inside table prefixes.
        for &(p, _) in &ops {
            for a in [p.addr(), inside(&mut r, p)] {
                assert_eq!(t.lookup(a), oracle.lookup(a), "after LINX batch, {a:#x}");
                checked += 1;
            }
        }
        for _ in 0..if smoke { 100 } else { 2000 } {
            let i = r.gen_range(0..r4.len());
            let a = inside(&mut r, r4[i].0);
            assert_eq!(t.lookup(a), oracle.lookup(a));
            checked += 1;
        }
    }
    let ups = applied as f64 / secs;
    println!("\n### LINX replay on the 2015 table\n\n{applied} updates in batches of {batch}: {:.2} M updates/s (update time only); {checked} lookups checked against the oracle after the batches", ups / 1e6);
    report.insert(
        "linx".into(),
        json!({"updates": applied, "updates_per_s": ups, "checked": checked}),
    );

    write_report(report);
}

/// The JSON copy of every figure, to `$TMPDIR/nexthop-lpm-bench.json`.
fn write_report(report: serde_json::Map<String, Value>) {
    let path = std::env::temp_dir().join("nexthop-lpm-bench.json");
    if let Err(e) = std::fs::write(
        &path,
        serde_json::to_string_pretty(&Value::Object(report)).unwrap_or_default(),
    ) {
        eprintln!("{}: {e}", path.display());
    } else {
        println!("\nJSON: {}", path.display());
    }
}
