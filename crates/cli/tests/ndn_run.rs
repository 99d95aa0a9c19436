//! `nexthop ndn run` end to end on loopback with python-ndn 0.5.2 peers
//! (`tests/ndn_run/peer.py`, run with `target/interop-venv/bin/python`,
//! installed by `bash scripts/setup-interop.sh`; the tests fail and say so
//! when it is absent): a producer registered with rib/register over the
//! Unix socket and one over UDP, consumers over Unix, UDP and TCP, Nack NoRoute without
//! a route, bad datagrams counted and dropped while forwarding goes on,
//! `--udp-socket-buffer` granted as asked, UDP GSO/GRO on by default and
//! off by `--no-udp-gso` or `udp_gso = false`, `--cs-admit-after`,
//! `--cs-policy` and `--pit fingerprint` reaching the forwarder,
//! and a clean stop on SIGTERM; the status datasets read by python-ndn's
//! `nfd_mgmt` (`tests/ndn_run/mgmt.py`) and `nexthop ndn route|face|
//! strategy|status` acting on the running forwarder; python-ndn's own tools
//! (`python -m ndn.bin.tools`): `poke`/`peek` over Unix and UDP, and
//! `putchunks`/`catchunks` of a 5 MB file byte-compared through 2 forwarding
//! threads. Every child is killed on drop, also when an assertion fails.

use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nexthop_wire::ndn::{Data, Interest, Name, Packet};
use tempfile::TempDir;

const NEXTHOP: &str = env!("CARGO_BIN_EXE_nexthop");

fn peer_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ndn_run/peer.py")
}

#[path = "common/proc.rs"]
mod proc;
use proc::{field, python, Proc};

struct Forwarder {
    proc: Proc,
    ready: String,
    udp: String,
    tcp: String,
    unix: PathBuf,
    _dir: TempDir,
}

fn start_forwarder() -> Forwarder {
    start_forwarder_with(&[])
}

fn start_forwarder_with(extra: &[&str]) -> Forwarder {
    let dir = TempDir::new().unwrap();
    let unix = dir.path().join("nfd.sock");
    let mut cmd = Command::new(NEXTHOP);
    cmd.args([
        "ndn",
        "run",
        "--udp",
        "127.0.0.1:0",
        "--tcp",
        "127.0.0.1:0",
        "--unix",
    ])
    .arg(&unix)
    .args(extra);
    let proc = Proc::spawn(cmd, true);
    let ready = proc.wait_line("nexthop ndn: ready", Duration::from_secs(10));
    let udp = ready
        .split(' ')
        .find_map(|f| f.strip_prefix("udp="))
        .expect("udp= in the readiness line")
        .to_string();
    let tcp = ready
        .split(' ')
        .find_map(|f| f.strip_prefix("tcp="))
        .expect("tcp= in the readiness line")
        .to_string();
    assert!(
        ready.contains(&format!("unix={}", unix.display())),
        "{ready}"
    );
    Forwarder {
        proc,
        ready,
        udp,
        tcp,
        unix,
        _dir: dir,
    }
}

fn face_uri_unix(f: &Forwarder) -> String {
    format!("unix://{}", f.unix.display())
}

fn face_uri_udp(f: &Forwarder) -> String {
    format!("udp://{}", f.udp)
}

fn producer(face: &str, prefix: &str) -> Proc {
    producer_sized(face, prefix, None)
}

/// A producer answering with `size` bytes of content (`None`: "hello NAME").
fn producer_sized(face: &str, prefix: &str, size: Option<usize>) -> Proc {
    let mut cmd = Command::new(python());
    cmd.arg(peer_script()).args(["produce", face, prefix]);
    if let Some(n) = size {
        cmd.arg(n.to_string());
    }
    let p = Proc::spawn(cmd, false);
    p.wait_line("registered True", Duration::from_secs(10));
    p
}

fn consume(face: &str, name: &str) -> String {
    let out = Command::new(python())
        .arg(peer_script())
        .args(["consume", face, name])
        .output()
        .expect("run the consumer");
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success(),
        "consumer failed: {s}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s
}

