//! `nexthop stats` against a metrics endpoint served in the test process,
//! and against a port where nothing listens.

mod fixture;

use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use nexthop_dataplane::metrics::{
    MetricsServer, MetricsSnapshot, PortCount, PortMetrics, SnapshotProvider,
};
use predicates::prelude::*;

use fixture::nexthop;

/// A forwarder that gains 1,000 frames (and 0.5 s of uptime) per request.
fn growing_server() -> MetricsServer {
    let calls = Arc::new(AtomicU64::new(0));
    let provider: SnapshotProvider = Arc::new(move || {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        let frames = 1000 * (n + 1);
        let mut s = MetricsSnapshot {
            uptime_seconds: 0.5 * (n + 1) as f64,
            fib_generation: 2,
            frames_in: frames,
            bytes_in: frames * 60,
            forwarded: frames - 10,
            dropped: 10,
            rx: vec![PortMetrics {
                port: 0,
                frames,
                bytes: frames * 60,
            }],
            tx: vec![PortMetrics {
                port: 1,
                frames: frames - 10,
                bytes: (frames - 10) * 60,
            }],
            ring_drops: vec![PortCount { port: 0, count: 7 }],
            ..MetricsSnapshot::default()
        };
        s.actions.port = frames - 10;
        s.actions.drop = 10;
        s.drops.insert("action".to_string(), 10);
        s.with_counter("follower_deltas_total", "Deltas applied.", &[], 42)
    });
    match MetricsServer::start("127.0.0.1:0".parse().unwrap(), provider) {
        Ok(s) => s,
        Err(e) => panic!("metrics server: {e}"),
    }
}

#[test]
fn stats_prints_a_table_of_the_forwarders_counters() {
    let srv = growing_server();
    let out = nexthop()
        .args(["stats", "--addr", &srv.local_addr().to_string()])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("uptime 0.5s  fib generation 2"), "{text}");
    assert!(
        text.contains("frames_in 1000  bytes_in 60000  forwarded 990  dropped 10"),
        "{text}"
    );
    assert!(text.contains("drops     action 10"), "{text}");
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|l| !l.starts_with("port"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0][..3], ["port", "rx_frames", "rx_bytes"]);
    assert_eq!(rows[1], ["0", "1000", "60000", "0", "0", "0", "7", "0"]);
    assert_eq!(rows[2], ["1", "0", "0", "990", "59400", "0", "0", "0"]);
    assert!(text.contains("follower_deltas_total 42"), "{text}");
    assert!(
        !text.contains("rates over"),
        "one sample has no rates: {text}"
    );
}

#[test]
fn stats_json_prints_the_snapshot_as_served() {
    let srv = growing_server();
    let out = nexthop()
        .args(["stats", "--json", "--addr", &srv.local_addr().to_string()])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.lines().count(), 1);
    let s = MetricsSnapshot::from_json(text.trim()).unwrap();
    assert_eq!(s.frames_in, 1000);
    assert_eq!(s.ring_drops, [PortCount { port: 0, count: 7 }]);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["rx"][0]["frames"], 1000);
    assert_eq!(v["drops"]["action"], 10);
}

#[test]
fn stats_watch_shows_rates_between_samples() {
    let srv = growing_server();
    let out = nexthop()
        .args(["stats", "--watch", "0.05", "--count", "3"])
        .args(["--addr", &srv.local_addr().to_string()])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.matches("forwarder ").count(), 3, "{text}");
    // 1,000 frames per 0.5 s of forwarder uptime.
    assert_eq!(
        text.matches("rates over 0.50s: frames_in 2000/s  forwarded 2000/s")
            .count(),
        2,
        "{text}"
    );
    assert!(text.contains("rx_fps  tx_fps"), "{text}");
}

#[test]
fn stats_watch_json_prints_one_object_per_sample() {
    let srv = growing_server();
    let out = nexthop()
        .args(["stats", "--json", "--watch", "0.01", "--count", "2"])
        .args(["--addr", &srv.local_addr().to_string()])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    let frames: Vec<u64> = text
        .lines()
        .map(|l| MetricsSnapshot::from_json(l).unwrap().frames_in)
        .collect();
    assert_eq!(frames, [1000, 2000]);
}

#[test]
fn stats_against_a_closed_port_fails_with_a_clear_error() {
    // Bind and release a port so nothing listens there.
    let addr = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    nexthop()
        .args(["stats", "--addr", &addr.to_string()])
        .assert()
        .failure()
        .stdout("")
        .stderr(predicate::str::starts_with(format!(
            "error: fetching stats from {addr}: cannot connect to {addr}"
        )))
        .stderr(predicate::str::contains(
            "; is a forwarder's metrics endpoint listening there?",
        ));
}

#[test]
fn stats_refuses_bad_arguments() {
    nexthop()
        .args(["stats", "--addr", "no-port-here"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("cannot resolve no-port-here"));
    nexthop()
        .args(["stats", "--watch", "0", "--addr", "127.0.0.1:1"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("--watch must be more than 0"));
    nexthop()
        .args(["stats", "--count", "2", "--addr", "127.0.0.1:1"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("--watch"));
}
