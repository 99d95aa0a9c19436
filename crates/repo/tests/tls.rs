//! The store over TLS (`rediss://`) against a real `redis-server --tls-port`
//! with a self-signed CA made here: objects go in and come back whole; a
//! client trusting another CA is refused with a clear error and stores
//! nothing; a Redis asking for client certificates takes ours.

use std::net::TcpListener;
use std::path::Path;

use nexthop_repo::{reassemble, segment_object, RepoError, Store, Tls, DEFAULT_NAMESPACE};
use nexthop_testutil::redis::RedisServer;
use nexthop_wire::Name;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

/// A CA (its PEM certificate and key pair).
struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

fn ca(cn: &str) -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, cn);
    let cert = p.self_signed(&key).unwrap();
    Ca { cert, key }
}

/// A certificate for `names` signed by `ca`: (PEM certificate, PEM key).
fn leaf(ca: &Ca, names: &[&str]) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let cert = CertificateParams::new(names)
        .unwrap()
        .signed_by(&key, &ca.cert, &ca.key)
        .unwrap();
    (cert.pem(), key.serialize_pem())
}

/// A Redis on a Unix socket and a TLS port only (no plain TCP), with the
/// server certificate for 127.0.0.1 and localhost signed by `ca`.
fn tls_redis(ca: &Ca, dir: &Path, auth_clients: bool) -> (RedisServer, u16) {
    let (cert, key) = leaf(ca, &["localhost", "127.0.0.1"]);
    std::fs::create_dir_all(dir).unwrap();
    let (cf, kf, caf) = (
        dir.join("server.crt"),
        dir.join("server.key"),
        dir.join("ca.crt"),
    );
    std::fs::write(&cf, cert).unwrap();
    std::fs::write(&kf, key).unwrap();
    std::fs::write(&caf, ca.cert.pem()).unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let (cf, kf, caf) = (
        cf.to_str().unwrap().to_string(),
        kf.to_str().unwrap().to_string(),
        caf.to_str().unwrap().to_string(),
    );
    let auth = if auth_clients { "yes" } else { "no" };
    let r = RedisServer::start_unix(&[
        "--tls-port",
        &port,
        "--tls-cert-file",
        &cf,
        "--tls-key-file",
        &kf,
        "--tls-ca-cert-file",
        &caf,
        "--tls-auth-clients",
        auth,
    ])
    .expect("redis-server with TLS (Debian's is built with it)");
    (r, port.parse().unwrap())
}

fn scratch(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "nexthop-repo-tls-{tag}-{}-{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ))
}

/// Removes a scratch directory when dropped (also when the test fails).
struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn tls_with_a_given_ca_stores_and_reads_back_and_a_wrong_ca_is_refused() {
    let d = Scratch(scratch("ca"));
    let good = ca("nexthop test CA");
    let (r, port) = tls_redis(&good, &d.0, false);
    let url = format!("rediss://127.0.0.1:{port}");
    let tls = Tls {
        ca_pem: Some(good.cert.pem().into_bytes()),
        client: None,
    };
    let mut s = Store::with_tls(&url, DEFAULT_NAMESPACE, &tls).unwrap();
    s.ping().unwrap();
    let p = Name::from_uri("/repo/tls/file").unwrap();
    let content: Vec<u8> = (0..50_000u32).map(|i| (i % 253) as u8).collect();
    let segs = segment_object(&p, &content, 8000, 0);
    assert_eq!(s.put_object(&p, &segs).unwrap(), segs.len());
    let back = s.get_object(&p).unwrap().expect("stored");
    assert_eq!(reassemble(&back).unwrap(), content);

    // The same server by host name.
    let by_name = format!("rediss://localhost:{port}");
    let mut s2 = Store::with_tls(&by_name, DEFAULT_NAMESPACE, &tls).unwrap();
    assert_eq!(s2.list(&p).unwrap().len(), segs.len());

    // Another CA: the handshake is refused, with a clear error and status.
    let other = ca("some other CA");
    let wrong = Tls {
        ca_pem: Some(other.cert.pem().into_bytes()),
        client: None,
    };
    let mut bad = Store::with_tls(&url, DEFAULT_NAMESPACE, &wrong).unwrap();
    let q = Name::from_uri("/repo/tls/never").unwrap();
    let e = bad
        .put_object(&q, &segment_object(&q, b"x", 8000, 0))
        .unwrap_err();
    assert!(matches!(e, RepoError::Tls(_)), "{e:?}");
    assert_eq!(e.status(), 503);
    let text = e.to_string();
    assert!(text.contains("certificate"), "{text}");
    assert!(text.contains("--redis-ca"), "{text}");
    // Nothing of it reached Redis (read through the Unix socket).
    let mut plain = Store::open(r.socket().to_str().unwrap()).unwrap();
    assert!(plain.list(&q).unwrap().is_empty());
    assert_eq!(plain.list(&p).unwrap().len(), segs.len());

    // Trusting the system's roots only (no CA given): refused as well.
    let mut sys = Store::open(&url).unwrap();
    assert!(matches!(sys.ping().unwrap_err(), RepoError::Tls(_)));
}

