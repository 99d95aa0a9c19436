//! Control-plane update timing for A/B comparisons and profiling:
//! `update_probe N OPS [pow2|tight]` — N batched inserts into a pre-sized
//! structure, then OPS batched alters and OPS batched removals of random
//! present keys (batches of 4096, construction outside the timing),
//! REPS times on fresh structures: `update_probe N OPS SIZING REPS`.
use nexthop_othello::{BatchOp, Config, Othello, Sizing};

use nexthop_testutil::args::Positional;
use nexthop_testutil::thread_cpu_secs as cpu;
fn main() {
    let a = Positional::from_env("update_probe [N] [OPS] [pow2|tight] [REPS]");
    let n = a.count(0, 10_000_000);
    let ops = a.count(1, 1_000_000);
    let mut cfg = Config::default();
    if a.word(2, &["pow2", "tight"]) == "tight" {
        cfg.sizing = Sizing::Tight;
    }
    let reps = a.count(3, 1);
    let keys = nexthop_testutil::distinct_u64(1, n);
    for _ in 0..reps {
        round(cfg, &keys, ops);
    }
}

fn round(cfg: Config, keys: &[u64], ops: usize) {
    let n = keys.len();
    let mut c = Othello::with_capacity(cfg, n).unwrap();
    let batches = |f: &dyn Fn(u64) -> BatchOp<u64>, ks: &[u64]| -> Vec<Vec<BatchOp<u64>>> {
        ks.chunks(4096)
            .map(|ch| ch.iter().map(|&k| f(k)).collect())
            .collect()
    };
    let b = batches(&|k| BatchOp::Insert(k, k & 0xff), keys);
    let t = cpu();
    phase_insert(&mut c, b);
    let ins = n as f64 / (cpu() - t) / 1e6;
    // Every 7th key, a spread of present keys in a fixed order.
    let sel: Vec<u64> = (0..ops).map(|i| keys[(i * 7919) % n]).collect();
    let mut sel = sel;
    sel.sort_unstable();
    sel.dedup();
    let m = sel.len();
    let perm: Vec<u64> = {
        let mut s = sel.clone();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in (1..s.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s.swap(i, (x % (i as u64 + 1)) as usize);
        }
        s
    };
    let b = batches(&|k| BatchOp::Alter(k, (k & 0xff) ^ 1), &perm);
    let t = cpu();
    phase_alter(&mut c, b);
    let alt = m as f64 / (cpu() - t) / 1e6;
    let b = batches(&|k| BatchOp::Remove(k), &perm);
    let t = cpu();
    phase_delete(&mut c, b);
    let del = m as f64 / (cpu() - t) / 1e6;
    println!(
        "n {n} ops {m}: insert {ins:.2} M/s, alter {alt:.2} M/s, delete {del:.2} M/s (batched)"
    );
}

// One function per phase so a profiler (callgrind) can attribute costs.
#[inline(never)]
fn phase_insert(c: &mut Othello<u64>, b: Vec<Vec<BatchOp<u64>>>) {
    for x in b {
        c.apply_batch(x).unwrap();
    }
}

#[inline(never)]
fn phase_alter(c: &mut Othello<u64>, b: Vec<Vec<BatchOp<u64>>>) {
    for x in b {
        c.apply_batch(x).unwrap();
    }
}

#[inline(never)]
fn phase_delete(c: &mut Othello<u64>, b: Vec<Vec<BatchOp<u64>>>) {
    for x in b {
        c.apply_batch(x).unwrap();
    }
}
