//! End-to-end tests of `nexthop sdf run --slice`: two l2switch slices on
//! one switch, offline (pcap files written here by hand): a flood of
//! distinct flows in one slice evicts only its own share of the cache (the
//! other slice's hits and outputs are the same as without the flood),
//! frames of a port no slice owns are dropped and counted, the summary
//! line and `--json` carry each slice's counters, and bad slices are
//! refused.

mod fixture;
#[path = "common/pcapio.rs"]
mod pcapio;

use std::collections::BTreeMap;
use std::fs;

use fixture::{nexthop, stdout, Fixture};
use pcapio::{frames_of, pcap_usec as pcap};

fn mac(i: u32) -> [u8; 6] {
    let b = i.to_be_bytes();
    [2, 0, b[0], b[1], b[2], b[3]]
}

fn eth(dst: [u8; 6], src: [u8; 6], seq: u8) -> Vec<u8> {
    let mut f = vec![seq; 64];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f
}

/// Timed frames per input port.
type Inputs = BTreeMap<u16, Vec<(u64, Vec<u8>)>>;

/// Slice b (ports 3, 4): hosts 3 and 4 say hello and talk, before and
/// after slice a (ports 1, 2) sees, with `flood`, 600 distinct flows (each
/// twice) from port 1 to a host on port 2; 5 frames arrive on port 5, which
/// no slice owns.
fn traffic(flood: bool) -> Inputs {
    let mut inputs = Inputs::new();
    let mut t = 0u64;
    let mut send = |port: u16, f: Vec<u8>| {
        t += 1;
        inputs.entry(port).or_default().push((t, f));
    };
    let (h3, h4, h2) = (mac(3), mac(4), mac(2));
    send(3, eth([0xff; 6], h3, 0));
    send(4, eth([0xff; 6], h4, 0));
    send(2, eth([0xff; 6], h2, 0));
    for i in 0..20 {
        send(3, eth(h4, h3, i));
        send(4, eth(h3, h4, i));
    }
    if flood {
        for i in 0..600 {
            for seq in 0..2 {
                send(1, eth(h2, mac(10_000 + i), seq));
            }
        }
    }
    for i in 0..5 {
        send(5, eth(h3, mac(99), i));
    }
    for i in 0..20 {
        send(3, eth(h4, h3, 100 + i));
        send(4, eth(h3, h4, 100 + i));
    }
    inputs
}

struct Run {
    json: serde_json::Value,
    out: BTreeMap<u16, Vec<Vec<u8>>>,
}

fn run(fx: &Fixture, name: &str, inputs: &Inputs, json: bool) -> (String, Run) {
    let out = fx.path(name);
    let mut cmd = nexthop();
    cmd.args([
        "sdf",
        "run",
        "--slice",
        "a:l2switch:ports=1,2:share=32",
        "--slice",
        "b:l2switch:ports=3,4",
        "--cache-capacity",
        "256",
        "--ports",
        "1,2,3,4,5",
        "--out-dir",
    ])
    .arg(&out);
    if json {
        cmd.arg("--json");
    }
    for (p, frames) in inputs {
        let path = fx.file(&format!("{name}-in-{p}.pcap"), pcap(frames));
        cmd.arg("--in-pcap").arg(format!("{p}={}", path.display()));
    }
    let text = stdout(&cmd.assert().success());
    let json = if json {
        serde_json::from_str(&text).unwrap()
    } else {
        serde_json::Value::Null
    };
    let out = (0..=5)
        .map(|p| (p, frames_of(&out.join(format!("port-{p}.pcap")))))
        .collect();
    (text, Run { json, out })
}

fn slice<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["slices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap()
}

#[test]
fn a_flood_in_one_slice_leaves_the_other_slices_hits_and_frames_alone() {
    let fx = Fixture::new();
    let (_, quiet) = run(&fx, "quiet", &traffic(false), true);
    let (_, flooded) = run(&fx, "flooded", &traffic(true), true);
    let (qa, qb) = (slice(&quiet.json, "a"), slice(&quiet.json, "b"));
    let (fa, fb) = (slice(&flooded.json, "a"), slice(&flooded.json, "b"));
    assert_eq!(qa["share"], 32);
    assert_eq!(qb["share"], 224, "b has what a left");
    assert_eq!(qb["owns"], "ports=3,4");
    // Slice a's flood evicted its own entries only, within its share.
    assert!(fa["evictions"].as_u64().unwrap() >= 500, "{fa}");
    assert!(fa["entries"].as_u64().unwrap() <= 32, "{fa}");
    assert_eq!(fb["evictions"], 0, "{fb}");
    // Slice b hit exactly as often, and sent the same frames, as without it.
    let hits = fb["pipeline"]["hits"].as_u64().unwrap();
    assert!(hits >= 70, "b's talk is cached: {fb}");
    assert_eq!(fb["pipeline"]["hits"], qb["pipeline"]["hits"]);
    assert_eq!(fb["app_calls"], qb["app_calls"]);
    for p in [3, 4] {
        assert_eq!(flooded.out[&p], quiet.out[&p], "port {p}");
        assert_eq!(flooded.out[&p].len(), 41, "port {p}");
    }
    // The flood went from port 1 to port 2 only; b's floods stayed in b.
    assert_eq!(flooded.out[&2].len(), 1200);
    assert!(flooded.out[&5].is_empty() && flooded.out[&0].is_empty());
    // Port 5 is nobody's: its frames are dropped, counted.
    for v in [&quiet.json, &flooded.json] {
        assert_eq!(v["pipeline"]["drops"]["no_slice"], 5);
    }
    assert_eq!(flooded.json["app"], "a=l2switch,b=l2switch");
}

