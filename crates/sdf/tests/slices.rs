//! Slices: demultiplexing by port set and VLAN id, per-slice cache shares
//! (a flood in one slice cannot evict another's entries) and per-slice
//! counters.

use nexthop_sdf::app::{
    App, AppError, Control, InPkt, L2Config, L2Switch, Ports, SliceError, SliceMatch, SliceSpec,
    SlicedSwitch,
};
use nexthop_sdf::Config;

fn eth(dst: [u8; 6], src: [u8; 6], vlan: Option<u16>) -> Vec<u8> {
    let mut f = Vec::with_capacity(64);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    if let Some(v) = vlan {
        f.extend_from_slice(&0x8100u16.to_be_bytes());
        f.extend_from_slice(&v.to_be_bytes());
    }
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    f.resize(64, 0xab);
    f
}

fn mac(n: u32) -> [u8; 6] {
    let b = n.to_be_bytes();
    [0x02, 0, b[0], b[1], b[2], b[3]]
}

fn l2() -> Box<dyn App> {
    Box::new(L2Switch::new(L2Config::default()))
}

/// An app that sends every packet to one port, marking the destination
/// MAC (to tell which slice's app decided).
struct To(u16);

impl App for To {
    fn name(&self) -> &str {
        "to"
    }

    fn on_packet(&mut self, pkt: &mut InPkt, _ctl: &mut Control<'_>) -> Result<(), AppError> {
        pkt.bytes(0, 6)?;
        let mut out = pkt.new_out_pkt();
        out.add_destination(self.0);
        pkt.send(out, true)?;
        Ok(())
    }
}

#[test]
fn spec_parses_and_rejects() {
    let s: SliceSpec = "a:l2:ports=2,1,2".parse().unwrap();
    assert_eq!(s.name, "a");
    assert_eq!(s.app, "l2");
    assert_eq!(s.matcher, SliceMatch::Ports(vec![1, 2]));
    assert_eq!(s.share, None);
    let s: SliceSpec = "lab-2:router:vlan=10:share=500".parse().unwrap();
    assert_eq!(s.matcher, SliceMatch::Vlan(10));
    assert_eq!(s.share, Some(500));
    for bad in [
        "",
        "a",
        "a:l2",
        ":l2:ports=1",
        "a::ports=1",
        "a:l2:port=1",
        "a:l2:ports=",
        "a:l2:ports=1,x",
        "a:l2:ports=70000",
        "a:l2:vlan=0",
        "a:l2:vlan=4095",
        "a:l2:vlan=1:share=0",
        "a:l2:vlan=1:share=x",
        "a:l2:vlan=1:size=3",
        "a:l2:vlan=1:share=3:x",
        "a b:l2:vlan=1",
    ] {
        assert!(
            matches!(bad.parse::<SliceSpec>(), Err(SliceError::Syntax(..))),
            "{bad:?} parsed"
        );
    }
}

#[test]
fn a_spec_writes_back_what_parses_to_it() {
    for (text, written) in [
        ("a:l2:ports=2,1,2", "a:l2:ports=1,2"),
        (
            "lab-2:router:vlan=10:share=500",
            "lab-2:router:vlan=10:share=500",
        ),
        ("p:apps/l2switch.py:ports=7", "p:apps/l2switch.py:ports=7"),
    ] {
        let s: SliceSpec = text.parse().unwrap();
        assert_eq!(s.to_string(), written);
        assert_eq!(written.parse::<SliceSpec>().unwrap(), s);
    }
    assert_eq!(SliceMatch::Ports(vec![3, 4]).to_string(), "ports=3,4");
    assert_eq!(SliceMatch::Vlan(9).to_string(), "vlan=9");
}

