//! A child process for the tests that drive `nexthop` and python-ndn peers
//! (`tests/ndn_run.rs`, `tests/ndn_lab.rs`): killed and reaped on drop, its
//! output read line by line on a channel.
// Each test binary uses a different subset.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
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
