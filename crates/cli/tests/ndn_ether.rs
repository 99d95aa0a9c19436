//! The NDN Ethernet face end to end: two `nexthop ndn run` forwarders in
//! two network namespaces joined by a veth pair, each with `--ether` on its
//! end. A python-ndn producer registers on forwarder B (Unix socket); on
//! forwarder A a route points the prefix at A's Ethernet multicast face; a
//! python-ndn consumer on A gets the producer's Data across the link, a
//! 4,000-byte Data comes back in NDNLPv2 fragments under the 1,500-byte
//! MTU, and both faces count what crossed. Needs root (namespaces,
//! CAP_NET_RAW) and the interop venv (`bash scripts/setup-interop.sh`);
//! namespaces and processes are removed also when an assertion fails.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nexthop_dataplane::netns::{is_root, Namespaces};
use tempfile::TempDir;

const NEXTHOP: &str = env!("CARGO_BIN_EXE_nexthop");

#[path = "common/proc.rs"]
mod proc;
use proc::{python, Proc};

fn peer_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ndn_run/peer.py")
}

/// `nexthop ndn run --unix SOCK --ether IFACE` in namespace `ns`; its
/// Ethernet face id from the readiness line.
fn forwarder(ns: &str, sock: &Path, iface: &str) -> (Proc, u64) {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, NEXTHOP, "ndn", "run", "--unix"])
        .arg(sock)
        .args(["--ether", iface]);
    let p = Proc::spawn(cmd, true);
    let ready = p.wait_line("nexthop ndn: ready", Duration::from_secs(10));
    let id = ready
        .split(' ')
        .find_map(|f| f.strip_prefix(&format!("ether={iface}:")))
        .unwrap_or_else(|| panic!("ether={iface}:ID in {ready:?}"))
        .parse()
        .expect("a face id");
    (p, id)
}

fn nexthop(args: &[&str], sock: &Path) -> String {
    let out = Command::new(NEXTHOP)
        .args(args)
        .arg("--unix")
        .arg(sock)
        .output()
        .expect("run nexthop");
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "nexthop {args:?}: {s}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s
}

/// The `ndn face list --json` entry of face `id`.
fn face(sock: &Path, id: u64) -> serde_json::Value {
    nexthop(&["ndn", "face", "list", "--json"], sock)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["face"] == id)
        .unwrap_or_else(|| panic!("face {id} in the face list"))
}

fn consume(sock: &Path, name: &str) -> String {
    let out = Command::new(python())
        .arg(peer_script())
        .arg("consume")
        .arg(format!("unix://{}", sock.display()))
        .arg(name)
        .output()
        .expect("run the consumer");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn two_forwarders_exchange_interests_and_fragmented_data_over_an_ethernet_link() {
    if !is_root() {
        eprintln!("skipped: the Ethernet face test needs root (network namespaces, CAP_NET_RAW)");
        return;
    }
    let tag = std::process::id() % 100_000;
    let (na, nb) = (format!("nhndnEa{tag}"), format!("nhndnEb{tag}"));
    let mut ns = Namespaces::new();
    ns.create(&na).unwrap();
    ns.create(&nb).unwrap();
    ns.veth(&na, "ea", &nb, "eb", Some(1500)).unwrap();
    let dir = TempDir::new().unwrap();
    let (sa, sb) = (dir.path().join("a.sock"), dir.path().join("b.sock"));
    let (_fa, face_a) = forwarder(&na, &sa, "ea");
    let (_fb, face_b) = forwarder(&nb, &sb, "eb");

    let fa = face(&sa, face_a);
    assert_eq!(fa["remote"], "ether://[01:00:5e:00:17:aa]", "{fa}");
    assert_eq!(fa["local"], "dev://ea", "{fa}");

    // The producer on B: /ether/small answers "hello NAME"; /ether/big
    // answers 4,000 bytes (three fragments under MTU 1500).
    let mut prod = Command::new(python());
    prod.arg(peer_script())
        .arg("produce")
        .arg(format!("unix://{}", sb.display()))
        .arg("/ether/small");
    let p1 = Proc::spawn(prod, false);
    p1.wait_line("registered True", Duration::from_secs(10));
    let mut prod = Command::new(python());
    prod.arg(peer_script())
        .arg("produce")
        .arg(format!("unix://{}", sb.display()))
        .arg("/ether/big")
        .arg("4000");
    let p2 = Proc::spawn(prod, false);
    p2.wait_line("registered True", Duration::from_secs(10));

    // Without a route A answers NoRoute; with one, Data crosses the link.
    assert_eq!(consume(&sa, "/ether/small/x"), "NACK 150");
    nexthop(&["ndn", "route", "add", "/ether", &face_a.to_string()], &sa);
    assert_eq!(consume(&sa, "/ether/small/x"), "DATA hello /ether/small/x");
    let big = consume(&sa, "/ether/big/y");
    assert_eq!(big, format!("DATA {}", "x".repeat(4000)));

    let fa = face(&sa, face_a);
    let fb = face(&sb, face_b);
    assert!(fa["out_interests"].as_u64().unwrap() >= 2, "{fa}");
    assert!(fa["in_data"].as_u64().unwrap() >= 2, "{fa}");
    assert!(fb["in_interests"].as_u64().unwrap() >= 2, "{fb}");
    assert!(fb["out_data"].as_u64().unwrap() >= 2, "{fb}");
    drop((p1, p2));
}

#[test]
fn a_missing_or_bad_interface_is_refused_with_its_name() {
    let dir = TempDir::new().unwrap();
    for (iface, says) in [
        ("nh-no-such0", "nh-no-such0"),
        ("a/b", "not an interface name"),
    ] {
        let out = Command::new(NEXTHOP)
            .args(["ndn", "run", "--unix"])
            .arg(dir.path().join("s.sock"))
            .args(["--ether", iface])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(err.contains(says), "{iface}: {err}");
    }
}
