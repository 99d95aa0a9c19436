//! End-to-end tests of `nexthop ndn fib build|lookup|stats`: the stable
//! contract (output format, `-` for misses, stdin), error reporting with
//! file:line, no output on error, and rejection of damaged FIB files.

mod fixture;

use std::fs;

use predicates::prelude::*;

use fixture::{nexthop, stdout, Fixture};

/// The ndn fib commands on the fixture's `fib.bin`.
impl Fixture {
    fn build(&self, routes: &str, extra: &[&str]) -> assert_cmd::assert::Assert {
        let r = self.file("routes.txt", routes);
        nexthop()
            .args(["ndn", "fib", "build", "--routes"])
            .arg(&r)
            .arg("--out")
            .arg(self.path("fib.bin"))
            .args(extra)
            .assert()
    }
    fn lookup(&self, names: &[&str]) -> String {
        let out = nexthop()
            .args(["ndn", "fib", "lookup", "--fib"])
            .arg(self.path("fib.bin"))
            .args(names)
            .assert()
            .success();
        stdout(&out)
    }
}

const ROUTES: &str = "\
# name            next hops
/a                1
/a/b/c            3,4
/a/b/c/d/e        5:10,6:2   # costs: 6 is preferred
/ndn/v=5/seg=1    7
";

#[test]
fn lookup_prints_the_longest_prefix_and_its_next_hops() {
    for strategy in ["verify-each", "verify-at-end"] {
        let fx = Fixture::new();
        fx.build(ROUTES, &["--strategy", strategy]).success();
        let out = fx.lookup(&[
            "/a/b/c/x",
            "/a/b",
            "/a/b/c/d/e/f/g",
            "/b",
            "/ndn/v=5/seg=1/extra",
            "ndn:/a/%62",
        ]);
        assert_eq!(
            out, "/a/b/c 3,4\n/a 1\n/a/b/c/d/e 6:2,5:10\n-\n/ndn/v=5/seg=1 7\n/a 1\n",
            "{strategy}"
        );
    }
}

#[test]
fn lookup_reads_names_from_stdin_and_the_default_route_matches_everything() {
    let fx = Fixture::new();
    fx.build("/ 9\n/x/y 2\n", &[]).success();
    nexthop()
        .args(["ndn", "fib", "lookup", "--fib"])
        .arg(fx.path("fib.bin"))
        .write_stdin("/x/y/z\n\n# comment\n/q\n")
        .assert()
        .success()
        .stdout("/x/y 2\n/ 9\n");
}

#[test]
fn malformed_routes_fail_with_file_line_and_write_nothing() {
    for (routes, line, why) in [
        ("/a 1\n/b\n", 2, "expected NAME NEXTHOP"),
        ("/a 1\n\n/c x\n", 3, "bad next hop"),
        ("/a 1,1\n", 1, "appears twice"),
        ("/a 1\n/a 2\n", 2, "duplicate name"),
        ("/a/%zz 1\n", 1, "invalid name"),
    ] {
        let fx = Fixture::new();
        fx.build(routes, &[]).failure().stderr(
            predicate::str::contains(format!("routes.txt:{line}:"))
                .and(predicate::str::contains(why)),
        );
        assert!(
            !fx.path("fib.bin").exists(),
            "{routes:?} left an output file"
        );
    }
}

#[test]
fn stats_reports_rules_keys_and_bytes() {
    let fx = Fixture::new();
    fx.build(ROUTES, &[])
        .success()
        .stdout(predicate::str::contains("4 rules"));
    nexthop()
        .args(["ndn", "fib", "stats", "--fib"])
        .arg(fx.path("fib.bin"))
        .assert()
        .success()
        .stdout(
            predicate::str::contains("rules: 4")
                .and(predicate::str::contains("max_components: 5"))
                .and(predicate::str::contains("max_probes: 3"))
                .and(predicate::str::contains("bytes_per_rule:")),
        );
}

#[test]
fn truncated_corrupt_and_foreign_fib_files_are_rejected() {
    let fx = Fixture::new();
    fx.build(ROUTES, &[]).success();
    let good = fs::read(fx.path("fib.bin")).unwrap();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (good[..good.len() / 2].to_vec(), "checksum"),
        (good[..5].to_vec(), "truncated"),
        (
            {
                let mut b = good.clone();
                b[good.len() / 2] ^= 1;
                b
            },
            "checksum",
        ),
        (
            b"# just a routes file\n/a 1\n".to_vec(),
            "not an NDN FIB file",
        ),
    ];
    for (bytes, why) in cases {
        fs::write(fx.path("fib.bin"), &bytes).unwrap();
        nexthop()
            .args(["ndn", "fib", "lookup", "--fib"])
            .arg(fx.path("fib.bin"))
            .arg("/a")
            .assert()
            .failure()
            .stderr(predicate::str::contains(why));
    }
    nexthop()
        .args(["ndn", "fib", "stats", "--fib"])
        .arg(fx.path("missing.bin"))
        .assert()
        .failure()
        .stderr(predicate::str::contains("missing.bin"));
}

#[test]
fn rebuilding_replaces_the_file_and_a_failed_build_keeps_the_old_one() {
    let fx = Fixture::new();
    fx.build("/a 1\n", &[]).success();
    fx.build("/a 2\n", &[]).success();
    assert_eq!(fx.lookup(&["/a/b"]), "/a 2\n");
    fx.build("/a 3\n/a\n", &[]).failure();
    assert_eq!(fx.lookup(&["/a/b"]), "/a 2\n");
}

#[test]
fn a_bad_lookup_name_fails_naming_it() {
    let fx = Fixture::new();
    fx.build("/a 1\n", &[]).success();
    nexthop()
        .args(["ndn", "fib", "lookup", "--fib"])
        .arg(fx.path("fib.bin"))
        .arg("/a/%zz")
        .assert()
        .failure()
        .stderr(predicate::str::contains("invalid name '/a/%zz'"));
}

#[test]
fn json_lookup_and_stats_give_the_same_answers_as_text() {
    let fx = Fixture::new();
    fx.build(ROUTES, &[]).success();
    let out = nexthop()
        .args(["ndn", "fib", "lookup", "--json", "--trace", "--fib"])
        .arg(fx.path("fib.bin"))
        .args(["/a/b/c/x", "/b", "/a/b/c/d/e/f"])
        .assert()
        .success();
    let v: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(v.len(), 3);
    assert_eq!(v[0]["name"], "/a/b/c/x");
    assert_eq!(v[0]["prefix"], "/a/b/c");
    assert_eq!(
        v[0]["hops"],
        serde_json::json!([{"face": 3, "cost": 0}, {"face": 4, "cost": 0}])
    );
    assert!(v[0]["probes"].as_u64().unwrap() >= 1, "{}", v[0]);
    assert!(
        v[1]["prefix"].is_null() && v[1]["hops"].is_null(),
        "{}",
        v[1]
    );
    assert_eq!(v[2]["prefix"], "/a/b/c/d/e");
    assert_eq!(v[2]["hops"][0], serde_json::json!({"face": 6, "cost": 2}));

    let out = nexthop()
        .args(["ndn", "fib", "stats", "--json", "--fib"])
        .arg(fx.path("fib.bin"))
        .assert()
        .success();
    let s: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(s["rules"], 4);
    assert_eq!(s["strategy"], "verify-each");
    assert!(s["bytes"].as_u64().unwrap() > 0, "{s}");
    assert!(s["keys_per_level"].is_array(), "{s}");
}
