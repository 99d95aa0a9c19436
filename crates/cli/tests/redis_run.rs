//! End to end: `nexthop run --redis URL --fib NAME` forwarding frames in a
//! network namespace with the FIB that `nexthop controller --redis`
//! publishes through a real `redis-server`, including a partition between
//! the forwarder and Redis.
//!
//! ```text
//!  nh-src-PID-TEST     nh-fwd-PID-TEST                      nh-snk-PID-TEST
//!  src0 --- veth --- fin0 (port 0)  nexthop run --redis
//!                    fo1 (port 1) --- veth --- s1 \
//!                    fo2 (port 2) --- veth --- s2  } capture helper
//!                    fo3 (port 3) --- veth --- s3 /
//!                    rf0 10.77.0.2
//!                     |  veth (the only way to Redis: `ip link set rf0 down`
//!                     |  is the partition)
//!  nh-bus-PID-TEST   rb0 10.77.0.1:PORT  redis-server, nexthop controller --redis
//! ```
//!
//! Every controller run is a separate `nexthop controller --redis` process
//! that takes the lease, rebuilds the FIB from Redis, publishes a fresh
//! snapshot, applies its changes file as one stream entry and exits
//! (releasing the lease). Every captured frame is checked against the FIB
//! state it was sent under. Without root or `ip`, the test prints `SKIP`
//! and passes.

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

use common::*;

const KEY: &str = "redis-run-test-secret-0123456789\n";
const REDIS_IP: &str = "10.77.0.1";
const FWD_IP: &str = "10.77.0.2";
const PORT: &str = "16379";
/// Names 0..BASE are in the initial FIB; BASE..NAMES are added by change B.
const BASE: u8 = 60;
const NAMES: u8 = 72;

fn mac(i: u8) -> [u8; 6] {
    [0x02, 0x6e, 0x68, 0x05, 0x00, i]
}

/// Name index → output port (absent: not in the FIB).
type State = BTreeMap<u8, u16>;

fn initial() -> State {
    (0..BASE).map(|i| (i, 1 + u16::from(i % 3))).collect()
}

/// `state` with names in `range` moved `by` ports on (1..=3), as a state
/// and a changes file of `=` lines.
fn moved(state: &State, range: std::ops::Range<u8>, by: u16) -> (State, String) {
    let mut st = state.clone();
    let mut text = String::new();
    for i in range {
        let p = st.get(&i).copied().unwrap_or(1);
        let next = 1 + (p - 1 + by) % 3;
        let _ = writeln!(text, "= {} {next}", mac_text(&mac(i)));
        st.insert(i, next);
    }
    (st, text)
}

/// A 60-byte frame to name `i` with sequence number `seq`.
fn frame(i: u8, seq: u32) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&mac(i));
    f.extend_from_slice(&SRC_MAC);
    f.extend_from_slice(&ETHERTYPE);
    f.extend_from_slice(MAGIC);
    f.extend_from_slice(&seq.to_be_bytes());
    f.push(i);
    while f.len() < 60 {
        f.push(f.len() as u8 ^ seq as u8);
    }
    f
}

/// Where a frame may go: exactly one copy on one of these ports (empty:
/// nowhere), no copy anywhere else.
type Wave = Vec<(Vec<u8>, Vec<Option<u16>>)>;

/// Every name in turn, `per_name` frames each, sequence numbers from
/// `first`; each allowed on its port in any of `states`.
fn wave(first: u32, per_name: u32, states: &[&State]) -> Wave {
    let mut v = Vec::new();
    let mut seq = first;
    for _ in 0..per_name {
        for i in 0..NAMES {
            let allowed = states.iter().map(|s| s.get(&i).copied()).collect();
            v.push((frame(i, seq), allowed));
            seq += 1;
        }
    }
    v
}

fn write_frames(lab: &Lab, name: &str, frames: &Wave) {
    let mut text = String::new();
    for (f, _) in frames {
        text.push_str(&hex(f));
        text.push('\n');
    }
    fs::write(lab.file(name), text).expect("write frames");
}

/// Check every frame of `frames` against the captured copies; how many
/// frames went by each allowed state (index into the states of the wave).
fn check(what: &str, frames: &Wave, seen: &BTreeMap<(u16, Vec<u8>), usize>) -> Vec<usize> {
    let mut by_state = vec![0; frames.first().map_or(0, |f| f.1.len())];
    for (f, allowed) in frames {
        let copies: Vec<usize> = (1..=3u16)
            .map(|p| seen.get(&(p, f.clone())).copied().unwrap_or(0))
            .collect();
        let on = |port: Option<u16>| {
            (1..=3u16).all(|p| copies[usize::from(p - 1)] == usize::from(port == Some(p)))
        };
        let hit = allowed.iter().position(|a| on(*a));
        assert!(
            hit.is_some(),
            "{what}: frame {} to {} allowed on {allowed:?}, seen on ports 1..3: {copies:?}",
            hex(&f[18..22]),
            hex(&f[..6])
        );
        if let Some(k) = hit {
            by_state[k] += 1;
        }
    }
    by_state
}

