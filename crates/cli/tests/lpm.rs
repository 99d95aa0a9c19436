//! End-to-end tests of `nexthop lpm`: the stable CLI contract (build,
//! lookup from arguments and stdin, atomic update, stats) and its errors.

mod fixture;

use std::fs;
use std::path::PathBuf;

use predicates::prelude::*;

use fixture::{nexthop, stdout, Fixture};

/// The lpm commands on the fixture's `table.lpm`.
impl Fixture {
    fn table(&self) -> PathBuf {
        self.path("table.lpm")
    }
    fn build(&self, routes: &str) {
        let r = self.file("routes.txt", routes);
        nexthop()
            .args(["lpm", "build", "--routes"])
            .arg(&r)
            .arg("--out")
            .arg(self.table())
            .assert()
            .success();
    }
    fn lookup(&self, addrs: &[&str]) -> String {
        let out = nexthop()
            .args(["lpm", "lookup", "--table"])
            .arg(self.table())
            .args(addrs)
            .assert()
            .success();
        stdout(&out)
    }
}

const ROUTES: &str = "# mixed families, tabs and spaces\n\
0.0.0.0/0 1\n\
10.0.0.0/8\t2\n\
10.1.0.0/22 3\n\
10.1.2.128/25 4\n\
192.0.2.1/32 5\n\
2001:db8::/32 6\n\
2001:db8::1/128\t7\n";

#[test]
fn build_then_lookup_answers_longest_match_for_both_families() {
    let fx = Fixture::new();
    fx.build(ROUTES);
    let out = fx.lookup(&[
        "10.1.2.129",
        "10.1.2.1",
        "10.9.9.9",
        "11.0.0.1",
        "192.0.2.1",
        "2001:db8::1",
        "2001:db8::2",
        "2002::1",
    ]);
    assert_eq!(out, "4\n3\n2\n1\n5\n7\n6\n-\n");
}

#[test]
fn lookup_reads_stdin_when_no_address_is_given() {
    let fx = Fixture::new();
    fx.build(ROUTES);
    nexthop()
        .args(["lpm", "lookup", "--table"])
        .arg(fx.table())
        .write_stdin("10.1.2.200\n\n# comment\n2001:db8::1\n2003::\n")
        .assert()
        .success()
        .stdout("4\n7\n-\n");
}

#[test]
fn lookup_of_a_bad_address_fails_naming_it() {
    let fx = Fixture::new();
    fx.build(ROUTES);
    nexthop()
        .args(["lpm", "lookup", "--table"])
        .arg(fx.table())
        .write_stdin("10.0.0.1\nnot-an-ip\n")
        .assert()
        .failure()
        .stderr(predicate::str::contains("stdin:2").and(predicate::str::contains("not-an-ip")));
}

#[test]
fn malformed_route_file_reports_file_line_and_reason() {
    let fx = Fixture::new();
    let r = fx.file("routes.txt", "10.0.0.0/8 1\n10.0.0.1/8 2\n");
    nexthop()
        .args(["lpm", "build", "--routes"])
        .arg(&r)
        .arg("--out")
        .arg(fx.table())
        .assert()
        .failure()
        .stderr(
            predicate::str::contains("routes.txt:2:")
                .and(predicate::str::contains("bits set after")),
        );
    assert!(!fx.table().exists());
}

#[test]
fn route_file_errors_give_one_location_and_one_reason() {
    let fx = Fixture::new();
    let r = fx.file("e1.txt", "10.0.0.0/8 1\n10.0.0.1/8 2\n");
    let out = nexthop()
        .args(["lpm", "build", "--routes"])
        .arg(&r)
        .arg("--out")
        .arg(fx.table())
        .assert()
        .failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert_eq!(
        err,
        format!(
            "error: {}:2: prefix \"10.0.0.1/8\" has bits set after its length\n",
            r.display()
        )
    );
}

