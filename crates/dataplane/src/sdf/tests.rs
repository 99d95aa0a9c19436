use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nexthop_sdf::app::{AppError, Control, InPkt, L2Config, L2Switch, Ports, Switch};
use rand::{Rng, SeedableRng};

use super::*;

/// Frames sent, per port, in order.
#[derive(Default)]
struct Collect(BTreeMap<u16, Vec<Vec<u8>>>, u64);

impl Sink for Collect {
    fn emit(&mut self, ports: &[u16], controller: bool, frame: &[u8], _stamp: Stamp) {
        for &p in ports {
            self.0.entry(p).or_default().push(frame.to_vec());
        }
        self.1 += u64::from(controller);
    }
}

impl Collect {
    fn total(&self) -> usize {
        self.0.values().map(Vec::len).sum()
    }
}

/// Forwards by byte 0 to port `byte0 % 4`, marking byte 0; counts its
/// calls; blocks while `gate` is closed; panics on byte 0 = 0xEE.
struct Gated {
    calls: Arc<AtomicU64>,
    closed: Arc<AtomicBool>,
}

impl App for Gated {
    fn name(&self) -> &str {
        "gated"
    }

    fn on_packet(&mut self, pkt: &mut InPkt, _ctl: &mut Control<'_>) -> Result<(), AppError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        while self.closed.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let b = pkt.field(0, 8)? as u8;
        if b == 0xEE {
            panic!("the app raised");
        }
        let mut out = pkt.new_out_pkt();
        out.add_destination(u16::from(b % 4));
        pkt.send(out, true)?;
        Ok(())
    }
}

fn gated(cfg: SdfConfig) -> (SdfRuntime, Arc<AtomicU64>, Arc<AtomicBool>) {
    let calls = Arc::new(AtomicU64::new(0));
    let closed = Arc::new(AtomicBool::new(false));
    let app = Gated {
        calls: calls.clone(),
        closed: closed.clone(),
    };
    (
        SdfRuntime::start(Box::new(app), cfg).unwrap(),
        calls,
        closed,
    )
}

fn cfg() -> SdfConfig {
    SdfConfig {
        ports: vec![0, 1, 2, 3],
        ..SdfConfig::default()
    }
}

fn frame(b0: u8, tail: u8) -> Vec<u8> {
    let mut f = vec![tail; 64];
    f[0] = b0;
    f
}

#[test]
fn pending_miss_table_makes_one_app_call_per_flow_in_flight() {
    let (rt, calls, closed) = gated(SdfConfig {
        max_waiting: 40,
        ..cfg()
    });
    let mut stage = rt.stage();
    let mut sink = Collect::default();
    closed.store(true, Ordering::SeqCst);
    // 4 flows × 50 frames, interleaved, while the app is stuck on the
    // first: each flow gets one request, the rest wait (up to 40 each).
    let frames: Vec<Vec<u8>> = (0..200).map(|i| frame((i % 4) as u8 + 1, 7)).collect();
    let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
    stage.process(0, &refs, &[], &mut sink);
    assert_eq!(stage.pending_flows(), 4);
    assert_eq!(stage.waiting_frames(), 160);
    closed.store(false, Ordering::SeqCst);
    assert!(stage.flush(&mut sink, Duration::from_secs(10)));
    let c = *stage.sdf_counters();
    assert_eq!(calls.load(Ordering::SeqCst), 4, "one app call per flow");
    assert_eq!(c.app_requests, 4);
    assert_eq!(c.misses, 200);
    assert_eq!(c.pending_waits, 160);
    assert_eq!(c.pending_resolved, 160);
    assert_eq!(c.drops.waiting_full, 4 * 9, "49 waited per flow, 40 may");
    assert_eq!(sink.total(), 164);
    assert_eq!(sink.0[&1].len(), 41);
    // Now cached: the same flows are hits, no more app calls.
    stage.process(0, &refs, &[], &mut sink);
    assert_eq!(stage.sdf_counters().hits, 200);
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    let s = stage.counters();
    assert_eq!(s.frames_in, 400);
    assert_eq!(s.forwarded + s.dropped + s.punted, 400);
    assert!(s.is_consistent(), "{s:?}");
}

