//! The Redis bus against a real `redis-server` started by each test
//! (`nexthop_testutil::redis::RedisServer`, stopped also on failure):
//! convergence of several followers and a late joiner, forged, truncated
//! and replayed entries, a follower cut off behind a trimmed stream, Redis
//! restarts with and without persistence, a controller cut off mid-publish
//! and a standby controller taking over.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{action, fib, key, mac, WAIT};
use nexthop_control::{
    BusError, RedisController, RedisControllerConfig, RedisFollower, RedisFollowerConfig,
};
use nexthop_othello::fib::RouteChange;
use nexthop_testutil::redis::RedisServer;

type Ctl = RedisController<[u8; 6]>;
/// An XRANGE item: the id and the field-value pairs.
type StreamItem = (String, Vec<(String, Vec<u8>)>);

const FIB: &str = "core";

fn ctl_cfg(url: &str) -> RedisControllerConfig {
    let mut c = RedisControllerConfig::new(url, FIB);
    c.lease = Duration::from_millis(1000);
    c.poll = Duration::from_millis(50);
    c.changes_per_delta = 64;
    c.timeout = Duration::from_secs(2);
    c
}

fn fol_cfg(url: &str, id: &str) -> RedisFollowerConfig {
    let mut c = RedisFollowerConfig::new(url, FIB, id);
    c.block = Duration::from_millis(100);
    c.timeout = Duration::from_secs(2);
    c.backoff_max = Duration::from_millis(200);
    c
}

fn start_ctl(url: &str, n: u64) -> Ctl {
    Ctl::acquire(&key(), ctl_cfg(url), fib(n), 0, &AtomicBool::new(false)).expect("acquire")
}

/// Changes number `from..to`: sets of existing names, adds and deletes of
/// names past the base FIB of `base` names.
fn changes(base: u64, from: u64, to: u64) -> Vec<RouteChange<[u8; 6]>> {
    (from..to)
        .map(|i| match i % 3 {
            0 => RouteChange::Set(mac(i % base), action(i + 1)),
            1 => RouteChange::Add(mac(base + i), action(i)),
            _ => RouteChange::Delete(mac(base + i - 1)),
        })
        .collect()
}

/// The follower's table is byte-identical to the controller's export.
fn same(f: &RedisFollower, c: &Ctl) -> bool {
    f.table().is_some_and(|t| {
        t.query().to_snapshot() == c.fib().othello().snapshot(0)
            && t.actions().to_text() == c.fib().action_table().to_text()
    })
}

fn converge(f: &RedisFollower, c: &Ctl) {
    let v = c.version();
    assert!(
        f.wait_for(WAIT, |s| s.version == v) && common::wait_until(|| same(f, c)),
        "follower did not converge to version {v}: {:?}",
        f.stats()
    );
}

fn raw(url: &str) -> redis::Connection {
    redis::Client::open(url)
        .expect("url")
        .get_connection()
        .expect("connect")
}

#[test]
fn followers_converge_and_a_late_joiner_catches_up() {
    let r = RedisServer::start().expect("redis-server");
    let mut c = start_ctl(&r.url(), 3000);
    let fs: Vec<_> = (0..4)
        .map(|i| RedisFollower::start(&key(), fol_cfg(&r.url(), &format!("f{i}"))).unwrap())
        .collect();
    for f in &fs {
        converge(f, &c);
    }
    for k in 0..10 {
        let rep = c
            .apply_changes(&changes(3000, k * 200, (k + 1) * 200))
            .unwrap();
        assert_eq!(rep.changes, 200);
        assert_eq!(rep.entries, 4);
    }
    assert_eq!(c.version(), 2000);
    for f in &fs {
        converge(f, &c);
        let s = f.stats();
        assert_eq!(s.snapshots, 1, "{s:?}");
        assert_eq!(s.deltas, 40, "{s:?}");
        assert_eq!(s.bad_mac + s.malformed + s.replays + s.gaps, 0, "{s:?}");
    }
    let late = RedisFollower::start(&key(), fol_cfg(&r.url(), "late")).unwrap();
    converge(&late, &c);
    // Lookups of the FIB's names through the follower's table give the
    // controller's actions.
    let t = late.table().unwrap();
    let mut present = 0;
    for i in 0..5000u64 {
        if let Some(a) = c.fib().get(&mac(i)) {
            assert_eq!(t.lookup(&mac(i)), Some(a), "name {i}");
            present += 1;
        }
    }
    assert_eq!(present, c.fib().len());
}

