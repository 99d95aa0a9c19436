//! Unit tests of the metrics snapshot, its text forms, the endpoint and
//! its client.

use super::*;
use crate::error::MalformedKind;

fn small_snapshot() -> MetricsSnapshot {
    let mut s = MetricsSnapshot {
        uptime_seconds: 1.5,
        fib_generation: 3,
        frames_in: 10,
        bytes_in: 640,
        forwarded: 6,
        dropped: 3,
        punted: 1,
        rx: vec![PortMetrics {
            port: 0,
            frames: 10,
            bytes: 640,
        }],
        tx: vec![PortMetrics {
            port: 1,
            frames: 6,
            bytes: 384,
        }],
        actions: ActionMetrics {
            port: 6,
            port_set: 0,
            drop: 1,
            controller: 1,
        },
        misses: 1,
        ring_drops: vec![PortCount { port: 0, count: 2 }],
        tx_failed: vec![PortCount { port: 1, count: 0 }],
        ..MetricsSnapshot::default()
    };
    s.drops.insert("action".into(), 1);
    s.drops.insert("miss".into(), 1);
    s.drops.insert("runt".into(), 1);
    s.malformed.insert("runt".into(), 1);
    s.with_counter(
        "follower_deltas_total",
        "Deltas applied.",
        &[("controller", "10.0.0.1:7000")],
        4,
    )
}

const GOLDEN: &str = r#"# HELP nexthop_uptime_seconds Seconds since the forwarder started.
# TYPE nexthop_uptime_seconds gauge
nexthop_uptime_seconds 1.5
# HELP nexthop_fib_generation Generation of the FIB in use.
# TYPE nexthop_fib_generation gauge
nexthop_fib_generation 3
# HELP nexthop_frames_in_total Frames given to the pipeline.
# TYPE nexthop_frames_in_total counter
nexthop_frames_in_total 10
# HELP nexthop_bytes_in_total Bytes given to the pipeline.
# TYPE nexthop_bytes_in_total counter
nexthop_bytes_in_total 640
# HELP nexthop_forwarded_total Frames sent out of at least one port.
# TYPE nexthop_forwarded_total counter
nexthop_forwarded_total 6
# HELP nexthop_dropped_total Frames discarded, all reasons.
# TYPE nexthop_dropped_total counter
nexthop_dropped_total 3
# HELP nexthop_punted_total Frames punted to the controller.
# TYPE nexthop_punted_total counter
nexthop_punted_total 1
# HELP nexthop_misses_total Names the FIB does not know.
# TYPE nexthop_misses_total counter
nexthop_misses_total 1
# HELP nexthop_rx_frames_total Frames received per input port.
# TYPE nexthop_rx_frames_total counter
nexthop_rx_frames_total{port="0"} 10
# HELP nexthop_rx_bytes_total Bytes received per input port.
# TYPE nexthop_rx_bytes_total counter
nexthop_rx_bytes_total{port="0"} 640
# HELP nexthop_tx_frames_total Frames sent per output port (copies).
# TYPE nexthop_tx_frames_total counter
nexthop_tx_frames_total{port="1"} 6
# HELP nexthop_tx_bytes_total Bytes sent per output port (copies).
# TYPE nexthop_tx_bytes_total counter
nexthop_tx_bytes_total{port="1"} 384
# HELP nexthop_drops_total Dropped frames by reason.
# TYPE nexthop_drops_total counter
nexthop_drops_total{reason="action"} 1
nexthop_drops_total{reason="miss"} 1
nexthop_drops_total{reason="runt"} 1
# HELP nexthop_action_hits_total Frames whose name matched, by action kind.
# TYPE nexthop_action_hits_total counter
nexthop_action_hits_total{action="port"} 6
nexthop_action_hits_total{action="port_set"} 0
nexthop_action_hits_total{action="drop"} 1
nexthop_action_hits_total{action="controller"} 1
# HELP nexthop_malformed_total Frames that could not be named, by reason.
# TYPE nexthop_malformed_total counter
nexthop_malformed_total{reason="runt"} 1
# HELP nexthop_ring_drops_total Frames the kernel dropped because the receive ring was full.
# TYPE nexthop_ring_drops_total counter
nexthop_ring_drops_total{port="0"} 2
# HELP nexthop_rx_truncated_total Frames skipped because they were captured in part.
# TYPE nexthop_rx_truncated_total counter
# HELP nexthop_tx_failed_total Frames the kernel refused to send.
# TYPE nexthop_tx_failed_total counter
nexthop_tx_failed_total{port="1"} 0
# HELP nexthop_follower_deltas_total Deltas applied.
# TYPE nexthop_follower_deltas_total counter
nexthop_follower_deltas_total{controller="10.0.0.1:7000"} 4
"#;

