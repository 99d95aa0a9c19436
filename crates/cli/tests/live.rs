//! End-to-end tests of `nexthop run` on live interfaces: veth pairs in
//! network namespaces that each test creates and always removes (a guard
//! whose `Drop` kills the child processes and deletes the namespaces, also
//! on panic). Namespace names carry the test process id.
//!
//! Topology of `run_forwards_each_frame_to_exactly_its_fib_ports`:
//!
//! ```text
//!  nh-src-PID          nh-fwd-PID (nexthop run)             nh-snk-PID
//!  src0 ---- veth ---- fin0 (port 0, input)
//!                      fo1  (port 1) ---- veth ---- s1 \
//!                      fo2  (port 2) ---- veth ---- s2  } capture helper
//!                      fo3  (port 3) ---- veth ---- s3 /
//! ```
//!
//! The frames are sent and captured by this test binary itself, run as a
//! helper (`live_helper`, ignored unless called so) inside a namespace with
//! `ip netns exec`, using the dataplane's AF_PACKET ports. Without root or
//! `ip`, the namespace tests print why they skip and pass.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::process::Command;
use std::thread::sleep;
use std::time::Duration;

use common::*;
use tempfile::TempDir;

// ---------------------------------------------------------------------------
// Frames and the FIB

fn mac(i: u8) -> [u8; 6] {
    [0x02, 0x6e, 0x68, 0x00, 0x00, i]
}

/// Actions of the known names, by `i % 7`, with the ports each sends to.
const ACTIONS: [(&str, &[u16]); 7] = [
    ("1", &[1]),
    ("2", &[2]),
    ("3", &[3]),
    ("1+3", &[1, 3]),
    ("drop", &[]),
    ("controller", &[]),
    ("2", &[2]),
];
const KNOWN: u8 = 56;
const UNKNOWN: u8 = 16;

/// What the test expects of one sent frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A known name: sent on exactly these ports.
    Known(&'static [u16], &'static str),
    Unknown,
    /// A 16-byte frame whose 0x9100 tag is cut short (a known name).
    Malformed,
}

/// Frame `seq`: a seeded mix of known names, unknown names and malformed
/// frames of varying lengths.
fn test_frame(seq: u32) -> (Vec<u8>, Kind) {
    let r = seq.wrapping_mul(2_654_435_761).rotate_left(7);
    let pick = r % 100;
    let (dst, kind) = if pick < 85 {
        let i = (r >> 8) as u8 % KNOWN;
        let (a, ports) = ACTIONS[usize::from(i % 7)];
        (mac(i), Kind::Known(ports, a))
    } else if pick < 95 {
        (mac(KNOWN + (r >> 8) as u8 % UNKNOWN), Kind::Unknown)
    } else {
        (mac(0), Kind::Malformed)
    };
    let mut f = Vec::with_capacity(200);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&SRC_MAC);
    if kind == Kind::Malformed {
        f.extend_from_slice(&[0x91, 0x00, 0x00]);
        f.push(seq as u8);
        return (f, kind);
    }
    f.extend_from_slice(&ETHERTYPE);
    f.extend_from_slice(MAGIC);
    f.extend_from_slice(&seq.to_be_bytes());
    let len = 60 + (seq as usize * 37) % 141;
    while f.len() < len {
        f.push(f.len() as u8 ^ seq as u8);
    }
    (f, kind)
}

fn routes() -> String {
    let mut s = String::from("# nexthop run e2e test\n");
    for i in 0..KNOWN {
        s.push_str(&format!(
            "{} {}\n",
            mac_text(&mac(i)),
            ACTIONS[usize::from(i % 7)].0
        ));
    }
    s
}

// ---------------------------------------------------------------------------
// The helper: run by the tests inside a namespace

/// Not a test of its own: the namespace tests run this binary with
/// `live_helper --exact --ignored` and `NEXTHOP_LIVE_HELPER` set, inside a
/// namespace, to send (`send`) or capture (`capture`) frames.
#[test]
#[ignore = "helper process of the namespace tests"]
fn live_helper() {
    if let Some((mode, _)) = helper_main() {
        panic!("unknown helper mode {mode}");
    }
}

