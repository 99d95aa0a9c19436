//! Tests of the daemon: faces, threads, management, caps.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use nexthop_wire::ndn::{Interest, Name};

use super::*;
use crate::tools::producer::{Content, DataTemplate, Producer, ProducerCounters};
use crate::tools::{decode_received, Received, UdpFace};

fn udp_config() -> NdndConfig {
    NdndConfig {
        udp: Some("127.0.0.1:0".parse().unwrap()),
        ..NdndConfig::default()
    }
}

/// A daemon on a loopback UDP port, running in a thread until the flag
/// is set; the thread hands the daemon back for its counters.
fn spawn(cfg: NdndConfig) -> (SocketAddr, Arc<AtomicBool>, JoinHandle<Daemon>) {
    let mut d = Daemon::bind(cfg).unwrap();
    let addr = d.udp.as_ref().unwrap().local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let h = std::thread::spawn(move || {
        d.run(|| s.load(Ordering::Relaxed)).unwrap();
        d
    });
    (addr, stop, h)
}

/// A producer of `prefix` (content `payload`, FreshnessPeriod
/// `freshness_ms`, 0: none) on the daemon at `addr`, running in a
/// thread until its flag is set.
fn spawn_producer(
    addr: SocketAddr,
    prefix: &str,
    payload: &[u8],
    freshness_ms: u64,
) -> (Arc<AtomicBool>, JoinHandle<ProducerCounters>) {
    let mut p = Producer::start(
        addr,
        Name::from_uri(prefix).unwrap(),
        Content::Sized(DataTemplate::new(payload, freshness_ms)),
    )
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    (stop, std::thread::spawn(move || p.run(&s).unwrap()))
}

#[test]
fn bursts_from_several_udp_endpoints_each_get_their_own_data_back() {
    let d = bursts(true);
    // Runs of equal-sized datagrams went as one GSO message each (to the
    // producer and to each consumer) and came in as one GRO message each
    // (from the two GSO consumers and the producer).
    assert_eq!((d.udp_gso, d.udp_gro), (true, true));
    assert!(
        d.counters.udp_messages_out < d.counters.packets_out / 4,
        "{:?}",
        d.counters
    );
    assert!(d.counters.udp_messages_in < d.core.counters().packets_in / 2);
    assert_eq!(d.counters.udp_gso_refused, 0);
}

#[test]
fn without_gso_every_datagram_is_its_own_message() {
    let d = bursts(false);
    assert_eq!((d.udp_gso, d.udp_gro), (false, false));
    assert_eq!(d.counters.udp_messages_out, d.counters.packets_out);
    assert_eq!(d.counters.udp_messages_in, d.core.counters().packets_in);
}

