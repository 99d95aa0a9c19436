//! `nexthop demo`: an end-to-end run of the Concise FIB on generated MAC
//! names, through the same code as `nexthop fib build` and `fib update`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use nexthop_othello::fib::{Action, KeyType, NameKey};
use nexthop_othello::{Sizing, MISS};

use crate::cmd_fib::{self, BuildOpts, LookupFib};
use crate::textio::say;
use nexthop_othello::fibdir;

/// Options of `nexthop demo`.
#[derive(Clone, Debug)]
pub struct DemoOpts {
    pub names: usize,
    pub changes: Option<usize>,
    pub out: PathBuf,
    pub seed: u64,
    /// Print the summary as one JSON object on stdout, the text on stderr.
    pub json: bool,
}

/// Names per batched lookup.
const CHUNK: usize = 1024;
/// How long the lookup-rate measurement runs at least.
const MEASURE_SECS: f64 = 0.5;

/// SplitMix64: a small seeded generator for choosing actions and changes.
pub(crate) struct Mix(pub(crate) u64);

impl Mix {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (multiply-shift; bias below n / 2^64).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        ((self.next() as u128 * n as u128) >> 64) as usize
    }
}

/// The demo's actions: four ports, three port sets, drop and controller.
pub(crate) fn actions() -> Vec<Action> {
    let mut v: Vec<Action> = (1..=4).map(Action::Port).collect();
    v.push(Action::PortSet(vec![1, 2]));
    v.push(Action::PortSet(vec![3, 4]));
    v.push(Action::PortSet(vec![1, 2, 3, 4]));
    v.push(Action::Drop);
    v.push(Action::Controller);
    v
}

/// An action with the demo's mix: 94% single ports, 3% port sets, 2% drop,
/// 1% controller.
pub(crate) fn pick_action(r: &mut Mix, table: &[Action]) -> Action {
    let x = r.below(1000);
    let i = match x {
        0..=939 => x % 4,
        940..=969 => 4 + x % 3,
        970..=989 => 7,
        _ => 8,
    };
    table[i].clone()
}

fn step(n: usize, total: usize, what: &str, secs: f64, detail: impl std::fmt::Display) {
    say!("[{n}/{total}] {what:<8} {detail} ({secs:.2} s)");
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// Check every `(name, action)` through the mapped snapshot with batched
/// lookups; returns the number of mismatches.
fn verify<'a>(
    fib: &LookupFib,
    pairs: impl Iterator<Item = (&'a [u8; 6], &'a Action)>,
) -> (usize, usize) {
    let view = fib.mapped.view();
    let (mut keys, mut want) = (Vec::with_capacity(CHUNK), Vec::with_capacity(CHUNK));
    let mut ids = vec![0u64; CHUNK];
    let (mut checked, mut mismatches) = (0, 0);
    let mut flush = |keys: &mut Vec<[u8; 6]>, want: &mut Vec<&Action>| {
        view.lookup_batch(keys, &mut ids[..keys.len()]);
        for (id, w) in ids.iter().zip(want.iter()) {
            let got = (*id != MISS).then(|| fib.actions.get(*id)).flatten();
            mismatches += (got != Some(*w)) as usize;
        }
        checked += keys.len();
        keys.clear();
        want.clear();
    };
    for (k, a) in pairs {
        keys.push(*k);
        want.push(a);
        if keys.len() == CHUNK {
            flush(&mut keys, &mut want);
        }
    }
    flush(&mut keys, &mut want);
    (checked, mismatches)
}

/// Batched lookups of `names` until [`MEASURE_SECS`] pass; M lookups/s.
fn measure(fib: &LookupFib, names: &[[u8; 6]]) -> (f64, usize) {
    let view = fib.mapped.view();
    let mut ids = vec![0u64; CHUNK];
    let (mut done, mut hits) = (0usize, 0usize);
    let t = Instant::now();
    while t.elapsed().as_secs_f64() < MEASURE_SECS || done == 0 {
        for c in names.chunks(CHUNK) {
            hits += view.lookup_batch(c, &mut ids[..c.len()]);
            std::hint::black_box(&ids);
        }
        done += names.len();
    }
    std::hint::black_box(hits);
    (done as f64 / t.elapsed().as_secs_f64() / 1e6, done)
}

