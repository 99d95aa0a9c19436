//! `nexthop lab --switches 4`: four forwarders in a line, each following
//! its column of one network-wide FIB through the lab's own
//! `redis-server`, traffic across every hop while routes move; the lab's
//! JSON summary says every frame reached the sink of its version (or of a
//! neighbouring one while a change propagated), the final wave reached
//! exactly the final sinks, and the per-hop counts agree link by link.
//! Without root the lab refuses (namespaces need it) and the test checks
//! that.

use std::process::Command;

const NEXTHOP: &str = env!("CARGO_BIN_EXE_nexthop");

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn lab(args: &[&str], out: &std::path::Path) -> (bool, String, String) {
    let o = Command::new(NEXTHOP)
        .arg("lab")
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .expect("run nexthop lab");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn four_switches_forward_every_frame_to_the_sink_of_its_version() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let args = [
        "--switches",
        "4",
        "--names",
        "150",
        "--duration",
        "2",
        "--update-rate",
        "40",
        "--rate",
        "2000",
        "--json",
    ];
    let (ok, stdout, stderr) = lab(&args, tmp.path());
    if !is_root() {
        assert!(!ok && stderr.contains("need root"), "{stderr}");
        return;
    }
    assert!(ok, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let s: serde_json::Value = serde_json::from_str(stdout.trim()).expect("JSON summary");
    assert_eq!(s["result"], "PASS", "{s:#}");
    assert_eq!(s["switches"], 4);
    assert_eq!(s["misforwarded"], 0, "{s:#}");
    assert!(s["received_exact"].as_u64().unwrap() > 1000, "{s:#}");
    assert_eq!(s["final_wave"]["received"], 150, "{s:#}");
    assert_eq!(s["final_wave"]["wrong_or_missing"], 0, "{s:#}");
    assert_eq!(s["changes"], 80, "{s:#}");
    assert_eq!(s["version"], 80, "{s:#}");
    // A move between two sinks changes the next hop of some switches
    // only: each change is a delta at 1 to 4 of them.
    let deltas: u64 = s["column_deltas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap())
        .sum();
    assert!((80..=320).contains(&deltas), "{s:#}");
    let hops = s["per_hop"].as_array().unwrap();
    assert_eq!(hops.len(), 4);
    assert!(s["per_hop_mismatches"].as_array().unwrap().is_empty());
    let n = |h: &serde_json::Value, k: &str| h[k].as_u64().unwrap();
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
    assert!(hops[3]["to_sink"].as_u64().unwrap() > 0, "{s:#}");
    assert!(tmp.path().join("summary.json").exists());
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