/// Three consumers (two with GSO/GRO, one plain) each send a burst of
/// Interests at once to a forwarder with `udp_gso` as given; every
/// consumer gets exactly its own Data. Returns the stopped daemon.
fn bursts(gso: bool) -> Daemon {
    let (addr, stop, daemon) = spawn(NdndConfig {
        udp_gso: gso,
        ..udp_config()
    });
    let (pstop, prod) = spawn_producer(addr, "/p", b"payload", 1000);

    // Three consumers, each with a burst of several recvmmsg batches
    // in flight at once, all through the one listener socket.
    const BURST: usize = 300;
    let mut faces: Vec<UdpFace> = (0..3)
        .map(|j| UdpFace::connect_with(addr, j < 2).unwrap())
        .collect();
    let mut want: Vec<HashSet<String>> = Vec::new();
    for (j, f) in faces.iter_mut().enumerate() {
        let mut names = HashSet::new();
        let pkts: Vec<Vec<u8>> = (0..BURST)
            .map(|i| {
                let uri = format!("/p/c{j}/{i}");
                let mut it = Interest::new(Name::from_uri(&uri).unwrap());
                it.nonce = Some((j * BURST + i) as u32);
                names.insert(uri);
                it.to_wire()
            })
            .collect();
        assert_eq!(f.send_batch(&pkts).unwrap(), BURST);
        want.push(names);
    }
    for (j, f) in faces.iter_mut().enumerate() {
        let mut got = HashSet::new();
        let end = Instant::now() + Duration::from_secs(10);
        while got.len() < BURST && Instant::now() < end {
            let n = f.recv_batch(Duration::from_millis(100)).unwrap();
            for k in 0..n {
                match decode_received(f.packet(k)) {
                    Ok(Received::Data(d, _)) => {
                        let uri = d.name.to_string();
                        assert!(want[j].contains(&uri), "face {j} got {uri}");
                        got.insert(uri);
                    }
                    other => panic!("face {j}: {other:?}"),
                }
            }
        }
        assert_eq!(got, want[j], "face {j}");
    }
    pstop.store(true, Ordering::Relaxed);
    let pc = prod.join().unwrap();
    assert_eq!(pc.data, 3 * BURST as u64);
    stop.store(true, Ordering::Relaxed);
    let d = daemon.join().unwrap();
    let m = d.metrics();
    assert_eq!(m.faces.len(), 4, "three consumers and the producer");
    assert_eq!(d.core.fw_counters().satisfied, 3 * BURST as u64);
    // One thread: one per-thread series, the polling thread's own.
    assert_eq!(m.threads.len(), 1);
    assert_eq!(m.threads[0].satisfied, 3 * BURST as u64);
    assert_eq!(m.threads[0].packets, m.packets_in);
    assert_eq!(d.counters.send_drops, 0);
    assert_eq!(d.counters.face_cap_drops, 0);
    // Every Interest out to the producer and every Data back, plus
    // the rib/register reply (more than one if a retry crossed it).
    let out = d.counters.packets_out - 2 * 3 * BURST as u64;
    assert!((1..=10).contains(&out), "{out}");
    d
}

#[test]
fn the_udp_socket_buffer_is_configurable_and_reported() {
    let d = Daemon::bind(NdndConfig {
        udp_socket_buffer: 1 << 20,
        ..udp_config()
    })
    .unwrap();
    let (r, w) = d.udp_buffers();
    // Linux grants twice the request, capped at net.core.rmem_max
    // unless the process may force it (root, as the tests run).
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        assert_eq!((r, w), (2 << 20, 2 << 20));
    } else {
        assert!(r > 0 && w > 0);
    }
    assert!(d
        .summary_line()
        .contains(&format!("udp_rcvbuf={r} udp_sndbuf={w}")));
    let g = d.metrics().gauges;
    assert!(g.contains(&(
        "ndn_udp_rcvbuf_bytes",
        "Receive buffer the kernel granted the UDP socket",
        r as u64
    )));
    for bad in [0, 65535, (1 << 30) + 1] {
        let e = Daemon::bind(NdndConfig {
            udp_socket_buffer: bad,
            ..udp_config()
        });
        assert!(
            e.unwrap_err().to_string().contains("udp_socket_buffer"),
            "{bad}"
        );
    }
    let tcp_only = Daemon::bind(NdndConfig {
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        ..NdndConfig::default()
    })
    .unwrap();
    assert_eq!(tcp_only.udp_buffers(), (0, 0));
}

fn threaded(threads: usize) -> NdndConfig {
    NdndConfig {
        threads,
        ..udp_config()
    }
}

/// Send `pkts` on `f` and collect what comes back until `want`
/// packets arrived or `wait` passed.
fn exchange(f: &mut UdpFace, pkts: &[Vec<u8>], want: usize, wait: Duration) -> Vec<Received> {
    if !pkts.is_empty() {
        assert_eq!(f.send_batch(pkts).unwrap(), pkts.len());
    }
    let mut got = Vec::new();
    let end = Instant::now() + wait;
    while got.len() < want && Instant::now() < end {
        let n = f.recv_batch(Duration::from_millis(20)).unwrap();
        for k in 0..n {
            got.push(decode_received(f.packet(k)).unwrap());
        }
    }
    got
}

fn interest(uri: &str, nonce: u32) -> Vec<u8> {
    let mut it = Interest::new(Name::from_uri(uri).unwrap());
    it.nonce = Some(nonce);
    it.lifetime_ms = Some(4000);
    it.to_wire()
}

