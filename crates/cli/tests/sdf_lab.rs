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