#[test]
fn build_refuses_a_duplicate_prefix_naming_both_lines() {
    let fx = Fixture::new();
    let r = fx.file(
        "routes.txt",
        "10.0.0.0/8 1\n2001:db8::/32 6\n10.1.0.0/16 2\n# again\n10.0.0.0/8 3\n",
    );
    let out = nexthop()
        .args(["lpm", "build", "--routes"])
        .arg(&r)
        .arg("--out")
        .arg(fx.table())
        .assert()
        .failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert_eq!(
        err,
        format!(
            "error: {0}:5: duplicate prefix 10.0.0.0/8 (first defined at {0}:1)\n",
            r.display()
        )
    );
    assert!(!fx.table().exists());
    // IPv6 too; the same address under another length is another prefix.
    let r = fx.file(
        "v6.txt",
        "2001:db8::/32 6\n2001:db8::/33 7\n2001:db8::/32 6\n",
    );
    nexthop()
        .args(["lpm", "build", "--routes"])
        .arg(&r)
        .arg("--out")
        .arg(fx.table())
        .assert()
        .failure()
        .stderr(predicate::str::contains(format!(
            "{0}:3: duplicate prefix 2001:db8::/32 (first defined at {0}:1)",
            r.display()
        )));
}

#[test]
fn next_hops_given_as_addresses_print_back_as_addresses() {
    let fx = Fixture::new();
    fx.build("10.0.0.0/8 192.0.2.1\n10.1.0.0/16 0.0.0.9\n2001:db8::/32 198.51.100.7\n");
    assert_eq!(
        fx.lookup(&["10.9.9.9", "10.1.0.1", "2001:db8::1", "11.0.0.1"]),
        "192.0.2.1\n0.0.0.9\n198.51.100.7\n-\n"
    );
    // The form stays with the table across an update.
    let u = fx.file("updates.txt", "1 a 10.2.0.0/16 203.0.113.5\n");
    nexthop()
        .args(["lpm", "update", "--table"])
        .arg(fx.table())
        .arg("--updates")
        .arg(&u)
        .assert()
        .success();
    assert_eq!(
        fx.lookup(&["10.2.0.1", "10.9.9.9"]),
        "203.0.113.5\n192.0.2.1\n"
    );
    // Integer next hops stay integers, also in a file that mixes both.
    fx.build("10.0.0.0/8 192.0.2.1\n11.0.0.0/8 7\n");
    assert_eq!(fx.lookup(&["10.0.0.1", "11.0.0.1"]), "3221225985\n7\n");
}

#[test]
fn lookup_json_gives_each_address_its_next_hop_or_null() {
    let fx = Fixture::new();
    fx.build(ROUTES);
    let out = nexthop()
        .args(["lpm", "lookup", "--json", "--table"])
        .arg(fx.table())
        .args(["10.1.2.129", "2001:db8::1", "2002::1"])
        .assert()
        .success();
    let j: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(
        j,
        serde_json::json!([
            { "address": "10.1.2.129", "next_hop": 4 },
            { "address": "2001:db8::1", "next_hop": 7 },
            { "address": "2002::1", "next_hop": null },
        ])
    );
    fx.build("0.0.0.0/0 192.0.2.1\n");
    let out = nexthop()
        .args(["lpm", "lookup", "--json", "--table"])
        .arg(fx.table())
        .write_stdin("10.0.0.1\n")
        .assert()
        .success();
    let j: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(
        j,
        serde_json::json!([{ "address": "10.0.0.1", "next_hop": "192.0.2.1" }])
    );
}

