//! Othello against its baselines, on one key stream, in one process.
//!
//! ```text
//! cargo bench -p nexthop-othello --bench compare -- [--smoke] [--n 1e5,1e6]
//!     [--keys u64|5tuple] [--sizing pow2|tight] [--rounds 5] [--lookups 4e6]
//!     [--lookups-only] [--secs 1] [--rate 1e6] [--json out.json]
//! ```
//!
//! For each `n`: `n` distinct keys with random 8-bit values; a query stream
//! that is a seeded random permutation of the keys, the same for every
//! structure. Each round runs every structure once over the stream, in a
//! rotated order, and medians over rounds are reported:
//!
//! * `floor`: two byte arrays of exactly Othello's `ma` and `mb` bytes,
//!   indexed by the same hash and range reduction, read in `Query::lookup_batch`'s order
//!   with both slots prefetched, XORed: the memory floor of a 2-read lookup.
//! * `othello`: `Query::lookup_batch` (groups of 32: a group's slots are
//!   prefetched while the group before is read) and
//!   `Query::lookup` one key at a time.
//! * `hashbrown`: `HashMap<K, u8>::get` (foldhash, its default hasher).
//! * `cuckoo`: `nexthop_testutil::CuckooTable<K, u8>::lookup_batch`, (2,4)
//!   buckets as in CuckooSwitch.
//! * `ptr_hash`: a static minimal perfect hash (PtrHash, default-fast
//!   parameters, XXH3-128 like the others) plus a `Vec<u8>` of values,
//!   queried with `index_batch::<32>` and its value reads in the same order.
//!
//! Then (unless `--lookups-only`, which makes an n = 1e8 round take minutes
//! instead of a quarter of an hour) the control plane: inserts of `n` keys
//! into `Othello::with_capacity` (rebuild and slot-write counts), alters and deletes of `n / 10` keys,
//! `Othello::build` against hashbrown inserting the same keys, and a reader
//! doing `lookup_batch` while a writer applies alter deltas at `--rate`
//! per second (compared with the same reader alone).
//!
//! Without `--bench` on the command line (that is, under `cargo test
//! --benches`) it runs the smoke configuration. Recorded results:
//! `docs/benchmarks.md`, "Othello lookups" and the sections after it.

use std::fmt::Debug;
use std::hash::Hash;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use hashbrown::HashMap;
use nexthop_hash::{reduce, Hash128, KeyBytes};
use nexthop_mem::{prefetch, two_stage};
use nexthop_othello::{
    BatchOp, Config, Delta, Op, Othello, Query, Sizing, BATCH_GROUP, MAX_STASH, STRIPES,
};
use nexthop_testutil::bench::{cores, cpu_model, loadavg, median, ratio_median, JsonObj};
use nexthop_testutil::keys::rng;
use nexthop_testutil::{distinct_u64, five_tuples, CuckooTable};
use ptr_hash::{bucket_fn::Linear, hash::KeyHasher, PtrHash, PtrHashParams};
use rand::seq::SliceRandom;
use rand::Rng;

/// Value bits (`l`).
const L: u8 = 8;
/// Keys per call of a batched lookup (the output buffer is reused).
const BLOCK: usize = 4096;
/// Bytes of one stash entry (fingerprint and word), for the header estimate.
const STASH_ENTRY_BYTES: usize = 24;

trait BenchKey: KeyBytes + Copy + Eq + Hash + Debug + Send + Sync + 'static {}
impl<T: KeyBytes + Copy + Eq + Hash + Debug + Send + Sync + 'static> BenchKey for T {}

/// PtrHash keyed with the same XXH3-128 as every other structure here.
#[derive(Clone, Copy, Debug)]
struct Xxh3Seeded;

impl<K: BenchKey> KeyHasher<K> for Xxh3Seeded {
    type H = u128;
    #[inline(always)]
    fn hash(x: &K, seed: u64) -> u128 {
        x.hash128(seed).0
    }
}

type Mphf<K> = PtrHash<K, Linear, Vec<u32>, Xxh3Seeded, Vec<u8>, true, true>;

#[derive(Clone, Debug)]
struct Args {
    ns: Vec<usize>,
    keys: String,
    sizing: Sizing,
    rounds: usize,
    lookups: usize,
    secs: f64,
    rate: f64,
    json: Option<String>,
    smoke: bool,
    /// Lookups only: no readers-under-updates and no control-plane rounds.
    lookups_only: bool,
}

