//! End-to-end tests of `nexthop sdf run --app l2switch`: pcap files
//! written here by hand (one per input port), the output files read back
//! by hand and checked against what a learning switch must send, the
//! summary line and `--json`, and errors.

mod fixture;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use fixture::{nexthop, stdout, Fixture};

/// A little-endian microsecond pcap file of `frames`, each with its time
/// (seconds).
fn pcap(frames: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    v.extend_from_slice(&2u16.to_le_bytes());
    v.extend_from_slice(&4u16.to_le_bytes());
    v.extend_from_slice(&[0; 8]);
    v.extend_from_slice(&65535u32.to_le_bytes());
    v.extend_from_slice(&1u32.to_le_bytes());
    for (t, f) in frames {
        v.extend_from_slice(&t.to_le_bytes());
        v.extend_from_slice(&0u32.to_le_bytes());
        v.extend_from_slice(&(f.len() as u32).to_le_bytes());
        v.extend_from_slice(&(f.len() as u32).to_le_bytes());
        v.extend_from_slice(f);
    }
    v
}

/// The frames of a pcap file written by the forwarder (little-endian).
fn frames_of(path: &Path) -> Vec<Vec<u8>> {
    let Ok(b) = fs::read(path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        let len = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        out.push(b[at + 16..at + 16 + len].to_vec());
        at += 16 + len;
    }
    out
}

fn mac(i: u8) -> [u8; 6] {
    [2, 0, 0, 0, 0, i]
}

const BCAST: [u8; 6] = [0xff; 6];

fn eth(dst: [u8; 6], src: [u8; 6], seq: u8) -> Vec<u8> {
    let mut f = vec![seq; 64];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f
}

/// Timed frames per input port.
type Inputs = BTreeMap<u16, Vec<(u32, Vec<u8>)>>;
/// Frames per output port.
type Sent = BTreeMap<u16, Vec<Vec<u8>>>;

/// The traffic: hosts A (port 1), B (port 2) and C (port 3) say hello,
/// talk, then A moves to port 3; a runt arrives on port 2. Returns the
/// per-port input files and the frames each port must send.
fn traffic() -> (Inputs, Sent) {
    let (a, b, c) = (mac(1), mac(2), mac(3));
    let mut inputs = Inputs::new();
    let mut want = Sent::new();
    let mut t = 0u32;
    let mut send = |port: u16, f: Vec<u8>, to: &[u16]| {
        t += 1;
        for &p in to {
            want.entry(p).or_default().push(f.clone());
        }
        inputs.entry(port).or_default().push((t, f));
    };
    // Hellos: flooded to every other port of 0..=3.
    send(1, eth(BCAST, a, 0), &[0, 2, 3]);
    send(2, eth(BCAST, b, 0), &[0, 1, 3]);
    send(3, eth(BCAST, c, 0), &[0, 1, 2]);
    for i in 0..40u8 {
        send(1, eth(b, a, i), &[2]);
        send(2, eth(a, b, i), &[1]);
        send(3, eth(b, c, i), &[2]);
    }
    // To a MAC nobody has seen: flooded.
    send(1, eth(mac(9), a, 0), &[0, 2, 3]);
    // A runt: dropped.
    send(2, vec![1, 2, 3, 4, 5], &[]);
    // A moves to port 3: frames to it follow it.
    send(3, eth(b, a, 100), &[2]);
    for i in 0..20u8 {
        send(2, eth(a, b, 100 + i), &[3]);
    }
    (inputs, want)
}

fn write_inputs(fx: &Fixture, inputs: &Inputs) -> Vec<String> {
    inputs
        .iter()
        .map(|(p, frames)| {
            let path = fx.file(&format!("in-{p}.pcap"), pcap(frames));
            format!("{p}={}", path.display())
        })
        .collect()
}

fn fields(line: &str) -> BTreeMap<String, String> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn l2switch_learns_floods_and_follows_a_move_across_pcap_ports() {
    let fx = Fixture::new();
    let (inputs, want) = traffic();
    let args = write_inputs(&fx, &inputs);
    let out = fx.path("out");
    let mut cmd = nexthop();
    cmd.args(["sdf", "run", "--app", "l2switch", "--out-dir"])
        .arg(&out);
    for a in &args {
        cmd.args(["--in-pcap", a]);
    }
    let ok = cmd.assert().success();
    let line = stdout(&ok);
    let f = fields(line.trim());
    let total: usize = inputs.values().map(Vec::len).sum();
    assert_eq!(f["frames_in"], total.to_string(), "{line}");
    assert_eq!(f["dropped"], "1", "the runt: {line}");
    for (port, frames) in &want {
        let mut got = frames_of(&out.join(format!("port-{port}.pcap")));
        let mut w = frames.clone();
        got.sort();
        w.sort();
        assert_eq!(got.len(), w.len(), "port {port}: {line}");
        assert_eq!(got, w, "port {port}");
    }
    let hits: u64 = f["hits"].parse().unwrap();
    let calls: u64 = f["app_calls"].parse().unwrap();
    assert!(hits > 100, "the cache answered most frames: {line}");
    assert!(calls < 40, "the app saw few frames: {line}");
    let revoked: u64 = f["revocations"].parse().unwrap();
    assert!(revoked >= 2, "A's move revoked A->B and B->A: {line}");
    assert_eq!(f["app_drops"], "-");
}

