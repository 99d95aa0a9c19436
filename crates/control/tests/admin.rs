//! The admin channel on loopback: pushes reach followers, a bad push is
//! refused whole, a wrong key and a replayed push are refused, and admin
//! connections count against the controller's caps.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{fib, key, mac, wait_until, WAIT};
use nexthop_control::{
    AdminClient, AdminError, AuthKey, Controller, ControllerConfig, FibFollower, FollowerConfig,
};
use nexthop_othello::fib::Action;

fn ctl() -> Controller<[u8; 6]> {
    let cfg = ControllerConfig {
        log: false,
        ..ControllerConfig::default()
    };
    Controller::start(fib(100), key(), cfg).expect("controller")
}

fn mac_text(i: u64) -> String {
    let m = mac(i);
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn admin(c: &Controller<[u8; 6]>) -> AdminClient {
    AdminClient::connect(c.local_addr(), &key(), WAIT).expect("admin client")
}

fn stat(values: &[(String, u64)], name: &str) -> u64 {
    values
        .iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no counter {name} in {values:?}"))
        .1
}

#[test]
fn push_is_applied_and_reaches_a_follower() {
    let c = ctl();
    let cfg = FollowerConfig {
        backoff_min: Duration::from_millis(5),
        log: false,
        ..FollowerConfig::new(c.local_addr(), "admin-test")
    };
    let f = FibFollower::start(key(), cfg).expect("follower");
    assert!(f.wait_for(WAIT, |s| s.snapshots == 1));
    let mut a = admin(&c);
    let changes = format!(
        "# from the admin test\n+ {} 7\n- {}\n= {} drop\n",
        mac_text(200),
        mac_text(1),
        mac_text(2)
    );
    let r = a.push(&changes).expect("push");
    assert_eq!((r.changes, r.version, r.followers), (3, 3, 1));
    assert_eq!(r.names, 100 + 1 - 1);
    assert!(r.deltas >= 1);
    assert!(wait_until(|| {
        f.table().is_some_and(|t| {
            t.lookup(&mac(200)) == Some(&Action::Port(7))
                && t.lookup(&mac(2)) == Some(&Action::Drop)
        })
    }));
    c.with_fib(|fib| assert_eq!(fib.get(&mac(1)), None));
    let s = a.stats().expect("stats");
    assert_eq!(stat(&s, "version"), 3);
    assert_eq!(stat(&s, "pushes"), 1);
    assert_eq!(stat(&s, "admin_sessions"), 1);
    assert_eq!(stat(&s, "names"), 100);
    assert_eq!(c.stats().pushes, 1);
    // The follower's connection is a forwarder's, the client's is not.
    assert_eq!(stat(&s, "active"), 1);
    f.stop();
}

#[test]
fn bad_push_is_refused_whole_and_the_fib_is_unchanged() {
    let c = ctl();
    let before = c.with_fib(|f| f.othello().snapshot(0));
    let mut a = admin(&c);
    // The second change deletes a name the FIB does not hold.
    let bad = format!("+ {} 3\n- {}\n", mac_text(300), mac_text(301));
    match a.push(&bad) {
        Err(AdminError::Refused(text)) => assert!(text.starts_with("line 2:"), "{text}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    // A line that does not parse.
    match a.push("+ not-a-mac 3\n") {
        Err(AdminError::Refused(text)) => assert!(text.starts_with("line 1:"), "{text}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(c.with_fib(|f| f.othello().snapshot(0)), before);
    assert_eq!(c.version(), 0);
    c.with_fib(|f| assert_eq!(f.get(&mac(300)), None));
    // The connection stays usable after a refusal.
    let r = a
        .push(&format!("+ {} 3\n", mac_text(300)))
        .expect("good push");
    assert_eq!((r.changes, r.version), (1, 1));
    let s = c.stats();
    assert_eq!((s.pushes, s.pushes_refused, s.rejects), (1, 2, 0));
}

#[test]
fn wrong_key_is_refused() {
    let c = ctl();
    let other = AuthKey::new(b"another-admin-secret-0123456789").expect("key");
    let e = AdminClient::connect(c.local_addr(), &other, WAIT).expect_err("refused");
    assert!(matches!(e, AdminError::Handshake(_)), "{e}");
    assert!(e.to_string().contains("key"), "{e}");
    assert!(wait_until(|| c.stats().rejects == 1));
    assert_eq!(c.stats().admin_sessions, 0);
    assert_eq!(c.version(), 0);
}

/// Forwards one connection to `to` and records what the client sent.
fn recording_proxy(to: SocketAddr) -> (SocketAddr, Arc<Mutex<Vec<u8>>>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let sent = Arc::new(Mutex::new(Vec::new()));
    let rec = sent.clone();
    std::thread::spawn(move || {
        let (client, _) = l.accept().expect("accept");
        let server = TcpStream::connect(to).expect("connect");
        let (mut c_rd, mut s_wr) = (
            client.try_clone().expect("clone"),
            server.try_clone().expect("clone"),
        );
        let back = std::thread::spawn(move || {
            let (mut s_rd, mut c_wr) = (server, client);
            let _ = std::io::copy(&mut s_rd, &mut c_wr);
            let _ = c_wr.shutdown(std::net::Shutdown::Both);
        });
        let mut buf = [0u8; 4096];
        loop {
            match c_rd.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    rec.lock().expect("lock").extend_from_slice(&buf[..n]);
                    if s_wr.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = s_wr.shutdown(std::net::Shutdown::Both);
        let _ = back.join();
    });
    (addr, sent)
}

#[test]
fn recorded_push_replayed_on_a_new_connection_is_refused() {
    let c = ctl();
    let (proxy, sent) = recording_proxy(c.local_addr());
    {
        let mut a = AdminClient::connect(proxy, &key(), WAIT).expect("admin via proxy");
        let r = a.push(&format!("+ {} 5\n", mac_text(400))).expect("push");
        assert_eq!(r.version, 1);
    }
    assert!(wait_until(|| c.stats().active == 0 && c.stats().pushes == 1));
    let recorded = sent.lock().expect("lock").clone();
    assert!(recorded.len() > 100, "{} bytes recorded", recorded.len());
    let mut s = TcpStream::connect(c.local_addr()).expect("connect");
    s.set_read_timeout(Some(WAIT)).expect("timeout");
    s.write_all(&recorded).expect("replay");
    // The controller answers the replayed Nonce with a fresh one, then
    // refuses the Hello (keyed for the old session) and closes.
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    assert!(wait_until(|| c.stats().rejects == 1));
    assert_eq!(c.version(), 1);
    let st = c.stats();
    assert_eq!((st.pushes, st.admin_sessions), (1, 1));
}

#[test]
fn admin_connections_count_against_the_connection_cap() {
    let cfg = ControllerConfig {
        log: false,
        max_connections: 1,
        ..ControllerConfig::default()
    };
    let c = Controller::start(fib(10), key(), cfg).expect("controller");
    let mut first = admin(&c);
    assert!(AdminClient::connect(c.local_addr(), &key(), Duration::from_secs(5)).is_err());
    assert!(wait_until(|| c.stats().refused == 1));
    // The first one is still served.
    assert_eq!(stat(&first.stats().expect("stats"), "refused"), 1);
    drop(first);
    assert!(wait_until(|| {
        AdminClient::connect(c.local_addr(), &key(), Duration::from_secs(5)).is_ok()
    }));
}

#[test]
fn idle_admin_connection_is_closed() {
    let cfg = ControllerConfig {
        log: false,
        admin_idle_timeout: Duration::from_millis(100),
        ..ControllerConfig::default()
    };
    let c = Controller::start(fib(10), key(), cfg).expect("controller");
    let mut a = admin(&c);
    std::thread::sleep(Duration::from_millis(400));
    assert!(a.stats().is_err());
    assert_eq!(c.stats().rejects, 0);
}