fn parse_count(s: &str) -> usize {
    nexthop_testutil::args::parse_count(s).unwrap_or_else(|| usage(&format!("not a count: {s}")))
}

fn usage(msg: &str) -> ! {
    eprintln!(
        "compare: {msg}\nusage: compare [--smoke] [--n 1e5,1e6] [--keys u64|5tuple] \
         [--sizing pow2|tight] [--rounds R] [--lookups N] [--lookups-only] [--secs S] [--rate R] \
         [--json FILE]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut a = Args {
        ns: vec![1_000_000],
        keys: "u64".into(),
        sizing: Sizing::PowerOfTwo,
        rounds: 5,
        lookups: 4_000_000,
        secs: 1.0,
        rate: 1e6,
        json: None,
        smoke: false,
        lookups_only: false,
    };
    let (mut bench, mut n_given) = (false, false);
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = || {
            it.next()
                .unwrap_or_else(|| usage(&format!("{arg} needs a value")))
        };
        match arg.as_str() {
            "--bench" => bench = true,
            "--smoke" => a.smoke = true,
            "--lookups-only" => a.lookups_only = true,
            "--n" => {
                a.ns = val().split(',').map(parse_count).collect();
                n_given = true;
            }
            "--keys" => a.keys = val(),
            "--sizing" => a.sizing = val().parse().unwrap_or_else(|e| usage(&format!("{e}"))),
            "--rounds" => a.rounds = parse_count(&val()),
            "--lookups" => a.lookups = parse_count(&val()),
            "--secs" => a.secs = val().parse().unwrap_or_else(|_| usage("bad --secs")),
            "--rate" => a.rate = val().parse().unwrap_or_else(|_| usage("bad --rate")),
            "--json" => a.json = Some(val()),
            other => usage(&format!("unknown argument {other}")),
        }
    }
    if !["u64", "5tuple"].contains(&a.keys.as_str()) {
        usage("--keys must be u64 or 5tuple");
    }
    if a.smoke || (!bench && !n_given) {
        a.smoke = true;
        a.ns = vec![10_000];
        a.rounds = 1;
        a.lookups = 200_000;
        a.secs = 0.05;
    }
    a
}

/// Two random byte arrays of Othello's sizes, addressed like Othello.
struct Floor {
    a: nexthop_othello::HugeBox<u8>,
    b: nexthop_othello::HugeBox<u8>,
    seed: u64,
}

impl Floor {
    fn new(ma: u32, mb: u32, seed: u64) -> Floor {
        let mut r = rng(seed);
        // Same pages as Othello's arrays (2 MiB-aligned THP where
        // offered): a floor on 4 KiB pages would pay page walks Othello
        // does not.
        let a = nexthop_othello::HugeBox::from_fn(ma as usize, |_| r.gen());
        let b = nexthop_othello::HugeBox::from_fn(mb as usize, |_| r.gen());
        Floor { a, b, seed }
    }

    #[inline(always)]
    fn slots(&self, h: Hash128) -> (usize, usize) {
        (
            reduce(h.w0(), self.a.len() as u32) as usize,
            reduce(h.w1(), self.b.len() as u32) as usize,
        )
    }
}

fn floor_batch<K: KeyBytes>(f: &Floor, stream: &[K], reps: usize) -> u64 {
    // The batch order of `Query::lookup_batch` (the same driver): a
    // group's slots are prefetched while the group before is read.
    let mut sum = 0u64;
    for _ in 0..reps {
        two_stage::<BATCH_GROUP, _, [(usize, usize); BATCH_GROUP]>(
            stream,
            |kc, ij| {
                for (n, k) in kc.iter().enumerate() {
                    let (i, j) = f.slots(k.hash128(f.seed));
                    prefetch(&f.a[i]);
                    prefetch(&f.b[j]);
                    ij[n] = (i, j);
                }
            },
            |_, kc, ij| {
                for &(i, j) in &ij[..kc.len()] {
                    sum += (f.a[i] ^ f.b[j]) as u64;
                }
            },
        );
    }
    sum
}

/// Sum of `f(k)` over `reps` passes of the stream, one key at a time.
#[inline(always)]
fn each<K>(stream: &[K], reps: usize, f: impl Fn(&K) -> u64) -> u64 {
    let mut sum = 0u64;
    for _ in 0..reps {
        for k in stream {
            sum += f(k);
        }
    }
    sum
}