#[test]
fn build_and_update_report_counts_in_json_and_in_singular_text() {
    let fx = Fixture::new();
    let r = fx.file("routes.txt", "10.0.0.0/8 1\n");
    nexthop()
        .args(["lpm", "build", "--routes"])
        .arg(&r)
        .arg("--out")
        .arg(fx.table())
        .assert()
        .success()
        .stdout(predicate::str::contains(
            ": 1 IPv4 prefix and 0 IPv6 prefixes (IPv6 levels",
        ));
    let out = nexthop()
        .args(["lpm", "build", "--json", "--routes"])
        .arg(&r)
        .arg("--out")
        .arg(fx.table())
        .assert()
        .success();
    let j: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(j["ipv4_prefixes"], 1);
    assert_eq!(j["ipv6_prefixes"], 0);
    assert_eq!(j["next_hops"], "integer");
    let u = fx.file("updates.txt", "1 a 2001:db8::/32 5\n2 w 11.0.0.0/8\n");
    nexthop()
        .args(["lpm", "update", "--table"])
        .arg(fx.table())
        .arg("--updates")
        .arg(&u)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "applied 2 updates: 1 announce, 0 withdraws, 1 withdraw of absent prefixes; 1 IPv4 prefix and 1 IPv6 prefix",
        ));
    let u = fx.file("updates.txt", "3 w 2001:db8::/32\n");
    let out = nexthop()
        .args(["lpm", "update", "--json", "--table"])
        .arg(fx.table())
        .arg("--updates")
        .arg(&u)
        .assert()
        .success();
    let j: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(j["updates"], 1);
    assert_eq!(j["announces"], 0);
    assert_eq!(j["withdraws"], 1);
    assert_eq!(j["absent_withdraws"], 0);
    assert_eq!(j["ipv6_prefixes"], 0);
}

#[test]
fn update_applies_announces_and_withdraws_in_place() {
    let fx = Fixture::new();
    fx.build(ROUTES);
    let u = fx.file(
        "updates.txt",
        "1418774413 w 10.1.0.0/22 0.0.0.0\n1418774413 a 10.1.2.0/24 9\n1418774414 w 10.1.2.128/25\n1 a 2001:db8::/48 8\n2 w 99.0.0.0/8 0.0.0.0\n",
    );
    nexthop()
        .args(["lpm", "update", "--table"])
        .arg(fx.table())
        .arg("--updates")
        .arg(&u)
        .assert()
        .success()
        .stdout(predicate::str::contains("1 withdraw of absent prefixes"));
    // The /22 is gone (10.1.1.1 falls back to the /8), the /24 is new and
    // the withdrawn /25 no longer captures its half.
    assert_eq!(
        fx.lookup(&["10.1.1.1", "10.1.2.200", "2001:db8::2", "2001:db8:1::"]),
        "2\n9\n8\n6\n"
    );
}