/// Two `SO_REUSEPORT` sockets on the UDP port (the polling thread's and
/// one input thread's), with one and with two forwarding threads: the
/// kernel spreads sixteen consumers over both sockets, both receive, and
/// every Interest gets its Data back on the face it came from (faces, PIT
/// and Content Store stay with their one owner each, whichever socket a
/// datagram arrived on).
#[test]
fn two_udp_input_sockets_both_receive_and_every_interest_is_answered() {
    for threads in [1, 2] {
        let (addr, stop, daemon) = spawn(NdndConfig {
            udp_input_threads: 2,
            ..threaded(threads)
        });
        let (pstop, prod) = spawn_producer(addr, "/p", b"payload", 0);
        const CONSUMERS: usize = 16;
        const BURST: usize = 60;
        let mut faces: Vec<UdpFace> = (0..CONSUMERS)
            .map(|_| UdpFace::connect(addr).unwrap())
            .collect();
        for (j, f) in faces.iter_mut().enumerate() {
            let pkts: Vec<Vec<u8>> = (0..BURST)
                .map(|i| interest(&format!("/p/c{j}/{i}"), (j * BURST + i) as u32))
                .collect();
            let got = exchange(f, &pkts, BURST, Duration::from_secs(10));
            let names: HashSet<String> = got
                .iter()
                .map(|r| match r {
                    Received::Data(d, _) => {
                        let n = d.name.to_string();
                        assert!(n.starts_with(&format!("/p/c{j}/")), "face {j} got {n}");
                        n
                    }
                    other => panic!("{threads} threads, face {j}: {other:?}"),
                })
                .collect();
            assert_eq!(names.len(), BURST, "{threads} threads, face {j}");
        }
        pstop.store(true, Ordering::Relaxed);
        let total = (CONSUMERS * BURST) as u64;
        assert_eq!(prod.join().unwrap().data, total);
        stop.store(true, Ordering::Relaxed);
        let d = daemon.join().unwrap();
        let per = d.udp_input_packets();
        assert_eq!(per.len(), 2);
        assert!(per.iter().all(|&n| n > 0), "{threads} threads: {per:?}");
        // Every Interest, every Data and the register command came in on
        // one of the two sockets.
        assert_eq!(per.iter().sum::<u64>(), d.metrics().packets_in, "{per:?}");
        assert_eq!(d.core.total_fw_counters().satisfied, total);
        assert_eq!(d.metrics().faces.len(), CONSUMERS + 1);
    }
}

#[test]
fn two_and_four_threads_return_every_data_and_use_every_thread() {
    for threads in [2, 4] {
        let (addr, stop, daemon) = spawn(threaded(threads));
        let (pstop, prod) = spawn_producer(addr, "/p", b"payload", 0);
        const BURST: usize = 300;
        let mut faces: Vec<UdpFace> = (0..3).map(|_| UdpFace::connect(addr).unwrap()).collect();
        for (j, f) in faces.iter_mut().enumerate() {
            let pkts: Vec<Vec<u8>> = (0..BURST)
                .map(|i| interest(&format!("/p/{i}/c{j}"), (j * BURST + i) as u32))
                .collect();
            let got = exchange(f, &pkts, BURST, Duration::from_secs(10));
            let names: HashSet<String> = got
                .iter()
                .map(|r| match r {
                    Received::Data(d, _) => d.name.to_string(),
                    other => panic!("{threads} threads, face {j}: {other:?}"),
                })
                .collect();
            assert_eq!(names.len(), BURST, "{threads} threads, face {j}");
        }
        pstop.store(true, Ordering::Relaxed);
        assert_eq!(prod.join().unwrap().data, 3 * BURST as u64);
        stop.store(true, Ordering::Relaxed);
        let d = daemon.join().unwrap();
        let m = d.metrics();
        let per = d.thread_packets();
        assert_eq!(per.len(), threads);
        assert!(per.iter().all(|&n| n > 50), "{threads} threads: {per:?}");
        // Every Interest and every Data went through a thread; the
        // register command stayed on the polling thread.
        assert_eq!(per.iter().sum::<u64>(), 2 * 3 * BURST as u64, "{per:?}");
        assert_eq!(m.packets_in, 2 * 3 * BURST as u64 + 1);
        assert_eq!(d.core.total_fw_counters().satisfied, 3 * BURST as u64);
        let g = d.core.general_status();
        assert_eq!((g.in_interests, g.out_data), (900, 900));
        let consumers: u64 = m.faces.iter().map(|f| f.out_data).sum();
        assert_eq!(consumers, 900, "face counters summed over the threads");
        assert_eq!(d.queue_drops(), crate::threads::QueueDrops::default());
        let line = d.summary_line();
        assert!(line.contains(&format!("threads={threads} ")), "{line}");
        assert!(line.contains("satisfied=900 "), "{line}");
    }
}

