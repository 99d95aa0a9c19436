//! `nexthop ndn bench` and `nexthop ndn lab` end to end on loopback, and
//! segmented 5 MB objects through `nexthop ndn run` between our tools
//! (`nexthop_ndnd::tools`) and python-ndn 0.5.2 (`tests/ndn_lab/peer.py`,
//! run with `target/interop-venv/bin/python`, installed by
//! `bash scripts/setup-interop.sh`; those tests fail and say so when it is
//! absent), and `ndn bench --forwarder` against a running `nexthop ndn
//! run`. Every child is killed on drop, also when an assertion fails.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nexthop_ndnd::tools::consumer::{Consumer, ConsumerConfig};
use nexthop_ndnd::tools::producer::{Content, Producer, SegmentedObject};
use nexthop_wire::ndn::Name;
use rand::{RngCore, SeedableRng};
use tempfile::TempDir;

const NEXTHOP: &str = env!("CARGO_BIN_EXE_nexthop");

fn peer_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ndn_lab/peer.py")
}

fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut v);
    v
}

#[path = "common/proc.rs"]
mod proc;
use proc::{python, Proc};

/// `nexthop ndn run --udp 127.0.0.1:0`; its UDP address.
fn start_forwarder() -> (Proc, SocketAddr) {
    let mut cmd = Command::new(NEXTHOP);
    cmd.args(["ndn", "run", "--udp", "127.0.0.1:0"]);
    let p = Proc::spawn(cmd, true);
    let ready = p.wait_line("nexthop ndn: ready", Duration::from_secs(10));
    let udp = ready
        .split(' ')
        .find_map(|f| f.strip_prefix("udp="))
        .expect("udp= in the readiness line")
        .parse()
        .unwrap();
    (p, udp)
}