#[test]
fn the_summary_line_names_each_slice() {
    let fx = Fixture::new();
    let (line, _) = run(&fx, "line", &traffic(true), false);
    let f: BTreeMap<&str, &str> = line
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .collect();
    assert_eq!(f["no_slice"], "5", "{line}");
    let b: BTreeMap<&str, &str> = f["slice.b"]
        .split(',')
        .filter_map(|kv| kv.split_once(':'))
        .collect();
    assert_eq!(b["share"], "224", "{line}");
    assert_eq!(b["evictions"], "0", "{line}");
    assert!(f.contains_key("slice.a"), "{line}");
}

#[test]
fn bad_slices_are_refused_with_the_reason() {
    let fx = Fixture::new();
    let input = fx.file("in.pcap", pcap(&[]));
    for (args, why) in [
        (
            vec![
                "--slice",
                "a:l2switch:ports=1",
                "--slice",
                "b:l2switch:ports=1",
            ],
            "port 1 belongs to two slices",
        ),
        (
            vec!["--slice", "a:l2switch:ports=9"],
            "port 9 does not exist",
        ),
        (vec!["--slice", "a:nope:ports=1"], "no such built-in app"),
        (vec!["--slice", "a:l2switch:vlan=5000"], "vlan id"),
        (
            vec!["--slice", "a:l2switch:ports=1", "--app", "l2switch"],
            "cannot be used with",
        ),
    ] {
        nexthop()
            .args(["sdf", "run", "--ports", "0,1,2"])
            .args(&args)
            .arg("--in-pcap")
            .arg(&input)
            .arg("--out-dir")
            .arg(fx.path("out"))
            .assert()
            .failure()
            .stderr(predicates::str::contains(why));
    }
}

#[test]
fn a_python_slice_makes_the_run_the_packages_and_bad_python_slices_are_refused() {
    let fx = Fixture::new();
    let input = fx.file("in.pcap", pcap(&[]));
    let app = fx.file("app.py", "def make_app():\n    return None\n");
    let app = app.to_str().unwrap();
    // A stand-in interpreter that has the package and prints its arguments.
    let py = fx.file(
        "fake-python",
        "#!/bin/sh\n[ \"$1\" = -c ] && exit 0\necho \"$@\"\n",
    );
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&py, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let run = |slices: &[String]| {
        let mut c = nexthop();
        c.env("NEXTHOP_PYTHON", &py).args(["sdf", "run"]);
        for s in slices {
            c.args(["--slice", s]);
        }
        c.args(["--ports", "1,2", "--mac-timeout", "30", "--in-pcap"])
            .arg(&input)
            .arg("--out-dir")
            .arg(fx.path("out"));
        c
    };
    let args = stdout(
        &run(&[
            format!("a:{app}:ports=2,1:share=8"),
            "b:l2switch:vlan=7".into(),
        ])
        .assert()
        .success(),
    );
    assert!(
        args.contains(&format!(
            "-m nexthop.sdf run --slice a:{app}:ports=1,2:share=8 --slice b:l2switch:vlan=7 \
             --mac-timeout 30 --max-macs 65536 --in-pcap 0="
        )),
        "{args}"
    );
    assert!(!args.contains("--app"), "{args}");
    for (slices, why) in [
        (
            vec!["a:nothere.py:ports=1".to_string()],
            "--slice a: nothere.py: no such file",
        ),
        (
            vec![format!("a:{app}:ports=1"), "r:router:ports=2".into()],
            "--slice r: beside a Python slice the built-in router cannot run",
        ),
        (
            vec![format!("a:{app}:ports=1"), "n:nope:ports=2".into()],
            "--slice n: \"nope\": no such built-in app",
        ),
    ] {
        run(&slices)
            .assert()
            .failure()
            .stderr(predicates::str::contains(why));
    }
}
