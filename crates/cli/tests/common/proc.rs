//! Support for the tests that drive `nexthop` and NDN peers
//! (`tests/ndn_run.rs`, `tests/ndn_lab.rs`, `tests/ndn_ndnts.rs`): a child
//! process killed and reaped on drop, its output read line by line on a
//! channel; the interop venv's Python; `key=value` fields of summary lines.
// Each test binary uses a different subset.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// A child process killed (and reaped) on drop; its output lines arrive
/// on a channel.
pub struct Proc {
    pub child: Child,
    pub lines: Receiver<String>,
}

impl Proc {
    pub fn spawn(mut cmd: Command, stderr_lines: bool) -> Proc {
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
    pub fn wait_line(&self, pat: &str, wait: Duration) -> String {
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

/// The Python of the interop venv that has python-ndn
/// (`bash scripts/setup-interop.sh` installs it).
pub fn python() -> PathBuf {
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/interop-venv/bin/python");
    assert!(
        py.exists(),
        "python-ndn peer missing: {} not found; install it with `bash scripts/setup-interop.sh`",
        py.display()
    );
    py
}

/// The number after `key=` in a space-separated summary line.
pub fn field(line: &str, key: &str) -> u64 {
    line.split(' ')
        .find_map(|f| f.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key}= in {line}"))
}
