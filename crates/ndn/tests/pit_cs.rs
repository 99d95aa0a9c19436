//! Differential tests: both PITs and the Content Store against plain
//! oracles (Vec / HashMap / BTreeMap) over seeded random operation
//! sequences.

use std::collections::{BTreeMap, HashMap};

use nexthop_ndn::cs::{ContentStore, CsConfig, CsInsert, CsQuery, Policy};
use nexthop_ndn::name::{NameBuf, NameView};
use nexthop_ndn::pit::{
    DataMatch, Downstream, ExactPit, ExactPitConfig, FingerprintPit, FingerprintPitConfig,
    FpInsert, InsertOutcome, InterestIn, PitToken,
};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn nm(c: &[&str]) -> NameBuf {
    NameBuf::from_components(c).unwrap()
}

/// Data names: a small tree so prefixes overlap.
fn data_names() -> Vec<NameBuf> {
    let mut v = Vec::new();
    for a in ["a", "b"] {
        for b in ["x", "y", "xy"] {
            v.push(nm(&[a, b]));
            for s in ["0", "1"] {
                v.push(nm(&[a, b, s]));
            }
        }
    }
    v
}

fn fake_digest(i: usize) -> [u8; 32] {
    [i as u8 + 1; 32]
}

fn is_component_prefix(p: &NameBuf, n: &NameBuf) -> bool {
    n.tlv().starts_with(p.tlv())
}

// ---------------------------------------------------------------- exact PIT

#[derive(Clone, Debug)]
struct OEntry {
    name: NameBuf,
    cbp: bool,
    mbf: bool,
    ins: Vec<(u32, u32, Option<PitToken>, u64)>,
    outs: Vec<(u32, u32)>,
    expiry: u64,
}

#[derive(Default)]
struct OraclePit {
    entries: Vec<OEntry>,
    dnl: Vec<(Vec<u8>, u32, u64)>,
}

const DNL_LIFE: u64 = 300;

impl OraclePit {
    fn bury(&mut self, e: &OEntry, now: u64) {
        let nonces: Vec<u32> = if e.outs.is_empty() {
            e.ins.iter().map(|r| r.1).collect()
        } else {
            e.outs.iter().map(|r| r.1).collect()
        };
        for n in nonces {
            self.dnl.push((e.name.tlv().to_vec(), n, now + DNL_LIFE));
        }
    }

    fn expire(&mut self, now: u64) {
        let (gone, keep): (Vec<OEntry>, Vec<OEntry>) =
            self.entries.drain(..).partition(|e| e.expiry <= now);
        self.entries = keep;
        for e in &gone {
            self.bury(e, now);
        }
        self.dnl.retain(|d| d.2 > now);
    }