/// Random adds, deletes and action changes, applied to `oracle` and
/// `present` as they are generated; returns the changes file text and the
/// counts (adds, deletes, sets).
fn make_changes(
    count: usize,
    seed: u64,
    table: &[Action],
    oracle: &mut HashMap<[u8; 6], Action>,
    present: &mut Vec<[u8; 6]>,
) -> (String, [usize; 3]) {
    let mut r = Mix(seed ^ 0xC4A4_6E5E);
    // Fresh names from another stream of the same generator, minus clashes.
    let mut fresh = Vec::new();
    let mut round = 0;
    while fresh.len() < count {
        round += 1;
        let cand = nexthop_othello::keys::macs(seed.wrapping_add(0x5EED * round), count + 1024);
        fresh.extend(cand.into_iter().filter(|m| !oracle.contains_key(m)));
        fresh.sort_unstable();
        fresh.dedup();
    }
    // Shuffle so that adds do not come in sorted order.
    for i in (1..fresh.len()).rev() {
        fresh.swap(i, r.below(i + 1));
    }
    let mut fresh = fresh.into_iter();
    let mut text = String::with_capacity(count * 24);
    let mut counts = [0usize; 3];
    for _ in 0..count {
        let kind = r.below(10);
        if kind < 4 || present.is_empty() {
            let Some(m) = fresh.next() else { break };
            let a = pick_action(&mut r, table);
            let _ = writeln!(text, "+ {} {a}", m.fmt_name());
            oracle.insert(m, a);
            present.push(m);
            counts[0] += 1;
        } else if kind < 7 {
            let m = present.swap_remove(r.below(present.len()));
            let _ = writeln!(text, "- {}", m.fmt_name());
            oracle.remove(&m);
            counts[1] += 1;
        } else {
            let m = present[r.below(present.len())];
            let mut a = pick_action(&mut r, table);
            if oracle.get(&m) == Some(&a) {
                // Another action, uniformly among the rest.
                let i = table.iter().position(|x| *x == a).unwrap_or(0);
                a = table[(i + 1 + r.below(table.len() - 1)) % table.len()].clone();
            }
            let _ = writeln!(text, "= {} {a}", m.fmt_name());
            oracle.insert(m, a);
            counts[2] += 1;
        }
    }
    (text, counts)
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("{}: cannot write", path.display()))
}

