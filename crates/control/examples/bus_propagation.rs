//! Update propagation to follower *processes* at an offered change rate,
//! through Redis (`RedisController` -> `redis-server` -> `RedisFollower`)
//! and through the direct TCP protocol (`Controller` -> `FibFollower`) in
//! the same run; Redis memory per FIB and per pending stream entry; the
//! time a follower process takes to join from a snapshot.
//!
//! ```sh
//! cargo run --release -p nexthop-control --example bus_propagation -- rates [SECS] [RATE,..] [N,..]
//! cargo run --release -p nexthop-control --example bus_propagation -- memory [NAMES] [ENTRIES]
//! cargo run --release -p nexthop-control --example bus_propagation -- join [NAMES]
//! ```
//!
//! `rates` (defaults 2 s, 10000,100000 changes/s, 1,4,16 followers): the
//! controller takes the changes due every millisecond as one call (one
//! delta, one stream entry) on a FIB of 100 000 MAC names; each follower is
//! a child process (this program, `follow ...`) that polls its counters
//! every 50 µs and notes the wall-clock time each new count was reached.
//! The latency of a call is the time from the start of the controller's
//! call to the moment the last follower applied it; median and p99 over
//! the calls. `memory`: Redis `used_memory` before and after publishing a
//! FIB of NAMES names (default 100 000), then after ENTRIES (default
//! 10 000) one-change stream entries with no snapshot in between. `join`:
//! a FIB of NAMES names (default 1 000 000) is published; a follower
//! process is started and timed until its table is installed.
//! Starts its own `redis-server`.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nexthop_control::{
    AuthKey, Controller, ControllerConfig, FibFollower, FollowerConfig, RedisController,
    RedisControllerConfig, RedisFollower, RedisFollowerConfig,
};
use nexthop_othello::fib::{Action, ConciseFib, RouteChange};
use nexthop_othello::Config;
use nexthop_testutil::redis::RedisServer;

const SECRET: &[u8] = b"propagation-bench-secret-0123456789";
const NAMES: u64 = 100_000;
/// The controller's tick: the changes due are applied every millisecond.
const TICK: Duration = Duration::from_millis(1);

fn mac(i: u64) -> [u8; 6] {
    let b = i.to_be_bytes();
    [0x02, b[3], b[4], b[5], b[6], b[7]]
}

fn fib(names: u64) -> ConciseFib<[u8; 6]> {
    let routes: Vec<_> = (0..names)
        .map(|i| (i as usize + 1, mac(i), Action::Port((i % 8) as u16)))
        .collect();
    ConciseFib::build(Config::default(), &routes).expect("build")
}

