//! The protocol under attack on loopback: replayed recordings, slow
//! senders, connection floods, forwarders that stop reading, silent
//! controllers, old peers and snapshots larger than a frame.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{action, fib, key, mac, wait_until, Fake, RawFollower, WAIT};
use nexthop_control::frame::{
    encode_parts, read_frame, Frame, MsgType, HEADER_LEN, MAX_PAYLOAD, TAG_LEN,
};
use nexthop_control::handshake::NONCE_LEN;
use nexthop_control::{
    Controller, ControllerConfig, FibFollower, FollowerConfig, Message, ReadError, RejectReason,
};
use nexthop_othello::fib::RouteChange;

fn ctl(cfg: ControllerConfig) -> Controller<[u8; 6]> {
    Controller::start(fib(500), key(), cfg).expect("controller")
}

fn quiet() -> ControllerConfig {
    ControllerConfig {
        log: false,
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

/// The follower holds exactly the controller's structure.
fn converged(c: &Controller<[u8; 6]>, f: &FibFollower) -> bool {
    f.table().is_some_and(|t| {
        c.with_fib(|fib| {
            t.query().to_snapshot() == fib.othello().snapshot(0)
                && t.actions() == fib.action_table()
        })
    })
}

/// A TCP proxy in front of `upstream` that records both directions of
/// every connection and can stop forwarding controller → forwarder bytes
/// (a forwarder that stopped reading).
struct Proxy {
    addr: SocketAddr,
    /// Forwarder → controller bytes of each connection.
    up: Arc<Mutex<Vec<Vec<u8>>>>,
    /// Controller → forwarder bytes of each connection.
    down: Arc<Mutex<Vec<Vec<u8>>>>,
    stall: Arc<AtomicBool>,
}

fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    log: Arc<Mutex<Vec<Vec<u8>>>>,
    i: usize,
    stall: Option<Arc<AtomicBool>>,
) {
    let mut buf = [0u8; 16384];
    loop {
        while stall.as_ref().is_some_and(|s| s.load(Ordering::SeqCst)) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        log.lock().expect("log")[i].extend_from_slice(&buf[..n]);
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}

impl Proxy {
    fn start(upstream: SocketAddr) -> Proxy {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let p = Proxy {
            addr: l.local_addr().expect("addr"),
            up: Arc::default(),
            down: Arc::default(),
            stall: Arc::default(),
        };
        let (up, down, stall) = (p.up.clone(), p.down.clone(), p.stall.clone());
        std::thread::spawn(move || {
            for f in l.incoming() {
                let Ok(f) = f else { break };
                let Ok(c) = TcpStream::connect(upstream) else {
                    continue;
                };
                let i = {
                    let mut u = up.lock().expect("up");
                    u.push(Vec::new());
                    down.lock().expect("down").push(Vec::new());
                    u.len() - 1
                };
                let (f2, c2) = (f.try_clone().expect("clone"), c.try_clone().expect("clone"));
                let up = up.clone();
                std::thread::spawn(move || pump(f, c, up, i, None));
                let (down, stall) = (down.clone(), stall.clone());
                std::thread::spawn(move || pump(c2, f2, down, i, Some(stall)));
            }
        });
        p
    }
}

/// Split a recorded stream into frames (by their length fields).
fn split_frames(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut at = 0;
    while bytes.len() >= at + HEADER_LEN {
        let mut l = [0u8; 4];
        l.copy_from_slice(&bytes[at + 32..at + 36]);
        let end = at + HEADER_LEN + u32::from_le_bytes(l) as usize + TAG_LEN;
        if end > bytes.len() {
            break;
        }
        out.push(&bytes[at..end]);
        at = end;
    }
    out
}

/// Read until the peer closes (or `WAIT`); everything received.
fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    s.set_read_timeout(Some(WAIT)).expect("timeout");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// A real follower's session through a recording proxy: its snapshot, 20
/// changes, their Acks. Returns the controller and the two recordings.
fn recorded_session() -> (Controller<[u8; 6]>, Vec<u8>, Vec<u8>) {
    let c = ctl(quiet());
    let p = Proxy::start(c.local_addr());
    let f = FibFollower::start(key(), follower_cfg(p.addr, "recorded")).expect("follower");
    assert!(f.wait_for(WAIT, |s| s.snapshots == 1));
    let changes: Vec<_> = (0..20)
        .map(|i| RouteChange::Add(mac(10_000 + i), action(i)))
        .collect();
    c.apply_changes(&changes).expect("apply");
    assert!(f.wait_for(WAIT, |s| s.deltas >= 1));
    assert!(wait_until(|| c.stats().acked >= 2), "{:?}", c.stats());
    f.stop();
    assert!(wait_until(|| c.stats().active == 0));
    let up = p.up.lock().expect("up")[0].clone();
    let down = p.down.lock().expect("down")[0].clone();
    (c, up, down)
}

#[test]
fn replayed_hello_from_a_recorded_session_gets_no_snapshot() {
    let (c, up, _) = recorded_session();
    let frames = split_frames(&up);
    // Nonce, Hello, then at least one Ack.
    assert!(frames.len() >= 3, "{} frames", frames.len());
    assert_eq!(frames[0][5], MsgType::Nonce as u8);
    assert_eq!(frames[1][5], MsgType::Hello as u8);
    let before = c.stats();
    // Replay everything the follower sent, on a new connection, without
    // the key.
    let mut s = TcpStream::connect(c.local_addr()).expect("connect");
    s.write_all(&up).expect("replay");
    let got = read_to_close(&mut s);
    // The controller answered the Nonce with a fresh one and nothing else.
    let nonce_reply = HEADER_LEN + 2 * NONCE_LEN + TAG_LEN;
    assert_eq!(got.len(), nonce_reply, "the replay got more than a nonce");
    let f = Frame::decode(&got, &key(), MAX_PAYLOAD).expect("the nonce reply");
    assert_eq!(f.ty, MsgType::Nonce);
    assert_eq!(
        &f.payload[..NONCE_LEN],
        &frames[0][HEADER_LEN..HEADER_LEN + NONCE_LEN]
    );
    let recorded_nonce = split_frames(&up)[0];
    assert_ne!(
        f.payload[NONCE_LEN..],
        recorded_nonce[HEADER_LEN..HEADER_LEN + NONCE_LEN]
    );
    let after = c.stats();
    assert_eq!(after.snapshots_sent, before.snapshots_sent, "{after:?}");
    assert_eq!(after.rejects, before.rejects + 1, "{after:?}");
    assert_eq!(after.active, 0);
    c.shutdown();
}

#[test]
fn replayed_ack_of_a_recorded_session_is_refused() {
    let (c, up, _) = recorded_session();
    let frames = split_frames(&up);
    let ack = frames
        .iter()
        .skip(2)
        .find(|f| f[5] == MsgType::Ack as u8)
        .expect("a recorded Ack");
    // A live session of a keyed follower; the recorded Ack injected into
    // it fails the MAC (another session key) and closes the connection.
    let mut raw = RawFollower::with_snapshot(c.local_addr(), 0);
    let before = c.stats();
    raw.stream.write_all(ack).expect("inject");
    assert!(
        wait_until(|| c.stats().rejects == before.rejects + 1),
        "{:?}",
        c.stats()
    );
    assert_eq!(c.stats().acked, before.acked);
    assert_eq!(c.stats().acks, before.acks);
    // The controller closed it (a shutdown Error may come first).
    loop {
        match raw.try_read() {
            Ok(f) if f.ty == MsgType::Error || f.ty == MsgType::Keepalive => continue,
            Ok(f) => panic!("unexpected {:?}", f.ty),
            Err(ReadError::Io(_)) => break,
            Err(e) => panic!("{e}"),
        }
    }
    c.shutdown();
}

#[test]
fn recorded_controller_frames_are_refused_by_a_new_follower() {
    let (c, _, down) = recorded_session();
    let frames = split_frames(&down);
    let snap = frames
        .iter()
        .find(|f| f[5] == MsgType::Snapshot as u8)
        .expect("a recorded Snapshot");
    c.shutdown();
    // A man in the middle with the recording but not the key: it relays
    // a fresh handshake (here done by the fake with the key, the best
    // case for the attacker) and then plays the recorded Snapshot.
    let mut fake = Fake::new();
    let f = FibFollower::start(key(), follower_cfg(fake.addr(), "victim")).expect("f");
    let _ = fake.accept();
    fake.send(snap);
    assert!(f.wait_for(WAIT, |s| s.rejects(RejectReason::BadMac) == 1));
    assert!(f.table().is_none());
    f.stop();
}

#[test]
fn a_one_byte_every_50ms_sender_is_cut_off_at_the_handshake_deadline() {
    let deadline = Duration::from_millis(600);
    let c = ctl(ControllerConfig {
        handshake_timeout: deadline,
        ..quiet()
    });
    // A valid first Nonce frame, dripped: each read would beat a per-read
    // timeout, the whole would take 6.6 s.
    let nonce = encode_parts(&key(), MsgType::Nonce, 0, 0, 0, &[7; NONCE_LEN]);
    let mut s = TcpStream::connect(c.local_addr()).expect("connect");
    let t = Instant::now();
    let mut cut = None;
    for b in &nonce {
        if s.write_all(&[*b]).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        if c.stats().handshake_timeouts == 1 {
            cut = Some(t.elapsed());
            break;
        }
    }
    let cut = cut.expect("cut off before the frame was complete");
    assert!(cut >= deadline, "cut after {cut:?}");
    assert!(
        cut < deadline + Duration::from_millis(900),
        "cut after {cut:?}"
    );
    // Closed: no nonce was ever sent back.
    assert!(read_to_close(&mut s).is_empty());
    assert_eq!(c.stats().handshaking, 0);
    assert_eq!(c.stats().snapshots_sent, 0);
    c.shutdown();
}

#[test]
fn connection_caps_hold_and_a_real_follower_still_connects() {
    let c = ctl(ControllerConfig {
        max_connections: 4,
        max_handshakes: 2,
        handshake_timeout: Duration::from_millis(1_500),
        ..quiet()
    });
    // Two served forwarders.
    let _a = RawFollower::with_snapshot(c.local_addr(), 0);
    let _b = RawFollower::with_snapshot(c.local_addr(), 0);
    // Idle sockets: two take the handshake slots, the rest are refused.
    let mut idle: Vec<TcpStream> = (0..10)
        .map(|_| TcpStream::connect(c.local_addr()).expect("connect"))
        .collect();
    assert!(wait_until(|| c.stats().refused == 8), "{:?}", c.stats());
    let s = c.stats();
    assert_eq!((s.active, s.handshaking), (2, 2), "{s:?}");
    // A refused socket is closed at once.
    let mut refused = 0;
    for s in &mut idle {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        let mut b = [0u8; 1];
        match s.read(&mut b) {
            Ok(0) => refused += 1,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => refused += 1,
            _ => {}
        }
    }
    assert!(refused >= 8, "{refused} closed");
    // A real follower is refused while the slots are held, and gets in
    // once the idle ones are cut at the deadline.
    let f = FibFollower::start(key(), follower_cfg(c.local_addr(), "real")).expect("f");
    assert!(f.wait_for(WAIT, |s| s.snapshots == 1), "{:?}", f.stats());
    let s = c.stats();
    assert_eq!(s.handshake_timeouts, 2, "{s:?}");
    assert_eq!(s.active, 3, "{s:?}");
    assert!(converged(&c, &f));
    // Four open: the next one is refused even without a handshake slot taken.
    let _d = RawFollower::with_snapshot(c.local_addr(), 0);
    let before = c.stats().refused;
    let _e = TcpStream::connect(c.local_addr()).expect("connect");
    assert!(wait_until(|| c.stats().refused == before + 1));
    f.stop();
    c.shutdown();
}

#[test]
fn a_follower_that_stops_reading_is_dropped_and_resyncs_from_a_snapshot() {
    let c = ctl(ControllerConfig {
        max_queue_bytes: 256 << 10,
        changes_per_delta: 1,
        ..quiet()
    });
    let p = Proxy::start(c.local_addr());
    let f = FibFollower::start(key(), follower_cfg(p.addr, "stalled")).expect("f");
    assert!(f.wait_for(WAIT, |s| s.snapshots == 1));
    p.stall.store(true, Ordering::SeqCst);
    // Changes until the connection's queue passes its bound (the socket
    // buffers fill first).
    let mut next = 0u64;
    let end = Instant::now() + WAIT;
    while c.stats().slow_dropped == 0 && Instant::now() < end {
        let changes: Vec<_> = (0..1_000)
            .map(|_| {
                next += 1;
                RouteChange::Set(mac(next % 500), action(next / 500))
            })
            .collect();
        c.apply_changes(&changes).expect("apply");
    }
    assert_eq!(c.stats().slow_dropped, 1, "{:?}", c.stats());
    assert!(wait_until(|| c.stats().active == 0));
    // Reading again, the follower finds the connection closed, reconnects
    // and installs a fresh snapshot holding every change.
    p.stall.store(false, Ordering::SeqCst);
    assert!(
        f.wait_for(WAIT, |s| s.snapshots == 2 && s.connects == 2),
        "{:?}",
        f.stats()
    );
    assert!(wait_until(|| converged(&c, &f)));
    f.stop();
    c.shutdown();
}

#[test]
fn controller_sends_keepalives_when_idle_and_followers_stay_connected() {
    let c = ctl(ControllerConfig {
        keepalive: Duration::from_millis(50),
        ..quiet()
    });
    let mut raw = RawFollower::with_snapshot(c.local_addr(), 0);
    let k = raw.read();
    assert_eq!((k.ty, k.seq), (MsgType::Keepalive, 2));
    assert_eq!(Message::decode(k.ty, &k.payload), Ok(Message::Keepalive));
    let mut cfg = follower_cfg(c.local_addr(), "kept");
    cfg.read_timeout = Duration::from_millis(400);
    let f = FibFollower::start(key(), cfg).expect("f");
    assert!(f.wait_for(WAIT, |s| s.snapshots == 1));
    std::thread::sleep(Duration::from_millis(1_500));
    let s = f.stats();
    assert_eq!(
        (s.connects, s.timeouts, s.total_rejects()),
        (1, 0, 0),
        "{s:?}"
    );
    assert!(s.keepalives >= 5, "{s:?}");
    assert!(c.stats().keepalives >= 10, "{:?}", c.stats());
    f.stop();
    c.shutdown();
}

#[test]
fn a_follower_facing_a_silent_controller_reconnects() {
    let mut fake = Fake::new();
    let mut cfg = follower_cfg(fake.addr(), "patient");
    cfg.read_timeout = Duration::from_millis(300);
    let f = FibFollower::start(key(), cfg).expect("f");
    let _ = fake.accept();
    let fib = fib(50);
    let snap = Message::Snapshot {
        snapshot: fib.othello().snapshot(0),
        actions: fib.action_table().to_text(),
    };
    let b = fake.frame(&snap, 1, fib.othello().meta().generation);
    fake.send(&b);
    assert!(f.wait_for(WAIT, |s| s.snapshots == 1));
    // Then silence, the socket open: the follower gives up and comes back.
    let t = Instant::now();
    let h = fake.accept();
    assert!(
        t.elapsed() >= Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(h.last_generation, fib.othello().meta().generation);
    let s = f.stats();
    assert_eq!((s.timeouts, s.connects), (1, 2), "{s:?}");
    // The table it had stays until a new snapshot.
    assert!(f.table().is_some());
    f.stop();
}

#[test]
fn version_1_peers_are_refused_with_a_clear_error() {
    let c = ctl(quiet());
    // A version 1 Hello, as a forwarder of the previous protocol sends it.
    let hello = Message::Hello(nexthop_control::Hello {
        forwarder_id: "old".into(),
        column: 0,
        last_seq: 0,
        last_generation: 0,
        features: 0,
    });
    let mut v1 = encode_parts(&key(), MsgType::Hello, 5, 1, 0, &hello.encode());
    v1[4] = 1;
    let mut s = TcpStream::connect(c.local_addr()).expect("connect");
    s.write_all(&v1).expect("hello");
    s.set_read_timeout(Some(WAIT)).expect("timeout");
    let f = read_frame(&mut s, &key(), MAX_PAYLOAD).expect("an Error frame");
    let Ok(Message::Error { text, .. }) = Message::decode(f.ty, &f.payload) else {
        panic!("not an Error: {f:?}");
    };
    assert!(
        text.contains("protocol version 1 is not supported"),
        "{text}"
    );
    assert!(wait_until(|| c.stats().rejects == 1));
    c.shutdown();

    // A follower facing a version 1 controller: refused as malformed, no table.
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let f = FibFollower::start(key(), follower_cfg(l.local_addr().expect("a"), "new")).expect("f");
    let (mut s, _) = l.accept().expect("accept");
    let mut err = encode_parts(
        &key(),
        MsgType::Error,
        0,
        1,
        0,
        &Message::Error {
            code: nexthop_control::ErrorCode::Protocol,
            text: "unsupported".into(),
        }
        .encode(),
    );
    err[4] = 1;
    s.write_all(&err).expect("send");
    assert!(f.wait_for(WAIT, |s| s.rejects(RejectReason::Malformed) == 1));
    assert!(f.table().is_none());
    f.stop();
}

#[test]
fn snapshots_larger_than_the_frame_limit_arrive_in_parts() {
    let limit = 4096;
    let c = Controller::start(
        fib(5_000),
        key(),
        ControllerConfig {
            frame_limit: limit,
            batch_limit: limit,
            ..quiet()
        },
    )
    .expect("controller");
    let body = c.with_fib(|f| f.othello().snapshot(0).len() + f.action_table().to_text().len());
    assert!(body > 4 * limit as usize, "{body} bytes");
    let mut cfg = follower_cfg(c.local_addr(), "parts");
    // Every frame must fit this follower's payload limit.
    cfg.max_payload = limit;
    let f = FibFollower::start(key(), cfg).expect("f");
    assert!(f.wait_for(WAIT, |s| s.snapshots == 1), "{:?}", f.stats());
    assert!(converged(&c, &f));
    // The controller counts a frame after writing it, so the follower may
    // hold the last part before the count moves: wait for it.
    let part = limit as usize - 16;
    let frames = (body + 8).div_ceil(part);
    assert!(wait_until(|| c.stats().snapshot_frames as usize >= frames));
    let s = c.stats();
    assert_eq!(s.snapshot_frames as usize, frames, "{s:?}");
    assert_eq!(f.stats().total_rejects(), 0);
    // A rebuild's delta is larger than a frame: a snapshot replaces it.
    let changes: Vec<_> = (0..20_000)
        .map(|i| RouteChange::Add(mac(100_000 + i), action(i)))
        .collect();
    let r = c.apply_changes(&changes).expect("apply");
    assert!(r.rebuilds >= 1, "{r:?}");
    assert!(wait_until(|| converged(&c, &f)), "{:?}", f.stats());
    assert!(
        wait_until(|| c.stats().snapshots_sent >= 2),
        "{:?}",
        c.stats()
    );
    assert_eq!(f.stats().total_rejects(), 0, "{:?}", f.stats());
    f.stop();
    c.shutdown();
}

#[test]
fn snapshot_parts_out_of_order_or_interleaved_are_refused() {
    let fib = fib(300);
    let body = nexthop_control::message::snapshot_body(
        &fib.othello().snapshot(0),
        &fib.action_table().to_text(),
    );
    let total = body.len() as u64;
    let part = |offset: usize, len: usize| {
        nexthop_control::message::snapshot_part(total, offset as u64, &body[offset..offset + len])
    };
    let mut fake = Fake::new();
    let f = FibFollower::start(key(), follower_cfg(fake.addr(), "parts")).expect("f");
    let _ = fake.accept();
    // A gap between parts.
    let b = fake.raw_frame(MsgType::Snapshot, 1, 0, &part(0, 100));
    fake.send(&b);
    let b = fake.raw_frame(MsgType::Snapshot, 2, 0, &part(200, 100));
    fake.send(&b);
    assert!(f.wait_for(WAIT, |s| s.rejects(RejectReason::Message) == 1));
    // A Keepalive inside a snapshot.
    let _ = fake.accept();
    let b = fake.raw_frame(MsgType::Snapshot, 1, 0, &part(0, 100));
    fake.send(&b);
    let b = fake.frame(&Message::Keepalive, 2, 0);
    fake.send(&b);
    assert!(f.wait_for(WAIT, |s| s.rejects(RejectReason::Message) == 2));
    assert!(f.table().is_none());
    // In order: installed.
    let _ = fake.accept();
    let mut seq = 0;
    for off in (0..body.len()).step_by(1000) {
        seq += 1;
        let b = fake.raw_frame(
            MsgType::Snapshot,
            seq,
            0,
            &part(off, 1000.min(body.len() - off)),
        );
        fake.send(&b);
    }
    assert!(f.wait_for(WAIT, |s| s.snapshots == 1));
    assert_eq!(
        f.table().expect("table").query().to_snapshot(),
        fib.othello().snapshot(0)
    );
    f.stop();
}

#[test]
fn a_300_mib_snapshot_crosses_the_256_mib_frame_limit_in_parts() {
    use nexthop_control::frame::write_frame_parts;
    use nexthop_control::message::{snapshot_body, SNAPSHOT_PART_HEADER};
    let fib = fib(300);
    // A real structure and action table, the table text padded with a
    // 300 MiB comment line (skipped by the parser) to pass the frame limit.
    let mut actions = fib.action_table().to_text();
    actions.push('#');
    actions.push_str(&"x".repeat(300 << 20));
    actions.push('\n');
    let body = snapshot_body(&fib.othello().snapshot(0), &actions);
    drop(actions);
    assert!(body.len() > MAX_PAYLOAD as usize);
    let mut fake = Fake::new();
    let f = FibFollower::start(key(), follower_cfg(fake.addr(), "big")).expect("f");
    let _ = fake.accept();
    let keys = fake.keys.clone().expect("keys");
    let gen = fib.othello().meta().generation;
    let part = MAX_PAYLOAD as usize - SNAPSHOT_PART_HEADER;
    let stream = fake.stream.as_mut().expect("connected");
    let mut frames = 0;
    for (i, chunk) in body.chunks(part).enumerate() {
        let mut head = [0u8; SNAPSHOT_PART_HEADER];
        head[..8].copy_from_slice(&(body.len() as u64).to_le_bytes());
        head[8..].copy_from_slice(&((i * part) as u64).to_le_bytes());
        frames += 1;
        write_frame_parts(
            stream,
            &keys.send,
            (MsgType::Snapshot, keys.session, frames, gen),
            &[&head, chunk],
        )
        .expect("send part");
    }
    assert_eq!(frames, 2);
    assert!(f.wait_for(WAIT, |s| s.snapshots == 1), "{:?}", f.stats());
    let t = f.table().expect("table");
    assert_eq!(t.query().to_snapshot(), fib.othello().snapshot(0));
    assert_eq!(t.actions(), fib.action_table());
    // Acknowledged as one message, at its last part.
    let ack = fake.read();
    assert_eq!(
        Message::decode(ack.ty, &ack.payload),
        Ok(Message::Ack { seq: 2 })
    );
    f.stop();
}
