//! The store against a real `redis-server` on a temporary Unix socket.

use std::time::{Duration, Instant};

use nexthop_testutil::redis::RedisServer;

use nexthop_repo::{reassemble, segment_name, segment_object, RepoError, Store};
use nexthop_wire::ndn::Data;
use nexthop_wire::Name;

/// A `redis-server` of the test's own on a private Unix socket (stopped
/// on drop, also on failure).
fn redis(extra: &[&str]) -> RedisServer {
    RedisServer::start_unix(extra).expect("redis-server is installed")
}

fn url(r: &RedisServer) -> String {
    r.socket().to_string_lossy().into_owned()
}

fn n(uri: &str) -> Name {
    Name::from_uri(uri).unwrap()
}

fn data(uri: &str, content: &[u8], fresh_ms: Option<u64>) -> Vec<u8> {
    let mut d = Data::new(n(uri), content.to_vec());
    d.meta_info.freshness_period_ms = fresh_ms;
    d.sign_digest_sha256();
    d.to_wire()
}

#[test]
fn objects_round_trip_and_delete() {
    let r = redis(&[]);
    let mut s = Store::open(&url(&r)).unwrap();
    s.ping().unwrap();
    for (i, len) in [1usize, 7999, 8000, 8001, 3 << 20].into_iter().enumerate() {
        let p = n(&format!("/repo/file{i}"));
        let content: Vec<u8> = (0..len).map(|j| (j * 31 + i) as u8).collect();
        let segs = segment_object(&p, &content, 8000, 0);
        assert_eq!(s.put_object(&p, &segs).unwrap(), segs.len());
        let back = s.get_object(&p).unwrap().unwrap();
        assert_eq!(back, segs, "stored as received");
        assert_eq!(reassemble(&back).unwrap(), content);
        assert_eq!(s.check_object(&p).unwrap(), Some(segs.len() as u64));
    }
    assert_eq!(
        s.list(&n("/repo")).unwrap().len(),
        1 + 1 + 1 + 2 + (3usize << 20).div_ceil(8000)
    );
    assert_eq!(s.delete(&n("/repo/file3")).unwrap(), 2);
    assert_eq!(s.get_object(&n("/repo/file3")).unwrap(), None);
    assert!(
        s.get_object(&n("/repo/file2")).unwrap().is_some(),
        "a sibling survives"
    );
    // A fresh store (a restarted Repo) serves what Redis holds.
    let mut s2 = Store::open(&url(&r)).unwrap();
    assert!(s2.get_object(&n("/repo/file4")).unwrap().is_some());
    let all = s2.list(&n("/")).unwrap().len();
    assert_eq!(s2.delete(&n("/")).unwrap(), all);
    assert!(s.list(&n("/")).unwrap().is_empty());
}

