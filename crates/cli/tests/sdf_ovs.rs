//! End-to-end tests of `nexthop sdf run --app l2switch --backend ovs`:
//! three host namespaces joined by veth to a switch namespace in which a
//! test's own Open vSwitch (userspace datapath, `nexthop-testutil`'s
//! `Ovs` guard) runs a netdev bridge whose controller is nexthop. Frames
//! are sent from the hosts and captured on them; the flows are read with
//! `ovs-ofctl -O OpenFlow13 dump-flows` after every step: the decisions
//! installed with their cookies, a MAC move revoking exactly the flows
//! that depended on the old binding, an OVS restart flushed and
//! reinstalled. Without root, `ip` or Open vSwitch the test says why and
//! passes; namespaces, OVS and processes are removed by their guards, also
//! on failure.

mod common;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

use common::{helper_env, helper_main, hex, lab_or_skip, unhex, Lab, HELPER_ARGS, NEXTHOP};
use nexthop_dataplane::afpacket::{RingConfig, RxRing};
use nexthop_testutil::ovs::Ovs;

const BRIDGE: &str = "nhbr";
const MAGIC: &[u8; 4] = b"NHOF";

/// Not a test of its own: the send helper of `tests/common` and this
/// file's `hostcap` mode, run inside a namespace.
#[test]
#[ignore = "helper process of the namespace tests"]
fn live_helper() {
    if let Some((mode, dir)) = helper_main() {
        match mode.as_str() {
            "hostcap" => helper_hostcap(&dir),
            _ => panic!("unknown helper mode {mode}"),
        }
    }
}

/// Documentation MAC (RFC 7042) of host `i`.
fn host_mac(i: u8) -> [u8; 6] {
    [0x00, 0x00, 0x5e, 0x00, 0x53, i]
}

fn mac_text(m: [u8; 6]) -> String {
    common::mac_text(&m)
}

/// A frame from MAC `src` to MAC `dst` of the local experimental
/// ethertype, with the magic and `seq` in its payload (60 bytes).
fn frame(src: [u8; 6], dst: [u8; 6], seq: u16) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f[14..18].copy_from_slice(MAGIC);
    f[18..20].copy_from_slice(&seq.to_be_bytes());
    f
}

/// Capture on host interface `NEXTHOP_LIVE_IFACES` until `DIR/IFACE.stop`
/// exists; write `DIR/IFACE.txt`: the hex of each frame with [`MAGIC`]
/// that arrived (outgoing frames are left out), in order; `DIR/IFACE.ready`
/// once the ring is open.
fn helper_hostcap(dir: &Path) {
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
    let sent_by_me = dir.join(format!("{iface}.sent-frames"));
    let mut lines = String::new();
    let mut last_round = false;
    loop {
        while let Some(mut block) = ring.next_block() {
            let mut frames = Vec::new();
            block.frames_into(&mut frames);
            for f in frames {
                if f.len() >= 20 && f[14..18] == MAGIC[..] {
                    lines.push_str(&hex(f));
                    lines.push('\n');
                }
            }
        }
        if last_round {
            break;
        }
        if stop.exists() {
            sleep(Duration::from_millis(50));
            last_round = true;
        } else {
            sleep(Duration::from_millis(2));
        }
    }
    // The ring also sees the host's own frames: the test lists them.
    let own = fs::read_to_string(sent_by_me).unwrap_or_default();
    let kept: String = lines
        .lines()
        .filter(|l| !own.lines().any(|o| o == *l))
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(dir.join(format!("{iface}.txt")), kept).expect("write capture");
}

/// Send `frames` from host `host` and wait for the sender.
fn send_from(lab: &mut Lab, host: u8, frames: &[Vec<u8>]) {
    let name = format!("send{host}");
    let text: String = frames.iter().map(|f| hex(f) + "\n").collect();
    fs::write(lab.file(&format!("{name}.frames")), &text).expect("write frames");
    let own = lab.file(&format!("h{host}.sent-frames"));
    let before = fs::read_to_string(&own).unwrap_or_default();
    fs::write(&own, before + &text).expect("record own frames");
    let mut env = helper_env(lab, "send", &format!("h{host}"));
    env.push(("NEXTHOP_LIVE_FRAMES", format!("{name}.frames")));
    env.push(("NEXTHOP_LIVE_SENT", format!("{name}.sent")));
    let me = std::env::current_exe().expect("current exe");
    let i = lab.spawn(&format!("h{host}"), &name, &me, &HELPER_ARGS, &env);
    let (ok, out, err) = lab.wait(i, &name, Duration::from_secs(15));
    assert!(ok, "sender h{host} failed:\n{out}\n{err}");
    let sent = lab.read(&format!("{name}.sent"));
    assert!(
        sent.starts_with(&format!("sent={} failed=0", frames.len())),
        "{sent}"
    );
}