    fn insert(&mut self, i: &InterestIn<'_, NameBuf>, now: u64) -> &'static str {
        self.expire(now);
        if self
            .dnl
            .iter()
            .any(|d| d.0 == i.name.tlv() && d.1 == i.nonce)
        {
            return "dead";
        }
        let exp = now + i.lifetime_ms.unwrap();
        let pos = self.entries.iter().position(|e| {
            e.name == *i.name && e.cbp == i.can_be_prefix && e.mbf == i.must_be_fresh
        });
        let created = pos.is_none();
        let idx = match pos {
            Some(p) => {
                let e = &self.entries[p];
                if e.ins.iter().any(|r| r.1 == i.nonce && r.0 != i.face)
                    || e.outs.iter().any(|r| r.1 == i.nonce)
                {
                    return "dup";
                }
                p
            }
            None => {
                self.entries.push(OEntry {
                    name: i.name.clone(),
                    cbp: i.can_be_prefix,
                    mbf: i.must_be_fresh,
                    ins: Vec::new(),
                    outs: Vec::new(),
                    expiry: 0,
                });
                self.entries.len() - 1
            }
        };
        let e = &mut self.entries[idx];
        let kind = match e.ins.iter_mut().find(|r| r.0 == i.face) {
            Some(r) => {
                *r = (i.face, i.nonce, i.token, exp);
                "retx"
            }
            None => {
                e.ins.push((i.face, i.nonce, i.token, exp));
                if created {
                    "new"
                } else {
                    "agg"
                }
            }
        };
        e.expiry = e.ins.iter().map(|r| r.3).max().unwrap();
        kind
    }

    fn satisfy(
        &mut self,
        d: &NameBuf,
        digest: &[u8; 32],
        ingress: u32,
        now: u64,
    ) -> (usize, Vec<(u32, Vec<u8>)>) {
        self.expire(now);
        let mut full = d.clone();
        full.push(1, digest).unwrap();
        let (hit, keep): (Vec<OEntry>, Vec<OEntry>) = self.entries.drain(..).partition(|e| {
            e.name == *d || e.name == full || (e.cbp && is_component_prefix(&e.name, d))
        });
        self.entries = keep;
        let mut out = Vec::new();
        for e in &hit {
            for r in &e.ins {
                if r.0 != ingress && r.3 > now {
                    out.push((r.0, r.2.map(|t| t.as_bytes().to_vec()).unwrap_or_default()));
                }
            }
            if e.mbf {
                self.bury(e, now);
            }
        }
        out.sort();
        out.dedup();
        (hit.len(), out)
    }
}

fn interest_names(data: &[NameBuf]) -> Vec<NameBuf> {
    let mut v: Vec<NameBuf> = data.to_vec();
    v.push(NameBuf::root());
    v.push(nm(&["a"]));
    v.push(nm(&["b"]));
    v.push(nm(&["c"]));
    for (i, d) in data.iter().enumerate().take(5) {
        let mut f = d.clone();
        f.push(1, &fake_digest(i)).unwrap();
        v.push(f);
        let mut w = d.clone();
        w.push(1, &[0xee; 32]).unwrap();
        v.push(w);
    }
    v
}

#[test]
fn exact_pit_matches_oracle_on_random_sequences() {
    let data = data_names();
    let inames = interest_names(&data);
    let mut seen: HashMap<&'static str, usize> = HashMap::new();
    for seed in 0..40u64 {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let cfg = ExactPitConfig {
            dead_nonce_lifetime_ms: DNL_LIFE,
            ..ExactPitConfig::default()
        };
        let mut pit = ExactPit::new(cfg).unwrap();
        let mut o = OraclePit::default();
        let mut now = 0u64;
        let mut out = Vec::new();
        for step in 0..1500 {
            now += rng.gen_range(0..20);
            match rng.gen_range(0..10) {
                0..=5 => {
                    let name = &inames[rng.gen_range(0..inames.len())];
                    let face = rng.gen_range(0..4u32);
                    let nonce = rng.gen_range(0..40u32);
                    let i = InterestIn {
                        name,
                        can_be_prefix: rng.gen_bool(0.4),
                        must_be_fresh: rng.gen_bool(0.3),
                        nonce,
                        lifetime_ms: Some(rng.gen_range(1..200)),
                        face,
                        token: PitToken::new(&[face as u8, nonce as u8, step as u8]),
                        multi_access: false,
                    };
                    let got = pit.insert(&i, now);
                    let want = o.insert(&i, now);
                    let got_s = match got {
                        InsertOutcome::New(_) => "new",
                        InsertOutcome::Aggregated(_) => "agg",
                        InsertOutcome::Retransmitted(_) => "retx",
                        InsertOutcome::DuplicateNonce { dead: true } => "dead",
                        InsertOutcome::DuplicateNonce { dead: false } => "dup",
                        o => panic!("unexpected {o:?}"),
                    };
                    assert_eq!(got_s, want, "seed {seed} step {step}");
                    *seen.entry(want).or_default() += 1;
                    if let InsertOutcome::New(id) = got {
                        if rng.gen_bool(0.7) {
                            let up = 4 + rng.gen_range(0..2u32);
                            assert!(pit.add_out_record(id, up, nonce, Some(100), now));
                            let e = o.entries.last_mut().unwrap();
                            e.outs.push((up, nonce));
                        }
                    }
                }
                6..=8 => {
                    let k = rng.gen_range(0..data.len());
                    let ingress = rng.gen_range(0..6u32);
                    let dg = fake_digest(k);
                    out.clear();
                    let n = pit.satisfy(
                        &DataMatch {
                            name: &data[k],
                            digest: Some(&dg),
                        },
                        ingress,
                        now,
                        &mut out,
                    );
                    let mut got: Vec<(u32, Vec<u8>)> = out
                        .iter()
                        .map(|d: &Downstream| {
                            (
                                d.face,
                                d.token.map(|t| t.as_bytes().to_vec()).unwrap_or_default(),
                            )
                        })
                        .collect();
                    got.sort();
                    let (wn, want) = o.satisfy(&data[k], &dg, ingress, now);
                    assert_eq!((n, got), (wn, want), "seed {seed} step {step}");
                    *seen
                        .entry(if n == 0 { "unsolicited" } else { "satisfied" })
                        .or_default() += 1;
                }
                _ => {
                    now += rng.gen_range(0..300);
                    pit.expire(now);
                    o.expire(now);
                }
            }
            assert_eq!(pit.len(), o.entries.len(), "seed {seed} step {step}");
        }
    }
    for k in [
        "new",
        "agg",
        "retx",
        "dead",
        "dup",
        "satisfied",
        "unsolicited",
    ] {
        assert!(
            seen.get(k).copied().unwrap_or(0) > 20,
            "{k} too rare: {seen:?}"
        );
    }
}

// ---------------------------------------------------------- fingerprint PIT

#[derive(Clone, Copy, Debug)]
struct FpO {
    collision: bool,
    faces: u64,
    exp: u64,
}

fn fp_run(cfg: FingerprintPitConfig, seeds: std::ops::Range<u64>, big_jumps: bool) {
    let names: Vec<Vec<u8>> = (0..48u32).map(|i| format!("/n/{i}").into_bytes()).collect();
    let fps = cfg.faces.div_ceil(cfg.segments);
    for seed in seeds {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut pit = FingerprintPit::new(cfg).unwrap();
        let mut o: Vec<HashMap<u64, FpO>> = vec![HashMap::new(); cfg.segments as usize];
        let mut now = 0u64;
        let mut collisions = 0;
        for step in 0..3000 {
            now += rng.gen_range(0..cfg.tick_ms * 3);
            if big_jumps && rng.gen_ratio(1, 200) {
                now += rng.gen_range(0..cfg.tick_ms << cfg.timer_bits);
            }
            let tnow = now / cfg.tick_ms;
            let name = &names[rng.gen_range(0..names.len())];
            let x = pit.key(name).hash();
            if rng.gen_bool(0.55) {
                let face = rng.gen_range(0..cfg.faces);
                let life = rng.gen_range(1..=cfg.max_lifetime_ms);
                let got = pit.insert(name, face, Some(life), now);
                let seg = &mut o[(face / fps) as usize];
                let exp = (now + life).div_ceil(cfg.tick_ms);
                let bit = 1u64 << (face % fps);
                let want = match seg.get_mut(&x) {
                    Some(e) if e.exp >= tnow => {
                        e.collision = true;
                        e.faces |= bit;
                        e.exp = e.exp.max(exp);
                        true
                    }
                    _ => {
                        seg.insert(
                            x,
                            FpO {
                                collision: false,
                                faces: bit,
                                exp,
                            },
                        );
                        false
                    }
                };
                collisions += want as usize;
                match got {
                    FpInsert::Forward { collided, .. } => {
                        assert_eq!(collided, want, "seed {seed} step {step}")
                    }
                    g => panic!("seed {seed} step {step}: {g:?}"),
                }
            } else {
                let got = pit.satisfy(name, now);
                let mut faces = 0u64;
                let mut coll = false;
                for (s, seg) in o.iter_mut().enumerate() {
                    if let Some(e) = seg.get(&x).copied() {
                        if e.exp >= tnow {
                            faces |= e.faces << (s as u32 * fps);
                            coll |= e.collision;
                            if !e.collision {
                                seg.remove(&x);
                            }
                        } else {
                            seg.remove(&x);
                        }
                    }
                }
                assert_eq!(
                    (got.faces, got.collided),
                    (faces, coll),
                    "seed {seed} step {step} t {now}"
                );
            }
        }
        assert!(
            collisions > 0,
            "seed {seed}: the sequence forced no collision"
        );
        assert_eq!(pit.stats().full, 0);
    }
}

#[test]
fn fingerprint_pit_matches_oracle_with_forced_collisions() {
    fp_run(
        FingerprintPitConfig {
            capacity: 64,
            subtables: 2,
            fp_bits: 3,
            timer_bits: 10,
            tick_ms: 2,
            max_lifetime_ms: 100,
            faces: 6,
            segments: 1,
            overflow_cap: 1024,
            seed: 11,
        },
        0..20,
        false,
    );
}

#[test]
fn fingerprint_pit_matches_oracle_across_timer_wraparound() {
    fp_run(
        FingerprintPitConfig {
            capacity: 16,
            subtables: 4,
            fp_bits: 2,
            timer_bits: 6,
            tick_ms: 1,
            max_lifetime_ms: 12,
            faces: 8,
            segments: 1,
            overflow_cap: 1024,
            seed: 12,
        },
        0..20,
        true,
    );
}

#[test]
fn segregated_fingerprint_pit_matches_oracle() {
    fp_run(
        FingerprintPitConfig {
            capacity: 128,
            subtables: 4,
            fp_bits: 4,
            timer_bits: 8,
            tick_ms: 4,
            max_lifetime_ms: 200,
            faces: 12,
            segments: 3,
            overflow_cap: 1024,
            seed: 13,
        },
        0..20,
        true,
    );
}

#[test]
fn wide_fingerprints_behave_like_an_exact_name_table() {
    // At w = 32 over 48 names no two collide: every Data goes exactly to
    // the faces that asked for its name since the last Data.
    let cfg = FingerprintPitConfig {
        fp_bits: 32,
        capacity: 1024,
        ..FingerprintPitConfig::default()
    };
    let pit = FingerprintPit::new(cfg).unwrap();
    let names: Vec<Vec<u8>> = (0..48u32).map(|i| format!("/n/{i}").into_bytes()).collect();
    let mut xs: Vec<u64> = names.iter().map(|n| pit.key(n).hash()).collect();
    xs.sort();
    xs.dedup();
    assert_eq!(xs.len(), names.len());
}

// ------------------------------------------------------------ Content Store

#[test]
fn content_store_matches_oracle_without_capacity_pressure() {
    let data = data_names();
    let inames = interest_names(&data);
    for seed in 0..30u64 {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut cs = ContentStore::new(CsConfig {
            prefix_scan_limit: 65536,
            ..CsConfig::default()
        })
        .unwrap();
        // name TLV -> (wire, fresh_until)
        let mut o: BTreeMap<Vec<u8>, (Vec<u8>, u64)> = BTreeMap::new();
        let mut now = 0;
        for step in 0..2000u32 {
            now += rng.gen_range(0..30);
            if rng.gen_bool(0.4) {
                let k = rng.gen_range(0..data.len());
                let wire = format!("{k}-{step}").into_bytes();
                let fresh = if rng.gen_bool(0.2) {
                    None
                } else {
                    Some(rng.gen_range(0..300))
                };
                let r = cs.insert(&data[k], &wire, fresh, 1, now);
                let had = o.insert(data[k].tlv().to_vec(), (wire, now + fresh.unwrap_or(0)));
                assert_eq!(
                    r,
                    if had.is_some() {
                        CsInsert::Replaced
                    } else {
                        CsInsert::Admitted
                    }
                );
            } else {
                let name = &inames[rng.gen_range(0..inames.len())];
                let (cbp, mbf) = (rng.gen_bool(0.5), rng.gen_bool(0.5));
                let got = cs
                    .lookup(
                        &CsQuery {
                            name,
                            can_be_prefix: cbp,
                            must_be_fresh: mbf,
                        },
                        now,
                    )
                    .map(|w| w.to_vec());
                let ok = |v: &(Vec<u8>, u64)| !mbf || now < v.1;
                let tlv = name.tlv();
                let n = name.component_count();
                let last = if n == 0 { 0 } else { name.prefix_end(n - 1) };
                let want = if tlv.len() - last == 34 && tlv[last] == 1 {
                    o.get(&tlv[..last])
                        .filter(|v| {
                            nexthop_wire::ndn::implicit_digest(&v.0)[..] == tlv[last + 2..] && ok(v)
                        })
                        .map(|v| v.0.clone())
                } else if cbp {
                    o.range(tlv.to_vec()..)
                        .take_while(|(k, _)| k.starts_with(tlv))
                        .find(|(_, v)| ok(v))
                        .map(|(_, v)| v.0.clone())
                } else {
                    o.get(tlv).filter(|v| ok(v)).map(|v| v.0.clone())
                };
                assert_eq!(got, want, "seed {seed} step {step}");
            }
        }
        cs.check_invariants().unwrap();
    }
}

#[test]
fn content_store_under_pressure_answers_only_correctly_and_keeps_its_caps() {
    let mut index_builds = 0;
    for policy in [Policy::Lru, Policy::Lfu] {
        for seed in 0..10u64 {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            let mut cs = ContentStore::new(CsConfig {
                capacity_packets: 50,
                capacity_bytes: 2000,
                max_packet_bytes: 200,
                policy,
                admit_after: if seed % 2 == 0 { 0 } else { 2 },
                ..CsConfig::default()
            })
            .unwrap();
            let mut latest: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
            for step in 0..5000u32 {
                let k = rng.gen_range(0..300u32);
                let name = nm(&["z", &k.to_string()]);
                if rng.gen_bool(0.5) {
                    let len = rng.gen_range(1..250);
                    let wire: Vec<u8> = format!("{k}-{step}-")
                        .into_bytes()
                        .into_iter()
                        .cycle()
                        .take(len)
                        .collect();
                    match cs.insert(
                        &name,
                        &wire,
                        Some(1_000_000),
                        rng.gen_range(1..3),
                        step as u64,
                    ) {
                        CsInsert::Admitted | CsInsert::Replaced => {
                            latest.insert(name.tlv().to_vec(), wire);
                        }
                        CsInsert::TooLarge => assert!(len > 200),
                        CsInsert::NotAdmitted => {}
                    }
                } else if let Some(w) = cs.lookup(
                    &CsQuery {
                        name: &name,
                        // Rare CanBePrefix lookups (no stored name extends
                        // another): the index is dropped between them and
                        // rebuilt by each, and must answer like the table.
                        can_be_prefix: rng.gen_bool(0.005),
                        must_be_fresh: true,
                    },
                    step as u64,
                ) {
                    assert_eq!(
                        Some(&w.to_vec()),
                        latest.get(name.tlv()),
                        "{policy:?} seed {seed} step {step}"
                    );
                }
                if step % 500 == 0 {
                    cs.check_invariants().unwrap();
                }
            }
            cs.check_invariants().unwrap();
            assert!(cs.stats().evicted > 0);
            index_builds += cs.stats().index_builds;
        }
    }
    assert!(
        index_builds > 40,
        "the index was rebuilt {index_builds} times"
    );
}

/// The public seed the name hash chain had before it became a secret of
/// each process.
const KNOWN_SEED: u64 = 0x6e64_6e2f_6e61_6d65;
/// XXH3's default secret, bytes 0..8 and 16..24 (little-endian).
const XXH3_SECRET_0: u64 = 0xbe4b_a423_396c_feb8;
const XXH3_SECRET_16: u64 = 0xdb97_9083_e96d_d4de;

/// `n` distinct two-component names whose hash chains under `seed`
/// collide in full: XXH3 of a 17..=32-byte input adds
/// `fold(lo ^ (s0 + seed), hi ^ (s8 - seed))` for each 16-byte half, so a
/// component whose bytes 0..8 and 16..24 equal `s0 + seed` and
/// `s16 + seed` hashes to a value independent of its other 16 bytes. The
/// chain's seed for the second component is the first one's hash: the
/// first component is tried until that seed's bytes can open a component
/// TLV of 32 bytes (type 3..=252, length 30), about 1 in 260.
fn colliding_names(seed: u64, n: u64) -> Vec<NameBuf> {
    use nexthop_wire::ndn::{empty_prefix_hash, extend_prefix_hash};
    for i in 0u32.. {
        let first = nm(&[&format!("c{i}")]);
        let h = extend_prefix_hash(empty_prefix_hash(seed), first.tlv());
        let lo = XXH3_SECRET_0.wrapping_add(h).to_le_bytes();
        if lo[1] != 30 || !(3..=252).contains(&lo[0]) {
            continue;
        }
        let hi = XXH3_SECRET_16.wrapping_add(h).to_le_bytes();
        return (0..n)
            .map(|j| {
                let mut tlv = first.tlv().to_vec();
                tlv.extend_from_slice(&lo);
                tlv.extend_from_slice(&j.to_le_bytes());
                tlv.extend_from_slice(&hi);
                tlv.extend_from_slice(&j.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
                NameBuf::from_tlv(&tlv).unwrap()
            })
            .collect();
    }
    unreachable!("the search over u32 first components always ends")
}

/// The hash chain of `name` under `seed`.
fn chain_hash(name: &NameBuf, seed: u64) -> u64 {
    use nexthop_wire::ndn::{empty_prefix_hash, extend_prefix_hash};
    let mut h = empty_prefix_hash(seed);
    for i in 0..name.component_count() {
        h = extend_prefix_hash(h, &name.tlv()[name.prefix_end(i)..name.prefix_end(i + 1)]);
    }
    h
}

#[test]
fn names_colliding_under_a_known_seed_differ_under_the_secret_one() {
    let names = colliding_names(KNOWN_SEED, 1000);
    let distinct: std::collections::HashSet<&[u8]> = names.iter().map(|n| n.tlv()).collect();
    assert_eq!(distinct.len(), names.len());
    // Anyone who knows the seed makes as many full 64-bit collisions as
    // they like ...
    let h = chain_hash(&names[0], KNOWN_SEED);
    assert!(names.iter().all(|n| chain_hash(n, KNOWN_SEED) == h));
    // ... which the process's secret seed (and any other) scatters: the
    // names a PIT, CS and FIB key on are hashed under that secret.
    let secret = nexthop_wire::ndn::prefix_hash_seed();
    assert_ne!(secret, KNOWN_SEED);
    for seed in [secret, KNOWN_SEED ^ 1, 0x1234_5678_9abc_def0] {
        let hashes: std::collections::HashSet<u64> =
            names.iter().map(|n| chain_hash(n, seed)).collect();
        assert_eq!(hashes.len(), names.len(), "seed {seed:#x}");
    }
    let cached: std::collections::HashSet<u64> =
        names.iter().map(|n| n.to_name().name_hash()).collect();
    assert_eq!(cached.len(), names.len());
    assert_eq!(names[0].name_hash(), names[0].to_name().name_hash());
}

/// A name whose hashes are the chain under [`KNOWN_SEED`]: what a PIT
/// keyed on a public seed saw.
struct KnownSeed<'a>(&'a NameBuf);

impl NameView for KnownSeed<'_> {
    fn tlv(&self) -> &[u8] {
        self.0.tlv()
    }
    fn component_count(&self) -> usize {
        self.0.component_count()
    }
    fn prefix_end(&self, n: usize) -> usize {
        self.0.prefix_end(n)
    }
    fn prefix_hash(&self, n: usize) -> u64 {
        chain_hash(&self.0.prefix(n), KNOWN_SEED)
    }
}

