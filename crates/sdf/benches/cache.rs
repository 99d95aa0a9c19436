//! Decision-cache benchmarks, one process, medians of rounds.
//!
//! ```text
//! cargo bench -p nexthop-sdf --bench cache -- [--smoke] [--entries 4096]
//!     [--lookups 2e6] [--rounds 5] [--deps 10000] [--revoke-rounds 200]
//!     [--only front|wildcard|revocation|tse]
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
//!   others registering other ids), `removed` timed per round: p50, p99
//!   of its thread CPU time under the lock, and of its wall time with the
//!   wait for the lock, while a second thread runs batched lookups of the
//!   other entries under the same lock (as the pipeline's workers do).
//! * Tuple-space explosion (`tse`): legitimate wildcard hits (`--entries`
//!   decisions over 4 masks, looked up in a random order) with one packet in 100 an attack packet that
//!   misses and is decided with a new mask (1024 distinct, as the TSE
//!   paper's crafted packets make the classifier do), against the same
//!   traffic without attack, alternating in each round: legitimate
//!   lookups/s (installs included) with the masks uncapped (4096) and
//!   with the default cap of 64.
//!
//! Times are thread CPU time (the machines are shared; time spent
//! descheduled is not counted): medians of `--rounds` rounds.

use nexthop_sdf::{
    Actions, Config, Decision, DecisionCache, HeaderKey, Installed, Mask, StateIds, BATCH,
};
use nexthop_testutil::args::count_or_exit;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use nexthop_testutil::bench::{self, ratio_median};

use nexthop_testutil::clock::thread_cpu_secs as cpu;

struct Opts {
    entries: usize,
    lookups: usize,
    rounds: usize,
    deps: usize,
    revoke_rounds: usize,
    only: Option<String>,
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
            "--entries" => o.entries = count_or_exit(&v).max(1),
            "--lookups" => o.lookups = count_or_exit(&v).max(BATCH),
            "--rounds" => o.rounds = count_or_exit(&v).max(1),
            "--deps" => o.deps = count_or_exit(&v).max(1),
            "--revoke-rounds" => o.revoke_rounds = count_or_exit(&v).max(1),
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
            states: StateIds::from_slice(&[s]),
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
            states: StateIds::new(),
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
    let cache = Arc::new(Mutex::new(
        DecisionCache::new(Config {
            capacity: o.deps * 3,
            ..Config::default()
        })
        .unwrap(),
    ));
    let masks: Vec<Mask> = (0..4).map(wildcard_mask).collect();
    // Background: as many entries on other states; the lookup thread's
    // keys are theirs (hits that stay valid through every revocation).
    let mut bg_keys = Vec::new();
    let others: Vec<_> = {
        let mut c = cache.lock().unwrap();
        let others: Vec<_> = (0..64).map(|_| c.new_state_id().unwrap()).collect();
        let mut i = 0;
        while c.len() < o.deps {
            assert!(i < o.deps * 4, "keys keep colliding");
            // TOS 4..8: never the same masked key as a revoked entry
            // (TOS 0..4), so the lookups keep hitting.
            let f = frame(&mut r, (4 + i % 4) as u8);
            let d = Decision {
                mask: masks[i % 4].clone(),
                states: StateIds::from_slice(&[others[i % 64]]),
                actions: Actions::output(1),
            };
            let k = HeaderKey::from_frame(&f, 0);
            if let Ok(Installed::Cached(_)) = c.install(&k, &d) {
                bg_keys.push(HeaderKey::from_frame(&vary(&mut r, &f, &masks[i % 4]), 0));
            }
            i += 1;
        }
        others
    };
    // The second thread: batched lookups under the lock, as a worker does,
    // until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let looker = {
        let (cache, stop) = (cache.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut out = [None; BATCH];
            let (mut n, mut hits) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                for chunk in bg_keys.chunks(BATCH) {
                    let mut c = cache.lock().unwrap();
                    hits += c.lookup_batch(chunk, &mut out[..chunk.len()]) as u64;
                    n += chunk.len() as u64;
                }
            }
            (n, hits)
        })
    };
    let (mut cpu_us, mut wall_us) = (Vec::new(), Vec::new());
    let t_all = Instant::now();
    for _ in 0..o.revoke_rounds {
        // Installs in slices, so the lookups keep going meanwhile.
        let s = cache.lock().unwrap().new_state_id().unwrap();
        let mut n = 0;
        loop {
            let mut c = cache.lock().unwrap();
            if c.dependents(s) >= o.deps {
                break;
            }
            for _ in 0..256 {
                assert!(n < o.deps * 4, "keys keep colliding");
                let f = frame(&mut r, (n % 4) as u8);
                let d = Decision {
                    mask: masks[n % 4].clone(),
                    states: StateIds::from_slice(&[s, others[n % 64]]),
                    actions: Actions::output(2),
                };
                let _ = c.install(&HeaderKey::from_frame(&f, 0), &d);
                n += 1;
                if c.dependents(s) >= o.deps {
                    break;
                }
            }
        }
        let w = Instant::now();
        let mut c = cache.lock().unwrap();
        let t = cpu();
        let gone = c.removed(s);
        cpu_us.push((cpu() - t) * 1e6);
        drop(c);
        wall_us.push(w.elapsed().as_secs_f64() * 1e6);
        assert_eq!(gone, o.deps);
    }
    let secs = t_all.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let (looked, hits) = looker.join().unwrap();
    let pct = |v: &mut Vec<f64>, q: f64| {
        v.sort_by(f64::total_cmp);
        v[((v.len() as f64 * q) as usize).min(v.len() - 1)]
    };
    let (c50, c99) = (pct(&mut cpu_us, 0.5), pct(&mut cpu_us, 0.99));
    let (w50, w99) = (pct(&mut wall_us, 0.5), pct(&mut wall_us, 0.99));
    println!(
        "revocation       dependents {:>6}  (+{} other entries)  cpu p50 {:.0} us  p99 {:.0} us  (target p99 < 1000: {:.2}x)  wall incl. lock wait p50 {:.0} us  p99 {:.0} us  ({} rounds, {:.0} ns per entry at p50; lookup thread {:.2} M lookups/s wall, hits {:.3})",
        o.deps,
        cache.lock().unwrap().len(),
        c50,
        c99,
        c99 / 1000.0,
        w50,
        w99,
        cpu_us.len(),
        c50 * 1e3 / o.deps as f64,
        looked as f64 / secs / 1e6,
        hits as f64 / looked.max(1) as f64
    );
}