#[test]
fn sdf_run_json_counts_cache_levels_and_pipeline() {
    let fx = Fixture::new();
    let (inputs, _) = traffic();
    let args = write_inputs(&fx, &inputs);
    let out = fx.path("out");
    let mut cmd = nexthop();
    cmd.args(["sdf", "run", "--app", "l2switch", "--json", "--out-dir"])
        .arg(&out);
    for a in &args {
        cmd.args(["--in-pcap", a]);
    }
    let ok = cmd.assert().success();
    let v: serde_json::Value = serde_json::from_str(&stdout(&ok)).unwrap();
    let total: u64 = inputs.values().map(|v| v.len() as u64).sum();
    assert_eq!(v["frames_in"], total);
    assert_eq!(v["app"], "l2switch");
    let c = &v["cache"];
    let hits = c["front_hits"].as_u64().unwrap() + c["wildcard_hits"].as_u64().unwrap();
    assert_eq!(v["pipeline"]["hits"].as_u64().unwrap(), hits);
    assert!(c["installs"].as_u64().unwrap() > 0);
    assert_eq!(
        v["app_side"]["calls"].as_u64().unwrap(),
        v["pipeline"]["app_requests"].as_u64().unwrap()
            + v["pipeline"]["resubmitted"].as_u64().unwrap()
    );
    assert_eq!(v["unanswered"], 0);
    assert!(v["files"].as_array().unwrap().len() >= 4);
}

#[test]
fn one_input_defaults_to_port_zero() {
    let fx = Fixture::new();
    let frames = vec![
        (1, eth(BCAST, mac(1), 0)),
        (2, eth(mac(2), mac(1), 1)),
        (3, eth(mac(2), mac(1), 2)),
    ];
    let input = fx.file("in.pcap", pcap(&frames));
    let out = fx.path("out");
    let ok = nexthop()
        .args([
            "sdf",
            "run",
            "--app",
            "l2switch",
            "--ports",
            "0,5",
            "--in-pcap",
        ])
        .arg(&input)
        .arg("--out-dir")
        .arg(&out)
        .assert()
        .success();
    let f = fields(stdout(&ok).trim());
    assert_eq!(f["out"], "5:3");
    assert_eq!(frames_of(&out.join("port-5.pcap")).len(), 3);
}

#[test]
fn unknown_app_and_missing_file_are_errors() {
    let fx = Fixture::new();
    let input = fx.file("in.pcap", pcap(&[]));
    nexthop()
        .args(["sdf", "run", "--app", "nope", "--in-pcap"])
        .arg(&input)
        .arg("--out-dir")
        .arg(fx.path("out"))
        .assert()
        .failure()
        .stderr(predicates::str::contains("no such built-in app"));
    nexthop()
        .args(["sdf", "run", "--app", "l2switch", "--in-pcap"])
        .arg(fx.path("absent.pcap"))
        .arg("--out-dir")
        .arg(fx.path("out"))
        .assert()
        .failure()
        .stderr(predicates::str::contains("absent.pcap"));
    nexthop()
        .args([
            "sdf",
            "run",
            "--app",
            "l2switch",
            "--ports",
            "1,x",
            "--in-pcap",
        ])
        .arg(&input)
        .arg("--out-dir")
        .arg(fx.path("out"))
        .assert()
        .failure();
}

#[test]
fn garbage_frames_go_through_without_a_panic() {
    let fx = Fixture::new();
    let mut frames = Vec::new();
    let mut x: u32 = 12345;
    for i in 0..300u32 {
        let len = (i * 7) % 150;
        let f: Vec<u8> = (0..len)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        frames.push((i, f));
    }
    let input = fx.file("in.pcap", pcap(&frames));
    let ok = nexthop()
        .args(["sdf", "run", "--app", "l2switch", "--in-pcap"])
        .arg(&input)
        .arg("--out-dir")
        .arg(fx.path("out"))
        .assert()
        .success();
    let f = fields(stdout(&ok).trim());
    assert_eq!(f["frames_in"], "300");
    let fwd: u64 = f["forwarded"].parse().unwrap();
    let drop: u64 = f["dropped"].parse().unwrap();
    assert_eq!(fwd + drop, 300);
}
