//! The SDF pipeline's miss path: decisions per second from a Rust app
//! (the built-in L2 learning switch) through `SdfRuntime` and an
//! `SdfStage` (miss -> queue -> app thread -> install -> answer -> send).
//!
//! ```text
//! cargo bench -p nexthop-dataplane --bench sdf -- [--smoke] [--flows 2e5]
//!     [--rounds 5] [--hosts 1024] [--table on|off] [--frames 1|4]
//! ```
//!
//! `--table` and `--frames` run only that pending-table setting or that
//! variant (and skip `inline` unless `--frames 1`), to time or profile
//! one.
//!
//! `--hosts` hosts on 4 ports each say hello once (so the switch knows
//! them all); then every frame is a new flow (a source/destination pair
//! not seen before, so a cache miss that the app decides and the cache
//! keeps: dst and src MAC and the ingress port marked, both bindings
//! registered). Two variants alternate in each round, on the same
//! runtime, and the whole is run twice: with the pending-miss table on
//! (the default) and off (`SdfConfig::pending_table`):
//!
//! * `1 frame/flow`: batches of 32 frames of 32 new flows: every frame is
//!   one app call (the pending-miss table has nothing to merge);
//! * `4 frames/flow`: batches of 8 new flows, 4 frames each in a row, as a
//!   burst arrives: the pending-miss table sends the first to the app and
//!   holds the other 3 until its decision is back (one app call per flow);
//!   without the table each of the 4 is an app call.
//!
//! Last, the same new flows (1 frame each) go through
//! `nexthop_sdf::app::Switch` with the same app on the bench's thread
//! (`inline`: lookup, app call and install in one call, no app thread, no
//! queue, no reply channel): the upper bound of the pipeline's miss path
//! on this machine, so the gap to it is the cost of the hand-over between
//! the worker and the app thread.
//!
//! The worker keeps at most 256 flows in flight (under the queue bound of
//! 1024, so nothing is dropped; the bench asserts it). Times are wall
//! time of the worker loop (two threads: the worker and the app), medians
//! of `--rounds`. The app thread's CPU time per decision (its
//! `/proc/self/task/*/schedstat`, Linux) and the worker's (this thread's CPU clock)
//! are printed beside: they say which thread is the bottleneck (the app
//! thread's includes its 50 us watch of an empty queue), and a loaded
//! machine moves them far less than the wall rate.

use nexthop_testutil::args::count_or_exit;
use std::time::{Duration, Instant};

use nexthop_dataplane::sdf::{SdfConfig, SdfRuntime, SdfStage, Sink, Stamp};
use nexthop_sdf::app::{L2Config, L2Switch, Ports, Switch};
use nexthop_testutil::bench::{self, median};
use nexthop_testutil::clock::thread_cpu_secs;

const PORTS: [u16; 4] = [0, 1, 2, 3];
const IN_FLIGHT: usize = 256;
const BATCH: usize = 32;

struct Opts {
    flows: usize,
    rounds: usize,
    hosts: usize,
    /// Only this pending-table setting.
    table: Option<bool>,
    /// Only this many frames per flow.
    frames: Option<usize>,
}

fn opts() -> Opts {
    let mut o = Opts {
        flows: 200_000,
        rounds: 5,
        hosts: 1024,
        table: None,
        frames: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--smoke" => {
                o.flows = 4096;
                o.rounds = 1;
                o.hosts = 256;
                i += 1;
                continue;
            }
            "--flows" => o.flows = count_or_exit(&v).max(BATCH),
            "--rounds" => o.rounds = count_or_exit(&v).max(1),
            "--hosts" => o.hosts = count_or_exit(&v).clamp(2, 1 << 15),
            "--table" => {
                o.table = Some(match v.as_str() {
                    "on" => true,
                    "off" => false,
                    _ => {
                        eprintln!("--table takes on or off, not {v:?}");
                        std::process::exit(2);
                    }
                })
            }
            "--frames" => {
                o.frames = Some(match v.as_str() {
                    "1" => 1,
                    "4" => 4,
                    _ => {
                        eprintln!("--frames takes 1 or 4, not {v:?}");
                        std::process::exit(2);
                    }
                })
            }
            "--bench" => {
                i += 1;
                continue;
            }
            other => panic!("unknown option {other}"),
        }
        i += 2;
    }
    o
}

#[derive(Default)]
struct Count {
    frames: u64,
    copies: u64,
}

impl Sink for Count {
    fn emit(&mut self, ports: &[u16], _controller: bool, frame: &[u8], _stamp: Stamp) {
        self.frames += 1;
        self.copies += ports.len() as u64;
        std::hint::black_box(frame);
    }
}

