//! End-to-end tests of `nexthop sdf run --app l2switch`: pcap files
//! written here by hand (one per input port), the output files read back
//! by hand and checked against what a learning switch must send, the
//! summary line and `--json`, and errors; and live: three host
//! namespaces joined by veth to a forwarder namespace running the switch on
//! three ports, the frames each host receives checked one by one and the
//! counters read with `nexthop stats --json` (namespaces and processes are
//! removed by the `Lab` guard, also on failure; without root or `ip` the
//! live test says why and passes).

mod common;
mod fixture;
#[path = "common/hosts.rs"]
mod hosts;
#[path = "common/pcapio.rs"]
mod pcapio;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::thread::sleep;
use std::time::{Duration, Instant};

use common::{lab_or_skip, Lab, NEXTHOP};
use fixture::{nexthop, stdout, Fixture};
use hosts::host_mac;
use nexthop_dataplane::metrics::MetricsSnapshot;
use pcapio::frames_of;

/// A pcap file of `frames`, each with its time in seconds.
fn pcap(frames: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let timed: Vec<(u64, Vec<u8>)> = frames
        .iter()
        .map(|(t, f)| (u64::from(*t) * 1_000_000, f.clone()))
        .collect();
    pcapio::pcap_usec(&timed)
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
fn no_pending_table_makes_every_miss_an_app_call() {
    // One group of 32 frames of one flow, then its own reply: with the
    // pending-miss table the group makes one app call and 31 waits,
    // without it 32 app calls; the same frames come out either way.
    let fx = Fixture::new();
    let burst: Vec<(u32, Vec<u8>)> = (0..32).map(|_| (1, eth(mac(2), mac(1), 1))).collect();
    let input = fx.file("burst.pcap", pcap(&burst));
    let run = |extra: &[&str], out: &str| {
        let out = fx.path(out);
        let mut cmd = nexthop();
        cmd.args(["sdf", "run", "--app", "l2switch", "--in-pcap"])
            .arg(format!("1={}", input.display()))
            .arg("--out-dir")
            .arg(&out)
            .args(extra);
        let ok = cmd.assert().success();
        let f = fields(stdout(&ok).trim());
        let sent: Vec<Vec<Vec<u8>>> = (0..4)
            .map(|p| {
                let path = out.join(format!("port-{p}.pcap"));
                if path.exists() {
                    frames_of(&path)
                } else {
                    Vec::new()
                }
            })
            .collect();
        (f, sent)
    };
    let (on, sent_on) = run(&[], "on");
    assert_eq!(on["misses"], "32", "{on:?}");
    assert_eq!(on["app_calls"], "1", "{on:?}");
    assert_eq!(on["pending_waits"], "31", "{on:?}");
    let (off, sent_off) = run(&["--no-pending-table"], "off");
    assert_eq!(off["misses"], "32", "{off:?}");
    assert_eq!(off["app_calls"], "32", "{off:?}");
    assert_eq!(off["pending_waits"], "0", "{off:?}");
    assert_eq!(on["forwarded"], off["forwarded"]);
    assert_eq!(sent_on, sent_off);
    assert_eq!(
        sent_on.iter().map(Vec::len).sum::<usize>(),
        32 * 3,
        "flooded"
    );
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

#[test]
fn live_and_offline_flags_exclude_each_other() {
    let fx = Fixture::new();
    let input = fx.file("in.pcap", pcap(&[]));
    nexthop()
        .args([
            "sdf",
            "run",
            "--app",
            "l2switch",
            "--port",
            "1=eth9",
            "--in-pcap",
        ])
        .arg(&input)
        .assert()
        .failure()
        .stderr(predicates::str::contains("excludes --in-pcap"));
    nexthop()
        .args(["sdf", "run", "--app", "l2switch"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("no input"));
    nexthop()
        .args(["sdf", "run", "--app", "l2switch", "--in-pcap"])
        .arg(&input)
        .assert()
        .failure()
        .stderr(predicates::str::contains("--in-pcap needs --out-dir"));
    nexthop()
        .args([
            "sdf", "run", "--app", "l2switch", "--port", "1=a", "--port", "2=a",
        ])
        .assert()
        .failure()
        .stderr(predicates::str::contains("interface a is already port 1"));
    nexthop()
        .args([
            "sdf", "run", "--app", "l2switch", "--port", "1=a", "--in", "2",
        ])
        .assert()
        .failure()
        .stderr(predicates::str::contains("--in 2: port 2 has no interface"));
}

#[test]
fn a_python_app_takes_live_or_offline_ports_and_metrics_when_live() {
    // Refused before any Python runs (NEXTHOP_PYTHON would fail anyway).
    let fx = Fixture::new();
    let input = fx.file("in.pcap", pcap(&[]));
    let run = |py: &str, args: &[&str]| {
        let mut c = nexthop();
        c.env("NEXTHOP_PYTHON", py)
            .args(["sdf", "run", "--app", "app.py"])
            .args(args);
        c
    };
    run("false", &[])
        .assert()
        .failure()
        .stderr(predicates::str::contains(
            "a Python app needs --port N=IFACE (live) or --in-pcap FILE --out-dir DIR",
        ));
    run("false", &["--port", "1=eth9", "--in-pcap"])
        .arg(&input)
        .assert()
        .failure()
        .stderr(predicates::str::contains("excludes --in-pcap"));
    run(
        "false",
        &[
            "--metrics",
            "127.0.0.1:9464",
            "--out-dir",
            "out",
            "--in-pcap",
        ],
    )
    .arg(&input)
    .assert()
    .failure()
    .stderr(predicates::str::contains(
        "--metrics serves a live run's counters",
    ));
    run(
        "false",
        &["--port", "1=eth9", "--metrics", "127.0.0.1:9464"],
    )
    .assert()
    .failure()
    .stderr(predicates::str::contains(
        "Python apps need the nexthop Python package",
    ));
    // Live, `--metrics` goes on to `python -m nexthop.sdf run` (a stand-in
    // interpreter that has the package and prints its arguments).
    let py = fx.file(
        "fake-python",
        "#!/bin/sh\n[ \"$1\" = -c ] && exit 0\necho \"$@\"\n",
    );
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&py, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = run(
        py.to_str().unwrap(),
        &[
            "--port",
            "1=eth9",
            "--metrics",
            "127.0.0.1:9464",
            "--metrics-allow-remote",
        ],
    )
    .output()
    .unwrap();
    let args = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{args}");
    assert!(
        args.contains("-m nexthop.sdf run --app app.py --port 1=eth9")
            && args.contains("--metrics 127.0.0.1:9464 --metrics-allow-remote"),
        "{args}"
    );
}

// ---------------------------------------------------------------------------
// Live, in network namespaces

/// Not a test of its own: the send helper of `tests/common` and this
/// file's `hostcap` mode, run inside a namespace.
#[test]
#[ignore = "helper process of the namespace tests"]
fn live_helper() {
    hosts::helper(MAGIC);
}

const MAGIC: &[u8; 4] = b"NHSD";

/// An IPv4/UDP frame from host `from` (192.0.2.FROM) to `dst` (MAC) and
/// 192.0.2.TO, with the magic and `seq` in the payload.
fn host_frame(from: u8, dst: [u8; 6], to: u8, seq: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&host_mac(from));
    f.extend_from_slice(&[0x08, 0x00]);
    let mut ip = [
        0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 192, 0, 2, from, 192, 0, 2, to,
    ];
    let payload_len = 8 + MAGIC.len() + 2;
    ip[2..4].copy_from_slice(&((20 + payload_len) as u16).to_be_bytes());
    let csum = nexthop_wire::checksum::ipv4_header_checksum(&ip);
    ip[10..12].copy_from_slice(&csum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&9999u16.to_be_bytes());
    f.extend_from_slice(&9999u16.to_be_bytes());
    f.extend_from_slice(&(payload_len as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(MAGIC);
    f.extend_from_slice(&seq.to_be_bytes());
    f
}

/// Send `frames` from host `host` (its helper process), wait for it, then
/// until the switch has sent `tx_after` frames in all.
fn send_from(lab: &mut Lab, host: u8, frames: &[Vec<u8>], tx_after: u64) {
    hosts::send(lab, host, frames);
    // Each step starts once the frames of the one before crossed the
    // switch (a miss goes to the app first): the switch's transmitted
    // frames reach `tx_after`.
    let snap = stats_when(lab, METRICS, |s| s.tx_frames_total() >= tx_after);
    assert_eq!(snap.tx_frames_total(), tx_after, "h{host}: {snap:?}");
}

/// The switch's metrics endpoint (in its own namespace).
const METRICS: &str = "127.0.0.1:9464";

/// `nexthop stats --addr ADDR --json`, run in the switch's namespace,
/// until `done` holds for its snapshot (published once a second; at most
/// 15 s).
fn stats_when(
    lab: &mut Lab,
    addr: &str,
    done: impl Fn(&MetricsSnapshot) -> bool,
) -> MetricsSnapshot {
    let t = Instant::now();
    loop {
        let i = lab.spawn(
            "sw",
            "stats",
            Path::new(NEXTHOP),
            &["stats", "--addr", addr, "--json"],
            &[],
        );
        let (ok, out, err) = lab.wait(i, "stats", Duration::from_secs(10));
        assert!(ok, "nexthop stats failed:\n{out}\n{err}");
        let s = MetricsSnapshot::from_json(out.trim()).expect("stats --json");
        if done(&s) || t.elapsed() > Duration::from_secs(15) {
            return s;
        }
        sleep(Duration::from_millis(200));
    }
}

/// The value of extra metric `name` with `labels` in a snapshot.
fn metric(s: &MetricsSnapshot, name: &str, labels: &[(&str, &str)]) -> f64 {
    s.extra
        .iter()
        .find(|m| {
            m.name.trim_start_matches("nexthop_") == name
                && labels
                    .iter()
                    .all(|(k, v)| m.labels.iter().any(|(mk, mv)| mk == k && mv == v))
        })
        .map(|m| m.value)
        .unwrap_or_else(|| panic!("no metric {name} {labels:?} in {:?}", s.extra))
}

#[test]
fn live_l2switch_learns_and_delivers_between_three_namespaces() {
    let Some(mut lab) = lab_or_skip("sdfl2", &["h1", "h2", "h3", "sw"]) else {
        return;
    };
    for i in 1..=3 {
        lab.veth(&format!("h{i}"), &format!("h{i}"), "sw", &format!("sp{i}"));
    }
    let caps = hosts::capture(&mut lab, &[1, 2, 3]);
    let sw = lab.spawn(
        "sw",
        "sw",
        Path::new(NEXTHOP),
        &[
            "sdf",
            "run",
            "--app",
            "l2switch",
            "--port",
            "1=sp1",
            "--port",
            "2=sp2",
            "--port",
            "3=sp3",
            "--metrics",
            METRICS,
            "--duration",
            "60",
        ],
        &[],
    );
    lab.wait_for(
        "sw.err",
        "nexthop sdf run: forwarding",
        Duration::from_secs(10),
    );

    const BCAST: [u8; 6] = [0xff; 6];
    // 1. h1 → h2, unknown: flooded to h2 and h3.
    let first = host_frame(1, host_mac(2), 2, 0);
    send_from(&mut lab, 1, std::slice::from_ref(&first), 2);
    // 2. h2 → h1: h1 was learned, so h1 only.
    let reply = host_frame(2, host_mac(1), 1, 1);
    send_from(&mut lab, 2, std::slice::from_ref(&reply), 3);
    // 3. h1 → h2 now that both are learned: h2 only; one frame decides
    // (and caches) the flow, then 20 more are cache hits.
    let one = host_frame(1, host_mac(2), 2, 2);
    send_from(&mut lab, 1, std::slice::from_ref(&one), 4);
    let burst: Vec<Vec<u8>> = (3..23).map(|s| host_frame(1, host_mac(2), 2, s)).collect();
    send_from(&mut lab, 1, &burst, 24);
    // 4. h3 broadcasts: h1 and h2.
    let bcast = host_frame(3, BCAST, 255, 23);
    send_from(&mut lab, 3, std::slice::from_ref(&bcast), 26);

    // The counters, as `nexthop stats` reads them.
    let snap = stats_when(&mut lab, METRICS, |s| s.frames_in >= 24);
    // Stop on SIGTERM.
    let (out, _) = lab.terminate(sw, "sw", Duration::from_secs(10));
    caps.finish(&mut lab);

    // What each host received, in order.
    let got = |i: u8| hosts::received(&lab, i);
    let mut want_h2 = vec![first.clone(), one];
    want_h2.extend(burst.iter().cloned());
    want_h2.push(bcast.clone());
    assert_eq!(got(1), vec![reply, bcast], "h1");
    assert_eq!(got(2), want_h2, "h2");
    assert_eq!(got(3), vec![first], "h3: the first flood only");

    // The summary line and the counters.
    let line = out
        .lines()
        .find(|l| l.starts_with("frames_in="))
        .unwrap_or_default();
    eprintln!("nexthop sdf run stdout: {line}");
    let f = fields(line);
    assert_eq!(f["frames_in"], "24", "{line}");
    assert_eq!(f["out"], "1:2,2:23,3:1", "{line}");
    assert_eq!(f["stopped_by"], "signal", "{line}");
    assert_eq!(f["sdf_drops"], "-", "{line}");
    assert!(!line.contains("  "), "one space between fields: {line}");
    // Four flows, one app call each; the burst is answered by the cache.
    assert_eq!(f["sdf_hits"], "20", "{line}");
    assert_eq!(f["sdf_misses"], "4", "{line}");
    assert_eq!(f["app_calls"], "4", "{line}");
    let calls = 4.0;
    assert_eq!(snap.frames_in, 24);
    let level_hits = metric(&snap, "sdf_hits_total", &[("level", "front")])
        + metric(&snap, "sdf_hits_total", &[("level", "wildcard")]);
    assert!(level_hits >= 20.0, "{:?}", snap.extra);
    assert_eq!(metric(&snap, "sdf_app_calls_total", &[]), calls);
    assert!(metric(&snap, "sdf_installs_total", &[]) >= 1.0);
    assert_eq!(
        metric(&snap, "sdf_misses_total", &[]) + level_hits,
        24.0,
        "every frame is a hit or a miss"
    );
    for r in ["queue_full", "app_timeout", "app_fault"] {
        assert_eq!(metric(&snap, "sdf_drops_total", &[("reason", r)]), 0.0);
    }
    // Learning h2 may revoke the flood decision of step 1; never more.
    assert!(metric(&snap, "sdf_revocations_total", &[]) <= 2.0);
    assert!(metric(&snap, "sdf_entries", &[]) >= 1.0);
    assert_eq!(metric(&snap, "sdf_pending_waits_total", &[]), 0.0);
}

#[test]
fn live_slice_keeps_floods_in_its_ports_and_drops_frames_of_other_ports() {
    let Some(mut lab) = lab_or_skip("sdfsl", &["h1", "h2", "h3", "sw"]) else {
        return;
    };
    for i in 1..=3 {
        lab.veth(&format!("h{i}"), &format!("h{i}"), "sw", &format!("sp{i}"));
    }
    let caps = hosts::capture(&mut lab, &[1, 2, 3]);
    // Slice a owns ports 1 and 2; port 3 is nobody's.
    let sw = lab.spawn(
        "sw",
        "sw",
        Path::new(NEXTHOP),
        &[
            "sdf",
            "run",
            "--slice",
            "a:l2switch:ports=1,2:share=1000",
            "--port",
            "1=sp1",
            "--port",
            "2=sp2",
            "--port",
            "3=sp3",
            "--metrics",
            METRICS,
            "--duration",
            "60",
        ],
        &[],
    );
    lab.wait_for(
        "sw.err",
        "nexthop sdf run: forwarding app=a=l2switch",
        Duration::from_secs(10),
    );
    // 1. h1 → h2, unknown: flooded within the slice, so to h2 only.
    let first = host_frame(1, host_mac(2), 2, 0);
    send_from(&mut lab, 1, std::slice::from_ref(&first), 1);
    // 2. h2 → h1, learned: h1.
    let reply = host_frame(2, host_mac(1), 1, 1);
    send_from(&mut lab, 2, std::slice::from_ref(&reply), 2);
    // 3. One frame decides h1 → h2, 20 more hit the slice's cache.
    let one = host_frame(1, host_mac(2), 2, 2);
    send_from(&mut lab, 1, std::slice::from_ref(&one), 3);
    let burst: Vec<Vec<u8>> = (3..23).map(|s| host_frame(1, host_mac(2), 2, s)).collect();
    send_from(&mut lab, 1, &burst, 23);
    // 4. h3 broadcasts on port 3: no slice owns it, nobody gets it.
    let bcast = host_frame(3, [0xff; 6], 255, 23);
    send_from(&mut lab, 3, std::slice::from_ref(&bcast), 23);

    let snap = stats_when(&mut lab, METRICS, |s| s.frames_in >= 24);
    let (out, _) = lab.terminate(sw, "sw", Duration::from_secs(10));
    caps.finish(&mut lab);
    let got = |i: u8| hosts::received(&lab, i);
    let mut want_h2 = vec![first, one];
    want_h2.extend(burst.iter().cloned());
    assert_eq!(got(1), vec![reply], "h1");
    assert_eq!(got(2), want_h2, "h2");
    assert!(got(3).is_empty(), "h3 is outside the slice");

    let line = out
        .lines()
        .find(|l| l.starts_with("frames_in="))
        .unwrap_or_default();
    let f = fields(line);
    assert_eq!(f["frames_in"], "24", "{line}");
    assert_eq!(f["sdf_drops"], "no_slice:1", "{line}");
    assert!(
        f["slice.a"].starts_with("hits:20,misses:3,app_calls:3,"),
        "{line}"
    );
    assert_eq!(snap.frames_in, 24);
    assert_eq!(
        metric(&snap, "sdf_slice_hits_total", &[("slice", "a")]),
        20.0
    );
    assert_eq!(
        metric(&snap, "sdf_slice_app_calls_total", &[("slice", "a")]),
        3.0
    );
    assert_eq!(metric(&snap, "sdf_slice_share", &[("slice", "a")]), 1000.0);
    assert_eq!(
        metric(&snap, "sdf_drops_total", &[("reason", "no_slice")]),
        1.0
    );
}
