//! Controller and follower on loopback: convergence, late joiners,
//! controller restarts, and rejection of corrupted, foreign, replayed and
//! out-of-order frames (with a scripted fake controller).

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{action, fib, key, mac, wait_until, Fake, RawFollower, WAIT};
use nexthop_control::frame::{encode_parts, MsgType};
use nexthop_control::message::delta_payload;
use nexthop_control::{
    AuthKey, BatchDelta, Controller, ControllerConfig, FibFollower, FollowerConfig, Message,
    RejectReason, FEATURE_DELTA_BATCH,
};
use nexthop_othello::fib::{Action, ConciseFib, RouteChange};
use nexthop_othello::{Delta, Query};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// One delta per change: these tests count and frame deltas one by one
/// (merged deltas, the default, have their own tests below).
fn ctl_cfg() -> ControllerConfig {
    ControllerConfig {
        log: false,
        changes_per_delta: 1,
        ..ControllerConfig::default()
    }
}

fn merged_cfg(changes_per_delta: usize) -> ControllerConfig {
    ControllerConfig {
        log: false,
        changes_per_delta,
        ..ControllerConfig::default()
    }
}

fn follower_cfg(addr: SocketAddr, id: &str) -> FollowerConfig {
    FollowerConfig {
        backoff_min: Duration::from_millis(5),
        backoff_max: Duration::from_millis(100),
        log: false,
        ..FollowerConfig::new(addr, id)
    }
}

/// A random valid change against `present` (names 0..universe).
fn random_change(
    rng: &mut Xoshiro256PlusPlus,
    present: &mut std::collections::HashSet<u64>,
    universe: u64,
) -> RouteChange<[u8; 6]> {
    let i = rng.gen_range(0..universe);
    let a = action(rng.gen());
    match (present.contains(&i), rng.gen_range(0..3)) {
        (false, _) => {
            present.insert(i);
            RouteChange::Add(mac(i), a)
        }
        (true, 0) => {
            present.remove(&i);
            RouteChange::Delete(mac(i))
        }
        (true, _) => RouteChange::Set(mac(i), a),
    }
}

/// Every name the controller holds has the same action in the follower,
/// and the follower's structure is byte-identical to the controller's.
fn assert_converged(c: &Controller<[u8; 6]>, f: &FibFollower, universe: u64) {
    let t = f.table().expect("follower has a table");
    c.with_fib(|fib| {
        assert_eq!(t.query().to_snapshot(), fib.othello().snapshot(0));
        assert_eq!(t.actions(), fib.action_table());
        let mut checked = 0;
        for i in 0..universe {
            if let Some(a) = fib.get(&mac(i)) {
                assert_eq!(t.lookup(&mac(i)), Some(a), "name {i}");
                checked += 1;
            }
        }
        assert_eq!(checked, fib.len());
    });
}

fn wait_version(c: &Controller<[u8; 6]>, f: &FibFollower, snapshots_min: u64) {
    let v = c.version();
    let ok = f.wait_for(WAIT, |s| s.snapshots >= snapshots_min)
        && wait_until(|| {
            f.table().is_some_and(|t| {
                c.with_fib(|fib| t.query().to_snapshot() == fib.othello().snapshot(0))
            })
        });
    assert!(
        ok,
        "follower did not converge to version {v}: {:?}",
        f.stats()
    );
}