/// Sum of the outputs of `f` over `reps` passes, `BLOCK` keys per call.
#[inline(always)]
fn blocks<K, O: Copy>(
    stream: &[K],
    reps: usize,
    zero: O,
    f: impl Fn(&[K], &mut [O]) -> u64,
) -> u64 {
    let mut out = [zero; BLOCK];
    let mut sum = 0u64;
    for _ in 0..reps {
        for kc in stream.chunks(BLOCK) {
            sum += f(kc, &mut out[..kc.len()]);
        }
    }
    sum
}

fn ptrhash_batch<K: BenchKey>(f: &Mphf<K>, vals: &[u8], stream: &[K], reps: usize) -> u64 {
    // PtrHash's own batched index (it prefetches its pilots) for whole
    // groups, with the value reads in `Query::lookup_batch`'s order: a
    // group's values are prefetched while the group before is read.
    const G: usize = BATCH_GROUP;
    let mut sum = 0u64;
    for _ in 0..reps {
        two_stage::<G, _, [usize; G]>(
            stream,
            |kc, idx| {
                if let Ok(kc) = <&[K; G]>::try_from(kc) {
                    *idx = f.index_batch::<G, &K>(std::array::from_fn(|i| &kc[i]));
                } else {
                    for (i, k) in idx.iter_mut().zip(kc) {
                        *i = f.index(k);
                    }
                }
                for &i in &idx[..kc.len()] {
                    prefetch(&vals[i]);
                }
            },
            |_, kc, idx| {
                for &i in &idx[..kc.len()] {
                    sum += vals[i] as u64;
                }
            },
        );
    }
    sum
}

fn secs_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64()
}

/// CPU seconds this thread has run: every timing below uses it, so time
/// spent descheduled on a shared machine is not counted.
use nexthop_testutil::thread_cpu_secs as cpu_secs;

/// One lookup structure's per-round timings.
struct Row {
    name: &'static str,
    lines: &'static str,
    bits_per_key: f64,
    exact: bool,
    ns: Vec<f64>,
}

/// Data-plane bits per key of `sizing` at `n` keys (arrays only).
fn sizing_bits(sizing: Sizing, n: usize) -> f64 {
    let (ma, mb) = sizing.arrays_for(n);
    (ma as f64 + mb as f64) * 8.0 / n as f64
}

