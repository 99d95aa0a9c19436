//! Quick control-plane rate probe: `perf_probe N [build|insert|alter|remove]...`.
use nexthop_othello::{BatchOp, Config, Othello, Sizing};
use std::time::Instant;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let what: Vec<&str> = args.iter().skip(2).map(|s| s.as_str()).collect();
    let keys = nexthop_testutil::distinct_u64(1, n);
    let sizing = if what.contains(&"tight") {
        Sizing::Tight
    } else {
        Sizing::PowerOfTwo
    };
    let cfg = Config {
        sizing,
        stash_capacity: 64,
        ..Config::default()
    };
    if what.contains(&"build") {
        let t = Instant::now();
        let mut hm = hashbrown::HashMap::with_capacity(n);
        for &k in &keys {
            hm.insert(k, (k & 0xff) as u8);
        }
        let th = t.elapsed();
        drop(hm);
        let t = Instant::now();
        let o = Othello::build(cfg, keys.iter().map(|&k| (k, k & 0xff))).unwrap();
        let tb = t.elapsed();
        println!(
            "build {:?} hashbrown {:?} ratio {:.2}",
            tb,
            th,
            tb.as_secs_f64() / th.as_secs_f64()
        );
        drop(o);
    }
    let mut o: Othello<u64> = Othello::with_capacity(cfg, n).unwrap();
    let batch = what.contains(&"batch");
    let t = Instant::now();
    if batch {
        for ch in keys.chunks(4096) {
            o.apply_batch(ch.iter().map(|&k| BatchOp::Insert(k, k & 0xff)).collect())
                .unwrap();
        }
    } else {
        for &k in &keys {
            o.insert(k, k & 0xff).unwrap();
        }
    }
    let ti = t.elapsed();
    println!(
        "insert {:.2} M/s writes/insert {:.3} {:?} stash {}",
        n as f64 / ti.as_secs_f64() / 1e6,
        o.stats().counters.slot_writes as f64 / n as f64,
        o.stats().counters,
        o.stats().stash_len
    );
    if what.contains(&"alter") {
        let t = Instant::now();
        if batch {
            for ch in keys[..n / 2].chunks(4096) {
                o.apply_batch(
                    ch.iter()
                        .map(|&k| BatchOp::Alter(k, (k + 1) & 0xff))
                        .collect(),
                )
                .unwrap();
            }
        } else {
            for &k in &keys[..n / 2] {
                o.alter(&k, (k + 1) & 0xff).unwrap();
            }
        }
        println!(
            "alter {:.2} M/s",
            n as f64 / 2.0 / t.elapsed().as_secs_f64() / 1e6
        );
    }
    if what.contains(&"remove") {
        let t = Instant::now();
        if batch {
            for ch in keys[..n / 2].chunks(4096) {
                o.apply_batch(ch.iter().map(|&k| BatchOp::Remove(k)).collect())
                    .unwrap();
            }
        } else {
            for &k in &keys[..n / 2] {
                o.remove(&k).unwrap();
            }
        }
        println!(
            "remove {:.2} M/s",
            n as f64 / 2.0 / t.elapsed().as_secs_f64() / 1e6
        );
    }
}