// ---------------------------------------------------------------------------
// The tests

/// Test frames with what the test expects of each.
type Frames = Vec<(Vec<u8>, Kind)>;

/// The topology of the module docs with the frames `0..total` of
/// [`test_frame`] written for the sender and the capture helper running on
/// `s1,s2,s3`; `None` where namespaces cannot be made. Returns the lab, the
/// frames and the capture child.
fn three_sink_lab(test: &str, total: u32) -> Option<(Lab, Frames, usize)> {
    let mut lab = lab_or_skip(test, &["src", "fwd", "snk"])?;
    lab.veth("src", "src0", "fwd", "fin0");
    for p in 1..=3 {
        lab.veth("fwd", &format!("fo{p}"), "snk", &format!("s{p}"));
    }
    let frames: Frames = (0..total).map(test_frame).collect();
    let mut file = fs::File::create(lab.file("frames.txt")).expect("create frames.txt");
    for (f, _) in &frames {
        writeln!(file, "{}", hex(f)).expect("write frames.txt");
    }
    drop(file);
    let me = std::env::current_exe().expect("current exe");
    let env = helper_env(&lab, "capture", "s1,s2,s3");
    let capture = lab.spawn("snk", "capture", &me, &HELPER_ARGS, &env);
    lab.wait_for("capture.ready", "ready", Duration::from_secs(10));
    Some((lab, frames, capture))
}

/// Send every frame from `src0`, wait for the forwarder (child `fwd`,
/// started with `--packets` the number of frames) to stop, then stop the
/// capture (child `capture`). Returns the forwarder's stdout.
fn send_and_stop(lab: &mut Lab, fwd: usize, capture: usize, total: usize) -> String {
    let me = std::env::current_exe().expect("current exe");
    let env = helper_env(lab, "send", "src0");
    let send = lab.spawn("src", "send", &me, &HELPER_ARGS, &env);
    let (ok, out, err) = lab.wait(send, "send", Duration::from_secs(15));
    assert!(ok, "sender failed:\n{out}\n{err}");
    let sent = lab.read("send.txt");
    assert_eq!(field(&fields(&sent), "sent"), total.to_string(), "{out}");
    assert_eq!(field(&fields(&sent), "failed"), "0", "{out}");

    let (ok, out, err) = lab.wait(fwd, "fwd", Duration::from_secs(16));
    assert!(ok, "nexthop run failed:\n{out}\n{err}");
    sleep(Duration::from_millis(100));
    fs::write(lab.file("capture.stop"), "stop\n").expect("write stop");
    let (ok, cout, cerr) = lab.wait(capture, "capture", Duration::from_secs(10));
    assert!(ok, "capture failed:\n{cout}\n{cerr}");
    eprintln!("nexthop run stdout: {out}");
    eprintln!("sender: {}", sent.trim());
    out
}

/// How often each frame (by index in `frames`) was captured on each sink
/// port; panics on a frame that was never sent or was altered, and when
/// the capture's own ring dropped frames.
fn captured(lab: &Lab, frames: &[(Vec<u8>, Kind)]) -> BTreeMap<(u16, usize), usize> {
    let capture_text = lab.read("capture.txt");
    assert!(
        capture_text.contains("# ring_drops 0"),
        "capture dropped frames"
    );
    let mut seen: BTreeMap<(u16, usize), usize> = BTreeMap::new();
    let by_bytes: BTreeMap<&[u8], usize> = frames
        .iter()
        .enumerate()
        .map(|(i, (f, _))| (&f[..], i))
        .collect();
    for l in capture_text.lines().filter(|l| !l.starts_with('#')) {
        let (iface, h) = l.split_once(' ').expect("capture line");
        let port: u16 = iface
            .strip_prefix('s')
            .and_then(|p| p.parse().ok())
            .expect("sink name");
        let bytes = unhex(h).expect("capture hex");
        let Some(&i) = by_bytes.get(&bytes[..]) else {
            panic!("{iface} got a frame that was never sent (or was altered): {h}");
        };
        *seen.entry((port, i)).or_default() += 1;
    }
    seen
}