fn bench_n<K: BenchKey>(keys: Vec<K>, a: &Args) -> String {
    let n = keys.len();
    let mut r = rng(0x6f74_6865_6c6c_6f00 ^ n as u64);
    let vals: Vec<u8> = (0..n).map(|_| r.gen()).collect();
    let mut perm: Vec<u32> = (0..n as u32).collect();
    perm.shuffle(&mut r);
    let stream: Vec<K> = perm.iter().map(|&p| keys[p as usize]).collect();
    let svals: Vec<u8> = perm.iter().map(|&p| vals[p as usize]).collect();
    let reps = (a.lookups / n).max(1);
    let expect = reps as u64 * svals.iter().map(|&v| v as u64).sum::<u64>();
    let cfg = Config {
        sizing: a.sizing,
        ..Config::with_value_bits(L)
    };
    let pairs = || keys.iter().copied().zip(vals.iter().map(|&v| v as u64));
    let load0 = loadavg();
    println!(
        "\n== load average {load0}; n = {n}, keys = {}, sizing = {}, l = {L}, rounds = {}, {reps} pass(es) of the stream per measurement",
        a.keys, a.sizing, a.rounds
    );

    // --- Data plane: every structure on the same stream. ---
    let mut o = Othello::build(cfg, pairs()).expect("Othello::build");
    let q = o.export(0);
    for (k, &v) in keys.iter().zip(&vals) {
        assert_eq!(q.lookup(k), Some(v as u64), "othello lost key {k:?}");
    }
    let meta = *q.meta();
    let header = std::mem::size_of::<Query>() + 2 * STRIPES * 4 + MAX_STASH * STASH_ENTRY_BYTES;
    let othello_bits = q.memory_bytes() as f64 * 8.0 / n as f64;
    let floor = Floor::new(meta.ma, meta.mb, meta.seed);
    let hb: HashMap<K, u8> = keys.iter().copied().zip(vals.iter().copied()).collect();
    let mut ck: CuckooTable<K, u8> = CuckooTable::with_capacity(n);
    for (k, &v) in keys.iter().zip(&vals) {
        ck.insert(*k, v).expect("cuckoo insert");
    }
    let ph = Mphf::<K>::try_new(&keys, PtrHashParams::default());
    let mut ph_vals = nexthop_othello::HugeBox::new(n, 0u8);
    let ph_bits = ph.as_ref().map_or(f64::NAN, |f| {
        for (k, &v) in keys.iter().zip(&vals) {
            ph_vals[f.index(k)] = v;
        }
        let (pilots, remap) = f.bits_per_element();
        pilots + remap + 8.0
    });
    for (k, &v) in keys.iter().zip(&vals) {
        assert_eq!(
            (hb.get(k), ck.get(k)),
            (Some(&v), Some(v)),
            "baseline lost {k:?}"
        );
        if let Some(f) = &ph {
            assert_eq!(ph_vals[f.index(k)], v, "ptr_hash lost {k:?}");
        }
    }
    let hb_bits = hb.allocation_size() as f64 * 8.0 / n as f64;
    let ck_bits = ck.memory_bytes() as f64 * 8.0 / n as f64;
    let row = |name, lines, bits_per_key, exact| Row {
        name,
        lines,
        bits_per_key,
        exact,
        ns: Vec::new(),
    };
    let mut rows = vec![
        row("floor batch", "2", othello_bits, false),
        row("othello batch", "2", othello_bits, true),
        row("floor single", "2", othello_bits, false),
        row("othello single", "2", othello_bits, true),
        row("hashbrown get", "1-2", hb_bits, true),
        row("cuckoo batch", "1-2/bkt", ck_bits, true),
        row("ptr_hash+vals", "2", ph_bits, true),
    ];
    let (s, f, h, c) = (&stream[..], &floor, &hb, &ck);
    let mut kernels: Vec<Box<dyn Fn() -> u64 + '_>> = vec![
        Box::new(move || floor_batch(f, s, reps)),
        Box::new(|| {
            blocks(s, reps, 0u64, |kc, o| {
                q.lookup_batch(kc, o);
                o.iter().sum()
            })
        }),
        Box::new(move || {
            each(s, reps, |k| {
                let (i, j) = f.slots(k.hash128(f.seed));
                (f.a[i] ^ f.b[j]) as u64
            })
        }),
        Box::new(|| each(s, reps, |k| q.lookup(k).unwrap_or(0))),
        Box::new(move || each(s, reps, |k| h.get(k).map_or(0, |&v| v as u64))),
        Box::new(move || {
            blocks(s, reps, None, |kc, o| {
                c.lookup_batch(kc, o);
                o.iter().map(|v| v.unwrap_or(0) as u64).sum()
            })
        }),
    ];
    match &ph {
        Some(p) => kernels.push(Box::new(|| ptrhash_batch(p, &ph_vals, s, reps))),
        None => {
            println!("ptr_hash construction failed; skipped");
            rows.pop();
        }
    }
    for round in 0..a.rounds {
        for t in 0..rows.len() {
            let i = (t + round) % rows.len();
            let t0 = cpu_secs();
            let sum = black_box(kernels[i]());
            rows[i].ns.push((cpu_secs() - t0) * 1e9 / (reps * n) as f64);
            if rows[i].exact {
                assert_eq!(sum, expect, "{} checksum", rows[i].name);
            }
        }
    }
    drop(kernels);
    let floor_ns = median(&rows[0].ns);
    let ns_of = |name: &str| {
        rows.iter()
            .find(|r| r.name == name)
            .map_or(&[][..], |r| &r.ns[..])
    };
    // Ratios are medians of per-round ratios (same round, adjacent in time).
    let of_floor = |r: &Row| ratio_median(&rows[0].ns, &r.ns);
    println!(
        "{:<16} {:>9} {:>9} {:>9} {:>9} {:>6} {:>9}",
        "structure", "ns/lookup", "Mlookup/s", "of floor", "gap ns", "lines", "bits/key"
    );
    let mut jrows = Vec::new();
    for r in &rows {
        let m = median(&r.ns);
        let (lines, bits) = (r.lines, r.bits_per_key);
        println!(
            "{:<16} {m:>9.2} {:>9.1} {:>9.2} {:>9.2} {lines:>6} {bits:>9.2}",
            r.name,
            1e3 / m,
            of_floor(r),
            m - floor_ns
        );
        jrows.push(
            JsonObj::new()
                .str("name", r.name)
                .num("ns_median", m)
                .num("of_floor", of_floor(r))
                .str("cache_lines", lines)
                .num("bits_per_key", bits)
                .field("ns_rounds", format!("{:?}", r.ns))
                .done(),
        );
    }
    let ob = ns_of("othello batch");
    let vs_hb = ratio_median(ns_of("hashbrown get"), ob);
    let vs_ck = ratio_median(ns_of("cuckoo batch"), ob);
    let single_of_batch = ratio_median(ob, ns_of("othello single"));
    println!(
        "othello batch: {vs_hb:.2}x hashbrown, {vs_ck:.2}x cuckoo, {:.2}x ptr_hash; \
         single = {single_of_batch:.2} of batched (single floor = {:.2} of batched floor)",
        ratio_median(ns_of("ptr_hash+vals"), ob),
        ratio_median(&rows[0].ns, ns_of("floor single")),
    );
    println!(
        "othello data plane: ma = {}, mb = {}, stash = {}, {:.2} bits/key (+ {header} B header); \
         arrays only: pow2 {:.2}, tight {:.2} bits/key (2.34 l = {:.2})",
        meta.ma,
        meta.mb,
        q.stash_len(),
        othello_bits,
        sizing_bits(Sizing::PowerOfTwo, n),
        sizing_bits(Sizing::Tight, n),
        2.34 * L as f64
    );
    drop((hb, ck, ph, ph_vals, floor));
    if a.lookups_only {
        return JsonObj::new()
            .field("n", n)
            .str("loadavg_start", &load0)
            .str("keys", &a.keys)
            .str("sizing", &a.sizing.to_string())
            .field("rounds", a.rounds)
            .field("lookups", format!("[{}]", jrows.join(",")))
            .num("othello_vs_hashbrown", vs_hb)
            .num("single_of_batched", single_of_batch)
            .done();
    }

    // --- Reader throughput while deltas are applied. ---
    let upd = readers_under_updates(&mut o, &q, &stream, &svals, a);
    for (k, &v) in keys.iter().zip(&vals) {
        assert_eq!(
            q.lookup(k),
            o.get(k),
            "query diverged from control for {k:?} ({v})"
        );
    }
    drop((o, q));

    // --- Control plane. ---
    let ctl = control_rounds(cfg, &keys, &vals, &stream, &svals, a);
    let load1 = loadavg();
    println!("load average at the end: {load1}");
    JsonObj::new()
        .field("n", n)
        .str("loadavg_start", &load0)
        .str("loadavg_end", &load1)
        .str("keys", &a.keys)
        .str("sizing", &a.sizing.to_string())
        .field("value_bits", L)
        .field("rounds", a.rounds)
        .field("lookups_per_measurement", reps * n)
        .field("lookups", format!("[{}]", jrows.join(",")))
        .num("othello_vs_hashbrown", vs_hb)
        .num("othello_vs_cuckoo", vs_ck)
        .num("single_of_batched", single_of_batch)
        .num("bits_per_key", othello_bits)
        .num(
            "bits_per_key_pow2_arrays",
            sizing_bits(Sizing::PowerOfTwo, n),
        )
        .num("bits_per_key_tight_arrays", sizing_bits(Sizing::Tight, n))
        .field("header_bytes", header)
        .field("ma", meta.ma)
        .field("mb", meta.mb)
        .field("readers_under_updates", upd)
        .field("control", ctl)
        .done()
}

