//! The engine driven over in-memory ports: no sockets, no root.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nexthop_othello::fib::{Action, ActionTable, ConciseFib, KeyType};
use nexthop_othello::{Config, Query};

use super::*;
use crate::live::{MemoryQueue, MemoryRx, MemoryTx, StopReason};
use crate::pipeline::{Pipeline, PipelineConfig};

const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const B: [u8; 6] = [2, 0, 0, 0, 0, 2];
const D: [u8; 6] = [2, 0, 0, 0, 0, 4];
const UNKNOWN: [u8; 6] = [2, 0, 0, 0, 0, 9];

/// A 60-byte Ethernet frame to `dst`, its last byte `tag`.
fn frame(dst: [u8; 6], tag: u8) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&[2, 0, 0, 0, 0, 0xee, 0x88, 0xb5]);
    f.resize(59, 0);
    f.push(tag);
    f
}

/// A followed snapshot as a follower would publish it.
#[derive(Clone)]
struct Snap(Arc<(Query, ActionTable)>);

impl FibSnapshot for Snap {
    type Names = Query;
    fn names(&self) -> &Query {
        &self.0 .0
    }
    fn actions(&self) -> &ActionTable {
        &self.0 .1
    }
    fn same_snapshot(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

fn snap(routes: &[([u8; 6], Action)]) -> Snap {
    let routes: Vec<_> = routes
        .iter()
        .enumerate()
        .map(|(i, (k, a))| (i + 1, *k, a.clone()))
        .collect();
    let cfg = Config {
        check_bits: 16,
        ..Config::default()
    };
    let fib = ConciseFib::build(cfg, &routes).unwrap();
    Snap(Arc::new((
        fib.othello().export(0),
        fib.action_table().clone(),
    )))
}

fn pipeline(s: &Snap) -> Pipeline<LiveTable<'static, Snap>> {
    Pipeline::new(
        LiveTable::Followed(s.clone()),
        s.actions(),
        KeyType::Mac,
        PipelineConfig::default(),
    )
    .unwrap()
}

/// A safety net: no test may hang if its stop never comes.
const LONGEST: Duration = Duration::from_secs(20);

fn engine(report_every: Option<Duration>) -> Engine {
    Engine::new(EngineConfig {
        after: StopAfter {
            duration: Some(LONGEST),
            frames: None,
        },
        report_every,
    })
}

/// Wait until `f` holds (or the safety net passes).
fn wait_for(what: &str, f: impl Fn() -> bool) {
    let end = Instant::now() + LONGEST;
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn two_workers_reports_merge_port_by_port() {
    let s = snap(&[
        (A, Action::Port(1)),
        (B, Action::Port(2)),
        (D, Action::Port(3)),
    ]);
    let (out1, out2) = (MemoryQueue::new(), MemoryQueue::new());
    let mut inputs = Vec::new();
    let mut workers = Vec::new();
    for _ in 0..2 {
        let q = MemoryQueue::new();
        let mut ports = LivePorts::new();
        ports.add_input(0, MemoryRx::new(q.clone()));
        ports.add_output(1, MemoryTx::new(out1.clone()));
        ports.add_output(2, MemoryTx::new(out2.clone()));
        // Port 3 has no output: its frames are refused.
        inputs.push(q);
        workers.push(Worker::new(pipeline(&s), ports));
    }
    // Worker 0: 3 to port 1, 1 to port 2, 1 to port 3.
    for (i, dst) in [A, A, A, B, D].into_iter().enumerate() {
        inputs[0].push(frame(dst, i as u8));
    }
    // Worker 1: 2 to port 2, 2 to port 3, 1 unknown (dropped).
    for (i, dst) in [B, B, D, D, UNKNOWN].into_iter().enumerate() {
        inputs[1].push(frame(dst, 100 + i as u8));
    }
    let stop = StopFlag::new();
    let mut last_report: Option<(Counters, PortStats)> = None;
    let run = engine(Some(Duration::from_millis(5)))
        .run(workers, &NoRefresh, &stop, |r| {
            last_report = Some((r.merged.counters.clone(), r.merged.ports.clone()));
            if r.merged.counters.frames_in == 10 {
                stop.raise();
            }
        })
        .unwrap();

    assert_eq!(run.workers.len(), 2);
    let per: Vec<u64> = run.workers.iter().map(|r| r.counters.frames_in).collect();
    assert_eq!(per, [5, 5]);
    let c = &run.merged.counters;
    assert_eq!(c.frames_in, 10);
    assert_eq!(c.rx(0).frames, 10);
    assert_eq!((c.tx(1).frames, c.tx(2).frames, c.tx(3).frames), (3, 3, 3));
    assert_eq!((c.forwarded, c.dropped, c.misses), (9, 1, 1));
    assert_eq!(run.merged.ports.tx_failed, vec![(3, 3)]);
    assert_eq!(run.merged.stopped_by, StopReason::Signal);
    assert_eq!((out1.len(), out2.len()), (3, 3));
    // The merged report the caller saw adds both workers port by port.
    let (rc, rp) = last_report.expect("a merged report");
    assert_eq!(rc.frames_in, 10);
    assert_eq!((rc.tx(1).frames, rc.tx(2).frames), (3, 3));
    assert_eq!(rp.tx_failed, vec![(3, 3)]);
    assert_eq!(run.swaps, 0);
}

#[test]
fn a_refreshed_table_is_swapped_in_between_bursts() {
    let first = snap(&[(A, Action::Port(1))]);
    let second = snap(&[(A, Action::Port(2)), (B, Action::Port(1))]);
    let published = Mutex::new(first.clone());
    let follow = Follow(|| Some(lock(&published).clone()));
    let (rx, out1, out2) = (MemoryQueue::new(), MemoryQueue::new(), MemoryQueue::new());
    let mut ports = LivePorts::new();
    ports.add_input(0, MemoryRx::new(rx.clone()));
    ports.add_output(1, MemoryTx::new(out1.clone()));
    ports.add_output(2, MemoryTx::new(out2.clone()));
    let stop = StopFlag::new();
    let run = std::thread::scope(|scope| {
        scope.spawn(|| {
            for i in 0..5 {
                rx.push(frame(A, i));
            }
            wait_for("the first burst", || out1.len() == 5);
            *lock(&published) = second.clone();
            for i in 5..10 {
                rx.push(frame(A, i));
            }
            wait_for("the second burst", || out2.len() == 5);
            stop.raise();
        });
        engine(None)
            .run(
                vec![Worker::new(pipeline(&first), ports)],
                &follow,
                &stop,
                |_| {},
            )
            .unwrap()
    });
    let tags = |q: &MemoryQueue| q.drain().iter().map(|f| f[59]).collect::<Vec<_>>();
    assert_eq!(tags(&out1), [0, 1, 2, 3, 4], "the first table's port");
    assert_eq!(tags(&out2), [5, 6, 7, 8, 9], "the second table's port");
    assert_eq!(run.swaps, 1, "swapped once, not per group");
    let c = &run.merged.counters;
    assert_eq!((c.tx(1).frames, c.tx(2).frames), (5, 5));
}

#[test]
fn a_swapped_table_with_a_port_without_output_counts_its_frames_refused() {
    let first = snap(&[(A, Action::Port(1))]);
    let second = snap(&[(A, Action::Port(7))]);
    let published = Mutex::new(first.clone());
    let follow = Follow(|| Some(lock(&published).clone()));
    let (rx, out1) = (MemoryQueue::new(), MemoryQueue::new());
    let mut ports = LivePorts::new();
    ports.add_input(0, MemoryRx::new(rx.clone()));
    ports.add_output(1, MemoryTx::new(out1.clone()));
    *lock(&published) = second;
    rx.push(frame(A, 0));
    rx.push(frame(A, 1));
    let e = Engine::new(EngineConfig {
        after: StopAfter {
            duration: Some(LONGEST),
            frames: Some(2),
        },
        report_every: None,
    });
    let run = e
        .run(
            vec![Worker::new(pipeline(&first), ports)],
            &follow,
            &StopFlag::new(),
            |_| {},
        )
        .unwrap();
    assert_eq!(run.merged.stopped_by, StopReason::Frames);
    assert_eq!(run.merged.ports.tx_failed, vec![(7, 2)]);
    assert!(out1.is_empty());
}

#[test]
fn the_stop_flag_ends_every_worker() {
    let s = snap(&[(A, Action::Port(1))]);
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let mut ports = LivePorts::new();
            ports.add_input(0, MemoryRx::new(MemoryQueue::new()));
            Worker::new(pipeline(&s), ports)
        })
        .collect();
    let stop = StopFlag::new();
    let t = Instant::now();
    let run = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(30));
            stop.raise();
        });
        engine(Some(Duration::from_millis(5)))
            .run(workers, &NoRefresh, &stop, |_| {})
            .unwrap()
    });
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(run.workers.len(), 3);
    for r in &run.workers {
        assert_eq!(r.stopped_by, StopReason::Signal);
        assert_eq!(r.counters.frames_in, 0);
    }
    assert_eq!(run.merged.mpps(), 0.0);
}