/// Check that frame `i` was captured once on each port of `want` and on
/// no other sink port.
fn assert_seen_on(seen: &BTreeMap<(u16, usize), usize>, i: usize, kind: Kind, want: &[u16]) {
    for port in 1..=3u16 {
        let n = seen.get(&(port, i)).copied().unwrap_or(0);
        let expect = usize::from(want.contains(&port));
        assert_eq!(
            n, expect,
            "frame {i} ({kind:?}) seen {n} times on port {port}"
        );
    }
}

/// 4,000 frames (known names of every action kind, unknown names, frames
/// with a cut VLAN tag) from a source namespace through `nexthop run` over
/// AF_PACKET to three sink interfaces: every frame of a known name leaves,
/// byte for byte, on exactly the FIB's ports and once on each; drop,
/// controller, unknown and malformed frames appear on none; the summary
/// counts all.
#[test]
fn run_forwards_each_frame_to_exactly_its_fib_ports() {
    let Some((s, _)) = forward_and_check("fwd", &["--io", "afpacket"]) else {
        return;
    };
    assert_eq!(
        field(&s, "io"),
        "0:afpacket,1:afpacket,2:afpacket,3:afpacket"
    );
}

/// The same 4,000 frames and checks as
/// `run_forwards_each_frame_to_exactly_its_fib_ports`, over AF_XDP
/// (`--io afxdp`): the input veth receives through an XDP program and an
/// AF_XDP socket (native mode, which veth has; copy mode), the outputs send
/// through transmit-only AF_XDP sockets.
#[cfg(feature = "afxdp")]
#[test]
fn run_over_afxdp_forwards_each_frame_to_exactly_its_fib_ports() {
    let Some((s, err)) = forward_and_check("xdp", &["--io", "afxdp"]) else {
        return;
    };
    let io = "0:afxdp-native,1:afxdp-tx,2:afxdp-tx,3:afxdp-tx";
    assert_eq!(field(&s, "io"), io);
    assert!(err.contains(&format!("io={io}")), "{err}");
    assert!(!err.contains("AF_XDP unavailable"), "{err}");
    // Generic (SKB) mode forwards the same way.
    let Some((s, _)) = forward_and_check("xdps", &["--io", "afxdp", "--xdp-mode", "skb"]) else {
        return;
    };
    assert_eq!(
        field(&s, "io"),
        "0:afxdp-skb,1:afxdp-tx,2:afxdp-tx,3:afxdp-tx"
    );
}

/// `--io auto` where no AF_XDP socket can bind (queue 3 of a veth, which
/// has only queue 0): every port says why on stderr and falls back to
/// AF_PACKET, and the frames are forwarded exactly as over AF_PACKET.
/// `--io afxdp` in the same place refuses to start and says why, as it
/// does with more workers than the veth has queues.
#[test]
fn run_io_auto_falls_back_to_afpacket_when_afxdp_cannot_bind() {
    let Some((s, err)) = forward_and_check("auto", &["--io", "auto", "--xdp-queue", "3"]) else {
        return;
    };
    assert_eq!(
        field(&s, "io"),
        "0:afpacket,1:afpacket,2:afpacket,3:afpacket"
    );
    let why = if cfg!(feature = "afxdp") {
        "binding queue 3 of "
    } else {
        "built without the afxdp feature"
    };
    for (port, iface, io) in [
        (0, "fin0", "TPACKET_V3"),
        (1, "fo1", "sendmmsg"),
        (2, "fo2", "sendmmsg"),
        (3, "fo3", "sendmmsg"),
    ] {
        let line = err
            .lines()
            .find(|l| l.contains(&format!("port {port} ({iface}): AF_XDP unavailable (")))
            .unwrap_or_else(|| panic!("no fallback line for port {port}:\n{err}"));
        assert!(line.contains(why), "{line}");
        assert!(
            line.ends_with(&format!("); using AF_PACKET {io}")),
            "{line}"
        );
    }
}

