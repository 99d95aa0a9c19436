//! End-to-end tests of `nexthop cluster build | forward`: the cluster's
//! output files equal those of `nexthop forward` over the single FIB of
//! all names, for several cluster sizes, entry rules and alien names.

mod fixture;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use fixture::{nexthop, stdout, Fixture};

/// 600 MAC names with ports, port sets, drop and controller actions.
fn routes() -> String {
    let mut s = String::new();
    for i in 0..600u32 {
        let action = match i % 7 {
            0 => "1+3".to_string(),
            1 => "drop".to_string(),
            2 => "controller".to_string(),
            n => format!("{}", n + 1),
        };
        s.push_str(&format!(
            "02:00:00:00:{:02x}:{:02x} {action}\n",
            i >> 8,
            i & 0xff
        ));
    }
    s
}

/// A classic little-endian pcap file of 64-byte frames to `dsts`.
fn pcap(dsts: &[[u8; 6]]) -> Vec<u8> {
    let mut v = Vec::new();
    for x in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        v.extend_from_slice(&x.to_le_bytes());
    }
    for (i, d) in dsts.iter().enumerate() {
        let mut f = d.to_vec();
        f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0xfe, 0x88, 0xb5]);
        f.extend_from_slice(&(i as u32).to_be_bytes());
        f.resize(64, i as u8);
        for x in [1_700_000_000 + i as u32, 0, 64, 64] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(&f);
    }
    v
}

/// Frames to known names (each several times) and to 200 alien names,
/// plus a runt.
fn input() -> Vec<u8> {
    let mut d = Vec::new();
    for i in 0..1800u32 {
        let n = i * 7 % 600;
        d.push([2, 0, 0, 0, (n >> 8) as u8, n as u8]);
        if i % 9 == 0 {
            d.push([0x0a, 0xbc, 0, 0, (i >> 8) as u8, i as u8]);
        }
    }
    let mut v = pcap(&d);
    // A runt: 10 bytes, no name.
    for x in [1_800_000_000u32, 0, 10, 10] {
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.extend_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0]);
    v
}

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap()
}

#[test]
fn cluster_output_equals_single_fib_output_for_1_2_4_5_nodes() {
    let f = Fixture::new();
    let r = f.file("routes.txt", routes());
    let inp = f.file("in.pcap", input());
    let single = f.path("single");
    nexthop()
        .args([
            "fib",
            "build",
            "--key-type",
            "mac",
            "--check-bits",
            "16",
            "--routes",
        ])
        .arg(&r)
        .arg("--out")
        .arg(&single)
        .assert()
        .success();
    for miss in ["drop", "controller"] {
        let want_dir = f.path(&format!("want-{miss}"));
        let a = nexthop()
            .args(["forward", "--json", "--miss", miss, "--fib"])
            .arg(&single)
            .arg("--in-pcap")
            .arg(&inp)
            .arg("--out-dir")
            .arg(&want_dir)
            .assert()
            .success();
        let want_sum = json(&stdout(&a));
        let want = files(&want_dir);
        assert!(want.len() >= 4, "{:?}", want.keys());
        for nodes in [1usize, 2, 4, 5] {
            let cdir = f.path(&format!("cluster-{nodes}"));
            nexthop()
                .args([
                    "cluster",
                    "build",
                    "--key-type",
                    "mac",
                    "--check-bits",
                    "16",
                ])
                .args(["--nodes", &nodes.to_string(), "--routes"])
                .arg(&r)
                .arg("--out")
                .arg(&cdir)
                .assert()
                .success();
            for entry in ["round-robin", "0"] {
                let got_dir = f.path(&format!("got-{miss}-{nodes}-{entry}"));
                let a = nexthop()
                    .args(["cluster", "forward", "--json", "--miss", miss])
                    .args(["--entry", entry, "--cluster"])
                    .arg(&cdir)
                    .arg("--in-pcap")
                    .arg(&inp)
                    .arg("--out-dir")
                    .arg(&got_dir)
                    .assert()
                    .success();
                let s = json(&stdout(&a));
                assert_eq!(
                    files(&got_dir),
                    want,
                    "{nodes} nodes, entry {entry}, miss {miss}"
                );
                for k in [
                    "frames_in",
                    "forwarded",
                    "dropped",
                    "punted",
                    "malformed",
                    "misses",
                ] {
                    assert_eq!(s[k], want_sum[k], "{k}: {nodes} nodes, entry {entry}");
                }
                let per: Vec<serde_json::Value> = s["per_node"].as_array().unwrap().clone();
                assert_eq!(per.len(), nodes);
                let sum = |f: &str| per.iter().map(|p| p[f].as_u64().unwrap()).sum::<u64>();
                assert_eq!(sum("entered"), s["frames_in"].as_u64().unwrap());
                assert_eq!(sum("owned"), s["frames_in"].as_u64().unwrap());
                assert_eq!(sum("forwarded"), s["forwarded"].as_u64().unwrap());
                assert_eq!(sum("handed_over"), s["internal_hops"].as_u64().unwrap());
                if nodes == 1 {
                    assert_eq!(s["internal_hops"], 0);
                } else {
                    assert!(s["internal_hops"].as_u64().unwrap() > 0);
                }
                if entry == "0" {
                    assert_eq!(per[0]["entered"], s["frames_in"]);
                }
            }
        }
    }
}