#[test]
fn follower_converges_after_snapshot_and_10000_changes() {
    let n = 2_000;
    let universe = 8_000;
    let c = Controller::start(fib(n), key(), ctl_cfg()).expect("controller");
    let f = FibFollower::start(key(), follower_cfg(c.local_addr(), "fw-a")).expect("follower");
    assert!(f.wait_for(WAIT, |s| s.snapshots == 1));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let mut present: std::collections::HashSet<u64> = (0..n).collect();
    let changes: Vec<_> = (0..10_000)
        .map(|_| random_change(&mut rng, &mut present, universe))
        .collect();
    // In batches of 100, as a controller would receive them.
    let mut rebuilds = 0;
    for chunk in changes.chunks(100) {
        rebuilds += c.apply_changes(chunk).expect("apply").rebuilds;
    }
    assert_eq!(c.version(), 10_000);
    assert!(f.wait_for(WAIT, |s| s.deltas == 10_000), "{:?}", f.stats());
    assert_converged(&c, &f, universe);
    let s = f.stats();
    assert_eq!(s.total_rejects(), 0, "{s:?}");
    assert_eq!(s.snapshots, 1 + rebuilds as u64);
    assert!(wait_until(|| c.stats().acked >= 10_001));
    // Batches of 100 go out in one write and the follower acknowledges what
    // it has applied once per burst, not once per frame.
    let cs = c.stats();
    assert!(cs.acks < cs.acked, "no Ack was coalesced: {cs:?}");
    // The follower offered batches: each call of 100 went out as DeltaBatch
    // frames, and every delta in them was counted on both sides.
    assert_eq!(cs.deltas_sent, 10_000, "{cs:?}");
    assert!(cs.batches_sent >= 100, "{cs:?}");
    assert!(s.batches >= 100 && s.batches <= cs.batches_sent, "{s:?}");
    // Every delta was timed from apply to the follower's Ack.
    let p = c.propagation();
    assert_eq!(p.samples, 10_000, "{p:?}");
    // A change crosses threads and a TCP round trip: never under 1 us.
    assert!(p.median >= Duration::from_micros(1), "{p:?}");
    assert!(p.median <= p.p99 && p.p99 <= p.max, "{p:?}");
    assert!(p.max < WAIT, "{p:?}");
    c.reset_propagation();
    assert_eq!(c.propagation().samples, 0);

    // Propagation latency of single changes: apply -> applied in the follower.
    let mut lat = Vec::new();
    for _ in 0..500 {
        let ch = random_change(&mut rng, &mut present, universe);
        let before = f.stats().deltas;
        let t = Instant::now();
        c.apply_changes(&[ch]).expect("apply");
        assert!(f.wait_for(WAIT, |s| s.deltas > before));
        lat.push(t.elapsed());
    }
    lat.sort();
    assert!(wait_until(|| c.propagation().samples == 500));
    let p = c.propagation();
    // The controller's clock runs from apply to the Ack, after the follower
    // applied the delta; the test's from before apply to seeing it applied
    // (polled): the same order of magnitude.
    assert!(
        p.max >= lat[0] / 4,
        "controller {p:?} vs test min {:?}",
        lat[0]
    );
    eprintln!("controller-side propagation over 500 single changes: {p:?}");
    eprintln!(
        "loopback propagation latency over {} changes: median {:?}, p99 {:?}, max {:?}",
        lat.len(),
        lat[lat.len() / 2],
        lat[lat.len() * 99 / 100],
        lat[lat.len() - 1]
    );
    assert_converged(&c, &f, universe);
    f.stop();
    c.shutdown();
}

#[test]
fn late_joining_follower_gets_snapshot_then_deltas() {
    let c = Controller::start(fib(500), key(), ctl_cfg()).expect("controller");
    let early = FibFollower::start(key(), follower_cfg(c.local_addr(), "early")).expect("f");
    assert!(early.wait_for(WAIT, |s| s.snapshots == 1));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let mut present: std::collections::HashSet<u64> = (0..500).collect();
    let batch: Vec<_> = (0..300)
        .map(|_| random_change(&mut rng, &mut present, 2000))
        .collect();
    c.apply_changes(&batch).expect("apply");
    let late = FibFollower::start(key(), follower_cfg(c.local_addr(), "late")).expect("f");
    assert!(late.wait_for(WAIT, |s| s.snapshots == 1));
    assert_eq!(
        late.stats().deltas,
        0,
        "the snapshot holds the earlier changes"
    );
    let batch: Vec<_> = (0..200)
        .map(|_| random_change(&mut rng, &mut present, 2000))
        .collect();
    c.apply_changes(&batch).expect("apply");
    assert!(
        late.wait_for(WAIT, |s| s.deltas == 200),
        "{:?}",
        late.stats()
    );
    assert!(
        early.wait_for(WAIT, |s| s.deltas == 500),
        "{:?}",
        early.stats()
    );
    assert_converged(&c, &late, 2000);
    assert_converged(&c, &early, 2000);
    assert_eq!(c.stats().active, 2);
    late.stop();
    early.stop();
    c.shutdown();
}

