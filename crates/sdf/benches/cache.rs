//! Decision-cache benchmarks, one process, medians of rounds.
//!
//! ```text
//! cargo bench -p nexthop-sdf --bench cache -- [--smoke] [--entries 4096]
//!     [--lookups 2e6] [--rounds 5] [--deps 10000] [--revoke-rounds 200]
//!     [--only front|wildcard|revocation]
//! ```
//!
//! * Exact front: `--entries` decisions (EtherType, TOS and IPv4
//!   destination marked), looked up in batches of 32 with the keys they
//!   were made for: every lookup is a front hit.
//! * Wildcard, 1 / 4 / 16 / 64 masks: the front off, `--entries` decisions
//!   spread evenly over the masks (mask m marks EtherType, TOS = m, the
//!   first 17 + m mod 16 bits of the destination, and for some m the UDP
//!   destination port and the protocol byte); each lookup key is an entry's frame with every
//!   unmarked byte randomized, uniform over the entries (so over the
//!   masks); plus 64 masks with 90% of the lookups on one mask (what
//!   ranking by hits is for). Beside each: subtables probed per lookup and
//!   a linear scan of the same entries (first match, every word compared)
//!   on the same keys in the same run.
//! * Revocation: `--deps` entries registering one state id (among as many
//!   others registering other ids), `removed` timed per round: p50, p99.
//!
//! Times are thread CPU time (the machines are shared; time spent
//! descheduled is not counted): medians of `--rounds` rounds.

use nexthop_sdf::{Actions, Config, Decision, DecisionCache, HeaderKey, Installed, Mask, BATCH};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::hint::black_box;

use nexthop_testutil::clock::thread_cpu_secs as cpu;

struct Opts {
    entries: usize,
    lookups: usize,
    rounds: usize,
    deps: usize,
    revoke_rounds: usize,
    only: Option<String>,
}

fn parse_num(s: &str) -> usize {
    s.parse::<f64>()
        .map(|x| x as usize)
        .unwrap_or_else(|_| panic!("bad number {s}"))
}

