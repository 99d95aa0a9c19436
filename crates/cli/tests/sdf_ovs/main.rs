//! End-to-end tests of `nexthop sdf run --backend ovs` with the built-in
//! apps: host namespaces joined by veth to a switch namespace in which a
//! test's own Open vSwitch (userspace datapath, `nexthop-testutil`'s
//! `Ovs` guard) runs a netdev bridge whose controller is nexthop. Frames
//! are sent from the hosts and captured on them (`tests/common/hosts.rs`);
//! the flows are read with `ovs-ofctl -O OpenFlow13 dump-flows` after
//! every step. The l2switch: the decisions installed with their cookies, a
//! MAC move revoking exactly the flows that depended on the old binding,
//! an OVS restart flushed and reinstalled. The router: two subnets, the
//! hosts' ARP and datagrams through it, frames delivered with the next
//! hop's MAC and the TTL decremented by OVS, a route change revoking
//! exactly its flows; and the same router over a pcap file on nexthop's
//! own backend. The SEATTLE app (Python) on two bridges joined by the
//! patch ports its tunnels become: a DHT miss cached as a drop flow until
//! the owner's answer revokes it, then frames across one tunnel; the same
//! on two OVS instances in two namespaces over a VXLAN or GRE tunnel. A
//! route change under a steady stream, captured with kernel timestamps:
//! the old decision's frames all arrive before the new one's (and the
//! ignored measurement of `removed()` to the last of them). Without
//! root, `ip`, Open vSwitch (or, for SEATTLE, the nexthop Python package) a test says why and
//! passes; namespaces, OVS and processes are removed by their guards, also
//! on failure.

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/hosts.rs"]
mod hosts;
#[path = "../common/pcapio.rs"]
mod pcapio;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

use common::{hex, lab_or_skip, Lab, NEXTHOP};
use hosts::host_mac;
use nexthop_testutil::ovs::Ovs;

const BRIDGE: &str = "nhbr";
const MAGIC: &[u8; 4] = b"NHOF";

