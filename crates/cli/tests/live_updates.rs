//! End-to-end tests of `nexthop run --controller`: a forwarder that follows
//! a controller's FIB while frames flow, in network namespaces (the guard,
//! topology helpers and send/capture helper modes are in `common/`).
//!
//! ```text
//!  nh-src-PID-TEST        nh-fwd-PID-TEST                          nh-snk-PID-TEST
//!  src0 ---- veth ---- fin0 (port 0)   nexthop run --controller
//!                      fo1 (port 1) ---- veth ---- s1 \
//!                      fo2 (port 2) ---- veth ---- s2  } capture helper
//!                      fo3 (port 3) ---- veth ---- s3 /
//!                      lo: the controller (127.0.0.1:6653)
//! ```
//!
//! The names of the FIB fall in four groups: STABLE (never changed),
//! CHURNED (flipped between two ports, thousands of times), REMOVED
//! (deleted during the run) and ADDED (absent at first, added during the
//! run, half of them with a port-set action the table did not have, so
//! the action table grows). Every captured frame is checked against what
//! its group allows. Without root or `ip`, the tests print `SKIP` and pass.

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::thread::sleep;
use std::time::{Duration, Instant};

use common::*;
use nexthop_control::{AuthKey, Controller, ControllerConfig};
use nexthop_othello::fib::{parse_changes, Action, ConciseFib};
use nexthop_othello::Config;

const LISTEN: &str = "127.0.0.1:6653";
const KEY: &str = "live-updates-test-secret-0123456789\n";

const STABLE: std::ops::Range<u8> = 0..30;
const CHURNED: std::ops::Range<u8> = 30..90;
const REMOVED: std::ops::Range<u8> = 90..105;
const ADDED: std::ops::Range<u8> = 105..120;
const NAMES: u8 = 120;

/// Changes per controller batch, batches, and the pause between batches.
const BATCH: usize = 50;
const BATCHES: usize = 100;
const BATCH_EVERY: Duration = Duration::from_millis(40);

fn mac(i: u8) -> [u8; 6] {
    [0x02, 0x6e, 0x68, 0x01, 0x00, i]
}

/// The two ports of a churned name (the first is its initial one); the
/// port of every other name with a single port.
fn ports_of(i: u8) -> (u16, u16) {
    (1 + u16::from(i % 3), 1 + u16::from((i + 1) % 3))
}

/// The action an added name gets: a new port set for even names.
fn added_action(i: u8) -> &'static str {
    if i.is_multiple_of(2) {
        "1+2"
    } else {
        "3"
    }
}

/// The FIB state: name index → ports (absent: not in the FIB).
type State = BTreeMap<u8, Vec<u16>>;

fn initial_state() -> State {
    (0..ADDED.start).map(|i| (i, vec![ports_of(i).0])).collect()
}

fn action_ports(a: &str) -> Vec<u16> {
    a.split('+').filter_map(|p| p.parse().ok()).collect()
}

fn ports_action(ports: &[u16]) -> String {
    let v: Vec<String> = ports.iter().map(u16::to_string).collect();
    v.join("+")
}

fn routes_text(state: &State) -> String {
    let mut s = String::new();
    for (i, ports) in state {
        let _ = writeln!(s, "{} {}", mac_text(&mac(*i)), ports_action(ports));
    }
    s
}

