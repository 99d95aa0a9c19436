//! Helpers shared by the namespace tests (`tests/live.rs`,
//! `tests/live_updates.rs`): the test guard [`Lab`] (its `Drop` kills the
//! child processes; the namespaces are the dataplane's
//! [`Namespaces`] guard, which deletes them after that, also on panic),
//! FIB building, summary parsing, and the helper modes in which a test
//! binary, run inside a namespace with `ip netns exec`, sends or captures
//! frames.
// Each test binary uses a different subset.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nexthop_dataplane::afpacket::{RingConfig, RxRing, TxPort};
use nexthop_dataplane::netns::Namespaces;
use tempfile::TempDir;

pub const NEXTHOP: &str = env!("CARGO_BIN_EXE_nexthop");

/// The `--port` arguments of `nexthop run` in the shared topology: port 0
/// is the input veth `fin0`, ports 1 to 3 the output veths.
pub const PORT_MAP: [&str; 8] = [
    "--port", "0=fin0", "--port", "1=fo1", "--port", "2=fo2", "--port", "3=fo3",
];

/// Start `nexthop ARGS` plus [`PORT_MAP`] in the `fwd` namespace, as child
/// `fwd`, and wait until it says it forwards; returns the child's index.
pub fn start_run(lab: &mut Lab, args: &[&str]) -> usize {
    let mut all = args.to_vec();
    all.extend(PORT_MAP);
    let fwd = lab.spawn("fwd", "fwd", Path::new(NEXTHOP), &all, &[]);
    lab.wait_for(
        "fwd.err",
        "nexthop run: forwarding",
        Duration::from_secs(10),
    );
    fwd
}
/// Source MAC of every test frame: the capture keeps only these.
pub const SRC_MAC: [u8; 6] = [0x02, 0x6e, 0x68, 0xff, 0xff, 0xfe];
/// IEEE local experimental ethertype, then a magic, then a sequence number.
pub const ETHERTYPE: [u8; 2] = [0x88, 0xb5];
pub const MAGIC: &[u8; 4] = b"NHLV";
pub const HELPER_ENV: &str = "NEXTHOP_LIVE_HELPER";

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

