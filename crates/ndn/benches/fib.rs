//! Name FIB and fingerprint hash table benchmarks, one process, medians.
//!
//! ```text
//! cargo bench -p nexthop-ndn --bench fib -- [--smoke] [--n 1e6,1e7] [--k 7,15]
//!     [--lookups 2e6] [--rounds 5] [--fht-n 1e7] [--no-real] [--only fib|fht|real]
//!     [--phase N]
//!     (PERF_CTL_FIFO=F: see `testutil::bench::perf_ctl`)
//! ```
//!
//! * Synthetic FIBs: the worst-case two-phase set of §3.4.1 (`n` rules;
//!   every level of a `k`-component base's binary-search path is its own
//!   rule with its own entry) for each `k`, both string-matching
//!   strategies. The lookup stream is the base names, shuffled: every
//!   lookup takes `ceil(log2(k+1))` probes and matches at level `k`.
//!   Reported per round, rotating the order: one core single lookups;
//!   batched (16 names, prefetch none / first bucket / all buckets); two
//!   threads batched; linear search; hashing alone; search with
//!   precomputed hashes. Counts per lookup (bucket reads, stored-string
//!   compares) come from `Trace` on the same stream. Times are thread CPU
//!   time (the machine is shared); two threads: the sum of their rates.
//! * Real-derived sets (EasyList/EasyPrivacy hosts, TLD/site/host first):
//!   the rules, looked up with three random components appended; binary vs
//!   linear vs binary with level pulling (T = 64).
//! * Fingerprint hash table: `--fht-n` random 30-byte names, 16-bit
//!   fingerprints: bytes per name, collision table size, lookups/s.
//!
//! `--phase N` times only the N-th of the synthetic FIB's 16 variants
//! (the others print NaN), to profile one of them: 12 is the raw TLV batch
//! with every level prefetched.

use nexthop_testutil::args::count_or_exit;
use nexthop_testutil::bench::perf_ctl;
use std::hint::black_box;

use nexthop_ndn::fht::{Fht, FhtConfig};
use nexthop_ndn::names::{extend_names, real_names, Scheme, WorstCase};
use nexthop_ndn::{
    BatchScratch, Config, Fib, FibControl, Match, NameBuf, NameSlice, NameView, NextHop, Prefetch,
    Strategy, Trace,
};

struct Opts {
    smoke: bool,
    n: Vec<usize>,
    k: Vec<usize>,
    lookups: usize,
    rounds: usize,
    fht_n: usize,
    real: bool,
    only: Option<String>,
    control: bool,
    one_strategy: bool,
    /// Only this one of the 16 timed variants per FIB (for `perf`).
    phase: Option<usize>,
}

fn opts() -> Opts {
    let mut o = Opts {
        smoke: false,
        n: vec![1_000_000, 10_000_000],
        k: vec![7, 15],
        lookups: 2_000_000,
        rounds: 5,
        fht_n: 10_000_000,
        real: true,
        only: None,
        control: false,
        one_strategy: false,
        phase: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--smoke" => {
                o.smoke = true;
                o.n = vec![20_000];
                o.k = vec![7];
                o.lookups = 20_000;
                o.rounds = 1;
                o.fht_n = 100_000;
                o.real = false;
                i += 1;
                continue;
            }
            "--n" => o.n = v.split(',').map(count_or_exit).collect(),
            "--k" => o.k = v.split(',').map(count_or_exit).collect(),
            "--lookups" => o.lookups = count_or_exit(&v),
            "--rounds" => o.rounds = count_or_exit(&v),
            "--phase" => o.phase = Some(count_or_exit(&v)),
            "--fht-n" => o.fht_n = count_or_exit(&v),
            "--only" => o.only = Some(v),
            "--control" => {
                o.control = true;
                i += 1;
                continue;
            }
            "--verify-each-only" => {
                o.one_strategy = true;
                i += 1;
                continue;
            }
            "--no-real" => {
                o.real = false;
                i += 1;
                continue;
            }
            "--bench" => {
                i += 1;
                continue;
            }
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    o
}

