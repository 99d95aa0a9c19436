//! A network-wide FIB through the Redis bus (one shared graph, a value
//! column per switch), against a real `redis-server` started by each test:
//! a follower per column converges to the controller's export of its
//! column across deltas and snapshots, a change touching two columns
//! publishes exactly those columns' deltas, a standby rebuilds every
//! column from the change log, and a follower of a column the FIB lacks
//! installs nothing.

mod common;

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use common::{key, mac, WAIT};
use nexthop_control::{RedisController, RedisControllerConfig, RedisFollower, RedisFollowerConfig};
use nexthop_othello::fib::Action;
use nexthop_othello::fib_net::{NetworkChange, NetworkFib};
use nexthop_othello::Config;
use nexthop_testutil::redis::RedisServer;

type Net = NetworkFib<[u8; 6]>;
type Ctl = RedisController<[u8; 6], Net>;

const FIB: &str = "fabric";
const COLS: usize = 4;

fn ctl_cfg(url: &str) -> RedisControllerConfig {
    let mut c = RedisControllerConfig::new(url, FIB);
    c.lease = Duration::from_millis(1000);
    c.poll = Duration::from_millis(50);
    c.changes_per_delta = 64;
    c.timeout = Duration::from_secs(2);
    c
}

fn fol_cfg(url: &str, column: u32) -> RedisFollowerConfig {
    let mut c = RedisFollowerConfig::new(url, FIB, format!("sw{column}"));
    c.column = column;
    c.block = Duration::from_millis(100);
    c.timeout = Duration::from_secs(2);
    c.backoff_max = Duration::from_millis(200);
    c
}

/// Switch `c`'s next hop for name `i` in route generation `g`.
fn hop(i: u64, c: usize, g: u64) -> Action {
    Action::Port(((i + c as u64 * 3 + g) % 5) as u16 + 1)
}

fn acts(i: u64, g: u64) -> Vec<Action> {
    (0..COLS).map(|c| hop(i, c, g)).collect()
}

fn net(n: u64) -> Net {
    let routes: Vec<_> = (0..n)
        .map(|i| (i as usize + 1, mac(i), acts(i, 0)))
        .collect();
    let cfg = Config {
        columns: COLS,
        ..Config::default()
    };
    NetworkFib::build(cfg, &routes).expect("build")
}

fn start_ctl(fib: Net, cfg: RedisControllerConfig) -> Ctl {
    Ctl::acquire(&key(), cfg, fib, 0, &AtomicBool::new(false)).expect("acquire")
}

/// Batch `k`: sets (new actions in every column), adds and deletes.
fn batch(base: u64, k: u64) -> Vec<NetworkChange<[u8; 6]>> {
    (k * 60..(k + 1) * 60)
        .map(|i| match i % 3 {
            0 => NetworkChange::Set(mac(i % base), acts(i, k + 1)),
            1 => NetworkChange::Add(mac(base + i), acts(i, k)),
            _ => NetworkChange::Delete(mac(base + i - 1)),
        })
        .collect()
}

fn apply(c: &mut Ctl, changes: &[NetworkChange<[u8; 6]>]) -> nexthop_control::BusReport {
    let lined: Vec<_> = changes
        .iter()
        .enumerate()
        .map(|(i, c)| (i + 1, c))
        .collect();
    c.apply_lined(&lined).expect("apply")
}

/// The follower of `column` holds, byte for byte, the controller's export
/// of that column, at the column's version, and the action table up to
/// the column's last entry (actions a batch added for other columns reach
/// it with its next entry or snapshot).
fn converge(f: &RedisFollower, c: &Ctl, column: usize) {
    let v = c.column_version(column).unwrap();
    let same = || {
        f.table().is_some_and(|t| {
            t.query().to_snapshot() == c.fib().othello().snapshot(column)
                && c.fib()
                    .action_table()
                    .to_text()
                    .starts_with(&t.actions().to_text())
        })
    };
    assert!(
        f.wait_for(WAIT, |s| s.version == v) && common::wait_until(same),
        "column {column} did not converge to version {v}: {:?}",
        f.stats()
    );
}

fn xlen(url: &str, key: &str) -> u64 {
    let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
    redis::cmd("XLEN").arg(key).query(&mut con).unwrap()
}

#[test]
fn every_column_converges_to_its_export_across_deltas_and_snapshots() {
    let r = RedisServer::start().expect("redis-server");
    let mut cfg = ctl_cfg(&r.url());
    cfg.snapshot_every = 200;
    let mut c = start_ctl(net(1000), cfg);
    let fs: Vec<_> = (0..COLS as u32)
        .map(|col| RedisFollower::start(&key(), fol_cfg(&r.url(), col)).unwrap())
        .collect();
    for (col, f) in fs.iter().enumerate() {
        converge(f, &c, col);
    }
    let mut snapshots = 0;
    for k in 0..10 {
        let rep = apply(&mut c, &batch(1000, k));
        assert_eq!(rep.changes, 60);
        snapshots += rep.snapshot as u64;
    }
    assert_eq!(c.version(), 600);
    assert_eq!(snapshots, 2, "snapshots after 240 and 480 changes");
    // The second snapshot trimmed every stream to the first one's
    // position (`XTRIM MINID` keeps the entry there): what is left is that
    // entry and the 6 batches after it.
    assert_eq!(xlen(&r.url(), &format!("nexthop:fib:{FIB}:ctl")), 7);
    for col in 0..COLS {
        let n = xlen(&r.url(), &format!("nexthop:fib:{FIB}:log:{col}"));
        assert!((1..=7).contains(&n), "column {col}: {n} entries");
    }
    for (col, f) in fs.iter().enumerate() {
        converge(f, &c, col);
        let s = f.stats();
        assert_eq!(
            s.bad_mac + s.malformed + s.replays + s.apply_errors,
            0,
            "{s:?}"
        );
        assert!(s.deltas > 0, "{s:?}");
    }
    // A late joiner of column 2 starts from the latest snapshot; its
    // lookups give switch 2's actions.
    let late = RedisFollower::start(&key(), fol_cfg(&r.url(), 2)).unwrap();
    converge(&late, &c, 2);
    let t = late.table().unwrap();
    let mut present = 0;
    for i in 0..2000u64 {
        if let Some(a) = c.fib().get_column(&mac(i), 2) {
            assert_eq!(t.lookup(&mac(i)), Some(a), "name {i}");
            present += 1;
        }
    }
    assert_eq!(present, c.fib().len());
}

