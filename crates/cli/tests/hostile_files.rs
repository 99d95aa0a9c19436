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
    limited_to(LIMIT, args)
}

/// `nexthop ARGS` under an address-space limit of `limit` bytes.
fn limited_to(limit: u64, args: &[&str]) -> Option<Output> {
    let bin = assert_cmd::cargo::cargo_bin("nexthop");
    match Command::new("prlimit")
        .arg(format!("--as={limit}"))
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

/// Capacities whose arrays fit under the limit but whose saved control
/// state does not (it aborted in `Othello::save` before): every build either
/// succeeds or is refused with the bytes, never killed by a signal, and the
/// window between the two refusals is hit.
#[test]
fn fib_build_whose_files_do_not_fit_is_refused_not_aborted() {
    let f = Fixture::new();
    let routes = f.file("routes.txt", "1 1\n2 2\n");
    let mut saw_file_refusal = false;
    for capacity in [
        12_000_000u32,
        18_000_000,
        20_000_000,
        22_000_000,
        24_000_000,
    ] {
        let out = f.path(&format!("fib-{capacity}"));
        let cap = capacity.to_string();
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
            &cap,
        ]) else {
            return;
        };
        let err = String::from_utf8_lossy(&o.stderr);
        match o.status.code() {
            Some(0) => {}
            Some(1) => {
                assert!(err.contains("bytes, which could not be allocated"), "{err}");
                if err.contains("control state needs") || err.contains("snapshot needs") {
                    saw_file_refusal = true;
                    assert!(!out.join("current").exists(), "a refused build committed");
                }
            }
            _ => panic!("capacity {capacity}: {:?}: {err}", o.status),
        }
    }
    assert!(
        saw_file_refusal,
        "no capacity fell between the array and the file limits"
    );
}

#[test]
fn fib_update_that_must_grow_past_memory_is_refused_and_changes_nothing() {
    let f = Fixture::new();
    // 2^20 names fill the arrays exactly (capacity 2^20): one more name
    // doubles them.
    let text: String = (1..=1u32 << 20).map(|i| format!("{i} 1\n")).collect();
    let routes = f.file("routes.txt", text);
    let fib = f.path("fib");
    let Some(o) = limited(&[
        "fib",
        "build",
        "--key-type",
        "u64",
        "--routes",
        s(&routes),
        "--out",
        s(&fib),
    ]) else {
        return;
    };
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let add = f.file("add.txt", "+ 99999999 2\n");
    let args = ["fib", "update", "--fib", s(&fib), "--changes", s(&add)];
    // Loading the FIB fits in 320 MiB; the doubled arrays do not.
    let Some(o) = limited_to(320 << 20, &args) else {
        return;
    };
    refused(&o, &["capacity 2097152 needs", "bytes"]);
    let current = std::fs::read_link(fib.join("current")).unwrap();
    assert_eq!(current.to_str(), Some("gen-1"));
    // With room, the same update grows the FIB.
    let Some(o) = limited(&args) else {
        return;
    };
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let current = std::fs::read_link(fib.join("current")).unwrap();
    assert_eq!(current.to_str(), Some("gen-2"));
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

/// An NDN FIB file (format version 3) with a valid checksum, no next hops,
/// one level with one empty bucket and an entry arena of `words` zero
/// words: it loads as an empty FIB, after allocating the arena.
fn ndn_fib_with_arena(words: u64) -> Vec<u8> {
    let mut o = Vec::new();
    o.extend_from_slice(b"NHNDNFIB");
    o.extend_from_slice(&3u32.to_le_bytes()); // version
    o.extend_from_slice(&[0, 1]); // strategy VerifyEach, bucket fill 1
    o.extend_from_slice(&1u16.to_le_bytes()); // max components
    o.extend_from_slice(&[0u8; 16]); // key
    o.extend_from_slice(&((1u32 << 24) - 1).to_le_bytes()); // default: none
    o.extend_from_slice(&0u64.to_le_bytes()); // rules
    o.extend_from_slice(&0u32.to_le_bytes()); // next-hop sets
    o.extend_from_slice(&0u32.to_le_bytes()); // offsets[0]
    o.extend_from_slice(&0u32.to_le_bytes()); // hops
    o.extend_from_slice(&words.to_le_bytes());
    o.resize(o.len() + words as usize * 8, 0);
    o.extend_from_slice(&1u32.to_le_bytes()); // home buckets
    o.extend_from_slice(&0u64.to_le_bytes()); // keys
    o.extend_from_slice(&1u64.to_le_bytes()); // buckets
    o.resize(o.len() + 62, 0);
    let sum = nexthop_hash::hash64(&o, 0);
    o.extend_from_slice(&sum.to_le_bytes());
    o
}

#[test]
fn an_ndn_fib_file_too_large_for_memory_is_refused_with_the_bytes() {
    let f = Fixture::new();
    let small = f.file("small.fib", ndn_fib_with_arena(4));
    let Some(o) = limited(&["ndn", "fib", "lookup", "--fib", s(&small), "/a/b"]) else {
        return;
    };
    // The layout is right: the small file loads (and matches nothing).
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // 160 MB of arena: reading the file and then the arena cannot both
    // fit under 256 MiB of address space.
    let words = 20_000_000u64;
    let big = f.file("big.fib", ndn_fib_with_arena(words));
    let args = ["ndn", "fib", "lookup", "--fib", s(&big), "/a/b"];
    let Some(o) = limited_to(256 << 20, &args) else {
        return;
    };
    refused(
        &o,
        &[
            "big.fib",
            "does not fit in memory",
            &format!("entry arena needs {} bytes", words * 8),
        ],
    );
    // With room, the same file loads.
    let Some(o) = limited(&args) else {
        return;
    };
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