/// Attack mask `a` (0..1024): EtherType, TOS, the first 17 + a mod 16
/// bits of the destination, the first 1 + (a / 16) mod 16 bits of the UDP
/// source port, the protocol byte if (a / 256) is odd, the UDP
/// destination port if a ≥ 512: 1024 distinct masks, as a TSE attacker
/// makes an app (here: an ACL that looks at as many prefix bits as it
/// needs to) mark a new combination of prefix lengths with each packet.
/// At least 18 bits of random address and port are marked, so a new
/// attack packet misses every entry (it probes every subtable), as in the
/// paper.
fn attack_mask(a: usize) -> Mask {
    let mut mask = Mask::new();
    mask.mark_bytes(12, 2).unwrap();
    mask.mark_bytes(TOS, 1).unwrap();
    mask.mark(DST * 8, 17 + a % 16).unwrap();
    mask.mark(UDP_SRC * 8, 1 + (a / 16) % 16).unwrap();
    if (a / 256) % 2 == 1 {
        mask.mark_bytes(PROTO, 1).unwrap();
    }
    if a >= 512 {
        mask.mark_bytes(UDP_DST, 2).unwrap();
    }
    mask
}

const UDP_SRC: usize = 34;
/// TOS of attack packets (legitimate entries use 0..4, and every mask
/// marks TOS, so attack entries never match legitimate keys).
const ATTACK_TOS: u8 = 0xfc;
const ATTACK_MASKS: usize = 1024;

/// One TSE variant: its cache, the legitimate keys, and the attack's
/// state.
struct Tse {
    cache: DecisionCache,
    keys: Vec<HeaderKey>,
    /// The order the legitimate keys are looked up in: random, made
    /// ahead (a fixed cycle through `keys` would walk the cache's LRU list
    /// in step, so each hit's LRU neighbours were the lines just touched,
    /// and any other lookup, an attack packet's or not, broke that
    /// pattern: the baseline measured the cycle, not the traffic).
    order: Vec<u32>,
    next_attack: usize,
    r: Xoshiro256PlusPlus,
    /// The app's decision for each attack mask (made ahead: the app's
    /// work, not the cache's).
    decisions: Vec<Decision>,
}

impl Tse {
    fn new(o: &Opts, max_masks: usize, admit_after: u32) -> Tse {
        let mut r = Xoshiro256PlusPlus::seed_from_u64(5);
        let mut cache = DecisionCache::new(Config {
            capacity: 1 << 16,
            front_slots: 0,
            max_masks,
            admit_after,
            ..Config::default()
        })
        .unwrap();
        // Legitimate traffic: `--entries` decisions over 4 masks, keys
        // varied in their unmarked bytes (wildcard hits).
        let mut made = Vec::new();
        for i in 0..o.entries {
            let mask = wildcard_mask(i % 4);
            let f = frame(&mut r, (i % 4) as u8);
            let d = Decision {
                mask: mask.clone(),
                states: StateIds::new(),
                actions: Actions::output(1),
            };
            if let Ok(Installed::Cached(_)) = cache.install(&HeaderKey::from_frame(&f, 0), &d) {
                made.push((f, mask));
            }
        }
        let keys: Vec<HeaderKey> = (0..o.entries.max(4096))
            .map(|_| {
                let (f, m) = &made[r.gen_range(0..made.len())];
                HeaderKey::from_frame(&vary(&mut r, f, m), 0)
            })
            .collect();
        let order = (0..1 << 16)
            .map(|_| r.gen_range(0..keys.len()) as u32)
            .collect();
        let decisions = (0..ATTACK_MASKS)
            .map(|a| Decision {
                mask: attack_mask(a),
                states: StateIds::new(),
                actions: Actions::drop(),
            })
            .collect();
        Tse {
            cache,
            keys,
            order,
            next_attack: 0,
            r,
            decisions,
        }
    }