/// Read the stream in blocks until `dur` has passed; count lookups and
/// results that are neither the original value nor its bit-0 toggle.
fn reader<K: KeyBytes>(q: &Query, stream: &[K], svals: &[u8], dur: Duration) -> (u64, f64, u64) {
    let mut out = vec![0u64; BLOCK];
    let (mut done, mut bad) = (0u64, 0u64);
    let (t0, c0) = (Instant::now(), cpu_secs());
    while t0.elapsed() < dur {
        for (kc, vc) in stream.chunks(BLOCK).zip(svals.chunks(BLOCK)) {
            q.lookup_batch(kc, &mut out);
            bad += out
                .iter()
                .zip(vc)
                .filter(|(&o, &v)| (o ^ v as u64) & !1 != 0)
                .count() as u64;
            done += kc.len() as u64;
            if t0.elapsed() >= dur {
                break;
            }
        }
    }
    (done, cpu_secs() - c0, bad)
}

/// Apply `deltas` at `rate` per second on average until `stop`: sleep while
/// ahead of schedule, then apply everything due (bursts of ~100 at 1 M/s),
/// so the writer's core is mostly idle. Returns (applied, seconds).
fn writer(q: &Query, deltas: &[Delta], rate: f64, stop: &AtomicBool) -> (usize, f64) {
    let t0 = Instant::now();
    for (i, d) in deltas.iter().enumerate() {
        let due = Duration::from_secs_f64(i as f64 / rate);
        let now = t0.elapsed();
        if now < due {
            std::thread::sleep(due - now + Duration::from_micros(100));
        }
        if stop.load(Ordering::Relaxed) {
            return (i, secs_since(t0));
        }
        q.apply(d).expect("apply delta");
    }
    (deltas.len(), secs_since(t0))
}

