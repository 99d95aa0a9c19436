//! The forwarding pipeline in process, on pre-encoded packets (no sockets).
//!
//! ```text
//! cargo bench -p nexthop-ndn --bench fw -- [--smoke] [--fib 1e6] [--pit 1e6]
//!     [--exchanges 5e5] [--group 32] [--rounds 3] [--cs 65536]
//!     [--cbp-every 0] [--cs-d 2] [--pit-d 4] [--only TEXT]
//! ```
//!
//! `--only TEXT` runs only the rows whose mode and calls contain TEXT
//! (`"core batch+prefetch all"`, `edge`, `process`, ...), to profile one.
//!
//! A FIB of `fib` two-component rules (`/s<k>/d<k mod 16>`, next hop face
//! 2) and `pit` pending Interests (long lifetime, never answered) are set
//! up first, and the Content Store is filled with `cs` packets by as many
//! exchanges (LRU; 0: no Content Store, to measure its share), so the timed
//! run is in steady state: every Data evicts one. Then every exchange is an Interest from face 1
//! (LpPacket with an 8-byte PitToken, a unique four-component name under a
//! random rule, so it misses the CS, inserts in the PIT, looks up the FIB
//! and is forwarded to face 2) and the Data for it from face 2 (PIT match,
//! CS insert with eviction, sent to face 1 with its token). Decoding is
//! included (the pipeline's input is bytes). Exchanges go in groups of
//! `group`: the group's Interests, then their Data (so a Data does not
//! find its Interest's state still in cache, as it would right after it),
//! either one `process` call per packet (FIB lookups on the decoder's
//! cached prefix hashes) or one `process_batch` per half group with
//! `Prefetch::First` (decode the half group, prefetch every packet's first
//! FIB bucket and CS and PIT candidates, then process) or `Prefetch::All`
//! (every FIB level's bucket). Reported: packets per second on one core (Interests + Data;
//! thread CPU time), edge mode (exact PIT) and core mode (fingerprint PIT,
//! 16-bit fingerprints). With `--cbp-every k > 0` every k-th Interest
//! has CanBePrefix (as python-ndn and NDNts send some), so the edge CS
//! keeps its CanBePrefix index and the exact PIT probes Data prefixes.

use nexthop_testutil::args::count_or_exit;
use std::hint::black_box;

use nexthop_ndn::cs::CsConfig;
use nexthop_ndn::fib::{Config, Fib, Prefetch};
use nexthop_ndn::fw::{Actions, Forwarder, FwConfig, PitMode};
use nexthop_ndn::nexthop::NextHop;
use nexthop_ndn::pit::{ExactPitConfig, FingerprintPitConfig};
use nexthop_testutil::bench::perf_ctl;
use nexthop_testutil::clock::thread_cpu_secs;
use nexthop_wire::ndn::{Data, Interest, LpPacket, Name, NameComponent};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

struct Opts {
    smoke: bool,
    fib: usize,
    pit: usize,
    exchanges: usize,
    group: usize,
    rounds: usize,
    cs: usize,
    cbp_every: usize,
    /// Content Store subtables (`d`; 0: the default).
    cs_d: usize,
    /// Fingerprint PIT subtables (`d`; 0: the default).
    pit_d: usize,
    /// Only the rows whose mode and calls contain this.
    only: Option<String>,
}

fn opts() -> Opts {
    let mut o = Opts {
        smoke: false,
        fib: 1_000_000,
        pit: 1_000_000,
        exchanges: 500_000,
        group: 32,
        rounds: 3,
        cs: 65536,
        cbp_every: 0,
        cs_d: 0,
        pit_d: 0,
        only: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let v = || args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--smoke" => {
                o.smoke = true;
                o.fib = 10_000;
                o.pit = 10_000;
                o.exchanges = 20_000;
                o.rounds = 1;
                i += 1;
                continue;
            }
            "--fib" => o.fib = count_or_exit(&v()),
            "--pit" => o.pit = count_or_exit(&v()),
            "--exchanges" => o.exchanges = count_or_exit(&v()),
            "--group" => o.group = count_or_exit(&v()).max(1),
            "--rounds" => o.rounds = count_or_exit(&v()),
            "--cs" => o.cs = count_or_exit(&v()),
            "--cbp-every" => o.cbp_every = count_or_exit(&v()),
            "--cs-d" => o.cs_d = count_or_exit(&v()),
            "--pit-d" => o.pit_d = count_or_exit(&v()),
            "--only" => o.only = Some(v()),
            "--bench" => {
                i += 1;
                continue;
            }
            a => panic!("unknown argument {a}"),
        }
        i += 2;
    }
    o
}