#[test]
fn controller_restart_follower_reconnects_and_converges() {
    let c = Controller::start(fib(300), key(), ctl_cfg()).expect("controller");
    let addr = c.local_addr();
    let f = FibFollower::start(key(), follower_cfg(addr, "fw")).expect("follower");
    assert!(f.wait_for(WAIT, |s| s.snapshots == 1));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let mut present: std::collections::HashSet<u64> = (0..300).collect();
    let batch: Vec<_> = (0..100)
        .map(|_| random_change(&mut rng, &mut present, 1000))
        .collect();
    c.apply_changes(&batch).expect("apply");
    assert!(f.wait_for(WAIT, |s| s.deltas == 100));
    let state = c.with_fib(|fib| (fib.save_control(), fib.action_table().to_text()));
    c.shutdown();

    // The forwarder keeps its table while the controller is away.
    std::thread::sleep(Duration::from_millis(50));
    assert!(f.table().is_some());

    // Restart on the same address with the saved state, changed further.
    let restored = ConciseFib::<[u8; 6]>::load_control(&state.0, &state.1).expect("load");
    let c2 = Controller::start(
        restored,
        key(),
        ControllerConfig {
            listen: addr,
            ..ctl_cfg()
        },
    )
    .expect("restart");
    let batch: Vec<_> = (0..100)
        .map(|_| random_change(&mut rng, &mut present, 1000))
        .collect();
    c2.apply_changes(&batch).expect("apply");
    wait_version(&c2, &f, 2);
    assert!(f.stats().connects >= 2);
    assert_converged(&c2, &f, 1000);
    f.stop();
    c2.shutdown();
}

#[test]
fn wrong_key_follower_gets_nothing() {
    let c = Controller::start(fib(100), key(), ctl_cfg()).expect("controller");
    let other = AuthKey::new(b"a-different-secret-0123456789").expect("key");
    let f = FibFollower::start(other, follower_cfg(c.local_addr(), "intruder")).expect("f");
    assert!(wait_until(|| c.stats().rejects >= 1));
    assert!(f.table().is_none());
    f.stop();
    c.shutdown();
}