pub fn mac_text(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

// ---------------------------------------------------------------------------
// The namespace guard

/// Namespaces and child processes of one test; dropping it kills the
/// children, then the namespaces guard deletes the namespaces.
pub struct Lab {
    tag: String,
    /// Dropped after `Lab::drop` has killed the children (fields drop
    /// after `drop` runs), so no child outlives its namespace.
    namespaces: Namespaces,
    pub children: Vec<Child>,
    pub dir: TempDir,
}

impl Lab {
    /// A lab with namespaces `nh-ROLE-PID-TEST` for each role (loopback
    /// up, IPv6 off: no router solicitations or DAD frames next to the
    /// test's frames), or why it cannot be made here.
    pub fn new(test: &str, roles: &[&str]) -> Result<Lab, String> {
        let dir = TempDir::new().map_err(|e| format!("temp dir: {e}"))?;
        let mut lab = Lab {
            tag: format!("{}-{test}", std::process::id()),
            namespaces: Namespaces::new(),
            children: Vec::new(),
            dir,
        };
        for role in roles {
            let ns = lab.ns(role);
            lab.namespaces.create(&ns).map_err(|e| e.to_string())?;
        }
        Ok(lab)
    }

    pub fn ns(&self, role: &str) -> String {
        format!("nh-{role}-{}", self.tag)
    }

    /// A veth pair: `a` in namespace `ns_a`, `b` in `ns_b`, both up.
    pub fn veth(&self, ns_a: &str, a: &str, ns_b: &str, b: &str) {
        let (na, nb) = (self.ns(ns_a), self.ns(ns_b));
        if let Err(e) = self.namespaces.veth(&na, a, &nb, b, None) {
            panic!("{e}");
        }
    }

    /// Start `cmd ARGS` in namespace `role`, stdout and stderr to files
    /// `NAME.out` / `NAME.err`; returns the child's index.
    pub fn spawn(
        &mut self,
        role: &str,
        name: &str,
        cmd: &Path,
        args: &[&str],
        env: &[(&str, String)],
    ) -> usize {
        let out = self.file(&format!("{name}.out"));
        let err = self.file(&format!("{name}.err"));
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(role)])
            .arg(cmd)
            .args(args)
            .stdin(Stdio::null())
            .stdout(fs::File::create(&out).expect("create stdout file"))
            .stderr(fs::File::create(&err).expect("create stderr file"));
        for (k, v) in env {
            c.env(k, v);
        }
        let child = c.spawn().expect("spawn ip netns exec");
        self.children.push(child);
        self.children.len() - 1
    }

    /// Kill child `i` (SIGKILL) and reap it.
    pub fn kill(&mut self, i: usize) {
        let _ = self.children[i].kill();
        let _ = self.children[i].wait();
    }

    /// Stop child `i` with SIGTERM (`kill`: under `ip netns exec` the
    /// process is its own) and wait for it (at most `limit`); it must exit
    /// successfully. Its stdout and stderr.
    pub fn terminate(&mut self, i: usize, name: &str, limit: Duration) -> (String, String) {
        let pid = self.children[i].id().to_string();
        let st = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(st.success(), "kill -TERM {pid} ({name}) failed");
        let (ok, out, err) = self.wait(i, name, limit);
        assert!(ok, "{name} failed after SIGTERM:\n{out}\n{err}");
        (out, err)
    }

    /// Wait for child `i` to exit (at most `limit`); its stdout and stderr.
    pub fn wait(&mut self, i: usize, name: &str, limit: Duration) -> (bool, String, String) {
        let t = Instant::now();
        let status = loop {
            match self.children[i].try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if t.elapsed() < limit => sleep(Duration::from_millis(20)),
                Ok(None) => {
                    let _ = self.children[i].kill();
                    let _ = self.children[i].wait();
                    panic!(
                        "{name} did not exit within {limit:?}; stderr:\n{}",
                        self.read(&format!("{name}.err"))
                    );
                }
                Err(e) => panic!("waiting for {name}: {e}"),
            }
        };
        (
            status.success(),
            self.read(&format!("{name}.out")),
            self.read(&format!("{name}.err")),
        )
    }

    /// Wait until file `name` contains `needle` (at most `limit`).
    pub fn wait_for(&self, name: &str, needle: &str, limit: Duration) {
        let t = Instant::now();
        while !self.read(name).contains(needle) {
            assert!(
                t.elapsed() < limit,
                "no '{needle}' in {name} after {limit:?}:\n{}",
                self.read(name)
            );
            sleep(Duration::from_millis(20));
        }
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn read(&self, name: &str) -> String {
        fs::read_to_string(self.file(name)).unwrap_or_default()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for c in &mut self.children {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        // The namespaces go when `self.namespaces` drops, after this.
    }
}

/// The lab, or `None` after printing why namespace tests skip here.
pub fn lab_or_skip(test: &str, roles: &[&str]) -> Option<Lab> {
    match Lab::new(test, roles) {
        Ok(lab) => Some(lab),
        Err(e) => {
            eprintln!(
                "SKIP {test}: cannot create network namespaces (needs root and iproute2): {e}"
            );
            None
        }
    }
}

// ---------------------------------------------------------------------------
// FIBs and summaries

pub fn build_fib(lab: &Lab, name: &str, routes: &str) -> PathBuf {
    let routes_path = lab.file(&format!("{name}.routes.txt"));
    fs::write(&routes_path, routes).expect("write routes");
    let fib = lab.file(name);
    let out = Command::new(NEXTHOP)
        .args([
            "fib",
            "build",
            "--key-type",
            "mac",
            "--check-bits",
            "16",
            "--routes",
        ])
        .arg(&routes_path)
        .arg("--out")
        .arg(&fib)
        .output()
        .expect("run nexthop fib build");
    assert!(
        out.status.success(),
        "fib build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    fib
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `key=value` tokens of a summary line.
pub fn fields(line: &str) -> BTreeMap<String, String> {
    line.split_whitespace()
        .filter_map(|t| t.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub fn field<'a>(f: &'a BTreeMap<String, String>, k: &str) -> &'a str {
    match f.get(k) {
        Some(v) => v,
        None => panic!("summary has no {k}: {f:?}"),
    }
}

// ---------------------------------------------------------------------------
// Helper modes: run by the tests inside a namespace

/// The helper modes every namespace test binary has: `send` and
/// `capture` (the mode is in `NEXTHOP_LIVE_HELPER`, the lab directory in
/// `NEXTHOP_LIVE_DIR`, the interfaces in `NEXTHOP_LIVE_IFACES`). Returns
/// the mode and directory when the mode is neither, for the binary's own
/// modes; `None` when handled or when not run as a helper.
pub fn helper_main() -> Option<(String, PathBuf)> {
    let Ok(mode) = std::env::var(HELPER_ENV) else {
        eprintln!("live_helper: {HELPER_ENV} not set; nothing to do");
        return None;
    };
    let dir = PathBuf::from(std::env::var("NEXTHOP_LIVE_DIR").expect("NEXTHOP_LIVE_DIR"));
    let ifaces = std::env::var("NEXTHOP_LIVE_IFACES").unwrap_or_default();
    match mode.as_str() {
        "send" => helper_send(&dir, &ifaces),
        "capture" => helper_capture(&dir, &ifaces),
        _ => return Some((mode, dir)),
    }
    None
}

/// Send the frames of `DIR/frames.txt` (hex, one a line; another file with
/// `NEXTHOP_LIVE_FRAMES`) on `iface`, 32 per batch (`NEXTHOP_LIVE_BATCH`)
/// with a short pause between batches (so no kernel backlog overflows); write `sent=N
/// failed=M seconds=S start_ms=T0 end_ms=T1` (Unix milliseconds) to
/// `DIR/send.txt` (or `NEXTHOP_LIVE_SENT`). With `NEXTHOP_LIVE_STARTED`
/// set, first write `started` to that file in `DIR` just before the first
/// frame goes out (the frames are read and the socket is open by then).
pub fn helper_send(dir: &Path, iface: &str) {
    let name = std::env::var("NEXTHOP_LIVE_FRAMES").unwrap_or_else(|_| "frames.txt".into());
    let result = std::env::var("NEXTHOP_LIVE_SENT").unwrap_or_else(|_| "send.txt".into());
    let text = fs::read_to_string(dir.join(&name)).expect("read the frames file");
    let frames: Vec<Vec<u8>> = text.lines().map(|l| unhex(l).expect("hex frame")).collect();
    // For measurements by hand: NEXTHOP_LIVE_REPEAT=N sends the frames N
    // times, NEXTHOP_LIVE_PACE_US=0 sends without pauses.
    let env_num = |k: &str, default: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(default)
    };
    let repeat = env_num("NEXTHOP_LIVE_REPEAT", 1);
    let pace = Duration::from_micros(env_num("NEXTHOP_LIVE_PACE_US", 200));
    // NEXTHOP_LIVE_BATCH=1 sends one frame at a time (a steady stream).
    let batch = env_num("NEXTHOP_LIVE_BATCH", 32).max(1) as usize;
    let mut tx = TxPort::open(iface).expect("open tx port");
    if let Ok(started) = std::env::var("NEXTHOP_LIVE_STARTED") {
        fs::write(dir.join(started), "started\n").expect("write the start marker");
    }
    let (mut sent, mut failed) = (0, 0);
    let start_ms = unix_ms();
    let t = Instant::now();
    for _ in 0..repeat {
        for chunk in frames.chunks(batch) {
            let r = tx.send_batch(chunk);
            sent += r.sent;
            failed += r.failed;
            if !pace.is_zero() {
                sleep(pace);
            }
        }
    }
    let line = format!(
        "sent={sent} failed={failed} seconds={:.3} start_ms={start_ms} end_ms={}\n",
        t.elapsed().as_secs_f64(),
        unix_ms()
    );
    fs::write(dir.join(result), line).expect("write the send result");
}

/// Capture on each interface of `ifaces` (comma-separated) until
/// `DIR/capture.stop` exists; write `DIR/capture.txt`: `IFACE HEX` for each
/// frame from [`SRC_MAC`], in arrival order per interface.
pub fn helper_capture(dir: &Path, ifaces: &str) {
    // Room for about 2.5 s of frames at low rates (a block is handed over
    // when full or after 10 ms) and 16 MiB per ring at high rates, so a
    // capture descheduled for a while on a loaded machine drops nothing.
    let cfg = RingConfig {
        block_size: 1 << 16,
        block_count: 256,
        frame_size: 2048,
        block_timeout_ms: 10,
    };
    let mut rings: Vec<RxRing> = ifaces
        .split(',')
        .map(|i| RxRing::open(i, &cfg).expect("open rx ring"))
        .collect();
    fs::write(dir.join("capture.ready"), "ready\n").expect("write ready");
    let mut lines = String::new();
    let stop = dir.join("capture.stop");
    let mut last_round = false;
    loop {
        let mut any = false;
        for ring in rings.iter_mut() {
            let iface = ring.iface().to_string();
            while let Some(mut block) = ring.next_block() {
                any = true;
                let mut frames = Vec::new();
                block.frames_into(&mut frames);
                for f in frames.iter().filter(|f| f.get(6..12) == Some(&SRC_MAC[..])) {
                    lines.push_str(&format!("{iface} {}\n", hex(f)));
                }
            }
        }
        if last_round {
            break;
        }
        if stop.exists() {
            // One more pass after the stop request drains what is left
            // (partly filled blocks are handed over within 10 ms).
            sleep(Duration::from_millis(50));
            last_round = true;
        } else if !any {
            sleep(Duration::from_millis(2));
        }
    }
    let drops: u64 = rings.iter_mut().map(|r| r.drops().unwrap_or(0)).sum();
    lines.push_str(&format!("# ring_drops {drops}\n"));
    fs::write(dir.join("capture.txt"), lines).expect("write capture");
}

pub fn helper_env(lab: &Lab, mode: &str, ifaces: &str) -> Vec<(&'static str, String)> {
    vec![
        (HELPER_ENV, mode.to_string()),
        ("NEXTHOP_LIVE_DIR", lab.dir.path().display().to_string()),
        ("NEXTHOP_LIVE_IFACES", ifaces.to_string()),
    ]
}

pub const HELPER_ARGS: [&str; 5] = [
    "live_helper",
    "--exact",
    "--ignored",
    "--nocapture",
    "--test-threads=1",
];
