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

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use nexthop_dataplane::afpacket::{RingConfig, RxRing, TxPort};
use tempfile::TempDir;

const NEXTHOP: &str = env!("CARGO_BIN_EXE_nexthop");
/// Source MAC of every test frame: the capture keeps only these.
const SRC_MAC: [u8; 6] = [0x02, 0x6e, 0x68, 0xff, 0xff, 0xfe];
/// IEEE local experimental ethertype, then a magic, then a sequence number.
const ETHERTYPE: [u8; 2] = [0x88, 0xb5];
const MAGIC: &[u8; 4] = b"NHLV";
const HELPER_ENV: &str = "NEXTHOP_LIVE_HELPER";

// ---------------------------------------------------------------------------
// The namespace guard

/// Namespaces and child processes of one test; dropping it kills the
/// children and deletes the namespaces.
struct Lab {
    tag: String,
    namespaces: Vec<String>,
    children: Vec<Child>,
    dir: TempDir,
}

impl Lab {
    /// A lab with namespaces `nh-ROLE-PID-TEST` for each role, or why it
    /// cannot be made here.
    fn new(test: &str, roles: &[&str]) -> Result<Lab, String> {
        let dir = TempDir::new().map_err(|e| format!("temp dir: {e}"))?;
        let mut lab = Lab {
            tag: format!("{}-{test}", std::process::id()),
            namespaces: Vec::new(),
            children: Vec::new(),
            dir,
        };
        for role in roles {
            let ns = lab.ns(role);
            run_ip(&["netns", "add", &ns])?;
            lab.namespaces.push(ns.clone());
            // No IPv6 on the test links: no router solicitations or DAD
            // frames next to the test's frames. Best effort.
            let _ = Command::new("ip")
                .args(["netns", "exec", &ns, "sh", "-c"])
                .arg(
                    "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; \
                     echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6",
                )
                .stderr(Stdio::null())
                .status();
        }
        Ok(lab)
    }

    fn ns(&self, role: &str) -> String {
        format!("nh-{role}-{}", self.tag)
    }

    /// A veth pair: `a` in namespace `ns_a`, `b` in `ns_b`, both up.
    fn veth(&self, ns_a: &str, a: &str, ns_b: &str, b: &str) {
        let (na, nb) = (self.ns(ns_a), self.ns(ns_b));
        must_ip(&[
            "-n", &na, "link", "add", a, "type", "veth", "peer", "name", b, "netns", &nb,
        ]);
        must_ip(&["-n", &na, "link", "set", a, "up"]);
        must_ip(&["-n", &nb, "link", "set", b, "up"]);
    }