#[test]
fn bad_replayed_and_out_of_order_frames_leave_the_table_unchanged() {
    let mut fib = fib(200);
    let snap = Message::Snapshot {
        snapshot: fib.othello().snapshot(0),
        actions: fib.action_table().to_text(),
    };
    let gen = fib.othello().meta().generation;
    let mut deltas = Vec::new();
    for i in 0..6u64 {
        let before = fib.action_table().len();
        let ch = fib
            .insert(mac(1000 + i), &Action::Port(100 + i as u16))
            .expect("insert");
        let mut new_actions = String::new();
        for (id, a) in fib.action_table().iter().skip(before) {
            new_actions.push_str(&format!("{id} {a}\n"));
        }
        let delta = fib.othello().delta(&ch, 0);
        assert!(matches!(delta, Delta::Ops { .. }));
        deltas.push(Message::Delta { delta, new_actions });
    }

    let mut fake = Fake::new();
    let mut cfg = follower_cfg(fake.addr(), "victim");
    cfg.backoff_max = Duration::from_millis(20);
    let f = FibFollower::start(key(), cfg).expect("follower");
    let h = fake.accept();
    assert_eq!((h.forwarder_id.as_str(), h.last_seq), ("victim", 0));
    let s1 = fake.frame(&snap, 1, gen);
    fake.send(&s1);
    let d1 = fake.frame(&deltas[0], 2, gen);
    fake.send(&d1);
    assert!(f.wait_for(WAIT, |s| s.deltas == 1));
    let bytes = || f.table().expect("table").query().to_snapshot();
    let mut want = bytes();

    // Replay of an applied frame: ignored, connection kept.
    fake.send(&d1);
    assert!(f.wait_for(WAIT, |s| s.rejects(RejectReason::Replay) == 1));
    assert_eq!(bytes(), want);
    let d2 = fake.frame(&deltas[1], 3, gen);
    fake.send(&d2);
    assert!(f.wait_for(WAIT, |s| s.deltas == 2));
    assert_ne!(bytes(), want);
    want = bytes();
    assert_eq!(
        f.table().expect("table").lookup(&mac(1001)),
        Some(&Action::Port(101))
    );

    // A gap: rejected, the follower asks for a resync and skips deltas
    // until the snapshot that answers it.
    let gap = fake.frame(&deltas[2], 5, gen);
    fake.send(&gap);
    let h = fake.read_hello();
    assert_eq!((h.last_seq, h.last_generation), (3, gen));
    assert_eq!(f.stats().rejects(RejectReason::OutOfOrder), 1);
    assert_eq!(bytes(), want);
    let d = fake.frame(&deltas[3], 6, gen);
    fake.send(&d);
    assert!(f.wait_for(WAIT, |s| s.skipped == 1));
    assert_eq!(bytes(), want);
    let resync = fake.frame(&snap, 7, gen);
    fake.send(&resync);
    assert!(f.wait_for(WAIT, |s| s.snapshots == 2));
    // The resync snapshot is the older state the fake holds.
    let d = fake.frame(&deltas[0], 8, gen);
    fake.send(&d);
    assert!(f.wait_for(WAIT, |s| s.deltas == 3));
    want = bytes();

    // Bit flips in the magic, the sequence number, the payload and the tag,
    // and a frame under another key: each rejected, the table unchanged,
    // the follower reconnects and says what it has.
    let other = AuthKey::new(b"the-wrong-key-0123456789abcdef").expect("key");
    let mut seq = 9;
    let cases: Vec<(Vec<u8>, RejectReason)> = {
        let good = fake.frame(&deltas[4], seq, gen);
        let flip = |i: usize, bit: u8| {
            let mut b = good.clone();
            b[i] ^= 1 << bit;
            b
        };
        let last = good.len() - 1;
        vec![
            (flip(1, 0), RejectReason::Malformed),
            (flip(17, 3), RejectReason::BadMac),
            (flip(40, 5), RejectReason::BadMac),
            (flip(last, 7), RejectReason::BadMac),
            (
                encode_parts(
                    &other,
                    MsgType::Delta,
                    fake.session,
                    seq,
                    gen,
                    &deltas[4].encode(),
                ),
                RejectReason::BadMac,
            ),
        ]
    };
    let mut expected = f.stats().rejects;
    for (bad, reason) in cases {
        fake.send(&bad);
        expected[RejectReason::ALL
            .iter()
            .position(|&r| r == reason)
            .expect("reason")] += 1;
        let h = fake.accept();
        assert_eq!(h.last_generation, gen);
        assert_eq!(f.stats().rejects, expected, "{reason:?}");
        assert_eq!(bytes(), want, "{reason:?} changed the table");
        // New connection: snapshot first again.
        seq = 1;
        let s = fake.frame(&snap, seq, gen);
        fake.send(&s);
        assert!(wait_until(|| f.stats().last_seq == 1));
        want = bytes();
    }

    // A delta for another generation passes the MAC but not the table:
    // rejected, resync requested, table unchanged.
    let stale = match &deltas[5] {
        Message::Delta {
            delta: Delta::Ops { ops, .. },
            new_actions,
        } => Message::Delta {
            delta: Delta::Ops {
                generation: gen + 1,
                ops: ops.clone(),
            },
            new_actions: new_actions.clone(),
        },
        _ => unreachable!("deltas are ops"),
    };
    let b = fake.frame(&stale, 2, gen + 1);
    fake.send(&b);
    let _ = fake.read_hello();
    assert_eq!(f.stats().rejects(RejectReason::Apply), 1);
    assert_eq!(bytes(), want);
    f.stop();
}

/// A random batch of `n` changes applied to a fresh FIB of `names` names.
fn random_batch(
    rng: &mut Xoshiro256PlusPlus,
    present: &mut std::collections::HashSet<u64>,
    n: usize,
    universe: u64,
) -> Vec<RouteChange<[u8; 6]>> {
    (0..n)
        .map(|_| random_change(rng, present, universe))
        .collect()
}

