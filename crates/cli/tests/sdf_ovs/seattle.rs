//! The SEATTLE app (Python) on the OVS backend: two bridges joined by
//! patch ports, and two OVS instances over a VXLAN or GRE tunnel.

use super::*;

/// The Python that has the nexthop package with its OVS binding
/// (`NEXTHOP_TEST_PYTHON`, else the test venv `scripts/test.sh` builds).
/// A `NEXTHOP_TEST_PYTHON` given explicitly must have it (scripts/test.sh
/// sets it once the wheel is installed, so the test cannot skip there).
fn python_with_run_ovs() -> Result<String, String> {
    let given = std::env::var("NEXTHOP_TEST_PYTHON").ok();
    let py = given.clone().unwrap_or_else(|| {
        format!(
            "{}/../../target/py-test-venv/bin/python",
            env!("CARGO_MANIFEST_DIR")
        )
    });
    let ok = Command::new(&py)
        .args(["-c", "from nexthop.sdf import run_ovs"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Ok(py)
    } else if given.is_some() {
        panic!("NEXTHOP_TEST_PYTHON={py} has no nexthop package with run_ovs");
    } else {
        Err(format!(
            "{py} has no nexthop package with run_ovs (bash scripts/test.sh installs it; or set NEXTHOP_TEST_PYTHON)"
        ))
    }
}

/// The flow from `src` to `dst` entering on `in_port` (whatever else it
/// matches), if installed.
fn sea_flow(flows: &[String], in_port: u16, src: [u8; 6], dst: [u8; 6]) -> Option<&str> {
    let needles = [
        format!("in_port={in_port},"),
        format!("dl_src={}", mac_text(src)),
        format!("dl_dst={}", mac_text(dst)),
    ];
    flows
        .iter()
        .find(|f| needles.iter().all(|n| f.contains(n.as_str())))
        .map(String::as_str)
}

/// A frame of ethertype 0x88b6 (not SEATTLE's DHT 0x88b5) with the magic.
fn data_frame(src: [u8; 6], dst: [u8; 6], seq: u16) -> Vec<u8> {
    let mut f = frame(src, dst, seq);
    f[13] = 0xb6;
    f
}

/// Two SEATTLE switches: switch `i` is bridge `sI` of `ovs[i]`, whose
/// namespace is lab role `ns[i]`, with its host on OpenFlow port 1 and
/// its tunnel to the other switch the `--ovs-tunnel` spec `tunnel[i]`.
struct Seattle<'a> {
    ovs: [&'a Ovs; 2],
    ns: [&'a str; 2],
    tunnel: [String; 2],
}

/// The SEATTLE controller of switch `me` (of two): the app's tunnel port
/// (its port 2) becomes OVS port `sMEtOTHER`.
fn start_seattle(lab: &mut Lab, sea: &Seattle, py: &str, me: u8) -> usize {
    let other = 1 - me;
    let ovs = sea.ovs[usize::from(me)];
    let app = lab.file(&format!("seattle{me}.py"));
    // A long lookup timeout: the cached drop goes only when the answer
    // comes.
    fs::write(
        &app,
        format!(
            "from nexthop.apps.seattle import SeattleSwitch\n\n\
             def make_app():\n    return SeattleSwitch({me}, 2, [1], lookup_timeout=60.0)\n"
        ),
    )
    .expect("write app");
    let tunnel = &sea.tunnel[usize::from(me)];
    let mut env = ovs.env();
    env.push(("NEXTHOP_PYTHON", py.to_owned()));
    let name = format!("s{me}");
    let br = format!("s{me}");
    let i = lab.spawn(
        sea.ns[usize::from(me)],
        &name,
        Path::new(NEXTHOP),
        &[
            "sdf",
            "run",
            "--backend",
            "ovs",
            "--app",
            app.to_str().expect("utf-8 path"),
            "--ovs-listen",
            "127.0.0.1:0",
            "--ovs-bridge",
            &br,
            "--ovs-ports",
            "1",
            "--ovs-tunnel",
            tunnel,
            "--ovs-idle-timeout",
            "60",
            "--duration",
            "20",
        ],
        &env,
    );
    let err = format!("{name}.err");
    lab.wait_for(&err, "OpenFlow listening on", Duration::from_secs(20));
    // The app adds its tunnel at its first tick: the OVS port appears.
    lab.wait_for(
        &err,
        &format!("app port 2 is OVS port s{me}t{other} on s{me}"),
        Duration::from_secs(10),
    );
    i
}

/// The Python for the SEATTLE tests, or None (said why) without OVS or
/// the package; checks that the DHT puts host a's location at switch 0
/// and b's at switch 1.
fn seattle_python() -> Option<String> {
    if let Some(why) = Ovs::missing() {
        eprintln!("SKIP sdf_ovs seattle: {why}");
        return None;
    }
    let py = match python_with_run_ovs() {
        Ok(py) => py,
        Err(why) => {
            eprintln!("SKIP sdf_ovs seattle: {why}");
            return None;
        }
    };
    let (a, b) = SEATTLE_HOSTS;
    let owners = Command::new(&py)
        .args([
            "-c",
            &format!(
                "from nexthop.apps.seattle import owner_of; print(owner_of(bytes.fromhex('{}'), 2), owner_of(bytes.fromhex('{}'), 2))",
                hex(&a),
                hex(&b)
            ),
        ])
        .output()
        .expect("python");
    assert_eq!(String::from_utf8_lossy(&owners.stdout).trim(), "0 1");
    Some(py)
}

/// Host a (h1, on switch 0) and host b (h2, on switch 1): the DHT
/// (rendezvous hashing over 2 switches) puts a's location at switch 0 and
/// b's at switch 1, so switch 0 must ask switch 1 for b.
const SEATTLE_HOSTS: ([u8; 6], [u8; 6]) = (
    [0x00, 0x00, 0x5e, 0x00, 0x53, 6],
    [0x00, 0x00, 0x5e, 0x00, 0x53, 5],
);

#[test]
fn seattle_on_open_vswitch_caches_the_dht_miss_as_a_drop_until_the_answer() {
    let Some(py) = seattle_python() else {
        return;
    };
    let bridges: [(&str, &[(u8, u16)]); 2] = [("s0", &[(1, 1)]), ("s1", &[(2, 1)])];
    let Some((mut lab, ovs)) = ovs_lab("sdfsea", 2, &bridges) else {
        return;
    };
    let sea = Seattle {
        ovs: [&ovs, &ovs],
        ns: ["sw", "sw"],
        tunnel: [0u8, 1].map(|me| {
            let other = 1 - me;
            format!("{other}=s{me}t{other},patch,peer=s{other}t{me}")
        }),
    };
    seattle_case(&mut lab, &sea, &py);
}

#[test]
fn seattle_across_two_open_vswitches_over_a_vxlan_tunnel() {
    seattle_over_a_tunnel("sdfvx", "vxlan");
}

#[test]
fn seattle_across_two_open_vswitches_over_a_gre_tunnel() {
    seattle_over_a_tunnel("sdfgre", "gre");
}

/// SEATTLE's two switches on two Open vSwitch instances, each in its own
/// namespace as on two hosts, the app's tunnel a port of type `typ`
/// (`--ovs-tunnel 1=s0t1,vxlan,remote_ip=10.9.0.2`) over an underlay veth
/// between the namespaces: in each, bridge `brp` (normal switching) holds
/// the underlay port and the local tunnel address 10.9.0.1 or .2 on its
/// internal port, from which OVS's userspace datapath routes and resolves
/// the tunnel's outer header.
fn seattle_over_a_tunnel(test: &str, typ: &str) {
    let Some(py) = seattle_python() else {
        return;
    };
    let Some(mut lab) = lab_or_skip(test, &["h1", "h2", "sw0", "sw1"]) else {
        return;
    };
    lab.veth("h1", "h1", "sw0", "op1");
    lab.veth("h2", "h2", "sw1", "op2");
    lab.veth("sw0", "u0", "sw1", "u1");
    let mut all = Vec::new();
    for i in 0..2u8 {
        let ns = lab.ns(&format!("sw{i}"));
        let ovs = Ovs::start(Some(&ns)).expect("start Open vSwitch");
        // The underlay: brp with the veth, the VTEP address on brp.
        ovs.vsctl(&[
            "add-br",
            "brp",
            "--",
            "set",
            "bridge",
            "brp",
            "datapath_type=netdev",
            "fail-mode=standalone",
        ])
        .expect("add brp");
        ovs.vsctl(&["add-port", "brp", &format!("u{i}")])
            .expect("add underlay port");
        for args in [
            vec!["addr", "add", &format!("10.9.0.{}/24", i + 1), "dev", "brp"],
            vec!["link", "set", "brp", "up"],
        ] {
            let st = Command::new("ip")
                .args(["-n", &ns])
                .args(&args)
                .status()
                .expect("ip");
            assert!(st.success(), "ip {args:?}");
        }
        let br = format!("s{i}");
        ovs.add_bridge(&br).expect("add bridge");
        ovs.add_port(&br, &format!("op{}", i + 1), 1)
            .expect("add port");
        all.push(ovs);
    }
    // OVS resolves a tunnel's next hop by ARP and drops the packet that
    // asked (the first DHT message would be lost): give each side the
    // other's address up front.
    for (i, ovs) in all.iter().enumerate() {
        let peer_ns = lab.ns(&format!("sw{}", 1 - i));
        let link = Command::new("ip")
            .args(["-n", &peer_ns, "-br", "link", "show", "brp"])
            .output()
            .expect("ip link");
        let text = String::from_utf8_lossy(&link.stdout);
        let mac = text
            .split_whitespace()
            .nth(2)
            .expect("brp's MAC")
            .to_owned();
        let peer = format!("10.9.0.{}", 2 - i);
        appctl(ovs, &["tnl/neigh/set", "brp", &peer, &mac]);
    }
    let sea = Seattle {
        ovs: [&all[0], &all[1]],
        ns: ["sw0", "sw1"],
        tunnel: [0u8, 1].map(|me| {
            let other = 1 - me;
            format!("{other}=s{me}t{other},{typ},remote_ip=10.9.0.{}", other + 1)
        }),
    };
    seattle_case(&mut lab, &sea, &py);
    for (i, ovs) in all.iter().enumerate() {
        let port = ovs
            .vsctl(&["get", "interface", &format!("s{i}t{}", 1 - i), "type"])
            .expect("tunnel port");
        assert_eq!(port.trim(), typ);
    }
}

/// The SEATTLE case on switches `sea` (hosts h1 and h2 on their port 1).
fn seattle_case(lab: &mut Lab, sea: &Seattle, py: &str) {
    let (a, b) = SEATTLE_HOSTS;
    let caps = hosts::capture(lab, &[1, 2]);
    let s0 = start_seattle(lab, sea, py, 0);
    let s1 = start_seattle(lab, sea, py, 1);
    for (i, br) in ["s0", "s1"].into_iter().enumerate() {
        let ovs = sea.ovs[i];
        let f = flows_on(ovs, br, |f| f.iter().any(|l| l.contains(TABLE_MISS)));
        assert_eq!(f.len(), 1, "{br}: {f:?}\n{}", ovs.log());
    }

    // 1. a -> b, b never seen: switch 0 asks b's owner (switch 1, which
    // does not know b either and keeps switch 0 as a subscriber); the next
    // frame's decision, a drop tied to the pending lookup, is a flow.
    let mut seq = 0;
    let drop_flow = {
        let t = Instant::now();
        loop {
            hosts::send(lab, 1, &[data_frame(a, b, seq)]);
            seq += 1;
            let f = sea.ovs[0].flows("s0").expect("dump-flows s0");
            if let Some(l) = sea_flow(&f, 1, a, b) {
                break l.to_owned();
            }
            assert!(t.elapsed() < Duration::from_secs(10), "no drop flow: {f:?}");
            sleep(Duration::from_millis(100));
        }
    };
    assert_eq!(actions(&drop_flow), "drop", "{drop_flow}");
    // Two state ids: a's binding and the pending lookup.
    let c = cookie(&drop_flow);
    assert_ne!(c >> 32, c & 0xffff_ffff, "{drop_flow}");
    let dropped = seq;

    // 2. b speaks (a broadcast, reaching a over the tunnel): switch 1
    // learns b, its directory answers switch 0's lookup, and the answer
    // revokes the cached drop by the pending state's tag.
    let hello = data_frame(b, [0xff; 6], 1000);
    hosts::send(lab, 2, std::slice::from_ref(&hello));
    let f = flows_on(sea.ovs[0], "s0", |f| sea_flow(f, 1, a, b).is_none());
    assert!(
        sea_flow(&f, 1, a, b).is_none(),
        "drop flow not revoked: {f:?}"
    );
    let pending_tag = c & 0xffff_ffff;
    assert!(
        f.iter().all(|l| !l.contains("cookie=")
            || (cookie(l) >> 32 != pending_tag && cookie(l) & 0xffff_ffff != pending_tag)),
        "a flow still carries the pending lookup's tag: {f:?}"
    );

    // 3. a -> b again: the app forwards into the tunnel (one flow on each
    // switch), then OVS carries a burst.
    let first = seq;
    hosts::send(lab, 1, &[data_frame(a, b, seq)]);
    seq += 1;
    let f0 = flows_on(sea.ovs[0], "s0", |f| sea_flow(f, 1, a, b).is_some());
    let fwd = sea_flow(&f0, 1, a, b)
        .expect("a -> b flow on s0")
        .to_owned();
    assert_eq!(actions(&fwd), "output:2", "{fwd}");
    let f1 = flows_on(sea.ovs[1], "s1", |f| {
        f.iter()
            .any(|l| l.contains("in_port=2,") && l.contains(&format!("dl_dst={}", mac_text(b))))
    });
    let from_tunnel = f1
        .iter()
        .find(|l| l.contains("in_port=2,") && l.contains(&format!("dl_dst={}", mac_text(b))))
        .expect("tunnel -> b flow on s1");
    assert_eq!(actions(from_tunnel), "output:1", "{from_tunnel}");
    let burst: Vec<Vec<u8>> = (0..20).map(|i| data_frame(a, b, seq + i)).collect();
    hosts::send(lab, 1, &burst);
    seq += 20;
    sleep(Duration::from_millis(300));
    caps.finish(lab);

    let got_b = hosts::received(lab, 2);
    let seqs: Vec<u16> = got_b
        .iter()
        .filter(|f| f[6..12] == a && f[0..6] == b)
        .map(|f| u16::from_be_bytes([f[18], f[19]]))
        .collect();
    // Nothing sent while the lookup was pending arrived; everything after.
    assert_eq!(seqs, (first..seq).collect::<Vec<_>>(), "dropped {dropped}");
    assert!(
        hosts::received(lab, 1).contains(&hello),
        "b's broadcast at a"
    );

    // The runs end at their --duration: their summaries.
    let mut outs = Vec::new();
    for (i, name) in [(s0, "s0"), (s1, "s1")] {
        let (ok, out, err) = lab.wait(i, name, Duration::from_secs(40));
        assert!(ok, "{name}:\n{out}\n{err}");
        assert!(
            out.contains("mapped_ports=1 unmapped_ports=0"),
            "{name}: {out}"
        );
        assert!(out.contains(" errors=0 "), "{name}: {out}");
        outs.push(out);
    }
    let out0 = &outs[0];
    let revoked: u64 = out0
        .split(' ')
        .find_map(|f| f.strip_prefix("revoked_flows="))
        .and_then(|n| n.parse().ok())
        .expect("revoked_flows");
    assert!(revoked >= 1, "{out0}");
}