#[test]
fn malformed_update_leaves_the_table_unchanged() {
    let fx = Fixture::new();
    fx.build(ROUTES);
    let before = fs::read(fx.table()).unwrap();
    let u = fx.file("updates.txt", "1 w 10.0.0.0/8 0.0.0.0\n2 x 10.0.0.0/8 1\n");
    nexthop()
        .args(["lpm", "update", "--table"])
        .arg(fx.table())
        .arg("--updates")
        .arg(&u)
        .assert()
        .failure()
        .stderr(
            predicate::str::contains("updates.txt:2:").and(predicate::str::contains("bad action")),
        );
    assert_eq!(fs::read(fx.table()).unwrap(), before);
    assert_eq!(fx.lookup(&["10.9.9.9"]), "2\n");
    // No temporary file is left behind.
    let names: Vec<_> = fs::read_dir(fx.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
}

#[test]
fn corrupt_and_foreign_table_files_are_rejected() {
    let fx = Fixture::new();
    fx.build(ROUTES);
    let mut b = fs::read(fx.table()).unwrap();
    let n = b.len();
    b[n - 3] ^= 0x40;
    fs::write(fx.table(), &b).unwrap();
    nexthop()
        .args(["lpm", "lookup", "--table"])
        .arg(fx.table())
        .arg("10.0.0.1")
        .assert()
        .failure()
        .stderr(predicate::str::contains("checksum"));
    fs::write(fx.table(), &b[..n / 2]).unwrap();
    nexthop()
        .args(["lpm", "stats", "--table"])
        .arg(fx.table())
        .assert()
        .failure()
        .stderr(predicate::str::contains("truncated"));
    fs::write(fx.table(), "10.0.0.0/8 1\n").unwrap();
    nexthop()
        .args(["lpm", "stats", "--table"])
        .arg(fx.table())
        .assert()
        .failure()
        .stderr(predicate::str::contains("not an LPM table"));
}

#[test]
fn stats_reports_memory_expansion_and_measured_fpr() {
    let fx = Fixture::new();
    fx.build(ROUTES);
    let out = nexthop()
        .args(["lpm", "stats", "--samples", "20000", "--json", "--table"])
        .arg(fx.table())
        .assert()
        .success();
    let j: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let v4 = &j["ipv4"];
    assert_eq!(v4["prefixes"], 5);
    // /22 -> 4 keys at /24; /25 -> 128 and /32 -> 1 at /32.
    assert_eq!(v4["groups"][0]["expanded"], 4);
    assert_eq!(v4["groups"][1]["expanded"], 129);
    let fpr = v4["groups"][1]["measured_fpr"].as_f64().unwrap();
    assert!((0.0..1.0).contains(&fpr));
    assert!(v4["lookup_bytes"].as_u64().unwrap() >= 4 << 20);
    assert_eq!(j["ipv6"]["prefixes"], 2);
    nexthop()
        .args(["lpm", "stats", "--table"])
        .arg(fx.table())
        .assert()
        .success()
        .stdout(
            predicate::str::contains("measured fpr")
                .and(predicate::str::contains("after expansion")),
        );
}

#[test]
fn stats_reports_refined_slots_of_a_dense_ipv6_table() {
    // Four prefix lengths under 2001:db8::/32: 2001::/16 names four
    // groups, and so does its /24 sub-slot 2001:d00::/24, so both are
    // refined (256 sub-masks and 256 sub-sub-masks of 4 bytes).
    let fx = Fixture::new();
    fx.build("2001:db8::/32 1\n2001:db8:100::/40 2\n2001:db8:1::/48 3\n2001:db8:1:2::/64 4\n");
    let out = nexthop()
        .args(["lpm", "stats", "--json", "--table"])
        .arg(fx.table())
        .assert()
        .success();
    let j: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let sub = &j["ipv6"]["sub_masks"];
    assert_eq!(sub["refined_slots"], 1, "{sub}");
    assert_eq!(sub["refined_sub_slots"], 1, "{sub}");
    assert_eq!(sub["bytes"], 2048, "{sub}");
    assert_eq!(j["ipv4"]["sub_masks"]["bytes"], 0);
    nexthop()
        .args(["lpm", "stats", "--table"])
        .arg(fx.table())
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "sub-masks: 1 refined slot, 1 refined sub-slot, 2048 bytes",
        ));
    let out = fx.lookup(&[
        "2001:db8:1:2::5",
        "2001:db8:1:3::",
        "2001:db8:1ff::",
        "2001:db9::",
    ]);
    assert_eq!(out, "4\n3\n2\n-\n");
}

#[test]
fn build_accepts_gzip_asn_tables() {
    let fx = Fixture::new();
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/routeviews-20151101-ipv6.txt.gz");
    assert!(
        data.exists(),
        "data file routeviews-20151101-ipv6.txt.gz not found at {}",
        data.display()
    );
    nexthop()
        .args(["lpm", "build", "--asn", "--routes"])
        .arg(&data)
        .arg("--out")
        .arg(fx.table())
        .assert()
        .success()
        .stdout(predicate::str::contains("27693 IPv6 prefixes"));
    // 2001:200::/32 is announced by AS 2500 in the table: 2500 % 250 + 1 = 1.
    assert_eq!(fx.lookup(&["2001:200::1"]), "1\n");
}