fn mac(h: usize) -> [u8; 6] {
    let b = (h as u32).to_be_bytes();
    [2, 0, b[0], b[1], b[2], b[3]]
}

fn eth(dst: [u8; 6], src: [u8; 6]) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f
}

fn port_of(h: usize) -> u16 {
    PORTS[h % PORTS.len()]
}

/// The source/destination pairs, in an order that gives every ingress
/// port runs of the same source: flow `n` is host `n / (hosts - 1)`
/// sending to the `n mod (hosts - 1)`-th other host.
fn pair(n: usize, hosts: usize) -> (usize, usize) {
    let s = (n / (hosts - 1)) % hosts;
    let mut d = n % (hosts - 1);
    if d >= s {
        d += 1;
    }
    (s, d)
}

/// CPU nanoseconds the thread named `name` has run so far (Linux), if
/// there is one.
fn thread_cpu_ns(name: &str) -> Option<u64> {
    for t in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim_end() == name {
            let stat = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
            return stat.split_whitespace().next()?.parse().ok();
        }
    }
    None
}

/// `flows` new flows from flow number `first`, `per_flow` frames each:
/// wall seconds, app calls and frames sent.
fn run(
    stage: &mut SdfStage,
    sink: &mut Count,
    o: &Opts,
    first: usize,
    per_flow: usize,
) -> (f64, u64, u64, Option<u64>, u64) {
    let flows_per_batch = BATCH / per_flow;
    // The frames are made before the clock starts (as `inline`'s are):
    // batches of flows of one source (one ingress port).
    let mut batches: Vec<(u16, Vec<Vec<u8>>)> = Vec::new();
    let mut n = first;
    let end = first + o.flows;
    while n < end {
        let mut frames = Vec::with_capacity(BATCH);
        let (s, _) = pair(n, o.hosts);
        while frames.len() < BATCH && n < end && pair(n, o.hosts).0 == s {
            let f = eth(mac(pair(n, o.hosts).1), mac(s));
            for _ in 0..per_flow {
                frames.push(f.clone());
            }
            n += 1;
            if frames.len() / per_flow >= flows_per_batch {
                break;
            }
        }
        batches.push((port_of(s), frames));
    }
    let calls0 = stage.sdf_counters().app_requests;
    let sent0 = sink.frames;
    let cpu0 = thread_cpu_ns("sdf-app");
    let w0 = thread_cpu_secs();
    let t = Instant::now();
    let mut refs: Vec<&[u8]> = Vec::with_capacity(BATCH);
    for (port, frames) in &batches {
        refs.clear();
        refs.extend(frames.iter().map(|f| &f[..]));
        stage.process(*port, &refs, &[], sink);
        while stage.pending_flows() >= IN_FLIGHT {
            stage.poll(sink);
            std::thread::yield_now();
        }
    }
    assert!(stage.flush(sink, Duration::from_secs(30)), "decisions lost");
    let secs = t.elapsed().as_secs_f64();
    let worker_ns = ((thread_cpu_secs() - w0) * 1e9) as u64;
    let app_ns = thread_cpu_ns("sdf-app")
        .zip(cpu0)
        .map(|(b, a)| b.saturating_sub(a));
    (
        secs,
        stage.sdf_counters().app_requests - calls0,
        sink.frames - sent0,
        app_ns,
        worker_ns,
    )
}

fn main() {
    let o = opts();
    for table in [true, false] {
        if o.table.is_none_or(|t| t == table) {
            bench_table(&o, table);
        }
    }
    if o.frames.is_none_or(|f| f == 1) {
        bench_inline(&o);
    }
}

/// The upper bound: the same new flows through the in-process switch
/// (cache and app on this thread), `o.rounds` times.
fn bench_inline(o: &Opts) {
    let mut sw = Switch::new(
        L2Switch::new(L2Config::default()),
        nexthop_sdf::Config::default(),
        Ports::physical(&PORTS),
        true,
    )
    .expect("switch");
    for h in 0..o.hosts {
        std::hint::black_box(sw.process(port_of(h), &eth([0xff; 6], mac(h))));
    }
    let total_pairs = o.hosts * (o.hosts - 1);
    let mut first = 0usize;
    let mut rates = Vec::new();
    for _ in 0..o.rounds {
        let frames: Vec<(u16, Vec<u8>)> = (first..first + o.flows)
            .map(|n| {
                let (s, d) = pair(n, o.hosts);
                (port_of(s), eth(mac(d), mac(s)))
            })
            .collect();
        first = (first + o.flows) % total_pairs.max(1);
        let misses0 = sw.counters().misses;
        let t = Instant::now();
        for (port, f) in &frames {
            std::hint::black_box(sw.process(*port, f));
        }
        let secs = t.elapsed().as_secs_f64();
        rates.push((sw.counters().misses - misses0) as f64 / secs);
    }
    let r = median(&rates);
    println!(
        "miss path, inline (app on the worker's thread: no app thread, queue or channel), 1 frame/flow  {:>6.3} M decisions/s  target >= 1 M decisions/s: {:.2}x; load {}",
        r / 1e6,
        r / 1e6,
        bench::loadavg()
    );
}

