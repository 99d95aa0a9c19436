//! Files and options that would make the binary allocate the machine: each
//! is refused with a message naming the bytes, run under an address-space
//! limit (`prlimit --as`) so a regression aborts the child, not the host.

mod fixture;

use std::path::Path;
use std::process::{Command, Output};

use fixture::Fixture;

/// Address-space limit of the child: 2 GiB.
const LIMIT: u64 = 2 << 30;

/// `nexthop ARGS` under the address-space limit, or `None` (with a note)
/// where `prlimit` is missing.
fn limited(args: &[&str]) -> Option<Output> {
    let bin = assert_cmd::cargo::cargo_bin("nexthop");
    match Command::new("prlimit")
        .arg(format!("--as={LIMIT}"))
        .arg(bin)
        .args(args)
        .output()
    {
        Ok(o) => Some(o),
        Err(e) => {
            eprintln!("prlimit not available ({e}); skipping");
            None
        }
    }
}

/// The child failed cleanly (exit 1, not a signal) and its stderr holds
/// every needle.
fn refused(out: &Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    for n in needles {
        assert!(err.contains(n), "missing {n:?} in: {err}");
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn fib_build_with_a_capacity_beyond_memory_names_the_bytes() {
    let f = Fixture::new();
    let routes = f.file("routes.txt", "1 1\n2 2\n");
    let out = f.path("fib");
    let Some(o) = limited(&[
        "fib",
        "build",
        "--key-type",
        "u64",
        "--routes",
        s(&routes),
        "--out",
        s(&out),
        "--capacity",
        "1000000000",
    ]) else {
        return;
    };
    refused(&o, &["capacity 1000000000 needs", "bytes"]);
}

#[test]
fn lpm_build_with_one_v6_level_is_refused_with_the_estimate() {
    let f = Fixture::new();
    // 1,000 /32 and 1,000 /48 routes: a single level at /48 expands
    // every /32 2^16-fold (6.6 GB when it was built).
    let text: String = (0..1000u32)
        .map(|i| format!("2001:{i:x}::/32 1\n2002:{i:x}:1::/48 2\n"))
        .collect();
    let routes = f.file("routes.txt", text);
    let table = f.path("t.lpm");
    let Some(o) = limited(&[
        "lpm",
        "build",
        "--routes",
        s(&routes),
        "--out",
        s(&table),
        "--v6-levels",
        "1",
    ]) else {
        return;
    };
    refused(&o, &["needs about", "--max-memory"]);
    assert!(!table.exists());
    // The default levels build the same routes.
    let Some(o) = limited(&["lpm", "build", "--routes", s(&routes), "--out", s(&table)]) else {
        return;
    };
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn gzip_bomb_routes_are_refused_and_the_limit_can_be_raised() {
    let f = Fixture::new();
    let zeros = f.file("zeros.txt", vec![0u8; 50 << 20]);
    let gz = f.path("zeros.txt.gz");
    let ok = Command::new("gzip")
        .arg("-k")
        .arg(&zeros)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("gzip not available; skipping");
        return;
    }
    let table = f.path("t.lpm");
    let Some(o) = limited(&[
        "lpm",
        "build",
        "--routes",
        s(&gz),
        "--out",
        s(&table),
        "--max-decompressed",
        "1048576",
    ]) else {
        return;
    };
    refused(
        &o,
        &[
            "zeros.txt.gz",
            "more than 1048576 bytes",
            "--max-decompressed",
        ],
    );
    // Raised past its size, the file is read (and then refused as text).
    let Some(o) = limited(&[
        "lpm",
        "build",
        "--routes",
        s(&gz),
        "--out",
        s(&table),
        "--max-decompressed",
        "100000000",
    ]) else {
        return;
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("--max-decompressed"), "{err}");
}

#[test]
fn a_byte_order_mark_is_skipped_in_routes_and_stdin() {
    let f = Fixture::new();
    let routes = f.file("routes.txt", "\u{feff}/a/b 1\n");
    let fib = f.path("fib.bin");
    fixture::nexthop()
        .args([
            "ndn",
            "fib",
            "build",
            "--routes",
            s(&routes),
            "--out",
            s(&fib),
        ])
        .assert()
        .success();
    let out = fixture::nexthop()
        .args(["ndn", "fib", "lookup", "--fib", s(&fib)])
        .write_stdin("\u{feff}/a/b/c\n")
        .assert()
        .success();
    let text = fixture::stdout(&out);
    assert!(text.contains("/a/b") && text.contains('1'), "{text}");
    let lpm_routes = f.file("r.txt", "\u{feff}10.0.0.0/8 7\n");
    let table = f.path("t.lpm");
    fixture::nexthop()
        .args([
            "lpm",
            "build",
            "--routes",
            s(&lpm_routes),
            "--out",
            s(&table),
        ])
        .assert()
        .success();
    let out = fixture::nexthop()
        .args(["lpm", "lookup", "--table", s(&table)])
        .write_stdin("\u{feff}10.1.2.3\n")
        .assert()
        .success();
    assert_eq!(fixture::stdout(&out).trim(), "7");
}
