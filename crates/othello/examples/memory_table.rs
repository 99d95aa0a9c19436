//! The Othello paper's Table II on this build: memory of the data-plane
//! structure of Concise against a (2,4) cuckoo table (CuckooSwitch's
//! setting, `nexthop_testutil::CuckooTable`) for the same names, per FIB
//! example of the table (name type, names, actions).
//!
//! `cargo run --release -p nexthop-othello --example memory_table -- [--quick] [--json]`
//!
//! Names are seeded random distinct keys of the row's width (MAC 48 bits,
//! IPv4 32, IPv6 128, OpenFlow 356 bits as 45 bytes); values are action ids
//! below the row's action count, so the Othello holds log2(actions) value
//! bits and no check bits, as in the paper. Each row reports the query
//! structure's bytes (`Query::memory_bytes`: both slot arrays at their
//! stored width), the packed floor ((ma + mb) * l bits), and the cuckoo
//! table's bytes (`CuckooTable::memory_bytes`: buckets of 4 keys and values).
//! `--quick` keeps the two smallest rows.

use std::collections::HashSet;
use std::hash::Hash;

use nexthop_hash::KeyBytes;
use nexthop_othello::{Config, Othello, StoredKey};
use nexthop_testutil::CuckooTable;
use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A row of the paper's table: its name type, sizes and memory (MiB as the
/// paper prints them: 1M = 2^20 bytes).
struct Row {
    name: &'static str,
    names: usize,
    actions: u64,
    paper_concise_mib: f64,
    paper_cuckoo_mib: f64,
}

const ROWS: [Row; 6] = [
    Row {
        name: "MAC (48 bits)",
        names: 700_000,
        actions: 16,
        paper_concise_mib: 1.0,
        paper_cuckoo_mib: 5.62,
    },
    Row {
        name: "IPv4 (32 bits)",
        names: 1_000_000,
        actions: 16,
        paper_concise_mib: 1.5,
        paper_cuckoo_mib: 4.27,
    },
    Row {
        name: "MAC (48 bits)",
        names: 5_000_000,
        actions: 256,
        paper_concise_mib: 16.0,
        paper_cuckoo_mib: 40.15,
    },
    Row {
        name: "IPv6 (128 bits)",
        names: 2_000_000,
        actions: 256,
        paper_concise_mib: 4.0,
        paper_cuckoo_mib: 34.13,
    },
    Row {
        name: "OpenFlow (356b)",
        names: 300_000,
        actions: 256,
        paper_concise_mib: 1.0,
        paper_cuckoo_mib: 14.46,
    },
    Row {
        name: "OpenFlow (356b)",
        names: 1_400_000,
        actions: 65_536,
        paper_concise_mib: 8.0,
        paper_cuckoo_mib: 67.46,
    },
];

/// `n` distinct random keys made by `make` from 64 random bytes.
fn keys<K: Eq + Hash + Copy>(n: usize, seed: u64, make: impl Fn(&[u8; 64]) -> K) -> Vec<K> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut seen = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    let mut b = [0u8; 64];
    while out.len() < n {
        rng.fill_bytes(&mut b);
        let k = make(&b);
        if seen.insert(k) {
            out.push(k);
        }
    }
    out
}

/// One row measured: (query bytes, packed floor bytes, cuckoo bytes).
fn measure<K>(keys: &[K], actions: u64) -> (usize, f64, usize)
where
    K: StoredKey + KeyBytes + Eq + Hash + Copy + std::fmt::Debug,
{
    let bits = 64 - (actions - 1).leading_zeros() as u8;
    let cfg = Config {
        value_bits: bits.max(1),
        check_bits: 0,
        ..Config::default()
    };
    let value = |i: usize| i as u64 % actions;
    let o = Othello::build(cfg, keys.iter().enumerate().map(|(i, &k)| (k, value(i))))
        .unwrap_or_else(|e| panic!("build: {e}"));
    let q = o.export(0);
    let meta = q.meta();
    let floor = (meta.ma as f64 + meta.mb as f64) * f64::from(cfg.value_bits) / 8.0;
    // The cuckoo table's values: one byte up to 256 actions, else two.
    let cuckoo = if actions <= 256 {
        cuckoo_bytes::<K, u8>(keys, |i| value(i) as u8)
    } else {
        cuckoo_bytes::<K, u16>(keys, |i| value(i) as u16)
    };
    (q.memory_bytes(), floor, cuckoo)
}

