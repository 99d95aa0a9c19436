//! The codec against a real Open vSwitch 3.1 (userspace datapath, a test's
//! own instance in its own namespace, `nexthop-testutil`'s `Ovs` guard):
//! masked OXM matches and the actions the backend uses are accepted and
//! shown by `ovs-ofctl dump-flows` as intended; a delete filtered by half
//! the cookie removes exactly the flows with that tag in that half; a
//! match without its prerequisite is refused with an error carrying the
//! flow-mod's xid. Without root or OVS the test says why and passes.

use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

use nexthop_openflow::backend::{HIGH_TAG, LOW_TAG};
use nexthop_openflow::codec::{
    field, hello_elements, Action, Body, FlowMod, Match, Oxm, FLAG_SEND_FLOW_REM,
};
use nexthop_openflow::Channel;
use nexthop_testutil::ovs::Ovs;

const BRIDGE: &str = "ofbr";

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// OVS with a bridge whose controller is a Unix socket of ours (the
/// namespace OVS runs in needs no route to us), and the channel to it
/// after the hello exchange.
fn switch() -> Option<(Ovs, Channel<UnixStream>)> {
    if let Some(why) = Ovs::missing() {
        eprintln!("SKIP: {why}");
        return None;
    }
    if !is_root() {
        eprintln!("SKIP: Open vSwitch in a namespace needs root");
        return None;
    }
    let ovs = Ovs::start(None).expect("start Open vSwitch");
    ovs.add_bridge(BRIDGE).expect("bridge");
    let path = ovs.dir().join("controller.sock");
    let listener = UnixListener::bind(&path).expect("bind");
    listener.set_nonblocking(true).unwrap();
    let target = format!("unix:{}", path.display());
    ovs.vsctl(&[
        "set-controller",
        BRIDGE,
        &target,
        "--",
        "set",
        "controller",
        BRIDGE,
        "max_backoff=1000",
    ])
    .expect("set-controller");
    let t = Instant::now();
    let stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(_) if t.elapsed() < Duration::from_secs(15) => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => panic!("OVS did not connect: {e}\n{}", ovs.log()),
        }
    };
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut ch = Channel::new(stream);
    ch.send(Body::Hello(hello_elements())).unwrap();
    let hello = ch.recv().expect("hello");
    assert!(matches!(hello.body, Body::Hello(_)), "{hello:?}");
    Some((ovs, ch))
}

fn add(priority: u16, cookie: u64, fields: Vec<Oxm>, actions: Vec<Action>) -> Body {
    let mut f = FlowMod::add(priority, cookie, Match { fields }, actions);
    f.idle_timeout = 30;
    f.flags = FLAG_SEND_FLOW_REM;
    Body::FlowMod(f)
}

#[test]
fn masked_matches_half_cookie_deletes_and_errors_on_a_real_switch() {
    let Some((ovs, mut ch)) = switch() else {
        return;
    };
    let a = add(
        3000,
        1 << 32 | 2,
        vec![
            Oxm::exact(field::IN_PORT, &7u32.to_be_bytes()),
            Oxm::masked(
                field::ETH_DST,
                &[2, 0, 0, 9, 9, 9],
                &[0xff, 0xff, 0xff, 0, 0, 0],
            ),
        ],
        vec![Action::output(1)],
    );
    let b = add(
        2000,
        2 << 32 | 3,
        vec![
            Oxm::exact(field::ETH_TYPE, &[8, 0]),
            Oxm::masked(field::IPV4_DST, &[10, 1, 0, 0], &[0xff, 0xff, 0, 0]),
        ],
        vec![
            Action::SetField(Oxm::exact(field::ETH_SRC, &[2, 0, 0, 0, 0, 0x42])),
            Action::DecNwTtl,
            Action::output(2),
        ],
    );
    let c = add(
        1000,
        3 << 32 | 3,
        vec![Oxm::exact(field::ETH_SRC, &[2, 0, 0, 0, 0, 3])],
        vec![
            Action::output(3),
            Action::output(nexthop_openflow::codec::PORT_CONTROLLER),
        ],
    );
    for m in [a, b, c] {
        ch.queue(m).unwrap();
    }
    ch.flush().unwrap();
    let before = ch.barrier().expect("barrier");
    assert!(before.is_empty(), "{before:?}");
    let flows = ovs.flows(BRIDGE).unwrap();
    let all = flows.join("\n");
    assert_eq!(flows.len(), 3, "{all}");
    for want in [
        "cookie=0x100000002",
        "priority=3000,in_port=7,dl_dst=02:00:00:00:00:00/ff:ff:ff:00:00:00",
        "cookie=0x200000003",
        "nw_dst=10.1.0.0/16",
        "actions=set_field:02:00:00:00:00:42->eth_src,dec_ttl,output:2",
        "dl_src=02:00:00:00:00:03,actions=output:3,CONTROLLER:65535",
        "send_flow_rem",
        "idle_timeout=30",
    ] {
        assert!(all.contains(want), "no {want} in\n{all}");
    }

    // Tag 2 is revoked: the flow with it low (a) and the one with it high
    // (b) go; c (tags 3, 3) stays.
    ch.queue(Body::FlowMod(FlowMod::delete_by_cookie(2 << 32, HIGH_TAG)))
        .unwrap();
    ch.queue(Body::FlowMod(FlowMod::delete_by_cookie(2, LOW_TAG)))
        .unwrap();
    ch.flush().unwrap();
    let before = ch.barrier().expect("barrier");
    // OVS tells of each deleted flow (send_flow_rem), reason 2: before
    // the barrier's reply or, the notices being asynchronous, after it.
    let removed_cookie = |m: &nexthop_openflow::Message| match &m.body {
        Body::FlowRemoved(f) if f.reason == 2 => Some(f.cookie),
        _ => None,
    };
    let mut removed: Vec<u64> = before.iter().filter_map(removed_cookie).collect();
    while removed.len() < 2 {
        let m = ch.recv().expect("a flow-removed notice");
        removed.extend(removed_cookie(&m));
    }
    assert_eq!(removed.len(), 2, "{before:?}");
    assert!(removed.contains(&(1 << 32 | 2)) && removed.contains(&(2 << 32 | 3)));
    let flows = ovs.flows(BRIDGE).unwrap();
    assert_eq!(flows.len(), 1, "{flows:?}");
    assert!(flows[0].contains("cookie=0x300000003"), "{flows:?}");

    // An IPv4 field without eth_type=0x0800: refused (bad match,
    // bad prerequisite), the error carries the flow-mod's xid.
    let bad = add(
        10,
        9,
        vec![Oxm::exact(field::IPV4_DST, &[10, 0, 0, 1])],
        vec![Action::output(1)],
    );
    let xid = ch.send(bad).unwrap();
    let before = ch.barrier().expect("barrier");
    let err = before
        .iter()
        .find(|m| matches!(m.body, Body::Error { .. }))
        .unwrap_or_else(|| panic!("no error in {before:?}"));
    assert_eq!(err.xid, xid);
    assert!(
        matches!(
            err.body,
            Body::Error {
                typ: 4,
                code: 9,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(ovs.flows(BRIDGE).unwrap().len(), 1);
}
