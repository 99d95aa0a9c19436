//! What the `nexthop lab` tests share (`lab.rs`, `lab_network.rs`,
//! `lab_cluster.rs`): whether they run as root, and running the lab.

#![allow(dead_code)] // each test file uses part of it

use std::path::Path;
use std::process::Command;

pub const NEXTHOP: &str = env!("CARGO_BIN_EXE_nexthop");

/// Whether the tests run as root (namespaces need it; without, the live
/// labs refuse or fall back, which the tests check instead).
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// `nexthop lab ARGS`: success, stdout, stderr.
pub fn lab(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(NEXTHOP)
        .arg("lab")
        .args(args)
        .output()
        .expect("run nexthop lab");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// `nexthop lab ARGS --out OUT`.
pub fn lab_out(args: &[&str], out: &Path) -> (bool, String, String) {
    let mut all = args.to_vec();
    let out = out.to_str().expect("UTF-8 path");
    all.extend(["--out", out]);
    lab(&all)
}
