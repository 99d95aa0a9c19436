//! `nexthop ndn run` end to end on loopback with NDNts 0.0.20250307 peers
//! (`tests/ndn_ndnts/peer.mjs`, run by `node` against the packages
//! `bash scripts/setup-interop.sh` installs under `crates/wire/tests/interop`)
//! beside python-ndn 0.5.2 peers (`tests/ndn_run/peer.py`):
//! * an NDNts consumer fetches Data from a python-ndn producer over the Unix
//!   socket and over UDP. NDNts sends every Interest in an LpPacket with a
//!   PitToken and drops Data that does not carry it back, so a `DATA` answer
//!   proves the forwarder echoes the token;
//! * an NDNts producer registers its prefix with NDNts's nfdmgmt
//!   (`rib/register`, a digest-signed command Interest answered with
//!   StatusCode 200) and answers python-ndn and NDNts consumers.
//!
//! Without `node` on the PATH the tests print why and pass; with `node` but
//! without the installed packages, or without python-ndn, they fail and say
//! how to install them. Every child is killed on drop.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tempfile::TempDir;

#[path = "common/proc.rs"]
mod proc;
use proc::{field, python, Proc};

const NEXTHOP: &str = env!("CARGO_BIN_EXE_nexthop");
const SETUP: &str = "bash scripts/setup-interop.sh";

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The folder holding `node_modules/@ndn`, or `None` (with the reason
/// printed) when `node` is not installed.
fn ndnts_modules() -> Option<PathBuf> {
    if Command::new("node").arg("--version").output().is_err() {
        eprintln!(
            "ndn_ndnts: skipped, `node` is not on the PATH (install Node.js and run `{SETUP}`)"
        );
        return None;
    }
    let dir = manifest().join("../wire/tests/interop");
    for pkg in ["endpoint", "fw", "nfdmgmt", "node-transport", "packet"] {
        let f = dir.join(format!("node_modules/@ndn/{pkg}/package.json"));
        assert!(
            f.exists(),
            "NDNts peer missing: {} not found; install it with `{SETUP}`",
            f.display()
        );
    }
    Some(dir)
}

struct Forwarder {
    proc: Proc,
    unix: String,
    udp: String,
    _dir: TempDir,
}

fn start_forwarder() -> Forwarder {
    start_forwarder_with(&[])
}

fn start_forwarder_with(extra: &[&str]) -> Forwarder {
    let dir = TempDir::new().unwrap();
    let unix = dir.path().join("nfd.sock");
    let mut cmd = Command::new(NEXTHOP);
    cmd.args(["ndn", "run", "--udp", "127.0.0.1:0", "--unix"])
        .arg(&unix)
        .args(extra);
    let proc = Proc::spawn(cmd, true);
    let ready = proc.wait_line("nexthop ndn: ready", Duration::from_secs(10));
    let udp = ready
        .split(' ')
        .find_map(|f| f.strip_prefix("udp="))
        .expect("udp= in the readiness line");
    Forwarder {
        udp: format!("udp://{udp}"),
        unix: format!("unix://{}", unix.display()),
        proc,
        _dir: dir,
    }
}

fn ndnts(modules: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("node");
    cmd.env("NDNTS_MODULES", modules)
        .arg(manifest().join("tests/ndn_ndnts/peer.mjs"))
        .args(args);
    cmd
}

fn python_peer(args: &[&str]) -> Command {
    let mut cmd = Command::new(python());
    cmd.arg(manifest().join("tests/ndn_run/peer.py")).args(args);
    cmd
}

/// Start a producer and wait for its "registered True".
fn producer(cmd: Command) -> Proc {
    let p = Proc::spawn(cmd, false);
    p.wait_line("registered True", Duration::from_secs(10));
    p
}

/// Run a consumer to its end; its one answer line.
fn consume(mut cmd: Command) -> String {
    let out = cmd.output().expect("run the consumer");
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success(),
        "consumer failed: {s}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s
}

/// SIGTERM the forwarder; its exit summary line.
fn stop(f: &mut Forwarder) -> String {
    let st = Command::new("kill")
        .args(["-TERM", &f.proc.child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(st.success());
    let line = f
        .proc
        .wait_line("nexthop ndn: stopped", Duration::from_secs(5));
    assert!(f.proc.child.wait().map(|s| s.success()).unwrap_or(false));
    line
}

#[test]
fn ndnts_consumer_gets_data_from_a_python_producer_with_its_pit_token_echoed() {
    let Some(m) = ndnts_modules() else { return };
    let mut f = start_forwarder();
    let _p = producer(python_peer(&["produce", &f.unix, "/nexthop/py"]));

    for (face, name) in [(&f.unix, "/nexthop/py/unix"), (&f.udp, "/nexthop/py/udp")] {
        assert_eq!(
            consume(ndnts(&m, &["consume", face, name])),
            format!("DATA hello {name}"),
            "NDNts consumer over {face}"
        );
    }
    // No route: the forwarder Nacks, NDNts's own forwarder ignores the Nack
    // and the Interest expires.
    assert_eq!(
        consume(ndnts(&m, &["consume", &f.udp, "/nowhere/x"])),
        "TIMEOUT"
    );

    let line = stop(&mut f);
    assert_eq!(field(&line, "satisfied"), 2, "{line}");
    assert_eq!(field(&line, "bad_lp"), 0, "{line}");
    assert_eq!(field(&line, "commands"), 1, "{line}");
}

#[test]
fn ndnts_producer_registered_with_rib_register_answers_python_and_ndnts_consumers() {
    let Some(m) = ndnts_modules() else { return };
    let mut f = start_forwarder();
    let _over_unix = producer(ndnts(&m, &["produce", &f.unix, "/nexthop/js-unix"]));
    let _over_udp = producer(ndnts(&m, &["produce", &f.udp, "/nexthop/js-udp"]));

    // NDNts writes names with explicit component types.
    let cases = [
        (
            python_peer(&["consume", &f.udp, "/nexthop/js-unix/a"]),
            "/8=nexthop/8=js-unix/8=a",
        ),
        (
            python_peer(&["consume", &f.unix, "/nexthop/js-udp/b"]),
            "/8=nexthop/8=js-udp/8=b",
        ),
        (
            ndnts(&m, &["consume", &f.udp, "/nexthop/js-unix/c"]),
            "/8=nexthop/8=js-unix/8=c",
        ),
        (
            ndnts(&m, &["consume", &f.unix, "/nexthop/js-udp/d"]),
            "/8=nexthop/8=js-udp/8=d",
        ),
    ];
    for (cmd, name) in cases {
        assert_eq!(consume(cmd), format!("DATA ndnts {name}"));
    }

    let line = stop(&mut f);
    assert_eq!(field(&line, "commands"), 2, "{line}");
    assert_eq!(field(&line, "commands_refused"), 0, "{line}");
    assert_eq!(field(&line, "satisfied"), 4, "{line}");
}

#[test]
fn ndnts_peers_through_four_forwarding_threads_echo_the_thread_token() {
    let Some(m) = ndnts_modules() else { return };
    let mut f = start_forwarder_with(&["--threads", "4"]);
    let _js = producer(ndnts(&m, &["produce", &f.udp, "/nexthop/js"]));
    let _py = producer(python_peer(&["produce", &f.unix, "/nexthop/py"]));
    // NDNts peers through the threaded forwarder: the producer gets the
    // forwarding thread's PitToken on each Interest, the consumer gets its
    // own token back on each Data (NDNts drops Data without it). That the
    // thread's token steers a Data whose name hashes elsewhere is in
    // nexthop-ndnd's daemon tests.
    for k in 0..6 {
        let name = format!("/nexthop/js/{k}");
        let want = format!("DATA ndnts /8=nexthop/8=js/8={k}");
        assert_eq!(consume(ndnts(&m, &["consume", &f.unix, &name])), want);
        let name = format!("/nexthop/py/{k}");
        assert_eq!(
            consume(ndnts(&m, &["consume", &f.udp, &name])),
            format!("DATA hello {name}")
        );
    }
    let line = stop(&mut f);
    assert!(line.contains(" threads=4 "), "{line}");
    assert_eq!(field(&line, "satisfied"), 12, "{line}");
    assert_eq!(field(&line, "drops"), 0, "{line}");
}