/// The median of per-decision CPU figures, or "-" without any.
fn per_decision(ns: &[f64]) -> String {
    if ns.is_empty() {
        "-".to_string()
    } else {
        format!("{:.0}", median(ns))
    }
}

/// Both variants, `o.rounds` times, with the pending-miss table on or off.
fn bench_table(o: &Opts, table: bool) {
    println!(
        "nexthop SDF pipeline miss path, pending-miss table {}: L2 switch (Rust), {} hosts on {} ports, {} new flows per variant per round, {} rounds; {} ({} cores), load {}",
        if table { "on" } else { "off" },
        o.hosts,
        PORTS.len(),
        o.flows,
        o.rounds,
        bench::cpu_model(),
        bench::cores(),
        bench::loadavg()
    );
    let rt = SdfRuntime::start(
        Box::new(L2Switch::new(L2Config::default())),
        SdfConfig {
            ports: PORTS.to_vec(),
            pending_table: table,
            ..SdfConfig::default()
        },
    )
    .expect("sdf runtime");
    let mut stage = rt.stage();
    let mut sink = Count::default();
    // Every host says hello (a broadcast), so each later frame is a
    // known-to-known flow.
    for h in 0..o.hosts {
        let f = eth([0xff; 6], mac(h));
        stage.process(port_of(h), &[&f[..]], &[], &mut sink);
        if stage.pending_flows() >= IN_FLIGHT {
            assert!(stage.flush(&mut sink, Duration::from_secs(30)));
        }
    }
    assert!(stage.flush(&mut sink, Duration::from_secs(30)));
    let total_pairs = o.hosts * (o.hosts - 1);
    let mut next = 0usize;
    let mut take = |k: usize| {
        // Fresh pairs each run while there are, then around again (old
        // pairs evicted long ago by the cache's LRU, or still cached: the
        // count of app calls says which).
        let f = next;
        next = (next + k) % total_pairs.max(1);
        f
    };
    let variants: Vec<(&str, usize)> = [("1 frame/flow ", 1usize), ("4 frames/flow", 4)]
        .into_iter()
        .filter(|&(_, per)| o.frames.is_none_or(|f| f == per))
        .collect();
    let mut rates = vec![Vec::new(); variants.len()];
    let mut pps = vec![Vec::new(); variants.len()];
    let mut calls_per_flow = vec![Vec::new(); variants.len()];
    let mut app_ns = vec![Vec::new(); variants.len()];
    let mut worker_ns = vec![Vec::new(); variants.len()];
    for _ in 0..o.rounds {
        for (j, &(_, per)) in variants.iter().enumerate() {
            let (secs, calls, sent, cpu, wcpu) = run(&mut stage, &mut sink, o, take(o.flows), per);
            if let Some(ns) = cpu {
                app_ns[j].push(ns as f64 / calls.max(1) as f64);
            }
            worker_ns[j].push(wcpu as f64 / calls.max(1) as f64);
            rates[j].push(calls as f64 / secs);
            pps[j].push(sent as f64 / secs);
            calls_per_flow[j].push(calls as f64 / o.flows as f64);
        }
    }
    let c = *stage.sdf_counters();
    stage.publish();
    drop(stage);
    let stats = rt.shutdown();
    let on_off = if table { "on " } else { "off" };
    for (j, (name, _)) in variants.iter().enumerate() {
        let r = median(&rates[j]);
        println!(
            "miss path, pending table {on_off}, {name}  {:>6.3} M decisions/s  {:>6.3} M frames sent/s  app calls per flow {:.2}  target >= 1 M decisions/s: {:.2}x  app thread CPU {} ns/decision  worker CPU {} ns/decision",
            r / 1e6,
            median(&pps[j]) / 1e6,
            median(&calls_per_flow[j]),
            r / 1e6,
            per_decision(&app_ns[j]),
            per_decision(&worker_ns[j]),
        );
    }
    println!(
        "counters: app requests {}, pending waits {}, resolved {}, drops {}; cache entries {}, evictions {}, masks {}",
        c.app_requests,
        c.pending_waits,
        c.pending_resolved,
        c.drops.total(),
        stats.entries,
        stats.cache.evictions,
        stats.masks
    );
    assert_eq!(
        c.drops.total(),
        0,
        "the bench dropped frames: {:?}",
        c.drops
    );
}
