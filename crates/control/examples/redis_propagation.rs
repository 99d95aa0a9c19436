//! Update propagation, controller change to every follower applied,
//! through Redis (`RedisController` -> `redis-server` -> `RedisFollower`)
//! and through the direct TCP protocol (`Controller` -> `FibFollower`), in
//! the same run, on loopback, one change at a time (latency, not
//! throughput): median and p99 over CHANGES changes, for each N in the
//! follower counts. Starts its own `redis-server`.
//!
//! `cargo run --release -p nexthop-control --example redis_propagation -- [CHANGES] [N,N,...]`
//! (defaults 2000 and 1,4,16).

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use nexthop_control::{
    AuthKey, Controller, ControllerConfig, FibFollower, FollowerConfig, RedisController,
    RedisControllerConfig, RedisFollower, RedisFollowerConfig,
};
use nexthop_othello::fib::{Action, ConciseFib, RouteChange};
use nexthop_othello::Config;
use nexthop_testutil::redis::RedisServer;

const NAMES: u64 = 100_000;

fn mac(i: u64) -> [u8; 6] {
    let b = i.to_be_bytes();
    [0x02, b[3], b[4], b[5], b[6], b[7]]
}

fn fib() -> ConciseFib<[u8; 6]> {
    let routes: Vec<_> = (0..NAMES)
        .map(|i| (i as usize + 1, mac(i), Action::Port((i % 8) as u16)))
        .collect();
    ConciseFib::build(Config::default(), &routes).expect("build")
}

fn change(k: u64) -> RouteChange<[u8; 6]> {
    RouteChange::Set(mac(k * 7919 % NAMES), Action::Port((k % 8) as u16))
}

fn spin(done: impl Fn() -> bool) {
    let end = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < end, "followers did not converge");
        std::hint::spin_loop();
    }
}

fn summary(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let changes: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(2000);
    let ns: Vec<usize> = args
        .get(2)
        .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 4, 16]);
    let key = AuthKey::new(b"propagation-bench-secret-0123456789").expect("key");
    let redis = RedisServer::start().expect("redis-server");
    println!("transport followers changes median_us p99_us");
    for &n in &ns {
        // Direct TCP.
        let cfg = ControllerConfig {
            log: false,
            changes_per_delta: 1,
            ..ControllerConfig::default()
        };
        let c = Controller::start(fib(), key.clone(), cfg).expect("controller");
        let addr: SocketAddr = c.local_addr();
        let fs: Vec<_> = (0..n)
            .map(|i| {
                let mut fc = FollowerConfig::new(addr, format!("t{i}"));
                fc.log = false;
                FibFollower::start(key.clone(), fc).expect("follower")
            })
            .collect();
        spin(|| fs.iter().all(|f| f.stats().snapshots >= 1));
        let mut tcp = Vec::new();
        for k in 0..changes {
            let base: Vec<u64> = fs.iter().map(|f| f.stats().deltas).collect();
            let t = Instant::now();
            c.apply_changes(&[change(k)]).expect("apply");
            spin(|| fs.iter().zip(&base).all(|(f, b)| f.stats().deltas > *b));
            tcp.push(t.elapsed());
        }
        drop(fs);
        c.shutdown();
        // Redis.
        let mut cfg = RedisControllerConfig::new(redis.url(), format!("bench{n}"));
        cfg.log = false;
        cfg.changes_per_delta = 1;
        let mut c = RedisController::acquire(&key, cfg, fib(), 0, &AtomicBool::new(false))
            .expect("acquire");
        let fs: Vec<_> = (0..n)
            .map(|i| {
                let mut fc =
                    RedisFollowerConfig::new(redis.url(), format!("bench{n}"), format!("r{i}"));
                fc.log = false;
                RedisFollower::start(&key, fc).expect("follower")
            })
            .collect();
        spin(|| fs.iter().all(|f| f.stats().snapshots >= 1));
        let mut red = Vec::new();
        for k in 0..changes {
            let t = Instant::now();
            let v = c.apply_changes(&[change(k)]).expect("apply").version;
            spin(|| fs.iter().all(|f| f.stats().version >= v));
            red.push(t.elapsed());
            if k % 256 == 0 {
                c.renew().expect("renew");
            }
        }
        for (name, v) in [("tcp", tcp), ("redis", red)] {
            let (m, p) = summary(v);
            println!(
                "{name} {n} {changes} {:.1} {:.1}",
                m.as_secs_f64() * 1e6,
                p.as_secs_f64() * 1e6
            );
        }
    }
}