#[test]
fn build_reports_memory_per_node_and_balances_names() {
    let f = Fixture::new();
    let r = f.file("routes.txt", routes());
    let a = nexthop()
        .args([
            "cluster",
            "build",
            "--key-type",
            "mac",
            "--nodes",
            "4",
            "--json",
            "--routes",
        ])
        .arg(&r)
        .arg("--out")
        .arg(f.path("c"))
        .assert()
        .success();
    let s = json(&stdout(&a));
    assert_eq!(s["owner_value_bits"], 2);
    // The owner map is bit-packed: 2 bits a slot, not a byte.
    let (packed, unpacked) = (
        s["owner_bytes"].as_u64().unwrap(),
        s["owner_unpacked_bytes"].as_u64().unwrap(),
    );
    assert!(packed * 3 < unpacked, "{packed} vs {unpacked}");
    let node = s["node"].as_array().unwrap();
    assert_eq!(node.len(), 4);
    let names: Vec<u64> = node.iter().map(|n| n["names"].as_u64().unwrap()).collect();
    assert_eq!(names.iter().sum::<u64>(), 600);
    assert!(names.iter().all(|&n| (100..200).contains(&n)), "{names:?}");
    for n in node {
        assert_eq!(
            n["total_bytes"].as_u64().unwrap(),
            n["fib_bytes"].as_u64().unwrap() + s["owner_bytes"].as_u64().unwrap()
        );
    }
}

fn fails_with(args: &[&str], dir: &Path, needle: &str) {
    let a = nexthop().current_dir(dir).args(args).assert().failure();
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(err.contains(needle), "stderr {err:?} lacks {needle:?}");
}

