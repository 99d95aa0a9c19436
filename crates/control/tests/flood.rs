//! A flood of hostile connections against one controller, alone in its
//! process so that its thread and memory counts are the controller's.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use common::{fib, key, wait_until, WAIT};
use nexthop_control::frame::{encode_parts, MsgType};
use nexthop_control::handshake::NONCE_LEN;
use nexthop_control::{Controller, ControllerConfig, FibFollower, FollowerConfig};

/// Threads of this process (Linux).
fn threads() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("Threads:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Resident memory of this process in KiB (Linux).
fn rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Soft limit on open files (Linux).
fn open_file_limit() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = s.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

#[test]
fn hostile_connection_flood_leaves_threads_and_memory_bounded() {
    let (Some(t0), Some(m0), Some(nofile)) = (threads(), rss_kib(), open_file_limit()) else {
        eprintln!("no /proc: skipped");
        return;
    };
    let c = Controller::start(
        fib(500),
        key(),
        ControllerConfig {
            handshake_timeout: Duration::from_secs(2),
            log: false,
            ..ControllerConfig::default()
        },
    )
    .expect("controller");
    let max_hs = ControllerConfig::default().max_handshakes as u64;
    // Each hostile socket holds one descriptor here, each handshaking one
    // two more on the controller side.
    // 2 000 by default (about 15 s here); NEXTHOP_FLOOD_CONNECTIONS=10000
    // for the figure in docs/control.md (about a minute).
    let want = std::env::var("NEXTHOP_FLOOD_CONNECTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000usize);
    let n = want.min(nofile.saturating_sub(300 + 3 * max_hs) as usize);
    let partial = &encode_parts(&key(), MsgType::Nonce, 0, 0, 0, &[1; NONCE_LEN])[..40];
    let mut hostile = Vec::with_capacity(n);
    for _ in 0..n {
        let Ok(mut s) = TcpStream::connect(c.local_addr()) else {
            continue;
        };
        let _ = s.write_all(partial);
        hostile.push(s);
    }
    // Every one refused, in its handshake, or cut at its deadline.
    let n = hostile.len() as u64;
    assert!(wait_until(|| {
        let s = c.stats();
        s.refused + s.handshaking + s.handshake_timeouts == n
    }));
    let (t1, m1) = (threads().unwrap_or(0), rss_kib().unwrap_or(0));
    let s = c.stats();
    eprintln!(
        "{} hostile connections: controller threads +{} (accept thread and {} handshakes), \
         resident memory +{} KiB, {} refused",
        hostile.len(),
        t1.saturating_sub(t0),
        s.handshaking,
        m1.saturating_sub(m0),
        s.refused
    );
    assert!(s.handshaking <= max_hs, "{s:?}");
    assert!(s.refused >= n - max_hs - s.handshake_timeouts, "{s:?}");
    // The accept thread, one per handshake and slack for the test harness.
    assert!(t1 <= t0 + 1 + max_hs + 4, "threads {t0} -> {t1}");
    assert!(m1 <= m0 + 64 * 1024, "resident memory {m0} -> {m1} KiB");
    // A real follower gets in once the hostile handshakes are cut.
    let cfg = FollowerConfig {
        backoff_min: Duration::from_millis(5),
        backoff_max: Duration::from_millis(100),
        log: false,
        ..FollowerConfig::new(c.local_addr(), "real")
    };
    let f = FibFollower::start(key(), cfg).expect("f");
    assert!(f.wait_for(WAIT, |s| s.snapshots == 1), "{:?}", f.stats());
    let t = f.table().expect("table");
    c.with_fib(|fib| assert_eq!(t.query().to_snapshot(), fib.othello().snapshot(0)));
    drop(hostile);
    f.stop();
    c.shutdown();
}