#[test]
fn tls_client_certificates_when_redis_asks_for_them() {
    let d = Scratch(scratch("mtls"));
    let good = ca("nexthop test CA");
    let (_r, port) = tls_redis(&good, &d.0, true);
    let url = format!("rediss://127.0.0.1:{port}");
    let (cert, key) = leaf(&good, &["nexthop-repo"]);
    let with_cert = Tls {
        ca_pem: Some(good.cert.pem().into_bytes()),
        client: Some((cert.into_bytes(), key.into_bytes())),
    };
    let mut s = Store::with_tls(&url, DEFAULT_NAMESPACE, &with_cert).unwrap();
    let p = Name::from_uri("/repo/mtls").unwrap();
    s.put_object(&p, &segment_object(&p, b"hello", 8000, 0))
        .unwrap();
    assert_eq!(
        reassemble(&s.get_object(&p).unwrap().unwrap()).unwrap(),
        b"hello"
    );
    // Without a client certificate the server refuses us.
    let ca_only = Tls {
        ca_pem: with_cert.ca_pem.clone(),
        client: None,
    };
    let mut anon = Store::with_tls(&url, DEFAULT_NAMESPACE, &ca_only).unwrap();
    let e = anon.ping().unwrap_err();
    assert_eq!(e.status(), 503, "{e}");
}

#[test]
fn tls_settings_are_checked_when_the_store_is_opened() {
    let ca_only = Tls {
        ca_pem: Some(ca("x").cert.pem().into_bytes()),
        client: None,
    };
    // A CA for a location that is not rediss://.
    let e = Store::with_tls("redis://127.0.0.1:1", DEFAULT_NAMESPACE, &ca_only).unwrap_err();
    assert!(matches!(e, RepoError::Malformed(_)), "{e}");
    assert!(e.to_string().contains("rediss://"), "{e}");
    let e = Store::with_tls("/run/x.sock", DEFAULT_NAMESPACE, &ca_only).unwrap_err();
    assert_eq!(e.status(), 400);
    // A CA file that holds no PEM certificate.
    let junk = Tls {
        ca_pem: Some(
            b"-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n".to_vec(),
        ),
        client: None,
    };
    let e = Store::with_tls("rediss://127.0.0.1:1", DEFAULT_NAMESPACE, &junk).unwrap_err();
    assert_eq!(e.status(), 400, "{e}");
}

#[test]
fn a_ca_file_without_a_certificate_is_refused_at_open() {
    let empty = Tls {
        ca_pem: Some(b"no PEM here\n".to_vec()),
        client: None,
    };
    let e = Store::with_tls("rediss://127.0.0.1:1", DEFAULT_NAMESPACE, &empty).unwrap_err();
    assert!(matches!(e, RepoError::Malformed(_)), "{e}");
    assert!(e.to_string().contains("no PEM certificate"), "{e}");
}