#[test]
fn follower_without_batches_gets_delta_frames_and_converges() {
    let c = Controller::start(fib(1_000), key(), ctl_cfg()).expect("controller");
    let cfg = FollowerConfig {
        delta_batches: false,
        ..follower_cfg(c.local_addr(), "old-style")
    };
    let f = FibFollower::start(key(), cfg).expect("follower");
    assert!(f.wait_for(WAIT, |s| s.snapshots == 1));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(21);
    let mut present: std::collections::HashSet<u64> = (0..1_000).collect();
    for _ in 0..20 {
        let b = random_batch(&mut rng, &mut present, 100, 4_000);
        c.apply_changes(&b).expect("apply");
    }
    assert!(f.wait_for(WAIT, |s| s.deltas == 2_000), "{:?}", f.stats());
    assert_converged(&c, &f, 4_000);
    assert!(wait_until(|| c.stats().acked >= 2_001));
    let (cs, s) = (c.stats(), f.stats());
    assert_eq!((cs.deltas_sent, cs.batches_sent), (2_000, 0), "{cs:?}");
    assert_eq!((s.batches, s.total_rejects()), (0, 0), "{s:?}");
    assert_eq!(c.propagation().samples, 2_000);
    f.stop();
    c.shutdown();
}

#[test]
fn controller_sends_delta_batches_only_to_followers_that_offer_them() {
    let c = Controller::start(fib(500), key(), ctl_cfg()).expect("controller");
    let mut old = RawFollower::with_snapshot(c.local_addr(), 0);
    let mut new = RawFollower::with_snapshot(c.local_addr(), FEATURE_DELTA_BATCH | 0x100);
    assert!(wait_until(|| c.stats().active == 2));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let mut present: std::collections::HashSet<u64> = (0..500).collect();
    let changes = random_batch(&mut rng, &mut present, 50, 2_000);
    c.apply_changes(&changes).expect("apply");
    c.apply_changes(&changes[..0]).expect("empty call");
    // The old-style follower: 50 Delta frames, sequence 2..=51.
    let mut old_payloads = Vec::new();
    for seq in 2..=51 {
        let f = old.read_skipping_keepalives();
        assert_eq!((f.ty, f.seq), (MsgType::Delta, seq));
        assert!(matches!(
            Message::decode(f.ty, &f.payload),
            Ok(Message::Delta { .. })
        ));
        old_payloads.push(f.payload);
    }
    // The other: one DeltaBatch frame holding the same 50 deltas, in order.
    let f = new.read_skipping_keepalives();
    assert_eq!((f.ty, f.seq), (MsgType::DeltaBatch, 2));
    let Ok(Message::DeltaBatch { deltas }) = Message::decode(f.ty, &f.payload) else {
        panic!("not a batch");
    };
    let batch_payloads: Vec<Vec<u8>> = deltas
        .iter()
        .map(|d| delta_payload(&d.delta.encode(), &d.new_actions))
        .collect();
    assert_eq!(batch_payloads, old_payloads);
    // Acks: the batch's one sequence number confirms all 50 deltas.
    let before = c.stats().acked;
    new.seq = 1;
    new.send(&Message::Ack { seq: 2 });
    assert!(wait_until(|| c.stats().acked == before + 51));
    let cs = c.stats();
    assert_eq!((cs.deltas_sent, cs.batches_sent), (100, 1), "{cs:?}");
    assert_eq!(c.propagation().samples, 50);
    c.shutdown();
}

#[test]
fn delta_batches_are_capped_by_the_batch_limit() {
    let cfg = ControllerConfig {
        batch_limit: 2_000,
        ..ctl_cfg()
    };
    let c = Controller::start(fib(500), key(), cfg).expect("controller");
    let f = FibFollower::start(key(), follower_cfg(c.local_addr(), "capped")).expect("f");
    assert!(f.wait_for(WAIT, |s| s.snapshots == 1));
    let mut raw = RawFollower::with_snapshot(c.local_addr(), FEATURE_DELTA_BATCH);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    let mut present: std::collections::HashSet<u64> = (0..500).collect();
    let changes = random_batch(&mut rng, &mut present, 300, 2_000);
    c.apply_changes(&changes).expect("apply");
    let mut got = 0;
    let mut frames = 0;
    while got < 300 {
        let fr = raw.read_skipping_keepalives();
        if fr.ty == MsgType::DeltaBatch {
            assert!(fr.payload.len() <= 2_000, "{} bytes", fr.payload.len());
        }
        frames += 1;
        got += match Message::decode(fr.ty, &fr.payload).expect("message") {
            Message::DeltaBatch { deltas } => deltas.len(),
            Message::Delta { .. } => 1,
            m => panic!("unexpected {m:?}"),
        };
    }
    assert_eq!(got, 300);
    assert!(frames > 1 && frames < 300, "{frames} frames");
    assert!(f.wait_for(WAIT, |s| s.deltas == 300), "{:?}", f.stats());
    assert_converged(&c, &f, 2_000);
    f.stop();
    c.shutdown();
}