#[test]
fn a_flood_of_one_chain_hits_the_cap_is_counted_and_the_pit_stays_consistent() {
    let names = colliding_names(KNOWN_SEED, 300);
    let cfg = ExactPitConfig {
        max_chain: 8,
        ..ExactPitConfig::default()
    };
    let mut pit = ExactPit::new(cfg).unwrap();
    let mut created = Vec::new();
    for (k, n) in names.iter().enumerate() {
        let v = KnownSeed(n);
        match pit.insert(&pit_interest(&v, k as u32), 0) {
            InsertOutcome::New(_) => created.push(k),
            InsertOutcome::ChainFull => {}
            o => panic!("unexpected {o:?}"),
        }
    }
    // One chain took every name: the cap bites after 8, each refusal counted.
    assert_eq!(created, (0..8).collect::<Vec<_>>());
    assert_eq!(pit.len(), 8);
    assert_eq!(pit.stats().chain_full, 300 - 8);
    assert_eq!(pit.stats().created, 8);
    assert!(pit.longest_chain() <= 8);
    // Other names still get entries, and every accepted one is found and
    // satisfied by its Data. (Hashed under the known seed too: under the
    // process's secret seed it could land on the full chain by chance.)
    let other = nm(&["other", "name"]);
    assert!(matches!(
        pit.insert(&pit_interest(&KnownSeed(&other), 7), 0),
        InsertOutcome::New(_)
    ));
    let mut out = Vec::new();
    for &k in &created {
        out.clear();
        let v = KnownSeed(&names[k]);
        let got = pit.satisfy(
            &DataMatch {
                name: &v,
                digest: None,
            },
            9,
            1,
            &mut out,
        );
        assert_eq!(got, 1, "name {k}");
        assert_eq!(
            out,
            [Downstream {
                face: 1,
                token: None
            }]
        );
    }
    assert_eq!(pit.len(), 1);
    // The freed chain takes new entries again, up to the cap.
    for (k, n) in names.iter().enumerate().skip(100).take(20) {
        let _ = pit.insert(&pit_interest(&KnownSeed(n), 1000 + k as u32), 2);
    }
    assert_eq!(pit.len(), 1 + 8);
    assert_eq!(pit.stats().chain_full, 300 - 8 + 12);
    let bad = ExactPitConfig {
        max_chain: 0,
        ..ExactPitConfig::default()
    };
    assert!(ExactPit::new(bad)
        .unwrap_err()
        .to_string()
        .contains("max_chain"));
}

fn pit_interest<N: NameView + ?Sized>(name: &N, nonce: u32) -> InterestIn<'_, N> {
    InterestIn {
        name,
        can_be_prefix: false,
        must_be_fresh: false,
        nonce,
        lifetime_ms: Some(1000),
        face: 1,
        token: None,
        multi_access: false,
    }
}