/// Bytes of a (2,4) cuckoo table holding `keys` with `value(i)`.
fn cuckoo_bytes<K, V>(keys: &[K], value: impl Fn(usize) -> V) -> usize
where
    K: KeyBytes + Eq + Copy,
    V: Copy,
{
    let mut ck: CuckooTable<K, V> = CuckooTable::with_capacity(keys.len());
    for (i, &k) in keys.iter().enumerate() {
        ck.insert(k, value(i))
            .unwrap_or_else(|e| panic!("cuckoo insert: {e}"));
    }
    ck.memory_bytes()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    for a in &args {
        if a != "--quick" && a != "--json" && a != "--bench" {
            eprintln!(
                "memory_table: unknown argument {a:?}\nusage: memory_table [--quick] [--json]"
            );
            std::process::exit(2);
        }
    }
    let quick = args.iter().any(|a| a == "--quick");
    let json = args.iter().any(|a| a == "--json");
    let rows = if quick { &ROWS[..2] } else { &ROWS[..] };
    let mut out = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let seed = 1 + i as u64;
        let (ours, floor, cuckoo) = match r.name {
            "MAC (48 bits)" => measure(
                &keys(r.names, seed, |b| [b[0], b[1], b[2], b[3], b[4], b[5]]),
                r.actions,
            ),
            "IPv4 (32 bits)" => measure(
                &keys(r.names, seed, |b| {
                    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
                }),
                r.actions,
            ),
            "IPv6 (128 bits)" => measure(
                &keys(r.names, seed, |b| {
                    std::net::Ipv6Addr::from(<[u8; 16]>::try_from(&b[..16]).unwrap_or_default())
                }),
                r.actions,
            ),
            _ => measure(
                &keys(r.names, seed, |b| {
                    <[u8; 45]>::try_from(&b[..45]).unwrap_or([0; 45])
                }),
                r.actions,
            ),
        };
        let mib = |b: f64| b / f64::from(1u32 << 20);
        let row = serde_json::json!({
            "fib": r.name,
            "names": r.names,
            "actions": r.actions,
            "concise_mib": mib(ours as f64),
            "concise_floor_mib": mib(floor),
            "cuckoo_mib": mib(cuckoo as f64),
            "concise_bits_per_name": ours as f64 * 8.0 / r.names as f64,
            "cuckoo_bits_per_name": cuckoo as f64 * 8.0 / r.names as f64,
            "cuckoo_over_concise": cuckoo as f64 / ours as f64,
            "paper_concise_mib": r.paper_concise_mib,
            "paper_cuckoo_mib": r.paper_cuckoo_mib,
            "paper_cuckoo_over_concise": r.paper_cuckoo_mib / r.paper_concise_mib,
        });
        if !json {
            println!(
                "{:<16} {:>9} names {:>6} actions: concise {:>7.2} MiB (floor {:>6.2}, paper {:>5.2}), \
                 cuckoo {:>7.2} MiB (paper {:>6.2}), cuckoo/concise {:.2} (paper {:.2})",
                r.name,
                r.names,
                r.actions,
                mib(ours as f64),
                mib(floor),
                r.paper_concise_mib,
                mib(cuckoo as f64),
                r.paper_cuckoo_mib,
                cuckoo as f64 / ours as f64,
                r.paper_cuckoo_mib / r.paper_concise_mib
            );
        }
        out.push(row);
    }
    if json {
        println!("{}", serde_json::Value::Array(out));
    }
}