#[test]
fn without_the_pending_table_every_miss_is_an_app_call() {
    let (rt, calls, closed) = gated(SdfConfig {
        pending_table: false,
        ..cfg()
    });
    let mut stage = rt.stage();
    let mut sink = Collect::default();
    closed.store(true, Ordering::SeqCst);
    let frames: Vec<Vec<u8>> = (0..200).map(|i| frame((i % 4) as u8 + 1, 7)).collect();
    let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
    stage.process(0, &refs, &[], &mut sink);
    assert_eq!(stage.pending_flows(), 200);
    assert_eq!(stage.waiting_frames(), 0);
    closed.store(false, Ordering::SeqCst);
    assert!(stage.flush(&mut sink, Duration::from_secs(10)));
    let c = *stage.sdf_counters();
    assert_eq!(calls.load(Ordering::SeqCst), 200, "one app call per miss");
    assert_eq!(c.app_requests, 200);
    assert_eq!((c.misses, c.pending_waits, c.pending_resolved), (200, 0, 0));
    assert_eq!(c.drops.total(), 0);
    assert_eq!(sink.total(), 200);
    assert_eq!(sink.0[&1].len(), 50);
    // The decisions were cached all the same.
    stage.process(0, &refs, &[], &mut sink);
    assert_eq!(stage.sdf_counters().hits, 200);
    assert_eq!(calls.load(Ordering::SeqCst), 200);
    assert!(stage.counters().is_consistent());
}

#[test]
fn stage_counters_merge_what_every_stage_published_and_outlive_the_stages() {
    let (rt, _calls, _closed) = gated(cfg());
    let mut a = rt.stage();
    let mut b = rt.stage();
    let mut sink = Collect::default();
    let fa = frame(1, 7);
    let fb = frame(2, 7);
    a.process(0, &[&fa[..]], &[], &mut sink);
    assert!(a.flush(&mut sink, Duration::from_secs(10)));
    a.process(0, &[&fa[..], &fa[..]], &[], &mut sink);
    b.process(1, &[&fb[..]], &[], &mut sink);
    assert!(b.flush(&mut sink, Duration::from_secs(10)));
    assert_eq!(
        rt.stage_counters(),
        SdfCounters::default(),
        "nothing published yet"
    );
    a.publish();
    let c = rt.stage_counters();
    assert_eq!((c.hits, c.misses, c.app_requests), (2, 1, 1));
    // A dropped stage publishes its last counters, which stay.
    drop(b);
    let c = rt.stage_counters();
    assert_eq!((c.hits, c.misses, c.app_requests), (2, 2, 2));
    drop(a);
    assert_eq!(rt.stage_counters().misses, 2);
}

#[test]
fn hung_app_never_stalls_cached_flows_and_drops_are_counted() {
    let (rt, _calls, closed) = gated(SdfConfig {
        queue: 2,
        max_pending_flows: 8,
        pending_timeout: Duration::from_millis(100),
        ..cfg()
    });
    let mut stage = rt.stage();
    let mut sink = Collect::default();
    let cached = frame(1, 0);
    stage.process(0, &[&cached[..]], &[], &mut sink);
    assert!(stage.flush(&mut sink, Duration::from_secs(10)));
    closed.store(true, Ordering::SeqCst);
    // The app hangs on the next miss; the queue (2) and the pending table
    // (8) fill; cached frames keep going.
    for round in 0..20u8 {
        let new_flow = frame(100 + round, 0);
        let hit = frame(1, round);
        stage.process(0, &[&new_flow[..], &hit[..]], &[], &mut sink);
    }
    assert_eq!(sink.0[&1].len(), 21, "every cached frame went out at once");
    let c = *stage.sdf_counters();
    assert_eq!(c.hits, 20);
    assert!(c.drops.queue_full > 0, "{c:?}");
    std::thread::sleep(Duration::from_millis(150));
    stage.poll(&mut sink);
    let c = *stage.sdf_counters();
    assert_eq!(stage.pending_flows(), 0);
    assert_eq!(c.drops.app_timeout, c.app_requests - 1);
    assert_eq!(
        c.drops.queue_full + c.drops.pending_full + c.drops.app_timeout,
        20,
        "every new flow dropped, by a counted reason: {c:?}"
    );
    closed.store(false, Ordering::SeqCst);
    // The late answers are ignored and counted.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while stage.sdf_counters().late_replies == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
        stage.poll(&mut sink);
    }
    assert!(stage.sdf_counters().late_replies > 0);
    assert!(stage.counters().is_consistent());
}

