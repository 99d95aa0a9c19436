//! PIT and Content Store benchmarks, one process, thread CPU time.
//!
//! ```text
//! cargo bench -p nexthop-ndn --bench pit_cs -- [--smoke] [--n 1e6,16e6]
//!     [--exact-n 1e6,16e6] [--fp-bits 8,12,16] [--pit-d 2] [--catalog 1e6] [--cs 1e5] [--cs-d 2]
//!     [--requests 4e6] [--zipf 0.8,1.0] [--rounds 3] [--only pit|fpr|cs]
//! ```
//!
//! * PIT insert+satisfy: `n` entries are pending (pre-filled with unique
//!   names), then every operation inserts a new unique Interest and
//!   satisfies the oldest pending one, so the table stays at `n` entries.
//!   Reported: operation pairs per second (one core; the median of
//!   `rounds` consecutive timed phases on the same table), bytes per entry.
//!   Fingerprint mode, one call per packet and batched (16 Interests then
//!   16 Data, candidate buckets prefetched, hashing included): w = 16, t = 12, 16 ms ticks, 16 faces,
//!   `d` = `--pit-d` (the default config's unless given), buckets sized for 75% load, an overflow
//!   table of up to 1/32 of the capacity; `overflow` is its size at the end. Exact mode:
//!   one in-record with a PIT token and one out-record per entry.
//! * False matches (§5.4.5): at steady state with `n` pending names, the
//!   fraction of new unique Interests that hit an existing fingerprint
//!   (collided) and of Data for never-requested names that match one,
//!   against `pending / (B * 2^w)` (this table's hash construction) and
//!   the dissertation's bound `E * d * ld / 2^w`.
//! * Content Store: a Zipf request stream over `catalog` names; a lookup
//!   per request, a 256-byte Data inserted on a miss; capacity `cs`
//!   packets; the first 10% warm the store. Hit rate and, each timed as a
//!   block (no clock read per operation) with the median of `rounds`:
//!   requests per second (the measured stream cut in `rounds` pieces),
//!   lookups per second (the measured stream's lookups replayed on the
//!   final store, no inserts) and inserts per second (`requests / 10`
//!   never-seen names reported with enough requests to be admitted, each
//!   evicting a packet), for LRU, LFU and selective caching (LRU, admit
//!   after 2 requests).

use nexthop_testutil::args::count_or_exit;
use std::hint::black_box;

use nexthop_ndn::cs::{ContentStore, CsConfig, CsQuery, Policy};
use nexthop_ndn::name::NameSlice;
use nexthop_ndn::pit::{
    DataMatch, ExactPit, ExactPitConfig, FingerprintPit, FingerprintPitConfig, FpInsert,
    FpInterest, FpSatisfy, InsertOutcome, InterestIn, PitToken,
};
use nexthop_testutil::clock::thread_cpu_secs;
use nexthop_testutil::keys::zipf_indices;

struct Opts {
    smoke: bool,
    n: Vec<usize>,
    exact_n: Vec<usize>,
    fp_bits: Vec<u32>,
    catalog: usize,
    cs: usize,
    /// Content Store subtables (`d`).
    cs_d: usize,
    /// Fingerprint PIT subtables (`d`).
    pit_d: usize,
    requests: usize,
    zipf: Vec<f64>,
    rounds: usize,
    only: Option<String>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn opts() -> Opts {
    let mut o = Opts {
        smoke: false,
        n: vec![1_000_000, 16_000_000],
        exact_n: vec![1_000_000, 16_000_000],
        fp_bits: vec![8, 12, 16],
        catalog: 1_000_000,
        cs: 100_000,
        cs_d: CsConfig::default().subtables,
        pit_d: FingerprintPitConfig::default().subtables,
        requests: 4_000_000,
        zipf: vec![0.8, 1.0],
        rounds: 3,
        only: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--smoke" => {
                o.smoke = true;
                o.n = vec![20_000];
                o.exact_n = vec![20_000];
                o.fp_bits = vec![8];
                o.catalog = 20_000;
                o.cs = 2_000;
                o.requests = 50_000;
                o.zipf = vec![0.8];
                o.rounds = 1;
                i += 1;
                continue;
            }
            "--bench" => {
                i += 1;
                continue;
            }
            "--n" => o.n = v.split(',').map(count_or_exit).collect(),
            "--exact-n" => o.exact_n = v.split(',').map(count_or_exit).collect(),
            "--fp-bits" => o.fp_bits = v.split(',').map(|x| count_or_exit(x) as u32).collect(),
            "--catalog" => o.catalog = count_or_exit(&v),
            "--cs" => o.cs = count_or_exit(&v),
            "--cs-d" => o.cs_d = count_or_exit(&v),
            "--pit-d" => o.pit_d = count_or_exit(&v),
            "--requests" => o.requests = count_or_exit(&v),
            "--zipf" => {
                o.zipf = v
                    .split(',')
                    .map(|x| x.parse().unwrap_or_else(|_| panic!("bad exponent {x}")))
                    .collect()
            }
            "--only" => o.only = Some(v),
            "--rounds" => o.rounds = count_or_exit(&v).max(1),
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    o
}

/// Name `/bench/<i>` as component TLVs in a fixed buffer: generic
/// components "bench" and an 8-byte big-endian `i`.
struct NameGen {
    buf: [u8; 17],
    ends: [u32; 2],
}

impl NameGen {
    fn new() -> NameGen {
        let mut buf = [0u8; 17];
        buf[..7].copy_from_slice(&[8, 5, b'b', b'e', b'n', b'c', b'h']);
        buf[7] = 8;
        buf[8] = 8;
        NameGen { buf, ends: [7, 17] }
    }
    #[inline(always)]
    fn set(&mut self, i: u64) -> NameSlice<'_> {
        self.buf[9..17].copy_from_slice(&i.to_be_bytes());
        NameSlice::new(&self.buf, &self.ends).expect("valid offsets")
    }
    #[inline(always)]
    fn bytes(&mut self, i: u64) -> &[u8] {
        self.buf[9..17].copy_from_slice(&i.to_be_bytes());
        &self.buf
    }
}