    /// `n` lookups, batches of 32, one in `attack_every` an attack packet
    /// (0: none) that misses and is decided with the next attack mask.
    /// Legitimate lookups per second of thread CPU time (installs
    /// included: the cache's lock is one) and subtables probed per lookup.
    fn run(&mut self, n: usize, attack_every: usize) -> (f64, f64) {
        let mut batch: Vec<HeaderKey> = Vec::with_capacity(BATCH);
        let mut out = [None; BATCH];
        let (mut legit, mut hits, mut done, mut ki) = (0usize, 0usize, 0usize, 0usize);
        let before = *self.cache.counters();
        // Attack frames made ahead, so their making is not timed.
        let attacks: Vec<(HeaderKey, usize)> =
            (0..n.checked_div(attack_every).map_or(0, |x| x + 1))
                .map(|j| {
                    let f = frame(&mut self.r, ATTACK_TOS);
                    let a = (self.next_attack + j) % ATTACK_MASKS;
                    (HeaderKey::from_frame(&f, 0), a)
                })
                .collect();
        let mut ai = 0;
        // A countdown, not a division per key (the harness must not cost
        // the attack variants more than the clean one).
        let mut to_attack = attack_every;
        let t = cpu();
        while done < n {
            batch.clear();
            let mut attack_at = [(0usize, 0usize); BATCH];
            let mut n_attack = 0;
            while batch.len() < BATCH {
                let attack = attack_every != 0 && {
                    to_attack -= 1;
                    to_attack == 0
                };
                if attack {
                    to_attack = attack_every;
                    attack_at[n_attack] = (batch.len(), ai);
                    n_attack += 1;
                    batch.push(attacks[ai].0.clone());
                    ai += 1;
                } else {
                    batch.push(self.keys[self.order[ki] as usize].clone());
                    ki += 1;
                    if ki == self.order.len() {
                        ki = 0;
                    }
                    legit += 1;
                }
            }
            hits += self.cache.lookup_batch(&batch, &mut out);
            for &(i, a) in &attack_at[..n_attack] {
                if out[i].is_none() {
                    let _ = self.cache.install(&batch[i], &self.decisions[attacks[a].1]);
                }
            }
            done += BATCH;
        }
        let s = cpu() - t;
        self.next_attack = (self.next_attack + ai) % ATTACK_MASKS;
        black_box(hits);
        let after = self.cache.counters();
        let probes = (after.subtables_probed - before.subtables_probed) as f64
            / (after.lookups - before.lookups) as f64;
        (legit as f64 / s, probes)
    }
}

fn tse(o: &Opts) {
    // No attack; the attack against a cache allowed 4096 masks (no cap
    // that matters: the attack's 1024 masks all get subtables); the attack
    // against the default cap (64 masks) with every mask admitted at once
    // (`admit_after` 1), with the default admission (the first
    // `free_masks` at once, then 2 asks per epoch), and with 4 asks.
    let dflt = Config::default().admit_after;
    let mut v = [
        ("no attack", Tse::new(o, 64, 1), 0),
        (
            "1% attack, masks uncapped (4096)",
            Tse::new(o, 4096, 1),
            100,
        ),
        (
            "1% attack, cap 64, every mask at once",
            Tse::new(o, 64, 1),
            100,
        ),
        (
            "1% attack, cap 64, default admission",
            Tse::new(o, 64, dflt),
            100,
        ),
        ("1% attack, cap 64, admit after 4", Tse::new(o, 64, 4), 100),
        // The same as the first, for the noise between two variants.
        ("no attack, again", Tse::new(o, 64, 1), 0),
    ];
    // Warm up: the attack reaches its steady state (every attack mask
    // asked for at least once).
    for (_, t, every) in v.iter_mut() {
        t.run(ATTACK_MASKS * (*every).max(1) * 2, *every);
    }
    let mut rates = vec![Vec::new(); v.len()];
    let mut probes = vec![Vec::new(); v.len()];
    for _ in 0..o.rounds {
        for (j, (_, t, every)) in v.iter_mut().enumerate() {
            let (rate, p) = t.run(o.lookups, *every);
            rates[j].push(rate);
            probes[j].push(p);
        }
    }
    for (j, (name, t, _)) in v.iter().enumerate() {
        let ratio = ratio_median(&rates[j], &rates[0]);
        println!(
            "tse {:<38} {:>7.2} M legit lookups/s  masks {:>4}  probes/lookup {:>7.2}  ratio to no attack {:.2} (target >= 0.8 with the cap)",
            name,
            bench::median(&rates[j]) / 1e6,
            t.cache.masks(),
            bench::median(&probes[j]),
            ratio
        );
    }
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
    if on("tse") {
        tse(&o);
    }
}