/// CPU seconds this thread has run: the machine is shared, so time spent
/// descheduled is not counted.
use nexthop_testutil::bench::median;
use nexthop_testutil::thread_cpu_secs as cpu_now;

fn cpu_since(t: f64) -> f64 {
    (cpu_now() - t).max(1e-9)
}

/// Lookups per second of `f` over `names` (returns Mops).
fn rate(names: &[NameBuf], mut f: impl FnMut(&[NameBuf]) -> usize) -> f64 {
    perf_ctl("enable");
    let t = cpu_now();
    black_box(f(names));
    let dt = cpu_since(t);
    perf_ctl("disable");
    names.len() as f64 / dt / 1e6
}

fn stream(trace: &[NameBuf], lookups: usize) -> Vec<NameBuf> {
    trace.iter().cycle().take(lookups.max(1)).cloned().collect()
}

/// A `/proc/self/status` size field (`VmHWM`, `VmRSS`) in bytes, 0 if absent.
fn status_bytes(field: &str) -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<usize>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Peak resident set of this process so far (`VmHWM`), bytes.
fn peak_rss() -> usize {
    status_bytes("VmHWM")
}

/// Resident set of this process now (`VmRSS`), bytes.
fn rss_now() -> usize {
    status_bytes("VmRSS")
}