#[test]
fn can_be_prefix_and_must_be_fresh_match_an_oracle() {
    let r = redis(&[]);
    let mut s = Store::open(&url(&r)).unwrap();
    let stored = [
        ("/a/b", Some(60_000)),
        ("/a/b/c", None),
        ("/a/b/c/d", Some(60_000)),
        ("/a/bb", Some(60_000)),
        ("/a/c", None),
        ("/a/c/x", Some(1)),
        ("/a/c/y", Some(60_000)),
    ];
    for (u, f) in stored {
        s.put(&data(u, u.as_bytes(), f)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(20));
    // Oracle: the first stored name (in TLV byte order) that the query is
    // a prefix of, with MustBeFresh skipping stale ones.
    let oracle = |q: &Name, cbp: bool, mbf: bool| -> Option<&str> {
        let mut c: Vec<_> = stored
            .iter()
            .filter(|(u, f)| {
                let nm = n(u);
                (if cbp { q.is_prefix_of(&nm) } else { &nm == q })
                    && (!mbf || f.is_some_and(|f| f > 1))
            })
            .map(|(u, _)| (n(u).value().to_vec(), *u))
            .collect();
        c.sort();
        c.first().map(|x| x.1)
    };
    let queries = [
        "/a", "/a/b", "/a/b/c", "/a/c", "/a/c/x", "/a/c/y", "/a/bb", "/z", "/",
    ];
    let names: Vec<Name> = queries.iter().map(|q| n(q)).collect();
    let mut batch = Vec::new();
    let mut wants = Vec::new();
    for qn in &names {
        for cbp in [false, true] {
            for mbf in [false, true] {
                let got = s
                    .find(qn, cbp, mbf)
                    .unwrap()
                    .map(|w| Data::decode(&w).unwrap().name.to_string());
                let want = oracle(qn, cbp, mbf).map(|u| n(u).to_string());
                assert_eq!(got, want, "{qn} cbp={cbp} mbf={mbf}");
                batch.push((qn, cbp, mbf));
                wants.push(want);
            }
        }
    }
    // The batched path (one MGET, one HMGET) answers the same, in order.
    let got: Vec<Option<String>> = s
        .find_many(&batch)
        .unwrap()
        .into_iter()
        .map(|w| w.map(|w| Data::decode(&w).unwrap().name.to_string()))
        .collect();
    assert_eq!(got, wants);
    assert!(s.find_many(&[]).unwrap().is_empty());
}

#[test]
fn bad_input_is_refused_and_leaves_nothing() {
    let r = redis(&[]);
    let mut s = Store::open(&url(&r)).unwrap();
    let p = n("/repo/x");
    // Out of prefix: one stray packet refuses the whole object.
    let mut segs = segment_object(&p, &[7u8; 20_000], 8000, 0);
    segs.push(data("/elsewhere/0", b"x", None));
    let e = s.put_object(&p, &segs).unwrap_err();
    assert!(matches!(e, RepoError::OutOfPrefix { .. }), "{e}");
    assert_eq!(e.status(), 400);
    // Malformed packet.
    let e = s.put_object(&p, &[vec![0x06, 0x05, 1]]).unwrap_err();
    assert!(matches!(e, RepoError::Malformed(_)), "{e}");
    assert!(s.put(&[0xFF; 3]).is_err());
    // Oversized.
    s.set_max_object_bytes(10_000);
    let e = s
        .put_object(&p, &segment_object(&p, &[1u8; 20_000], 8000, 0))
        .unwrap_err();
    assert!(matches!(e, RepoError::TooLarge { .. }), "{e}");
    assert!(
        s.list(&n("/")).unwrap().is_empty(),
        "nothing partial is visible"
    );
    // A missing segment makes the object incomplete, not silently short.
    s.set_max_object_bytes(1 << 20);
    let segs = segment_object(&p, &[3u8; 20_000], 8000, 0);
    s.put_object(&p, &segs[..2]).unwrap();
    assert!(matches!(s.get_object(&p), Err(RepoError::Incomplete(_))));
}

#[test]
fn full_redis_refuses_the_whole_object() {
    let r = redis(&["--maxmemory", "3mb", "--maxmemory-policy", "noeviction"]);
    let mut s = Store::open(&url(&r)).unwrap();
    let small = n("/repo/small");
    s.put_object(&small, &segment_object(&small, &[1u8; 10_000], 8000, 0))
        .unwrap();
    let mut refused = None;
    for i in 0..20 {
        let p = n(&format!("/repo/big{i}"));
        match s.put_object(&p, &segment_object(&p, &vec![2u8; 1 << 20], 8000, 0)) {
            Ok(_) => {}
            Err(e) => {
                refused = Some((p, e));
                break;
            }
        }
    }
    let (p, e) = refused.expect("maxmemory is reached");
    assert!(matches!(e, RepoError::Full(_)), "{e}");
    assert_eq!(e.status(), 507);
    assert!(s.list(&p).unwrap().is_empty(), "no partial object: {e}");
    assert!(s.get_object(&small).unwrap().is_some());
}

#[test]
fn redis_down_fails_with_a_status_then_reconnects_and_aof_keeps_acknowledged_writes() {
    let mut r = redis(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut s = Store::open(&url(&r)).unwrap();
    let p = n("/repo/durable");
    let content: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    s.put_object(&p, &segment_object(&p, &content, 8000, 0))
        .unwrap();
    r.kill();
    let e = s.get(&segment_name(&p, 0)).unwrap_err();
    assert!(matches!(e, RepoError::Unavailable(_)), "{e}");
    assert_eq!(e.status(), 503);
    r.restart().unwrap();
    // The same store reconnects by itself; AOF replay loses nothing acknowledged.
    let deadline = Instant::now() + Duration::from_secs(10);
    let back = loop {
        match s.get_object(&p) {
            Ok(v) => break v,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(reassemble(&back.unwrap()).unwrap(), content);
    assert_eq!(s.reconnects(), 1, "one reconnection, counted");
}

#[test]
fn unreachable_redis_is_unavailable() {
    let mut s = Store::open("/nonexistent/nexthop-repo.sock").unwrap();
    let e = s.ping().unwrap_err();
    assert!(matches!(e, RepoError::Unavailable(_)), "{e}");
}

#[test]
fn registered_prefixes_are_kept_in_redis() {
    let r = redis(&[]);
    let mut s = Store::open(&url(&r)).unwrap();
    assert!(s.prefixes().unwrap().is_empty());
    s.add_prefix(&n("/b")).unwrap();
    s.add_prefix(&n("/a/x")).unwrap();
    s.add_prefix(&n("/b")).unwrap();
    // A second process on the same Redis (a restarted Repo) reads them back.
    let mut s2 = Store::open(&url(&r)).unwrap();
    assert_eq!(s2.prefixes().unwrap(), vec![n("/a/x"), n("/b")]);
    s2.remove_prefix(&n("/a/x")).unwrap();
    assert_eq!(s.prefixes().unwrap(), vec![n("/b")]);
    // They are not stored packets.
    assert!(s.list(&n("/")).unwrap().is_empty());
}

#[test]
fn the_first_operation_after_a_redis_restart_succeeds_on_a_fresh_connection() {
    let mut r = redis(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut s = Store::open(&url(&r)).unwrap();
    let p = n("/repo/again");
    s.put_object(&p, &segment_object(&p, b"kept", 8000, 0))
        .unwrap();
    // Redis restarted while the store still holds its old connection: the
    // next operation finds it gone and runs again on a new one.
    r.restart().unwrap();
    let back = s.get_object(&p).unwrap().expect("replayed from the AOF");
    assert_eq!(reassemble(&back).unwrap(), b"kept");
    assert_eq!(s.reconnects(), 1);
    // A write the same way.
    r.restart().unwrap();
    let q = n("/repo/after");
    s.put_object(&q, &segment_object(&q, b"new", 8000, 0))
        .unwrap();
    assert_eq!(s.reconnects(), 2);
    assert_eq!(s.list(&n("/repo")).unwrap().len(), 2);
}

#[test]
fn tcp_with_auth_and_a_database_number() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    // The Unix socket for the test's own checks, TCP for the store.
    let r = redis(&["--port", &port, "--bind", "127.0.0.1"]);
    let admin_url = format!("unix://{}", r.socket().display());
    let mut admin = redis::Client::open(admin_url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("s3cret")
        .query::<()>(&mut admin)
        .unwrap();
    redis::cmd("AUTH")
        .arg("s3cret")
        .query::<()>(&mut admin)
        .unwrap();
    let p = n("/repo/tcp");
    let mut s = Store::open(&format!("redis://:s3cret@127.0.0.1:{port}/3")).unwrap();
    assert_eq!(
        s.put_object(&p, &segment_object(&p, b"over tcp", 8000, 0))
            .unwrap(),
        1
    );
    let back = s.get_object(&p).unwrap().unwrap();
    assert_eq!(reassemble(&back).unwrap(), b"over tcp");
    // The keys are in database 3, not in database 0.
    let dbsize = |c: &mut redis::Connection, db: u32| -> u64 {
        redis::cmd("SELECT").arg(db).query::<()>(c).unwrap();
        redis::cmd("DBSIZE").query(c).unwrap()
    };
    assert_eq!(dbsize(&mut admin, 0), 0);
    assert!(dbsize(&mut admin, 3) >= 3, "data key, index and times");
    // A wrong password or none: refused with Redis' reason, nothing written.
    let q = n("/repo/refused");
    for url in [
        format!("redis://:wrong@127.0.0.1:{port}/3"),
        format!("redis://127.0.0.1:{port}/3"),
    ] {
        let mut bad = Store::open(&url).unwrap();
        let e = bad
            .put_object(&q, &segment_object(&q, b"no", 8000, 0))
            .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("authentication failed") || text.contains("Authentication required"),
            "{url}: {text}"
        );
        assert_eq!(e.status(), 500, "{url}: {text}");
    }
    assert!(s.list(&q).unwrap().is_empty());
    assert_eq!(s.list(&n("/repo")).unwrap().len(), 1);
}