/// SIGTERM the forwarder; its exit status and summary line.
fn stop(f: &mut Forwarder) -> (bool, String) {
    let st = Command::new("kill")
        .args(["-TERM", &f.proc.child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(st.success());
    let line = f
        .proc
        .wait_line("nexthop ndn: stopped", Duration::from_secs(5));
    let ok = f.proc.child.wait().map(|s| s.success()).unwrap_or(false);
    (ok, line)
}

#[test]
fn python_ndn_producers_and_consumers_over_unix_udp_and_tcp() {
    let mut f = start_forwarder();
    let unix = face_uri_unix(&f);
    let udp = face_uri_udp(&f);
    let _p1 = producer(&unix, "/nexthop/unix");
    let _p2 = producer(&udp, "/nexthop/udp");

    assert_eq!(
        consume(&udp, "/nexthop/unix/a"),
        "DATA hello /nexthop/unix/a"
    );
    assert_eq!(
        consume(&unix, "/nexthop/unix/b"),
        "DATA hello /nexthop/unix/b"
    );
    assert_eq!(
        consume(&unix, "/nexthop/udp/c"),
        "DATA hello /nexthop/udp/c"
    );
    assert_eq!(consume(&udp, "/nexthop/udp/d"), "DATA hello /nexthop/udp/d");
    let tcp = format!("tcp://{}", f.tcp);
    assert_eq!(consume(&tcp, "/nexthop/udp/e"), "DATA hello /nexthop/udp/e");
    // No route: Nack NoRoute (150).
    assert_eq!(consume(&unix, "/nowhere/x"), "NACK 150");

    let (ok, line) = stop(&mut f);
    assert!(ok, "exit status after SIGTERM: {line}");
    assert_eq!(field(&line, "commands"), 2, "{line}");
    assert_eq!(field(&line, "commands_refused"), 0, "{line}");
    assert!(field(&line, "satisfied") >= 5, "{line}");
    assert!(!f.unix.exists(), "the Unix socket file is removed at exit");
}

#[test]
fn bad_datagrams_are_counted_and_dropped_and_forwarding_goes_on() {
    let mut f = start_forwarder();
    let _p = producer(&face_uri_unix(&f), "/nexthop/raw");
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    sock.connect(&f.udp).unwrap();
    let garbage: [&[u8]; 5] = [
        &[],
        &[0xff],
        &[0x05, 0x10, 0x07],
        &[0x64, 0x03, 0x50, 0x01, 0x00],
        &[0x06, 0x02, 0x07, 0x00],
    ];
    for g in garbage {
        sock.send(g).unwrap();
    }
    sock.send(&vec![0x05; 9000]).unwrap();
    let mut i = Interest::new(Name::from_uri("/nexthop/raw/1").unwrap());
    i.nonce = Some(0x1234);
    i.lifetime_ms = Some(2000);
    sock.send(&i.to_wire()).unwrap();
    let mut buf = [0u8; 9000];
    let n = sock.recv(&mut buf).expect("the Data comes back");
    let d = match Packet::decode(&buf[..n]).unwrap() {
        Packet::Data(d) => d,
        Packet::Lp(lp) => Data::decode(lp.fragment.as_deref().unwrap()).unwrap(),
        p => panic!("expected Data, got {p:?}"),
    };
    assert_eq!(d.name.to_string(), "/nexthop/raw/1");

    let (ok, line) = stop(&mut f);
    assert!(ok, "{line}");
    let bad = field(&line, "drops") + field(&line, "bad_lp") + field(&line, "oversized");
    assert!(bad >= 6, "every bad datagram counted: {line}");
}

#[test]
fn refuses_a_config_without_listeners_and_an_occupied_path() {
    let out = Command::new(NEXTHOP).args(["ndn", "run"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no face listener"));
    let dir = TempDir::new().unwrap();
    let file = dir.path().join("plain");
    std::fs::write(&file, b"x").unwrap();
    let out = Command::new(NEXTHOP)
        .args(["ndn", "run", "--unix"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a socket"));
    assert_eq!(
        std::fs::read(&file).unwrap(),
        b"x",
        "the file is left alone"
    );
}

#[test]
fn the_udp_socket_buffer_flag_reaches_the_forwarder() {
    let mut f = start_forwarder_with(&["--udp-socket-buffer", "1048576"]);
    let (ok, line) = stop(&mut f);
    assert!(ok, "{line}");
    let (r, w) = (field(&line, "udp_rcvbuf"), field(&line, "udp_sndbuf"));
    // Linux grants twice the request; past net.core.rmem_max only as root.
    let root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.trim_ascii() == b"0")
        .unwrap_or(false);
    if root {
        assert_eq!((r, w), (2 << 20, 2 << 20), "{line}");
    } else {
        assert!(r > 0 && w > 0, "{line}");
    }
    let out = Command::new(NEXTHOP)
        .args([
            "ndn",
            "run",
            "--udp",
            "127.0.0.1:0",
            "--udp-socket-buffer",
            "65535",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("udp_socket_buffer 65535 not in"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `key=word` of a summary line.
fn word<'a>(line: &'a str, key: &str) -> &'a str {
    line.split(' ')
        .find_map(|f| f.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {line}"))
}

#[test]
fn udp_gso_is_on_by_default_and_off_by_flag_or_config_and_answers_either_way() {
    let dir = TempDir::new().unwrap();
    let cfg = dir.path().join("nogso.toml");
    std::fs::write(&cfg, "udp_gso = false\n").unwrap();
    for (args, want) in [
        (vec![], "on"),
        (vec!["--no-udp-gso"], "off"),
        (vec!["--config", cfg.to_str().unwrap()], "off"),
    ] {
        let mut f = start_forwarder_with(&args);
        // A plain socket's Interest for an unrouted name: the Nack comes
        // back as one datagram either way.
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        sock.connect(&f.udp).unwrap();
        let mut i = Interest::new(Name::from_uri("/no/route/here").unwrap());
        i.nonce = Some(7);
        sock.send(&i.to_wire()).unwrap();
        let mut buf = [0u8; 9000];
        let n = sock.recv(&mut buf).expect("a Nack");
        assert!(n > 0);
        let (ok, line) = stop(&mut f);
        assert!(ok, "{line}");
        assert_eq!(word(&line, "udp_gso"), want, "{args:?}: {line}");
        assert_eq!(word(&line, "udp_gro"), want, "{args:?}: {line}");
        assert_eq!(field(&line, "udp_gso_refused"), 0, "{line}");
        assert!(field(&line, "udp_messages_in") >= 1, "{line}");
        assert!(field(&line, "udp_messages_out") >= 1, "{line}");
    }
}

/// Send an Interest for `name` (no MustBeFresh, a fresh nonce each time)
/// `times` times over one UDP socket, each answered with its Data.
fn fetch_raw(udp: &str, name: &str, times: u32) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    sock.connect(udp).unwrap();
    let mut buf = [0u8; 9000];
    for k in 0..times {
        let mut i = Interest::new(Name::from_uri(name).unwrap());
        i.nonce = Some(0x5000 + k);
        i.lifetime_ms = Some(2000);
        sock.send(&i.to_wire()).unwrap();
        let n = sock.recv(&mut buf).expect("the Data comes back");
        let d = match Packet::decode(&buf[..n]).unwrap() {
            Packet::Data(d) => d,
            Packet::Lp(lp) => Data::decode(lp.fragment.as_deref().unwrap()).unwrap(),
            p => panic!("expected Data, got {p:?}"),
        };
        assert_eq!(d.name.to_string(), name);
    }
}

#[test]
fn cs_policy_admit_after_and_pit_mode_flags_reach_the_forwarder() {
    // Selective caching: the Data of a name asked 4 times is stored at the
    // third request, so only the fourth is a Content Store hit; without
    // the flag the second, third and fourth are.
    for (extra, hits) in [
        (&["--cs-admit-after", "3", "--cs-policy", "lfu"][..], 1),
        (&["--cs-policy", "lru"][..], 3),
    ] {
        let mut f = start_forwarder_with(extra);
        let _p = producer(&face_uri_unix(&f), "/nexthop/k");
        fetch_raw(&f.udp, "/nexthop/k/1", 4);
        let (ok, line) = stop(&mut f);
        assert!(ok, "{line}");
        assert_eq!(field(&line, "cs_hits"), hits, "{extra:?}: {line}");
        assert_eq!(field(&line, "satisfied"), 4 - hits, "{extra:?}: {line}");
    }

    // The fingerprint PIT forwards python-ndn's Interests and Data.
    let mut f = start_forwarder_with(&["--pit", "fingerprint", "--max-faces", "32"]);
    let _p = producer(&face_uri_unix(&f), "/nexthop/fp");
    fetch_raw(&f.udp, "/nexthop/fp/1", 1);
    assert_eq!(
        consume(&face_uri_udp(&f), "/nexthop/fp/2"),
        "DATA hello /nexthop/fp/2"
    );
    let (ok, line) = stop(&mut f);
    assert!(ok, "{line}");
    assert_eq!(field(&line, "satisfied"), 2, "{line}");

    for (args, msg) in [
        (
            &["--pit", "fingerprint"][..],
            "max_faces 1024 must be at most 32",
        ),
        (
            &["--cs-admit-after", "256"][..],
            "cs_admit_after 256 not in 0..=255",
        ),
        (&["--pit", "fuzzy"][..], "invalid value 'fuzzy'"),
        (&["--cs-policy", "fifo"][..], "invalid value 'fifo'"),
    ] {
        let out = Command::new(NEXTHOP)
            .args(["ndn", "run", "--udp", "127.0.0.1:0"])
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(msg), "{args:?}: {err}");
    }
}

/// `nexthop ndn ARGS...`: its stdout, asserting success.
fn nexthop_ndn(args: &[&str]) -> String {
    let out = Command::new(NEXTHOP)
        .arg("ndn")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "nexthop ndn {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json_lines(s: &str) -> Vec<serde_json::Value> {
    s.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn python_ndn_reads_the_status_datasets() {
    let mut f = start_forwarder();
    let unix = face_uri_unix(&f);
    let udp = face_uri_udp(&f);
    let _p = producer(&unix, "/nexthop/ds");
    assert_eq!(consume(&udp, "/nexthop/ds/a"), "DATA hello /nexthop/ds/a");

    let out = Command::new(python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ndn_run/mgmt.py"))
        .arg(&unix)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    let fib = v["fib"].as_array().expect("fib/list decoded");
    let route = fib
        .iter()
        .find(|e| e["name"] == "/nexthop/ds")
        .unwrap_or_else(|| panic!("the registered route in {fib:?}"));
    let producer_face = route["hops"][0][0].as_u64().unwrap();
    assert_eq!(route["hops"][0][1], 0, "python-ndn registers with cost 0");
    let faces = v["faces"].as_array().expect("faces/list decoded");
    let pf = faces
        .iter()
        .find(|x| x["id"] == producer_face)
        .unwrap_or_else(|| panic!("the producer's face {producer_face} in {faces:?}"));
    assert_eq!(pf["scope"], "LOCAL");
    assert!(pf["uri"].as_str().unwrap().starts_with("fd://"), "{pf}");
    assert_eq!(pf["local_uri"], format!("unix://{}", f.unix.display()));
    let consumer_gone_or_counted = faces
        .iter()
        .filter(|x| x["uri"].as_str().unwrap().starts_with("udp4://127.0.0.1:"))
        .all(|x| x["in_interests"].as_u64().unwrap() >= 1 && x["out_data"] == 1);
    assert!(consumer_gone_or_counted, "{faces:?}");
    assert!(pf["out_bytes"].as_u64().unwrap() > 0);
    let g = &v["general"];
    assert!(g["version"].as_str().unwrap().starts_with("nexthop "));
    assert!(g["fib"].as_u64().unwrap() >= 1, "{g}");
    assert!(g["in_interests"].as_u64().unwrap() >= 1, "{g}");
    assert!(g["satisfied"].as_u64().unwrap() >= 1, "{g}");
    assert_eq!(
        v["strategies"][0],
        serde_json::json!(["/", "/localhost/nfd/strategy/best-route/v=5"])
    );
    let (ok, _) = stop(&mut f);
    assert!(ok);
}

#[test]
fn ndn_route_face_strategy_and_status_act_on_a_running_forwarder() {
    let mut f = start_forwarder();
    let unix_path = f.unix.display().to_string();
    let unix = face_uri_unix(&f);
    let udp = face_uri_udp(&f);
    let _p = producer(&unix, "/nexthop/cli");
    let on = ["--unix", unix_path.as_str()];
    let with = |args: &[&str]| -> Vec<String> {
        args.iter()
            .chain(on.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let run = |args: &[&str]| {
        let a = with(args);
        nexthop_ndn(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };

    let routes = json_lines(&run(&["route", "list", "--json"]));
    let r = routes
        .iter()
        .find(|r| r["prefix"] == "/nexthop/cli")
        .unwrap_or_else(|| panic!("{routes:?}"));
    let face = r["hops"][0]["face"].as_u64().unwrap().to_string();
    let faces = json_lines(&run(&["face", "list", "--json"]));
    assert!(faces.iter().any(
        |x| x["face"].as_u64().map(|n| n.to_string()) == Some(face.clone())
            && x["scope"] == "local"
    ));
    let text = run(&["face", "list"]);
    assert!(
        text.contains(&format!("faceid={face} remote=fd://")),
        "{text}"
    );

    // Remove the producer's route: Nack NoRoute.
    let out = run(&["route", "remove", "/nexthop/cli", &face]);
    assert!(out.contains("rib unregister /nexthop/cli face="), "{out}");
    assert_eq!(consume(&udp, "/nexthop/cli/a"), "NACK 150");
    assert!(!run(&["route", "list"]).contains("/nexthop/cli"));
    // Add it back with a cost: Data again, and the list shows the cost.
    run(&["route", "add", "/nexthop/cli", &face, "--cost", "5"]);
    assert_eq!(consume(&udp, "/nexthop/cli/b"), "DATA hello /nexthop/cli/b");
    let list = run(&["route", "list"]);
    assert!(
        list.lines().any(|l| l == format!("/nexthop/cli {face}:5")),
        "{list}"
    );

    run(&["strategy", "set", "/nexthop/cli", "multicast"]);
    let s = run(&["strategy", "list"]);
    assert!(
        s.contains("/nexthop/cli /localhost/nfd/strategy/multicast/v=4"),
        "{s}"
    );
    assert_eq!(consume(&udp, "/nexthop/cli/c"), "DATA hello /nexthop/cli/c");
    run(&["strategy", "unset", "/nexthop/cli"]);

    let st = run(&["status"]);
    assert!(st.lines().any(|l| l == "fib_entries: 1"), "{st}");
    let js: serde_json::Value = serde_json::from_str(run(&["status", "--json"]).trim()).unwrap();
    assert!(js["satisfied"].as_u64().unwrap() >= 2, "{js}");
    // Over UDP too.
    let st = nexthop_ndn(&["status", "--udp", &f.udp]);
    assert!(st.starts_with("version: nexthop "), "{st}");

    // A refused command: non-zero exit with the status code.
    let out = Command::new(NEXTHOP)
        .args([
            "ndn", "strategy", "set", "/x", "random", "--unix", &unix_path,
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("404"));
    let (ok, _) = stop(&mut f);
    assert!(ok);
}

#[test]
fn data_over_the_udp_mtu_goes_out_as_fragments_and_reassembles() {
    use nexthop_ndnd::reasm::Reassembler;
    use nexthop_wire::ndn::LpPacket;

    let mut f = start_forwarder_with(&["--udp-mtu", "1400"]);
    let _p = producer_sized(&face_uri_unix(&f), "/nexthop/big", Some(8000));
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    sock.connect(&f.udp).unwrap();
    let mut i = Interest::new(Name::from_uri("/nexthop/big/1").unwrap());
    i.nonce = Some(0x4321);
    i.lifetime_ms = Some(2000);
    sock.send(&i.to_wire()).unwrap();
    let mut r = Reassembler::new(4, 5000);
    let mut buf = [0u8; 65536];
    let mut datagrams = 0;
    let whole = loop {
        let n = sock.recv(&mut buf).expect("fragments arrive");
        assert!(n <= 1400, "a {n}-byte datagram over the MTU");
        datagrams += 1;
        let lp = LpPacket::decode(&buf[..n]).expect("an LpPacket fragment");
        assert!(lp.frag_count.unwrap() > 1);
        if let Some(w) = r.push(1, lp, 0) {
            break w;
        }
    };
    assert!(datagrams >= 6, "{datagrams}");
    let d = Data::decode(whole.fragment.as_deref().unwrap()).unwrap();
    assert_eq!(d.name.to_string(), "/nexthop/big/1");
    assert_eq!(d.content.unwrap(), vec![b'x'; 8000]);
    // Stream faces never fragment: the Unix consumer gets it whole.
    let got = consume(&face_uri_unix(&f), "/nexthop/big/2");
    assert_eq!(
        got.len(),
        "DATA ".len() + 8000,
        "{}",
        &got[..40.min(got.len())]
    );

    let (ok, line) = stop(&mut f);
    assert!(ok, "{line}");
    assert_eq!(field(&line, "fragmented"), 1, "{line}");
    assert_eq!(field(&line, "frag_failed"), 0, "{line}");
}

#[test]
fn counters_per_face_and_drop_reason_reach_nexthop_stats_and_prometheus() {
    let mut f = start_forwarder_with(&["--metrics", "127.0.0.1:0"]);
    let ready = f.ready.clone();
    let metrics = ready
        .split(' ')
        .find_map(|x| x.strip_prefix("metrics="))
        .expect("metrics= in the readiness line")
        .to_string();
    let _p = producer(&face_uri_unix(&f), "/nexthop/m");
    let udp = face_uri_udp(&f);
    assert_eq!(consume(&udp, "/nexthop/m/a"), "DATA hello /nexthop/m/a");
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.send_to(&[0x05, 0x10, 0x07], &f.udp).unwrap();
    // The snapshot is published once a second.
    std::thread::sleep(Duration::from_millis(1500));

    let out = Command::new(NEXTHOP)
        .args(["stats", "--json", "--addr", &metrics])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["frames_in"].as_u64().unwrap() >= 3, "{v}");
    assert!(v["drops"]["truncated"].as_u64().unwrap() >= 1, "{v}");
    let extra = v["extra"].as_array().unwrap();
    let value = |name: &str| {
        extra
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {extra:?}"))["value"]
            .as_f64()
            .unwrap()
    };
    assert!(value("ndn_satisfied_total") >= 1.0);
    assert!(value("ndn_fib_entries") >= 1.0);
    // Per face: some face received the consumer's Interest and sent Data.
    let face_in_interest = extra.iter().any(|m| {
        m["name"] == "ndn_face_packets_total"
            && m["labels"].to_string().contains("\"interest\"")
            && m["labels"].to_string().contains("\"in\"")
            && m["value"].as_f64().unwrap() >= 1.0
    });
    assert!(face_in_interest, "{extra:?}");
    assert!(v["rx"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["bytes"].as_u64().unwrap() > 0));

    let table = Command::new(NEXTHOP)
        .args(["stats", "--addr", &metrics])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("truncated"), "{table}");
    assert!(table.contains("ndn_pit_entries"), "{table}");

    // Prometheus text.
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(&metrics).unwrap();
    c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut text = String::new();
    c.read_to_string(&mut text).unwrap();
    assert!(
        text.contains("nexthop_ndn_face_packets_total{face=\""),
        "{text}"
    );
    assert!(
        text.contains("nexthop_drops_total{reason=\"truncated\"}"),
        "{text}"
    );
    let (ok, _) = stop(&mut f);
    assert!(ok);
}

/// The comma-separated numbers of `key=a,b,...` in a summary line.
fn list_field(line: &str, key: &str) -> Vec<u64> {
    let prefix = format!("{key}=");
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {key}= in {line}"))
        .split(',')
        .map(|v| v.parse().unwrap())
        .collect()
}

/// The `thread_packets=a,b,...` of a summary line.
fn thread_packets(line: &str) -> Vec<u64> {
    list_field(line, "thread_packets")
}

#[test]
fn two_and_four_forwarding_threads_serve_python_ndn_and_our_tools_over_udp_unix_and_tcp() {
    // Three name components pick the thread, so /nexthop/unix/<k> spread.
    let dir = TempDir::new().unwrap();
    let cfg = dir.path().join("ndn.toml");
    std::fs::write(&cfg, "ndt_prefix = 3\n").unwrap();
    let cfg = cfg.to_str().unwrap();
    for threads in ["2", "4"] {
        let mut f = start_forwarder_with(&["--threads", threads, "--config", cfg]);
        let unix = face_uri_unix(&f);
        let udp = face_uri_udp(&f);
        let _p1 = producer(&unix, "/nexthop/unix");
        let _p2 = producer(&udp, "/nexthop/udp");
        assert_eq!(
            consume(&udp, "/nexthop/unix/a"),
            "DATA hello /nexthop/unix/a"
        );
        assert_eq!(
            consume(&unix, "/nexthop/udp/b"),
            "DATA hello /nexthop/udp/b"
        );
        let tcp = format!("tcp://{}", f.tcp);
        assert_eq!(consume(&tcp, "/nexthop/udp/c"), "DATA hello /nexthop/udp/c");
        assert_eq!(consume(&unix, "/nowhere/x"), "NACK 150");
        // Many prefixes from our raw consumer: each name twice, the
        // second a Content Store hit on the thread that holds it.
        for k in 0..24 {
            fetch_raw(&f.udp, &format!("/nexthop/unix/{k}"), 2);
        }
        let (ok, line) = stop(&mut f);
        assert!(ok, "{threads} threads: {line}");
        assert!(line.contains(&format!(" threads={threads} ")), "{line}");
        let per = thread_packets(&line);
        assert_eq!(per.len(), threads.parse::<usize>().unwrap(), "{line}");
        assert!(per.iter().all(|&n| n > 0), "every thread forwarded: {line}");
        assert_eq!(field(&line, "commands"), 2, "{line}");
        assert!(field(&line, "satisfied") >= 27, "{line}");
        assert!(field(&line, "cs_hits") >= 24, "{line}");
        assert_eq!(field(&line, "dispatch_drops"), 0, "{line}");
        assert_eq!(field(&line, "return_drops"), 0, "{line}");
    }
}

/// `--udp-input-threads`: more sockets on the UDP address, each counted in
/// the summary; Interests over UDP still answered; 0 refused.
#[test]
fn udp_input_threads_flag_binds_more_sockets_and_is_checked() {
    let mut f = start_forwarder_with(&["--udp-input-threads", "3"]);
    let unix = face_uri_unix(&f);
    let udp = face_uri_udp(&f);
    let _p = producer(&unix, "/nexthop/unix");
    assert_eq!(
        consume(&udp, "/nexthop/unix/a"),
        "DATA hello /nexthop/unix/a"
    );
    for k in 0..8 {
        fetch_raw(&f.udp, &format!("/nexthop/unix/{k}"), 2);
    }
    let (ok, line) = stop(&mut f);
    assert!(ok, "{line}");
    let per = list_field(&line, "udp_input_packets");
    assert_eq!(per.len(), 3, "{line}");
    // 1 + 8 x 2 Interests from 9 UDP endpoints (which socket each lands
    // on is the kernel's hash), one Data each plus 8 Content Store hits.
    assert!(per.iter().sum::<u64>() >= 17, "{line}");
    assert!(field(&line, "satisfied") >= 9, "{line}");
    assert!(field(&line, "cs_hits") >= 8, "{line}");
    let out = Command::new(NEXTHOP)
        .args([
            "ndn",
            "run",
            "--udp",
            "127.0.0.1:0",
            "--udp-input-threads",
            "0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("udp_input_threads 0 not in 1..=64"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn threads_come_from_the_toml_config_and_are_checked() {
    let dir = TempDir::new().unwrap();
    let cfg = dir.path().join("ndn.toml");
    std::fs::write(&cfg, "threads = 3\nndt_prefix = 1\n").unwrap();
    let mut f = start_forwarder_with(&["--config", cfg.to_str().unwrap()]);
    let (ok, line) = stop(&mut f);
    assert!(ok, "{line}");
    assert!(line.contains(" threads=3 "), "{line}");
    assert_eq!(thread_packets(&line).len(), 3, "{line}");
    let out = Command::new(NEXTHOP)
        .args(["ndn", "run", "--udp", "127.0.0.1:0", "--threads", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("threads 0 not in 1..=64"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// python-ndn's command-line tools (`python -m ndn.bin.tools`) against the
/// forwarder at `face`, as a user runs them.
fn ndn_tool(face: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(python());
    cmd.args(["-m", "ndn.bin.tools"])
        .args(args)
        .env("NDN_CLIENT_TRANSPORT", face);
    cmd
}

/// Run a tool to its end within `limit` seconds (GNU `timeout` kills it
/// past that); its output, failing the test on a non-zero exit.
fn ndn_tool_output(face: &str, args: &[&str], limit: u32) -> std::process::Output {
    let tool = ndn_tool(face, args);
    let mut cmd = Command::new("timeout");
    cmd.arg(limit.to_string())
        .arg(tool.get_program())
        .args(tool.get_args());
    cmd.envs(tool.get_envs().filter_map(|(k, v)| Some((k, v?))));
    let out = cmd.output().expect("run the python-ndn tool");
    assert!(
        out.status.success(),
        "{args:?} failed ({:?}): {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn python_ndn_poke_and_peek_over_unix_and_udp() {
    let mut f = start_forwarder();
    let dir = TempDir::new().unwrap();
    for (i, face) in [face_uri_unix(&f), face_uri_udp(&f)].iter().enumerate() {
        let name = format!("/nexthop/poke/{i}");
        let content = format!("poked content {i}");
        let file = dir.path().join(format!("content-{i}"));
        std::fs::write(&file, &content).unwrap();
        // poke registers its name and serves one Data.
        let poke = Proc::spawn(
            ndn_tool(face, &["poke", &name, file.to_str().unwrap()]),
            false,
        );
        poke.wait_line("Start serving", Duration::from_secs(10));
        let out = ndn_tool_output(face, &["peek", &name], 20);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&format!("Received Data Name: {name}")),
            "{text}"
        );
        assert!(
            text.contains(&format!("Content: (size {})", content.len())),
            "{text}"
        );
    }
    let (ok, line) = stop(&mut f);
    assert!(ok, "{line}");
    assert_eq!(field(&line, "commands"), 2, "{line}");
    assert_eq!(field(&line, "commands_refused"), 0, "{line}");
    assert!(field(&line, "satisfied") >= 2, "{line}");
}

#[test]
fn python_ndn_putchunks_and_catchunks_move_a_5_mb_file_byte_for_byte() {
    let mut f = start_forwarder_with(&["--threads", "2"]);
    let dir = TempDir::new().unwrap();
    // 5 MB of pseudo-random bytes (xorshift): incompressible, reproducible.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut file = Vec::with_capacity(5_000_000);
    while file.len() < 5_000_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        file.extend_from_slice(&x.to_le_bytes());
    }
    file.truncate(5_000_000);
    let src = dir.path().join("object.bin");
    std::fs::write(&src, &file).unwrap();
    // The producer over the Unix socket, the consumer over UDP.
    let put = Proc::spawn(
        ndn_tool(
            &face_uri_unix(&f),
            &["putchunks", "/nexthop/chunks/object", src.to_str().unwrap()],
        ),
        false,
    );
    let created = put.wait_line("Created", Duration::from_secs(30));
    put.wait_line("Start serving", Duration::from_secs(30));
    let got = dir.path().join("fetched.bin");
    let out = ndn_tool_output(
        &face_uri_udp(&f),
        &[
            "catchunks",
            "-o",
            got.to_str().unwrap(),
            "/nexthop/chunks/object",
        ],
        60,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Content size: 5000000"), "{text}");
    let fetched = std::fs::read(&got).unwrap();
    assert_eq!(fetched.len(), file.len());
    assert!(fetched == file, "the fetched object differs from the file");
    let segments: u64 = created
        .split(' ')
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no chunk count in {created:?}"));
    let (ok, line) = stop(&mut f);
    assert!(ok, "{line}");
    // Every segment and the metadata packet came through the forwarder.
    assert!(field(&line, "satisfied") > segments, "{line}");
}