/// Not a test of its own: the send helper of `tests/common` and this
/// file's `hostcap` mode, run inside a namespace.
#[test]
#[ignore = "helper process of the namespace tests"]
fn live_helper() {
    hosts::helper(MAGIC);
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

/// The bridge's flows (statistics removed), once `done` holds for them
/// (at most 10 s; then the last ones, for the assertion to show). A
/// failing `ovs-ofctl` (the switch restarting) is retried.
fn flows_when(ovs: &Ovs, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    flows_on(ovs, BRIDGE, done)
}

/// [`flows_when`] on bridge `bridge`.
fn flows_on(ovs: &Ovs, bridge: &str, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let t = Instant::now();
    loop {
        let f = ovs.flows(bridge);
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

/// The packet count of the first flow whose dump-flows line `pred`
/// accepts (0 if none).
fn packets(ovs: &Ovs, pred: &dyn Fn(&str) -> bool) -> u64 {
    let out = ovs.ofctl(&["dump-flows", BRIDGE]).expect("dump-flows");
    out.lines()
        .filter(|l| pred(l))
        .find_map(|l| {
            l.split([',', ' '])
                .find_map(|x| x.strip_prefix("n_packets="))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// A lab for `test`: hosts `h1..=hN`, each joined by veth `hI` to `opI`
/// in namespace `sw`, where a fresh Open vSwitch runs with `bridges`
/// (name, [(host I, its OpenFlow port)]). None (said why) without root,
/// `ip` or Open vSwitch.
fn ovs_lab(test: &str, hosts: u8, bridges: &[(&str, &[(u8, u16)])]) -> Option<(Lab, Ovs)> {
    if let Some(why) = Ovs::missing() {
        eprintln!("SKIP sdf_ovs: {why}");
        return None;
    }
    let mut roles: Vec<String> = (1..=hosts).map(|i| format!("h{i}")).collect();
    roles.push("sw".into());
    let roles: Vec<&str> = roles.iter().map(String::as_str).collect();
    let lab = lab_or_skip(test, &roles)?;
    for i in 1..=hosts {
        lab.veth(&format!("h{i}"), &format!("h{i}"), "sw", &format!("op{i}"));
    }
    let ovs = Ovs::start(Some(&lab.ns("sw"))).expect("start Open vSwitch");
    for (br, ports) in bridges {
        ovs.add_bridge(br).expect("add bridge");
        for &(i, ofport) in *ports {
            ovs.add_port(br, &format!("op{i}"), ofport)
                .expect("add port");
        }
    }
    Some((lab, ovs))
}

/// Start `nexthop sdf run ARGS --backend ovs` on [`BRIDGE`] with OpenFlow
/// ports `ports` (`--duration 90 --json`, idle timeout 60 s) in namespace
/// `sw` as child `sw`, and wait until it has flushed the bridge.
fn start_backend(lab: &mut Lab, ovs: &Ovs, args: &[&str], ports: &str) -> usize {
    let mut all: Vec<&str> = vec!["sdf", "run"];
    all.extend_from_slice(args);
    all.extend([
        "--backend",
        "ovs",
        "--ovs-listen",
        "127.0.0.1:0",
        "--ovs-bridge",
        BRIDGE,
        "--ovs-ports",
        ports,
        "--ovs-idle-timeout",
        "60",
        "--duration",
        "90",
        "--json",
    ]);
    let sw = lab.spawn("sw", "sw", Path::new(NEXTHOP), &all, &ovs.env());
    lab.wait_for("sw.err", "OpenFlow listening on", Duration::from_secs(10));
    // Connected and flushed: only the table-miss flow.
    let f = flows_when(ovs, |f| f.iter().any(|l| l.contains(TABLE_MISS)));
    assert_eq!(f.len(), 1, "{f:?}\n{}", ovs.log());
    sw
}

/// Stop child `sw` (SIGTERM) and wait for it: its stdout and stderr.
fn stop_backend(lab: &mut Lab, sw: usize) -> (String, String) {
    lab.terminate(sw, "sw", Duration::from_secs(10))
}

const TABLE_MISS: &str = "priority=0,actions=CONTROLLER:65535";

#[test]
fn l2switch_on_open_vswitch_installs_revokes_and_survives_a_restart() {
    let ports: [(u8, u16); 3] = [(1, 1), (2, 2), (3, 3)];
    let Some((mut lab, mut ovs)) = ovs_lab("sdfovs", 3, &[(BRIDGE, &ports)]) else {
        return;
    };
    let caps = hosts::capture(&mut lab, &[1, 2, 3]);
    let sw = start_backend(&mut lab, &ovs, &["--app", "l2switch"], "1,2,3");

    let (h1, h2, h3) = (host_mac(1), host_mac(2), host_mac(3));
    // 1. h1 → h2, unknown: flooded to h2 and h3; the flood is a flow.
    let first = frame(h1, h2, 0);
    hosts::send(&mut lab, 1, std::slice::from_ref(&first));
    let f = flows_when(&ovs, |f| flow(f, 1, h1, h2).is_some());
    let flood = flow(&f, 1, h1, h2).expect("flood flow").to_owned();
    assert_eq!(actions(&flood), "output:2,output:3", "{flood}");
    assert!(flood.contains("send_flow_rem") && flood.contains("idle_timeout=60"));
    // Two state ids (h1's binding, h2's "unknown"): two tags.
    assert_ne!(cookie(&flood) >> 32, cookie(&flood) & 0xffff_ffff);

    // 2. h2 → h1: learning h2 revokes the flood to it; h1 only.
    let reply = frame(h2, h1, 1);
    hosts::send(&mut lab, 2, std::slice::from_ref(&reply));
    let f = flows_when(&ovs, |f| {
        flow(f, 2, h2, h1).is_some() && flow(f, 1, h1, h2).is_none()
    });
    assert_eq!(f.len(), 2, "table-miss and h2 -> h1 only: {f:?}");
    let back = flow(&f, 2, h2, h1).expect("h2 -> h1").to_owned();
    assert_eq!(actions(&back), "output:1");

    // 3. h1 → h2 again: one frame installs the flow, then OVS forwards a
    // burst of 20 by itself.
    let one = frame(h1, h2, 2);
    hosts::send(&mut lab, 1, std::slice::from_ref(&one));
    let f = flows_when(&ovs, |f| flow(f, 1, h1, h2).is_some());
    let fwd = flow(&f, 1, h1, h2).expect("h1 -> h2").to_owned();
    assert_eq!(actions(&fwd), "output:2");
    // Both flows depend on h1's binding: they share its tag.
    assert_eq!(cookie(&back) & 0xffff_ffff, cookie(&fwd) >> 32);
    let burst: Vec<Vec<u8>> = (3..23).map(|s| frame(h1, h2, s)).collect();
    hosts::send(&mut lab, 1, &burst);
    let packets = |pred: &dyn Fn(&str) -> bool| packets(&ovs, pred);
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
    hosts::send(&mut lab, 3, std::slice::from_ref(&bcast));
    let f = flows_when(&ovs, |f| flow(f, 3, h3, [0xff; 6]).is_some());
    let bflow = flow(&f, 3, h3, [0xff; 6])
        .expect("broadcast flow")
        .to_owned();
    assert_eq!(actions(&bflow), "output:1,output:2");

    // 5. h1's MAC moves to h3's port: exactly the two flows that used
    // h1's old binding go; the broadcast flow stays.
    let moved = frame(h1, h2, 24);
    hosts::send(&mut lab, 3, std::slice::from_ref(&moved));
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
    hosts::send(&mut lab, 2, std::slice::from_ref(&after));
    let f = flows_when(&ovs, |f| flow(f, 2, h2, h1).is_some());
    assert_eq!(actions(flow(&f, 2, h2, h1).expect("h2 -> h1")), "output:3");

    // Stop nexthop (SIGTERM) and the captures.
    let (out, _) = stop_backend(&mut lab, sw);
    caps.finish(&mut lab);

    // What each host received, in order.
    let got = |i: u8| hosts::received(&lab, i);
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

#[test]
fn ovs_tunnels_need_a_bridge_and_python_apps_need_the_package() {
    let run = |args: &[&str], py: &str| {
        let out = Command::new(NEXTHOP)
            .args([
                "sdf",
                "run",
                "--backend",
                "ovs",
                "--ovs-listen",
                "127.0.0.1:0",
            ])
            .args(["--ovs-ports", "1"])
            .args(args)
            .env("NEXTHOP_PYTHON", py)
            .output()
            .expect("run nexthop");
        assert!(!out.status.success(), "{args:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run(
        &["--app", "l2switch", "--ovs-tunnel", "1=t1,patch,peer=t0"],
        "false",
    );
    assert!(err.contains("--ovs-tunnel needs --ovs-bridge"), "{err}");
    let err = run(&["--app", "l2switch", "--ovs-tunnel", "1=t1"], "false");
    assert!(err.contains("expected NAME,TYPE"), "{err}");
    let err = run(&["--app", "seattle.py"], "false");
    assert!(
        err.contains("Python apps need the nexthop Python package"),
        "{err}"
    );
    let err = run(&["--app", "seattle.py", "--ovs-log-revocations"], "false");
    assert!(
        err.contains("--ovs-log-revocations: built-in apps only"),
        "{err}"
    );
}

/// `ovs-appctl -t VSWITCHD ARGS` (the daemon runs without a pid file: its
/// control socket is found in the run directory).
fn appctl(ovs: &Ovs, args: &[&str]) -> String {
    let ctl = fs::read_dir(ovs.dir())
        .expect("OVS run directory")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("ovs-vswitchd.") && n.ends_with(".ctl"))
        })
        .expect("ovs-vswitchd's control socket");
    let ctl = ctl.display().to_string();
    let mut all = vec!["-t", ctl.as_str()];
    all.extend_from_slice(args);
    ovs.run("ovs-appctl", &all)
        .unwrap_or_else(|e| panic!("ovs-appctl {args:?}: {e}"))
}

mod router;
mod seattle;
