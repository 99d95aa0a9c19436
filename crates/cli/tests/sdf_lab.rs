//! `nexthop sdf lab`: the l2switch through the SDF pipeline over generated
//! traffic (no root), checked frame by frame against the app without a
//! cache; the summary (line and `--json`) and the progress lines.

mod fixture;

use fixture::{nexthop, stdout};

#[test]
fn lab_passes_with_moves_and_reports_its_counters_as_json() {
    let ok = nexthop()
        .args([
            "sdf", "lab", "--hosts", "40", "--frames", "20000", "--moves", "6", "--every", "0",
            "--json",
        ])
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_str(&stdout(&ok)).unwrap();
    assert_eq!(v["result"], "PASS", "{v}");
    assert_eq!(v["mismatches"], 0);
    assert_eq!(v["unanswered"], 0);
    assert_eq!(v["frames"], 20040);
    assert_eq!(v["moves"], 6);
    let hits = v["hits"].as_u64().unwrap();
    let misses = v["misses"].as_u64().unwrap();
    assert_eq!(hits + misses, 20040);
    assert!(v["hit_rate"].as_f64().unwrap() > 0.5, "{v}");
    assert!(v["app_calls"].as_u64().unwrap() < 10_000, "{v}");
    assert!(
        v["revocations"].as_u64().unwrap() >= 6,
        "each move revokes: {v}"
    );
    assert!(v["installs"].as_u64().unwrap() > 0);
    assert!(v["app_calls_per_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn lab_prints_progress_lines_and_a_pass_line() {
    let ok = nexthop()
        .args(["sdf", "lab", "--frames", "5000", "--every", "1000"])
        .assert()
        .success();
    let line = stdout(&ok);
    assert!(line.starts_with("PASS frames=5064 "), "{line}");
    assert!(line.contains(" mismatches=0 "), "{line}");
    let err = String::from_utf8(ok.get_output().stderr.clone()).unwrap();
    let progress: Vec<&str> = err.lines().filter(|l| l.starts_with("t=")).collect();
    assert!(progress.len() >= 4, "{err}");
    for want in ["hit_rate=", "app_calls_per_s=", "revocations="] {
        assert!(progress[0].contains(want), "{err}");
    }
}

#[test]
fn lab_refuses_bad_sizes() {
    nexthop()
        .args(["sdf", "lab", "--hosts", "1"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("--hosts 1: expected 2 to 60000"));
}

#[test]
fn lab_between_namespaces_passes_with_real_frames() {
    if !nexthop_dataplane::netns::is_root() {
        eprintln!("skipped: `nexthop sdf lab --netns` needs root (network namespaces)");
        return;
    }
    let ok = nexthop()
        .args([
            "sdf", "lab", "--netns", "--hosts", "24", "--ports", "3", "--frames", "3000",
            "--moves", "4", "--every", "1000", "--json",
        ])
        .timeout(std::time::Duration::from_secs(120))
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_str(&stdout(&ok)).unwrap();
    assert_eq!(v["result"], "PASS", "{v}");
    assert_eq!(v["netns"], true);
    assert_eq!(v["mismatches"], 0);
    assert_eq!(v["unanswered"], 0);
    assert_eq!(v["frames"], 3024);
    assert_eq!(v["moves"], 4);
    // Every frame crossed the switch's live ports: each one a hit or a miss.
    let hits = v["hits"].as_u64().unwrap();
    let misses = v["misses"].as_u64().unwrap();
    assert_eq!(hits + misses, 3024, "{v}");
    assert!(v["hit_rate"].as_f64().unwrap() > 0.5, "{v}");
    assert!(
        v["revocations"].as_u64().unwrap() >= 4,
        "each move revokes: {v}"
    );
    let err = String::from_utf8(ok.get_output().stderr.clone()).unwrap();
    assert!(
        err.lines().filter(|l| l.starts_with("t=")).count() >= 2,
        "{err}"
    );
    // The lab removed its namespaces (only this test makes them).
    let left = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    let left = String::from_utf8_lossy(&left.stdout);
    assert!(!left.contains("nh-sdflab-"), "{left}");
}