/// `nexthop demo`.
pub fn run(o: &DemoOpts) -> Result<()> {
    crate::textio::text_to_stderr(o.json);
    const STEPS: usize = 7;
    if o.names == 0 {
        bail!("--names must be at least 1");
    }
    let n_changes = o.changes.unwrap_or((o.names / 10).clamp(1, 100_000));
    let dir = &o.out;
    fibdir::check_build_target(dir, &["routes.txt", "changes.txt"])?;
    say!(
        "nexthop demo: {} MAC names, {n_changes} changes, seed {}, FIB directory {}",
        o.names,
        o.seed,
        dir.display()
    );
    let total = Instant::now();

    // 1. Dataset.
    let t = Instant::now();
    let table = actions();
    let names = nexthop_othello::keys::macs(o.seed, o.names);
    let mut r = Mix(o.seed);
    let assigned: Vec<Action> = names.iter().map(|_| pick_action(&mut r, &table)).collect();
    let mut routes = String::with_capacity(o.names * 24);
    routes.push_str("# nexthop demo routes: MAC ACTION\n");
    for (m, a) in names.iter().zip(&assigned) {
        let _ = writeln!(routes, "{} {a}", m.fmt_name());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("{}: create directory", dir.display()))?;
    let routes_path = dir.join("routes.txt");
    write_file(&routes_path, &routes)?;
    step(
        1,
        STEPS,
        "generate",
        t.elapsed().as_secs_f64(),
        format_args!(
            "{} names over {} actions -> {} ({})",
            names.len(),
            table.len(),
            routes_path.display(),
            mb(routes.len() as u64)
        ),
    );
    drop(routes);

    // 2. Build, exactly as `nexthop fib build` does.
    let t = Instant::now();
    let opts = BuildOpts {
        key_type: KeyType::Mac,
        value_bits: 8,
        check_bits: 0,
        sizing: Sizing::PowerOfTwo,
        capacity: None,
        seed: None,
        stash_capacity: 16,
    };
    let b = cmd_fib::build_dir(&opts, &routes_path, dir)?;
    step(
        2,
        STEPS,
        "build",
        t.elapsed().as_secs_f64(),
        format_args!(
            "generation {}: parse {:.2} s, Othello build {:.2} s, write + fsync {:.2} s",
            b.generation, b.parse_secs, b.build_secs, b.write_secs
        ),
    );

    // 3. Verify every name through the mapped snapshot.
    let t = Instant::now();
    let fib = cmd_fib::open_lookup(dir)?;
    let (checked, mism_build) = verify(&fib, names.iter().zip(&assigned));
    step(
        3,
        STEPS,
        "verify",
        t.elapsed().as_secs_f64(),
        format_args!(
            "{checked} names through the mapped snapshot (batched): {mism_build} mismatches"
        ),
    );

    // 4. Lookup rate.
    let t = Instant::now();
    let (rate, lookups) = measure(&fib, &names);
    step(
        4,
        STEPS,
        "measure",
        t.elapsed().as_secs_f64(),
        format_args!("{lookups} batched lookups, 1 thread: {rate:.1} M lookups/s"),
    );
    drop(fib);

    // 5. Changes file.
    let t = Instant::now();
    let mut oracle: HashMap<[u8; 6], Action> = names.iter().copied().zip(assigned).collect();
    let mut present = names;
    let (text, [adds, dels, sets]) =
        make_changes(n_changes, o.seed, &table, &mut oracle, &mut present);
    let changes_path = dir.join("changes.txt");
    write_file(&changes_path, &text)?;
    step(
        5,
        STEPS,
        "changes",
        t.elapsed().as_secs_f64(),
        format_args!(
            "{} changes ({adds} adds, {dels} deletes, {sets} action changes) -> {}",
            adds + dels + sets,
            changes_path.display()
        ),
    );

    // 6. Update, exactly as `nexthop fib update` does.
    let t = Instant::now();
    let u = cmd_fib::update_dir(dir, &changes_path)?;
    let upd_rate = u.changes as f64 / u.apply_secs.max(1e-9);
    let writes_per = u.slot_writes as f64 / u.changes.max(1) as f64;
    step(6, STEPS, "update", t.elapsed().as_secs_f64(), format_args!(
        "generation {} -> {}: load {:.2} s, apply {:.3} s ({:.0} k updates/s, {writes_per:.2} slot writes/update, {}), write + fsync {:.2} s",
        u.from_generation, u.generation, u.load_secs, u.apply_secs, upd_rate / 1e3,
        if u.rebuilds == 0 { "no rebuild".to_string() } else { format!("{} rebuilds", u.rebuilds) },
        u.write_secs
    ));

    // 7. Verify against the oracle.
    let t = Instant::now();
    let fib = cmd_fib::open_lookup(dir)?;
    let (checked2, mism_update) = verify(&fib, oracle.iter());
    step(
        7,
        STEPS,
        "verify",
        t.elapsed().as_secs_f64(),
        format_args!("{checked2} names against the HashMap oracle: {mism_update} mismatches"),
    );

    let snap_bytes = fib
        .current
        .manifest
        .files
        .iter()
        .find(|f| f.name == fibdir::SNAPSHOT)
        .map_or(0, |f| f.bytes);
    let meta = *fib.mapped.view().meta();
    let dp_bytes = (meta.ma as u64 + meta.mb as u64) * meta.slot_bytes() as u64;
    let d = dir.display();
    let example = present
        .first()
        .map_or("00:00:00:00:00:01".to_string(), |m| m.fmt_name());
    say!();
    say!("summary ({:.1} s in all)", total.elapsed().as_secs_f64());
    say!(
        "  names          {} built, {} after updates ({} actions)",
        o.names,
        oracle.len(),
        fib.actions.len()
    );
    say!(
        "  data plane     {} bytes of arrays: ma {} + mb {} slots of {} B, {:.2} bits/name; snapshot file {}",
        dp_bytes, meta.ma, meta.mb, meta.slot_bytes(), dp_bytes as f64 * 8.0 / oracle.len().max(1) as f64, mb(snap_bytes)
    );
    say!("  lookups        {rate:.1} M lookups/s (mapped snapshot, batches of {CHUNK}, 1 thread)");
    say!(
        "  updates        {} in {:.3} s: {:.0} k updates/s, {writes_per:.2} slot writes/update, {} rebuilds",
        u.changes, u.apply_secs, upd_rate / 1e3, u.rebuilds
    );
    say!("  mismatches     {mism_build} after build, {mism_update} after updates");
    say!();
    say!("try:");
    say!("  nexthop fib stats --fib {d}");
    say!("  nexthop fib lookup --fib {d} {example}");
    say!("  grep -v '^#' {d}/routes.txt | cut -d' ' -f1 | head -5 | nexthop fib lookup --fib {d}");
    say!("  nexthop fib update --fib {d} --changes FILE   # lines: + NAME ACTION | - NAME | = NAME ACTION");
    if o.json {
        println!(
            "{}",
            serde_json::json!({
                "fib": dir.display().to_string(),
                "names_built": o.names,
                "names_after_updates": oracle.len(),
                "actions": fib.actions.len(),
                "data_plane_bytes": dp_bytes,
                "bits_per_name": dp_bytes as f64 * 8.0 / oracle.len().max(1) as f64,
                "snapshot_bytes": snap_bytes,
                "lookups_per_second": rate * 1e6,
                "updates": u.changes,
                "updates_per_second": upd_rate,
                "slot_writes_per_update": writes_per,
                "rebuilds": u.rebuilds,
                "generation": u.generation,
                "mismatches_after_build": mism_build,
                "mismatches_after_updates": mism_update,
                "seconds": total.elapsed().as_secs_f64(),
            })
        );
    }
    if mism_build + mism_update > 0 {
        bail!("{} mismatches", mism_build + mism_update);
    }
    Ok(())
}