#[test]
fn forged_truncated_and_replayed_entries_are_refused() {
    let r = RedisServer::start().expect("redis-server");
    let mut c = start_ctl(&r.url(), 1000);
    let f = RedisFollower::start(&key(), fol_cfg(&r.url(), "f")).unwrap();
    c.apply_changes(&changes(1000, 0, 100)).unwrap();
    converge(&f, &c);
    let stream = format!("nexthop:fib:{FIB}:log:0");
    let mut con = raw(&r.url());
    let all: Vec<StreamItem> = redis::cmd("XRANGE")
        .arg(&stream)
        .arg("-")
        .arg("+")
        .query(&mut con)
        .unwrap();
    let genuine = all[0].1[0].1.clone();
    // Replayed: a genuine old entry appended again.
    let _: String = redis::cmd("XADD")
        .arg(&stream)
        .arg("*")
        .arg("e")
        .arg(&genuine)
        .query(&mut con)
        .unwrap();
    // Truncated.
    let _: String = redis::cmd("XADD")
        .arg(&stream)
        .arg("*")
        .arg("e")
        .arg(&genuine[..genuine.len() - 5])
        .query(&mut con)
        .unwrap();
    // Forged: the same entry with a changed byte, and one without the field.
    let mut forged = genuine.clone();
    forged[20] ^= 0x40;
    let _: String = redis::cmd("XADD")
        .arg(&stream)
        .arg("*")
        .arg("e")
        .arg(&forged)
        .query(&mut con)
        .unwrap();
    let _: String = redis::cmd("XADD")
        .arg(&stream)
        .arg("*")
        .arg("x")
        .arg("y")
        .query(&mut con)
        .unwrap();
    assert!(f.wait_for(WAIT, |s| s.replays == 1
        && s.bad_mac == 2
        && s.malformed == 1));
    // Nothing was applied: the table is the controller's.
    assert!(same(&f, &c));
    // The controller publishes on; the follower follows.
    c.apply_changes(&changes(1000, 100, 300)).unwrap();
    converge(&f, &c);
    assert_eq!(f.stats().resyncs, 0, "{:?}", f.stats());
    // A manifest of another key is refused too: a follower with another
    // secret installs nothing.
    let other = nexthop_control::AuthKey::new(b"another-secret-0123456789").unwrap();
    let g = RedisFollower::start(&other, fol_cfg(&r.url(), "other")).unwrap();
    assert!(g.wait_for(WAIT, |s| s.bad_mac >= 1));
    assert!(g.table().is_none());
}

/// A TCP proxy the test can cut (a network partition) and restore.
struct Proxy {
    port: u16,
    up: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn new(upstream: u16) -> Proxy {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let up = Arc::new(AtomicBool::new(true));
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (u, cs) = (up.clone(), conns.clone());
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { continue };
                if !u.load(Ordering::SeqCst) {
                    continue;
                }
                let Ok(d) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                for (a, b) in [(&s, &d), (&d, &s)] {
                    let (mut a, mut b) = (a.try_clone().unwrap(), b.try_clone().unwrap());
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 1 << 16];
                        while let Ok(n @ 1..) = a.read(&mut buf) {
                            if b.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = a.shutdown(Shutdown::Both);
                        let _ = b.shutdown(Shutdown::Both);
                    });
                }
                let mut g = cs.lock().unwrap();
                g.push(s);
                g.push(d);
            }
        });
        Proxy { port, up, conns }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        for s in self.conns.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