#[test]
fn bad_slice_sets_are_refused() {
    let ports = Ports::physical(&[1, 2, 3, 4]);
    let cfg = Config {
        capacity: 100,
        ..Config::default()
    };
    let mk = |specs: &[&str]| {
        let slices = specs
            .iter()
            .map(|s| (s.parse::<SliceSpec>().unwrap(), l2()))
            .collect();
        SlicedSwitch::new(cfg, &ports, slices, true).map(|_| ())
    };
    assert_eq!(mk(&[]), Err(SliceError::Count(0)));
    assert_eq!(
        mk(&["a:l2:ports=1", "a:l2:ports=2"]),
        Err(SliceError::DuplicateName("a".into()))
    );
    assert_eq!(
        mk(&["a:l2:ports=1,2", "b:l2:ports=2,3"]),
        Err(SliceError::PortTwice(2))
    );
    assert_eq!(
        mk(&["a:l2:vlan=7", "b:l2:vlan=7"]),
        Err(SliceError::VlanTwice(7))
    );
    assert_eq!(
        mk(&["a:l2:ports=9"]),
        Err(SliceError::UnknownPort("a".into(), 9))
    );
    assert_eq!(
        mk(&["a:l2:ports=1:share=60", "b:l2:ports=2:share=41"]),
        Err(SliceError::Shares(101, 100))
    );
    assert_eq!(
        mk(&["a:l2:ports=1:share=100", "b:l2:ports=2"]),
        Err(SliceError::Shares(100, 100))
    );
    let huge = format!("b:l2:ports=2:share={}", usize::MAX);
    assert_eq!(
        mk(&["a:l2:ports=1:share=60", &huge]),
        Err(SliceError::Shares(usize::MAX, 100))
    );
    assert_eq!(mk(&["a:l2:ports=1:share=60", "b:l2:ports=2"]), Ok(()));
}

#[test]
fn frames_go_to_their_slice() {
    let ports = Ports::physical(&[1, 2, 3, 4, 5, 6]);
    let slices: Vec<(SliceSpec, Box<dyn App>)> = vec![
        ("p:to:ports=1,2".parse().unwrap(), Box::new(To(2))),
        ("v:to:vlan=10".parse().unwrap(), Box::new(To(5))),
        ("q:to:ports=3,6".parse().unwrap(), Box::new(To(6))),
    ];
    let mut sw = SlicedSwitch::new(Config::default(), &ports, slices, true).unwrap();
    let f = eth(mac(1), mac(2), None);
    assert_eq!(sw.process(1, &f)[0].ports.as_slice(), &[2]);
    // Tagged with the VLAN slice's id: that slice, whatever the port.
    let t = eth(mac(1), mac(2), Some(10));
    assert_eq!(sw.process(1, &t)[0].ports.as_slice(), &[5]);
    assert_eq!(sw.process(4, &t)[0].ports.as_slice(), &[5]);
    // Tagged with another id: the port's slice.
    let o = eth(mac(1), mac(2), Some(11));
    assert_eq!(sw.process(3, &o)[0].ports.as_slice(), &[6]);
    // The same destination MAC from another slice's port: never answered
    // by the first slice's cached entry.
    assert_eq!(sw.process(3, &f)[0].ports.as_slice(), &[6]);
    // Nobody owns port 4 untagged, nor runt frames on it.
    assert!(sw.process(4, &f).is_empty());
    assert!(sw.process(4, &[0u8; 3]).is_empty());
    assert!(sw.process(9, &[]).is_empty());
    assert_eq!(sw.unmatched(), 3);
    let p = sw.counters(0).unwrap();
    let v = sw.counters(1).unwrap();
    let q = sw.counters(2).unwrap();
    assert_eq!((p.packets, p.misses, p.hits, p.app_calls), (1, 1, 0, 1));
    assert_eq!((v.packets, v.misses, v.hits, v.app_calls), (2, 1, 1, 1));
    assert_eq!((q.packets, q.misses, q.hits, q.app_calls), (2, 1, 1, 1));
    assert_eq!(sw.slice_of(2, &f), Some(0));
    assert_eq!(sw.slice_of(2, &t), Some(1));
    assert_eq!(sw.slice_of(5, &f), None);
}

#[test]
fn a_port_slice_app_cannot_send_outside_its_ports() {
    let ports = Ports::physical(&[1, 2, 3]);
    let slices: Vec<(SliceSpec, Box<dyn App>)> = vec![
        ("a:to:ports=1,2".parse().unwrap(), Box::new(To(3))),
        ("b:to:ports=3".parse().unwrap(), Box::new(To(3))),
    ];
    let mut sw = SlicedSwitch::new(Config::default(), &ports, slices, true).unwrap();
    let f = eth(mac(1), mac(2), None);
    assert!(sw.process(1, &f).is_empty());
    assert_eq!(sw.counters(0).unwrap().drops, 1);
    assert_eq!(sw.process(3, &f)[0].ports.as_slice(), &[3]);
    assert_eq!(sw.counters(1).unwrap().drops, 0);
}