#[test]
fn aggregation_cs_hits_and_token_dispatch_with_four_threads() {
    let (addr, stop, daemon) = spawn(NdndConfig {
        ndt_prefix: 3,
        ..threaded(4)
    });
    // A producer that answers only when told, so Interests aggregate.
    let mut prod = UdpFace::connect(addr).unwrap();
    crate::tools::register_prefix(
        &mut prod,
        &Name::from_uri("/q").unwrap(),
        Duration::from_secs(5),
    )
    .unwrap();
    let mut a = UdpFace::connect(addr).unwrap();
    let mut b = UdpFace::connect(addr).unwrap();
    let mut c = UdpFace::connect(addr).unwrap();
    const NAMES: u32 = 16;
    for k in 0..NAMES {
        // The CanBePrefix Interest /q/k goes to the thread of the hash
        // of /q/k; its Data /q/k/v/1 hashes /q/k/v, most often another
        // thread's: only the PitToken brings it back to the PIT entry.
        let uri = format!("/q/{k}");
        let mk = |nonce: u32| {
            let mut it = Interest::new(Name::from_uri(&uri).unwrap());
            it.nonce = Some(nonce);
            it.can_be_prefix = true;
            it.lifetime_ms = Some(4000);
            it.to_wire()
        };
        assert!(exchange(&mut a, &[mk(10 * k + 1)], 0, Duration::ZERO).is_empty());
        assert!(exchange(&mut b, &[mk(10 * k + 2)], 0, Duration::ZERO).is_empty());
        // One Interest reaches the producer: the other was aggregated.
        let up = exchange(&mut prod, &[], 2, Duration::from_millis(150));
        assert_eq!(up.len(), 1, "name {k}: {up:?}");
        let Received::Interest(i, token) = &up[0] else {
            panic!("{up:?}")
        };
        let token = token.clone().expect("the thread's PitToken upstream");
        assert_eq!(
            crate::core::token_thread(&token)
                .map(usize::from)
                .map(|t| t < 4),
            Some(true)
        );
        let data = nexthop_wire::ndn::Data::new(
            Name::from_uri(&format!("/q/{k}/v/1")).unwrap(),
            b"x".to_vec(),
        );
        assert_eq!(i.name.to_string(), uri);
        let reply = crate::tools::with_token(data.to_wire(), Some(token));
        exchange(&mut prod, &[reply], 0, Duration::ZERO);
        for f in [&mut a, &mut b] {
            let got = exchange(f, &[], 1, Duration::from_secs(2));
            assert!(
                matches!(&got[..], [Received::Data(d, _)] if d.name == data.name),
                "{got:?}"
            );
        }
        // The same Interest again: a Content Store hit on that thread.
        let got = exchange(&mut c, &[mk(10 * k + 3)], 1, Duration::from_secs(2));
        assert!(
            matches!(&got[..], [Received::Data(d, _)] if d.name == data.name),
            "{got:?}"
        );
    }
    assert!(exchange(&mut prod, &[], 1, Duration::from_millis(200)).is_empty());
    stop.store(true, Ordering::Relaxed);
    let d = daemon.join().unwrap();
    let f = d.core.total_fw_counters();
    assert_eq!(f.satisfied, u64::from(NAMES));
    assert_eq!(f.suppressed, u64::from(NAMES));
    assert_eq!(f.cs_hits, u64::from(NAMES));
    assert_eq!(f.drops.total(), 0);
    assert!(d.thread_packets().iter().filter(|&&n| n > 0).count() >= 2);
    // Per-thread series add up to the sums.
    let m = d.metrics();
    assert_eq!(m.threads.len(), m.thread_packets.len());
    let per: Vec<u64> = m.threads.iter().map(|t| t.packets).collect();
    assert_eq!(per, m.thread_packets);
    let sum = |g: fn(&ThreadMetrics) -> u64| m.threads.iter().map(g).sum::<u64>();
    assert_eq!(sum(|t| t.satisfied), f.satisfied);
    assert_eq!(sum(|t| t.cs_hits), f.cs_hits);
    assert_eq!(sum(|t| t.cs_misses), f.cs_misses);
    assert_eq!(sum(|t| t.suppressed), f.suppressed);
    assert_eq!(sum(|t| t.drops), 0);
    assert!(m.threads.iter().filter(|t| t.satisfied > 0).count() >= 2);
    let gauge = |n: &str| m.gauges.iter().find(|g| g.0 == n).map(|g| g.2);
    assert_eq!(Some(sum(|t| t.pit_entries)), gauge("ndn_pit_entries"));
    assert_eq!(Some(sum(|t| t.cs_entries)), gauge("ndn_cs_entries"));
}