/// `--io afxdp` where AF_XDP cannot bind: an error naming the port, the
/// interface and the reason, before any frame is forwarded.
#[test]
fn run_io_afxdp_refuses_to_start_where_afxdp_cannot_bind() {
    let Some(lab) = lab_or_skip("xref", &["fwd", "peer"]) else {
        return;
    };
    for (i, p) in ["fin0", "fo1", "fo2", "fo3"].iter().enumerate() {
        lab.veth("fwd", p, "peer", &format!("p{i}"));
    }
    let fib = build_fib(&lab, "fib", &routes());
    let fib_arg = fib.display().to_string();
    let cases: [(&[&str], &str); 2] = [
        (
            &["--xdp-queue", "3"],
            "port 0 (fin0): AF_XDP unavailable: binding queue 3 of fin0",
        ),
        (
            &["--workers", "2"],
            "port 0 (fin0): AF_XDP unavailable: binding queue 1 of fin0",
        ),
    ];
    for (extra, want) in cases {
        let out = Command::new("ip")
            .args(["netns", "exec", &lab.ns("fwd"), NEXTHOP, "run", "--fib"])
            .arg(&fib_arg)
            .args(["--io", "afxdp", "--duration", "5"])
            .args(extra)
            .args(PORT_MAP)
            .output()
            .expect("run nexthop");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?} started:\n{err}");
        let want = if cfg!(feature = "afxdp") {
            want
        } else {
            "built without the afxdp feature"
        };
        assert!(err.contains(want), "{extra:?}: {err}");
        assert!(!err.contains("nexthop run: forwarding"), "{err}");
        if extra[0] == "--workers" && cfg!(feature = "afxdp") {
            assert!(err.contains("--workers 2 needs queues 0..=1"), "{err}");
        }
    }
}

/// Send the 4,000 frames of [`test_frame`] through `nexthop run --fib ...
/// EXTRA` in the three-sink topology and check every frame at the sinks
/// and the summary's counts; the summary's fields and the forwarder's
/// stderr, or `None` where namespaces cannot be made.
fn forward_and_check(test: &str, extra: &[&str]) -> Option<(BTreeMap<String, String>, String)> {
    const TOTAL: u32 = 4000;
    let (mut lab, frames, capture) = three_sink_lab(test, TOTAL)?;
    let fib = build_fib(&lab, "fib", &routes());
    let fib_arg = fib.display().to_string();
    let total = TOTAL.to_string();
    let mut args = vec![
        "run",
        "--fib",
        &fib_arg,
        "--packets",
        &total,
        "--duration",
        "15",
    ];
    args.extend_from_slice(extra);
    let fwd = start_run(&mut lab, &args);
    let out = send_and_stop(&mut lab, fwd, capture, frames.len());

    // The summary line.
    let line = out
        .lines()
        .find(|l| l.starts_with("frames_in="))
        .unwrap_or_default();
    let s = fields(line);
    let count = |pred: &dyn Fn(&Kind) -> bool| frames.iter().filter(|(_, k)| pred(k)).count();
    let unknown = count(&|k| *k == Kind::Unknown);
    let malformed = count(&|k| *k == Kind::Malformed);
    let dropped_action = count(&|k| matches!(k, Kind::Known(_, "drop")));
    let punted = count(&|k| matches!(k, Kind::Known(_, "controller")));
    let mut want_out: BTreeMap<u16, usize> = BTreeMap::new();
    for (_, k) in &frames {
        if let Kind::Known(ports, _) = k {
            for p in *ports {
                *want_out.entry(*p).or_default() += 1;
            }
        }
    }
    let out_list: Vec<String> = want_out.iter().map(|(p, n)| format!("{p}:{n}")).collect();
    assert!(unknown > 0 && malformed > 0 && dropped_action > 0 && punted > 0);
    assert_eq!(field(&s, "frames_in"), total, "{line}");
    assert_eq!(field(&s, "in"), format!("0:{TOTAL}"), "{line}");
    assert_eq!(field(&s, "out"), out_list.join(","), "{line}");
    assert_eq!(field(&s, "misses"), unknown.to_string(), "{line}");
    assert_eq!(field(&s, "punted"), punted.to_string(), "{line}");
    assert_eq!(
        field(&s, "drops"),
        format!("action:{dropped_action},miss:{unknown},truncated:{malformed}"),
        "{line}"
    );
    for k in ["tx_failed", "ring_drops", "rx_truncated"] {
        assert_eq!(field(&s, k), "0", "{line}");
    }
    assert_eq!(field(&s, "stopped_by"), "packets", "{line}");

    // Per frame, at the sinks.
    let seen = captured(&lab, &frames);
    for (i, (_, kind)) in frames.iter().enumerate() {
        let want: &[u16] = match kind {
            Kind::Known(ports, _) => ports,
            _ => &[],
        };
        assert_seen_on(&seen, i, *kind, want);
    }
    let captured: usize = seen.values().sum();
    assert_eq!(captured, want_out.values().sum::<usize>());
    let err = lab.read("fwd.err");
    Some((s, err))
}