/// The churn: `BATCHES` changes files of `BATCH` changes each (flips of
/// churned names; in batches 10 to 24 also one add and one delete), and
/// the state they leave.
fn churn() -> (Vec<String>, State) {
    let mut st = initial_state();
    let mut batches = Vec::new();
    let churned: Vec<u8> = CHURNED.collect();
    for k in 0..BATCHES {
        let mut text = String::new();
        let mut m = 0;
        if (10..10 + REMOVED.len()).contains(&k) {
            let off = (k - 10) as u8;
            let (add, del) = (ADDED.start + off, REMOVED.start + off);
            let _ = writeln!(text, "+ {} {}", mac_text(&mac(add)), added_action(add));
            let _ = writeln!(text, "- {}", mac_text(&mac(del)));
            st.insert(add, action_ports(added_action(add)));
            st.remove(&del);
            m = 2;
        }
        for j in m..BATCH {
            let i = churned[(k * BATCH + j) % churned.len()];
            let (a, b) = ports_of(i);
            let now = st.get(&i).and_then(|p| p.first().copied());
            let next = if now == Some(a) { b } else { a };
            let _ = writeln!(text, "= {} {next}", mac_text(&mac(i)));
            st.insert(i, vec![next]);
        }
        batches.push(text);
    }
    (batches, st)
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

/// What a frame may do at the sinks.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Allowed {
    /// Exactly one copy on each of these ports, none elsewhere (empty:
    /// nowhere).
    Exactly(Vec<u16>),
    /// One copy on exactly one of these two ports.
    OneOf(u16, u16),
    /// Nowhere, or exactly one copy on each of these ports.
    NoneOr(Vec<u16>),
    /// Exactly one copy on each port of one of these port sets (the empty
    /// set: nowhere), never part of a set.
    AnyOf(Vec<Vec<u16>>),
}

/// A wave of frames: every name in turn, `per_name` frames each, sequence
/// numbers from `first`.
fn wave(first: u32, per_name: u32, allowed: impl Fn(u8) -> Allowed) -> Vec<(Vec<u8>, Allowed)> {
    let mut v = Vec::new();
    let mut seq = first;
    for _ in 0..per_name {
        for i in 0..NAMES {
            v.push((frame(i, seq), allowed(i)));
            seq += 1;
        }
    }
    v
}

/// Frames must follow `st` exactly.
fn exact(st: &State) -> impl Fn(u8) -> Allowed + '_ {
    |i| Allowed::Exactly(st.get(&i).cloned().unwrap_or_default())
}

fn write_frames(lab: &Lab, name: &str, frames: &[(Vec<u8>, Allowed)]) {
    let mut text = String::with_capacity(frames.len() * 122);
    for (f, _) in frames {
        text.push_str(&hex(f));
        text.push('\n');
    }
    fs::write(lab.file(name), text).expect("write frames");
}

/// Per-frame outcome counts of a wave.
#[derive(Debug, Default)]
struct Outcome {
    /// Frames seen on their first (CHURNED: initial) port, on the second.
    first: usize,
    second: usize,
    /// Frames of NoneOr names that went out / went nowhere.
    some: usize,
    none: usize,
    /// Frames of AnyOf (removed) names that went nowhere.
    stale_none: usize,
}

/// Check every frame of `frames` against what was captured: `seen` maps
/// (port, frame bytes) to copies; every frame must do what it is allowed.
fn check(
    what: &str,
    frames: &[(Vec<u8>, Allowed)],
    seen: &BTreeMap<(u16, Vec<u8>), usize>,
) -> Outcome {
    let mut o = Outcome::default();
    for (f, allowed) in frames {
        let copies: Vec<usize> = (1..=3u16)
            .map(|p| seen.get(&(p, f.clone())).copied().unwrap_or(0))
            .collect();
        let on = |ports: &[u16]| {
            (1..=3u16).all(|p| copies[usize::from(p - 1)] == usize::from(ports.contains(&p)))
        };
        let ok = match allowed {
            Allowed::Exactly(ports) => on(ports),
            Allowed::OneOf(a, b) => {
                if on(&[*a]) {
                    o.first += 1;
                    true
                } else if on(&[*b]) {
                    o.second += 1;
                    true
                } else {
                    false
                }
            }
            Allowed::NoneOr(ports) => {
                if on(&[]) {
                    o.none += 1;
                    true
                } else if on(ports) {
                    o.some += 1;
                    true
                } else {
                    false
                }
            }
            Allowed::AnyOf(sets) => {
                if on(&[]) {
                    o.stale_none += 1;
                }
                sets.iter().any(|ports| on(ports))
            }
        };
        assert!(
            ok,
            "{what}: frame {} to {} allowed {allowed:?}, seen on ports 1..3: {copies:?}",
            hex(f.get(18..22).unwrap_or_default()),
            hex(f.get(..6).unwrap_or_default())
        );
    }
    o
}

