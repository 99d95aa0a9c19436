//! Hosts of the SDF namespace tests (`tests/sdf.rs`, `tests/sdf_ovs/`,
//! which include this file as `mod hosts` next to `mod common`): host `i`
//! is namespace `hI` with interface `hI`; the tests send frames from a
//! host ([`send`]) and capture what arrives on each one ([`capture`],
//! the `hostcap` helper mode, then [`Captures::finish`]; [`received`], or
//! [`received_timed`] with each frame's kernel receive time). A test file
//! tags its frames with a magic of its own, which the capture looks for,
//! and runs [`helper`] as its `live_helper`. [`stream`] sends frames
//! paced, one at a time, while the test goes on.
// Each test binary uses a different subset.
#![allow(dead_code)]

use std::fs;
use std::path::Path;
use std::thread::sleep;
use std::time::{Duration, UNIX_EPOCH};

use nexthop_dataplane::afpacket::{RingConfig, RxRing};

use crate::common::{helper_env, helper_main, hex, unhex, Lab, HELPER_ARGS};

/// The body of a namespace test binary's `live_helper`: the send helper
/// of `tests/common` and the `hostcap` mode for frames tagged `magic`.
pub fn helper(magic: &[u8]) {
    if let Some((mode, dir)) = helper_main() {
        match mode.as_str() {
            "hostcap" => hostcap(&dir, magic),
            _ => panic!("unknown helper mode {mode}"),
        }
    }
}

/// Documentation MAC (RFC 7042) of host `i`.
pub fn host_mac(i: u8) -> [u8; 6] {
    [0x00, 0x00, 0x5e, 0x00, 0x53, i]
}

/// The `hostcap` helper mode: capture on host interface
/// `NEXTHOP_LIVE_IFACES` until `DIR/IFACE.stop` exists; write
/// `DIR/IFACE.txt`, for each frame that carries `magic` (anywhere) its
/// kernel receive time (Unix nanoseconds, CLOCK_REALTIME) and hex, and
/// that the host did not send itself (an AF_PACKET ring also sees
/// outgoing frames; [`send`] lists them in `DIR/IFACE.sent-frames`), in
/// arrival order; `DIR/IFACE.ready` once the ring is open.
pub fn hostcap(dir: &Path, magic: &[u8]) {
    let iface = std::env::var("NEXTHOP_LIVE_IFACES").expect("NEXTHOP_LIVE_IFACES");
    let cfg = RingConfig {
        block_size: 1 << 16,
        block_count: 64,
        frame_size: 2048,
        block_timeout_ms: 10,
    };
    let mut ring = RxRing::open(&iface, &cfg).expect("open rx ring");
    fs::write(dir.join(format!("{iface}.ready")), "ready\n").expect("write ready");
    let stop = dir.join(format!("{iface}.stop"));
    let mut lines = String::new();
    let mut last_round = false;
    loop {
        while let Some(mut block) = ring.next_block() {
            let mut frames = Vec::new();
            block.timed_frames_into(&mut frames);
            for (t, f) in frames {
                if f.windows(magic.len()).any(|w| w == magic) {
                    let ns = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
                    lines.push_str(&format!("{ns} {}\n", hex(f)));
                }
            }
        }
        if last_round {
            break;
        }
        if stop.exists() {
            // One more pass drains the blocks handed over meanwhile.
            sleep(Duration::from_millis(50));
            last_round = true;
        } else {
            sleep(Duration::from_millis(2));
        }
    }
    let own = fs::read_to_string(dir.join(format!("{iface}.sent-frames"))).unwrap_or_default();
    let kept: String = lines
        .lines()
        .filter(|l| {
            let frame = l.split_once(' ').map_or(*l, |(_, f)| f);
            !own.lines().any(|o| o == frame)
        })
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(dir.join(format!("{iface}.txt")), kept).expect("write capture");
}

/// Send `frames` from host `host` (the `send` helper mode in namespace
/// `hHOST`) and wait for the sender; the frames are listed as the host's
/// own for its capture.
pub fn send(lab: &mut Lab, host: u8, frames: &[Vec<u8>]) {
    let name = format!("send{host}");
    let i = spawn_sender(lab, host, &name, frames, Vec::new());
    let (ok, out, err) = lab.wait(i, &name, Duration::from_secs(15));
    assert!(ok, "sender h{host} failed:\n{out}\n{err}");
    let sent = lab.read(&format!("{name}.sent"));
    assert!(
        sent.starts_with(&format!("sent={} failed=0", frames.len())),
        "{sent}"
    );
}