fn fp_config(n: usize, fp_bits: u32, d: usize) -> FingerprintPitConfig {
    let capacity = (n as f64 / 0.75) as usize;
    FingerprintPitConfig {
        capacity,
        subtables: d,
        overflow_cap: capacity / 32,
        fp_bits,
        timer_bits: 12,
        tick_ms: 16,
        max_lifetime_ms: 16_000,
        faces: 16,
        ..FingerprintPitConfig::default()
    }
}

/// Simulated time: 1 ms per 4096 operations (lifetimes of 16 s cover
/// 16e6 pending entries at any rate).
#[inline(always)]
fn now_of(i: u64) -> u64 {
    i >> 12
}

fn bench_fp_pit(o: &Opts) {
    println!(
        "\n== fingerprint PIT: insert + satisfy at n pending (w = 16, d = {}, E = 8)",
        o.pit_d
    );
    println!(
        "{:>10} {:>10} {:>8} {:>10} {:>12} {:>10} {:>12} {:>10} {:>9}",
        "n",
        "capacity",
        "load",
        "B/entry",
        "pairs/s",
        "ns/pair",
        "batch16/s",
        "ns/pair",
        "overflow"
    );
    for &n in &o.n {
        let mut p = FingerprintPit::new(fp_config(n, 16, o.pit_d)).expect("config");
        let mut g = NameGen::new();
        let life = Some(16_000);
        for i in 0..n as u64 {
            p.insert(g.bytes(i), (i % 16) as u32, life, now_of(i));
        }
        let ops = if o.smoke { n } else { n.max(4_000_000) } as u64;
        let mut dts = Vec::new();
        let mut next = 0u64;
        for _ in 0..o.rounds {
            let t0 = thread_cpu_secs();
            let mut delivered = 0u64;
            for k in next..next + ops {
                let i = n as u64 + k;
                let now = now_of(i);
                black_box(p.insert(g.bytes(i), (i % 16) as u32, life, now));
                delivered += p.satisfy(g.bytes(k), now).faces.count_ones() as u64;
            }
            dts.push(thread_cpu_secs() - t0);
            assert!(delivered >= ops * 99 / 100, "lost Data: {delivered}/{ops}");
            next += ops;
        }
        let dt = median(dts);
        // Batched: groups of 16 Interests and 16 Data, buckets prefetched.
        const G: usize = 16;
        let mut items = [FpInterest {
            key: p.key(b""),
            face: 0,
            lifetime_ms: life,
        }; G];
        let mut keys = [p.key(b""); G];
        let mut ins = [FpInsert::Full; G];
        let mut sat = [FpSatisfy::default(); G];
        let mut dts = Vec::new();
        for _ in 0..o.rounds {
            let t0 = thread_cpu_secs();
            let mut delivered = 0u64;
            for base in (next..next + ops).step_by(G) {
                let now = now_of(n as u64 + base);
                for (j, it) in items.iter_mut().enumerate() {
                    let i = n as u64 + base + j as u64;
                    it.key = p.key(g.bytes(i));
                    it.face = (i % 16) as u32;
                }
                for (j, k) in keys.iter_mut().enumerate() {
                    *k = p.key(g.bytes(base + j as u64));
                }
                p.insert_batch(&items, now, &mut ins);
                p.satisfy_batch(&keys, now, &mut sat);
                delivered += sat.iter().map(|s| s.faces.count_ones() as u64).sum::<u64>();
            }
            dts.push(thread_cpu_secs() - t0);
            assert!(
                delivered >= ops * 99 / 100,
                "lost Data (batched): {delivered}/{ops}"
            );
            next += ops;
        }
        let dtb = median(dts);
        println!(
            "{:>10} {:>10} {:>8.3} {:>10.1} {:>12.0} {:>10.1} {:>12.0} {:>10.1} {:>9}",
            n,
            p.capacity(),
            p.len() as f64 / p.capacity() as f64,
            p.bytes_per_entry(),
            ops as f64 / dt,
            dt * 1e9 / ops as f64,
            ops as f64 / dtb,
            dtb * 1e9 / ops as f64,
            p.overflow_len()
        );
    }
}