#[test]
fn a_route_added_while_traffic_flows_reaches_every_thread() {
    let (addr, stop, daemon) = spawn(threaded(4));
    let mut cons = UdpFace::connect(addr).unwrap();
    let window = |round: u32| -> Vec<Vec<u8>> {
        (0..64)
            .map(|p| interest(&format!("/r/{p}/{round}"), round * 64 + p))
            .collect()
    };
    // No route yet: NoRoute Nacks from every thread.
    let got = exchange(&mut cons, &window(0), 64, Duration::from_secs(5));
    assert_eq!(got.len(), 64);
    assert!(
        got.iter().all(|r| matches!(r, Received::Nack(..))),
        "{got:?}"
    );
    let (pstop, prod) = spawn_producer(addr, "/r", b"r", 0);
    // The register reply came back: every Interest after it is routed.
    for round in 1..4 {
        let got = exchange(&mut cons, &window(round), 64, Duration::from_secs(5));
        assert_eq!(got.len(), 64, "round {round}");
        assert!(
            got.iter().all(|r| matches!(r, Received::Data(..))),
            "{got:?}"
        );
    }
    // status/general sums the threads' counters (published after at
    // most 50 ms idle).
    std::thread::sleep(Duration::from_millis(150));
    let mut cl =
        crate::client::Client::connect(&crate::client::Target::Udp(addr), Duration::from_secs(2))
            .unwrap();
    let g = cl.general_status().unwrap();
    assert_eq!(
        (g.satisfied, g.in_interests, g.out_nacks),
        (3 * 64, 4 * 64, 64)
    );
    let faces = cl.faces().unwrap();
    let out_data: u64 = faces.iter().map(|f| f.out_data).sum();
    assert_eq!(out_data, 3 * 64, "{faces:?}");
    pstop.store(true, Ordering::Relaxed);
    prod.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    let d = daemon.join().unwrap();
    assert!(
        d.thread_packets().iter().all(|&n| n > 0),
        "{:?}",
        d.thread_packets()
    );
    assert_eq!(d.core.total_fw_counters().satisfied, 3 * 64);
}

