//! `nexthop ndn repo put|get|delete|list` against a real `redis-server`
//! started on a temporary Unix socket (and stopped, also on failure), and
//! the serving Repo through `nexthop ndn run` with ndn-python-repo 0.3's own
//! clients (`tests/ndn_repo/client.py`, run with the interop venv's Python).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use nexthop_testutil::redis::RedisServer;

#[path = "common/proc.rs"]
mod proc;
use proc::Proc;

const NEXTHOP: &str = env!("CARGO_BIN_EXE_nexthop");

/// A `redis-server` of the test's own on a private Unix socket (stopped
/// on drop, also on failure); its directory holds the test's other files.
fn redis(extra: &[&str]) -> RedisServer {
    RedisServer::start_unix(extra).expect("redis-server is installed")
}

fn repo(sock: &Path, args: &[&str]) -> Output {
    Command::new(NEXTHOP)
        .args(["ndn", "repo", "--redis"])
        .arg(sock)
        .args(args)
        .output()
        .unwrap()
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn put_get_list_delete_byte_compared() {
    let r = redis(&[]);
    for (i, len) in [1usize, 8000, 8001, 2 << 20].into_iter().enumerate() {
        let content: Vec<u8> = (0..len).map(|j| (j * 7 + i) as u8).collect();
        let f = r.dir().join(format!("in{i}"));
        std::fs::write(&f, &content).unwrap();
        let name = format!("/demo/file{i}");
        let out = ok(&repo(
            &r.socket(),
            &["put", "--prefix", &name, f.to_str().unwrap()],
        ));
        let segs = len.div_ceil(8000);
        assert_eq!(
            out.trim(),
            format!("stored {name} segments={segs} bytes={len}")
        );
        assert_eq!(repo(&r.socket(), &["get", &name]).stdout, content);
        let o = r.dir().join(format!("out{i}"));
        ok(&repo(
            &r.socket(),
            &["get", &name, "-o", o.to_str().unwrap()],
        ));
        assert_eq!(std::fs::read(&o).unwrap(), content);
    }
    let listed = ok(&repo(&r.socket(), &["list", "/demo/file2"]));
    assert_eq!(
        listed.lines().collect::<Vec<_>>(),
        ["/demo/file2/seg=0", "/demo/file2/seg=1"]
    );
    assert_eq!(
        ok(&repo(&r.socket(), &["delete", "/demo/file2"])).trim(),
        "deleted 2"
    );
    let o = repo(&r.socket(), &["get", "/demo/file2"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("status 404"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        ok(&repo(&r.socket(), &["list", "/demo"])).lines().count(),
        1 + 1 + (2usize << 20).div_ceil(8000)
    );
}

#[test]
fn failures_carry_a_status() {
    let r = redis(&[]);
    let o = repo(&r.socket(), &["list", "/a//b"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("status 400"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let down = r.dir().join("absent.sock");
    let o = repo(&down, &["list", "/"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("status 503"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Redis arguments for an append-only file synced on every write.
const AOF: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "always"];

/// `nexthop ndn run` on the Unix socket `fw`, once it is ready; without a
/// Content Store unless `cs` (so that every Interest reaches the Repo and a
/// deleted object is not served from the cache).
fn start_forwarder(fw: &Path, cs: bool) -> Proc {
    let mut cmd = Command::new(NEXTHOP);
    cmd.args(["ndn", "run"]);
    if !cs {
        cmd.args(["--cs-packets", "0"]);
    }
    cmd.arg("--unix").arg(fw);
    let p = Proc::spawn(cmd, true);
    p.wait_line("nexthop ndn: ready", Duration::from_secs(10));
    p
}

/// `nexthop ndn repo ARGS --forwarder FORWARDER` (ARGS with `--redis` and
/// `--name`; FORWARDER `unix://PATH` or `udp://HOST:PORT`), once it printed
/// its `serving` line, which must be `nexthop ndn repo: serving SERVING`.
fn serve_repo(forwarder: &str, args: &[&str], serving: &str) -> Proc {
    let mut cmd = Command::new(NEXTHOP);
    cmd.args(["ndn", "repo"])
        .args(args)
        .args(["--forwarder", forwarder]);
    let p = Proc::spawn(cmd, true);
    let line = p.wait_line("nexthop ndn repo: serving", Duration::from_secs(10));
    assert_eq!(line, format!("nexthop ndn repo: serving {serving}"));
    p
}

/// What the tests through the forwarder start: their own Redis (stopped on
/// drop) and `nexthop ndn run` on `fw`, a Unix socket in Redis' directory.
struct Lab {
    /// Stopped before Redis (fields drop in order).
    _fw: Proc,
    fw: PathBuf,
    r: RedisServer,
}

impl Lab {
    /// Redis with `redis_extra` (e.g. [`AOF`]) and a forwarder with a
    /// Content Store when `cs` (see [`start_forwarder`]).
    fn start(redis_extra: &[&str], cs: bool) -> Lab {
        let r = redis(redis_extra);
        let fw = r.dir().join("fw.sock");
        Lab {
            _fw: start_forwarder(&fw, cs),
            fw,
            r,
        }
    }

    /// `nexthop ndn repo --redis <this Redis> ARGS` through the forwarder
    /// (see [`serve_repo`]).
    fn repo(&self, args: &[&str], serving: &str) -> Proc {
        let sock = self.r.socket();
        let mut all = vec!["--redis", sock.to_str().unwrap()];
        all.extend_from_slice(args);
        serve_repo(&format!("unix://{}", self.fw.display()), &all, serving)
    }

    /// `nexthop ndn repo --name /testrepo --register /data ARGS`.
    fn testrepo(&self, args: &[&str]) -> Proc {
        let mut all = vec!["--name", "/testrepo", "--register", "/data"];
        all.extend_from_slice(args);
        self.repo(&all, "/testrepo /data")
    }
}

fn express(fw: &Path, uri: &str, cbp: bool, mbf: bool) -> Option<nexthop_wire::ndn::Data> {
    use nexthop_ndnd::client::{Client, Target};
    let mut c =
        Client::connect(&Target::Unix(fw.to_path_buf()), Duration::from_millis(500)).unwrap();
    let mut i = nexthop_wire::ndn::Interest::new(nexthop_wire::ndn::Name::from_uri(uri).unwrap());
    i.can_be_prefix = cbp;
    i.must_be_fresh = mbf;
    i.nonce = Some(rand_nonce());
    i.lifetime_ms = Some(500);
    c.express(&i).ok()
}

fn rand_nonce() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0x5eed);
    N.fetch_add(0x9e37_79b9, Ordering::Relaxed) ^ std::process::id()
}

#[test]
fn repo_serves_interests_through_the_forwarder_and_after_a_restart() {
    let lab = Lab::start(&[], true);
    let (r, fw_sock) = (&lab.r, &lab.fw);
    let content: Vec<u8> = (0..20_000u32).map(|i| (i % 253) as u8).collect();
    let f = r.dir().join("in");
    std::fs::write(&f, &content).unwrap();
    ok(&repo(
        &r.socket(),
        &[
            "put",
            "--prefix",
            "/demo/f",
            "--freshness-ms",
            "60000",
            f.to_str().unwrap(),
        ],
    ));
    ok(&repo(
        &r.socket(),
        &["put", "--prefix", "/demo/stale", f.to_str().unwrap()],
    ));
    for round in 0..2 {
        // The second round is a restarted Repo: it serves what Redis holds.
        let _repo = lab.repo(&["--name", "/repo", "--register", "/demo"], "/repo /demo");
        let mut got = Vec::new();
        for s in 0..3 {
            let d = express(fw_sock, &format!("/demo/f/seg={s}"), false, false)
                .unwrap_or_else(|| panic!("round {round}: segment {s} unanswered"));
            assert!(d.verify_digest_sha256());
            got.extend_from_slice(d.content.as_deref().unwrap());
        }
        assert_eq!(got, content, "round {round}");
        // CanBePrefix: the first stored name under the prefix.
        let d = express(fw_sock, "/demo/f", true, false).unwrap();
        assert_eq!(d.name.to_string(), "/demo/f/seg=0");
        // Without CanBePrefix the prefix itself is not stored.
        assert!(express(fw_sock, "/demo/f", false, false).is_none());
        // MustBeFresh: /demo/stale has no FreshnessPeriod, so never fresh.
        assert!(express(fw_sock, "/demo/stale/seg=0", false, true).is_none());
        assert!(express(fw_sock, "/demo/stale/seg=0", false, false).is_some());
        assert!(express(fw_sock, "/demo/f/seg=1", false, true).is_some());
    }
}

#[test]
fn repo_survives_redis_sigkill_and_reconnects_with_aof() {
    let mut lab = Lab::start(&AOF, true);
    let fw_sock = lab.fw.clone();
    let f = lab.r.dir().join("in");
    std::fs::write(&f, b"acknowledged before the kill").unwrap();
    ok(&repo(
        &lab.r.socket(),
        &[
            "put",
            "--prefix",
            "/demo/k",
            "--segment-size",
            "10",
            f.to_str().unwrap(),
        ],
    ));
    // 10-byte segments: each phase below asks for a segment the forwarder's
    // Content Store has not seen yet.
    let mut repo_proc = lab.repo(&["--name", "/repo", "--register", "/demo"], "/repo /demo");
    // Another face of the same forwarder: a second Repo on a Redis of its own.
    let other = redis(&[]);
    ok(&repo(
        &other.socket(),
        &["put", "--prefix", "/other/f", f.to_str().unwrap()],
    ));
    let other_sock = other.socket();
    let _other_repo = serve_repo(
        &format!("unix://{}", fw_sock.display()),
        &[
            "--redis",
            other_sock.to_str().unwrap(),
            "--name",
            "/repo2",
            "--register",
            "/other",
        ],
        "/repo2 /other",
    );
    assert!(express(&fw_sock, "/demo/k/seg=0", false, false).is_some());
    // Redis killed: Interests go unanswered, the Repo keeps running, and
    // the forwarder and its other faces keep working.
    lab.r.kill();
    assert!(express(&fw_sock, "/demo/k/seg=1", false, false).is_none());
    assert!(
        repo_proc.child.try_wait().unwrap().is_none(),
        "the Repo survives Redis going away"
    );
    let d = express(&fw_sock, "/other/f/seg=0", false, false).expect("the other face answers");
    assert_eq!(
        d.content.as_deref().unwrap(),
        b"acknowledged before the kill"
    );
    let mut mgmt = nexthop_ndnd::client::Client::connect(
        &nexthop_ndnd::client::Target::Unix(fw_sock.clone()),
        Duration::from_secs(2),
    )
    .unwrap();
    assert!(
        mgmt.general_status().is_ok(),
        "the forwarder answers management"
    );
    // Redis back with its AOF: the same Repo reconnects and serves the object.
    lab.r.restart().unwrap();
    // (A few tries: Redis may still be loading its AOF for a moment.)
    let d = (0..10)
        .find_map(|_| express(&fw_sock, "/demo/k/seg=2", false, false))
        .expect("served after Redis restart");
    assert_eq!(d.content.as_deref().unwrap(), b"the kill");
}

/// The interop venv's Python when it has ndn-python-repo 0.3 (installed by
/// `bash scripts/setup-interop.sh`); `None`, with a message, when it lacks it.
fn python_repo() -> Option<std::path::PathBuf> {
    let py = proc::python();
    let ok = Command::new(&py)
        .args([
            "-c",
            "import importlib.metadata as m; assert m.version('ndn-python-repo') == '0.3'",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!(
            "SKIPPED: ndn-python-repo 0.3 is not in {}; install it with `bash scripts/setup-interop.sh`",
            py.display()
        );
        return None;
    }
    Some(py)
}

/// One run of `tests/ndn_repo/client.py` (HOME is the test's directory,
/// where it keeps its python-ndn keychain); its stdout, checked for success.
fn client(py: &Path, home: &Path, fw: &Path, args: &[&str]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ndn_repo/client.py");
    let o = Command::new(py)
        .arg(script)
        .arg(format!("unix://{}", fw.display()))
        .arg("/testrepo")
        .args(args)
        .env("HOME", home)
        .current_dir(home)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "client.py {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}

/// Insert `content` as NAME with `PutfileClient`, then fetch it back with
/// `GetfileClient` and compare.
fn insert_and_fetch(py: &Path, r: &RedisServer, fw: &Path, name: &str, content: &[u8]) {
    let f = r.dir().join("upload");
    std::fs::write(&f, content).unwrap();
    let segs = content.len().div_ceil(8000);
    assert_eq!(
        client(py, r.dir(), fw, &["insert", name, f.to_str().unwrap()]),
        format!("inserted {segs}")
    );
    fetch_equals(py, r, fw, name, content);
}

fn fetch_equals(py: &Path, r: &RedisServer, fw: &Path, name: &str, content: &[u8]) {
    let out = r.dir().join("download");
    let _ = std::fs::remove_file(&out);
    assert_eq!(
        client(py, r.dir(), fw, &["fetch", name, out.to_str().unwrap()]),
        format!("fetched {}", content.len())
    );
    assert!(
        std::fs::read(&out).unwrap() == content,
        "{name}: bytes differ"
    );
}

fn pattern(len: usize, salt: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + i / 7 + salt) as u8).collect()
}

#[test]
fn python_repo_clients_insert_fetch_delete_and_survive_a_repo_restart() {
    let Some(py) = python_repo() else { return };
    let lab = Lab::start(&[], false);
    let (r, fw) = (&lab.r, &lab.fw);
    let mut serving = lab.testrepo(&[]);
    let small = pattern(1, 1);
    let medium = pattern(100_000, 2);
    insert_and_fetch(&py, r, fw, "/data/one", &small);
    // Under the Repo's own name, outside its command names.
    insert_and_fetch(&py, r, fw, "/testrepo/files/medium", &medium);
    // The objects are in Redis as the CLI reads them.
    assert_eq!(repo(&r.socket(), &["get", "/data/one"]).stdout, small);
    // A restarted Repo serves what Redis holds.
    drop(std::mem::replace(&mut serving, lab.testrepo(&[])));
    fetch_equals(&py, r, fw, "/testrepo/files/medium", &medium);
    // Delete: every segment goes, fetching then fails.
    assert_eq!(
        client(&py, r.dir(), fw, &["delete", "/testrepo/files/medium"]),
        "deleted 13"
    );
    let out = r.dir().join("gone");
    assert_eq!(
        client(
            &py,
            r.dir(),
            fw,
            &["fetch", "/testrepo/files/medium", out.to_str().unwrap()]
        ),
        "fetched none"
    );
    assert_eq!(ok(&repo(&r.socket(), &["list", "/testrepo"])), "");
    fetch_equals(&py, r, fw, "/data/one", &small);
}

#[test]
fn python_repo_clients_fetch_what_was_inserted_before_redis_restarted() {
    let Some(py) = python_repo() else { return };
    let mut lab = Lab::start(&AOF, false);
    let fw = lab.fw.clone();
    let serving = lab.testrepo(&[]);
    let content = pattern(50_000, 4);
    insert_and_fetch(&py, &lab.r, &fw, "/data/across", &content);
    // Redis killed (SIGKILL) after the insert was acknowledged and started
    // again from its AOF; the same Repo serves the object to GetfileClient,
    // its first Interest answered on a fresh connection.
    lab.r.kill();
    lab.r.restart().unwrap();
    fetch_equals(&py, &lab.r, &fw, "/data/across", &content);
    serving.wait_line(
        "nexthop ndn repo: reconnected to Redis (reconnects=1)",
        Duration::from_secs(5),
    );
    // And it takes a new insert.
    insert_and_fetch(&py, &lab.r, &fw, "/data/after", &pattern(9000, 5));
}

#[test]
fn python_repo_clients_move_a_20_mb_file() {
    let Some(py) = python_repo() else { return };
    let lab = Lab::start(&[], false);
    let (r, fw) = (&lab.r, &lab.fw);
    let _repo = lab.testrepo(&[]);
    insert_and_fetch(&py, r, fw, "/data/big", &pattern(20 << 20, 3));
}

#[test]
fn malformed_commands_are_refused_and_the_repo_keeps_serving() {
    let Some(py) = python_repo() else { return };
    let lab = Lab::start(&[], false);
    let (r, fw) = (&lab.r, &lab.fw);
    let _repo = lab.testrepo(&[]);
    // Not a RepoCommandParameter at all: acknowledged, no process.
    assert_eq!(
        client(&py, r.dir(), fw, &["publish", "ffff"]),
        "acknowledged True"
    );
    // A process id but no name: refused with 400.
    assert_eq!(
        client(&py, r.dir(), fw, &["publish", "ce0401020304"]),
        "acknowledged True"
    );
    assert_eq!(
        client(&py, r.dir(), fw, &["check", "insert", "01020304"]),
        "status 400"
    );
    // A name outside the served prefixes: refused with 400.
    // (Name /elsewhere/f, blocks 0..=0, process id 05060708.)
    assert_eq!(
        client(
            &py,
            r.dir(),
            fw,
            &[
                "publish",
                "070e0809656c73657768657265080166cc0100cd0100ce0405060708"
            ]
        ),
        "acknowledged True"
    );
    assert_eq!(
        client(&py, r.dir(), fw, &["check", "insert", "05060708"]),
        "status 400"
    );
    assert_eq!(
        client(&py, r.dir(), fw, &["check", "delete", "01020304"]),
        "status 404"
    );
    assert_eq!(ok(&repo(&r.socket(), &["list", "/"])), "");
    insert_and_fetch(&py, r, fw, "/data/after", &pattern(20_000, 4));
}

#[test]
fn a_client_that_vanishes_mid_insert_leaves_nothing_visible() {
    let Some(py) = python_repo() else { return };
    let lab = Lab::start(&[], false);
    let (r, fw) = (&lab.r, &lab.fw);
    let mut repo_proc = lab.testrepo(&[]);
    let f = r.dir().join("partial");
    std::fs::write(&f, pattern(50_000, 5)).unwrap();
    let said = client(
        &py,
        r.dir(),
        fw,
        &["vanish", "/data/v", f.to_str().unwrap()],
    );
    let pid = said.strip_prefix("vanished ").unwrap().to_string();
    assert_ne!(pid, "unacknowledged");
    // Each missing segment is tried 3 times with a 1 s lifetime.
    let mut last = String::new();
    for _ in 0..10 {
        last = client(&py, r.dir(), fw, &["check", "insert", &pid]);
        if last == "status 400" {
            break;
        }
        assert_eq!(last, "status 300", "in progress until abandoned");
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(last, "status 400", "abandoned");
    assert_eq!(ok(&repo(&r.socket(), &["list", "/data"])), "");
    let o = repo(&r.socket(), &["get", "/data/v"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("status 404"));
    assert!(
        repo_proc.child.try_wait().unwrap().is_none(),
        "the Repo keeps running after an abandoned insert"
    );
}

fn bench_cmd(fw: &Path, prefix: &str, count: u64, more: &[&str]) -> Command {
    let mut cmd = Command::new(NEXTHOP);
    cmd.args(["ndn", "repo", "bench", "--repo", "/testrepo", "--forwarder"])
        .arg(format!("unix://{}", fw.display()))
        .args(["--prefix", prefix, "--count", &count.to_string()])
        .args(["--timeout-s", "30"])
        .args(more);
    cmd
}

/// The `packets=` of the bench's `write` and `read` lines.
fn bench_packets(out: &str) -> (u64, u64) {
    let line = |phase: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("nexthop ndn repo bench: {phase} ")))
            .unwrap_or_else(|| panic!("no {phase} line in {out:?}"))
            .to_string()
    };
    (
        proc::field(&line("write"), "packets"),
        proc::field(&line("read"), "packets"),
    )
}

#[test]
fn bench_writes_through_the_command_protocol_and_reads_back_the_same_bytes() {
    let lab = Lab::start(&[], false);
    let (r, fw) = (&lab.r, &lab.fw);
    let _repo = lab.testrepo(&[]);
    // Two clients, 100 B and 8000 B packets; the bench fails unless every
    // packet read back equals the one written.
    for (size, count) in [("100", 1500u64), ("8000", 200)] {
        let out = ok(
            &bench_cmd(fw, "/data", count, &["--clients", "2", "--size", size])
                .output()
                .unwrap(),
        );
        assert_eq!(bench_packets(&out), (2 * count, 2 * count), "{out}");
    }
    assert_eq!(
        ok(&repo(&r.socket(), &["list", "/data"])).lines().count(),
        2 * (1500 + 200)
    );
}

#[test]
fn an_oversized_insert_is_refused_with_400_and_leaves_nothing() {
    let lab = Lab::start(&[], false);
    let (r, fw) = (&lab.r, &lab.fw);
    let serving = lab.testrepo(&["--max-object-bytes", "100000"]);
    // 40 packets of 8000 B (about 325 KB) against a limit of 100 000 B.
    let o = bench_cmd(fw, "/data", 40, &["--size", "8000"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("insert status Some(400)"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(ok(&repo(&r.socket(), &["list", "/data"])), "");
    // Within the limit the same Repo stores it.
    let out = ok(&bench_cmd(fw, "/data", 10, &["--size", "8000"])
        .output()
        .unwrap());
    assert_eq!(bench_packets(&out), (10, 10));
    serving.wait_line("inserted /data/", Duration::from_secs(5));
}

#[test]
fn register_prefix_is_registered_with_the_forwarder_and_again_after_a_restart() {
    let lab = Lab::start(&[], false);
    let (r, fw) = (&lab.r, &lab.fw);
    let mut serving = lab.repo(&["--name", "/testrepo"], "/testrepo");
    // Without RegisterPrefix an insert under /dyn is refused (not served).
    let o = bench_cmd(fw, "/dyn", 10, &[]).output().unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("insert status Some(400)"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // With it the Repo registers /dyn: the reads, sent after the client
    // withdrew its own route, reach the Repo through that registration.
    let out = ok(&bench_cmd(fw, "/dyn", 300, &["--register-prefix"])
        .output()
        .unwrap());
    assert_eq!(bench_packets(&out), (300, 300));
    serving.wait_line("nexthop ndn repo: registered /dyn", Duration::from_secs(5));
    let stored = ok(&repo(&r.socket(), &["list", "/dyn"]));
    let first = stored.lines().next().unwrap().to_string();
    // A restarted Repo registers the prefixes inserts gave it, from Redis.
    drop(std::mem::replace(
        &mut serving,
        lab.repo(&["--name", "/testrepo"], "/testrepo /dyn"),
    ));
    let d = express(fw, &first, false, false).expect("served through /dyn");
    assert_eq!(d.name.to_string(), first);
}

#[test]
fn an_insert_while_redis_is_killed_fails_with_503_and_the_repo_reconnects() {
    let mut lab = Lab::start(&AOF, false);
    let fw = lab.fw.clone();
    // A window of 2 segments: the insert below takes many round trips, and
    // Redis is gone before it can be stored.
    let serving = lab.testrepo(&["--window", "2"]);
    let out = ok(&bench_cmd(&fw, "/data", 400, &[]).output().unwrap());
    assert_eq!(bench_packets(&out), (400, 400));
    let running = bench_cmd(&fw, "/data", 5000, &[])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    lab.r.kill();
    let o = running.wait_with_output().unwrap();
    assert!(!o.status.success(), "the insert cannot be stored");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("insert status Some(503)"),
        "reported failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Redis back from its AOF: what was acknowledged is there, nothing of
    // the failed insert is, and the same Repo reconnects and stores again.
    lab.r.restart().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while repo(&lab.r.socket(), &["list", "/data"]).status.code() != Some(0) {
        assert!(std::time::Instant::now() < deadline, "redis is back");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        ok(&repo(&lab.r.socket(), &["list", "/data"]))
            .lines()
            .count(),
        400
    );
    let out = ok(&bench_cmd(&fw, "/data", 300, &[]).output().unwrap());
    assert_eq!(bench_packets(&out), (300, 300));
    serving.wait_line(
        "nexthop ndn repo: reconnected to Redis (reconnects=1)",
        Duration::from_secs(5),
    );
    assert_eq!(
        ok(&repo(&lab.r.socket(), &["list", "/data"]))
            .lines()
            .count(),
        700
    );
}

#[test]
fn python_clients_register_prefix_is_registered_and_a_delete_unregisters_it() {
    let Some(py) = python_repo() else { return };
    let lab = Lab::start(&[], false);
    let (r, fw) = (&lab.r, &lab.fw);
    // The Repo serves only its own name: /dyn comes from RegisterPrefix.
    let serving = lab.repo(&["--name", "/testrepo"], "/testrepo");
    let content = pattern(30_000, 6);
    let f = r.dir().join("upload");
    std::fs::write(&f, &content).unwrap();
    assert_eq!(
        client(
            &py,
            r.dir(),
            fw,
            &["insert", "/dyn/f", f.to_str().unwrap(), "/dyn"]
        ),
        "inserted 4"
    );
    serving.wait_line("nexthop ndn repo: registered /dyn", Duration::from_secs(5));
    // The inserting client is gone: the fetch reaches the Repo through /dyn.
    fetch_equals(&py, r, fw, "/dyn/f", &content);
    assert_eq!(
        client(&py, r.dir(), fw, &["delete", "/dyn/f", "/dyn"]),
        "deleted 4"
    );
    serving.wait_line(
        "nexthop ndn repo: unregistered /dyn",
        Duration::from_secs(5),
    );
    assert_eq!(ok(&repo(&r.socket(), &["list", "/dyn"])), "");
}

#[test]
fn redis_back_within_the_retry_window_the_insert_completes() {
    let mut lab = Lab::start(&AOF, false);
    let fw = lab.fw.clone();
    let serving = lab.testrepo(&[
        "--window",
        "2",
        "--redis-retry-ms",
        "30000",
        "--max-inserts",
        "1",
    ]);
    let out = ok(&bench_cmd(&fw, "/data", 200, &[]).output().unwrap());
    assert_eq!(bench_packets(&out), (200, 200));
    // Redis goes away while the insert's segments are fetched (nothing of
    // that needs Redis); the complete object then finds Redis down and
    // waits, its status 300 to the client's checks.
    let running = bench_cmd(&fw, "/data", 3000, &[])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    lab.r.kill();
    serving.wait_line("waits for Redis (status 503", Duration::from_secs(30));
    // One insert waits at most (`--max-inserts 1`): another one, fetched
    // meanwhile, fails with 503 at once instead of being held too.
    let o = bench_cmd(&fw, "/data", 20, &[]).output().unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("insert status Some(503)"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Back in time (from its AOF): the same insert is written, the client
    // sees 200 and reads every packet back byte-compared.
    std::thread::sleep(Duration::from_millis(300));
    lab.r.restart().unwrap();
    let o = running.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(bench_packets(&stdout), (3000, 3000));
    serving.wait_line("inserted /data/", Duration::from_secs(5));
    assert_eq!(
        ok(&repo(&lab.r.socket(), &["list", "/data"]))
            .lines()
            .count(),
        3200,
        "the earlier object and the whole waiting one"
    );
}

/// `openssl` with `args`, in `dir`; panics with its stderr on failure.
fn openssl(dir: &Path, args: &[&str]) {
    let o = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl is installed");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A CA `NAME.crt`/`NAME.key` in `dir` (P-256, one day).
fn make_ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
        ],
    );
}

#[test]
fn tls_redis_with_a_given_ca_serves_and_a_wrong_ca_is_refused() {
    let scratch = redis(&[]);
    let d = scratch.dir();
    make_ca(d, "ca");
    make_ca(d, "other");
    openssl(
        d,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    );
    std::fs::write(
        d.join("san.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .unwrap();
    openssl(
        d,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            "san.ext",
            "-out",
            "server.crt",
        ],
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let path = |f: &str| d.join(f).to_str().unwrap().to_string();
    let (crt, key, ca) = (path("server.crt"), path("server.key"), path("ca.crt"));
    let _r = redis(&[
        "--tls-port",
        &port,
        "--tls-cert-file",
        &crt,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca,
        "--tls-auth-clients",
        "no",
    ]);
    let url = format!("rediss://127.0.0.1:{port}");
    let tls = |ca: &str, args: &[&str]| {
        Command::new(NEXTHOP)
            .args(["ndn", "repo", "--redis", &url, "--redis-ca", ca])
            .args(args)
            .output()
            .unwrap()
    };
    let content = pattern(30_000, 3);
    std::fs::write(d.join("in"), &content).unwrap();
    let input = path("in");
    assert_eq!(
        ok(&tls(&ca, &["put", "--prefix", "/demo/tls", &input])).trim(),
        "stored /demo/tls segments=4 bytes=30000"
    );
    let got = tls(&ca, &["get", "/demo/tls"]);
    assert!(
        got.status.success(),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    assert!(
        got.stdout == content,
        "the object read back over TLS differs"
    );
    // Another CA: refused, with a clear error and status, nothing stored.
    let o = tls(&path("other.crt"), &["put", "--prefix", "/demo/no", &input]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("status 503: TLS to redis refused"), "{err}");
    assert!(err.contains("certificate"), "{err}");
    assert_eq!(ok(&tls(&ca, &["list", "/demo"])).lines().count(), 4);
    // A CA file that is not there: status 400 naming the flag.
    let o = tls(&path("absent.crt"), &["list", "/demo"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("status 400: --redis-ca"), "{err}");
    // The serving Repo over TLS answers Interests through the forwarder.
    let fw = d.join("fw.sock");
    let _fw = start_forwarder(&fw, true);
    let _serving = serve_repo(
        &format!("unix://{}", fw.display()),
        &[
            "--redis",
            &url,
            "--redis-ca",
            &ca,
            "--name",
            "/repo",
            "--register",
            "/demo",
        ],
        "/repo /demo",
    );
    let d3 = express(&fw, "/demo/tls/seg=3", false, false).expect("served over TLS");
    assert_eq!(d3.content.as_deref().unwrap(), &content[24_000..]);
}

#[test]
fn repo_serves_through_a_udp_face_of_the_forwarder() {
    let r = redis(&[]);
    let fw = r.dir().join("fw.sock");
    let mut cmd = Command::new(NEXTHOP);
    cmd.args(["ndn", "run", "--udp", "127.0.0.1:0", "--unix"])
        .arg(&fw);
    let forwarder = Proc::spawn(cmd, true);
    let ready = forwarder.wait_line("nexthop ndn: ready", Duration::from_secs(10));
    let udp = ready
        .split(' ')
        .find_map(|f| f.strip_prefix("udp="))
        .expect("udp= in the readiness line")
        .to_string();
    let content = pattern(20_000, 7);
    let f = r.dir().join("in");
    std::fs::write(&f, &content).unwrap();
    ok(&repo(
        &r.socket(),
        &["put", "--prefix", "/demo/u", f.to_str().unwrap()],
    ));
    let sock = r.socket();
    let _serving = serve_repo(
        &format!("udp://{udp}"),
        &[
            "--redis",
            sock.to_str().unwrap(),
            "--name",
            "/repo",
            "--register",
            "/demo",
        ],
        "/repo /demo",
    );
    // A consumer on the Unix face reaches the Repo on its UDP face.
    let mut got = Vec::new();
    for s in 0..3 {
        let d = express(&fw, &format!("/demo/u/seg={s}"), false, false)
            .unwrap_or_else(|| panic!("segment {s} unanswered over UDP"));
        got.extend_from_slice(d.content.as_deref().unwrap());
    }
    assert!(got == content, "the object read over UDP differs");
}
