//! `nexthop lab --switches 4`: four forwarders in a line, each following
//! its column of one network-wide FIB through the lab's own
//! `redis-server`, traffic across every hop while routes move; the lab's
//! JSON summary says every frame reached the sink of its version (or of a
//! neighbouring one while a change propagated), the final wave reached
//! exactly the final sinks, and the per-hop counts agree link by link.
//! Without root the lab refuses (namespaces need it) and the test checks
//! that.

mod lab_common;

use lab_common::{is_root, lab_out as lab};
use serde_json::Value;

/// `nexthop lab ARGS --names 150 --duration 2 --update-rate 40 --rate
/// 2000 --json` in a temporary out directory. Without root: checks that
/// the lab refuses and gives `None`. As root: checks what every network
/// lab must say (PASS, nothing misforwarded, the final wave exactly at the
/// final sinks, no per-hop mismatch, `summary.json` written) and gives the
/// summary.
fn network_lab(args: &[&str]) -> Option<Value> {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut all = args.to_vec();
    all.extend([
        "--names",
        "150",
        "--duration",
        "2",
        "--update-rate",
        "40",
        "--rate",
        "2000",
        "--json",
    ]);
    let (ok, stdout, stderr) = lab(&all, tmp.path());
    if !is_root() {
        assert!(!ok && stderr.contains("need root"), "{stderr}");
        return None;
    }
    assert!(ok, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let s: Value = serde_json::from_str(stdout.trim()).expect("JSON summary");
    assert_eq!(s["result"], "PASS", "{s:#}");
    assert_eq!(s["misforwarded"], 0, "{s:#}");
    assert_eq!(s["final_wave"]["received"], 150, "{s:#}");
    assert_eq!(s["final_wave"]["wrong_or_missing"], 0, "{s:#}");
    assert!(
        s["per_hop_mismatches"].as_array().unwrap().is_empty(),
        "{s:#}"
    );
    assert!(tmp.path().join("summary.json").exists());
    Some(s)
}

/// Field `k` of `v` as a number.
fn n(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

#[test]
fn four_switches_forward_every_frame_to_the_sink_of_its_version() {
    let Some(s) = network_lab(&["--switches", "4"]) else {
        return;
    };
    assert_eq!(s["switches"], 4);
    assert!(n(&s, "received_exact") > 1000, "{s:#}");
    // 40 changes/s for 2 s: 80, fewer where a loaded machine lags (the
    // changes stop with the traffic); one version per change.
    let changes = n(&s, "changes");
    assert!((1..=80).contains(&changes), "{s:#}");
    assert_eq!(n(&s, "version"), changes, "{s:#}");
    // A move between two sinks changes the next hop of some switches
    // only: each change is a delta at 1 to 4 of them.
    let deltas: u64 = s["column_deltas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().expect("a count"))
        .sum();
    assert!((changes..=4 * changes).contains(&deltas), "{s:#}");
    let hops = s["per_hop"].as_array().unwrap();
    assert_eq!(hops.len(), 4);
    for (i, h) in hops.iter().enumerate() {
        let from_left = if i == 0 {
            n(&s, "sent")
        } else {
            n(&hops[i - 1], "to_right")
        };
        let from_right = hops.get(i + 1).map_or(0, |r| n(r, "to_left"));
        assert_eq!(n(h, "frames_in"), from_left + from_right, "{s:#}");
    }
    // Traffic reached the far end of the line.
    assert!(n(&hops[3], "to_sink") > 0, "{s:#}");
}

#[test]
fn a_network_lab_of_fewer_than_four_switches_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (ok, _, stderr) = lab(&["--switches", "3"], tmp.path());
    assert!(
        !ok && stderr.contains("--switches 3: expected 4 to 16"),
        "{stderr}"
    );
}

/// `--topology leaf-spine`: 2 spines over 4 leaves, a sink on each leaf.
/// Every frame reaches the sink of its version, the final wave exactly the
/// final sinks, and the per-hop counts agree link by link: every leaf's
/// input is what the spines sent down to it (plus the source at leaf 0),
/// every spine's is what the leaves sent up.
#[test]
fn a_leaf_spine_network_forwards_every_frame_to_the_sink_of_its_version() {
    let Some(s) = network_lab(&["--switches", "6", "--topology", "leaf-spine"]) else {
        return;
    };
    assert_eq!(s["topology"], "leaf-spine");
    let hops = s["per_hop"].as_array().unwrap();
    let roles: Vec<&str> = hops.iter().map(|h| h["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["leaf", "leaf", "leaf", "leaf", "spine", "spine"]);
    let tx = |h: &Value, p: u16| h["tx"][p.to_string()].as_u64().unwrap_or(0);
    // Leaf l reaches spine j on port 1 + j; spine j reaches leaf l on
    // port 1 + l; the source enters leaf 0.
    for (l, h) in hops.iter().enumerate().take(4) {
        let down: u64 = (4..6).map(|sp| tx(&hops[sp], 1 + l as u16)).sum();
        let src = if l == 0 { n(&s, "sent") } else { 0 };
        assert_eq!(n(h, "frames_in"), down + src, "leaf {l}: {s:#}");
        assert!(n(h, "to_sink") > 0, "leaf {l}: {s:#}");
    }
    for (j, h) in hops.iter().enumerate().skip(4) {
        let up: u64 = (0..4).map(|l| tx(&hops[l], 1 + (j - 4) as u16)).sum();
        assert_eq!(n(h, "frames_in"), up, "spine {j}: {s:#}");
        assert!(n(h, "frames_in") > 0, "spine {j}: {s:#}");
    }
}

#[test]
fn a_topology_without_switches_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (ok, _, stderr) = lab(&["--topology", "leaf-spine"], tmp.path());
    assert!(
        !ok && stderr.contains("--topology is for the network lab"),
        "{stderr}"
    );
}