fn run_json(args: &[&str]) -> serde_json::Value {
    let out = Command::new(NEXTHOP).args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{args:?} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn bench_without_gso_satisfies_interests_too() {
    let v = run_json(&[
        "ndn",
        "bench",
        "--duration",
        "1",
        "--window",
        "32",
        "--no-python",
        "--no-gso",
        "--json",
    ]);
    assert!(v["satisfied"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["timed_out"], 0, "{v}");
    assert_eq!(v["nacked"], 0, "{v}");
}

#[test]
fn bench_short_run_satisfies_interests_and_reports_sane_json() {
    let v = run_json(&[
        "ndn",
        "bench",
        "--duration",
        "1.5",
        "--window",
        "32",
        "--no-python",
        "--json",
    ]);
    let n = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"));
    assert!(n("satisfied") > 0.0, "{v}");
    assert!(n("satisfied_per_s") > 0.0, "{v}");
    assert!(n("satisfied") <= n("sent"), "{v}");
    assert!(n("producer_data") >= n("satisfied"), "{v}");
    assert!(
        n("rtt_p50_us") > 0.0 && n("rtt_p50_us") <= n("rtt_p99_us"),
        "{v}"
    );
    assert_eq!(v["forwarding_threads"], 1);
    // Every Interest had a route and a unique name: nothing Nacked, the
    // forwarder's satisfied count is at least the consumer's.
    assert_eq!(v["nacked"], 0, "{v}");
    assert_eq!(v["drops"]["no_route"], 0, "{v}");
    assert!(v["drops"]["total"].is_u64(), "{v}");
    assert!(n("forwarder_satisfied") >= n("satisfied"), "{v}");
    assert!(v["python"].is_null(), "{v}");
    // Per-thread CPU of the run (clock ticks: present, not negative);
    // the consumer is still alive at the closing sample, so its time
    // counts.
    for k in ["forwarder", "producer", "consumers"] {
        assert!(v["cores"][k].as_f64().unwrap() >= 0.0, "{v}");
    }
    assert!(v["cores"]["consumers"].as_f64().unwrap() > 0.0, "{v}");
    assert!(
        v["forwarder_us_per_satisfied"].is_null()
            || v["forwarder_us_per_satisfied"].as_f64().unwrap() >= 0.0,
        "{v}"
    );
}

#[test]
fn bench_and_lab_refuse_bad_parameters() {
    for args in [
        &["ndn", "bench", "--window", "0", "--no-python"][..],
        &["ndn", "bench", "--duration", "0", "--no-python"],
        &["ndn", "lab", "--segment", "9000"],
        &["ndn", "lab", "--consumers", "0"],
    ] {
        let out = Command::new(NEXTHOP).args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(!out.stderr.is_empty(), "{args:?}: no error message");
    }
}

#[test]
fn lab_fetches_the_object_byte_exact_through_the_forwarder() {
    let dir = TempDir::new().unwrap();
    let src = dir.path().join("object.bin");
    let copy = dir.path().join("copy.bin");
    let bytes = random_bytes(3_000_000, 7);
    std::fs::write(&src, &bytes).unwrap();
    let v = run_json(&[
        "ndn",
        "lab",
        "--file",
        src.to_str().unwrap(),
        "--consumers",
        "2",
        "--out",
        copy.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(v["pass"], true, "{v}");
    assert_eq!(v["bytes"], 3_000_000);
    let segments = v["segments"].as_u64().unwrap();
    assert_eq!(segments, 3_000_000u64.div_ceil(4096));
    for c in v["consumers"].as_array().unwrap() {
        assert_eq!(c["ok"], true, "{v}");
    }
    assert_eq!(std::fs::read(&copy).unwrap(), bytes);
    // Each segment came from the producer once or more and every consumer
    // got all of them: from the producer, the CS or an aggregated entry.
    let satisfied = v["satisfied"].as_u64().unwrap();
    let cs_hits = v["cs_hits"].as_u64().unwrap();
    assert!(satisfied >= segments, "{v}");
    assert!(v["interests"].as_u64().unwrap() >= segments, "{v}");
    assert!(satisfied + cs_hits >= segments, "{v}");
    assert_eq!(v["drops"]["no_route"], 0, "{v}");

    // Text mode: the summary and the PASS line.
    let out = Command::new(NEXTHOP)
        .args(["ndn", "lab", "--size", "1000000", "--consumers", "1"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("identical to the source"), "{text}");
    assert!(text.contains("CS hits"), "{text}");
    assert!(text.contains("drops by reason: "), "{text}");
    assert_eq!(text.lines().last(), Some("ndn lab: PASS"), "{text}");
}

#[test]
fn python_ndn_producer_serves_5_mb_our_consumer_fetches_by_segments() {
    let py = python();
    let dir = TempDir::new().unwrap();
    let src = dir.path().join("object.bin");
    let bytes = random_bytes(5 << 20, 11);
    std::fs::write(&src, &bytes).unwrap();
    let (_fwd, udp) = start_forwarder();
    let mut cmd = Command::new(&py);
    cmd.arg(peer_script())
        .args(["serve", &format!("udp://{udp}"), "/interop/py5mb"])
        .arg(&src);
    let prod = Proc::spawn(cmd, false);
    prod.wait_line("registered True", Duration::from_secs(20));
    let mut c = Consumer::connect(
        udp,
        ConsumerConfig {
            window: 16,
            rto: Duration::from_millis(1000),
            max_retries: 6,
            ..ConsumerConfig::default()
        },
    )
    .unwrap();
    let (f, stats) = c
        .fetch(
            &Name::from_uri("/interop/py5mb").unwrap(),
            Duration::from_secs(120),
        )
        .unwrap();
    assert_eq!(f.segments, (5u64 << 20).div_ceil(4400));
    assert_eq!(f.bytes.len(), bytes.len());
    assert!(f.bytes == bytes, "the fetched object differs from the file");
    assert!(stats.satisfied >= f.segments, "{stats:?}");
}

#[test]
fn our_producer_serves_5_mb_python_ndn_segment_fetcher_gets_it() {
    let py = python();
    let dir = TempDir::new().unwrap();
    let out = dir.path().join("fetched.bin");
    let bytes = random_bytes(5 << 20, 13);
    let (_fwd, udp) = start_forwarder();
    let prefix = Name::from_uri("/interop/rs5mb").unwrap();
    let object = SegmentedObject::new(&prefix, 42, &bytes, 4400, 10_000).unwrap();
    let mut p = Producer::start(udp, prefix, Content::Object(object)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let serving = std::thread::spawn(move || p.run(&s));
    let r = Command::new(&py)
        .arg(peer_script())
        .args(["fetch", &format!("udp://{udp}"), "/interop/rs5mb"])
        .arg(&out)
        .output()
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    let counters = serving.join().unwrap().unwrap();
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(
        r.status.success() && text.contains(&format!("FETCHED {}", bytes.len())),
        "{text}\n{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(
        std::fs::read(&out).unwrap() == bytes,
        "the fetched file differs"
    );
    assert!(counters.data >= (5u64 << 20).div_ceil(4400), "{counters:?}");
}

#[test]
fn bench_measures_the_python_ndn_consumer_in_the_same_run() {
    let py = python();
    let v = run_json(&[
        "ndn",
        "bench",
        "--duration",
        "1",
        "--window",
        "16",
        "--python",
        py.to_str().unwrap(),
        "--python-duration",
        "1.5",
        "--json",
    ]);
    assert!(v["satisfied"].as_u64().unwrap() > 0, "{v}");
    let p = &v["python"];
    assert!(p["satisfied"].as_u64().unwrap() > 0, "{v}");
    assert!(p["satisfied_per_s"].as_f64().unwrap() > 0.0, "{v}");
    assert_eq!(p["nacked"], 0, "{v}");
}

#[test]
fn bench_drives_an_external_forwarder_given_with_forwarder() {
    let (fwd, udp) = start_forwarder();
    let v = run_json(&[
        "ndn",
        "bench",
        "--forwarder",
        &udp.to_string(),
        "--duration",
        "1",
        "--window",
        "16",
        "--no-python",
        "--json",
    ]);
    assert!(v["satisfied"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["forwarder"], udp.to_string(), "{v}");
    // Its counters are not ours to read: absent, not zero.
    assert!(v["forwarder_satisfied"].is_null(), "{v}");
    assert!(v["forwarder_us_per_satisfied"].is_null(), "{v}");
    // The forwarder saw the exchanges.
    let st = Command::new("kill")
        .args(["-TERM", &fwd.child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let line = fwd.wait_line("nexthop ndn: stopped", Duration::from_secs(5));
    let satisfied: u64 = line
        .split(' ')
        .find_map(|f| f.strip_prefix("satisfied="))
        .and_then(|x| x.parse().ok())
        .unwrap();
    assert!(satisfied >= v["satisfied"].as_u64().unwrap(), "{line} {v}");
}