#[test]
fn follower_cut_off_behind_a_trimmed_stream_resyncs_and_forwards_meanwhile() {
    let r = RedisServer::start().expect("redis-server");
    let mut cfg = ctl_cfg(&r.url());
    cfg.snapshot_every = 500;
    let mut c = Ctl::acquire(&key(), cfg, fib(2000), 0, &AtomicBool::new(false)).unwrap();
    let p = Proxy::new(r.port());
    let f = RedisFollower::start(&key(), fol_cfg(&p.url(), "far")).unwrap();
    c.apply_changes(&changes(2000, 0, 100)).unwrap();
    converge(&f, &c);
    let before = f.table().unwrap();
    let was = c.fib().get(&mac(3)).cloned();
    p.cut();
    let mut con = raw(&r.url());
    let stream = format!("nexthop:fib:{FIB}:log:0");
    let mut longest = 0usize;
    for k in 0..20 {
        let rep = c
            .apply_changes(&changes(2000, 100 + k * 250, 100 + (k + 1) * 250))
            .unwrap();
        let len: usize = redis::cmd("XLEN").arg(&stream).query(&mut con).unwrap();
        longest = longest.max(len);
        let _ = rep;
    }
    // Trimmed after each snapshot: never more than two snapshot intervals.
    assert!(
        longest <= 2 * 500 / 64 + 4,
        "stream grew to {longest} entries"
    );
    // Cut off, the follower still forwards with its last good table.
    let t = f.table().unwrap();
    assert!(Arc::ptr_eq(&t, &before));
    assert_eq!(t.lookup(&mac(3)), was.as_ref());
    p.restore();
    converge(&f, &c);
    let s = f.stats();
    assert!(s.redis_errors >= 1 && s.snapshots >= 2, "{s:?}");
}

fn restart_case(persist: bool) {
    let mut r = RedisServer::start_with(persist).expect("redis-server");
    let url = r.url();
    let mut c = start_ctl(&url, 1500);
    let f = RedisFollower::start(&key(), fol_cfg(&url, "f")).unwrap();
    c.apply_changes(&changes(1500, 0, 300)).unwrap();
    converge(&f, &c);
    r.kill();
    // While Redis is down the follower keeps its table; the controller's
    // publish fails and poisons it (nothing is lost: its state is kept).
    let failed = c.apply_changes(&changes(1500, 300, 400));
    assert!(failed.is_err());
    assert!(matches!(
        c.apply_changes(&changes(1500, 300, 400)),
        Err(BusError::Poisoned)
    ));
    assert!(f.table().is_some());
    r.restart().expect("restart");
    // Acquire again; with persistence Redis has every published change,
    // without it the controller's own state (at its version) is published.
    let (state, version) = c.into_state();
    let mut c = Ctl::acquire(
        &key(),
        ctl_cfg(&url),
        state,
        version,
        &AtomicBool::new(false),
    )
    .expect("acquire after restart");
    assert_eq!(c.version(), version);
    converge(&f, &c);
    c.apply_changes(&changes(1500, 400, 600)).unwrap();
    converge(&f, &c);
    assert!(f.stats().redis_errors >= 1);
}

#[test]
fn redis_restart_without_persistence() {
    restart_case(false);
}

#[test]
fn redis_restart_with_persistence() {
    restart_case(true);
}