#[test]
fn stress_many_consumers_random_names_and_changing_routes() {
    use crate::client::{Client, Target};
    use crate::mgmt::ControlParameters;
    use rand::{Rng, SeedableRng};

    let (addr, stop, daemon) = spawn(NdndConfig {
        cs_packets: 256,
        ..threaded(4)
    });
    let prods: Vec<_> = (0..2)
        .map(|_| spawn_producer(addr, "/s", b"s", 0))
        .collect();
    // Routes change all the time: /s/<k> to one producer or the other
    // (faces 1 and 2, opened in that order), added and removed.
    let churn_stop = Arc::new(AtomicBool::new(false));
    let cs = churn_stop.clone();
    let churn = std::thread::spawn(move || {
        let mut cl = Client::connect(&Target::Udp(addr), Duration::from_secs(2)).unwrap();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let mut n = 0u64;
        while !cs.load(Ordering::Relaxed) {
            let params = ControlParameters {
                name: Some(Name::from_uri(&format!("/s/{}", rng.gen_range(0..32))).unwrap()),
                face_id: Some(rng.gen_range(1..=2)),
                ..ControlParameters::default()
            };
            let verb = if rng.gen_bool(0.5) {
                "register"
            } else {
                "unregister"
            };
            let (code, ..) = cl.command("rib", verb, &params).unwrap();
            assert_eq!(code, 200);
            n += 1;
        }
        n
    });
    const CONSUMERS: u64 = 6;
    const ROUNDS: u64 = 40;
    const WINDOW: u64 = 32;
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|j| {
            std::thread::spawn(move || {
                let mut f = UdpFace::connect(addr).unwrap();
                let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(j);
                let mut data = 0u64;
                for r in 0..ROUNDS {
                    let pkts: Vec<Vec<u8>> = (0..WINDOW)
                        .map(|i| {
                            // Distinct within a consumer; the same name
                            // from several consumers aggregates or hits.
                            let uri = format!("/s/{}/{r}/{i}", rng.gen_range(0..32));
                            interest(&uri, ((j * ROUNDS + r) * WINDOW + i) as u32)
                        })
                        .collect();
                    let got = exchange(&mut f, &pkts, WINDOW as usize, Duration::from_secs(5));
                    for g in got {
                        match g {
                            Received::Data(..) => data += 1,
                            other => panic!("consumer {j}: {other:?}"),
                        }
                    }
                }
                data
            })
        })
        .collect();
    let mut data = 0;
    for c in consumers {
        data += c.join().unwrap();
    }
    churn_stop.store(true, Ordering::Relaxed);
    let commands = churn.join().unwrap();
    assert!(commands > 10, "{commands}");
    for (ps, h) in prods {
        ps.store(true, Ordering::Relaxed);
        h.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let d = daemon.join().unwrap();
    let sent = CONSUMERS * ROUNDS * WINDOW;
    // Same-name Interests of two consumers may aggregate: every
    // Interest is answered once all the same.
    assert_eq!(data, sent, "every Interest answered");
    let m = d.metrics();
    let f = d.core.total_fw_counters();
    let g = d.core.general_status();
    assert_eq!(d.queue_drops(), crate::threads::QueueDrops::default());
    assert_eq!(d.counters.send_drops, 0);
    // Every Interest counted once in, every Data once out to its consumer.
    let out_data: u64 = m.faces.iter().map(|x| x.out_data).sum();
    let prod_data: u64 = m.faces.iter().map(|x| x.in_data).sum();
    assert_eq!(out_data, sent);
    assert_eq!(g.in_interests, sent);
    assert_eq!(g.in_data, prod_data);
    assert_eq!(g.out_interests, prod_data);
    assert!(f.cs_hits + f.suppressed > 0, "{f:?}");
    assert_eq!(d.core.total_counters().commands, commands + 2);
    assert!(d.thread_packets().iter().all(|&n| n > 0));
}