/// `n` inserts of new names into `fib`, each as a batch entry.
fn insert_deltas(fib: &mut ConciseFib<[u8; 6]>, from: u64, n: u64) -> Vec<BatchDelta> {
    (from..from + n)
        .map(|i| {
            let before = fib.action_table().len();
            let ch = fib
                .insert(mac(i), &Action::Port(200 + (i % 50) as u16))
                .expect("insert");
            let mut new_actions = String::new();
            for (id, a) in fib.action_table().iter().skip(before) {
                new_actions.push_str(&format!("{id} {a}\n"));
            }
            let delta = fib.othello().delta(&ch, 0);
            assert!(matches!(delta, Delta::Ops { .. }));
            BatchDelta { delta, new_actions }
        })
        .collect()
}

#[test]
fn corrupt_truncated_and_failing_batches_are_rejected() {
    let mut fib = fib(300);
    let snap = Message::Snapshot {
        snapshot: fib.othello().snapshot(0),
        actions: fib.action_table().to_text(),
    };
    let gen = fib.othello().meta().generation;
    let first = Message::DeltaBatch {
        deltas: insert_deltas(&mut fib, 5_000, 20),
    };
    let after_first = fib.othello().snapshot(0);
    let second = insert_deltas(&mut fib, 6_000, 10);

    let mut fake = Fake::new();
    let mut cfg = follower_cfg(fake.addr(), "batch-victim");
    cfg.backoff_max = Duration::from_millis(20);
    let f = FibFollower::start(key(), cfg).expect("follower");
    let h = fake.accept();
    assert_eq!(h.features, FEATURE_DELTA_BATCH);
    let b = fake.frame(&snap, 1, gen);
    fake.send(&b);
    let b = fake.frame(&first, 2, gen);
    fake.send(&b);
    assert!(f.wait_for(WAIT, |s| s.deltas == 20 && s.batches == 1));
    let bytes = || f.table().expect("table").query().to_snapshot();
    assert_eq!(bytes(), after_first);
    assert_eq!(
        f.table().expect("table").lookup(&mac(5_007)),
        Some(&Action::Port(200 + 7))
    );
    let want = bytes();

    let good = Message::DeltaBatch {
        deltas: second.clone(),
    };
    let payload = good.encode();
    // A bit flip in the batch (MAC), a batch cut short under a valid MAC
    // and one whose count exceeds its entries (message): each rejected
    // whole, table unchanged, the follower reconnects.
    let short = payload[..payload.len() - 3].to_vec();
    let mut over = payload.clone();
    over[..4].copy_from_slice(&11u32.to_le_bytes());
    let mut next = 3;
    for (i, reason) in [
        RejectReason::BadMac,
        RejectReason::Message,
        RejectReason::Message,
    ]
    .into_iter()
    .enumerate()
    {
        let p = [&payload, &short, &over][i];
        let mut bad = fake.raw_frame(MsgType::DeltaBatch, next, gen, p);
        if reason == RejectReason::BadMac {
            bad[36 + 20] ^= 0x10;
        }
        let before = f.stats();
        fake.send(&bad);
        let h = fake.accept();
        assert_eq!(h.last_generation, gen);
        let s = f.stats();
        assert_eq!(s.rejects(reason), before.rejects(reason) + 1, "{reason:?}");
        assert_eq!((s.deltas, s.batches), (20, 1), "{reason:?}");
        assert_eq!(bytes(), want, "{reason:?} changed the table");
        // New connection: answer with the state the follower has.
        let snap_now = Message::Snapshot {
            snapshot: want.clone(),
            actions: f.table().expect("table").actions().to_text(),
        };
        let b = fake.frame(&snap_now, 1, gen);
        fake.send(&b);
        assert!(wait_until(|| f.stats().last_seq == 1));
        assert_eq!(bytes(), want);
        next = 2;
    }

    // A batch whose third delta is for another generation: the two before
    // it apply, the third and the rest do not, the follower resyncs.
    let mut failing = second.clone();
    if let Delta::Ops { ops, .. } = &failing[2].delta {
        failing[2].delta = Delta::Ops {
            generation: gen + 1,
            ops: ops.clone(),
        };
    }
    let b = fake.frame(&Message::DeltaBatch { deltas: failing }, 2, gen);
    fake.send(&b);
    let h = fake.read_hello();
    assert_eq!(h.features, FEATURE_DELTA_BATCH);
    let s = f.stats();
    assert_eq!(s.rejects(RejectReason::Apply), 1, "{s:?}");
    assert_eq!((s.deltas, s.batches, s.resyncs), (22, 1, 1), "{s:?}");
    let expect = Query::from_snapshot(&after_first).expect("query");
    expect.apply(&second[0].delta).expect("apply");
    expect.apply(&second[1].delta).expect("apply");
    assert_eq!(bytes(), expect.to_snapshot());
    assert_ne!(bytes(), fib.othello().snapshot(0));
    let t = f.table().expect("table");
    assert_eq!(t.lookup(&mac(6_001)), Some(&Action::Port(200 + 1)));
    // While resyncing, a batch is skipped delta by delta.
    let b = fake.frame(&good, 3, gen);
    fake.send(&b);
    assert!(f.wait_for(WAIT, |s| s.skipped == 10), "{:?}", f.stats());
    assert_eq!(f.stats().deltas, 22);
    f.stop();
}