#[test]
fn a_change_touching_two_columns_publishes_exactly_those_deltas() {
    let r = RedisServer::start().expect("redis-server");
    let mut c = start_ctl(net(300), ctl_cfg(&r.url()));
    let fs: Vec<_> = (0..COLS as u32)
        .map(|col| RedisFollower::start(&key(), fol_cfg(&r.url(), col)).unwrap())
        .collect();
    for (col, f) in fs.iter().enumerate() {
        converge(f, &c, col);
    }
    let streams: Vec<String> = (0..COLS)
        .map(|col| format!("nexthop:fib:{FIB}:log:{col}"))
        .collect();
    let ctl = format!("nexthop:fib:{FIB}:ctl");
    let before: Vec<u64> = streams.iter().map(|s| xlen(&r.url(), s)).collect();
    let ctl_before = xlen(&r.url(), &ctl);
    let deltas: Vec<u64> = fs.iter().map(|f| f.stats().deltas).collect();
    // Name 7 changes its next hop at switches 1 and 2 only, to an action
    // no switch used before.
    let name = mac(7);
    let mut new = acts(7, 0);
    new[1] = Action::Port(40);
    new[2] = Action::PortSet(vec![41, 42]);
    let rep = apply(&mut c, &[NetworkChange::Set(name, new.clone())]);
    assert_eq!((rep.changes, rep.entries), (1, 3), "{rep:?}");
    for (col, s) in streams.iter().enumerate() {
        let grew = xlen(&r.url(), s) - before[col];
        assert_eq!(
            grew,
            u64::from(col == 1 || col == 2),
            "stream of column {col}"
        );
    }
    assert_eq!(xlen(&r.url(), &ctl), ctl_before + 1);
    for (col, f) in fs.iter().enumerate() {
        converge(f, &c, col);
        let got = f.stats().deltas - deltas[col];
        assert_eq!(
            got,
            u64::from(col == 1 || col == 2),
            "deltas of column {col}"
        );
        let t = f.table().unwrap();
        assert_eq!(t.lookup(&name), Some(&new[col]), "column {col}");
    }
    // A later change touching only column 3 reaches column 3 with the
    // action the column-1 delta introduced (the table is shared).
    let mut third = new.clone();
    third[3] = Action::Port(40);
    apply(&mut c, &[NetworkChange::Set(name, third)]);
    converge(&fs[3], &c, 3);
    assert_eq!(
        fs[3].table().unwrap().lookup(&name),
        Some(&Action::Port(40))
    );
    // A delete publishes to the change log; every column stays converged.
    apply(&mut c, &[NetworkChange::Delete(mac(3))]);
    for (col, f) in fs.iter().enumerate() {
        converge(f, &c, col);
    }
}

#[test]
fn a_standby_rebuilds_every_column_from_the_change_log() {
    let r = RedisServer::start().expect("redis-server");
    let mut a = start_ctl(net(500), ctl_cfg(&r.url()));
    let f = RedisFollower::start(&key(), fol_cfg(&r.url(), 3)).unwrap();
    for k in 0..5 {
        apply(&mut a, &batch(500, k));
    }
    converge(&f, &a, 3);
    let expect: HashMap<[u8; 6], Vec<Action>> = (0..1000u64)
        .filter_map(|i| {
            let g = a.fib().get(&mac(i))?;
            Some((mac(i), g.into_iter().cloned().collect()))
        })
        .collect();
    let version = a.version();
    a.release();
    // The standby is handed an empty FIB: Redis is the state.
    let b = start_ctl(net(0), ctl_cfg(&r.url()));
    assert_eq!(b.version(), version);
    assert_eq!(b.fib().len(), expect.len());
    for (k, acts) in &expect {
        let got: Vec<Action> = b.fib().get(k).unwrap().into_iter().cloned().collect();
        assert_eq!(&got, acts);
    }
    converge(&f, &b, 3);
}

#[test]
fn a_follower_of_a_column_the_fib_lacks_installs_nothing() {
    let r = RedisServer::start().expect("redis-server");
    let _c = start_ctl(net(100), ctl_cfg(&r.url()));
    let f = RedisFollower::start(&key(), fol_cfg(&r.url(), COLS as u32)).unwrap();
    assert!(f.wait_for(WAIT, |s| s.malformed > 0), "{:?}", f.stats());
    assert!(f.table().is_none());
    assert_eq!(f.stats().snapshots, 0);
}