/// `nexthop run --trivial-port 2` (the benchmark baseline, no FIB): every
/// frame that can be named, whatever its name (known to the other tests'
/// FIB, unknown, any action), leaves on port 2 exactly once, byte for
/// byte, and no frame leaves on ports 1 or 3; frames that cannot be named
/// (a cut VLAN tag) are counted and dropped. Port 2, not 1, so that a
/// pipeline that fell back to the first port would fail too.
#[test]
fn run_trivial_port_sends_every_frame_to_that_port() {
    const TOTAL: u32 = 2000;
    const PORT: u16 = 2;
    let Some((mut lab, frames, capture)) = three_sink_lab("triv", TOTAL) else {
        return;
    };
    let total = TOTAL.to_string();
    let port = PORT.to_string();
    let fwd = start_run(
        &mut lab,
        &[
            "run",
            "--trivial-port",
            &port,
            "--packets",
            &total,
            "--duration",
            "15",
        ],
    );
    let out = send_and_stop(&mut lab, fwd, capture, frames.len());

    let line = out
        .lines()
        .find(|l| l.starts_with("frames_in="))
        .unwrap_or_default();
    let s = fields(line);
    let malformed = frames.iter().filter(|(_, k)| *k == Kind::Malformed).count();
    let named = frames.len() - malformed;
    assert!(malformed > 0 && named > 0);
    assert_eq!(field(&s, "frames_in"), total, "{line}");
    assert_eq!(field(&s, "in"), format!("0:{TOTAL}"), "{line}");
    assert_eq!(field(&s, "out"), format!("{PORT}:{named}"), "{line}");
    assert_eq!(field(&s, "forwarded"), named.to_string(), "{line}");
    assert_eq!(
        field(&s, "drops"),
        format!("truncated:{malformed}"),
        "{line}"
    );
    for k in [
        "punted",
        "misses",
        "tx_failed",
        "ring_drops",
        "rx_truncated",
    ] {
        assert_eq!(field(&s, k), "0", "{line}");
    }

    let seen = captured(&lab, &frames);
    for (i, (_, kind)) in frames.iter().enumerate() {
        let want: &[u16] = if *kind == Kind::Malformed {
            &[]
        } else {
            &[PORT]
        };
        assert_seen_on(&seen, i, *kind, want);
    }
    assert_eq!(seen.values().sum::<usize>(), named);
}

