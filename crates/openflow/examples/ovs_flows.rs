//! Flow installations per second and revocation latency against a real
//! Open vSwitch (userspace datapath, an instance of its own in its own
//! namespace, as the tests start it), over the wire operations the SDF
//! backend uses:
//!
//! * install: `FLOWS` flow-mod adds (in_port + eth_dst exact, a cookie of
//!   two tags, idle timeout, send-flow-removed, one output), pipelined,
//!   then one barrier: flows per second until the barrier's reply; and
//!   `ROUNDS` single adds each followed by a barrier (latency);
//! * revoke: `ROUNDS` times, the backend's revocation of one state id
//!   (two deletes filtered by half the cookie, then a barrier): time from
//!   sending to the barrier's reply, when the switch has removed the flow;
//!   for comparison, `ROUNDS` deletes by the whole cookie (mask all ones);
//!
//! Needs root and `openvswitch-switch`. Usage:
//! `cargo run --release -p nexthop-openflow --example ovs_flows -- [FLOWS] [ROUNDS]`
//! (defaults 10000 and 500). Prints a table and one JSON line.

use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

use nexthop_openflow::backend::{HIGH_TAG, LOW_TAG};
use nexthop_openflow::codec::{
    field, hello_elements, Action, Body, FlowMod, Match, Oxm, FLAG_SEND_FLOW_REM,
};
use nexthop_openflow::Channel;
use nexthop_testutil::ovs::Ovs;

const BRIDGE: &str = "benchbr";

fn connect(ovs: &Ovs) -> Channel<UnixStream> {
    let path = ovs.dir().join("controller.sock");
    let listener = UnixListener::bind(&path).expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let target = format!("unix:{}", path.display());
    ovs.vsctl(&["set-controller", BRIDGE, &target])
        .expect("set-controller");
    let t = Instant::now();
    let stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(_) if t.elapsed() < Duration::from_secs(15) => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => panic!("OVS did not connect: {e}"),
        }
    };
    stream.set_nonblocking(false).expect("blocking");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let mut ch = Channel::new(stream);
    ch.send(Body::Hello(hello_elements())).expect("hello");
    ch.recv().expect("hello back");
    ch
}

/// The flow of tag `i`: in_port 1, eth_dst 02:00:i, cookie `i << 32 | i`.
fn flow(i: u32) -> Body {
    let mut mac = [2u8, 0, 0, 0, 0, 0];
    mac[2..].copy_from_slice(&i.to_be_bytes());
    let m = Match {
        fields: vec![
            Oxm::exact(field::IN_PORT, &1u32.to_be_bytes()),
            Oxm::exact(field::ETH_DST, &mac),
        ],
    };
    let t = u64::from(i);
    let mut f = FlowMod::add(2000, t << 32 | t, m, vec![Action::output(2)]);
    f.idle_timeout = 300;
    f.flags = FLAG_SEND_FLOW_REM;
    Body::FlowMod(f)
}

fn check(before: &[nexthop_openflow::Message]) {
    if let Some(e) = before.iter().find(|m| matches!(m.body, Body::Error { .. })) {
        panic!("the switch refused a message: {e:?}");
    }
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let flows: u32 = args.next().map_or(10_000, |a| a.parse().expect("FLOWS"));
    let rounds: u32 = args.next().map_or(500, |a| a.parse().expect("ROUNDS"));
    assert!(flows >= rounds && rounds > 0, "FLOWS >= ROUNDS > 0");
    if let Some(why) = Ovs::missing() {
        eprintln!("ovs_flows: {why}");
        std::process::exit(2);
    }
    let ovs = Ovs::start(None).expect("start Open vSwitch (needs root)");
    ovs.add_bridge(BRIDGE).expect("bridge");
    let mut ch = connect(&ovs);

    // Pipelined installation.
    let t = Instant::now();
    for i in 1..=flows {
        ch.queue(flow(i)).expect("queue");
        if i % 512 == 0 {
            ch.flush().expect("send");
        }
    }
    ch.flush().expect("send");
    check(&ch.barrier().expect("barrier"));
    let install_s = t.elapsed().as_secs_f64();
    let per_s = f64::from(flows) / install_s;
    let installed = ovs.flows(BRIDGE).expect("dump-flows").len();
    assert_eq!(installed, flows as usize, "flows in the switch");

    // Revocation of one state id (the first ROUNDS tags), confirmed.
    let mut revoke_us = Vec::new();
    for i in 1..=rounds {
        let tag = u64::from(i);
        let t = Instant::now();
        ch.queue(Body::FlowMod(FlowMod::delete_by_cookie(
            tag << 32,
            HIGH_TAG,
        )))
        .expect("queue");
        ch.queue(Body::FlowMod(FlowMod::delete_by_cookie(tag, LOW_TAG)))
            .expect("queue");
        ch.flush().expect("send");
        let before = ch.barrier().expect("barrier");
        revoke_us.push(t.elapsed().as_secs_f64() * 1e6);
        check(&before);
    }
    // For comparison: deletes by the whole cookie (mask all ones), which
    // OVS finds through its cookie index instead of a scan.
    let mut exact_us = Vec::new();
    for i in rounds + 1..=(2 * rounds).min(flows) {
        let tag = u64::from(i);
        let t = Instant::now();
        ch.send(Body::FlowMod(FlowMod::delete_by_cookie(
            tag << 32 | tag,
            u64::MAX,
        )))
        .expect("send");
        let before = ch.barrier().expect("barrier");
        exact_us.push(t.elapsed().as_secs_f64() * 1e6);
        check(&before);
    }
    let left = ovs.flows(BRIDGE).expect("dump-flows").len();
    let gone = rounds + exact_us.len() as u32;
    assert_eq!(left, (flows - gone) as usize, "flows after revoking");

    // Single installations, each confirmed (the tags just freed).
    let mut install_us = Vec::new();
    for i in 1..=rounds {
        let t = Instant::now();
        ch.send(flow(i)).expect("send");
        let before = ch.barrier().expect("barrier");
        install_us.push(t.elapsed().as_secs_f64() * 1e6);
        check(&before);
    }

    let (r50, r99, rmax) = (
        quantile(&mut revoke_us, 0.5),
        quantile(&mut revoke_us, 0.99),
        quantile(&mut revoke_us, 1.0),
    );
    let e50 = if exact_us.is_empty() {
        0.0
    } else {
        quantile(&mut exact_us, 0.5)
    };
    let (i50, i99) = (
        quantile(&mut install_us, 0.5),
        quantile(&mut install_us, 0.99),
    );
    println!("flows {flows} installed pipelined in {install_s:.3} s: {per_s:.0} flows/s (barrier-confirmed)");
    println!("revocation of one state id (2 deletes + barrier), {rounds} rounds, {flows}..{} flows in the table: median {r50:.0} us, p99 {r99:.0} us, max {rmax:.0} us", flows - rounds);
    println!(
        "single install (add + barrier), {rounds} rounds: median {i50:.0} us, p99 {i99:.0} us"
    );
    println!(
        "{{\"flows\":{flows},\"rounds\":{rounds},\"install_flows_per_s\":{per_s:.0},\"revoke_us_p50\":{r50:.0},\"revoke_us_p99\":{r99:.0},\"revoke_us_max\":{rmax:.0},\"exact_cookie_delete_us_p50\":{e50:.0},\"install_us_p50\":{i50:.0},\"install_us_p99\":{i99:.0}}}"
    );
}