fn change(k: u64, names: u64) -> RouteChange<[u8; 6]> {
    RouteChange::Set(mac(k * 7919 % names), Action::Port((k % 8) as u16))
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

fn key() -> AuthKey {
    AuthKey::new(SECRET).expect("key")
}

/// Reads one of a follower's counters.
type Counter = Box<dyn Fn() -> u64>;

/// Child mode: `follow tcp ADDR` or `follow redis URL FIB`. Prints
/// `ready` once the first snapshot is installed, then, when its standard
/// input closes, `COUNT NS` lines (the count: deltas applied for TCP, the
/// FIB version for Redis; NS: when it was first seen) and `snapshots N`.
fn follow(args: &[String]) {
    let start = Instant::now();
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    std::thread::spawn(move || {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        d.store(true, Ordering::SeqCst);
    });
    let (count, snapshots): (Counter, Counter) = match args[0].as_str() {
        "tcp" => {
            let mut fc = FollowerConfig::new(args[1].parse().expect("address"), "bench");
            fc.log = false;
            let f = Arc::new(FibFollower::start(key(), fc).expect("follower"));
            let g = f.clone();
            (
                Box::new(move || f.stats().deltas),
                Box::new(move || g.stats().snapshots),
            )
        }
        _ => {
            let mut fc = RedisFollowerConfig::new(args[1].as_str(), args[2].as_str(), "bench");
            fc.log = false;
            let f = Arc::new(RedisFollower::start(&key(), fc).expect("follower"));
            let g = f.clone();
            (
                Box::new(move || f.stats().version),
                Box::new(move || g.stats().snapshots),
            )
        }
    };
    while snapshots() == 0 {
        std::thread::sleep(Duration::from_micros(200));
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready {}", start.elapsed().as_micros()).expect("stdout");
    out.flush().expect("stdout");
    let mut seen = Vec::new();
    let mut last = count();
    while !done.load(Ordering::SeqCst) {
        let c = count();
        if c != last {
            seen.push((c, now_ns()));
            last = c;
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    for (c, t) in seen {
        writeln!(out, "{c} {t}").expect("stdout");
    }
    writeln!(out, "snapshots {}", snapshots()).expect("stdout");
}

/// Follower processes, each ready (its first snapshot installed).
fn spawn(n: usize, args: &[&str]) -> Vec<(Child, BufReader<std::process::ChildStdout>)> {
    let me = std::env::current_exe().expect("current exe");
    let mut v: Vec<_> = (0..n)
        .map(|_| {
            let mut c = Command::new(&me)
                .arg("follow")
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn follower");
            let out = BufReader::new(c.stdout.take().expect("stdout"));
            (c, out)
        })
        .collect();
    for (_, out) in &mut v {
        let mut l = String::new();
        out.read_line(&mut l).expect("ready line");
        assert!(l.starts_with("ready"), "follower: {l:?}");
    }
    v
}

/// Close the followers' inputs; per follower, `(count, ns)` in order.
fn collect(v: Vec<(Child, BufReader<std::process::ChildStdout>)>) -> Vec<Vec<(u64, u128)>> {
    let mut all = Vec::new();
    for (mut c, out) in v {
        drop(c.stdin.take());
        let mut seen = Vec::new();
        for l in out.lines() {
            let l = l.expect("follower output");
            if let Some(s) = l.strip_prefix("snapshots ") {
                if s != "1" {
                    eprintln!("warning: a follower installed {s} snapshots");
                }
                continue;
            }
            let mut it = l.split(' ');
            let (Some(a), Some(b)) = (it.next(), it.next()) else {
                continue;
            };
            seen.push((a.parse().expect("count"), b.parse().expect("time")));
        }
        c.wait().expect("follower exit");
        all.push(seen);
    }
    all
}

/// A call: when it started and the count every follower reaches with it.
struct Call {
    start_ns: u128,
    target: u64,
}

/// Median and p99 (µs) of the time each call took to reach every follower.
fn latencies(calls: &[Call], seen: &[Vec<(u64, u128)>]) -> (f64, f64, usize) {
    let mut lat = Vec::new();
    let mut missed = 0;
    for c in calls {
        let mut worst = 0u128;
        let mut ok = true;
        for s in seen {
            // The first time this follower's count reached the target.
            let i = s.partition_point(|(n, _)| *n < c.target);
            match s.get(i) {
                Some((_, t)) => worst = worst.max(t.saturating_sub(c.start_ns)),
                None => ok = false,
            }
        }
        if ok {
            lat.push(worst);
        } else {
            missed += 1;
        }
    }
    lat.sort_unstable();
    let at = |q: f64| lat[((lat.len() - 1) as f64 * q).round() as usize] as f64 / 1e3;
    (at(0.5), at(0.99), missed)
}

/// Apply the changes due every tick for `secs` at `rate` changes/s with
/// `apply` (which returns the count the followers reach with the call).
fn drive(
    rate: u64,
    secs: f64,
    mut apply: impl FnMut(&[RouteChange<[u8; 6]>]) -> u64,
) -> (Vec<Call>, f64) {
    let total = (rate as f64 * secs) as u64;
    let mut calls = Vec::new();
    let mut done = 0u64;
    let t0 = Instant::now();
    let mut tick = 1u32;
    while done < total {
        if let Some(d) = (TICK * tick).checked_sub(t0.elapsed()) {
            std::thread::sleep(d);
        }
        tick += 1;
        let due = ((t0.elapsed().as_secs_f64() * rate as f64) as u64).min(total);
        if due <= done {
            continue;
        }
        let changes: Vec<_> = (done..due).map(|k| change(k, NAMES)).collect();
        let start_ns = now_ns();
        let target = apply(&changes);
        calls.push(Call { start_ns, target });
        done = due;
    }
    let achieved = total as f64 / t0.elapsed().as_secs_f64();
    (calls, achieved)
}

fn rates(args: &[String], redis: &RedisServer) {
    let secs: f64 = args.first().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let list = |i: usize, d: &[u64]| -> Vec<u64> {
        args.get(i)
            .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
            .unwrap_or_else(|| d.to_vec())
    };
    let rates = list(1, &[10_000, 100_000]);
    let ns = list(2, &[1, 4, 16]);
    println!("transport rate followers calls achieved_changes_per_s median_us p99_us");
    for &rate in &rates {
        for &n in &ns {
            let n = n as usize;
            // Direct TCP: one delta per call.
            let cfg = ControllerConfig {
                log: false,
                changes_per_delta: 65_536,
                ..ControllerConfig::default()
            };
            let c = Controller::start(fib(NAMES), key(), cfg).expect("controller");
            let addr = c.local_addr().to_string();
            let fs = spawn(n, &["tcp", &addr]);
            let mut k = 0u64;
            let (calls, achieved) = drive(rate, secs, |ch| {
                c.apply_changes(ch).expect("apply");
                k += 1;
                k
            });
            std::thread::sleep(Duration::from_millis(500));
            let seen = collect(fs);
            c.shutdown();
            let (m, p, missed) = latencies(&calls, &seen);
            println!(
                "tcp {rate} {n} {} {achieved:.0} {m:.1} {p:.1}{}",
                calls.len(),
                if missed > 0 {
                    format!(" (missed {missed})")
                } else {
                    String::new()
                }
            );
            // Redis: one stream entry per call.
            let name = format!("rate{rate}n{n}");
            let mut cfg = RedisControllerConfig::new(redis.url(), name.as_str());
            cfg.log = false;
            cfg.changes_per_delta = 65_536;
            cfg.snapshot_every = 0;
            let mut c =
                RedisController::acquire(&key(), cfg, fib(NAMES), 0, &AtomicBool::new(false))
                    .expect("acquire");
            let url = redis.url();
            let fs = spawn(n, &["redis", &url, &name]);
            let mut renewed = Instant::now();
            let (calls, achieved) = drive(rate, secs, |ch| {
                let v = c.apply_changes(ch).expect("apply").version;
                if renewed.elapsed() > Duration::from_millis(200) {
                    c.renew().expect("renew");
                    renewed = Instant::now();
                }
                v
            });
            std::thread::sleep(Duration::from_millis(500));
            let seen = collect(fs);
            c.release();
            let (m, p, missed) = latencies(&calls, &seen);
            println!(
                "redis {rate} {n} {} {achieved:.0} {m:.1} {p:.1}{}",
                calls.len(),
                if missed > 0 {
                    format!(" (missed {missed})")
                } else {
                    String::new()
                }
            );
        }
    }
}

fn used_memory(con: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query(con).expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory")
}

/// `MEMORY USAGE KEY SAMPLES 0` (exact) of `key`, 0 when absent.
fn key_usage(con: &mut redis::Connection, key: &str) -> u64 {
    let n: Option<u64> = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .arg("SAMPLES")
        .arg(0)
        .query(con)
        .expect("MEMORY USAGE");
    n.unwrap_or(0)
}

/// The summed usage of every key of FIB `name` but its stream, and of its
/// stream (column 0).
fn fib_usage(con: &mut redis::Connection, name: &str) -> (u64, u64) {
    let prefix = format!("nexthop:fib:{name}:");
    let stream = format!("{prefix}log:0");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query(con)
        .expect("KEYS");
    let mut rest = 0;
    for k in keys.iter().filter(|k| **k != stream) {
        rest += key_usage(con, k);
    }
    (rest, key_usage(con, &stream))
}

fn memory(args: &[String], redis: &RedisServer) {
    let names: u64 = args.first().and_then(|s| s.parse().ok()).unwrap_or(NAMES);
    let entries: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let mut con = redis::Client::open(redis.url())
        .expect("client")
        .get_connection()
        .expect("connect");
    let before = used_memory(&mut con);
    let mut cfg = RedisControllerConfig::new(redis.url(), "mem");
    cfg.log = false;
    cfg.changes_per_delta = 1;
    cfg.snapshot_every = 0;
    let mut c = RedisController::acquire(&key(), cfg, fib(names), 0, &AtomicBool::new(false))
        .expect("acquire");
    let (snap, _) = fib_usage(&mut con, "mem");
    let with_fib = used_memory(&mut con);
    for k in 0..entries {
        c.apply_changes(&[change(k, names)]).expect("apply");
        if k % 1000 == 0 {
            c.renew().expect("renew");
        }
    }
    let (_, log) = fib_usage(&mut con, "mem");
    let with_log = used_memory(&mut con);
    c.release();
    println!("names {names} entries {entries}");
    println!(
        "keys: snapshot (manifest, chunks, head, lease) {snap} B ({:.1} B/name); stream of \
         {entries} one-change entries {log} B ({:.1} B/entry)",
        snap as f64 / names as f64,
        log as f64 / entries as f64
    );
    println!(
        "used_memory: before {before}, after the snapshot {with_fib}, after the entries \
         {with_log} (includes transient client buffers)"
    );
}

fn join(args: &[String], redis: &RedisServer) {
    let names: u64 = args
        .first()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let t = Instant::now();
    let f = fib(names);
    let built = t.elapsed();
    let mut cfg = RedisControllerConfig::new(redis.url(), "join");
    cfg.log = false;
    let t = Instant::now();
    let c = RedisController::acquire(&key(), cfg, f, 0, &AtomicBool::new(false)).expect("acquire");
    let published = t.elapsed();
    let url = redis.url();
    let t = Instant::now();
    let fs = spawn(1, &["redis", &url, "join"]);
    let joined = t.elapsed();
    collect(fs);
    c.release();
    println!(
        "names {names} build {:.2} s publish {:.2} s join (process start to table installed) {:.3} s",
        built.as_secs_f64(),
        published.as_secs_f64(),
        joined.as_secs_f64()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map_or("rates", String::as_str);
    if mode == "follow" {
        follow(&args[1..]);
        return;
    }
    let redis = RedisServer::start().expect("redis-server");
    let rest = args.get(1..).unwrap_or_default();
    match mode {
        "rates" => rates(rest, &redis),
        "memory" => memory(rest, &redis),
        "join" => join(rest, &redis),
        m => {
            eprintln!("unknown mode {m}: rates, memory or join");
            std::process::exit(2);
        }
    }
}