fn opts() -> Opts {
    let mut o = Opts {
        entries: 4096,
        lookups: 2_000_000,
        rounds: 5,
        deps: 10_000,
        revoke_rounds: 200,
        only: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--smoke" => {
                o = Opts {
                    entries: 256,
                    lookups: 20_000,
                    rounds: 1,
                    deps: 1000,
                    revoke_rounds: 5,
                    only: o.only.take(),
                };
                i += 1;
                continue;
            }
            "--entries" => o.entries = parse_num(&v).max(1),
            "--lookups" => o.lookups = parse_num(&v).max(BATCH),
            "--rounds" => o.rounds = parse_num(&v).max(1),
            "--deps" => o.deps = parse_num(&v).max(1),
            "--revoke-rounds" => o.revoke_rounds = parse_num(&v).max(1),
            "--only" => o.only = Some(v),
            // cargo bench passes --bench through.
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

/// A 64-byte Ethernet + IPv4 + UDP frame.
fn frame(r: &mut impl Rng, tos: u8) -> Vec<u8> {
    let mut f: Vec<u8> = (0..64).map(|_| r.gen()).collect();
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[15] = tos;
    f
}

const TOS: usize = 15;
const DST: usize = 30;
const UDP_DST: usize = 36;
const PROTO: usize = 23;

/// Mask m (0..64): EtherType, TOS, the first 17 + m mod 16 bits of the
/// destination, the UDP destination port if m / 16 is odd, the protocol
/// byte if m ≥ 32. Distinct for every m, and each leaves room for 2^17
/// distinct entries.
fn wildcard_mask(m: usize) -> Mask {
    let mut mask = Mask::new();
    mask.mark_bytes(12, 2).unwrap();
    mask.mark_bytes(TOS, 1).unwrap();
    mask.mark(DST * 8, 17 + m % 16).unwrap();
    if (m / 16) % 2 == 1 {
        mask.mark_bytes(UDP_DST, 2).unwrap();
    }
    if m >= 32 {
        mask.mark_bytes(PROTO, 1).unwrap();
    }
    mask
}

/// `frame` with every byte `mask` does not touch randomized.
fn vary(r: &mut impl Rng, f: &[u8], mask: &Mask) -> Vec<u8> {
    let mb = mask.bytes();
    f.iter()
        .enumerate()
        .map(|(i, &b)| (b & mb[i]) | (r.gen::<u8>() & !mb[i]))
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Batched lookups of `keys` (cycled) until `n` are done: lookups/s.
fn run_batched(c: &mut DecisionCache, keys: &[HeaderKey], n: usize) -> f64 {
    let mut out = [None; BATCH];
    let mut done = 0;
    let mut sum = 0usize;
    let t = cpu();
    while done < n {
        for chunk in keys.chunks(BATCH) {
            sum += c.lookup_batch(chunk, &mut out[..chunk.len()]);
            done += chunk.len();
        }
    }
    let s = cpu() - t;
    black_box(sum);
    done as f64 / s
}

struct Linear {
    rules: Vec<([u64; 16], [u64; 16], u16)>,
}

impl Linear {
    fn lookup(&self, k: &[u64; 16]) -> Option<u16> {
        self.rules
            .iter()
            .find(|(m, v, _)| (0..16).all(|w| (k[w] ^ v[w]) & m[w] == 0))
            .map(|r| r.2)
    }
}

fn words(b: &[u8; 128]) -> [u64; 16] {
    let mut w = [0u64; 16];
    for (x, c) in w.iter_mut().zip(b.chunks_exact(8)) {
        *x = u64::from_ne_bytes(c.try_into().unwrap());
    }
    w
}

fn front(o: &Opts) {
    let mut r = Xoshiro256PlusPlus::seed_from_u64(1);
    let mut c = DecisionCache::new(Config {
        capacity: o.entries.max(1 << 10) * 2,
        front_slots: o.entries * 4,
        ..Config::default()
    })
    .unwrap();
    let s = c.new_state_id().unwrap();
    let mut mask = wildcard_mask(15);
    mask.mark_bytes(DST, 4).unwrap();
    let mut keys = Vec::new();
    while keys.len() < o.entries {
        assert!(c.counters().installs < 4 * o.entries as u64);
        let f = frame(&mut r, 0);
        let k = HeaderKey::from_frame(&f, 1);
        let d = Decision {
            mask: mask.clone(),
            states: vec![s],
            actions: Actions::output(2),
        };
        if let Ok(Installed::Cached(_)) = c.install(&k, &d) {
            keys.push(k);
        }
    }
    run_batched(&mut c, &keys, keys.len());
    let before = *c.counters();
    let rates: Vec<f64> = (0..o.rounds)
        .map(|_| run_batched(&mut c, &keys, o.lookups))
        .collect();
    let after = c.counters();
    let n = after.lookups - before.lookups;
    let front_frac = (after.front_hits - before.front_hits) as f64 / n as f64;
    let probes = (after.subtables_probed - before.subtables_probed) as f64 / n as f64;
    // Key extraction from frames, for scale.
    let frames: Vec<Vec<u8>> = (0..1024).map(|_| frame(&mut r, 0)).collect();
    let mut k = HeaderKey::empty(1);
    let t = cpu();
    let reps = (o.lookups / frames.len()).max(1);
    for _ in 0..reps {
        for f in &frames {
            k.fill(f);
            black_box(&k);
        }
    }
    let fill = (reps * frames.len()) as f64 / (cpu() - t);
    println!(
        "exact front      entries {:>6}  {:>7.2} M lookups/s  front hits {:.3}  probes/lookup {:.2}  (key fill alone {:.1} M/s)",
        o.entries,
        median(rates) / 1e6,
        front_frac,
        probes,
        fill / 1e6
    );
}

fn wildcard(o: &Opts, masks: usize, skew: bool) {
    let mut r = Xoshiro256PlusPlus::seed_from_u64(2 + masks as u64);
    let mut c = DecisionCache::new(Config {
        capacity: o.entries * 2,
        front_slots: 0,
        max_masks: 64,
        ..Config::default()
    })
    .unwrap();
    let mut lin = Linear { rules: Vec::new() };
    let mut made: Vec<(Vec<u8>, Mask)> = Vec::new();
    for i in 0..o.entries {
        let m = i % masks;
        let mask = wildcard_mask(m);
        let f = frame(&mut r, m as u8);
        let k = HeaderKey::from_frame(&f, 0);
        let d = Decision {
            mask: mask.clone(),
            states: vec![],
            actions: Actions::output(m as u16),
        };
        if let Ok(Installed::Cached(_)) = c.install(&k, &d) {
            let mw = words(&mask.bytes());
            let kw = words(&k.bytes());
            let v: Vec<u64> = (0..16).map(|w| kw[w] & mw[w]).collect();
            // A same-mask same-value rule replaced: drop the older one.
            lin.rules
                .retain(|(rm, rv, _)| !(rm == &mw && rv[..] == v[..]));
            lin.rules.push((mw, v.try_into().unwrap(), m as u16));
            made.retain(|(g, gm)| !(gm == &mask && mask.matches(&HeaderKey::from_frame(g, 0), &k)));
            made.push((f, mask));
        }
    }
    assert_eq!(c.len(), lin.rules.len());
    let hot = masks - 1;
    let keys: Vec<HeaderKey> = (0..o.entries.max(4096))
        .map(|_| {
            let pick = if skew && r.gen_bool(0.9) {
                let of_hot: Vec<usize> = (0..made.len()).filter(|&i| i % masks == hot).collect();
                of_hot[r.gen_range(0..of_hot.len())]
            } else {
                r.gen_range(0..made.len())
            };
            let (f, m) = &made[pick];
            HeaderKey::from_frame(&vary(&mut r, f, m), 0)
        })
        .collect();
    // Correctness on the way: the cache and the linear scan agree.
    for k in keys.iter().take(512) {
        let got = c
            .lookup(k)
            .and_then(|id| c.actions(id))
            .map(|a| a.ports()[0]);
        assert_eq!(got, lin.lookup(&words(&k.bytes())));
        assert!(got.is_some());
    }
    c.rerank();
    run_batched(&mut c, &keys, keys.len());
    let before = *c.counters();
    let rates: Vec<f64> = (0..o.rounds)
        .map(|_| run_batched(&mut c, &keys, o.lookups))
        .collect();
    let after = c.counters();
    let n = after.lookups - before.lookups;
    let probes = (after.subtables_probed - before.subtables_probed) as f64 / n as f64;
    let hit = (after.wildcard_hits - before.wildcard_hits) as f64 / n as f64;
    let kw: Vec<[u64; 16]> = keys.iter().map(|k| words(&k.bytes())).collect();
    let lin_n = (o.lookups / 50).clamp(1000, 200_000);
    let lin_rates: Vec<f64> = (0..o.rounds)
        .map(|_| {
            let t = cpu();
            let mut done = 0;
            let mut sum = 0u64;
            while done < lin_n {
                for k in &kw {
                    sum += u64::from(lin.lookup(k).unwrap_or(0));
                    done += 1;
                    if done >= lin_n {
                        break;
                    }
                }
            }
            black_box(sum);
            done as f64 / (cpu() - t)
        })
        .collect();
    let (ts, ls) = (median(rates), median(lin_rates));
    println!(
        "wildcard {:>2} mask{} {}  entries {:>6}  {:>7.2} M lookups/s  hits {:.3}  probes/lookup {:>5.2}  linear scan {:>8.3} M/s  ratio {:>6.1}x",
        masks,
        if masks == 1 { " " } else { "s" },
        if skew { "90% one" } else { "uniform" },
        c.len(),
        ts / 1e6,
        hit,
        probes,
        ls / 1e6,
        ts / ls
    );
}

fn revocation(o: &Opts) {
    let mut r = Xoshiro256PlusPlus::seed_from_u64(3);
    let mut c = DecisionCache::new(Config {
        capacity: o.deps * 3,
        ..Config::default()
    })
    .unwrap();
    let masks: Vec<Mask> = (0..4).map(wildcard_mask).collect();
    // Background: as many entries on other states.
    let others: Vec<_> = (0..64).map(|_| c.new_state_id().unwrap()).collect();
    let mut i = 0;
    while c.len() < o.deps {
        assert!(i < o.deps * 4, "keys keep colliding");
        let f = frame(&mut r, (i % 4) as u8);
        let d = Decision {
            mask: masks[i % 4].clone(),
            states: vec![others[i % 64]],
            actions: Actions::output(1),
        };
        let _ = c.install(&HeaderKey::from_frame(&f, 0), &d);
        i += 1;
    }
    let mut times = Vec::new();
    for _ in 0..o.revoke_rounds {
        let s = c.new_state_id().unwrap();
        let mut n = 0;
        while c.dependents(s) < o.deps {
            assert!(n < o.deps * 4, "keys keep colliding");
            let f = frame(&mut r, (n % 4) as u8);
            let d = Decision {
                mask: masks[n % 4].clone(),
                states: vec![s, others[n % 64]],
                actions: Actions::output(2),
            };
            let _ = c.install(&HeaderKey::from_frame(&f, 0), &d);
            n += 1;
        }
        let t = cpu();
        let gone = c.removed(s);
        times.push((cpu() - t) * 1e6);
        assert_eq!(gone, o.deps);
    }
    times.sort_by(f64::total_cmp);
    let p = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    println!(
        "revocation       dependents {:>6}  (+{} other entries)  p50 {:.0} us  p99 {:.0} us  ({} rounds, {:.0} ns per entry at p50)",
        o.deps,
        c.len(),
        p(0.5),
        p(0.99),
        times.len(),
        p(0.5) * 1e3 / o.deps as f64
    );
}

fn main() {
    let o = opts();
    println!(
        "nexthop-sdf decision cache: entries {}, lookups {} per round, rounds {}, batch {}",
        o.entries, o.lookups, o.rounds, BATCH
    );
    let on = |s: &str| o.only.as_deref().is_none_or(|x| x == s);
    if on("front") {
        front(&o);
    }
    if on("wildcard") {
        for m in [1, 4, 16, 64] {
            wildcard(&o, m, false);
        }
        wildcard(&o, 64, true);
    }
    if on("revocation") {
        revocation(&o);
    }
}