#[test]
fn a_flood_in_one_slice_cannot_evict_another_slices_entries() {
    let ports = Ports::physical(&[1, 2, 3, 4]);
    let cfg = Config {
        capacity: 1000,
        ..Config::default()
    };
    let slices = vec![
        ("a:l2:ports=1,2:share=100".parse().unwrap(), l2()),
        ("b:l2:ports=3,4".parse().unwrap(), l2()),
    ];
    let mut sw = SlicedSwitch::new(cfg, &ports, slices, true).unwrap();
    assert_eq!(sw.counters(0).unwrap().share, 100);
    assert_eq!(sw.counters(1).unwrap().share, 900);

    // Slice b learns two hosts and caches 50 flows between them and
    // 48 more hosts.
    let (x, y) = (mac(0xb000), mac(0xb001));
    sw.process(3, &eth(y, x, None));
    sw.process(4, &eth(x, y, None));
    for h in 0..48 {
        sw.process(4, &eth(x, mac(0xb100 + h), None));
        sw.process(3, &eth(mac(0xb100 + h), x, None));
    }
    let b_flows: Vec<(u16, Vec<u8>)> = (0..48)
        .map(|h| (4, eth(x, mac(0xb100 + h), None)))
        .chain([(4, eth(x, y, None)), (3, eth(y, x, None))])
        .collect();
    for (p, f) in &b_flows {
        sw.process(*p, f);
    }
    let before = sw.counters(1).unwrap();
    assert!(before.entries >= b_flows.len(), "{before:?}");

    // A flood of 20 000 distinct flows in slice a.
    for n in 0..20_000u32 {
        sw.process(1 + (n % 2) as u16, &eth(mac(n), mac(0x10_0000 + n), None));
    }
    let a = sw.counters(0).unwrap();
    assert_eq!(a.packets, 20_000);
    assert!(a.entries <= 100, "{a:?}");
    assert!(a.evictions > 0, "{a:?}");

    // Every flow of slice b still hits: no eviction, no new app call.
    let b = sw.counters(1).unwrap();
    assert_eq!(b, before);
    for (p, f) in &b_flows {
        sw.process(*p, f);
    }
    let after = sw.counters(1).unwrap();
    assert_eq!(after.evictions, 0);
    assert_eq!(after.hits, before.hits + b_flows.len() as u64);
    assert_eq!(after.misses, before.misses);
    assert_eq!(after.app_calls, before.app_calls);
}

#[test]
fn sliced_cache_matches_its_apps_run_uncached() {
    // The oracle, per slice: the same traffic through a caching and a
    // non-caching sliced switch gives the same frames.
    let ports = Ports::physical(&[1, 2, 3, 4]);
    let cfg = Config {
        capacity: 64,
        ..Config::default()
    };
    let mk = |caching| {
        let slices = vec![
            ("a:l2:ports=1,2:share=16".parse().unwrap(), l2()),
            ("b:l2:ports=3,4".parse().unwrap(), l2()),
            ("v:l2:vlan=5".parse().unwrap(), l2()),
        ];
        SlicedSwitch::new(cfg, &ports, slices, caching).unwrap()
    };
    let (mut cached, mut oracle) = (mk(true), mk(false));
    let mut s = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..5000 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        // Hosts mostly stay on their port; one frame in 16 moves one.
        let src = (s >> 24) as u32 % 12;
        let port = if (s >> 40).is_multiple_of(16) {
            1 + (s % 4) as u16
        } else {
            1 + (src % 4) as u16
        };
        let vlan = (s >> 8).is_multiple_of(3);
        let f = eth(mac((s >> 16) as u32 % 12), mac(src), vlan.then_some(5));
        assert_eq!(cached.process(port, &f), oracle.process(port, &f));
    }
    let hits: u64 = (0..3).map(|i| cached.counters(i).unwrap().hits).sum();
    assert!(hits > 1000, "{hits}");
}