#[test]
fn bad_input_is_refused_clearly() {
    let f = Fixture::new();
    f.file("routes.txt", routes());
    f.file("empty.txt", "# nothing\n");
    f.file("in.pcap", input());
    let d = f.dir();
    let b = ["cluster", "build", "--key-type", "mac", "--routes"];
    fails_with(
        &[&b[..], &["routes.txt", "--out", "c", "--nodes", "0"]].concat(),
        d,
        "1 to 256",
    );
    fails_with(
        &[&b[..], &["routes.txt", "--out", "c", "--nodes", "257"]].concat(),
        d,
        "1 to 256",
    );
    fails_with(
        &[&b[..], &["empty.txt", "--out", "c", "--nodes", "2"]].concat(),
        d,
        "no routes",
    );
    nexthop()
        .current_dir(d)
        .args([&b[..], &["routes.txt", "--out", "c", "--nodes", "3"]].concat())
        .assert()
        .success();
    let fwd = |c: &str| {
        vec![
            "cluster",
            "forward",
            "--cluster",
            c,
            "--in-pcap",
            "in.pcap",
            "--out-dir",
            "o",
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>()
    };
    let run = |args: Vec<String>, needle: &str| {
        let v: Vec<&str> = args.iter().map(String::as_str).collect();
        fails_with(&v, d, needle);
    };
    run(
        [fwd("c"), vec!["--entry".into(), "3".into()]].concat(),
        "--entry 3",
    );
    run(
        [fwd("c"), vec!["--miss".into(), "flood".into()]].concat(),
        "flood",
    );
    run(fwd("nowhere"), "cluster.json");
    // The packed owner map damaged, cut short or gone: refused, named.
    let map = d.join("c/owner.map");
    let good = fs::read(&map).unwrap();
    let mut bad = good.clone();
    bad[good.len() / 2] ^= 0x01;
    fs::write(&map, &bad).unwrap();
    run(fwd("c"), "owner.map: checksum mismatch");
    fs::write(&map, &good[..good.len() - 3]).unwrap();
    run(fwd("c"), "owner.map: truncated");
    fs::remove_file(&map).unwrap();
    run(fwd("c"), "owner.map");
    fs::write(&map, &good).unwrap();
    // A node's snapshot damaged: its checksum no longer matches.
    let gen = fs::read_dir(d.join("c/node-1"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("snapshot.bin").exists())
        .unwrap();
    let snap = gen.join("snapshot.bin");
    let mut bytes = fs::read(&snap).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    fs::write(&snap, bytes).unwrap();
    run(fwd("c"), "snapshot.bin");
    // A manifest that lies about the node count.
    fs::write(d.join("c/cluster.json"), b"{\"format\":\"nexthop-cluster\",\"format_version\":1,\"key_type\":\"mac\",\"nodes\":0,\"names\":0,\"node_names\":[]}").unwrap();
    run(fwd("c"), "0 nodes");
    fs::write(d.join("c/cluster.json"), b"garbage").unwrap();
    run(fwd("c"), "not a cluster manifest");
}

/// `cluster run` checks its node, peers, inputs and ports before it opens
/// any interface (so these need no root).
#[test]
fn cluster_run_refuses_a_bad_node_peer_or_port_map() {
    let f = Fixture::new();
    f.file("routes.txt", routes());
    let d = f.dir();
    nexthop()
        .current_dir(d)
        .args([
            "cluster",
            "build",
            "--key-type",
            "mac",
            "--routes",
            "routes.txt",
        ])
        .args(["--out", "c", "--nodes", "3"])
        .assert()
        .success();
    // Node 0 of 3: outside port 0, FIB ports 1..=7, peers 1 and 2 on 11, 12.
    let mut ok: Vec<String> = ["cluster", "run", "--cluster", "c", "--node", "0"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for p in 0..=7 {
        ok.push("--port".into());
        ok.push(format!("{p}=x{p}"));
    }
    for j in [1, 2] {
        ok.extend(["--port".into(), format!("1{j}=c{j}")]);
    }
    let with = |extra: &[&str], drop_peer: Option<usize>| -> Vec<String> {
        let mut v = ok.clone();
        for j in [1usize, 2] {
            if drop_peer != Some(j) {
                v.extend(["--peer".into(), format!("{j}=1{j}")]);
            }
        }
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let fails = |args: Vec<String>, needle: &str| {
        let v: Vec<&str> = args.iter().map(String::as_str).collect();
        fails_with(&v, d, needle);
    };
    fails(
        with(&[], None)
            .into_iter()
            .map(|s| if s == "0" { "3".into() } else { s })
            .take(6)
            .collect(),
        "--node 3",
    );
    fails(with(&[], Some(2)), "no --peer 2=PORT");
    fails(with(&["--peer", "0=13"], None), "--peer 0=13");
    fails(with(&["--peer", "1=12"], None), "node 1 is given twice");
    fails(with(&["--in", "11"], None), "--in 11");
    fails(with(&["--in", "9"], None), "--in 9");
    fails(with(&["--miss", "flood"], None), "flood");
    fails(with(&["--port", "3=y"], None), "port 3 is mapped twice");
    fails(
        with(&["--port", "9=x3"], None),
        "interface x3 is already port 3",
    );
    let mut no_port: Vec<String> = with(&[], None);
    let i = no_port.iter().position(|s| s == "3=x3").unwrap();
    no_port.drain(i - 1..=i);
    fails(no_port, "port(s) 3");
}