fn rule(k: usize) -> Name {
    Name::from_components([
        NameComponent::generic(format!("s{k}")),
        NameComponent::generic(format!("d{}", k % 16)),
    ])
}

fn leaf(k: usize, j: usize) -> Name {
    let mut n = rule(k);
    n.push(&NameComponent::generic(format!("obj{j}")));
    n.push(&NameComponent::segment(0));
    n
}

struct Exchange {
    interest: Vec<u8>,
    data: Vec<u8>,
}

/// `count` exchanges whose names are numbered from `first`.
fn exchanges(o: &Opts, count: usize, first: usize, rng: &mut Xoshiro256PlusPlus) -> Vec<Exchange> {
    (0..count)
        .map(|j| {
            let n = leaf(rng.gen_range(0..o.fib), first + j);
            let mut i = Interest::new(n.clone());
            i.nonce = Some(rng.gen());
            i.lifetime_ms = Some(4000);
            i.can_be_prefix = o.cbp_every > 0 && j % o.cbp_every == 0;
            let lp = LpPacket {
                pit_token: Some((j as u64).to_be_bytes().to_vec()),
                ..LpPacket::wrap(i.to_wire())
            };
            let mut d = Data::new(n, vec![0xab; 100]);
            d.meta_info.freshness_period_ms = Some(10_000);
            d.sign_digest_sha256();
            Exchange {
                interest: lp.to_wire(),
                data: d.to_wire(),
            }
        })
        .collect()
}

fn forwarder(core: bool, prefetch: Prefetch, o: &Opts) -> Forwarder {
    let pit = if core {
        PitMode::Fingerprint(FingerprintPitConfig {
            capacity: (o.pit * 4 / 3).max(1024),
            max_lifetime_ms: 16_000,
            subtables: if o.pit_d > 0 {
                o.pit_d
            } else {
                FingerprintPitConfig::default().subtables
            },
            ..FingerprintPitConfig::default()
        })
    } else {
        PitMode::Exact(ExactPitConfig {
            max_entries: o.pit + (1 << 16),
            ..ExactPitConfig::default()
        })
    };
    // Edge routers answer CanBePrefix Interests from the CS (its ordered
    // name index, built on the first such lookup: never in this stream);
    // core routers do not.
    let cs = (o.cs > 0).then(|| CsConfig {
        capacity_packets: o.cs,
        prefix_index: !core,
        subtables: if o.cs_d > 0 {
            o.cs_d
        } else {
            CsConfig::default().subtables
        },
        ..CsConfig::default()
    });
    Forwarder::new(FwConfig {
        pit,
        cs,
        batch_prefetch: prefetch,
        ..FwConfig::default()
    })
    .expect("valid config")
}

/// Fill the PIT with `o.pit` Interests that are never answered, then the
/// Content Store with `o.cs` exchanges.
fn prefill(fw: &mut Forwarder, fib: &Fib, o: &Opts, rng: &mut Xoshiro256PlusPlus) {
    let mut out = Actions::new();
    for j in 0..o.pit {
        let mut i = Interest::new(leaf(rng.gen_range(0..o.fib), usize::MAX - j));
        i.nonce = Some(rng.gen());
        i.lifetime_ms = Some(15_000);
        fw.process(fib, 3, &i.to_wire(), 0, &mut out);
        out.clear();
    }
    assert!(fw.pit_len() >= o.pit * 99 / 100, "PIT prefill fell short");
    // Fill the Content Store: a long-running forwarder's store is full, so
    // the timed exchanges evict (and reuse buffers) from the first one.
    let pit = fw.pit_len();
    for e in exchanges(o, o.cs, 1 << 40, rng) {
        fw.process(fib, 1, &e.interest, 0, &mut out);
        fw.process(fib, 2, &e.data, 0, &mut out);
        out.clear();
    }
    let cs = fw.content_store().map_or(0, |c| c.len());
    assert!(cs >= o.cs * 99 / 100, "CS prefill fell short: {cs}");
    assert_eq!(fw.pit_len(), pit, "CS prefill left PIT entries");
}