/// Parse `capture.txt` into copies per (port, frame); every frame must be
/// one of `sent`.
fn captured(lab: &Lab, sent: &[&[(Vec<u8>, Allowed)]]) -> BTreeMap<(u16, Vec<u8>), usize> {
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

// ---------------------------------------------------------------------------
// The controller helper

/// Not a test of its own: the namespace tests run this binary with
/// `live_helper --exact --ignored` inside a namespace to send, capture, or
/// (`controller`) serve the initial FIB and apply the churn.
#[test]
#[ignore = "helper process of the namespace tests"]
fn live_helper() {
    match helper_main() {
        Some((mode, dir)) if mode == "controller" => helper_controller(&dir),
        Some((mode, _)) => panic!("unknown helper mode {mode}"),
        None => {}
    }
}

/// Serve the initial FIB on [`LISTEN`]; once `DIR/churn.go` exists apply
/// the churn's batches, one every [`BATCH_EVERY`]; wait until every
/// message was acknowledged; write `DIR/churn.done`; serve until
/// `DIR/controller.stop` exists.
fn helper_controller(dir: &Path) {
    let key = AuthKey::from_file(&dir.join("key")).expect("key");
    let routes: Vec<(usize, [u8; 6], Action)> = initial_state()
        .iter()
        .enumerate()
        .map(|(n, (i, ports))| (n + 1, mac(*i), Action::Port(ports[0])))
        .collect();
    let cfg = Config {
        check_bits: 16,
        ..Config::default()
    };
    let fib = ConciseFib::build(cfg, &routes).expect("build the FIB");
    let listen: SocketAddr = LISTEN.parse().expect("address");
    let c = Controller::start(
        fib,
        key,
        ControllerConfig {
            listen,
            ..ControllerConfig::default()
        },
    )
    .expect("start the controller");
    let (batches, _) = churn();
    let batches: Vec<_> = batches
        .iter()
        .map(|t| parse_changes::<[u8; 6]>(t).expect("changes"))
        .collect();
    fs::write(dir.join("controller.ready"), "ready\n").expect("write ready");
    let go = dir.join("churn.go");
    while !go.exists() {
        sleep(Duration::from_millis(2));
    }
    let start_ms = unix_ms();
    let t = Instant::now();
    let (mut changes, mut writes, mut rebuilds, mut new_actions) = (0, 0, 0, 0);
    for (k, b) in batches.iter().enumerate() {
        let r = c.apply_numbered(b).expect("apply a batch");
        changes += r.changes;
        writes += r.slot_writes;
        rebuilds += r.rebuilds;
        new_actions += r.new_actions;
        let next = BATCH_EVERY * (k as u32 + 1);
        if let Some(d) = next.checked_sub(t.elapsed()) {
            sleep(d);
        }
    }
    let seconds = t.elapsed().as_secs_f64();
    let end_ms = unix_ms();
    // Every change sent (the sessions send from their own queues, so the
    // last deltas may still be queued when the loop ends) and acknowledged.
    let version = c.version();
    let all_acked = |s: &nexthop_control::ControllerStats| {
        s.changes_sent >= version && s.acked >= s.snapshots_sent + s.deltas_sent && s.active > 0
    };
    let wait = Instant::now();
    while !all_acked(&c.stats()) && wait.elapsed() < Duration::from_secs(10) {
        sleep(Duration::from_millis(2));
    }
    let s = c.stats();
    let line = format!(
        "changes={changes} slot_writes={writes} rebuilds={rebuilds} new_actions={new_actions} \
         seconds={seconds:.3} start_ms={start_ms} end_ms={end_ms} snapshots_sent={} \
         deltas_sent={} acks={} rejects={} all_acked={}\n",
        s.snapshots_sent,
        s.deltas_sent,
        s.acks,
        s.rejects,
        all_acked(&s)
    );
    // What the controller's data plane answers for every name now.
    let oracle = c.with_fib(|f| {
        let q = f.othello().export(0);
        let mut text = String::new();
        for i in 0..NAMES {
            let a = match f.lookup_action(&q, &mac(i)) {
                Some(Action::Port(p)) => p.to_string(),
                Some(Action::PortSet(ps)) => ports_action(ps),
                Some(Action::Drop | Action::Controller) | None => "-".to_string(),
            };
            let _ = writeln!(text, "{i} {a}");
        }
        text
    });
    fs::write(dir.join("final.oracle"), oracle).expect("write final.oracle");
    fs::write(dir.join("churn.done"), line).expect("write churn.done");
    let stop = dir.join("controller.stop");
    while !stop.exists() {
        sleep(Duration::from_millis(10));
    }
    c.shutdown();
}

// ---------------------------------------------------------------------------
// Shared set-up

/// Namespaces src, fwd and snk wired as in the module docs, the key file,
/// and a running capture on the sinks.
fn topology(test: &str) -> Option<(Lab, usize)> {
    let mut lab = lab_or_skip(test, &["src", "fwd", "snk"])?;
    lab.veth("src", "src0", "fwd", "fin0");
    for p in 1..=3 {
        lab.veth("fwd", &format!("fo{p}"), "snk", &format!("s{p}"));
    }
    fs::write(lab.file("key"), KEY).expect("write key");
    {
        // Key files must be owner-only (`chmod 600`).
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(lab.file("key"), fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    let me = std::env::current_exe().expect("current exe");
    let env = helper_env(&lab, "capture", "s1,s2,s3");
    let capture = lab.spawn("snk", "capture", &me, &HELPER_ARGS, &env);
    lab.wait_for("capture.ready", "ready", Duration::from_secs(10));
    Some((lab, capture))
}

/// Start `nexthop run --controller` in `fwd`; returns the child index once
/// it forwards.
fn start_forwarder(lab: &mut Lab) -> usize {
    let key = lab.file("key").display().to_string();
    start_run(
        lab,
        &[
            "run",
            "--controller",
            LISTEN,
            "--key-file",
            &key,
            "--duration",
            "25",
            // Blocks handed over after 10 ms, not 1: at this test's ~25k
            // frames/s the 64-block ring then holds ~0.6 s, not ~60 ms, so
            // a forwarder (debug build) descheduled on a loaded machine
            // does not drop; the checks here are about ports, not latency.
            "--block-timeout-ms",
            "10",
        ],
    )
}

/// Send `DIR/name` from `src` and wait for it; the sender's result line.
fn send(lab: &mut Lab, name: &str, pace_us: u32, count: usize) -> String {
    let i = spawn_send(lab, name, pace_us);
    wait_send(lab, i, name, count)
}

/// Start sending `DIR/name` from `src`; the sender writes `DIR/NAME.started`
/// just before its first frame. The sender child's index.
fn spawn_send(lab: &mut Lab, name: &str, pace_us: u32) -> usize {
    let me = std::env::current_exe().expect("current exe");
    let mut env = helper_env(lab, "send", "src0");
    env.push(("NEXTHOP_LIVE_FRAMES", name.to_string()));
    env.push(("NEXTHOP_LIVE_SENT", format!("{name}.sent")));
    env.push(("NEXTHOP_LIVE_STARTED", format!("{name}.started")));
    env.push(("NEXTHOP_LIVE_PACE_US", pace_us.to_string()));
    lab.spawn("src", &format!("send-{name}"), &me, &HELPER_ARGS, &env)
}

/// Wait for the sender `i` of `DIR/name` to send all `count` frames; its
/// result line.
fn wait_send(lab: &mut Lab, i: usize, name: &str, count: usize) -> String {
    let (ok, out, err) = lab.wait(i, &format!("send-{name}"), Duration::from_secs(20));
    assert!(ok, "sender failed:\n{out}\n{err}");
    let line = lab.read(&format!("{name}.sent"));
    let f = fields(&line);
    assert_eq!(field(&f, "sent"), count.to_string(), "{line}");
    assert_eq!(field(&f, "failed"), "0", "{line}");
    line
}

/// SIGTERM the forwarder, stop the capture; the forwarder's summary.
fn finish(lab: &mut Lab, fwd: usize, capture: usize) -> BTreeMap<String, String> {
    sleep(Duration::from_millis(200));
    let (out, _) = lab.terminate(fwd, "fwd", Duration::from_secs(10));
    fs::write(lab.file("capture.stop"), "stop\n").expect("write stop");
    let (ok, cout, cerr) = lab.wait(capture, "capture", Duration::from_secs(10));
    assert!(ok, "capture failed:\n{cout}\n{cerr}");
    eprintln!("nexthop run stdout: {out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("frames_in="))
        .unwrap_or_default();
    fields(line)
}

/// The last progress line of the forwarder (stderr) that has follower
/// counters, as fields.
fn last_progress(lab: &Lab) -> BTreeMap<String, String> {
    let err = lab.read("fwd.err");
    fields(
        err.lines()
            .rev()
            .find(|l| l.contains(" fib_deltas="))
            .unwrap_or_default(),
    )
}

/// Wait until the forwarder's progress shows `snapshots` snapshots and
/// `deltas` deltas applied.
fn wait_follower(lab: &Lab, snapshots: u64, deltas: u64, limit: Duration) {
    let t = Instant::now();
    loop {
        let p = last_progress(lab);
        let n = |k: &str| p.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        if n("fib_snapshots") >= snapshots && n("fib_deltas") >= deltas {
            return;
        }
        assert!(
            t.elapsed() < limit,
            "follower did not reach {snapshots} snapshots / {deltas} deltas in {limit:?}:\n{}",
            lab.read("fwd.err")
        );
        sleep(Duration::from_millis(50));
    }
}

/// `final.oracle` (`INDEX PORTS` lines, `-` for none) as a state.
fn read_oracle(lab: &Lab) -> State {
    let mut st = State::new();
    for l in lab.read("final.oracle").lines() {
        let (i, a) = l.split_once(' ').expect("oracle line");
        let i: u8 = i.parse().expect("oracle index");
        if a != "-" {
            st.insert(i, action_ports(a));
        }
    }
    st
}

fn num(f: &BTreeMap<String, String>, k: &str) -> u128 {
    match field(f, k).parse() {
        Ok(n) => n,
        Err(_) => panic!("{k} is not a number: {f:?}"),
    }
}

// ---------------------------------------------------------------------------
// The tests

/// 5,000 route changes in 100 batches (one every 40 ms, 1,250 changes/s)
/// while about 96,000 frames flow through `nexthop run --controller`:
/// STABLE frames leave exactly on their port; CHURNED frames on exactly
/// one of their two ports, once; ADDED frames on their new ports or
/// nowhere, never in part; REMOVED frames on the ports of one action of
/// the table or nowhere, never in part. Afterwards a wave of 2,400 frames
/// follows the controller's final data plane exactly (which matches the
/// routes for every name in the FIB). The forwarder's summary counts one
/// snapshot, every delta the controller sent, and no rejects.
#[test]
fn followed_fib_changes_under_traffic_never_misdirect_a_frame() {
    const CHURN_PER_NAME: u32 = 800;
    let Some((mut lab, capture)) = topology("upd") else {
        return;
    };
    let me = std::env::current_exe().expect("current exe");
    let env = helper_env(&lab, "controller", "");
    let _controller = lab.spawn("fwd", "controller", &me, &HELPER_ARGS, &env);
    lab.wait_for("controller.ready", "ready", Duration::from_secs(10));
    let fwd = start_forwarder(&mut lab);

    let (_, fin) = churn();
    let init = initial_state();
    let during = |i: u8| {
        if STABLE.contains(&i) {
            Allowed::Exactly(init[&i].clone())
        } else if CHURNED.contains(&i) {
            let (a, b) = ports_of(i);
            Allowed::OneOf(a, b)
        } else if REMOVED.contains(&i) {
            // A removed name reads as a miss right after its removal (its
            // slots get a nonzero check pattern), but later flips of its
            // trees can make it a false hit with probability about 2^-r,
            // resolving to any action of the table (see the docs).
            Allowed::AnyOf(vec![vec![], vec![1], vec![2], vec![3], vec![1, 2]])
        } else {
            Allowed::NoneOr(action_ports(added_action(i)))
        }
    };
    let churn_frames = wave(0, CHURN_PER_NAME, during);
    write_frames(&lab, "churn.txt", &churn_frames);

    // Traffic and churn at once: the churn starts when the first frame
    // goes out (a sender that starts late on a loaded machine would
    // otherwise miss the adds, which come 0.4 to 1 s into the churn, and
    // no added name would be seen before its add).
    let sender = spawn_send(&mut lab, "churn.txt", 1000);
    lab.wait_for("churn.txt.started", "started", Duration::from_secs(20));
    fs::write(lab.file("churn.go"), "go\n").expect("write go");
    let sent = wait_send(&mut lab, sender, "churn.txt", churn_frames.len());
    lab.wait_for("churn.done", "all_acked", Duration::from_secs(20));
    let done = fields(&lab.read("churn.done"));
    eprintln!("sender (churn wave): {}", sent.trim());
    eprintln!("controller: {}", lab.read("churn.done").trim());
    assert_eq!(field(&done, "all_acked"), "true", "{done:?}");
    assert_eq!(field(&done, "changes"), (BATCH * BATCHES).to_string());
    assert_eq!(field(&done, "rejects"), "0");
    let sent_f = fields(&sent);
    let overlap = num(&sent_f, "end_ms")
        .min(num(&done, "end_ms"))
        .saturating_sub(num(&sent_f, "start_ms").max(num(&done, "start_ms")));
    assert!(
        overlap > 1000,
        "traffic and churn overlapped only {overlap} ms"
    );
    let deltas = field(&done, "deltas_sent").to_string();

    // The controller's own data plane after the churn: every name that is
    // in the FIB resolves as the route state says; removed names resolve
    // as that structure resolves them.
    let oracle = read_oracle(&lab);
    for i in (0..NAMES).filter(|i| !REMOVED.contains(i)) {
        assert_eq!(
            oracle.get(&i),
            fin.get(&i),
            "name {i}: controller data plane vs routes"
        );
    }
    let stale = REMOVED.filter(|i| oracle.contains_key(i)).count();
    eprintln!(
        "removed names that still resolve to an action in the controller's data plane: \
         {stale} of {}",
        REMOVED.len()
    );
    let final_frames = wave(1_000_000, 20, exact(&oracle));
    write_frames(&lab, "final.txt", &final_frames);

    // Convergence: the final FIB, exactly.
    send(&mut lab, "final.txt", 200, final_frames.len());
    let s = finish(&mut lab, fwd, capture);
    fs::write(lab.file("controller.stop"), "stop\n").expect("write stop");

    let total = churn_frames.len() + final_frames.len();
    assert_eq!(field(&s, "frames_in"), total.to_string(), "{s:?}");
    for k in ["tx_failed", "ring_drops", "rx_truncated", "fib_rejects"] {
        assert_eq!(field(&s, k), "0", "{k}: {s:?}");
    }
    assert_eq!(field(&s, "fib_snapshots"), "1", "{s:?}");
    assert_eq!(field(&s, "fib_deltas"), deltas, "{s:?}");
    assert_eq!(field(&s, "fib_connects"), "1", "{s:?}");

    let seen = captured(&lab, &[&churn_frames, &final_frames]);
    let o = check("churn wave", &churn_frames, &seen);
    eprintln!(
        "churn wave: {} frames; churned names on their first port {} times, on their \
         second {}; added names forwarded {} times, nowhere {} times; removed names \
         nowhere {} times",
        churn_frames.len(),
        o.first,
        o.second,
        o.some,
        o.none,
        o.stale_none
    );
    // The churn happened while frames flowed: both ports of churned names
    // and both outcomes of added/removed names were seen.
    assert!(o.first > 0 && o.second > 0, "{o:?}");
    assert!(o.some > 0 && o.none > 0, "{o:?}");
    check("final wave", &final_frames, &seen);
    let copies: usize = seen.values().sum();
    eprintln!("captured {copies} copies in all");
}

/// The controller is killed (SIGKILL) after its first changes: the
/// forwarder keeps forwarding with the last table it had (a wave follows
/// it exactly), then a new controller starts on the same address with
/// other changes; the forwarder reconnects, installs the new snapshot and
/// delta, and a second wave follows the new FIB exactly.
#[test]
fn forwarder_keeps_last_fib_without_controller_and_converges_after_restart() {
    let Some((mut lab, capture)) = topology("rst") else {
        return;
    };
    let init = initial_state();
    let fib = build_fib(&lab, "fib", &routes_text(&init));
    let fib_arg = fib.display().to_string();
    let key = lab.file("key").display().to_string();

    // Changes B (first controller) and C (second), both from the initial FIB.
    let mut b_state = init.clone();
    let mut b_text = String::new();
    for i in CHURNED {
        let _ = writeln!(b_text, "= {} {}", mac_text(&mac(i)), ports_of(i).1);
        b_state.insert(i, vec![ports_of(i).1]);
    }
    // No deletes here: a deleted name may still resolve (see the churn
    // test), and this test checks every frame exactly.
    for a in ADDED {
        let _ = writeln!(b_text, "+ {} {}", mac_text(&mac(a)), added_action(a));
        b_state.insert(a, action_ports(added_action(a)));
    }
    let mut c_state = init.clone();
    let mut c_text = String::new();
    for i in CHURNED.filter(|i| i.is_multiple_of(2)) {
        let _ = writeln!(c_text, "= {} {}", mac_text(&mac(i)), ports_of(i).1);
        c_state.insert(i, vec![ports_of(i).1]);
    }
    for a in ADDED.filter(|a| !a.is_multiple_of(2)) {
        let _ = writeln!(c_text, "+ {} 1+3", mac_text(&mac(a)));
        c_state.insert(a, vec![1, 3]);
    }
    // The controller merges a file's changes into deltas of up to 256
    // changes (`nexthop controller --changes-per-delta`, default 256).
    let deltas = |text: &str| (text.lines().count() as u64).div_ceil(256);
    let (b_n, c_n) = (deltas(&b_text), deltas(&c_text));
    fs::write(lab.file("b.txt"), b_text).expect("write b.txt");
    fs::write(lab.file("c.txt"), c_text).expect("write c.txt");
    // The changes wait until the forwarder is connected (the first
    // controller) or past its longest reconnect backoff, 2 s (the second),
    // so each reaches the forwarder as a delta after a snapshot.
    let controller = |lab: &mut Lab, name: &str, changes: &Path, delay: &str| {
        let changes = changes.display().to_string();
        let args = [
            "controller",
            "--fib",
            &fib_arg,
            "--key-file",
            &key,
            "--listen",
            LISTEN,
            "--changes",
            &changes,
            "--changes-delay",
            delay,
        ];
        lab.spawn("fwd", name, Path::new(NEXTHOP), &args, &[])
    };
    let b_path: PathBuf = lab.file("b.txt");
    let first = controller(&mut lab, "ctl1", &b_path, "1.5");
    lab.wait_for("ctl1.err", "listening on", Duration::from_secs(10));
    let fwd = start_forwarder(&mut lab);
    wait_follower(&lab, 1, b_n, Duration::from_secs(10));
    lab.kill(first);

    // No controller: the last table (B) holds.
    let wave_b = wave(0, 10, exact(&b_state));
    write_frames(&lab, "wave-b.txt", &wave_b);
    send(&mut lab, "wave-b.txt", 200, wave_b.len());
    sleep(Duration::from_millis(300));

    // A new controller (initial FIB + C): reconnect, snapshot, delta.
    let c_path: PathBuf = lab.file("c.txt");
    let _second = controller(&mut lab, "ctl2", &c_path, "3");
    let t = Instant::now();
    wait_follower(&lab, 2, b_n + c_n, Duration::from_secs(12));
    eprintln!(
        "reconnected and converged {:.1} s after the restart",
        t.elapsed().as_secs_f64()
    );
    let wave_c = wave(100_000, 10, exact(&c_state));
    write_frames(&lab, "wave-c.txt", &wave_c);
    send(&mut lab, "wave-c.txt", 200, wave_c.len());
    let s = finish(&mut lab, fwd, capture);

    assert_eq!(
        field(&s, "frames_in"),
        (wave_b.len() + wave_c.len()).to_string(),
        "{s:?}"
    );
    for k in ["tx_failed", "ring_drops", "fib_rejects"] {
        assert_eq!(field(&s, k), "0", "{k}: {s:?}");
    }
    assert_eq!(field(&s, "fib_snapshots"), "2", "{s:?}");
    assert_eq!(field(&s, "fib_deltas"), (b_n + c_n).to_string(), "{s:?}");
    assert!(num(&s, "fib_connects") >= 2, "{s:?}");
    let seen = captured(&lab, &[&wave_b, &wave_c]);
    check("without controller (last good FIB)", &wave_b, &seen);
    check("after the restart (new FIB)", &wave_c, &seen);
}