/// Start the `send` helper `name` on host `host` with `frames` (written to
/// `NAME.frames`, its result in `NAME.sent`) and `extra` environment; the
/// frames are listed as the host's own for its capture.
fn spawn_sender(
    lab: &mut Lab,
    host: u8,
    name: &str,
    frames: &[Vec<u8>],
    extra: Vec<(&'static str, String)>,
) -> usize {
    let text: String = frames.iter().map(|f| hex(f) + "\n").collect();
    fs::write(lab.file(&format!("{name}.frames")), &text).expect("write frames");
    let own = lab.file(&format!("h{host}.sent-frames"));
    let before = fs::read_to_string(&own).unwrap_or_default();
    fs::write(&own, before + &text).expect("record own frames");
    let mut env = helper_env(lab, "send", &format!("h{host}"));
    env.push(("NEXTHOP_LIVE_FRAMES", format!("{name}.frames")));
    env.push(("NEXTHOP_LIVE_SENT", format!("{name}.sent")));
    env.extend(extra);
    let me = std::env::current_exe().expect("current exe");
    lab.spawn(&format!("h{host}"), name, &me, &HELPER_ARGS, &env)
}

/// Captures running on some hosts.
pub struct Captures {
    hosts: Vec<(u8, usize)>,
}

/// Start the `hostcap` helper on each of `hosts` and wait until their
/// rings are open.
pub fn capture(lab: &mut Lab, hosts: &[u8]) -> Captures {
    let me = std::env::current_exe().expect("current exe");
    let mut caps = Vec::with_capacity(hosts.len());
    for &i in hosts {
        let env = helper_env(lab, "hostcap", &format!("h{i}"));
        let c = lab.spawn(
            &format!("h{i}"),
            &format!("cap{i}"),
            &me,
            &HELPER_ARGS,
            &env,
        );
        lab.wait_for(&format!("h{i}.ready"), "ready", Duration::from_secs(10));
        caps.push((i, c));
    }
    Captures { hosts: caps }
}

impl Captures {
    /// Stop the captures and wait for them; then [`received`] reads what
    /// each host got.
    pub fn finish(self, lab: &mut Lab) {
        for &(i, _) in &self.hosts {
            fs::write(lab.file(&format!("h{i}.stop")), "stop\n").expect("stop");
        }
        for (i, c) in self.hosts {
            let name = format!("cap{i}");
            let (ok, o, e) = lab.wait(c, &name, Duration::from_secs(10));
            assert!(ok, "{name} failed:\n{o}\n{e}");
        }
    }
}

/// The frames host `i` received, in order (after [`Captures::finish`]).
pub fn received(lab: &Lab, i: u8) -> Vec<Vec<u8>> {
    received_timed(lab, i).into_iter().map(|(_, f)| f).collect()
}

/// The frames host `i` received, in order, each with the kernel's receive
/// time in Unix nanoseconds (after [`Captures::finish`]).
pub fn received_timed(lab: &Lab, i: u8) -> Vec<(u128, Vec<u8>)> {
    lab.read(&format!("h{i}.txt"))
        .lines()
        .map(|l| {
            let (ns, f) = l.split_once(' ').expect("NS HEX");
            (ns.parse().expect("ns"), unhex(f).expect("hex"))
        })
        .collect()
}

/// Start sending `frames` from host `host`, `repeat` times over, one
/// frame at a time with `pace` between frames (the `send` helper with
/// `NEXTHOP_LIVE_REPEAT`, `NEXTHOP_LIVE_BATCH=1`, `NEXTHOP_LIVE_PACE_US`),
/// and return once the first frame is about to go; [`stream_end`] waits
/// for the sender. The frames are listed as the host's own for its
/// capture.
pub fn stream(lab: &mut Lab, host: u8, frames: &[Vec<u8>], repeat: u64, pace: Duration) -> usize {
    let name = format!("stream{host}");
    let env = vec![
        ("NEXTHOP_LIVE_STARTED", format!("{name}.started")),
        ("NEXTHOP_LIVE_REPEAT", repeat.to_string()),
        ("NEXTHOP_LIVE_BATCH", "1".into()),
        ("NEXTHOP_LIVE_PACE_US", pace.as_micros().to_string()),
    ];
    let i = spawn_sender(lab, host, &name, frames, env);
    lab.wait_for(
        &format!("{name}.started"),
        "started",
        Duration::from_secs(15),
    );
    i
}

/// Wait for the sender [`stream`] started on host `host` (child `i`): the
/// frames it sent and the seconds it took.
pub fn stream_end(lab: &mut Lab, host: u8, i: usize, limit: Duration) -> (u64, f64) {
    let name = format!("stream{host}");
    let (ok, out, err) = lab.wait(i, &name, limit);
    assert!(ok, "sender h{host} failed:\n{out}\n{err}");
    let sent = lab.read(&format!("{name}.sent"));
    let f = crate::common::fields(sent.trim());
    let n = |k: &str| crate::common::field(&f, k).to_owned();
    assert_eq!(n("failed"), "0", "{sent}");
    (
        n("sent").parse().expect("sent="),
        n("seconds").parse().expect("seconds="),
    )
}