/// Like [`writer`], but everything due at once is applied as one delta (the
/// ops of the due deltas concatenated, one sequence-lock section), as a
/// forwarder that drains its socket before applying would do.
fn writer_coalesced(q: &Query, deltas: &[Delta], rate: f64, stop: &AtomicBool) -> (usize, f64) {
    let t0 = Instant::now();
    let mut i = 0;
    let mut merged: Vec<Op> = Vec::new();
    while i < deltas.len() {
        if stop.load(Ordering::Relaxed) {
            return (i, secs_since(t0));
        }
        let due = ((t0.elapsed().as_secs_f64() * rate) as usize + 1).min(deltas.len());
        if due <= i {
            let next = Duration::from_secs_f64(i as f64 / rate);
            std::thread::sleep(next.saturating_sub(t0.elapsed()) + Duration::from_micros(100));
            continue;
        }
        merged.clear();
        let mut generation = None;
        for d in &deltas[i..due] {
            if let Delta::Ops { generation: g, ops } = d {
                generation = Some(*g);
                merged.extend_from_slice(ops);
            }
        }
        if let Some(g) = generation {
            q.apply_ops(g, &merged).expect("apply merged deltas");
        }
        i = due;
    }
    (deltas.len(), secs_since(t0))
}

fn readers_under_updates<K: BenchKey>(
    o: &mut Othello<K>,
    q: &Query,
    stream: &[K],
    svals: &[u8],
    a: &Args,
) -> String {
    let dur = Duration::from_secs_f64(a.secs);
    let n = stream.len();
    let mut cur = svals.to_vec();
    let mut next = 0usize;
    let (mut alone, mut with, mut rates, mut writes) = (vec![], vec![], vec![], 0usize);
    let (mut with_c, mut rates_c) = (vec![], vec![]);
    let mut bad = 0;
    for round in 0..a.rounds {
        // 0: reader alone, 1: writer applying each delta, 2: writer
        // coalescing what is due; the order rotates between rounds.
        for phase in [round % 3, (round + 1) % 3, (round + 2) % 3] {
            let with_writer = phase != 0;
            // Deltas are computed before the timed part: the writer thread only
            // ships them into the query structure, as a switch agent would.
            let count = (a.rate * a.secs * 1.05) as usize + 64;
            let deltas: Vec<Delta> = if !with_writer {
                Vec::new()
            } else {
                let v: Vec<Delta> = (0..count)
                    .map(|_| {
                        let p = next % n;
                        next += 1;
                        cur[p] ^= 1;
                        let c = o.alter(&stream[p], cur[p] as u64).expect("alter");
                        o.delta(&c, 0)
                    })
                    .collect();
                v
            };
            writes += deltas.iter().map(Delta::write_count).sum::<usize>();
            let stop = AtomicBool::new(false);
            let start = Barrier::new(1 + with_writer as usize);
            let ((done, secs, b), w) = std::thread::scope(|sc| {
                let w = with_writer.then(|| {
                    sc.spawn(|| {
                        start.wait();
                        if phase == 1 {
                            writer(q, &deltas, a.rate, &stop)
                        } else {
                            writer_coalesced(q, &deltas, a.rate, &stop)
                        }
                    })
                });
                let r = sc.spawn(|| {
                    start.wait();
                    let res = reader(q, stream, svals, dur);
                    stop.store(true, Ordering::Relaxed);
                    res
                });
                (
                    r.join().expect("reader"),
                    w.map(|w| w.join().expect("writer")),
                )
            });
            bad += b;
            let ns = secs * 1e9 / done as f64;
            match w {
                None => alone.push(ns),
                Some((applied, wsecs)) => {
                    if phase == 1 {
                        with.push(ns);
                        rates.push(applied as f64 / wsecs);
                    } else {
                        with_c.push(ns);
                        rates_c.push(applied as f64 / wsecs);
                    }
                    for d in &deltas[applied..] {
                        q.apply(d).expect("apply remaining delta");
                    }
                }
            }
        }
    }
    assert_eq!(bad, 0, "a reader saw a value that was never stored");
    let (ma, mw, mr) = (median(&alone), median(&with), median(&rates));
    let per_delta =
        writes as f64 / (2.0 * a.rounds as f64 * ((a.rate * a.secs * 1.05) as usize + 64) as f64);
    let (mwc, mrc) = (median(&with_c), median(&rates_c));
    println!(
        "readers under updates: alone {ma:.2} ns/lookup, with writer {mw:.2} ns/lookup \
         ({:.3} of alone) at {:.2} M updates/s achieved ({per_delta:.2} slot writes/delta); \
         writer coalescing due deltas: {mwc:.2} ns/lookup ({:.3} of alone) at {:.2} M updates/s",
        ratio_median(&alone, &with),
        mr / 1e6,
        ratio_median(&alone, &with_c),
        mrc / 1e6
    );
    JsonObj::new()
        .num("reader_alone_ns", ma)
        .num("reader_with_writer_ns", mw)
        .num("throughput_ratio", ratio_median(&alone, &with))
        .num("reader_with_coalescing_writer_ns", mwc)
        .num("throughput_ratio_coalesced", ratio_median(&alone, &with_c))
        .num("achieved_rate_coalesced", mrc)
        .num("target_rate", a.rate)
        .num("achieved_rate", mr)
        .num("slot_writes_per_delta", per_delta)
        .done()
}