#[test]
fn raising_app_drops_the_packet_counted_and_keeps_deciding() {
    let (rt, calls, _closed) = gated(cfg());
    let mut stage = rt.stage();
    let mut sink = Collect::default();
    let bad = frame(0xEE, 0);
    let good = frame(2, 0);
    let refs = [&bad[..], &bad[..], &good[..]];
    stage.process(0, &refs, &[], &mut sink);
    assert!(stage.flush(&mut sink, Duration::from_secs(10)));
    let c = *stage.sdf_counters();
    assert_eq!(
        c.drops.app_fault, 2,
        "the raising packet and the one waiting for it"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(sink.0[&2].len(), 1);
    let stats = rt.shutdown();
    assert_eq!(stats.app.drops.get(DropReason::AppPanic), 1);
}

#[test]
fn uncacheable_decisions_resubmit_waiting_frames_one_by_one() {
    // Sends every frame to port 1 with no marks: not cached, so each
    // frame of the flow must reach the app.
    struct Plain(Arc<AtomicU64>);
    impl App for Plain {
        fn name(&self) -> &str {
            "plain"
        }
        fn on_packet(&mut self, pkt: &mut InPkt, _: &mut Control<'_>) -> Result<(), AppError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(2));
            let mut out = pkt.new_out_pkt();
            out.add_destination(1);
            pkt.send(out, true)?;
            Ok(())
        }
    }
    let calls = Arc::new(AtomicU64::new(0));
    let rt = SdfRuntime::start(Box::new(Plain(calls.clone())), cfg()).unwrap();
    let mut stage = rt.stage();
    let mut sink = Collect::default();
    let f = frame(3, 3);
    stage.process(0, &[&f[..], &f[..], &f[..], &f[..]], &[], &mut sink);
    assert!(stage.flush(&mut sink, Duration::from_secs(10)));
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    assert_eq!(stage.sdf_counters().resubmitted, 3);
    assert_eq!(sink.0[&1].len(), 4);
}

#[test]
fn pipeline_l2_switch_matches_the_single_thread_switch() {
    let l2 = L2Config::default();
    let ports = [0u16, 1, 2, 3];
    let rt = SdfRuntime::start(
        Box::new(L2Switch::new(l2)),
        SdfConfig {
            ports: ports.to_vec(),
            ..SdfConfig::default()
        },
    )
    .unwrap();
    let mut stage = rt.stage();
    let mut sw = Switch::new(
        L2Switch::new(l2),
        nexthop_sdf::Config::default(),
        Ports::physical(&ports),
        true,
    )
    .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(29);
    let hosts: Vec<u16> = (0..16).map(|i| ports[i % 4]).collect();
    let mac = |i: usize| [2u8, 0, 0, 0, 0, i as u8];
    let eth = |d: [u8; 6], s: [u8; 6], fill: u8| {
        let mut f = vec![fill; 60];
        f[..6].copy_from_slice(&d);
        f[6..12].copy_from_slice(&s);
        f
    };
    let mut got = Collect::default();
    let mut want: BTreeMap<u16, Vec<Vec<u8>>> = BTreeMap::new();
    // Every host says hello first (each decided before the next), then
    // random unicast among them, in groups per ingress port.
    for (h, &p) in hosts.iter().enumerate() {
        let f = eth([0xff; 6], mac(h), 0);
        stage.process(p, &[&f[..]], &[], &mut got);
        assert!(stage.flush(&mut got, Duration::from_secs(10)));
        for e in sw.process(p, &f) {
            for q in e.ports {
                want.entry(q).or_default().push(e.bytes.clone());
            }
        }
    }
    for _ in 0..300 {
        let s = rng.gen_range(0..hosts.len());
        let group: Vec<Vec<u8>> = (0..rng.gen_range(1..40))
            .map(|_| eth(mac(rng.gen_range(0..hosts.len())), mac(s), rng.gen()))
            .collect();
        let refs: Vec<&[u8]> = group.iter().map(|f| &f[..]).collect();
        stage.process(hosts[s], &refs, &[], &mut got);
        assert!(stage.flush(&mut got, Duration::from_secs(10)));
        for f in &group {
            for e in sw.process(hosts[s], f) {
                for q in e.ports {
                    want.entry(q).or_default().push(e.bytes.clone());
                }
            }
        }
    }
    for v in got.0.values_mut().chain(want.values_mut()) {
        v.sort();
    }
    assert_eq!(got.0, want);
    let stats = rt.stats();
    assert!(stage.sdf_counters().hits > 1000);
    assert!(stats.cache.front_hits + stats.cache.wildcard_hits > 1000);
}

#[cfg(target_os = "linux")]
#[test]
fn engine_runs_the_sdf_stage_and_sends_decisions_while_idle() {
    use crate::engine::{Engine, EngineConfig, NoRefresh, Worker};
    use crate::live::{LivePorts, MemoryQueue, MemoryRx, MemoryTx, StopAfter, StopFlag};

    let (rt, calls, _closed) = gated(cfg());
    let rx = MemoryQueue::new();
    let txs: Vec<MemoryQueue> = (0..4).map(|_| MemoryQueue::new()).collect();
    for i in 0..40u8 {
        rx.push(frame(i % 8, 0));
    }
    let mut ports = LivePorts::new();
    ports.add_input(0, MemoryRx::new(rx));
    for (p, q) in txs.iter().enumerate() {
        ports.add_output(p as u16, MemoryTx::new(q.clone()));
    }
    let engine = Engine::new(EngineConfig {
        after: StopAfter {
            frames: None,
            duration: Some(Duration::from_millis(400)),
        },
        report_every: None,
    });
    let run = engine
        .run(
            vec![Worker::new(rt.stage(), ports)],
            &NoRefresh,
            &StopFlag::new(),
            |_| {},
        )
        .unwrap();
    // One group: 8 flows (equal headers) decided by the app, the other 32
    // frames waited
    // and were sent by the idle rounds.
    assert_eq!(calls.load(Ordering::SeqCst), 8);
    let sent: usize = txs.iter().map(|q| q.drain().len()).sum();
    assert_eq!(sent, 40);
    assert_eq!(run.merged.counters.forwarded, 40);
}

#[test]
fn drop_reason_names_are_the_serialized_field_names() {
    let d = SdfDrops {
        queue_full: 1,
        control_queue_full: 8,
        no_slice: 9,
        pending_full: 2,
        waiting_full: 3,
        app_timeout: 4,
        app_gone: 5,
        app_fault: 6,
        ttl_expired: 7,
    };
    let v = serde_json::to_value(d).unwrap();
    let named = d.named();
    assert_eq!(v.as_object().unwrap().len(), named.len());
    for (name, n) in named {
        assert_eq!(v[name], n, "{name}");
    }
    assert_eq!(named.iter().map(|(_, n)| n).sum::<u64>(), d.total());
}

/// Forwards a frame back out of the other port of its pair (0↔1, 2↔3, …),
/// marking the destination MAC and the ingress port; counts its calls;
/// records whether each frame it decided was ARP; blocks while `closed`.
struct Pairs {
    calls: Arc<AtomicU64>,
    closed: Arc<AtomicBool>,
    arp: Arc<std::sync::Mutex<Vec<bool>>>,
}

impl App for Pairs {
    fn name(&self) -> &str {
        "pairs"
    }

    fn on_packet(&mut self, pkt: &mut InPkt, _ctl: &mut Control<'_>) -> Result<(), AppError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        while self.closed.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        pkt.bytes(0, 6)?;
        let is_arp = pkt.field(96, 16)? == 0x0806;
        self.arp.lock().unwrap().push(is_arp);
        let port = pkt.mark_ingress() ^ 1;
        let mut out = pkt.new_out_pkt();
        out.add_destination(port);
        pkt.send(out, true)?;
        Ok(())
    }
}

struct PairsRig {
    calls: Arc<AtomicU64>,
    closed: Arc<AtomicBool>,
    arp: Arc<std::sync::Mutex<Vec<bool>>>,
}

impl PairsRig {
    fn new() -> PairsRig {
        PairsRig {
            calls: Arc::new(AtomicU64::new(0)),
            closed: Arc::new(AtomicBool::new(false)),
            arp: Arc::default(),
        }
    }

    fn app(&self) -> Box<dyn App> {
        Box::new(Pairs {
            calls: self.calls.clone(),
            closed: self.closed.clone(),
            arp: self.arp.clone(),
        })
    }
}

/// An Ethernet frame to `dst` (6 bytes from `d`) of EtherType `ethertype`.
fn eth_to(d: u32, ethertype: u16) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[..2].copy_from_slice(&[0x02, 0x00]);
    f[2..6].copy_from_slice(&d.to_be_bytes());
    f[6..12].copy_from_slice(&[0x02, 0xaa, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&ethertype.to_be_bytes());
    f
}

fn refs(frames: &[Vec<u8>]) -> Vec<&[u8]> {
    frames.iter().map(|f| &f[..]).collect()
}

#[test]
fn a_flood_in_one_slice_leaves_the_other_slices_entries_and_hits() {
    let rig = PairsRig::new();
    let cfg = SdfConfig {
        cache: Config {
            capacity: 64,
            ..Config::default()
        },
        ports: vec![0, 1, 2, 3, 5],
        ..SdfConfig::default()
    };
    let slices = vec![
        ("a:pairs:ports=0,1:share=16".parse().unwrap(), rig.app()),
        ("b:pairs:ports=2,3".parse().unwrap(), rig.app()),
    ];
    let rt = SdfRuntime::start_sliced(slices, cfg).unwrap();
    assert_eq!(rt.slice_names(), ["a", "b"]);
    assert_eq!(rt.slice_stats(0).unwrap().capacity, 16);
    assert_eq!(rt.slice_stats(1).unwrap().capacity, 48);
    let mut stage = rt.stage();
    let mut sink = Collect::default();
    // Slice b learns 8 flows, then hits them.
    let b: Vec<Vec<u8>> = (0..8).map(|d| eth_to(d, 0x0800)).collect();
    stage.process(2, &refs(&b), &[], &mut sink);
    assert!(stage.flush(&mut sink, Duration::from_secs(10)));
    stage.process(2, &refs(&b), &[], &mut sink);
    assert_eq!(stage.slice_counters()[1].hits, 8);
    // A flood of 1000 distinct flows in slice a.
    let flood: Vec<Vec<u8>> = (0..1000).map(|d| eth_to(1000 + d, 0x0800)).collect();
    for group in flood.chunks(50) {
        stage.process(0, &refs(group), &[], &mut sink);
        assert!(stage.flush(&mut sink, Duration::from_secs(10)));
    }
    let a = rt.slice_stats(0).unwrap();
    assert!(a.entries <= 16, "{a:?}");
    assert!(a.cache.evictions >= 1000 - 16, "{a:?}");
    // Slice b's entries are all still there: 8 more hits, no app call.
    stage.process(2, &refs(&b), &[], &mut sink);
    let c = stage.slice_counters().to_vec();
    assert_eq!(c[1].hits, 16);
    assert_eq!(c[1].app_requests, 8);
    assert_eq!(rt.slice_stats(1).unwrap().cache.evictions, 0);
    assert_eq!(c[0].misses, 1000);
    // Frames of a port no slice owns are dropped, counted.
    stage.process(5, &refs(&b), &[], &mut sink);
    assert_eq!(stage.sdf_counters().drops.no_slice, 8);
    assert_eq!(sink.0[&3].len(), 24, "slice b's frames leave on port 3");
    assert_eq!(sink.0[&1].len(), 1000);
    assert!(!sink.0.contains_key(&5) && !sink.0.contains_key(&4));
    stage.publish();
    let merged = rt.stage_counters();
    assert_eq!(merged.hits, c[0].hits + c[1].hits);
    assert_eq!(merged.misses, c[0].misses + c[1].misses);
    assert_eq!(rt.slice_counters(), c);
    let s = stage.counters();
    assert_eq!(s.frames_in, 8 * 4 + 1000);
    assert_eq!(s.dropped, 8);
    assert!(s.is_consistent(), "{s:?}");
}

#[test]
fn a_vlan_slice_takes_its_tagged_frames_from_any_port() {
    let rig = PairsRig::new();
    let cfg = SdfConfig {
        ports: vec![0, 1, 2, 3],
        ..SdfConfig::default()
    };
    let slices = vec![
        ("ports:pairs:ports=0,1".parse().unwrap(), rig.app()),
        ("v10:pairs:vlan=10".parse().unwrap(), rig.app()),
    ];
    let rt = SdfRuntime::start_sliced(slices, cfg).unwrap();
    let mut stage = rt.stage();
    let mut sink = Collect::default();
    let mut tagged = eth_to(7, 0x8100);
    tagged[14..16].copy_from_slice(&10u16.to_be_bytes());
    let mut other_vlan = tagged.clone();
    other_vlan[15] = 11;
    // Tagged 10 on port 0 and on port 2: slice v10; tagged 11 on port 0:
    // port 0's slice; tagged 11 on port 2: nobody's.
    stage.process(0, &[&tagged, &other_vlan], &[], &mut sink);
    stage.process(2, &[&tagged, &other_vlan], &[], &mut sink);
    assert!(stage.flush(&mut sink, Duration::from_secs(10)));
    let c = stage.slice_counters();
    assert_eq!(c[0].misses, 1);
    assert_eq!(c[1].misses, 2);
    assert_eq!(stage.sdf_counters().drops.no_slice, 1);
}

#[test]
fn bad_slice_layouts_are_refused() {
    let rig = PairsRig::new();
    let cfg = SdfConfig {
        ports: vec![0, 1],
        ..SdfConfig::default()
    };
    let two = |a: &str, b: &str| {
        vec![
            (a.parse::<SliceSpec>().unwrap(), rig.app()),
            (b.parse::<SliceSpec>().unwrap(), rig.app()),
        ]
    };
    for (a, b) in [
        ("a:x:ports=0", "b:x:ports=0"),
        ("a:x:ports=0", "a:x:ports=1"),
        ("a:x:ports=0", "b:x:ports=7"),
        ("a:x:ports=0:share=65536", "b:x:ports=1"),
    ] {
        let e = SdfRuntime::start_sliced(two(a, b), cfg.clone()).unwrap_err();
        assert!(matches!(e, SdfError::Slices(_)), "{a} {b}: {e}");
    }
}

#[test]
fn a_data_miss_storm_neither_drops_nor_delays_control_frames() {
    let rig = PairsRig::new();
    let rt = SdfRuntime::start(
        rig.app(),
        SdfConfig {
            ports: vec![0, 1],
            queue: 8,
            control_queue: 16,
            control_weight: 4,
            ..SdfConfig::default()
        },
    )
    .unwrap();
    let mut stage = rt.stage();
    let mut sink = Collect::default();
    rig.closed.store(true, Ordering::SeqCst);
    // The app takes one data miss and hangs on it.
    stage.process(0, &[&eth_to(0, 0x0800)], &[], &mut sink);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while rig.calls.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(rig.calls.load(Ordering::SeqCst), 1);
    // A storm of 100 distinct data misses fills the data queue (8).
    let storm: Vec<Vec<u8>> = (1..=100).map(|d| eth_to(d, 0x0800)).collect();
    stage.process(0, &refs(&storm), &[], &mut sink);
    // 20 distinct ARP frames: 16 fit the control queue.
    let arp: Vec<Vec<u8>> = (0..20).map(|d| eth_to(5000 + d, 0x0806)).collect();
    stage.process(0, &refs(&arp), &[], &mut sink);
    assert_eq!(rt.queued(0), Some((16, 8)), "the bounds hold");
    let c = *stage.sdf_counters();
    assert_eq!(c.drops.queue_full, 92);
    assert_eq!(c.drops.control_queue_full, 4);
    assert_eq!(c.control_requests, 16);
    rig.closed.store(false, Ordering::SeqCst);
    assert!(stage.flush(&mut sink, Duration::from_secs(10)));
    // Every queued control frame was answered (sent back out of port 1).
    assert_eq!(sink.0[&1].len(), 1 + 8 + 16);
    let order = rig.arp.lock().unwrap().clone();
    assert_eq!(order.len(), 25);
    // After the hung data miss: 4 control, 1 data, 4 control, 1 data, …
    let want: Vec<bool> = std::iter::once(false)
        .chain((0..4).flat_map(|_| [true, true, true, true, false]))
        .chain(std::iter::repeat_n(false, 4))
        .collect();
    assert_eq!(order, want);
    let st = rt.stats();
    assert_eq!((st.control_calls, st.data_calls), (16, 9));
    assert_eq!(rt.queued(0), Some((0, 0)));
}

#[test]
fn the_default_control_filter_is_arp_under_at_most_one_tag() {
    let f = ControlFilter::default();
    assert!(f.matches(&eth_to(1, 0x0806)));
    assert!(!f.matches(&eth_to(1, 0x0800)));
    let mut tagged = eth_to(1, 0x8100);
    tagged[16..18].copy_from_slice(&0x0806u16.to_be_bytes());
    assert!(f.matches(&tagged));
    assert!(!f.matches(&tagged[..17]));
    assert!(!f.matches(&[]));
    let own = ControlFilter {
        ethertypes: Vec::new(),
        dst_macs: vec![[0x02, 0, 0, 0, 0, 9]],
    };
    assert!(own.matches(&eth_to(9, 0x0800)));
    assert!(!own.matches(&eth_to(8, 0x0806)));
    assert!(!ControlFilter::none().matches(&eth_to(1, 0x0806)));
}

/// Byte 0 picks the behaviour, marked: 0 issues the state id `S` (kept in
/// `state`); 1 registers `S`; 2 removes `S`; each forwards to port 1.
/// Blocks while `closed` and counts its calls, as [`Gated`].
struct Stateful {
    calls: Arc<AtomicU64>,
    closed: Arc<AtomicBool>,
    state: Option<nexthop_sdf::StateId>,
}

impl App for Stateful {
    fn name(&self) -> &str {
        "stateful"
    }

    fn on_packet(&mut self, pkt: &mut InPkt, ctl: &mut Control<'_>) -> Result<(), AppError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        while self.closed.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut out = pkt.new_out_pkt();
        match pkt.field(0, 8)? {
            0 => self.state = Some(ctl.new_state_id()?),
            1 => {
                if let Some(s) = self.state {
                    out.register(s);
                }
            }
            _ => {
                if let Some(s) = self.state {
                    ctl.removed(s);
                }
            }
        }
        out.add_destination(1);
        pkt.send(out, true)?;
        Ok(())
    }
}

/// Wait until `calls` reaches `n` (the app took that many requests).
fn wait_calls(calls: &AtomicU64, n: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while calls.load(Ordering::SeqCst) < n {
        assert!(
            std::time::Instant::now() < deadline,
            "the app never took it"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_decision_whose_state_a_later_call_of_its_batch_removed_is_never_installed() {
    let calls = Arc::new(AtomicU64::new(0));
    let closed = Arc::new(AtomicBool::new(true));
    let app = Stateful {
        calls: calls.clone(),
        closed: closed.clone(),
        state: None,
    };
    let rt = SdfRuntime::start(Box::new(app), cfg()).unwrap();
    let mut stage = rt.stage();
    let mut sink = Collect::default();
    // The app takes the first request alone and blocks on it, so the
    // next three are queued meanwhile and decided as one batch: register
    // `S`, remove `S`, register `S` again (a removed id: not cached).
    let (issue, reg, rm) = (frame(0, 0), frame(1, 0), frame(2, 0));
    stage.process(0, &[&issue[..]], &[], &mut sink);
    wait_calls(&calls, 1);
    let reg2 = frame(1, 9);
    stage.process(0, &[&reg[..], &rm[..], &reg2[..]], &[], &mut sink);
    assert_eq!(rt.queued(0), Some((0, 3)), "one batch of three queued");
    closed.store(false, Ordering::SeqCst);
    assert!(stage.flush(&mut sink, Duration::from_secs(10)));
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    assert_eq!(sink.0[&1].len(), 4, "every decided frame went out");
    let stats = rt.stats();
    assert_eq!(
        stats.cache.not_cached_stale, 2,
        "both decisions registering the removed id were refused: {stats:?}"
    );
    assert_eq!(stats.app.install_errors, 0);
    // Cached: the issuing and the removing decisions; the registering
    // ones miss again and reach the app.
    assert_eq!(stats.entries, 2);
    stage.process(0, &[&issue[..], &rm[..], &reg[..]], &[], &mut sink);
    assert!(stage.flush(&mut sink, Duration::from_secs(10)));
    let c = *stage.sdf_counters();
    assert_eq!((c.hits, c.misses), (2, 5), "{c:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 5);
}

#[test]
fn a_batch_larger_than_the_queue_room_queues_what_fits_and_counts_the_rest() {
    let (rt, calls, closed) = gated(SdfConfig { queue: 4, ..cfg() });
    let mut stage = rt.stage();
    let mut sink = Collect::default();
    closed.store(true, Ordering::SeqCst);
    let first = frame(4, 0);
    stage.process(0, &[&first[..]], &[], &mut sink);
    wait_calls(&calls, 1);
    // Ten new flows, the first with a second frame waiting for it; the
    // queue has room for four: the first four flows go (five frames), the
    // last six are dropped as full.
    let flows: Vec<Vec<u8>> = (0..10u8).map(|i| frame(8 + i, 0)).collect();
    let mut refs: Vec<&[u8]> = flows.iter().map(|f| &f[..]).collect();
    refs.insert(1, &flows[0][..]);
    stage.process(0, &refs, &[], &mut sink);
    assert_eq!(rt.queued(0), Some((0, 4)));
    let c = *stage.sdf_counters();
    assert_eq!((c.app_requests, c.pending_waits), (5, 1), "{c:?}");
    assert_eq!(c.drops.queue_full, 6);
    closed.store(false, Ordering::SeqCst);
    assert!(stage.flush(&mut sink, Duration::from_secs(10)));
    assert_eq!(calls.load(Ordering::SeqCst), 5);
    assert_eq!(
        sink.total(),
        6,
        "the first, four flows and the waiting frame"
    );
    assert_eq!(stage.pending_flows(), 0);
    assert_eq!(stage.waiting_frames(), 0);
    assert!(stage.counters().is_consistent());

    // The queue full again, a refused flow's waiting frames go with it.
    closed.store(true, Ordering::SeqCst);
    let hold = frame(30, 0);
    stage.process(0, &[&hold[..]], &[], &mut sink);
    wait_calls(&calls, 6);
    let more: Vec<Vec<u8>> = (0..5u8).map(|i| frame(40 + i, 0)).collect();
    let mut refs: Vec<&[u8]> = more.iter().map(|f| &f[..]).collect();
    refs.push(&more[4][..]);
    refs.push(&more[4][..]);
    stage.process(0, &refs, &[], &mut sink);
    let c = *stage.sdf_counters();
    assert_eq!(
        c.drops.queue_full,
        6 + 3,
        "the fifth flow and its two waiting"
    );
    assert_eq!(stage.waiting_frames(), 0);
    closed.store(false, Ordering::SeqCst);
    assert!(stage.flush(&mut sink, Duration::from_secs(10)));
    assert!(stage.counters().is_consistent());
}

#[test]
fn each_stage_gets_its_own_answers_when_one_app_batch_holds_several_stages_requests() {
    let (rt, calls, closed) = gated(cfg());
    let mut stages: Vec<SdfStage> = (0..3).map(|_| rt.stage()).collect();
    let mut sinks: Vec<Collect> = (0..3).map(|_| Collect::default()).collect();
    // The app is stuck on the first request while the three stages hand
    // theirs over: the next batch it takes mixes the stages' requests.
    closed.store(true, Ordering::SeqCst);
    for (k, stage) in stages.iter_mut().enumerate() {
        // Stage k: flows whose byte 0 is 4j + k + 1 (port (k + 1) % 4).
        let frames: Vec<Vec<u8>> = (0..10u8).map(|j| frame(4 * j + k as u8 + 1, 9)).collect();
        let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
        stage.process(0, &refs, &[], &mut sinks[k]);
    }
    closed.store(false, Ordering::SeqCst);
    for (stage, sink) in stages.iter_mut().zip(sinks.iter_mut()) {
        assert!(stage.flush(sink, Duration::from_secs(10)));
    }
    assert_eq!(calls.load(Ordering::SeqCst), 30);
    for (k, (stage, sink)) in stages.iter().zip(&sinks).enumerate() {
        let port = ((k + 1) % 4) as u16;
        assert_eq!(sink.total(), 10, "stage {k}: its 10 answers, no other's");
        let got: Vec<u8> = sink.0[&port].iter().map(|f| f[0]).collect();
        let want: Vec<u8> = (0..10u8).map(|j| 4 * j + k as u8 + 1).collect();
        assert_eq!(got, want, "stage {k}");
        assert_eq!(stage.sdf_counters().late_replies, 0);
    }
}

#[test]
fn lock_spinning_waits_for_a_holder_past_its_spin_and_takes_a_poisoned_lock() {
    let m = Arc::new(Mutex::new(0u32));
    // Held for far longer than the spin: the waiter sleeps on the lock
    // and gets it once the holder lets go.
    let held = lock(&m);
    let m2 = m.clone();
    let waiter = std::thread::spawn(move || {
        let mut g = lock_spinning(&m2);
        *g += 1;
    });
    std::thread::sleep(LOCK_SPIN * 50);
    assert_eq!(*held, 0, "the waiter cannot have it yet");
    drop(held);
    waiter.join().unwrap();
    assert_eq!(*lock(&m), 1);
    // A thread that panicked holding it: the value is taken as it is.
    let m3 = m.clone();
    let _ = std::thread::spawn(move || {
        let _g = m3.lock().unwrap();
        panic!("poison it");
    })
    .join();
    assert!(m.is_poisoned());
    assert_eq!(*lock_spinning(&m), 1);
}
