//! `nexthop lab --cluster 4`: a FIB split over four live `nexthop cluster
//! run` nodes in network namespaces joined by a full mesh of internal
//! links; one frame per name sent into every node; the lab's JSON summary
//! says every frame left its name's owner on the name's port exactly once,
//! and the nodes' own counts agree on the hand-overs. Without root the lab
//! refuses (namespaces need it) and the test checks that.

mod lab_common;

use lab_common::{is_root, lab_out};

#[test]
fn every_frame_entering_any_node_leaves_its_owner_on_its_port() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let args = [
        "--cluster",
        "4",
        "--names",
        "400",
        "--rate",
        "5000",
        "--json",
    ];
    let (ok, stdout, stderr) = lab_out(&args, tmp.path());
    if !is_root() {
        eprintln!("skipped: the cluster lab needs root (network namespaces)");
        assert!(!ok && stderr.contains("need root"), "{stderr}");
        return;
    }
    assert!(ok, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let s: serde_json::Value = serde_json::from_str(stdout.trim()).expect("JSON summary");
    assert_eq!(s["result"], "PASS", "{s:#}");
    assert_eq!(s["cluster"], 4);
    assert_eq!(s["owner_value_bits"], 2);
    assert_eq!(s["frames"], 1600);
    assert_eq!(s["received_ok"], 1600, "{s:#}");
    for k in ["misforwarded", "missing", "duplicated"] {
        assert_eq!(s[k], 0, "{k}: {s:#}");
    }
    let nodes = s["per_node"].as_array().unwrap();
    assert_eq!(nodes.len(), 4);
    let n = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap();
    // Each name enters at four nodes and is owned by one: three frames
    // per name cross an internal link.
    assert_eq!(n(&s, "handed_over"), 1200, "{s:#}");
    assert_eq!(n(&s, "from_cluster"), 1200, "{s:#}");
    let names: u64 = nodes.iter().map(|x| n(x, "names")).sum();
    assert_eq!(names, 400);
    for x in nodes {
        // Node k: 400 frames from outside (kept or handed over) plus 4
        // frames for each of its own names from the others.
        assert_eq!(n(x, "frames_in"), 400 + 3 * n(x, "names"), "{x}");
        assert_eq!(n(x, "handed_over"), 400 - n(x, "names"), "{x}");
        assert_eq!(n(x, "from_cluster"), 3 * n(x, "names"), "{x}");
        assert_eq!(n(x, "forwarded"), n(x, "frames_in"), "{x}");
    }
    let lat = &s["latency"];
    assert_eq!(lat["entered_at_owner"]["frames"], 400, "{s:#}");
    assert_eq!(lat["one_internal_hop"]["frames"], 1200, "{s:#}");
}