#[test]
fn follower_falls_back_to_the_original_hello_when_refused() {
    let mut fake = Fake::new();
    let mut cfg = follower_cfg(fake.addr(), "fallback");
    cfg.backoff_max = Duration::from_millis(20);
    let f = FibFollower::start(key(), cfg).expect("follower");
    // An older controller refuses the longer Hello and closes.
    let h = fake.accept();
    assert_eq!(h.features, FEATURE_DELTA_BATCH);
    fake.stream = None;
    // The next attempt sends the original Hello.
    let h = fake.accept();
    assert_eq!(h.features, 0);
    let fib = fib(50);
    let snap = Message::Snapshot {
        snapshot: fib.othello().snapshot(0),
        actions: fib.action_table().to_text(),
    };
    let b = fake.frame(&snap, 1, fib.othello().meta().generation);
    fake.send(&b);
    assert!(f.wait_for(WAIT, |s| s.snapshots == 1));
    // After a connection that got frames, it offers batches again.
    fake.stream = None;
    let h = fake.accept();
    assert_eq!(h.features, FEATURE_DELTA_BATCH);
    f.stop();
}

#[test]
fn merged_deltas_converge_with_one_delta_per_chunk() {
    let n = 2_000;
    let universe = 8_000;
    // Calls of 150 changes in chunks of 64: 64 + 64 + 22 per call.
    let c = Controller::start(fib(n), key(), merged_cfg(64)).expect("controller");
    let f = FibFollower::start(key(), follower_cfg(c.local_addr(), "merged")).expect("f");
    let old = FibFollower::start(
        key(),
        FollowerConfig {
            delta_batches: false,
            ..follower_cfg(c.local_addr(), "merged-old")
        },
    )
    .expect("f");
    assert!(f.wait_for(WAIT, |s| s.snapshots == 1));
    assert!(old.wait_for(WAIT, |s| s.snapshots == 1));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(21);
    let mut present: std::collections::HashSet<u64> = (0..n).collect();
    let mut deltas = 0;
    let mut rebuilds = 0;
    for _ in 0..40 {
        let batch = random_batch(&mut rng, &mut present, 150, universe);
        let r = c.apply_changes(&batch).expect("apply");
        assert_eq!((r.changes, r.deltas), (150, 3), "{r:?}");
        deltas += r.deltas as u64;
        rebuilds += r.rebuilds as u64;
    }
    assert_eq!(c.version(), 6_000);
    for fw in [&f, &old] {
        assert!(
            fw.wait_for(WAIT, |s| s.deltas == deltas),
            "{:?}",
            fw.stats()
        );
        assert_converged(&c, fw, universe);
        assert_eq!(fw.stats().total_rejects(), 0);
        assert_eq!(fw.stats().snapshots, 1 + rebuilds);
    }
    let cs = c.stats();
    assert_eq!(
        (cs.deltas_sent, cs.changes_sent),
        (2 * deltas, 2 * 6_000),
        "{cs:?}"
    );
    // Every change is timed, with its chunk's time.
    assert!(wait_until(|| c.propagation().samples == 2 * 6_000));
    f.stop();
    old.stop();
    c.shutdown();
}