/// Both cores: the sum of two threads' rates (Mops), each running `f` on
/// its half of `items` and timed on its own thread CPU time.
fn two_thread_rate<T: Sync>(items: &[T], f: impl Fn(&[T]) + Sync) -> f64 {
    let half = items.len() / 2;
    let f = &f;
    std::thread::scope(|s| {
        let hs: Vec<_> = [&items[..half], &items[half..]]
            .into_iter()
            .map(|part| {
                s.spawn(move || {
                    let t = cpu_now();
                    f(part);
                    part.len() as f64 / cpu_since(t) / 1e6
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("thread"))
            .sum::<f64>()
    })
}

/// Counts heap allocations (to show which lookup paths allocate).
struct Counting;
static ALLOCS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

// SAFETY: 1. Every method forwards to the system allocator with the
// caller's arguments unchanged, so the `GlobalAlloc` contract is the
// system allocator's. 2. The counter is a relaxed atomic, which allocates
// nothing and cannot re-enter the allocator.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller upholds `alloc`'s contract for `l`.
        unsafe { std::alloc::System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
        // SAFETY: `p` came from `alloc`/`realloc` above with layout `l`.
        unsafe { std::alloc::System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: `p` came from this allocator with layout `l`; the caller
        // upholds `realloc`'s contract for `n`.
        unsafe { std::alloc::System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.load(std::sync::atomic::Ordering::Relaxed)
}

struct Built {
    fib: Fib,
    secs: f64,
    rules: usize,
    keys: usize,
    markers: usize,
    entries: usize,
    overflow: usize,
}

fn hop(i: usize) -> [NextHop; 1] {
    [NextHop {
        face: (i % 250) as u32 + 1,
        cost: 0,
    }]
}

fn build(ws: &WorstCase, k: usize, strategy: Strategy, control: bool) -> Built {
    let cfg = Config {
        max_components: k,
        strategy,
        ..Config::default()
    };
    let t = cpu_now();
    if control {
        let mut ctl = FibControl::new(cfg).expect("config");
        for (i, r) in ws.rules_iter().enumerate() {
            ctl.insert(&r, &hop(i)).expect("insert");
        }
        ctl.compact();
        let secs = cpu_since(t);
        let st = ctl.stats();
        Built {
            fib: ctl.into_fib(),
            secs,
            rules: st.rules,
            keys: st.keys,
            markers: st.markers,
            entries: st.entries,
            overflow: st.overflow_buckets,
        }
    } else {
        let (fib, st) =
            Fib::build(cfg, ws.rules_iter().enumerate().map(|(i, r)| (r, hop(i)))).expect("build");
        let secs = cpu_since(t);
        let overflow = fib.tables().iter().map(|t| t.overflow_buckets()).sum();
        Built {
            fib,
            secs,
            rules: st.rules,
            keys: st.keys,
            markers: st.markers,
            entries: st.entries,
            overflow,
        }
    }
}

fn bench_fib(o: &Opts) {
    println!("## Synthetic worst-case FIBs (§3.4.1 two-phase construction)");
    for &k in &o.k {
        for &n in &o.n {
            let ws = WorstCase::new(n, k, 42);
            let names = ws.trace(o.lookups, 7);
            let tlvs: Vec<&[u8]> = names.iter().map(|q| q.tlv()).collect();
            let mixed: Vec<NameBuf> = names
                .iter()
                .enumerate()
                .map(|(i, q)| {
                    let mut q = q.prefix(i * 7 % (k + 1));
                    while q.component_count() < k {
                        let _ = q.push(8, format!("x{i}").as_bytes());
                    }
                    q
                })
                .collect();
            let strategies: &[Strategy] = if o.one_strategy {
                &[Strategy::VerifyEach]
            } else {
                &[Strategy::VerifyEach, Strategy::VerifyAtEnd]
            };
            for &strategy in strategies {
                let rss0 = rss_now();
                let b = build(&ws, k, strategy, o.control);
                let rss_build = rss_now();
                let peak = peak_rss();
                let fib = &b.fib;
                // Counts per lookup on the same stream.
                let (mut probes, mut reads, mut verifies, mut fallbacks) = (0u64, 0u64, 0u64, 0u64);
                let mut misses = 0;
                for q in &names {
                    let mut tr = Trace::default();
                    if fib.lookup_traced(q, &mut tr).is_none() {
                        misses += 1;
                    }
                    probes += tr.probes as u64;
                    reads += tr.bucket_reads as u64;
                    verifies += tr.verifies as u64;
                    fallbacks += tr.fallback as u64;
                }
                assert_eq!(misses, 0, "every trace name matches");
                let per = |x: u64| x as f64 / names.len() as f64;
                let hashes: Vec<Vec<u64>> = names.iter().map(|q| fib.prefix_hashes(q)).collect();
                // Allocations per lookup of each path (outside the timed runs).
                let mut out = vec![None::<Match>; names.len()];
                let mut scratch = BatchScratch::new();
                fib.lookup_batch_tlv(&tlvs[..16], &mut out[..16], Prefetch::All, &mut scratch);
                let a0 = allocs();
                let r = fib.lookup_batch_tlv(&tlvs, &mut out, Prefetch::All, &mut scratch);
                assert_eq!((r.hits, r.invalid), (names.len(), 0));
                let allocs_tlv = (allocs() - a0) as f64 / names.len() as f64;
                let a0 = allocs();
                let mut acc = 0usize;
                for t in &tlvs {
                    let w = nexthop_wire::ndn::Name::from_value(t).expect("valid");
                    acc += fib
                        .lookup_name(&w, &mut Trace::default())
                        .map_or(0, |m| m.len);
                }
                black_box(acc);
                let allocs_wire = (allocs() - a0) as f64 / names.len() as f64;
                const M: usize = 16;
                let mut res: Vec<Vec<f64>> = vec![Vec::new(); M];
                for round in 0..o.rounds {
                    for j in 0..M {
                        let m = (j + round) % M;
                        if o.phase.is_some_and(|p| p != m) {
                            continue;
                        }
                        let r = match m {
                            0 => rate(&names, |ns| {
                                ns.iter().filter(|q| fib.lookup(*q).is_some()).count()
                            }),
                            1 => rate(&names, |ns| fib.lookup_batch(ns, &mut out, Prefetch::None)),
                            2 => rate(&names, |ns| fib.lookup_batch(ns, &mut out, Prefetch::First)),
                            3 => rate(&names, |ns| fib.lookup_batch(ns, &mut out, Prefetch::All)),
                            4 => two_thread_rate(&tlvs, |part| {
                                let mut o2 = vec![None::<Match>; part.len()];
                                let mut sc = BatchScratch::new();
                                black_box(fib.lookup_batch_tlv(
                                    part,
                                    &mut o2,
                                    Prefetch::All,
                                    &mut sc,
                                ));
                            }),
                            5 => rate(&names, |ns| {
                                ns.iter()
                                    .filter(|q| fib.lookup_linear(*q).is_some())
                                    .count()
                            }),
                            6 => rate(&names, |ns| {
                                ns.iter()
                                    .map(|q| fib.hash_only(q) as usize)
                                    .fold(0, usize::wrapping_add)
                            }),
                            7 => rate(&names, |ns| {
                                ns.iter()
                                    .zip(&hashes)
                                    .filter(|(q, h)| {
                                        fib.lookup_hashed(*q, h, &mut Trace::default()).is_some()
                                    })
                                    .count()
                            }),
                            8 => {
                                // Parse into an owned wire Name (allocates:
                                // value, offsets and hash chain).
                                let t = cpu_now();
                                let mut acc = 0u64;
                                for q in &tlvs {
                                    let w = nexthop_wire::ndn::Name::from_value(q).expect("valid");
                                    acc = acc.wrapping_add(w.prefix_hash(w.len()));
                                }
                                black_box(acc);
                                names.len() as f64 / cpu_since(t) / 1e6
                            }
                            9 => {
                                // Parse into a reused offsets buffer (no allocation).
                                let t = cpu_now();
                                let mut acc = 0usize;
                                let mut ends = Vec::new();
                                for q in &tlvs {
                                    let s = NameSlice::parse(q, &mut ends).expect("valid");
                                    acc = acc.wrapping_add(s.prefix_end(s.component_count()));
                                }
                                black_box(acc);
                                names.len() as f64 / cpu_since(t) / 1e6
                            }
                            10 => rate(&names, |ns| {
                                ns.iter()
                                    .zip(&hashes)
                                    .map(|(_, h)| fib.search_fingerprints_only(h))
                                    .fold(0, usize::wrapping_add)
                            }),
                            11 => rate(&names, |_| {
                                fib.lookup_batch_tlv(&tlvs, &mut out, Prefetch::None, &mut scratch)
                                    .hits
                            }),
                            12 => rate(&names, |_| {
                                fib.lookup_batch_tlv(&tlvs, &mut out, Prefetch::All, &mut scratch)
                                    .hits
                            }),
                            13 => rate(&names, |_| {
                                // Wire Name per packet, then the cached-hash lookup.
                                tlvs.iter()
                                    .filter(|t| {
                                        let w =
                                            nexthop_wire::ndn::Name::from_value(t).expect("valid");
                                        fib.lookup_name(&w, &mut Trace::default()).is_some()
                                    })
                                    .count()
                            }),
                            14 => rate(&names, |ns| {
                                fib.lookup_linear_batch(ns, &mut out, Prefetch::All)
                            }),
                            _ => two_thread_rate(&names, |part| {
                                let mut o2 = vec![None::<Match>; part.len()];
                                black_box(fib.lookup_linear_batch(part, &mut o2, Prefetch::All));
                            }),
                        };
                        res[m].push(r);
                    }
                }
                let med: Vec<f64> = res.into_iter().map(median).collect();
                // Mixed stream: the match is at a uniformly random depth, so
                // longest-first linear search no longer hits at once.
                let mut mixed_b = Vec::new();
                let mut mixed_l = Vec::new();
                let (mut mpb, mut mpl) = (0u64, 0u64);
                for q in &mixed {
                    let mut tr = Trace::default();
                    let a = fib.lookup_traced(q, &mut tr);
                    mpb += tr.probes as u64;
                    let mut tr = Trace::default();
                    let b2 = fib.lookup_linear_traced(q, &mut tr);
                    mpl += tr.probes as u64;
                    assert_eq!(a, b2);
                }
                let mut mixed_bb = Vec::new();
                let mut mixed_lb = Vec::new();
                let mut mout = vec![None::<Match>; mixed.len()];
                // `--phase` times one variant of the main stream alone.
                let mixed_rounds = if o.phase.is_some() { 0 } else { o.rounds };
                for _ in 0..mixed_rounds {
                    mixed_bb.push(rate(&mixed, |ns| {
                        fib.lookup_batch(ns, &mut mout, Prefetch::All)
                    }));
                    mixed_lb.push(rate(&mixed, |ns| {
                        fib.lookup_linear_batch(ns, &mut mout, Prefetch::All)
                    }));
                    mixed_b.push(rate(&mixed, |ns| {
                        ns.iter().filter(|q| fib.lookup(*q).is_some()).count()
                    }));
                    mixed_l.push(rate(&mixed, |ns| {
                        ns.iter()
                            .filter(|q| fib.lookup_linear(*q).is_some())
                            .count()
                    }));
                }
                let rules_n = b.rules as f64;
                println!(
                    "\nn={} k={k} {strategy:?}: {} build {:.1}s CPU ({:.2} M rules/s); {} keys ({} markers), {} entries; RSS {:.2} GiB before the build, {:.2} GiB after ({:.1} B/rule resident for the FIB); process peak RSS so far {:.2} GiB",
                    b.rules,
                    if o.control { "FibControl" } else { "bulk (Fib::build)" },
                    b.secs,
                    rules_n / b.secs / 1e6,
                    b.keys,
                    b.markers,
                    b.entries,
                    rss0 as f64 / (1u64 << 30) as f64,
                    rss_build as f64 / (1u64 << 30) as f64,
                    rss_build.saturating_sub(rss0) as f64 / rules_n,
                    peak as f64 / (1u64 << 30) as f64
                );
                let m = fib.memory();
                let pr = |x: usize| x as f64 / rules_n;
                println!(
                    "  bytes/rule {:.1} (buckets {:.1}, entries {:.1}); overflow buckets {}",
                    pr(m.total_bytes),
                    pr(m.bucket_bytes),
                    pr(m.total_bytes - m.bucket_bytes),
                    b.overflow
                );
                println!(
                    "  breakdown B/rule: buckets {:.1} (used slots {:.1}) | {} entries: headers {:.1}, roles {:.1}, strings {:.1}, padding {:.1}, freed {:.1} | next hops {:.2} | heap (capacity) {:.1}",
                    pr(m.bucket_bytes), pr(m.used_slot_bytes), m.entries, pr(m.entry_header_bytes),
                    pr(m.role_bytes), pr(m.string_bytes), pr(m.padding_bytes), pr(m.free_entry_bytes),
                    pr(m.nexthop_bytes), pr(m.heap_bytes)
                );
                println!(
                    "  per lookup: probes {:.2} (bound {}), bucket reads {:.2}, string compares {:.2}, fallbacks {:.5}; heap allocations per lookup: batch over TLV {:.3}, wire Name + lookup_name {:.3}",
                    per(probes), fib.search_tree().depth(), per(reads), per(verifies), per(fallbacks),
                    allocs_tlv, allocs_wire
                );
                println!(
                    "  Mlookups/s (median of {}): single {:.3} | batch none {:.3} first {:.3} all {:.3} | batch over TLV (no alloc) none {:.3} all {:.3} | 2 threads batch TLV all {:.3} | wire Name + lookup_name {:.3} | linear {:.3} ({:.2}x of binary)",
                    o.rounds, med[0], med[1], med[2], med[3], med[11], med[12], med[4], med[13], med[5], med[5] / med[0]
                );
                println!(
                    "  linear batched (prefetch all): 1 thread {:.3} ({:.2}x of binary batched), 2 threads {:.3} ({:.2}x of binary 2 threads)",
                    med[14], med[14] / med[3], med[15], med[15] / med[4]
                );
                println!(
                    "  mixed-depth stream: probes/lookup binary {:.2} linear {:.2}; Mlookups/s single binary {:.3} linear {:.3} ({:.2}x of binary); batched (prefetch all) binary {:.3} linear {:.3} ({:.2}x)",
                    mpb as f64 / mixed.len() as f64,
                    mpl as f64 / mixed.len() as f64,
                    median(mixed_b.clone()),
                    median(mixed_l.clone()),
                    median(mixed_l) / median(mixed_b),
                    median(mixed_bb.clone()),
                    median(mixed_lb.clone()),
                    median(mixed_lb) / median(mixed_bb)
                );
                println!(
                    "  cost split ns/lookup: parse wire Name (alloc) {:.0} | parse into reused offsets {:.0} | hash {:.0} | search with hashes {:.0} = fingerprint-only search (bucket reads) {:.0} + string verification {:.0} | full single {:.0} | batch TLV none {:.0} all {:.0}",
                    1e3 / med[8], 1e3 / med[9], 1e3 / med[6], 1e3 / med[7], 1e3 / med[10],
                    1e3 / med[7] - 1e3 / med[10], 1e3 / med[0], 1e3 / med[11], 1e3 / med[12]
                );
            }
        }
    }
}

fn bench_real(o: &Opts) {
    println!("\n## Real-derived sets (EasyList + EasyPrivacy hosts)");
    for scheme in [Scheme::TldFirst, Scheme::SiteFirst, Scheme::HostFirst] {
        let rules = match real_names(scheme) {
            Ok(r) => r,
            Err(e) => {
                println!("skipped: {e}");
                return;
            }
        };
        let k = rules.iter().map(|r| r.component_count()).max().unwrap_or(1);
        let names = stream(&extend_names(&rules, 3, 7), o.lookups);
        let mut ctl = FibControl::new(Config {
            max_components: k,
            ..Config::default()
        })
        .expect("config");
        for (i, r) in rules.iter().enumerate() {
            ctl.insert(
                r,
                &[NextHop {
                    face: (i % 250) as u32,
                    cost: 0,
                }],
            )
            .expect("insert");
        }
        let st = ctl.stats();
        let avg_probes = |fib: &Fib, linear: bool| {
            let mut p = 0u64;
            for q in &names {
                let mut tr = Trace::default();
                if linear {
                    fib.lookup_linear_traced(q, &mut tr);
                } else {
                    fib.lookup_traced(q, &mut tr);
                }
                p += tr.probes as u64;
            }
            p as f64 / names.len() as f64
        };
        let (pb, pl) = (avg_probes(ctl.fib(), false), avg_probes(ctl.fib(), true));
        let tlvs: Vec<&[u8]> = names.iter().map(|q| q.tlv()).collect();
        let mut out = vec![None::<Match>; names.len()];
        let (mut rb, mut rl, mut rbb, mut rlb, mut r2) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..o.rounds {
            let fib = ctl.fib();
            rb.push(rate(&names, |ns| {
                ns.iter().filter(|q| fib.lookup(*q).is_some()).count()
            }));
            rl.push(rate(&names, |ns| {
                ns.iter()
                    .filter(|q| fib.lookup_linear(*q).is_some())
                    .count()
            }));
            rbb.push(rate(&names, |ns| {
                fib.lookup_batch(ns, &mut out, Prefetch::All)
            }));
            rlb.push(rate(&names, |ns| {
                fib.lookup_linear_batch(ns, &mut out, Prefetch::All)
            }));
            // Both cores, raw TLV batches, as in the synthetic section.
            r2.push(two_thread_rate(&tlvs, |part| {
                let mut o2 = vec![None::<Match>; part.len()];
                let mut sc = BatchScratch::new();
                black_box(fib.lookup_batch_tlv(part, &mut o2, Prefetch::All, &mut sc));
            }));
        }
        let unpulled = ctl.fib().clone();
        let pulled = ctl.enable_level_pulling(64).expect("pulling");
        let pp = avg_probes(ctl.fib(), false);
        let mut rp = Vec::new();
        let mut rb2 = Vec::new();
        for _ in 0..o.rounds {
            rp.push(rate(&names, |ns| {
                ns.iter().filter(|q| ctl.fib().lookup(*q).is_some()).count()
            }));
            rb2.push(rate(&names, |ns| {
                ns.iter().filter(|q| unpulled.lookup(*q).is_some()).count()
            }));
        }
        println!(
            "\n{scheme:?}: {} rules, k={k}, {} keys, {:.1} B/rule; probes/lookup binary {:.2} linear {:.2} pulled {:.2} ({} prefixes pulled, {:.1}% fewer probes)",
            st.rules,
            st.keys,
            st.bytes as f64 / st.rules as f64,
            pb,
            pl,
            pp,
            pulled,
            100.0 * (pb - pp) / pb
        );
        println!(
            "  Mlookups/s batched (prefetch all): binary {:.3}, linear {:.3} ({:.2}x); 2 threads, binary, raw TLV: {:.3}",
            median(rbb.clone()),
            median(rlb.clone()),
            median(rlb) / median(rbb),
            median(r2)
        );
        println!(
            "  Mlookups/s one at a time: binary {:.3}, linear {:.3} ({:.2}x), binary again {:.3}, with level pulling {:.3} ({:.2}x)",
            median(rb.clone()),
            median(rl.clone()),
            median(rl) / median(rb),
            median(rb2.clone()),
            median(rp.clone()),
            median(rp) / median(rb2)
        );
    }
}

fn fht_name(i: u64) -> [u8; 30] {
    let h = nexthop_hash::hash128(&i.to_le_bytes(), 77).0.to_le_bytes();
    let g = nexthop_hash::hash128(&i.to_le_bytes(), 78).0.to_le_bytes();
    let mut out = [0u8; 30];
    for (j, o) in out.iter_mut().enumerate() {
        let b = if j < 16 { h[j] } else { g[j - 16] };
        *o = b'a' + b % 26;
    }
    out
}

fn bench_fht(o: &Opts) {
    println!("\n## Fingerprint hash table (§4.3.4), 30-byte names, d=4, E=8, load 0.93");
    let n = o.fht_n as u64;
    let widths: &[u32] = if n >= 50_000_000 {
        &[16]
    } else {
        &[16, 12, 20]
    };
    for &fp_bits in widths {
        let t = cpu_now();
        let cfg = FhtConfig {
            fp_bits,
            ..FhtConfig::default()
        };
        let fht = Fht::build((0..n).map(|i| (fht_name(i), (i % 251) as u8)), cfg).expect("build");
        let secs = cpu_since(t);
        let s = fht.stats().clone();
        let q: Vec<[u8; 30]> = (0..o.lookups.min(n as usize) as u64)
            .map(|i| fht_name(i * 7919 % n))
            .collect();
        let mut with = Vec::new();
        let mut without = Vec::new();
        for _ in 0..o.rounds {
            let t = cpu_now();
            black_box(q.iter().filter(|x| fht.lookup(&x[..]).is_some()).count());
            with.push(q.len() as f64 / cpu_since(t) / 1e6);
            let t = cpu_now();
            black_box(
                q.iter()
                    .filter(|x| fht.lookup_table_only(&x[..]).is_some())
                    .count(),
            );
            without.push(q.len() as f64 / cpu_since(t) / 1e6);
        }
        let wrong = (0..n)
            .step_by((n as usize / 100_000).max(1))
            .filter(|&i| fht.lookup(&fht_name(i)) != Some((i % 251) as u8))
            .count();
        println!(
            "w={fp_bits}: n={n} build {secs:.1}s; table {:.3} GB + CT {} names {:.1} MB = {:.3} B/name; CT: {} collided, {} overflow, {} shadowed; Mlookups/s with CT {:.3}, table only {:.3}; misforwarded known names (sample of {}): {wrong}",
            s.table_bytes as f64 / 1e9,
            fht.ct_len(),
            s.ct_bytes as f64 / 1e6,
            s.bytes_per_name(),
            s.ct_collided,
            s.ct_overflow,
            s.ct_shadowed,
            median(with),
            median(without),
            (0..n).step_by((n as usize / 100_000).max(1)).count()
        );
        assert_eq!(wrong, 0);
    }
}

fn main() {
    let o = opts();
    println!(
        "nexthop-ndn fib bench ({})",
        if o.smoke { "smoke" } else { "full" }
    );
    let only = o.only.clone();
    if only.as_deref().is_none_or(|x| x == "fib") {
        bench_fib(&o);
    }
    if o.real && only.as_deref().is_none_or(|x| x == "real") {
        bench_real(&o);
    }
    if only.as_deref().is_none_or(|x| x == "fht") {
        bench_fht(&o);
    }
}