/// A daemon with a Unix stream listener (and a UDP one for the
/// producer), the socket path in a fresh temporary directory.
fn spawn_unix() -> (SocketAddr, PathBuf, Arc<AtomicBool>, JoinHandle<Daemon>) {
    let dir = std::env::temp_dir().join(format!(
        "ndnd-stream-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("fw.sock");
    let mut d = Daemon::bind(NdndConfig {
        unix: Some(path.clone()),
        ..udp_config()
    })
    .unwrap();
    let addr = d.udp.as_ref().unwrap().local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let h = std::thread::spawn(move || {
        d.run(|| s.load(Ordering::Relaxed)).unwrap();
        d
    });
    (addr, path, stop, h)
}

/// Whole TLVs from `s` until `want` of them came or 10 s passed.
fn read_tlvs(s: &mut UnixStream, want: usize) -> Vec<Vec<u8>> {
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    let (mut buf, mut out) = (Vec::new(), Vec::new());
    let mut chunk = [0u8; 4096];
    while out.len() < want && Instant::now() < end {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => continue,
        }
        let mut ranges = Vec::new();
        let (used, over) = split_frames(&buf, &mut ranges);
        assert!(!over);
        out.extend(ranges.into_iter().map(|r| buf[r].to_vec()));
        buf.drain(..used);
    }
    out
}

#[test]
fn a_stream_face_takes_packets_split_and_joined_across_reads_and_answers_each() {
    let (addr, path, stop, daemon) = spawn_unix();
    let (pstop, prod) = spawn_producer(addr, "/s", b"payload", 0);
    let mut c = UnixStream::connect(&path).unwrap();
    // Wait for the producer's route: one Interest answered.
    let mut first = false;
    for i in 0..100 {
        c.write_all(&interest("/s/probe", 1_000_000 + i)).unwrap();
        if read_tlvs(&mut c, 1)
            .iter()
            .any(|p| matches!(decode_received(p), Ok(Received::Data(..))))
        {
            first = true;
            break;
        }
    }
    assert!(first, "the producer's route never came up");

    // 300 Interests as one byte stream, written in pieces that cut
    // packets (and their TLV headers) anywhere: many packets per read,
    // and packets split across reads.
    const N: usize = 300;
    let mut blob = Vec::new();
    let mut want = HashSet::new();
    for i in 0..N {
        let uri = format!("/s/x/{i}");
        blob.extend(interest(&uri, i as u32));
        want.insert(uri);
    }
    for (k, piece) in blob.chunks(977).enumerate() {
        if k % 2 == 0 {
            c.write_all(piece).unwrap();
        } else {
            // One byte alone, then the rest: a header cut in two.
            c.write_all(&piece[..1]).unwrap();
            std::thread::sleep(Duration::from_millis(2));
            c.write_all(&piece[1..]).unwrap();
        }
    }
    let got: HashSet<String> = read_tlvs(&mut c, N)
        .iter()
        .map(|p| match decode_received(p) {
            Ok(Received::Data(d, _)) => d.name.to_string(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(got, want);

    // A TLV that claims more than MAX_PACKET closes the face.
    let mut bad = UnixStream::connect(&path).unwrap();
    bad.write_all(&[0x05, 0xFE, 0x00, 0x10, 0x00, 0x00])
        .unwrap();
    let mut one = [0u8; 1];
    bad.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(bad.read(&mut one).unwrap(), 0, "the face was closed");

    pstop.store(true, Ordering::Relaxed);
    prod.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    let d = daemon.join().unwrap();
    assert_eq!(d.counters.oversized_frames, 1);
    assert_eq!(d.counters.send_drops, 0);
    std::fs::remove_dir_all(path.parent().unwrap()).ok();
}

#[test]
fn write_stream_sends_both_halves_of_a_wrapped_queue_and_reports_a_gone_peer() {
    let (a, b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let mut s = Stream::Unix(a);
    let mut q: VecDeque<u8> = VecDeque::new();
    q.extend(std::iter::repeat_n(7u8, 5000));
    // Make the queue wrap so it has two halves.
    q.drain(..1000);
    q.extend(std::iter::repeat_n(8u8, 1000));
    assert!(write_stream(&mut s, &mut q));
    assert!(q.is_empty());
    let mut b = b;
    let mut got = vec![0u8; 5000];
    b.read_exact(&mut got).unwrap();
    assert!(got[..4000].iter().all(|&x| x == 7) && got[4000..].iter().all(|&x| x == 8));
    // The peer gone: a write fails and says so.
    drop(b);
    q.extend([1u8; 10]);
    assert!(!write_stream(&mut s, &mut q));
}