fn control_rounds<K: BenchKey>(
    cfg: Config,
    keys: &[K],
    vals: &[u8],
    stream: &[K],
    svals: &[u8],
    a: &Args,
) -> String {
    let n = keys.len();
    let ops = (n / 10).max(n.min(20_000));
    let (mut ins, mut alt, mut del) = (vec![], vec![], vec![]);
    let (mut bins, mut balt, mut bdel) = (vec![], vec![], vec![]);
    let (mut bo, mut bh) = (vec![], vec![]);
    let (mut rebuilds, mut stashed, mut writes) = (0u64, 0u64, 0u64);
    let mut stash_len = 0;
    for round in 0..a.rounds {
        let mut c = Othello::with_capacity(cfg, n).expect("with_capacity");
        let t = cpu_secs();
        for (k, &v) in keys.iter().zip(vals) {
            black_box(c.insert(*k, v as u64).expect("insert"));
        }
        ins.push(n as f64 / (cpu_secs() - t));
        let st = c.stats();
        rebuilds += st.counters.grow_rebuilds + st.counters.reseed_rebuilds;
        stashed += st.counters.stashed;
        writes += st.counters.slot_writes;
        stash_len = stash_len.max(st.stash_len);
        let t = cpu_secs();
        for (k, &v) in stream[..ops].iter().zip(svals) {
            black_box(c.alter(k, (v ^ 1) as u64).expect("alter"));
        }
        alt.push(ops as f64 / (cpu_secs() - t));
        let t = cpu_secs();
        for k in &stream[..ops] {
            black_box(c.remove(k).expect("remove"));
        }
        del.push(ops as f64 / (cpu_secs() - t));
        drop(c);
        // The same operations through `apply_batch` (batches of 4096, the
        // prefetch pipeline); batch construction is outside the timing.
        const B: usize = 4096;
        let mut c = Othello::with_capacity(cfg, n).expect("with_capacity");
        let batches: Vec<Vec<BatchOp<K>>> = keys
            .chunks(B)
            .zip(vals.chunks(B))
            .map(|(kc, vc)| {
                kc.iter()
                    .zip(vc)
                    .map(|(k, &v)| BatchOp::Insert(*k, v as u64))
                    .collect()
            })
            .collect();
        let t = cpu_secs();
        for b in batches {
            black_box(c.apply_batch(b).expect("insert batch"));
        }
        bins.push(n as f64 / (cpu_secs() - t));
        let batches: Vec<Vec<BatchOp<K>>> = stream[..ops]
            .chunks(B)
            .zip(svals.chunks(B))
            .map(|(kc, vc)| {
                kc.iter()
                    .zip(vc)
                    .map(|(k, &v)| BatchOp::Alter(*k, (v ^ 1) as u64))
                    .collect()
            })
            .collect();
        let t = cpu_secs();
        for b in batches {
            black_box(c.apply_batch(b).expect("alter batch"));
        }
        balt.push(ops as f64 / (cpu_secs() - t));
        let batches: Vec<Vec<BatchOp<K>>> = stream[..ops]
            .chunks(B)
            .map(|kc| kc.iter().map(|k| BatchOp::Remove(*k)).collect())
            .collect();
        let t = cpu_secs();
        for b in batches {
            black_box(c.apply_batch(b).expect("remove batch"));
        }
        bdel.push(ops as f64 / (cpu_secs() - t));
        drop(c);
        for which in [round % 2 == 0, round % 2 != 0] {
            let t = cpu_secs();
            if which {
                let pairs = keys.iter().copied().zip(vals.iter().map(|&v| v as u64));
                black_box(Othello::build(cfg, pairs).expect("build"));
                bo.push(cpu_secs() - t);
            } else {
                let mut m = HashMap::with_capacity(n);
                for (k, &v) in keys.iter().zip(vals) {
                    m.insert(*k, v);
                }
                black_box(m);
                bh.push(cpu_secs() - t);
            }
        }
    }
    let rounds = a.rounds as f64;
    let wpi = writes as f64 / (rounds * n as f64);
    let (mi, ma, md) = (median(&ins), median(&alt), median(&del));
    let (mbo, mbh) = (median(&bo), median(&bh));
    println!(
        "control: insert {:.2} M/s ({wpi:.3} slot writes/insert, {rebuilds} rebuilds, {} stashed/round, \
         max stash {stash_len}), alter {:.2} M/s, delete {:.2} M/s ({ops} ops)",
        mi / 1e6,
        stashed as f64 / rounds,
        ma / 1e6,
        md / 1e6
    );
    let (bi, ba, bd) = (median(&bins), median(&balt), median(&bdel));
    println!(
        "control, apply_batch (4096/batch): insert {:.2} M/s, alter {:.2} M/s, delete {:.2} M/s",
        bi / 1e6,
        ba / 1e6,
        bd / 1e6
    );
    println!(
        "build: othello {:.3} s, hashbrown insert (with_capacity) {:.3} s, ratio {:.2}",
        mbo,
        mbh,
        ratio_median(&bo, &bh)
    );
    JsonObj::new()
        .num("insert_per_s", mi)
        .num("alter_per_s", ma)
        .num("delete_per_s", md)
        .num("batch_insert_per_s", bi)
        .num("batch_alter_per_s", ba)
        .num("batch_delete_per_s", bd)
        .field("alter_delete_ops", ops)
        .field("insert_rounds_per_s", format!("{ins:?}"))
        .num("slot_writes_per_insert", wpi)
        .field("rebuilds", rebuilds)
        .num("stashed_per_round", stashed as f64 / rounds)
        .field("max_stash", stash_len)
        .num("build_othello_s", mbo)
        .num("build_hashbrown_s", mbh)
        .num("build_ratio", ratio_median(&bo, &bh))
        .done()
}

