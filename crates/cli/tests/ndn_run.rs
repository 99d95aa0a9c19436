//! `nexthop ndn run` end to end on loopback with python-ndn 0.5.2 peers
//! (`tests/ndn_run/peer.py`, run with `target/interop-venv/bin/python`,
//! installed by `bash scripts/setup-interop.sh`; the tests fail and say so
//! when it is absent): a producer registered with rib/register over the
//! Unix socket and one over UDP, consumers over Unix, UDP and TCP, Nack NoRoute without
//! a route, bad datagrams counted and dropped while forwarding goes on,
//! and a clean stop on SIGTERM. Every child is killed on drop, also when
//! an assertion fails.

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use nexthop_wire::ndn::{Data, Interest, Name, Packet};
use tempfile::TempDir;

const NEXTHOP: &str = env!("CARGO_BIN_EXE_nexthop");

fn python() -> PathBuf {
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/interop-venv/bin/python");
    assert!(
        py.exists(),
        "python-ndn peer missing: {} not found; install it with `bash scripts/setup-interop.sh`",
        py.display()
    );
    py
}

fn peer_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ndn_run/peer.py")
}

/// A child process killed (and reaped) on drop; its output lines arrive
/// on a channel.
struct Proc {
    child: Child,
    lines: Receiver<String>,
}

impl Proc {
    fn spawn(mut cmd: Command, stderr_lines: bool) -> Proc {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn");
        let (tx, rx) = channel();
        let out: Box<dyn std::io::Read + Send> = if stderr_lines {
            Box::new(child.stderr.take().unwrap())
        } else {
            Box::new(child.stdout.take().unwrap())
        };
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Proc { child, lines: rx }
    }

    /// The first line containing `pat`, within `wait`.
    fn wait_line(&self, pat: &str, wait: Duration) -> String {
        let end = Instant::now() + wait;
        let mut seen = Vec::new();
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(pat) => return l,
                Ok(l) => seen.push(l),
                Err(_) => break,
            }
        }
        panic!("no line with {pat:?} within {wait:?}; saw {seen:?}");
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Forwarder {
    proc: Proc,
    udp: String,
    tcp: String,
    unix: PathBuf,
    _dir: TempDir,
}

fn start_forwarder() -> Forwarder {
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
    .arg(&unix);
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
    let mut cmd = Command::new(python());
    cmd.arg(peer_script()).args(["produce", face, prefix]);
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

fn field(line: &str, key: &str) -> u64 {
    line.split(' ')
        .find_map(|f| f.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key}= in {line}"))
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