fn bench_exact_pit(o: &Opts) {
    println!("\n== exact PIT: insert + out-record + satisfy at n pending (1 in-record with token, 1 out-record)");
    println!(
        "{:>10} {:>12} {:>12} {:>10}",
        "n", "B/entry", "pairs/s", "ns/pair"
    );
    for &n in &o.exact_n {
        let cfg = ExactPitConfig {
            max_entries: n + 16,
            max_lifetime_ms: 16_000,
            ..ExactPitConfig::default()
        };
        let mut p = ExactPit::new(cfg).expect("config");
        let mut g = NameGen::new();
        let token = PitToken::new(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let insert = |p: &mut ExactPit, g: &mut NameGen, i: u64| {
            let name = g.set(i);
            let r = p.insert(
                &InterestIn {
                    name: &name,
                    can_be_prefix: false,
                    must_be_fresh: false,
                    nonce: i as u32,
                    lifetime_ms: Some(16_000),
                    face: (i % 16) as u32,
                    token,
                    multi_access: false,
                },
                now_of(i),
            );
            if let InsertOutcome::New(id) = r {
                p.add_out_record(id, 99, i as u32, Some(16_000), now_of(i));
            }
        };
        for i in 0..n as u64 {
            insert(&mut p, &mut g, i);
        }
        let bytes = p.memory_bytes() as f64 / p.len() as f64;
        let ops = if o.smoke { n } else { n.max(4_000_000) };
        let mut out = Vec::with_capacity(4);
        let mut g2 = NameGen::new();
        let mut dts = Vec::new();
        for r in 0..o.rounds as u64 {
            let t0 = thread_cpu_secs();
            let mut delivered = 0;
            for k in r * ops as u64..(r + 1) * ops as u64 {
                let i = n as u64 + k;
                insert(&mut p, &mut g, i);
                out.clear();
                let name = g2.set(k);
                delivered += p.satisfy(
                    &DataMatch {
                        name: &name,
                        digest: None,
                    },
                    99,
                    now_of(i),
                    &mut out,
                );
            }
            dts.push(thread_cpu_secs() - t0);
            assert_eq!(delivered, ops);
        }
        let dt = median(dts);
        println!(
            "{:>10} {:>12.1} {:>12.0} {:>10.1}",
            n,
            bytes,
            ops as f64 / dt,
            dt * 1e9 / ops as f64
        );
    }
}

fn bench_false_matches(o: &Opts) {
    let n = if o.smoke { 20_000 } else { 1_000_000 };
    println!(
        "\n== fingerprint PIT false matches at n = {n} pending (d = {}, E = 8)",
        o.pit_d
    );
    println!(
        "{:>4} {:>8} {:>14} {:>14} {:>14} {:>14}",
        "w", "load", "interest coll", "data false", "pending/B2^w", "E*d*ld/2^w"
    );
    for &w in &o.fp_bits {
        let mut p = FingerprintPit::new(fp_config(n, w, o.pit_d)).expect("config");
        let mut g = NameGen::new();
        for i in 0..n as u64 {
            p.insert(g.bytes(i), 0, Some(16_000), 0);
        }
        let probes = if o.smoke { 20_000 } else { 1_000_000 };
        let (mut coll, mut false_data) = (0u64, 0u64);
        for k in 0..probes as u64 {
            let i = n as u64 + k;
            // A new unique Interest, then the oldest one's Data.
            if let FpInsert::Forward { collided: true, .. } =
                p.insert(g.bytes(i), 0, Some(16_000), 0)
            {
                coll += 1;
            }
            p.satisfy(g.bytes(k), 0);
            // Data for a name nobody asked for.
            if p.satisfy(g.bytes(u64::MAX - k), 0).faces != 0 {
                false_data += 1;
            }
        }
        let load = p.len() as f64 / p.capacity() as f64;
        let d = o.pit_d as f64;
        let buckets = p.capacity() as f64 / d / 8.0;
        let predicted = p.len() as f64 / (buckets * 2f64.powi(w as i32));
        let paper = 8.0 * d * load / 2f64.powi(w as i32);
        println!(
            "{:>4} {:>8.3} {:>14.3e} {:>14.3e} {:>14.3e} {:>14.3e}",
            w,
            load,
            coll as f64 / probes as f64,
            false_data as f64 / probes as f64,
            predicted,
            paper
        );
    }
}

/// An exact-name query.
fn q<'a>(name: &'a NameSlice<'a>) -> CsQuery<'a, NameSlice<'a>> {
    CsQuery {
        name,
        can_be_prefix: false,
        must_be_fresh: false,
    }
}