/// The bridge's flows (statistics removed), once `done` holds for them
/// (at most 10 s; then the last ones, for the assertion to show). A
/// failing `ovs-ofctl` (the switch restarting) is retried.
fn flows_when(ovs: &Ovs, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let t = Instant::now();
    loop {
        let f = ovs.flows(BRIDGE);
        let late = t.elapsed() > Duration::from_secs(10);
        match f {
            Ok(f) if done(&f) || late => return f,
            Err(e) if late => panic!("dump-flows: {e}\n{}", ovs.log()),
            _ => sleep(Duration::from_millis(20)),
        }
    }
}

/// The flow from `src` to `dst` entering on `in_port`, if installed.
fn flow(flows: &[String], in_port: u16, src: [u8; 6], dst: [u8; 6]) -> Option<&str> {
    let needles = [
        format!("in_port={in_port},"),
        format!("dl_src={},", mac_text(src)),
        format!("dl_dst={},", mac_text(dst)),
    ];
    flows
        .iter()
        .find(|f| needles.iter().all(|n| f.contains(n.as_str())))
        .map(String::as_str)
}

/// The cookie of a dump-flows line.
fn cookie(line: &str) -> u64 {
    let hex = line
        .split(',')
        .find_map(|f| f.strip_prefix("cookie=0x"))
        .unwrap_or_else(|| panic!("no cookie in {line}"));
    u64::from_str_radix(hex, 16).expect("hex cookie")
}

/// The actions of a dump-flows line.
fn actions(line: &str) -> &str {
    line.split_once("actions=").map_or("", |(_, a)| a)
}

const TABLE_MISS: &str = "priority=0,actions=CONTROLLER:65535";