/// SIGTERM stops an idle `nexthop run` cleanly: exit status 0 and the
/// summary line with `stopped_by=signal`.
#[test]
fn run_stops_cleanly_on_sigterm() {
    let Some(mut lab) = lab_or_skip("sig", &["fwd", "peer"]) else {
        return;
    };
    lab.veth("fwd", "fin0", "peer", "p0");
    lab.veth("fwd", "fo1", "peer", "p1");
    let fib = build_fib(&lab, "fib", &routes());
    // Only ports 1..3 are in the FIB; map them all to keep the check happy.
    lab.veth("fwd", "fo2", "peer", "p2");
    lab.veth("fwd", "fo3", "peer", "p3");
    let fib_arg = fib.display().to_string();
    // The metrics endpoint listens on the namespace's own loopback.
    let fwd = start_run(
        &mut lab,
        &["run", "--fib", &fib_arg, "--metrics", "127.0.0.1:19464"],
    );
    // A progress line every second, then the stop.
    lab.wait_for("fwd.err", "frames_in=0", Duration::from_secs(5));
    // `nexthop stats` reads the running forwarder's counters.
    let stats = Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.ns("fwd"),
            NEXTHOP,
            "stats",
            "--addr",
            "127.0.0.1:19464",
            "--json",
        ])
        .output()
        .expect("run nexthop stats");
    let json = String::from_utf8_lossy(&stats.stdout);
    assert!(
        stats.status.success(),
        "nexthop stats failed: {}",
        String::from_utf8_lossy(&stats.stderr)
    );
    assert!(json.contains("\"uptime_seconds\""), "{json}");
    // The forwarder serves the FIB directory's generation, not 0.
    let current = fs::read_link(fib.join("current")).expect("current link");
    let generation: u64 = current
        .to_string_lossy()
        .trim_start_matches("gen-")
        .parse()
        .expect("gen-N");
    let v: serde_json::Value = serde_json::from_str(&json).expect("stats JSON");
    assert_eq!(v["fib_generation"], generation, "{json}");
    let prom = Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.ns("fwd"),
            NEXTHOP,
            "stats",
            "--addr",
            "127.0.0.1:19464",
        ])
        .output()
        .expect("run nexthop stats");
    assert!(prom.status.success());
    let (out, _) = lab.terminate(fwd, "fwd", Duration::from_secs(5));
    let s = fields(out.lines().next().unwrap_or_default());
    assert_eq!(field(&s, "stopped_by"), "signal", "{out}");
    assert_eq!(field(&s, "frames_in"), "0", "{out}");
}

/// Port maps are checked before any socket is opened, with errors that
/// name the argument (no namespace needed).
#[test]
fn run_refuses_bad_port_maps() {
    let dir = TempDir::new().expect("temp dir");
    let routes_path = dir.path().join("routes.txt");
    fs::write(&routes_path, routes()).expect("write routes");
    let fib = dir.path().join("fib");
    let st = Command::new(NEXTHOP)
        .args(["fib", "build", "--key-type", "mac", "--routes"])
        .arg(&routes_path)
        .arg("--out")
        .arg(&fib)
        .status()
        .expect("fib build");
    assert!(st.success());
    let fib = fib.display().to_string();
    let cases: [(&[&str], &str); 6] = [
        (&["--port", "1=a"], "no input"),
        (
            &["--port", "0=a", "--port", "0=b"],
            "port 0 is mapped twice",
        ),
        (
            &["--port", "0=a", "--port", "1=a"],
            "interface a is already port 0",
        ),
        (&["--port", "0=a", "--in", "5"], "port 5 has no interface"),
        (
            &["--port", "0=a", "--port", "1=b"],
            "port(s) 2,3 with no interface",
        ),
        (
            &[
                "--port",
                "0=nh-none0",
                "--port",
                "1=b",
                "--port",
                "2=c",
                "--port",
                "3=d",
            ],
            "no network interface named \"nh-none0\"",
        ),
    ];
    for (args, want) in cases {
        let out = Command::new(NEXTHOP)
            .args(["run", "--fib", &fib])
            .args(args)
            .output()
            .expect("run nexthop");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let out = Command::new(NEXTHOP)
        .args([
            "run",
            "--fib",
            &fib,
            "--port",
            "0=a",
            "--block-size",
            "5000",
        ])
        .output()
        .expect("run nexthop");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ring block size 5000 must be a power of two"),
        "{err}"
    );
}