/// `capture.txt` as copies per (port, frame); every frame must be one sent.
fn captured(lab: &Lab, sent: &[&Wave]) -> BTreeMap<(u16, Vec<u8>), usize> {
    let text = lab.read("capture.txt");
    assert!(text.contains("# ring_drops 0"), "capture dropped frames");
    let known: std::collections::HashSet<&[u8]> = sent
        .iter()
        .flat_map(|w| w.iter().map(|(f, _)| &f[..]))
        .collect();
    let mut seen = BTreeMap::new();
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let (iface, h) = l.split_once(' ').expect("capture line");
        let port: u16 = iface
            .strip_prefix('s')
            .and_then(|p| p.parse().ok())
            .expect("sink name");
        let bytes = unhex(h).expect("capture hex");
        assert!(
            known.contains(&bytes[..]),
            "{iface} got a frame that was never sent (or was altered): {h}"
        );
        *seen.entry((port, bytes)).or_insert(0) += 1;
    }
    seen
}

/// Not a test of its own: the test runs this binary with `live_helper
/// --exact --ignored` inside a namespace to send or capture frames.
#[test]
#[ignore = "helper process of the namespace tests"]
fn live_helper() {
    if let Some((mode, _)) = helper_main() {
        panic!("unknown helper mode {mode}");
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Send `DIR/name` from `src`, wait until all `count` frames went out.
fn send(lab: &mut Lab, name: &str, count: usize) {
    let i = spawn_send(lab, name, 300);
    wait_send(lab, i, name, count);
}

/// Start sending `DIR/name` from `src`, 32 frames every `pace_us`.
fn spawn_send(lab: &mut Lab, name: &str, pace_us: u32) -> usize {
    let me = std::env::current_exe().expect("current exe");
    let mut env = helper_env(lab, "send", "src0");
    env.push(("NEXTHOP_LIVE_FRAMES", name.to_string()));
    env.push(("NEXTHOP_LIVE_SENT", format!("{name}.sent")));
    env.push(("NEXTHOP_LIVE_PACE_US", pace_us.to_string()));
    lab.spawn("src", &format!("send-{name}"), &me, &HELPER_ARGS, &env)
}

fn wait_send(lab: &mut Lab, i: usize, name: &str, count: usize) {
    let (ok, out, err) = lab.wait(i, &format!("send-{name}"), Duration::from_secs(30));
    assert!(ok, "sender failed:\n{out}\n{err}");
    let f = fields(&lab.read(&format!("{name}.sent")));
    assert_eq!(field(&f, "sent"), count.to_string(), "{f:?}");
    assert_eq!(field(&f, "failed"), "0", "{f:?}");
}

/// The forwarder's last progress line's follower counter `k`.
fn progress(lab: &Lab, k: &str) -> u64 {
    let err = lab.read("fwd.err");
    let line = err
        .lines()
        .rev()
        .find(|l| l.contains(" fib_deltas="))
        .unwrap_or_default();
    fields(line)
        .get(k)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Wait until the forwarder shows `snapshots` snapshots and `deltas`
/// stream entries applied.
fn wait_follower(lab: &Lab, snapshots: u64, deltas: u64, limit: Duration) {
    let t = Instant::now();
    while progress(lab, "fib_snapshots") < snapshots || progress(lab, "fib_deltas") < deltas {
        assert!(
            t.elapsed() < limit,
            "follower did not reach {snapshots} snapshots / {deltas} entries in {limit:?}:\n{}",
            lab.read("fwd.err")
        );
        sleep(Duration::from_millis(50));
    }
}

/// The forwarder follows the FIB through Redis (initial state A, change
/// B), keeps B while its link to Redis is down and C is published, and
/// converges to C when the link is back; every frame is checked.
#[test]
fn redis_fed_forwarder_forwards_follows_and_survives_a_partition() {
    let Some(mut lab) = lab_or_skip("rrun", &["src", "fwd", "snk", "bus"]) else {
        return;
    };
    lab.veth("src", "src0", "fwd", "fin0");
    for p in 1..=3 {
        lab.veth("fwd", &format!("fo{p}"), "snk", &format!("s{p}"));
    }
    lab.veth("bus", "rb0", "fwd", "rf0");
    let (bus, fwd_ns) = (lab.ns("bus"), lab.ns("fwd"));
    ip(&[
        "-n",
        &bus,
        "addr",
        "add",
        &format!("{REDIS_IP}/24"),
        "dev",
        "rb0",
    ]);
    ip(&[
        "-n",
        &fwd_ns,
        "addr",
        "add",
        &format!("{FWD_IP}/24"),
        "dev",
        "rf0",
    ]);
    fs::write(lab.file("key"), KEY).expect("write key");
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(lab.file("key"), fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    let key = lab.file("key").display().to_string();
    let rdir = lab.file("redis");
    fs::create_dir(&rdir).expect("redis dir");
    let rdir_arg = rdir.display().to_string();
    let redis_args = [
        "--port",
        PORT,
        "--bind",
        "127.0.0.1",
        REDIS_IP,
        "--save",
        "",
        "--appendonly",
        "no",
        "--protected-mode",
        "no",
        "--daemonize",
        "no",
        "--dir",
        &rdir_arg,
    ];
    lab.spawn("bus", "redis", Path::new("redis-server"), &redis_args, &[]);
    lab.wait_for(
        "redis.out",
        "Ready to accept connections",
        Duration::from_secs(10),
    );

    // The capture on the sinks, from the start to the end.
    let me = std::env::current_exe().expect("current exe");
    let env = helper_env(&lab, "capture", "s1,s2,s3");
    let capture = lab.spawn("snk", "capture", &me, &HELPER_ARGS, &env);
    lab.wait_for("capture.ready", "ready", Duration::from_secs(10));

    // The states: A (initial), B (names 0..40 moved one port on, 12 added),
    // C (names 20..60 moved one more port on).
    let a = initial();
    let mut routes = String::new();
    for (i, p) in &a {
        let _ = writeln!(routes, "{} {p}", mac_text(&mac(*i)));
    }
    let fib = build_fib(&lab, "fib", &routes).display().to_string();
    let (mut b, mut b_text) = moved(&a, 0..40, 1);
    for i in BASE..NAMES {
        let _ = writeln!(b_text, "+ {} {}", mac_text(&mac(i)), 1 + u16::from(i % 3));
        b.insert(i, 1 + u16::from(i % 3));
    }
    let (c, c_text) = moved(&b, 20..BASE, 1);
    fs::write(lab.file("b.txt"), b_text).expect("write b.txt");
    fs::write(lab.file("c.txt"), c_text).expect("write c.txt");

    let local_url = format!("redis://127.0.0.1:{PORT}/");
    // One controller run in the bus namespace: take the lease, publish,
    // apply `changes` (one stream entry), release, exit.
    let controller = |lab: &mut Lab, name: &str, changes: Option<&str>| {
        let path = changes.map(|ch| lab.file(ch).display().to_string());
        let mut args = vec![
            "controller",
            "--redis",
            &local_url,
            "--redis-fib",
            "core",
            "--fib",
            &fib,
            "--key-file",
            &key,
            "--changes-per-delta",
            "65536",
            "--duration",
            "1",
        ];
        if let Some(p) = &path {
            args.extend(["--changes", p.as_str()]);
        }
        let i = lab.spawn("bus", name, Path::new(NEXTHOP), &args, &[]);
        let (ok, out, err) = lab.wait(i, name, Duration::from_secs(20));
        assert!(ok, "{name} failed:\n{out}\n{err}");
        assert!(err.contains("active for FIB core"), "{name}:\n{err}");
        err
    };

    // 1. The initial FIB through Redis; the forwarder loads its snapshot.
    controller(&mut lab, "ctl-a", None);
    let redis_url = format!("redis://{REDIS_IP}:{PORT}/");
    let mut run_args = vec![
        "run",
        "--redis",
        &redis_url,
        "--fib",
        "core",
        "--key-file",
        &key,
        "--duration",
        "60",
        "--block-timeout-ms",
        "10",
    ];
    run_args.extend(PORT_MAP);
    let fwd = lab.spawn("fwd", "fwd", Path::new(NEXTHOP), &run_args, &[]);
    lab.wait_for(
        "fwd.err",
        "nexthop run: forwarding",
        Duration::from_secs(15),
    );
    let wave_a = wave(0, 10, &[&a]);
    write_frames(&lab, "wave-a.txt", &wave_a);
    send(&mut lab, "wave-a.txt", wave_a.len());

    // 2. A route change published reaches the forwarder: the controller's
    // fresh snapshot (a new epoch) and then its entry.
    let log = controller(&mut lab, "ctl-b", Some("b.txt"));
    assert!(log.contains("b.txt: 52 changes published"), "{log}");
    wait_follower(&lab, 2, 1, Duration::from_secs(15));
    let wave_b = wave(100_000, 10, &[&b]);
    write_frames(&lab, "wave-b.txt", &wave_b);
    send(&mut lab, "wave-b.txt", wave_b.len());

    // 3. The partition: the forwarder's only link to Redis goes down; it
    // notices (its blocking read times out, reconnects fail) and keeps B.
    ip(&["-n", &fwd_ns, "link", "set", "rf0", "down"]);
    let t = Instant::now();
    while !lab.read("fwd.err").contains("connect:") {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the forwarder did not notice the partition:\n{}",
            lab.read("fwd.err")
        );
        sleep(Duration::from_millis(50));
    }
    // Routes change meanwhile (Redis is up for the controller).
    let log = controller(&mut lab, "ctl-c", Some("c.txt"));
    assert!(log.contains("c.txt: 40 changes published"), "{log}");
    let wave_p = wave(200_000, 10, &[&b]);
    write_frames(&lab, "wave-p.txt", &wave_p);
    send(&mut lab, "wave-p.txt", wave_p.len());
    assert_eq!(
        progress(&lab, "fib_snapshots"),
        2,
        "a snapshot arrived through a down link"
    );
    assert_eq!(progress(&lab, "fib_deltas"), 1);

    // 4. Link up while frames flow: each frame goes by B or by C, never
    // elsewhere; the forwarder reconnects, resyncs and converges to C.
    // About 4 s of frames (32 every 5 ms): the reconnect (backoff up to
    // 2 s) and the resync fall inside it.
    let wave_u = wave(300_000, 360, &[&b, &c]);
    write_frames(&lab, "wave-u.txt", &wave_u);
    let sender = spawn_send(&mut lab, "wave-u.txt", 5000);
    sleep(Duration::from_millis(300));
    ip(&["-n", &fwd_ns, "link", "set", "rf0", "up"]);
    let up = Instant::now();
    wait_follower(&lab, 3, 2, Duration::from_secs(20));
    eprintln!(
        "converged {:.1} s after the link came up",
        up.elapsed().as_secs_f64()
    );
    wait_send(&mut lab, sender, "wave-u.txt", wave_u.len());
    let wave_c = wave(400_000, 10, &[&c]);
    write_frames(&lab, "wave-c.txt", &wave_c);
    send(&mut lab, "wave-c.txt", wave_c.len());

    // The forwarder's summary, then the frames.
    sleep(Duration::from_millis(200));
    let (out, err) = lab.terminate(fwd, "fwd", Duration::from_secs(10));
    fs::write(lab.file("capture.stop"), "stop\n").expect("write stop");
    let (ok, cout, cerr) = lab.wait(capture, "capture", Duration::from_secs(10));
    assert!(ok, "capture failed:\n{cout}\n{cerr}");
    let s = fields(
        out.lines()
            .find(|l| l.starts_with("frames_in="))
            .unwrap_or_default(),
    );
    eprintln!("nexthop run: {s:?}");
    let total = wave_a.len() + wave_b.len() + wave_p.len() + wave_u.len() + wave_c.len();
    assert_eq!(field(&s, "frames_in"), total.to_string(), "{s:?}");
    for k in ["tx_failed", "ring_drops", "fib_rejects"] {
        assert_eq!(field(&s, k), "0", "{k}: {s:?}");
    }
    assert_eq!(field(&s, "fib_snapshots"), "3", "{s:?}");
    assert_eq!(field(&s, "fib_deltas"), "2", "{s:?}");
    let n = |k: &str| field(&s, k).parse::<u64>().expect("number");
    // A new epoch after each controller run; the partition's reconnect.
    assert!(n("fib_resyncs") >= 2, "{s:?}");
    assert!(n("fib_connects") >= 2, "{s:?}");
    assert!(
        err.contains("keeping the current table, reconnecting"),
        "{err}"
    );

    let seen = captured(&lab, &[&wave_a, &wave_b, &wave_p, &wave_u, &wave_c]);
    check("initial FIB", &wave_a, &seen);
    check("after change B", &wave_b, &seen);
    check("partitioned (last good FIB: B)", &wave_p, &seen);
    let by = check("link up (B, then C)", &wave_u, &seen);
    eprintln!("link-up wave: {} frames by B, {} by C", by[0], by[1]);
    check("converged (C)", &wave_c, &seen);
}