#[test]
fn l2switch_on_open_vswitch_installs_revokes_and_survives_a_restart() {
    if let Some(why) = Ovs::missing() {
        eprintln!("SKIP sdf_ovs: {why}");
        return;
    }
    let Some(mut lab) = lab_or_skip("sdfovs", &["h1", "h2", "h3", "sw"]) else {
        return;
    };
    for i in 1..=3 {
        lab.veth(&format!("h{i}"), &format!("h{i}"), "sw", &format!("op{i}"));
    }
    let mut ovs = Ovs::start(Some(&lab.ns("sw"))).expect("start Open vSwitch");
    ovs.add_bridge(BRIDGE).expect("add bridge");
    for i in 1..=3u16 {
        ovs.add_port(BRIDGE, &format!("op{i}"), i)
            .expect("add port");
    }
    let me = std::env::current_exe().expect("current exe");
    let mut caps = Vec::new();
    for i in 1..=3u8 {
        let env = helper_env(&lab, "hostcap", &format!("h{i}"));
        caps.push(lab.spawn(
            &format!("h{i}"),
            &format!("cap{i}"),
            &me,
            &HELPER_ARGS,
            &env,
        ));
        lab.wait_for(&format!("h{i}.ready"), "ready", Duration::from_secs(10));
    }
    let sw = lab.spawn(
        "sw",
        "sw",
        Path::new(NEXTHOP),
        &[
            "sdf",
            "run",
            "--app",
            "l2switch",
            "--backend",
            "ovs",
            "--ovs-listen",
            "127.0.0.1:0",
            "--ovs-bridge",
            BRIDGE,
            "--ovs-ports",
            "1,2,3",
            "--ovs-idle-timeout",
            "60",
            "--duration",
            "90",
            "--json",
        ],
        &ovs.env(),
    );
    lab.wait_for("sw.err", "OpenFlow listening on", Duration::from_secs(10));
    // Connected and flushed: only the table-miss flow.
    let f = flows_when(&ovs, |f| f.iter().any(|l| l.contains(TABLE_MISS)));
    assert_eq!(f.len(), 1, "{f:?}\n{}", ovs.log());

    let (h1, h2, h3) = (host_mac(1), host_mac(2), host_mac(3));
    // 1. h1 → h2, unknown: flooded to h2 and h3; the flood is a flow.
    let first = frame(h1, h2, 0);
    send_from(&mut lab, 1, std::slice::from_ref(&first));
    let f = flows_when(&ovs, |f| flow(f, 1, h1, h2).is_some());
    let flood = flow(&f, 1, h1, h2).expect("flood flow").to_owned();
    assert_eq!(actions(&flood), "output:2,output:3", "{flood}");
    assert!(flood.contains("send_flow_rem") && flood.contains("idle_timeout=60"));
    // Two state ids (h1's binding, h2's "unknown"): two tags.
    assert_ne!(cookie(&flood) >> 32, cookie(&flood) & 0xffff_ffff);

    // 2. h2 → h1: learning h2 revokes the flood to it; h1 only.
    let reply = frame(h2, h1, 1);
    send_from(&mut lab, 2, std::slice::from_ref(&reply));
    let f = flows_when(&ovs, |f| {
        flow(f, 2, h2, h1).is_some() && flow(f, 1, h1, h2).is_none()
    });
    assert_eq!(f.len(), 2, "table-miss and h2 -> h1 only: {f:?}");
    let back = flow(&f, 2, h2, h1).expect("h2 -> h1").to_owned();
    assert_eq!(actions(&back), "output:1");

    // 3. h1 → h2 again: one frame installs the flow, then OVS forwards a
    // burst of 20 by itself.
    let one = frame(h1, h2, 2);
    send_from(&mut lab, 1, std::slice::from_ref(&one));
    let f = flows_when(&ovs, |f| flow(f, 1, h1, h2).is_some());
    let fwd = flow(&f, 1, h1, h2).expect("h1 -> h2").to_owned();
    assert_eq!(actions(&fwd), "output:2");
    // Both flows depend on h1's binding: they share its tag.
    assert_eq!(cookie(&back) & 0xffff_ffff, cookie(&fwd) >> 32);
    let burst: Vec<Vec<u8>> = (3..23).map(|s| frame(h1, h2, s)).collect();
    send_from(&mut lab, 1, &burst);
    let packets = |line_pred: &dyn Fn(&str) -> bool| -> u64 {
        let out = ovs.ofctl(&["dump-flows", BRIDGE]).expect("dump-flows");
        out.lines()
            .filter(|l| line_pred(l))
            .find_map(|l| {
                l.split([',', ' '])
                    .find_map(|x| x.strip_prefix("n_packets="))
                    .and_then(|n| n.parse().ok())
            })
            .unwrap_or(0)
    };
    let h1h2 = |l: &str| {
        l.contains("in_port=1,")
            && l.contains(&format!("dl_dst={}", mac_text(h2)))
            && l.contains(&format!("dl_src={}", mac_text(h1)))
    };
    let t = Instant::now();
    while packets(&h1h2) < 20 && t.elapsed() < Duration::from_secs(10) {
        sleep(Duration::from_millis(20));
    }
    assert_eq!(packets(&h1h2), 20, "the burst went through the flow");

    // 4. h3 broadcasts: to h1 and h2.
    let bcast = frame(h3, [0xff; 6], 23);
    send_from(&mut lab, 3, std::slice::from_ref(&bcast));
    let f = flows_when(&ovs, |f| flow(f, 3, h3, [0xff; 6]).is_some());
    let bflow = flow(&f, 3, h3, [0xff; 6])
        .expect("broadcast flow")
        .to_owned();
    assert_eq!(actions(&bflow), "output:1,output:2");

    // 5. h1's MAC moves to h3's port: exactly the two flows that used
    // h1's old binding go; the broadcast flow stays.
    let moved = frame(h1, h2, 24);
    send_from(&mut lab, 3, std::slice::from_ref(&moved));
    let f = flows_when(&ovs, |f| flow(f, 3, h1, h2).is_some());
    assert!(flow(&f, 2, h2, h1).is_none(), "{f:?}");
    assert!(flow(&f, 1, h1, h2).is_none(), "{f:?}");
    assert_eq!(flow(&f, 3, h3, [0xff; 6]), Some(bflow.as_str()), "{f:?}");
    assert_eq!(actions(flow(&f, 3, h1, h2).unwrap()), "output:2");
    assert_eq!(f.len(), 3, "{f:?}");

    // 6. OVS restarts: nexthop's session drops, OVS reconnects, the
    // backend flushes: the table-miss flow only.
    ovs.kill_vswitchd();
    ovs.start_vswitchd().expect("restart ovs-vswitchd");
    let f = flows_when(&ovs, |f| f.len() == 1 && f[0].contains(TABLE_MISS));
    assert_eq!(f.len(), 1, "after the restart: {f:?}\n{}", ovs.log());
    // The app's state survived: h2 → h1 now goes to h3's port.
    let after = frame(h2, h1, 25);
    send_from(&mut lab, 2, std::slice::from_ref(&after));
    let f = flows_when(&ovs, |f| flow(f, 2, h2, h1).is_some());
    assert_eq!(actions(flow(&f, 2, h2, h1).expect("h2 -> h1")), "output:3");

    // Stop nexthop (SIGTERM) and the captures.
    let pid = lab.children[sw].id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let (ok, out, err) = lab.wait(sw, "sw", Duration::from_secs(10));
    assert!(ok, "nexthop sdf run failed:\n{out}\n{err}");
    for i in 1..=3u8 {
        fs::write(lab.file(&format!("h{i}.stop")), "stop\n").expect("stop");
    }
    for (i, c) in caps.into_iter().enumerate() {
        let name = format!("cap{}", i + 1);
        let (ok, o, e) = lab.wait(c, &name, Duration::from_secs(10));
        assert!(ok, "{name} failed:\n{o}\n{e}");
    }

    // What each host received, in order.
    let got = |i: u8| -> Vec<Vec<u8>> {
        lab.read(&format!("h{i}.txt"))
            .lines()
            .map(|l| unhex(l).expect("hex"))
            .collect()
    };
    let mut want_h2 = vec![first.clone(), one];
    want_h2.extend(burst.iter().cloned());
    want_h2.push(bcast.clone());
    want_h2.push(moved);
    assert_eq!(got(1), vec![reply, bcast], "h1");
    assert_eq!(got(2), want_h2, "h2");
    assert_eq!(got(3), vec![first, after], "h3");

    // The summary.
    let s: serde_json::Value = serde_json::from_str(out.trim()).expect("summary JSON");
    eprintln!("nexthop sdf run --backend ovs: {s}");
    let n = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("no {k} in {s}"));
    assert_eq!(s["backend"], "ovs");
    assert_eq!(n("connections"), 2, "{s}");
    assert_eq!(n("reconnects"), 1, "{s}");
    // Flows in the view when the switch came back: flood-from-h3 and
    // h1 (moved) -> h2.
    assert_eq!(n("flushed_flows"), 2, "{s}");
    // One packet-in per decision: the burst never reached nexthop.
    assert_eq!(n("packet_ins"), 6, "{s}");
    assert_eq!(n("flows_installed"), 6, "{s}");
    assert_eq!(n("packet_outs"), 6, "{s}");
    assert_eq!(n("errors"), 0, "{s}");
    assert_eq!(n("not_installed"), 0, "{s}");
    assert_eq!(n("dropped_waiting"), 0, "{s}");
    // h2's "unknown" binding (step 2), h1's old binding (step 5).
    assert_eq!(n("revoked_states"), 2, "{s}");
    assert_eq!(n("revoked_flows"), 3, "{s}");
}

#[test]
fn the_ovs_backend_needs_its_ports_and_refuses_port_zero() {
    for (ports, msg) in [
        (None, "--backend ovs needs --ovs-ports"),
        (Some("0,1"), "0 is not an OpenFlow port number"),
    ] {
        let mut c = Command::new(NEXTHOP);
        c.args([
            "sdf",
            "run",
            "--app",
            "l2switch",
            "--backend",
            "ovs",
            "--ovs-listen",
            "127.0.0.1:0",
        ]);
        if let Some(p) = ports {
            c.args(["--ovs-ports", p]);
        }
        let out = c.output().expect("run nexthop");
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(msg), "{err}");
    }
}