#[test]
fn prometheus_text_matches_golden_for_a_small_snapshot() {
    assert_eq!(small_snapshot().to_prometheus_text(), GOLDEN);
}

#[test]
fn label_values_escape_backslash_quote_and_newline() {
    assert_eq!(escape_label_value(r#"a\b"c"#), r#"a\\b\"c"#);
    assert_eq!(escape_label_value("x\ny"), r"x\ny");
    let s = MetricsSnapshot::default().with_gauge(
        "peer_up",
        "Help with \\ and\nnewline.",
        &[("peer", "we\"ird\\\nname"), ("bad-label", "v")],
        1.0,
    );
    let text = s.to_prometheus_text();
    assert!(text.contains("# HELP nexthop_peer_up Help with \\\\ and\\nnewline.\n"));
    assert!(
        text.contains("nexthop_peer_up{peer=\"we\\\"ird\\\\\\nname\",bad_label=\"v\"} 1\n"),
        "{text}"
    );
    // Every line is a comment or a single-line sample.
    for line in text.lines() {
        assert!(
            line.starts_with("# ") || line.starts_with("nexthop_"),
            "{line}"
        );
    }
}

#[test]
fn extra_metric_names_are_sanitized_and_grouped_into_one_family() {
    let s = MetricsSnapshot::default()
        .with_counter("follower rejects", "Rejects.", &[("reason", "mac")], 1)
        .with_counter("follower rejects", "Rejects.", &[("reason", "seq")], 2)
        .with_gauge("9lives", "Odd.", &[], f64::INFINITY)
        .with_gauge("nan", "NaN.", &[], f64::NAN);
    let text = s.to_prometheus_text();
    assert_eq!(
        text.matches("# TYPE nexthop_follower_rejects counter")
            .count(),
        1
    );
    assert!(text.contains("nexthop_follower_rejects{reason=\"mac\"} 1\n"));
    assert!(text.contains("nexthop_follower_rejects{reason=\"seq\"} 2\n"));
    assert!(text.contains("nexthop__lives +Inf\n"));
    assert!(text.contains("nexthop_nan NaN\n"));
}

#[test]
fn json_round_trips_and_non_finite_extras_read_back_as_nan() {
    let s = small_snapshot();
    assert_eq!(MetricsSnapshot::from_json(&s.to_json()).unwrap(), s);
    let odd = MetricsSnapshot::default().with_gauge("g", "G.", &[], f64::NAN);
    let back = MetricsSnapshot::from_json(&odd.to_json()).unwrap();
    assert!(back.extra[0].value.is_nan());
    // Missing fields read as defaults (an older or newer forwarder).
    let partial = MetricsSnapshot::from_json(r#"{"frames_in": 7}"#).unwrap();
    assert_eq!(partial.frames_in, 7);
    assert!(MetricsSnapshot::from_json("not json").is_err());
}

#[test]
fn ip_pipeline_ttl_drops_are_a_reason_of_their_own() {
    let mut c = Counters {
        frames_in: 6,
        misses: 2,
        ttl_expired: 3,
        dropped: 6,
        ..Counters::default()
    };
    c.malformed_add(MalformedKind::BadChecksum);
    let s = MetricsSnapshot::from_counters(&c);
    assert_eq!(
        s.drops,
        BTreeMap::from([
            ("miss".to_string(), 2),
            ("ttl_expired".to_string(), 3),
            ("bad_checksum".to_string(), 1)
        ])
    );
    let text = s.to_prometheus_text();
    assert!(
        text.contains("nexthop_drops_total{reason=\"ttl_expired\"} 3\n"),
        "{text}"
    );
    assert!(
        text.contains("nexthop_malformed_total{reason=\"not_ip\"} 0\n"),
        "{text}"
    );
}

#[test]
fn from_counters_splits_drops_by_reason_like_the_run_summary() {
    let mut c = Counters::with_tx_ports(Some(2));
    c.rx = vec![PortCounter {
        frames: 3,
        bytes: 300,
    }];
    c.tx_add(2, 100);
    c.frames_in = 5;
    c.bytes_in = 300;
    c.forwarded = 1;
    c.hits.port = 1;
    c.hits.drop = 1;
    c.misses = 2;
    c.malformed_add(MalformedKind::Truncated);
    c.dropped = 1 + 2 + 1;
    let s = MetricsSnapshot::from_counters(&c)
        .with_port_counts(&[(0, 4)], &[], &[(2, 1)])
        .with_uptime(Duration::from_millis(2500))
        .with_fib_generation(9);
    assert_eq!(
        s.drops,
        BTreeMap::from([
            ("action".to_string(), 1),
            ("miss".to_string(), 2),
            ("truncated".to_string(), 1)
        ])
    );
    assert_eq!(s.drops.values().sum::<u64>(), s.dropped);
    assert_eq!(s.malformed.len(), MalformedKind::ALL.len());
    assert_eq!(s.malformed["truncated"], 1);
    assert_eq!(s.malformed["runt"], 0);
    assert_eq!(
        s.rx,
        [PortMetrics {
            port: 0,
            frames: 3,
            bytes: 300
        }]
    );
    assert_eq!(
        s.tx,
        [PortMetrics {
            port: 2,
            frames: 1,
            bytes: 100
        }]
    );
    assert_eq!(s.ring_drops, [PortCount { port: 0, count: 4 }]);
    assert_eq!(s.tx_failed, [PortCount { port: 2, count: 1 }]);
    assert_eq!(s.uptime_seconds, 2.5);
    assert_eq!(s.fib_generation, 9);
}

#[cfg(target_os = "linux")]
#[test]
fn with_port_stats_copies_the_live_loop_counts() {
    let p = crate::live::PortStats {
        tx_failed: vec![(3, 5)],
        ring_drops: vec![(0, 7)],
        rx_truncated: vec![(0, 1)],
    };
    let s = MetricsSnapshot::default().with_port_stats(&p);
    assert_eq!(s.tx_failed, [PortCount { port: 3, count: 5 }]);
    assert_eq!(s.ring_drops, [PortCount { port: 0, count: 7 }]);
    assert_eq!(s.rx_truncated, [PortCount { port: 0, count: 1 }]);
}

#[test]
fn shared_snapshot_serves_what_was_last_published() {
    let shared = SharedSnapshot::new();
    let srv = MetricsServer::start("127.0.0.1:0".parse().unwrap(), shared.provider()).unwrap();
    let addr = srv.local_addr().to_string();
    assert_eq!(
        fetch_snapshot(&addr, Duration::from_secs(10)).unwrap(),
        MetricsSnapshot::default()
    );
    shared.publish(small_snapshot());
    assert_eq!(
        fetch_snapshot(&addr, Duration::from_secs(10)).unwrap(),
        small_snapshot()
    );
    assert_eq!(shared.get(), small_snapshot());
}

// ---- HTTP ----

fn server() -> MetricsServer {
    let provider: SnapshotProvider = Arc::new(small_snapshot);
    MetricsServer::start("127.0.0.1:0".parse().unwrap(), provider).unwrap()
}

/// Send raw bytes, read the whole response.
fn raw_request(addr: SocketAddr, req: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // The server may answer and close before everything was written.
    let _ = s.write_all(req);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn status(resp: &str) -> &str {
    resp.lines().next().unwrap_or("")
}

fn body(resp: &str) -> &str {
    resp.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

#[test]
fn get_metrics_serves_prometheus_text_with_its_content_type() {
    let srv = server();
    let r = raw_request(
        srv.local_addr(),
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert_eq!(status(&r), "HTTP/1.1 200 OK");
    assert!(
        r.contains("\r\nContent-Type: text/plain; version=0.0.4\r\n"),
        "{r}"
    );
    // The snapshot, then the endpoint's own counters (this request is the
    // first accepted, and open).
    let b = body(&r);
    let own = b.strip_prefix(GOLDEN).expect("the snapshot's text first");
    assert_eq!(
        own,
        EndpointStats {
            accepted: 1,
            active: 1,
            ..EndpointStats::default()
        }
        .to_prometheus_text()
    );
    assert!(
        own.contains("\nnexthop_metrics_http_refused_total 0\n"),
        "{own}"
    );
    assert!(r.contains(&format!("\r\nContent-Length: {}\r\n", b.len())));
}

#[test]
fn get_stats_json_serves_the_snapshot_and_query_strings_are_ignored() {
    let srv = server();
    let r = raw_request(srv.local_addr(), b"GET /stats.json?x=1 HTTP/1.0\r\n\r\n");
    assert_eq!(status(&r), "HTTP/1.1 200 OK");
    assert!(r.contains("\r\nContent-Type: application/json\r\n"));
    assert_eq!(
        MetricsSnapshot::from_json(body(&r)).unwrap(),
        small_snapshot()
    );
    // Bare LF line ends are accepted too.
    let r = raw_request(srv.local_addr(), b"GET /stats.json HTTP/1.1\n\n");
    assert_eq!(status(&r), "HTTP/1.1 200 OK");
}

#[test]
fn head_sends_headers_without_a_body() {
    let srv = server();
    let r = raw_request(srv.local_addr(), b"HEAD /metrics HTTP/1.1\r\n\r\n");
    assert_eq!(status(&r), "HTTP/1.1 200 OK");
    let own = EndpointStats {
        accepted: 1,
        active: 1,
        ..EndpointStats::default()
    }
    .to_prometheus_text();
    assert!(r.contains(&format!("Content-Length: {}\r\n", GOLDEN.len() + own.len())));
    assert_eq!(body(&r), "");
}

#[test]
fn other_paths_get_404_and_other_methods_get_405_with_allow() {
    let srv = server();
    for path in ["/", "/metricsx", "/stats", "/../etc/passwd"] {
        let r = raw_request(
            srv.local_addr(),
            format!("GET {path} HTTP/1.1\r\n\r\n").as_bytes(),
        );
        assert_eq!(status(&r), "HTTP/1.1 404 Not Found", "{path}");
    }
    for method in ["POST", "PUT", "DELETE", "OPTIONS"] {
        let r = raw_request(
            srv.local_addr(),
            format!("{method} /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc").as_bytes(),
        );
        assert_eq!(status(&r), "HTTP/1.1 405 Method Not Allowed", "{method}");
        assert!(r.contains("\r\nAllow: GET, HEAD\r\n"));
    }
}

#[test]
fn malformed_request_lines_get_400_and_the_server_keeps_serving() {
    let srv = server();
    let bad: [&[u8]; 7] = [
        b"\r\n\r\n",
        b"GET\r\n\r\n",
        b"GET /metrics\r\n\r\n",
        b"GET /metrics HTTP/1.1 extra\r\n\r\n",
        b"GET metrics HTTP/1.1\r\n\r\n",
        b"get /metrics HTTP/1.1\r\n\r\n",
        b"GET /metrics SPDY/3\r\n\r\n",
    ];
    for req in bad {
        let r = raw_request(srv.local_addr(), req);
        assert_eq!(status(&r), "HTTP/1.1 400 Bad Request", "{req:?}");
    }
    let r = raw_request(srv.local_addr(), b"GET /m\xff\xfe HTTP/1.1\r\n\r\n");
    assert_eq!(status(&r), "HTTP/1.1 400 Bad Request");
    // A client that connects and closes without a word.
    drop(TcpStream::connect(srv.local_addr()).unwrap());
    let r = raw_request(srv.local_addr(), b"GET /metrics HTTP/1.1\r\n\r\n");
    assert_eq!(status(&r), "HTTP/1.1 200 OK");
}

#[test]
fn oversized_request_heads_get_431() {
    let srv = server();
    let mut req = b"GET /metrics HTTP/1.1\r\nX-Big: ".to_vec();
    req.resize(req.len() + 4 * MAX_REQUEST_BYTES, b'a');
    req.extend_from_slice(b"\r\n\r\n");
    let r = raw_request(srv.local_addr(), &req);
    assert_eq!(status(&r), "HTTP/1.1 431 Request Header Fields Too Large");
    // A head just under the limit is fine.
    let mut req = b"GET /metrics HTTP/1.1\r\nX-Big: ".to_vec();
    req.resize(MAX_REQUEST_BYTES - 4, b'a');
    req.extend_from_slice(b"\r\n\r\n");
    assert_eq!(req.len(), MAX_REQUEST_BYTES);
    let r = raw_request(srv.local_addr(), &req);
    assert_eq!(status(&r), "HTTP/1.1 200 OK");
}

#[test]
fn a_panicking_provider_gets_500_not_a_dead_server() {
    let provider: SnapshotProvider = Arc::new(|| panic!("provider bug"));
    let srv = MetricsServer::start("127.0.0.1:0".parse().unwrap(), provider).unwrap();
    for _ in 0..2 {
        let r = raw_request(srv.local_addr(), b"GET /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(status(&r), "HTTP/1.1 500 Internal Server Error");
    }
}

#[test]
fn concurrent_requests_all_get_the_current_snapshot() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c2 = Arc::clone(&calls);
    let provider: SnapshotProvider = Arc::new(move || {
        let n = c2.fetch_add(1, Ordering::SeqCst) as u64;
        MetricsSnapshot {
            frames_in: n,
            ..MetricsSnapshot::default()
        }
    });
    let srv = MetricsServer::start("127.0.0.1:0".parse().unwrap(), provider).unwrap();
    let addr = srv.local_addr().to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    // 8 clients: well under MAX_CONNECTIONS even while finished
    // connection threads are still winding down on a loaded machine.
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let addr = addr.clone();
            let seen = Arc::clone(&seen);
            std::thread::spawn(move || {
                for _ in 0..10 {
                    let s = fetch_snapshot(&addr, Duration::from_secs(10)).unwrap();
                    seen.lock().unwrap().push(s.frames_in);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut seen = seen.lock().unwrap().clone();
    seen.sort_unstable();
    // One provider call per request, each answer its own.
    assert_eq!(seen, (0..80).collect::<Vec<u64>>());
    assert_eq!(calls.load(Ordering::SeqCst), 80);
}

#[test]
fn a_silent_client_does_not_block_other_requests() {
    let srv = server();
    // Holds a connection open without sending anything.
    let _idle = TcpStream::connect(srv.local_addr()).unwrap();
    let s = fetch_snapshot(&srv.local_addr().to_string(), Duration::from_secs(10)).unwrap();
    assert_eq!(s, small_snapshot());
}

#[test]
fn connections_past_the_limit_get_503_until_slots_free() {
    let config = MetricsConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        max_connections: 4,
        ..MetricsConfig::default()
    };
    let srv = MetricsServer::start_with(&config, Arc::new(small_snapshot)).unwrap();
    let idle: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(srv.local_addr()).unwrap())
        .collect();
    // One accept thread takes connections in order, so the next one
    // finds every slot taken.
    for _ in 0..3 {
        let r = raw_request(srv.local_addr(), b"GET /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(status(&r), "HTTP/1.1 503 Service Unavailable");
    }
    let st = srv.stats();
    assert_eq!((st.accepted, st.refused, st.active), (7, 3, 4), "{st:?}");
    drop(idle);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = raw_request(srv.local_addr(), b"GET /metrics HTTP/1.1\r\n\r\n");
        if status(&r) == "HTTP/1.1 200 OK" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "slots never freed");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn slow_or_silent_clients_get_408_after_the_timeout() {
    let provider: SnapshotProvider = Arc::new(small_snapshot);
    let config = MetricsConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        io_timeout: Duration::from_millis(300),
        ..MetricsConfig::default()
    };
    let srv = MetricsServer::start_with(&config, provider).unwrap();
    // Half a request line, then nothing.
    let start = std::time::Instant::now();
    let r = raw_request(srv.local_addr(), b"GET /metr");
    assert_eq!(status(&r), "HTTP/1.1 408 Request Timeout");
    // A client trickling a byte at a time is cut off at the deadline too.
    let mut s = TcpStream::connect(srv.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let trickle = std::time::Instant::now();
    let mut out = Vec::new();
    for b in b"GET /metrics HTTP/1.1\r\nX: ".iter().cycle() {
        if trickle.elapsed() > Duration::from_secs(5) || s.write_all(&[*b]).is_err() {
            break;
        }
        let mut buf = [0u8; 256];
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) if !out.is_empty() => break,
            Err(_) => {}
        }
    }
    assert!(
        trickle.elapsed() < Duration::from_secs(5),
        "trickling client never cut off"
    );
    assert!(
        String::from_utf8_lossy(&out).starts_with("HTTP/1.1 408 "),
        "{out:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(10));
    let zero = MetricsConfig {
        io_timeout: Duration::ZERO,
        ..config
    };
    let err = MetricsServer::start_with(&zero, Arc::new(MetricsSnapshot::default));
    assert!(matches!(err, Err(MetricsError::ZeroTimeout)));
    let no_room = MetricsConfig {
        max_connections: 0,
        ..config
    };
    let err = MetricsServer::start_with(&no_room, Arc::new(MetricsSnapshot::default));
    assert!(matches!(err, Err(MetricsError::ZeroConnections)));
}

/// The value of an unlabelled sample in Prometheus text.
fn sample(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn a_hundred_slow_clients_do_not_starve_a_scraper_and_are_cut_at_the_deadline() {
    const SLOW: usize = 100;
    let deadline = Duration::from_secs(3);
    let config = MetricsConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        io_timeout: deadline,
        ..MetricsConfig::default()
    };
    let srv = MetricsServer::start_with(&config, Arc::new(small_snapshot)).unwrap();
    let addr = srv.local_addr();
    let opened = std::time::Instant::now();
    // Half send nothing, half trickle a request a byte a second.
    let slow: Vec<TcpStream> = (0..SLOW)
        .map(|_| {
            let s = TcpStream::connect(addr).unwrap();
            s.set_nonblocking(true).unwrap();
            s
        })
        .collect();
    let trickle = b"GET /metrics HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaa";
    let mut sent = 0;
    let mut answers: Vec<Vec<u8>> = vec![Vec::new(); SLOW];
    let mut closed_at: Vec<Option<Duration>> = vec![None; SLOW];
    let mut scraped = None;
    let mut last_byte = opened;
    while closed_at.iter().any(Option::is_none) && opened.elapsed() < deadline * 4 {
        if sent < trickle.len() && last_byte.elapsed() >= Duration::from_secs(1) {
            for s in slow.iter().skip(SLOW / 2) {
                let _ = (&*s).write_all(&trickle[sent..=sent]);
            }
            sent += 1;
            last_byte = std::time::Instant::now();
        }
        // A real scraper, while every slow client is still held open.
        if scraped.is_none() && opened.elapsed() >= Duration::from_secs(1) {
            let asked = std::time::Instant::now();
            let r = raw_request(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
            scraped = Some((asked.elapsed(), r, srv.stats()));
        }
        for (i, s) in slow.iter().enumerate() {
            if closed_at[i].is_some() {
                continue;
            }
            let mut buf = [0u8; 512];
            match (&*s).read(&mut buf) {
                Ok(0) => closed_at[i] = Some(opened.elapsed()),
                Ok(n) => answers[i].extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                    closed_at[i] = Some(opened.elapsed());
                }
                Err(_) => {}
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let (took, r, during) = scraped.expect("the scraper ran");
    assert_eq!(status(&r), "HTTP/1.1 200 OK", "{r}");
    assert!(body(&r).starts_with(GOLDEN));
    assert!(took < Duration::from_secs(5), "scrape took {took:?}");
    // The scraper was served while the slow clients were all open.
    assert!(during.active >= SLOW as u64, "{during:?}");
    assert_eq!(during.refused, 0);
    assert_eq!(sample(&r, "nexthop_metrics_http_refused_total"), Some(0));
    assert!(sample(&r, "nexthop_metrics_http_connections_active").unwrap() > SLOW as u64);
    // Every slow client got 408 and was closed at the deadline, not before.
    for (i, (a, at)) in answers.iter().zip(&closed_at).enumerate() {
        let at = at.unwrap_or_else(|| panic!("slow client {i} never closed"));
        assert!(
            String::from_utf8_lossy(a).starts_with("HTTP/1.1 408 "),
            "client {i}: {a:?}"
        );
        assert!(
            at >= deadline - Duration::from_millis(100),
            "client {i} at {at:?}"
        );
        assert!(at < deadline * 4, "client {i} at {at:?}");
    }
    // The endpoint counted them, and says so on /metrics.
    let r = raw_request(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
    assert_eq!(
        sample(&r, "nexthop_metrics_http_timed_out_total"),
        Some(SLOW as u64)
    );
    assert_eq!(
        sample(&r, "nexthop_metrics_http_connections_total"),
        Some(SLOW as u64 + 2)
    );
    assert_eq!(sample(&r, "nexthop_metrics_http_answered_total"), Some(1));
    let st = srv.stats();
    assert_eq!((st.timed_out, st.refused), (SLOW as u64, 0));
}

#[test]
fn dropping_the_server_closes_the_port() {
    let srv = server();
    let addr = srv.local_addr();
    assert!(fetch_snapshot(&addr.to_string(), Duration::from_secs(10)).is_ok());
    drop(srv);
    let err = fetch_snapshot(&addr.to_string(), Duration::from_secs(2)).unwrap_err();
    assert!(matches!(err, FetchError::Connect { .. }), "{err}");
    assert!(err
        .to_string()
        .contains("is a forwarder's metrics endpoint listening"));
}

#[test]
fn non_loopback_addresses_are_refused_unless_allowed() {
    let provider: SnapshotProvider = Arc::new(MetricsSnapshot::default);
    for a in ["0.0.0.0:0", "[::]:0", "192.0.2.1:9464"] {
        let err = MetricsServer::start(a.parse().unwrap(), Arc::clone(&provider)).unwrap_err();
        assert!(
            matches!(err, MetricsError::NonLoopback { .. }),
            "{a}: {err}"
        );
        assert!(err.to_string().contains("not a loopback address"));
    }
    let srv = MetricsServer::start_with(
        &MetricsConfig {
            addr: "0.0.0.0:0".parse().unwrap(),
            allow_non_loopback: true,
            ..MetricsConfig::default()
        },
        provider,
    )
    .unwrap();
    let port = srv.local_addr().port();
    assert!(fetch_snapshot(&format!("127.0.0.1:{port}"), Duration::from_secs(10)).is_ok());
    drop(srv);
    assert_eq!(MetricsConfig::default().addr, DEFAULT_METRICS_ADDR);
    assert!(DEFAULT_METRICS_ADDR.ip().is_loopback());
}

#[test]
fn a_port_in_use_is_a_bind_error_naming_the_address() {
    let srv = server();
    let provider: SnapshotProvider = Arc::new(MetricsSnapshot::default);
    let err = MetricsServer::start(srv.local_addr(), provider).unwrap_err();
    assert!(matches!(err, MetricsError::Bind { .. }));
    assert!(err.to_string().contains(&srv.local_addr().to_string()));
}

#[test]
fn fetch_reports_non_200_and_non_json_answers() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let answers: [&[u8]; 3] = [
        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        b"SSH-2.0-OpenSSH\r\n",
    ];
    let t = std::thread::spawn(move || {
        for a in answers {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 512];
            let _ = s.read(&mut buf);
            s.write_all(a).unwrap();
        }
    });
    let e1 = fetch_snapshot(&addr, Duration::from_secs(10)).unwrap_err();
    assert!(
        e1.to_string().contains("status HTTP/1.1 404 Not Found"),
        "{e1}"
    );
    let e2 = fetch_snapshot(&addr, Duration::from_secs(10)).unwrap_err();
    assert!(matches!(e2, FetchError::Json { .. }), "{e2}");
    let e3 = fetch_snapshot(&addr, Duration::from_secs(10)).unwrap_err();
    assert!(matches!(e3, FetchError::BadResponse { .. }), "{e3}");
    t.join().unwrap();
}