/// Run every exchange in groups of `group` Interests then their Data
/// (`batched`: one `process_batch` call per half group);
/// returns packets per second (thread CPU time) and the sends beyond one
/// Interest and one Data per exchange (core mode: fingerprint false
/// matches delivering a Data to a pending entry's faces too).
fn run(
    fw: &mut Forwarder,
    fib: &Fib,
    ex: &[Exchange],
    group: usize,
    batched: bool,
    now: u64,
) -> (f64, usize) {
    let mut out = Actions::new();
    let mut ib: Vec<(u32, &[u8])> = Vec::with_capacity(group);
    let mut db: Vec<(u32, &[u8])> = Vec::with_capacity(group);
    let mut sent = 0usize;
    perf_ctl("enable");
    let t = thread_cpu_secs();
    for g in ex.chunks(group) {
        if !batched {
            for e in g {
                fw.process(fib, 1, &e.interest, now, &mut out);
            }
            for e in g {
                fw.process(fib, 2, &e.data, now, &mut out);
            }
        } else {
            ib.clear();
            db.clear();
            ib.extend(g.iter().map(|e| (1u32, e.interest.as_slice())));
            db.extend(g.iter().map(|e| (2u32, e.data.as_slice())));
            fw.process_batch(fib, &ib, now, &mut out);
            fw.process_batch(fib, &db, now, &mut out);
        }
        sent += out.sends().len();
        out.clear();
    }
    let dt = thread_cpu_secs() - t;
    perf_ctl("disable");
    black_box(sent);
    assert!(
        sent >= 2 * ex.len(),
        "every Interest forwarded and answered"
    );
    (2.0 * ex.len() as f64 / dt, sent - 2 * ex.len())
}

fn main() {
    let o = opts();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x6677_6265_6e63_6800);
    let t = std::time::Instant::now();
    let rules = (0..o.fib).map(|k| (rule(k), [NextHop { face: 2, cost: 1 }]));
    let (fib, _) = Fib::build(Config::default(), rules).expect("FIB builds");
    eprintln!("fib: {} rules in {:.1} s", o.fib, t.elapsed().as_secs_f64());
    println!(
        "# forwarding pipeline, in process: {} FIB rules, {} pending Interests, CS {} packets (LRU; edge: CanBePrefix enabled), CanBePrefix on {} Interests, {} exchanges per run",
        o.fib,
        o.pit,
        o.cs,
        if o.cbp_every == 0 {
            "no".to_string()
        } else {
            format!("1 in {}", o.cbp_every)
        },
        o.exchanges
    );
    println!(
        "mode   calls (groups of {})  Mpkt/s(median)  extra_sends  runs",
        o.group
    );
    for core in [false, true] {
        let styles = [
            ("process", false, Prefetch::None),
            ("batch+prefetch", true, Prefetch::First),
            ("batch+prefetch all", true, Prefetch::All),
        ];
        for (style, batched, prefetch) in styles {
            let name = format!("{} {style}", if core { "core" } else { "edge" });
            if o.only.as_ref().is_some_and(|w| !name.contains(w.as_str())) {
                continue;
            }
            let mut rates = Vec::new();
            let mut extra = 0;
            for round in 0..o.rounds {
                let mut fw = forwarder(core, prefetch, &o);
                prefill(&mut fw, &fib, &o, &mut rng);
                let ex = exchanges(&o, o.exchanges, (round + 1) * o.exchanges, &mut rng);
                let (r, x) = run(&mut fw, &fib, &ex, o.group, batched, 1);
                rates.push(r / 1e6);
                extra += x;
            }
            rates.sort_by(|a, b| a.total_cmp(b));
            let med = rates[rates.len() / 2];
            let runs: Vec<String> = rates.iter().map(|r| format!("{r:.2}")).collect();
            println!(
                "{:<6} {:<20}  {:>14.2}  {:>11}  {}",
                if core { "core" } else { "edge" },
                style,
                med,
                extra,
                runs.join(",")
            );
        }
    }
    if o.smoke {
        println!("smoke run: figures are not meaningful");
    }
}