fn bench_cs(o: &Opts) {
    println!(
        "\n== Content Store: Zipf over {} names, capacity {} packets, 256-byte Data, {} requests",
        o.catalog, o.cs, o.requests
    );
    println!(
        "{:>5} {:>10} {:>8} {:>12} {:>12} {:>12} {:>10}",
        "zipf", "policy", "hit", "requests/s", "lookups/s", "inserts/s", "evicted"
    );
    let wire = vec![0xABu8; 256];
    for &s in &o.zipf {
        let stream = zipf_indices(7, o.catalog, s, o.requests).expect("zipf");
        for (label, policy, admit) in [
            ("LRU", Policy::Lru, 0),
            ("LFU", Policy::Lfu, 0),
            ("sel-k2", Policy::Lru, 2),
        ] {
            let mut cs = ContentStore::new(CsConfig {
                capacity_packets: o.cs,
                capacity_bytes: o.cs * 256,
                max_packet_bytes: 256,
                policy,
                admit_after: admit,
                prefix_index: false,
                subtables: o.cs_d,
                ..CsConfig::default()
            })
            .expect("config");
            let mut g = NameGen::new();
            // Warm up with the first 10% of the stream, then measure in
            // `rounds` pieces.
            let warm = o.requests / 10;
            let mut hits = 0u64;
            let mut run = |cs: &mut ContentStore, part: &[usize], count: bool| {
                for &r in part {
                    let name = g.set(r as u64);
                    let hit = cs.lookup(&q(&name), 0).is_some();
                    if !hit {
                        black_box(cs.insert(&name, &wire, Some(1_000_000), 1, 0));
                    } else if count {
                        hits += 1;
                    }
                }
            };
            run(&mut cs, &stream[..warm], false);
            let measured = &stream[warm..];
            let piece = measured.len().div_ceil(o.rounds).max(1);
            let mut req_rates = Vec::new();
            for part in measured.chunks(piece) {
                let t0 = thread_cpu_secs();
                run(&mut cs, part, true);
                req_rates.push(part.len() as f64 / (thread_cpu_secs() - t0));
            }
            let hit_rate = hits as f64 / measured.len() as f64;
            let evicted = cs.stats().evicted;
            let mut g = NameGen::new();
            let mut lookup_rates = Vec::new();
            for _ in 0..o.rounds {
                let t0 = thread_cpu_secs();
                for &r in measured {
                    black_box(cs.lookup(&q(&g.set(r as u64)), 0).is_some());
                }
                lookup_rates.push(measured.len() as f64 / (thread_cpu_secs() - t0));
            }
            let fresh = (o.requests / 10).max(1) as u64;
            let mut insert_rates = Vec::new();
            for k in 0..o.rounds as u64 {
                let base = o.catalog as u64 + k * fresh;
                let t0 = thread_cpu_secs();
                for i in base..base + fresh {
                    black_box(cs.insert(&g.set(i), &wire, Some(1_000_000), admit.max(1), 0));
                }
                insert_rates.push(fresh as f64 / (thread_cpu_secs() - t0));
            }
            println!(
                "{:>5} {:>10} {:>8.4} {:>12.0} {:>12.0} {:>12.0} {:>10}",
                s,
                label,
                hit_rate,
                median(req_rates),
                median(lookup_rates),
                median(insert_rates),
                evicted
            );
        }
    }
}

fn main() {
    let o = opts();
    println!(
        "nexthop-ndn pit_cs bench ({})",
        if o.smoke { "smoke" } else { "full" }
    );
    let only = o.only.clone();
    if only.as_deref().is_none_or(|x| x == "pit") {
        bench_fp_pit(&o);
        bench_exact_pit(&o);
    }
    if only.as_deref().is_none_or(|x| x == "fpr") {
        bench_false_matches(&o);
    }
    if only.as_deref().is_none_or(|x| x == "cs") {
        bench_cs(&o);
    }
}