#[test]
fn merged_batch_with_a_refused_change_applies_nothing() {
    let c = Controller::start(fib(100), key(), merged_cfg(16)).expect("controller");
    let f = FibFollower::start(key(), follower_cfg(c.local_addr(), "refused")).expect("f");
    assert!(f.wait_for(WAIT, |s| s.snapshots == 1));
    let before = c.with_fib(|fib| fib.othello().snapshot(0));
    // 40 valid changes (three chunks), then an add of a present name.
    let mut changes: Vec<_> = (1000..1040)
        .map(|i| RouteChange::Add(mac(i), action(i)))
        .collect();
    changes.push(RouteChange::Add(mac(5), Action::Drop));
    let e = c.apply_changes(&changes).expect_err("refused");
    assert!(e.to_string().contains("line 41"), "{e}");
    assert_eq!(c.version(), 0);
    assert_eq!(c.with_fib(|fib| fib.othello().snapshot(0)), before);
    // Within one chunk too.
    let e = c.apply_changes(&changes[30..]).expect_err("refused");
    assert!(e.to_string().contains("line 11"), "{e}");
    assert_eq!(c.with_fib(|fib| fib.othello().snapshot(0)), before);
    assert_eq!(c.stats().deltas_sent, 0);
    c.apply_changes(&changes[..40]).expect("valid part");
    assert!(f.wait_for(WAIT, |s| s.deltas == 3), "{:?}", f.stats());
    assert_converged(&c, &f, 2_000);
    f.stop();
    c.shutdown();
}

/// Readers of a merged delta see the FIB before or after the whole chunk
/// (the follower writes its slot writes in one writer section; only stash
/// operations, absent here, split it): a name set to an intermediate action
/// and then to a final one within a chunk is never seen with the
/// intermediate action. (With one delta per change, `changes_per_delta =
/// 1`, the reader catches it.)
#[test]
fn readers_never_see_the_inside_of_a_merged_delta() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let watched: Vec<u64> = (0..500).collect();
    let c = Controller::start(fib(1_000), key(), merged_cfg(1_000)).expect("controller");
    let f = Arc::new(FibFollower::start(key(), follower_cfg(c.local_addr(), "atomic")).expect("f"));
    assert!(f.wait_for(WAIT, |s| s.snapshots == 1));
    // Alters never stash a key; an empty stash stays empty.
    let stash = || c.with_fib(|fib| fib.othello().stats().stash_len);
    assert_eq!(stash(), 0);
    let inside = Action::Port(4000);
    let stop = Arc::new(AtomicBool::new(false));
    let (seen_inside, reads) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let reader = {
        let (f, stop, seen, reads, inside) = (
            f.clone(),
            stop.clone(),
            seen_inside.clone(),
            reads.clone(),
            inside.clone(),
        );
        let watched = watched.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let t = f.table().expect("table");
                for &i in &watched {
                    if t.lookup(&mac(i)) == Some(&inside) {
                        seen.fetch_add(1, Ordering::Relaxed);
                    }
                }
                reads.fetch_add(watched.len() as u64, Ordering::Relaxed);
            }
        })
    };
    for round in 0..100u64 {
        // Each watched name: to the intermediate action, then to a final one.
        let mut batch = Vec::new();
        for &i in &watched {
            batch.push(RouteChange::Set(mac(i), inside.clone()));
        }
        for &i in &watched {
            batch.push(RouteChange::Set(
                mac(i),
                Action::Port((round % 3) as u16 + 1),
            ));
        }
        c.apply_changes(&batch).expect("apply");
        let want = (round + 1) * 1_000;
        assert!(wait_until(
            || c.stats().changes_sent >= want && f.stats().deltas > round
        ));
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().expect("reader");
    assert!(reads.load(Ordering::Relaxed) > 0);
    assert_eq!(seen_inside.load(Ordering::Relaxed), 0);
    assert_eq!(stash(), 0);
    assert_converged(&c, &f, 1_000);
    drop(f);
    c.shutdown();
}