    /// Start `cmd ARGS` in namespace `role`, stdout and stderr to files
    /// `NAME.out` / `NAME.err`; returns the child's index.
    fn spawn(
        &mut self,
        role: &str,
        name: &str,
        cmd: &Path,
        args: &[&str],
        env: &[(&str, String)],
    ) -> usize {
        let out = self.file(&format!("{name}.out"));
        let err = self.file(&format!("{name}.err"));
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(role)])
            .arg(cmd)
            .args(args)
            .stdin(Stdio::null())
            .stdout(fs::File::create(&out).expect("create stdout file"))
            .stderr(fs::File::create(&err).expect("create stderr file"));
        for (k, v) in env {
            c.env(k, v);
        }
        let child = c.spawn().expect("spawn ip netns exec");
        self.children.push(child);
        self.children.len() - 1
    }

    /// Wait for child `i` to exit (at most `limit`); its stdout and stderr.
    fn wait(&mut self, i: usize, name: &str, limit: Duration) -> (bool, String, String) {
        let t = Instant::now();
        let status = loop {
            match self.children[i].try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if t.elapsed() < limit => sleep(Duration::from_millis(20)),
                Ok(None) => {
                    let _ = self.children[i].kill();
                    let _ = self.children[i].wait();
                    panic!(
                        "{name} did not exit within {limit:?}; stderr:\n{}",
                        self.read(&format!("{name}.err"))
                    );
                }
                Err(e) => panic!("waiting for {name}: {e}"),
            }
        };
        (
            status.success(),
            self.read(&format!("{name}.out")),
            self.read(&format!("{name}.err")),
        )
    }

    /// Wait until file `name` contains `needle` (at most `limit`).
    fn wait_for(&self, name: &str, needle: &str, limit: Duration) {
        let t = Instant::now();
        while !self.read(name).contains(needle) {
            assert!(
                t.elapsed() < limit,
                "no '{needle}' in {name} after {limit:?}:\n{}",
                self.read(name)
            );
            sleep(Duration::from_millis(20));
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn read(&self, name: &str) -> String {
        fs::read_to_string(self.file(name)).unwrap_or_default()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for c in &mut self.children {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        for ns in &self.namespaces {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn run_ip(args: &[&str]) -> Result<Output, String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn must_ip(args: &[&str]) {
    if let Err(e) = run_ip(args) {
        panic!("{e}");
    }
}

/// The lab, or `None` after printing why namespace tests skip here.
fn lab_or_skip(test: &str, roles: &[&str]) -> Option<Lab> {
    match Lab::new(test, roles) {
        Ok(lab) => Some(lab),
        Err(e) => {
            eprintln!(
                "SKIP {test}: cannot create network namespaces (needs root and iproute2): {e}"
            );
            None
        }
    }
}

// ---------------------------------------------------------------------------
// Frames and the FIB

fn mac(i: u8) -> [u8; 6] {
    [0x02, 0x6e, 0x68, 0x00, 0x00, i]
}

fn mac_text(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
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

fn build_fib(lab: &Lab) -> PathBuf {
    let routes_path = lab.file("routes.txt");
    fs::write(&routes_path, routes()).expect("write routes");
    let fib = lab.file("fib");
    let out = Command::new(NEXTHOP)
        .args([
            "fib",
            "build",
            "--key-type",
            "mac",
            "--check-bits",
            "16",
            "--routes",
        ])
        .arg(&routes_path)
        .arg("--out")
        .arg(&fib)
        .output()
        .expect("run nexthop fib build");
    assert!(
        out.status.success(),
        "fib build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    fib
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `key=value` tokens of a summary line.
fn fields(line: &str) -> BTreeMap<String, String> {
    line.split_whitespace()
        .filter_map(|t| t.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn field<'a>(f: &'a BTreeMap<String, String>, k: &str) -> &'a str {
    match f.get(k) {
        Some(v) => v,
        None => panic!("summary has no {k}: {f:?}"),
    }
}

// ---------------------------------------------------------------------------
// The helper: run by the tests inside a namespace

/// Not a test of its own: the namespace tests run this binary with
/// `live_helper --exact --ignored` and `NEXTHOP_LIVE_HELPER` set, inside a
/// namespace, to send (`send`) or capture (`capture`) frames.
#[test]
#[ignore = "helper process of the namespace tests"]
fn live_helper() {
    let Ok(mode) = std::env::var(HELPER_ENV) else {
        eprintln!("live_helper: {HELPER_ENV} not set; nothing to do");
        return;
    };
    let dir = PathBuf::from(std::env::var("NEXTHOP_LIVE_DIR").expect("NEXTHOP_LIVE_DIR"));
    let ifaces = std::env::var("NEXTHOP_LIVE_IFACES").expect("NEXTHOP_LIVE_IFACES");
    match mode.as_str() {
        "send" => helper_send(&dir, &ifaces),
        "capture" => helper_capture(&dir, &ifaces),
        m => panic!("unknown helper mode {m}"),
    }
}

/// Send the frames of `DIR/frames.txt` (hex, one a line) on `iface`, 32 per
/// batch with a short pause between batches (so no kernel backlog
/// overflows); write `sent=N failed=M seconds=S` to `DIR/send.txt`.
fn helper_send(dir: &Path, iface: &str) {
    let text = fs::read_to_string(dir.join("frames.txt")).expect("read frames.txt");
    let frames: Vec<Vec<u8>> = text.lines().map(|l| unhex(l).expect("hex frame")).collect();
    // For measurements by hand: NEXTHOP_LIVE_REPEAT=N sends the frames N
    // times, NEXTHOP_LIVE_PACE_US=0 sends without pauses.
    let env_num = |k: &str, default: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(default)
    };
    let repeat = env_num("NEXTHOP_LIVE_REPEAT", 1);
    let pace = Duration::from_micros(env_num("NEXTHOP_LIVE_PACE_US", 200));
    let mut tx = TxPort::open(iface).expect("open tx port");
    let (mut sent, mut failed) = (0, 0);
    let t = Instant::now();
    for _ in 0..repeat {
        for batch in frames.chunks(32) {
            let r = tx.send_batch(batch);
            sent += r.sent;
            failed += r.failed;
            if !pace.is_zero() {
                sleep(pace);
            }
        }
    }
    let line = format!(
        "sent={sent} failed={failed} seconds={:.3}\n",
        t.elapsed().as_secs_f64()
    );
    fs::write(dir.join("send.txt"), line).expect("write send.txt");
}

/// Capture on each interface of `ifaces` (comma-separated) until
/// `DIR/capture.stop` exists; write `DIR/capture.txt`: `IFACE HEX` for each
/// frame from [`SRC_MAC`], in arrival order per interface.
fn helper_capture(dir: &Path, ifaces: &str) {
    let cfg = RingConfig {
        block_size: 1 << 16,
        block_count: 64,
        frame_size: 2048,
        block_timeout_ms: 1,
    };
    let mut rings: Vec<RxRing> = ifaces
        .split(',')
        .map(|i| RxRing::open(i, &cfg).expect("open rx ring"))
        .collect();
    fs::write(dir.join("capture.ready"), "ready\n").expect("write ready");
    let mut lines = String::new();
    let stop = dir.join("capture.stop");
    let mut last_round = false;
    loop {
        let mut any = false;
        for ring in rings.iter_mut() {
            let iface = ring.iface().to_string();
            while let Some(mut block) = ring.next_block() {
                any = true;
                let mut frames = Vec::new();
                block.frames_into(&mut frames);
                for f in frames.iter().filter(|f| f.get(6..12) == Some(&SRC_MAC[..])) {
                    lines.push_str(&format!("{iface} {}\n", hex(f)));
                }
            }
        }
        if last_round {
            break;
        }
        if stop.exists() {
            // One more pass after the stop request drains what is left.
            sleep(Duration::from_millis(20));
            last_round = true;
        } else if !any {
            sleep(Duration::from_millis(2));
        }
    }
    let drops: u64 = rings.iter_mut().map(|r| r.drops().unwrap_or(0)).sum();
    lines.push_str(&format!("# ring_drops {drops}\n"));
    fs::write(dir.join("capture.txt"), lines).expect("write capture");
}

fn helper_env(lab: &Lab, mode: &str, ifaces: &str) -> Vec<(&'static str, String)> {
    vec![
        (HELPER_ENV, mode.to_string()),
        ("NEXTHOP_LIVE_DIR", lab.dir.path().display().to_string()),
        ("NEXTHOP_LIVE_IFACES", ifaces.to_string()),
    ]
}

const HELPER_ARGS: [&str; 5] = [
    "live_helper",
    "--exact",
    "--ignored",
    "--nocapture",
    "--test-threads=1",
];

// ---------------------------------------------------------------------------
// The tests

/// 4,000 frames (known names of every action kind, unknown names, frames
/// with a cut VLAN tag) from a source namespace through `nexthop run` to
/// three sink interfaces: every frame of a known name leaves, byte for
/// byte, on exactly the FIB's ports and once on each; drop, controller,
/// unknown and malformed frames appear on none; the summary counts all.
#[test]
fn run_forwards_each_frame_to_exactly_its_fib_ports() {
    const TOTAL: u32 = 4000;
    let Some(mut lab) = lab_or_skip("fwd", &["src", "fwd", "snk"]) else {
        return;
    };
    lab.veth("src", "src0", "fwd", "fin0");
    for p in 1..=3 {
        lab.veth("fwd", &format!("fo{p}"), "snk", &format!("s{p}"));
    }
    let fib = build_fib(&lab);
    let frames: Vec<(Vec<u8>, Kind)> = (0..TOTAL).map(test_frame).collect();
    let mut file = fs::File::create(lab.file("frames.txt")).expect("create frames.txt");
    for (f, _) in &frames {
        writeln!(file, "{}", hex(f)).expect("write frames.txt");
    }
    drop(file);

    let me = std::env::current_exe().expect("current exe");
    let env = helper_env(&lab, "capture", "s1,s2,s3");
    let capture = lab.spawn("snk", "capture", &me, &HELPER_ARGS, &env);
    lab.wait_for("capture.ready", "ready", Duration::from_secs(10));

    let fib_arg = fib.display().to_string();
    let total = TOTAL.to_string();
    let fwd_args = [
        "run",
        "--fib",
        &fib_arg,
        "--port",
        "0=fin0",
        "--port",
        "1=fo1",
        "--port",
        "2=fo2",
        "--port",
        "3=fo3",
        "--packets",
        &total,
        "--duration",
        "15",
    ];
    let fwd = lab.spawn("fwd", "fwd", Path::new(NEXTHOP), &fwd_args, &[]);
    lab.wait_for(
        "fwd.err",
        "nexthop run: forwarding",
        Duration::from_secs(10),
    );

    let env = helper_env(&lab, "send", "src0");
    let send = lab.spawn("src", "send", &me, &HELPER_ARGS, &env);
    let (ok, out, err) = lab.wait(send, "send", Duration::from_secs(15));
    assert!(ok, "sender failed:\n{out}\n{err}");
    let sent = lab.read("send.txt");
    assert_eq!(field(&fields(&sent), "sent"), total, "{out}");
    assert_eq!(field(&fields(&sent), "failed"), "0", "{out}");

    let (ok, out, err) = lab.wait(fwd, "fwd", Duration::from_secs(16));
    assert!(ok, "nexthop run failed:\n{out}\n{err}");
    sleep(Duration::from_millis(100));
    fs::write(lab.file("capture.stop"), "stop\n").expect("write stop");
    let (ok, cout, cerr) = lab.wait(capture, "capture", Duration::from_secs(10));
    assert!(ok, "capture failed:\n{cout}\n{cerr}");
    eprintln!("nexthop run stdout: {out}");
    eprintln!("sender: {}", sent.trim());

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
    for (i, (_, kind)) in frames.iter().enumerate() {
        let want: &[u16] = match kind {
            Kind::Known(ports, _) => ports,
            _ => &[],
        };
        for port in 1..=3u16 {
            let n = seen.get(&(port, i)).copied().unwrap_or(0);
            let expect = usize::from(want.contains(&port));
            assert_eq!(
                n, expect,
                "frame {i} ({kind:?}) seen {n} times on port {port}"
            );
        }
    }
    let captured: usize = seen.values().sum();
    assert_eq!(captured, want_out.values().sum::<usize>());
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
    let fib = build_fib(&lab);
    // Only ports 1..3 are in the FIB; map them all to keep the check happy.
    lab.veth("fwd", "fo2", "peer", "p2");
    lab.veth("fwd", "fo3", "peer", "p3");
    let fib_arg = fib.display().to_string();
    let args = [
        "run", "--fib", &fib_arg, "--port", "0=fin0", "--port", "1=fo1", "--port", "2=fo2",
        "--port", "3=fo3",
    ];
    let fwd = lab.spawn("fwd", "fwd", Path::new(NEXTHOP), &args, &[]);
    lab.wait_for(
        "fwd.err",
        "nexthop run: forwarding",
        Duration::from_secs(10),
    );
    // A progress line every second, then the stop.
    lab.wait_for("fwd.err", "frames_in=0", Duration::from_secs(5));
    let pid = lab.children[fwd].id().to_string();
    let st = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("run kill");
    assert!(st.success());
    let (ok, out, err) = lab.wait(fwd, "fwd", Duration::from_secs(5));
    assert!(ok, "nexthop run failed after SIGTERM:\n{out}\n{err}");
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