fn main() {
    let a = parse_args();
    let cpu = cpu_model();
    let cores = cores();
    println!(
        "compare: {cpu}, {cores} cores{}",
        if a.smoke { " (smoke)" } else { "" }
    );
    let mut runs = Vec::new();
    for &n in &a.ns {
        let seed = 0x0b5e_55ed ^ n as u64;
        runs.push(match a.keys.as_str() {
            "u64" => bench_n(distinct_u64(seed, n), &a),
            _ => bench_n(five_tuples(seed, n), &a),
        });
    }
    if a.smoke && !a.lookups_only {
        // The lookup-only configuration too: same lookups, and its report
        // has no update or control-plane parts.
        let lo = Args {
            lookups_only: true,
            ..a.clone()
        };
        let n = a.ns.first().copied().unwrap_or(10_000);
        let r = bench_n(distinct_u64(0x0b5e_55ed ^ n as u64, n), &lo);
        assert!(
            r.contains("\"lookups\"") && !r.contains("\"control\""),
            "--lookups-only report: {r}"
        );
        if a.keys == "u64" {
            assert!(runs.first().is_some_and(|r| r.contains("\"control\"")));
        }
    }
    if let Some(path) = &a.json {
        let doc = JsonObj::new()
            .str("cpu", &cpu)
            .field("cores", cores)
            .field("smoke", a.smoke)
            .field("runs", format!("[{}]", runs.join(",")))
            .done();
        std::fs::write(path, doc + "\n").unwrap_or_else(|e| panic!("writing {path}: {e}"));
        println!("wrote {path}");
    }
}