#[test]
fn a_worker_that_fails_stops_the_others_and_its_error_returns() {
    let s = snap(&[(A, Action::Port(1))]);
    let workers: Vec<_> = (0..2)
        .map(|w| {
            let mut ports = LivePorts::new();
            ports.add_input(0, MemoryRx::new(MemoryQueue::new()));
            let mut worker = Worker::new(pipeline(&s), ports);
            // Beyond any CPU set: pinning worker 1 fails.
            worker.cpu = (w == 1).then_some(1 << 20);
            worker
        })
        .collect();
    let stop = StopFlag::new();
    let t = Instant::now();
    let e = engine(None).run(workers, &NoRefresh, &stop, |_| {});
    assert!(t.elapsed() < LONGEST / 2, "{:?}", t.elapsed());
    match e {
        Err(err @ EngineError::Pin { worker: 1, .. }) => {
            assert!(
                err.to_string()
                    .starts_with("pinning worker-1 to CPU 1048576: "),
                "{err}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(stop.is_raised());
}

#[test]
fn a_run_without_workers_is_refused() {
    let e = Engine::default().run::<Pipeline<LiveTable<'static, Snap>>, _>(
        Vec::new(),
        &NoRefresh,
        &StopFlag::new(),
        |_| {},
    );
    assert!(matches!(e, Err(EngineError::NoWorkers)));
}

#[test]
fn swap_in_skips_the_snapshot_already_held() {
    let first = snap(&[(A, Action::Port(1))]);
    let mut p = pipeline(&first);
    assert!(!swap_in(&mut p, first.clone()));
    let second = snap(&[(A, Action::Port(2)), (B, Action::Port(3))]);
    assert!(swap_in(&mut p, second.clone()));
    assert_eq!(p.ports(), [2, 3], "the new action table resolves");
    assert!(!swap_in(&mut p, second));
}