#[test]
fn controller_cut_off_mid_publish_leaves_whole_entries_only() {
    let r = RedisServer::start().expect("redis-server");
    let p = Proxy::new(r.port());
    let mut a = start_ctl(&p.url(), 2000);
    let f = RedisFollower::start(&key(), fol_cfg(&r.url(), "f")).unwrap();
    converge(&f, &a);
    let all = changes(2000, 0, 60_000);
    let cutter = {
        let up = p.up.clone();
        let conns = p.conns.clone();
        let mut con = raw(&r.url());
        std::thread::spawn(move || {
            let stream = format!("nexthop:fib:{FIB}:log:0");
            let end = Instant::now() + WAIT;
            while Instant::now() < end {
                let len: usize = redis::cmd("XLEN").arg(&stream).query(&mut con).unwrap();
                if len >= 20 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            up.store(false, Ordering::SeqCst);
            for s in conns.lock().unwrap().drain(..) {
                let _ = s.shutdown(Shutdown::Both);
            }
        })
    };
    let res = a.apply_changes(&all);
    cutter.join().unwrap();
    assert!(res.is_err(), "the publish finished before the cut: {res:?}");
    // A standby takes over from what Redis holds: whole entries only.
    let b = start_ctl(&r.url(), 2000);
    let v = b.version();
    assert!(
        v > 0 && v < all.len() as u64 && v.is_multiple_of(64),
        "version {v}"
    );
    let mut expect = fib(2000);
    expect
        .apply_changes(&nexthop_othello::fib::numbered(&all[..v as usize]))
        .unwrap();
    for i in (0..2000).chain(2000..2000 + v + 64) {
        assert_eq!(b.fib().get(&mac(i)), expect.get(&mac(i)), "name {i}");
    }
    assert_eq!(b.fib().len(), expect.len());
    converge(&f, &b);
}

#[test]
fn standby_takes_over_in_order_and_fences_the_old_active() {
    let r = RedisServer::start().expect("redis-server");
    let url = r.url();
    let mut a = start_ctl(&url, 1000);
    let f = RedisFollower::start(&key(), fol_cfg(&url, "f")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let standby = {
        let (url, stop) = (url.clone(), stop.clone());
        std::thread::spawn(move || {
            let c = Ctl::acquire(&key(), ctl_cfg(&url), fib(1000), 0, &stop);
            (c, Instant::now())
        })
    };
    // The active one applies numbered changes to one name, renewing.
    let name = mac(7);
    for k in 0..50u64 {
        a.renew().unwrap();
        a.apply_changes(&[RouteChange::Set(name, action(k))])
            .unwrap();
        a.apply_changes(&changes(1000, k * 20, (k + 1) * 20))
            .unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
    converge(&f, &a);
    let left = a.version();
    let last = a.fib().get(&name).cloned();
    // The active stops renewing (hangs or dies): the standby takes over.
    let hung = Instant::now();
    let (b, at) = standby.join().unwrap();
    let mut b = b.expect("standby acquire");
    let handover = at - hung;
    assert!(
        handover < Duration::from_secs(3),
        "handover took {handover:?}"
    );
    assert_eq!(b.version(), left);
    assert_eq!(b.fib().get(&name).cloned(), last);
    assert_eq!(b.fib().len(), a.fib().len());
    for i in 0..2000 {
        assert_eq!(b.fib().get(&mac(i)), a.fib().get(&mac(i)), "name {i}");
    }
    // The old active is fenced off: nothing it tries is published.
    let stale = a.apply_changes(&[RouteChange::Set(name, action(999))]);
    assert!(
        matches!(stale, Err(BusError::LeaseLost { .. })),
        "{stale:?}"
    );
    b.apply_changes(&[RouteChange::Set(name, action(1000))])
        .unwrap();
    b.apply_changes(&changes(1000, 1000, 1100)).unwrap();
    converge(&f, &b);
    assert_eq!(f.table().unwrap().lookup(&name), Some(&action(1000)));
    assert_eq!(f.stats().bad_mac + f.stats().replays, 0);
    stop.store(true, Ordering::SeqCst);
}

/// Publishing a snapshot that takes longer than the lease (a FIB of
/// 1 000 000 names in 1 KiB chunks, a 100 ms lease): the lease is renewed
/// while the chunks are written, so the commit succeeds, no standby could
/// have taken over meanwhile, and a follower installs the snapshot.
#[test]
fn snapshot_longer_than_the_lease_is_committed_under_a_renewed_lease() {
    let redis = RedisServer::start().expect("redis-server");
    let url = redis.url();
    let mut cfg = ctl_cfg(&url);
    cfg.lease = Duration::from_millis(100);
    cfg.chunk_bytes = 1024;
    let t = Instant::now();
    let mut c = Ctl::acquire(
        &key(),
        cfg.clone(),
        fib(1_000_000),
        0,
        &AtomicBool::new(false),
    )
    .expect("acquire: the lease expired during the snapshot");
    let took = t.elapsed();
    assert!(
        took > cfg.lease * 2,
        "the snapshot took {took:?}, not longer than the lease: nothing was tested"
    );
    // A standby finds the lease held all along.
    let mut scfg = ctl_cfg(&url);
    scfg.lease = Duration::from_millis(100);
    let stop = AtomicBool::new(false);
    let standby = std::thread::scope(|s| {
        let h = s.spawn(|| Ctl::acquire(&key(), scfg, fib(10), 0, &stop));
        for _ in 0..10 {
            std::thread::sleep(Duration::from_millis(20));
            c.renew().expect("renew");
        }
        stop.store(true, Ordering::SeqCst);
        h.join().expect("standby thread")
    });
    assert!(
        matches!(standby, Err(ref e) if matches!(e.error, BusError::Stopped)),
        "the standby took the lease: {standby:?}"
    );
    let r = c.apply_changes(&changes(1_000_000, 0, 9)).expect("apply");
    let f = RedisFollower::start(&key(), fol_cfg(&url, "big")).expect("follower");
    converge(&f, &c);
    assert_eq!(f.stats().version, r.version);
    eprintln!("snapshot of 1 000 000 names in 1 KiB chunks published in {took:?}");
}
